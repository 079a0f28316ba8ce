//! Block vs Drop with a tiny pool: the seed's differential, on real log files.

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use common::{framelog_cli, read_log};
use formats::FrameKey;
use stopwatch::stress::{StressOptions, run};
use stopwatch::{BufferingMode, Sink, SinkError, Stopwatch};

#[test]
fn block_mode_with_a_tiny_pool_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StressOptions {
        dir: Some(dir.path().join("log")),
        threads: 2,
        frames: 500_000, // 1,000,000 frames in all
        mode: BufferingMode::Block,
        buffer_kib: 64,
        data_every: 0,
        depth: 3,
        ..Default::default()
    };
    let report = run(&opts).unwrap();
    let frames = opts.frames * opts.threads as u64;
    assert_eq!(report.emitted, frames * 2);
    assert_eq!(report.dropped, 0, "{report:?}");

    let log = read_log(opts.dir.as_ref().unwrap());
    assert_eq!(log.starts.len() as u64, frames);
    assert_eq!(log.end_records, frames);
    assert_eq!(log.dropped_markers, 0);
    // Every frame has exactly one start and one end, keys never repeat.
    let keys: HashSet<_> = log.starts.iter().map(|s| s.key).collect();
    assert_eq!(keys.len() as u64, frames);
    assert!(keys.iter().all(|k| log.ends.contains_key(k)));
    // Ends never precede their starts in time; each chunk starts with a ThreadInfo.
    for s in &log.starts {
        assert!(log.ends[&s.key].0 >= s.timestamp);
        assert!(s.thread_name.starts_with("stress-"), "{:?}", s.thread_name);
    }
    assert_eq!(log.records_without_thread, 0);
    // Nesting: frames of one depth-3 nest share the root's context, the root's context is
    // its own id, so there are exactly frames / 3 (rounded up per thread) contexts.
    let roots = log.starts.iter().filter(|s| s.context == s.key.id).count() as u64;
    assert_eq!(roots, opts.frames.div_ceil(3) * opts.threads as u64);
}

/// The real log writer behind a gate: the recorder's writer thread waits in its first
/// append until the test opens the gate, so the pool fills and Drop mode must drop, however
/// fast the machine drains it.
struct HeldLog {
    log: framelog::LogWriter,
    open: Mutex<bool>,
    opened: Condvar,
}

impl HeldLog {
    fn wait_open(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }

    fn release(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

impl Sink for HeldLog {
    fn worker(&self) -> u8 {
        self.log.worker()
    }
    fn reserve_ids(&self, count: u32) -> Result<u32, SinkError> {
        Sink::reserve_ids(&self.log, count)
    }
    fn append_frames(&self, records: &[u8]) -> Result<(), SinkError> {
        self.wait_open();
        Sink::append_frames(&self.log, records)
    }
    fn append_batches(&self, batches: &[u8]) -> Result<(), SinkError> {
        self.wait_open();
        Sink::append_batches(&self.log, batches)
    }
    fn packs(&self) -> bool {
        Sink::packs(&self.log)
    }
    fn append_data(&self, entries: &[(FrameKey, Vec<u8>)]) -> Result<(), SinkError> {
        self.wait_open();
        Sink::append_data(&self.log, entries)
    }
    fn close(&self) {
        Sink::close(&self.log)
    }
}

#[test]
fn drop_mode_counts_exactly_what_it_discards() {
    let dir = tempfile::tempdir().unwrap();
    let held = Arc::new(HeldLog {
        log: framelog::LogWriter::open(dir.path()).unwrap(),
        open: Mutex::new(false),
        opened: Condvar::new(),
    });
    let recorder = Arc::new(
        Stopwatch::builder()
            .sink(held.clone() as Arc<dyn Sink>)
            .mode(BufferingMode::Drop)
            .buffer_kib(64)
            .build()
            .unwrap(),
    );
    // Two threads record nests of two frames until something has been dropped (the writer
    // is held, so the 64 KiB pool fills) and then a while longer, with the writer released,
    // so the log holds drops between records on both sides.
    let done = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (recorder, done) = (recorder.clone(), done.clone());
            std::thread::spawn(move || {
                let mut frames = 0u64;
                while !done.load(Ordering::Relaxed) || frames < 300_000 {
                    let outer = recorder.start("outer");
                    let inner = recorder.start("inner");
                    drop(inner);
                    drop(outer);
                    frames += 2;
                }
                frames
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while recorder.stats().dropped == 0 {
        assert!(
            Instant::now() < deadline,
            "nothing dropped with the writer held"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    held.release();
    done.store(true, Ordering::Relaxed);
    let frames: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let recorder = Arc::try_unwrap(recorder).unwrap_or_else(|_| panic!("recorder still shared"));
    let stats = recorder.shutdown();
    let emitted = frames * 2;
    assert!(stats.dropped > 0, "{stats:?}");
    assert!(stats.dropped < emitted, "{stats:?}");

    // Exactly what was dropped is missing from the log, and announced by dropped markers.
    let log = read_log(dir.path());
    assert_eq!(log.records(), emitted - stats.dropped);
    assert_eq!(log.dropped_markers, stats.dropped);
    // Drop leaves ends without starts and starts without ends; both are readable.
    let starts = log.start_map();
    let orphan_ends = log.ends.keys().filter(|k| !starts.contains_key(k)).count();
    let open = starts.keys().filter(|k| !log.ends.contains_key(k)).count();
    assert_eq!(
        log.starts.len() - open + orphan_ends,
        log.end_records as usize,
        "ends = matched + orphans"
    );

    // The CLI agrees, when it has been built in this target directory.
    if let Some(cli) = framelog_cli() {
        let out = std::process::Command::new(&cli)
            .args(["stats", "--json"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["dropped"].as_u64(), Some(stats.dropped), "{v}");
        assert_eq!(v["frames"].as_u64(), Some(log.starts.len() as u64));
        assert_eq!(v["ends"].as_u64(), Some(log.end_records));
    } else {
        eprintln!("framelog CLI not built; checked with LogReader only");
    }
}

#[test]
fn frame_data_travels_with_the_frames() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StressOptions {
        dir: Some(dir.path().join("log")),
        threads: 2,
        frames: 20_000,
        mode: BufferingMode::Block,
        buffer_kib: 256,
        data_every: 7,
        depth: 2,
        ..Default::default()
    };
    let report = run(&opts).unwrap();
    assert_eq!(report.dropped, 0);
    assert_eq!(report.dropped_data, 0);
    // Frames 0, 7, 14, ... of each thread carry data.
    assert_eq!(report.data_emitted, 2 * 20_000u64.div_ceil(7));
    let mut store = framelog::DataStore::open(opts.dir.as_ref().unwrap()).unwrap();
    assert_eq!(store.len() as u64, report.data_emitted);
    let log = read_log(opts.dir.as_ref().unwrap());
    let with_data: Vec<_> = log
        .starts
        .iter()
        .filter(|s| store.contains(s.key))
        .collect();
    assert_eq!(with_data.len() as u64, report.data_emitted);
    let doc = store.get(with_data[0].key).unwrap().unwrap();
    assert_eq!(
        doc.get_str("sql").unwrap(),
        "select * from user where id = ? and org = ?"
    );
}

#[test]
fn a_recorder_with_retention_leaves_its_log_within_budget() {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = dir.path().join("log");
    let opts = StressOptions {
        dir: Some(log_dir.clone()),
        threads: 2,
        // Packed, a frame is about 5 bytes on disk: 2 M frames to pass twice the budget.
        frames: 1_000_000,
        mode: BufferingMode::Block,
        data_every: 10,
        depth: 2,
        segments: stopwatch::stress::Segments {
            segment_mib: Some(1),
            max_mib: Some(4),
        },
        ..Default::default()
    };
    let report = run(&opts).unwrap();
    assert_eq!(report.dropped, 0, "{report:?}");
    assert!(
        report.written_bytes > 8 << 20,
        "the run wrote more than the budget"
    );
    let bytes: u64 = std::fs::read_dir(&log_dir)
        .unwrap()
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().ends_with(".lock"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    // Within the budget, give or take the live frame-log and data segments.
    assert!(bytes <= (4 + 2) << 20, "{bytes} bytes left");
    // What is left reads as a log: the newest frames, none lost in between.
    let log = read_log(&log_dir);
    assert!(!log.starts.is_empty());
    assert!((log.starts.len() as u64) < opts.frames * 2);
}

/// Records `frames` empty frames on this thread.
fn record(rec: &stopwatch::Recorder, frames: u64) {
    for _ in 0..frames {
        drop(rec.start("frame"));
    }
}

/// Polls `rec`'s directory books until `want` records are written (a generous deadline:
/// the recorder's tick is an hour, so only a wake-up can write them).
fn wait_written(rec: &stopwatch::Recorder, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let written = rec.stats().dir.map_or(0, |d| d.written);
        if written >= want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{written} of {want} records written: the writer was not woken"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn full_buffers_reach_the_log_without_waiting_for_the_writers_tick() {
    // The default pool (64 buffers of ~64 KiB) and an hour's tick: full buffers handed over
    // wake the writer (30,000 frames coded at 5-9 bytes fill two to four buffers, far fewer
    // than half the pool, so no producer runs short and nothing else wakes it).
    let dir = tempfile::tempdir().unwrap();
    let rec = stopwatch::Stopwatch::builder()
        .dir(dir.path())
        .mode(BufferingMode::Block)
        .flush_interval(Duration::from_secs(3600))
        .build()
        .unwrap();
    record(&rec, 30_000);
    // A full buffer's worth at least (each holds over 7,000 frames' two records).
    wait_written(&rec, 2 * 7_000);
    let stats = rec.shutdown();
    assert_eq!(stats.dropped, 0);
    assert_eq!(stats.dir.unwrap().written, 60_000);
}

#[test]
fn producers_out_of_buffers_wake_the_writer_in_both_modes() {
    for mode in [BufferingMode::Block, BufferingMode::Drop] {
        // A tiny pool and an hour's tick: a producer that runs out of buffers gets them
        // back only because it woke the writer (Block waits for them, Drop counts drops
        // meanwhile and writes again once they are back).
        let dir = tempfile::tempdir().unwrap();
        let rec = std::sync::Arc::new(
            stopwatch::Stopwatch::builder()
                .dir(dir.path())
                .mode(mode)
                .buffer_kib(64)
                .flush_interval(Duration::from_secs(3600))
                .build()
                .unwrap(),
        );
        // On its own thread: were the writer never woken, a Block-mode producer would wait
        // for ever, and this test must fail instead.
        let producer = {
            let rec = rec.clone();
            std::thread::spawn(move || record(&rec, 200_000))
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !producer.is_finished() {
            assert!(
                Instant::now() < deadline,
                "{mode:?}: the producer never got its buffers back"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        producer.join().unwrap();
        // Whatever was not dropped is written without waiting for the tick, but for the
        // producer's partly filled buffer (an eighth of the pool, 8 KiB: at most 4,096 coded
        // records of two bytes or more: a fast machine puts over 3,000 there).
        let dropped = rec.stats().dropped;
        wait_written(&rec, (400_000 - dropped).saturating_sub(4_096));
        let rec = std::sync::Arc::into_inner(rec).expect("the producer is gone");
        let stats = rec.shutdown();
        let d = stats.dir.unwrap();
        assert_eq!(d.written + d.dropped, 400_000, "{mode:?}: {stats:?}");
        if mode == BufferingMode::Block {
            assert_eq!(d.dropped, 0, "{stats:?}");
        }
    }
}

/// What a recording thread made, in order, as the log reads it back.
#[derive(Debug, PartialEq)]
enum Made {
    Start { label: String, parent: Option<u32> },
    End,
    Plot(f64),
    Message(String),
}

#[test]
fn records_taken_by_a_flush_mid_buffer_read_back_record_for_record() {
    // A log directory's recorder codes each buffer as its thread writes it, in bodies of at
    // most what one batch unpacks to (a buffer of the default pool holds several). A flush
    // takes what the thread wrote so far (the writer unpacks a piece of a body and writes it
    // as a batch of its own; whole bodies go as they are) and the thread goes on in the same
    // buffer, whose rest is unpacked from there when it is handed over. Every record comes
    // back, in order, with its label, its parent, its value or its text: with small buffers
    // (one body each) and the default ones.
    for pool_kib in [64, 4096] {
        flushed_mid_buffer(pool_kib);
    }
}

fn flushed_mid_buffer(pool_kib: usize) {
    let dir = tempfile::tempdir().unwrap();
    let rec = stopwatch::Stopwatch::builder()
        .dir(dir.path())
        .mode(BufferingMode::Block)
        .buffer_kib(pool_kib)
        .flush_interval(Duration::from_secs(3600))
        .build()
        .unwrap();
    let labels = [
        "a",
        "db/query",
        "a label longer than sixteen bytes, with a middle",
        "x/y/z",
    ];
    let clock = stopwatch::clock::Clock::process();
    let mut want = Vec::new();
    // When each start and plot was made: between two reads of the recorder's clock.
    let mut windows = Vec::new();
    let mut outer_ids = Vec::new();
    for i in 0..40_000usize {
        let t0 = clock.now();
        let outer = rec.start(labels[i % 4]);
        windows.push((t0, clock.now()));
        let outer_id = outer.key().map(|k| k.id).unwrap();
        outer_ids.push(outer_id);
        want.push(Made::Start {
            label: labels[i % 4].into(),
            parent: None,
        });
        if i % 3 == 0 {
            let t0 = clock.now();
            let inner = rec.start(labels[(i + 1) % 4]);
            windows.push((t0, clock.now()));
            drop(inner);
            want.push(Made::Start {
                label: labels[(i + 1) % 4].into(),
                parent: Some(outer_id),
            });
            want.push(Made::End);
        }
        if i % 7 == 0 {
            let t0 = clock.now();
            rec.plot("i", i as f64);
            windows.push((t0, clock.now()));
            want.push(Made::Plot(i as f64));
        }
        if i % 11 == 0 {
            rec.message(&format!("message {i}"));
            want.push(Made::Message(format!("message {i}")));
        }
        drop(outer);
        want.push(Made::End);
        if i % 997 == 0 {
            assert!(rec.flush(Duration::from_secs(60)), "flush {i}");
        }
    }
    let stats = rec.shutdown();
    assert_eq!(stats.dropped, 0);
    let mut got = Vec::new();
    let mut times = Vec::new();
    let mut batches_before = 0;
    framelog::LogReader::open(dir.path())
        .unwrap()
        .read_available(|_, r| match r {
            formats::Record::Start(s) => {
                times.push(s.timestamp);
                got.push(Made::Start {
                    label: s.label.to_owned(),
                    parent: match s.parent {
                        formats::Parent::Frame(p) => Some(p),
                        _ => None,
                    },
                })
            }
            formats::Record::End(_) => got.push(Made::End),
            formats::Record::Plot(p) if p.name == "i" => {
                times.push(p.timestamp);
                got.push(Made::Plot(p.value))
            }
            formats::Record::Message(m) => got.push(Made::Message(m.text.to_owned())),
            formats::Record::ThreadInfo(_) => batches_before += 1,
            _ => {}
        })
        .unwrap();
    // Forty flushes cut the thread's buffers: more batches than full buffers alone make.
    assert!(batches_before > 40, "{batches_before} batches");
    assert_eq!(got.len(), want.len(), "a pool of {pool_kib} KiB");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "record {i}, a pool of {pool_kib} KiB");
    }
    // And each at its time (the coded times are differences from each body's base).
    assert_eq!(times.len(), windows.len());
    for (i, (t, (lo, hi))) in times.iter().zip(&windows).enumerate() {
        assert!(
            (lo..=hi).contains(&t),
            "start or plot {i} at {t}, made between {lo} and {hi} (pool {pool_kib} KiB)"
        );
    }
}
