//! [`Sink`]: where a recorder's bytes go, and the messages its writer thread receives.
//!
//! Contract of a sink:
//! - **Who calls it.** Only the recorder's writer thread calls `append_frames` and
//!   `append_data`, one call at a time; `reserve_ids` is called from recording threads (rarely:
//!   once per 65,536 frames of the process), possibly concurrently; `worker` once at build.
//! - **What it gets.** `append_batches` gets a run of whole checksummed batches (each a
//!   `batch` record and its records, `docs/FORMAT.md` "Frame-log batches"), in the order the
//!   writer wants them in the log; a sink that wants plain records keeps the default, which
//!   strips the framing and calls `append_frames` with whole encoded frame-log records (never
//!   a partial one). `append_data` gets BSON documents keyed by frame.
//! - **What an error means.** An `append_*` error is final for the recorder: it is reported
//!   once through `on_error`, Block-mode producers are released, and every later record is
//!   counted as dropped. A `reserve_ids` error is reported once; ids then continue
//!   unpersisted. A sink must not call back into the recorder that owns it.
//! - **The end.** `close` is called once, by the writer thread, after its final write.

use std::sync::Arc;

use crossbeam_channel::Sender;
use formats::{FrameKey, Record, RecordIter};

use crate::buffer::{Buf, Pos};
use crate::error::SinkError;
use crate::slot::Slot;

/// Where a recorder's bytes go: the framelog `LogWriter` in production, memory in tests.
pub trait Sink: Send + Sync + 'static {
    /// The worker id of this process in the log.
    fn worker(&self) -> u8;
    /// The first of `count` ids this worker never used in the log.
    fn reserve_ids(&self, count: u32) -> Result<u32, SinkError>;
    /// Appends whole encoded frame-log records.
    fn append_frames(&self, records: &[u8]) -> Result<(), SinkError>;
    /// Appends a run of whole batches (batch records with their bodies) the writer framed
    /// and checksummed; by default, their records go to [`Sink::append_frames`] unframed.
    fn append_batches(&self, batches: &[u8]) -> Result<(), SinkError> {
        self.append_frames(&unframe(batches)?)
    }
    /// Whether [`Sink::append_batches`] takes packed batches (`docs/FORMAT.md`, *Packed
    /// batches*): the writer thread then packs each thread's buffer as it frames it, and
    /// recording threads skip their buffer's checksum (only the packed body's is written).
    fn packs(&self) -> bool {
        false
    }
    /// Appends frame-data entries (BSON documents).
    fn append_data(&self, entries: &[(FrameKey, Vec<u8>)]) -> Result<(), SinkError>;
    /// Called once after the writer's final pass (a stream sends its End here).
    fn close(&self) {}
    /// Applies the log's retention limits (deletes its oldest sealed segments), if any.
    fn prune(&self) -> Result<(), SinkError> {
        Ok(())
    }
}

impl Sink for framelog::LogWriter {
    fn worker(&self) -> u8 {
        framelog::LogWriter::worker(self)
    }

    fn reserve_ids(&self, count: u32) -> Result<u32, SinkError> {
        Ok(framelog::LogWriter::reserve_ids(self, count)?)
    }

    fn append_frames(&self, records: &[u8]) -> Result<(), SinkError> {
        Ok(framelog::LogWriter::append_frames(self, records)?)
    }

    fn append_batches(&self, batches: &[u8]) -> Result<(), SinkError> {
        Ok(framelog::LogWriter::append_batches(self, batches)?)
    }

    fn packs(&self) -> bool {
        framelog::LogWriter::packs(self)
    }

    fn append_data(&self, entries: &[(FrameKey, Vec<u8>)]) -> Result<(), SinkError> {
        let mut batch = framelog::DataBatch::new();
        for (key, doc) in entries {
            batch.push(*key, doc);
        }
        Ok(framelog::LogWriter::append_data(self, &batch)?)
    }

    fn prune(&self) -> Result<(), SinkError> {
        framelog::LogWriter::prune(self)?;
        Ok(())
    }
}

/// Messages to the writer thread.
pub(crate) enum Msg {
    /// A producer's full (or final) buffer: write `from..to` (positions: bytes and record
    /// counts), whose CRC32C is `crc` (computed unless the sink packs), as one batch, then
    /// recycle it.
    Full {
        slot: Arc<Slot>,
        buf: Box<Buf>,
        from: Pos,
        to: Pos,
        crc: Option<u32>,
    },
    /// Whole records made by a thread whose own buffers are gone (it is exiting): written
    /// under thread number 0 (they are FrameEnds, whose thread is their FrameStart's).
    Late(Vec<u8>),
    /// Frame data is piling up: take it now rather than at the next tick.
    DataWaiting,
    /// Write everything committed so far; answer when done (if a channel is given).
    Flush(Option<Sender<()>>),
    /// Write everything and exit.
    Shutdown,
}

/// One frame-data update.
pub(crate) struct DataMsg {
    pub(crate) key: FrameKey,
    pub(crate) document: Vec<u8>,
}

/// The records of a run of whole batches (packed ones unpacked), without their framing.
pub(crate) fn unframe(batches: &[u8]) -> Result<Vec<u8>, SinkError> {
    let mut plain = Vec::with_capacity(batches.len());
    let mut each = Vec::new();
    formats::check_batches(batches, |h, body| each.push((*h, body)))
        .map_err(|at| format!("not whole batches at byte {at}"))?;
    let mut unpacked = Vec::new();
    for (h, body) in each {
        if h.packed {
            let at = body.start - formats::BATCH_RECORD_LEN;
            formats::packed::unpack(
                h.worker,
                h.timestamp,
                h.count,
                &batches[body],
                &mut unpacked,
            )
            .map_err(|e| format!("the packed batch at byte {at}: {e}"))?;
            plain.extend_from_slice(&unpacked);
        } else {
            plain.extend_from_slice(&batches[body]);
        }
    }
    Ok(plain)
}

/// Counts the frame records (starts and ends) in whole encoded records.
pub(crate) fn count_frame_records(bytes: &[u8]) -> u64 {
    RecordIter::new(bytes, 0)
        .filter(|r| matches!(r, Ok((_, Record::Start(_) | Record::End(_)))))
        .count() as u64
}
