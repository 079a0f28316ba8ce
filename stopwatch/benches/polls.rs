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

use std::future::Future;
use std::hint::black_box;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use stopwatch::clock::Clock;
use stopwatch::{BufferingMode, FutureExt, Recorder, Stopwatch, TracingLayer};
use tracing::Instrument;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::prelude::*;

/// Polls of each frame's future.
const POLLS: u32 = 1000;
/// Frames per run.
const FRAMES: u32 = 200;

/// Ready after `left` more polls; wakes itself before each `Pending` when `wake`.
struct Ticks {
    left: u32,
    wake: bool,
}

impl Future for Ticks {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.left == 0 {
            return Poll::Ready(());
        }
        self.left -= 1;
        if self.wake {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

/// A waker that counts its wakes, as an executor marks a task ready.
struct Counting(AtomicU64);

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Polls `fut` to completion with `waker`.
fn drive(fut: impl Future<Output = ()>, waker: &Waker) {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(waker);
    while fut.as_mut().poll(&mut cx).is_pending() {}
}

/// ns per poll: the median of 7 runs of `FRAMES` frames of `POLLS` polls each.
fn measure(mut run_frame: impl FnMut()) -> f64 {
    let mut runs = Vec::new();
    for _ in 0..7 {
        let t = Instant::now();
        for _ in 0..FRAMES {
            run_frame();
        }
        runs.push(t.elapsed().as_nanos() as f64 / f64::from(FRAMES * POLLS));
    }
    runs.sort_by(f64::total_cmp);
    runs[3]
}

fn recorder(dir: &std::path::Path) -> Recorder {
    Stopwatch::builder()
        .dir(dir)
        .mode(BufferingMode::Block)
        .build()
        .expect("recorder")
}

fn main() {
    let filter = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let waker = Waker::from(Arc::new(Counting(AtomicU64::new(0))));
    let clock = Clock::process();
    // The floor: two clock reads, as a poll's start and end.
    let floor = {
        let mut runs = Vec::new();
        for _ in 0..7 {
            let n = FRAMES * POLLS;
            let t = Instant::now();
            for _ in 0..n {
                black_box(clock.now());
                black_box(clock.now());
            }
            runs.push(t.elapsed().as_nanos() as f64 / f64::from(n));
        }
        runs.sort_by(f64::total_cmp);
        runs[3]
    };
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
