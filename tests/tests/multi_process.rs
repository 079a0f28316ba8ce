//! Several real processes append to one log at once; then every frame must be there once.

use std::collections::HashMap;
use std::process::{Command, Stdio};

use formats::{FrameKey, Record};
use framelog::{DataStore, LogReader};
use framelog_tests::expected_data;

const PROCESSES: usize = 4;
const THREADS: u32 = 2;
const FRAMES: u32 = 100_000;
const DATA_EVERY: u32 = 10;

#[test]
fn four_processes_two_threads_each_append_without_interleaving() {
    let dir = tempfile::tempdir().unwrap();
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_log_writer_child"))
                .args(["--dir", dir.path().to_str().unwrap()])
                .args([
                    "--threads",
                    &THREADS.to_string(),
                    "--frames",
                    &FRAMES.to_string(),
                ])
                .args(["--batch", "997", "--data-every", &DATA_EVERY.to_string()])
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }

    // (worker, id) -> [starts, ends]
    let mut seen: HashMap<FrameKey, [u32; 2]> = HashMap::new();
    let mut workers = HashMap::new();
    LogReader::open(dir.path())
        .unwrap()
        .read_available(|_, r| match r {
            Record::Start(s) => seen.entry(FrameKey::new(s.worker, s.id)).or_default()[0] += 1,
            Record::End(e) => seen.entry(FrameKey::new(e.worker, e.id)).or_default()[1] += 1,
            Record::WorkerInfo(w) => *workers.entry(w.worker).or_insert(0) += 1,
            _ => {}
        })
        .unwrap();
    assert_eq!(
        workers.len(),
        PROCESSES,
        "each process got its own worker id"
    );
    assert!(workers.values().all(|n| *n == 1));
    let expected = PROCESSES * THREADS as usize * FRAMES as usize;
    assert_eq!(seen.len(), expected, "every frame present, keys unique");
    assert!(
        seen.values().all(|c| *c == [1, 1]),
        "each frame exactly once"
    );

    let mut store = DataStore::open(dir.path()).unwrap();
    let with_data: Vec<FrameKey> = seen
        .keys()
        .copied()
        .filter(|k| k.id.is_multiple_of(DATA_EVERY))
        .collect();
    assert_eq!(store.len(), with_data.len());
    for key in with_data {
        let doc = store.get(key).unwrap().expect("data present");
        let json = bson::Bson::Document(doc).into_relaxed_extjson();
        assert_eq!(json, expected_data(key), "data of {key}");
    }
    let report = framelog::check::check_log(dir.path()).unwrap();
    assert!(!report.has_errors(), "{:?}", report.problems);
}
