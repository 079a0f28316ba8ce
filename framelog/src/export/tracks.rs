//! [`Tracks`]: turns start and end records into frames on strictly nested per-thread tracks,
//! the shape other viewers need (Chrome's `X` events, speedscope's evented profiles).
//!
//! Frames of one thread normally nest. Concurrent async work breaks that: a frame started on
//! a thread can outlive the frame it started inside. When a frame ends while frames started
//! above it on its thread are still open, those are moved to **async tracks**; what stays on
//! the thread track nests strictly. A thread's finished frames are held until its outermost
//! frame ends, then released sorted by start (parents before children at equal times), so
//! the output is deterministic and memory holds one root's subtree per thread. Pure logic.

use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet};
use std::cmp::Reverse;

use formats::FrameKey;

use crate::pairing::Pairing;

/// Finished frames a thread may hold before they are released anyway (bounds memory under a
/// root that never ends; ordering of equal timestamps across the cut is then by end).
const MAX_HELD: usize = 1 << 20;

/// A finished frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done<S> {
    /// Its key.
    pub key: FrameKey,
    /// The thread it started on: (worker, thread).
    pub thread: (u8, u32),
    /// Start, ns.
    pub start_ns: u64,
    /// End, ns (the log's last time for a frame still open at the end).
    pub end_ns: u64,
    /// Nesting depth on its thread when it started.
    pub depth: u32,
    /// The frame it started inside on its thread, if any.
    pub parent: Option<FrameKey>,
    /// It overlaps its thread's frames without nesting: it belongs on an async track.
    pub async_track: bool,
    /// It had not ended when the log ended.
    pub open: bool,
    /// What the caller kept with the start.
    pub info: S,
}

struct Started<S> {
    thread: (u8, u32),
    depth: u32,
    parent: Option<FrameKey>,
    info: S,
}

struct Thread<S> {
    /// Open frames on the thread track, outermost first.
    stack: Vec<FrameKey>,
    held: Vec<Done<S>>,
}

/// Track assignment for a whole log, fed in file order.
pub struct Tracks<S> {
    pairing: Pairing<Started<S>, FxBuildHasher>,
    threads: FxHashMap<(u8, u32), Thread<S>>,
    moved: FxHashSet<FrameKey>,
}

impl<S> Default for Tracks<S> {
    fn default() -> Self {
        Self {
            pairing: Pairing::new(),
            threads: FxHashMap::default(),
            moved: FxHashSet::default(),
        }
    }
}

impl<S> Tracks<S> {
    /// A frame starts on `thread`.
    pub fn start(
        &mut self,
        key: FrameKey,
        thread: (u8, u32),
        start_ns: u64,
        info: S,
        out: &mut impl FnMut(Done<S>),
    ) {
        if let Some(end_ns) = self.pairing.take_early_end(key) {
            // Its end was written first (it moved threads): it cannot be placed in the
            // thread's nesting, so it goes to an async track.
            out(Done {
                key,
                thread,
                start_ns,
                end_ns,
                depth: 0,
                parent: None,
                async_track: true,
                open: false,
                info,
            });
            return;
        }
        let t = self.threads.entry(thread).or_insert_with(|| Thread {
            stack: Vec::new(),
            held: Vec::new(),
        });
        let depth = t.stack.len() as u32;
        let parent = t.stack.last().copied();
        t.stack.push(key);
        self.pairing.wait_for_end(
            key,
            start_ns,
            Started {
                thread,
                depth,
                parent,
                info,
            },
        );
    }

    /// A frame ends.
    pub fn end(&mut self, key: FrameKey, end_ns: u64, out: &mut impl FnMut(Done<S>)) {
        if let Some(p) = self.pairing.end(key, end_ns) {
            self.finish_frame(key, p.start_ns, p.end_ns, p.start_info, false, out);
        }
    }

    fn finish_frame(
        &mut self,
        key: FrameKey,
        start_ns: u64,
        end_ns: u64,
        s: Started<S>,
        open: bool,
        out: &mut impl FnMut(Done<S>),
    ) {
        let Some(t) = self.threads.get_mut(&s.thread) else {
            return;
        };
        if let Some(i) = t.stack.iter().rposition(|k| *k == key) {
            // Frames started above it and still open do not nest in it.
            for above in t.stack.drain(i + 1..) {
                self.moved.insert(above);
            }
            t.stack.truncate(i);
        }
        let done = Done {
            key,
            thread: s.thread,
            start_ns,
            end_ns,
            depth: s.depth,
            parent: s.parent,
            async_track: self.moved.remove(&key),
            open,
            info: s.info,
        };
        if done.async_track {
            out(done);
            return;
        }
        t.held.push(done);
        if t.stack.is_empty() || t.held.len() >= MAX_HELD {
            release(&mut t.held, out);
        }
    }

    /// The log ended at `last_ns`: frames still open end there (marked open), and
    /// everything held is released.
    pub fn finish(&mut self, last_ns: u64, out: &mut impl FnMut(Done<S>)) {
        let mut open: Vec<(FrameKey, u64)> = self.pairing.open().map(|(k, s, _)| (k, s)).collect();
        // Innermost first, so each ends inside its parent.
        open.sort_by_key(|&(k, s)| (Reverse(s), k));
        for (key, _) in open {
            if let Some(p) = self.pairing.end(key, last_ns) {
                let end = p.end_ns.max(p.start_ns);
                self.finish_frame(key, p.start_ns, end, p.start_info, true, out);
            }
        }
        for t in self.threads.values_mut() {
            release(&mut t.held, out);
        }
    }
}

/// Releases held frames sorted by start, longer first, outer first.
fn release<S>(held: &mut Vec<Done<S>>, out: &mut impl FnMut(Done<S>)) {
    held.sort_by_key(|d| (d.start_ns, Reverse(d.end_ns), d.depth, d.key));
    for d in held.drain(..) {
        out(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(id: u32) -> FrameKey {
        FrameKey::new(0, id)
    }

    /// Feeds (start|end, id, time) on thread 1; returns (id, start, end, async, open).
    fn run(events: &[(char, u32, u64)], last: u64) -> Vec<(u32, u64, u64, bool, bool)> {
        let mut t = Tracks::default();
        let mut got = Vec::new();
        let mut out =
            |d: Done<()>| got.push((d.key.id, d.start_ns, d.end_ns, d.async_track, d.open));
        for &(what, id, ts) in events {
            if what == 's' {
                t.start(k(id), (0, 1), ts, (), &mut out);
            } else {
                t.end(k(id), ts, &mut out);
            }
        }
        t.finish(last, &mut out);
        got
    }

    #[test]
    fn nested_frames_come_out_parents_first_sorted_by_start() {
        let got = run(
            &[
                ('s', 1, 0),
                ('s', 2, 0),
                ('e', 2, 5),
                ('s', 3, 6),
                ('e', 3, 7),
                ('e', 1, 10),
            ],
            10,
        );
        assert_eq!(
            got,
            vec![
                (1, 0, 10, false, false),
                (2, 0, 5, false, false),
                (3, 6, 7, false, false)
            ]
        );
    }

    #[test]
    fn a_frame_outliving_its_parent_moves_to_an_async_track() {
        // A [0,10]; B starts inside A at 5 and ends at 15; C nests in B [6,8].
        let got = run(
            &[
                ('s', 1, 0),
                ('s', 2, 5),
                ('s', 3, 6),
                ('e', 3, 8),
                ('e', 1, 10),
                ('e', 2, 15),
            ],
            15,
        );
        assert_eq!(
            got,
            vec![
                (1, 0, 10, false, false),
                (3, 6, 8, false, false),
                (2, 5, 15, true, false)
            ]
        );
        // What stays on the thread track nests strictly.
        let sync: Vec<_> = got.iter().filter(|g| !g.3).collect();
        for w in sync.windows(2) {
            let (a, b) = (w[0], w[1]);
            assert!(b.1 >= a.2 || (b.1 >= a.1 && b.2 <= a.2));
        }
    }

    #[test]
    fn open_frames_end_at_the_last_time_inside_their_parents() {
        let got = run(&[('s', 1, 0), ('s', 2, 3)], 20);
        assert_eq!(got, vec![(1, 0, 20, false, true), (2, 3, 20, false, true)]);
    }

    #[test]
    fn an_end_before_its_start_is_an_async_frame() {
        let got = run(&[('e', 7, 9), ('s', 7, 4)], 9);
        assert_eq!(got, vec![(7, 4, 9, true, false)]);
    }
}
