//! Cost of a `tracing` span recorded by `TracingLayer`, side by side with the same span
//! recorded by `tracing-chrome` and with a plain `Recorder::start` frame, against two
//! timestamps from the stopwatch's clock, all in one run.
//!
//! `cargo bench -p stopwatch --features tracing --bench tracing`

#![allow(missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use stopwatch::clock::Clock;
use stopwatch::{BufferingMode, Stopwatch, TracingLayer};
use tracing_subscriber::prelude::*;

const N: u64 = 1_000_000;

/// ns per iteration, median of 7 runs of `N`.
fn measure(mut f: impl FnMut()) -> f64 {
    let mut runs = Vec::new();
    for _ in 0..7 {
        let t = Instant::now();
        for _ in 0..N {
            f();
        }
        runs.push(t.elapsed().as_nanos() as f64 / N as f64);
    }
    runs.sort_by(f64::total_cmp);
    runs[3]
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::process();
    let floor = measure(|| {
        black_box(clock.now());
        black_box(clock.now());
    });

    let rec = Stopwatch::builder()
        .dir(dir.path().join("plain"))
        .mode(BufferingMode::Block)
        .buffer_kib(16 << 10)
        .build()
        .unwrap();
    let plain = measure(|| drop(black_box(rec.start("bench/span"))));
    rec.flush(Duration::from_secs(30));

    let rec2 = Stopwatch::builder()
        .dir(dir.path().join("layer"))
        .mode(BufferingMode::Block)
        .buffer_kib(16 << 10)
        .build()
        .unwrap();
    let layer = tracing::subscriber::with_default(
        tracing_subscriber::registry().with(TracingLayer::new(&rec2)),
        || measure(|| drop(black_box(tracing::info_span!("bench_span").entered()))),
    );
    let stats = rec2.shutdown();
    assert_eq!(stats.dropped, 0);

    let (chrome_layer, guard) = tracing_chrome::ChromeLayerBuilder::new()
        .file(dir.path().join("chrome.json"))
        .build();
    let chrome = tracing::subscriber::with_default(
        tracing_subscriber::registry().with(chrome_layer),
        || measure(|| drop(black_box(tracing::info_span!("bench_span").entered()))),
    );
    drop(guard);

    let registry_only = tracing::subscriber::with_default(tracing_subscriber::registry(), || {
        measure(|| drop(black_box(tracing::info_span!("bench_span").entered())))
    });

    println!("| case | ns/span (median of 7 × {N}) | × floor | × Recorder::start |");
    println!("|---|---|---|---|");
    for (name, ns) in [
        ("floor: two TSC timestamps", floor),
        ("Recorder::start (plain frame)", plain),
        ("tracing span, registry only (no layer)", registry_only),
        ("tracing span + TracingLayer", layer),
        ("tracing span + tracing-chrome", chrome),
    ] {
        println!(
            "| {name} | {ns:.1} | {:.2} | {:.2} |",
            ns / floor,
            ns / plain
        );
    }
}
