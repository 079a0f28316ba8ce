//! Writer failure (I/O error, directory removed) never hangs Block mode, never panics, is
//! reported once, and keeps the books: emitted = written + dropped.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use formats::{FrameKey, Record, RecordIter};
use stopwatch::{BufferingMode, Error, Sink, SinkError, Stopwatch};

/// A sink that fails every append after the first `ok_appends`.
struct FailingSink {
    ok_appends: u32,
    appends: AtomicU32,
    written_records: AtomicU64,
    delay: Duration,
}

impl Sink for FailingSink {
    fn worker(&self) -> u8 {
        7
    }
    fn reserve_ids(&self, count: u32) -> Result<u32, SinkError> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        Ok(NEXT.fetch_add(count, Ordering::SeqCst))
    }
    fn append_frames(&self, records: &[u8]) -> Result<(), SinkError> {
        std::thread::sleep(self.delay);
        if self.appends.fetch_add(1, Ordering::SeqCst) >= self.ok_appends {
            return Err("No space left on device (simulated)".into());
        }
        let n = RecordIter::new(records, 0)
            .filter(|r| matches!(r, Ok((_, Record::Start(_) | Record::End(_)))))
            .count();
        self.written_records.fetch_add(n as u64, Ordering::SeqCst);
        Ok(())
    }
    fn append_data(&self, _: &[(FrameKey, Vec<u8>)]) -> Result<(), SinkError> {
        Ok(())
    }
}

/// Runs `f` on a thread and fails the test if it does not finish within `limit`.
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .expect("did not finish in time: Block mode hung")
}

#[test]
fn block_mode_survives_a_failing_writer_and_counts_every_record() {
    let sink = Arc::new(FailingSink {
        ok_appends: 3,
        appends: AtomicU32::new(0),
        written_records: AtomicU64::new(0),
        delay: Duration::from_millis(1),
    });
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let (s2, e2) = (sink.clone(), errors.clone());
    let (stats, emitted) = within(Duration::from_secs(60), move || {
        let rec = Stopwatch::builder()
            .sink(s2)
            .mode(BufferingMode::Block)
            .buffer_kib(64)
            .on_error(move |e: &Error| e2.lock().unwrap().push(e.to_string()))
            .build()
            .unwrap();
        let (frames, _) = stopwatch::stress::record(&rec, 3, 200_000, 2, 0);
        (rec.shutdown(), frames * 2)
    });
    assert!(stats.writer_failed);
    assert!(stats.dropped > 0);
    let written = sink.written_records.load(Ordering::SeqCst);
    assert!(written > 0, "the first appends succeeded");
    assert_eq!(
        written + stats.dropped,
        emitted,
        "emitted = written + dropped"
    );
    let errors = errors.lock().unwrap();
    assert_eq!(errors.len(), 1, "reported once: {errors:?}");
    assert!(errors[0].contains("No space left"), "{errors:?}");
}

#[test]
fn removing_the_log_directory_does_not_hang_block_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let reported = Arc::new(AtomicU32::new(0));
    let r2 = reported.clone();
    let rec = Arc::new(
        Stopwatch::builder()
            .dir(&dir)
            .mode(BufferingMode::Block)
            .buffer_kib(64)
            // Small segments: the writer must create new files, which fails once the
            // directory is gone (already-open files would stay writable on Unix).
            .segment_bytes(64 << 10, 1 << 20)
            .on_error(move |_| {
                r2.fetch_add(1, Ordering::SeqCst);
            })
            .build()
            .unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let (rec, stop) = (rec.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let _a = rec.start("request");
                    let _b = rec.start("query");
                    n += 2;
                }
                n
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    // The writer may create a segment while the directory is being removed: retry.
    while dir.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "could not remove the log"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
    // Keep recording until the failure has been reported (or give up after 10 s).
    while reported.load(Ordering::SeqCst) == 0 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let emitted: u64 = within(Duration::from_secs(20), move || {
        workers.into_iter().map(|w| w.join().unwrap() * 2).sum()
    });
    assert_eq!(reported.load(Ordering::SeqCst), 1, "reported exactly once");
    let rec = Arc::into_inner(rec).unwrap();
    let stats = within(Duration::from_secs(20), move || rec.shutdown());
    assert!(stats.writer_failed);
    assert!(
        stats.dropped > 0 && stats.dropped < emitted,
        "{stats:?} of {emitted}"
    );
}

#[test]
fn a_damaged_log_is_reported_once_left_untouched_and_recording_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    {
        let rec = Stopwatch::builder().dir(dir.path()).build().unwrap();
        for _ in 0..10 {
            drop(rec.start("before"));
        }
    }
    // Bytes after the last batch that cannot start one (bit rot, a foreign writer): damage,
    // not a torn tail.
    let seg = dir.path().join("frames-000001.framelog");
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes.extend_from_slice(&[0xAA; 40]);
    std::fs::write(&seg, &bytes).unwrap();
    let errors = Arc::new(Mutex::new(Vec::new()));
    let e2 = errors.clone();
    {
        let rec = Stopwatch::builder()
            .dir(dir.path())
            .on_error(move |e| e2.lock().unwrap().push(e.to_string()))
            .build()
            .unwrap();
        for _ in 0..10 {
            drop(rec.start("after"));
        }
    }
    let errors = errors.lock().unwrap().clone();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("damaged") && errors[0].contains("frames-000001.framelog"),
        "{errors:?}"
    );
    assert_eq!(
        std::fs::read(&seg).unwrap(),
        bytes,
        "the damaged segment is untouched"
    );
    let mut after = 0;
    let mut r = framelog::LogReader::open(dir.path()).unwrap();
    r.read_available(|_, rec| {
        if matches!(rec, Record::Start(s) if s.label == "after") {
            after += 1;
        }
    })
    .unwrap();
    assert_eq!(after, 10);
    assert_eq!(r.take_damage().len(), 1);
}

/// The recorder an error callback reaches for (held weakly: the test owns it).
static REPORTING: Mutex<Option<std::sync::Weak<stopwatch::Recorder>>> = Mutex::new(None);

#[test]
fn an_error_callback_that_records_and_reads_stats_during_a_large_failing_steal() {
    // Every append fails. 100 threads each leave ~60 KB unflushed in their buffer, so one
    // steal gathers more than the writer's 4 MiB batch and writes (and fails) part-way
    // through its walk over the threads. The callback starts a frame on the writer thread
    // (registering it with the recorder) and reads the stats: both need the locks the steal
    // held when it used to report from inside the walk.
    let sink = Arc::new(FailingSink {
        ok_appends: 0,
        appends: AtomicU32::new(0),
        written_records: AtomicU64::new(0),
        delay: Duration::ZERO,
    });
    let called = Arc::new(AtomicU32::new(0));
    let c = called.clone();
    let rec = Arc::new(
        Stopwatch::builder()
            .sink(sink.clone() as Arc<dyn Sink>)
            .buffer_kib(64 * 256)
            .flush_interval(Duration::from_secs(3600))
            .on_error(move |_: &Error| {
                let rec = REPORTING.lock().unwrap().as_ref().and_then(|w| w.upgrade());
                if let Some(rec) = rec {
                    drop(rec.start("report error"));
                    let _ = rec.stats();
                }
                c.fetch_add(1, Ordering::SeqCst);
            })
            .build()
            .unwrap(),
    );
    *REPORTING.lock().unwrap() = Some(Arc::downgrade(&rec));
    const THREADS: usize = 100;
    let label = "x".repeat(200);
    let recorded = Arc::new(std::sync::Barrier::new(THREADS + 1));
    let release = Arc::new(std::sync::Barrier::new(THREADS + 1));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (rec, label) = (rec.clone(), label.clone());
            let (recorded, release) = (recorded.clone(), release.clone());
            std::thread::spawn(move || {
                for _ in 0..240 {
                    drop(rec.start(label.clone()));
                }
                recorded.wait();
                // Alive, so the buffers are stolen rather than handed over.
                release.wait();
            })
        })
        .collect();
    recorded.wait();
    let r = rec.clone();
    within(Duration::from_secs(60), move || {
        r.flush(Duration::from_secs(30))
    });
    release.wait();
    for t in threads {
        t.join().unwrap();
    }
    let stats = within(Duration::from_secs(60), move || {
        let mut rec = rec;
        loop {
            // The callback may hold a handle for a moment.
            match Arc::try_unwrap(rec) {
                Ok(rec) => return rec.shutdown(),
                Err(again) => rec = again,
            }
            std::thread::yield_now();
        }
    });
    assert!(stats.writer_failed);
    assert_eq!(called.load(Ordering::SeqCst), 1, "reported once");
    assert_eq!(sink.written_records.load(Ordering::SeqCst), 0);
    assert!(
        stats.dropped >= (THREADS * 240 * 2) as u64,
        "every record counted as dropped: {stats:?}"
    );
}
