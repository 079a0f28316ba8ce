//! Cost of a `tracing` span recorded by `TracingLayer`, against the same span with the
//! registry alone (the floor: what `tracing` costs before any layer runs), all in one run.
//!
//! Two span shapes, each on the registry alone, with `TracingLayer`, and with the
//! reference layers:
//! - **empty**: `info_span!("bench_span")` entered, exited and closed;
//! - **fields + event**: a span with three fields (an integer, a string, a `Debug` value)
//!   and one event with a field inside it (an axum-like request span).
//!
//! Each row is 7 runs of `n` spans on one thread. Two costs are printed: wall time on the
//! recording thread (median run), and CPU time of the whole process over the 7 runs (every
//! thread, from `/proc/self/task/*/schedstat`, so the writer thread's work and wake-ups
//! count), each also as the difference against the registry-alone floor of the same shape.
//! Each row's output files are deleted when it ends, so their write-back to disk does not
//! land in a later row.
//!
//! `cargo bench -p framelog-stopwatch --features tracing --bench tracing` (add `-- layer` to run only
//! the `TracingLayer` rows and their floors, `-- fields` for only the fields + event shape,
//! e.g. under `perf record`).

#![allow(missing_docs)]

use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use stopwatch::clock::Clock;
use stopwatch::{BufferingMode, Recorder, Stopwatch, TracingLayer};
use tracing_subscriber::prelude::*;

const N: u64 = 1_000_000;
/// Spans per run for the fields + event shape (each costs microseconds with some layers).
const N_FIELDS: u64 = 200_000;

/// CPU time of every live thread of this process, ns (0 where schedstat is unavailable).
fn process_cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// (wall ns/iteration: the median of 7 runs of `n`; process CPU ns/iteration: the mean over
/// the 7 runs, as the kernel counts a running thread's CPU time in scheduler ticks). `n` is
/// divided by `BENCH_DIVIDE`, for runs under valgrind.
fn measure(n: u64, mut f: impl FnMut(u64)) -> (f64, f64) {
    let divide = std::env::var("BENCH_DIVIDE").map_or(1, |d| d.parse().unwrap_or(1));
    let n = (n / divide).max(1);
    let mut wall = Vec::new();
    let c = process_cpu_ns();
    for _ in 0..7 {
        let t = Instant::now();
        for i in 0..n {
            f(i);
        }
        wall.push(t.elapsed().as_nanos() as f64 / n as f64);
    }
    let cpu = process_cpu_ns().saturating_sub(c) as f64 / (7 * n) as f64;
    wall.sort_by(f64::total_cmp);
    (wall[3], cpu)
}

fn empty_span(_: u64) {
    drop(black_box(tracing::info_span!("bench_span").entered()));
}

/// A request span: an integer, a string and a `Debug` field, and one event with a field.
fn fields_span(i: u64) {
    let peer = SocketAddr::from((Ipv4Addr::new(10, 0, 0, 7), 51_234));
    let span = tracing::info_span!("request", id = i, path = "/orders/42", peer = ?peer).entered();
    tracing::info!(status = 200u64, "done");
    drop(black_box(span));
}

fn recorder(dir: &std::path::Path) -> Recorder {
    Stopwatch::builder()
        .dir(dir)
        .mode(BufferingMode::Block)
        .buffer_kib(16 << 10)
        .build()
        .unwrap()
}

/// Runs `shape` under `subscriber`; `after` runs once the runs are over (a flush).
fn under<S>(subscriber: S, n: u64, shape: fn(u64), after: impl FnOnce()) -> (f64, f64)
where
    S: tracing::Subscriber + Send + Sync + 'static,
{
    let r = tracing::subscriber::with_default(subscriber, || measure(n, shape));
    after();
    r
}

fn main() {
    let only_layer = std::env::args().skip(1).any(|a| a == "layer");
    let only_fields = std::env::args().skip(1).any(|a| a == "fields");
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::process();
    let tsc = measure(N, |_| {
        black_box(clock.now());
        black_box(clock.now());
    });

    let rec = recorder(&dir.path().join("plain"));
    let plain = measure(N, |_| drop(black_box(rec.start("bench/span"))));
    let _ = rec.shutdown();
    std::fs::remove_dir_all(dir.path().join("plain")).unwrap();

    // Warm-up (the first rows of a run came out slower than the same rows later).
    under(tracing_subscriber::registry(), N, empty_span, || {});

    let mut rows = Vec::new();
    for (shape_name, shape, n) in [
        ("empty span", empty_span as fn(u64), N),
        ("3 fields + 1 event", fields_span as fn(u64), N_FIELDS),
    ] {
        if only_fields && n == N {
            continue;
        }
        let floor = under(tracing_subscriber::registry(), n, shape, || {});

        let rec = recorder(&dir.path().join(format!("layer-{n}")));
        let layer = under(
            tracing_subscriber::registry().with(TracingLayer::new(&rec)),
            n,
            shape,
            || {
                rec.flush(Duration::from_secs(60));
            },
        );
        let stats = rec.shutdown();
        assert_eq!((stats.dropped, stats.dropped_data), (0, 0));
        // Deleted at once: the kernel then never writes its dirty pages back while a later
        // row is being measured (on 2 cores that write-back competes with the benchmark).
        std::fs::remove_dir_all(dir.path().join(format!("layer-{n}"))).unwrap();

        rows.push((shape_name, "registry alone (floor)", floor, floor));
        rows.push((shape_name, "**+ `TracingLayer`**", layer, floor));
        if only_layer {
            continue;
        }

        let fmt = under(
            tracing_subscriber::registry()
                .with(tracing_subscriber::fmt::layer().with_writer(std::io::sink)),
            n,
            shape,
            || {},
        );

        let (chrome_layer, guard) = tracing_chrome::ChromeLayerBuilder::new()
            .file(dir.path().join(format!("chrome-{n}.json")))
            .build();
        let chrome = under(
            tracing_subscriber::registry().with(chrome_layer),
            n,
            shape,
            || {},
        );
        let chrome_cpu_with_flush = {
            // tracing-chrome writes on its own thread; its backlog is written on drop.
            let c = process_cpu_ns();
            drop(guard);
            std::fs::remove_file(dir.path().join(format!("chrome-{n}.json"))).unwrap();
            (process_cpu_ns().saturating_sub(c)) as f64 / (7 * n) as f64
        };

        rows.push((
            shape_name,
            "+ `tracing_subscriber::fmt` → `io::sink()` (reference)",
            fmt,
            floor,
        ));
        rows.push((
            shape_name,
            "+ `tracing-chrome` 0.7",
            (chrome.0, chrome.1 + chrome_cpu_with_flush),
            floor,
        ));
    }

    println!(
        "floor of the clock: two TSC reads {:.1} ns; `Recorder::start` (plain frame) {:.1} ns",
        tsc.0, plain.0
    );
    println!();
    println!(
        "| shape | subscriber | wall ns/span | over the floor | CPU ns/span (all threads) | CPU over the floor |"
    );
    println!("|---|---|---|---|---|---|");
    for (shape, name, (wall, cpu), (fwall, fcpu)) in rows {
        println!(
            "| {shape} | {name} | {wall:.0} | {:+.0} | {cpu:.0} | {:+.0} |",
            wall - fwall,
            cpu - fcpu
        );
    }
}
