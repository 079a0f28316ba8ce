//! Packing a writer's batch (`docs/FORMAT.md`, *Packed batches*): a 64 KiB batch of the stress
//! example's frames (a root, nested empty frames 20-40 ns apart, one label), packed on the
//! writer thread and unpacked by readers, against the floor of copying the same bytes
//! (what a writer without packing does with a batch) and of its CRC32C (what every batch pays).
//!
//! The rows "… just written on another thread" copy or pack a batch that another thread has
//! written right before (only the copy or the pack is timed), as a recorder's writer finds a
//! buffer its recording thread filled; the other rows work on one batch again and again, warm
//! in the cache.
//!
//! `cargo bench -p framelog-format --bench packed`

#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// Times `work` on `batch` freshly written by another thread each time: a helper thread
/// copies it into one of a few buffers, then this thread runs `work` on that buffer (only
/// `work` is timed), as a writer thread finds a buffer its recording thread just filled.
fn just_written(batch: &[u8], iters: u64, mut work: impl FnMut(&[u8]) -> usize) -> Duration {
    const RING: usize = 8;
    let bufs: Arc<Vec<Mutex<Vec<u8>>>> =
        Arc::new((0..RING).map(|_| Mutex::new(batch.to_vec())).collect());
    let (go, todo) = mpsc::sync_channel::<usize>(1);
    let (done, written) = mpsc::sync_channel::<usize>(1);
    let helper = {
        let (bufs, batch) = (bufs.clone(), batch.to_vec());
        std::thread::spawn(move || {
            for k in todo {
                bufs[k].lock().unwrap().copy_from_slice(&batch);
                if done.send(k).is_err() {
                    break;
                }
            }
        })
    };
    let mut spent = Duration::ZERO;
    for i in 0..iters {
        go.send(i as usize % RING).unwrap();
        let k = written.recv().unwrap();
        let buf = bufs[k].lock().unwrap();
        let t = Instant::now();
        black_box(work(black_box(&buf)));
        spent += t.elapsed();
    }
    drop(go);
    helper.join().unwrap();
    spent
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
    g.bench_function(
        "floor: copy the records just written on another thread",
        |b| {
            b.iter_custom(|iters| {
                just_written(&batch, iters, |buf| {
                    out.clear();
                    out.extend_from_slice(buf);
                    out.len()
                })
            })
        },
    );
    g.bench_function("pack the records just written on another thread", |b| {
        b.iter_custom(|iters| {
            just_written(&batch, iters, |buf| {
                out.clear();
                formats::packed::pack(1, 0, buf, &mut out).map_or(0, |n| n as usize)
            })
        })
    });
    g.bench_function("unpack", |b| {
        b.iter(|| formats::packed::unpack(1, 0, count, black_box(&packed), &mut out))
    });
    g.finish();
}

criterion_group!(benches, packed);
criterion_main!(benches);
