//! The flamegraph model: frames indexed into lanes (worker + thread) and rows (depth), in
//! plain Rust with no drawing, so tests and benchmarks can drive it without a window.
//!
//! Records are applied in file order ([`Model::apply`]). FrameStart and FrameEnd pair by
//! `(worker, id)`; an end that arrives before its start waits in a small map. A start goes to
//! the lane of the thread its worker last announced (ThreadInfo), on the lowest row above its
//! parent (the most recently started, still running frame of the same context in that lane)
//! that is free at its start time. Rows therefore never hold overlapping frames, so each row is
//! sorted by start *and* by end, which is what the level-of-detail query ([`lod`]) and the
//! hit test ([`hit`]) binary-search on. Concurrent async frames of one context land on
//! separate rows instead of being drawn over each other.
//!
//! Storage is struct-of-arrays per row: start, end, child time (u64 each), label id, context,
//! frame id (u32 each) and category (u8) — 37 bytes per frame, labels interned once.

pub mod contexts;
pub mod hit;
pub mod intern;
pub mod lod;
pub mod search;
pub mod stats;

use formats::{Category, FrameEnd, FrameKey, FrameStart, Record};
use framelog::pairing::Pairing;
use rustc_hash::{FxBuildHasher, FxHashMap};

use contexts::Contexts;
use intern::Interner;
use stats::Stats;

/// End time of a frame whose FrameEnd has not been seen yet ("open", drawn to the newest time).
pub const OPEN: u64 = u64::MAX;

/// Thread number used for records a worker wrote before announcing any thread.
pub const UNKNOWN_THREAD: u32 = u32::MAX;

/// Where one frame lives in the model: lane, row (depth) and index within the row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameRef {
    /// Lane index (see [`Model::lanes`]).
    pub lane: u32,
    /// Row within the lane (0 = top level).
    pub row: u32,
    /// Index within the row (rows are sorted by start time).
    pub index: u32,
}

/// The frames of one row of one lane, sorted by start and never overlapping.
#[derive(Default, Debug)]
pub struct Row {
    /// Start times, ns since the Unix epoch.
    pub start: Vec<u64>,
    /// End times ([`OPEN`] while unknown; only the last frame of a row can be open).
    pub end: Vec<u64>,
    /// Summed durations of the frame's direct children (for self time).
    pub child_ns: Vec<u64>,
    /// Interned label ids.
    pub label: Vec<u32>,
    /// Context values.
    pub context: Vec<u32>,
    /// Frame ids (with the lane's worker, the frame's key).
    pub id: Vec<u32>,
    /// Category bytes.
    pub category: Vec<u8>,
    /// Level-of-detail summary: for aligned blocks of 16, 256, 4096 and 65,536 frames, the
    /// largest gap before a frame and the largest duration in the block (ns, saturating at
    /// `u32::MAX`), so a merged run can skip whole blocks (see [`lod`]).
    pub summary: [Vec<(u32, u32)>; SUMMARY_LEVELS],
}

/// Levels of the per-row summary (block sizes 16, 256, 4096, 65,536).
pub const SUMMARY_LEVELS: usize = 4;
/// log2 of the block size ratio between summary levels.
pub const SUMMARY_SHIFT: u32 = 4;

#[inline]
fn sat32(v: u64) -> u32 {
    v.min(u32::MAX as u64) as u32
}

impl Row {
    /// Number of frames in the row.
    #[inline]
    pub fn len(&self) -> usize {
        self.start.len()
    }

    /// True if the row holds no frame.
    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }

    /// True if a frame starting at `t` can be appended (the last frame ended by `t`).
    #[inline]
    fn free_at(&self, t: u64) -> bool {
        match self.end.last() {
            None => true,
            Some(&e) => e != OPEN && e <= t && self.start.last().is_none_or(|&s| s <= t),
        }
    }

    /// Summarizes the block of 16 frames ending just before index `len` (all of them are
    /// closed: a frame is only appended after the row's last frame ended), and cascades.
    fn summarize(&mut self, len: usize) {
        let a = len - 16;
        let (mut g, mut d) = (0u64, 0u64);
        for f in a..len {
            if f > 0 {
                g = g.max(self.start[f].saturating_sub(self.end[f - 1]));
            }
            d = d.max(self.end[f].saturating_sub(self.start[f]));
        }
        self.summary[0].push((sat32(g), sat32(d)));
        for lvl in 0..SUMMARY_LEVELS - 1 {
            let n = self.summary[lvl].len();
            if !n.is_multiple_of(1 << SUMMARY_SHIFT) {
                break;
            }
            let (g, d) = self.summary[lvl][n - (1 << SUMMARY_SHIFT)..]
                .iter()
                .fold((0, 0), |(g, d), &(bg, bd)| (g.max(bg), d.max(bd)));
            self.summary[lvl + 1].push((g, d));
        }
    }

    #[inline]
    fn push(&mut self, start: u64, end: u64, label: u32, context: u32, id: u32, cat: u8) -> u32 {
        let len = self.start.len();
        if len > 0 && len.is_multiple_of(16) {
            self.summarize(len);
        }
        let i = len as u32;
        self.start.push(start);
        self.end.push(end);
        self.child_ns.push(0);
        self.label.push(label);
        self.context.push(context);
        self.id.push(id);
        self.category.push(cat);
        i
    }

    /// End of frame `i`, with open frames ending at `newest`.
    #[inline]
    pub fn end_or(&self, i: usize, newest: u64) -> u64 {
        let e = self.end[i];
        if e == OPEN {
            newest.max(self.start[i])
        } else {
            e
        }
    }

    /// Heap bytes held by the row's arrays.
    pub fn heap_bytes(&self) -> usize {
        self.start.capacity() * 8
            + self.end.capacity() * 8
            + self.child_ns.capacity() * 8
            + self.label.capacity() * 4
            + self.context.capacity() * 4
            + self.id.capacity() * 4
            + self.category.capacity()
            + self.summary.iter().map(|v| v.capacity() * 8).sum::<usize>()
    }
}

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
}

impl StartRec {
    /// The compact form of `s`, whose label was interned as `label`.
    pub fn new(s: &FrameStart<'_>, label: u32) -> Self {
        Self {
            worker: s.worker,
            id: s.id,
            timestamp: s.timestamp,
            context: s.context,
            category: s.category.0,
            label,
        }
    }
}

/// A frame that may still be running in a lane (a parent candidate for new frames).
#[derive(Clone, Copy, Debug)]
struct Active {
    start: u64,
    context: u32,
    at: FrameRef,
}

/// One lane: the frames one worker recorded on one thread.
#[derive(Debug)]
pub struct Lane {
    /// Worker (writing process) id.
    pub worker: u8,
    /// Thread number within the process ([`UNKNOWN_THREAD`] if never announced).
    pub thread: u32,
    /// Thread name from the ThreadInfo record (may be empty).
    pub thread_name: String,
    /// Rows by depth.
    pub rows: Vec<Row>,
    active: Vec<Active>,
    last_context: Option<(u64, u32)>,
}

impl Lane {
    /// Number of frames in the lane.
    pub fn frame_count(&self) -> usize {
        self.rows.iter().map(Row::len).sum()
    }
}

/// What the model knows about one worker (writing process).
#[derive(Clone, Debug, Default)]
pub struct Worker {
    /// Process name from WorkerInfo (empty until seen).
    pub name: String,
    /// Operating-system process id (0 until seen).
    pub pid: u32,
    /// Records this worker reported as dropped.
    pub dropped: u64,
    current_lane: Option<u32>,
}

#[derive(Clone, Copy, Debug)]
struct OpenFrame {
    at: FrameRef,
    parent: Option<FrameRef>,
}

/// Everything about one frame, gathered for tooltips and the data panel.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameInfo {
    /// The frame's key (worker, id), used to look its data up.
    pub key: FrameKey,
    /// Label text.
    pub label: String,
    /// Category.
    pub category: Category,
    /// Start, ns since the Unix epoch.
    pub start: u64,
    /// End, `None` while open.
    pub end: Option<u64>,
    /// Duration in ns (open frames: up to the newest time seen).
    pub duration: u64,
    /// Duration minus direct children's durations.
    pub self_ns: u64,
    /// Context value.
    pub context: u32,
    /// Where it is drawn.
    pub at: FrameRef,
    /// Thread number of its lane.
    pub thread: u32,
}

#[inline]
fn key(worker: u8, id: u32) -> FrameKey {
    FrameKey::new(worker, id)
}

/// The whole indexed log (see the module docs).
#[derive(Debug)]
pub struct Model {
    labels: Interner,
    lanes: Vec<Lane>,
    lane_map: FxHashMap<(u8, u32), u32>,
    workers: Vec<Worker>,
    /// Start/end pairing (the rule every reader shares); the open frames wait in it.
    pairing: Pairing<OpenFrame, FxBuildHasher>,
    contexts: Contexts,
    stats: Stats,
    min_time: u64,
    max_time: u64,
    frames: u64,
    closed: u64,
    dropped: u64,
    records: u64,
    generation: u64,
}

impl Default for Model {
    fn default() -> Self {
        Self::new()
    }
}

impl Model {
    /// An empty model.
    pub fn new() -> Self {
        Self {
            labels: Interner::default(),
            lanes: Vec::new(),
            lane_map: FxHashMap::default(),
            workers: vec![Worker::default(); 256],
            pairing: Pairing::new(),
            contexts: Contexts::default(),
            stats: Stats::default(),
            min_time: u64::MAX,
            max_time: 0,
            frames: 0,
            closed: 0,
            dropped: 0,
            records: 0,
            generation: 0,
        }
    }

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
            }
            Record::ThreadInfo(t) => {
                let lane = self.lane_for(t.worker, t.thread);
                if !t.name.is_empty() && self.lanes[lane as usize].thread_name != t.name {
                    self.lanes[lane as usize].thread_name = t.name.to_owned();
                }
                self.workers[t.worker as usize].current_lane = Some(lane);
            }
            Record::Unknown(_) => {}
        }
    }

    /// Interns a label (labels must be interned in the order the ids were handed out by the
    /// caller's own interner when it uses [`Model::apply_start`]).
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
            last_context: None,
        });
        self.lane_map.insert((worker, thread), l);
        l
    }

    #[inline]
    fn touch(&mut self, t: u64) {
        self.min_time = self.min_time.min(t);
        self.max_time = self.max_time.max(t);
    }

    fn start(&mut self, s: &FrameStart<'_>) {
        let label = self.labels.intern(s.label);
        self.start_interned(&StartRec::new(s, label));
    }

    fn start_interned(&mut self, s: &StartRec) {
        let k = key(s.worker, s.id);
        self.touch(s.timestamp);
        let lane_id = match self.workers[s.worker as usize].current_lane {
            Some(l) => l,
            None => {
                let l = self.lane_for(s.worker, UNKNOWN_THREAD);
                self.workers[s.worker as usize].current_lane = Some(l);
                l
            }
        };
        let label = s.label;
        let end = self.pairing.take_early_end(k).map(|e| e.max(s.timestamp));
        let t = s.timestamp;
        let lane = &mut self.lanes[lane_id as usize];
        let Lane { rows, active, .. } = lane;
        // Forget frames that ended by now: they cannot contain this one.
        active.retain(|a| {
            let e = rows[a.at.row as usize].end[a.at.index as usize];
            e == OPEN || e > t
        });
        // The parent: the most recently started running frame of the same context.
        let mut parent: Option<Active> = None;
        for a in active.iter() {
            if a.context != s.context || a.start > t {
                continue;
            }
            if let Some(e) = end {
                let pe = rows[a.at.row as usize].end[a.at.index as usize];
                if pe != OPEN && pe < e {
                    continue;
                }
            }
            if parent.is_none_or(|p| (a.start, a.at.row) > (p.start, p.at.row)) {
                parent = Some(*a);
            }
        }
        let min_row = parent.map_or(0, |p| p.at.row as usize + 1);
        let row = match (min_row..rows.len()).find(|&r| rows[r].free_at(t)) {
            Some(r) => r,
            None => {
                rows.push(Row::default());
                rows.len() - 1
            }
        };
        let index = rows[row].push(t, end.unwrap_or(OPEN), label, s.context, s.id, s.category);
        let at = FrameRef {
            lane: lane_id,
            row: row as u32,
            index,
        };
        active.push(Active {
            start: t,
            context: s.context,
            at,
        });
        let parent = parent.map(|p| p.at);
        self.frames += 1;
        let cache = &mut self.lanes[lane_id as usize].last_context;
        self.contexts
            .on_start(s.worker, s.context, s.id, at, t, cache);
        match end {
            Some(e) => self.close(at, parent, e),
            None => {
                self.pairing.wait_for_end(k, t, OpenFrame { at, parent });
            }
        }
    }

    fn end(&mut self, e: &FrameEnd) {
        self.touch(e.timestamp);
        let k = key(e.worker, e.id);
        if let Some(f) = self.pairing.end(k, e.timestamp) {
            let of = f.start_info;
            self.close(of.at, of.parent, e.timestamp.max(f.start_ns));
        }
    }

    fn close(&mut self, at: FrameRef, parent: Option<FrameRef>, end: u64) {
        let row = &mut self.lanes[at.lane as usize].rows[at.row as usize];
        let i = at.index as usize;
        row.end[i] = end;
        let dur = end - row.start[i];
        let label = row.label[i];
        self.stats.on_close(label, dur);
        if let Some(p) = parent {
            let prow = &mut self.lanes[p.lane as usize].rows[p.row as usize];
            prow.child_ns[p.index as usize] += dur;
            let plabel = prow.label[p.index as usize];
            self.stats.on_child(plabel, dur);
        }
        self.closed += 1;
    }

    /// The row a frame reference points into.
    #[inline]
    pub fn row(&self, at: FrameRef) -> &Row {
        &self.lanes[at.lane as usize].rows[at.row as usize]
    }

    /// All lanes, in creation order (see [`Model::lane_order`] for display order).
    pub fn lanes(&self) -> &[Lane] {
        &self.lanes
    }

    /// Lane indices sorted for display: by worker, then thread number.
    pub fn lane_order(&self) -> Vec<u32> {
        let mut v: Vec<u32> = (0..self.lanes.len() as u32).collect();
        v.sort_by_key(|&l| {
            let lane = &self.lanes[l as usize];
            (lane.worker, lane.thread)
        });
        v
    }

    /// What is known about worker `w`.
    pub fn worker(&self, w: u8) -> &Worker {
        &self.workers[w as usize]
    }

    /// A lane's title: process name (pid) and thread name/number.
    pub fn lane_title(&self, lane: u32) -> String {
        let l = &self.lanes[lane as usize];
        let w = &self.workers[l.worker as usize];
        let process = if w.name.is_empty() {
            format!("worker {}", l.worker)
        } else {
            format!("{} (pid {})", w.name, w.pid)
        };
        let thread = match (l.thread, l.thread_name.is_empty()) {
            (UNKNOWN_THREAD, _) => "thread ?".to_owned(),
            (t, true) => format!("thread {t}"),
            (t, false) => format!("{} ({t})", l.thread_name),
        };
        format!("{process} · {thread}")
    }

    /// The label interner.
    pub fn labels(&self) -> &Interner {
        &self.labels
    }

    /// Per-label statistics.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The contexts (units of work) seen so far.
    pub fn contexts(&self) -> &Contexts {
        &self.contexts
    }

    /// Frames started so far (open and closed).
    pub fn frame_count(&self) -> u64 {
        self.frames
    }

    /// Frames whose end has been seen.
    pub fn closed_count(&self) -> u64 {
        self.closed
    }

    /// Frames still open (started, no end yet).
    pub fn open_count(&self) -> u64 {
        self.frames - self.closed
    }

    /// Records applied so far.
    pub fn record_count(&self) -> u64 {
        self.records
    }

    /// Records reported dropped by all workers.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Changes whenever a record is applied (for caches).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Earliest and newest timestamps seen, or `None` if no frame yet.
    pub fn time_range(&self) -> Option<(u64, u64)> {
        (self.min_time <= self.max_time).then_some((self.min_time, self.max_time))
    }

    /// The newest timestamp seen (0 if none): open frames are drawn up to it.
    pub fn newest(&self) -> u64 {
        self.max_time
    }

    /// Gathers everything about one frame.
    pub fn info(&self, at: FrameRef) -> Option<FrameInfo> {
        let lane = self.lanes.get(at.lane as usize)?;
        let row = lane.rows.get(at.row as usize)?;
        let i = at.index as usize;
        if i >= row.len() {
            return None;
        }
        let start = row.start[i];
        let end = (row.end[i] != OPEN).then_some(row.end[i]);
        let duration = row.end_or(i, self.max_time) - start;
        Some(FrameInfo {
            key: FrameKey::new(lane.worker, row.id[i]),
            label: self.labels.name(row.label[i]).to_owned(),
            category: Category(row.category[i]),
            start,
            end,
            duration,
            self_ns: duration.saturating_sub(row.child_ns[i]),
            context: row.context[i],
            at,
            thread: lane.thread,
        })
    }

    /// Finds a frame by key (linear scan; for tests and tools, not per-frame UI work).
    pub fn find(&self, k: FrameKey) -> Option<FrameRef> {
        for (li, lane) in self.lanes.iter().enumerate() {
            if lane.worker != k.worker {
                continue;
            }
            for (ri, row) in lane.rows.iter().enumerate() {
                if let Some(i) = row.id.iter().position(|&id| id == k.id) {
                    return Some(FrameRef {
                        lane: li as u32,
                        row: ri as u32,
                        index: i as u32,
                    });
                }
            }
        }
        None
    }

    /// Calls `f` for every frame (in lane, row, start order).
    pub fn for_each_frame(&self, mut f: impl FnMut(FrameRef, &Row, usize)) {
        for (li, lane) in self.lanes.iter().enumerate() {
            for (ri, row) in lane.rows.iter().enumerate() {
                for i in 0..row.len() {
                    let at = FrameRef {
                        lane: li as u32,
                        row: ri as u32,
                        index: i as u32,
                    };
                    f(at, row, i);
                }
            }
        }
    }

    /// Heap bytes held by the model (frames, maps, labels, statistics, contexts).
    pub fn heap_bytes(&self) -> usize {
        let rows: usize = self
            .lanes
            .iter()
            .flat_map(|l| l.rows.iter())
            .map(Row::heap_bytes)
            .sum();
        let maps = self.pairing.heap_bytes();
        rows + maps
            + self.labels.heap_bytes()
            + self.stats.heap_bytes()
            + self.contexts.heap_bytes()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use formats::{ThreadInfo, WorkerInfo};

    /// Builds encoded records tersely for tests.
    #[derive(Default)]
    pub struct Log {
        pub bytes: Vec<u8>,
    }

    impl Log {
        pub fn start(&mut self, w: u8, id: u32, ts: u64, ctx: u32, label: &str) -> &mut Self {
            self.start_cat(w, id, ts, ctx, label, Category::FUNCTION)
        }
        pub fn start_cat(
            &mut self,
            w: u8,
            id: u32,
            ts: u64,
            ctx: u32,
            label: &str,
            cat: Category,
        ) -> &mut Self {
            Record::Start(FrameStart {
                id,
                worker: w,
                timestamp: ts,
                context: ctx,
                category: cat,
                label,
            })
            .encode_to_vec(&mut self.bytes);
            self
        }
        pub fn end(&mut self, w: u8, id: u32, ts: u64) -> &mut Self {
            Record::End(FrameEnd {
                id,
                worker: w,
                timestamp: ts,
            })
            .encode_to_vec(&mut self.bytes);
            self
        }
        pub fn thread(&mut self, w: u8, thread: u32, name: &str) -> &mut Self {
            Record::ThreadInfo(ThreadInfo {
                worker: w,
                thread,
                timestamp: 0,
                name,
            })
            .encode_to_vec(&mut self.bytes);
            self
        }
        pub fn worker(&mut self, w: u8, pid: u32, name: &str) -> &mut Self {
            Record::WorkerInfo(WorkerInfo {
                worker: w,
                timestamp: 0,
                pid,
                name,
            })
            .encode_to_vec(&mut self.bytes);
            self
        }
        pub fn model(&self) -> Model {
            let mut m = Model::new();
            m.apply_bytes(&self.bytes);
            m
        }
    }

    pub fn at(lane: u32, row: u32, index: u32) -> FrameRef {
        FrameRef { lane, row, index }
    }

    #[test]
    fn nested_frames_stack_by_depth() {
        let mut l = Log::default();
        l.worker(0, 42, "app").thread(0, 1, "main");
        l.start(0, 1, 100, 1, "request")
            .start(0, 2, 110, 1, "db/query")
            .end(0, 2, 150)
            .start(0, 3, 160, 1, "template")
            .start(0, 4, 170, 1, "inner")
            .end(0, 4, 180)
            .end(0, 3, 190)
            .end(0, 1, 200);
        let m = l.model();
        assert_eq!(m.frame_count(), 4);
        assert_eq!(m.open_count(), 0);
        let lane = &m.lanes()[0];
        assert_eq!(lane.rows.len(), 3);
        assert_eq!(lane.rows[0].len(), 1);
        assert_eq!(lane.rows[1].len(), 2);
        assert_eq!(lane.rows[2].len(), 1);
        let root = m.info(at(0, 0, 0)).unwrap();
        assert_eq!(root.label, "request");
        assert_eq!(root.duration, 100);
        assert_eq!(root.self_ns, 100 - 40 - 30);
        let tpl = m.info(at(0, 1, 1)).unwrap();
        assert_eq!(tpl.self_ns, 30 - 10);
        assert_eq!(m.lane_title(0), "app (pid 42) · main (1)");
        assert_eq!(m.time_range(), Some((100, 200)));
    }

    #[test]
    fn end_before_start_pairs_by_key() {
        let mut l = Log::default();
        l.end(0, 7, 500).start(0, 7, 100, 7, "moved");
        let m = l.model();
        let f = m.info(at(0, 0, 0)).unwrap();
        assert_eq!(f.end, Some(500));
        assert_eq!(f.duration, 400);
        assert_eq!(m.open_count(), 0);
    }

    #[test]
    fn open_frames_extend_to_newest_time() {
        let mut l = Log::default();
        l.start(0, 1, 100, 1, "running")
            .start(0, 2, 120, 1, "child")
            .end(0, 2, 400);
        let m = l.model();
        assert_eq!(m.open_count(), 1);
        let f = m.info(at(0, 0, 0)).unwrap();
        assert_eq!(f.end, None);
        assert_eq!(f.duration, 300);
    }

    #[test]
    fn threads_get_their_own_lanes_and_workers_are_separate() {
        let mut l = Log::default();
        l.thread(0, 1, "main")
            .start(0, 1, 100, 1, "a")
            .thread(0, 2, "pool-1")
            .start(0, 2, 105, 2, "b")
            .end(0, 2, 150)
            .thread(0, 1, "main")
            .end(0, 1, 200)
            .thread(1, 1, "main")
            .start(1, 1, 100, 1, "c")
            .end(1, 1, 120);
        let m = l.model();
        assert_eq!(m.lanes().len(), 3);
        let order: Vec<(u8, u32)> = m
            .lane_order()
            .iter()
            .map(|&i| (m.lanes()[i as usize].worker, m.lanes()[i as usize].thread))
            .collect();
        assert_eq!(order, vec![(0, 1), (0, 2), (1, 1)]);
        // Both roots sit on row 0 of their own lanes.
        for lane in m.lanes() {
            assert_eq!(lane.rows.len(), 1);
        }
        assert_eq!(m.info(at(2, 0, 0)).unwrap().key, FrameKey::new(1, 1));
    }

    #[test]
    fn concurrent_async_frames_of_one_context_get_separate_rows() {
        // One request (context 1) runs two queries concurrently on the same thread.
        let mut l = Log::default();
        l.start(0, 1, 0, 1, "request")
            .start(0, 2, 10, 1, "query A")
            .start(0, 3, 20, 1, "query B")
            .end(0, 2, 50)
            .start(0, 4, 30, 1, "child of B")
            .end(0, 4, 40)
            .end(0, 3, 60)
            .end(0, 1, 100);
        let m = l.model();
        let rows = &m.lanes()[0].rows;
        // No row holds overlapping frames.
        for row in rows {
            for i in 1..row.len() {
                assert!(row.end[i - 1] <= row.start[i]);
            }
        }
        let a = m.find(FrameKey::new(0, 2)).unwrap();
        let b = m.find(FrameKey::new(0, 3)).unwrap();
        let c = m.find(FrameKey::new(0, 4)).unwrap();
        assert_eq!(a.row, 1);
        assert_eq!(b.row, 2);
        assert!(c.row > b.row, "child drawn above its parent");
    }

    #[test]
    fn later_siblings_reuse_rows() {
        let mut l = Log::default();
        l.start(0, 1, 0, 1, "root");
        for i in 0..10u32 {
            l.start(0, 10 + i, 10 + i as u64 * 10, 1, "step")
                .end(0, 10 + i, 15 + i as u64 * 10);
        }
        l.end(0, 1, 200);
        let m = l.model();
        assert_eq!(m.lanes()[0].rows.len(), 2);
        assert_eq!(m.lanes()[0].rows[1].len(), 10);
        assert_eq!(m.info(at(0, 0, 0)).unwrap().self_ns, 200 - 50);
    }

    #[test]
    fn heap_bytes_per_frame_is_compact() {
        let mut l = Log::default();
        let mut id = 0;
        for r in 0..2000u64 {
            id += 1;
            let root = id;
            l.start(0, root, r * 100, root, "request");
            for c in 0..4u64 {
                id += 1;
                l.start(0, id, r * 100 + c * 20 + 1, root, "child").end(
                    0,
                    id,
                    r * 100 + c * 20 + 10,
                );
            }
            l.end(0, root, r * 100 + 99);
        }
        let m = l.model();
        let per = m.heap_bytes() as f64 / m.frame_count() as f64;
        assert!(per < 64.0, "{per} bytes/frame");
    }
}
