//! Cost of a poll of an asynchronous frame: the same future polled bare, inside an
//! `in_frame` frame (which times each poll and wraps the waker to see wakes), as a
//! `tracing::Instrumented` future with tracing-subscriber's fmt layer timing its spans
//! (`FmtSpan::CLOSE`: `time.busy`, `time.idle`), with `TracingLayer`, and under
//! tokio-metrics' `TaskMonitor::instrument`; beside the floor of two clock reads, all in one
//! run.
//!
//! The future is polled `POLLS` times per frame by a loop standing in for an executor, in two
//! shapes: **spurious** (returns `Pending` without waking: a poll alone) and **self-waking**
//! (wakes itself before returning `Pending`, as a future ready again at once: a poll and a
//! wake). Each row prints ns per poll (median of 7 runs) and the difference against the bare
//! future in the same shape.
//!
//! `cargo bench -p framelog-stopwatch --features tracing --bench polls`

#![allow(missing_docs)]

mod poll_shapes;

use std::hint::black_box;

use poll_shapes::{POLLS, Ticks, counting_waker, drive, floor, measure};
use stopwatch::{BufferingMode, FutureExt, Recorder, Stopwatch, TracingLayer};
use tracing::Instrument;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::prelude::*;

fn recorder(dir: &std::path::Path) -> Recorder {
    Stopwatch::builder()
        .dir(dir)
        .mode(BufferingMode::Block)
        .build()
        .expect("recorder")
}

fn main() {
    let filter = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let waker = counting_waker();
    let floor = floor();
    println!("floor: two clock reads {floor:.1} ns");
    println!(
        "{:<52} {:>10} {:>12} {:>14}",
        "ns per poll (median of 7)", "ns/poll", "above bare", "above / floor"
    );
    for wake in [false, true] {
        let shape = if wake { "self-waking" } else { "spurious" };
        let ticks = || Ticks { left: POLLS, wake };
        let bare = measure(|| drive(ticks(), &waker));
        let row = |name: &str, ns: f64| {
            if filter.as_deref().is_none_or(|f| name.contains(f)) {
                println!(
                    "{:<52} {:>10.1} {:>12.1} {:>14.2}",
                    format!("{shape}: {name}"),
                    ns,
                    ns - bare,
                    (ns - bare) / floor
                );
            }
        };
        row("bare future", bare);

        let dir = tempfile::tempdir().unwrap();
        let rec = recorder(dir.path());
        row(
            "in_frame (stopwatch)",
            measure(|| drive(ticks().in_frame(rec.start("poll bench")), &waker)),
        );
        rec.shutdown();

        let dir = tempfile::tempdir().unwrap();
        let rec = recorder(dir.path());
        let layer =
            tracing::Dispatch::new(tracing_subscriber::registry().with(TracingLayer::new(&rec)));
        row(
            "tracing::Instrumented, TracingLayer (stopwatch)",
            tracing::dispatcher::with_default(&layer, || {
                measure(|| {
                    drive(
                        ticks().instrument(tracing::info_span!("poll bench")),
                        &waker,
                    )
                })
            }),
        );
        drop(layer);
        rec.shutdown();

        let fmt = tracing::Dispatch::new(
            tracing_subscriber::registry().with(
                tracing_subscriber::fmt::layer()
                    .with_span_events(FmtSpan::CLOSE)
                    .with_writer(std::io::sink),
            ),
        );
        row(
            "tracing::Instrumented, fmt layer with FmtSpan::CLOSE",
            tracing::dispatcher::with_default(&fmt, || {
                measure(|| {
                    drive(
                        ticks().instrument(tracing::info_span!("poll bench")),
                        &waker,
                    )
                })
            }),
        );

        let monitor = tokio_metrics::TaskMonitor::new();
        row(
            "tokio-metrics TaskMonitor::instrument",
            measure(|| {
                drive(
                    tokio_metrics::TaskMonitor::instrument(&monitor, ticks()),
                    &waker,
                )
            }),
        );
        black_box(monitor.cumulative());
    }
}
