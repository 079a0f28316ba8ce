use std::time::{Duration, Instant};

use formats::{Category, FrameEnd, FrameStart, Record, ThreadInfo};

use crate::compact::{CompactOptions, SegmentOutcome, compact_log};
use crate::{LogReader, LogWriter, Position, WriterOptions};

/// Writes `frames` nested frames on three threads into a log with 64 KiB segments.
fn write_log(dir: &std::path::Path, frames: u32, compact: bool) -> LogWriter {
    write_log_in(dir, frames, compact, 64 << 10)
}

fn write_log_in(dir: &std::path::Path, frames: u32, compact: bool, segment: u64) -> LogWriter {
    let w = LogWriter::open_with(
        dir,
        WriterOptions {
            frames_segment_bytes: segment,
            compact,
            ..WriterOptions::default()
        },
    )
    .unwrap();
    let first = w.reserve_ids(frames).unwrap();
    let mut buf = Vec::new();
    let mut t = 1_700_000_000_000_000_000u64;
    for i in 0..frames {
        let id = first + i;
        let thread = i % 3 + 1;
        Record::ThreadInfo(ThreadInfo {
            worker: w.worker(),
            thread,
            timestamp: t,
            name: "worker",
        })
        .encode_to_vec(&mut buf);
        t += 1000 + u64::from(i % 7) * 13;
        Record::Start(FrameStart {
            parent: formats::Parent::NotRecorded,
            id,
            worker: w.worker(),
            timestamp: t,
            context: id - id % 4,
            category: Category(4),
            label: ["GET /users/:id", "db/query", "render"][(i % 3) as usize],
        })
        .encode_to_vec(&mut buf);
        t += 500;
        if i % 11 != 0 {
            Record::End(FrameEnd {
                id,
                worker: w.worker(),
                timestamp: t,
            })
            .encode_to_vec(&mut buf);
        }
        if buf.len() > 8000 {
            w.append_frames(&buf).unwrap();
            buf.clear();
        }
    }
    w.append_frames(&buf).unwrap();
    w
}

/// Every record with its position, re-encoded as v1 bytes.
fn read_all(dir: &std::path::Path) -> (Vec<(Position, Vec<u8>)>, Vec<crate::Damage>) {
    let mut r = LogReader::open(dir).unwrap();
    let mut out = Vec::new();
    r.read_available(|p, rec| {
        let mut b = Vec::new();
        rec.encode_to_vec(&mut b);
        out.push((p, b));
    })
    .unwrap();
    (out, r.take_damage())
}

fn compact_segments(dir: &std::path::Path) -> Vec<u32> {
    crate::segments::list(dir, formats::FileKind::FrameLog)
        .unwrap()
        .into_iter()
        .filter(|&n| {
            let p = crate::segments::segment_path(dir, formats::FileKind::FrameLog, n);
            crate::compact::frames::raw_len_of(&p).unwrap().is_some()
        })
        .collect()
}

#[test]
fn a_compacted_log_reads_the_same_records_at_the_same_positions() {
    let dir = tempfile::tempdir().unwrap();
    drop(write_log(dir.path(), 20_000, false));
    let (before, damage) = read_all(dir.path());
    assert!(damage.is_empty());
    let total_before = LogReader::open(dir.path()).unwrap().total_bytes().unwrap();
    let read_before = {
        let mut r = LogReader::open(dir.path()).unwrap();
        r.read_available(|_, _| {}).unwrap();
        r.bytes_read()
    };
    let segments = crate::segments::list(dir.path(), formats::FileKind::FrameLog).unwrap();
    assert!(segments.len() > 5, "{segments:?}");

    // Without --all the newest stays raw.
    let report = compact_log(dir.path(), &CompactOptions::default()).unwrap();
    let last = *segments.last().unwrap();
    assert!(
        report
            .segments
            .iter()
            .any(|s| s.1 == last && s.2 == SegmentOutcome::NotSealed)
    );
    assert_eq!(compact_segments(dir.path()).len(), segments.len() - 1);
    assert_eq!(read_all(dir.path()).0, before);

    let report = compact_log(
        dir.path(),
        &CompactOptions {
            all: true,
            ..CompactOptions::default()
        },
    )
    .unwrap();
    assert_eq!(report.sealed, vec![(formats::FileKind::FrameLog, last + 1)]);
    assert_eq!(compact_segments(dir.path()), segments);
    let (after, damage) = read_all(dir.path());
    assert!(damage.is_empty());
    assert_eq!(after, before);
    let check = crate::check::check_log(dir.path()).unwrap();
    assert!(!check.has_errors(), "{:?}", check.problems);
    assert_eq!(check.records, before.len() as u64);
    // Progress counts raw bytes: the same total, plus the new empty segment's header.
    let r = LogReader::open(dir.path()).unwrap();
    assert_eq!(r.total_bytes().unwrap(), total_before + 16);

    // Small reads, and opening at any record's position.
    let mut r = LogReader::open(dir.path()).unwrap();
    let mut small = Vec::new();
    loop {
        let n = r
            .read_some(1000, |p, rec| {
                let mut b = Vec::new();
                rec.encode_to_vec(&mut b);
                small.push((p, b));
            })
            .unwrap();
        if n == 0 {
            break;
        }
    }
    assert_eq!(small, before);
    assert_eq!(
        r.bytes_read(),
        read_before,
        "bytes_read counts as for the raw log"
    );
    for i in [0, 1, 777, 5000, 12_345, before.len() - 1] {
        let mut r = LogReader::open_at(dir.path(), before[i].0).unwrap();
        let mut got = Vec::new();
        r.read_available(|p, rec| {
            let mut b = Vec::new();
            rec.encode_to_vec(&mut b);
            got.push((p, b));
        })
        .unwrap();
        assert_eq!(got, before[i..], "opened at record {i}");
    }
    // Again: everything is compact already.
    let report = compact_log(dir.path(), &CompactOptions::default()).unwrap();
    assert!(report.segments.iter().all(|s| matches!(
        s.2,
        SegmentOutcome::AlreadyCompact | SegmentOutcome::NotSealed
    )));
}

#[test]
fn a_damaged_compact_block_costs_that_block_only_and_is_reported() {
    use formats::compact::frames::{TRAILER_LEN, Trailer, read_index};
    let dir = tempfile::tempdir().unwrap();
    drop(write_log(dir.path(), 20_000, false));
    let (before, _) = read_all(dir.path());
    compact_log(
        dir.path(),
        &CompactOptions {
            all: true,
            ..CompactOptions::default()
        },
    )
    .unwrap();
    let path = crate::segments::segment_path(dir.path(), formats::FileKind::FrameLog, 2);
    let mut bytes = std::fs::read(&path).unwrap();
    let t = Trailer::decode(&bytes, bytes.len() as u64).unwrap();
    let entries = read_index(
        &bytes[t.index_offset as usize..bytes.len() - TRAILER_LEN],
        t.index_offset,
    )
    .unwrap();
    let at = entries[0].offset as usize + 60;
    bytes[at] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let lost: Vec<_> = before
        .iter()
        .filter(|(p, _)| p.segment == 2)
        .cloned()
        .collect();
    let (after, damage) = read_all(dir.path());
    assert_eq!(damage.len(), 1, "{damage:?}");
    assert_eq!(damage[0].path, path);
    assert_eq!(damage[0].offset, entries[0].offset);
    assert!(damage[0].to_string().contains("CRC32C"), "{}", damage[0]);
    // Placed in time after the frames read before it (their newest start or end), not at
    // another record's time (a writer's announcement carries the wall clock).
    let frame_time = |b: &[u8]| match formats::decode_record(b) {
        Ok(formats::Decoded::Record(formats::Record::Start(s), _)) => s.timestamp,
        Ok(formats::Decoded::Record(formats::Record::End(e), _)) => e.timestamp,
        _ => 0,
    };
    let newest = before
        .iter()
        .filter(|(p, _)| p.segment < 2)
        .map(|(_, b)| frame_time(b))
        .max()
        .unwrap();
    assert!(newest > 0);
    assert_eq!(damage[0].newest_before, newest);
    // The segment holds one block here: all of its records, and nothing else, are lost.
    assert_eq!(entries.len(), 1);
    let expected: Vec<_> = before
        .iter()
        .filter(|r| !lost.contains(r))
        .cloned()
        .collect();
    assert_eq!(after, expected);
    let check = crate::check::check_log(dir.path()).unwrap();
    let errors: Vec<_> = check
        .problems
        .iter()
        .filter(|p| p.severity == crate::check::Severity::Error)
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        (errors[0].path.clone(), errors[0].offset),
        (path, entries[0].offset)
    );
    // A damaged compact file is already compact: compaction leaves it alone.
    let report = compact_log(dir.path(), &CompactOptions::default()).unwrap();
    assert!(
        report
            .segments
            .iter()
            .any(|s| s.1 == 2 && s.2 == SegmentOutcome::AlreadyCompact)
    );
}

#[test]
fn a_raw_segment_with_damage_or_a_torn_tail_stays_raw() {
    let dir = tempfile::tempdir().unwrap();
    // Small segments: packed batches put 3,000 frames in fewer than two of 64 KiB.
    drop(write_log_in(dir.path(), 3000, false, 8 << 10));
    let path = crate::segments::segment_path(dir.path(), formats::FileKind::FrameLog, 1);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let p2 = crate::segments::segment_path(dir.path(), formats::FileKind::FrameLog, 2);
    let b2 = std::fs::read(&p2).unwrap();
    std::fs::write(&p2, &b2[..b2.len() - 5]).unwrap();
    let report = compact_log(dir.path(), &CompactOptions::default()).unwrap();
    for n in [1, 2] {
        assert!(
            report
                .segments
                .iter()
                .any(|s| s.1 == n && matches!(s.2, SegmentOutcome::Damaged { .. })),
            "{report:?}"
        );
    }
    assert!(!compact_segments(dir.path()).contains(&1));
}

#[test]
fn a_writer_compacts_the_segments_it_seals_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let w = write_log(dir.path(), 20_000, true);
    let segments = crate::segments::list(dir.path(), formats::FileKind::FrameLog).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while compact_segments(dir.path()).len() < segments.len() - 1 {
        assert!(
            Instant::now() < deadline,
            "background compaction did not happen"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(w);
    let (after, damage) = read_all(dir.path());
    assert!(damage.is_empty());
    assert_eq!(after.len(), 20_000 * 3 - 20_000 / 11 - 1 + segments.len());
}

#[test]
fn a_reader_that_had_the_raw_segment_open_keeps_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    // Segments bigger than one read of the reader's.
    drop(write_log_in(dir.path(), 40_000, false, 1 << 20));
    let (before, _) = read_all(dir.path());
    let mut r = LogReader::open(dir.path()).unwrap();
    let mut got = Vec::new();
    let mut take = |p: Position, rec: Record<'_>| {
        let mut b = Vec::new();
        rec.encode_to_vec(&mut b);
        got.push((p, b));
    };
    // Part of segment 1, read from the raw file.
    r.read_some(1, &mut take).unwrap();
    assert_eq!(r.position().segment, 1);
    compact_log(
        dir.path(),
        &CompactOptions {
            all: true,
            ..CompactOptions::default()
        },
    )
    .unwrap();
    while r.read_some(1 << 20, &mut take).unwrap() > 0 {}
    assert!(r.take_damage().is_empty());
    assert_eq!(got, before);
}
