//! `TracingLayer` with `CountingAlloc`: a span's frame records what its thread allocated and
//! freed while the span was entered (summed over every enter → exit, on whatever thread),
//! read back from a real log directory with `framelog::LogReader`. Inclusive, as
//! `Stopwatch::start` frames are: a span's counts include those of spans entered inside it.
//!
//! Its own test binary: it runs under `CountingAlloc` (its global allocator). The `tracing`
//! test binary runs without one, and checks that no span gets a FrameAlloc there.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use formats::{FrameAlloc, FrameKey, Record};
use framelog::LogReader;
use stopwatch::{CountingAlloc, Recorder, Stopwatch, TracingLayer};
use tracing::{info_span, instrument};
use tracing_subscriber::prelude::*;

#[global_allocator]
static ALLOC: CountingAlloc<std::alloc::System> = CountingAlloc::new(std::alloc::System);

const MIB: usize = 1 << 20;

#[derive(Default, Debug)]
struct Log {
    /// Key of every frame, by label (labels are unique in each test unless said).
    starts: HashMap<String, Vec<FrameKey>>,
    ends: Vec<FrameKey>,
    allocs: HashMap<FrameKey, FrameAlloc>,
    /// Allocation records that came after their frame's end.
    late_allocs: usize,
}

impl Log {
    fn key(&self, label: &str) -> FrameKey {
        let keys = &self.starts[label];
        assert_eq!(keys.len(), 1, "one frame labelled {label}");
        keys[0]
    }

    /// The FrameAlloc of the frame labelled `label`.
    fn alloc(&self, label: &str) -> FrameAlloc {
        let key = self.key(label);
        *self
            .allocs
            .get(&key)
            .unwrap_or_else(|| panic!("{label} has a FrameAlloc: {self:?}"))
    }
}

fn read(dir: &std::path::Path) -> Log {
    let mut log = Log::default();
    LogReader::open(dir)
        .unwrap()
        .read_available(|_, r| match r {
            Record::Start(s) => log
                .starts
                .entry(s.label.to_owned())
                .or_default()
                .push(FrameKey::new(s.worker, s.id)),
            Record::End(e) => log.ends.push(FrameKey::new(e.worker, e.id)),
            Record::FrameAlloc(a) => {
                let key = FrameKey::new(a.worker, a.id);
                if log.ends.contains(&key) {
                    log.late_allocs += 1;
                }
                assert!(log.allocs.insert(key, a).is_none(), "one record per frame");
            }
            _ => {}
        })
        .unwrap();
    log
}

/// The log once `count` frames have ended (a runtime's worker threads may still be exiting
/// after the runtime is dropped).
fn read_ended(rec: &Recorder, dir: &std::path::Path, count: usize) -> Log {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        rec.flush(Duration::from_secs(10));
        let log = read(dir);
        if log.ends.len() >= count {
            assert_eq!(
                log.late_allocs, 0,
                "counts are written before their frame's end"
            );
            return log;
        }
        assert!(Instant::now() < deadline, "{count} frames end: {log:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn recorder(dir: &std::path::Path) -> Recorder {
    Stopwatch::builder().dir(dir).build().unwrap()
}

fn dispatch(rec: &Recorder) -> tracing::Dispatch {
    tracing::Dispatch::new(tracing_subscriber::registry().with(TracingLayer::new(rec)))
}

/// Allocates a block of `bytes`, keeps it while `black_box` looks, frees it.
fn churn(bytes: usize) {
    let v = Vec::<u8>::with_capacity(bytes);
    black_box(&v);
    drop(v);
}

#[test]
fn a_span_records_what_its_code_allocates_while_entered_and_an_idle_span_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    tracing::dispatcher::with_default(&dispatch(&rec), || {
        let span = info_span!("allocates");
        // While the span exists but is not entered: not its allocations.
        let outside = Vec::<u8>::with_capacity(8 * MIB);
        black_box(&outside);
        span.in_scope(|| churn(MIB));
        drop(outside);
        drop(span);
        let idle = info_span!("idle");
        idle.in_scope(|| {});
        idle.in_scope(|| {});
    });
    let log = read_ended(&rec, dir.path(), 2);
    let a = log.alloc("allocates");
    assert!(a.allocs >= 1 && a.alloc_bytes >= MIB as u64, "{a:?}");
    assert!(a.frees >= 1 && a.freed_bytes >= MIB as u64, "{a:?}");
    assert!(
        a.alloc_bytes < 8 * MIB as u64 && a.freed_bytes < 8 * MIB as u64,
        "only what runs while the span is entered: {a:?}"
    );
    assert!(
        !log.allocs.contains_key(&log.key("idle")),
        "a span that allocates nothing has no FrameAlloc: {:?}",
        log.allocs.get(&log.key("idle"))
    );
}

#[test]
fn a_span_entered_on_two_threads_at_once_and_on_a_third_sums_every_enter() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    let dispatch = dispatch(&rec);
    tracing::dispatcher::with_default(&dispatch, || {
        let span = info_span!("shared");
        let barrier = Barrier::new(2);
        std::thread::scope(|s| {
            for bytes in [MIB, 2 * MIB] {
                let (span, barrier, dispatch) = (&span, &barrier, &dispatch);
                s.spawn(move || {
                    tracing::dispatcher::with_default(dispatch, || {
                        span.in_scope(|| {
                            // Both threads inside the span at the same time.
                            barrier.wait();
                            churn(bytes);
                            barrier.wait();
                        })
                    })
                });
            }
        });
        span.in_scope(|| churn(4 * MIB));
    });
    let log = read_ended(&rec, dir.path(), 1);
    let a = log.alloc("shared");
    assert!(a.allocs >= 3 && a.frees >= 3, "{a:?}");
    assert!(
        a.alloc_bytes >= 7 * MIB as u64 && a.freed_bytes >= 7 * MIB as u64,
        "1 + 2 + 4 MiB, on three threads: {a:?}"
    );
}

#[test]
fn a_span_entered_again_inside_itself_counts_that_stretch_once() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    tracing::dispatcher::with_default(&dispatch(&rec), || {
        let span = info_span!("reentered");
        span.in_scope(|| {
            churn(MIB);
            span.in_scope(|| churn(MIB));
        });
    });
    let log = read_ended(&rec, dir.path(), 1);
    let a = log.alloc("reentered");
    assert!(
        (2 * MIB as u64..3 * MIB as u64).contains(&a.alloc_bytes),
        "2 MiB, the inner stretch not counted twice: {a:?}"
    );
}

#[test]
fn a_parents_counts_include_its_child_spans_entered_inside_it_and_only_those() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    tracing::dispatcher::with_default(&dispatch(&rec), || {
        let parent = info_span!("parent");
        parent.in_scope(|| {
            churn(MIB / 4);
            info_span!("child").in_scope(|| churn(MIB));
        });
        // A child entered while its parent is not: not the parent's.
        info_span!(parent: &parent, "later child").in_scope(|| churn(4 * MIB));
    });
    let log = read_ended(&rec, dir.path(), 3);
    let (parent, child, later) = (
        log.alloc("parent"),
        log.alloc("child"),
        log.alloc("later child"),
    );
    assert!(child.alloc_bytes >= MIB as u64, "{child:?}");
    assert!(
        child.alloc_bytes < (MIB + MIB / 4) as u64,
        "the child's own: {child:?}"
    );
    assert!(
        parent.allocs > child.allocs
            && parent.alloc_bytes >= child.alloc_bytes + (MIB / 4) as u64
            && parent.freed_bytes >= child.freed_bytes + (MIB / 4) as u64,
        "inclusive: its own 256 KiB and its child's: {parent:?} {child:?}"
    );
    assert!(later.alloc_bytes >= 4 * MIB as u64, "{later:?}");
    assert!(
        parent.alloc_bytes < 4 * MIB as u64,
        "not a child entered while the parent is not: {parent:?}"
    );
}

#[instrument]
async fn steps(n: usize) -> Vec<std::thread::ThreadId> {
    let mut threads = Vec::new();
    for _ in 0..n {
        threads.push(std::thread::current().id());
        churn(MIB);
        // May resume on the other worker.
        tokio::task::yield_now().await;
    }
    threads
}

#[test]
fn an_instrumented_async_fn_on_a_multi_thread_runtime_sums_its_polls() {
    const TASKS: usize = 4;
    const STEPS: usize = 8;
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    let dispatch = dispatch(&rec);
    let d = dispatch.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d)))
        .build()
        .unwrap();
    let threads = tracing::dispatcher::with_default(&dispatch, || {
        rt.block_on(async {
            let tasks: Vec<_> = (0..TASKS).map(|_| tokio::spawn(steps(STEPS))).collect();
            let mut all = Vec::new();
            for t in tasks {
                all.extend(t.await.unwrap());
            }
            all
        })
    });
    drop(rt);
    let log = read_ended(&rec, dir.path(), TASKS);
    let keys = &log.starts["steps"];
    assert_eq!(keys.len(), TASKS);
    for key in keys {
        let a = log.allocs[key];
        assert!(
            a.allocs >= STEPS as u64 && a.alloc_bytes >= (STEPS * MIB) as u64,
            "1 MiB in each of its {STEPS} polls: {a:?}"
        );
        assert!(a.freed_bytes >= (STEPS * MIB) as u64, "{a:?}");
    }
    // Not asserted (the scheduler decides), but reported.
    let mut distinct = threads;
    distinct.sort_by_key(|t| format!("{t:?}"));
    distinct.dedup();
    eprintln!("polled on {} threads", distinct.len());
}
