//! Retention with real processes: a program recording far more than its budget keeps its log
//! directory within the budget (plus its live segments) the whole time, while
//! `framelog dump --follow` keeps printing to the newest frame.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use formats::Record;
use framelog::LogReader;
use framelog_tests::framelog_bin;

fn log_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| !e.file_name().to_string_lossy().ends_with(".lock"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn a_program_recording_past_its_budget_stays_within_it_while_dump_follows() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    std::fs::create_dir(&dir).unwrap();
    // The follower starts first, on the empty directory.
    let mut dump = Command::new(framelog_bin())
        .args(["dump", "--follow"])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let printed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    {
        let (out, lines, printed) = (dump.stdout.take().unwrap(), lines.clone(), printed.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                printed.fetch_add(1, Ordering::Relaxed);
                let mut l = lines.lock().unwrap();
                // Only the newest lines are kept: the test looks for the last frame.
                if l.len() > 10_000 {
                    l.drain(..5_000);
                }
                l.push(line);
            }
        });
    }
    // 1 MiB segments, a 4 MiB budget; 2 threads x 1,000,000 frames (x2 deep, about 5 bytes
    // each packed) with data on every tenth: about 10 MB of frames and 20 MB of data.
    let child = Command::new(env!("CARGO_BIN_EXE_record_child"))
        .arg(&dir)
        .args(["1000000", "1", "4"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (dir, done) = (dir.clone(), done.clone());
        std::thread::spawn(move || {
            let mut most = 0;
            while !done.load(Ordering::Relaxed) {
                most = most.max(log_bytes(&dir));
                std::thread::sleep(Duration::from_millis(2));
            }
            most
        })
    };
    let out = child.wait_with_output().unwrap();
    done.store(true, Ordering::Relaxed);
    let most = watcher.join().unwrap();
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["dropped"], 0, "{report}");
    let written = report["written_bytes"].as_u64().unwrap();
    assert!(
        written > 8 << 20,
        "it wrote far more than the budget: {written}"
    );
    // The budget, plus the live frame-log and data segments (each may pass 1 MiB by a batch).
    let limit = (4 + 2 + 1) << 20;
    assert!(
        most <= limit,
        "the log reached {most} bytes (limit {limit})"
    );
    // The follower printed through to the newest frame, across the segments deleted under it.
    let mut last = None;
    LogReader::open(&dir)
        .unwrap()
        .read_available(|_, r| {
            if let Record::Start(s) = r {
                last = Some(s.id);
            }
        })
        .unwrap();
    let last = last.expect("frames left in the log").to_string();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let seen = lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.split_whitespace().nth(2) == Some(last.as_str()));
        if seen {
            break;
        }
        assert!(
            dump.try_wait().unwrap().is_none(),
            "dump --follow exited: {:?}",
            dump.wait_with_output()
        );
        assert!(
            Instant::now() < deadline,
            "dump --follow never printed frame {last} ({} lines)",
            printed.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = dump.kill();
    let _ = dump.wait();
}
