//! Recorders (one log each, one writer thread each), their builder, and the process-global
//! API, `Stopwatch` (the global recorder itself is kept in `global`).

// The install guard drops its recorder by hand (`ManuallyDrop`): see the SAFETY comment below.
#![allow(unsafe_code)]

use std::borrow::Cow;
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

use parking_lot::Mutex;
use std::time::Duration;

use formats::{Category, Level, PlotMode, PlotUnit};
use serde::Serialize;

use crate::clock::Clock;
use crate::connect::config;
use crate::connect::connector::{Connector, Identity};
use crate::connect::stream::{Outputs, RemoteStream, STALL_LIMIT, StreamConfig};
use crate::context::Context;
use crate::error::{Error, ErrorCallback, Reporter};
use crate::frame::Frame;
use crate::gate::Gate;
use crate::global::{self, global, with_global};
use crate::ids::IdSource;
use crate::inner::{Inner, Stats};
use crate::message::{message_on, message_with_on};
use crate::plot::{Series, plot_on};
use crate::pool::{BufferingMode, Pool};
use crate::probe::Probe;
use crate::sampling::{Sampler, Sampling};
use crate::sink::Sink;
use crate::writer;

/// Default pool size.
const DEFAULT_POOL_KIB: usize = 4096;
/// Largest single buffer: a buffer's records, after the ThreadInfo record the writer puts
/// before them (at most 16 + 255 bytes), are one batch, which `docs/FORMAT.md` closes before
/// its records pass 64 KiB.
const MAX_BUFFER: usize = (64 << 10) - 512;
/// Smallest single buffer (a pool smaller than this still gets two buffers).
const MIN_BUFFER: usize = 4 << 10;
/// Frame-data updates that may wait for the writer.
const DATA_QUEUE: usize = 4096;
/// Default period of the writer's flush pass (ended frames reach the log within ~2 of these).
const DEFAULT_FLUSH_INTERVAL: Duration = Duration::from_millis(25);

/// Configures a recorder; see [`crate::Stopwatch::builder`].
#[must_use]
pub struct Builder {
    dir: Option<PathBuf>,
    mode: BufferingMode,
    buffer_kib: usize,
    sampling: Sampling,
    on_error: Option<ErrorCallback>,
    category: Category,
    flush_interval: Duration,
    options: framelog::WriterOptions,
    sink: Option<Arc<dyn Sink>>,
    connect: Option<String>,
    suspend: Option<Duration>,
    token: Option<String>,
    start_session_version: u8,
    plot_health: bool,
    plot_process: bool,
    slow_poll: Duration,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            dir: None,
            mode: BufferingMode::Drop,
            buffer_kib: DEFAULT_POOL_KIB,
            sampling: Sampling::All,
            on_error: None,
            category: Category::FUNCTION,
            flush_interval: DEFAULT_FLUSH_INTERVAL,
            options: framelog::WriterOptions::default(),
            sink: None,
            connect: None,
            suspend: None,
            token: None,
            start_session_version: formats::protocol::LATEST_START_SESSION,
            plot_health: false,
            plot_process: false,
            slow_poll: crate::polls::DEFAULT_SLOW_POLL,
        }
    }
}

impl Builder {
    /// The log directory (created if missing).
    pub fn dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// What producers do when the buffer pool is exhausted (default [`BufferingMode::Drop`]).
    pub fn mode(mut self, mode: BufferingMode) -> Self {
        self.mode = mode;
        self
    }

    /// Total size of the buffer pool in KiB (default 4096). Each recording thread also owns
    /// one buffer of its own.
    pub fn buffer_kib(mut self, kib: usize) -> Self {
        self.buffer_kib = kib.max(1);
        self
    }

    /// Which contexts to record (default all).
    pub fn sampling(mut self, sampling: Sampling) -> Self {
        self.sampling = sampling;
        self
    }

    /// Called once per kind of error (default: one line on stderr). It runs on the
    /// recorder's writer thread (or its connect thread, or in `build`/shutdown), never while
    /// the stopwatch holds a lock, so it may start frames, read stats or drop the recorder.
    pub fn on_error(mut self, f: impl Fn(&Error) + Send + Sync + 'static) -> Self {
        self.on_error = Some(Arc::new(f));
        self
    }

    /// Category of frames started without one (default [`Category::FUNCTION`]).
    pub fn default_category(mut self, category: Category) -> Self {
        self.category = category;
        self
    }

    /// Period of the writer's flush pass (default 25 ms; ended frames reach the log within
    /// about twice this even when their thread idles).
    pub fn flush_interval(mut self, interval: Duration) -> Self {
        // Between 1 ms and an hour: longer gains nothing, and the writer adds it to a clock.
        self.flush_interval = interval.clamp(Duration::from_millis(1), Duration::from_secs(3600));
        self
    }

    /// Retention: keep the log within `max_bytes` and delete sealed segments last written
    /// longer than `max_age` ago (`None`: no limit). The writer thread deletes the oldest
    /// sealed segments, whole (frame log and data together, never the live ones), every few
    /// seconds; the log may exceed `max_bytes` by up to its live segments. Pair with
    /// [`Builder::segment_bytes`] to seal segments often enough.
    pub fn retain(mut self, max_bytes: Option<u64>, max_age: Option<Duration>) -> Self {
        self.options.retention = framelog::Retention { max_bytes, max_age };
        self
    }

    /// Segment size limits: rotate the frame log past `frames` bytes, the data files past
    /// `data` bytes. With the `compact` feature, the writer compacts each segment it seals in
    /// the background; without it, sealed segments stay raw.
    pub fn segment_bytes(mut self, frames: u64, data: u64) -> Self {
        self.options.frames_segment_bytes = frames;
        self.options.data_segment_bytes = data;
        self
    }

    /// When written records are forced to stable storage (`fdatasync`); default
    /// [`SyncPolicy::Never`](framelog::SyncPolicy::Never): a crash of the program loses
    /// nothing, a power loss the last seconds.
    pub fn sync(mut self, policy: framelog::SyncPolicy) -> Self {
        self.options.sync = policy;
        self
    }

    /// Use this worker id instead of the lowest free one.
    pub fn worker(mut self, worker: u8) -> Self {
        self.options.worker = Some(worker);
        self
    }

    /// Stream to a server (`framelog serve`, `debugger-gui --listen`) at `HOST:PORT`; the
    /// same syntax as `FRAMELOG_CONNECT` (`HOST:PORT[,suspend][,timeout=30s][,session=v3]`). With
    /// [`Builder::dir`] too, both get every record. The program never waits for the server
    /// unless suspended; it reconnects in the background.
    pub fn connect(mut self, spec: impl Into<String>) -> Self {
        self.connect = Some(spec.into());
        self
    }

    /// With [`Builder::connect`]: `build()`/`install()` return only once the server resumes
    /// the program, or after `timeout` (then the program runs on and reports why), so
    /// start-up itself is recorded.
    pub fn suspend(mut self, timeout: Duration) -> Self {
        self.suspend = Some(timeout);
        self
    }

    /// The shared secret a server listening beyond loopback requires (default:
    /// `FRAMELOG_TOKEN` from the environment).
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Applies `FRAMELOG_CONNECT` from the environment, if set: it replaces `connect` and
    /// `suspend` (what [`Builder::install`] does; call it before [`Builder::build`] for the
    /// same behaviour).
    pub fn connect_from_env(mut self) -> Self {
        if let Ok(spec) = std::env::var("FRAMELOG_CONNECT")
            && !spec.trim().is_empty()
        {
            self.connect = Some(spec);
            self.suspend = None;
        }
        self
    }

    /// Understand StartSession only up to this version (1 to 3; default 3): pins the
    /// session protocol when a fleet mixes versions. `FRAMELOG_CONNECT=…,session=v1` does the
    /// same from the environment.
    pub fn start_session_version(mut self, version: u8) -> Self {
        self.start_session_version = version.clamp(1, formats::protocol::LATEST_START_SESSION);
        self
    }

    /// Plots the recorder's own health every 100 ms: `stopwatch: pool use` (percent of the
    /// buffer pool in use) and `stopwatch: dropped/s` (records discarded per second).
    pub fn plot_health(mut self, on: bool) -> Self {
        self.plot_health = on;
        self
    }

    /// Plots the process's resident set size (`process: RSS`, bytes) and CPU use
    /// (`process: CPU`, percent of one core) every 100 ms, read from `/proc/self` on Linux.
    /// On other systems the two series are absent (nothing is sampled).
    pub fn plot_process(mut self, on: bool) -> Self {
        self.plot_process = on;
        self
    }

    /// A poll of an asynchronous frame (an `in_frame` future, a `tracing` span's enter →
    /// exit) that holds its thread at least this long is a **slow poll**: recorded on its
    /// own (the thread, the moment, the frame whose code blocked) with a warning message, and
    /// counted in the frame's breakdown. Default 1 ms (tokio-metrics flags 50 µs; a slow poll
    /// here is a record and a message in the log, so the default keeps to the polls that
    /// visibly delay what is queued behind them). `Duration::MAX` turns slow polls off.
    pub fn slow_poll(mut self, threshold: Duration) -> Self {
        self.slow_poll = threshold;
        self
    }

    /// Write to `sink` instead of a log directory (tests, custom storage).
    #[doc(hidden)]
    pub fn sink(mut self, sink: Arc<dyn Sink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// Builds an independent recorder (its own log and writer thread).
    pub fn build(mut self) -> Result<Recorder, Error> {
        let connect = match &self.connect {
            Some(spec) => {
                let mut c = config::parse(spec).map_err(|reason| Error::ConnectSyntax {
                    value: spec.clone(),
                    reason,
                })?;
                c.suspend = self.suspend.or(c.suspend);
                Some(c)
            }
            None => None,
        };
        let reporter = Arc::new(Reporter::new(self.on_error));
        let local: Option<(Arc<dyn Sink>, Option<PathBuf>)> = match (self.sink, self.dir) {
            (Some(s), dir) => Some((s, dir)),
            (None, Some(dir)) => {
                let r = reporter.clone();
                self.options.on_damage = Some(Arc::new(move |e: &framelog::Error| {
                    r.report(Error::Damaged(e.to_string().into()))
                }));
                let w = framelog::LogWriter::open_with(&dir, self.options)
                    .map_err(|e| Error::Open(Box::new(e)))?;
                Some((Arc::new(w), Some(dir)))
            }
            (None, None) => None,
        };
        if local.is_none() && connect.is_none() {
            return Err(Error::NoDir);
        }
        let pool_bytes = self.buffer_kib.saturating_mul(1024);
        // About eight buffers per pool, each between 4 and 64 KiB: small pools still
        // rotate, big pools do not pay a syscall per few KiB.
        let buf_size = (pool_bytes / 8).clamp(MIN_BUFFER, MAX_BUFFER);
        let count = (pool_bytes / buf_size).max(2);
        // A session may narrow what is recorded; until one does, everything is recorded
        // (held for the first session when there is no log directory).
        let gate = Arc::new(Gate::new(false));
        let (sink, dir, remote, outputs): (Arc<dyn Sink>, _, _, _) = match (local, &connect) {
            (local, Some(c)) => {
                let (local_sink, dir) = local.map_or((None, None), |(s, d)| (Some(s), d));
                let remote = Arc::new(RemoteStream::new(
                    StreamConfig {
                        addr: c.addr.clone(),
                        worker: local_sink.as_ref().map_or(0, |s| s.worker()),
                        hold_bytes: count * buf_size,
                        block: self.mode == BufferingMode::Block,
                    },
                    reporter.clone(),
                ));
                let outputs = Arc::new(Outputs::new(local_sink, remote.clone()));
                (outputs.clone(), dir, Some(remote), Some(outputs))
            }
            (Some((s, dir)), None) => (s, dir, None, None),
            (None, None) => return Err(Error::NoDir),
        };
        let (msgs, rx) = crossbeam_channel::unbounded();
        let (data_tx, data_rx) = crossbeam_channel::bounded(DATA_QUEUE);
        let clock = Clock::process();
        let inner = Arc::new(Inner {
            worker: sink.worker(),
            clock,
            // A streaming recorder's producers wait at most the stall limit (a stalled server
            // never hangs the program); a local disk is waited for as long as it works.
            pool: Pool::new(
                count,
                buf_size,
                self.mode,
                remote.is_some().then_some(STALL_LIMIT),
            ),
            sampler: Sampler::new(self.sampling),
            gate,
            default_category: self.category,
            slow_poll_ns: u64::try_from(self.slow_poll.as_nanos()).unwrap_or(u64::MAX),
            ids: IdSource::new(),
            packs: sink.packs(),
            sink,
            msgs,
            data_tx,
            spare_data: crossbeam_channel::bounded(DATA_QUEUE / 4),
            data_wake_sent: AtomicBool::new(false),
            slots: Mutex::new(Vec::new()),
            late: Arc::new(crate::slot::Slot::new(0, String::new())),
            retired_dropped: AtomicU64::new(0),
            writer_dropped: AtomicU64::new(0),
            dropped_other: AtomicU64::new(0),
            dropped_data: AtomicU64::new(0),
            written_bytes: AtomicU64::new(0),
            last_flush_ns: AtomicU64::new(clock.now()),
            flush_interval: self.flush_interval,
            closed: AtomicBool::new(false),
            final_pass: AtomicBool::new(false),
            writer_failed: AtomicBool::new(false),
            reporter,
            writer_thread: Mutex::new(None),
            dir,
            remote: remote.clone(),
            outputs,
            written_records: AtomicU64::new(0),
        });
        let for_writer = inner.clone();
        let handle = std::thread::Builder::new()
            .name(format!("stopwatch-writer-{}", inner.worker))
            .spawn(move || writer::run(for_writer, rx, data_rx))
            .map_err(Error::Spawn)?;
        *inner.writer_thread.lock() = Some(handle);
        let mut recorder = Recorder {
            inner,
            connector: None,
            probe: None,
            reported_books: false,
        };
        // Past this point a failure drops `recorder`, which shuts the writer down.
        recorder.probe = Probe::spawn(&recorder.inner, self.plot_health, self.plot_process)
            .map_err(Error::Spawn)?;
        if let (Some(c), Some(remote)) = (connect, remote) {
            let identity = Identity {
                token: self
                    .token
                    .or_else(|| std::env::var("FRAMELOG_TOKEN").ok())
                    .unwrap_or_default(),
                name: process_name(),
                instance: crate::sampling::seed(),
                start_session_version: c.session_version.unwrap_or(self.start_session_version),
            };
            let inner = &recorder.inner;
            let connector = Arc::new(Connector::spawn(
                inner.clone(),
                &c,
                identity,
                remote,
                count,
            )?);
            recorder.connector = Some(connector.clone());
            if let Some(timeout) = c.suspend
                && !connector.wait_resumed(timeout)
            {
                inner.reporter.report(Error::SuspendTimeout {
                    addr: connector.addr().to_owned(),
                    waited: timeout,
                });
            }
            inner.reporter.deliver();
        }
        Ok(recorder)
    }

    /// Builds a recorder and installs it as the process-global one behind
    /// [`crate::Stopwatch::start`]. Dropping the guard flushes everything and uninstalls it.
    ///
    /// `FRAMELOG_CONNECT` in the environment (`HOST:PORT[,suspend][,timeout=30s][,session=v3]`) makes it
    /// stream to that server, replacing the builder's `connect` and `suspend`, the way
    /// `RUST_LOG` overrides code.
    pub fn install(self) -> Result<InstallGuard, Error> {
        let recorder = self.connect_from_env().build()?;
        if !global::publish(&recorder.inner) {
            return Err(Error::AlreadyInstalled);
        }
        Ok(InstallGuard {
            recorder: ManuallyDrop::new(recorder),
        })
    }
}

/// The executable's file name (what a server lists the program as).
fn process_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| format!("pid {}", std::process::id()))
}

/// A recorder: frames started on it go to its own log through its own writer thread.
///
/// Dropping it flushes everything and stops the writer.
pub struct Recorder {
    pub(crate) inner: Arc<Inner>,
    /// The diagnostics thread, in connect mode.
    connector: Option<Arc<Connector>>,
    /// The thread sampling the built-in plot series, if any was asked for.
    probe: Option<Probe>,
    /// The final books were reported (shutdown happens once).
    reported_books: bool,
}

impl Recorder {
    /// Starts a frame with the default category.
    #[inline(always)]
    pub fn start(&self, label: impl Into<Cow<'static, str>>) -> Frame {
        Frame::start_on(&self.inner, &label.into(), self.inner.default_category)
    }

    /// Starts a frame with a category.
    #[inline(always)]
    pub fn start_with(&self, label: impl Into<Cow<'static, str>>, category: Category) -> Frame {
        Frame::start_on(&self.inner, &label.into(), category)
    }

    /// The calling thread's current context in this recorder, if it is inside a frame.
    pub fn current_context(&self) -> Option<Context> {
        Context::current_on(&self.inner)
    }

    /// Records one value of the plot series `name` (a count, set by the program); see
    /// [`Recorder::series`] for units and summed series. A name over 255 bytes is cut, ending
    /// with `…`; an empty one is recorded as `(unnamed)`.
    #[inline]
    pub fn plot(&self, name: &str, value: f64) {
        plot_on(&self.inner, name, value, PlotMode::Value, PlotUnit::COUNT);
    }

    /// A handle on the plot series `name` of this recorder, to configure (unit, summed)
    /// and update.
    pub fn series(&self, name: impl Into<Cow<'static, str>>) -> Series {
        Series::on(self.inner.clone(), name.into())
    }

    /// Records an info message in the calling thread's current frame (if any). A text over
    /// 4,096 bytes is cut, ending with ` … (cut, N bytes more)`.
    #[inline]
    pub fn message(&self, text: &str) {
        message_on(&self.inner, Level::INFO, text);
    }

    /// Records a message with a level in the calling thread's current frame (if any).
    #[inline]
    pub fn message_at(&self, level: Level, text: &str) {
        message_on(&self.inner, level, text);
    }

    /// Records a message with a level and fields (any `Serialize` value, stored as a BSON
    /// document) in the calling thread's current frame (if any). Fields that do not fit one
    /// record (64 KiB, and the recorder's buffer) are left out largest first, and named with
    /// their sizes in a `cut_fields` field; the text is cut as [`Recorder::message`]'s.
    pub fn message_with<T: Serialize + ?Sized>(&self, level: Level, text: &str, fields: &T) {
        message_with_on(&self.inner, level, text, fields);
    }

    /// Writes everything ended so far to the log; false if the writer did not answer in
    /// `timeout` (or is gone).
    pub fn flush(&self, timeout: Duration) -> bool {
        self.inner.flush(timeout)
    }

    /// Counters (dropped records, bytes written...).
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// This process's worker id in the log.
    pub fn worker(&self) -> u8 {
        self.inner.worker
    }

    /// The log directory (None for a custom sink).
    pub fn dir(&self) -> Option<&Path> {
        self.inner.dir.as_deref()
    }

    /// Whether a remote session streams this recorder's records now (connect mode).
    pub fn is_streaming(&self) -> bool {
        self.inner.remote.as_ref().is_some_and(|r| r.is_streaming())
    }

    /// The buffering mode (a remote session may change it while it runs).
    pub fn mode(&self) -> BufferingMode {
        self.inner.pool.mode()
    }

    /// Flushes everything and stops the writer (what dropping does), returning the final
    /// counters.
    pub fn shutdown(mut self) -> Stats {
        self.close();
        self.inner.stats()
    }

    /// Shutdown, in the order that loses nothing: a program that connected a moment ago
    /// learns whether a session starts (bounded), the connect thread stops answering (no
    /// session starts during the final pass), the writer sends everything and ends the
    /// stream, and the connect thread is joined.
    fn close(&mut self) {
        // The probe's last values go to the writer before its final pass.
        if let Some(p) = &mut self.probe {
            p.stop();
        }
        if let Some(c) = &self.connector {
            c.remote.wait_decided(DECISION_AT_EXIT);
            c.begin_stop();
        }
        self.inner.shutdown();
        let connected = self.connector.take();
        if let Some(c) = &connected {
            c.join();
        }
        if !self.reported_books {
            self.reported_books = true;
            self.report_books(connected.is_some());
        }
        self.inner.reporter.deliver();
    }

    /// The last word at shutdown: what a stream could not carry, with each output's books,
    /// and what Block mode had to drop.
    fn report_books(&self, connected: bool) {
        let stats = self.inner.stats();
        if let (true, Some(remote), Some(stream)) = (connected, &self.inner.remote, stats.stream)
            && (stats.unsent > 0 || stats.unsent_data > 0)
        {
            self.inner.reporter.report(Error::NotSent {
                addr: remote.addr().to_owned(),
                records: stats.unsent,
                data: stats.unsent_data,
                stream,
                dir: stats.dir,
            });
        }
        let common = stats.stream.or(stats.dir).map_or(0, |s| s.dropped);
        // A failed log said so already ("later records are counted as dropped").
        if self.inner.pool.mode() == BufferingMode::Block && common > 0 && !stats.writer_failed {
            self.inner
                .reporter
                .report(Error::DroppedInBlockMode { records: common });
        }
    }
}

/// How long a program that is exiting waits to learn whether its first session starts
/// (a server that is up answers in milliseconds; one that is down refuses at once).
const DECISION_AT_EXIT: Duration = Duration::from_secs(2);

impl Drop for Recorder {
    fn drop(&mut self) {
        self.close();
    }
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("worker", &self.inner.worker)
            .field("dir", &self.inner.dir)
            .field("mode", &self.inner.pool.mode())
            .finish()
    }
}

/// Keeps the global recorder installed; dropping it flushes everything and uninstalls it.
#[must_use = "dropping the guard uninstalls the stopwatch at once"]
pub struct InstallGuard {
    recorder: ManuallyDrop<Recorder>,
}

impl std::ops::Deref for InstallGuard {
    type Target = Recorder;
    fn deref(&self) -> &Recorder {
        &self.recorder
    }
}

impl InstallGuard {
    /// Uninstalls the global stopwatch, writes everything (or sends it, in connect mode) and
    /// returns the final counters: recorded = written + `dropped` + `unsent`.
    pub fn finish(mut self) -> Stats {
        global::withdraw();
        self.recorder.close();
        // Dropping the guard after this closes an already closed recorder: nothing happens.
        self.recorder.stats()
    }
}

impl Drop for InstallGuard {
    fn drop(&mut self) {
        // New frames become no-ops first, then everything recorded so far is written.
        global::withdraw();
        // SAFETY: dropped exactly once, here.
        unsafe { ManuallyDrop::drop(&mut self.recorder) };
    }
}

/// The process-global stopwatch API.
///
/// ```no_run
/// use stopwatch::{Category, Stopwatch};
/// let _sw = Stopwatch::builder().dir("target/framelog").install()?;
/// let frame = Stopwatch::start("db/query");
/// frame.data(&serde_json::json!({"sql": "select 1"}));
/// drop(frame);
/// let _f = Stopwatch::start_with("User: Select", Category::DATABASE);
/// # Ok::<(), stopwatch::Error>(())
/// ```
pub struct Stopwatch;

impl Stopwatch {
    /// A builder for a recorder (`.install()` for the global one, `.build()` for an instance).
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Starts a frame on the global recorder; a no-op guard when none is installed.
    // No closures on this path: each is a function LLVM may leave out of line, and then the
    // label is no longer a constant at the copy.
    #[inline(always)]
    pub fn start(label: impl Into<Cow<'static, str>>) -> Frame {
        match global() {
            Some(inner) => Frame::start_on(&inner, &label.into(), inner.default_category),
            None => Frame::inert(),
        }
    }

    /// Starts a frame with a category on the global recorder.
    #[inline(always)]
    pub fn start_with(label: impl Into<Cow<'static, str>>, category: Category) -> Frame {
        match global() {
            Some(inner) => Frame::start_on(&inner, &label.into(), category),
            None => Frame::inert(),
        }
    }

    /// Records one value of the plot series `name` on the global recorder (a count, set
    /// by the program); see [`Stopwatch::series`] for units and summed series. A name over
    /// 255 bytes is cut, ending with `…`; an empty one is recorded as `(unnamed)`.
    #[inline]
    pub fn plot(name: &str, value: f64) {
        if let Some(inner) = global() {
            plot_on(&inner, name, value, PlotMode::Value, PlotUnit::COUNT);
        }
    }

    /// A handle on the plot series `name` of the global recorder (whichever is installed
    /// when a value is recorded), to configure (unit, summed) and update.
    pub fn series(name: impl Into<Cow<'static, str>>) -> Series {
        Series::global(name.into())
    }

    /// Records an info message on the global recorder, in the calling thread's current
    /// frame (if any). A text over 4,096 bytes is cut, ending with ` … (cut, N bytes more)`.
    #[inline]
    pub fn message(text: &str) {
        if let Some(inner) = global() {
            message_on(&inner, Level::INFO, text);
        }
    }

    /// Records a message with a level on the global recorder (see [`Stopwatch::message`]).
    #[inline]
    pub fn message_at(level: Level, text: &str) {
        if let Some(inner) = global() {
            message_on(&inner, level, text);
        }
    }

    /// Records a message with a level and fields (any `Serialize` value, stored as a BSON
    /// document) on the global recorder, in the calling thread's current frame (if any).
    /// Fields that do not fit one record are left out largest first and named in a
    /// `cut_fields` field (see [`Recorder::message_with`]).
    pub fn message_with<T: Serialize + ?Sized>(level: Level, text: &str, fields: &T) {
        if let Some(inner) = global() {
            message_with_on(&inner, level, text, fields);
        }
    }

    /// Whether a global recorder is installed.
    pub fn is_installed() -> bool {
        global::is_installed()
    }

    /// The calling thread's current context in the global recorder.
    pub fn current_context() -> Option<Context> {
        with_global(Context::current_on).flatten()
    }

    /// Flushes the global recorder (see [`Recorder::flush`]); false if none is installed.
    pub fn flush(timeout: Duration) -> bool {
        with_global(|inner| inner.flush(timeout)).unwrap_or(false)
    }
}
