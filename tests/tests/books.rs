//! Every output keeps exact books, in every combination users make: a log directory, a
//! stream, or both; the server running, absent (or started late), killed and restarted,
//! stopped (SIGSTOP) and continued, or with a full disk; the program's own disk full; Drop and
//! Block; programs that exit at once. For each output, written + dropped + unsent = records
//! recorded, and `framelog stats` on each log agrees with what the program printed.
//!
//! Real `framelog serve` processes and real `books_child` programs on 127.0.0.1. A full disk
//! is a 1 MiB tmpfs (root, as on CI and this machine); without root, a file-size limit
//! (`ulimit -f`, SIGXFSZ ignored, so writes fail with EFBIG) stands in for it.
//!
//! A fixed list of cases covers every value of every dimension; `FRAMELOG_BOOKS_RANDOM=N`
//! adds N cases drawn from the whole space (seed `FRAMELOG_BOOKS_SEED`, printed).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use framelog_tests::{Serve, framelog_bin, signal};
use rand::{Rng, SeedableRng};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outputs {
    Dir,
    Stream,
    Both,
}

/// What happens to the server while the program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Server {
    Running,
    /// Never there.
    Absent,
    /// Started a second into the run.
    Late,
    /// `kill -9` a moment into the run, a new one on the same port and directory later.
    KilledRestarted,
    /// SIGSTOP for 2 s (under the 5 s stall limit), then SIGCONT.
    Stopped,
    /// Its log directory is a 1 MiB file system.
    DiskFull,
}

#[derive(Clone, Copy, Debug)]
struct Case {
    outputs: Outputs,
    server: Server,
    /// The program's own log directory is full (1 MiB).
    local_full: bool,
    block: bool,
    threads: u32,
    /// Iterations per thread (two frames each).
    frames: u64,
    buffer_kib: usize,
    pace_us: u64,
}

impl Case {
    fn dir(&self) -> bool {
        self.outputs != Outputs::Stream
    }
    fn stream(&self) -> bool {
        self.outputs != Outputs::Dir
    }
}

/// One output's books as the program printed them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Books {
    written: u64,
    dropped: u64,
    unsent: u64,
}

/// A log's counts per `framelog stats --json` (zero when there is no log).
#[derive(Clone, Copy, Debug, Default)]
struct LogCounts {
    records: u64,
    dropped: u64,
}

fn log_counts(dir: &Path) -> LogCounts {
    let out = Command::new(framelog_bin())
        .args(["stats", "--json"])
        .arg(dir)
        .output()
        .expect("run framelog stats");
    if !out.status.success() {
        // No log there (the server never got a record): nothing in it.
        return LogCounts::default();
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stats JSON");
    let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
    LogCounts {
        records: n("frames") + n("ends"),
        dropped: n("dropped"),
    }
}

/// A 64 KiB file system at `dir` (packed logs take about 5 bytes a frame: the fixed cases
/// fill it), unmounted when dropped; `None` without root.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_owned()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// `cmd` run with at most 64 KiB per file written (SIGXFSZ ignored: writes past it fail with
/// EFBIG), the stand-in for a full disk without root.
fn with_file_limit(cmd: &Path, args: &[String]) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg("trap '' XFSZ; ulimit -f 128; exec \"$@\"")
        .arg("sh")
        .arg(cmd)
        .args(args);
    c
}

/// A free port on 127.0.0.1 (nothing listens on it once this returns).
fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

fn start_serve(addr: &str, dir: &Path, limit_files: bool) -> Serve {
    if limit_files {
        let args: Vec<String> = ["serve", "--listen", addr, "--dir"]
            .iter()
            .map(|s| (*s).to_owned())
            .chain([dir.to_string_lossy().into_owned()])
            .collect();
        Serve::spawn(with_file_limit(&framelog_bin(), &args))
    } else {
        Serve::start(addr, dir, &[])
    }
}

/// What the program printed, and its stderr.
struct Outcome {
    emitted: u64,
    dir: Option<Books>,
    stream: Option<Books>,
    stderr: String,
}

fn books(v: &serde_json::Value) -> Option<Books> {
    if v.is_null() {
        return None;
    }
    let n = |k: &str| v[k].as_u64().unwrap();
    Some(Books {
        written: n("written"),
        dropped: n("dropped"),
        unsent: n("unsent"),
    })
}

/// Runs one case; returns a description of what disagreed (empty: all agreed).
fn run(case: &Case) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("local");
    let served = tmp.path().join("served");
    // Full disks: tmpfs with root, else a file-size limit on the process.
    let mut mounts = Vec::new();
    let mut limit_child = false;
    let mut limit_serve = false;
    if case.local_full && case.dir() {
        match Tmpfs::mount(&local) {
            Some(m) => mounts.push(m),
            None => limit_child = true,
        }
    }
    if case.server == Server::DiskFull && case.stream() {
        match Tmpfs::mount(&served) {
            Some(m) => mounts.push(m),
            None => limit_serve = true,
        }
    }
    let needs_server = case.stream();
    let (mut serve, addr) = match case.server {
        _ if !needs_server => (None, String::new()),
        Server::Absent | Server::Late => (None, free_addr()),
        _ => {
            let s = start_serve("127.0.0.1:0", &served, limit_serve);
            let a = s.addr.clone();
            (Some(s), a)
        }
    };
    let mut args: Vec<String> = vec![
        "--mode".into(),
        if case.block { "block" } else { "drop" }.into(),
        "--threads".into(),
        case.threads.to_string(),
        "--frames".into(),
        case.frames.to_string(),
        "--buffer-kib".into(),
        case.buffer_kib.to_string(),
        "--pace-us".into(),
        case.pace_us.to_string(),
        "--data-every".into(),
        "50".into(),
    ];
    if case.dir() {
        args.extend(["--dir".into(), local.to_string_lossy().into_owned()]);
    }
    if case.stream() {
        args.extend(["--connect".into(), addr.clone()]);
    }
    let child_bin = PathBuf::from(env!("CARGO_BIN_EXE_books_child"));
    let mut cmd = if limit_child {
        with_file_limit(&child_bin, &args)
    } else {
        let mut c = Command::new(&child_bin);
        c.args(&args);
        c
    };
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = Arc::new(Mutex::new(String::new()));
    let err_lines = stderr.clone();
    let err = child.stderr.take().unwrap();
    let err_thread = std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let mut s = err_lines.lock().unwrap();
            s.push_str(&line);
            s.push('\n');
        }
    });
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "started", "{case:?}");
    let began = Instant::now();
    let at = |secs: f64| {
        let t = began + Duration::from_secs_f64(secs);
        std::thread::sleep(t.saturating_duration_since(Instant::now()));
    };
    // The fault, while the program records.
    match case.server {
        Server::Late if needs_server => {
            at(1.0);
            serve = Some(start_serve(&addr, &served, false));
        }
        Server::KilledRestarted if needs_server => {
            at(0.8);
            let mut s = serve.take().unwrap();
            signal(s.child.id(), "KILL");
            s.child.wait().unwrap();
            at(2.0);
            serve = Some(start_serve(&addr, &served, false));
        }
        Server::Stopped if needs_server => {
            at(0.8);
            let pid = serve.as_ref().unwrap().child.id();
            signal(pid, "STOP");
            at(2.8);
            signal(pid, "CONT");
        }
        _ => {}
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{case:?}: the program did not exit within 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    err_thread.join().unwrap();
    let stderr = stderr.lock().unwrap().clone();
    assert!(status.success(), "{case:?}: program failed: {stderr}");
    let v: serde_json::Value = serde_json::from_str(rest.trim())
        .unwrap_or_else(|_| panic!("{case:?}: no books in {rest:?}; stderr {stderr}"));
    let o = Outcome {
        emitted: v["emitted"].as_u64().unwrap(),
        dir: books(&v["dir"]),
        stream: books(&v["stream"]),
        stderr,
    };
    // Everything the program sent is in the server's log once it has exited (it waited
    // for the Acks); stop the server so that its log is closed too.
    if let Some(s) = serve.take() {
        assert!(s.terminate().success(), "{case:?}: serve failed");
    }
    let mut wrong = check(case, &o, &local, &served);
    if !wrong.is_empty() {
        wrong.push(format!("program said: {}", o.stderr.trim()));
    }
    drop(mounts);
    wrong
}

/// What must hold for `case` given the program's books `o` and the logs.
fn check(case: &Case, o: &Outcome, local: &Path, served: &Path) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut expect = |ok: bool, what: String| {
        if !ok {
            wrong.push(what);
        }
    };
    expect(
        o.dir.is_some() == case.dir() && o.stream.is_some() == case.stream(),
        format!("outputs: dir {:?}, stream {:?}", o.dir, o.stream),
    );
    for (name, b) in [("dir", o.dir), ("stream", o.stream)] {
        if let Some(b) = b {
            expect(
                b.written + b.dropped + b.unsent == o.emitted,
                format!("{name}: {b:?} does not add up to {} recorded", o.emitted),
            );
        }
    }
    if let Some(b) = o.dir {
        let log = log_counts(local);
        expect(
            log.records == b.written,
            format!(
                "dir: the log holds {} records, the program wrote {}",
                log.records, b.written
            ),
        );
        let exact = !case.local_full;
        expect(
            log.dropped == b.dropped || (!exact && log.dropped <= b.dropped),
            format!(
                "dir: the log's Dropped records say {}, the program {}",
                log.dropped, b.dropped
            ),
        );
        expect(b.unsent == 0, format!("dir: unsent {}", b.unsent));
        if case.local_full {
            expect(
                b.dropped > 0,
                "dir: the full disk cost nothing: not full?".into(),
            );
        }
        if case.block && !case.local_full {
            expect(
                b.dropped == 0,
                format!("dir: Block mode dropped {}", b.dropped),
            );
        }
    }
    if let Some(b) = o.stream {
        let log = log_counts(served);
        expect(
            log.records == b.written,
            format!(
                "stream: the server's log holds {} records, the program had {} acknowledged",
                log.records, b.written
            ),
        );
        // The loss reaches the server's log as Dropped records (unsent: at the start of the
        // next stream); where a stream failed, Dropped records in what it lost are lost too.
        let lost = b.dropped + b.unsent;
        let exact = matches!(
            case.server,
            Server::Running | Server::Stopped | Server::Late
        );
        expect(
            log.dropped == lost || (!exact && log.dropped <= lost),
            format!(
                "stream: the server's log's Dropped records say {}, the program dropped {} + unsent {}",
                log.dropped, b.dropped, b.unsent
            ),
        );
        if case.server == Server::DiskFull {
            expect(
                b.unsent > 0,
                "stream: the server's full disk cost nothing: not full?".into(),
            );
        }
        if case.server == Server::Absent {
            expect(
                b.written == 0,
                format!("stream: written {} without a server", b.written),
            );
        }
        if case.block && case.server == Server::Running {
            expect(
                b.dropped == 0 && b.unsent == 0,
                format!("stream: Block mode, a running server: {b:?}"),
            );
        }
    }
    if o.stream.is_some_and(|b| b.unsent > 0) {
        expect(
            o.stderr.contains("were not sent"),
            "unsent records, and the program did not say so".into(),
        );
    }
    wrong
}

/// The fixed cases: every output, server fate, mode and disk state at least once, and the
/// pairs that broke before (a directory beside a stream with each server fate).
fn fixed_cases() -> Vec<Case> {
    use Outputs::*;
    use Server::*;
    let c = |outputs, server, local_full, block, threads, frames, buffer_kib, pace_us| Case {
        outputs,
        server,
        local_full,
        block,
        threads,
        frames,
        buffer_kib,
        pace_us,
    };
    // About 3 s of recording where a fault happens in the run (pace: 32 iterations per
    // 16 ms a thread, 8,000 records/s a thread).
    let (f, p) = (6_000, 16_000);
    vec![
        c(Dir, Running, false, false, 2, 200_000, 16, 0),
        c(Dir, Running, true, true, 2, 30_000, 256, 0),
        c(Stream, Running, false, true, 2, 50_000, 4096, 0),
        c(Stream, Absent, false, false, 2, f / 4, 256, p),
        c(Stream, KilledRestarted, false, true, 2, f, 4096, p),
        c(Stream, Stopped, false, false, 2, f, 64, p),
        c(Stream, DiskFull, false, true, 1, 60_000, 4096, 0),
        c(Both, Running, false, false, 2, 200_000, 16, 0),
        c(Both, Running, false, true, 2, 50_000, 4096, 0),
        c(Both, Late, false, true, 2, f, 4096, p),
        c(Both, Late, false, false, 2, f, 32, p),
        c(Both, KilledRestarted, false, false, 2, f, 4096, p),
        c(Both, Stopped, false, true, 2, f, 4096, p),
        c(Both, DiskFull, false, true, 1, 60_000, 4096, 0),
        c(Both, Running, true, true, 1, 60_000, 4096, 0),
        c(Both, Absent, false, true, 2, f / 4, 4096, p),
        // Programs that exit at once: a few frames, the session barely started.
        c(Both, Running, false, true, 1, 5, 4096, 0),
        c(Stream, Running, false, false, 1, 5, 4096, 0),
        c(Both, Absent, false, false, 1, 5, 4096, 0),
    ]
}

fn random_case(rng: &mut impl Rng) -> Case {
    let outputs = [Outputs::Dir, Outputs::Stream, Outputs::Both][rng.gen_range(0..3)];
    let server = [
        Server::Running,
        Server::Absent,
        Server::Late,
        Server::KilledRestarted,
        Server::Stopped,
        Server::DiskFull,
    ][rng.gen_range(0..6)];
    let short = rng.gen_bool(0.2);
    Case {
        outputs,
        server,
        local_full: rng.gen_bool(0.15),
        block: rng.gen_bool(0.5),
        threads: rng.gen_range(1..=3),
        frames: if short {
            rng.gen_range(1..20)
        } else {
            rng.gen_range(2_000..8_000)
        },
        buffer_kib: [16, 64, 256, 4096][rng.gen_range(0..4)],
        pace_us: if short { 0 } else { 16_000 },
    }
}

#[test]
fn every_output_balances_and_its_log_agrees_in_every_combination() {
    let mut cases = fixed_cases();
    let extra: usize = std::env::var("FRAMELOG_BOOKS_RANDOM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if extra > 0 {
        let seed: u64 = std::env::var("FRAMELOG_BOOKS_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(rand::random);
        eprintln!("books: {extra} random cases, FRAMELOG_BOOKS_SEED={seed}");
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        cases.extend((0..extra).map(|_| random_case(&mut rng)));
    }
    let mut failures = Vec::new();
    for case in &cases {
        let t = Instant::now();
        let wrong = run(case);
        eprintln!(
            "books: {case:?}: {} in {:.1} s",
            if wrong.is_empty() { "ok" } else { "WRONG" },
            t.elapsed().as_secs_f64()
        );
        if !wrong.is_empty() {
            failures.push(format!("{case:?}:\n  {}", wrong.join("\n  ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
