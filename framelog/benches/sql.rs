//! `framelog sql` and the Parquet export on a large compact log, each against a floor in the
//! same run: the group-by query on the virtual table against the same query on a native
//! SQLite table holding the same rows; a query on 1 % of the log's time range against the full
//! scan; `ancestor_slice(id)` of a frame in the middle and one near the end of the log; the
//! Parquet export's frames/s against the Chrome export's.
//!
//! `cargo bench -p framelog --bench sql` (2 M frames; `FRAMELOG_SQL_BENCH_FRAMES=10000000` for
//! 10 M; `FRAMELOG_SQL_BENCH_NO_EXPORT=1` stops before the exports, which take most of a
//! 100 M-frame run).

#![allow(missing_docs)]

use std::time::{Duration, Instant};

use formats::{Category, FrameEnd, FrameStart, Parent, Record, ThreadInfo};
use framelog::compact::{CompactOptions, compact_log};
use framelog::export::chrome::ChromeTrace;
use framelog::export::{ExportOptions, export};
use framelog::sql::SqlLog;
use framelog::{LogWriter, WriterOptions};

/// Requests of four frames (a root and three nested, parents recorded) on 4 threads, 200 ns
/// apart, ending now (the writer stamps its own records with the wall clock).
fn write_log(dir: &std::path::Path, frames: u32) -> (u64, u64) {
    let w = LogWriter::open_with(dir, WriterOptions::default()).unwrap();
    let labels = [
        "GET /orders",
        "db: select",
        "template: orders",
        "cache: get",
        "GET /users",
        "db: insert",
        "template: users",
        "cache: set",
    ];
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let t0 = now - u64::from(frames / 4) * 200 - 1_000_000;
    let mut t = t0;
    let mut buf = Vec::new();
    let mut id = 1u32;
    while id < frames {
        let thread = id % 4;
        Record::ThreadInfo(ThreadInfo {
            worker: w.worker(),
            thread,
            timestamp: t,
            name: "worker",
        })
        .encode_to_vec(&mut buf);
        for _ in 0..256 {
            let root = id;
            let set = (root as usize / 4) % 2 * 4;
            for depth in 0..4u32 {
                Record::Start(FrameStart {
                    parent: if depth == 0 {
                        Parent::Root
                    } else {
                        Parent::Frame(root + depth - 1)
                    },
                    id: root + depth,
                    worker: w.worker(),
                    timestamp: t + u64::from(depth) * 10,
                    context: root,
                    category: Category::HTTP,
                    label: labels[set + depth as usize],
                })
                .encode_to_vec(&mut buf);
            }
            for depth in (0..4u32).rev() {
                Record::End(FrameEnd {
                    id: root + depth,
                    worker: w.worker(),
                    timestamp: t + 100 - u64::from(depth) * 10 + u64::from(root % 7),
                })
                .encode_to_vec(&mut buf);
            }
            id += 4;
            t += 200;
        }
        w.append_frames(&buf).unwrap();
        buf.clear();
    }
    (t0, t)
}

/// Median of `n` runs of `f`, and the value it returned.
fn median<T>(n: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..n {
        let t = Instant::now();
        last = Some(f());
        times.push(t.elapsed());
    }
    times.sort();
    (times[n / 2], last.unwrap())
}

fn query(log: &SqlLog, sql: &str) -> i64 {
    log.refresh();
    let mut q = log.connection().prepare(sql).unwrap();
    let mut rows = q.query([]).unwrap();
    let mut n = 0;
    while let Some(r) = rows.next().unwrap() {
        n += r.get::<_, i64>(1).unwrap_or(1);
    }
    n
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let frames: u32 = std::env::var("FRAMELOG_SQL_BENCH_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    let dir = tempfile::tempdir().unwrap();
    let (t0, t1) = write_log(dir.path(), frames);
    compact_log(
        dir.path(),
        &CompactOptions {
            all: true,
            ..CompactOptions::default()
        },
    )
    .unwrap();
    let log = SqlLog::open(dir.path()).unwrap();
    let group = "select name, count(*), sum(dur) from slice group by name";
    let (vt, n) = median(3, || query(&log, group));
    // Whole appends of 1,024 frames: a few more than asked for.
    assert!(n >= i64::from(frames));
    let frames = n as u32;
    log.connection()
        .execute_batch(
            "create table native(id integer, ts integer, dur integer, name text, depth integer, parent_id integer, context_id integer);
             insert into native select id, ts, dur, name, depth, parent_id, context_id from slice;",
        )
        .unwrap();
    let (nt, n2) = median(3, || {
        query(
            &log,
            "select name, count(*), sum(dur) from native group by name",
        )
    });
    assert_eq!(n, n2);
    println!(
        "[{frames} frames] group by name: virtual table {:.0} ms, native SQLite table {:.0} ms (median of 3): ratio {:.2}",
        ms(vt),
        ms(nt),
        ms(vt) / ms(nt)
    );

    let (full, all) = median(3, || query(&log, "select 'n', count(*) from slice"));
    let span = t1 - t0;
    let from = t0 + span / 2;
    let to = from + span / 100;
    let (part, some) = median(3, || {
        query(
            &log,
            &format!("select 'n', count(*) from slice where ts between {from} and {to}"),
        )
    });
    println!(
        "[{frames} frames] count(*): full scan {:.0} ms ({all} rows), 1 % of the time range {:.1} ms ({some} rows): ratio {:.3}",
        ms(full),
        ms(part),
        ms(part) / ms(full)
    );

    // A frame in the middle and one near the end (the deepest of its request); the id index
    // lets the read start at the block its start may be in.
    for (at, target) in [
        ("middle", (i64::from(frames / 2) & !3) + 4),
        ("end", (i64::from(frames / 10 * 9) & !3) + 4),
    ] {
        let (anc, found) = median(3, || {
            query(
                &log,
                &format!("select name, count(*) from ancestor_slice({target}) group by name"),
            )
        });
        println!(
            "[{frames} frames] ancestor_slice({target}) ({at} of the log): {:.1} ms ({found} ancestors); a full scan for the floor: {:.0} ms: ratio {:.4}",
            ms(anc),
            ms(full),
            ms(anc) / ms(full)
        );
    }

    if std::env::var_os("FRAMELOG_SQL_BENCH_NO_EXPORT").is_some() {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let (pq, _) = median(3, || {
        framelog::export::parquet::export_parquet(dir.path(), out.path(), false).unwrap()
    });
    let (chrome, _) = median(3, || {
        let mut sink = ChromeTrace::new(std::io::BufWriter::new(std::io::sink())).unwrap();
        export(dir.path(), &ExportOptions::default(), &mut sink).unwrap()
    });
    // What `framelog export -o FILE` does: the JSON written to a file (the Parquet export's
    // files are real files too).
    let json = out.path().join("trace.json");
    let (chrome_file, _) = median(3, || {
        let f = std::fs::File::create(&json).unwrap();
        let mut sink = ChromeTrace::new(std::io::BufWriter::new(f)).unwrap();
        let n = export(dir.path(), &ExportOptions::default(), &mut sink).unwrap();
        // As the CLI does: flushed, not synced.
        sink.into_inner().into_inner().unwrap();
        n
    });
    std::fs::remove_file(&json).unwrap();
    let log_bytes: u64 = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    let pq_bytes: u64 = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    let rate = |d: Duration| f64::from(frames) / d.as_secs_f64() / 1e6;
    println!(
        "[{frames} frames] export: parquet {:.2} M frames/s; chrome into memory {:.2} M frames/s (ratio {:.2}), chrome to a file {:.2} M frames/s (ratio {:.2}) (medians of 3); parquet files {} bytes, compact log {} bytes: ratio {:.2}",
        rate(pq),
        rate(chrome),
        rate(pq) / rate(chrome),
        rate(chrome_file),
        rate(pq) / rate(chrome_file),
        pq_bytes,
        log_bytes,
        pq_bytes as f64 / log_bytes as f64
    );
}
