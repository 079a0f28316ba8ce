//! Cost of a frame, against a floor measured in the same run.
//!
//! Groups:
//! - `one_thread`: floor (two timestamps with the stopwatch clock, two `Instant::now()`),
//!   an empty frame (root and nested; static label), owned label, small data, a frame in an
//!   unsampled context, a frame with no stopwatch installed, and puffin's `profile_scope!`.
//! - `two_threads`: the same core cases, each of two threads running its own loop; the
//!   time reported is per frame per thread.
//! - `sustained`: two threads recording flat out in Block mode into a real log; the
//!   throughput printed is frames per second written to disk.
//!
//! - Tracy (`tracy-client`, a zone with a static span location per frame) at one and two
//!   threads. No viewer is connected (none is installed here) and the client is not built
//!   on-demand, so it queues every event in memory as it would for a connected viewer; that
//!   is why its samples are a fixed count of frames (memory stays bounded) instead of
//!   criterion's adaptive count.
//!
//! At the end a summary table (ns/frame and ratio to the two-timestamp floor) and the
//! recorder's drop counters are printed.

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use stopwatch::clock::Clock;
use stopwatch::{BufferingMode, Category, Sampling, Stopwatch};

/// Median ns/iteration per bench id, for the summary table.
static RESULTS: Mutex<Vec<(String, f64, f64)>> = Mutex::new(Vec::new());

/// Remembers the median and minimum ns/iteration of a bench's samples.
fn record(name: &str, mut samples: Vec<f64>) {
    samples.sort_by(f64::total_cmp);
    let median = samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN);
    let min = samples.first().copied().unwrap_or(f64::NAN);
    RESULTS.lock().unwrap().push((name.to_owned(), median, min));
}

/// Times `iters` iterations of `f` on `threads` threads; returns the mean per-thread time.
fn per_thread(
    threads: usize,
    iters: u64,
    f: impl Fn(u64) -> Duration + Send + Sync + 'static,
) -> Duration {
    let f = Arc::new(f);
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (f, barrier) = (f.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                f(iters)
            })
        })
        .collect();
    let total: Duration = handles.into_iter().map(|h| h.join().unwrap()).sum();
    total / threads as u32
}

/// Measures `case` with criterion on 1 or 2 threads, remembering a simple mean too.
fn bench_case(
    c: &mut Criterion,
    group: &str,
    name: &str,
    threads: usize,
    case: impl Fn(u64) -> Duration + Send + Sync + Clone + 'static,
) {
    let mut g = c.benchmark_group(group);
    g.warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1200))
        .sample_size(20);
    let mut samples = Vec::new();
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let d = if threads == 1 {
                case(iters)
            } else {
                per_thread(threads, iters, case.clone())
            };
            samples.push(d.as_nanos() as f64 / iters as f64);
            d
        })
    });
    g.finish();
    // Criterion's warm-up calls land here too; keep the measured samples only (the last
    // `sample_size` calls).
    let keep = samples.len().min(20);
    record(
        &format!("{group}/{name}"),
        samples.split_off(samples.len() - keep),
    );
}

/// Frames per timed batch: 20,000 empty frames are ~1 MB of log, far below the pool, so a
/// batch never waits for the writer; between batches (untimed) the writer is flushed. This
/// measures the producer's cost while the writer keeps up (nothing dropped, checked at the
/// end); the `sustained` group measures the flat-out, disk-bound rate instead.
const BATCH: u64 = 20_000;

/// Times `body` in batches of `BATCH` iterations, running `between` (untimed) after each.
fn paced(n: u64, between: impl Fn(), body: impl Fn(u64)) -> Duration {
    let mut done = 0;
    let mut total = Duration::ZERO;
    while done < n {
        let k = (n - done).min(BATCH);
        let t = Instant::now();
        body(k);
        total += t.elapsed();
        done += k;
        between();
    }
    total
}

/// Times `body` once.
fn timed(body: impl FnOnce()) -> Duration {
    let t = Instant::now();
    body();
    t.elapsed()
}

/// Frames per Tracy sample, and samples (after one warm-up): with no viewer connected Tracy
/// keeps every event (about 64 bytes a zone), so 30 M zones in all, ~2 GB.
const TRACY_FRAMES: u64 = 1_000_000;
const TRACY_SAMPLES: usize = 9;

/// Tracy's zones: `threads` threads each start and end `TRACY_FRAMES` nested zones per
/// sample; the median and minimum per-thread ns/zone are recorded like criterion's.
fn bench_tracy(group: &str, threads: usize) {
    // Starts Tracy's client once (later calls are no-ops); it runs until the process exits.
    tracy_client::Client::start();
    let run = |n: u64| {
        timed(|| {
            let _root = tracy_client::span!("bench/root");
            for _ in 0..n {
                drop(black_box(tracy_client::span!("bench/empty")));
            }
        })
    };
    let mut samples = Vec::new();
    for i in 0..=TRACY_SAMPLES {
        let d = if threads == 1 {
            run(TRACY_FRAMES)
        } else {
            per_thread(threads, TRACY_FRAMES, run)
        };
        if i > 0 {
            samples.push(d.as_nanos() as f64 / TRACY_FRAMES as f64);
        }
    }
    eprintln!("{group}/tracy-client 0.19 zone (nested): {samples:.1?} ns");
    record(&format!("{group}/tracy-client 0.19 zone (nested)"), samples);
}

fn flush() {
    Stopwatch::flush(Duration::from_secs(10));
}

fn frames(c: &mut Criterion) {
    let clock = Clock::process();
    eprintln!("clock source: {:?}", clock.source());
    let tsc = Arc::new(Clock::new(stopwatch::clock::ClockSource::Tsc));
    let std_clock = Arc::new(Clock::new(stopwatch::clock::ClockSource::Instant));

    for threads in [1usize, 2] {
        let group = if threads == 1 {
            "one_thread"
        } else {
            "two_threads"
        };
        bench_case(c, group, "floor: two TSC timestamps", threads, move |n| {
            let clock = Clock::process();
            timed(|| {
                for _ in 0..n {
                    black_box(clock.now());
                    black_box(clock.now());
                }
            })
        });
        bench_case(c, group, "floor: two Instant::now()", threads, |n| {
            timed(|| {
                for _ in 0..n {
                    black_box(Instant::now());
                    black_box(Instant::now());
                }
            })
        });
        bench_case(c, group, "no stopwatch installed", threads, |n| {
            timed(|| {
                for _ in 0..n {
                    drop(black_box(Stopwatch::start("bench/empty")));
                }
            })
        });
        bench_case(
            c,
            group,
            "tracing span, no subscriber (reference)",
            threads,
            |n| {
                timed(|| {
                    for _ in 0..n {
                        drop(black_box(tracing::info_span!("bench/empty").entered()));
                    }
                })
            },
        );
    }
    // Compare the two clock sources on their own (same formula as the hot path).
    bench_case(c, "one_thread", "clock: two TSC reads", 1, move |n| {
        timed(|| {
            for _ in 0..n {
                black_box(tsc.now());
                black_box(tsc.now());
            }
        })
    });
    // The same two reads as quanta scales them (the stopwatch's clock before it took
    // quanta's calibration over as a fixed-point factor).
    let q = quanta::Clock::new();
    let q_anchor = q.raw();
    bench_case(
        c,
        "one_thread",
        "clock: two reads scaled by quanta (reference)",
        1,
        move |n| {
            timed(|| {
                for _ in 0..n {
                    black_box(q.delta_as_nanos(q_anchor, q.raw()));
                    black_box(q.delta_as_nanos(q_anchor, q.raw()));
                }
            })
        },
    );
    bench_case(
        c,
        "one_thread",
        "clock: two anchored Instant reads",
        1,
        move |n| {
            timed(|| {
                for _ in 0..n {
                    black_box(std_clock.now());
                    black_box(std_clock.now());
                }
            })
        },
    );

    let dir = tempfile::tempdir().unwrap();
    let guard = Stopwatch::builder()
        .dir(dir.path().join("frames"))
        .mode(BufferingMode::Block)
        .buffer_kib(16 << 10)
        .install()
        .unwrap();
    let unsampled = Arc::new(
        Stopwatch::builder()
            .dir(dir.path().join("unsampled"))
            .sampling(Sampling::Probability(0.0))
            .build()
            .unwrap(),
    );
    for threads in [1usize, 2] {
        let group = if threads == 1 {
            "one_thread"
        } else {
            "two_threads"
        };
        bench_case(c, group, "empty frame, root, static label", threads, |n| {
            paced(n, flush, |k| {
                for _ in 0..k {
                    drop(Stopwatch::start("bench/empty"));
                }
            })
        });
        bench_case(
            c,
            group,
            "empty frame, nested, static label",
            threads,
            |n| {
                let _root = Stopwatch::start("bench/root");
                paced(n, flush, |k| {
                    for _ in 0..k {
                        drop(Stopwatch::start("bench/empty"));
                    }
                })
            },
        );
        let u = unsampled.clone();
        bench_case(
            c,
            group,
            "frame in an unsampled context",
            threads,
            move |n| {
                let _root = u.start("bench/root");
                timed(|| {
                    for _ in 0..n {
                        drop(u.start("bench/empty"));
                    }
                })
            },
        );
        bench_case(c, group, "puffin profile_scope! (nested)", threads, |n| {
            puffin::set_scopes_on(true);
            // puffin keeps scopes until a frame ends: end one per batch (untimed, like our
            // flush), as a game loop would.
            paced(
                n,
                || puffin::GlobalProfiler::lock().new_frame(),
                |k| {
                    puffin::profile_scope!("bench/root");
                    for _ in 0..k {
                        puffin::profile_scope!("bench/empty");
                    }
                },
            )
        });
    }
    bench_tracy("one_thread", 1);
    bench_tracy("two_threads", 2);
    bench_case(
        c,
        "one_thread",
        "owned label (String alloc included)",
        1,
        |n| {
            let _root = Stopwatch::start("bench/root");
            paced(n, flush, |k| {
                for i in 0..k {
                    drop(Stopwatch::start(format!("bench/owned/{}", i & 7)));
                }
            })
        },
    );
    bench_case(c, "one_thread", "static label + category", 1, |n| {
        let _root = Stopwatch::start("bench/root");
        paced(n, flush, |k| {
            for _ in 0..k {
                drop(Stopwatch::start_with("User: Select", Category::DATABASE));
            }
        })
    });
    bench_case(c, "one_thread", "small data (BSON, queued)", 1, |n| {
        let _root = Stopwatch::start("bench/root");
        paced(n, flush, |k| {
            for i in 0..k {
                let f = Stopwatch::start("bench/data");
                f.data(&(i, "user"));
            }
        })
    });
    // Connected vs directory: the same nested frame on two recorder instances, one writing a
    // log directory, one streaming to a server on 127.0.0.1 (`framelog serve`'s code, in
    // this process, writing its own log).
    let server_dir = tempfile::tempdir().unwrap();
    let mut opts = framelog::remote::ServerOptions::recorder(server_dir.path());
    opts.log = Arc::new(|_: &str| {});
    let server = framelog::remote::Server::bind("127.0.0.1:0", opts).unwrap();
    let to_dir = Arc::new(
        Stopwatch::builder()
            .dir(dir.path().join("instance"))
            .mode(BufferingMode::Block)
            .buffer_kib(16 << 10)
            .build()
            .unwrap(),
    );
    let connected = Arc::new(
        Stopwatch::builder()
            .connect(server.local_addr().to_string())
            .suspend(Duration::from_secs(30))
            .mode(BufferingMode::Block)
            .buffer_kib(16 << 10)
            .build()
            .unwrap(),
    );
    assert!(
        connected.is_streaming(),
        "the server started the session before resuming"
    );
    for threads in [1usize, 2] {
        let group = if threads == 1 {
            "one_thread"
        } else {
            "two_threads"
        };
        for (name, rec) in [
            ("recorder writing a directory (nested)", to_dir.clone()),
            ("recorder streaming to a server (nested)", connected.clone()),
        ] {
            bench_case(c, group, name, threads, move |n| {
                let _root = rec.start("bench/root");
                paced(
                    n,
                    || {
                        rec.flush(Duration::from_secs(10));
                    },
                    |k| {
                        for _ in 0..k {
                            drop(rec.start("bench/empty"));
                        }
                    },
                )
            });
        }
    }
    let streamed = Arc::into_inner(connected).unwrap().shutdown();
    drop(to_dir);
    assert_eq!((streamed.dropped, streamed.unsent), (0, 0), "{streamed:?}");

    let stats = guard.stats();
    drop(guard);
    drop(unsampled);
    eprintln!(
        "frame benches: dropped {} records, {} data updates, wrote {} MiB",
        stats.dropped,
        stats.dropped_data,
        stats.written_bytes >> 20
    );

    // Sustained: two threads, Block mode, as fast as they can, everything reaches the disk.
    let mut rates = Vec::new();
    for _ in 0..3 {
        let d = tempfile::tempdir().unwrap();
        let report = stopwatch::stress::run(&stopwatch::stress::StressOptions {
            dir: Some(d.path().join("log")),
            threads: 2,
            frames: 2_000_000,
            mode: BufferingMode::Block,
            buffer_kib: 4096,
            data_every: 0,
            depth: 4,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(report.dropped, 0);
        rates.push(report.frames_per_sec);
    }
    rates.sort_unstable();
    eprintln!(
        "sustained (2 threads, Block, 4 MiB pool, depth 4): {:.1} M frames/s written (median of 3; runs {:?})",
        rates[1] as f64 / 1e6,
        rates
    );
    // The same, streamed to the server (which writes them to its own log).
    let mut rates = Vec::new();
    for _ in 0..3 {
        let report = stopwatch::stress::run(&stopwatch::stress::StressOptions {
            dir: None,
            connect: Some(server.local_addr().to_string()),
            suspend: true,
            threads: 2,
            frames: 2_000_000,
            mode: BufferingMode::Block,
            buffer_kib: 4096,
            data_every: 0,
            depth: 4,
            segments: Default::default(),
        })
        .unwrap();
        assert_eq!((report.dropped, report.unsent), (0, 0));
        rates.push(report.frames_per_sec);
    }
    rates.sort_unstable();
    eprintln!(
        "sustained, streamed to a server on 127.0.0.1 (same workload): {:.1} M frames/s (median of 3; runs {:?})",
        rates[1] as f64 / 1e6,
        rates
    );
    drop(server);

    let results = RESULTS.lock().unwrap();
    let floor = |g: &str| {
        results
            .iter()
            .find(|(n, _, _)| n == &format!("{g}/floor: two TSC timestamps"))
            .map(|r| r.1)
            .unwrap_or(f64::NAN)
    };
    eprintln!(
        "\n| case | threads | ns/frame (median) | min | × floor (2 TSC, median) |\n|---|---|---|---|---|"
    );
    for (name, median, min) in results.iter() {
        let (g, case) = name.split_once('/').unwrap();
        let t = if g == "one_thread" { 1 } else { 2 };
        eprintln!(
            "| {case} | {t} | {median:.1} | {min:.1} | {:.2} |",
            median / floor(g)
        );
    }
}

criterion_group!(benches, frames);
criterion_main!(benches);
