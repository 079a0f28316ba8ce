//! The directory reader: tails a log directory with [`framelog::LogReader`] on its own
//! thread and hands digested slices to the applier thread (desktop only).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, sync_channel};
use std::time::Duration;
use web_time::Instant;

use framelog::{Error, LogReader};

use crate::apply::{Shared, applier};
use crate::feed::{Batch, ReadState, ReaderStage, WriterWatch};

/// Bytes the reader delivers per `read_some` call.
const SLICE_BYTES: usize = 4 << 20;
/// The first call's: the applier (and the first paint) wait for the first slice, so slices
/// start small and double up to [`SLICE_BYTES`].
const FIRST_SLICE_BYTES: usize = 128 << 10;

/// Reads (and with `follow`, tails) the log in `dir` into `shared`'s model.
pub(super) fn run(dir: &Path, follow: bool, shared: &Shared) {
    let stopped = || shared.stop.load(Ordering::Relaxed);
    // Open, waiting for the log to appear if it is not there yet.
    let mut reader = loop {
        match LogReader::open(dir) {
            Ok(r) => {
                let mut status = shared.status();
                status.errors.clear();
                status.waiting = None;
                drop(status);
                break r;
            }
            Err(e @ Error::NotALog(_)) if follow && is_empty_dir(dir) => {
                // framelog's words ("PATH: holds no frames yet (an empty directory: …)"),
                // and what the window does about it.
                let note = format!("{e}; waiting for programs to write or connect");
                let mut status = shared.status();
                // It was missing or a file before: that is over.
                status.errors.clear();
                if status.waiting.as_ref() != Some(&note) {
                    status.waiting = Some(note);
                    drop(status);
                    shared.repaint();
                }
                for _ in 0..10 {
                    if stopped() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            Err(e) => {
                // framelog's words: "PATH: no such directory", "PATH: a file, not a log
                // directory", "PATH: not a framelog directory (…)".
                let msg = match &e {
                    Error::NotALog(_) if follow => format!("{e}; waiting for a log to appear"),
                    other => other.to_string(),
                };
                shared.status().waiting = None;
                shared.push_error(msg);
                shared.repaint();
                if !follow {
                    shared.status().finished = true;
                    return;
                }
                for _ in 0..10 {
                    if stopped() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    };
    // Two stages on two threads: this one reads and copies records, the applier indexes them
    // into the model, so disk reads and decoding overlap with model updates. Eight slices in
    // flight (~0.4 s of the applier's work): with three, the reader's slow moments (a paint
    // taking its core) left the applier waiting 0.5 s of a 100 M-frame load, and 0.3 s less
    // with eight.
    let (tx, rx) = sync_channel::<(Batch, ReadState)>(8);
    let (recycle_tx, recycle_rx) = channel::<Batch>();
    let mut digest = ReaderStage::default();
    std::thread::scope(|scope| {
        scope.spawn(|| applier(shared, rx, recycle_tx, &stopped, &|_| {}));
        let mut last_sent: Option<(ReadState, Instant)> = None;
        let mut liveness = Liveness::default();
        let mut slice = FIRST_SLICE_BYTES;
        loop {
            if stopped() {
                return;
            }
            let mut buf = recycle_rx.try_recv().unwrap_or_default();
            buf.clear();
            let result = reader.read_some_labelled(
                slice,
                IntoBatch {
                    digest: &mut digest,
                    batch: &mut buf,
                },
            );
            slice = (slice * 2).min(SLICE_BYTES);
            // Segments deleted (retention) before they were read: say the log starts later.
            let pruned = reader.pruned_segments();
            if pruned != shared.status().pruned_segments {
                shared.status().pruned_segments = pruned;
                shared.repaint();
            }
            // Damaged bytes were skipped (reading went on at the next valid batch): say where,
            // and when (the newest time read before them) for the frames whose ends they held.
            for d in reader.take_damage() {
                buf.damage.push((d.newest_before, d.to_string()));
                shared.push_error(d.to_string());
                shared.repaint();
            }
            let delivered = match result {
                Ok(n) => n,
                Err(e) => {
                    // A segment this reader refuses (bad header, newer version): skip it.
                    shared.push_error(e.to_string());
                    shared.repaint();
                    if matches!(e, Error::Corrupt { .. }) {
                        reader.skip_segment();
                    } else {
                        std::thread::sleep(Duration::from_millis(200));
                    }
                    u64::MAX
                }
            };
            let state = ReadState {
                bytes_read: reader.bytes_read(),
                total_bytes: reader.total_bytes().unwrap_or(0),
                at_end: delivered == 0 || (delivered != u64::MAX && !reader.has_new_bytes()),
            };
            digest.expect_bytes(state.bytes_read, state.total_bytes);
            let caught_up = delivered == 0;
            if caught_up && follow {
                // Everything the writers found stopped wrote has been read now.
                digest.stop_writers(&mut buf);
            }
            // Send data, state changes, and a heartbeat once a second (for the rate display).
            let due = last_sent.is_none_or(|(st, at)| st != state || at.elapsed().as_secs() >= 1);
            if !buf.is_empty() || !buf.stopped_workers.is_empty() || !buf.damage.is_empty() || due {
                if tx.send((buf, state)).is_err() {
                    return;
                }
                last_sent = Some((state, Instant::now()));
            }
            if delivered == 0 {
                if !follow {
                    drop(tx);
                    return;
                }
                // A live tail reads small slices: let the load's big buffers go.
                while recycle_rx.try_recv().is_ok() {}
                if liveness.probe(dir, &mut digest.writers) {
                    // Read to the end once more before calling them stopped.
                    continue;
                }
                // Caught up: wait for the log to grow (notify, with a polling fallback).
                if reader.wait_for_growth(Duration::from_millis(200)).is_err() {
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    });
    if !follow {
        shared.status().finished = true;
        shared.repaint();
    }
}

/// Which writing processes are still alive: a process holds its worker slot's lock while it
/// writes, and the OS releases it when the process dies, even by SIGKILL.
#[derive(Default)]
struct Liveness {
    last_probe: Option<Instant>,
}

impl Liveness {
    /// At most once a second: looks at each writer's slot lock; true if any was found
    /// stopped (and not reported yet).
    fn probe(&mut self, dir: &Path, watch: &mut WriterWatch) -> bool {
        if self
            .last_probe
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return false;
        }
        self.last_probe = Some(Instant::now());
        for w in watch.writers() {
            // An unreadable slot file is not proof of death: keep the worker.
            if let Ok(writing) = framelog::is_writing(dir, w) {
                watch.observe(w, writing);
            }
        }
        watch.any_stopped()
    }
}

/// True if `dir` is a directory that holds nothing: a log still to come, not a problem
/// (a missing directory or a file is one: the window says so).
fn is_empty_dir(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none())
}

/// The reader stage as the log reader's sink: each record digested into the batch. Its
/// `record` is always inlined, so a compact block's records are digested inside the decoder's
/// hand-out loop, with no call per record.
struct IntoBatch<'a> {
    digest: &'a mut ReaderStage,
    batch: &'a mut Batch,
}

impl framelog::RecordHandler for IntoBatch<'_> {
    #[inline(always)]
    fn record(&mut self, _: framelog::Position, rec: formats::Record<'_>, key: formats::LabelKey) {
        self.digest.push_keyed(&rec, key, self.batch);
    }
}
