//! Storage-engine benchmarks, each read as a ratio to a floor measured in the same run:
//! - read: records decoded per second by `LogReader` vs. reading the same bytes, and vs. the
//!   same records in an unframed (pre-checksum) segment: the cost of verifying batches;
//! - write: `LogWriter` appends vs. plain 1 MiB `write`s to the same disk (what `dd` does):
//!   `append_batches` of bytes already framed into checksummed batches (the recorder's path:
//!   its threads count and checksum their own records), and `append_frames` of plain records
//!   (framed and checksummed by the writer); CRC32C alone over the same bytes;
//! - sync: appends under each `SyncPolicy` (never, every 100 ms, every batch);
//! - lookup: one random frame's data from a 1 GiB data file vs. parsing the same BSON in memory.

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::io::Write;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use formats::{BatchHeader, Category, FrameEnd, FrameKey, FrameStart, Record};
use framelog::{DataBatch, DataStore, LogReader, LogWriter, SyncPolicy, WriterOptions};
use rand::{Rng, SeedableRng};

fn encode_frames(worker: u8, first: u32, n: u32) -> Vec<u8> {
    let labels = [
        "db/query",
        "http/request",
        "User: Select",
        "template/render",
    ];
    let mut buf = vec![0u8; n as usize * 64];
    let mut len = 0;
    for id in first..first + n {
        let t = u64::from(id) * 100;
        len += FrameStart {
            parent: formats::Parent::NotRecorded,
            id,
            worker,
            timestamp: t,
            context: id / 16,
            category: Category::DATABASE,
            label: labels[id as usize % 4],
        }
        .encode(&mut buf[len..])
        .unwrap();
        len += FrameEnd {
            id,
            worker,
            timestamp: t + 50,
        }
        .encode(&mut buf[len..])
        .unwrap();
    }
    buf.truncate(len);
    buf
}

fn read(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open(dir.path()).unwrap();
    let frames = 2_000_000u32;
    for chunk in 0..frames / 100_000 {
        w.append_frames(&encode_frames(w.worker(), chunk * 100_000 + 1, 100_000))
            .unwrap();
    }
    let records = u64::from(frames) * 2 + 1;
    let mut g = c.benchmark_group("read");
    g.throughput(Throughput::Elements(records));
    g.sample_size(20);
    let path = framelog::segments::segment_path(dir.path(), formats::FileKind::FrameLog, 1);
    // The reader's I/O alone: the same file read in 4 MiB chunks into a reused buffer.
    g.bench_function("floor_read_bytes", |b| {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; 4 << 20];
        b.iter(|| {
            let f = std::fs::File::open(&path).unwrap();
            let (mut off, mut sum) = (0u64, 0u64);
            loop {
                let n = f.read_at(&mut buf, off).unwrap();
                if n == 0 {
                    break;
                }
                sum = sum.wrapping_add(u64::from(buf[n - 1]));
                off += n as u64;
            }
            black_box(sum)
        })
    });
    // The same records without batch framing, as a log written before checksums existed.
    let old_dir = tempfile::tempdir().unwrap();
    {
        let mut bytes = formats::FileHeader::new(formats::FileKind::FrameLog)
            .encode()
            .to_vec();
        let mut r = LogReader::open(dir.path()).unwrap();
        r.read_available(|_, rec| rec.encode_to_vec(&mut bytes))
            .unwrap();
        std::fs::write(
            framelog::segments::segment_path(old_dir.path(), formats::FileKind::FrameLog, 1),
            bytes,
        )
        .unwrap();
    }
    g.bench_function("log_reader_records_unframed", |b| {
        b.iter(|| {
            let mut n = 0u64;
            LogReader::open(old_dir.path())
                .unwrap()
                .read_available(|_, _| n += 1)
                .unwrap();
            assert_eq!(n, records);
            black_box(n)
        })
    });
    g.bench_function("log_reader_records", |b| {
        b.iter(|| {
            let mut n = 0u64;
            let mut acc = 0u64;
            LogReader::open(dir.path())
                .unwrap()
                .read_available(|_, r| {
                    n += 1;
                    if let Record::End(e) = r {
                        acc = acc.wrapping_add(e.timestamp);
                    }
                })
                .unwrap();
            assert_eq!(n, records);
            black_box(acc)
        })
    });
    g.finish();
}

/// Bytes each write sample puts on disk: enough to reach the disk's sustained rate.
const WRITE_VOLUME: usize = 256 << 20;

fn write(c: &mut Criterion) {
    let root = tempfile::tempdir().unwrap();
    let batch = encode_frames(0, 1, 30_000); // ≈ 1 MiB of records
    let block = vec![0xA5u8; batch.len()];
    let batches = WRITE_VOLUME / batch.len();
    let mut g = c.benchmark_group("write");
    g.throughput(Throughput::Bytes((batches * batch.len()) as u64));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    // Each sample writes the same volume into a fresh file/log and deletes it afterwards, so
    // both sides see the same page-cache and writeback conditions.
    let mut round = 0;
    g.bench_function("floor_dd_like_write", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                round += 1;
                let path = root.path().join(format!("raw-{round}"));
                let t = Instant::now();
                let mut f = std::fs::File::create(&path).unwrap();
                for _ in 0..batches {
                    f.write_all(&block).unwrap();
                }
                drop(f);
                total += t.elapsed();
                std::fs::remove_file(&path).unwrap();
            }
            total
        })
    });
    // The checksum alone over the same bytes (what framing adds to each append).
    g.bench_function("crc32c_only", |b| {
        b.iter(|| {
            let mut acc = 0u32;
            for _ in 0..batches {
                acc ^= crc32c::crc32c(black_box(&batch));
            }
            black_box(acc)
        })
    });
    // The recorder's path: the same records already framed as its threads frame them (one
    // checksummed batch per buffer of under 64 KiB), appended as they are.
    let mut framed = Vec::with_capacity(batch.len() + 1024);
    formats::split_records(&batch, (64 << 10) - 512, |r, count| {
        framed
            .extend_from_slice(&BatchHeader::for_records(0, 1, &batch[r.clone()], count).encode());
        framed.extend_from_slice(&batch[r]);
    })
    .unwrap();
    g.bench_function("log_writer_append_batches", |b| {
        b.iter_custom(|iters| {
            append_in_fresh_logs(
                root.path(),
                &mut round,
                iters,
                WriterOptions::default(),
                &framed,
                batches,
                LogWriter::append_batches,
            )
        })
    });
    g.bench_function("log_writer_append_frames", |b| {
        b.iter_custom(|iters| {
            append_in_fresh_logs(
                root.path(),
                &mut round,
                iters,
                WriterOptions::default(),
                &batch,
                batches,
                LogWriter::append_frames,
            )
        })
    });
    g.finish();
}

/// Times `iters` runs of: open a new log under `root`, append `batch` `times` times, close
/// it (syncing per `opts`); each log is deleted after its run, outside the timing.
fn append_in_fresh_logs(
    root: &std::path::Path,
    round: &mut u32,
    iters: u64,
    opts: WriterOptions,
    batch: &[u8],
    times: usize,
    append: fn(&LogWriter, &[u8]) -> framelog::Result<()>,
) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        *round += 1;
        let dir = root.join(format!("log-{round}"));
        let t = Instant::now();
        let w = LogWriter::open_with(&dir, opts.clone()).unwrap();
        for _ in 0..times {
            append(&w, batch).unwrap();
        }
        drop(w);
        total += t.elapsed();
        std::fs::remove_dir_all(&dir).unwrap();
    }
    total
}

/// Appends under each sync policy: 64 MiB in 256 KiB appends per sample.
fn sync(c: &mut Criterion) {
    let root = tempfile::tempdir().unwrap();
    let batch = encode_frames(0, 1, 7_500); // ≈ 256 KiB
    let appends = (64 << 20) / batch.len();
    let mut g = c.benchmark_group("sync");
    g.throughput(Throughput::Bytes((appends * batch.len()) as u64));
    g.sample_size(10);
    let mut round = 0;
    for (name, policy) in [
        ("never", SyncPolicy::Never),
        (
            "interval_100ms",
            SyncPolicy::Interval(Duration::from_millis(100)),
        ),
        ("every_batch", SyncPolicy::EveryBatch),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let opts = WriterOptions {
                    sync: policy,
                    ..Default::default()
                };
                append_in_fresh_logs(
                    root.path(),
                    &mut round,
                    iters,
                    opts,
                    &batch,
                    appends,
                    LogWriter::append_frames,
                )
            })
        });
    }
    g.finish();
}

/// Builds a ≈1 GiB data file of ≈1 KiB documents; returns the keys written.
fn big_data_log(dir: &std::path::Path) -> Vec<FrameKey> {
    let w = LogWriter::open_with(
        dir,
        WriterOptions {
            data_segment_bytes: 2 << 30,
            ..Default::default()
        },
    )
    .unwrap();
    let pad = "x".repeat(960);
    let mut keys = Vec::new();
    let mut batch = DataBatch::new();
    let mut id = 1u32;
    let mut bytes = 0usize;
    while bytes < 1 << 30 {
        batch.clear();
        for _ in 0..4096 {
            let key = FrameKey::new(w.worker(), id);
            let doc = formats::to_document(&serde_json::json!({"sql": "SELECT * FROM user WHERE id = ?", "id": id, "pad": pad})).unwrap();
            batch.push(key, &doc);
            keys.push(key);
            id += 1;
        }
        bytes += batch.byte_len();
        w.append_data(&batch).unwrap();
    }
    keys
}

fn lookup(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let keys = big_data_log(dir.path());
    let mut store = DataStore::open(dir.path()).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let sample_doc = formats::to_document(&serde_json::json!({"sql": "SELECT * FROM user WHERE id = ?", "id": 1, "pad": "x".repeat(960)})).unwrap();

    // Percentiles, which criterion does not report: 20,000 random lookups, timed one by one.
    let mut lat: Vec<u64> = (0..20_000)
        .map(|_| {
            let key = keys[rng.gen_range(0..keys.len())];
            let t = Instant::now();
            black_box(store.get(key).unwrap().unwrap());
            t.elapsed().as_nanos() as u64
        })
        .collect();
    lat.sort_unstable();
    let mut floor: Vec<u64> = (0..20_000)
        .map(|_| {
            let t = Instant::now();
            black_box(bson::Document::from_reader(&sample_doc[..]).unwrap());
            t.elapsed().as_nanos() as u64
        })
        .collect();
    floor.sort_unstable();
    let pct = |v: &[u64], p: f64| v[((v.len() as f64 * p) as usize).min(v.len() - 1)];
    eprintln!(
        "lookup on {} entries (1 GiB data file): p50 {} ns, p99 {} ns, max {} ns; floor (parse same BSON in memory) p50 {} ns, p99 {} ns",
        keys.len(),
        pct(&lat, 0.5),
        pct(&lat, 0.99),
        lat[lat.len() - 1],
        pct(&floor, 0.5),
        pct(&floor, 0.99)
    );

    let mut g = c.benchmark_group("lookup");
    g.sample_size(50);
    g.bench_function("floor_parse_bson_in_memory", |b| {
        b.iter(|| black_box(bson::Document::from_reader(&sample_doc[..]).unwrap()))
    });
    g.bench_function("data_store_get_random_1GiB", |b| {
        b.iter(|| {
            let key = keys[rng.gen_range(0..keys.len())];
            black_box(store.get(key).unwrap().unwrap())
        })
    });
    g.finish();
}

criterion_group!(benches, read, write, sync, lookup);
criterion_main!(benches);
