//! Side by side: the cost of one empty profiler scope as the program sees it, draining to the
//! log or the socket included, against a two-timestamp floor measured in the same round.
//!
//! `cargo run --release -p framelog-stopwatch --features demo --example versus --
//!  [--scopes N] [--runs R] [--threads 1,2] [--cases floor,stopwatch-block,stopwatch-drop,tracy]`
//!
//! Every run is its own child process (this program re-executed with `--child CASE --threads T
//! --scopes N`). The child first waits until its other threads are quiet (`settled_ms` in the
//! JSON: Tracy's client, linked into every process of this program, reads `/proc/kallsyms` on
//! a thread of its own as the process starts). Then each of its T threads waits on a barrier,
//! opens one root scope and N nested empty scopes, each ended at once. Rounds run every thread
//! count and every case one after the other, the case order rotated per round; nothing runs in
//! parallel.
//!
//! What each number includes:
//! - `floor`: N pairs of reads of the stopwatch's clock (`stopwatch::clock::Clock::process()`,
//!   as in the frames benchmark), from the earliest thread's start to the last thread joined.
//! - `stopwatch-block`, `stopwatch-drop`: a `Recorder` writing to a fresh temporary directory
//!   (`TMPDIR`) in Block or Drop mode; `recorder.start("versus/root")`, then N
//!   `recorder.start("versus/empty")` dropped at once. The time runs from the earliest thread's
//!   first scope to `recorder.shutdown()` returned: the writer has written everything to the
//!   log's files and stopped. Dropped records (Drop mode; a frame is two records) come from the
//!   shutdown's stats, the bytes from the sizes of the files in the directory.
//! - `tracy`: Tracy's C++ client (`tracy-client` 0.19, only `enable`: Tracy 0.14.1, protocol
//!   82), `span!("versus/root")` then N `span!("versus/empty")` dropped at once. This program
//!   is the server: it connects to the child's client on 127.0.0.1, does the handshake (the
//!   shibboleth `TracyPrf` and the protocol version; it needs `HandshakeWelcome` and the
//!   child's pid in the welcome message), and the child starts its scopes only once
//!   `Client::is_connected()`. The drain then reads the client's length-prefixed LZ4 frames
//!   without decompressing them. The child's scopes end, its `main` returns, and at process
//!   exit the client's destructor sends what is still queued, then a frame holding only
//!   `QueueType::Terminate`, then waits for a server query (`TracyProfiler.cpp`, `Worker`:
//!   "Send items remaining in queues", "Send client termination notice", "Handle remaining
//!   server queries"). The time runs from the earliest thread's first scope (the child's wall
//!   clock) to the drain reading that Terminate frame (the parent's wall clock): the scopes,
//!   the client's compression and sending while they run, the child's return from `main` and
//!   the start of its process exit (the client's thread notices the shutdown after its idle
//!   sleep of up to 10 ms), and the last data on the wire. The drain then answers
//!   `ServerQueryTerminate`, which lets the client's thread end and the process exit; the time
//!   to the connection's end (EOF) is in the JSON as `tracy_eof_ns`. A drain that does not
//!   decompress LZ4 (nor query strings or source locations) costs the machine less CPU than a
//!   real Tracy server would, which favours Tracy on a machine with few cores.
//!
//! Per run: ns per scope per thread (the time above divided by N, the scopes per thread), the
//! ratio to the floor of the same round and thread count, the cost above that floor (ns minus
//! floor ns), and the loops alone (`loops_ns`: first scope to the last thread's last scope
//! ended, without draining). Bytes per frame: the log's files on disk for stopwatch, the
//! compressed stream on the socket for Tracy, per frame recorded (the root included). One JSON
//! line per run as each round ends, then a Markdown table (min / median / max of the runs per
//! cell).
//!
//! Every process of this program links Tracy's client, which starts before `main` and listens
//! on a TCP port (the first free one from 8086, on all interfaces: that is the client's
//! build, not this program's choice). This program's own client usually holds 8086 (and its
//! children inherit that listening socket), so the Tracy child is told to listen on another
//! port (`TRACY_PORT`, `--tracy-port`, by default a free port the OS picks) and the welcome
//! message's pid is checked to be the child's.
//! `TRACY_NO_EXIT` is removed from the children's environment (with it, a client nobody
//! connected to waits for a server at exit); do not set it for this program either.

use std::fmt::Write as _;
use std::hint::black_box;
use std::io::{BufReader, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{Barrier, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Parser, ValueEnum};
use serde::{Deserialize, Serialize};
use stopwatch::clock::{Clock, ClockSource};
use stopwatch::{BufferingMode, Stopwatch};

/// Tracy's handshake shibboleth (`HandshakeShibboleth`, `common/TracyProtocol.hpp`).
const TRACY_SHIBBOLETH: &[u8; 8] = b"TracyPrf";
/// The protocol version of Tracy 0.14.1's client (`ProtocolVersion`).
const TRACY_PROTOCOL: u32 = 82;
/// `HandshakeWelcome`: the client accepted us as its server.
const HANDSHAKE_WELCOME: u8 = 1;
/// `sizeof(WelcomeMessage)` (packed): 8 eight-byte fields, flags, cpuArch,
/// cpuManufacturer[12], cpuId (u32), programName[64], hostInfo[1024].
const WELCOME_SIZE: usize = 8 * 8 + 1 + 1 + 12 + 4 + 64 + 1024;
/// Offset of `WelcomeMessage::pid` (after timerMul, initBegin, initEnd, resolution, epoch,
/// exectime).
const WELCOME_PID_AT: usize = 6 * 8;
/// Largest compressed frame the client sends (`LZ4Size`: `Lz4CompressBound(256 KiB)`).
const TRACY_LZ4_MAX: u32 = 256 * 1024 + 256 * 1024 / 255 + 16;
/// The client's termination notice as it appears on the wire: one LZ4 block compressing the
/// single byte `QueueType::Terminate` (73): a token saying "1 literal", then the literal.
const TRACY_TERMINATE_FRAME: [u8; 2] = [0x10, 73];
/// `ServerQueryPacket` (packed: type u8, ptr u64, extra u32) with type `ServerQueryTerminate`.
const SERVER_QUERY_TERMINATE: [u8; 13] = [0; 13];
/// How long to wait for the Tracy child's client to accept us, and the child for us.
const CONNECT_DEADLINE: Duration = Duration::from_secs(60);
/// How long the drain waits for a byte (the client sends a keep-alive every ~5 s when idle).
const DRAIN_IDLE_LIMIT: Duration = Duration::from_secs(60);

/// One side of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Case {
    /// Two reads of the stopwatch's clock.
    Floor,
    /// A stopwatch `Recorder` in Block mode, to a log directory.
    StopwatchBlock,
    /// A stopwatch `Recorder` in Drop mode, to a log directory.
    StopwatchDrop,
    /// Tracy's client, drained by this program.
    Tracy,
}

impl Case {
    /// The name on the command line.
    fn name(self) -> &'static str {
        match self {
            Case::Floor => "floor",
            Case::StopwatchBlock => "stopwatch-block",
            Case::StopwatchDrop => "stopwatch-drop",
            Case::Tracy => "tracy",
        }
    }
}

/// Command line.
#[derive(Parser)]
#[command(about = "Cost of an empty profiler scope, draining included: stopwatch vs Tracy")]
struct Args {
    /// Empty scopes per thread (inside one root scope).
    #[arg(long, default_value_t = 10_000_000)]
    scopes: u64,
    /// Runs of every case at every thread count (interleaved rounds).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Cases, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "floor,stopwatch-block,stopwatch-drop,tracy"
    )]
    cases: Vec<Case>,
    /// TCP port the Tracy child's client listens on (0: a free port picked by the OS).
    #[arg(long, default_value_t = 0)]
    tracy_port: u16,
    /// Run one case in this process and print its result as one JSON line (used by the
    /// parent, which re-executes itself).
    #[arg(long, value_enum, hide = true)]
    child: Option<Case>,
}

/// What a child prints (one JSON line on stdout).
#[derive(Debug, Serialize, Deserialize)]
struct ChildReport {
    /// Wall-clock time of the earliest thread's first scope, ns since the Unix epoch.
    t0_unix_ns: u64,
    /// First scope to the end of the case, as the child measured it (None for Tracy, whose
    /// end the parent's drain sees).
    elapsed_ns: Option<u64>,
    /// First scope to the last thread's last scope ended (no draining).
    loops_ns: u64,
    /// Frame-log records dropped (stopwatch).
    dropped: Option<u64>,
    /// Bytes of the log directory's files (stopwatch).
    bytes: Option<u64>,
    /// How long the child waited for its other threads to go quiet before starting.
    settled_ms: u64,
}

/// One run, as printed (one JSON line).
#[derive(Debug, Clone, Serialize)]
struct RunResult {
    /// Round number (from 1).
    round: usize,
    /// Case.
    case: Case,
    /// Recording threads.
    threads: usize,
    /// Empty scopes per thread.
    scopes: u64,
    /// First scope to everything drained (see the module doc per case).
    elapsed_ns: u64,
    /// First scope to the last scope ended.
    loops_ns: u64,
    /// `elapsed_ns / scopes`.
    ns_per_scope: f64,
    /// The floor's `ns_per_scope` in the same round at the same thread count.
    floor_ns_per_scope: Option<f64>,
    /// `ns_per_scope / floor_ns_per_scope`.
    ratio_to_floor: Option<f64>,
    /// `ns_per_scope - floor_ns_per_scope`.
    above_floor_ns: Option<f64>,
    /// `loops_ns / scopes`.
    loops_ns_per_scope: f64,
    /// Frame-log records dropped (stopwatch; a frame is two records).
    dropped_records: Option<u64>,
    /// Bytes of the log on disk (stopwatch) or received on the socket (Tracy, LZ4).
    bytes: Option<u64>,
    /// `bytes` per frame recorded (`threads * (scopes + 1)`, the root included).
    bytes_per_frame: Option<f64>,
    /// Tracy: first scope to the connection's end (the child's process gone).
    tracy_eof_ns: Option<u64>,
    /// How long the child waited for its other threads to go quiet before starting.
    settled_ms: u64,
}

/// Errors: a message saying what failed.
type Result<T> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args = Args::parse();
    let outcome = match args.child {
        Some(case) => run_child(case, &args),
        None => run_parent(&args),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let who = if args.child.is_some() {
                "versus child"
            } else {
                "versus"
            };
            eprintln!("{who}: {e}");
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------------------------------
// The child: one case, one process.
// ---------------------------------------------------------------------------------------

/// When the recording threads ran.
struct Timing {
    /// The earliest thread's start.
    t0: Instant,
    /// The earliest thread's start, wall clock (ns since the Unix epoch).
    t0_unix_ns: u64,
    /// The last thread's end.
    loops_end: Instant,
}

/// Runs `body` on `threads` threads started together (a barrier), returning when they ran.
fn on_threads(threads: usize, body: impl Fn() + Sync) -> Result<Timing> {
    let barrier = Barrier::new(threads);
    let body = &body;
    let barrier = &barrier;
    std::thread::scope(|s| {
        // Every thread waits for a go before the barrier: if one cannot be spawned the others
        // are told to stop instead of waiting at the barrier forever.
        let mut gos = Vec::with_capacity(threads);
        let mut handles = Vec::with_capacity(threads);
        for t in 0..threads {
            let (go, wait) = mpsc::channel::<()>();
            let spawned = std::thread::Builder::new()
                .name(format!("versus-{t}"))
                .spawn_scoped(s, move || {
                    wait.recv().ok()?;
                    barrier.wait();
                    let start = Instant::now();
                    let wall = unix_ns(SystemTime::now());
                    body();
                    Some((start, wall, Instant::now()))
                });
            match spawned {
                Ok(h) => {
                    gos.push(go);
                    handles.push(h);
                }
                Err(e) => return Err(format!("spawning recording thread {t}: {e}")),
            }
        }
        for go in &gos {
            go.send(())
                .map_err(|_| "a recording thread ended before starting".to_owned())?;
        }
        let mut times = Vec::with_capacity(threads);
        for h in handles {
            match h.join() {
                Ok(Some(t)) => times.push(t),
                Ok(None) => return Err("a recording thread did not start".to_owned()),
                Err(_) => return Err("a recording thread panicked".to_owned()),
            }
        }
        let first = times.iter().min_by_key(|t| t.0).copied();
        let loops_end = times.iter().map(|t| t.2).max();
        match (first, loops_end) {
            (Some((t0, t0_unix_ns, _)), Some(loops_end)) => Ok(Timing {
                t0,
                t0_unix_ns,
                loops_end,
            }),
            _ => Err("no recording thread ran".to_owned()),
        }
    })
}

/// Runs one case in this process and prints its `ChildReport`.
fn run_child(case: Case, args: &Args) -> Result<()> {
    let threads = match args.threads.as_slice() {
        [t] if *t > 0 => *t,
        _ => return Err("a child takes one thread count (--threads T, T > 0)".to_owned()),
    };
    let n = args.scopes;
    let settled_ms = settle();
    let report = match case {
        Case::Floor => {
            // Calibrated before the threads start.
            let clock = Clock::process();
            let t = on_threads(threads, || {
                for _ in 0..n {
                    black_box(clock.now());
                    black_box(clock.now());
                }
            })?;
            ChildReport {
                t0_unix_ns: t.t0_unix_ns,
                elapsed_ns: Some(nanos(t.loops_end - t.t0)),
                loops_ns: nanos(t.loops_end - t.t0),
                dropped: None,
                bytes: None,
                settled_ms,
            }
        }
        Case::StopwatchBlock | Case::StopwatchDrop => {
            let mode = if case == Case::StopwatchBlock {
                BufferingMode::Block
            } else {
                BufferingMode::Drop
            };
            let dir = tempfile::tempdir()
                .map_err(|e| format!("creating a temporary log directory: {e}"))?;
            let recorder = Stopwatch::builder()
                .mode(mode)
                .dir(dir.path())
                .build()
                .map_err(|e| format!("building a recorder on {}: {e}", dir.path().display()))?;
            let t = on_threads(threads, || {
                let root = recorder.start("versus/root");
                for _ in 0..n {
                    drop(black_box(recorder.start("versus/empty")));
                }
                drop(root);
            })?;
            let stats = recorder.shutdown();
            let end = Instant::now();
            let bytes = dir_bytes(dir.path())?;
            ChildReport {
                t0_unix_ns: t.t0_unix_ns,
                elapsed_ns: Some(nanos(end - t.t0)),
                loops_ns: nanos(t.loops_end - t.t0),
                dropped: Some(stats.dropped),
                bytes: Some(bytes),
                settled_ms,
            }
        }
        Case::Tracy => {
            // Without `manual-lifetime` the client started before `main`; this is a no-op.
            let _client = tracy_client::Client::start();
            let deadline = Instant::now() + CONNECT_DEADLINE;
            while !tracy_client::Client::is_connected() {
                if Instant::now() > deadline {
                    return Err(format!(
                        "no Tracy server connected to this child's client within {} s",
                        CONNECT_DEADLINE.as_secs()
                    ));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            let t = on_threads(threads, || {
                let root = tracy_client::span!("versus/root");
                for _ in 0..n {
                    drop(black_box(tracy_client::span!("versus/empty")));
                }
                drop(root);
            })?;
            // The end is the parent's: the client sends what is queued and its Terminate at
            // process exit, after this report.
            ChildReport {
                t0_unix_ns: t.t0_unix_ns,
                elapsed_ns: None,
                loops_ns: nanos(t.loops_end - t.t0),
                dropped: None,
                bytes: None,
                settled_ms,
            }
        }
    };
    let line = serde_json::to_string(&report).map_err(|e| format!("encoding the report: {e}"))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| format!("writing the report to the parent: {e}"))
}

/// Total size of the files under `dir`.
fn dir_bytes(dir: &Path) -> Result<u64> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("listing {}: {e}", dir.display()))?;
    let mut total = 0;
    for entry in entries {
        let entry = entry.map_err(|e| format!("listing {}: {e}", dir.display()))?;
        let path = entry.path();
        let meta = entry
            .metadata()
            .map_err(|e| format!("reading the size of {}: {e}", path.display()))?;
        total += if meta.is_dir() {
            dir_bytes(&path)?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

/// Waits (at most `SETTLE_LIMIT`) until this process's other threads use less than a tenth
/// of a core, and returns how long that took in ms. Tracy's client, linked into every process
/// of this program, starts a symbol thread that reads `/proc/kallsyms` as the process starts
/// (`InitCallstack`, tens of ms of CPU): on two cores that would land in the measurement.
/// Without `/proc` (not Linux) it returns at once.
fn settle() -> u64 {
    let start = Instant::now();
    let Some(mut before) = others_cpu_ticks() else {
        return 0;
    };
    while start.elapsed() < SETTLE_LIMIT {
        std::thread::sleep(SETTLE_WINDOW);
        let Some(now) = others_cpu_ticks() else {
            break;
        };
        // Clock ticks are 10 ms: at most one in a 100 ms window is under a tenth of a core.
        if now.saturating_sub(before) <= 1 {
            break;
        }
        before = now;
    }
    if start.elapsed() >= SETTLE_LIMIT {
        eprintln!(
            "versus: this process's other threads were still busy after {} s; measuring anyway",
            SETTLE_LIMIT.as_secs()
        );
    }
    nanos(start.elapsed()) / 1_000_000
}

/// How often `settle` looks at the other threads' CPU time.
const SETTLE_WINDOW: Duration = Duration::from_millis(100);
/// How long `settle` waits at most.
const SETTLE_LIMIT: Duration = Duration::from_secs(5);

/// CPU time (user + system, in clock ticks) of this process minus the calling thread's.
fn others_cpu_ticks() -> Option<u64> {
    let process = cpu_ticks("/proc/self/stat")?;
    let this_thread = cpu_ticks("/proc/thread-self/stat")?;
    Some(process.saturating_sub(this_thread))
}

/// utime + stime (fields 14 and 15) of a `/proc/.../stat` file.
fn cpu_ticks(path: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(path).ok()?;
    // The command name (field 2) may hold spaces: count fields after its closing parenthesis,
    // where field 3 (the state) comes first.
    let mut fields = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// A duration in whole ns.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A wall-clock time in ns since the Unix epoch (0 before it).
fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, nanos)
}

// ---------------------------------------------------------------------------------------
// The parent: rounds of children, the Tracy drain, the results.
// ---------------------------------------------------------------------------------------

/// Runs every round and prints the JSON lines and the table.
fn run_parent(args: &Args) -> Result<()> {
    if args.runs == 0 || args.threads.is_empty() || args.cases.is_empty() {
        return Err("nothing to run: --runs, --threads and --cases must not be empty".to_owned());
    }
    if let Some(t) = args.threads.iter().find(|&&t| t == 0) {
        return Err(format!("--threads {t}: a run needs at least one thread"));
    }
    if args.scopes == 0 {
        return Err("--scopes must be at least 1".to_owned());
    }
    // This process's own Tracy client loads kernel symbols as it starts: not during a run.
    settle();
    let exe = std::env::current_exe()
        .map_err(|e| format!("finding this program to re-execute it: {e}"))?;
    let mut results: Vec<RunResult> = Vec::new();
    for round in 1..=args.runs {
        let mut cases = args.cases.clone();
        let shift = (round - 1) % cases.len();
        cases.rotate_left(shift);
        let mut this_round = Vec::new();
        for &threads in &args.threads {
            for &case in &cases {
                eprintln!(
                    "versus: round {round}/{}: {} on {threads} thread(s), {} scopes each",
                    args.runs,
                    case.name(),
                    args.scopes
                );
                let r = run_one(&exe, case, threads, args, round).map_err(|e| {
                    format!("round {round}, {} on {threads} thread(s): {e}", case.name())
                })?;
                this_round.push(r);
            }
        }
        relate_to_floor(&mut this_round);
        let mut out = std::io::stdout().lock();
        for r in &this_round {
            let line = serde_json::to_string(r).map_err(|e| format!("encoding a result: {e}"))?;
            // A reader that went away (`| head`) loses the lines, not the runs.
            let _ = writeln!(out, "{line}");
        }
        results.extend(this_round);
    }
    let table = table(args, &results);
    let _ = writeln!(std::io::stdout().lock(), "\n{table}");
    Ok(())
}

/// Fills in each run's floor (the floor run of the same round and thread count).
fn relate_to_floor(round: &mut [RunResult]) {
    let floors: Vec<(usize, f64)> = round
        .iter()
        .filter(|r| r.case == Case::Floor)
        .map(|r| (r.threads, r.ns_per_scope))
        .collect();
    for r in round.iter_mut() {
        if let Some(&(_, floor)) = floors.iter().find(|(t, _)| *t == r.threads) {
            r.floor_ns_per_scope = Some(floor);
            r.ratio_to_floor = Some(r.ns_per_scope / floor);
            r.above_floor_ns = Some(r.ns_per_scope - floor);
        }
    }
}

/// Runs one case in a child process and returns its result.
fn run_one(exe: &Path, case: Case, threads: usize, args: &Args, round: usize) -> Result<RunResult> {
    let mut cmd = Command::new(exe);
    cmd.args(["--child", case.name()])
        .args(["--threads", &threads.to_string()])
        .args(["--scopes", &args.scopes.to_string()])
        .env_remove("TRACY_NO_EXIT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let port = if case == Case::Tracy {
        let port = match args.tracy_port {
            0 => free_port()?,
            p => p,
        };
        cmd.env("TRACY_PORT", port.to_string());
        Some(port)
    } else {
        None
    };
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("starting {}: {e}", exe.display()))?;
    let drained = match port {
        Some(port) => match serve_tracy(&mut child, port) {
            Ok(d) => Some(d),
            Err(e) => {
                // Our own child: stop it rather than leave it waiting for a server.
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        },
        None => None,
    };
    let output = child
        .wait_with_output()
        .map_err(|e| format!("waiting for the child: {e}"))?;
    if !output.status.success() {
        return Err(format!("the child failed ({})", output.status));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .ok_or_else(|| "the child printed no report".to_owned())?;
    let report: ChildReport = serde_json::from_str(line)
        .map_err(|e| format!("reading the child's report {line:?}: {e}"))?;
    let (elapsed_ns, bytes, tracy_eof_ns) = match drained {
        Some(d) => {
            let since = |t: u64| {
                t.checked_sub(report.t0_unix_ns).ok_or_else(|| {
                    "the drain ended before the child's first scope (wall clock stepped?)"
                        .to_owned()
                })
            };
            (
                since(d.terminate_unix_ns)?,
                Some(d.bytes),
                Some(since(d.eof_unix_ns)?),
            )
        }
        None => (
            report
                .elapsed_ns
                .ok_or_else(|| "the child's report has no elapsed time".to_owned())?,
            report.bytes,
            None,
        ),
    };
    let scopes = args.scopes;
    let frames = threads as f64 * (scopes + 1) as f64;
    Ok(RunResult {
        round,
        case,
        threads,
        scopes,
        elapsed_ns,
        loops_ns: report.loops_ns,
        ns_per_scope: elapsed_ns as f64 / scopes as f64,
        floor_ns_per_scope: None,
        ratio_to_floor: None,
        above_floor_ns: None,
        loops_ns_per_scope: report.loops_ns as f64 / scopes as f64,
        dropped_records: report.dropped,
        bytes,
        bytes_per_frame: bytes.map(|b| b as f64 / frames),
        tracy_eof_ns,
        settled_ms: report.settled_ms,
    })
}

/// A TCP port free on 127.0.0.1 now (the OS's pick).
fn free_port() -> Result<u16> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("finding a free port for Tracy's client: {e}"))
}

/// What the Tracy drain saw.
struct Drained {
    /// When the client's Terminate frame was read (all data of the run received).
    terminate_unix_ns: u64,
    /// When the connection ended (the child's client closed it at exit).
    eof_unix_ns: u64,
    /// Bytes received after the welcome message.
    bytes: u64,
}

/// Acts as the Tracy server of `child`'s client on 127.0.0.1:`port`: connects, does the
/// handshake, drains until the client's Terminate, answers `ServerQueryTerminate`, and reads
/// to the end of the connection.
fn serve_tracy(child: &mut Child, port: u16) -> Result<Drained> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = connect_tracy(child, addr)?;
    handshake(&mut stream, addr, child.id())?;
    drain(stream, addr)
}

/// Connects to `addr`, retrying until the child's client listens (or the child is gone).
fn connect_tracy(child: &mut Child, addr: SocketAddr) -> Result<TcpStream> {
    let deadline = Instant::now() + CONNECT_DEADLINE;
    loop {
        let err = match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            Ok(s) => return Ok(s),
            Err(e) => e,
        };
        match child.try_wait() {
            Ok(Some(status)) => {
                return Err(format!(
                    "the Tracy child exited ({status}) before its client accepted a connection \
                     on {addr}"
                ));
            }
            Ok(None) => {}
            Err(e) => return Err(format!("checking on the Tracy child: {e}")),
        }
        if Instant::now() > deadline {
            return Err(format!(
                "connecting to the Tracy child's client on {addr}: still failing after {} s \
                 ({err}); is the port busy?",
                CONNECT_DEADLINE.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Tracy's handshake: shibboleth and protocol version out, status and welcome message in;
/// checks the welcome comes from the process `pid`.
fn handshake(stream: &mut TcpStream, addr: SocketAddr, pid: u32) -> Result<()> {
    let io = |what: &str, e: std::io::Error| format!("Tracy handshake with {addr}: {what}: {e}");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| io("setting a read timeout", e))?;
    let mut hello = Vec::with_capacity(12);
    hello.extend_from_slice(TRACY_SHIBBOLETH);
    hello.extend_from_slice(&TRACY_PROTOCOL.to_le_bytes());
    stream
        .write_all(&hello)
        .map_err(|e| io("sending the shibboleth", e))?;
    let mut status = [0u8; 1];
    stream
        .read_exact(&mut status)
        .map_err(|e| io("reading the handshake status", e))?;
    match status[0] {
        HANDSHAKE_WELCOME => {}
        2 => {
            return Err(format!(
                "Tracy client on {addr} refused the handshake: protocol mismatch (we speak \
                 {TRACY_PROTOCOL})"
            ));
        }
        3 => {
            return Err(format!(
                "Tracy client on {addr} refused the handshake: not available (it already served \
                 a server)"
            ));
        }
        4 => {
            return Err(format!(
                "Tracy client on {addr} refused the handshake: dropped"
            ));
        }
        s => {
            return Err(format!(
                "Tracy client on {addr} refused the handshake (status {s})"
            ));
        }
    }
    let mut welcome = [0u8; WELCOME_SIZE];
    stream
        .read_exact(&mut welcome)
        .map_err(|e| io("reading the welcome message", e))?;
    let mut pid_bytes = [0u8; 8];
    pid_bytes.copy_from_slice(&welcome[WELCOME_PID_AT..WELCOME_PID_AT + 8]);
    let their_pid = u64::from_le_bytes(pid_bytes);
    if their_pid != u64::from(pid) {
        return Err(format!(
            "the Tracy client on {addr} is process {their_pid}, not the child ({pid}): another \
             Tracy program holds the port"
        ));
    }
    Ok(())
}

/// Reads the client's frames (u32 length, LZ4 block) until its Terminate frame, answers
/// `ServerQueryTerminate`, then reads to the end of the connection.
fn drain(stream: TcpStream, addr: SocketAddr) -> Result<Drained> {
    let io =
        |what: &str, e: std::io::Error| format!("draining Tracy's client on {addr}: {what}: {e}");
    stream
        .set_read_timeout(Some(DRAIN_IDLE_LIMIT))
        .map_err(|e| io("setting a read timeout", e))?;
    let mut writer = stream
        .try_clone()
        .map_err(|e| io("cloning the socket", e))?;
    let mut reader = BufReader::with_capacity(1 << 20, stream);
    let mut frame = vec![0u8; TRACY_LZ4_MAX as usize];
    let mut bytes = 0u64;
    loop {
        let mut len = [0u8; 4];
        reader.read_exact(&mut len).map_err(|e| match e.kind() {
            ErrorKind::UnexpectedEof => {
                format!("Tracy's client on {addr} closed the connection before its Terminate")
            }
            ErrorKind::WouldBlock | ErrorKind::TimedOut => format!(
                "Tracy's client on {addr} sent nothing for {} s",
                DRAIN_IDLE_LIMIT.as_secs()
            ),
            _ => io("reading a frame's length", e),
        })?;
        let len = u32::from_le_bytes(len);
        if len == 0 || len > TRACY_LZ4_MAX {
            return Err(format!(
                "Tracy's client on {addr} sent a frame of {len} bytes (at most {TRACY_LZ4_MAX}): \
                 not the stream this drain understands"
            ));
        }
        let body = &mut frame[..len as usize];
        reader
            .read_exact(body)
            .map_err(|e| io("reading a frame", e))?;
        bytes += 4 + u64::from(len);
        if body == TRACY_TERMINATE_FRAME.as_slice() {
            break;
        }
    }
    let terminate_unix_ns = unix_ns(SystemTime::now());
    writer
        .write_all(&SERVER_QUERY_TERMINATE)
        .map_err(|e| io("sending ServerQueryTerminate", e))?;
    let rest = std::io::copy(&mut reader, &mut std::io::sink())
        .map_err(|e| io("reading to the end of the connection", e))?;
    let eof_unix_ns = unix_ns(SystemTime::now());
    Ok(Drained {
        terminate_unix_ns,
        eof_unix_ns,
        bytes: bytes + rest,
    })
}

// ---------------------------------------------------------------------------------------
// The table.
// ---------------------------------------------------------------------------------------

/// Min, median and max of `values` (None when empty).
fn spread(mut values: Vec<f64>) -> Option<(f64, f64, f64)> {
    values.sort_by(f64::total_cmp);
    let (first, last) = (values.first()?, values.last()?);
    let mid = values.len() / 2;
    let median = if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    };
    Some((*first, median, *last))
}

/// `min / median / max` with `decimals` decimals, or `–`.
fn cell(values: Vec<f64>, decimals: usize) -> String {
    match spread(values) {
        Some((lo, mid, hi)) => format!("{lo:.decimals$} / {mid:.decimals$} / {hi:.decimals$}"),
        None => "–".to_owned(),
    }
}

/// The Markdown table of all runs, one row per thread count and case.
fn table(args: &Args, results: &[RunResult]) -> String {
    let clock = match Clock::process().source() {
        ClockSource::Tsc => "TSC",
        ClockSource::Instant => "Instant",
    };
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{} scopes per thread, {} run(s) per cell (min / median / max); floor: two reads of \
         the stopwatch clock ({clock}); ns per scope per thread, draining included",
        args.scopes, args.runs
    );
    let _ = writeln!(t);
    let _ = writeln!(
        t,
        "| case | threads | ns/scope | × floor | above floor (ns) | loops only (ns/scope) | \
         dropped records | bytes/frame |"
    );
    let _ = writeln!(t, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for &threads in &args.threads {
        for &case in &args.cases {
            let runs: Vec<&RunResult> = results
                .iter()
                .filter(|r| r.case == case && r.threads == threads)
                .collect();
            let col = |f: fn(&RunResult) -> Option<f64>, d: usize| {
                cell(runs.iter().filter_map(|r| f(r)).collect(), d)
            };
            let _ = writeln!(
                t,
                "| {} | {threads} | {} | {} | {} | {} | {} | {} |",
                case.name(),
                col(|r| Some(r.ns_per_scope), 2),
                col(|r| r.ratio_to_floor, 2),
                col(|r| r.above_floor_ns, 2),
                col(|r| Some(r.loops_ns_per_scope), 2),
                col(|r| r.dropped_records.map(|d| d as f64), 0),
                col(|r| r.bytes_per_frame, 2),
            );
        }
    }
    t
}
