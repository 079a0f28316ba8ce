//! `--demo`: records a realistic workload into a temporary log while the window follows it.
//!
//! Until the stopwatch crate's demo workload is wired in, the demo writes the synthetic
//! web-server workload of [`crate::synth`] in real time: every 100 ms a burst of requests
//! and jobs on four threads, stamped with the current time, with query data attached.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use framelog::{DataBatch, LogWriter, WriterOptions};

use crate::synth::{SynthOptions, generate};

/// A running demo: its temporary log directory and the threads writing it.
pub struct Demo {
    dir: tempfile::TempDir,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Demo {
    /// Creates a temporary log directory and starts recording into it.
    pub fn start() -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("framelog-demo-").tempdir()?;
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
    let mut seed = 1u64;
    let mut data = DataBatch::new();
    while !stop.load(Ordering::Relaxed) {
        seed += 1;
        let opts = SynthOptions {
            frames: 400,
            threads: 4,
            seed,
            start_ns: now_ns(),
            with_data: true,
            process_name: "demo-server".into(),
        };
        let Ok(first) = w.reserve_ids(512) else { return };
        data.clear();
        let mut failed = false;
        generate(
            &opts,
            w.worker(),
            first,
            |bytes| failed |= w.append_frames(bytes).is_err(),
            |key, doc| data.push(key, doc),
        );
        if failed || (!data.is_empty() && w.append_data(&data).is_err()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
