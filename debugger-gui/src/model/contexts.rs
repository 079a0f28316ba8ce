//! Contexts: the units of work (requests, jobs) a log holds, each named by its root frame.
//!
//! A frame started with no enclosing context opens a context whose value is its own id; every
//! frame nested in it carries that value. The list shows root frames with their label, start,
//! duration and frame count, sortable and filterable.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::{FrameRef, Model};

/// Hashes context values so that consecutive values land in neighbouring buckets (low bits
/// kept as they are) while the bits the table uses for its tag are well mixed: inserting a
/// new context then touches memory near the previous one instead of a random cache line of a
/// table with millions of entries.
#[derive(Default, Clone, Copy)]
pub struct SeqHasher(u64);

impl Hasher for SeqHasher {
    fn finish(&self) -> u64 {
        let k = self.0;
        (k & 0x01FF_FFFF_FFFF_FFFF)
            | (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) & !0x01FF_FFFF_FFFF_FFFF)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | b as u64;
        }
    }
    fn write_u32(&mut self, i: u32) {
        self.0 = u64::from(i);
    }
}

/// Context value to its index in the list, for one worker (8 bytes a bucket: the worker is
/// the map's, not the key's).
type SeqMap = HashMap<u32, u32, BuildHasherDefault<SeqHasher>>;

/// No root frame seen yet (in [`ContextEntry`]'s `root`).
const NO_ROOT: FrameRef = FrameRef {
    lane: u32::MAX,
    row: u32::MAX,
    index: u32::MAX,
};

/// One context: its root frame (once seen) and how many frames carry it. 16 bytes: millions
/// of requests make millions of these. Its worker and value are its root frame's lane's
/// worker and id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextEntry {
    root: FrameRef,
    frames: u32,
}

impl ContextEntry {
    /// The root frame, once its start was seen.
    pub fn root(&self) -> Option<FrameRef> {
        (self.root != NO_ROOT).then_some(self.root)
    }

    /// Frames carrying this context.
    pub fn frames(&self) -> u32 {
        self.frames
    }
}

/// Context values to their places in the list: `(worker, context)` to an index, in order of
/// first appearance. Whoever reads the records in order keeps one (the ingest's reader stage,
/// or a model applying records itself), so the model's thread looks nothing up: a frame comes
/// with its context's index, as with labels.
#[derive(Default, Debug, Clone)]
pub struct ContextIndex {
    /// By worker.
    maps: Vec<SeqMap>,
    len: u32,
    /// The last `(worker << 32 | context, index)` looked up: the frames of one request come
    /// together, so they rarely touch a map.
    last: Option<(u64, u32)>,
}

impl ContextIndex {
    /// The index of `context` of `worker` (the next one if it is new).
    #[inline]
    pub fn index(&mut self, worker: u8, context: u32) -> u32 {
        let k = ((worker as u64) << 32) | context as u64;
        if let Some((lk, li)) = self.last
            && lk == k
        {
            return li;
        }
        if self.maps.len() <= worker as usize {
            self.maps.resize_with(worker as usize + 1, SeqMap::default);
        }
        let len = &mut self.len;
        let idx = *self.maps[worker as usize]
            .entry(context)
            .or_insert_with(|| {
                *len += 1;
                *len - 1
            });
        self.last = Some((k, idx));
        idx
    }

    /// `read` of a log's `total` bytes went by: each worker's map makes room, at once, for
    /// the contexts the whole log will likely hold at the rate seen so far. Grown by doubling
    /// instead, a map of tens of millions moved every entry at each step, holding the reader
    /// up for 0.2 s at a time (the applier then waited for it), and each step's new table
    /// was first-touched anew. Looked at once 1/64 of the log was read (the rate is known
    /// by then, and the map is still small).
    pub fn expect(&mut self, read: u64, total: u64) {
        if read == 0 || read.saturating_mul(64) < total {
            return;
        }
        for m in &mut self.maps {
            let likely = (m.len() as u128 * u128::from(total) / u128::from(read)) as usize;
            // Only to grow: room already there (or a rate that fell) changes nothing.
            if likely > m.capacity() {
                m.reserve(likely - m.len());
            }
        }
    }

    /// Forgets worker `worker`'s contexts: its process stopped, and all it wrote was read.
    /// A process that takes its slot later starts contexts of its own (new indexes), and the
    /// map (9 bytes a context, 4 a frame on a request-per-context log) goes back to the OS.
    pub fn forget_worker(&mut self, worker: u8) {
        if let Some(m) = self.maps.get_mut(worker as usize) {
            *m = SeqMap::default();
        }
        if self.last.is_some_and(|(k, _)| (k >> 32) as u8 == worker) {
            self.last = None;
        }
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.maps
            .iter()
            .map(|m| m.capacity() * (std::mem::size_of::<(u32, u32)>() + 1))
            .sum()
    }
}

/// All contexts, in order of first appearance.
#[derive(Default, Debug)]
pub struct Contexts {
    list: Vec<ContextEntry>,
    /// By lane: the contexts whose root is in it, in the order the roots were placed (4
    /// bytes a context), so the default list (every context by start) is these lanes merged,
    /// with no pass over all contexts (the contexts list's `ByStart`).
    by_lane: Vec<LaneRoots>,
    /// Some context's root was seen twice (a context value used again): `by_lane` may list
    /// it twice, so lists are made from the entries instead.
    roots_reused: bool,
}

/// The roots placed in one lane.
#[derive(Default, Debug)]
pub(crate) struct LaneRoots {
    /// Context entries, in the order their roots were placed.
    pub(crate) entries: Vec<u32>,
    /// The newest root's start and entry (the list's order is by both).
    last: (u64, u32),
    /// Some root started before the one placed before it (an async lane): not in start
    /// order.
    pub(crate) unsorted: bool,
}

impl Contexts {
    /// Gives back spare capacity.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.list.shrink_to_fit();
        for l in &mut self.by_lane {
            l.entries.shrink_to_fit();
        }
    }

    /// By lane, the contexts whose roots it holds in placing order; `None` if some root was
    /// seen twice (then only the entries tell).
    pub(crate) fn roots_by_lane(&self) -> Option<&[LaneRoots]> {
        (!self.roots_reused).then_some(&self.by_lane)
    }

    /// Counts a frame of the context at `index` (from a [`ContextIndex`]) starting at
    /// `start`; `is_root`: the frame is the context's root (its id is the context value),
    /// at `at` (lane, row, index: three words, as a `FrameRef` copied whole here was spilled
    /// and reloaded in a way that stalled the CPU on every frame).
    #[inline]
    pub(crate) fn on_start(&mut self, index: u32, is_root: bool, at: (u32, u32, u32), start: u64) {
        let i = index as usize;
        if i >= self.list.len() {
            // In order, a new context is the next index; anything else still lands somewhere
            // valid rather than panicking.
            self.list.resize(
                i + 1,
                ContextEntry {
                    root: NO_ROOT,
                    frames: 0,
                },
            );
        }
        let e = &mut self.list[i];
        e.frames += 1;
        if is_root {
            self.roots_reused |= e.root != NO_ROOT;
            e.root = FrameRef {
                lane: at.0,
                row: at.1,
                index: at.2,
            };
            let lane = at.0 as usize;
            if lane >= self.by_lane.len() {
                self.by_lane.resize_with(lane + 1, LaneRoots::default);
            }
            let l = &mut self.by_lane[lane];
            l.unsorted |= (start, index) < l.last;
            l.last = (start, index);
            l.entries.push(index);
        }
    }

    /// All contexts in order of first appearance.
    pub fn entries(&self) -> &[ContextEntry] {
        &self.list
    }

    /// Number of contexts.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True if there is none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.list.capacity() * std::mem::size_of::<ContextEntry>()
            + self
                .by_lane
                .iter()
                .map(|l| l.entries.capacity() * 4)
                .sum::<usize>()
    }
}

/// Column the contexts list is sorted by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ContextSort {
    /// Root frame label.
    Label,
    /// Start time (default).
    #[default]
    Start,
    /// Root frame duration.
    Duration,
    /// Number of frames.
    Frames,
}

/// Which contexts to list and in what order.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ContextQuery {
    /// Case-insensitive substring the root label must contain (empty: any).
    pub label: String,
    /// Only contexts whose root lasted at least this long (ns).
    pub min_duration_ns: u64,
    /// Only contexts whose root starts in this range (ns since the epoch).
    pub range: Option<(u64, u64)>,
    /// Sort column.
    pub sort: ContextSort,
    /// Sort descending.
    pub descending: bool,
}

/// One row of the contexts list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextRow {
    /// Index into [`Contexts::entries`].
    pub entry: u32,
    /// The root frame.
    pub root: FrameRef,
    /// Interned root label.
    pub label: u32,
    /// Root start, ns since the Unix epoch.
    pub start: u64,
    /// Root duration in ns (open roots: up to the newest time).
    pub duration: u64,
    /// True while the root has not ended.
    pub open: bool,
    /// Frames carrying the context.
    pub frames: u32,
}

impl Model {
    /// Context `entry` as the list shows it (`None` until its root was seen).
    pub fn context_row(&self, entry: u32) -> Option<ContextRow> {
        let e = self.contexts().entries().get(entry as usize)?;
        let root = e.root()?;
        let row = self.row(root);
        let ix = root.index as usize;
        Some(ContextRow {
            entry,
            root,
            label: self.call_tree().label(row.node(ix)),
            start: row.start(ix),
            duration: row.end_or(ix, self.newest()) - row.start(ix),
            open: row.is_open(ix),
            frames: e.frames,
        })
    }

    /// The contexts matching `q` (indices into [`Contexts::entries`]), sorted as it asks;
    /// contexts whose root was not seen are left out. Four bytes a listed context: the rows
    /// shown are made on demand ([`Model::context_row`]), so a list of millions stays small.
    pub fn query_contexts(&self, q: &ContextQuery) -> Vec<u32> {
        let needle = q.label.to_lowercase();
        let label_ok: Vec<bool> = self
            .labels()
            .names()
            .map(|(_, n)| needle.is_empty() || n.to_lowercase().contains(&needle))
            .collect();
        // Sorting by label: each label id's rank in name order.
        let mut by_name: Vec<(&str, u32)> = self.labels().names().map(|(id, n)| (n, id)).collect();
        by_name.sort_unstable();
        let mut rank = vec![0u32; by_name.len()];
        for (r, (_, id)) in by_name.iter().enumerate() {
            rank[*id as usize] = r as u32;
        }
        if q.sort == ContextSort::Start {
            return self.contexts_by_start(q, &label_ok);
        }
        // (primary key, entry), sorted by the key, then start, then entry; only the entries
        // are kept. 16 bytes a context (a 100 M-frame log has tens of millions): the start
        // is looked up again for ties only, which sorting by start (the default) has few of.
        // Sized up front: grown by doubling, its copies would stay in the UI thread's heap.
        let mut keyed: Vec<(u64, u32)> = Vec::with_capacity(self.contexts().len());
        for i in 0..self.contexts().len() as u32 {
            let Some(r) = self.context_row(i) else {
                continue;
            };
            if !listed(&r, q, &label_ok) {
                continue;
            }
            let primary = match q.sort {
                ContextSort::Label => u64::from(rank[r.label as usize]),
                ContextSort::Start => r.start,
                ContextSort::Duration => r.duration,
                ContextSort::Frames => u64::from(r.frames),
            };
            keyed.push((primary, i));
        }
        let entries = self.contexts().entries();
        let start = |i: u32| {
            entries[i as usize]
                .root()
                .map_or(0, |at| self.row(at).start(at.index as usize))
        };
        keyed.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| start(a.1).cmp(&start(b.1)))
                .then(a.1.cmp(&b.1))
        });
        if q.descending {
            keyed.reverse();
        }
        keyed.into_iter().map(|(_, i)| i).collect()
    }

    /// [`Model::query_contexts`] sorted by start (the default): a lane's roots start in the
    /// order they were recorded, so each lane's are nearly sorted already and the lanes are
    /// merged. Tens of millions of contexts take a fraction of a second, where sorting them
    /// all took seconds, holding the model meanwhile.
    fn contexts_by_start(&self, q: &ContextQuery, label_ok: &[bool]) -> Vec<u32> {
        // Unfiltered (the default), a context is listed once its root was seen: its lane and
        // start are all there is to read, not its label and duration.
        let all = q.label.is_empty() && q.min_duration_ns == 0 && q.range.is_none();
        let entries = self.contexts().entries();
        let root = |i: u32| -> Option<(u32, u64)> {
            if all {
                let at = entries[i as usize].root()?;
                Some((at.lane, self.row(at).start(at.index as usize)))
            } else {
                let r = self.context_row(i)?;
                listed(&r, q, label_ok).then_some((r.root.lane, r.start))
            }
        };
        // Each lane's listed contexts as indexes (4 bytes each): their starts are looked up
        // as they are compared, where copying them beside the indexes made the list's
        // scratch memory four times as large, and on a 100 M-frame log the first-touch of
        // those pages was a third of the list's time.
        let start_of = |i: u32| -> u64 {
            entries[i as usize]
                .root()
                .map_or(0, |at| self.row(at).start(at.index as usize))
        };
        let mut counts = vec![0usize; self.lanes().len()];
        for i in 0..entries.len() as u32 {
            // Unfiltered, the lane is all there is to read.
            let lane = if all {
                entries[i as usize].root().map(|at| at.lane)
            } else {
                root(i).map(|(lane, _)| lane)
            };
            if let Some(lane) = lane {
                counts[lane as usize] += 1;
            }
        }
        // Sized up front: grown by doubling, their copies would stay in the UI thread's heap.
        let mut by_lane: Vec<Vec<u32>> = counts.iter().map(|&n| Vec::with_capacity(n)).collect();
        // Recorded in order, a lane's roots are sorted by start already (ties by index); an
        // async lane's may not be. Each lane's last start, and whether it went back.
        let mut last = vec![(0u64, false); by_lane.len()];
        for i in 0..entries.len() as u32 {
            if let Some((lane, start)) = root(i) {
                by_lane[lane as usize].push(i);
                let (prev, unsorted) = &mut last[lane as usize];
                *unsorted |= start < *prev;
                *prev = start;
            }
        }
        for (lane, &(_, unsorted)) in by_lane.iter_mut().zip(&last) {
            if unsorted {
                let mut keyed: Vec<(u64, u32)> = lane.iter().map(|&i| (start_of(i), i)).collect();
                keyed.sort_unstable();
                lane.clear();
                lane.extend(keyed.into_iter().map(|(_, i)| i));
            }
        }
        let mut lanes: Vec<&[u32]> = by_lane
            .iter()
            .filter(|v| !v.is_empty())
            .map(Vec::as_slice)
            .collect();
        let mut rows = Vec::with_capacity(lanes.iter().map(|l| l.len()).sum());
        if lanes.len() > 16 {
            // Many threads: merging by scanning every lane's head would cost more than sorting.
            let mut all: Vec<(u64, u32)> = by_lane
                .iter()
                .flatten()
                .map(|&i| (start_of(i), i))
                .collect();
            drop(by_lane);
            all.sort_unstable();
            rows.extend(all.into_iter().map(|(_, i)| i));
        } else {
            // A few lanes: the smallest head, found by looking at each (heads' keys cached).
            let mut heads: Vec<(u64, u32)> = lanes.iter().map(|l| (start_of(l[0]), l[0])).collect();
            while let Some((l, &(_, i))) = heads.iter().enumerate().min_by_key(|(_, h)| **h) {
                rows.push(i);
                lanes[l] = &lanes[l][1..];
                match lanes[l].first() {
                    Some(&next) => heads[l] = (start_of(next), next),
                    None => {
                        lanes.swap_remove(l);
                        heads.swap_remove(l);
                    }
                }
            }
        }
        if q.descending {
            rows.reverse();
        }
        rows
    }
}

/// Whether the contexts list shows `r` under query `q` (`label_ok`: by label id).
fn listed(r: &ContextRow, q: &ContextQuery, label_ok: &[bool]) -> bool {
    label_ok[r.label as usize]
        && r.duration >= q.min_duration_ns
        && !q.range.is_some_and(|(a, b)| r.start < a || r.start >= b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_log::Log;

    fn log() -> Model {
        let mut l = Log::default();
        // Three requests of different lengths; the second has three children.
        l.start(0, 1, 0, 1, "GET /a").end(0, 1, 100);
        l.start(0, 2, 200, 2, "GET /b");
        for i in 0..3u32 {
            l.start(0, 10 + i, 210 + i as u64 * 10, 2, "db")
                .end(0, 10 + i, 215 + i as u64 * 10);
        }
        l.end(0, 2, 700);
        l.start(0, 3, 800, 3, "job/cleanup").end(0, 3, 1000);
        l.model()
    }

    #[test]
    fn lists_roots_with_counts_and_durations() {
        let m = log();
        assert_eq!(m.contexts().len(), 3);
        let rows = m.query_contexts(&ContextQuery::default());
        let got: Vec<(&str, u64, u64, u32)> = rows
            .iter()
            .map(|&e| m.context_row(e).unwrap())
            .map(|r| (m.labels().name(r.label), r.start, r.duration, r.frames))
            .collect();
        assert_eq!(
            got,
            vec![
                ("GET /a", 0, 100, 1),
                ("GET /b", 200, 500, 4),
                ("job/cleanup", 800, 200, 1)
            ]
        );
    }

    /// The root labels of the contexts `q` lists, in its order.
    fn listed(m: &Model, q: &ContextQuery) -> Vec<String> {
        m.query_contexts(q)
            .iter()
            .map(|&e| m.labels().name(m.context_row(e).unwrap().label).to_owned())
            .collect()
    }

    #[test]
    fn a_map_sized_from_the_read_rate_does_not_grow_during_the_load() {
        let mut ix = ContextIndex::default();
        for c in 0..1_000 {
            ix.index(0, c);
        }
        // Too little read to tell a rate: nothing changes.
        let before = ix.maps[0].capacity();
        ix.expect(1, 100);
        assert_eq!(ix.maps[0].capacity(), before);
        // A tenth read: room for ten times as many, made now, so the rest never rehashes.
        ix.expect(1, 10);
        let sized = ix.maps[0].capacity();
        assert!(sized >= 10_000, "{sized}");
        for c in 1_000..10_000 {
            ix.index(0, c);
        }
        assert_eq!(ix.maps[0].capacity(), sized);
        // The same contexts, indexed as before.
        assert_eq!((ix.index(0, 0), ix.index(0, 9_999)), (0, 9_999));
    }

    #[test]
    fn filters_and_sorts() {
        let m = log();
        let q = ContextQuery {
            label: "get".into(),
            sort: ContextSort::Duration,
            descending: true,
            ..Default::default()
        };
        assert_eq!(listed(&m, &q), ["GET /b", "GET /a"]);
        let q = ContextQuery {
            min_duration_ns: 150,
            sort: ContextSort::Frames,
            ..Default::default()
        };
        assert_eq!(listed(&m, &q), ["job/cleanup", "GET /b"]);
        // A selected time range: roots starting in it.
        let q = ContextQuery {
            range: Some((150, 900)),
            ..Default::default()
        };
        assert_eq!(listed(&m, &q), ["GET /b", "job/cleanup"]);
    }
}
