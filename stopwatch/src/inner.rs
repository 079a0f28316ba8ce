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
use crate::connect::stream::{Outputs, RemoteStream};
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
    /// A poll at least this long is a slow poll (`Builder::slow_poll`).
    pub(crate) slow_poll_ns: u64,
    pub(crate) ids: IdSource,
    pub(crate) sink: Arc<dyn Sink>,
    /// `sink.packs()`, read once: recording threads then skip their buffers' checksums.
    pub(crate) packs: bool,
    pub(crate) msgs: Sender<Msg>,
    pub(crate) data_tx: Sender<DataMsg>,
    /// Frame-data buffers the writer is done with, for producers to fill again: a document
    /// allocated on one thread and freed on the writer's costs both a contended allocator lock.
    pub(crate) spare_data: (Sender<Vec<u8>>, crossbeam_channel::Receiver<Vec<u8>>),
    /// A `DataWaiting` wake-up was sent and the writer has not taken the data since.
    pub(crate) data_wake_sent: AtomicBool,
    pub(crate) slots: Mutex<Vec<Arc<Slot>>>,
    /// Thread number 0: late records (`Msg::Late`, a thread's teardown) are written under it,
    /// and its seal and `pending` count them through the final pass like any slot's.
    pub(crate) late: Arc<Slot>,
    /// Drops of slots the writer has forgotten (their threads exited).
    pub(crate) retired_dropped: AtomicU64,
    /// Records lost because the writer could not write them.
    pub(crate) writer_dropped: AtomicU64,
    /// Plot, message and frame-allocation records discarded, wherever (kept out of the
    /// frame books).
    pub(crate) dropped_other: AtomicU64,
    pub(crate) dropped_data: AtomicU64,
    pub(crate) written_bytes: AtomicU64,
    /// When the writer last flushed (ns since the epoch).
    pub(crate) last_flush_ns: AtomicU64,
    pub(crate) flush_interval: Duration,
    pub(crate) closed: AtomicBool,
    /// Set by the writer (under the slots lock) when it begins its final pass: a slot
    /// registered from then on is born sealed (`Slot`, shutdown rule).
    pub(crate) final_pass: AtomicBool,
    /// Set by the writer when it stops writing (I/O error or panic).
    pub(crate) writer_failed: AtomicBool,
    pub(crate) reporter: Arc<Reporter>,
    pub(crate) writer_thread: Mutex<Option<JoinHandle<()>>>,
    pub(crate) dir: Option<PathBuf>,
    /// The session's stream, in connect mode.
    pub(crate) remote: Option<Arc<RemoteStream>>,
    /// The sink of a connecting recorder (its directory's books), in connect mode.
    pub(crate) outputs: Option<Arc<Outputs>>,
    /// Frame records the sink took (a recorder that does not connect: its directory's).
    pub(crate) written_records: AtomicU64,
}

impl Inner {
    /// Adds a thread's slot to the writer's list.
    pub(crate) fn register_slot(&self, slot: Arc<Slot>) {
        let mut slots = self.lock_slots();
        // Read under the slots lock, which the writer holds as it sets the flag and seals
        // the slots it knows: a slot is either sealed by that pass or born sealed.
        if self.final_pass.load(Ordering::SeqCst) {
            slot.lock().sealed = true;
        }
        slots.push(slot);
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
            .chain(std::iter::once(&self.late))
            .map(|s| s.dropped.load(Ordering::Relaxed))
            .sum();
        drop(slots);
        // Lost before any output: every output counts them as dropped.
        let dropped = live
            + self.retired_dropped.load(Ordering::Relaxed)
            + self.writer_dropped.load(Ordering::Relaxed);
        let stream = self.remote.as_ref().map(|r| SinkStats {
            written: r.written(),
            dropped,
            unsent: r.unsent(),
        });
        let local = self.outputs.as_ref().map(|o| o.local_books());
        let dir = match &local {
            // Connecting: the directory beside the stream, if any, keeps its own books.
            Some(books) => self
                .outputs
                .as_ref()
                .and_then(|o| o.local.as_ref())
                .map(|_| SinkStats {
                    written: books.written,
                    dropped: dropped + books.lost,
                    unsent: 0,
                }),
            None => Some(SinkStats {
                written: self.written_records.load(Ordering::Relaxed),
                dropped,
                unsent: 0,
            }),
        };
        Stats {
            dropped: dir.map_or(dropped, |d| d.dropped),
            dropped_other: self.dropped_other.load(Ordering::Relaxed),
            dropped_data: self.dropped_data.load(Ordering::Relaxed)
                + local.map_or(0, |b| b.lost_data),
            unsent_data: self.remote.as_ref().map_or(0, |r| r.unsent_data()),
            written_bytes: self.written_bytes.load(Ordering::Relaxed),
            writer_failed: self.writer_failed.load(Ordering::Relaxed)
                || local.is_some_and(|b| b.failed),
            unsent: self.remote.as_ref().map_or(0, |r| r.unsent()),
            dir,
            stream,
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
///
/// Each output keeps its own books ([`Stats::dir`], [`Stats::stream`]): for each, frame
/// records recorded = `written + dropped + unsent`, exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Frame-log records (starts and ends) discarded: pool exhausted in Drop mode, released
    /// by shutdown or writer failure in Block mode, or unwritable after a writer error. With
    /// a log directory this is the directory's count ([`Stats::dir`]); a streaming-only
    /// recorder's is the stream's.
    pub dropped: u64,
    /// Frame-data updates discarded.
    pub dropped_data: u64,
    /// Plot, message and frame-allocation records discarded (for the same reasons as
    /// `dropped`); not part of any output's books, which count frame records.
    pub dropped_other: u64,
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
    /// The log directory's books (`None` without one).
    pub dir: Option<SinkStats>,
    /// The stream's books (`None` for a recorder that does not connect).
    pub stream: Option<SinkStats>,
}

/// One output's books, in frame-log records (starts and ends): what it has, what was
/// dropped for it (its log holds Dropped records saying so, as far as it could be written),
/// and what a stream could not carry. `written + dropped + unsent` = records recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct SinkStats {
    /// Records in the output's log: appended to the directory; for a stream, acknowledged
    /// by the server as appended to its log (StartSession v3 and later), or written whole
    /// to the connection (v1, v2).
    pub written: u64,
    /// Records discarded before reaching the output (pool exhausted, a thread still
    /// recording as the recorder shut down), or, for the directory, after it failed.
    pub dropped: u64,
    /// Stream only: records no session took (held past the pool's size, or at exit) or a
    /// failed stream did not get into the server's log.
    pub unsent: u64,
}

impl SinkStats {
    /// Records accounted for: `written + dropped + unsent` (every record recorded).
    pub fn recorded(&self) -> u64 {
        self.written + self.dropped + self.unsent
    }
}

impl Inner {
    /// Counts what a call that got no thread entry (`local::entry`: re-entered
    /// while the thread was being registered, or made during its teardown) would have
    /// written: `frame_records` starts and ends in the books (and the log's dropped markers,
    /// under thread 0), `others` among the other records.
    #[cold]
    pub(crate) fn count_refused(&self, frame_records: u64, others: u64) {
        if frame_records > 0 {
            self.late.count_dropped_shared(frame_records);
        }
        if others > 0 {
            self.dropped_other.fetch_add(others, Ordering::Relaxed);
        }
    }

    /// Counts the records between two positions of a buffer as lost by the writer: frame
    /// records in the books, others apart.
    pub(crate) fn count_lost(&self, from: crate::buffer::Pos, to: crate::buffer::Pos) {
        use crate::buffer::{pos_frames, pos_others};
        let frames = pos_frames(to).wrapping_sub(pos_frames(from));
        let others = pos_others(to).wrapping_sub(pos_others(from));
        self.writer_dropped
            .fetch_add(u64::from(frames), Ordering::Relaxed);
        self.dropped_other
            .fetch_add(u64::from(others), Ordering::Relaxed);
    }

    /// Sends one record made where no thread buffer exists (a thread's teardown) straight to
    /// the writer; false if it could not be (too long, or the writer is gone).
    pub(crate) fn send_late(&self, rec: &dyn Encode) -> bool {
        // Only FrameEnds (25 bytes) and short FrameStarts take this path.
        let mut tmp = [0u8; 512];
        let Some(n) = rec.encode_into(&mut tmp) else {
            return false;
        };
        // The late slot's seal and pending count, as for a hand-off (`Slot`, shutdown rule):
        // the writer's final pass either waits for this record or it is counted.
        {
            let mut st = self.late.lock();
            if st.sealed {
                return false;
            }
            st.pending += 1;
        }
        if self.msgs.send(Msg::Late(tmp[..n].to_vec())).is_err() {
            self.late.lock().pending -= 1;
            return false;
        }
        true
    }

    /// Encodes `value` as frame `key`'s data (on the caller's thread) and queues it.
    pub(crate) fn send_frame_data<T: Serialize + ?Sized>(&self, key: FrameKey, value: &T) {
        if !self.gate.records_data() {
            return;
        }
        match self.encode_document(value) {
            Some(document) => self.send_data(DataMsg { key, document }),
            None => {
                self.dropped_data.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Encodes `value` as one BSON document (frame data, message fields); a value that
    /// cannot be is reported (`Error::Data`) and gives `None`.
    pub(crate) fn encode_document<T: Serialize + ?Sized>(&self, value: &T) -> Option<Vec<u8>> {
        match formats::to_document(value) {
            Ok(document) => Some(document),
            Err(e) => {
                self.reporter.report(Error::Data(e.to_string()));
                None
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
