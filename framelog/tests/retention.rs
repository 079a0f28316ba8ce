//! Retention on real files: the oldest sealed segments go whole, the live ones never; a
//! reader in the middle of the log keeps going across deleted segments; data lookups of
//! what is left still work; `framelog prune` says what it did and refuses bad arguments.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{frames_batch, write_with_data};
use formats::{FileKind, Record};
use framelog::{DataStore, LogReader, LogWriter, Retention, WriterOptions, segments};

/// A log of many small segments: `batches` batches of 100 frames, 4 KiB frame segments.
fn small_segments(dir: &std::path::Path, batches: u32, retention: Retention) -> LogWriter {
    let w = LogWriter::open_with(
        dir,
        WriterOptions {
            pack: false,
            frames_segment_bytes: 4096,
            data_segment_bytes: 4096,
            retention,
            // Retention by raw sizes: background compaction would shrink sealed segments at
            // moments these tests do not control.
            compact: false,
            ..Default::default()
        },
    )
    .unwrap();
    for _ in 0..batches {
        let first = w.reserve_ids(100).unwrap();
        w.append_frames(&frames_batch(w.worker(), first, 100, "job"))
            .unwrap();
    }
    w
}

fn log_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("frames-") || n.starts_with("data-")
        })
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

#[test]
fn a_writer_keeps_its_log_within_budget_deleting_the_oldest_sealed_segments() {
    let dir = tempfile::tempdir().unwrap();
    let budget = 64 << 10;
    let w = small_segments(
        dir.path(),
        100,
        Retention {
            max_bytes: Some(budget),
            max_age: None,
        },
    );
    // Pruned as segments were sealed: far more was written than is left, and what is left
    // is within the budget: a run of the newest segments, the live one among them.
    let left = segments::list(dir.path(), FileKind::FrameLog).unwrap();
    let last = *left.last().unwrap();
    assert!(
        u64::from(last) * 4096 > 4 * budget,
        "{last} segments written"
    );
    let bytes = log_bytes(dir.path());
    assert!(bytes <= budget + 8192, "{bytes} bytes");
    assert_eq!(
        left,
        (left[0]..=last).collect::<Vec<_>>(),
        "a run of the newest"
    );
    let pruned = w.prune().unwrap();
    assert_eq!(pruned.oldest_frames_segment, Some(left[0]));
    // The writer goes on appending.
    let first = w.reserve_ids(100).unwrap();
    w.append_frames(&frames_batch(w.worker(), first, 100, "after"))
        .unwrap();
    let (mut starts, mut named) = (0, Vec::new());
    LogReader::open(dir.path())
        .unwrap()
        .read_available(|_, r| match r {
            Record::Start(_) => starts += 1,
            Record::WorkerInfo(i) => named.push((i.worker, i.pid)),
            _ => {}
        })
        .unwrap();
    assert!(starts >= 100);
    // The segments left still name their writer: it repeats itself in each new segment.
    assert!(
        named.contains(&(w.worker(), std::process::id())),
        "{named:?}"
    );
}

#[test]
fn a_reader_in_the_middle_of_the_log_keeps_going_across_deleted_segments() {
    let dir = tempfile::tempdir().unwrap();
    // 5 MiB segments: a reader's first read (4 MiB) leaves it inside the first one.
    let w = LogWriter::open_with(
        dir.path(),
        WriterOptions {
            pack: false,
            frames_segment_bytes: 5 << 20,
            ..Default::default()
        },
    )
    .unwrap();
    while segments::list(dir.path(), FileKind::FrameLog)
        .unwrap()
        .len()
        < 4
    {
        let first = w.reserve_ids(1000).unwrap();
        w.append_frames(&frames_batch(w.worker(), first, 1000, "job"))
            .unwrap();
    }
    let mut reader = LogReader::open(dir.path()).unwrap();
    reader.read_some(1, |_, _| {}).unwrap();
    assert_eq!(reader.position().segment, 1, "inside the first segment");
    // Retention deletes the three sealed segments, the one open in the reader included.
    let all = segments::list(dir.path(), FileKind::FrameLog).unwrap();
    assert_eq!(all, [1, 2, 3, 4]);
    for n in 1..=3 {
        std::fs::remove_file(segments::segment_path(dir.path(), FileKind::FrameLog, n)).unwrap();
    }
    // It finishes the segment it holds open, then goes on at the oldest segment left.
    let (mut in_first, mut in_last) = (0u64, 0u64);
    reader
        .read_available(|pos, r| {
            if matches!(r, Record::Start(_)) {
                match pos.segment {
                    1 => in_first += 1,
                    4 => in_last += 1,
                    n => panic!("a record from deleted segment {n}"),
                }
            }
        })
        .unwrap();
    assert!(in_first > 0, "the rest of the open segment");
    let mut expected = 0;
    LogReader::open(dir.path())
        .unwrap()
        .read_available(|_, r| expected += matches!(r, Record::Start(_)) as u64)
        .unwrap();
    assert_eq!(in_last, expected, "every frame of the segment left");
    assert_eq!(
        reader.pruned_segments(),
        2,
        "segments 2 and 3 skipped, said"
    );
    // And it follows what is appended next.
    let first = w.reserve_ids(10).unwrap();
    w.append_frames(&frames_batch(w.worker(), first, 10, "later"))
        .unwrap();
    let mut later = 0;
    reader
        .read_available(|_, r| {
            if let Record::Start(s) = r {
                later += (s.label == "later") as u32;
            }
        })
        .unwrap();
    assert_eq!(later, 10);
}

#[test]
fn data_lookups_survive_retention_deleting_data_segments() {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open_with(
        dir.path(),
        WriterOptions {
            pack: false,
            frames_segment_bytes: 4096,
            data_segment_bytes: 4096,
            // No background compaction: it shrinks sealed segments at moments this test does
            // not control, and a log compacted in time fits the budget with nothing to delete
            // (seen on a CI run).
            compact: false,
            ..Default::default()
        },
    )
    .unwrap();
    let retention = Retention {
        max_bytes: Some(16 << 10),
        max_age: None,
    };
    let mut firsts = Vec::new();
    for _ in 0..40 {
        let first = w.reserve_ids(20).unwrap();
        write_with_data(&w, first, 20);
        firsts.push(first);
    }
    // A store opened before the prune keeps what it indexed (its files stay open).
    let mut early = DataStore::open(dir.path()).unwrap();
    let old_key = formats::FrameKey::new(w.worker(), firsts[0]);
    assert!(early.get(old_key).unwrap().is_some());
    framelog::retention::prune(dir.path(), &retention).unwrap();
    assert!(
        !segments::exists(dir.path(), FileKind::FrameData, 1),
        "the first data segment went"
    );
    assert!(
        segments::list(dir.path(), FileKind::FrameData)
            .unwrap()
            .len()
            > 1,
        "some data segments are left"
    );
    early.refresh().unwrap();
    assert!(early.get(old_key).unwrap().is_some(), "still readable");
    // A store opened after it finds the newest frames' data, and none for the deleted.
    let mut late = DataStore::open(dir.path()).unwrap();
    let new_key = formats::FrameKey::new(w.worker(), *firsts.last().unwrap());
    assert!(late.get(new_key).unwrap().is_some());
    assert!(late.get(old_key).unwrap().is_none());
}

fn framelog(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_framelog"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn framelog_prune_says_what_it_deleted_and_refuses_bad_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    drop(small_segments(dir.path(), 50, Retention::default()));
    let out = framelog(&["prune", d, "--max-bytes", "32KiB"]);
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.starts_with("deleted "), "{said}");
    assert!(said.contains("the log now starts at frames-"), "{said}");
    assert!(log_bytes(dir.path()) <= 32 << 10);
    // An age limit: everything sealed is older than a nanosecond.
    std::thread::sleep(Duration::from_millis(20));
    let out = framelog(&["prune", d, "--max-age", "1ms"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        segments::list(dir.path(), FileKind::FrameLog)
            .unwrap()
            .len(),
        1
    );
    // No limit, a bad size, not a log: exit 1 or 2 with a message naming the problem.
    for (args, says) in [
        (vec!["prune", d], "--max-bytes"),
        (vec!["prune", d, "--max-bytes", "ten"], "not a size"),
        (
            vec!["prune", "/nonexistent-log", "--max-bytes", "1GiB"],
            "/nonexistent-log: no such directory",
        ),
    ] {
        let out = framelog(&args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// Gives every segment file of `dir` a modification time, newest segments oldest: what a copy
/// can do (`cp -r` writes files in directory order, with fresh times).
fn scramble_file_times(dir: &std::path::Path) {
    let base = std::time::SystemTime::now();
    for kind in [FileKind::FrameLog, FileKind::FrameData] {
        for n in segments::list(dir, kind).unwrap() {
            let f = std::fs::File::options()
                .write(true)
                .open(segments::segment_path(dir, kind, n))
                .unwrap();
            f.set_modified(base - Duration::from_secs(u64::from(n) * 10))
                .unwrap();
        }
    }
}

#[test]
fn prune_on_a_copied_log_keeps_the_newest_segments_whatever_the_file_times() {
    let dir = tempfile::tempdir().unwrap();
    drop(small_segments(dir.path(), 60, Retention::default()));
    let before = segments::list(dir.path(), FileKind::FrameLog).unwrap();
    assert!(before.len() > 10, "{before:?}");
    scramble_file_times(dir.path());
    let pruned = framelog::retention::prune(
        dir.path(),
        &Retention {
            max_bytes: Some(log_bytes(dir.path()) / 2),
            max_age: None,
        },
    )
    .unwrap();
    assert!(pruned.bytes > 0);
    let after = segments::list(dir.path(), FileKind::FrameLog).unwrap();
    // What is left is a run of the newest segments, no hole.
    assert_eq!(after, before[before.len() - after.len()..].to_vec());
    assert!(after.len() < before.len());
    // And it reads without frames cut in half by a gap: every start has its end.
    let mut stats = framelog::stats::StatsBuilder::new();
    LogReader::open(dir.path())
        .unwrap()
        .read_available(|_, r| stats.add(&r))
        .unwrap();
    let (t, _) = stats.finish();
    assert_eq!((t.open, t.orphan_ends), (0, 0));
}

#[test]
fn age_comes_from_the_times_inside_the_segments_not_the_files() {
    let dir = tempfile::tempdir().unwrap();
    drop(small_segments(dir.path(), 20, Retention::default()));
    // Every file looks a day old, but the log was written just now: nothing is too old.
    let day_ago = std::time::SystemTime::now() - Duration::from_secs(86_400);
    for kind in [FileKind::FrameLog] {
        for n in segments::list(dir.path(), kind).unwrap() {
            std::fs::File::options()
                .write(true)
                .open(segments::segment_path(dir.path(), kind, n))
                .unwrap()
                .set_modified(day_ago)
                .unwrap();
        }
    }
    let hour = Retention {
        max_bytes: None,
        max_age: Some(Duration::from_secs(3600)),
    };
    let pruned = framelog::retention::prune(dir.path(), &hour).unwrap();
    assert!(
        pruned
            .files
            .iter()
            .all(|p| !p.to_string_lossy().contains("frames-")),
        "frame segments written just now are not an hour old: {:?}",
        pruned.files
    );
}

/// Reads `child`'s stderr in a thread, into lines.
fn stderr_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The first line `rx` gives that contains `what`, within a generous deadline.
fn line_with(rx: &std::sync::mpsc::Receiver<String>, what: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) if l.contains(what) => return l,
            Ok(_) => {}
            Err(e) => panic!("no line with {what:?}: {e}"),
        }
    }
}

#[test]
fn dump_follow_says_which_segments_retention_deleted_before_it_read_them_and_about_how_many_records()
 {
    let dir = tempfile::tempdir().unwrap();
    // Segment 1: one append of 2,000 frames (far more text than a pipe holds); then 20
    // segments of 100 frames each.
    let w = small_segments(dir.path(), 0, Retention::default());
    let first = w.reserve_ids(2_000).unwrap();
    w.append_frames(&frames_batch(w.worker(), first, 2_000, "job"))
        .unwrap();
    for _ in 0..20 {
        let first = w.reserve_ids(100).unwrap();
        w.append_frames(&frames_batch(w.worker(), first, 100, "job"))
            .unwrap();
    }
    let numbers = segments::list(dir.path(), FileKind::FrameLog).unwrap();
    assert!(numbers.len() >= 10, "{numbers:?}");
    // Records per segment, read before anything is deleted.
    let mut per_segment = std::collections::HashMap::<u32, u64>::new();
    LogReader::open(dir.path())
        .unwrap()
        .read_available(|pos, r| {
            if matches!(r, Record::Start(_) | Record::End(_)) {
                *per_segment.entry(pos.segment).or_default() += 1;
            }
        })
        .unwrap();

    let mut dump = Command::new(env!("CARGO_BIN_EXE_framelog"))
        .args(["dump", "--follow", dir.path().to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let errors = stderr_lines(&mut dump);
    // Its first line proves it is reading segment 1; the rest of its output waits in the
    // pipe, so it cannot get past segment 1 until this test reads on.
    let mut out = std::io::BufReader::new(dump.stdout.take().unwrap());
    let mut first_line = String::new();
    std::io::BufRead::read_line(&mut out, &mut first_line).unwrap();
    assert!(!first_line.is_empty());
    // Everything but the two newest segments goes.
    let keep: u64 = numbers[numbers.len() - 2..]
        .iter()
        .map(|&n| {
            std::fs::metadata(segments::segment_path(dir.path(), FileKind::FrameLog, n))
                .unwrap()
                .len()
        })
        .sum();
    let pruned = framelog::retention::prune(
        dir.path(),
        &Retention {
            max_bytes: Some(keep + (16 << 10)),
            max_age: None,
        },
    )
    .unwrap();
    assert!(pruned.files.len() >= 5, "{pruned:?}");
    let gone_after_first: Vec<u32> = numbers[1..]
        .iter()
        .copied()
        .filter(|&n| !segments::exists(dir.path(), FileKind::FrameLog, n))
        .collect();
    let drain = std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let said = line_with(&errors, "deleted by retention");
    dump.kill().unwrap();
    dump.wait().unwrap();
    let _ = drain.join();
    // Where the reader was when they went depends on its pace: the range it names starts
    // past what it had read and ends at the newest segment deleted.
    let range = said
        .split("segments ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .unwrap_or_else(|| panic!("names the segments: {said}"));
    let (lo, hi): (u32, u32) = range
        .split_once('-')
        .map(|(a, b)| (a.parse().unwrap(), b.parse().unwrap()))
        .unwrap();
    assert_eq!(hi, *gone_after_first.last().unwrap(), "{said}");
    assert!(
        gone_after_first.contains(&lo) && lo < hi,
        "{gone_after_first:?}: {said}"
    );
    let estimate: f64 = said
        .split("about ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("an estimate of the records: {said}"));
    let actual: u64 = (lo..=hi)
        .map(|n| per_segment.get(&n).copied().unwrap_or(0))
        .sum();
    assert!(
        (estimate - actual as f64).abs() <= 0.2 * actual as f64,
        "about {estimate} records, {actual} were in them: {said}"
    );
}

#[test]
fn dump_follow_waits_for_a_log_directory_that_does_not_exist_yet() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("later");
    let mut dump = Command::new(env!("CARGO_BIN_EXE_framelog"))
        .args(["dump", "--follow", dir.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let errors = stderr_lines(&mut dump);
    let said = line_with(&errors, "waiting for a program to write");
    assert!(said.contains("does not exist yet"), "{said}");
    let w = LogWriter::open(&dir).unwrap();
    let first = w.reserve_ids(3).unwrap();
    w.append_frames(&frames_batch(w.worker(), first, 3, "late job"))
        .unwrap();
    let mut out = std::io::BufReader::new(dump.stdout.take().unwrap());
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut line = String::new();
    while !line.contains("late job") {
        line.clear();
        std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        assert!(
            std::time::Instant::now() < deadline,
            "the frames are printed"
        );
    }
    dump.kill().unwrap();
    dump.wait().unwrap();
}
