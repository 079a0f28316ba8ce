//! Start/end pairing by slot: `analysis::pairing`'s rule and implementation (records pair by
//! `(worker, id)` whatever their order in the file; an end waits for its start and a start for
//! its end; a key is free again once paired), with each open frame given a small slot number.
//!
//! The ingest's reader thread pairs while it decodes, so the model thread never hashes a key:
//! a start arrives with its slot (or with its end time, when the end came first), and an end
//! with the slot of its start. The model keeps its open frames in a plain `Vec` indexed by
//! slot. Slots are reused (last freed, first reused), so the table stays as small as the
//! number of frames open at once.

use analysis::pairing::Pairing;
use formats::FrameKey;
use rustc_hash::FxBuildHasher;

/// How a frame start pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartPair {
    /// Its end came first, at this time (ns).
    Ended(u64),
    /// It waits for its end in this slot.
    Waits(u32),
    /// Its end follows it in the same batch of records, at this time (ns): the reader stage
    /// saw both, so the frame is placed as a running one and ended at once, with no end
    /// record to apply. (The pairer itself never says this; the ingest's reader stage does.)
    EndsLater(u64),
}

/// Pairs starts with ends by key and hands out slots (see the module docs).
#[derive(Debug, Default, Clone)]
pub struct Pairer {
    /// Open frames with their slots (the model keeps their start times).
    pairing: Pairing<u32, FxBuildHasher>,
    free: Vec<u32>,
    slots: u32,
}

impl Pairer {
    /// A frame starts: its end time if the end came first, else the slot it waits in. A
    /// second start of a key that is still open takes over its slot (the first one then
    /// never ends, as the pairing rule says).
    #[inline]
    pub fn start(&mut self, key: FrameKey) -> StartPair {
        if let Some(end) = self.pairing.take_early_end(key) {
            return StartPair::Ended(end);
        }
        let (free, slots) = (&mut self.free, &mut self.slots);
        // The model keeps the start time with the frame; the pairing needs none.
        let &slot = self.pairing.open_or_wait(key, 0, || {
            free.pop().unwrap_or_else(|| {
                *slots += 1;
                *slots - 1
            })
        });
        StartPair::Waits(slot)
    }

    /// A frame ends at `end_ns`: the slot its start waits in, or `None` (the end then waits
    /// for its start).
    #[inline]
    pub fn end(&mut self, key: FrameKey, end_ns: u64) -> Option<u32> {
        let slot = self.pairing.end(key, end_ns)?.start_info;
        self.free.push(slot);
        Some(slot)
    }

    /// Worker `w`'s process stopped: its open frames are ended (by the model) and their keys
    /// and slots freed.
    pub fn stop_worker(&mut self, w: u8) {
        let free = &mut self.free;
        self.pairing.retain_open(|k, &slot| {
            if k.worker == w {
                free.push(slot);
                false
            } else {
                true
            }
        });
    }

    /// Slots handed out so far (the size of the model's open-frame table).
    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// Heap bytes held by the pairing and the free list.
    pub fn heap_bytes(&self) -> usize {
        self.pairing.heap_bytes() + self.free.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_in_either_order_frees_keys_and_reuses_slots() {
        let mut p = Pairer::default();
        let (a, b) = (FrameKey::new(0, 1), FrameKey::new(0, 2));
        assert_eq!(p.start(a), StartPair::Waits(0));
        assert_eq!(p.start(b), StartPair::Waits(1));
        assert_eq!(p.end(b, 10), Some(1));
        assert_eq!(p.start(FrameKey::new(1, 9)), StartPair::Waits(1), "reused");
        // An end before its start; the key is free again after pairing.
        assert_eq!(p.end(FrameKey::new(0, 3), 40), None);
        assert_eq!(p.start(FrameKey::new(0, 3)), StartPair::Ended(40));
        assert_eq!(p.end(a, 50), Some(0));
        assert_eq!(p.end(a, 60), None, "a's key is free: this end waits");
        assert_eq!(p.start(a), StartPair::Ended(60));
        // A stopped worker's open frames are forgotten.
        p.stop_worker(1);
        assert_eq!(p.end(FrameKey::new(1, 9), 70), None);
        assert_eq!(p.slots(), 2);
    }

    /// The rule, plainly: one map from key to (start number, slot), one of early ends.
    #[derive(Default)]
    struct Reference {
        open: std::collections::HashMap<FrameKey, usize>,
        early: std::collections::HashMap<FrameKey, u64>,
    }

    #[test]
    fn pairs_as_the_plain_rule_does_with_many_frames_open_and_stopped_workers() {
        use rand::{Rng, SeedableRng};
        for seed in 0..40u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let (mut p, mut r) = (Pairer::default(), Reference::default());
            // Which start (by number) waits in each slot, for the pairer under test.
            let mut in_slot: Vec<Option<usize>> = Vec::new();
            // Few keys, so keys are reused, ended twice, started twice; sometimes many open
            // at once (past the short list), sometimes ends out of order or before starts.
            let keys = rng.gen_range(4..80u32);
            for n in 0..3_000usize {
                let key = FrameKey::new(rng.gen_range(0..3u8), rng.gen_range(0..keys));
                match rng.gen_range(0..100) {
                    0..=49 => {
                        let want = match r.early.remove(&key) {
                            Some(e) => Err(e),
                            None => Ok(*r.open.entry(key).or_insert(n)),
                        };
                        match (p.start(key), want) {
                            (StartPair::Ended(e), Err(w)) => assert_eq!(e, w, "seed {seed}"),
                            (StartPair::Waits(slot), Ok(first)) => {
                                let slot = slot as usize;
                                if slot >= in_slot.len() {
                                    in_slot.resize(slot + 1, None);
                                }
                                // A new start takes the slot; a repeated one keeps the first's.
                                let owner = in_slot[slot].get_or_insert(n);
                                if first == n {
                                    *owner = n;
                                }
                                assert_eq!(*owner, first, "seed {seed} step {n}");
                            }
                            (got, want) => panic!("seed {seed} step {n}: {got:?} vs {want:?}"),
                        }
                    }
                    50..=97 => {
                        let t = n as u64;
                        let want = r.open.remove(&key);
                        if want.is_none() {
                            r.early.insert(key, t);
                        }
                        let got = p.end(key, t).map(|slot| in_slot[slot as usize].take());
                        assert_eq!(got, want.map(Some), "seed {seed} step {n}");
                    }
                    _ => {
                        let w = rng.gen_range(0..3u8);
                        r.open.retain(|k, _| k.worker != w);
                        p.stop_worker(w);
                    }
                }
            }
        }
    }
}
