//! Remote sessions with real processes on 127.0.0.1: `framelog serve` and `session_child`
//! programs that stream to it; servers and programs killed with SIGKILL mid-session.

use std::collections::HashMap;
use std::io::BufRead;
use std::process::{Child, Command, Stdio};

use formats::{FrameKey, Record};
use framelog::{DataStore, LogReader};
use framelog_tests::{Serve, signal, wait_until};

/// What a log holds.
#[derive(Default)]
struct Log {
    /// key → [starts, ends]
    frames: HashMap<FrameKey, [u32; 2]>,
    /// worker → (process name, pid) of its latest WorkerInfo
    workers: HashMap<u8, (String, u32)>,
    /// Every (process name, pid) a WorkerInfo named (a worker slot a program left may be
    /// given to a later one: programs, not slots, are what a test counts).
    processes: std::collections::BTreeSet<(String, u32)>,
    dropped: u64,
    damage: u64,
}

fn read_log(dir: &std::path::Path) -> Log {
    let mut log = Log::default();
    let mut reader = LogReader::open(dir).unwrap();
    reader
        .read_available(|_, r| match r {
            Record::Start(s) => {
                log.frames.entry(FrameKey::new(s.worker, s.id)).or_default()[0] += 1
            }
            Record::End(e) => log.frames.entry(FrameKey::new(e.worker, e.id)).or_default()[1] += 1,
            Record::WorkerInfo(w) => {
                log.workers.insert(w.worker, (w.name.to_owned(), w.pid));
                log.processes.insert((w.name.to_owned(), w.pid));
            }
            Record::Dropped(d) => log.dropped += d.count,
            _ => {}
        })
        .unwrap();
    log.damage = reader.damage_totals().0;
    log
}

/// Counts ended frames and workers of a growing log, reading only what is new each time.
struct Tail {
    reader: Option<LogReader>,
    dir: std::path::PathBuf,
    ends: usize,
    workers: usize,
}

impl Tail {
    fn new(dir: &std::path::Path) -> Tail {
        Tail {
            reader: None,
            dir: dir.to_owned(),
            ends: 0,
            workers: 0,
        }
    }

    /// Reads what was appended since the last call; (ended frames, workers) so far.
    fn update(&mut self) -> (usize, usize) {
        if self.reader.is_none() {
            self.reader = LogReader::open(&self.dir).ok();
        }
        if let Some(r) = &mut self.reader {
            let (ends, workers) = (&mut self.ends, &mut self.workers);
            let _ = r.read_available(|_, rec| match rec {
                Record::End(_) => *ends += 1,
                Record::WorkerInfo(_) => *workers += 1,
                _ => {}
            });
        }
        (self.ends, self.workers)
    }
}

/// Starts a session child with `args`; waits for its `started` line (after `install()`).
fn child(args: &[&str]) -> Child {
    let mut c = Command::new(env!("CARGO_BIN_EXE_session_child"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = std::io::BufReader::new(c.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "started");
    // Keep the rest of stdout readable by `finish`.
    c.stdout = Some(out.into_inner());
    c
}

/// Closes the child's stdin (stopping a `--frames 0` child) and returns its counters line
/// and stderr.
fn finish(mut c: Child) -> (serde_json::Value, String) {
    drop(c.stdin.take());
    let out = c.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "child failed: {stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no counters; stderr: {stderr}"));
    (serde_json::from_str(last).unwrap(), stderr)
}

#[test]
fn three_programs_two_threads_100k_frames_each_reach_one_server_exactly_once() {
    const PROGRAMS: usize = 3;
    const THREADS: u64 = 2;
    const FRAMES: u64 = 100_000;
    const DATA_EVERY: u64 = 100;
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start("127.0.0.1:0", dir.path(), &[]);
    let children: Vec<_> = (0..PROGRAMS)
        .map(|_| {
            // Suspended: the server starts the session, then resumes, so nothing is missed.
            child(&[
                "--connect",
                &serve.addr,
                "--suspend",
                "--threads",
                &THREADS.to_string(),
                "--frames",
                &FRAMES.to_string(),
                "--data-every",
                &DATA_EVERY.to_string(),
            ])
        })
        .collect();
    let pids: Vec<u32> = children.iter().map(|c| c.id()).collect();
    for c in children {
        let (counters, stderr) = finish(c);
        assert_eq!(counters["frames"], THREADS * FRAMES, "{stderr}");
        assert_eq!(counters["dropped"], 0, "Block mode loses nothing: {stderr}");
        assert_eq!(counters["unsent"], 0, "{stderr}");
    }
    // The programs are gone; the server may still be reading what they sent.
    wait_until(120, "every session's End", || {
        serve
            .lines()
            .iter()
            .filter(|l| l.contains("ended its session"))
            .count()
            == PROGRAMS
    });
    let status = serve.terminate();
    assert!(status.success(), "framelog serve exits 0 on SIGTERM");

    let log = read_log(dir.path());
    assert_eq!(log.damage, 0);
    // A program that ended before the last one connected may have left its worker slot to
    // it (keys stay unique: the server continues past the slot's ids), so programs are
    // counted by the pids their workers carried, not by slots.
    assert!(
        (1..=PROGRAMS).contains(&log.workers.len()),
        "{:?}",
        log.workers
    );
    let mut logged_pids: Vec<u32> = log.processes.iter().map(|(_, pid)| *pid).collect();
    logged_pids.sort_unstable();
    let mut pids = pids;
    pids.sort_unstable();
    assert_eq!(logged_pids, pids, "each program's worker carries its pid");
    assert!(
        log.processes
            .iter()
            .all(|(name, _)| name == "session_child")
    );
    let expected = PROGRAMS * (THREADS * FRAMES) as usize;
    assert_eq!(
        log.frames.len(),
        expected,
        "every frame present, keys unique"
    );
    assert!(
        log.frames.values().all(|c| *c == [1, 1]),
        "each frame exactly once"
    );

    // Frame data: every M-th frame of each thread, retrievable by its (rewritten) key.
    let mut store = DataStore::open(dir.path()).unwrap();
    let mut docs: HashMap<u8, Vec<(u64, u64)>> = HashMap::new();
    for key in log.frames.keys() {
        if let Some(doc) = store.get(*key).unwrap() {
            let t = doc
                .get_i64("t")
                .map(|v| v as u64)
                .or_else(|_| doc.get_i32("t").map(|v| v as u64))
                .unwrap();
            let i = doc
                .get_i64("i")
                .map(|v| v as u64)
                .or_else(|_| doc.get_i32("i").map(|v| v as u64))
                .unwrap();
            docs.entry(key.worker).or_default().push((t, i));
        }
    }
    assert_eq!(docs.len(), PROGRAMS);
    for (w, mut v) in docs {
        v.sort_unstable();
        let want: Vec<(u64, u64)> = (0..THREADS)
            .flat_map(|t| {
                (0..FRAMES)
                    .step_by(DATA_EVERY as usize)
                    .map(move |i| (t, i))
            })
            .collect();
        assert_eq!(v, want, "worker {w}: every data update once");
    }
}

#[test]
fn a_killed_server_never_hangs_the_program_which_counts_its_loss_and_reconnects() {
    let dir_a = tempfile::tempdir().unwrap();
    let dir_b = tempfile::tempdir().unwrap();
    let mut a = Serve::start("127.0.0.1:0", dir_a.path(), &[]);
    let addr = a.addr.clone();
    // Block mode: the hardest case for "never hangs".
    let c = child(&[
        "--connect",
        &addr,
        "--frames",
        "0",
        "--mode",
        "block",
        "--threads",
        "2",
    ]);
    let mut tail_a = Tail::new(dir_a.path());
    wait_until(
        30,
        "frames from the program in the first server's log",
        || tail_a.update().0 > 1000,
    );
    signal(a.child.id(), "KILL");
    a.child.wait().unwrap();
    // A second server on the same port: the program finds it on its own.
    let b = Serve::start(&addr, dir_b.path(), &[]);
    let mut tail_b = Tail::new(dir_b.path());
    wait_until(60, "frames in the second server's log", || {
        tail_b.update().0 > 1000
    });
    let (counters, stderr) = finish(c);
    assert!(b.terminate().success());
    let unsent = counters["unsent"].as_u64().unwrap();
    assert!(
        unsent > 0,
        "records in flight when the server died are counted: {stderr}"
    );
    assert!(
        stderr.contains(&addr),
        "the server's loss was reported: {stderr}"
    );
    let log_b = read_log(dir_b.path());
    assert_eq!(
        log_b.dropped, unsent,
        "the next session starts with a Dropped record carrying the loss"
    );
    // A frame whose start was lost with the server may end in the new log: never twice.
    assert!(log_b.frames.values().all(|c| c[0] <= 1 && c[1] <= 1));
    // The first log stays readable: whole records only.
    let log_a = read_log(dir_a.path());
    assert!(log_a.frames.values().all(|c| c[0] <= 1 && c[1] <= 1));
}

#[test]
fn a_killed_program_leaves_a_readable_log_and_the_server_keeps_serving_others() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start("127.0.0.1:0", dir.path(), &[]);
    let mut victim = child(&[
        "--connect",
        &serve.addr,
        "--frames",
        "0",
        "--data-every",
        "7",
    ]);
    let survivor = child(&["--connect", &serve.addr, "--frames", "0"]);
    let mut tail = Tail::new(dir.path());
    wait_until(30, "both programs recording", || {
        let (ends, workers) = tail.update();
        workers == 2 && ends > 2000
    });
    signal(victim.id(), "KILL");
    victim.wait().unwrap();
    let before = tail.update().0;
    wait_until(30, "the other program's frames to keep arriving", || {
        tail.update().0 > before + 2000
    });
    wait_until(30, "the server to log the cut stream", || {
        serve.lines().iter().any(|l| l.contains("without End"))
    });
    let (counters, stderr) = finish(survivor);
    assert_eq!(counters["unsent"], 0, "{stderr}");
    assert!(serve.terminate().success());
    let log = read_log(dir.path());
    assert_eq!(log.damage, 0, "whole records only, no damage");
    framelog_tests::assert_check_clean(dir.path());
}

#[test]
fn a_suspended_program_without_a_server_runs_after_its_timeout_and_says_why() {
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let t = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_session_child"))
        .args(["--dir", dir.path().to_str().unwrap(), "--frames", "500"])
        .env(
            "FRAMELOG_CONNECT",
            format!("127.0.0.1:{port},suspend,timeout=1500ms"),
        )
        .output()
        .unwrap();
    let waited = t.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        waited >= std::time::Duration::from_millis(1500),
        "it waited its timeout"
    );
    assert!(
        stderr.contains("suspended for 1.5s waiting for 127.0.0.1"),
        "it says why it stopped waiting: {stderr}"
    );
    assert!(stderr.contains("cannot reach"), "{stderr}");
    // FRAMELOG_CONNECT added a server; the directory still got every frame.
    assert_eq!(Tail::new(dir.path()).update().0, 2 * 500);
}
