//! A synthetic workload: threads recording nested frames as fast as they can. Used by the
//! `stress` example, the integration tests and the sustained-throughput benchmark.

use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use serde::Serialize;

use crate::{BufferingMode, Builder, Error, Recorder, SinkStats, Stopwatch};

/// What to record.
#[derive(Debug, Clone)]
pub struct StressOptions {
    /// Log directory (optional when connecting).
    pub dir: Option<PathBuf>,
    /// Stream to this server (`FRAMELOG_CONNECT` syntax); `FRAMELOG_CONNECT` in the
    /// environment wins.
    pub connect: Option<String>,
    /// Wait until the server resumes the program (at most 30 s) before recording.
    pub suspend: bool,
    /// Recording threads.
    pub threads: usize,
    /// Frames per thread.
    pub frames: u64,
    /// Buffering mode.
    pub mode: BufferingMode,
    /// Buffer pool size in KiB.
    pub buffer_kib: usize,
    /// Attach data to every M-th frame (0: never).
    pub data_every: u64,
    /// Nesting depth (frames are opened D deep, then closed).
    pub depth: u32,
    /// Where the log's segments are sealed and how much of it is kept.
    pub segments: Segments,
}

/// Where an example program streams its records, from its command line
/// (`#[command(flatten)]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct Remote {
    /// Stream to `framelog serve` or the debugger at HOST:PORT (FRAMELOG_CONNECT wins).
    #[arg(long)]
    pub connect: Option<String>,
    /// Wait until the server resumes this program (at most 30 s) before recording.
    #[arg(long)]
    pub suspend: bool,
}

/// Segment size and retention for the example programs' logs (small segments let sealing and
/// retention be tried without gigabytes); also their command-line options
/// (`#[command(flatten)]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::Args)]
pub struct Segments {
    /// Seal log segments past this many MiB (to try sealing and retention on small logs).
    #[arg(long, value_name = "N")]
    pub segment_mib: Option<u64>,
    /// Keep the log within this many MiB: its oldest sealed segments are deleted.
    #[arg(long, value_name = "N")]
    pub max_mib: Option<u64>,
}

impl Segments {
    /// `builder` with these settings.
    pub(crate) fn apply(self, mut builder: Builder) -> Builder {
        if let Some(mib) = self.segment_mib {
            let bytes = mib.max(1) << 20;
            builder = builder.segment_bytes(bytes, bytes);
        }
        if let Some(mib) = self.max_mib {
            builder = builder.retain(Some(mib << 20), None);
        }
        builder
    }
}

impl Default for StressOptions {
    fn default() -> Self {
        StressOptions {
            dir: Some(PathBuf::from("target/framelog-stress")),
            connect: None,
            suspend: false,
            threads: 2,
            frames: 100_000,
            mode: BufferingMode::Drop,
            buffer_kib: 4096,
            data_every: 0,
            depth: 1,
            segments: Segments::default(),
        }
    }
}

/// What happened.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct StressReport {
    /// Frame-log records emitted (a frame is a start and an end record).
    pub emitted: u64,
    /// Frame-log records discarded (Drop mode, or after a writer failure).
    pub dropped: u64,
    /// Frame-data updates emitted.
    pub data_emitted: u64,
    /// Frame-data updates discarded.
    pub dropped_data: u64,
    /// Bytes of frame-log records written.
    pub written_bytes: u64,
    /// Frame-log records a remote session could not carry.
    pub unsent: u64,
    /// Time from the first frame to everything written (writer flushed and stopped).
    pub elapsed_ns: u64,
    /// Time the recording threads took (without the final flush).
    pub record_ns: u64,
    /// Frames recorded per second per the whole run (`frames * threads / elapsed`).
    pub frames_per_sec: u64,
    /// The log directory's books (`written + dropped + unsent = emitted`), if it has one.
    pub dir: Option<SinkStats>,
    /// The stream's books, when connecting.
    pub stream: Option<SinkStats>,
}

const LABELS: [&str; 8] = [
    "stress/request",
    "stress/level-1",
    "stress/level-2",
    "stress/level-3",
    "stress/level-4",
    "stress/level-5",
    "stress/level-6",
    "stress/level-7",
];

#[derive(Serialize)]
struct Payload<'a> {
    sql: &'a str,
    params: [u64; 2],
}

/// Records `frames` frames on each of `threads` threads into the recorder, nested `depth`
/// deep, with data on every `data_every`-th frame. Returns (frames emitted, data emitted).
pub fn record(
    recorder: &Recorder,
    threads: usize,
    frames: u64,
    depth: u32,
    data_every: u64,
) -> (u64, u64) {
    let depth = depth.max(1) as u64;
    let barrier = Arc::new(Barrier::new(threads.max(1)));
    let data_total = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..threads.max(1) {
            let barrier = barrier.clone();
            let data_total = &data_total;
            std::thread::Builder::new()
                .name(format!("stress-{t}"))
                .spawn_scoped(s, move || {
                    barrier.wait();
                    let mut n = 0u64;
                    let mut data = 0u64;
                    let mut stack = Vec::with_capacity(depth as usize);
                    while n < frames {
                        let d = depth.min(frames - n);
                        for level in 0..d {
                            let f = recorder.start(LABELS[(level as usize).min(LABELS.len() - 1)]);
                            if data_every > 0 && n.is_multiple_of(data_every) {
                                f.data(&Payload {
                                    sql: "select * from user where id = ? and org = ?",
                                    params: [n, t as u64],
                                });
                                data += 1;
                            }
                            n += 1;
                            stack.push(f);
                        }
                        // Innermost first, as scopes close.
                        while let Some(mut f) = stack.pop() {
                            f.end();
                        }
                    }
                    data_total.fetch_add(data, std::sync::atomic::Ordering::Relaxed);
                })
                .expect("spawning a stress thread");
        }
    });
    (
        frames * threads.max(1) as u64,
        data_total.load(std::sync::atomic::Ordering::Relaxed),
    )
}

/// Where a workload records: a directory and/or a server (`FRAMELOG_CONNECT` winning, as
/// for any program), suspended at start-up if asked.
pub(crate) fn with_destination(
    mut builder: Builder,
    dir: Option<&std::path::Path>,
    connect: Option<&str>,
    suspend: bool,
) -> Builder {
    if let Some(dir) = dir {
        builder = builder.dir(dir);
    }
    if let Some(c) = connect {
        builder = builder.connect(c);
    }
    if suspend {
        builder = builder.suspend(crate::DEFAULT_SUSPEND_TIMEOUT);
    }
    builder.connect_from_env()
}

/// Runs the whole stress workload against a fresh recorder on `opts.dir`.
pub fn run(opts: &StressOptions) -> Result<StressReport, Error> {
    let builder = opts.segments.apply(
        Stopwatch::builder()
            .mode(opts.mode)
            .buffer_kib(opts.buffer_kib),
    );
    let recorder = with_destination(
        builder,
        opts.dir.as_deref(),
        opts.connect.as_deref(),
        opts.suspend,
    )
    .build()?;
    let t0 = Instant::now();
    let (frames, data_emitted) = record(
        &recorder,
        opts.threads,
        opts.frames,
        opts.depth,
        opts.data_every,
    );
    let record_ns = t0.elapsed().as_nanos() as u64;
    let stats = recorder.shutdown();
    let elapsed_ns = t0.elapsed().as_nanos() as u64;
    Ok(StressReport {
        emitted: frames * 2,
        dropped: stats.dropped,
        data_emitted,
        dropped_data: stats.dropped_data,
        written_bytes: stats.written_bytes,
        unsent: stats.unsent,
        elapsed_ns,
        record_ns,
        frames_per_sec: (frames as u128 * 1_000_000_000 / elapsed_ns.max(1) as u128) as u64,
        dir: stats.dir,
        stream: stats.stream,
    })
}
