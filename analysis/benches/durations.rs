//! Recording durations: `Durations::record` against the `hdrhistogram` crate's `record` at the
//! same precision (what it replaced), and a floor: the same loop summing the durations.

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]
use analysis::durations::Durations;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

/// Frame durations as a log holds them: spread over five orders of magnitude (100 ns to 10 ms,
/// log-uniform), from a fixed xorshift sequence.
fn durations(n: usize) -> Vec<u64> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let exp = 2.0 + 5.0 * (x >> 11) as f64 / (1u64 << 53) as f64;
            10f64.powf(exp) as u64
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let all = durations(1 << 20);
    let mut g = c.benchmark_group("record 1 Mi durations");
    g.throughput(Throughput::Elements(all.len() as u64));
    g.bench_function("floor: sum", |b| {
        b.iter(|| black_box(&all).iter().fold(0u64, |s, &v| s.wrapping_add(v)))
    });
    g.bench_function("Durations::record", |b| {
        b.iter(|| {
            let mut d = Durations::new();
            for &v in black_box(&all) {
                d.record(v);
            }
            d.count()
        })
    });
    g.bench_function("hdrhistogram record (2 digits)", |b| {
        b.iter(|| {
            let mut h = hdrhistogram::Histogram::<u64>::new(2).unwrap();
            for &v in black_box(&all) {
                h.record(v).unwrap();
            }
            h.len()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
