//! [`KeyRanges`]: which groups of data entries (a raw batch, a compact block) may hold a key,
//! in memory that grows with the groups, not with the entries.
//!
//! A worker's frame ids are handed out in order and most frames get their data right after
//! they start, so the ids of one group's entries lie close together: each group keeps, per
//! worker, the smallest and largest id of that bulk. An id far from its group's others (data
//! written long after its frame started) would widen the range for every lookup, so it is
//! kept exactly instead, as a stray. A lookup then reads only the groups it names.
//!
//! Pure logic: no files. The store loads the named groups and keeps the entries whose key
//! matches, so a candidate that holds no such entry costs time, never a wrong answer.

use formats::FrameKey;
use rustc_hash::FxHashMap;

/// Ids farther than this from the median id of their group (and worker) are strays.
pub(crate) const SPREAD: u32 = 1 << 14;

/// One worker's groups, in the order they were added.
#[derive(Debug, Default)]
struct WorkerRanges {
    /// Per group: (smallest id, largest id, group).
    ranges: Vec<(u32, u32, u32)>,
    /// `prefix_max[i]`: the largest `max` of `ranges[..=i]` (never decreasing).
    prefix_max: Vec<u32>,
    /// `suffix_min[i]`: the smallest `min` of `ranges[i..]` (never decreasing).
    suffix_min: Vec<u32>,
}

impl WorkerRanges {
    fn push(&mut self, min: u32, max: u32, group: u32) {
        let pm = self.prefix_max.last().map_or(max, |&m| m.max(max));
        self.ranges.push((min, max, group));
        self.prefix_max.push(pm);
        self.suffix_min.push(min);
        // Earlier suffixes now end in this group: lower those above its min. Strays are kept
        // out of the ranges, so this walks back over only the few groups near it.
        for s in self.suffix_min.iter_mut().rev().skip(1) {
            if *s <= min {
                break;
            }
            *s = min;
        }
    }

    fn candidates(&self, id: u32, out: &mut Vec<u32>) {
        // Groups before `from` all end below `id`; from `to` on, all start above it.
        let from = self.prefix_max.partition_point(|&m| m < id);
        for i in from..self.ranges.len() {
            if self.suffix_min[i] > id {
                break;
            }
            let (min, max, group) = self.ranges[i];
            if min <= id && id <= max {
                out.push(group);
            }
        }
    }
}

/// Which groups may hold each key (see the module's text).
#[derive(Debug, Default)]
pub(crate) struct KeyRanges {
    workers: Vec<WorkerRanges>,
    /// Keys kept out of their group's range, with the groups holding them.
    strays: FxHashMap<FrameKey, Vec<u32>>,
    /// Scratch: the ids of the group being added, by worker.
    scratch: Vec<(u8, u32)>,
}

impl KeyRanges {
    /// Adds group `group` holding entries with `keys`.
    pub(crate) fn add_group(&mut self, group: u32, keys: impl IntoIterator<Item = FrameKey>) {
        let mut ids = std::mem::take(&mut self.scratch);
        ids.clear();
        ids.extend(keys.into_iter().map(|k| (k.worker, k.id)));
        ids.sort_unstable();
        for run in ids.chunk_by(|a, b| a.0 == b.0) {
            let worker = run[0].0;
            let median = run[run.len() / 2].1;
            let (lo, hi) = (median.saturating_sub(SPREAD), median.saturating_add(SPREAD));
            let (mut min, mut max) = (u32::MAX, 0);
            for &(_, id) in run {
                if (lo..=hi).contains(&id) {
                    min = min.min(id);
                    max = max.max(id);
                } else {
                    let groups = self.strays.entry(FrameKey::new(worker, id)).or_default();
                    if groups.last() != Some(&group) {
                        groups.push(group);
                    }
                }
            }
            if self.workers.len() <= worker as usize {
                self.workers
                    .resize_with(worker as usize + 1, WorkerRanges::default);
            }
            // The median itself is in the bulk, so the range is never empty.
            self.workers[worker as usize].push(min, max, group);
        }
        self.scratch = ids;
    }

    /// The groups that may hold `key`, ascending, each once (replacing `out`'s contents).
    pub(crate) fn candidates(&self, key: FrameKey, out: &mut Vec<u32>) {
        out.clear();
        if let Some(w) = self.workers.get(key.worker as usize) {
            w.candidates(key.id, out);
        }
        if let Some(groups) = self.strays.get(&key) {
            out.extend_from_slice(groups);
        }
        out.sort_unstable();
        out.dedup();
    }

    /// Keys kept exactly (their data came far from their frame's neighbours).
    #[cfg(test)]
    pub(crate) fn strays(&self) -> usize {
        self.strays.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn key(worker: u8, id: u32) -> FrameKey {
        FrameKey::new(worker, id)
    }

    /// Every group holding a key is among its candidates; the candidates are sorted, unique.
    fn check(groups: &[Vec<FrameKey>]) -> KeyRanges {
        let mut r = KeyRanges::default();
        for (g, keys) in groups.iter().enumerate() {
            r.add_group(g as u32, keys.iter().copied());
        }
        let all: BTreeSet<FrameKey> = groups.iter().flatten().copied().collect();
        let mut out = Vec::new();
        for &k in &all {
            r.candidates(k, &mut out);
            for (g, keys) in groups.iter().enumerate() {
                if keys.contains(&k) {
                    assert!(out.contains(&(g as u32)), "{k} in group {g}: {out:?}");
                }
            }
            assert!(out.windows(2).all(|w| w[0] < w[1]), "{out:?}");
        }
        r
    }

    #[test]
    fn ids_written_in_order_need_no_strays_and_name_one_group() {
        let groups: Vec<Vec<FrameKey>> = (0..100u32)
            .map(|g| (0..400).map(|i| key(1, g * 400 + i)).collect())
            .collect();
        let r = check(&groups);
        assert_eq!(r.strays(), 0);
        let mut out = Vec::new();
        r.candidates(key(1, 12_345), &mut out);
        assert_eq!(out, vec![12_345 / 400]);
        r.candidates(key(1, 40_000), &mut out);
        assert!(out.is_empty(), "past every group: {out:?}");
        r.candidates(key(2, 5), &mut out);
        assert!(out.is_empty(), "another worker: {out:?}");
    }

    #[test]
    fn late_data_is_a_stray_and_does_not_widen_its_group() {
        // Group 50 also holds data of frame 3, written long after it started.
        let mut groups: Vec<Vec<FrameKey>> = (0..100u32)
            .map(|g| (0..400).map(|i| key(0, 1_000_000 + g * 400 + i)).collect())
            .collect();
        groups[50].push(key(0, 3));
        let r = check(&groups);
        assert_eq!(r.strays(), 1);
        let mut out = Vec::new();
        r.candidates(key(0, 3), &mut out);
        assert_eq!(out, vec![50]);
        r.candidates(key(0, 1_000_000 + 10 * 400), &mut out);
        assert_eq!(out, vec![10], "group 50's range stayed narrow");
    }

    proptest! {
        #[test]
        fn every_group_holding_a_key_is_a_candidate(
            groups in prop::collection::vec(
                prop::collection::vec((0u8..3, prop_oneof![0u32..2_000, any::<u32>()]), 0..40),
                0..30,
            )
        ) {
            let groups: Vec<Vec<FrameKey>> = groups
                .into_iter()
                .map(|g| g.into_iter().map(|(w, id)| key(w, id)).collect())
                .collect();
            check(&groups);
        }
    }
}
