//! Compact sealed segments with real files and processes: `framelog compact` gives the same
//! `stats --json` and `dump --json` on real logs (the demo, a stress log of many segments),
//! damage in a compact block costs that block only, a `kill -9` at any moment of a
//! compaction leaves a log that reads the same, and a recording program compacts the
//! segments it seals in the background.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use formats::FileKind;
use framelog::LogReader;
use framelog::segments;
use framelog_tests::{assert_check_clean, framelog_bin};
use rand::{Rng, SeedableRng};

fn run(args: &[&str], dir: &Path) -> Output {
    let out = Command::new(framelog_bin())
        .args(args)
        .arg(dir)
        .output()
        .expect("run framelog");
    assert!(
        out.status.success(),
        "framelog {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `stats --json` without what compaction changes by design: the bytes on disk and, after
/// `--all`, the empty segments it started.
fn stats(dir: &Path) -> serde_json::Value {
    let mut v: serde_json::Value =
        serde_json::from_slice(&run(&["stats", "--json"], dir).stdout).unwrap();
    let m = v.as_object_mut().unwrap();
    for k in ["bytes", "frame_segments", "data_segments"] {
        assert!(m.remove(k).is_some(), "stats --json has {k}");
    }
    v
}

fn dump(dir: &Path) -> Vec<u8> {
    run(&["dump", "--json"], dir).stdout
}

/// Whether the file is a compact segment (format version 2, or 4 with parents).
fn is_compact(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| {
        formats::FileHeader::decode_any(FileKind::FrameLog, &b)
            .or_else(|_| formats::FileHeader::decode_any(FileKind::FrameData, &b))
            .is_ok_and(|h| h.is_some_and(|h| h.is_compact()))
    })
}

fn frame_segment_paths(dir: &Path) -> Vec<PathBuf> {
    // Empty while the directory is not there yet (a program just starting).
    segments::list(dir, FileKind::FrameLog)
        .unwrap_or_default()
        .into_iter()
        .map(|n| segments::segment_path(dir, FileKind::FrameLog, n))
        .collect()
}

fn copy_log(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
    }
}

fn wait_exit(child: &mut std::process::Child, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{what} failed: {status}");
            return;
        }
        assert!(Instant::now() < deadline, "{what} did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A stress log: 2 threads x `frames` frames, 2 deep, data on every tenth frame, 1 MiB
/// segments (no retention).
fn stress_log(dir: &Path, frames: u32) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_record_child"))
        .arg(dir)
        // 256 KiB segments: packed, a frame takes about 5 bytes.
        .args([&frames.to_string(), "256k", "100000"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_exit(&mut child, "record_child");
}

fn demo_log(dir: &Path) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_async_child"))
        .args(["demo", dir.to_str().unwrap(), "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_exit(&mut child, "the demo");
}

/// Every record with its position, as `LogReader` delivers it.
fn records(dir: &Path) -> Vec<(framelog::Position, Vec<u8>)> {
    let mut out = Vec::new();
    let mut r = LogReader::open(dir).unwrap();
    r.read_available(|p, rec| {
        let mut b = Vec::new();
        rec.encode_to_vec(&mut b);
        out.push((p, b));
    })
    .unwrap();
    assert_eq!(r.take_damage(), vec![]);
    out
}

#[test]
fn compacting_real_logs_keeps_stats_and_dump_identical() {
    let root = tempfile::tempdir().unwrap();
    let demo = root.path().join("demo");
    let stress = root.path().join("stress");
    demo_log(&demo);
    stress_log(&stress, 150_000);
    assert!(frame_segment_paths(&stress).len() >= 4, "several segments");
    for dir in [&demo, &stress] {
        let (s, d) = (stats(dir), dump(dir));
        let out = run(&["compact", "--all"], dir);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("total: "), "{text}");
        assert!(text.contains("sealed: started the empty frames-"), "{text}");
        let paths = frame_segment_paths(dir);
        let (newest, sealed) = paths.split_last().unwrap();
        assert!(sealed.iter().all(|p| is_compact(p)), "{text}");
        assert!(!is_compact(newest));
        assert_eq!(stats(dir), s, "{}", dir.display());
        assert!(dump(dir) == d, "dump --json differs for {}", dir.display());
        assert_check_clean(dir);
        // Smaller: the demo's frame log by several times, the stress log's by far more.
        let raw: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix("total: "))
            .and_then(|l| l.split(", ").nth(1))
            .and_then(|l| l.split(" -> ").next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        let compact: u64 = sealed
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum();
        assert!(compact * 4 < raw, "{compact} of {raw}: {text}");
        // Again: nothing left to do.
        let again = run(&["compact"], dir);
        assert!(
            String::from_utf8_lossy(&again.stdout).contains("total: 0 segment(s) compacted"),
            "{}",
            String::from_utf8_lossy(&again.stdout)
        );
    }
}

#[test]
fn compact_all_refuses_a_log_a_process_is_writing() {
    let dir = tempfile::tempdir().unwrap();
    let w = framelog::LogWriter::open(dir.path()).unwrap();
    let out = Command::new(framelog_bin())
        .args(["compact", "--all"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("a process is writing this log (worker 0)"),
        "{err}"
    );
    // Without --all, only sealed segments are touched: none here.
    run(&["compact"], dir.path());
    drop(w);
    // A directory that is not a log.
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(framelog_bin())
        .arg("compact")
        .arg(empty.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("holds no frames yet"));
}

#[test]
fn a_damaged_compact_block_costs_that_block_only() {
    use formats::compact::frames::{TRAILER_LEN, Trailer, read_index};
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("log");
    stress_log(&dir, 150_000);
    run(&["compact", "--all"], &dir);
    let before = records(&dir);
    let path = frame_segment_paths(&dir)[1].clone();
    let mut bytes = std::fs::read(&path).unwrap();
    let t = Trailer::decode(&bytes, bytes.len() as u64).unwrap();
    let ix = &bytes[t.index_offset as usize..bytes.len() - TRAILER_LEN];
    let blocks = read_index(ix, t.index_offset).unwrap();
    let block = blocks[blocks.len() / 2];
    bytes[block.offset as usize + 100] ^= 0x08;
    std::fs::write(&path, &bytes).unwrap();

    let check = Command::new(framelog_bin())
        .arg("check")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!check.status.success());
    let text = String::from_utf8_lossy(&check.stdout);
    let want = format!("{} at byte {}", path.display(), block.offset);
    assert!(text.contains(&want), "{want} in {text}");
    assert!(
        text.contains("1 errors") || text.contains("1 error"),
        "{text}"
    );

    let out = Command::new(framelog_bin())
        .args(["dump", "--json"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&want) && err.contains("CRC32C"),
        "dump reports the damage: {err}"
    );
    let lines = out
        .stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    assert_eq!(lines, before.len() - block.count as usize);
    // The reader loses exactly that block's records.
    let mut r = LogReader::open(&dir).unwrap();
    let mut after = Vec::new();
    r.read_available(|p, rec| {
        let mut b = Vec::new();
        rec.encode_to_vec(&mut b);
        after.push((p, b));
    })
    .unwrap();
    let damage = r.take_damage();
    assert_eq!(damage.len(), 1);
    assert_eq!(
        (damage[0].path.clone(), damage[0].offset),
        (path.clone(), block.offset)
    );
    let segment = segments::list(&dir, FileKind::FrameLog).unwrap()[1];
    let lost: Vec<_> = before
        .iter()
        .filter(|(p, _)| p.segment == segment && p.offset >= block.first_offset)
        .take(block.count as usize)
        .cloned()
        .collect();
    assert_eq!(lost.len(), block.count as usize);
    // By position: a block holds thousands of records, and comparing each record with each
    // lost one took a minute in a debug build.
    let lost: std::collections::HashSet<_> = lost.into_iter().map(|(p, _)| p).collect();
    let kept: Vec<_> = before
        .into_iter()
        .filter(|(p, _)| !lost.contains(p))
        .collect();
    assert_eq!(after, kept);
}

const KILLS: usize = 24;

#[test]
fn kill_9_during_compaction_leaves_a_log_that_reads_the_same() {
    let root = tempfile::tempdir().unwrap();
    let template = root.path().join("template");
    stress_log(&template, 250_000);
    let expected = records(&template);
    let dir = root.path().join("log");
    // How long a whole compaction takes on this machine, so that the kills land across it
    // (a fixed range misses it on a slower or faster machine).
    copy_log(&template, &dir);
    let began = Instant::now();
    run(&["compact", "--all"], &dir);
    let whole = began.elapsed().as_micros().max(1_000) as u64;
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xC0FFEE);
    let mut partial = 0;
    for round in 0..KILLS {
        copy_log(&template, &dir);
        let mut child = Command::new(framelog_bin())
            .args(["compact", "--all"])
            .arg(&dir)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        // A random moment: from the start (sealing) to well past the end.
        std::thread::sleep(Duration::from_micros(rng.gen_range(0..whole * 3 / 2)));
        let _ = child.kill(); // SIGKILL
        child.wait().unwrap();
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        let compact = frame_segment_paths(&dir)
            .iter()
            .filter(|p| is_compact(p))
            .count();
        if compact > 0 && compact + 1 < frame_segment_paths(&dir).len() {
            partial += 1;
        }
        // Whatever the moment: the same records at the same positions, no damage, a clean
        // check, and a temporary file (if one was left) is not read as a segment.
        assert_eq!(records(&dir), expected, "round {round}: files {names:?}");
        assert_check_clean(&dir);
        // The next compaction finishes the job and removes what the killed one left.
        run(&["compact", "--all"], &dir);
        assert_eq!(records(&dir), expected, "round {round}, compacted again");
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "round {round}: {left:?}");
        let paths = frame_segment_paths(&dir);
        assert!(paths[..paths.len() - 1].iter().all(|p| is_compact(p)));
    }
    // The kills did land mid-compaction (some segments compact, some not) at least once.
    assert!(partial > 0, "no kill landed mid-compaction");
}

#[test]
fn a_recording_program_compacts_the_segments_it_seals() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("log");
    // Recording with 1 MiB segments: the writer's background thread compacts what it seals
    // while the program runs. The program keeps its recorder until its stdin closes: the
    // compactor runs at the lowest priority, so on a busy machine it may only get the CPU
    // once recording is done.
    let mut child = Command::new(env!("CARGO_BIN_EXE_record_child"))
        .arg(&dir)
        .args(["1500000", "1", "100000", "hold"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !frame_segment_paths(&dir).iter().any(|p| is_compact(p)) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the program ended before any segment it sealed was compacted"
        );
        assert!(Instant::now() < deadline, "no segment became compact");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(child.stdin.take());
    wait_exit(&mut child, "record_child");
    let mut r = LogReader::open(&dir).unwrap();
    let mut n = 0u64;
    r.read_available(|_, _| n += 1).unwrap();
    assert_eq!(r.take_damage(), vec![]);
    assert!(n > 3_000_000);
    assert_check_clean(&dir);
}
