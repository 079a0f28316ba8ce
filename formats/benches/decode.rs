//! Record decoding throughput against a floor: summing the same bytes as u64 words.

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use formats::{Category, FrameEnd, FrameStart, Parent, Record, RecordIter};
use std::hint::black_box;

fn sample_log(frames: usize) -> Vec<u8> {
    let mut buf = vec![0u8; frames * 64];
    let mut n = 0;
    let labels = [
        "db/query",
        "http/request",
        "User: Select",
        "template/render",
    ];
    for i in 0..frames as u32 {
        let start = FrameStart {
            id: i,
            worker: 1,
            timestamp: 1_000 + i as u64 * 10,
            context: i / 8,
            category: Category::DATABASE,
            label: labels[i as usize % labels.len()],
            // What writers record now: every start names its parent (or none).
            parent: if i % 8 == 0 {
                Parent::Root
            } else {
                Parent::Frame(i / 8 * 8)
            },
        };
        n += start.encode(&mut buf[n..]).unwrap();
        let end = FrameEnd {
            id: i,
            worker: 1,
            timestamp: 1_005 + i as u64 * 10,
        };
        n += end.encode(&mut buf[n..]).unwrap();
    }
    buf.truncate(n);
    buf
}

fn decode(c: &mut Criterion) {
    let frames = 100_000;
    let log = sample_log(frames);
    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(frames as u64 * 2));
    g.bench_function("floor_sum_words", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            // A floor that touches the same bytes: one load per 16 bytes (≈ record size).
            for chunk in log.chunks_exact(16) {
                acc = acc.wrapping_add(u64::from_le_bytes(chunk[..8].try_into().unwrap()));
            }
            black_box(acc)
        })
    });
    g.bench_function("records", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for item in RecordIter::new(black_box(&log), 16) {
                match item.unwrap().1 {
                    Record::Start(s) => acc = acc.wrapping_add(s.timestamp + s.label.len() as u64),
                    Record::End(e) => acc = acc.wrapping_add(e.timestamp),
                    _ => {}
                }
            }
            black_box(acc)
        })
    });
    // What an append adds per record before writing: finding batch boundaries and counts,
    // and the CRC32C of every batch.
    g.bench_function("split_records", |b| {
        b.iter(|| {
            let mut acc = 0u32;
            formats::split_records(black_box(&log), formats::FRAMES_BATCH_TARGET, |r, n| {
                acc = acc.wrapping_add(n ^ r.end as u32)
            })
            .unwrap();
            black_box(acc)
        })
    });
    g.bench_function("split_and_checksum", |b| {
        b.iter(|| {
            let mut acc = 0u32;
            formats::split_records(black_box(&log), formats::FRAMES_BATCH_TARGET, |r, n| {
                acc ^= formats::BatchHeader::for_records(0, 0, &log[r], n).crc
            })
            .unwrap();
            black_box(acc)
        })
    });
    g.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
