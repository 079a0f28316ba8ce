//! The debugger in a browser (headless Chromium, as `tests/browser_viewer.rs` runs it), fed
//! by `framelog view` over 127.0.0.1:
//!
//! - a finished 1 M-frame log (`stress`: 2 threads × 500,000 frames, 4 deep, data on every
//!   100th): time from opening the page to its first frames and to the whole log, and the
//!   page's memory (WebAssembly memory + JS heap) per frame, over the page before any frame;
//! - following a live log (the demo workload): each paint's CPU time as eframe measures it
//!   (the app's logic, taking in news, and painting), sampled for 10 s.
//!
//! `cargo bench -p framelog-tests --bench browser_viewer` with the variables the browser test
//! needs (FRAMELOG_WEB, FRAMELOG_WEB_TOOLS, CHROMIUM: see `.ci/run`); FRAMES=N for another
//! log size.

#![allow(missing_docs)]

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};

use framelog_tests::viewer_client::view;
use stopwatch::BufferingMode;
use stopwatch::stress::{StressOptions, run};

const RUNS: usize = 3;

fn node(mode: &str, url: &str, arg: &str) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("web/viewer_bench.mjs");
    let out = Command::new("node")
        .arg(script)
        .args([mode, url, arg])
        .output()
        .expect("run node");
    assert!(
        out.status.success(),
        "viewer_bench {mode}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

fn main() {
    let Some(web) = std::env::var_os("FRAMELOG_WEB") else {
        println!("skipped: FRAMELOG_WEB is not set (build the viewer: debugger-gui/web/build.sh)");
        return;
    };
    let web = web.to_string_lossy().into_owned();
    let per_thread: u64 = std::env::var("FRAMES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000)
        / 2;
    let tmp = tempfile::tempdir().expect("temporary directory");
    let big = tmp.path().join("stress");
    let report = run(&StressOptions {
        dir: Some(big.clone()),
        threads: 2,
        frames: per_thread,
        mode: BufferingMode::Block,
        data_every: 100,
        depth: 4,
        ..Default::default()
    })
    .expect("record the stress log");
    assert_eq!(report.dropped, 0, "Block mode loses nothing");
    let frames = report.emitted / 2;

    let (mut server, url) = view(&big, &["--web", &web]);
    println!("finished log of {frames} frames, {RUNS} page loads:");
    for run in 0..RUNS {
        let r = node("load", &url, &frames.to_string());
        let loaded = r["loaded_bytes"].as_f64().unwrap();
        let empty = r["empty_bytes"].as_f64().unwrap();
        println!(
            "run {run}: first frames after {} ms, all {} after {} ms ({:.2} M frames/s); page memory {:.1} MiB loaded, {:.1} MiB empty: {:.1} B/frame over the empty page ({:.1} whole)",
            r["first_ms"],
            r["frames"],
            r["loaded_ms"],
            frames as f64 / r["loaded_ms"].as_f64().unwrap() / 1e3,
            loaded / f64::from(1 << 20),
            empty / f64::from(1 << 20),
            (loaded - empty) / frames as f64,
            loaded / frames as f64,
        );
    }
    let _ = server.kill();
    let _ = server.wait();

    // A live log: the demo writing until its stdin closes.
    let live = tmp.path().join("demo");
    let mut demo = Command::new(env!("CARGO_BIN_EXE_async_child"))
        .arg("demo")
        .arg(&live)
        .arg("stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the demo");
    let mut line = String::new();
    std::io::BufReader::new(demo.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let (mut server, url) = view(&live, &["--web", &web]);
    let r = node("follow", &url, "10");
    println!(
        "following the live demo log for 10 s ({} frames arrived, {} in all): paint CPU time p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms over {} samples",
        r["frames_during"],
        r["frames"],
        r["p50_ms"].as_f64().unwrap(),
        r["p99_ms"].as_f64().unwrap(),
        r["max_ms"].as_f64().unwrap(),
        r["samples"]
    );
    drop(demo.stdin.take());
    let _ = demo.wait();
    let _ = server.kill();
    let _ = server.wait();
}
