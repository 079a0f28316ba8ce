//! A viewer of `framelog view` over a real WebSocket on 127.0.0.1, as users run it.
//!
//! - throughput: a viewer (this process, a tungstenite client decoding and checking every
//!   Records message) receives a 10 M-frame log from a `framelog view` process, timed from its
//!   Read until the server says it is caught up. Floor in the same run: `LogReader` reading the
//!   same files in this process.
//! - live latency: this process appends one frame every 5 ms to a log the viewer follows
//!   (through `LogWriter`, stamped with the wall clock just before its `write`), and the viewer
//!   notes how long after that each frame reaches it.
//!
//! `cargo bench -p framelog-tests --bench viewer_stream` (FRAMES=N to change the log size)

#![allow(missing_docs)]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use formats::protocol::viewer::ToViewer;
use formats::{Record, RecordIter};
use framelog::{LogReader, LogWriter};
use framelog_tests::viewer_client::{Viewer, view};
use framelog_tests::{encode_frames, signal};

const RUNS: usize = 3;

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos() as u64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let frames: u32 = std::env::var("FRAMES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let dir = tempfile::tempdir().expect("temporary directory");
    {
        let w = LogWriter::open(dir.path()).expect("open log");
        let mut buf = Vec::with_capacity(2 << 20);
        let mut id = 1u32;
        while id <= frames {
            let n = (frames - id + 1).min(20_000);
            buf.clear();
            encode_frames(&mut buf, w.worker(), id, n, "GET /orders");
            w.append_frames(&buf).expect("append");
            id += n;
        }
    }
    let (mut server, url) = view(dir.path(), &[]);
    let mut floors = Vec::new();
    let mut rates = Vec::new();
    for run in 0..RUNS {
        let t = Instant::now();
        let mut records = 0u64;
        LogReader::open(dir.path())
            .expect("reader")
            .read_available(|_, _| records += 1)
            .expect("read");
        let floor = records as f64 / 2.0 / t.elapsed().as_secs_f64();

        let (mut v, _) = Viewer::connect(&url, "");
        v.keep = false;
        let t = Instant::now();
        v.start();
        v.until_finished(600);
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(v.count, records, "the viewer received every record");
        let rate = v.count as f64 / 2.0 / secs;
        println!(
            "run {run}: viewer {:.2} M frames/s ({secs:.2} s), floor (LogReader, same files) {:.2} M frames/s",
            rate / 1e6,
            floor / 1e6
        );
        floors.push(floor);
        rates.push(rate);
    }
    let (rate, floor) = (median(rates), median(floors));
    println!(
        "throughput: {:.2} M frames/s median of {RUNS}, floor {:.2} M frames/s, ratio {:.2} ({frames} frames)",
        rate / 1e6,
        floor / 1e6,
        rate / floor
    );
    signal(server.id(), "TERM");
    let _ = server.wait();

    // Live latency: a followed log gets one frame every 5 ms.
    let live = tempfile::tempdir().expect("temporary directory");
    let w = LogWriter::open(live.path()).expect("open live log");
    let mut buf = Vec::new();
    encode_frames(&mut buf, w.worker(), 1, 1, "warm-up");
    w.append_frames(&buf).expect("append");
    let (mut server, url) = view(live.path(), &[]);
    let (mut v, _) = Viewer::connect(&url, "");
    v.start();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut id = 2u32;
            let mut tmp = [0u8; 64];
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let now = now_ns();
                let n = formats::FrameEnd {
                    id,
                    worker: w.worker(),
                    timestamp: now,
                }
                .encode(&mut tmp)
                .expect("fits");
                w.append_frames(&tmp[..n]).expect("append");
                id += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let mut latencies = Vec::new();
    while latencies.len() < 1000 {
        let Some(m) = v.recv_raw() else { break };
        if let Ok(ToViewer::Records { records, .. }) = ToViewer::decode(&m) {
            let at = now_ns();
            for item in RecordIter::new(records, 0) {
                if let Ok((_, Record::End(e))) = item
                    && e.id >= 2
                {
                    latencies.push(at.saturating_sub(e.timestamp) as f64 / 1e6);
                }
            }
        }
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = writer.join();
    latencies.sort_by(f64::total_cmp);
    let pick = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    println!(
        "live latency (write to viewer, {} frames): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        latencies.len(),
        pick(0.5),
        pick(0.99),
        pick(1.0)
    );
    signal(server.id(), "TERM");
    let _ = server.wait();
}
