//! Waiting for a log directory to change: file-system notifications, with a polling fallback.

use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};

/// How often to look again when notifications are unavailable or missed.
const POLL: Duration = Duration::from_millis(50);

/// Wakes a follower when something in a log directory changes.
pub struct DirWatch {
    // Kept alive for as long as events are wanted.
    _watcher: Option<notify::RecommendedWatcher>,
    events: Option<Receiver<()>>,
}

impl DirWatch {
    /// Watches `dir`; falls back to polling if the platform watcher cannot be set up.
    pub fn new(dir: &Path) -> Self {
        let (tx, rx) = channel();
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if res.is_ok() {
                let _ = tx.send(());
            }
        })
        .and_then(|mut w| w.watch(dir, RecursiveMode::NonRecursive).map(|()| w));
        match watcher {
            Ok(w) => Self {
                _watcher: Some(w),
                events: Some(rx),
            },
            Err(_) => Self {
                _watcher: None,
                events: None,
            },
        }
    }

    /// Blocks until `changed()` is true or `timeout` passes; returns the last `changed()`.
    pub fn wait_until(&self, timeout: Duration, mut changed: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if changed() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            let slice = (deadline - now).min(POLL);
            match &self.events {
                Some(rx) => match rx.recv_timeout(slice) {
                    // Drain bursts so one wake-up handles them all.
                    Ok(()) => while rx.try_recv().is_ok() {},
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => std::thread::sleep(slice),
                },
                None => std::thread::sleep(slice),
            }
        }
    }
}
