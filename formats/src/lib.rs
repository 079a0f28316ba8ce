//! The byte layouts of a framelog log directory (format versions 1 to 7).
//!
//! This crate is the contract other tools read: file headers, frame-log records
//! ([`FrameStart`], [`FrameEnd`], extension records), frame-data entries and index entries.
//! It encodes into caller-provided buffers and decodes from byte slices; it never does I/O.
//! The authoritative description is `docs/FORMAT.md` at the repository root; [`protocol`] holds
//! the remote-session messages of `docs/PROTOCOL.md`. Where this crate sits among the
//! others, and the paths through them: `docs/ARCHITECTURE.md`.
//!
//! ```
//! use formats::{Category, Decoded, FrameEnd, FrameStart, Parent, Record, decode_record};
//!
//! // A frame's start and end, encoded back to back into one buffer.
//! let start = FrameStart {
//!     id: 1,
//!     worker: 0,
//!     timestamp: 1_700_000_000_000_000_000,
//!     context: 1,
//!     category: Category::DATABASE,
//!     label: "db/query",
//!     parent: Parent::Root,
//! };
//! let mut buf = Vec::new();
//! Record::Start(start).encode_to_vec(&mut buf);
//! Record::End(FrameEnd { id: 1, worker: 0, timestamp: start.timestamp + 1500 })
//!     .encode_to_vec(&mut buf);
//!
//! // Decoding gives the same records, with their lengths.
//! let Decoded::Record(Record::Start(back), len) = decode_record(&buf)? else { unreachable!() };
//! assert_eq!((back.label, back.parent), ("db/query", Parent::Root));
//! assert!(matches!(decode_record(&buf[len..])?, Decoded::Record(Record::End(_), 14)));
//! # Ok::<(), formats::DecodeError>(())
//! ```

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod batch;
pub mod bson_check;
mod category;
#[cfg(feature = "compact")]
#[cfg_attr(docsrs, doc(cfg(feature = "compact")))]
pub mod compact;
pub mod crc;
pub mod cut;
mod data;
pub mod downgrade;
mod error;
mod header;
pub mod instant;
mod label;
pub mod nesting;
pub mod packed;
pub mod polls;
pub mod protocol;
mod record;
pub mod varint;
mod version;

pub use batch::{
    BATCH_RECORD_LEN, BatchHeader, DATA_BATCH_TARGET, DATA_MARKER_LEN, DamageKind, DataMarker,
    FLAG_BATCHES, FRAMES_BATCH_TARGET, Framing, MAX_FRAMES_BATCH_LEN, Probe, Unit, check_batches,
    check_index_entries, data_batch_entries, frame_data_batch, record_len, split_records,
};
pub use category::Category;
pub use data::{
    DATA_ENTRY_HEADER_LEN, DataEntry, INDEX_ENTRY_LEN, IndexEntry, decode_data_entry,
    decode_index_entry, encode_data_entry, to_document,
};
pub use error::{DecodeError, ErrorKind};
pub use header::{
    COMPACT_PACKED_VERSION, COMPACT_PARENTS_VERSION, COMPACT_PLOTS_VERSION, COMPACT_VERSION,
    FORMAT_VERSION, FileHeader, FileKind, HEADER_LEN, PACKED_VERSION, PARENTS_VERSION,
};
pub use instant::{FrameAlloc, Level, Message, Plot, PlotMode, PlotUnit};
pub use label::{BlockLabels, LabelKey, truncate_label};
pub use packed::{BatchRecords, batch_records};
pub use polls::{Breakdown, FramePolls, SlowPoll};
pub use record::{
    Decoded, Dropped, EXT_HEADER_LEN, Extension, FRAME_END_LEN, FRAME_START_HEADER_LEN,
    FRAME_START_PARENT_HEADER_LEN, FrameEnd, FrameStart, Parent, Record, RecordIter, RecordType,
    ThreadInfo, WorkerInfo, decode_record, end_bytes, start_with_parent_head,
};

/// Names one frame within a log: the writing process's worker id and the frame's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameKey {
    /// Worker (writing process slot) that recorded the frame.
    pub worker: u8,
    /// Frame id, unique per worker (wrapping at `u32::MAX`).
    pub id: u32,
}

impl FrameKey {
    /// Builds a key from a worker and an id.
    pub const fn new(worker: u8, id: u32) -> Self {
        Self { worker, id }
    }
}

impl std::fmt::Display for FrameKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.worker, self.id)
    }
}

impl std::str::FromStr for FrameKey {
    type Err = String;

    /// Parses `WORKER:ID`, e.g. `0:42`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (w, i) = s
            .split_once(':')
            .ok_or_else(|| format!("expected WORKER:ID, got {s:?}"))?;
        let worker = w
            .trim()
            .parse()
            .map_err(|_| format!("worker {w:?} is not a number 0-255"))?;
        let id = i
            .trim()
            .parse()
            .map_err(|_| format!("id {i:?} is not a number 0-4294967295"))?;
        Ok(Self { worker, id })
    }
}
