//! [`Pairing`]: matching frame starts with their ends by key, whatever their order in the file
//! (a frame that moved threads across an `.await` may have its end written first).
//!
//! The one pairing rule every reader uses (`stats`, `dump`, `sql`, the exports, the debugger):
//! records pair by `(worker, id)`; a start waits for its end and an end for its start; a key is
//! free again once paired (ids may wrap in very long runs); a second start of a key that is
//! still open replaces the first, which then never ends (`docs/FORMAT.md`, *Keys, contexts and
//! pairing*).

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

/// Open frames kept in the short list before the hash map.
const RECENT: usize = 16;

/// A key as one integer, for the short list's comparisons.
#[inline]
fn packed(key: FrameKey) -> u64 {
    (u64::from(key.worker) << 32) | u64::from(key.id)
}

#[inline]
fn unpacked(k: u64) -> FrameKey {
    FrameKey::new((k >> 32) as u8, k as u32)
}

/// Open starts and early ends, fed in file order. `H` is the maps' hasher (a fast
/// non-cryptographic one suits a viewer indexing millions of frames).
///
/// Most frames end shortly after they start, with few others opened in between (nested
/// scopes), so the most recently opened ones are kept in a short list searched from its
/// newest end, and only older ones go to a hash map: a key is in one of the two, never both.
#[derive(Clone)]
pub struct Pairing<S, H = RandomState> {
    /// The newest open frames, oldest first: (key, start time, info).
    recent: Vec<(u64, u64, S)>,
    /// Older open frames.
    open: HashMap<FrameKey, (u64, S), H>,
    early_ends: HashMap<FrameKey, u64, H>,
}

impl<S, H> std::fmt::Debug for Pairing<S, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pairing")
            .field("open", &(self.recent.len() + self.open.len()))
            .field("early_ends", &self.early_ends.len())
            .finish()
    }
}

impl<S, H: Default> Default for Pairing<S, H> {
    fn default() -> Self {
        Self {
            recent: Vec::new(),
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
    /// A start of a key already open replaces it.
    #[inline]
    pub fn wait_for_end(&mut self, key: FrameKey, start_ns: u64, info: S) {
        let k = packed(key);
        if let Some(e) = self.recent.iter_mut().rev().find(|e| e.0 == k) {
            *e = (k, start_ns, info);
            return;
        }
        if !self.open.is_empty()
            && let Some(e) = self.open.get_mut(&key)
        {
            *e = (start_ns, info);
            return;
        }
        self.push_recent(k, start_ns, info);
    }

    /// A new open frame goes to the short list, the list's oldest to the map if it is full.
    #[inline]
    fn push_recent(&mut self, k: u64, start_ns: u64, info: S) {
        if self.recent.len() == RECENT {
            let (old, t, s) = self.recent.remove(0);
            self.open.insert(unpacked(old), (t, s));
        }
        self.recent.push((k, start_ns, info));
    }

    /// What was kept with the start of `key` if it is open; else `key` waits for its end
    /// from `start_ns` with `info()`, which is returned. (A repeated start keeps the first's:
    /// for callers that hand the open frame's place to the repeated start themselves.)
    #[inline]
    pub fn open_or_wait(&mut self, key: FrameKey, start_ns: u64, info: impl FnOnce() -> S) -> &S {
        let k = packed(key);
        if let Some(i) = self.recent.iter().rposition(|e| e.0 == k) {
            return &self.recent[i].2;
        }
        // Looked up twice when found: the borrow checker does not let a reference found in
        // the map be returned from a branch that otherwise inserts into it (rare: a repeated
        // start of a frame opened long before).
        if !self.open.is_empty() && self.open.contains_key(&key) {
            return self.open.get(&key).map(|e| &e.1).expect("just found");
        }
        self.push_recent(k, start_ns, info());
        &self.recent[self.recent.len() - 1].2
    }

    /// A frame ends; returns the completed frame if its start was seen.
    #[inline]
    pub fn end(&mut self, key: FrameKey, end_ns: u64) -> Option<Paired<S>> {
        let k = packed(key);
        let started = match self.recent.iter().rposition(|e| e.0 == k) {
            Some(i) => {
                let (_, t, s) = self.recent.remove(i);
                Some((t, s))
            }
            None if !self.open.is_empty() => self.open.remove(&key),
            None => None,
        };
        match started {
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
    #[inline]
    pub fn info(&self, key: FrameKey) -> Option<&S> {
        let k = packed(key);
        if let Some(e) = self.recent.iter().rev().find(|e| e.0 == k) {
            return Some(&e.2);
        }
        if self.open.is_empty() {
            return None;
        }
        self.open.get(&key).map(|(_, s)| s)
    }

    /// Forgets the open starts for which `keep` says no (a stopped process's frames, which
    /// will never end); their ends, if any come, then wait as early ends.
    pub fn retain_open(&mut self, mut keep: impl FnMut(FrameKey, &S) -> bool) {
        self.recent.retain(|(k, _, s)| keep(unpacked(*k), s));
        self.open.retain(|k, (_, s)| keep(*k, s));
    }

    /// Starts whose end has not been seen (yet), with their start times.
    pub fn open(&self) -> impl Iterator<Item = (FrameKey, u64, &S)> {
        self.open
            .iter()
            .map(|(k, (t, s))| (*k, *t, s))
            .chain(self.recent.iter().map(|(k, t, s)| (unpacked(*k), *t, s)))
    }

    /// Number of starts without an end.
    pub fn open_count(&self) -> usize {
        self.recent.len() + self.open.len()
    }

    /// Number of ends whose start has not been seen.
    pub fn orphan_end_count(&self) -> usize {
        self.early_ends.len()
    }

    /// Heap bytes held by the list and maps (entries and control bytes).
    pub fn heap_bytes(&self) -> usize {
        let key = std::mem::size_of::<FrameKey>();
        self.recent.capacity() * std::mem::size_of::<(u64, u64, S)>()
            + self.open.capacity() * (key + std::mem::size_of::<(u64, S)>() + 1)
            + self.early_ends.capacity() * (key + 8 + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    /// One step of a random run: few keys, so keys are reused, ended twice, started twice.
    #[derive(Debug, Clone)]
    enum Op {
        Start(u8, u32),
        /// A start that keeps the first's info if its key is open (`open_or_wait`).
        StartKeep(u8, u32),
        End(u8, u32),
        /// Forget worker `.0`'s open starts.
        Stop(u8),
    }

    fn op(keys: u32) -> impl Strategy<Value = Op> {
        prop_oneof![
            7 => (0..3u8, 0..keys).prop_map(|(w, id)| Op::Start(w, id)),
            3 => (0..3u8, 0..keys).prop_map(|(w, id)| Op::StartKeep(w, id)),
            9 => (0..3u8, 0..keys).prop_map(|(w, id)| Op::End(w, id)),
            1 => (0..3u8).prop_map(Op::Stop),
        ]
    }

    proptest! {
        /// The short list changes nothing: the rule, plainly (one map of open starts, one of
        /// early ends), pairs every step the same, with many frames open at once (past the
        /// short list) or few.
        #[test]
        fn pairs_as_the_plain_rule_does(
            ops in (4..80u32).prop_flat_map(|keys| prop::collection::vec(op(keys), 1..3000))
        ) {
            let mut p: Pairing<usize> = Pairing::new();
            let mut open: HashMap<FrameKey, (u64, usize)> = HashMap::new();
            let mut early: HashMap<FrameKey, u64> = HashMap::new();
            for (n, o) in ops.iter().enumerate() {
                let t = n as u64;
                match *o {
                    Op::Start(w, id) => {
                        let key = FrameKey::new(w, id);
                        let want = match early.remove(&key) {
                            Some(end_ns) => Some(Paired { start_info: n, start_ns: t, end_ns }),
                            None => {
                                open.insert(key, (t, n));
                                None
                            }
                        };
                        prop_assert_eq!(p.start(key, t, n), want, "step {}", n);
                    }
                    Op::StartKeep(w, id) => {
                        let key = FrameKey::new(w, id);
                        let early_end = p.take_early_end(key);
                        prop_assert_eq!(early_end, early.remove(&key), "step {}", n);
                        if early_end.is_none() {
                            let want = open.entry(key).or_insert((t, n)).1;
                            prop_assert_eq!(*p.open_or_wait(key, t, || n), want, "step {}", n);
                        }
                    }
                    Op::End(w, id) => {
                        let key = FrameKey::new(w, id);
                        let want = match open.remove(&key) {
                            Some((start_ns, start_info)) => {
                                Some(Paired { start_info, start_ns, end_ns: t })
                            }
                            None => {
                                early.insert(key, t);
                                None
                            }
                        };
                        prop_assert_eq!(p.end(key, t), want, "step {}", n);
                    }
                    Op::Stop(w) => {
                        open.retain(|k, _| k.worker != w);
                        p.retain_open(|k, _| k.worker != w);
                    }
                }
                prop_assert_eq!(p.open_count(), open.len());
                prop_assert_eq!(p.orphan_end_count(), early.len());
            }
            let mut left: Vec<_> = p.open().map(|(k, t, s)| (k, t, *s)).collect();
            let mut want: Vec<_> = open.iter().map(|(k, (t, s))| (*k, *t, *s)).collect();
            left.sort_by_key(|e| (e.0.worker, e.0.id));
            want.sort_by_key(|e| (e.0.worker, e.0.id));
            prop_assert_eq!(left, want);
            for (k, (_, s)) in &open {
                prop_assert_eq!(p.info(*k), Some(s));
            }
        }
    }
}
