//! [`Tracks`]: turns start and end records into frames on strictly nested per-thread tracks
//! (the shape Chrome's `X` events and speedscope's evented profiles need), with each frame's
//! parent in its own context (the shape OpenTelemetry traces need). Pure logic.
//!
//! Records are paired by key, never by file order: a frame that moved threads across an
//! `.await` may have its end written after later frames of its thread, or before its start.
//! A frame belongs to the thread it started on and is placed by its real start and end:
//!
//! - Per thread, finished frames are released in order of start (longer first at equal
//!   starts, then in the order they started), once no frame that started earlier on the
//!   thread can still arrive: the thread's starts come in time order, so that is when every
//!   frame started before the earliest one still open has ended.
//! - Each released frame goes on a **lane** of its thread: lane 0 is the thread's own track,
//!   lanes 1, 2 … hold the frames that would overlap it (concurrent async work). Every lane
//!   nests strictly, and frames arrive on it in start order. A frame whose start records its
//!   parent nests only inside that parent: on the parent's lane when the parent is the
//!   innermost frame open there and encloses it ([`Done::under_parent`]), else on the first
//!   lane where nothing is open at its start (a root, a child of a frame on another thread or
//!   lane, a child whose parent is not in the log). So an enclosing slice is always the real
//!   parent. A frame whose start records no parent (a log written before parents were
//!   recorded) goes, as before, on the first lane where it nests in whatever is open.
//! - A frame that cannot be placed in order (its thread's starts went back in time, or it
//!   stayed open while more than [`MAX_HELD`] later frames waited for it) is released on no
//!   lane ([`Done::async_track`]): viewers draw it as an async slice.
//! - Its **parent** is the one its start records ([`formats::Parent`]): a frame of the same
//!   worker, or none. Never another: a recorded parent that is not in the log leaves the frame
//!   drawn as a root of its lane, its parent named but absent. Only for a start that records no
//!   parent is it inferred ([`Done::parent_inferred`]): the innermost frame of its own context
//!   that was open on its thread when it started, else its context's root frame (key
//!   `(worker, context)`); a root (its id is its context) has none.

use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet};
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeSet, BinaryHeap};

use formats::{FrameKey, Parent};

use analysis::pairing::Pairing;
use analysis::parents::inferred_parent;

/// Finished frames a thread may hold for an earlier frame still open; past it the open
/// frames blocking them are given up to async tracks (bounds memory under a frame that never
/// ends).
pub const MAX_HELD: usize = 1 << 20;

/// A finished frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done<S> {
    /// Its key.
    pub key: FrameKey,
    /// The thread it started on: (worker, thread).
    pub thread: (u8, u32),
    /// Its context.
    pub context: u32,
    /// Start, ns.
    pub start_ns: u64,
    /// End, ns (the log's last time for a frame still open at the end).
    pub end_ns: u64,
    /// The lane of its thread it nests on: 0 is the thread's own track, 1, 2 … the lanes of
    /// frames that overlap it. Meaningless when `async_track`.
    pub lane: u32,
    /// Its parent: the one its start records (which may be missing from the log), else, for
    /// a start that records none, the inferred one (see the module doc); `None` for a root.
    pub parent: Option<FrameKey>,
    /// Its start recorded no parent: `parent` is inferred from nesting on its thread.
    pub parent_inferred: bool,
    /// On its lane, the innermost frame enclosing it is its parent (it is drawn inside it).
    /// `false` for a root, a frame on an async track, and a child drawn apart from its parent
    /// (on another thread or lane, or not in the log): viewers link those to their parent.
    pub under_parent: bool,
    /// It could not be placed on a lane in time order: it belongs on an async track.
    pub async_track: bool,
    /// It had not ended when the log ended.
    pub open: bool,
    /// What the caller kept with the start.
    pub info: S,
}

struct Started<S> {
    thread: (u8, u32),
    seq: u64,
    context: u32,
    parent: Parent,
    info: S,
}

/// A finished frame waiting for its turn, ordered by (start, longer first, start order).
struct Held<S> {
    start: u64,
    end: u64,
    seq: u64,
    key: FrameKey,
    context: u32,
    parent: Parent,
    open: bool,
    info: S,
}

impl<S> Held<S> {
    fn order(&self) -> (u64, Reverse<u64>, u64) {
        (self.start, Reverse(self.end), self.seq)
    }
}

impl<S> PartialEq for Held<S> {
    fn eq(&self, other: &Self) -> bool {
        self.order() == other.order()
    }
}
impl<S> Eq for Held<S> {}
impl<S> PartialOrd for Held<S> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<S> Ord for Held<S> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.order().cmp(&other.order())
    }
}

#[derive(Default)]
struct Thread<S> {
    /// Frames started here and still open: (start, seq, key).
    open: BTreeSet<(u64, u64, FrameKey)>,
    /// The latest start seen here.
    last_start: u64,
    /// Finished frames not released yet (min-heap).
    held: BinaryHeap<Reverse<Held<S>>>,
    /// Start of the last frame released in order.
    released: u64,
    /// Per lane, the frames open on it, outermost first.
    lanes: Vec<Vec<OnLane>>,
    /// The lane of each frame in `lanes` whose start recorded its parent (their children,
    /// which record them, look it up; a log without parents never fills it).
    lane_of: FxHashMap<FrameKey, u32>,
    /// Per context, frames released here that may still be open: (key, end), in start order.
    contexts: FxHashMap<u32, Vec<(FrameKey, u64)>>,
    context_entries: usize,
    sweep_at: usize,
}

/// A frame open on a lane.
#[derive(Clone, Copy)]
struct OnLane {
    end: u64,
    key: FrameKey,
    /// In [`Thread::lane_of`].
    indexed: bool,
}

/// Whether a frame `[start, end]` nests inside (or on) a frame ending at `outer_end` that
/// started no later; `false` means the outer frame is over by then.
fn still_open(outer_end: u64, start: u64, end: u64) -> bool {
    outer_end > start || (outer_end == start && end == start)
}

impl<S> Thread<S> {
    fn new() -> Self {
        Self {
            open: BTreeSet::new(),
            last_start: 0,
            held: BinaryHeap::new(),
            released: 0,
            lanes: Vec::new(),
            lane_of: FxHashMap::default(),
            contexts: FxHashMap::default(),
            context_entries: 0,
            sweep_at: 4096,
        }
    }

    /// Whether every frame that starts before (or with) `start` has been seen finished:
    /// later ones start after it (or with it, and are then released after it anyway).
    fn releasable(&self, start: u64) -> bool {
        match self.open.first() {
            // An open frame starting with it may be its parent: wait for it.
            Some(&(s, _, _)) => start < s,
            None => start <= self.last_start,
        }
    }

    /// Pops the frames of `lane` that are over by `[start, end]`.
    fn pop_over(&mut self, lane: usize, start: u64, end: u64) {
        let stack = &mut self.lanes[lane];
        while let Some(&top) = stack.last() {
            if still_open(top.end, start, end) {
                break;
            }
            stack.pop();
            if top.indexed {
                self.lane_of.remove(&top.key);
            }
        }
    }

    fn push(&mut self, lane: usize, end: u64, key: FrameKey, indexed: bool) -> u32 {
        if lane == self.lanes.len() {
            self.lanes.push(Vec::new());
        }
        self.lanes[lane].push(OnLane { end, key, indexed });
        if indexed {
            self.lane_of.insert(key, lane as u32);
        }
        lane as u32
    }

    /// A frame whose start records no parent: the first lane it nests on, in whatever is
    /// open there (as before parents were recorded). Whether the frame enclosing it is
    /// `parent`.
    fn lane_by_time(
        &mut self,
        key: FrameKey,
        start: u64,
        end: u64,
        parent: Option<FrameKey>,
    ) -> (u32, bool) {
        for i in 0..self.lanes.len() {
            self.pop_over(i, start, end);
            match self.lanes[i].last() {
                None => return (self.push(i, end, key, false), false),
                Some(&top) if end <= top.end => {
                    return (self.push(i, end, key, false), Some(top.key) == parent);
                }
                Some(_) => {}
            }
        }
        (self.push(self.lanes.len(), end, key, false), false)
    }

    /// A frame whose start records its parent: inside the parent when the parent is the
    /// innermost frame open on its lane and encloses it, else the first lane where nothing
    /// is open at its start. Whether it is inside its parent.
    fn lane_by_parent(
        &mut self,
        key: FrameKey,
        start: u64,
        end: u64,
        parent: Option<FrameKey>,
    ) -> (u32, bool) {
        if let Some(p) = parent
            && let Some(&l) = self.lane_of.get(&p)
        {
            let l = l as usize;
            self.pop_over(l, start, end);
            if let Some(&top) = self.lanes[l].last()
                && top.key == p
                && end <= top.end
            {
                return (self.push(l, end, key, true), true);
            }
        }
        for i in 0..self.lanes.len() {
            self.pop_over(i, start, end);
            if self.lanes[i].is_empty() {
                return (self.push(i, end, key, true), false);
            }
        }
        (self.push(self.lanes.len(), end, key, true), false)
    }

    /// A type 0 start's parent: the innermost frame of `context` open here at `start`, else
    /// the context's root (`docs/FORMAT.md`, *Parents of type 0 starts*); records this frame
    /// as open here.
    fn parent(&mut self, key: FrameKey, context: u32, start: u64, end: u64) -> Option<FrameKey> {
        let found = self.innermost(key, context, start, end);
        if key.id == context {
            // A context's root, whatever ran before it with the same context value.
            None
        } else {
            inferred_parent(key, context, found)
        }
    }

    /// The innermost frame of `context` open here at `start` (whatever its start recorded);
    /// records this frame as one.
    fn innermost(&mut self, key: FrameKey, context: u32, start: u64, end: u64) -> Option<FrameKey> {
        let stack = self.contexts.entry(context).or_default();
        while stack
            .last()
            .is_some_and(|&(_, e)| !still_open(e, start, end))
        {
            stack.pop();
            self.context_entries -= 1;
        }
        let found = stack.last().map(|&(k, _)| k);
        stack.push((key, end));
        self.context_entries += 1;
        if self.context_entries > self.sweep_at {
            // Frames that ended before the last released start can no longer be anyone's
            // parent here (later frames start after it).
            let released = self.released;
            self.contexts.retain(|_, s| {
                s.retain(|&(_, e)| e >= released);
                !s.is_empty()
            });
            self.context_entries = self.contexts.values().map(Vec::len).sum();
            self.sweep_at = (self.context_entries * 2).max(4096);
        }
        found
    }
}

/// Track assignment for a whole log, fed in file order.
pub struct Tracks<S> {
    pairing: Pairing<Started<S>, FxBuildHasher>,
    threads: FxHashMap<(u8, u32), Thread<S>>,
    /// Open frames given up to async tracks (see [`MAX_HELD`]).
    demoted: FxHashSet<FrameKey>,
    seq: u64,
    /// Only frames that end at or after `.0` and start at or before `.1` are released.
    window: (u64, u64),
    max_held: usize,
}

impl<S> Default for Tracks<S> {
    fn default() -> Self {
        Self {
            pairing: Pairing::new(),
            threads: FxHashMap::default(),
            demoted: FxHashSet::default(),
            seq: 0,
            window: (0, u64::MAX),
            max_held: MAX_HELD,
        }
    }
}

/// The parent a start records, if it records one.
fn recorded(key: FrameKey, parent: Parent) -> Option<Option<FrameKey>> {
    analysis::parents::recorded_parent(key.worker, parent)
}

fn async_done<S>(thread: (u8, u32), h: Held<S>) -> Done<S> {
    let (parent, parent_inferred) = match recorded(h.key, h.parent) {
        Some(p) => (p, false),
        // Nothing is open beside it on an async track: its context's root, if not itself.
        None => (inferred_parent(h.key, h.context, None), true),
    };
    Done {
        key: h.key,
        thread,
        context: h.context,
        start_ns: h.start,
        end_ns: h.end,
        lane: 0,
        parent,
        parent_inferred,
        under_parent: false,
        async_track: true,
        open: h.open,
        info: h.info,
    }
}

impl<S> Tracks<S> {
    /// Releases only frames that end at or after `from_ns` and start at or before `to_ns`
    /// (the others are left out of lanes and parents too).
    pub fn set_window(&mut self, from_ns: u64, to_ns: u64) {
        self.window = (from_ns, to_ns);
    }

    /// Sets how many finished frames a thread may hold (tests; default [`MAX_HELD`]).
    pub fn set_max_held(&mut self, n: usize) {
        self.max_held = n.max(1);
    }

    fn in_window(&self, start: u64, end: u64) -> bool {
        end >= self.window.0 && start <= self.window.1
    }

    /// A frame of `context` starts on `thread`, naming its parent or not.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &mut self,
        key: FrameKey,
        thread: (u8, u32),
        context: u32,
        parent: Parent,
        start_ns: u64,
        info: S,
        out: &mut impl FnMut(Done<S>),
    ) {
        self.seq += 1;
        let seq = self.seq;
        let t = self.threads.entry(thread).or_insert_with(Thread::new);
        t.last_start = t.last_start.max(start_ns);
        match self.pairing.take_early_end(key) {
            // Its end was written first (it moved threads): finished already.
            Some(end_ns) => self.finished(
                thread,
                Held {
                    start: start_ns,
                    end: end_ns.max(start_ns),
                    seq,
                    key,
                    context,
                    parent,
                    open: false,
                    info,
                },
                out,
            ),
            None => {
                t.open.insert((start_ns, seq, key));
                self.pairing.wait_for_end(
                    key,
                    start_ns,
                    Started {
                        thread,
                        seq,
                        context,
                        parent,
                        info,
                    },
                );
                self.release(thread, u64::MAX, out);
            }
        }
    }

    /// A frame ends.
    pub fn end(&mut self, key: FrameKey, end_ns: u64, out: &mut impl FnMut(Done<S>)) {
        if let Some(p) = self.pairing.end(key, end_ns) {
            self.ended(key, p.start_ns, p.end_ns, p.start_info, false, out);
        }
    }

    fn ended(
        &mut self,
        key: FrameKey,
        start: u64,
        end: u64,
        s: Started<S>,
        open: bool,
        out: &mut impl FnMut(Done<S>),
    ) {
        let held = Held {
            start,
            end: end.max(start),
            seq: s.seq,
            key,
            context: s.context,
            parent: s.parent,
            open,
            info: s.info,
        };
        if self.demoted.remove(&key) {
            if self.in_window(held.start, held.end) {
                out(async_done(s.thread, held));
            }
            return;
        }
        if let Some(t) = self.threads.get_mut(&s.thread) {
            t.open.remove(&(start, s.seq, key));
        }
        self.finished(s.thread, held, out);
    }

    fn finished(&mut self, thread: (u8, u32), h: Held<S>, out: &mut impl FnMut(Done<S>)) {
        let keep = self.in_window(h.start, h.end);
        let Some(t) = self.threads.get_mut(&thread) else {
            return;
        };
        if h.start < t.released {
            // Its thread's lanes have moved past its start (starts out of time order).
            if keep {
                out(async_done(thread, h));
            }
        } else if keep {
            t.held.push(Reverse(h));
        }
        self.release(thread, u64::MAX, out);
    }

    /// Releases the thread's held frames that started by its watermark (and by `limit`),
    /// giving up open frames to async tracks while too many wait for them.
    fn release(&mut self, thread: (u8, u32), limit: u64, out: &mut impl FnMut(Done<S>)) {
        let Some(t) = self.threads.get_mut(&thread) else {
            return;
        };
        loop {
            while t
                .held
                .peek()
                .is_some_and(|Reverse(h)| h.start <= limit && t.releasable(h.start))
            {
                let Some(Reverse(h)) = t.held.pop() else {
                    break;
                };
                t.released = t.released.max(h.start);
                let (parent, parent_inferred, (lane, under_parent)) =
                    match recorded(h.key, h.parent) {
                        Some(p) => {
                            // Open here for a later type 0 start of its context.
                            t.innermost(h.key, h.context, h.start, h.end);
                            (p, false, t.lane_by_parent(h.key, h.start, h.end, p))
                        }
                        None => {
                            let p = t.parent(h.key, h.context, h.start, h.end);
                            (p, true, t.lane_by_time(h.key, h.start, h.end, p))
                        }
                    };
                out(Done {
                    key: h.key,
                    thread,
                    context: h.context,
                    start_ns: h.start,
                    end_ns: h.end,
                    lane,
                    parent,
                    parent_inferred,
                    under_parent,
                    async_track: false,
                    open: h.open,
                    info: h.info,
                });
            }
            if t.held.len() <= self.max_held || limit != u64::MAX {
                return;
            }
            let Some(first) = t.open.pop_first() else {
                return;
            };
            self.demoted.insert(first.2);
        }
    }

    /// The log ended at `last_ns`: frames still open end there (marked open), and
    /// everything held is released.
    pub fn finish(&mut self, last_ns: u64, out: &mut impl FnMut(Done<S>)) {
        let mut open: Vec<(FrameKey, u64)> = self.pairing.open().map(|(k, s, _)| (k, s)).collect();
        open.sort_unstable_by_key(|&(k, s)| (s, k));
        for (key, _) in open {
            if let Some(p) = self.pairing.end(key, last_ns) {
                self.ended(key, p.start_ns, p.end_ns, p.start_info, true, out);
            }
        }
        let mut threads: Vec<(u8, u32)> = self.threads.keys().copied().collect();
        threads.sort_unstable();
        for t in threads {
            if let Some(th) = self.threads.get_mut(&t) {
                th.open.clear();
                th.last_start = u64::MAX;
            }
            self.release(t, u64::MAX, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(id: u32) -> FrameKey {
        FrameKey::new(0, id)
    }

    /// (id, start, end, lane, async, open, parent id)
    type Row = (u32, u64, u64, u32, bool, bool, Option<u32>);

    /// Feeds (start|end, id, context, time) on thread 1 (thread 2 for 'S'); returns rows in
    /// release order.
    fn run(events: &[(char, u32, u32, u64)], last: u64) -> Vec<Row> {
        let mut t = Tracks::default();
        let mut got = Vec::new();
        let mut out = |d: Done<()>| {
            got.push((
                d.key.id,
                d.start_ns,
                d.end_ns,
                d.lane,
                d.async_track,
                d.open,
                d.parent.map(|p| p.id),
            ))
        };
        for &(what, id, ctx, ts) in events {
            match what {
                's' => t.start(k(id), (0, 1), ctx, Parent::NotRecorded, ts, (), &mut out),
                'S' => t.start(k(id), (0, 2), ctx, Parent::NotRecorded, ts, (), &mut out),
                _ => t.end(k(id), ts, &mut out),
            }
        }
        t.finish(last, &mut out);
        got
    }

    /// Every lane of every thread nests strictly.
    fn assert_nested(rows: &[Row]) {
        let mut lanes: FxHashMap<u32, Vec<(u64, u64)>> = FxHashMap::default();
        for r in rows.iter().filter(|r| !r.4) {
            lanes.entry(r.3).or_default().push((r.1, r.2));
        }
        for frames in lanes.values() {
            let mut stack: Vec<u64> = Vec::new();
            let mut last = 0;
            for &(s, e) in frames {
                assert!(s >= last, "released out of start order");
                last = s;
                while stack.last().is_some_and(|&pe| !still_open(pe, s, e)) {
                    stack.pop();
                }
                assert!(stack.last().is_none_or(|&pe| e <= pe), "{frames:?}");
                stack.push(e);
            }
        }
    }

    #[test]
    fn nested_frames_come_out_parents_first_sorted_by_start() {
        let got = run(
            &[
                ('s', 1, 1, 0),
                ('s', 2, 1, 0),
                ('e', 2, 0, 5),
                ('s', 3, 1, 6),
                ('e', 3, 0, 7),
                ('e', 1, 0, 10),
            ],
            10,
        );
        assert_eq!(
            got,
            vec![
                (1, 0, 10, 0, false, false, None),
                (2, 0, 5, 0, false, false, Some(1)),
                (3, 6, 7, 0, false, false, Some(1))
            ]
        );
    }

    #[test]
    fn a_frame_outliving_its_parent_goes_on_lane_1() {
        // A [0,10]; B starts inside A at 5 and ends at 15; C nests in B [6,8].
        let got = run(
            &[
                ('s', 1, 1, 0),
                ('s', 2, 1, 5),
                ('s', 3, 1, 6),
                ('e', 3, 0, 8),
                ('e', 1, 0, 10),
                ('e', 2, 0, 15),
            ],
            15,
        );
        assert_eq!(
            got,
            vec![
                (1, 0, 10, 0, false, false, None),
                (2, 5, 15, 1, false, false, Some(1)),
                (3, 6, 8, 0, false, false, Some(2))
            ]
        );
        assert_nested(&got);
    }

    #[test]
    fn an_end_written_late_is_placed_by_its_real_time() {
        // The case: task 48 [102,123] moved threads and its end reached the file
        // after request 56 [121,125] of the same thread: they overlap, so 56 takes lane 1.
        let got = run(
            &[
                ('s', 48, 40, 102),
                ('s', 56, 56, 121),
                ('e', 56, 0, 125),
                ('e', 48, 0, 123),
            ],
            125,
        );
        assert_eq!(
            got,
            vec![
                (48, 102, 123, 0, false, false, Some(40)),
                (56, 121, 125, 1, false, false, None)
            ]
        );
    }

    #[test]
    fn open_frames_end_at_the_last_time_inside_their_parents() {
        let got = run(&[('s', 1, 1, 0), ('s', 2, 1, 3)], 20);
        assert_eq!(
            got,
            vec![
                (1, 0, 20, 0, false, true, None),
                (2, 3, 20, 0, false, true, Some(1))
            ]
        );
    }

    #[test]
    fn an_end_before_its_start_is_placed_like_any_frame() {
        let got = run(&[('e', 7, 0, 9), ('s', 7, 7, 4)], 9);
        assert_eq!(got, vec![(7, 4, 9, 0, false, false, None)]);
    }

    #[test]
    fn parents_are_in_the_frames_own_context() {
        // Request 1 (ctx 1) on thread 1; inside it a frame of another context (10) starts,
        // then one of ctx 1 again; a frame of ctx 1 on thread 2 has no ctx-1 frame open
        // there: its parent is the root.
        let got = run(
            &[
                ('s', 1, 1, 0),
                ('s', 10, 10, 1),
                ('s', 2, 1, 2),
                ('e', 2, 0, 3),
                ('e', 10, 0, 4),
                ('S', 3, 1, 5),
                ('e', 3, 0, 6),
                ('s', 11, 10, 7),
                ('e', 11, 0, 8),
                ('e', 1, 0, 9),
            ],
            9,
        );
        let parent = |id| got.iter().find(|r| r.0 == id).unwrap().6;
        assert_eq!(parent(1), None);
        assert_eq!(parent(10), None);
        assert_eq!(parent(2), Some(1), "not frame 10, of another context");
        assert_eq!(parent(3), Some(1));
        assert_eq!(parent(11), Some(10), "its root, ended: not frame 1");
    }

    /// A start or end: ('s', id, context, parent, thread, time) or ('e', id, 0, _, 0, time).
    type Ev = (char, u32, u32, Parent, u32, u64);

    /// (id, thread, lane, parent id, parent inferred, under parent), in release order.
    fn run_parents(events: &[Ev], last: u64) -> Vec<(u32, u32, u32, Option<u32>, bool, bool)> {
        let mut t = Tracks::default();
        let mut got = Vec::new();
        let mut out = |d: Done<()>| {
            got.push((
                d.key.id,
                d.thread.1,
                d.lane,
                d.parent.map(|p| p.id),
                d.parent_inferred,
                d.under_parent,
            ))
        };
        for &(what, id, ctx, parent, thread, ts) in events {
            match what {
                's' => t.start(k(id), (0, thread), ctx, parent, ts, (), &mut out),
                _ => t.end(k(id), ts, &mut out),
            }
        }
        t.finish(last, &mut out);
        got
    }

    #[test]
    fn a_recorded_parent_is_the_parent_and_only_it_encloses_its_children() {
        use Parent::{Frame as P, Root};
        // Thread 1 runs X [0,100] (context 50). Request R [5,80] (context 10) runs on thread
        // 2; its child C [20,30] runs on thread 1, inside X in time; C's child D [22,25]
        // too. G [85,86] names parent 999, which is not in the log. Q [40,45] is a child of
        // X on thread 1.
        let got = run_parents(
            &[
                ('s', 50, 50, Root, 1, 0),
                ('s', 10, 10, Root, 2, 5),
                ('s', 20, 10, P(10), 1, 20),
                ('s', 21, 10, P(20), 1, 22),
                ('e', 21, 0, Root, 0, 25),
                ('e', 20, 0, Root, 0, 30),
                ('s', 30, 50, P(50), 1, 40),
                ('e', 30, 0, Root, 0, 45),
                ('e', 10, 0, Root, 0, 80),
                ('s', 40, 10, P(999), 2, 85),
                ('e', 40, 0, Root, 0, 86),
                ('e', 50, 0, Root, 0, 100),
            ],
            100,
        );
        let row = |id| *got.iter().find(|r| r.0 == id).unwrap();
        assert_eq!(row(50), (50, 1, 0, None, false, false));
        assert_eq!(row(10), (10, 2, 0, None, false, false));
        assert_eq!(
            row(20),
            (20, 1, 1, Some(10), false, false),
            "not inside X: on a lane where nothing encloses it, its parent elsewhere"
        );
        assert_eq!(row(21), (21, 1, 1, Some(20), false, true), "inside C");
        assert_eq!(row(30), (30, 1, 0, Some(50), false, true), "inside X");
        assert_eq!(
            row(40),
            (40, 2, 0, Some(999), false, false),
            "its parent, absent, is not replaced by another"
        );
        // The same log without recorded parents: nested by time, parents inferred.
        let old: Vec<Ev> = [
            ('s', 50, 50, 1, 0),
            ('s', 10, 10, 2, 5),
            ('s', 20, 10, 1, 20),
            ('s', 21, 10, 1, 22),
            ('e', 21, 0, 0, 25),
            ('e', 20, 0, 0, 30),
            ('e', 10, 0, 0, 80),
            ('e', 50, 0, 0, 100),
        ]
        .into_iter()
        .map(|(w, id, c, th, ts)| (w, id, c, Parent::NotRecorded, th, ts))
        .collect();
        let got = run_parents(&old, 100);
        let row = |id| *got.iter().find(|r| r.0 == id).unwrap();
        assert_eq!(
            row(20),
            (20, 1, 0, Some(10), true, false),
            "inside X, as before"
        );
        assert_eq!(row(21), (21, 1, 0, Some(20), true, true));
    }

    #[test]
    fn siblings_open_together_get_lanes_of_their_own_and_a_child_outliving_its_parent_too() {
        use Parent::{Frame as P, Root};
        // R [0,100] with children A [10,50] and B [20,40] open together (B is not A's
        // child), and S [60,120] outliving R; A's child A1 [12,14].
        let got = run_parents(
            &[
                ('s', 1, 1, Root, 1, 0),
                ('s', 2, 1, P(1), 1, 10),
                ('s', 3, 1, P(2), 1, 12),
                ('e', 3, 0, Root, 0, 14),
                ('s', 4, 1, P(1), 1, 20),
                ('e', 4, 0, Root, 0, 40),
                ('e', 2, 0, Root, 0, 50),
                ('s', 5, 1, P(1), 1, 60),
                ('e', 1, 0, Root, 0, 100),
                ('e', 5, 0, Root, 0, 120),
            ],
            120,
        );
        let row = |id| *got.iter().find(|r| r.0 == id).unwrap();
        assert_eq!(row(2), (2, 1, 0, Some(1), false, true));
        assert_eq!(row(3), (3, 1, 0, Some(2), false, true));
        assert_eq!(row(4), (4, 1, 1, Some(1), false, false), "not inside A");
        assert_eq!(row(5), (5, 1, 1, Some(1), false, false), "outlives R");
    }

    #[test]
    fn random_async_trees_on_two_threads_nest_only_in_real_parents() {
        // Frames of random trees started on either thread while their parent is open, each
        // thread's starts in time order, ends written at their time; some parents absent.
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        // (id, parent, thread, start, end)
        let mut frames: Vec<(u32, Parent, u32, u64, u64)> = Vec::new();
        for id in 1..=400u32 {
            let start = u64::from(id) * 10;
            let open: Vec<_> = frames
                .iter()
                .filter(|f| f.3 < start && f.4 > start)
                .map(|f| f.0)
                .collect();
            let parent = match next(5) {
                0 => Parent::Root,
                1 => Parent::Frame(10_000 + id), // not in the log
                _ if !open.is_empty() => Parent::Frame(open[next(open.len() as u64) as usize]),
                _ => Parent::Root,
            };
            let end = start + 1 + next(600);
            frames.push((id, parent, 1 + next(2) as u32, start, end));
        }
        let mut evs: Vec<(u64, Ev)> = Vec::new();
        for &(id, parent, thread, start, end) in &frames {
            evs.push((start, ('s', id, 1, parent, thread, start)));
            evs.push((end, ('e', id, 0, Parent::Root, 0, end)));
        }
        evs.sort_by_key(|e| (e.0, e.1.0 == 's'));
        let evs: Vec<Ev> = evs.into_iter().map(|e| e.1).collect();
        let got = run_parents(&evs, 10_000);
        assert_eq!(got.len(), frames.len());
        let info: FxHashMap<u32, (u64, u64)> = frames.iter().map(|f| (f.0, (f.3, f.4))).collect();
        // Per (thread, lane), in release order: the innermost open frame is the parent of a
        // frame under its parent, and nothing is open around any other frame.
        let mut stacks: FxHashMap<(u32, u32), Vec<(u32, u64)>> = FxHashMap::default();
        let mut under = 0;
        for &(id, thread, lane, parent, inferred, under_parent) in &got {
            assert!(!inferred);
            let want = frames.iter().find(|f| f.0 == id).unwrap().1;
            assert_eq!(parent, want.id(), "{id}: the recorded parent");
            let (s, e) = info[&id];
            let stack = stacks.entry((thread, lane)).or_default();
            while stack.last().is_some_and(|&(_, pe)| !still_open(pe, s, e)) {
                stack.pop();
            }
            match stack.last() {
                Some(&(p, pe)) => {
                    assert!(
                        under_parent && Some(p) == parent && e <= pe,
                        "{id} inside {p}"
                    );
                    under += 1;
                }
                None => assert!(!under_parent, "{id}"),
            }
            stack.push((id, e));
        }
        assert!(under > 20, "only {under} frames under their parent");
    }

    #[test]
    fn a_frame_open_too_long_goes_async_and_the_rest_is_released() {
        let mut t = Tracks::default();
        t.set_max_held(4);
        let got = std::cell::RefCell::new(Vec::new());
        let mut out = |d: Done<()>| got.borrow_mut().push((d.key.id, d.async_track));
        t.start(k(1), (0, 1), 1, Parent::NotRecorded, 0, (), &mut out);
        for i in 0..10u32 {
            t.start(
                k(10 + i),
                (0, 1),
                1,
                Parent::NotRecorded,
                1 + u64::from(i) * 2,
                (),
                &mut out,
            );
            t.end(k(10 + i), 2 + u64::from(i) * 2, &mut out);
        }
        assert!(
            got.borrow().len() >= 6,
            "released while frame 1 is open: {got:?}"
        );
        t.end(k(1), 100, &mut out);
        t.finish(100, &mut out);
        let got = got.into_inner();
        assert_eq!(got.len(), 11);
        assert_eq!(got.iter().filter(|g| g.1).collect::<Vec<_>>(), [&(1, true)]);
    }

    #[test]
    fn many_random_async_frames_nest_on_their_lanes_each_exactly_once() {
        // Frames on one thread starting in time order and ending in any order, some ends
        // written before their starts.
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut events = Vec::new();
        let mut ends = Vec::new();
        for id in 1..=300u32 {
            let s = u64::from(id) * 10;
            let e = s + next() % 3000;
            ends.push((e, id));
            if next() % 10 == 0 {
                events.insert(0, ('e', id, 0, e));
            }
            events.push(('s', id, 1 + id % 7, s));
        }
        // Ends interleaved with later starts, in end order.
        let mut all: Vec<(u64, (char, u32, u32, u64))> = events
            .iter()
            .map(|&ev| (if ev.0 == 's' { ev.3 } else { 0 }, ev))
            .collect();
        for (e, id) in ends {
            if !events.iter().any(|x| x.0 == 'e' && x.1 == id) {
                all.push((e, ('e', id, 0, e)));
            }
        }
        all.sort_by_key(|a| a.0);
        let evs: Vec<_> = all.into_iter().map(|a| a.1).collect();
        let got = run(&evs, 10_000);
        assert_eq!(got.len(), 300);
        let mut ids: Vec<u32> = got.iter().map(|g| g.0).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 300, "each frame once");
        assert_nested(&got);
    }
}
