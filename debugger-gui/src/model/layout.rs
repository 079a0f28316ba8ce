//! The flamegraph layout: records applied in file order become frames placed in lanes and
//! rows. Starts and ends pair by the rule every reader shares ([`pair`](super::pair)); a
//! start goes to the lane of the thread its worker last announced, on the lowest row above its
//! parent (recorded, or for a type 0 start the most recently started, still running frame of
//! the same context, else the context's root: `analysis::parents`) that is free at its start
//! time, so rows never hold overlapping frames.

use analysis::parents::inferred_parent;
use formats::{FrameEnd, FrameKey, FrameStart, Parent, PlotMode, PlotUnit, Record};

use super::pair::StartPair;
use super::parents::Placed;
use super::row::{Active, Lane, NewFrame, Row};
use super::{FrameRef, Model, OPEN, UNKNOWN_THREAD, calltree};

/// A FrameStart with its label already interned (the ingest thread interns labels while it
/// reads, so the model thread does not hash strings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartRec {
    /// Writing process's worker id.
    pub worker: u8,
    /// Frame id.
    pub id: u32,
    /// Start time, ns since the Unix epoch.
    pub timestamp: u64,
    /// Context value.
    pub context: u32,
    /// Category byte.
    pub category: u8,
    /// Interned label id.
    pub label: u32,
    /// Index of its context (worker and context value) from a
    /// [`ContextIndex`](super::contexts::ContextIndex).
    pub context_index: u32,
    /// The recorded parent's id when [`StartRec::parent_kind`] is [`PARENT_FRAME`].
    pub parent: u32,
    /// What the start says about its parent: [`PARENT_NOT_RECORDED`] (infer it),
    /// [`PARENT_ROOT`] or [`PARENT_FRAME`] (a byte, not a `formats::Parent`: the record stays
    /// 32 bytes).
    pub parent_kind: u8,
}

/// [`StartRec::parent_kind`]: a type 0 start; its parent is inferred from nesting on its thread.
pub const PARENT_NOT_RECORDED: u8 = 0;
/// [`StartRec::parent_kind`]: recorded as having no parent.
pub const PARENT_ROOT: u8 = 1;
/// [`StartRec::parent_kind`]: recorded with the parent [`StartRec::parent`].
pub const PARENT_FRAME: u8 = 2;

impl StartRec {
    /// The compact form of `s`, whose label was interned as `label` and whose context was
    /// indexed as `context_index`.
    pub fn new(s: &FrameStart<'_>, label: u32, context_index: u32) -> Self {
        Self {
            worker: s.worker,
            id: s.id,
            timestamp: s.timestamp,
            context: s.context,
            category: s.category.0,
            label,
            context_index,
            parent: s.parent.id().unwrap_or(0),
            parent_kind: match s.parent {
                Parent::NotRecorded => PARENT_NOT_RECORDED,
                Parent::Root => PARENT_ROOT,
                Parent::Frame(_) => PARENT_FRAME,
            },
        }
    }

    /// The parent as the record stated it.
    pub fn parent(&self) -> Parent {
        match self.parent_kind {
            PARENT_ROOT => Parent::Root,
            PARENT_FRAME => Parent::Frame(self.parent),
            _ => Parent::NotRecorded,
        }
    }
}

const _: () = assert!(std::mem::size_of::<StartRec>() == 32);

/// A frame waiting for its end, in its pairing slot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpenSlot {
    pub(crate) key: FrameKey,
    pub(crate) start_ns: u64,
    pub(crate) at: FrameRef,
    /// False once ended (the slot is free until a new start takes it).
    pub(crate) live: bool,
}

#[inline]
fn key(worker: u8, id: u32) -> FrameKey {
    FrameKey::new(worker, id)
}

impl Model {
    /// Applies every record in `bytes` (encoded frame-log records); returns records applied.
    ///
    /// Stops at a partial tail or at the first undecodable record.
    pub fn apply_bytes(&mut self, bytes: &[u8]) -> u64 {
        let mut n = 0;
        for item in formats::RecordIter::new(bytes, 0) {
            match item {
                Ok((_, rec)) => {
                    self.apply(&rec);
                    n += 1;
                }
                Err(_) => break,
            }
        }
        n
    }

    /// Applies one record.
    #[inline]
    pub fn apply(&mut self, rec: &Record<'_>) {
        self.records += 1;
        self.generation = self.generation.wrapping_add(1);
        match rec {
            Record::Start(s) => self.start(s),
            Record::End(e) => self.end(e),
            Record::Dropped(d) => {
                self.workers[d.worker as usize].dropped += d.count;
                self.dropped += d.count;
            }
            Record::WorkerInfo(w) => {
                let wk = &mut self.workers[w.worker as usize];
                wk.name = w.name.to_owned();
                wk.pid = w.pid;
                // A (new) process writes as this worker.
                wk.stopped = false;
                wk.vanished = false;
            }
            Record::ThreadInfo(t) => {
                let lane = self.lane_for(t.worker, t.thread);
                if !t.name.is_empty() && self.lanes[lane as usize].thread_name != t.name {
                    self.lanes[lane as usize].thread_name = t.name.to_owned();
                }
                self.workers[t.worker as usize].current_lane = Some(lane);
            }
            // Plots and messages are on the timeline too: its range covers them.
            Record::Plot(p) => {
                self.touch(p.timestamp);
                self.plots.push(p);
            }
            Record::Message(m) => {
                self.touch(m.timestamp);
                let lane = self.current_lane(m.worker);
                self.messages.push(m, lane);
            }
            Record::FrameAlloc(a) => self.frame_alloc(a),
            Record::FramePolls(p) => self.frame_polls(p),
            Record::SlowPoll(p) => self.slow_poll(p),
            Record::Unknown(_) => {}
        }
    }

    /// Interns a label (labels must be interned in the order the ids were handed out by the
    /// caller's own interner when it uses [`Model::apply_start`]; contexts are indexed by the
    /// caller's own [`ContextIndex`](super::contexts::ContextIndex) then).
    pub fn intern_label(&mut self, name: &str) -> u32 {
        self.labels.intern(name)
    }

    /// Applies a FrameStart whose label was interned already (see [`StartRec`]).
    #[inline]
    pub fn apply_start(&mut self, s: &StartRec) {
        self.records += 1;
        self.generation = self.generation.wrapping_add(1);
        self.start_interned(s);
    }

    /// Applies a FrameEnd.
    #[inline]
    pub fn apply_end(&mut self, e: &FrameEnd) {
        self.records += 1;
        self.generation = self.generation.wrapping_add(1);
        self.end(e);
    }

    /// Applies a FrameStart paired already by the caller's [`Pairer`](super::pair::Pairer)
    /// (whose slots this model's open frames then follow: use one pairer for all records).
    #[inline]
    pub fn apply_start_paired(&mut self, s: &StartRec, pair: StartPair) {
        self.records += 1;
        self.generation = self.generation.wrapping_add(1);
        self.place(s, pair);
    }

    /// The model's id of `worker`'s plot series `name` (for [`Model::apply_plot`]).
    pub fn intern_series(&mut self, worker: u8, name: &str) -> u32 {
        self.plots.series_id(worker, name)
    }

    /// Applies a plot value to series `series` (from [`Model::intern_series`]): what
    /// [`Model::apply`] does with a Plot record, its name looked up already.
    #[inline]
    pub fn apply_plot(&mut self, series: u32, unit: PlotUnit, mode: PlotMode, t: u64, v: f64) {
        self.records += 1;
        self.generation = self.generation.wrapping_add(1);
        self.touch(t);
        self.plots.push_value(series, unit, mode, t, v);
    }

    /// Applies a FrameEnd of `worker` at `t`, paired already: `slot` is its start's, or
    /// `None` when its start has not been seen.
    #[inline]
    pub fn apply_end_paired(&mut self, worker: u8, t: u64, slot: Option<u32>) {
        self.records += 1;
        self.generation = self.generation.wrapping_add(1);
        self.end_paired(worker, t, slot);
    }

    /// The lane of the thread `worker` announced last (created for an unknown thread if none).
    pub(super) fn current_lane(&mut self, worker: u8) -> u32 {
        match self.workers[worker as usize].current_lane {
            Some(l) => l,
            None => {
                let l = self.lane_for(worker, UNKNOWN_THREAD);
                self.workers[worker as usize].current_lane = Some(l);
                l
            }
        }
    }

    /// A frame's allocation counts: the frame still runs (the record comes right before its
    /// end), most likely among its thread's running frames; else it moved threads and is found
    /// by time.
    #[cold]
    fn frame_alloc(&mut self, a: &formats::FrameAlloc) {
        match self.running_frame(a.worker, a.id, a.timestamp) {
            Some(at) => {
                let label = self.label_of(at);
                self.allocs.add(at, label, &a.into());
            }
            None => self.allocs.unplaced(),
        }
    }

    /// Frame `id` of `worker`, running at `t`: among the running frames of the worker's
    /// current lane, else (it moved threads) found by time in its lanes.
    pub(super) fn running_frame(&mut self, worker: u8, id: u32, t: u64) -> Option<FrameRef> {
        let lane = self.current_lane(worker);
        self.lanes[lane as usize]
            .active
            .iter()
            .rev()
            .find(|x| x.id == id)
            .map(|x| FrameRef {
                lane,
                row: x.row,
                index: x.index,
            })
            .or_else(|| self.find_at(worker, id, t, lane))
    }

    /// Frame `id` of `worker` if it runs at `t` (its start at or before it, its end at or
    /// after it, or open), looked for in lane `first` and then in the worker's other lanes:
    /// one binary search per row.
    pub fn find_at(&self, worker: u8, id: u32, t: u64, first: u32) -> Option<FrameRef> {
        let others = (0..self.lanes.len() as u32).filter(|&l| l != first);
        for lane in std::iter::once(first).chain(others) {
            let Some(l) = self.lanes.get(lane as usize) else {
                continue;
            };
            if l.worker != worker {
                continue;
            }
            for (r, row) in l.rows.iter().enumerate() {
                let p = row.start_partition_point(|s| s <= t);
                // Frames of a row do not overlap; one ending exactly at `t` may sit just
                // before one starting at `t`.
                for i in (p.saturating_sub(2)..p).rev() {
                    if row.id(i) == id && (row.is_open(i) || row.end(i) >= t) {
                        return Some(FrameRef {
                            lane,
                            row: r as u32,
                            index: i as u32,
                        });
                    }
                }
            }
        }
        None
    }

    /// The frame message `e` was written in, if it is in the model.
    pub fn message_frame(&self, e: &super::messages::Entry) -> Option<FrameRef> {
        if e.frame == 0 {
            return None;
        }
        self.find_at(e.worker, e.frame, e.time, e.lane)
    }

    fn lane_for(&mut self, worker: u8, thread: u32) -> u32 {
        if let Some(&l) = self.lane_map.get(&(worker, thread)) {
            return l;
        }
        let l = self.lanes.len() as u32;
        self.lanes.push(Lane {
            worker,
            thread,
            thread_name: String::new(),
            rows: Vec::new(),
            active: Vec::new(),
        });
        self.lane_map.insert((worker, thread), l);
        l
    }

    #[inline]
    pub(super) fn touch(&mut self, t: u64) {
        self.min_time = self.min_time.min(t);
        self.max_time = self.max_time.max(t);
    }

    fn start(&mut self, s: &FrameStart<'_>) {
        let label = self.labels.intern(s.label);
        let context = self.context_index.index(s.worker, s.context);
        self.start_interned(&StartRec::new(s, label, context));
    }

    fn start_interned(&mut self, s: &StartRec) {
        let pair = self.pairer.start(key(s.worker, s.id));
        self.place(s, pair);
    }

    fn place(&mut self, s: &StartRec, pair: StartPair) {
        self.touch(s.timestamp);
        let wk = &mut self.workers[s.worker as usize];
        wk.last_time = wk.last_time.max(s.timestamp);
        let lane_id = match self.workers[s.worker as usize].current_lane {
            Some(l) => l,
            None => {
                let l = self.lane_for(s.worker, UNKNOWN_THREAD);
                self.workers[s.worker as usize].current_lane = Some(l);
                l
            }
        };
        let label = s.label;
        // Its end if it came first (then it also rules out parents that ended before it);
        // or, from the reader stage, the end that follows it (placed as a running frame: a
        // lane's records are in time order, so until that end every frame placed here
        // starts before it).
        let (end, ends_later) = match pair {
            StartPair::Ended(e) => (Some(e.max(s.timestamp)), None),
            StartPair::Waits(_) => (None, None),
            StartPair::EndsLater(e) => (None, Some(e.max(s.timestamp))),
        };
        let t = s.timestamp;
        let lane = &mut self.lanes[lane_id as usize];
        let Lane { rows, active, .. } = lane;
        // One pass: forget frames that ended by now (they cannot contain this one), and find
        // the parent, the most recently started running frame of the same context.
        let mut parent: Option<Active> = None;
        let mut kept = 0;
        for i in 0..active.len() {
            let a = active[i];
            // A known end never changes; an open one is looked up, as the frame may have
            // ended since.
            let pe = if a.end != OPEN {
                a.end
            } else {
                rows[a.row as usize].end(a.index as usize)
            };
            if pe != OPEN && pe <= t {
                continue;
            }
            active[kept] = Active { end: pe, ..a };
            kept += 1;
            if a.context != s.context || a.start > t {
                continue;
            }
            if let Some(e) = end
                && pe != OPEN
                && pe < e
            {
                continue;
            }
            if parent.is_none_or(|p| (a.start, a.row) > (p.start, p.row)) {
                parent = Some(a);
            }
        }
        active.truncate(kept);
        // A recorded parent replaces the inferred one (out of line: most logs infer). Assigned
        // in place, not moved through a tuple: on the inferred path `parent` stays where the
        // loop left it (a 32-byte copy there cost a store-forwarding stall a frame, 19 % of
        // this function on the stress log).
        let (mut far, mut far_node) = (Placed::None, calltree::ROOT);
        match s.parent_kind {
            // Inferred (`docs/FORMAT.md`, *Parents of type 0 starts*): with no frame of its
            // context running on its thread, the context's root is its parent.
            PARENT_NOT_RECORDED
                if parent.is_none()
                    && inferred_parent(FrameKey::new(s.worker, s.id), s.context, None)
                        .is_some() =>
            {
                let as_recorded = StartRec {
                    parent_kind: PARENT_FRAME,
                    parent: s.context,
                    ..*s
                };
                (parent, far, far_node) = self.recorded_parent(lane_id, &as_recorded, parent);
            }
            PARENT_NOT_RECORDED => {}
            PARENT_ROOT => parent = None,
            // The common case of a recorded parent: the inferred one (checked inline: a log
            // that records parents takes this path for nearly every frame).
            PARENT_FRAME if parent.is_some_and(|a| a.id == s.parent) => {}
            _ => (parent, far, far_node) = self.recorded_parent(lane_id, s, parent),
        }
        let Lane { rows, active, .. } = &mut self.lanes[lane_id as usize];
        let min_row = parent.map_or(0, |p| p.row as usize + 1);
        let row = match (min_row..rows.len()).find(|&r| rows[r].free_at(t)) {
            Some(r) => r,
            None => {
                rows.push(Row::default());
                rows.len() - 1
            }
        };
        let parent_node = parent.map_or(far_node, |p| rows[p.row as usize].node(p.index as usize));
        let node = self.calltree.child(parent_node, label);
        if rows[row].is_full() {
            let add = super::row_growth(self.expected_frames, self.frames, rows[row].len());
            rows[row].reserve_exact(add);
        }
        let index = rows[row].push(NewFrame {
            start: t,
            end: end.or(ends_later).unwrap_or(OPEN),
            context: s.context,
            id: s.id,
            category: s.category,
            node,
        });
        let at = FrameRef {
            lane: lane_id,
            row: row as u32,
            index,
        };
        active.push(Active {
            start: t,
            end: end.or(ends_later).unwrap_or(OPEN),
            context: s.context,
            row: row as u32,
            index,
            id: s.id,
        });
        self.frames += 1;
        self.contexts.on_start(
            s.context_index,
            s.id == s.context,
            (lane_id, row as u32, index),
            t,
        );
        self.parents.recorded += u64::from(s.parent_kind != PARENT_NOT_RECORDED);
        let placed = match parent {
            Some(p) => Placed::Below {
                row: p.row,
                index: p.index,
                same_context: p.context == s.context,
            },
            None => far,
        };
        self.link_parent(at, key(s.worker, s.id), placed);
        // A frame placed with its end was pushed with it: what is left of closing it is
        // counting it (the row is not looked up again).
        match (end.or(ends_later), pair) {
            (Some(e), StartPair::EndsLater(_)) => {
                // What its end record would have done.
                self.records += 1;
                self.touch(e);
                let wk = &mut self.workers[s.worker as usize];
                wk.last_time = wk.last_time.max(e);
                self.count_closed(node, e - t);
            }
            (Some(e), _) => self.count_closed(node, e - t),
            (None, StartPair::Waits(slot)) => {
                let slot = slot as usize;
                if slot >= self.open.len() {
                    self.open.resize(
                        slot + 1,
                        OpenSlot {
                            key: FrameKey::new(0, 0),
                            start_ns: 0,
                            at,
                            live: false,
                        },
                    );
                }
                self.open[slot] = OpenSlot {
                    key: key(s.worker, s.id),
                    start_ns: t,
                    at,
                    live: true,
                };
            }
            (None, StartPair::Ended(_) | StartPair::EndsLater(_)) => {
                unreachable!("an ended start has its end")
            }
        }
    }

    /// The parent a start recorded, where it is: running in lane `lane_id` (`inferred`, the
    /// inferred one, most often is it), elsewhere with its call-tree node, or not placed yet.
    #[cold]
    #[inline(never)]
    fn recorded_parent(
        &mut self,
        lane_id: u32,
        s: &StartRec,
        inferred: Option<Active>,
    ) -> (Option<Active>, Placed, u32) {
        let t = s.timestamp;
        let active = &self.lanes[lane_id as usize].active;
        let p = s.parent;
        let is = |a: &Active| a.id == p;
        let parent = match s.parent_kind {
            PARENT_FRAME if inferred.is_some_and(|a| is(&a)) => inferred,
            PARENT_FRAME => active.iter().copied().find(|a| a.start <= t && is(a)),
            _ => None,
        };
        if s.parent_kind != PARENT_FRAME || parent.is_some() {
            return (parent, Placed::None, calltree::ROOT);
        }
        match self.find_parent(s.worker, p, t) {
            Some(f) => (
                None,
                Placed::Elsewhere(f),
                self.row(f).node(f.index as usize),
            ),
            None => (None, Placed::Waits(key(s.worker, p)), calltree::ROOT),
        }
    }

    fn end(&mut self, e: &FrameEnd) {
        let slot = self.pairer.end(key(e.worker, e.id), e.timestamp);
        self.end_paired(e.worker, e.timestamp, slot);
    }

    fn end_paired(&mut self, worker: u8, t: u64, slot: Option<u32>) {
        self.touch(t);
        let wk = &mut self.workers[worker as usize];
        wk.last_time = wk.last_time.max(t);
        if let Some(f) = slot.and_then(|s| self.open.get_mut(s as usize))
            && f.live
        {
            f.live = false;
            let (at, start_ns) = (f.at, f.start_ns);
            self.close(at, t.max(start_ns));
        }
    }

    fn close(&mut self, at: FrameRef, end: u64) {
        let row = &mut self.lanes[at.lane as usize].rows[at.row as usize];
        let i = at.index as usize;
        row.set_end(i, end);
        let dur = end - row.start(i);
        let node = row.node(i);
        self.count_closed(node, dur);
    }

    /// A frame of call-tree node `node` closed after `dur` ns: the call tree and the
    /// statistics count it.
    #[inline]
    fn count_closed(&mut self, node: u32, dur: u64) {
        let label = self.calltree.label(node);
        self.calltree.on_close(node, dur);
        self.stats.on_close(label, dur);
        // The parent frame's label is its call-tree node's: the node of this one's parent.
        let parent = self.calltree.parent(node);
        if parent != calltree::ROOT {
            self.stats.on_child(self.calltree.label(parent), dur);
        }
        self.closed += 1;
    }
}
