//! [`Pairing`]: matching frame starts with their ends by key, whatever their order in the file
//! (a frame that moved threads across an `.await` may have its end written first).
//!
//! The one pairing rule every reader uses (`stats`, `dump`, the debugger): records pair by
//! `(worker, id)`; a start waits for its end and an end for its start; a key is free again
//! once paired (ids may wrap in very long runs).

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use formats::FrameKey;

/// A completed frame: what was kept with its start, and its start and end times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paired<S> {
    /// What the caller kept with the start.
    pub start_info: S,
    /// Start time, ns.
    pub start_ns: u64,
    /// End time, ns.
    pub end_ns: u64,
}

impl<S> Paired<S> {
    /// The frame's duration (0 if the clock went backwards across processes).
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// Open starts and early ends, fed in file order. `H` is the maps' hasher (a fast
/// non-cryptographic one suits a viewer indexing millions of frames).
#[derive(Clone)]
pub struct Pairing<S, H = RandomState> {
    open: HashMap<FrameKey, (u64, S), H>,
    early_ends: HashMap<FrameKey, u64, H>,
}

impl<S, H> std::fmt::Debug for Pairing<S, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pairing")
            .field("open", &self.open.len())
            .field("early_ends", &self.early_ends.len())
            .finish()
    }
}

impl<S, H: Default> Default for Pairing<S, H> {
    fn default() -> Self {
        Self {
            open: HashMap::default(),
            early_ends: HashMap::default(),
        }
    }
}

impl<S, H: BuildHasher + Default> Pairing<S, H> {
    /// An empty pairing.
    pub fn new() -> Self {
        Self::default()
    }

    /// A frame starts; returns the completed frame if its end came first.
    pub fn start(&mut self, key: FrameKey, start_ns: u64, info: S) -> Option<Paired<S>> {
        match self.take_early_end(key) {
            Some(end_ns) => Some(Paired {
                start_info: info,
                start_ns,
                end_ns,
            }),
            None => {
                self.wait_for_end(key, start_ns, info);
                None
            }
        }
    }

    /// The first half of [`Pairing::start`], for callers that need to know a frame's end
    /// before they can describe its start: the end time, if the end came first.
    #[inline]
    pub fn take_early_end(&mut self, key: FrameKey) -> Option<u64> {
        if self.early_ends.is_empty() {
            return None;
        }
        self.early_ends.remove(&key)
    }

    /// The second half of [`Pairing::start`], when [`Pairing::take_early_end`] found no end.
    #[inline]
    pub fn wait_for_end(&mut self, key: FrameKey, start_ns: u64, info: S) {
        self.open.insert(key, (start_ns, info));
    }

    /// A frame ends; returns the completed frame if its start was seen.
    pub fn end(&mut self, key: FrameKey, end_ns: u64) -> Option<Paired<S>> {
        match self.open.remove(&key) {
            Some((start_ns, start_info)) => Some(Paired {
                start_info,
                start_ns,
                end_ns,
            }),
            None => {
                self.early_ends.insert(key, end_ns);
                None
            }
        }
    }

    /// What was kept with the start of `key`, if it is open.
    pub fn info(&self, key: FrameKey) -> Option<&S> {
        self.open.get(&key).map(|(_, s)| s)
    }

    /// Starts whose end has not been seen (yet), with their start times.
    pub fn open(&self) -> impl Iterator<Item = (FrameKey, u64, &S)> {
        self.open.iter().map(|(k, (t, s))| (*k, *t, s))
    }

    /// Number of starts without an end.
    pub fn open_count(&self) -> usize {
        self.open.len()
    }

    /// Number of ends whose start has not been seen.
    pub fn orphan_end_count(&self) -> usize {
        self.early_ends.len()
    }

    /// Heap bytes held by the maps (entries and control bytes).
    pub fn heap_bytes(&self) -> usize {
        let key = std::mem::size_of::<FrameKey>();
        self.open.capacity() * (key + std::mem::size_of::<(u64, S)>() + 1)
            + self.early_ends.capacity() * (key + 8 + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_in_either_order_and_frees_the_key() {
        let mut p: Pairing<&str> = Pairing::new();
        let k = FrameKey::new(1, 7);
        assert_eq!(p.start(k, 10, "a"), None);
        assert_eq!(
            p.end(k, 15).map(|f| (f.start_info, f.duration_ns())),
            Some(("a", 5))
        );
        // The key is free again: an end before its start pairs too.
        assert_eq!(p.end(k, 40), None);
        assert_eq!(p.orphan_end_count(), 1);
        let f = p.start(k, 30, "b").unwrap();
        assert_eq!((f.start_info, f.start_ns, f.end_ns), ("b", 30, 40));
        assert_eq!((p.open_count(), p.orphan_end_count()), (0, 0));
        p.start(FrameKey::new(2, 1), 5, "open");
        assert_eq!(
            p.open()
                .map(|(k, t, s)| (k.worker, t, *s))
                .collect::<Vec<_>>(),
            vec![(2, 5, "open")]
        );
    }
}
