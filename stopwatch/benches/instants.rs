//! Cost of a plot value and of a message against an empty frame, and of `CountingAlloc`
//! against `System`, each pair in the same run (`docs/PERFORMANCE.md`, issue 30).
//!
//! - `instants`: an empty frame (start + end, static label), `Stopwatch::plot`,
//!   `Stopwatch::message` (static text, no fields), a message inside a frame, a summed
//!   `Series::add`; into a real log in Block mode (nothing dropped), one thread, timed in
//!   batches of 20,000 with the log flushed between them (untimed), as `frames` does.
//! - `alloc`: a `Vec`/`String`-heavy loop (17 allocations and 17 frees per iteration) under
//!   `System` and under `CountingAlloc<System>`. The binary's global allocator forwards to
//!   one or the other by a flag (the same load and branch in both cases), so the difference
//!   is what counting adds; then the empty frame again, with the allocator installed (the
//!   frame's snapshot and its FrameAlloc record).
//!
//! A summary of medians and ratios is printed at the end.

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use stopwatch::{BufferingMode, CountingAlloc, PlotUnit, Stopwatch};

/// Whether the global allocator counts (the `alloc` group flips it).
static COUNTING: AtomicBool = AtomicBool::new(false);
static COUNTED: CountingAlloc<System> = CountingAlloc::new(System);

/// Forwards to `COUNTED` or `System` by `COUNTING`. A block is freed by the allocator that
/// made it: the flag only changes while no block of the measured loop is alive, and the
/// counting wrapper hands `System`'s blocks through unchanged, so either may free any block.
struct Switch;

// SAFETY: both targets are `GlobalAlloc`s over the same `System` heap (`CountingAlloc`
// forwards every call unchanged), so any block either returns may be freed or reallocated
// by either; arguments and results are passed through unchanged.
unsafe impl GlobalAlloc for Switch {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: the caller's `alloc` contract, forwarded.
        unsafe {
            if COUNTING.load(Ordering::Relaxed) {
                COUNTED.alloc(l)
            } else {
                System.alloc(l)
            }
        }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: the caller's `dealloc` contract, forwarded (same heap, see above).
        unsafe {
            if COUNTING.load(Ordering::Relaxed) {
                COUNTED.dealloc(p, l)
            } else {
                System.dealloc(p, l)
            }
        }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        // SAFETY: the caller's `realloc` contract, forwarded (same heap, see above).
        unsafe {
            if COUNTING.load(Ordering::Relaxed) {
                COUNTED.realloc(p, l, n)
            } else {
                System.realloc(p, l, n)
            }
        }
    }
}

#[global_allocator]
static A: Switch = Switch;

/// Iterations timed between two flushes.
const BATCH: u64 = 20_000;

/// Median ns per iteration of each bench, for the summary.
static RESULTS: Mutex<Vec<(&'static str, f64)>> = Mutex::new(Vec::new());

fn bench(c: &mut Criterion, group: &str, name: &'static str, mut f: impl FnMut()) {
    let mut g = c.benchmark_group(group);
    g.warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1500))
        .sample_size(30);
    let mut samples = Vec::new();
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            // Timed in batches with the writer flushed between them (untimed), as the
            // frames bench does: the producer's cost, not the disk's throughput.
            let (mut done, mut d) = (0, Duration::ZERO);
            while done < iters {
                let k = (iters - done).min(BATCH);
                let t = Instant::now();
                for _ in 0..k {
                    f();
                }
                d += t.elapsed();
                done += k;
                Stopwatch::flush(Duration::from_secs(10));
            }
            samples.push(d.as_nanos() as f64 / iters as f64);
            d
        })
    });
    g.finish();
    samples.sort_by(f64::total_cmp);
    let median = samples[samples.len() / 2];
    RESULTS.lock().unwrap().push((name, median));
}

/// 17 allocations and 17 frees: a `Vec` of 16 `String`s.
fn strings() {
    let mut v = Vec::with_capacity(16);
    for _ in 0..16 {
        v.push(String::from(black_box("a user name here")));
    }
    black_box(&v);
}
const ALLOCS_PER_LOOP: f64 = 17.0;

fn all(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let guard = Stopwatch::builder()
        .dir(dir.path())
        .mode(BufferingMode::Block)
        .buffer_kib(16 << 10)
        .install()
        .unwrap();
    let series = Stopwatch::series("in flight")
        .unit(PlotUnit::BYTES)
        .summed();
    bench(c, "instants", "empty frame", || {
        drop(black_box(Stopwatch::start("empty")));
    });
    bench(c, "instants", "plot", || {
        Stopwatch::plot(black_box("queue depth"), black_box(12.0));
    });
    bench(c, "instants", "message", || {
        Stopwatch::message(black_box("cache miss"));
    });
    {
        let _f = Stopwatch::start("request");
        bench(c, "instants", "message in a frame", || {
            Stopwatch::message(black_box("cache miss"));
        });
    }
    bench(c, "instants", "series add", || {
        series.add(black_box(1.0));
    });
    bench(c, "alloc", "System: 17 allocs", strings);
    COUNTING.store(true, Ordering::Relaxed);
    bench(c, "alloc", "CountingAlloc: 17 allocs", strings);
    bench(c, "alloc", "empty frame, counting", || {
        drop(black_box(Stopwatch::start("empty")));
    });
    bench(c, "alloc", "frame of 17 allocs, counting", || {
        let _f = Stopwatch::start("strings");
        strings();
    });
    COUNTING.store(false, Ordering::Relaxed);
    bench(c, "alloc", "System: 17 allocs (again)", strings);
    let stats = guard.finish();
    let r = RESULTS.lock().unwrap();
    let get = |n: &str| r.iter().find(|x| x.0 == n).map_or(f64::NAN, |x| x.1);
    let frame = get("empty frame");
    println!("\n{:<32} {:>10} {:>8}", "case", "ns", "ratio");
    for (name, ns) in r.iter() {
        println!("{name:<32} {ns:>10.2} {:>7.2}x", ns / frame);
    }
    let system = (get("System: 17 allocs") + get("System: 17 allocs (again)")) / 2.0;
    let counting = get("CountingAlloc: 17 allocs");
    println!(
        "plot / empty frame: {:.2}x; message / empty frame: {:.2}x",
        get("plot") / frame,
        get("message") / frame
    );
    println!(
        "CountingAlloc / System: {:.2}x; added per allocation (and its free): {:.2} ns",
        counting / system,
        (counting - system) / ALLOCS_PER_LOOP
    );
    println!(
        "empty frame with CountingAlloc installed / without: {:.2}x",
        get("empty frame, counting") / frame
    );
    println!(
        "dropped {} (frame records), {} (others)",
        stats.dropped, stats.dropped_other
    );
}

criterion_group!(benches, all);
criterion_main!(benches);
