//! [`Pairing`]: matching frame starts with their ends by key, whatever their order in the file
//! (a frame that moved threads across an `.await` may have its end written first).
//!
//! The one pairing rule every reader uses (`stats`, `dump`, the debugger): records pair by
//! `(worker, id)`; a start waits for its end and an end for its start; a key is free again
//! once paired (ids may wrap in very long runs).

use std::collections::HashMap;

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

/// Open starts and early ends, fed in file order.
#[derive(Debug, Clone)]
pub struct Pairing<S> {
    open: HashMap<FrameKey, (u64, S)>,
    early_ends: HashMap<FrameKey, u64>,
}

impl<S> Default for Pairing<S> {
    fn default() -> Self {
        Self {
            open: HashMap::new(),
            early_ends: HashMap::new(),
        }
    }
}

impl<S> Pairing<S> {
    /// An empty pairing.
    pub fn new() -> Self {
        Self::default()
    }

    /// A frame starts; returns the completed frame if its end came first.
    pub fn start(&mut self, key: FrameKey, start_ns: u64, info: S) -> Option<Paired<S>> {
        match self.early_ends.remove(&key) {
            Some(end_ns) => Some(Paired {
                start_info: info,
                start_ns,
                end_ns,
            }),
            None => {
                self.open.insert(key, (start_ns, info));
                None
            }
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_in_either_order_and_frees_the_key() {
        let mut p = Pairing::new();
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
