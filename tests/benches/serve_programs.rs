//! `framelog serve` recording real programs, as users run it: a `framelog serve` process and
//! three `stress` example processes (2 threads × 1 M frames each, Block mode) connecting to it
//! over 127.0.0.1, ten runs.
//!
//! - throughput: frames appended to the server's log per second of wall time, from starting
//!   the programs until the last one exits (a program exits once the server has acknowledged
//!   every record it sent, so its frames are in the log by then; the log is counted after each
//!   run to be sure). Floor, measured in the same run: the same three programs writing their
//!   own local logs (no network, no server).
//! - latency under that load: this process is a fourth program, recording one frame a
//!   millisecond through a connected `Recorder`, while a reader tails the server's log every
//!   millisecond and compares each of its frame ends with the time it is seen.
//!
//! `cargo bench -p framelog-tests --bench serve_programs`

#![allow(missing_docs)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use formats::{Record, RecordIter};
use framelog::LogReader;
use framelog_tests::Serve;
use stopwatch::Stopwatch;

const PROGRAMS: usize = 3;
const THREADS: u64 = 2;
const FRAMES_PER_THREAD: u64 = 1_000_000;
const RUNS: usize = 10;
const PROBE_LABEL: &str = "latency/probe";

/// The `stress` example, built in release mode.
fn stress_bin() -> PathBuf {
    let ok = Command::new(env!("CARGO"))
        .args([
            "build",
            "--quiet",
            "--release",
            "-p",
            "framelog-stopwatch",
            "--features",
            "demo",
            "--example",
            "stress",
        ])
        .status()
        .expect("run cargo build")
        .success();
    assert!(ok, "cargo build --example stress failed");
    let exe = std::env::current_exe().expect("bench executable path");
    // target/release/deps/<bench> → target/release/examples/stress
    exe.parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("examples").join("stress"))
        .expect("target directory")
}

fn stress(bin: &Path, target: &[&str]) -> Child {
    let frames = FRAMES_PER_THREAD.to_string();
    let threads = THREADS.to_string();
    Command::new(bin)
        .args(target)
        .args([
            "--threads",
            &threads,
            "--frames",
            &frames,
            "--mode",
            "block",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn stress")
}

/// Waits for every program; each must succeed and report no loss.
fn wait_all(children: Vec<Child>) {
    for c in children {
        let out = c.wait_with_output().expect("wait for stress");
        assert!(out.status.success(), "stress failed");
        let report: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("stress prints one JSON line");
        assert_eq!(report["dropped"], 0, "{report}");
        assert_eq!(report["unsent"], 0, "{report}");
    }
}

/// Frames per second of three programs writing their own local logs.
fn floor_run(bin: &Path) -> f64 {
    let dirs: Vec<_> = (0..PROGRAMS)
        .map(|_| tempfile::tempdir().unwrap())
        .collect();
    let t = Instant::now();
    let children = dirs
        .iter()
        .map(|d| stress(bin, &["--dir", d.path().to_str().unwrap()]))
        .collect();
    wait_all(children);
    total() as f64 / t.elapsed().as_secs_f64()
}

fn total() -> u64 {
    PROGRAMS as u64 * THREADS * FRAMES_PER_THREAD
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// (frames/s appended, probe latencies in ms) of one run against a real `framelog serve`.
fn served_run(bin: &Path) -> (f64, Vec<f64>) {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start("127.0.0.1:0", dir.path(), &[]);
    // The probe: a fourth program recording a frame a millisecond.
    let probe = Arc::new(
        Stopwatch::builder()
            .connect(serve.addr.clone())
            .suspend(Duration::from_secs(30))
            .build()
            .unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let (p, s) = (probe.clone(), stop.clone());
    let producer = std::thread::spawn(move || {
        while !s.load(Ordering::Relaxed) {
            drop(p.start(PROBE_LABEL));
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let (d, s) = (dir.path().to_owned(), stop.clone());
    let tail = std::thread::spawn(move || {
        let mut scanner = ProbeScanner::default();
        loop {
            let stopping = s.load(Ordering::Relaxed);
            scanner.poll(&d);
            if stopping {
                return scanner.latencies;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let t = Instant::now();
    let children = (0..PROGRAMS)
        .map(|_| stress(bin, &["--connect", &serve.addr]))
        .collect();
    wait_all(children);
    let secs = t.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    let lat = tail.join().unwrap();
    let stats = Arc::into_inner(probe).unwrap().shutdown();
    assert_eq!((stats.dropped, stats.unsent), (0, 0), "{stats:?}");
    assert!(serve.terminate().success());
    let mut frames = 0;
    LogReader::open(dir.path())
        .unwrap()
        .read_available(|_, r| {
            if matches!(r, Record::Start(s) if s.label != PROBE_LABEL) {
                frames += 1;
            }
        })
        .unwrap();
    assert_eq!(frames, total(), "every frame of the programs in the log");
    (total() as f64 / secs, lat)
}

/// Finds the probe's frames as they reach the server's frame-log files, by their label's
/// bytes: decoding every record of the three busy programs on the way (as `LogReader` does)
/// would take the tailing thread longer than the server takes to append them, and measure
/// the reader, not the server.
#[derive(Default)]
struct ProbeScanner {
    /// Per file: bytes looked at so far.
    seen: std::collections::HashMap<PathBuf, u64>,
    latencies: Vec<f64>,
}

impl ProbeScanner {
    fn poll(&mut self, dir: &Path) {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let finder = memchr::memmem::Finder::new(PROBE_LABEL.as_bytes());
        for e in entries.flatten() {
            let path = e.path();
            if path.extension().is_none_or(|x| x != "framelog") {
                continue;
            }
            let from = self.seen.get(&path).copied().unwrap_or(0);
            let Ok(mut f) = std::fs::File::open(&path) else {
                continue;
            };
            // Back up over a record that may have been cut by the last read.
            let start = from.saturating_sub(300);
            let mut bytes = Vec::new();
            if f.seek(SeekFrom::Start(start)).is_err() || f.read_to_end(&mut bytes).is_err() {
                continue;
            }
            let now = now_ns();
            for hit in finder.find_iter(&bytes) {
                let at = start + hit as u64;
                // Found whole by the last look already; a FrameStart's label begins 20
                // bytes into it.
                if at + PROBE_LABEL.len() as u64 <= from || hit < 20 {
                    continue;
                }
                if let Some(Ok((_, Record::Start(st)))) =
                    RecordIter::new(&bytes[hit - 20..], 0).next()
                    && st.label == PROBE_LABEL
                {
                    // The probe's frames last no time: the start is the end.
                    self.latencies
                        .push(now.saturating_sub(st.timestamp) as f64 / 1e6);
                }
            }
            self.seen.insert(path, start + bytes.len() as u64);
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let bin = stress_bin();
    let (mut served, mut floor, mut p99s) = (Vec::new(), Vec::new(), Vec::new());
    let mut all_lat = Vec::new();
    for _ in 0..RUNS {
        floor.push(floor_run(&bin));
        let (rate, mut lat) = served_run(&bin);
        served.push(rate);
        lat.sort_by(f64::total_cmp);
        p99s.push(lat[((lat.len() - 1) as f64 * 0.99) as usize]);
        all_lat.extend(lat);
    }
    let runs: Vec<f64> = served.iter().map(|r| (r / 1e5).round() / 10.0).collect();
    let (m, f) = (median(&mut served), median(&mut floor));
    println!(
        "serve: {PROGRAMS} stress programs x {THREADS} threads x {FRAMES_PER_THREAD} frames (Block) over 127.0.0.1: median {:.2} M frames/s of {RUNS} runs {runs:?}; floor (the same programs writing local logs): {:.2} M frames/s; ratio {:.2}",
        m / 1e6,
        f / 1e6,
        m / f
    );
    all_lat.sort_by(f64::total_cmp);
    let q = |p: f64| all_lat[((all_lat.len() - 1) as f64 * p) as usize];
    println!(
        "latency under that load (a 4th program, 1 frame/ms): frame end to server log p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; median of the runs' p99 {:.1} ms",
        q(0.5),
        q(0.99),
        all_lat.last().copied().unwrap_or(0.0),
        median(&mut p99s)
    );
}
