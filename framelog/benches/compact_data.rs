//! Compact data segments (format version 2): sealed size, lookups, compaction speed.
//!
//! - size: B/frame of frame data with its index, raw and compact, for logs recorded by the
//!   stopwatch examples (`FRAMELOG_BENCH_DEMO=DIR`, `FRAMELOG_BENCH_STRESS=DIR`; the bench
//!   cannot run them itself: stopwatch depends on this crate), with and without a trained
//!   dictionary, and for the synthetic 1 GiB log below;
//! - lookup: one random frame's data in a compacted ≈1 GiB data segment against the same
//!   lookup in the raw segment, same run, same keys (p50/p99 printed, then criterion);
//! - compaction: raw bytes compacted per second (64 MiB segments, zstd level 3).
//!
//! `FRAMELOG_BENCH_1GIB=0` skips the 1 GiB part (a minute to build and compact).

// criterion's macros generate undocumented items.
#![allow(missing_docs)]

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use formats::compact::data::{DataFileEncoder, train_dictionary};
use formats::{FileKind, FrameKey, Record, decode_data_entry, decode_index_entry};
use framelog::compact::SegmentOutcome;
use framelog::compact::data::{BLOCK_TARGET, compact_data_segment};
use framelog::{DataBatch, DataStore, LogReader, LogWriter, WriterOptions, segments};
use rand::{Rng, SeedableRng};

const LEVEL: i32 = 3;

/// SQL-like documents with some entropy (ids, names, timings), ≈300-900 bytes each.
fn document(rng: &mut impl Rng, id: u32) -> Vec<u8> {
    const TABLES: [&str; 6] = ["users", "orders", "items", "sessions", "payments", "carts"];
    const NAMES: [&str; 8] = [
        "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi",
    ];
    let table = TABLES[rng.gen_range(0..TABLES.len())];
    let rows: Vec<_> = (0..rng.gen_range(1..8))
        .map(|_| {
            let name = NAMES[rng.gen_range(0..NAMES.len())];
            serde_json::json!({
                "id": rng.gen_range(1..1_000_000),
                "name": name,
                "email": format!("{name}{}@example.com", rng.gen_range(0..10_000)),
                "balance": rng.gen_range(0.0..10_000.0f64),
            })
        })
        .collect();
    formats::to_document(&serde_json::json!({
        "sql": format!("SELECT id, name, email, balance FROM {table} WHERE id = ? AND tenant = ? LIMIT {}", rows.len()),
        "params": [rng.gen_range(1..1_000_000), rng.gen_range(1..50)],
        "frame": id,
        "elapsed_us": rng.gen_range(10..50_000),
        "rows": rows,
    }))
    .unwrap()
}

/// Writes data segment 1 of ≈`bytes` into `dir` and seals it (an empty segment 2 exists);
/// returns the keys written.
fn raw_segment(dir: &Path, bytes: usize) -> Vec<FrameKey> {
    let w = LogWriter::open_with(
        dir,
        WriterOptions {
            data_segment_bytes: 2 << 30,
            ..Default::default()
        },
    )
    .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut keys = Vec::new();
    let mut batch = DataBatch::new();
    let mut id = 1u32;
    let mut written = 0usize;
    while written < bytes {
        batch.clear();
        for _ in 0..4096 {
            let key = FrameKey::new(w.worker(), id);
            batch.push(key, &document(&mut rng, id));
            keys.push(key);
            id += 1;
        }
        written += batch.byte_len();
        w.append_data(&batch).unwrap();
    }
    drop(w);
    std::fs::File::create(segments::segment_path(dir, FileKind::FrameData, 2)).unwrap();
    keys
}

/// The documents of data segment 1 of `dir` (raw), in file order.
fn raw_documents(dir: &Path) -> Vec<(FrameKey, Vec<u8>)> {
    let data = std::fs::read(segments::segment_path(dir, FileKind::FrameData, 1)).unwrap();
    let idx = std::fs::read(segments::segment_path(dir, FileKind::FrameIndex, 1)).unwrap();
    idx[16..]
        .chunks_exact(9)
        .filter_map(decode_index_entry)
        .filter(|e| e.key.id != 0)
        .map(|e| {
            let d = decode_data_entry(&data[e.seek as usize..])
                .unwrap()
                .unwrap();
            (e.key, d.document.to_vec())
        })
        .collect()
}

/// Bytes of a compact file of `docs` (level 3, the compactor's blocks), with a dictionary of
/// `dict` bytes trained on them (0: none).
fn encoded_len(docs: &[(FrameKey, Vec<u8>)], dict: usize) -> usize {
    let dictionary = (dict > 0)
        .then(|| {
            let step = (docs.len() / 4096).max(1);
            let sample: Vec<&[u8]> = docs.iter().step_by(step).map(|(_, d)| &d[..]).collect();
            train_dictionary(&sample, dict)
        })
        .flatten();
    if dict > 0 && dictionary.is_none() {
        return 0;
    }
    let mut enc = DataFileEncoder::new(LEVEL, dictionary.as_deref(), BLOCK_TARGET);
    let mut n = 0;
    for (k, d) in docs {
        enc.push(*k, d);
        n += enc.take_output().len();
    }
    n + enc.finish(0).len()
}

/// Sizes of a recorded log's data (every data segment), raw and compact, per frame.
fn report_log(name: &str, dir: &Path) {
    let mut frames = 0u64;
    LogReader::open(dir)
        .unwrap()
        .read_available(|_, r| frames += u64::from(matches!(r, Record::Start(_))))
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (mut raw, mut compact) = (0u64, 0u64);
    let mut docs = Vec::new();
    for n in segments::list(dir, FileKind::FrameData).unwrap() {
        // Each segment alone, sealed in a scratch directory, compacted as the compactor does.
        for kind in [FileKind::FrameData, FileKind::FrameIndex] {
            let from = segments::segment_path(dir, kind, n);
            std::fs::copy(&from, segments::segment_path(tmp.path(), kind, 1)).unwrap();
        }
        std::fs::File::create(segments::segment_path(tmp.path(), FileKind::FrameData, 2)).unwrap();
        docs.extend(raw_documents(tmp.path()));
        match compact_data_segment(tmp.path(), 1, LEVEL).unwrap() {
            SegmentOutcome::Compacted {
                raw_bytes,
                compact_bytes,
                ..
            } => {
                raw += raw_bytes;
                compact += compact_bytes;
            }
            other => panic!("{name} segment {n}: {other:?}"),
        }
        for kind in [FileKind::FrameData, FileKind::FrameIndex] {
            let _ = std::fs::remove_file(segments::segment_path(tmp.path(), kind, 1));
        }
    }
    let per = |b: u64| b as f64 / frames as f64;
    let dicts: Vec<String> = [4 << 10, 16 << 10, 64 << 10]
        .iter()
        .map(|&d| match encoded_len(&docs, d) {
            0 => format!("{} KiB dictionary: too few samples", d >> 10),
            n => format!("{} KiB dictionary {:.2}", d >> 10, per(n as u64)),
        })
        .collect();
    eprintln!(
        "size {name}: {frames} frames, {} data entries; frame data + index raw {:.2} B/frame, compact {:.2} B/frame ({:.1}x); one file without segments' splits: no dictionary {:.2}, {}",
        docs.len(),
        per(raw),
        per(compact),
        raw as f64 / compact as f64,
        per(encoded_len(&docs, 0) as u64),
        dicts.join(", ")
    );
}

fn size(_: &mut Criterion) {
    let mut any = false;
    for (name, var) in [
        ("demo", "FRAMELOG_BENCH_DEMO"),
        ("stress", "FRAMELOG_BENCH_STRESS"),
    ] {
        if let Some(dir) = std::env::var_os(var) {
            report_log(name, Path::new(&dir));
            any = true;
        }
    }
    if !any {
        eprintln!(
            "size: set FRAMELOG_BENCH_DEMO / FRAMELOG_BENCH_STRESS to logs recorded by \
             `demo DIR 5` / `stress --dir DIR --threads 2 --frames 500000 --depth 4 --data-every 100`"
        );
    }
}

fn pct(v: &[u64], p: f64) -> u64 {
    v[((v.len() as f64 * p) as usize).min(v.len() - 1)]
}

fn lookup(c: &mut Criterion) {
    if std::env::var_os("FRAMELOG_BENCH_1GIB").is_some_and(|v| v == "0") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let keys = raw_segment(dir.path(), 1 << 30);
    eprintln!(
        "built a raw 1 GiB data segment ({} entries) in {:.1?}",
        keys.len(),
        t.elapsed()
    );
    // The raw store indexes (and maps) the raw pair before compaction and keeps reading it.
    let mut raw = DataStore::open(dir.path()).unwrap();
    let sample: Vec<(FrameKey, Vec<u8>)> =
        raw_documents(dir.path()).into_iter().step_by(64).collect();
    eprintln!(
        "size 1 GiB synthetic (one segment's docs, every 64th): no dictionary {} B, 16 KiB dictionary {} B",
        encoded_len(&sample, 0),
        encoded_len(&sample, 16 << 10)
    );
    let t = Instant::now();
    let outcome = compact_data_segment(dir.path(), 1, LEVEL).unwrap();
    let took = t.elapsed().as_secs_f64();
    let SegmentOutcome::Compacted {
        raw_bytes,
        compact_bytes,
        items,
    } = outcome
    else {
        panic!("{outcome:?}")
    };
    eprintln!(
        "compacted 1 GiB: {raw_bytes} -> {compact_bytes} bytes ({:.1}x) in {took:.2} s: {:.0} MB/s of raw input, {:.2} M entries/s",
        raw_bytes as f64 / compact_bytes as f64,
        raw_bytes as f64 / took / 1e6,
        items as f64 / took / 1e6
    );
    let mut compact = DataStore::open(dir.path()).unwrap();
    assert_eq!(compact.len(), raw.len());

    // Percentiles, which criterion does not report: 20,000 random lookups each, interleaved,
    // the same keys in both stores.
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let (mut lat_raw, mut lat_compact) = (Vec::new(), Vec::new());
    for _ in 0..20_000 {
        let key = keys[rng.gen_range(0..keys.len())];
        let t = Instant::now();
        let a = black_box(raw.get(key).unwrap().unwrap());
        lat_raw.push(t.elapsed().as_nanos() as u64);
        let t = Instant::now();
        let b = black_box(compact.get(key).unwrap().unwrap());
        lat_compact.push(t.elapsed().as_nanos() as u64);
        assert_eq!(a, b);
    }
    lat_raw.sort_unstable();
    lat_compact.sort_unstable();
    eprintln!(
        "lookup, {} entries, random keys: compact p50 {} ns, p99 {} ns, max {} ns; raw (same run, same keys) p50 {} ns, p99 {} ns, max {} ns; p99 ratio {:.1}x",
        keys.len(),
        pct(&lat_compact, 0.5),
        pct(&lat_compact, 0.99),
        lat_compact[lat_compact.len() - 1],
        pct(&lat_raw, 0.5),
        pct(&lat_raw, 0.99),
        lat_raw[lat_raw.len() - 1],
        pct(&lat_compact, 0.99) as f64 / pct(&lat_raw, 0.99) as f64
    );

    let mut g = c.benchmark_group("compact_data_lookup");
    g.sample_size(30);
    g.bench_function("raw_get_random_1GiB", |b| {
        b.iter(|| black_box(raw.get(keys[rng.gen_range(0..keys.len())]).unwrap()))
    });
    g.bench_function("compact_get_random_1GiB", |b| {
        b.iter(|| black_box(compact.get(keys[rng.gen_range(0..keys.len())]).unwrap()))
    });
    g.finish();
}

fn compaction(c: &mut Criterion) {
    let template = tempfile::tempdir().unwrap();
    raw_segment(template.path(), 64 << 20);
    let raw_len: u64 = [FileKind::FrameData, FileKind::FrameIndex]
        .iter()
        .map(|&k| {
            std::fs::metadata(segments::segment_path(template.path(), k, 1))
                .unwrap()
                .len()
        })
        .sum();
    let mut g = c.benchmark_group("compact_data_compaction");
    g.sample_size(10);
    g.throughput(criterion::Throughput::Bytes(raw_len));
    g.bench_function("compact_64MiB_segment_level3", |b| {
        b.iter_batched(
            || {
                let dir = tempfile::tempdir().unwrap();
                for kind in [FileKind::FrameData, FileKind::FrameIndex] {
                    std::fs::copy(
                        segments::segment_path(template.path(), kind, 1),
                        segments::segment_path(dir.path(), kind, 1),
                    )
                    .unwrap();
                }
                std::fs::File::create(segments::segment_path(dir.path(), FileKind::FrameData, 2))
                    .unwrap();
                dir
            },
            |dir| {
                let out = compact_data_segment(dir.path(), 1, LEVEL).unwrap();
                assert!(matches!(out, SegmentOutcome::Compacted { .. }));
                dir
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, size, compaction, lookup);
criterion_main!(benches);
