//! The storage engine end to end on real files: writing, rotating, repairing, reading,
//! following and looking up data.

mod common;

use std::fs::OpenOptions;
use std::io::Write;
use std::time::{Duration, Instant};

use common::{data_batches, framed, frames_batch, read_frames, write_with_data};
use formats::{FileKind, FrameKey, Record};
use framelog::{DataBatch, DataStore, Error, LogReader, LogWriter, WriterOptions, segments};

#[test]
fn written_records_read_back_in_order_with_worker_info() {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open_with(
        dir.path(),
        WriterOptions {
            process_name: Some("my-server".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let first = w.reserve_ids(100).unwrap();
    w.append_frames(&frames_batch(w.worker(), first, 100, "db/query"))
        .unwrap();
    let mut names = Vec::new();
    let mut starts = 0;
    LogReader::open(dir.path())
        .unwrap()
        .read_available(|_, r| match r {
            Record::WorkerInfo(i) => names.push((i.name.to_owned(), i.pid)),
            Record::Start(s) => {
                assert_eq!(s.label, "db/query");
                starts += 1;
            }
            _ => {}
        })
        .unwrap();
    assert_eq!(names, vec![("my-server".to_owned(), std::process::id())]);
    assert_eq!(starts, 100);
    let frames = read_frames(dir.path());
    assert_eq!(frames.len(), 200);
    assert_eq!(frames[0], (FrameKey::new(w.worker(), first), 0));
}

#[test]
fn segments_rotate_past_the_size_limit_and_read_as_one_stream() {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open_with(
        dir.path(),
        WriterOptions {
            pack: false,
            frames_segment_bytes: 4096,
            data_segment_bytes: 2048,
            ..Default::default()
        },
    )
    .unwrap();
    for batch in 0..50 {
        write_with_data(&w, 1 + batch * 10, 10);
    }
    let frame_segs = segments::list(dir.path(), FileKind::FrameLog).unwrap();
    let data_segs = segments::list(dir.path(), FileKind::FrameData).unwrap();
    assert!(frame_segs.len() > 5, "{frame_segs:?}");
    assert!(data_segs.len() > 5, "{data_segs:?}");
    for n in &frame_segs {
        let len = std::fs::metadata(segments::segment_path(dir.path(), FileKind::FrameLog, *n))
            .unwrap()
            .len();
        // One batch may overshoot only a segment that was empty.
        assert!(len <= 4096 + 16, "segment {n} is {len} bytes");
    }
    let frames = read_frames(dir.path());
    assert_eq!(frames.len(), 1000);
    let ids: Vec<u32> = frames.iter().step_by(2).map(|(k, _)| k.id).collect();
    assert_eq!(ids, (1..=500).collect::<Vec<_>>());
    let mut store = DataStore::open(dir.path()).unwrap();
    assert_eq!(store.len(), 500);
    for id in [1, 250, 500] {
        let d = store.get(FrameKey::new(w.worker(), id)).unwrap().unwrap();
        assert_eq!(d.get_str("sql").unwrap(), format!("SELECT {id}"));
    }
}

#[test]
fn data_updates_merge_in_file_order_later_keys_winning() {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open(dir.path()).unwrap();
    let key = FrameKey::new(w.worker(), 7);
    let mut b = DataBatch::new();
    b.push(
        key,
        &formats::to_document(&serde_json::json!({"a": 1, "b": "first"})).unwrap(),
    );
    w.append_data(&b).unwrap();
    b.clear();
    b.push(
        key,
        &formats::to_document(&serde_json::json!({"b": "second", "c": true})).unwrap(),
    );
    w.append_data(&b).unwrap();
    let mut store = DataStore::open(dir.path()).unwrap();
    let d = store.get(key).unwrap().unwrap();
    assert_eq!(d.get_i64("a").unwrap(), 1);
    assert_eq!(d.get_str("b").unwrap(), "second");
    assert!(d.get_bool("c").unwrap());
    assert_eq!(store.get(FrameKey::new(w.worker(), 8)).unwrap(), None);
}

#[test]
fn a_torn_tail_is_cut_before_the_next_append_and_nothing_before_it_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    {
        let w = LogWriter::open(dir.path()).unwrap();
        write_with_data(&w, 1, 20);
    }
    // Simulate a crash mid-append: the first 40 bytes of a framed batch on the frame log;
    // on the data side, one whole data batch whose index entries were never written,
    // followed by the first bytes of the next data batch.
    let seg = |k| segments::segment_path(dir.path(), k, 1);
    let append = |k, bytes: &[u8]| {
        OpenOptions::new()
            .append(true)
            .open(seg(k))
            .unwrap()
            .write_all(bytes)
            .unwrap()
    };
    append(
        FileKind::FrameLog,
        &framed(0, &frames_batch(0, 100, 3, "torn"))[..40],
    );
    let data_len = std::fs::metadata(seg(FileKind::FrameData)).unwrap().len();
    let (whole, next) = data_batches(0, &[(0, 100), (0, 101)], data_len);
    append(FileKind::FrameData, &whole);
    append(FileKind::FrameData, &next[..30]);
    // Readers stop cleanly before the torn bytes, and report no damage.
    let mut r = LogReader::open(dir.path()).unwrap();
    let mut n = 0;
    r.read_available(|_, rec| n += matches!(rec, Record::Start(_) | Record::End(_)) as usize)
        .unwrap();
    assert_eq!((n, r.take_damage()), (40, vec![]));
    let torn = framelog::check::check_log(dir.path()).unwrap();
    assert!(!torn.has_errors(), "{:?}", torn.problems);
    let w = LogWriter::open(dir.path()).unwrap();
    write_with_data(&w, 21, 5);
    let frames = read_frames(dir.path());
    assert_eq!(frames.len(), 50);
    let report = framelog::check::check_log(dir.path()).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let mut store = DataStore::open(dir.path()).unwrap();
    assert_eq!(store.len(), 26, "20 + the re-indexed whole batch + 5");
    assert!(store.get(FrameKey::new(w.worker(), 25)).unwrap().is_some());
    let kept = store.get(FrameKey::new(0, 100)).unwrap().unwrap();
    assert_eq!(
        kept.get_i64("n").unwrap(),
        100,
        "the whole unindexed batch was kept"
    );
    assert!(store.get(FrameKey::new(0, 101)).unwrap().is_none());
}

#[test]
fn worker_slots_are_unique_while_held_and_ids_continue_after_takeover() {
    let dir = tempfile::tempdir().unwrap();
    let a = LogWriter::open(dir.path()).unwrap();
    let b = LogWriter::open(dir.path()).unwrap();
    assert_ne!(a.worker(), b.worker());
    assert!(matches!(
        LogWriter::open_with(dir.path(), WriterOptions { worker: Some(a.worker()), ..Default::default() }),
        Err(Error::WorkerTaken(w)) if w == a.worker()
    ));
    let worker = a.worker();
    let used = a.reserve_ids(1000).unwrap();
    drop(a);
    let c = LogWriter::open(dir.path()).unwrap();
    assert_eq!(c.worker(), worker, "the freed slot is reused");
    let next = c.reserve_ids(10).unwrap();
    assert!(
        next >= used + 1000,
        "ids continue past the previous holder's: {next} vs {used}"
    );
}

#[test]
fn follow_mode_sees_appends_and_new_segments() {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open_with(
        dir.path(),
        WriterOptions {
            pack: false,
            frames_segment_bytes: 2048,
            ..Default::default()
        },
    )
    .unwrap();
    let mut reader = LogReader::open(dir.path()).unwrap();
    reader.read_available(|_, _| {}).unwrap();
    assert!(!reader.wait_for_growth(Duration::from_millis(100)).unwrap());
    let writer = std::thread::spawn(move || {
        for i in 0..40 {
            std::thread::sleep(Duration::from_millis(5));
            w.append_frames(&frames_batch(w.worker(), 1 + i * 10, 10, "live"))
                .unwrap();
        }
    });
    let mut ends = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while ends < 400 && Instant::now() < deadline {
        reader.wait_for_growth(Duration::from_millis(500)).unwrap();
        reader
            .read_available(|_, r| {
                if let Record::End(_) = r {
                    ends += 1;
                }
            })
            .unwrap();
    }
    writer.join().unwrap();
    assert_eq!(ends, 400);
    assert!(
        reader.position().segment > 3,
        "followed into later segments"
    );
}

#[test]
fn a_reader_resumes_from_a_position() {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open(dir.path()).unwrap();
    w.append_frames(&frames_batch(w.worker(), 1, 10, "a"))
        .unwrap();
    let mut r = LogReader::open(dir.path()).unwrap();
    r.read_available(|_, _| {}).unwrap();
    let pos = r.position();
    w.append_frames(&frames_batch(w.worker(), 11, 5, "b"))
        .unwrap();
    let mut labels = Vec::new();
    LogReader::open_at(dir.path(), pos)
        .unwrap()
        .read_available(|_, r| {
            if let Record::Start(s) = r {
                labels.push(s.label.to_owned());
            }
        })
        .unwrap();
    assert_eq!(labels, vec!["b"; 5]);
}

#[test]
fn damaged_bytes_are_skipped_and_reported_and_a_writer_leaves_them_alone() {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open(dir.path()).unwrap();
    w.append_frames(&frames_batch(w.worker(), 1, 3, "ok"))
        .unwrap();
    let path = segments::segment_path(dir.path(), FileKind::FrameLog, 1);
    let good_len = std::fs::metadata(&path).unwrap().len();
    // Bytes that are not a batch, then a valid batch after them.
    let bad = [0xFFu8; 19];
    let after = framed(w.worker(), &frames_batch(w.worker(), 10, 2, "later"));
    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(&bad).unwrap();
    f.write_all(&after).unwrap();
    let mut seen = 0;
    let mut r = LogReader::open(dir.path()).unwrap();
    r.read_available(|_, _| seen += 1).unwrap();
    assert_eq!(
        seen,
        1 + 6 + 4,
        "worker info + 3 frames, then 2 after the damage"
    );
    let damage = r.take_damage();
    assert_eq!(damage.len(), 1);
    assert_eq!(
        (&damage[0].path, damage[0].offset, damage[0].len),
        (&path, good_len, bad.len() as u64)
    );
    assert_eq!(r.damage_totals(), (19, 1));
    // A new writer leaves the damaged segment alone and starts the next one.
    let reported = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = reported.clone();
    let w2 = LogWriter::open_with(
        dir.path(),
        WriterOptions {
            on_damage: Some(std::sync::Arc::new(move |e: &Error| {
                sink.lock().unwrap().push(e.to_string())
            })),
            ..Default::default()
        },
    )
    .unwrap();
    w2.append_frames(&frames_batch(w2.worker(), 1, 2, "next"))
        .unwrap();
    let before = good_len + (bad.len() + after.len()) as u64;
    assert_eq!(std::fs::metadata(&path).unwrap().len(), before);
    let reports = reported.lock().unwrap().clone();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(
        reports[0].contains("frames-000001.framelog")
            && reports[0].contains(&format!("byte {good_len}"))
    );
    let mut labels = Vec::new();
    r.read_available(|_, rec| {
        if let Record::Start(s) = rec {
            labels.push(s.label.to_owned());
        }
    })
    .unwrap();
    assert_eq!(labels, vec!["next"; 2]);
}

#[test]
fn opening_something_that_is_not_a_log_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        LogReader::open(dir.path()),
        Err(Error::NotALog(_))
    ));
    assert!(matches!(
        LogReader::open(dir.path().join("missing")),
        Err(Error::NotALog(_))
    ));
    let seg = segments::segment_path(dir.path(), FileKind::FrameLog, 1);
    std::fs::write(&seg, b"NOTALOG!\x01\x00\x10\x00\x00\x00\x00\x00garbage").unwrap();
    let err = LogReader::open(dir.path())
        .unwrap()
        .read_available(|_, _| {})
        .unwrap_err();
    assert!(err.to_string().contains("bad magic"), "{err}");
    assert!(err.to_string().contains("frames-000001.framelog"), "{err}");
}

/// A tiny tmpfs mounted for one test, unmounted on drop.
struct TinyFs(tempfile::TempDir);

impl TinyFs {
    fn mount(bytes: usize) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Self(dir))
    }
}

impl Drop for TinyFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.0.path())
            .status();
    }
}

#[test]
fn a_full_disk_is_an_error_naming_the_file_and_keeps_what_was_written() {
    let Some(fs) = TinyFs::mount(256 << 10) else {
        eprintln!("SKIPPED: mounting a tmpfs needs root (CI runs as root)");
        return;
    };
    let dir = fs.0.path().join("log");
    let w = LogWriter::open(&dir).unwrap();
    let mut written = 0u32;
    let err = loop {
        let batch = frames_batch(w.worker(), 1 + written, 100, "fill");
        match w.append_frames(&batch) {
            Ok(()) => written += 100,
            Err(e) => break e,
        }
        assert!(written < 1_000_000, "the disk never filled up");
    };
    let msg = err.to_string();
    assert!(msg.contains("frames-000001.framelog"), "{msg}");
    assert!(
        matches!(&err, Error::Io { source, .. } if source.raw_os_error() == Some(28)),
        "{msg}"
    );
    // Every batch that was reported written reads back; the failed one is at most a torn tail.
    let frames = read_frames(&dir);
    assert!(
        frames.len() >= 2 * written as usize,
        "{} < {}",
        frames.len(),
        2 * written
    );
    assert!(frames.len() < 2 * (written as usize + 100));
    let mut r = LogReader::open(&dir).unwrap();
    r.read_available(|_, _| {}).unwrap();
}

/// `append_batches` takes batches framed by the caller: whole batches whose headers hold are
/// written as given; a header with a wrong checksum, a cut batch or bytes after the last
/// batch are refused and nothing is written; a body whose `crc` does not match is written and
/// read back as damage costing that batch only.
#[test]
fn pre_framed_appends_are_checked_by_their_headers() {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open_with(
        dir.path(),
        framelog::WriterOptions {
            pack: false,
            ..Default::default()
        },
    )
    .unwrap();
    let path = segments::segment_path(dir.path(), FileKind::FrameLog, 1);
    let good = framed(w.worker(), &frames_batch(w.worker(), 1, 3000, "pre-framed"));
    assert!(
        good.len() > 2 * formats::FRAMES_BATCH_TARGET,
        "several batches"
    );
    w.append_batches(&good).unwrap();
    assert_eq!(read_frames(dir.path()).len(), 6000);
    let len = std::fs::metadata(&path).unwrap().len();

    let one = framed(w.worker(), &frames_batch(w.worker(), 5000, 2, "one"));
    let mut wrong_header_crc = one.clone();
    wrong_header_crc[29] ^= 1;
    let mut wrong_len = one.clone();
    wrong_len[16] ^= 1; // `len` no longer matches the header's own checksum
    let mut trailing = one.clone();
    trailing.extend_from_slice(&[0u8; 5]);
    let two = [one.clone(), one.clone()].concat();
    for (what, bytes) in [
        ("a header whose checksum fails", wrong_header_crc),
        ("a header whose len was changed", wrong_len),
        ("a cut batch", one[..one.len() - 1].to_vec()),
        ("a cut header", one[..20].to_vec()),
        ("a cut second batch", two[..two.len() - 3].to_vec()),
        ("bytes after the last batch", trailing),
        ("plain records", frames_batch(w.worker(), 6000, 2, "plain")),
    ] {
        let err = w.append_batches(&bytes).expect_err(what);
        assert!(matches!(err, Error::BadAppend(_)), "{what}: {err}");
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            len,
            "{what}: nothing written"
        );
    }

    // A body that does not match its crc: written, then skipped by readers as that batch's
    // damage, and the batches around it read.
    let mut wrong_body = one.clone();
    *wrong_body.last_mut().unwrap() ^= 0x40;
    let batches = [one.clone(), wrong_body, one.clone()].concat();
    w.append_batches(&batches).unwrap();
    let mut r = LogReader::open(dir.path()).unwrap();
    let mut frames = 0;
    r.read_available(|_, rec| {
        if matches!(rec, Record::Start(_) | Record::End(_)) {
            frames += 1;
        }
    })
    .unwrap();
    assert_eq!(frames, 6000 + 2 * 4, "every batch but the damaged one");
    let damage = r.take_damage();
    assert_eq!(damage.len(), 1, "{damage:?}");
    assert_eq!(
        (damage[0].offset, damage[0].len),
        (len + one.len() as u64, one.len() as u64)
    );
}

#[test]
fn a_data_pair_whose_creation_was_cut_before_its_index_is_a_note_not_damage() {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open(dir.path()).unwrap();
    common::write_with_data(&w, 1, 10);
    drop(w);
    // A process killed between creating the next pair's data file and its index.
    let mut header = formats::FileHeader::new(formats::FileKind::FrameData);
    header.flags = formats::FLAG_BATCHES;
    std::fs::write(dir.path().join("data-000002.framedata"), header.encode()).unwrap();
    let report = framelog::check::check_log(dir.path()).unwrap();
    assert!(!report.has_errors(), "{report:?}");
    // Killed after creating the index file, before its header: still nothing lost.
    std::fs::write(dir.path().join("data-000002.frameidx"), b"").unwrap();
    let report = framelog::check::check_log(dir.path()).unwrap();
    assert!(!report.has_errors(), "{report:?}");
    // Short bytes that are not the start of a header are damage.
    std::fs::write(dir.path().join("data-000002.frameidx"), b"garbage").unwrap();
    assert!(framelog::check::check_log(dir.path()).unwrap().has_errors());
    std::fs::remove_file(dir.path().join("data-000002.frameidx")).unwrap();
    // With entries in it, a missing index is an error.
    let idx = dir.path().join("data-000001.frameidx");
    std::fs::remove_file(&idx).unwrap();
    let report = framelog::check::check_log(dir.path()).unwrap();
    assert!(report.has_errors());
}

/// A new log's segments are version 6 and its batches packed: a frame takes a few bytes on
/// disk, reads back as the records written, at positions that increase and lie inside their
/// batch, and a reader opened at any record's position (inside a packed batch) goes on from
/// that record.
#[test]
fn packed_batches_read_back_and_resume_at_any_record() {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open(dir.path()).unwrap();
    let first = w.reserve_ids(5_000).unwrap();
    let raw = frames_batch(w.worker(), first, 5_000, "db/query");
    w.append_frames(&raw).unwrap();
    drop(w);
    let path = segments::segment_path(dir.path(), FileKind::FrameLog, 1);
    let bytes = std::fs::read(&path).unwrap();
    let header = formats::FileHeader::decode(FileKind::FrameLog, &bytes)
        .unwrap()
        .unwrap();
    assert_eq!(header.version, formats::PACKED_VERSION);
    assert!(
        bytes.len() * 4 < raw.len(),
        "{} bytes on disk for {} bytes of records",
        bytes.len(),
        raw.len()
    );
    let mut all = Vec::new();
    let mut reader = LogReader::open(dir.path()).unwrap();
    reader
        .read_available(|pos, r| {
            let mut b = Vec::new();
            r.encode_to_vec(&mut b);
            all.push((pos, b));
        })
        .unwrap();
    assert!(reader.take_damage().is_empty());
    // What was appended, byte for byte, beside the writer's own worker_info.
    let frames: Vec<u8> = all
        .iter()
        .filter(|(_, b)| b[5] <= 1)
        .flat_map(|(_, b)| b.clone())
        .collect();
    assert_eq!(frames, raw);
    assert!(
        all.windows(2).all(|w| w[0].0 < w[1].0),
        "positions increase"
    );
    assert!(all.iter().all(|(p, _)| p.offset < bytes.len() as u64));
    for i in [1, 2, 777, 5_000, 9_999, all.len() - 1] {
        let mut again = Vec::new();
        let mut r = LogReader::open_at(dir.path(), all[i].0).unwrap();
        r.read_available(|pos, rec| {
            let mut b = Vec::new();
            rec.encode_to_vec(&mut b);
            again.push((pos, b));
        })
        .unwrap();
        assert_eq!(again, all[i..], "opened at record {i}");
    }
}

/// `records` framed as packed batches, as a recorder that packs on its writer thread hands
/// them to `append_batches`.
fn packed_framed(worker: u8, records: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    formats::split_records(records, formats::FRAMES_BATCH_TARGET, |r, _| {
        let mut body = Vec::new();
        let count = formats::packed::pack(worker, 7, &records[r], &mut body).unwrap();
        let head = formats::BatchHeader::for_packed(worker, 7, &body, count);
        out.extend_from_slice(&head.encode());
        out.extend_from_slice(&body);
    })
    .unwrap();
    out
}

/// Packed batches handed over by their writer are written as they are where the segment
/// takes them, and unpacked into plain batches where it does not (a writer that does not
/// pack); a packed body that does not unpack is then refused, and nothing is written.
#[test]
fn packed_batches_handed_over_are_written_as_given_or_unpacked_for_a_plain_segment() {
    for pack in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let opts = WriterOptions {
            pack,
            ..Default::default()
        };
        let w = LogWriter::open_with(dir.path(), opts).unwrap();
        assert_eq!(w.packs(), pack);
        let raw = frames_batch(w.worker(), 1, 3_000, "handed/over");
        let batches = packed_framed(w.worker(), &raw);
        assert!(batches.len() * 4 < raw.len(), "{} bytes", batches.len());
        w.append_batches(&batches).unwrap();
        let path = segments::segment_path(dir.path(), FileKind::FrameLog, 1);
        let bytes = std::fs::read(&path).unwrap();
        let header = formats::FileHeader::decode(FileKind::FrameLog, &bytes)
            .unwrap()
            .unwrap();
        let given = bytes.windows(batches.len()).any(|w| w == batches);
        if pack {
            assert_eq!(header.version, formats::PACKED_VERSION);
            assert!(given, "the packed batches are in the segment as given");
        } else {
            assert_eq!(header.version, 3);
            assert!(
                !given && bytes.len() > raw.len(),
                "unpacked: {} bytes",
                bytes.len()
            );
        }
        let mut back = Vec::new();
        let mut r = LogReader::open(dir.path()).unwrap();
        r.read_available(|_, rec| {
            if matches!(rec, Record::Start(_) | Record::End(_)) {
                rec.encode_to_vec(&mut back);
            }
        })
        .unwrap();
        assert!(r.take_damage().is_empty());
        assert_eq!(back, raw, "pack: {pack}");

        if !pack {
            // A packed body that does not unpack: its header made to agree with it.
            let mut body = Vec::new();
            let more = frames_batch(w.worker(), 5_000, 10, "x");
            let count = formats::packed::pack(w.worker(), 7, &more, &mut body).unwrap();
            body.pop();
            let head = formats::BatchHeader::for_packed(w.worker(), 7, &body, count);
            let bad = [&head.encode()[..], &body].concat();
            let len = std::fs::metadata(&path).unwrap().len();
            let err = w
                .append_batches(&bad)
                .expect_err("a body that does not unpack");
            assert!(matches!(err, Error::BadAppend(_)), "{err}");
            assert_eq!(
                std::fs::metadata(&path).unwrap().len(),
                len,
                "nothing written"
            );
        }
    }
}

/// A log whose live segment an older writer left at version 3 gets a version 6 segment
/// next; a version 3 segment found later (an older writer appending at the same time) is
/// appended to with plain batches, which it can read, not passed again.
#[test]
fn a_version_3_live_segment_is_moved_past_once_then_appended_to_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let old = formats::FileHeader {
        flags: formats::FLAG_BATCHES,
        ..formats::FileHeader::frames_with_parents()
    };
    let p1 = segments::segment_path(dir.path(), FileKind::FrameLog, 1);
    std::fs::write(&p1, old.encode()).unwrap();
    let w = LogWriter::open(dir.path()).unwrap();
    let first = w.reserve_ids(10).unwrap();
    w.append_frames(&frames_batch(w.worker(), first, 10, "a"))
        .unwrap();
    let p2 = segments::segment_path(dir.path(), FileKind::FrameLog, 2);
    let v = |p: &std::path::Path| {
        formats::FileHeader::decode(FileKind::FrameLog, &std::fs::read(p).unwrap())
            .unwrap()
            .unwrap()
            .version
    };
    assert_eq!(v(&p2), formats::PACKED_VERSION);
    // An older writer starts a version 3 segment beside it.
    let p3 = segments::segment_path(dir.path(), FileKind::FrameLog, 3);
    std::fs::write(&p3, old.encode()).unwrap();
    w.append_frames(&frames_batch(w.worker(), first + 5, 5, "b"))
        .unwrap();
    drop(w);
    assert!(!segments::segment_path(dir.path(), FileKind::FrameLog, 4).exists());
    let b3 = std::fs::read(&p3).unwrap();
    assert!(b3.len() > 16, "appended to the version 3 segment");
    let mut pos = 16;
    while let formats::Unit::Batch { len, packed, .. } =
        formats::Framing::Frames.next_unit(&b3[pos..], true, true)
    {
        assert!(packed.is_none(), "a packed batch in a version 3 segment");
        pos += len;
    }
    assert_eq!(pos, b3.len());
    assert_eq!(read_frames(dir.path()).len(), 30);
}
