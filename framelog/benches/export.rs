//! `framelog export` throughput (Chrome JSON, Perfetto's protobuf in its two passes, and speedscope) on a 2 M-frame log, against reading the same
//! log with `LogReader` (the floor: an export must read every record) in the same run; once
//! with starts that record no parent (a log written before parents were recorded: nesting
//! inferred), once with each start naming its parent (type 6: placed by parent, Chrome flow
//! starts).
//!
//! `cargo bench -p framelog --bench export`

#![allow(missing_docs)]

use std::time::Instant;

use formats::{Category, FrameEnd, FrameStart, Record, ThreadInfo};
use framelog::export::chrome::ChromeTrace;
use framelog::export::perfetto::export_perfetto;
use framelog::export::speedscope::Speedscope;
use framelog::export::{ExportOptions, export};
use framelog::{LogReader, LogWriter};

const FRAMES: u32 = 2_000_000;

/// Requests of four frames (a root and three nested), on 4 threads, in 64 KiB-ish appends;
/// with `parents`, each start names its parent.
fn write_log(dir: &std::path::Path, parents: bool) {
    let w = LogWriter::open(dir).unwrap();
    let labels = [
        "GET /orders",
        "db: select",
        "template: orders",
        "cache: get",
    ];
    let mut buf = Vec::new();
    let mut t = 1_700_000_000_000_000_000u64;
    let mut id = 1u32;
    while id < FRAMES {
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
            for (depth, label) in labels.iter().enumerate() {
                let parent = match (parents, depth) {
                    (false, _) => formats::Parent::NotRecorded,
                    (true, 0) => formats::Parent::Root,
                    (true, d) => formats::Parent::Frame(root + d as u32 - 1),
                };
                Record::Start(FrameStart {
                    parent,
                    id: root + depth as u32,
                    worker: w.worker(),
                    timestamp: t + depth as u64 * 10,
                    context: root,
                    category: Category::HTTP,
                    label,
                })
                .encode_to_vec(&mut buf);
            }
            for depth in (0..4u32).rev() {
                Record::End(FrameEnd {
                    id: root + depth,
                    worker: w.worker(),
                    timestamp: t + 100 - u64::from(depth) * 10,
                })
                .encode_to_vec(&mut buf);
            }
            id += 4;
            t += 200;
        }
        w.append_frames(&buf).unwrap();
        buf.clear();
    }
}

fn main() {
    for parents in [false, true] {
        run(parents);
    }
}

fn run(parents: bool) {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), parents);
    let what = if parents {
        "parents recorded"
    } else {
        "no parents (inferred)"
    };
    let mut floor = Vec::new();
    let mut chrome = Vec::new();
    let mut speedscope = Vec::new();
    let mut perfetto = Vec::new();
    // To a file, as `framelog export -o FILE` writes (no fsync, as the CLI).
    let mut chrome_file = Vec::new();
    let mut perfetto_file = Vec::new();
    let out = dir.path().join("export.out");
    let (mut chrome_bytes, mut perfetto_bytes) = (0, 0);
    for _ in 0..3 {
        let t = Instant::now();
        let mut n = 0u64;
        LogReader::open(dir.path())
            .unwrap()
            .read_available(|_, r| n += u64::from(matches!(r, Record::Start(_))))
            .unwrap();
        floor.push(n as f64 / t.elapsed().as_secs_f64());

        let t = Instant::now();
        let mut sink = ChromeTrace::new(std::io::BufWriter::new(Counted::default())).unwrap();
        let s = export(dir.path(), &ExportOptions::default(), &mut sink).unwrap();
        assert_eq!(s.frames, n);
        assert_eq!(s.inferred_parents, if parents { 0 } else { n });
        chrome.push(s.frames as f64 / t.elapsed().as_secs_f64());
        chrome_bytes = sink.into_inner().into_inner().unwrap().0;

        let t = Instant::now();
        // As `framelog export --format perfetto` writes it: two passes, the sorter's points.
        let (s, trace) = export_perfetto(
            dir.path(),
            &ExportOptions::default(),
            std::io::BufWriter::new(Counted::default()),
        )
        .unwrap();
        assert_eq!(s.frames, n);
        assert!(trace.sort_points() > 0 && !trace.diverged());
        perfetto.push(s.frames as f64 / t.elapsed().as_secs_f64());
        perfetto_bytes = trace.into_inner().into_inner().unwrap().0;

        let t = Instant::now();
        let file = std::io::BufWriter::new(std::fs::File::create(&out).unwrap());
        let mut sink = ChromeTrace::new(file).unwrap();
        let s = export(dir.path(), &ExportOptions::default(), &mut sink).unwrap();
        drop(sink);
        chrome_file.push(s.frames as f64 / t.elapsed().as_secs_f64());
        std::fs::remove_file(&out).unwrap();

        let t = Instant::now();
        let file = std::io::BufWriter::new(std::fs::File::create(&out).unwrap());
        let (s, trace) = export_perfetto(dir.path(), &ExportOptions::default(), file).unwrap();
        drop(trace);
        perfetto_file.push(s.frames as f64 / t.elapsed().as_secs_f64());
        std::fs::remove_file(&out).unwrap();

        let t = Instant::now();
        let mut sink = Speedscope::new(std::io::BufWriter::new(std::io::sink()));
        let s = export(dir.path(), &ExportOptions::default(), &mut sink).unwrap();
        assert_eq!(s.frames, n);
        speedscope.push(s.frames as f64 / t.elapsed().as_secs_f64());
    }
    speedscope.sort_by(f64::total_cmp);
    floor.sort_by(f64::total_cmp);
    chrome.sort_by(f64::total_cmp);
    perfetto.sort_by(f64::total_cmp);
    chrome_file.sort_by(f64::total_cmp);
    perfetto_file.sort_by(f64::total_cmp);
    let runs = |v: &[f64]| {
        v.iter()
            .map(|r| (r / 1e4).round() / 100.0)
            .collect::<Vec<_>>()
    };
    println!(
        "[{what}] export chrome: {:.2} M frames/s (median of 3: {:?}); floor (LogReader over the same log): {:.1} M frames/s; ratio {:.3}",
        chrome[1] / 1e6,
        runs(&chrome),
        floor[1] / 1e6,
        chrome[1] / floor[1]
    );
    println!(
        "[{what}] export perfetto: {:.2} M frames/s (median of 3: {:?}); ratio to the floor {:.3}, to chrome {:.2}; {} bytes ({:.1} a frame) against chrome's {} ({:.1} a frame): {:.3}",
        perfetto[1] / 1e6,
        runs(&perfetto),
        perfetto[1] / floor[1],
        perfetto[1] / chrome[1],
        perfetto_bytes,
        perfetto_bytes as f64 / FRAMES as f64,
        chrome_bytes,
        chrome_bytes as f64 / FRAMES as f64,
        perfetto_bytes as f64 / chrome_bytes as f64
    );
    println!(
        "[{what}] to a file: chrome {:.2} M frames/s ({:?}), perfetto {:.2} M frames/s ({:?}): {:.2}× chrome",
        chrome_file[1] / 1e6,
        runs(&chrome_file),
        perfetto_file[1] / 1e6,
        runs(&perfetto_file),
        perfetto_file[1] / chrome_file[1]
    );
    println!(
        "[{what}] export speedscope: {:.2} M frames/s (median of 3: {:?}); ratio to the floor {:.3}",
        speedscope[1] / 1e6,
        runs(&speedscope),
        speedscope[1] / floor[1]
    );
}

/// Discards what is written, counting the bytes.
#[derive(Debug, Default)]
struct Counted(u64);

impl std::io::Write for Counted {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0 += b.len() as u64;
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
