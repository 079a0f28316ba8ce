//! Every record a streaming program records is written, dropped or unsent — exactly — whatever
//! happens to the server, and the program never hangs. Real `framelog serve` processes and
//! real `session_child` programs on 127.0.0.1; faults made with real signals and a real full
//! disk.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use formats::Record;
use framelog::LogReader;
use framelog_tests::{Serve, signal, wait_until};

/// A running `session_child` whose stderr is collected as it comes.
struct Program {
    child: std::process::Child,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Program {
    /// Starts `session_child ARGS` and waits for its `started` line.
    fn start(args: &[&str]) -> Program {
        let mut child = Command::new(env!("CARGO_BIN_EXE_session_child"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let lines = stderr.clone();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "started");
        child.stdout = Some(out.into_inner());
        Program { child, stderr }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// Stops it (closes stdin), waits at most `limit`, and returns its final counters.
    fn finish(mut self, limit: Duration) -> Counters {
        drop(self.child.stdin.take());
        let t = Instant::now();
        loop {
            if self.child.try_wait().unwrap().is_some() {
                break;
            }
            if t.elapsed() > limit {
                let _ = self.child.kill();
                panic!(
                    "the program did not exit within {limit:?}: {}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let stderr = self.stderr.clone();
        let out = self.child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = || stderr.lock().unwrap().join("\n");
        assert!(out.status.success(), "program failed: {}", stderr());
        let last = stdout.lines().last().unwrap_or_default().to_owned();
        let v: serde_json::Value = serde_json::from_str(&last)
            .unwrap_or_else(|_| panic!("no counters in {stdout:?}; stderr {}", stderr()));
        let n = |k: &str| v[k].as_u64().unwrap();
        Counters {
            records: 2 * n("frames"),
            dropped: n("dropped"),
            unsent: n("unsent"),
        }
    }
}

/// A program's final counters, in frame records (a frame is a start and an end).
#[derive(Debug)]
struct Counters {
    records: u64,
    dropped: u64,
    unsent: u64,
}

/// Frame records (starts and ends) in the log, by worker; damage found.
fn written(dir: &std::path::Path) -> (HashMap<u8, u64>, u64) {
    let mut by_worker = HashMap::new();
    let Ok(mut reader) = LogReader::open(dir) else {
        return (by_worker, 0);
    };
    let _ = reader.read_available(|_, r| {
        if let Record::Start(_) | Record::End(_) = r {
            *by_worker.entry(r.worker()).or_insert(0u64) += 1;
        }
    });
    (by_worker, reader.damage_totals().0)
}

fn frames_in(dir: &std::path::Path) -> u64 {
    written(dir).0.values().sum()
}

/// The rule: recorded = written + dropped + unsent, with `written` read from the log.
fn assert_books_balance(c: &Counters, written: u64, what: &str) {
    assert_eq!(
        c.records,
        written + c.dropped + c.unsent,
        "{what}: recorded {} = written {written} + dropped {} + unsent {}",
        c.records,
        c.dropped,
        c.unsent
    );
}

#[test]
fn programs_started_against_a_running_server_without_suspend_lose_nothing() {
    // The README's first example: the server runs, programs start with FRAMELOG_CONNECT and
    // record at once (Block mode), before any session could have started.
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start("127.0.0.1:0", dir.path(), &[]);
    let programs: Vec<Program> = (0..3)
        .map(|_| {
            Program::start(&[
                "--connect",
                &serve.addr,
                "--threads",
                "2",
                "--frames",
                "100000",
                "--mode",
                "block",
            ])
        })
        .collect();
    for p in programs {
        let c = p.finish(Duration::from_secs(120));
        assert_eq!(c.records, 400_000);
        assert_eq!((c.dropped, c.unsent), (0, 0), "Block mode, a live server");
    }
    wait_until(60, "every session's End", || {
        serve
            .lines()
            .iter()
            .filter(|l| l.contains("ended its session"))
            .count()
            == 3
    });
    assert!(serve.terminate().success());
    let (by_worker, damage) = written(dir.path());
    assert_eq!(damage, 0);
    assert_eq!(by_worker.len(), 3);
    assert!(
        by_worker.values().all(|&n| n == 400_000),
        "every record of every program: {by_worker:?}"
    );
}

#[test]
fn a_program_without_a_server_counts_what_it_recorded_as_unsent_and_says_so() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let p = Program::start(&["--connect", &addr, "--frames", "5000", "--mode", "block"]);
    let c = p_finish_with_stderr(p, |stderr| {
        assert!(
            stderr.contains("were not sent"),
            "said so at exit: {stderr}"
        );
    });
    assert_books_balance(&c, 0, "no server");
    assert!(c.unsent > 0);
}

fn p_finish_with_stderr(p: Program, check: impl FnOnce(&str)) -> Counters {
    let lines = p.stderr.clone();
    let c = p.finish(Duration::from_secs(60));
    // The stderr thread may still be reading the last lines.
    let mut text = String::new();
    wait_until(10, "the program's last stderr lines", || {
        text = lines.lock().unwrap().join("\n");
        !text.is_empty()
    });
    check(&text);
    c
}

#[test]
fn a_killed_server_loses_no_record_without_a_count() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start("127.0.0.1:0", dir.path(), &[]);
    let p = Program::start(&["--connect", &serve.addr, "--frames", "0", "--mode", "block"]);
    wait_until(30, "frames in the log", || frames_in(dir.path()) > 20_000);
    let mut child = serve.child;
    signal(child.id(), "KILL");
    child.wait().unwrap();
    wait_until(30, "the program to notice", || {
        p.stderr().contains("failed")
    });
    // It keeps recording after the failure: those records are held, then counted.
    let c = p.finish(Duration::from_secs(30));
    let w = frames_in(dir.path());
    assert!(c.unsent > 0, "{c:?}");
    assert_books_balance(&c, w, "server killed");
}

#[test]
fn a_stopped_server_costs_at_most_the_stall_limit_and_every_record_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start("127.0.0.1:0", dir.path(), &[]);
    let p = Program::start(&["--connect", &serve.addr, "--frames", "0", "--mode", "block"]);
    wait_until(30, "frames in the log", || frames_in(dir.path()) > 20_000);
    let mut child = serve.child;
    signal(child.id(), "STOP");
    let stopped = Instant::now();
    wait_until(60, "the program to give up on the stream", || {
        p.stderr().contains("failed")
    });
    let waited = stopped.elapsed();
    // The stall limit is 5 s; the program may notice only at its next write (one more
    // stall), and then waits 1 s for the last Acks: about 9 s on a quiet machine. The bound
    // leaves room for a loaded one; without a limit the program would wait forever.
    assert!(
        waited < Duration::from_secs(20),
        "gave up after {waited:?}: {}",
        p.stderr()
    );
    let c = p.finish(Duration::from_secs(30));
    // The stopped server is killed, never resumed: what it had received is lost with it.
    signal(child.id(), "KILL");
    child.wait().unwrap();
    let w = frames_in(dir.path());
    assert!(c.unsent > 0, "{c:?}");
    assert_books_balance(&c, w, "server stopped");
}

#[test]
fn a_server_with_a_full_disk_costs_counted_records_only() {
    // A real full disk: a 1 MiB tmpfs (needs root, as CI and this machine have).
    let dir = tempfile::tempdir().unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(dir.path())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        framelog_tests::skipped(
            "a_server_with_a_full_disk_costs_counted_records_only",
            "cannot mount a 1 MiB tmpfs here (not root?)",
        );
        return;
    }
    struct Unmount<'a>(&'a std::path::Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(dir.path());
    let serve = Serve::start("127.0.0.1:0", dir.path(), &[]);
    let p = Program::start(&[
        "--connect",
        &serve.addr,
        "--frames",
        "200000",
        "--mode",
        "block",
        "--threads",
        "1",
    ]);
    let c = p.finish(Duration::from_secs(120));
    assert!(serve.terminate().success());
    let w = frames_in(dir.path());
    // How much fits depends on how the program's messages fall (a message the disk cannot
    // take whole is not appended at all): anything from nothing to most of 1 MiB. What
    // did not fit is counted, exactly.
    assert!(c.unsent > 0, "written {w}, {c:?}");
    assert_books_balance(&c, w, "server disk full");
}
