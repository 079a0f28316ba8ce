//! A log with compact segments (`tests/fixtures/compact-log`, checked in: written and compacted
//! by [`write_fixture`], run by hand with the `compact` feature) read by every reader.
//!
//! With the `compact` feature, they read all of it. Without it (the build a program that
//! records through `framelog-stopwatch` links by default), each one refuses it with
//! [`Error::CompactUnsupported`] naming the compact file: no panic, no compact bytes read as
//! raw ones, no compact segment passed over. `cargo test -p framelog --no-default-features
//! --lib` runs those tests (CI does, in `.ci/run`).

use std::path::{Path, PathBuf};

use formats::{FileHeader, FileKind, Record};

use crate::{DataStore, LogReader, segments};

/// Frames 1..=20 are in the compact segments (frame log and data), 21..=25 in the raw ones
/// written after the compaction.
const COMPACTED: u32 = 20;
const FRAMES: u32 = 25;

fn label(id: u32) -> String {
    format!("fixture/{id}")
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compact-log")
}

/// A copy of the fixture log in a new temporary directory (readers and writers may change it).
fn copy_fixture() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixture_dir()).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), tmp.path().join(entry.file_name())).unwrap();
    }
    tmp
}

/// Whether segment `n` of `kind` in `dir` is compact (by its header alone).
fn is_compact(dir: &Path, kind: FileKind, n: u32) -> bool {
    let bytes = std::fs::read(segments::segment_path(dir, kind, n)).unwrap();
    FileHeader::decode_any(kind, &bytes)
        .unwrap()
        .unwrap()
        .is_compact()
}

#[test]
fn the_fixture_has_compact_and_raw_segments() {
    let tmp = copy_fixture();
    let dir = tmp.path();
    assert_eq!(segments::list(dir, FileKind::FrameLog).unwrap(), [1, 2]);
    assert_eq!(segments::list(dir, FileKind::FrameData).unwrap(), [1, 2]);
    assert!(is_compact(dir, FileKind::FrameLog, 1));
    assert!(is_compact(dir, FileKind::FrameData, 1));
    assert!(!is_compact(dir, FileKind::FrameLog, 2));
    assert!(!is_compact(dir, FileKind::FrameData, 2));
}

/// Writes the fixture log into `tests/fixtures/compact-log` (replacing it): frames with data,
/// the sealed segments compacted, then more frames in the raw newest segments.
///
/// `cargo test -p framelog --lib compact_fixture::write_fixture -- --ignored`
#[cfg(feature = "compact")]
#[test]
#[ignore = "writes the checked-in fixture"]
fn write_fixture() {
    use crate::{DataBatch, LogWriter, WriterOptions};
    use formats::{Category, FrameEnd, FrameKey, FrameStart, Parent};

    let dir = fixture_dir();
    let _ = std::fs::remove_dir_all(&dir);
    let write = |ids: std::ops::RangeInclusive<u32>| {
        let w = LogWriter::open_with(
            &dir,
            WriterOptions {
                worker: Some(0),
                process_name: Some("fixture".into()),
                pid: Some(1),
                compact: false,
                ..WriterOptions::default()
            },
        )
        .unwrap();
        let mut records = Vec::new();
        let mut data = DataBatch::new();
        for id in ids {
            let t = 1_700_000_000_000_000_000 + u64::from(id) * 1_000;
            let label = label(id);
            Record::Start(FrameStart {
                id,
                worker: 0,
                timestamp: t,
                context: 1,
                category: Category::FUNCTION,
                label: &label,
                parent: Parent::Root,
            })
            .encode_to_vec(&mut records);
            Record::End(FrameEnd {
                id,
                worker: 0,
                timestamp: t + 500,
            })
            .encode_to_vec(&mut records);
            let doc = formats::to_document(&serde_json::json!({ "id": id })).unwrap();
            data.push(FrameKey::new(0, id), &doc);
        }
        w.append_frames(&records).unwrap();
        w.append_data(&data).unwrap();
    };
    write(1..=COMPACTED);
    let report = crate::compact::compact_log(
        &dir,
        &crate::compact::CompactOptions {
            all: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(report.sealed.len(), 2, "{report:?}");
    write(COMPACTED + 1..=FRAMES);
}

/// With the feature: the fixture reads back whole (so it stays a valid compact log).
#[cfg(feature = "compact")]
#[test]
fn with_the_feature_every_reader_reads_the_fixture() {
    let tmp = copy_fixture();
    let dir = tmp.path();
    let mut labels = Vec::new();
    let mut reader = LogReader::open(dir).unwrap();
    reader
        .read_available(|_, rec| {
            if let Record::Start(s) = rec {
                labels.push(s.label.to_owned());
            }
        })
        .unwrap();
    assert_eq!(labels, (1..=FRAMES).map(label).collect::<Vec<_>>());
    assert!(reader.take_damage().is_empty());
    let mut store = DataStore::open(dir).unwrap();
    for id in 1..=FRAMES {
        let doc = store.get(formats::FrameKey::new(0, id)).unwrap().unwrap();
        let got = doc
            .get("id")
            .and_then(|v| v.as_i64().or(v.as_i32().map(i64::from)));
        assert_eq!(got, Some(i64::from(id)), "{doc}");
    }
    let report = crate::check::check_log(dir).unwrap();
    assert!(!report.has_errors(), "{:?}", report.problems);
    let out = tempfile::tempdir().unwrap();
    let recovered = crate::recover::recover(dir, &out.path().join("copy")).unwrap();
    assert_eq!(recovered.data_entries, u64::from(FRAMES));
    assert!(recovered.skipped.is_empty());
    crate::retention::segment_files(dir).unwrap();
}

/// Without the feature: the error a reader returned, checked to be the refusal of `file`.
#[cfg(not(feature = "compact"))]
#[track_caller]
fn assert_refused<T>(result: crate::Result<T>, dir: &Path, file: &str) {
    let Err(err) = result else {
        panic!("{file}: not refused");
    };
    let shown = err.to_string();
    match err {
        crate::Error::CompactUnsupported { path, version } => {
            assert_eq!(path, dir.join(file));
            assert!(version == 2 || version == 4, "version {version}");
        }
        other => panic!("not the refusal: {other:?}"),
    }
    assert!(shown.contains(file), "names the file: {shown}");
    assert!(
        shown.contains("compact segments") && shown.contains("without its `compact` feature"),
        "says why: {shown}"
    );
}

#[cfg(not(feature = "compact"))]
#[test]
fn without_the_feature_every_reader_refuses_a_compact_segment() {
    let tmp = copy_fixture();
    let dir = tmp.path();
    let frames = "frames-000001.framelog";

    // The reader (and so `stats`, `dump`, `export`, viewers): nothing delivered from the
    // compact segment, then the refusal; asked again, the same refusal (never a skip).
    let mut reader = LogReader::open(dir).unwrap();
    let mut delivered = 0;
    assert_refused(reader.read_available(|_, _| delivered += 1), dir, frames);
    assert_refused(reader.read_available(|_, _| delivered += 1), dir, frames);
    assert_eq!(delivered, 0);
    assert!(
        reader.take_damage().is_empty(),
        "refused, not reported as damage"
    );
    assert!(reader.total_bytes().unwrap() > 0);

    // Following a live log from its start: the same.
    let mut reader = LogReader::open(dir).unwrap();
    reader
        .wait_for_growth(std::time::Duration::from_millis(1))
        .unwrap();
    assert_refused(reader.read_some(1 << 20, |_, _| {}), dir, frames);

    // The raw segments after it still read.
    let mut labels = Vec::new();
    let mut reader = LogReader::open_at(
        dir,
        crate::Position {
            segment: 2,
            offset: 0,
        },
    )
    .unwrap();
    reader
        .read_available(|_, rec| {
            if let Record::Start(s) = rec {
                labels.push(s.label.to_owned());
            }
        })
        .unwrap();
    assert_eq!(
        labels,
        (COMPACTED + 1..=FRAMES).map(label).collect::<Vec<_>>()
    );

    // Frame data, check, recover, retention.
    assert_refused(DataStore::open(dir), dir, "data-000001.framedata");
    assert_refused(crate::check::check_log(dir), dir, frames);
    let out = tempfile::tempdir().unwrap();
    assert_refused(
        crate::recover::recover(dir, &out.path().join("copy")),
        dir,
        frames,
    );
    assert_refused(crate::retention::segment_files(dir), dir, frames);
    let keep_nothing = crate::Retention {
        max_bytes: Some(0),
        max_age: None,
    };
    assert_refused(crate::retention::prune(dir, &keep_nothing), dir, frames);
    assert!(
        is_compact(dir, FileKind::FrameLog, 1),
        "retention deleted nothing"
    );

    // A writer appends to the raw newest segment: it never reads the sealed ones.
    let w = crate::LogWriter::open(dir).unwrap();
    let mut end = Vec::new();
    Record::End(formats::FrameEnd {
        id: 1,
        worker: w.worker(),
        timestamp: 1,
    })
    .encode_to_vec(&mut end);
    w.append_frames(&end).unwrap();
    drop(w);
    let mut ends = 0;
    LogReader::open_at(
        dir,
        crate::Position {
            segment: 2,
            offset: 0,
        },
    )
    .unwrap()
    .read_available(|_, rec| ends += u32::from(matches!(rec, Record::End(_))))
    .unwrap();
    assert_eq!(ends, FRAMES - COMPACTED + 1);
}

#[cfg(not(feature = "compact"))]
#[test]
fn without_the_feature_the_writer_leaves_sealed_segments_raw() {
    use crate::{LogWriter, WriterOptions};
    assert!(!WriterOptions::default().compact, "off by default");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Asked for anyway: no effect.
    let w = LogWriter::open_with(
        dir,
        WriterOptions {
            frames_segment_bytes: 4 << 10,
            compact: true,
            ..WriterOptions::default()
        },
    )
    .unwrap();
    let mut records = Vec::new();
    for id in 1..=20_000u32 {
        Record::End(formats::FrameEnd {
            id,
            worker: w.worker(),
            timestamp: u64::from(id),
        })
        .encode_to_vec(&mut records);
        if records.len() > 1 << 10 {
            w.append_frames(&records).unwrap();
            records.clear();
        }
    }
    w.append_frames(&records).unwrap();
    drop(w);
    let numbers = segments::list(dir, FileKind::FrameLog).unwrap();
    assert!(numbers.len() > 3, "segments sealed: {numbers:?}");
    for n in numbers {
        assert!(!is_compact(dir, FileKind::FrameLog, n), "segment {n} raw");
    }
    let mut ends = 0;
    LogReader::open(dir)
        .unwrap()
        .read_available(|_, rec| ends += u32::from(matches!(rec, Record::End(_))))
        .unwrap();
    assert_eq!(ends, 20_000);
}
