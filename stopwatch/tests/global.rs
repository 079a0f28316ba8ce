//! The process-global stopwatch: install, record, uninstall (flushes), and shutdown
//! releasing Block-mode producers parked on a slow writer. One test: the global is shared.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use stopwatch::{BufferingMode, Category, Sink, SinkError, Stopwatch};

struct SlowSink(AtomicU64);
impl Sink for SlowSink {
    fn worker(&self) -> u8 {
        1
    }
    fn reserve_ids(&self, count: u32) -> Result<u32, SinkError> {
        Ok(self.0.fetch_add(count as u64, Ordering::SeqCst) as u32)
    }
    fn append_frames(&self, _: &[u8]) -> Result<(), SinkError> {
        std::thread::sleep(Duration::from_millis(100));
        Ok(())
    }
    fn append_data(&self, _: &[(formats::FrameKey, Vec<u8>)]) -> Result<(), SinkError> {
        Ok(())
    }
}

#[test]
fn global_install_records_and_uninstall_flushes_and_releases_parked_producers() {
    // 1. Real log: install, record, drop the guard, read back.
    let dir = tempfile::tempdir().unwrap();
    let guard = Stopwatch::builder().dir(dir.path()).install().unwrap();
    assert!(Stopwatch::is_installed());
    assert!(matches!(
        Stopwatch::builder().dir(dir.path()).install(),
        Err(stopwatch::Error::AlreadyInstalled)
    ));
    {
        let f = Stopwatch::start("db/query");
        f.data(&serde_json::json!({"sql": "select 1", "params": [1]}));
        f.data(&serde_json::json!({"rows": 1}));
        let _q = Stopwatch::start_with("User: Select", Category::DATABASE);
        assert!(Stopwatch::current_context().is_some());
    }
    drop(guard);
    assert!(!Stopwatch::is_installed());
    assert!(!Stopwatch::start("after uninstall").is_recording());
    let log = common::read_log(dir.path());
    assert_eq!(log.starts.len(), 2);
    assert_eq!(log.end_records, 2);
    let key = log
        .starts
        .iter()
        .find(|s| s.label == "db/query")
        .unwrap()
        .key;
    let mut store = framelog::DataStore::open(dir.path()).unwrap();
    let doc = store.get(key).unwrap().unwrap();
    assert_eq!(doc.get_str("sql").unwrap(), "select 1");
    assert_eq!(
        doc.get_i64("rows")
            .or(doc.get_i32("rows").map(i64::from))
            .unwrap(),
        1
    );

    // 2. Slow writer, Block mode, tiny pool: producers park; uninstalling releases them.
    let guard = Stopwatch::builder()
        .sink(Arc::new(SlowSink(AtomicU64::new(0))))
        .mode(BufferingMode::Block)
        .buffer_kib(16)
        .install()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _f = Stopwatch::start("busy");
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    drop(guard);
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    // The slow sink takes 100 ms per write: shutdown is a few writes, not a hang.
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}
