//! The contexts list's rows in order: a list of entries made by a query, or (the default
//! list: every context by start) the lanes' roots merged as rows are shown. Each lane's roots
//! are kept in the order they were placed, which is by start, so that list costs nothing to
//! make on a log of tens of millions of contexts, and a screenful of rows costs a few binary
//! searches wherever the list is scrolled to.

use super::Model;
use super::contexts::ContextQuery;
use super::contexts::ContextSort;

/// The contexts a query lists, in its order (see [`Model::list_contexts`]).
#[derive(Clone, Debug)]
pub enum ContextList {
    /// These context entries, in this order.
    Entries(Vec<u32>),
    /// Every context whose root was seen, by (root start, entry): the first `len` roots of
    /// each of these lanes (lane, len), merged on demand.
    ByStart {
        /// (Lane, how many of its roots are listed).
        lanes: Vec<(u32, u32)>,
        /// All of them.
        len: usize,
        /// Latest first.
        descending: bool,
    },
}

impl Default for ContextList {
    fn default() -> Self {
        Self::Entries(Vec::new())
    }
}

impl ContextList {
    /// How many contexts are listed.
    pub fn len(&self) -> usize {
        match self {
            Self::Entries(v) => v.len(),
            Self::ByStart { len, .. } => *len,
        }
    }

    /// True if none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads the list's rows from `model` (the model it was made from, or a later state of
    /// it: lanes only grow).
    pub fn cursor<'a>(&'a self, model: &'a Model) -> Cursor<'a> {
        let lanes = match self {
            Self::Entries(_) => Vec::new(),
            Self::ByStart { lanes, .. } => {
                let by_lane = model.contexts().roots_by_lane().unwrap_or_default();
                lanes
                    .iter()
                    .map(|&(lane, n)| {
                        by_lane
                            .get(lane as usize)
                            .map_or(&[][..], |l| &l.entries[..(n as usize).min(l.entries.len())])
                    })
                    .collect()
            }
        };
        Cursor {
            list: self,
            model,
            pos: vec![0; lanes.len()],
            lanes,
            at: None,
        }
    }

    /// All rows, in order.
    pub fn to_vec(&self, model: &Model) -> Vec<u32> {
        let mut c = self.cursor(model);
        (0..self.len()).map_while(|i| c.get(i)).collect()
    }
}

/// Reads rows of a [`ContextList`]; reading them in order (either way) costs a look at each
/// lane's head per row, a jump elsewhere a few binary searches.
pub struct Cursor<'a> {
    list: &'a ContextList,
    model: &'a Model,
    lanes: Vec<&'a [u32]>,
    /// By lane: how many of its roots come before the current one in the merged order.
    pos: Vec<usize>,
    /// The current root: its rank in the merged order and its lane (it is
    /// `lanes[lane][pos[lane]]`).
    at: Option<(usize, usize)>,
}

impl Cursor<'_> {
    /// The context entry of row `i` (`None` past the end).
    pub fn get(&mut self, i: usize) -> Option<u32> {
        let (len, descending) = match self.list {
            ContextList::Entries(v) => return v.get(i).copied(),
            ContextList::ByStart {
                len, descending, ..
            } => (*len, *descending),
        };
        if i >= len {
            return None;
        }
        let k = if descending { len - 1 - i } else { i };
        match self.at {
            Some((r, _)) if r == k => {}
            Some((r, lane)) if r + 1 == k => {
                self.pos[lane] += 1;
                self.at = self.smallest_head().map(|l| (k, l));
            }
            Some((r, _)) if r == k + 1 => {
                self.at = self.step_back().map(|l| (k, l));
            }
            _ => {
                self.select(k);
                self.at = self.smallest_head().map(|l| (k, l));
            }
        }
        let (_, lane) = self.at?;
        self.lanes[lane].get(self.pos[lane]).copied()
    }

    /// A root's place in the merged order.
    fn key(&self, entry: u32) -> (u64, u32) {
        let start = self.model.contexts().entries()[entry as usize]
            .root()
            .map_or(0, |at| self.model.row(at).start(at.index as usize));
        (start, entry)
    }

    /// The lane whose next root comes first.
    fn smallest_head(&self) -> Option<usize> {
        (0..self.lanes.len())
            .filter_map(|l| self.lanes[l].get(self.pos[l]).map(|&e| (self.key(e), l)))
            .min()
            .map(|(_, l)| l)
    }

    /// Moves to the root before the current one; returns its lane.
    fn step_back(&mut self) -> Option<usize> {
        let l = (0..self.lanes.len())
            .filter(|&l| self.pos[l] > 0)
            .map(|l| (self.key(self.lanes[l][self.pos[l] - 1]), l))
            .max()
            .map(|(_, l)| l)?;
        self.pos[l] -= 1;
        Some(l)
    }

    /// Sets `pos` to how many roots of each lane come before the `k`-th of the merged order.
    fn select(&mut self, k: usize) {
        let n = self.lanes.len();
        // The list's two ends (its top, either way sorted) need no search.
        if k == 0 {
            self.pos = vec![0; n];
            return;
        }
        let total: usize = self.lanes.iter().map(|l| l.len()).sum();
        if k + 1 == total {
            self.pos = self.lanes.iter().map(|l| l.len()).collect();
            if let Some(last) = (0..n)
                .filter_map(|l| self.lanes[l].last().map(|&e| (self.key(e), l)))
                .max()
                .map(|(_, l)| l)
            {
                self.pos[last] -= 1;
            }
            return;
        }
        // Each lane's count lies in lo..=hi; a pivot from the widest range halves it.
        let mut lo = vec![0usize; n];
        let mut hi: Vec<usize> = self.lanes.iter().map(|l| l.len()).collect();
        while let Some(m) = (0..n)
            .filter(|&l| lo[l] < hi[l])
            .max_by_key(|&l| hi[l] - lo[l])
        {
            let mid = (lo[m] + hi[m]) / 2;
            let pivot = self.key(self.lanes[m][mid]);
            // How many roots of each lane come before the pivot: its rank.
            let before: Vec<usize> = (0..n)
                .map(|l| {
                    if l == m {
                        mid
                    } else {
                        self.lanes[l].partition_point(|&e| self.key(e) < pivot)
                    }
                })
                .collect();
            let rank: usize = before.iter().sum();
            if rank == k {
                self.pos = before;
                return;
            }
            for l in 0..n {
                if rank < k {
                    // The k-th comes after the pivot.
                    lo[l] = lo[l].max(before[l] + usize::from(l == m));
                } else {
                    hi[l] = hi[l].min(before[l]);
                }
            }
        }
        self.pos = lo;
    }
}

impl Model {
    /// The contexts matching `q`, in its order, as the contexts list shows them. The default
    /// list (all contexts by start) is made without a pass over them; others as
    /// [`Model::query_contexts`] makes them.
    pub fn list_contexts(&self, q: &ContextQuery) -> ContextList {
        let all = q.label.is_empty() && q.min_duration_ns == 0 && q.range.is_none();
        if q.sort == ContextSort::Start
            && all
            && let Some(by_lane) = self.contexts().roots_by_lane()
            && by_lane.iter().all(|l| !l.unsorted)
        {
            let lanes: Vec<(u32, u32)> = by_lane
                .iter()
                .enumerate()
                .filter(|(_, l)| !l.entries.is_empty())
                .map(|(lane, l)| (lane as u32, l.entries.len() as u32))
                .collect();
            return ContextList::ByStart {
                len: lanes.iter().map(|&(_, n)| n as usize).sum(),
                lanes,
                descending: q.descending,
            };
        }
        ContextList::Entries(self.query_contexts(q))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_log::Log;

    #[test]
    fn sorting_by_start_merges_lanes_as_a_full_sort_would() {
        // Three threads of two processes (merged), then twenty (sorted whole); then three
        // whose requests are sometimes recorded after later ones (a lane sorted first).
        for (threads, backwards) in [(3usize, false), (20, false), (3, true)] {
            by_start_on_threads(threads, backwards);
        }
    }

    fn by_start_on_threads(threads: usize, backwards: bool) {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut l = Log::default();
        // Threads record requests in order, written in chunks that interleave (as threads'
        // buffers reach a log); some start at the same time.
        let mut next = vec![100u64; threads];
        let mut id = 0;
        for _ in 0..300 {
            let lane = rng.gen_range(0..threads);
            let w = (lane / 2) as u8;
            l.thread(w, lane as u32, "t");
            for _ in 0..rng.gen_range(1..6) {
                id += 1;
                let mut t = next[lane];
                if backwards && rng.gen_bool(0.2) {
                    t -= rng.gen_range(0..t.min(300));
                }
                let d = rng.gen_range(1..50);
                let label = ["GET /a", "GET /b", "job"][rng.gen_range(0..3)];
                l.start(w, id, t, id, label).end(w, id, t + d);
                next[lane] += d + rng.gen_range(0..3) * 10;
            }
        }
        let m = l.model();
        let queries = [
            ContextQuery::default(),
            ContextQuery {
                descending: true,
                ..Default::default()
            },
            ContextQuery {
                label: "get".into(),
                min_duration_ns: 10,
                range: Some((500, 3_000)),
                ..Default::default()
            },
        ];
        for q in queries {
            let got = m.query_contexts(&q);
            // The rule: all listed contexts sorted by (start, entry).
            let mut want: Vec<(u64, u32)> = (0..m.contexts().len() as u32)
                .filter_map(|i| m.context_row(i).map(|r| (r, i)))
                .filter(|(r, _)| {
                    m.labels().name(r.label).to_lowercase().contains(&q.label)
                        && r.duration >= q.min_duration_ns
                        && q.range.is_none_or(|(a, b)| r.start >= a && r.start < b)
                })
                .map(|(r, i)| (r.start, i))
                .collect();
            want.sort_unstable();
            if q.descending {
                want.reverse();
            }
            let want: Vec<u32> = want.into_iter().map(|(_, i)| i).collect();
            assert!(want.len() > 50, "{}", want.len());
            assert_eq!(got, want, "{q:?}");
            // The list the panel shows: the default one merged from the lanes as rows are
            // read (unless a lane is out of order), the same rows in the same order.
            let list = m.list_contexts(&q);
            let merged = matches!(list, ContextList::ByStart { .. });
            assert_eq!(merged, q.label.is_empty() && !backwards, "{q:?}");
            assert_eq!(list.len(), want.len());
            assert_eq!(list.to_vec(&m), want, "{q:?}");
            // Read as a scrolled table does: a jump anywhere, then rows either way.
            let mut rows = list.cursor(&m);
            for _ in 0..100 {
                let i = rng.gen_range(0..want.len());
                assert_eq!(rows.get(i), Some(want[i]), "row {i}");
                for j in (i.saturating_sub(5)..i)
                    .rev()
                    .chain(i.saturating_sub(5)..want.len().min(i + 5))
                {
                    assert_eq!(rows.get(j), Some(want[j]), "row {j} after {i}");
                }
            }
            assert_eq!(rows.get(want.len()), None);
        }
    }

    #[test]
    fn a_context_whose_root_comes_twice_is_listed_once() {
        let mut l = Log::default();
        l.start(0, 1, 0, 1, "GET /a").end(0, 1, 100);
        l.start(0, 2, 200, 2, "GET /b").end(0, 2, 300);
        // The same context value's root again (ids used again).
        l.start(0, 1, 400, 1, "GET /c").end(0, 1, 500);
        let m = l.model();
        let list = m.list_contexts(&ContextQuery::default());
        assert_eq!(list.to_vec(&m), m.query_contexts(&ContextQuery::default()));
        assert_eq!(list.len(), 2);
    }
}
