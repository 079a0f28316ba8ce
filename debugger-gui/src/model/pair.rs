//! Start/end pairing by slot: the rule of `framelog::pairing` (records pair by `(worker, id)`
//! whatever their order in the file; an end waits for its start and a start for its end; a key
//! is free again once paired), with each open frame given a small slot number.
//!
//! The ingest's reader thread pairs while it decodes, so the model thread never hashes a key:
//! a start arrives with its slot (or with its end time, when the end came first), and an end
//! with the slot of its start. The model keeps its open frames in a plain `Vec` indexed by
//! slot. Slots are reused (last freed, first reused), so the table stays as small as the
//! number of frames open at once.

use formats::FrameKey;
use rustc_hash::FxHashMap;

/// How a frame start pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartPair {
    /// Its end came first, at this time (ns).
    Ended(u64),
    /// It waits for its end in this slot.
    Waits(u32),
}

/// Pairs starts with ends by key and hands out slots (see the module docs).
#[derive(Debug, Default, Clone)]
pub struct Pairer {
    open: FxHashMap<FrameKey, u32>,
    early_ends: FxHashMap<FrameKey, u64>,
    free: Vec<u32>,
    slots: u32,
}

impl Pairer {
    /// A frame starts: its end time if the end came first, else the slot it waits in. A
    /// second start of a key that is still open takes over its slot (the first one then
    /// never ends, as with `framelog::pairing`).
    #[inline]
    pub fn start(&mut self, key: FrameKey) -> StartPair {
        if !self.early_ends.is_empty()
            && let Some(end) = self.early_ends.remove(&key)
        {
            return StartPair::Ended(end);
        }
        let (free, slots) = (&mut self.free, &mut self.slots);
        StartPair::Waits(*self.open.entry(key).or_insert_with(|| {
            free.pop().unwrap_or_else(|| {
                *slots += 1;
                *slots - 1
            })
        }))
    }

    /// A frame ends at `end_ns`: the slot its start waits in, or `None` (the end then waits
    /// for its start).
    #[inline]
    pub fn end(&mut self, key: FrameKey, end_ns: u64) -> Option<u32> {
        match self.open.remove(&key) {
            Some(slot) => {
                self.free.push(slot);
                Some(slot)
            }
            None => {
                self.early_ends.insert(key, end_ns);
                None
            }
        }
    }

    /// Worker `w`'s process stopped: its open frames are ended (by the model) and their keys
    /// and slots freed.
    pub fn stop_worker(&mut self, w: u8) {
        let free = &mut self.free;
        self.open.retain(|k, slot| {
            if k.worker == w {
                free.push(*slot);
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

    /// Heap bytes held by the maps and the free list.
    pub fn heap_bytes(&self) -> usize {
        self.open.capacity() * (std::mem::size_of::<(FrameKey, u32)>() + 1)
            + self.early_ends.capacity() * (std::mem::size_of::<(FrameKey, u64)>() + 1)
            + self.free.capacity() * 4
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
}
