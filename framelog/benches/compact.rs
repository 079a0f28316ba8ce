//! Compact sealed frame logs (format version 2): size per frame, compaction speed and read
//! speed, each beside a floor measured in the same run.
//!
//! ```sh
//! cargo run --release -p framelog-stopwatch --features demo --example stress -- --dir /tmp/s --threads 2 --frames 500000 --depth 4 --data-every 100 --mode block --segment-mib 8
//! cargo run --release --bin framelog-demo -- /tmp/d 5
//! STRESS_LOG=/tmp/s DEMO_LOG=/tmp/d cargo bench -p framelog --bench compact
//! ```
//!
//! Without those variables it measures a synthetic log shaped like the stress workload. The
//! logs are copied first: the bench never changes them.
//!
//! - size: compact frame-log bytes per frame (FrameStart) at several zstd levels, and which
//!   streams the bytes go to (each stream compressed alone);
//! - compaction: frames/s of `compact_frames_segment` on one core, against reading the same
//!   raw segments with `LogReader` (the floor: compaction must read every record);
//! - reading: records/s of `LogReader` on the compact log against the raw log, and the share
//!   of the time zstd takes, with lz4 (lz4_flex) decompressing the same block bodies beside it.

#![allow(missing_docs)]

use std::path::{Path, PathBuf};
use std::time::Instant;

use formats::compact::frames::{
    BLOCK_HEADER_LEN, BlockDecoder, FramesEncoder, STREAM_NAMES, STREAMS_WITH_PLOTS, decode_file,
    locate_blocks,
};
use formats::{Category, FileKind, FrameEnd, FrameStart, Record, ThreadInfo};
use framelog::compact::frames::compact_frames_segment;
use framelog::segments;
use framelog::{LogReader, LogWriter, WriterOptions};

const RUNS: usize = 5;
/// Interleaved raw/compact read samples.
const READ_PAIRS: usize = 11;

/// A log shaped like `stress --threads 2 --depth 4`: requests of four nested frames.
fn synthetic(dir: &Path, frames: u32) {
    let w = LogWriter::open_with(
        dir,
        WriterOptions {
            frames_segment_bytes: 8 << 20,
            compact: false,
            ..WriterOptions::default()
        },
    )
    .unwrap();
    let mut buf = Vec::new();
    let mut t = 1_700_000_000_000_000_000u64;
    let mut id = 1u32;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    while id < frames {
        let thread = id % 2 + 1;
        Record::ThreadInfo(ThreadInfo {
            worker: w.worker(),
            thread,
            timestamp: t,
            name: "stress",
        })
        .encode_to_vec(&mut buf);
        for _ in 0..512 {
            let root = id;
            for depth in 0..4u32 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                t += 20 + x % 40;
                Record::Start(FrameStart {
                    // As a writer records them now: each frame's parent is the one it nests in.
                    parent: if depth == 0 {
                        formats::Parent::Root
                    } else {
                        formats::Parent::Frame(root + depth - 1)
                    },
                    id: root + depth,
                    worker: w.worker(),
                    timestamp: t,
                    context: root,
                    category: Category::FUNCTION,
                    label: ["stress/root", "stress/a", "stress/b", "stress/c"][depth as usize],
                })
                .encode_to_vec(&mut buf);
            }
            for depth in (0..4u32).rev() {
                t += 20 + x % 30;
                Record::End(FrameEnd {
                    id: root + depth,
                    worker: w.worker(),
                    timestamp: t,
                })
                .encode_to_vec(&mut buf);
            }
            id += 4;
        }
        w.append_frames(&buf).unwrap();
        buf.clear();
    }
}

fn copy_log(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        let name = name.to_str().unwrap();
        if name.starts_with("frames-") || name.starts_with("data-") || name.starts_with("worker-") {
            std::fs::copy(e.path(), to.join(name)).unwrap();
        }
    }
}

/// Whether the segment at `path` is compact (format version 2 or 4).
fn is_compact(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; formats::HEADER_LEN];
    let n = std::fs::File::open(path).unwrap().read(&mut head).unwrap();
    formats::FileHeader::decode_any(FileKind::FrameLog, &head[..n])
        .ok()
        .flatten()
        .is_some_and(|h| h.is_compact())
}

/// Reads the whole log: (records, frames, seconds).
fn read(dir: &Path) -> (u64, u64, f64) {
    let t = Instant::now();
    let (mut records, mut frames) = (0u64, 0u64);
    let mut r = LogReader::open(dir).unwrap();
    r.read_available(|_, rec| {
        records += 1;
        frames += u64::from(matches!(rec, Record::Start(_)));
    })
    .unwrap();
    assert!(r.take_damage().is_empty());
    (records, frames, t.elapsed().as_secs_f64())
}

/// CPU time this thread used so far, in seconds (wall time on a loaded machine says little
/// about the work done on one core).
fn thread_cpu() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

fn best(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[0]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn frame_segments(dir: &Path) -> Vec<u32> {
    segments::list(dir, FileKind::FrameLog).unwrap()
}

/// Encodes every segment of the raw log at `level` in memory: (bytes, per-stream sizes).
/// With `strip`, every start is encoded without its recorded parent (version 2), as a log
/// written before parents existed holds it: the difference is what recording parents costs.
fn encode_all(
    dir: &Path,
    level: i32,
    measure: bool,
    strip: bool,
) -> (u64, [(u64, u64); STREAMS_WITH_PLOTS]) {
    let mut per_segment: std::collections::BTreeMap<u32, FramesEncoder> = Default::default();
    LogReader::open(dir)
        .unwrap()
        .read_available(|p, rec| {
            let enc = per_segment.entry(p.segment).or_insert_with(|| {
                let mut e = if strip {
                    FramesEncoder::new(level)
                } else {
                    FramesEncoder::with_parents(level)
                };
                if measure {
                    e.measure_streams();
                }
                e
            });
            let rec = if strip { rec.without_parent() } else { rec };
            enc.push(p.offset, &rec).unwrap();
        })
        .unwrap();
    let mut total = 0u64;
    let mut streams = [(0u64, 0u64); STREAMS_WITH_PLOTS];
    for (_, enc) in per_segment {
        let (file, sizes) = enc.finish_measured(0);
        if let Some(s) = sizes {
            for (a, b) in streams.iter_mut().zip(s) {
                a.0 += b.0;
                a.1 += b.1;
            }
        }
        total += file.len() as u64;
    }
    (total, streams)
}

fn bench_log(name: &str, src: &Path) {
    println!("== {name}: {}", src.display());
    let work = tempfile::tempdir().unwrap();
    let raw = work.path().join("raw");
    copy_log(src, &raw);
    // A recording writer compacts the segments it seals on a background thread, so a log the
    // stress example wrote may hold compact segments already: the raw floor must not read
    // them. Such a log is rebuilt all raw (`framelog recover` does it: its segments are
    // 256 MiB, so the small ones become one).
    let compact_already = frame_segments(&raw)
        .iter()
        .filter(|&&n| is_compact(&segments::segment_path(&raw, FileKind::FrameLog, n)))
        .count();
    if compact_already > 0 {
        let copied = work.path().join("copied");
        std::fs::rename(&raw, &copied).unwrap();
        framelog::recover::recover(&copied, &raw).unwrap();
        std::fs::remove_dir_all(&copied).unwrap();
        println!(
            "{compact_already} segment(s) were compact already (compacted by the recording writer): the raw log is that log rebuilt all raw by `recover`, {} segment(s)",
            frame_segments(&raw).len()
        );
    }
    let (records, frames, _) = read(&raw);
    let raw_bytes: u64 = frame_segments(&raw)
        .iter()
        .map(|&n| {
            std::fs::metadata(segments::segment_path(&raw, FileKind::FrameLog, n))
                .unwrap()
                .len()
        })
        .sum();
    println!(
        "{records} records, {frames} frames, raw frame log {raw_bytes} bytes = {:.1} B/frame",
        raw_bytes as f64 / frames as f64
    );

    // Sizes by level (every segment, the newest too, as if sealed).
    let levels: Vec<i32> = std::env::var("LEVELS")
        .map(|v| v.split(',').map(|l| l.parse().unwrap()).collect())
        .unwrap_or_else(|_| vec![-1, 1, 3, 6, 9]);
    for level in levels {
        let (bytes, _) = encode_all(&raw, level, false, false);
        let t = Instant::now();
        encode_all(&raw, level, false, false);
        let secs = t.elapsed().as_secs_f64();
        let (_, streams) = encode_all(&raw, level, level == 3, false);
        println!(
            "  zstd level {level:>3}: {bytes} bytes = {:.3} B/frame ({:.3} B/record); read + encode in memory {:.1} M frames/s",
            bytes as f64 / frames as f64,
            bytes as f64 / records as f64,
            frames as f64 / secs / 1e6
        );
        if level == 3 {
            let (without, _) = encode_all(&raw, level, false, true);
            println!(
                "      recorded parents cost {:+.3} B/frame ({without} bytes without them = {:.3} B/frame)",
                (bytes as f64 - without as f64) / frames as f64,
                without as f64 / frames as f64
            );
            for (i, (r, c)) in streams.iter().enumerate() {
                println!(
                    "      stream {:<10} raw {:>9} B, alone compressed {:>8} B = {:.3} B/frame",
                    STREAM_NAMES[i],
                    r,
                    c,
                    *c as f64 / frames as f64
                );
            }
        }
    }

    // Compaction on one core (this thread), against reading the raw log (the floor).
    let mut floor = Vec::new();
    let mut compaction = Vec::new();
    let mut cpu = Vec::new();
    let compact_dir = work.path().join("compact");
    for run in 0..RUNS {
        floor.push(read(&raw).2);
        let dir = work.path().join(format!("c{run}"));
        copy_log(&raw, &dir);
        // Seal the newest segment so that every segment is compacted.
        let last = *frame_segments(&dir).last().unwrap();
        std::fs::write(
            segments::segment_path(&dir, FileKind::FrameLog, last + 1),
            b"",
        )
        .unwrap();
        let t = Instant::now();
        let c0 = thread_cpu();
        for n in frame_segments(&dir) {
            compact_frames_segment(&dir, n, framelog::compact::DEFAULT_LEVEL).unwrap();
        }
        cpu.push(thread_cpu() - c0);
        compaction.push(t.elapsed().as_secs_f64());
        if run == 0 {
            std::fs::rename(&dir, &compact_dir).unwrap();
        } else {
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
    let compact_bytes: u64 = frame_segments(&compact_dir)
        .iter()
        .map(|&n| {
            std::fs::metadata(segments::segment_path(&compact_dir, FileKind::FrameLog, n))
                .unwrap()
                .len()
        })
        .sum();
    let (f, c, cpu) = (
        median(floor.clone()),
        median(compaction.clone()),
        median(cpu),
    );
    println!(
        "compaction CPU time on its one thread (median): {cpu:.3} s = {:.1} M frames/s ({:.1} M records/s)",
        frames as f64 / cpu / 1e6,
        records as f64 / cpu / 1e6
    );
    println!(
        "compaction (level {}, median of {RUNS}, wall time with fsyncs): {:.2} s = {:.1} M frames/s ({:.1} M records/s), file {compact_bytes} bytes = {:.3} B/frame; floor (raw LogReader read) {:.3} s = {:.1} M records/s; ratio {:.2}",
        framelog::compact::DEFAULT_LEVEL,
        c,
        frames as f64 / c / 1e6,
        records as f64 / c / 1e6,
        compact_bytes as f64 / frames as f64,
        f,
        records as f64 / f / 1e6,
        f / c
    );

    // Reading: compact against raw, interleaved. A small log is read several times per
    // sample (a sample takes at least 20 ms), so that one preemption on a shared machine does
    // not decide a sub-millisecond read; each pair's ratio is taken within the pair.
    let reps = (0.02 / read(&raw).2).ceil().clamp(1.0, 1000.0) as usize;
    let timed = |dir: &Path| {
        let t = Instant::now();
        for _ in 0..reps {
            let (r2, f2, _) = read(dir);
            assert_eq!((r2, f2), (records, frames));
        }
        t.elapsed().as_secs_f64() / reps as f64
    };
    let (mut raw_t, mut compact_t, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..READ_PAIRS {
        let r = timed(&raw);
        let c = timed(&compact_dir);
        raw_t.push(r);
        compact_t.push(c);
        ratios.push(c / r);
    }
    let (lo, hi) = (
        best(ratios.clone()),
        -best(ratios.iter().map(|r| -r).collect()),
    );
    let (rt, ct) = (best(raw_t), best(compact_t));
    println!(
        "read (best of {READ_PAIRS} samples of {reps} reads): raw {:.1} M records/s, compact {:.1} M records/s; compact/raw time {:.2}x (best to best); per pair median {:.2}x, range {lo:.2}-{hi:.2}x",
        records as f64 / rt / 1e6,
        records as f64 / ct / 1e6,
        ct / rt,
        median(ratios),
    );

    // zstd against lz4 on the same block bodies, and the decoding alone.
    let mut bodies = Vec::new();
    let mut zstd_bytes = 0;
    let mut lz4_bytes = 0;
    for n in frame_segments(&compact_dir) {
        let bytes =
            std::fs::read(segments::segment_path(&compact_dir, FileKind::FrameLog, n)).unwrap();
        if bytes.len() <= 16 {
            continue;
        }
        let version = u16::from_le_bytes([bytes[8], bytes[9]]);
        for (at, h) in locate_blocks(&bytes).blocks {
            let z = bytes[at as usize + BLOCK_HEADER_LEN..][..h.len as usize].to_vec();
            let body = zstd::bulk::decompress(&z, h.raw_len as usize).unwrap();
            let l = lz4_flex::compress(&body);
            zstd_bytes += z.len();
            lz4_bytes += l.len();
            bodies.push((h, z, l, body.len(), version));
        }
        let mut n2 = 0;
        decode_file(&bytes, |_| n2 += 1);
    }
    let mut zt = Vec::new();
    let mut lt = Vec::new();
    let mut dt = Vec::new();
    let mut dec = BlockDecoder::new();
    let mut zd = zstd::bulk::Decompressor::new().unwrap();
    let mut out = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        for (_, z, _, len, _) in &bodies {
            out.clear();
            out.reserve(*len);
            zd.decompress_to_buffer(&z[..], &mut out).unwrap();
        }
        zt.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        for (_, _, l, len, _) in &bodies {
            out.clear();
            out.resize(*len, 0);
            lz4_flex::decompress_into(l, &mut out).unwrap();
        }
        lt.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let mut k = 0u64;
        for (h, z, _, _, version) in &bodies {
            dec.set_version(*version);
            dec.decode(h, z).unwrap();
            dec.for_each(|_, _| k += 1);
        }
        assert_eq!(k, records);
        dt.push(t.elapsed().as_secs_f64());
    }
    let (zt, lt, dt) = (best(zt), best(lt), best(dt));
    println!(
        "blocks: zstd {zstd_bytes} B, lz4 {lz4_bytes} B ({:.3} B/frame); decompress zstd {:.2} ns/record, lz4 {:.2} ns/record; whole block decode (zstd + columns + records) {:.2} ns/record = {:.1} M records/s",
        lz4_bytes as f64 / frames as f64,
        zt * 1e9 / records as f64,
        lt * 1e9 / records as f64,
        dt * 1e9 / records as f64,
        records as f64 / dt / 1e6,
    );
}

fn main() {
    let mut logs: Vec<(String, PathBuf)> = Vec::new();
    for (var, name) in [("STRESS_LOG", "stress"), ("DEMO_LOG", "demo")] {
        if let Ok(dir) = std::env::var(var) {
            logs.push((name.to_owned(), PathBuf::from(dir)));
        }
    }
    let synthetic_dir = tempfile::tempdir().unwrap();
    if logs.is_empty() {
        synthetic(synthetic_dir.path(), 1_000_000);
        logs.push((
            "synthetic stress-like, 1 M frames".to_owned(),
            synthetic_dir.path().to_owned(),
        ));
    }
    for (name, dir) in &logs {
        bench_log(name, dir);
    }
}
