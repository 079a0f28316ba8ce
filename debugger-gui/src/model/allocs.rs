//! Frame allocations (record type 9): what each frame's code allocated and freed while it
//! ran, in a side table beside the rows (most frames have none, so the rows stay as they
//! are), with running totals per label for the statistics.
//!
//! A record names its frame by id (same worker); it comes right before the frame's end, while
//! the frame still runs, so it is found among the running frames of the thread's lane, else
//! by time in the worker's other lanes (a frame that moved threads). A record whose frame is
//! not in the model (its start lost, or not read yet) is counted as unplaced.

use rustc_hash::FxHashMap;

use super::FrameRef;

/// Allocation counts (a frame's, or a sum of frames').
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocCounts {
    /// Allocations (and reallocations).
    pub allocs: u64,
    /// Bytes allocated.
    pub alloc_bytes: u64,
    /// Frees.
    pub frees: u64,
    /// Bytes freed.
    pub freed_bytes: u64,
}

impl AllocCounts {
    /// Adds `o` to these counts.
    pub fn add(&mut self, o: &AllocCounts) {
        self.allocs = self.allocs.saturating_add(o.allocs);
        self.alloc_bytes = self.alloc_bytes.saturating_add(o.alloc_bytes);
        self.frees = self.frees.saturating_add(o.frees);
        self.freed_bytes = self.freed_bytes.saturating_add(o.freed_bytes);
    }
}

impl From<&formats::FrameAlloc> for AllocCounts {
    fn from(a: &formats::FrameAlloc) -> Self {
        Self {
            allocs: a.allocs,
            alloc_bytes: a.alloc_bytes,
            frees: a.frees,
            freed_bytes: a.freed_bytes,
        }
    }
}

/// Allocation totals of one label's frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LabelAllocs {
    /// The counts summed over its frames.
    pub sum: AllocCounts,
    /// Its frames that have counts.
    pub frames: u64,
}

/// Every frame's allocation counts, and totals per label.
#[derive(Debug, Default)]
pub struct Allocs {
    by_frame: FxHashMap<FrameRef, AllocCounts>,
    by_label: Vec<LabelAllocs>,
    total: AllocCounts,
    unplaced: u64,
}

impl Allocs {
    /// Adds `c` to frame `at`, whose label is `label`.
    pub(crate) fn add(&mut self, at: FrameRef, label: u32, c: &AllocCounts) {
        let e = self.by_frame.entry(at).or_default();
        let first = *e == AllocCounts::default();
        e.add(c);
        let i = label as usize;
        if i >= self.by_label.len() {
            self.by_label.resize(i + 1, LabelAllocs::default());
        }
        let l = &mut self.by_label[i];
        l.sum.add(c);
        l.frames += u64::from(first);
        self.total.add(c);
    }

    /// A record whose frame is not in the model.
    pub(crate) fn unplaced(&mut self) {
        self.unplaced += 1;
    }

    /// Frame `at`'s counts, if it has any.
    pub fn of(&self, at: FrameRef) -> Option<&AllocCounts> {
        if self.by_frame.is_empty() {
            return None;
        }
        self.by_frame.get(&at)
    }

    /// Every frame with counts.
    pub fn frames(&self) -> impl Iterator<Item = (&FrameRef, &AllocCounts)> {
        self.by_frame.iter()
    }

    /// Frames with counts.
    pub fn len(&self) -> usize {
        self.by_frame.len()
    }

    /// True if no frame has counts (the log was not recorded with a counting allocator).
    pub fn is_empty(&self) -> bool {
        self.by_frame.is_empty()
    }

    /// Totals of label `label`'s frames.
    pub fn label(&self, label: u32) -> LabelAllocs {
        self.by_label
            .get(label as usize)
            .copied()
            .unwrap_or_default()
    }

    /// Totals over every frame.
    pub fn total(&self) -> AllocCounts {
        self.total
    }

    /// Records whose frame was not found.
    pub fn unplaced_count(&self) -> u64 {
        self.unplaced
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.by_frame.capacity() * (std::mem::size_of::<(FrameRef, AllocCounts)>() + 1)
            + self.by_label.capacity() * std::mem::size_of::<LabelAllocs>()
    }
}

impl super::Model {
    /// Allocation totals per label of the frames that start in `[from, to)` (a selected
    /// range), computed on demand from the frames with counts.
    pub fn allocs_in(&self, from: u64, to: u64) -> FxHashMap<u32, LabelAllocs> {
        let mut out: FxHashMap<u32, LabelAllocs> = FxHashMap::default();
        for (&at, c) in self.allocs().frames() {
            let s = self.row(at).start(at.index as usize);
            if s >= from && s < to {
                let l = out.entry(self.label_of(at)).or_default();
                l.sum.add(c);
                l.frames += 1;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_log::Log;
    use formats::FrameKey;
    use rand::{Rng, SeedableRng};
    use std::collections::HashMap;

    /// The test log's allocation records (here, so that the test log, which every model
    /// module's tests use, needs no model module).
    impl Log {
        /// A frame's allocation counts (type 9).
        pub(crate) fn alloc(&mut self, w: u8, id: u32, ts: u64, c: &AllocCounts) -> &mut Self {
            formats::Record::FrameAlloc(formats::FrameAlloc {
                id,
                worker: w,
                timestamp: ts,
                allocs: c.allocs,
                alloc_bytes: c.alloc_bytes,
                frees: c.frees,
                freed_bytes: c.freed_bytes,
            })
            .encode_to_vec(&mut self.bytes);
            self
        }
    }

    /// Random frames, some with one or two allocation records (on the thread that ends them,
    /// right before the end): per-frame counts and per-label totals are the brute-force sums,
    /// read directly and through the reader stage alike.
    #[test]
    fn totals_per_label_are_the_sums_of_their_frames() {
        for seed in 0..6u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let labels = ["request", "db", "render"];
            let mut l = Log::default();
            l.thread(0, 1, "main");
            let mut want_frame: HashMap<u32, AllocCounts> = HashMap::new();
            let mut want_label: HashMap<&str, (AllocCounts, u64)> = HashMap::new();
            let mut t = 1_000;
            let mut id = 0;
            for _ in 0..500 {
                id += 1;
                let root = id;
                let label = labels[rng.gen_range(0..3)];
                l.start(0, root, t, root, label);
                let mut kids = Vec::new();
                for _ in 0..rng.gen_range(0..3) {
                    id += 1;
                    t += 5;
                    let k = labels[rng.gen_range(0..3)];
                    l.start(0, id, t, root, k);
                    t += 5;
                    kids.push((id, k));
                    if rng.gen_bool(0.5) {
                        let c = random_counts(&mut rng);
                        l.alloc(0, id, t, &c);
                        want_frame.entry(id).or_default().add(&c);
                        let w = want_label.entry(k).or_default();
                        w.0.add(&c);
                        w.1 += 1;
                    }
                    l.end(0, id, t);
                }
                t += 5;
                for _ in 0..rng.gen_range(0..3) {
                    let c = random_counts(&mut rng);
                    l.alloc(0, root, t, &c);
                    let first = !want_frame.contains_key(&root);
                    want_frame.entry(root).or_default().add(&c);
                    let w = want_label.entry(label).or_default();
                    w.0.add(&c);
                    w.1 += u64::from(first);
                }
                l.end(0, root, t);
                t += 10;
            }
            // A record for a frame the log does not hold: counted, not placed.
            l.alloc(0, 1_000_000, t, &random_counts(&mut rng));
            for m in [
                l.model(),
                crate::model::tests::through_reader_stage(&l.bytes),
            ] {
                assert_eq!(m.allocs().len(), want_frame.len(), "seed {seed}");
                for (&id, c) in &want_frame {
                    let at = m.find(FrameKey::new(0, id)).unwrap();
                    assert_eq!(m.allocs().of(at), Some(c), "seed {seed} frame {id}");
                }
                for (&label, &(sum, frames)) in &want_label {
                    let got = m.allocs().label(m.labels().get(label).unwrap());
                    assert_eq!((got.sum, got.frames), (sum, frames), "seed {seed} {label}");
                }
                assert_eq!(m.allocs().unplaced_count(), 1);
                // The same from the on-demand range totals over the whole log.
                let all = m.allocs_in(0, u64::MAX);
                for (&label, &(sum, _)) in &want_label {
                    assert_eq!(all[&m.labels().get(label).unwrap()].sum, sum);
                }
            }
        }
    }

    fn random_counts(rng: &mut impl Rng) -> AllocCounts {
        AllocCounts {
            allocs: rng.gen_range(0..1_000),
            alloc_bytes: rng.gen_range(0..1 << 40),
            frees: rng.gen_range(0..1_000),
            freed_bytes: rng.gen_range(0..1 << 20),
        }
    }

    /// A frame that moved threads (ended on another thread, where its record is) is found.
    #[test]
    fn a_record_on_another_thread_finds_its_frame() {
        let mut l = Log::default();
        let c = AllocCounts {
            allocs: 3,
            alloc_bytes: 300,
            frees: 1,
            freed_bytes: 100,
        };
        l.thread(0, 1, "a").start(0, 1, 100, 1, "task");
        l.thread(0, 2, "b").alloc(0, 1, 200, &c).end(0, 1, 200);
        let m = l.model();
        let at = m.find(FrameKey::new(0, 1)).unwrap();
        assert_eq!(m.allocs().of(at), Some(&c));
        assert_eq!(m.allocs().unplaced_count(), 0);
    }
}
