//! Recorded parents in storage: what a writer appends (version 3 segments, type 6 starts) is
//! what every reader gets back, raw, compacted, past damage, over a viewer stream; a version 1
//! segment never holds a type 6 record; logs without parents read as before, and say so.

mod common;

use std::path::Path;
use std::process::Command;

use formats::{Category, FileHeader, FileKind, FrameEnd, FrameKey, FrameStart, Parent, Record};
use framelog::compact::SegmentOutcome;
use framelog::compact::frames::compact_frames_segment;
use framelog::segments::segment_path;
use framelog::{LogReader, LogWriter, WriterOptions};

/// `n` frames of a request tree on `worker`: every fourth frame a root, the others children
/// of a frame further back (as async work started elsewhere has), with a few parents that
/// never appear in the log. Returns the records and each start's (key, parent).
fn tree(worker: u8, first: u32, n: u32) -> (Vec<u8>, Vec<(FrameKey, Parent)>) {
    let mut bytes = Vec::new();
    let mut want = Vec::new();
    let mut root = first;
    for id in first..first + n {
        let parent = match id % 4 {
            0 => Parent::Root,
            1 => Parent::Frame(root),
            2 => Parent::Frame(id - 1),
            _ if id % 13 == 0 => Parent::Frame(u32::MAX - id),
            _ => Parent::Frame(root),
        };
        if parent == Parent::Root {
            root = id;
        }
        let t = 1_000_000 + u64::from(id) * 100;
        Record::Start(FrameStart {
            id,
            worker,
            timestamp: t,
            context: root,
            category: Category::FUNCTION,
            label: "work",
            parent,
        })
        .encode_to_vec(&mut bytes);
        Record::End(FrameEnd {
            id,
            worker,
            timestamp: t + 50,
        })
        .encode_to_vec(&mut bytes);
        want.push((FrameKey::new(worker, id), parent));
    }
    (bytes, want)
}

fn starts(dir: &Path) -> Vec<(FrameKey, Parent)> {
    let mut out = Vec::new();
    let mut r = LogReader::open(dir).unwrap();
    r.read_available(|_, rec| {
        if let Record::Start(s) = rec {
            out.push((FrameKey::new(s.worker, s.id), s.parent));
        }
    })
    .unwrap();
    out
}

fn version(path: &Path) -> u16 {
    let bytes = std::fs::read(path).unwrap();
    FileHeader::decode_any(FileKind::FrameLog, &bytes)
        .unwrap()
        .unwrap()
        .version
}

fn small_segments() -> WriterOptions {
    WriterOptions {
        pack: false,
        frames_segment_bytes: 64 << 10,
        compact: false,
        ..WriterOptions::default()
    }
}

#[test]
fn parents_read_back_from_raw_and_compact_segments_and_past_damage() {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open_with(dir.path(), small_segments()).unwrap();
    let (bytes, want) = tree(w.worker(), 1, 12_000);
    // In appends of 100 frames (a start of 29 bytes and an end of 14 each), so segments
    // seal as they fill.
    for chunk in bytes.chunks(43 * 100) {
        w.append_frames(chunk).unwrap();
    }
    drop(w);
    let segs = framelog::segments::list(dir.path(), FileKind::FrameLog).unwrap();
    assert!(segs.len() >= 3, "{segs:?}");
    for &n in &segs {
        let p = segment_path(dir.path(), FileKind::FrameLog, n);
        assert_eq!(version(&p), 3, "a new segment records parents");
    }
    assert_eq!(starts(dir.path()), want);

    // Sealed segments compact to version 5 (version 4 with plot streams) and read back the same.
    for &n in &segs[..segs.len() - 1] {
        let out = compact_frames_segment(dir.path(), n, 3).unwrap();
        assert!(matches!(out, SegmentOutcome::Compacted { .. }), "{out:?}");
        let p = segment_path(dir.path(), FileKind::FrameLog, n);
        assert_eq!(version(&p), 5);
    }
    assert_eq!(starts(dir.path()), want);

    let d = dir.path().to_str().unwrap();
    let (out, err, ok) = framelog_cli(&["check", d]);
    assert!(ok, "check of a healthy log with parents: {out}{err}");

    // A byte damaged in the middle of a compact segment and of the raw live one: the damaged
    // block and batch are lost, nothing else, and no start changes its parent.
    for n in [segs[0], *segs.last().unwrap()] {
        let p = segment_path(dir.path(), FileKind::FrameLog, n);
        let mut b = std::fs::read(&p).unwrap();
        let mid = b.len() / 2;
        b[mid] ^= 0x5a;
        std::fs::write(&p, &b).unwrap();
    }
    let (out, err, ok) = framelog_cli(&["check", d]);
    assert!(!ok, "check finds the damage");
    assert!(
        format!("{out}{err}").contains("frames-000001.framelog"),
        "names the file: {out}{err}"
    );
    let copy = tempfile::tempdir().unwrap();
    let copy_dir = copy.path().join("recovered");
    let (out, err, ok) = framelog_cli(&["recover", d, "--out", copy_dir.to_str().unwrap()]);
    assert!(ok, "recover: {out}{err}");
    assert_eq!(
        starts(&copy_dir),
        starts(dir.path()),
        "recover keeps parents"
    );
    let got = starts(dir.path());
    assert!(got.len() < want.len(), "damage costs something");
    assert!(
        got.len() > want.len() / 2,
        "damage costs only what it touches"
    );
    let want: std::collections::HashMap<_, _> = want.into_iter().collect();
    for (k, p) in got {
        assert_eq!(want[&k], p, "frame {k}");
    }
}

/// Writes the header of a version 1 (framed) frame-log segment, as a writer from before
/// parents creates it.
fn version_1_segment(dir: &Path, n: u32) {
    let mut h = FileHeader::new(FileKind::FrameLog);
    h.flags = formats::FLAG_BATCHES;
    std::fs::write(segment_path(dir, FileKind::FrameLog, n), h.encode()).unwrap();
}

#[test]
fn a_version_1_segment_never_holds_a_parent_and_a_writer_moves_past_it_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path()).unwrap();
    // A log left by an older writer: its live segment is version 1.
    version_1_segment(dir.path(), 1);
    let w = LogWriter::open_with(
        dir.path(),
        framelog::WriterOptions {
            pack: false,
            ..Default::default()
        },
    )
    .unwrap();
    let (a, want_a) = tree(w.worker(), 1, 100);
    w.append_frames(&a).unwrap();
    let p2 = segment_path(dir.path(), FileKind::FrameLog, 2);
    assert_eq!(version(&p2), 3, "moved on to a version 3 segment");
    // An older writer, appending at the same time, starts a version 1 segment after it.
    version_1_segment(dir.path(), 3);
    let (b, want_b) = tree(w.worker(), 101, 100);
    w.append_frames(&b).unwrap();
    // And again, pre-framed (what a server appends for a program).
    let (c, want_c) = tree(w.worker(), 201, 100);
    w.append_batches(&common::framed(w.worker(), &c)).unwrap();
    drop(w);
    assert!(
        !segment_path(dir.path(), FileKind::FrameLog, 4).exists(),
        "no segment per append between old and new writers"
    );
    let p3 = segment_path(dir.path(), FileKind::FrameLog, 3);
    assert_eq!(version(&p3), 1);
    let raw = std::fs::read(&p3).unwrap();
    assert!(
        !formats::downgrade::has_parents(&raw[16..]),
        "no type 6 record in a version 1 file"
    );
    let got = starts(dir.path());
    let mut want: Vec<_> = want_a;
    want.extend(
        want_b
            .into_iter()
            .chain(want_c)
            .map(|(k, _)| (k, Parent::NotRecorded)),
    );
    assert_eq!(got, want);
}

fn framelog_cli(args: &[&str]) -> (String, String, bool) {
    let out = Command::new(env!("CARGO_BIN_EXE_framelog"))
        .args(args)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

#[test]
fn dump_prints_parents_and_stats_says_whether_they_were_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open(dir.path()).unwrap();
    let (bytes, want) = tree(w.worker(), 1, 40);
    w.append_frames(&bytes).unwrap();
    drop(w);
    let d = dir.path().to_str().unwrap();
    let (out, err, ok) = framelog_cli(&["dump", d, "--json"]);
    assert!(ok, "{err}");
    let got: Vec<(u32, serde_json::Value)> = out
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["type"] == "start")
        .map(|v| (v["id"].as_u64().unwrap() as u32, v["parent"].clone()))
        .collect();
    let expected: Vec<(u32, serde_json::Value)> = want
        .iter()
        .map(|(k, p)| {
            let v = match p {
                Parent::Frame(id) => serde_json::json!(id),
                _ => serde_json::Value::Null,
            };
            (k.id, v)
        })
        .collect();
    assert_eq!(got, expected);
    let (out, err, ok) = framelog_cli(&["stats", d]);
    assert!(ok, "{err}");
    assert!(out.contains("parents    recorded"), "{out}");

    // A log written before parents: inferred, and said so.
    let old = tempfile::tempdir().unwrap();
    version_1_segment(old.path(), 1);
    let mut b = Vec::new();
    Record::Start(FrameStart {
        id: 1,
        worker: 0,
        timestamp: 5,
        context: 1,
        category: Category::HTTP,
        label: "GET /",
        parent: Parent::NotRecorded,
    })
    .encode_to_vec(&mut b);
    let framed = common::framed(0, &b);
    let p = segment_path(old.path(), FileKind::FrameLog, 1);
    let mut file = std::fs::read(&p).unwrap();
    file.extend_from_slice(&framed);
    std::fs::write(&p, file).unwrap();
    let (out, err, ok) = framelog_cli(&["stats", old.path().to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("parents    inferred"), "{out}");
    let (out, _, ok) = framelog_cli(&["dump", old.path().to_str().unwrap(), "--json"]);
    assert!(ok);
    assert!(!out.contains("parent"), "{out}");
    // Exports say when the nesting they draw is inferred, and only then.
    let (_, err, ok) = framelog_cli(&["export", old.path().to_str().unwrap(), "-o", "/dev/null"]);
    assert!(ok, "{err}");
    assert!(err.contains("1 frames record no parent"), "{err}");
    let (_, err, ok) = framelog_cli(&["export", d, "-o", "/dev/null"]);
    let null = std::fs::metadata("/dev/null").unwrap();
    assert!(
        !null.is_file(),
        "/dev/null is still a device, not replaced by a file"
    );
    assert!(ok, "{err}");
    assert!(!err.contains("record no parent"), "{err}");
}

#[test]
fn a_viewer_gets_parents_only_if_it_reads_records_version_2() {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open(dir.path()).unwrap();
    let (bytes, want) = tree(w.worker(), 1, 500);
    w.append_frames(&bytes).unwrap();
    drop(w);
    for parents in [true, false] {
        let mut s = framelog::viewer::ViewerSession::new(dir.path());
        s.send_parents(parents);
        s.read(formats::protocol::viewer::ReadFrom::Start);
        let mut got = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while got.len() < want.len() {
            assert!(std::time::Instant::now() < deadline, "stream stalled");
            s.credit(1 << 20);
            s.step(&mut |m| {
                use formats::protocol::viewer::ToViewer;
                if let ToViewer::Records { records, .. } = ToViewer::decode(&m).unwrap() {
                    assert_eq!(m[1], if parents { 2 } else { 1 }, "Records version");
                    for r in formats::RecordIter::new(records, 0) {
                        if let Record::Start(st) = r.unwrap().1 {
                            got.push((FrameKey::new(st.worker, st.id), st.parent));
                        }
                    }
                }
            })
            .unwrap();
        }
        let expected: Vec<_> = want
            .iter()
            .map(|&(k, p)| (k, if parents { p } else { Parent::NotRecorded }))
            .collect();
        assert_eq!(got, expected, "parents: {parents}");
    }
}
