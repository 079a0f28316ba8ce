//! Exporting a log to other viewers: Chrome Trace Event JSON ([`chrome`]: Perfetto UI,
//! chrome://tracing, speedscope's and Tracy's importers), Perfetto's protobuf trace
//! ([`perfetto`]: what the Perfetto UI loads fastest) and speedscope's own format
//! ([`speedscope`]).
//!
//! [`export`] streams the log once, in file order: records are paired by key and become
//! frames on strictly nested per-thread lanes, placed by their real start and end, each with
//! its parent: the one its start records, or, in a log written before parents were
//! recorded, the one inferred from nesting on its thread ([`tracks`]). A slice only ever
//! encloses frames it is the real parent of; a child drawn apart from its parent (on another
//! thread or lane) is linked to it instead (Chrome flow events and Perfetto flow ids, both
//! ends found by [`links`]; OTLP's parent span id); filtered by context, label and time
//! window, each with its frame data when asked, they go to a [`FrameSink`] as they are
//! released.
//! Memory holds the open frames and, per thread, the frames finished since its earliest
//! open one started, not the log. Threads are named once each, and threads of one process
//! that share a name are told apart (`"worker"`, `"worker #2"` …).

pub mod chrome;
pub mod links;
#[cfg(feature = "otlp")]
#[cfg_attr(docsrs, doc(cfg(feature = "otlp")))]
pub mod otlp;
#[cfg(feature = "parquet")]
#[cfg_attr(docsrs, doc(cfg(feature = "parquet")))]
pub mod parquet;
pub mod perfetto;
pub mod speedscope;
pub mod tracks;

use rustc_hash::FxHashMap as HashMap;
use std::path::Path;

use formats::{Category, FrameKey, Record};

use crate::label_match::LabelPattern;
use crate::{DataStore, LogReader, Position};

pub use tracks::Done;

/// The temporary files of exports in progress, and whether the process is stopping (see
/// [`remove_unfinished`]).
static UNFINISHED: std::sync::Mutex<Unfinished> = std::sync::Mutex::new((Vec::new(), false));

/// Temporary files not yet made whole, and whether the process is stopping.
type Unfinished = (Vec<std::path::PathBuf>, bool);

fn unfinished() -> std::sync::MutexGuard<'static, Unfinished> {
    // A list of paths is whole whatever a panicking holder did.
    UNFINISHED.lock().unwrap_or_else(|e| e.into_inner())
}

/// A new hidden temporary file beside `path`, named `prefix` and random characters, that
/// [`persist`] makes `path` once it is whole, and [`remove_unfinished`] removes before then.
pub fn temp_beside(path: &Path, prefix: &str) -> std::io::Result<tempfile::NamedTempFile> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // Created under the lock, so that a stop either finds it in the list or prevents it.
    let mut list = unfinished();
    if list.1 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Interrupted,
            "the export is stopping",
        ));
    }
    let tmp = tempfile::Builder::new().prefix(prefix).tempfile_in(dir)?;
    list.0.push(tmp.path().to_owned());
    Ok(tmp)
}

/// Removes the temporary files of the exports in progress, for a process that is stopped
/// (Ctrl-C, SIGTERM) and exits without unwinding, which would leave them behind. While the
/// returned guard is held (until the exit), an export that would create or [`persist`] a file
/// waits, so it cannot report its removed file as an error first; after, none creates one.
/// Files already made whole by [`persist`] stay.
pub fn remove_unfinished() -> Stopping {
    let mut list = unfinished();
    list.1 = true;
    for path in list.0.drain(..) {
        let _ = std::fs::remove_file(path);
    }
    Stopping { _held: list }
}

/// Held while a stopping process exits (see [`remove_unfinished`]).
#[must_use = "hold it until the process exits"]
pub struct Stopping {
    _held: std::sync::MutexGuard<'static, Unfinished>,
}

/// Renames a finished export's temporary file to `path` as an ordinary file, readable by
/// others (0644): a temporary file is created private (0600), and an export is for sharing.
pub fn persist(tmp: tempfile::NamedTempFile, path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let at = tmp.path().to_owned();
    let done = (|| {
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o644))?;
        tmp.persist(path).map_err(|e| e.error)
    })();
    // Renamed or removed (a failed persist drops the file): no longer in progress either way.
    unfinished().0.retain(|p| *p != at);
    done?;
    Ok(())
}

/// What to export.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// Only frames of this context (a root frame's id).
    pub context: Option<u32>,
    /// Only frames whose label matches.
    pub label: Option<LabelPattern>,
    /// Only frames that end after this many ns from the log's start (its earliest thread or
    /// frame record).
    pub from_ns: Option<u64>,
    /// Only frames that start before this many ns from the log's first record.
    pub to_ns: Option<u64>,
    /// Look up each frame's data (an index lookup per frame; a read per frame with data).
    pub with_data: bool,
}

/// A frame as exported.
#[derive(Debug, Clone)]
pub struct Frame<'a> {
    /// Its key.
    pub key: FrameKey,
    /// Worker and thread it started on.
    pub thread: (u8, u32),
    /// Label.
    pub label: &'a str,
    /// Category.
    pub category: Category,
    /// Context (root frame id).
    pub context: u32,
    /// Start, ns since the log's start (its earliest thread or frame record).
    pub start_ns: u64,
    /// End, ns since the log's start.
    pub end_ns: u64,
    /// The lane of its thread it nests on: 0 is the thread's own track, 1, 2 … hold frames
    /// that would overlap it (concurrent async work) or that must not be drawn inside what is
    /// open there (a root, or a child whose parent ran elsewhere, beside unrelated frames of
    /// the thread). Every lane nests strictly.
    pub lane: u32,
    /// On no lane: it could not be placed in time order (see [`tracks`]); an async track.
    pub async_track: bool,
    /// Still open when the log ended (its end is the log's last time).
    pub open: bool,
    /// Its parent: the one its start records (the frame it was called from, whatever thread
    /// it ran on; it may be missing from the log or the export, and is never replaced by
    /// another), or, when the start records none (`parent_inferred`), the innermost frame of
    /// its context open on its thread when it started, else the context's root frame
    /// `(worker, context)` (which may not be in the export); `None` for a root.
    pub parent: Option<FrameKey>,
    /// Its start recorded no parent: `parent` is a guess from nesting on its thread.
    pub parent_inferred: bool,
    /// Drawn inside its parent: on its lane, the innermost frame enclosing it is `parent`.
    /// A child with `under_parent == false` is drawn apart from its parent (another thread or
    /// lane, an async track, or its parent is not in the log): a viewer links it instead.
    pub under_parent: bool,
    /// Start, ns since the Unix epoch.
    pub start_unix_ns: u64,
    /// End, ns since the Unix epoch.
    pub end_unix_ns: u64,
    /// Its data, if asked for and present.
    pub data: Option<bson::Document>,
    /// What its code allocated and freed, if a counting allocator recorded it.
    pub allocs: Option<formats::FrameAlloc>,
    /// Where its time went, for an asynchronous frame that recorded it.
    pub polls: Option<formats::FramePolls>,
}

/// A slow poll as exported: a poll that held its thread at least the writer's threshold.
#[derive(Debug, Clone, Copy)]
pub struct SlowPollEvent {
    /// The thread it blocked: (worker, thread number).
    pub thread: (u8, u32),
    /// The frame whose code blocked.
    pub frame: FrameKey,
    /// Start, ns since the export's time origin.
    pub start_ns: u64,
    /// How long it held the thread.
    pub duration_ns: u64,
    /// Start, ns since the Unix epoch.
    pub unix_ns: u64,
}

/// A plot value as exported.
#[derive(Debug, Clone)]
pub struct PlotPoint<'a> {
    /// Worker that wrote it.
    pub worker: u8,
    /// Series name.
    pub name: &'a str,
    /// Series unit.
    pub unit: formats::PlotUnit,
    /// The value (NaN: a gap).
    pub value: f64,
    /// When, ns since the log's start.
    pub at_ns: u64,
    /// When, ns since the Unix epoch.
    pub unix_ns: u64,
}

/// A message as exported.
#[derive(Debug, Clone)]
pub struct ExportMessage<'a> {
    /// Worker and thread it was written on.
    pub thread: (u8, u32),
    /// The frame it was written in, if any.
    pub frame: Option<FrameKey>,
    /// That frame's context (0: none).
    pub context: u32,
    /// Severity.
    pub level: formats::Level,
    /// Text.
    pub text: &'a str,
    /// Structured fields, if any.
    pub fields: Option<bson::Document>,
    /// When, ns since the log's start.
    pub at_ns: u64,
    /// When, ns since the Unix epoch.
    pub unix_ns: u64,
}

/// Receives what an export finds, in release order.
pub trait FrameSink {
    /// A process (worker) appears.
    fn process(&mut self, worker: u8, pid: u32, name: &str) -> std::io::Result<()>;
    /// A thread appears (or is renamed), once per name; `name` is unique within its worker.
    fn thread(&mut self, worker: u8, thread: u32, name: &str) -> std::io::Result<()>;
    /// A frame is released.
    fn frame(&mut self, frame: &Frame<'_>) -> std::io::Result<()>;
    /// A plot value (in file order, not time order). Sinks that draw no plots ignore it.
    fn plot(&mut self, _point: &PlotPoint<'_>) -> std::io::Result<()> {
        Ok(())
    }
    /// A message (in file order: before the frame it was written in is released). Sinks
    /// that show no messages ignore it.
    fn message(&mut self, _message: &ExportMessage<'_>) -> std::io::Result<()> {
        Ok(())
    }
    /// A slow poll (in file order: before the frame it blocked in is released). Sinks that
    /// draw no slow polls ignore it.
    fn slow_poll(&mut self, _poll: &SlowPollEvent) -> std::io::Result<()> {
        Ok(())
    }
    /// The export is complete.
    fn finish(&mut self) -> std::io::Result<()>;
}

/// What an export did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExportSummary {
    /// Frames written.
    pub frames: u64,
    /// Of which on async tracks (on no lane).
    pub async_frames: u64,
    /// Of which on a lane other than their thread's own track (they overlap it, or it holds
    /// frames that are not their parent).
    pub overlap_frames: u64,
    /// Of which still open at the log's end.
    pub open_frames: u64,
    /// Damaged bytes skipped while reading.
    pub damaged_bytes: u64,
    /// Of the frames written, those whose start recorded no parent (a log written before
    /// parents were recorded): their parent and nesting are inferred from their thread.
    pub inferred_parents: u64,
    /// Of the frames written, children drawn apart from their recorded parent (on another
    /// thread or lane, or their parent is not in the log): linked to it, not nested in it.
    pub linked_children: u64,
}

struct StartInfo {
    label: u32,
    category: Category,
}

/// Why an export stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Reading the log failed.
    #[error(transparent)]
    Log(#[from] crate::Error),
    /// Writing the output failed.
    #[error("writing the export: {0}")]
    Output(#[source] std::io::Error),
}

/// An export in progress: [`Exporter::step`] reads what the log holds now (call it again
/// as a live log grows), [`Exporter::finish`] ends frames still open and flushes.
pub struct Exporter {
    opts: ExportOptions,
    /// Taken out while reading (the callback borrows the rest of `self`).
    reader: Option<LogReader>,
    store: Option<DataStore>,
    labels: Vec<String>,
    label_ids: HashMap<String, u32>,
    tracks: Tracks<StartInfo>,
    current_thread: HashMap<u8, u32>,
    /// Names given to threads: (as recorded, as shown: unique within its worker); per worker
    /// and recorded name, how many threads took it; the names shown per worker.
    thread_names: HashMap<(u8, u32), (String, String)>,
    names_taken: HashMap<(u8, String), u32>,
    names_shown: rustc_hash::FxHashSet<(u8, String)>,
    t0: Option<u64>,
    last: u64,
    summary: ExportSummary,
    done: Vec<Done<StartInfo>>,
    /// Allocation counts of frames not released yet.
    allocs: HashMap<FrameKey, formats::FrameAlloc>,
    /// Frame-polls records of frames not released yet.
    polls: HashMap<FrameKey, formats::FramePolls>,
    /// With a context or label filter: the frames it kept that are open (their messages and
    /// allocations are kept; those of other frames are not).
    kept_open: rustc_hash::FxHashSet<FrameKey>,
    /// Records from here on are left out ([`Exporter::stop_at`]).
    until: Option<Position>,
}

impl Exporter {
    /// Opens the log in `dir`. The time origin is its earliest frame, thread, plot or
    /// message record so far (a first pass over timestamps: across workers and threads the file is not in time
    /// order).
    pub fn open(dir: &Path, opts: &ExportOptions) -> Result<Self, ExportError> {
        let mut origin: Option<u64> = None;
        LogReader::open(dir)?.read_available(|_, rec| {
            let ts = match rec {
                Record::Start(s) => s.timestamp,
                Record::ThreadInfo(t) => t.timestamp,
                // A plot value or a message may come before the first frame (a process
                // series sampled at start): the export starts no later.
                Record::Plot(p) => p.timestamp,
                Record::Message(m) => m.timestamp,
                _ => return,
            };
            origin = Some(origin.map_or(ts, |o| o.min(ts)));
        })?;
        Self::with_origin(dir, opts, origin)
    }

    /// Opens the log in `dir` with `origin` as its time origin (`None`: its first record's),
    /// as another export of it found ([`Exporter::origin`]).
    pub fn with_origin(
        dir: &Path,
        opts: &ExportOptions,
        origin: Option<u64>,
    ) -> Result<Self, ExportError> {
        let mut e = Self {
            opts: opts.clone(),
            reader: Some(LogReader::open(dir)?),
            store: if opts.with_data {
                Some(DataStore::open(dir)?)
            } else {
                None
            },
            labels: Vec::new(),
            label_ids: HashMap::default(),
            tracks: Tracks::default(),
            current_thread: HashMap::default(),
            thread_names: HashMap::default(),
            names_taken: HashMap::default(),
            names_shown: Default::default(),
            t0: None,
            last: 0,
            summary: ExportSummary::default(),
            done: Vec::new(),
            allocs: HashMap::default(),
            polls: HashMap::default(),
            kept_open: Default::default(),
            until: None,
        };
        if let Some(t0) = origin {
            e.set_origin(t0);
        }
        Ok(e)
    }

    /// The time origin (log time of the export's time 0), once known.
    pub fn origin(&self) -> Option<u64> {
        self.t0
    }

    /// Where the records read so far end.
    pub fn read_to(&self) -> Position {
        self.reader
            .as_ref()
            .map(LogReader::position)
            .unwrap_or_default()
    }

    /// From now on, leaves out the records at or after `end` (another export's
    /// [`Exporter::read_to`]): both then export the same records of a log that grows.
    pub fn stop_at(&mut self, end: Position) {
        self.until = Some(end);
    }

    /// Fixes the time origin, and with it the time window in log time.
    fn set_origin(&mut self, t0: u64) {
        self.t0 = Some(t0);
        self.tracks.set_window(
            self.opts.from_ns.map_or(0, |f| t0.saturating_add(f)),
            self.opts.to_ns.map_or(u64::MAX, |t| t0.saturating_add(t)),
        );
    }

    /// Names a thread once, telling apart threads of one worker that share a name.
    fn name_thread(
        &mut self,
        worker: u8,
        thread: u32,
        name: &str,
        sink: &mut dyn FrameSink,
    ) -> std::io::Result<()> {
        if self
            .thread_names
            .get(&(worker, thread))
            .is_some_and(|(given, _)| given == name)
        {
            return Ok(());
        }
        let base = if name.is_empty() {
            format!("thread {thread}")
        } else {
            name.to_owned()
        };
        let mut n = self
            .names_taken
            .get(&(worker, base.clone()))
            .copied()
            .unwrap_or(0);
        let shown = loop {
            n += 1;
            let candidate = if n == 1 {
                base.clone()
            } else {
                format!("{base} #{n}")
            };
            // A thread literally named "worker #2" may exist too.
            if self.names_shown.insert((worker, candidate.clone())) {
                break candidate;
            }
        };
        self.names_taken.insert((worker, base), n);
        sink.thread(worker, thread, &shown)?;
        self.thread_names
            .insert((worker, thread), (name.to_owned(), shown));
        Ok(())
    }

    /// Exports what the log holds now; the frames released so far.
    pub fn step(&mut self, sink: &mut dyn FrameSink) -> Result<u64, ExportError> {
        if let Some(s) = &mut self.store {
            s.refresh()?;
        }
        let before = self.summary.frames;
        let mut io_error = None;
        let Some(mut reader) = self.reader.take() else {
            return Ok(0);
        };
        let until = self.until;
        let read = reader.read_available(|pos, rec| {
            if io_error.is_none()
                && until.is_none_or(|u| pos < u)
                && let Err(e) = self.record(rec, sink)
            {
                io_error = Some(e);
            }
        });
        self.summary.damaged_bytes = reader.damage_totals().0;
        self.reader = Some(reader);
        read?;
        if let Some(e) = io_error {
            return Err(ExportError::Output(e));
        }
        Ok(self.summary.frames - before)
    }

    /// Ends the frames still open at the log's last time, releases everything, and finishes
    /// the sink.
    pub fn finish(mut self, sink: &mut dyn FrameSink) -> Result<ExportSummary, ExportError> {
        let mut done = std::mem::take(&mut self.done);
        self.tracks.finish(self.last, &mut |d| done.push(d));
        self.done = done;
        self.emit(sink).map_err(ExportError::Output)?;
        sink.finish().map_err(ExportError::Output)?;
        Ok(self.summary)
    }

    fn record(&mut self, rec: Record<'_>, sink: &mut dyn FrameSink) -> std::io::Result<()> {
        match rec {
            Record::WorkerInfo(w) => {
                // Not a time origin: a writer stamps it when it opens the log.
                sink.process(w.worker, w.pid, w.name)?;
            }
            Record::ThreadInfo(t) => {
                if self.t0.is_none() {
                    self.set_origin(t.timestamp);
                }
                self.current_thread.insert(t.worker, t.thread);
                // Thread 0 only announces the ends of an exiting thread: no frames start there.
                if t.thread != 0 {
                    self.name_thread(t.worker, t.thread, t.name, sink)?;
                }
            }
            Record::Start(s) => {
                if self.t0.is_none() {
                    self.set_origin(s.timestamp);
                }
                self.last = self.last.max(s.timestamp);
                if self.opts.context.is_some_and(|c| c != s.context)
                    || self
                        .opts
                        .label
                        .as_ref()
                        .is_some_and(|p| !p.matches(s.label))
                {
                    return Ok(());
                }
                if self.filtering() {
                    self.kept_open.insert(FrameKey::new(s.worker, s.id));
                }
                let label = match self.label_ids.get(s.label) {
                    Some(&id) => id,
                    None => {
                        let id = self.labels.len() as u32;
                        self.labels.push(s.label.to_owned());
                        self.label_ids.insert(s.label.to_owned(), id);
                        id
                    }
                };
                let thread = (
                    s.worker,
                    self.current_thread.get(&s.worker).copied().unwrap_or(0),
                );
                let info = StartInfo {
                    label,
                    category: s.category,
                };
                let done = &mut self.done;
                self.tracks.start(
                    FrameKey::new(s.worker, s.id),
                    thread,
                    s.context,
                    s.parent,
                    s.timestamp,
                    info,
                    &mut |d| done.push(d),
                );
            }
            Record::End(e) => {
                self.last = self.last.max(e.timestamp);
                if self.filtering() {
                    self.kept_open.remove(&FrameKey::new(e.worker, e.id));
                }
                let done = &mut self.done;
                self.tracks
                    .end(FrameKey::new(e.worker, e.id), e.timestamp, &mut |d| {
                        done.push(d)
                    });
            }
            Record::Dropped(d) => self.last = self.last.max(d.timestamp),
            Record::Plot(p) => {
                if self.t0.is_none() {
                    self.set_origin(p.timestamp);
                }
                let t0 = self.t0.unwrap_or(p.timestamp);
                if self.in_window(p.timestamp) {
                    sink.plot(&PlotPoint {
                        worker: p.worker,
                        name: p.name,
                        unit: p.unit,
                        value: p.value,
                        at_ns: p.timestamp.saturating_sub(t0),
                        unix_ns: p.timestamp,
                    })?;
                }
            }
            Record::Message(m) => {
                if self.t0.is_none() {
                    self.set_origin(m.timestamp);
                }
                let frame = (m.frame != 0).then(|| FrameKey::new(m.worker, m.frame));
                let kept = self.in_window(m.timestamp)
                    && self.opts.context.is_none_or(|c| c == m.context)
                    && (self.opts.label.is_none()
                        || frame.is_some_and(|f| self.kept_open.contains(&f)));
                if kept {
                    let t0 = self.t0.unwrap_or(m.timestamp);
                    sink.message(&ExportMessage {
                        thread: (
                            m.worker,
                            self.current_thread.get(&m.worker).copied().unwrap_or(0),
                        ),
                        frame,
                        context: m.context,
                        level: m.level,
                        text: m.text,
                        fields: m.fields.and_then(|f| bson::Document::from_reader(f).ok()),
                        at_ns: m.timestamp.saturating_sub(t0),
                        unix_ns: m.timestamp,
                    })?;
                }
            }
            Record::FrameAlloc(a) => {
                // Written before the frame's end, after its start (but for a start in another
                // buffer read later): with a filter, only a kept frame's are held.
                if self.filtering() && !self.kept_open.contains(&FrameKey::new(a.worker, a.id)) {
                    return Ok(());
                }
                let e = self.allocs.entry(FrameKey::new(a.worker, a.id)).or_insert(
                    formats::FrameAlloc {
                        allocs: 0,
                        alloc_bytes: 0,
                        frees: 0,
                        freed_bytes: 0,
                        ..a
                    },
                );
                e.allocs = e.allocs.saturating_add(a.allocs);
                e.alloc_bytes = e.alloc_bytes.saturating_add(a.alloc_bytes);
                e.frees = e.frees.saturating_add(a.frees);
                e.freed_bytes = e.freed_bytes.saturating_add(a.freed_bytes);
            }
            Record::FramePolls(p) => {
                let key = FrameKey::new(p.worker, p.id);
                if !self.filtering() || self.kept_open.contains(&key) {
                    self.polls.insert(key, p);
                }
            }
            Record::SlowPoll(p) => {
                let key = FrameKey::new(p.worker, p.id);
                let kept = self.in_window(p.timestamp)
                    && (!self.filtering() || self.kept_open.contains(&key));
                if kept {
                    let t0 = self.t0.unwrap_or(p.timestamp);
                    sink.slow_poll(&SlowPollEvent {
                        thread: (
                            p.worker,
                            self.current_thread.get(&p.worker).copied().unwrap_or(0),
                        ),
                        frame: key,
                        start_ns: p.timestamp.saturating_sub(t0),
                        duration_ns: p.duration_ns,
                        unix_ns: p.timestamp,
                    })?;
                }
            }
            Record::Unknown(_) => {}
        }
        if !self.done.is_empty() {
            self.emit(sink)?;
        }
        Ok(())
    }

    /// Whether frames are filtered by context or label.
    fn filtering(&self) -> bool {
        self.opts.context.is_some() || self.opts.label.is_some()
    }

    /// Whether `t` (ns since the Unix epoch) is inside the time window.
    fn in_window(&self, t: u64) -> bool {
        let t0 = self.t0.unwrap_or(t);
        let at = t.saturating_sub(t0);
        self.opts.from_ns.is_none_or(|f| at >= f) && self.opts.to_ns.is_none_or(|to| at <= to)
    }

    /// Hands released frames (already filtered by the time window) to the sink, with their
    /// data.
    fn emit(&mut self, sink: &mut dyn FrameSink) -> std::io::Result<()> {
        let t0 = self.t0.unwrap_or(0);
        for d in self.done.drain(..) {
            let (start, end) = (d.start_ns.saturating_sub(t0), d.end_ns.saturating_sub(t0));
            let data = match &mut self.store {
                Some(s) => s.get(d.key).ok().flatten(),
                None => None,
            };
            let f = Frame {
                key: d.key,
                thread: d.thread,
                label: &self.labels[d.info.label as usize],
                category: d.info.category,
                context: d.context,
                start_ns: start,
                end_ns: end,
                start_unix_ns: d.start_ns,
                end_unix_ns: d.end_ns,
                lane: d.lane,
                async_track: d.async_track,
                open: d.open,
                parent: d.parent,
                parent_inferred: d.parent_inferred,
                under_parent: d.under_parent,
                data,
                allocs: self.allocs.remove(&d.key),
                polls: self.polls.remove(&d.key),
            };
            sink.frame(&f)?;
            self.summary.frames += 1;
            self.summary.async_frames += u64::from(d.async_track);
            self.summary.overlap_frames += u64::from(!d.async_track && d.lane > 0);
            self.summary.open_frames += u64::from(d.open);
            self.summary.inferred_parents += u64::from(d.parent_inferred);
            self.summary.linked_children +=
                u64::from(!d.parent_inferred && d.parent.is_some() && !d.under_parent);
        }
        Ok(())
    }
}

/// Exports the log in `dir` to `sink`, as it is now.
pub fn export(
    dir: &Path,
    opts: &ExportOptions,
    sink: &mut dyn FrameSink,
) -> Result<ExportSummary, ExportError> {
    let mut e = Exporter::open(dir, opts)?;
    e.step(sink)?;
    e.finish(sink)
}

use tracks::Tracks;
