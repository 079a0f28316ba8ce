//! A writer killed with SIGKILL at random moments loses at most its unfinished batch.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use formats::{FrameKey, Record};
use framelog::{DataStore, LogReader, LogWriter};
use framelog_tests::expected_data;
use rand::{Rng, SeedableRng};

const KILLS: usize = 24;

#[test]
fn kill_9_mid_write_keeps_every_reported_batch_and_the_log_stays_readable() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5EED);
    // Every (worker, first, count) a child reported as written.
    let mut reported: Vec<(u8, u32, u32)> = Vec::new();
    for round in 0..KILLS {
        let mut child = Command::new(env!("CARGO_BIN_EXE_log_writer_child"))
            .args(["--dir", dir.path().to_str().unwrap(), "--threads", "2"])
            .args(["--frames", "0", "--batch", "3000", "--data-every", "7"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let pump = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let p: Vec<&str> = line.split_whitespace().collect();
                tx.send((
                    p[1].parse().unwrap(),
                    p[2].parse().unwrap(),
                    p[3].parse().unwrap(),
                ))
                .unwrap();
            }
        });
        // Wait for at least one batch so every round writes something, then kill at random.
        reported.push(
            rx.recv_timeout(Duration::from_secs(30))
                .expect("child wrote a batch"),
        );
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..120)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        pump.join().unwrap();
        reported.extend(rx.try_iter());

        // After every kill the log reads end to end without an error, and a torn tail is
        // never mistaken for damage.
        let mut r = LogReader::open(dir.path()).unwrap();
        r.read_available(|_, _| {})
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(r.take_damage(), vec![], "round {round}");
    }

    // A final clean writer repairs any torn tail and appends.
    let w = LogWriter::open(dir.path()).unwrap();
    w.append_frames(&{
        let mut b = Vec::new();
        framelog_tests::encode_frames(&mut b, w.worker(), w.reserve_ids(1).unwrap(), 1, "after");
        b
    })
    .unwrap();

    let mut starts: HashMap<FrameKey, u32> = HashMap::new();
    let mut ends: HashSet<FrameKey> = HashSet::new();
    LogReader::open(dir.path())
        .unwrap()
        .read_available(|_, r| match r {
            Record::Start(s) => *starts.entry(FrameKey::new(s.worker, s.id)).or_default() += 1,
            Record::End(e) => {
                ends.insert(FrameKey::new(e.worker, e.id));
            }
            _ => {}
        })
        .unwrap();
    assert!(
        starts.values().all(|n| *n == 1),
        "a (worker, id) was written twice across restarts"
    );
    let mut store = DataStore::open(dir.path()).unwrap();
    let mut checked = 0;
    for &(worker, first, count) in &reported {
        for i in 0..count {
            let key = FrameKey::new(worker, first.wrapping_add(i));
            assert!(
                starts.contains_key(&key) && ends.contains(&key),
                "reported frame {key} missing"
            );
            if key.id.is_multiple_of(7) {
                let doc = store.get(key).unwrap().expect("reported data present");
                assert_eq!(
                    bson::Bson::Document(doc).into_relaxed_extjson(),
                    expected_data(key)
                );
                checked += 1;
            }
        }
    }
    assert!(reported.len() >= KILLS && checked > 0);
    let report = framelog::check::check_log(dir.path()).unwrap();
    assert!(!report.has_errors(), "{:?}", report.problems);
}
