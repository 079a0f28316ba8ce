//! The applier stage: digested batches of records into the shared model, a chunk per model
//! lock so the UI thread never waits long, with the status the window shows (progress, rate,
//! catching up) and its repaints. Both sources of a log feed it: a log directory's reader
//! (`ingest`) and a remote log's socket (`remote`); what records do to the model is
//! [`crate::feed`]'s. It sits below both (it names neither), so neither needs the other.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};
use web_time::Instant;

use crate::feed::{self, Batch, LabelMap, ReadState};
use crate::model::Model;

/// Records applied per model-lock acquisition.
const RECORDS_PER_LOCK: usize = 65_536;
/// While a backlog loads, the window is asked to repaint for new frames at most this often:
/// every paint costs the UI thread (and a software renderer) CPU that the load needs (~45 ms
/// of CPU a paint at 100 M frames under llvmpipe), and a paint a second shows the progress.
/// Input still repaints at once; a live tail (caught up) asks at once.
const LOAD_REPAINT_EVERY: Duration = Duration::from_millis(1000);

/// When news arriving at `now` is painted: `(delay, time of that paint)`, given the time of
/// the last paint asked for (`last`, possibly still to come) and the least gap between paints.
fn paint_after(last: Option<Instant>, now: Instant, gap: Duration) -> (Duration, Instant) {
    match last {
        // Caught up (a live tail, or the load's end): painted at once, not at a load paint's
        // later slot (which held the end of a 100 M-frame load back by up to a gap).
        _ if gap.is_zero() => (Duration::ZERO, now),
        // A paint is asked for later already: it shows this news too (asked again, in case a
        // paint for input in between took the request).
        Some(t) if now < t => (t - now, t),
        // Not lost, only later. That paint counts as the last one, or news just after it
        // would paint again at once.
        Some(t) if now < t + gap => (t + gap - now, t + gap),
        _ => (Duration::ZERO, now),
    }
}

/// How the ingest thread is doing (shown in the status bar).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IngestStatus {
    /// Bytes of records read so far.
    pub bytes_read: u64,
    /// Bytes in the log's frame segments at the last look.
    pub total_bytes: u64,
    /// True once everything present at the last look was read.
    pub caught_up: bool,
    /// True if the thread stopped (not following, or fatal error).
    pub finished: bool,
    /// Problems met, newest last (corrupt bytes, not a log, I/O errors).
    pub errors: Vec<String>,
    /// What a following window waits for while its directory holds no log yet (a normal
    /// state, e.g. listening before any program connected); `None` once the log is there.
    pub waiting: Option<String>,
    /// Segments retention deleted before this window read them (the log now starts later).
    pub pruned_segments: u32,
    /// Frames per second applied over the last second or so.
    pub frames_per_sec: f64,
    /// When the first batch of frames reached the model.
    pub first_frames_at: Option<Instant>,
    /// When the thread first caught up with the log.
    pub caught_up_at: Option<Instant>,
    /// The loaded log's memory was compacted and handed back (after the first catch-up).
    pub compacted: bool,
    /// A remote log's writing processes, as its server last listed them (`None` for a
    /// directory, whose writers the window looks up itself).
    pub writers: Option<Vec<u8>>,
    /// The server refused this window for want of the right token: what it said.
    pub needs_token: Option<String>,
}

impl IngestStatus {
    /// Whether the log is still being loaded: not caught up yet, ever. Once the window has
    /// caught up, a log that keeps growing is followed, not loaded (no progress bar then,
    /// however far behind a burst of records leaves it for a moment).
    pub fn loading(&self) -> bool {
        self.caught_up_at.is_none() && !self.caught_up && !self.finished && self.total_bytes > 0
    }

    /// Loading progress in 0..=1 (1 when caught up).
    pub fn progress(&self) -> f32 {
        if self.caught_up || self.total_bytes == 0 {
            1.0
        } else {
            (self.bytes_read as f64 / self.total_bytes as f64).min(1.0) as f32
        }
    }
}

/// State shared between the ingest threads and the UI.
#[derive(Default)]
pub struct Shared {
    pub(crate) model: Mutex<Model>,
    status: Mutex<IngestStatus>,
    repaint: Mutex<Option<egui::Context>>,
    pub(crate) stop: AtomicBool,
    /// Set while the UI thread waits for the model lock: the applier steps aside between
    /// chunks (a plain mutex would let it re-take the lock at once and starve the UI).
    ui_waiting: AtomicBool,
    /// Set while the reader is behind the log's end (loading a backlog): repaints are spaced.
    backlog: AtomicBool,
    /// When the last repaint was asked for (at once, or for later: then that later time).
    last_repaint: Mutex<Option<Instant>>,
}

impl Shared {
    pub(crate) fn repaint(&self) {
        let Some(ctx) = self.repaint.lock().clone() else {
            return;
        };
        let gap = if self.backlog.load(Ordering::Relaxed) {
            LOAD_REPAINT_EVERY
        } else {
            Duration::ZERO
        };
        let mut last = self.last_repaint.lock();
        let (delay, at) = paint_after(*last, Instant::now(), gap);
        *last = Some(at);
        drop(last);
        if delay.is_zero() {
            ctx.request_repaint();
        } else {
            ctx.request_repaint_after(delay);
        }
    }

    /// Locks the model for the UI thread: the applier holds it for one chunk of records at
    /// most, and lets the UI in before taking it again.
    pub(crate) fn model_for_ui(&self) -> MutexGuard<'_, Model> {
        self.ui_waiting.store(true, Ordering::Release);
        let guard = self.model.lock();
        self.ui_waiting.store(false, Ordering::Release);
        guard
    }

    /// Which egui context to wake when new frames arrive (the first one set stays).
    pub(crate) fn set_repaint(&self, ctx: &egui::Context) {
        let mut r = self.repaint.lock();
        if r.is_none() {
            *r = Some(ctx.clone());
        }
    }

    pub(crate) fn status(&self) -> MutexGuard<'_, IngestStatus> {
        self.status.lock()
    }

    pub(crate) fn push_error(&self, msg: String) {
        let mut s = self.status();
        if s.errors.last() != Some(&msg) {
            s.errors.push(msg);
        }
    }
}

/// The applier stage: takes digested batches from `rx` (a reader thread's, or a viewer
/// session's), applies each with an [`Applier`], and hands it back through `recycle` after
/// passing its credit to `applied` (a session grants it again).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn applier(
    shared: &Shared,
    rx: std::sync::mpsc::Receiver<(Batch, ReadState)>,
    recycle: std::sync::mpsc::Sender<Batch>,
    stopped: &dyn Fn() -> bool,
    applied: &dyn Fn(u64),
) {
    use std::sync::mpsc::RecvTimeoutError;
    let mut applier = Applier::default();
    // Ends when its source does, or when the window closes the log (a socket's thread may
    // take a moment to notice).
    while !stopped() {
        let (buf, state) = match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(got) => got,
            // A quiet source (a server sends nothing while its log is idle): the rate still
            // falls back to 0 a second later.
            Err(RecvTimeoutError::Timeout) => (Batch::default(), applier.last),
            Err(RecvTimeoutError::Disconnected) => return,
        };
        applier.take(shared, &buf, state, stopped);
        if buf.credit > 0 {
            applied(buf.credit);
        }
        if state.at_end {
            // Caught up: a live tail reads small slices, so the load's big buffers go (before
            // the memory is handed back, or they would stay in the window's RSS).
            drop(buf);
            applier.settle(shared);
        } else {
            let _ = recycle.send(buf);
        }
    }
}

/// The applier stage's state from one batch to the next: it puts each batch into the model a
/// chunk per lock and keeps the status (progress, rate, catching up). The file ingest runs it
/// on a thread of its own; the browser runs it in the socket's message handler.
pub(crate) struct Applier {
    rate_mark: (Instant, u64),
    labels: LabelMap,
    compacted: bool,
    last: ReadState,
    /// Record bytes received through a viewer session (its batches' credit).
    received: u64,
    /// The loaded log's memory was handed back to the OS.
    settled: bool,
}

impl Default for Applier {
    fn default() -> Self {
        Self {
            rate_mark: (Instant::now(), 0),
            labels: LabelMap::default(),
            compacted: false,
            last: ReadState::default(),
            received: 0,
            settled: false,
        }
    }
}

impl Applier {
    /// Once the log has been loaded (and the model compacted), and the caller let go of the
    /// load's buffers: hands free memory back to the OS and says the load is settled.
    pub(crate) fn settle(&mut self, shared: &Shared) {
        if self.compacted && !self.settled {
            self.settled = true;
            crate::memory::return_free_memory();
            shared.status().compacted = true;
            shared.repaint();
        }
    }

    /// Applies `buf`, read up to `state`, to the shared model and status.
    pub(crate) fn take(
        &mut self,
        shared: &Shared,
        buf: &Batch,
        state: ReadState,
        stopped: &dyn Fn() -> bool,
    ) {
        self.last = state;
        shared.backlog.store(!state.at_end, Ordering::Relaxed);
        // Bytes of records taken in: a session's credit counts what this side received (its
        // server's `bytes_read` runs up to a credit window ahead); a directory's reader
        // reads no further than it hands over.
        self.received += buf.credit;
        let taken_in = if self.received > 0 {
            self.received
        } else {
            state.bytes_read
        };
        if taken_in > 0 && !buf.is_empty() {
            // Frames per byte so far, times the log's size: what the model will hold (its
            // rows then grow by their share of it, not by doubling).
            let mut model = shared.model.lock();
            let frames = model.frame_count() + buf.events.len() as u64 / 2;
            let total = state.total_bytes.max(taken_in);
            model.expect_frames((frames as u128 * total as u128 / taken_in as u128) as u64);
        }
        if buf.has_news() {
            apply(shared, buf, &mut self.labels, stopped);
            feed::apply_marks(&mut shared.model.lock(), buf, &self.labels);
        }
        let frames = shared.model.lock().frame_count();
        let changed = !buf.is_empty() || !buf.stopped_workers.is_empty();
        let before = shared.status().clone();
        {
            let mut s = shared.status();
            s.bytes_read = state.bytes_read;
            s.total_bytes = state.total_bytes.max(state.bytes_read);
            let now = Instant::now();
            if s.first_frames_at.is_none() && frames > 0 {
                s.first_frames_at = Some(now);
            }
            let dt = now.duration_since(self.rate_mark.0).as_secs_f64();
            if dt >= 1.0 {
                s.frames_per_sec = (frames - self.rate_mark.1) as f64 / dt;
                self.rate_mark = (now, frames);
            }
            s.caught_up = state.at_end;
            if state.at_end {
                s.caught_up_at.get_or_insert(now);
            }
        }
        if state.at_end && !self.compacted {
            self.compacted = true;
            compact(shared, stopped);
        }
        // Repaint only for news: an idle window on a finished log draws nothing (a heartbeat
        // whose numbers did not change is not news).
        if changed || *shared.status() != before {
            shared.repaint();
        }
    }
}

/// The log is loaded: gives back the model's growth headroom, a lane per lock so the UI never
/// waits long (the memory itself goes back to the OS in [`Applier::settle`]).
fn compact(shared: &Shared, stopped: &dyn Fn() -> bool) {
    let lanes = shared.model.lock().lanes().len() as u32;
    for lane in 0..lanes {
        if stopped() {
            return;
        }
        shared.model.lock().compact_lane(lane);
    }
    shared.model.lock().compact_indexes();
}

fn apply(shared: &Shared, buf: &Batch, labels: &mut LabelMap, stopped: &dyn Fn() -> bool) {
    let mut events = buf.events.iter();
    let mut first = true;
    loop {
        if stopped() {
            return;
        }
        let mut model = shared.model.lock();
        if std::mem::take(&mut first)
            && let Err(e) = labels.learn(&mut model, buf)
        {
            drop(model);
            shared.push_error(e);
            return;
        }
        let n = feed::apply_events(&mut model, buf, labels, &mut events, RECORDS_PER_LOCK);
        drop(model);
        // Let a waiting UI thread have the model before the next chunk.
        let t = Instant::now();
        while shared.ui_waiting.load(Ordering::Acquire) && t.elapsed() < Duration::from_millis(50) {
            std::thread::yield_now();
        }
        if n < RECORDS_PER_LOCK {
            return;
        }
        shared.repaint();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page and the window show "Loading…" until they first catch up with the log, never
    /// again while they follow it (a live log is always a little ahead of the window).
    #[test]
    fn loading_ends_at_the_first_catch_up_not_at_each() {
        let mut s = IngestStatus {
            total_bytes: 12 << 20,
            bytes_read: 1 << 20,
            ..Default::default()
        };
        assert!(s.loading());
        s.caught_up = true;
        s.caught_up_at = Some(Instant::now());
        assert!(!s.loading());
        // The log grew: behind again, following, not loading.
        (s.caught_up, s.total_bytes) = (false, 13 << 20);
        assert!(!s.loading());
        // Nothing to load yet (waiting for a log to appear).
        assert!(!IngestStatus::default().loading());
    }

    #[test]
    fn a_loading_log_is_painted_at_most_once_per_gap_and_its_news_is_never_dropped() {
        let (t0, gap) = (Instant::now(), LOAD_REPAINT_EVERY);
        let ms = |n: u64| Duration::from_millis(n);
        // News every 10 ms for 2 s (a backlog loading): the paints asked for.
        let mut last = None;
        let mut paints = std::collections::BTreeSet::new();
        for i in 0..200 {
            let now = t0 + ms(i * 10);
            let (delay, at) = paint_after(last, now, gap);
            assert_eq!(now + delay, at, "each news is painted, at the time said");
            assert!(delay <= gap, "within a gap of its arrival: {delay:?}");
            paints.insert(at);
            last = Some(at);
        }
        // One at once, then one a gap: not two per gap (a paint, then the next news at once).
        assert_eq!(paints.len() as u64, 1 + 2000 / gap.as_millis() as u64);
        for (a, b) in paints.iter().zip(paints.iter().skip(1)) {
            assert!(*b - *a >= gap, "{:?}", *b - *a);
        }
        // Quiet for longer than a gap: the next news is painted at once; a live tail (no gap)
        // too.
        let later = *paints.last().unwrap() + gap + ms(1);
        assert_eq!(paint_after(last, later, gap), (Duration::ZERO, later));
        assert_eq!(
            paint_after(Some(later), later + ms(1), Duration::ZERO).0,
            Duration::ZERO
        );
        // The load ends (no gap any more) while a load paint is asked for later: the end is
        // painted at once.
        assert_eq!(
            paint_after(Some(later + ms(200)), later, Duration::ZERO),
            (Duration::ZERO, later)
        );
    }

    #[test]
    fn label_ids_are_mapped_when_the_interners_disagree() {
        let shared = Shared {
            model: Mutex::new(Model::new()),
            status: Mutex::new(IngestStatus::default()),
            repaint: Mutex::new(None),
            stop: AtomicBool::new(false),
            ui_waiting: AtomicBool::new(false),
            backlog: AtomicBool::new(false),
            last_repaint: Mutex::new(None),
        };
        // The model already knows a label the reader never saw: their ids are one apart.
        shared.model.lock().intern_label("seen only by the model");
        let mut digest = crate::feed::ReaderStage::default();
        let mut batch = Batch::default();
        let mut bytes = Vec::new();
        let mut log = crate::model::test_log::Log::default();
        log.start(0, 1, 10, 1, "request")
            .start(0, 2, 12, 1, "db")
            .end(0, 2, 15)
            .end(0, 1, 20);
        bytes.extend_from_slice(&log.bytes);
        for item in formats::RecordIter::new(&bytes, 0) {
            digest.push(&item.unwrap().1, &mut batch);
        }
        apply(&shared, &batch, &mut LabelMap::default(), &|| false);
        let m = shared.model.lock();
        let info = |row| m.info(crate::model::test_log::at(0, row, 0)).unwrap().label;
        assert_eq!((info(0), info(1)), ("request".to_owned(), "db".to_owned()));
        assert!(shared.status.lock().errors.is_empty());
    }
}
