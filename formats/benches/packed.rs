//! Packing a writer's batch (`docs/FORMAT.md`, *Packed batches*): a 64 KiB batch of the stress
//! example's frames (a root, nested empty frames 20-40 ns apart, one label), packed on the
//! writer thread and unpacked by readers, against the floor of copying the same bytes
//! (what a writer without packing does with a batch) and of its CRC32C (what every batch pays).
//!
//! `cargo bench -p framelog-format --bench packed`

#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use formats::{Category, FrameEnd, FrameStart, Parent, Record, ThreadInfo};

/// About 64 KiB of records as the stress example's thread writes them.
fn stress_batch() -> (Vec<u8>, u64) {
    let mut v = Vec::new();
    let t0 = 1_700_000_000_000_000_000u64;
    Record::ThreadInfo(ThreadInfo {
        worker: 1,
        thread: 2,
        timestamp: t0,
        name: "stress-0",
    })
    .encode_to_vec(&mut v);
    let mut t = t0;
    let mut id = 1u32;
    let mut frames = 0u64;
    while v.len() < (64 << 10) - 64 {
        id += 1;
        t += 17 + u64::from(id % 23);
        Record::Start(FrameStart {
            id,
            worker: 1,
            timestamp: t,
            context: 1,
            category: Category::FUNCTION,
            label: "stress/empty",
            parent: Parent::Frame(1),
        })
        .encode_to_vec(&mut v);
        t += 15 + u64::from(id % 7);
        Record::End(FrameEnd {
            id,
            worker: 1,
            timestamp: t,
        })
        .encode_to_vec(&mut v);
        frames += 1;
    }
    (v, frames)
}

fn packed(c: &mut Criterion) {
    let (batch, frames) = stress_batch();
    let mut packed = Vec::new();
    let count = formats::packed::pack(1, 0, &batch, &mut packed).unwrap();
    eprintln!(
        "{frames} frames: {} bytes of records, {} packed ({:.2} B a frame)",
        batch.len(),
        packed.len(),
        packed.len() as f64 / frames as f64
    );
    let mut g = c.benchmark_group("a 64 KiB batch of stress frames");
    g.throughput(Throughput::Elements(frames));
    let mut out = Vec::with_capacity(batch.len());
    g.bench_function("floor: copy the records", |b| {
        b.iter(|| {
            out.clear();
            out.extend_from_slice(black_box(&batch));
            black_box(out.len())
        })
    });
    g.bench_function("floor: crc32c of the records", |b| {
        b.iter(|| crc32c::crc32c(black_box(&batch)))
    });
    g.bench_function("pack", |b| {
        b.iter(|| {
            out.clear();
            formats::packed::pack(1, 0, black_box(&batch), &mut out)
        })
    });
    g.bench_function("unpack", |b| {
        b.iter(|| formats::packed::unpack(1, 0, count, black_box(&packed), &mut out))
    });
    g.finish();
}

criterion_group!(benches, packed);
criterion_main!(benches);
