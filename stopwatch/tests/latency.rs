//! An ended frame reaches the log within 100 ms even though its thread then goes idle.

use std::time::{Duration, Instant};

use formats::Record;
use framelog::LogReader;
use stopwatch::Stopwatch;

#[test]
fn ended_frames_are_readable_within_100ms_while_the_thread_idles() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Stopwatch::builder().dir(dir.path()).build().unwrap();
    // Warm up: register the thread, create the segment.
    drop(rec.start("warm-up"));
    assert!(rec.flush(Duration::from_secs(5)));
    let mut reader = LogReader::open(dir.path()).unwrap();
    reader.read_available(|_, _| {}).unwrap();

    let mut worst = Duration::ZERO;
    for round in 0..5 {
        // A few nested frames, some of them not outermost, then the thread idles (it keeps
        // its partially filled buffer: nothing here fills it or flushes explicitly).
        let root = rec.start("request");
        let child = rec.start("child");
        let want = child.key().unwrap();
        drop(child);
        drop(root);
        let ended = Instant::now();
        let seen = loop {
            let mut found = false;
            reader
                .read_available(|_, r| {
                    if let Record::End(e) = r
                        && e.id == want.id
                        && e.worker == want.worker
                    {
                        found = true;
                    }
                })
                .unwrap();
            if found {
                break ended.elapsed();
            }
            assert!(
                ended.elapsed() < Duration::from_secs(2),
                "round {round}: frame never reached the log"
            );
            std::thread::sleep(Duration::from_millis(1));
        };
        worst = worst.max(seen);
        // Idle a while between rounds, like a quiet server.
        std::thread::sleep(Duration::from_millis(30));
    }
    assert!(
        worst < Duration::from_millis(100),
        "worst latency {worst:?}"
    );
}
