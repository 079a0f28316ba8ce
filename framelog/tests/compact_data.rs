//! Compact data segments (version 2) on real logs: identical data for every key before and
//! after compaction, damage costing one block, damaged indexes reported, crash leftovers and
//! the refresh race.

mod common;

use std::path::{Path, PathBuf};

use formats::compact::data::{DataFile, TRAILER_LEN};
use formats::{FileHeader, FileKind, FrameKey};
use framelog::check::{Severity, check_log};
use framelog::compact::SegmentOutcome;
use framelog::compact::data::compact_data_segment;
use framelog::{DataBatch, DataStore, LogWriter, WriterOptions, segments};

/// Writes a log with two workers whose data spans several 160 KiB data segments: SQL-like
/// documents, some keys updated two or three times (later, in other appends), ids across
/// the u32 wrap. Returns every key with data.
fn write_log(dir: &Path) -> Vec<FrameKey> {
    let opts = || WriterOptions {
        data_segment_bytes: 160 << 10,
        // These tests compact by hand: no background compaction by the writers.
        compact: false,
        ..WriterOptions::default()
    };
    let writers = [
        LogWriter::open_with(dir, opts()).unwrap(),
        LogWriter::open_with(dir, opts()).unwrap(),
    ];
    let mut keys = Vec::new();
    for round in 0..ROUNDS {
        for w in &writers {
            common::write_with_data(w, 1 + round * 50, 50);
            let mut batch = DataBatch::new();
            for i in 0..20u32 {
                // Ids near u32::MAX and past the wrap, then updates of earlier frames.
                let id = (u32::MAX - 200).wrapping_add(round * 20 + i);
                let key = FrameKey::new(w.worker(), id.max(1));
                let doc = formats::to_document(&serde_json::json!({
                    "sql": format!("SELECT * FROM orders WHERE customer_id = {} AND status = 'open'", id % 97),
                    "rows": i,
                    "round": round,
                }))
                .unwrap();
                batch.push(key, &doc);
                keys.push(key);
            }
            if round > 0 {
                let updated = FrameKey::new(w.worker(), 1 + (round - 1) * 50);
                let doc =
                    formats::to_document(&serde_json::json!({"n": "updated", "round": round}))
                        .unwrap();
                batch.push(updated, &doc);
            }
            w.append_data(&batch).unwrap();
        }
    }
    for w in &writers {
        keys.extend((1..=ROUNDS * 50).map(|id| FrameKey::new(w.worker(), id)));
    }
    keys.sort();
    keys.dedup();
    keys
}

const ROUNDS: u32 = 100;

type Snapshot = Vec<(FrameKey, Vec<Vec<u8>>)>;

fn snapshot(store: &mut DataStore, keys: &[FrameKey]) -> Snapshot {
    keys.iter()
        .map(|&k| (k, store.raw_entries(k).unwrap()))
        .collect()
}

/// Compares snapshots without printing them whole (they are large).
fn same(got: &Snapshot, expected: &Snapshot) {
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(expected) {
        assert!(
            g == e,
            "data of {} differs: {} vs {} entries",
            e.0,
            g.1.len(),
            e.1.len()
        );
    }
}

fn data_segments(dir: &Path) -> Vec<u32> {
    segments::list(dir, FileKind::FrameData).unwrap()
}

fn data_path(dir: &Path, n: u32) -> PathBuf {
    segments::segment_path(dir, FileKind::FrameData, n)
}

fn is_compact(path: &Path) -> bool {
    let bytes = std::fs::read(path).unwrap();
    FileHeader::decode_any(FileKind::FrameData, &bytes)
        .unwrap()
        .unwrap()
        .is_compact()
}

/// Compacts every data segment; returns how many were compacted.
fn compact_all(dir: &Path) -> usize {
    let mut compacted = 0;
    let all = data_segments(dir);
    for &n in &all {
        match compact_data_segment(dir, n, 3).unwrap() {
            SegmentOutcome::Compacted { items, .. } => {
                assert!(items > 0);
                compacted += 1;
            }
            SegmentOutcome::NotSealed => assert_eq!(Some(&n), all.last()),
            other => panic!("segment {n}: {other:?}"),
        }
    }
    compacted
}

#[test]
fn every_key_reads_the_same_before_and_after_compaction() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let keys = write_log(dir);
    // The debugger moves a store to its loader thread.
    fn send<T: Send>() {}
    send::<DataStore>();
    let mut before = DataStore::open(dir).unwrap();
    let expected = snapshot(&mut before, &keys);
    assert!(expected.iter().all(|(_, e)| !e.is_empty()));
    assert!(
        expected.iter().any(|(_, e)| e.len() > 1),
        "some keys have several entries"
    );
    let raw_bytes: u64 = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();

    let segs = data_segments(dir);
    assert!(segs.len() >= 4, "several data segments: {segs:?}");
    assert_eq!(compact_all(dir), segs.len() - 1);
    for &n in &segs[..segs.len() - 1] {
        assert!(is_compact(&data_path(dir, n)));
        assert!(!segments::exists(dir, FileKind::FrameIndex, n));
    }
    let after_bytes: u64 = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(after_bytes * 2 < raw_bytes, "{after_bytes} vs {raw_bytes}");

    // A new store reads the compact files; the one that indexed the raw files keeps them.
    let mut after = DataStore::open(dir).unwrap();
    assert_eq!(after.len(), before.len());
    same(&snapshot(&mut after, &keys), &expected);
    same(&snapshot(&mut before, &keys), &expected);
    before.refresh().unwrap();
    same(&snapshot(&mut before, &keys), &expected);
    for &k in keys.iter().step_by(97) {
        assert_eq!(
            after.get(k).unwrap(),
            DataStore::open(dir).unwrap().get(k).unwrap()
        );
    }
    assert!(after.take_damage().is_empty());
    assert!(!after.contains(FrameKey::new(0, 999_999)));

    let report = check_log(dir).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.data_entries, report.index_entries);
    assert!(report.data_entries >= expected.iter().map(|(_, e)| e.len() as u64).sum());

    // Again: nothing to do.
    for &n in &segs[..segs.len() - 1] {
        assert_eq!(
            compact_data_segment(dir, n, 3).unwrap(),
            SegmentOutcome::AlreadyCompact
        );
    }
    assert_eq!(
        compact_data_segment(dir, 999, 3).unwrap(),
        SegmentOutcome::Gone
    );

    // Recovery copies every entry of the compact segments.
    let out = tmp.path().with_extension("recovered");
    let rec = framelog::recover::recover(dir, &out).unwrap();
    assert!(rec.skipped.is_empty(), "{:?}", rec.skipped);
    let mut recovered = DataStore::open(&out).unwrap();
    same(&snapshot(&mut recovered, &keys), &expected);
    std::fs::remove_dir_all(&out).unwrap();

    // The CLI's `data` command reads a frame of a compact segment.
    let key = keys[keys.len() / 3];
    let shown = std::process::Command::new(env!("CARGO_BIN_EXE_framelog"))
        .args(["data", dir.to_str().unwrap(), &key.to_string()])
        .output()
        .unwrap();
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let doc = DataStore::open(dir).unwrap().get(key).unwrap().unwrap();
    assert_eq!(json.as_object().unwrap().len(), doc.len());
}

#[test]
fn a_damaged_block_costs_its_entries_only_and_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let keys = write_log(dir);
    let expected = snapshot(&mut DataStore::open(dir).unwrap(), &keys);
    compact_all(dir);
    let path = data_path(dir, 1);
    let mut bytes = std::fs::read(&path).unwrap();
    let file = DataFile::parse(&bytes).unwrap();
    let blocks = file.index.blocks.clone();
    assert!(blocks.len() >= 2, "{blocks:?}");
    let in_block: Vec<FrameKey> = file
        .index
        .entries
        .iter()
        .filter(|e| e.block == 0)
        .map(|e| e.key)
        .collect();
    let mid = (blocks[0] + blocks[1]) / 2;
    bytes[mid as usize] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();

    let mut store = DataStore::open(dir).unwrap();
    let mut lost = 0;
    for (k, entries) in &expected {
        match store.raw_entries(*k) {
            Ok(got) => assert_eq!(&got, entries, "{k}"),
            Err(e) => {
                assert!(in_block.contains(k), "{k} is not in the damaged block: {e}");
                let msg = e.to_string();
                assert!(
                    msg.contains("data-000001.framedata") && msg.contains("block 0"),
                    "{msg}"
                );
                lost += 1;
            }
        }
    }
    assert!(lost > 0);
    let damage = store.take_damage();
    assert_eq!(damage.len(), 1, "{damage:?}");
    assert_eq!(
        (damage[0].offset, damage[0].len),
        (blocks[0], blocks[1] - blocks[0])
    );
    assert!(damage[0].path.ends_with("data-000001.framedata"));
    assert!(store.take_damage().is_empty(), "reported once");

    let report = check_log(dir).unwrap();
    let errors: Vec<_> = report
        .problems
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].path.ends_with("data-000001.framedata"));
    assert!(errors[0].offset >= blocks[0] && errors[0].offset < blocks[1]);

    let out = tmp.path().with_extension("recovered");
    let rec = framelog::recover::recover(dir, &out).unwrap();
    assert_eq!(rec.skipped.len(), 1, "{:?}", rec.skipped);
    assert_eq!(rec.skipped[0].offset, blocks[0]);
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_damaged_index_or_trailer_costs_the_file_and_is_reported_never_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let keys = write_log(dir);
    let expected = snapshot(&mut DataStore::open(dir).unwrap(), &keys);
    compact_all(dir);
    let path = data_path(dir, 2);
    let good = std::fs::read(&path).unwrap();
    let index_at = DataFile::parse(&good).unwrap().trailer.index_offset as usize;
    let in_file: Vec<FrameKey> = DataFile::parse(&good)
        .unwrap()
        .index
        .entries
        .iter()
        .map(|e| e.key)
        .collect();
    for at in [
        good.len() - TRAILER_LEN + 3,
        good.len() - 2,
        index_at + 2,
        index_at + 40,
    ] {
        let mut bytes = good.clone();
        bytes[at] ^= 0x01;
        std::fs::write(&path, &bytes).unwrap();
        let mut store = DataStore::open(dir).unwrap();
        let damage = store.take_damage();
        assert_eq!(damage.len(), 1, "byte {at}: {damage:?}");
        assert_eq!((damage[0].offset, damage[0].len), (0, good.len() as u64));
        for (k, entries) in &expected {
            let got = store.raw_entries(*k).unwrap();
            if got.len() != entries.len() {
                // Only entries of the damaged file are missing.
                assert!(in_file.contains(k), "{k}");
            } else {
                assert_eq!(&got, entries);
            }
        }
        let report = check_log(dir).unwrap();
        assert!(report.has_errors());
        assert!(report.problems.iter().any(|p| p.path == path));
    }
    // Any single flipped byte, anywhere in the file: no panic in the store or the checker.
    for at in (0..good.len()).step_by(good.len() / 150 + 1) {
        let mut bytes = good.clone();
        bytes[at] ^= 0x5a;
        std::fs::write(&path, &bytes).unwrap();
        let mut store = DataStore::open(dir).unwrap();
        for &k in &in_file {
            let _ = store.get(k);
        }
        let _ = check_log(dir).unwrap();
        // A cut file too.
        std::fs::write(&path, &good[..at]).unwrap();
        let mut store = DataStore::open(dir).unwrap();
        for &k in in_file.iter().step_by(7) {
            let _ = store.get(k);
        }
    }
}

#[test]
fn a_leftover_index_is_ignored_then_deleted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let keys = write_log(dir);
    let expected = snapshot(&mut DataStore::open(dir).unwrap(), &keys);
    let idx = segments::segment_path(dir, FileKind::FrameIndex, 1);
    let idx_bytes = std::fs::read(&idx).unwrap();
    compact_all(dir);
    // A crash between the rename and the index's deletion leaves this.
    std::fs::write(&idx, &idx_bytes).unwrap();
    let mut store = DataStore::open(dir).unwrap();
    same(&snapshot(&mut store, &keys), &expected);
    assert!(store.take_damage().is_empty());
    let report = check_log(dir).unwrap();
    assert!(!report.has_errors(), "{:?}", report.problems);
    assert!(report.problems.iter().any(|p| p.path == idx));
    assert_eq!(
        compact_data_segment(dir, 1, 3).unwrap(),
        SegmentOutcome::AlreadyCompact
    );
    assert!(!idx.exists());
}

#[test]
fn a_refresh_that_finds_the_index_gone_reads_the_compact_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let keys = write_log(dir);
    let expected = snapshot(&mut DataStore::open(dir).unwrap(), &keys);
    // The store opens segment 1's raw data file while its index is not there...
    let idx = segments::segment_path(dir, FileKind::FrameIndex, 1);
    let aside = dir.join("aside");
    std::fs::rename(&idx, &aside).unwrap();
    let mut store = DataStore::open(dir).unwrap();
    let partial = store.len();
    // ...then compaction replaces the data file and deletes the index.
    std::fs::rename(&aside, &idx).unwrap();
    compact_all(dir);
    assert!(!idx.exists() && is_compact(&data_path(dir, 1)));
    let added = store.refresh().unwrap();
    assert!(added > 0);
    assert_eq!(store.len(), partial + added);
    same(&snapshot(&mut store, &keys), &expected);
    assert!(store.take_damage().is_empty());
}

#[test]
fn damaged_or_unsealed_segments_stay_raw() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_log(dir);
    let segs = data_segments(dir);
    let last = *segs.last().unwrap();
    assert_eq!(
        compact_data_segment(dir, last, 3).unwrap(),
        SegmentOutcome::NotSealed
    );
    // A flipped byte inside a data batch of segment 1.
    let path = data_path(dir, 1);
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    match compact_data_segment(dir, 1, 3).unwrap() {
        SegmentOutcome::Damaged { bytes, places } => assert!(bytes > 0 && places > 0),
        other => panic!("{other:?}"),
    }
    assert!(!is_compact(&path));
    assert!(segments::exists(dir, FileKind::FrameIndex, 1));
    // A torn tail (a partial batch at the end of a sealed segment) too.
    let path = data_path(dir, 2);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_within(16..40);
    std::fs::write(&path, &bytes).unwrap();
    assert!(matches!(
        compact_data_segment(dir, 2, 3).unwrap(),
        SegmentOutcome::Damaged { .. }
    ));
    assert!(!is_compact(&path));
    // No temporary file is left behind by the attempts.
    let tmp_files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(tmp_files.is_empty(), "{tmp_files:?}");
}

#[test]
fn two_compactions_of_one_segment_at_once_take_turns() {
    // Two threads of one process share the temporary file's name: the data file's lock
    // must keep them apart (a writer's background compactor and `framelog compact`).
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let keys = write_log(dir);
    let expected = snapshot(&mut DataStore::open(dir).unwrap(), &keys);
    let segs = data_segments(dir);
    for &n in &segs[..segs.len() - 1] {
        let outcomes: Vec<SegmentOutcome> = std::thread::scope(|s| {
            let a = s.spawn(|| compact_data_segment(dir, n, 3).unwrap());
            let b = s.spawn(|| compact_data_segment(dir, n, 3).unwrap());
            vec![a.join().unwrap(), b.join().unwrap()]
        });
        let done = outcomes
            .iter()
            .filter(|o| matches!(o, SegmentOutcome::Compacted { .. }))
            .count();
        assert_eq!(done, 1, "{outcomes:?}");
        assert!(outcomes.contains(&SegmentOutcome::AlreadyCompact));
    }
    same(
        &snapshot(&mut DataStore::open(dir).unwrap(), &keys),
        &expected,
    );
    let report = check_log(dir).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn an_older_unframed_pair_is_compacted_too() {
    // Written by hand as writers before batch framing did: no FLAG_BATCHES, no markers.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut data = FileHeader::new(FileKind::FrameData).encode().to_vec();
    let mut idx = FileHeader::new(FileKind::FrameIndex).encode().to_vec();
    let mut keys = Vec::new();
    for id in 1..=300u32 {
        let key = FrameKey::new((id % 2) as u8, id / 2 + 1);
        let doc =
            formats::to_document(&serde_json::json!({"sql": format!("SELECT {id}")})).unwrap();
        let seek = data.len() as u32;
        formats::encode_data_entry(&mut data, key, &doc);
        idx.extend_from_slice(&formats::IndexEntry { key, seek }.encode());
        keys.push(key);
    }
    keys.sort();
    keys.dedup();
    std::fs::write(data_path(dir, 1), &data).unwrap();
    std::fs::write(segments::segment_path(dir, FileKind::FrameIndex, 1), &idx).unwrap();
    std::fs::File::create(data_path(dir, 2)).unwrap();
    let expected = snapshot(&mut DataStore::open(dir).unwrap(), &keys);
    assert!(matches!(
        compact_data_segment(dir, 1, 3).unwrap(),
        SegmentOutcome::Compacted { items: 300, .. }
    ));
    same(
        &snapshot(&mut DataStore::open(dir).unwrap(), &keys),
        &expected,
    );
}

mod random_logs {
    use super::*;
    use proptest::prelude::*;

    /// One append: (worker slot, key ids, document sizes).
    type Append = (usize, Vec<(u32, usize)>);

    fn appends() -> impl Strategy<Value = Vec<Append>> {
        proptest::collection::vec(
            (
                0usize..3,
                proptest::collection::vec((any::<u32>(), 0usize..3000), 1..40),
            ),
            1..30,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(12))]

        /// Random logs (several workers, updates of earlier keys, ids anywhere incl. near the
        /// wrap, documents from tiny to larger than a batch) read the same before and after
        /// compacting every sealed data segment, and check clean.
        #[test]
        fn random_logs_read_the_same_after_compaction(appends in appends(), segment_kib in 8u64..64) {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path();
            let writers: Vec<LogWriter> = (0..3)
                .map(|_| {
                    LogWriter::open_with(dir, WriterOptions {
                        data_segment_bytes: segment_kib << 10,
                        compact: false,
                        ..WriterOptions::default()
                    })
                    .unwrap()
                })
                .collect();
            let mut keys = Vec::new();
            for (w, entries) in &appends {
                let w = &writers[*w];
                let mut batch = DataBatch::new();
                for &(id, size) in entries {
                    // A few ids reused (updates), the rest anywhere in u32 (never 0).
                    let id = if id % 5 == 0 { 1 + id % 7 } else { id.max(1) };
                    let key = FrameKey::new(w.worker(), id);
                    let doc = formats::to_document(&serde_json::json!({
                        "id": id, "text": "q".repeat(size), "n": size,
                    }))
                    .unwrap();
                    batch.push(key, &doc);
                    keys.push(key);
                }
                w.append_data(&batch).unwrap();
            }
            keys.sort();
            keys.dedup();
            let expected = snapshot(&mut DataStore::open(dir).unwrap(), &keys);
            compact_all(dir);
            let mut after = DataStore::open(dir).unwrap();
            prop_assert_eq!(snapshot(&mut after, &keys), expected);
            let report = check_log(dir).unwrap();
            prop_assert!(report.problems.is_empty(), "{:?}", report.problems);
        }
    }
}

/// The store keeps per batch (per compact block) the range of ids it holds, and the ids far
/// from the rest exactly: data written long after its frame started (here 30,000 frames
/// later, past the range a batch keeps) reads back merged in file order, raw and compacted,
/// as do frames whose data is in neither.
#[test]
fn data_written_long_after_its_frame_reads_back_raw_and_compacted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let w = LogWriter::open_with(
        dir,
        WriterOptions {
            data_segment_bytes: 256 << 10,
            compact: false,
            ..WriterOptions::default()
        },
    )
    .unwrap();
    let first = w.reserve_ids(60_000).unwrap();
    let worker = w.worker();
    let key = |i: u32| FrameKey::new(worker, first + i);
    let doc = |v: serde_json::Value| formats::to_document(&v).unwrap();
    let mut expected = std::collections::HashMap::new();
    let mut batch = DataBatch::new();
    for i in 0..60_000u32 {
        // Every third frame has data when it starts (some of it longer than a lookup's
        // first read of an entry).
        if i % 3 == 0 {
            let mut v = serde_json::json!({"at": "start", "i": i});
            if i % 999 == 0 {
                v["pad"] = "x".repeat(5_000).into();
            }
            batch.push(key(i), &doc(v.clone()));
            expected.insert(key(i), v);
        }
        // Frame i - 30,000 gets more data now: a late update of one with data at its start,
        // or the only data of one without.
        if i >= 30_000 && i % 1_000 < 2 {
            let late = i - 30_000;
            batch.push(key(late), &doc(serde_json::json!({"at": "late", "by": i})));
            let e = expected
                .entry(key(late))
                .or_insert_with(|| serde_json::json!({}));
            e["at"] = "late".into();
            e["by"] = i.into();
        }
        if batch.len() == 200 {
            w.append_data(&batch).unwrap();
            batch.clear();
        }
    }
    w.append_data(&batch).unwrap();
    drop(w);
    let check = |what: &str| {
        let mut store = DataStore::open(dir).unwrap();
        for i in 0..60_000 {
            let got = store
                .get(key(i))
                .unwrap()
                .map(|d| bson::Bson::Document(d).into_relaxed_extjson());
            assert_eq!(got.as_ref(), expected.get(&key(i)), "{what}: frame {i}");
            assert_eq!(store.contains(key(i)), got.is_some(), "{what}: frame {i}");
        }
        assert!(store.take_damage().is_empty(), "{what}");
    };
    check("raw");
    assert!(compact_all(dir) > 0);
    check("compacted");
}
