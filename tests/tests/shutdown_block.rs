//! Block mode loses nothing in an orderly shutdown, on a busy machine: many short programs in
//! a row (one thread, a few frames, recorded on a scoped thread, as `stress` does), each
//! streaming to one `framelog serve` (suspended until resumed), then each appending to a
//! damaged log directory, while a thread of this test keeps the other core busy.
//!
//! Before the writer sealed slots one by one, about one program in 300 printed dropped =
//! emitted, written 0, and said nothing: its recording thread's last hand-off (made by the
//! thread's thread-local destructor, after `std::thread::scope` had returned) came as the final
//! pass began, and was counted as dropped.
//!
//! `FRAMELOG_SHUTDOWN_ROUNDS` sets the rounds of each half (default 40; 300 to hunt the race
//! on a developer machine).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use framelog_tests::{Serve, framelog_bin};

/// Runs `books_child ARGS`; its books (as JSON) and stderr.
fn child(args: &[&str]) -> (serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_books_child"))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "books_child failed: {stderr}");
    let last = stdout.lines().last().unwrap_or_default();
    let v = serde_json::from_str(last)
        .unwrap_or_else(|_| panic!("no books in {stdout:?}; stderr {stderr}"));
    (v, stderr)
}

/// Frame records (starts and ends) in a log, per `framelog stats --json`.
fn records_in(dir: &Path) -> u64 {
    let out = Command::new(framelog_bin())
        .args(["stats", "--json"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["frames"].as_u64().unwrap() + v["ends"].as_u64().unwrap()
}

/// Keeps one core busy until dropped (the race needs a machine with no idle core).
struct Busy(Arc<AtomicBool>, Option<std::thread::JoinHandle<()>>);

impl Busy {
    fn start() -> Busy {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let h = std::thread::spawn(move || {
            let mut x = 0u64;
            while !s.load(Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        });
        Busy(stop, Some(h))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        if let Some(h) = self.1.take() {
            let _ = h.join();
        }
    }
}

#[test]
fn block_mode_drops_nothing_at_shutdown_on_a_busy_machine() {
    let rounds: usize = std::env::var("FRAMELOG_SHUTDOWN_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let tmp = tempfile::tempdir().unwrap();

    // A damaged log to append to: records, then a few bytes of its first segment flipped.
    let local = tmp.path().join("local");
    let local_arg = local.to_str().unwrap();
    child(&[
        "--dir",
        local_arg,
        "--threads",
        "2",
        "--frames",
        "50000",
        "--mode",
        "block",
    ]);
    let segment = local.join("frames-000001.framelog");
    let mut bytes = std::fs::read(&segment).unwrap();
    for at in [bytes.len() / 3, bytes.len() / 2] {
        bytes[at] ^= 0x5a;
    }
    std::fs::write(&segment, &bytes).unwrap();
    let before = records_in(&local);

    let served = tmp.path().join("served");
    let serve = Serve::start("127.0.0.1:0", &served, &[]);
    let connect = format!("{},suspend,timeout=5s", serve.addr);

    let _busy = Busy::start();
    let mut streamed = 0;
    let mut bad = Vec::new();
    for round in 0..rounds {
        let (v, stderr) = child(&[
            "--connect",
            &connect,
            "--threads",
            "1",
            "--frames",
            "5",
            "--mode",
            "block",
        ]);
        let emitted = v["emitted"].as_u64().unwrap();
        let s = &v["stream"];
        if s["written"].as_u64() != Some(emitted) || v["dropped"] != 0 || v["unsent"] != 0 {
            bad.push(format!("stream round {round}: {v}; stderr {stderr}"));
        }
        streamed += s["written"].as_u64().unwrap();
    }
    let mut appended = 0;
    for round in 0..rounds {
        let (v, stderr) = child(&[
            "--dir",
            local_arg,
            "--threads",
            "1",
            "--frames",
            "25",
            "--mode",
            "block",
        ]);
        let emitted = v["emitted"].as_u64().unwrap();
        if v["dir"]["written"].as_u64() != Some(emitted) || v["dropped"] != 0 {
            bad.push(format!("local round {round}: {v}; stderr {stderr}"));
        }
        appended += v["dir"]["written"].as_u64().unwrap();
    }
    drop(_busy);
    assert!(serve.terminate().success());
    assert!(
        bad.is_empty(),
        "Block mode dropped at shutdown:\n{}",
        bad.join("\n")
    );
    assert_eq!(
        records_in(&served),
        streamed,
        "every streamed record in the server's log"
    );
    assert_eq!(
        records_in(&local) - before,
        appended,
        "every appended record in the log"
    );
}
