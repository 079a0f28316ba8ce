//! The CRC32C of two byte strings one after the other, from their CRCs: `formats::crc`'s
//! combine against the `crc32c` crate's (zlib's matrix method) and, for the floor, computing
//! the CRC of the second string again from the first one's (`crc32c_append`, hardware CRC
//! instructions), for a writer's batch of 64 KiB behind a `thread_info` record.
//!
//! `cargo bench -p framelog-format --bench crc`

#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};

fn combine(c: &mut Criterion) {
    let batch: Vec<u8> = (0..(64u32 << 10))
        .map(|i| i.wrapping_mul(2_654_435_761) as u8)
        .collect();
    let info = crc32c::crc32c(b"thread_info record, about thirty bytes");
    let records = crc32c::crc32c(&batch);
    let len = batch.len();
    let mut g = c.benchmark_group("crc32c of thread_info + a 64 KiB batch");
    g.bench_function("formats::crc::crc32c_combine", |b| {
        b.iter(|| formats::crc::crc32c_combine(black_box(info), black_box(records), len as u64))
    });
    g.bench_function("crc32c::crc32c_combine (the crate's)", |b| {
        b.iter(|| crc32c::crc32c_combine(black_box(info), black_box(records), black_box(len)))
    });
    g.bench_function("floor: crc32c_append over the batch again", |b| {
        b.iter(|| crc32c::crc32c_append(black_box(info), black_box(&batch)))
    });
    g.finish();
}

criterion_group!(benches, combine);
criterion_main!(benches);
