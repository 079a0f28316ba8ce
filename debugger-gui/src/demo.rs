//! `--demo`: records a realistic workload into a temporary log while the window follows it.
//!
//! [`Demo::start`] runs the stopwatch crate's demo workload ([`stopwatch::demo::run`]: an
//! HTTP-like server on a thread pool and async tasks, database queries with their SQL as frame
//! data, templates, e-mails and jobs) on a background thread, in this process.
//! [`Demo::start_synthetic`] writes the synthetic workload of [`crate::synth`] in real time
//! instead (no stopwatch involved).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use framelog::{DataBatch, LogWriter, WriterOptions};

use crate::synth::{Generator, SynthOptions};

/// A running demo: its temporary log directory and the threads writing it.
pub struct Demo {
    dir: tempfile::TempDir,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    error: Arc<Mutex<Option<String>>>,
}

impl Demo {
    /// Creates a temporary log directory and runs the stopwatch demo workload into it.
    pub fn start() -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("framelog-demo-")
            .tempdir()?;
        let stop = Arc::new(AtomicBool::new(false));
        let error: Arc<Mutex<Option<String>>> = Arc::default();
        let opts = stopwatch::demo::DemoOptions {
            dir: Some(dir.path().to_owned()),
            duration: None,
            threads: 4,
            requests_per_sec: 200,
            stop: stop.clone(),
            ..Default::default()
        };
        let err = error.clone();
        let handle = std::thread::Builder::new()
            .name("demo-workload".into())
            .spawn(move || {
                if let Err(e) = stopwatch::demo::run(opts) {
                    *err.lock() = Some(format!("the demo workload stopped: {e}"));
                }
            })?;
        Ok(Self {
            dir,
            stop,
            threads: vec![handle],
            error,
        })
    }

    /// Why the workload stopped, if it failed.
    pub fn error(&self) -> Option<String> {
        self.error.lock().clone()
    }

    /// Like [`Demo::start`], with the synthetic workload of [`crate::synth`] in real time.
    pub fn start_synthetic() -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("framelog-demo-")
            .tempdir()?;
        let writer = LogWriter::open_with(
            dir.path(),
            WriterOptions {
                process_name: Some("demo-server".into()),
                ..Default::default()
            },
        )?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name("demo-workload".into())
            .spawn(move || live_synth(&writer, &s))?;
        Ok(Self {
            dir,
            stop,
            threads: vec![handle],
            error: Arc::default(),
        })
    }

    /// The log directory being written.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The log directory as an owned path.
    pub fn path(&self) -> PathBuf {
        self.dir.path().to_owned()
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn live_synth(w: &LogWriter, stop: &AtomicBool) {
    const IDS: u32 = 1 << 20;
    let Ok(mut first) = w.reserve_ids(IDS) else {
        return;
    };
    let opts = SynthOptions {
        threads: 4,
        start_ns: now_ns(),
        with_data: true,
        process_name: "demo-server".into(),
        gap_ns: (50_000, 1_500_000),
        ..Default::default()
    };
    let mut g = Generator::new(&opts, w.worker(), first);
    let mut data = DataBatch::new();
    let mut out = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let now = now_ns();
        // Never idle in the past, never run far into the future.
        g.catch_up(now.saturating_sub(50_000_000));
        data.clear();
        out.clear();
        while g.min_clock() < now {
            if g.next_id().wrapping_sub(first) > IDS - 1_000 {
                let Ok(f) = w.reserve_ids(IDS) else { return };
                first = f;
                g.set_next_id(f);
            }
            g.unit(&mut |key, doc| data.push(key, doc), &mut out);
        }
        g.flush_all(&mut out);
        if (!out.is_empty() && w.append_frames(&out).is_err())
            || (!data.is_empty() && w.append_data(&data).is_err())
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(30));
    }
}
