//! The `framelog` binary, run as a real process on real logs.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{framelog, frames_batch, text, write_with_data};
use formats::{Dropped, FileKind, FrameKey};
use framelog::{LogWriter, WriterOptions, segments};
use rand::{Rng, SeedableRng};

/// A log with 20 "db/query" frames with data, 5 "http/request" frames and a dropped marker.
fn sample_log(dir: &Path) -> u8 {
    let w = LogWriter::open_with(
        dir,
        WriterOptions {
            pack: false,
            process_name: Some("sample".into()),
            ..Default::default()
        },
    )
    .unwrap();
    write_with_data(&w, 1, 20);
    w.append_frames(&frames_batch(w.worker(), 100, 5, "http/request"))
        .unwrap();
    let mut buf = [0u8; 32];
    let n = Dropped {
        worker: w.worker(),
        timestamp: 5,
        count: 3,
    }
    .encode(&mut buf)
    .unwrap();
    w.append_frames(&buf[..n]).unwrap();
    w.worker()
}

/// Opens `worker` of the log again. Its lock is released when the previous writer drops, but
/// a child process another test forks at that moment holds a copy of the lock's descriptor
/// until it execs: poll until the slot is free (with a deadline) instead of assuming.
fn reopen_worker(dir: &Path, worker: u8) -> LogWriter {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match LogWriter::open_with(
            dir,
            WriterOptions {
                pack: false,
                worker: Some(worker),
                ..Default::default()
            },
        ) {
            Ok(w) => return w,
            Err(framelog::Error::WorkerTaken(_)) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("reopening worker {worker}: {e}"),
        }
    }
}

fn dir_arg(dir: &tempfile::TempDir) -> &str {
    dir.path().to_str().unwrap()
}

#[test]
fn dump_json_has_the_documented_fields() {
    let dir = tempfile::tempdir().unwrap();
    let worker = sample_log(dir.path());
    let out = framelog(&["dump", "--json", dir_arg(&dir)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1 + 50 + 1);
    assert_eq!(lines[0]["type"], "worker_info");
    assert_eq!(lines[0]["name"], "sample");
    let start = &lines[1];
    assert_eq!(start["type"], "start");
    assert_eq!(start["id"], 1);
    assert_eq!(start["worker"], worker);
    assert_eq!(start["context"], 1);
    assert_eq!(start["category"], "database");
    assert_eq!(start["label"], "db/query");
    let end = &lines[2];
    assert_eq!(end["type"], "end");
    assert_eq!(
        end["duration_ns"].as_u64().unwrap(),
        end["timestamp"].as_u64().unwrap() - start["timestamp"].as_u64().unwrap()
    );
    assert_eq!(lines.last().unwrap()["type"], "dropped");
    assert_eq!(lines.last().unwrap()["count"], 3);
}

#[test]
fn dump_filters_by_label_category_context_and_worker() {
    let dir = tempfile::tempdir().unwrap();
    let worker = sample_log(dir.path());
    let count = |args: &[&str]| {
        let mut all = vec!["dump", "--json", dir_arg(&dir)];
        all.extend_from_slice(args);
        let out = framelog(&all);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout).lines().count()
    };
    assert_eq!(count(&["--label", "http/*"]), 10);
    assert_eq!(count(&["--label", "db/*", "--context", "3"]), 2);
    assert_eq!(count(&["--category", "database"]), 50);
    assert_eq!(count(&["--category", "email"]), 0);
    assert_eq!(count(&["--worker", &worker.to_string()]), 52);
    assert_eq!(count(&["--worker", &(worker + 1).to_string()]), 0);
    let human = framelog(&["dump", dir_arg(&dir), "--label", "http/request"]);
    let first = text(&human.stdout).lines().next().unwrap().to_owned();
    assert!(
        first.contains("start") && first.contains("http/request") && first.contains("database"),
        "{first}"
    );
}

#[test]
fn dump_follow_prints_records_as_the_log_grows() {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open(dir.path()).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_framelog"))
        .args(["dump", "--json", "--follow", dir_arg(&dir)])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(lines.next().unwrap().unwrap().contains("worker_info"));
    let started = Instant::now();
    w.append_frames(&frames_batch(w.worker(), 1, 1, "late/frame"))
        .unwrap();
    let line = lines.next().unwrap().unwrap();
    assert!(line.contains("late/frame"), "{line}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn data_prints_merged_json_and_stats_counts_everything() {
    let dir = tempfile::tempdir().unwrap();
    let worker = sample_log(dir.path());
    let out = framelog(&["data", dir_arg(&dir), &format!("{worker}:7")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["sql"], "SELECT 7");
    let missing = framelog(&["data", dir_arg(&dir), &format!("{worker}:999")]);
    assert!(!missing.status.success());
    assert!(text(&missing.stderr).contains("has no data"));

    let out = framelog(&["stats", "--json", dir_arg(&dir)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["frames"], 25);
    assert_eq!(s["ends"], 25);
    assert_eq!(s["open"], 0);
    assert_eq!(s["dropped"], 3);
    assert_eq!(s["workers"], 1);
    assert_eq!(s["worker_list"][0]["name"], "sample");
    assert_eq!(s["data_entries"], 20);
    let db = s["labels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["label"] == "db/query")
        .unwrap();
    assert_eq!(db["count"], 20);
    // Durations written by frames_batch are 10 + id % 7.
    let durations: Vec<u64> = (1..=20u64).map(|id| 10 + id % 7).collect();
    assert_eq!(
        db["total_ns"].as_u64().unwrap(),
        durations.iter().sum::<u64>()
    );
    assert_eq!(
        db["max_ns"].as_u64().unwrap(),
        *durations.iter().max().unwrap()
    );
    let human = framelog(&["stats", dir_arg(&dir)]);
    let t = text(&human.stdout);
    assert!(t.contains("db/query") && t.contains("dropped    3"), "{t}");
}

#[test]
fn check_passes_a_good_log_and_names_file_and_offset_of_a_bad_index_entry() {
    let dir = tempfile::tempdir().unwrap();
    sample_log(dir.path());
    let ok = framelog(&["check", dir_arg(&dir)]);
    assert!(
        ok.status.success(),
        "{}{}",
        text(&ok.stdout),
        text(&ok.stderr)
    );
    assert!(text(&ok.stdout).contains("0 errors"));
    // Point the third index entry's seek somewhere else (the first is the batch marker's).
    let idx = segments::segment_path(dir.path(), FileKind::FrameIndex, 1);
    let mut bytes = std::fs::read(&idx).unwrap();
    let third = 16 + 2 * 9;
    bytes[third + 5..third + 9].copy_from_slice(&17u32.to_le_bytes());
    std::fs::write(&idx, bytes).unwrap();
    let bad = framelog(&["check", dir_arg(&dir)]);
    assert_eq!(bad.status.code(), Some(1));
    let out = text(&bad.stdout);
    assert!(
        out.contains("data-000001.frameidx") && out.contains(&format!("at byte {third}")),
        "{out}"
    );
    // The frame's data lookup reports the mismatch instead of returning wrong data.
    let lookup = framelog(&["data", dir_arg(&dir), &FrameKey::new(0, 3).to_string()]);
    assert!(!lookup.status.success());
    assert!(
        text(&lookup.stderr).contains("data-000001"),
        "{}",
        text(&lookup.stderr)
    );
}

#[test]
fn bad_input_gives_one_clear_line_and_a_non_zero_exit_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let cases: Vec<Vec<String>> = vec![
        vec!["dump".into(), missing.display().to_string()],
        vec!["stats".into(), dir_arg(&dir).into()],
        vec!["check".into(), dir_arg(&dir).into()],
        vec!["data".into(), dir_arg(&dir).into(), "0:1".into()],
        vec!["data".into(), dir_arg(&dir).into(), "not-a-key".into()],
        vec![
            "dump".into(),
            dir_arg(&dir).into(),
            "--category".into(),
            "bogus".into(),
        ],
        vec!["frobnicate".into()],
    ];
    for args in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = framelog(&args);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!err.trim().is_empty(), "{args:?} printed no error");
    }
    let out = framelog(&["dump", missing.to_str().unwrap()]);
    assert_eq!(text(&out.stderr).lines().count(), 1);
    assert!(
        text(&out.stderr).contains("no such directory"),
        "{}",
        text(&out.stderr)
    );
    // `view` of a file says so; a non-loopback address without a token is said once.
    let file = tempfile::NamedTempFile::new().unwrap();
    let out = framelog(&[
        "view",
        file.path().to_str().unwrap(),
        "--http",
        "127.0.0.1:0",
    ]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("a file, not a log directory"));
    let empty = tempfile::tempdir().unwrap();
    let out = framelog(&[
        "view",
        empty.path().to_str().unwrap(),
        "--http",
        "0.0.0.0:0",
    ]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert_eq!(err.matches("serving viewers on").count(), 1, "{err}");
    assert!(err.contains("needs a token"), "{err}");
    // A file is not a log directory; an empty directory holds no frames yet.
    let file = tempfile::NamedTempFile::new().unwrap();
    let out = framelog(&["stats", file.path().to_str().unwrap()]);
    assert!(text(&out.stderr).contains("a file, not a log directory"));
    let empty = tempfile::tempdir().unwrap();
    let out = framelog(&["stats", empty.path().to_str().unwrap()]);
    assert!(
        text(&out.stderr).contains("holds no frames yet"),
        "{}",
        text(&out.stderr)
    );
    // Each reason is said once, however the error was wrapped.
    let log = tempfile::tempdir().unwrap();
    sample_log(log.path());
    let out = framelog(&["recover", dir_arg(&log), "--out", dir_arg(&log)]);
    let err = text(&out.stderr);
    assert_eq!(err.matches("not empty").count(), 1, "{err}");
    let seg = segments::segment_path(log.path(), FileKind::FrameLog, 1);
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[..8].copy_from_slice(b"NOTALOG!");
    std::fs::write(&seg, bytes).unwrap();
    let out = framelog(&["dump", dir_arg(&log)]);
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("frames-000001.framelog at byte 0: bad magic"),
        "{err}"
    );
    assert_eq!(err.matches("bad magic").count(), 1, "{err}");
}

#[test]
fn random_and_truncated_files_never_panic_any_command() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for round in 0..12 {
        let dir = tempfile::tempdir().unwrap();
        sample_log(dir.path());
        for kind in [
            FileKind::FrameLog,
            FileKind::FrameData,
            FileKind::FrameIndex,
        ] {
            let p = segments::segment_path(dir.path(), kind, 1);
            let mut bytes = std::fs::read(&p).unwrap();
            match round % 3 {
                // Random bytes everywhere (sometimes even the header).
                0 => rng.fill(&mut bytes[(round % 2) * 16..]),
                // Truncated at a random point.
                1 => bytes.truncate(rng.gen_range(0..bytes.len())),
                // A few flipped bytes.
                _ => {
                    for _ in 0..5 {
                        let i = rng.gen_range(0..bytes.len());
                        bytes[i] ^= 0xFF;
                    }
                }
            }
            std::fs::write(&p, bytes).unwrap();
        }
        let d = dir_arg(&dir);
        for args in [
            vec!["dump", d],
            vec!["dump", "--json", d],
            vec!["stats", d],
            vec!["stats", "--json", d],
            vec!["check", d],
            vec!["data", d, "0:5"],
        ] {
            let out = framelog(&args);
            let err = text(&out.stderr);
            assert!(!err.contains("panicked"), "round {round} {args:?}: {err}");
            if !out.status.success() {
                assert!(
                    err.starts_with("framelog: error:") || args[0] == "check",
                    "{args:?}: {err}"
                );
            }
        }
    }
}

#[test]
fn dump_into_a_closed_pipe_exits_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open(dir.path()).unwrap();
    w.append_frames(&frames_batch(w.worker(), 1, 20_000, "many"))
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_framelog"))
        .args(["dump", dir_arg(&dir)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // stdout is dropped here: the rest of the dump hits a closed pipe.
    let out = child.wait_with_output().unwrap();
    assert!(
        !text(&out.stderr).contains("panicked"),
        "{}",
        text(&out.stderr)
    );
    let _ = std::io::stdout().flush();
}

#[test]
fn damage_mid_log_is_skipped_by_every_command_and_recover_copies_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let worker = sample_log(dir.path());
    let used = reopen_worker(dir.path(), worker).reserve_ids(500).unwrap();
    // The "db/query" frames are the second batch; zero 30 bytes in its middle, and flip a
    // byte inside a BSON document of the data file.
    let seg = segments::segment_path(dir.path(), FileKind::FrameLog, 1);
    let mut bytes = std::fs::read(&seg).unwrap();
    let second = 16 + 32 + 16 + 4 + "sample".len();
    bytes[second + 200..second + 230].fill(0);
    std::fs::write(&seg, &bytes).unwrap();
    let data = segments::segment_path(dir.path(), FileKind::FrameData, 1);
    let mut d = std::fs::read(&data).unwrap();
    let n = d.len();
    d[n - 10] ^= 0x40;
    std::fs::write(&data, &d).unwrap();

    let stats = framelog(&["stats", dir_arg(&dir)]);
    assert!(stats.status.success(), "{}", text(&stats.stderr));
    let out = text(&stats.stdout);
    assert!(out.contains("http/request"), "{out}");
    assert!(
        !out.contains("db/query"),
        "frames of the damaged batch are not counted: {out}"
    );
    let line = out.lines().find(|l| l.starts_with("damage")).expect(&out);
    assert!(line.contains("damaged bytes in 1 places"), "{line}");
    assert!(text(&stats.stderr).contains("frames-000001.framelog at byte"));
    assert_eq!(
        framelog(&["stats", "--strict", dir_arg(&dir)])
            .status
            .code(),
        Some(1)
    );

    let check = framelog(&["check", dir_arg(&dir)]);
    assert_eq!(check.status.code(), Some(1));
    let report = text(&check.stdout);
    assert!(
        report.contains(&format!("frames-000001.framelog at byte {second}")),
        "{report}"
    );
    assert!(
        report.contains("data-000001.framedata") && report.contains("CRC32C"),
        "{report}"
    );

    let dump = framelog(&["dump", dir_arg(&dir)]);
    assert!(dump.status.success());
    assert!(text(&dump.stdout).contains("http/request"));
    assert!(
        text(&dump.stderr).contains("skipped"),
        "{}",
        text(&dump.stderr)
    );

    let last = FrameKey::new(worker, 20);
    let lookup = framelog(&["data", dir_arg(&dir), &last.to_string()]);
    assert_eq!(lookup.status.code(), Some(1));
    assert!(
        text(&lookup.stderr).contains("data-000001.framedata"),
        "{}",
        text(&lookup.stderr)
    );

    let out_dir = dir.path().join("recovered");
    let rec = framelog(&["recover", dir_arg(&dir), "--out", out_dir.to_str().unwrap()]);
    assert!(rec.status.success(), "{}", text(&rec.stderr));
    let said = text(&rec.stdout);
    assert!(
        said.contains("skipped: ") && said.contains("in 2 places"),
        "{said}"
    );
    let clean = framelog(&["check", out_dir.to_str().unwrap()]);
    assert!(clean.status.success(), "{}", text(&clean.stdout));
    let stats = text(&framelog(&["stats", out_dir.to_str().unwrap()]).stdout);
    assert!(
        stats.contains("http/request") && !stats.contains("damage"),
        "{stats}"
    );
    // Ids keep going past the old log's in the recovered one.
    let w = reopen_worker(&out_dir, worker);
    assert!(w.reserve_ids(1).unwrap() >= used + 500);
}

/// `framelog view` without a built browser viewer says so on stderr before it serves, and its
/// `/` says how to build it (the window connects anyway).
#[test]
fn view_without_the_browser_viewer_warns_and_its_page_says_how_to_build_it() {
    let dir = tempfile::tempdir().unwrap();
    sample_log(dir.path());
    // The binary's own directory has no web/ (tests never build the page there), and the
    // environment's page (CI builds one for the browser tests) is not this test's.
    let mut child = Command::new(env!("CARGO_BIN_EXE_framelog"))
        .args(["view", dir_arg(&dir), "--http", "127.0.0.1:0"])
        .env_remove("FRAMELOG_WEB")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let serving = out.next().expect("a line").unwrap();
    let addr = serving
        .strip_prefix("serving http://")
        .and_then(|a| a.strip_suffix('/'))
        .unwrap_or_else(|| panic!("{serving}"))
        .to_owned();
    // The warning came before the address was printed.
    let mut err = child.stderr.take().unwrap();
    let page = {
        use std::io::Read;
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            s,
            "GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).unwrap();
        body
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut err, &mut stderr).unwrap();
    assert!(
        stderr.contains("warning: the browser viewer is not built")
            && stderr.contains("debugger-gui/web/build.sh"),
        "{stderr}"
    );
    assert!(
        page.starts_with("HTTP/1.1 200") && page.contains("web/build.sh"),
        "{page}"
    );
}
