//! The flamegraph model: frames indexed into lanes (worker + thread) and rows (depth), in
//! plain Rust with no drawing, so tests and benchmarks can drive it without a window.
//!
//! Records are applied in file order ([`Model::apply`]). FrameStart and FrameEnd pair by
//! `(worker, id)`; an end that arrives before its start waits in a small map. A start goes to
//! the lane of the thread its worker last announced (ThreadInfo), on the lowest row above its
//! parent that is free at its start time. Its parent is the one its start recorded (a type 6
//! start) when that frame runs in the same lane, else it is placed as a root of its lane and
//! its recorded parent, on another lane or read later, is a link ([`parents`]); a type 0
//! start's parent is inferred: the most recently started, still running frame of the same
//! context in that lane. The call tree (and with it the aggregated flame graph, sandwich,
//! statistics and compare) follows the parent, recorded or inferred. Rows never hold
//! overlapping frames, so each row is
//! sorted by start *and* by end, which is what the level-of-detail query ([`lod`]) and the
//! hit test ([`hit`]) binary-search on. Concurrent async frames of one context land on
//! separate rows instead of being drawn over each other.
//!
//! Storage per row: an array of 24-byte cells (start u64; duration, context, frame id and
//! call-tree node u32 each) and a category byte array beside it: 25 bytes per frame. A frame's label is its call-tree
//! node's, a duration past 4.29 s lives in a small side map, labels are interned once. A
//! parent costs nothing when the rows tell it (the frame below, of the same context, whose
//! call path is the child's minus its label); the others (on another thread, unknown, ...)
//! are in a side map ([`parents`]).

pub mod activity;
pub mod allocs;
pub mod calltree;
pub mod compare;
pub mod context_list;
pub mod context_tree;
pub mod contexts;
pub mod critical_path;
pub mod histogram;
pub mod hit;
pub mod intern;
mod layout;
pub mod lod;
pub mod messages;
pub mod pair;
pub mod parents;
pub mod plots;
pub mod polls;
mod row;
pub mod same;
pub mod search;
pub mod stats;
#[cfg(test)]
pub(crate) mod test_log;

pub use layout::{PARENT_FRAME, PARENT_NOT_RECORDED, PARENT_ROOT, StartRec};
pub use parents::ParentOf;
pub use row::{Lane, Row, SUMMARY_LEVELS, SUMMARY_SHIFT};

use formats::{Category, FrameKey};
use rustc_hash::{FxHashMap, FxHashSet};

use allocs::Allocs;
use calltree::CallTree;
use contexts::{ContextIndex, Contexts};
use intern::Interner;
use layout::OpenSlot;
use messages::Messages;
use pair::Pairer;
use parents::Parents;
use plots::Plots;
use polls::Polls;
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

/// What the model knows about one worker (writing process).
#[derive(Clone, Debug, Default)]
pub struct Worker {
    /// Process name from WorkerInfo (empty until seen).
    pub name: String,
    /// Operating-system process id (0 until seen).
    pub pid: u32,
    /// Records this worker reported as dropped.
    pub dropped: u64,
    /// Newest timestamp of its frames (ns since the epoch).
    pub last_time: u64,
    /// Its process no longer writes (exited or was killed); any frames it left open were cut
    /// at `last_time`.
    pub stopped: bool,
    /// Frames of it cut when it stopped.
    pub cut: u64,
    /// It was seen writing while this log was open, then vanished (not a finished log's
    /// ordinary state).
    pub vanished: bool,
    current_lane: Option<u32>,
}

impl Worker {
    /// Whether its stopping means something to say: it left frames open, or it stopped while
    /// the log was watched. A finished log whose processes all exited cleanly says nothing.
    pub fn stop_is_news(&self) -> bool {
        self.stopped && (self.cut > 0 || self.vanished)
    }
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

/// The whole indexed log (see the module docs).
#[derive(Debug)]
pub struct Model {
    labels: Interner,
    lanes: Vec<Lane>,
    lane_map: FxHashMap<(u8, u32), u32>,
    workers: Vec<Worker>,
    /// Start/end pairing (the rule every reader shares) for records applied here; the
    /// ingest pairs on its reader thread and hands the model slots instead.
    pairer: Pairer,
    /// The frames waiting for their ends, by slot (see [`pair`]).
    open: Vec<OpenSlot>,
    contexts: Contexts,
    /// Context indices for records applied here (the ingest indexes on its reader thread).
    context_index: ContextIndex,
    calltree: CallTree,
    /// The parents the rows do not tell (see [`parents`]).
    parents: Parents,
    /// Frames cut when their process stopped writing.
    cut: FxHashSet<FrameRef>,
    /// Damaged bytes met while reading: (newest time read before them, what and where).
    damage: Vec<(u64, String)>,
    /// Frames whose end was (most likely) in damaged bytes: index into `damage`.
    lost: FxHashMap<FrameRef, u32>,
    stats: Stats,
    /// Plot series (type 7 records).
    plots: Plots,
    /// Messages (type 8 records).
    messages: Messages,
    /// Frames' allocation counts (type 9 records).
    allocs: Allocs,
    /// Asynchronous frames' polls and slow polls (type 10 and 11 records).
    polls: Polls,
    min_time: u64,
    max_time: u64,
    frames: u64,
    closed: u64,
    dropped: u64,
    records: u64,
    generation: u64,
    /// Frames the log is expected to hold in all (0: unknown), to size rows' growth.
    expected_frames: u64,
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
            pairer: Pairer::default(),
            open: Vec::new(),
            contexts: Contexts::default(),
            context_index: ContextIndex::default(),
            calltree: CallTree::default(),
            parents: Parents::default(),
            cut: FxHashSet::default(),
            damage: Vec::new(),
            lost: FxHashMap::default(),
            stats: Stats::default(),
            plots: Plots::default(),
            messages: Messages::default(),
            allocs: Allocs::default(),
            polls: Polls::default(),
            min_time: u64::MAX,
            max_time: 0,
            frames: 0,
            closed: 0,
            dropped: 0,
            records: 0,
            generation: 0,
            expected_frames: 0,
        }
    }

    /// The row a frame reference points into.
    #[inline]
    pub fn row(&self, at: FrameRef) -> &Row {
        &self.lanes[at.lane as usize].rows[at.row as usize]
    }

    fn row_mut(&mut self, at: FrameRef) -> &mut Row {
        &mut self.lanes[at.lane as usize].rows[at.row as usize]
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

    /// The label interner.
    pub fn labels(&self) -> &Interner {
        &self.labels
    }

    /// Per-label statistics.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Plot series.
    pub fn plots(&self) -> &Plots {
        &self.plots
    }

    /// Messages.
    pub fn messages(&self) -> &Messages {
        &self.messages
    }

    /// Frames' allocation counts.
    pub fn allocs(&self) -> &Allocs {
        &self.allocs
    }

    /// Asynchronous frames' polls and the slow polls.
    pub fn polls(&self) -> &Polls {
        &self.polls
    }

    /// Frames merged by call path (the aggregated flame graph's tree).
    pub fn call_tree(&self) -> &CallTree {
        &self.calltree
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

    /// Frames cut because their process stopped writing before ending them.
    pub fn cut_count(&self) -> u64 {
        self.cut.len() as u64
    }

    /// Whether a frame was cut (its process stopped writing before ending it).
    pub fn is_cut(&self, at: FrameRef) -> bool {
        !self.cut.is_empty() && self.cut.contains(&at)
    }

    /// Damaged bytes were skipped while reading, after records up to time `t` (ns): a frame
    /// open then whose end never comes had its end in them.
    pub fn note_damage(&mut self, t: u64, what: String) {
        self.damage.push((t, what));
    }

    /// Where the end of a frame cut short by damage was lost (what the damage report says),
    /// if that is why it has no end of its own.
    pub fn lost_in(&self, at: FrameRef) -> Option<&str> {
        if self.lost.is_empty() {
            return None;
        }
        let i = *self.lost.get(&at)?;
        self.damage.get(i as usize).map(|(_, what)| what.as_str())
    }

    /// Worker `w`'s process stopped writing: its open frames are cut at its newest time (and
    /// no longer counted as running). `seen_writing`: it was seen alive while the log was
    /// watched. A later WorkerInfo for `w` (a new process in the slot) clears the mark.
    pub fn mark_stopped(&mut self, w: u8, seen_writing: bool) {
        let worker = &mut self.workers[w as usize];
        if worker.stopped {
            return;
        }
        worker.stopped = true;
        worker.vanished = seen_writing;
        let t = worker.last_time;
        let mut cut = 0;
        self.pairer.stop_worker(w);
        // As the reader stage does (`ReaderStage::stop_writers`).
        self.context_index.forget_worker(w);
        self.stop_waiting(w);
        for slot in 0..self.open.len() {
            let f = &mut self.open[slot];
            if f.live && f.key.worker == w {
                f.live = false;
                let (at, start_ns) = (f.at, f.start_ns);
                // Open when damaged bytes were skipped: its end was in them (the process
                // ended it), so it ends there, not at its process's last time.
                let damage = self.damage.iter().position(|(dt, _)| *dt >= start_ns);
                let end = match damage {
                    Some(i) => {
                        self.lost.insert(at, i as u32);
                        self.damage[i].0.min(t)
                    }
                    None => {
                        self.cut.insert(at);
                        cut += 1;
                        t
                    }
                };
                self.row_mut(at)
                    .set_end(at.index as usize, end.max(start_ns));
                self.closed += 1;
            }
        }
        self.workers[w as usize].cut += cut;
        self.generation = self.generation.wrapping_add(1);
    }

    /// Tells the model how many frames the log will likely hold in all (e.g. from its size and
    /// the frames per byte so far): a full row then grows by its share of the frames still to
    /// come instead of doubling, which saves copies and keeps the load's peak memory near the
    /// final figure. 0: unknown (rows double).
    pub fn expect_frames(&mut self, total: u64) {
        self.expected_frames = total;
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

    /// Earliest and newest timestamps seen (frames, plot values, messages), or `None` if none.
    pub fn time_range(&self) -> Option<(u64, u64)> {
        (self.min_time <= self.max_time).then_some((self.min_time, self.max_time))
    }

    /// The newest timestamp seen (0 if none): open frames are drawn up to it.
    pub fn newest(&self) -> u64 {
        self.max_time
    }

    /// The interned label of frame `at` (its call-tree node's).
    pub fn label_of(&self, at: FrameRef) -> u32 {
        self.calltree.label(self.row(at).node(at.index as usize))
    }

    /// Gathers everything about one frame.
    pub fn info(&self, at: FrameRef) -> Option<FrameInfo> {
        let lane = self.lanes.get(at.lane as usize)?;
        let row = lane.rows.get(at.row as usize)?;
        let i = at.index as usize;
        if i >= row.len() {
            return None;
        }
        let start = row.start(i);
        let end = (!row.is_open(i)).then(|| row.end(i));
        let duration = row.end_or(i, self.max_time) - start;
        Some(FrameInfo {
            key: FrameKey::new(lane.worker, row.id(i)),
            label: self
                .labels
                .name(self.calltree.label(row.node(i)))
                .to_owned(),
            category: Category(row.category[i]),
            start,
            end,
            duration,
            self_ns: duration.saturating_sub(self.children_ns(at)),
            context: row.context(i),
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
                if let Some(i) = row.position_of_id(k.id) {
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

    /// Gives back the spare capacity of lane `lane`'s arrays (their growth headroom, up to
    /// half of what they hold). Called lane by lane once a log is loaded, so a loaded log
    /// costs what it holds; growing again later is amortized as before.
    pub fn compact_lane(&mut self, lane: u32) {
        if let Some(l) = self.lanes.get_mut(lane as usize) {
            for row in &mut l.rows {
                row.shrink_to_fit();
            }
            l.rows.shrink_to_fit();
        }
    }

    /// Gives back the spare capacity of everything but the lanes (see [`Model::compact_lane`]).
    pub fn compact_indexes(&mut self) {
        self.contexts.shrink_to_fit();
    }

    /// Heap bytes held by the model (frames, maps, labels, statistics, contexts).
    pub fn heap_bytes(&self) -> usize {
        let rows: usize = self
            .lanes
            .iter()
            .flat_map(|l| l.rows.iter())
            .map(Row::heap_bytes)
            .sum();
        let maps =
            self.pairer.heap_bytes() + self.open.capacity() * std::mem::size_of::<OpenSlot>();
        rows + maps
            + self.labels.heap_bytes()
            + self.stats.heap_bytes()
            + self.contexts.heap_bytes()
            + self.context_index.heap_bytes()
            + self.calltree.heap_bytes()
            + self.parents.heap_bytes()
            + self.plots.heap_bytes()
            + self.messages.heap_bytes()
            + self.allocs.heap_bytes()
            + self.polls.heap_bytes()
    }
}

/// Frames to add to a full row of `len` frames when the model holds `frames` and expects
/// `expected`: the row's share (so far) of the frames still to come, at least a quarter of
/// what it holds; doubling when nothing more is expected.
fn row_growth(expected: u64, frames: u64, len: usize) -> usize {
    if expected <= frames || frames == 0 {
        return len.max(64);
    }
    let to_come = (expected - frames) as f64;
    let share = len as f64 / frames as f64;
    ((to_come * share * 1.02) as usize).max((len / 4).max(64))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::test_log::{Log, at};

    /// The model `bytes` make through the reader stage (as the ingest and viewers build it),
    /// in batches of 37 records.
    pub(crate) fn through_reader_stage(bytes: &[u8]) -> Model {
        use crate::feed::{Batch, LabelMap, ReaderStage, apply_batch};
        let (mut digest, mut labels, mut model) =
            (ReaderStage::default(), LabelMap::default(), Model::new());
        let mut batch = Batch::default();
        for (n, item) in formats::RecordIter::new(bytes, 0).enumerate() {
            digest.push(&item.unwrap().1, &mut batch);
            if n % 37 == 36 {
                apply_batch(&mut model, &batch, &mut labels).unwrap();
                batch.clear();
            }
        }
        apply_batch(&mut model, &batch, &mut labels).unwrap();
        model
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
        assert_eq!((m.worker(0).name.as_str(), m.worker(0).pid), ("app", 42));
        assert_eq!((lane.thread, lane.thread_name.as_str()), (1, "main"));
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
                assert!(row.end(i - 1) <= row.start(i));
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
    fn a_stopped_process_has_its_open_frames_cut_at_its_last_time() {
        let mut l = Log::default();
        l.worker(0, 10, "killed").worker(1, 11, "alive");
        l.start(0, 1, 100, 1, "request")
            .start(0, 2, 110, 1, "query")
            .start(0, 3, 120, 3, "done")
            .end(0, 3, 150)
            .start(1, 1, 100, 1, "other");
        let mut m = l.model();
        assert_eq!(m.open_count(), 3);
        m.mark_stopped(0, false);
        assert!(m.worker(0).stopped && !m.worker(1).stopped);
        assert!(m.worker(0).stop_is_news(), "it left frames open");
        assert_eq!(m.worker(0).cut, 2);
        assert_eq!(
            (m.open_count(), m.cut_count()),
            (1, 2),
            "only the live worker's frame runs"
        );
        let req = m.find(FrameKey::new(0, 1)).unwrap();
        let info = m.info(req).unwrap();
        assert_eq!(info.end, Some(150), "cut at the worker's newest time");
        assert!(m.is_cut(req));
        assert!(
            !m.is_cut(m.find(FrameKey::new(0, 3)).unwrap()),
            "ended normally"
        );
        assert!(!m.is_cut(m.find(FrameKey::new(1, 1)).unwrap()));
        // Marking twice changes nothing; a new process in the slot clears the mark.
        m.mark_stopped(0, false);
        assert_eq!(m.cut_count(), 2);
        m.apply(&formats::Record::WorkerInfo(formats::WorkerInfo {
            worker: 0,
            timestamp: 200,
            pid: 12,
            name: "restarted",
        }));
        assert!(!m.worker(0).stopped);
        // A clean exit before the log was opened is no news; one seen while watching is.
        m.mark_stopped(1, false);
        let other = m.find(FrameKey::new(1, 1)).unwrap();
        assert!(m.is_cut(other) && m.worker(1).stop_is_news());
        let mut l = Log::default();
        l.worker(0, 10, "done").worker(1, 11, "watched");
        l.start(0, 1, 100, 1, "request").end(0, 1, 150);
        l.start(1, 1, 100, 1, "request").end(1, 1, 150);
        let mut m = l.model();
        m.mark_stopped(0, false);
        m.mark_stopped(1, true);
        assert!(!m.worker(0).stop_is_news(), "a finished log says nothing");
        assert!(
            m.worker(1).stop_is_news(),
            "a writer that vanished while watched"
        );
    }

    #[test]
    fn a_frame_whose_end_was_in_damaged_bytes_ends_at_the_damage_and_says_so() {
        let mut l = Log::default();
        l.worker(0, 10, "app");
        l.start(0, 1, 100, 1, "request")
            .start(0, 2, 110, 1, "query");
        let mut m = l.model();
        // Damaged bytes after time 150 (both frames' ends were in them); the process went on
        // writing until 500, then exited.
        m.note_damage(
            150,
            "frames-000001.framelog at byte 4096: skipped 64 damaged bytes".into(),
        );
        let mut l = Log::default();
        l.start(0, 3, 400, 3, "later").end(0, 3, 500);
        m.apply_bytes(&l.bytes);
        m.mark_stopped(0, false);
        let req = m.find(FrameKey::new(0, 1)).unwrap();
        assert_eq!(
            m.info(req).unwrap().end,
            Some(150),
            "ends at the damage, not at 500"
        );
        assert!(!m.is_cut(req), "not a stopped process's frame");
        assert!(m.lost_in(req).unwrap().contains("byte 4096"));
        assert_eq!(m.cut_count(), 0);
        assert!(
            !m.worker(0).stop_is_news(),
            "the process exited; nothing was cut"
        );
    }

    #[test]
    fn rows_grow_by_their_share_of_the_expected_frames() {
        // Nothing expected: doubling. 1,000 frames in, 10,000 expected, a row holding a
        // quarter of them: room for its quarter of the 9,000 to come (and a little more).
        assert_eq!(row_growth(0, 1_000, 250), 250);
        assert_eq!(row_growth(1_000, 1_000, 250), 250);
        assert_eq!(row_growth(10_000, 1_000, 250), 2_295);
        // A poor estimate still grows by at least a quarter (few copies), never by nothing.
        assert_eq!(row_growth(1_001, 1_000, 4_000), 1_000);
        assert_eq!(row_growth(10, 1, 0), 64);
        // The model with a hint holds the same frames as without.
        let mut l = Log::default();
        for i in 0..3_000u32 {
            let t = u64::from(i) * 10;
            l.start(0, i * 2 + 1, t, i * 2 + 1, "a")
                .start(0, i * 2 + 2, t + 1, i * 2 + 1, "b")
                .end(0, i * 2 + 2, t + 2)
                .end(0, i * 2 + 1, t + 5);
        }
        let plain = l.model();
        let mut hinted = Model::new();
        hinted.expect_frames(6_000);
        hinted.apply_bytes(&l.bytes);
        assert_eq!(hinted.frame_count(), plain.frame_count());
        let rows = |m: &Model| -> Vec<(Vec<u64>, Vec<u64>, usize)> {
            m.lanes()[0]
                .rows
                .iter()
                .map(|r| {
                    let ends = (0..r.len()).map(|i| r.end(i)).collect();
                    (r.starts_from(0).collect(), ends, r.capacity())
                })
                .collect()
        };
        let (h, p) = (rows(&hinted), rows(&plain));
        assert_eq!(
            h.iter().map(|r| (&r.0, &r.1)).collect::<Vec<_>>(),
            p.iter().map(|r| (&r.0, &r.1)).collect::<Vec<_>>()
        );
        assert!(
            h.iter().all(|r| r.2 < 3_000 * 5 / 4),
            "{:?}",
            h.iter().map(|r| r.2).collect::<Vec<_>>()
        );
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
        // 25 bytes a frame in rows, a context (16 bytes, and its index's map) per five frames,
        // growth headroom: 33 here (it was 50 with labels and 8-byte ends in rows and 40-byte
        // contexts).
        let per = m.heap_bytes() as f64 / m.frame_count() as f64;
        assert!(per < 36.0, "{per} bytes/frame");
    }
}
