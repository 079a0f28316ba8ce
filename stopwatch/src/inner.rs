//! [`Inner`]: the state one recorder shares between its handles, the recording threads and
//! its writer thread; and its counters, [`Stats`].

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Sender;
use formats::{Category, FrameKey};
use serde::Serialize;

use crate::buffer::Encode;
use crate::clock::Clock;
use crate::connect::stream::RemoteStream;
use crate::error::{Error, Reporter};
use crate::gate::Gate;
use crate::ids::IdSource;
use crate::pool::Pool;
use crate::sampling::Sampler;
use crate::sink::{DataMsg, Msg, Sink};
use crate::slot::Slot;

/// Shared state of one recorder.
pub(crate) struct Inner {
    pub(crate) worker: u8,
    pub(crate) clock: &'static Clock,
    pub(crate) pool: Pool,
    pub(crate) sampler: Sampler,
    /// What a remote session lets through.
    pub(crate) gate: Arc<Gate>,
    pub(crate) default_category: Category,
    pub(crate) ids: IdSource,
    pub(crate) sink: Arc<dyn Sink>,
    pub(crate) msgs: Sender<Msg>,
    pub(crate) data_tx: Sender<DataMsg>,
    /// Frame-data buffers the writer is done with, for producers to fill again: a document
    /// allocated on one thread and freed on the writer's costs both a contended allocator lock.
    pub(crate) spare_data: (Sender<Vec<u8>>, crossbeam_channel::Receiver<Vec<u8>>),
    /// A `DataWaiting` wake-up was sent and the writer has not taken the data since.
    pub(crate) data_wake_sent: AtomicBool,
    pub(crate) slots: Mutex<Vec<Arc<Slot>>>,
    /// Drops of slots the writer has forgotten (their threads exited).
    pub(crate) retired_dropped: AtomicU64,
    /// Records lost because the writer could not write them.
    pub(crate) writer_dropped: AtomicU64,
    pub(crate) dropped_data: AtomicU64,
    pub(crate) written_bytes: AtomicU64,
    /// When the writer last flushed (ns since the epoch).
    pub(crate) last_flush_ns: AtomicU64,
    pub(crate) flush_interval: Duration,
    pub(crate) closed: AtomicBool,
    /// Set by the writer when it begins its final pass: a buffer handed over from then on
    /// would never be read, so its records are counted as dropped instead of sent.
    pub(crate) final_pass: AtomicBool,
    /// Set by the writer when it stops writing (I/O error or panic).
    pub(crate) writer_failed: AtomicBool,
    pub(crate) reporter: Arc<Reporter>,
    pub(crate) writer_thread: Mutex<Option<JoinHandle<()>>>,
    pub(crate) dir: Option<PathBuf>,
    /// The session's stream, in connect mode.
    pub(crate) remote: Option<Arc<RemoteStream>>,
}

impl Inner {
    /// Adds a thread's slot to the writer's list.
    pub(crate) fn register_slot(&self, slot: Arc<Slot>) {
        self.lock_slots().push(slot);
    }

    /// The writer's list of slots.
    pub(crate) fn lock_slots(&self) -> MutexGuard<'_, Vec<Arc<Slot>>> {
        self.slots.lock()
    }

    /// The recorder's counters now.
    pub(crate) fn stats(&self) -> Stats {
        let slots = self.lock_slots();
        let live: u64 = slots
            .iter()
            .map(|s| s.dropped.load(Ordering::Relaxed))
            .sum();
        Stats {
            dropped: live
                + self.retired_dropped.load(Ordering::Relaxed)
                + self.writer_dropped.load(Ordering::Relaxed),
            dropped_data: self.dropped_data.load(Ordering::Relaxed),
            unsent_data: self.remote.as_ref().map_or(0, |r| r.unsent_data()),
            written_bytes: self.written_bytes.load(Ordering::Relaxed),
            writer_failed: self.writer_failed.load(Ordering::Relaxed),
            unsent: self.remote.as_ref().map_or(0, |r| r.unsent()),
        }
    }

    /// Asks the writer to write everything committed; waits up to `timeout` for it.
    pub(crate) fn flush(&self, timeout: Duration) -> bool {
        let (tx, rx) = crossbeam_channel::bounded(1);
        if self.msgs.send(Msg::Flush(Some(tx))).is_err() {
            return false;
        }
        rx.recv_timeout(timeout).is_ok()
    }

    /// Writes everything and stops the writer thread (idempotent).
    pub(crate) fn shutdown(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let _ = self.msgs.send(Msg::Shutdown);
        let handle = self.writer_thread.lock().take();
        // An error callback running on the writer thread may drop the last handle: the
        // writer then finishes on its own once the callback returns (it got Shutdown).
        if let Some(h) = handle
            && h.thread().id() != std::thread::current().id()
        {
            let _ = h.join();
        }
        self.pool.abort();
        self.pool.release_memory();
        self.reporter.deliver();
    }
}

/// Counters of a recorder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Frame-log records (starts and ends) discarded: pool exhausted in Drop mode, released
    /// by shutdown or writer failure in Block mode, or unwritable after a writer error.
    pub dropped: u64,
    /// Frame-data updates discarded.
    pub dropped_data: u64,
    /// Bytes of frame-log records written.
    pub written_bytes: u64,
    /// Whether the writer has failed (records are being counted as dropped).
    pub writer_failed: bool,
    /// Frame-log records a remote session's stream could not carry (the server vanished or
    /// stalled, or no session started before the program ended); sent as a Dropped record
    /// at the start of the next session. Records recorded = written + `dropped` + `unsent`.
    pub unsent: u64,
    /// Frame-data updates a remote session's stream could not carry.
    pub unsent_data: u64,
}

impl Inner {
    /// Sends one record made where no thread buffer exists (a thread's teardown) straight to
    /// the writer; false if it could not be (too long, or the writer is gone).
    pub(crate) fn send_late(&self, rec: &dyn Encode) -> bool {
        // Only FrameEnds (25 bytes) and short FrameStarts take this path.
        if self.final_pass.load(Ordering::SeqCst) {
            return false;
        }
        let mut tmp = [0u8; 512];
        match rec.encode_into(&mut tmp) {
            Some(n) => self.msgs.send(Msg::Late(tmp[..n].to_vec())).is_ok(),
            None => false,
        }
    }

    /// Encodes `value` as frame `key`'s data (on the caller's thread) and queues it.
    pub(crate) fn send_frame_data<T: Serialize + ?Sized>(&self, key: FrameKey, value: &T) {
        if !self.gate.records_data() {
            return;
        }
        match formats::to_document(value) {
            Ok(document) => self.send_data(DataMsg { key, document }),
            Err(e) => {
                self.dropped_data.fetch_add(1, Ordering::Relaxed);
                self.reporter.report(Error::Data(e.to_string()));
            }
        }
    }

    /// An empty buffer for a frame-data document: one the writer is done with, if any.
    #[cfg(feature = "tracing")]
    pub(crate) fn data_buffer(&self) -> Vec<u8> {
        let mut buf = self.spare_data.1.try_recv().unwrap_or_default();
        buf.clear();
        buf
    }

    /// Queues one frame-data update per the buffering mode (counted as dropped if it is not).
    pub(crate) fn send_data(&self, msg: DataMsg) {
        if !self.pool.send_per_mode(&self.data_tx, msg) {
            self.dropped_data.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // The writer takes data at its ticks: a send does not wake it (a wake-up per update
        // cost more than the update). A quarter of the queue waiting wakes it once, until it
        // has taken what is queued (a flag, not a count: senders racing past the mark, or
        // parked on a full queue in Block mode, must not miss the wake-up).
        let quarter = self.data_tx.capacity().map_or(1, |c| (c / 4).max(1));
        if self.data_tx.len() >= quarter && !self.data_wake_sent.swap(true, Ordering::AcqRel) {
            let _ = self.msgs.send(Msg::DataWaiting);
        }
    }
}
