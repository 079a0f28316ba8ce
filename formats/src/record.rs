//! Frame-log records: FrameStart (type 0, or 6 with its parent), FrameEnd (type 1) and
//! extension records (type ≥ 2).
//!
//! Every record opens with the same 14 bytes, `id u32, worker u8, type u8, timestamp u64`
//! (which is all a FrameEnd is). Decoding is a bounds check plus an unaligned view.

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::category::Category;
use crate::error::{DecodeError, ErrorKind};
use crate::instant::{FrameAlloc, Message, Plot};
use crate::label::truncate_label;
use crate::polls::{FramePolls, SlowPoll};

/// Length of a FrameEnd record, and of the prefix every record shares.
pub const FRAME_END_LEN: usize = 14;
/// Length of a FrameStart record before its label.
pub const FRAME_START_HEADER_LEN: usize = 20;
/// Length of an extension record before its payload.
pub const EXT_HEADER_LEN: usize = 16;
/// Length of a FrameStart with parent (type 6) before its label.
pub const FRAME_START_PARENT_HEADER_LEN: usize = 25;
/// Payload bytes of a FrameStart with parent before its label (context, parent, category).
const PARENT_START_FIXED: usize = FRAME_START_PARENT_HEADER_LEN - EXT_HEADER_LEN;

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
#[repr(C)]
struct RawCommon {
    id: U32,
    worker: u8,
    kind: u8,
    timestamp: U64,
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
#[repr(C)]
struct RawStart {
    common: RawCommon,
    context: U32,
    category: u8,
    label_size: u8,
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
#[repr(C)]
struct RawStartParent {
    common: RawCommon,
    payload_size: U16,
    context: U32,
    parent: U32,
    category: u8,
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
#[repr(C)]
struct RawExt {
    common: RawCommon,
    payload_size: U16,
}

/// The record types this version defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RecordType {
    /// A frame starts.
    Start = 0,
    /// A frame ends.
    End = 1,
    /// Records this worker lost in Drop mode since its previous dropped marker.
    Dropped = 2,
    /// The writing process: pid and name.
    WorkerInfo = 3,
    /// A thread of the writing process; the worker's records that follow were recorded on it.
    ThreadInfo = 4,
    /// Batch framing: length and CRC32C of the records that follow (see [`crate::BatchHeader`]).
    Batch = 5,
    /// A frame starts, and names its parent (only in version 3 and 4 frame logs).
    StartWithParent = 6,
    /// One value of a plot series.
    Plot = 7,
    /// A log message.
    Message = 8,
    /// What a frame allocated and freed.
    FrameAlloc = 9,
    /// Where an asynchronous frame's time went (polls, busy, queued).
    FramePolls = 10,
    /// One poll that held its thread at least the slow-poll threshold.
    SlowPoll = 11,
}

impl RecordType {
    /// Every type this version defines, in type-byte order.
    pub const ALL: [RecordType; 12] = [
        RecordType::Start,
        RecordType::End,
        RecordType::Dropped,
        RecordType::WorkerInfo,
        RecordType::ThreadInfo,
        RecordType::Batch,
        RecordType::StartWithParent,
        RecordType::Plot,
        RecordType::Message,
        RecordType::FrameAlloc,
        RecordType::FramePolls,
        RecordType::SlowPoll,
    ];

    /// The type for a type byte, if this version defines it.
    pub const fn from_byte(b: u8) -> Option<RecordType> {
        match b {
            0 => Some(RecordType::Start),
            1 => Some(RecordType::End),
            2 => Some(RecordType::Dropped),
            3 => Some(RecordType::WorkerInfo),
            4 => Some(RecordType::ThreadInfo),
            5 => Some(RecordType::Batch),
            6 => Some(RecordType::StartWithParent),
            7 => Some(RecordType::Plot),
            8 => Some(RecordType::Message),
            9 => Some(RecordType::FrameAlloc),
            10 => Some(RecordType::FramePolls),
            11 => Some(RecordType::SlowPoll),
            _ => None,
        }
    }

    /// The type's name (as `framelog dump --json` prints it). Both kinds of FrameStart are
    /// `start`: what tells them apart is whether a parent is recorded.
    pub const fn name(self) -> &'static str {
        match self {
            RecordType::Start | RecordType::StartWithParent => "start",
            RecordType::End => "end",
            RecordType::Dropped => "dropped",
            RecordType::WorkerInfo => "worker_info",
            RecordType::ThreadInfo => "thread_info",
            RecordType::Batch => "batch",
            RecordType::Plot => "plot",
            RecordType::Message => "message",
            RecordType::FrameAlloc => "frame_alloc",
            RecordType::FramePolls => "frame_polls",
            RecordType::SlowPoll => "slow_poll",
        }
    }

    /// The name used by `framelog dump --json` for a record type byte (`ext-N` if unknown).
    pub fn name_of(type_byte: u8) -> std::borrow::Cow<'static, str> {
        match RecordType::from_byte(type_byte) {
            Some(t) => t.name().into(),
            None => format!("ext-{type_byte}").into(),
        }
    }
}

// The layouts above are the documented sizes (docs/FORMAT.md), checked at compile time.
const _: () = assert!(size_of::<RawCommon>() == FRAME_END_LEN);
const _: () = assert!(size_of::<RawStart>() == FRAME_START_HEADER_LEN);
const _: () = assert!(size_of::<RawExt>() == EXT_HEADER_LEN);
const _: () = assert!(size_of::<RawStartParent>() == FRAME_START_PARENT_HEADER_LEN);

/// What a FrameStart says about the frame's parent (the frame it was called from).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Parent {
    /// Not recorded (a type 0 start, from a writer that predates parents or a stream to an
    /// older reader): readers infer it from nesting on the thread.
    #[default]
    NotRecorded,
    /// Recorded: the frame has no parent.
    Root,
    /// Recorded: the id of the parent frame (same worker, never 0).
    Frame(u32),
}

impl Parent {
    /// The parent named by a type 6 record's `parent` field (0: none).
    pub const fn from_field(parent: u32) -> Parent {
        if parent == 0 {
            Parent::Root
        } else {
            Parent::Frame(parent)
        }
    }

    /// Whether the record says what the parent is (a type 6 start).
    pub const fn is_recorded(self) -> bool {
        !matches!(self, Parent::NotRecorded)
    }

    /// The parent's id if one is recorded (`None` for a root or an unrecorded parent).
    pub const fn id(self) -> Option<u32> {
        match self {
            Parent::Frame(id) => Some(id),
            _ => None,
        }
    }
}

/// A frame begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameStart<'a> {
    /// Frame id, unique per worker.
    pub id: u32,
    /// Writing process's worker id.
    pub worker: u8,
    /// Start time, ns since the Unix epoch.
    pub timestamp: u64,
    /// The unit of work (request, job) this frame belongs to.
    pub context: u32,
    /// What kind of work the frame is.
    pub category: Category,
    /// The frame's label, at most 255 bytes of UTF-8 (longer labels are cut when encoded).
    pub label: &'a str,
    /// The frame's parent, if the writer recorded it (type 6 when recorded, type 0 when not).
    pub parent: Parent,
}

/// A frame ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameEnd {
    /// Frame id, unique per worker.
    pub id: u32,
    /// Writing process's worker id.
    pub worker: u8,
    /// End time, ns since the Unix epoch.
    pub timestamp: u64,
}

/// Dropped marker (type 2): this worker discarded `count` records since its previous marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    /// Writing process's worker id.
    pub worker: u8,
    /// When the marker was written.
    pub timestamp: u64,
    /// Number of frame-log records lost.
    pub count: u64,
}

/// Worker info (type 3): who the writing process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerInfo<'a> {
    /// Writing process's worker id.
    pub worker: u8,
    /// When the process opened the log.
    pub timestamp: u64,
    /// Operating-system process id.
    pub pid: u32,
    /// Process name (at most 255 bytes).
    pub name: &'a str,
}

/// Thread info (type 4): names a thread; this worker's following records were recorded on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadInfo<'a> {
    /// Writing process's worker id.
    pub worker: u8,
    /// Thread number within the process (carried in the record's `id` field).
    pub thread: u32,
    /// When the marker was written.
    pub timestamp: u64,
    /// Thread name (at most 255 bytes, may be empty).
    pub name: &'a str,
}

/// An extension record of a type this version does not know; skipped by its payload size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extension<'a> {
    /// The record's id field.
    pub id: u32,
    /// Writing process's worker id.
    pub worker: u8,
    /// Type byte (≥ 2).
    pub kind: u8,
    /// Timestamp field.
    pub timestamp: u64,
    /// Raw payload.
    pub payload: &'a [u8],
}

/// One decoded frame-log record, borrowing from the decoded bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    /// Type 0.
    Start(FrameStart<'a>),
    /// Type 1.
    End(FrameEnd),
    /// Type 2.
    Dropped(Dropped),
    /// Type 3.
    WorkerInfo(WorkerInfo<'a>),
    /// Type 4.
    ThreadInfo(ThreadInfo<'a>),
    /// Type 7.
    Plot(Plot<'a>),
    /// Type 8.
    Message(Message<'a>),
    /// Type 9.
    FrameAlloc(FrameAlloc),
    /// Type 10.
    FramePolls(FramePolls),
    /// Type 11.
    SlowPoll(SlowPoll),
    /// Any other type ≥ 2.
    Unknown(Extension<'a>),
}

/// The result of decoding one record from the front of a byte slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A whole record and its length in bytes.
    Record(Record<'a>, usize),
    /// The slice ends inside a record: more bytes are needed.
    NeedMore,
}

fn common(id: u32, worker: u8, kind: u8, timestamp: u64) -> RawCommon {
    RawCommon {
        id: U32::new(id),
        worker,
        kind,
        timestamp: U64::new(timestamp),
    }
}

fn utf8(bytes: &[u8], offset: usize) -> Result<&str, DecodeError> {
    std::str::from_utf8(bytes).map_err(|_| DecodeError::new(offset as u64, ErrorKind::BadLabel))
}

/// Decodes the record at the front of `buf`.
///
/// Error offsets are relative to `buf`; shift them by the slice's position in its file.
#[inline]
pub fn decode_record(buf: &[u8]) -> Result<Decoded<'_>, DecodeError> {
    let Ok((c, _)) = RawCommon::ref_from_prefix(buf) else {
        return Ok(Decoded::NeedMore);
    };
    let (id, worker, timestamp) = (c.id.get(), c.worker, c.timestamp.get());
    const START: u8 = RecordType::Start as u8;
    const END: u8 = RecordType::End as u8;
    const DROPPED: u8 = RecordType::Dropped as u8;
    const WORKER_INFO: u8 = RecordType::WorkerInfo as u8;
    const THREAD_INFO: u8 = RecordType::ThreadInfo as u8;
    const START_WITH_PARENT: u8 = RecordType::StartWithParent as u8;
    const PLOT: u8 = RecordType::Plot as u8;
    const MESSAGE: u8 = RecordType::Message as u8;
    const FRAME_ALLOC: u8 = RecordType::FrameAlloc as u8;
    const FRAME_POLLS: u8 = RecordType::FramePolls as u8;
    const SLOW_POLL: u8 = RecordType::SlowPoll as u8;
    match c.kind {
        START => {
            let Ok((s, rest)) = RawStart::ref_from_prefix(buf) else {
                return Ok(Decoded::NeedMore);
            };
            let (context, category) = (s.context.get(), s.category);
            let label_at = FRAME_START_HEADER_LEN;
            start_record(rest, s.label_size as usize, label_at, |label| FrameStart {
                id,
                worker,
                timestamp,
                context,
                category: Category(category),
                label,
                parent: Parent::NotRecorded,
            })
        }
        START_WITH_PARENT => {
            let bad = |len| {
                DecodeError::new(
                    0,
                    ErrorKind::BadPayload {
                        name: "start with parent",
                        len,
                    },
                )
            };
            let Ok((s, rest)) = RawStartParent::ref_from_prefix(buf) else {
                // Not all of the fixed part is here: a payload size too small to hold it is
                // an error as soon as the size is known, else wait for more.
                return match RawExt::ref_from_prefix(buf) {
                    Ok((e, _)) if (e.payload_size.get() as usize) < PARENT_START_FIXED => {
                        Err(bad(e.payload_size.get() as usize))
                    }
                    _ => Ok(Decoded::NeedMore),
                };
            };
            let size = s.payload_size.get() as usize;
            let Some(n) = size
                .checked_sub(PARENT_START_FIXED)
                .filter(|n| *n <= u8::MAX as usize)
            else {
                return Err(bad(size));
            };
            let (context, category, parent) = (s.context.get(), s.category, s.parent.get());
            let label_at = FRAME_START_PARENT_HEADER_LEN;
            start_record(rest, n, label_at, |label| FrameStart {
                id,
                worker,
                timestamp,
                context,
                category: Category(category),
                label,
                parent: Parent::from_field(parent),
            })
        }
        END => Ok(Decoded::Record(
            Record::End(FrameEnd {
                id,
                worker,
                timestamp,
            }),
            FRAME_END_LEN,
        )),
        kind => {
            let Ok((e, rest)) = RawExt::ref_from_prefix(buf) else {
                return Ok(Decoded::NeedMore);
            };
            let n = e.payload_size.get() as usize;
            let Some(payload) = rest.get(..n) else {
                return Ok(Decoded::NeedMore);
            };
            let bad = |name| DecodeError::new(0, ErrorKind::BadPayload { name, len: n });
            let rec = match kind {
                DROPPED => {
                    let bytes: [u8; 8] = payload.try_into().map_err(|_| bad("dropped"))?;
                    Record::Dropped(Dropped {
                        worker,
                        timestamp,
                        count: u64::from_le_bytes(bytes),
                    })
                }
                WORKER_INFO => {
                    if n < 4 {
                        return Err(bad("worker_info"));
                    }
                    let pid = u32::from_le_bytes(payload[..4].try_into().expect("4 bytes"));
                    Record::WorkerInfo(WorkerInfo {
                        worker,
                        timestamp,
                        pid,
                        name: utf8(&payload[4..], EXT_HEADER_LEN + 4)?,
                    })
                }
                THREAD_INFO => Record::ThreadInfo(ThreadInfo {
                    worker,
                    thread: id,
                    timestamp,
                    name: utf8(payload, EXT_HEADER_LEN)?,
                }),
                PLOT => Record::Plot(
                    Plot::from_payload(worker, timestamp, payload).ok_or_else(|| bad("plot"))?,
                ),
                MESSAGE => Record::Message(
                    Message::from_payload(id, worker, timestamp, payload)
                        .ok_or_else(|| bad("message"))?,
                ),
                FRAME_ALLOC => Record::FrameAlloc(
                    FrameAlloc::from_payload(id, worker, timestamp, payload)
                        .ok_or_else(|| bad("frame_alloc"))?,
                ),
                FRAME_POLLS => Record::FramePolls(
                    FramePolls::from_payload(id, worker, timestamp, payload)
                        .ok_or_else(|| bad("frame_polls"))?,
                ),
                SLOW_POLL => Record::SlowPoll(
                    SlowPoll::from_payload(id, worker, timestamp, payload)
                        .ok_or_else(|| bad("slow_poll"))?,
                ),
                _ => Record::Unknown(Extension {
                    id,
                    worker,
                    kind,
                    timestamp,
                    payload,
                }),
            };
            Ok(Decoded::Record(rec, EXT_HEADER_LEN + n))
        }
    }
}

/// A FrameStart (either type) whose fixed part is decoded: its `n`-byte label at the front of
/// `rest` (at `label_at` in the record), then the record `make` builds around it.
#[inline(always)]
fn start_record<'a>(
    rest: &'a [u8],
    n: usize,
    label_at: usize,
    make: impl FnOnce(&'a str) -> FrameStart<'a>,
) -> Result<Decoded<'a>, DecodeError> {
    let Some(label) = rest.get(..n) else {
        return Ok(Decoded::NeedMore);
    };
    let label = utf8(label, label_at)?;
    Ok(Decoded::Record(Record::Start(make(label)), label_at + n))
}

/// Writes `parts` into the front of `out`, or returns `None` (writing nothing) if it is too small.
#[inline]
fn put(out: &mut [u8], head: &[u8], tail: &[u8]) -> Option<usize> {
    let len = head.len() + tail.len();
    let dst = out.get_mut(..len)?;
    dst[..head.len()].copy_from_slice(head);
    dst[head.len()..].copy_from_slice(tail);
    Some(len)
}

fn ext_payload_len(n: usize) -> U16 {
    U16::new(u16::try_from(n).expect("payload fits u16 by construction"))
}

/// A FrameStart with parent's bytes before its label (type 6, *Parents* in `docs/FORMAT.md`):
/// what [`FrameStart::encode`] writes, for a writer that copies the label itself (the
/// stopwatch's hot path). `parent` 0 is a recorded root; `label_len` is at most 255.
#[inline(always)]
pub fn start_with_parent_head(
    id: u32,
    worker: u8,
    timestamp: u64,
    context: u32,
    parent: u32,
    category: Category,
    label_len: u8,
) -> [u8; FRAME_START_PARENT_HEADER_LEN] {
    let raw = RawStartParent {
        common: common(id, worker, RecordType::StartWithParent as u8, timestamp),
        // At most 9 + 255: no check needed, nothing out of line on the hot path.
        payload_size: U16::new(PARENT_START_FIXED as u16 + u16::from(label_len)),
        context: U32::new(context),
        parent: U32::new(parent),
        category: category.0,
    };
    zerocopy::transmute!(raw)
}

/// A FrameEnd's bytes: what [`FrameEnd::encode`] writes.
#[inline(always)]
pub fn end_bytes(id: u32, worker: u8, timestamp: u64) -> [u8; FRAME_END_LEN] {
    zerocopy::transmute!(common(id, worker, RecordType::End as u8, timestamp))
}

impl FrameStart<'_> {
    /// Bytes this record takes when encoded (the label cut to 255 bytes).
    #[inline]
    pub fn encoded_len(&self) -> usize {
        let head = if self.parent.is_recorded() {
            FRAME_START_PARENT_HEADER_LEN
        } else {
            FRAME_START_HEADER_LEN
        };
        head + truncate_label(self.label).len()
    }

    /// The record type it encodes as: 6 when its parent is recorded, else 0.
    #[inline]
    pub fn record_type(&self) -> RecordType {
        if self.parent.is_recorded() {
            RecordType::StartWithParent
        } else {
            RecordType::Start
        }
    }

    /// Encodes into the front of `out` (type 6 if the parent is recorded, else type 0);
    /// `None` if `out` is too small. Never allocates.
    #[inline]
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let label = truncate_label(self.label);
        if let Parent::Root | Parent::Frame(_) = self.parent {
            let head = start_with_parent_head(
                self.id,
                self.worker,
                self.timestamp,
                self.context,
                self.parent.id().unwrap_or(0),
                self.category,
                label.len() as u8,
            );
            return put(out, &head, label.as_bytes());
        }
        let raw = RawStart {
            common: common(
                self.id,
                self.worker,
                RecordType::Start as u8,
                self.timestamp,
            ),
            context: U32::new(self.context),
            category: self.category.0,
            label_size: label.len() as u8,
        };
        put(out, raw.as_bytes(), label.as_bytes())
    }
}

impl FrameEnd {
    /// Encodes into the front of `out`; `None` if `out` is too small. Never allocates.
    #[inline]
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        put(out, &end_bytes(self.id, self.worker, self.timestamp), &[])
    }
}

impl Dropped {
    /// Encodes into the front of `out`; `None` if `out` is too small. Never allocates.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let raw = RawExt {
            common: common(0, self.worker, RecordType::Dropped as u8, self.timestamp),
            payload_size: ext_payload_len(8),
        };
        put(out, raw.as_bytes(), &self.count.to_le_bytes())
    }
}

impl WorkerInfo<'_> {
    /// Encodes into the front of `out` (name cut to 255 bytes); `None` if `out` is too small.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let name = truncate_label(self.name);
        let raw = RawExt {
            common: common(0, self.worker, RecordType::WorkerInfo as u8, self.timestamp),
            payload_size: ext_payload_len(4 + name.len()),
        };
        let head = raw.as_bytes();
        let n = put(out, head, &self.pid.to_le_bytes())?;
        match out.get_mut(n..n + name.len()) {
            Some(dst) => dst.copy_from_slice(name.as_bytes()),
            None => return None,
        }
        Some(n + name.len())
    }
}

impl ThreadInfo<'_> {
    /// Encodes into the front of `out` (name cut to 255 bytes); `None` if `out` is too small.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let name = truncate_label(self.name);
        let raw = RawExt {
            common: common(
                self.thread,
                self.worker,
                RecordType::ThreadInfo as u8,
                self.timestamp,
            ),
            payload_size: ext_payload_len(name.len()),
        };
        put(out, raw.as_bytes(), name.as_bytes())
    }
}

impl Plot<'_> {
    /// Encodes into the front of `out` (name cut to 255 bytes); `None` if `out` is too small.
    /// Never allocates.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let name = self.encoded_name();
        let raw = RawExt {
            common: common(0, self.worker, RecordType::Plot as u8, self.timestamp),
            payload_size: ext_payload_len(crate::instant::PLOT_FIXED + name.len()),
        };
        let n = put(out, raw.as_bytes(), &self.fixed_payload())?;
        Some(n + put(out.get_mut(n..)?, name.as_bytes(), &[])?)
    }
}

impl Message<'_> {
    /// Encodes into the front of `out` (text cut to 4,096 bytes; fields left out when they
    /// would not fit); `None` if `out` is too small. Never allocates.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let raw = RawExt {
            common: common(
                self.frame,
                self.worker,
                RecordType::Message as u8,
                self.timestamp,
            ),
            payload_size: ext_payload_len(self.payload_len()),
        };
        let n = put(out, raw.as_bytes(), &self.fixed_payload())?;
        let rest = out.get_mut(n..)?;
        Some(n + put(rest, self.encoded_text().as_bytes(), self.encoded_fields())?)
    }
}

impl FrameAlloc {
    /// Encodes into the front of `out`; `None` if `out` is too small. Never allocates.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let (payload, len) = self.payload();
        let raw = RawExt {
            common: common(
                self.id,
                self.worker,
                RecordType::FrameAlloc as u8,
                self.timestamp,
            ),
            payload_size: ext_payload_len(len),
        };
        put(out, raw.as_bytes(), &payload[..len])
    }
}

impl FramePolls {
    /// Encodes into the front of `out`; `None` if `out` is too small. Never allocates.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let (payload, len) = self.payload();
        let raw = RawExt {
            common: common(
                self.id,
                self.worker,
                RecordType::FramePolls as u8,
                self.timestamp,
            ),
            payload_size: ext_payload_len(len),
        };
        put(out, raw.as_bytes(), &payload[..len])
    }
}

impl SlowPoll {
    /// Encodes into the front of `out`; `None` if `out` is too small. Never allocates.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let (payload, len) = self.payload();
        let raw = RawExt {
            common: common(
                self.id,
                self.worker,
                RecordType::SlowPoll as u8,
                self.timestamp,
            ),
            payload_size: ext_payload_len(len),
        };
        put(out, raw.as_bytes(), &payload[..len])
    }
}

impl Extension<'_> {
    /// Encodes into the front of `out`; `None` if `out` is too small or the payload exceeds
    /// 65,535 bytes.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let size = u16::try_from(self.payload.len()).ok()?;
        let raw = RawExt {
            common: common(self.id, self.worker, self.kind, self.timestamp),
            payload_size: U16::new(size),
        };
        put(out, raw.as_bytes(), self.payload)
    }
}

impl<'a> Record<'a> {
    /// The worker that wrote the record.
    pub fn worker(&self) -> u8 {
        match self {
            Record::Start(r) => r.worker,
            Record::End(r) => r.worker,
            Record::Dropped(r) => r.worker,
            Record::WorkerInfo(r) => r.worker,
            Record::ThreadInfo(r) => r.worker,
            Record::Plot(r) => r.worker,
            Record::Message(r) => r.worker,
            Record::FrameAlloc(r) => r.worker,
            Record::FramePolls(r) => r.worker,
            Record::SlowPoll(r) => r.worker,
            Record::Unknown(r) => r.worker,
        }
    }

    /// The record's `id` field (the frame id for starts and ends, the thread for thread info).
    pub fn id(&self) -> u32 {
        match self {
            Record::Start(r) => r.id,
            Record::End(r) => r.id,
            Record::Dropped(_) | Record::WorkerInfo(_) | Record::Plot(_) => 0,
            Record::ThreadInfo(r) => r.thread,
            Record::Message(r) => r.frame,
            Record::FrameAlloc(r) => r.id,
            Record::FramePolls(r) => r.id,
            Record::SlowPoll(r) => r.id,
            Record::Unknown(r) => r.id,
        }
    }

    /// The record's timestamp, ns since the Unix epoch.
    pub fn timestamp(&self) -> u64 {
        match self {
            Record::Start(r) => r.timestamp,
            Record::End(r) => r.timestamp,
            Record::Dropped(r) => r.timestamp,
            Record::WorkerInfo(r) => r.timestamp,
            Record::ThreadInfo(r) => r.timestamp,
            Record::Plot(r) => r.timestamp,
            Record::Message(r) => r.timestamp,
            Record::FrameAlloc(r) => r.timestamp,
            Record::FramePolls(r) => r.timestamp,
            Record::SlowPoll(r) => r.timestamp,
            Record::Unknown(r) => r.timestamp,
        }
    }

    /// The record's type byte.
    pub fn type_byte(&self) -> u8 {
        match self {
            Record::Start(r) => r.record_type() as u8,
            Record::End(_) => RecordType::End as u8,
            Record::Dropped(_) => RecordType::Dropped as u8,
            Record::WorkerInfo(_) => RecordType::WorkerInfo as u8,
            Record::ThreadInfo(_) => RecordType::ThreadInfo as u8,
            Record::Plot(_) => RecordType::Plot as u8,
            Record::Message(_) => RecordType::Message as u8,
            Record::FrameAlloc(_) => RecordType::FrameAlloc as u8,
            Record::FramePolls(_) => RecordType::FramePolls as u8,
            Record::SlowPoll(_) => RecordType::SlowPoll as u8,
            Record::Unknown(r) => r.kind,
        }
    }

    /// The record as a reader that predates parents gets it: a FrameStart with parent
    /// becomes the type 0 start with the same fields; every other record is unchanged.
    pub fn without_parent(self) -> Record<'a> {
        match self {
            Record::Start(s) => Record::Start(FrameStart {
                parent: Parent::NotRecorded,
                ..s
            }),
            other => other,
        }
    }

    /// Encodes into the front of `out`; `None` if `out` is too small. Never allocates.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        match self {
            Record::Start(r) => r.encode(out),
            Record::End(r) => r.encode(out),
            Record::Dropped(r) => r.encode(out),
            Record::WorkerInfo(r) => r.encode(out),
            Record::ThreadInfo(r) => r.encode(out),
            Record::Plot(r) => r.encode(out),
            Record::Message(r) => r.encode(out),
            Record::FrameAlloc(r) => r.encode(out),
            Record::FramePolls(r) => r.encode(out),
            Record::SlowPoll(r) => r.encode(out),
            Record::Unknown(r) => r.encode(out),
        }
    }

    /// Bytes this record takes when encoded (labels and names cut to 255 bytes).
    pub fn encoded_len(&self) -> usize {
        match self {
            Record::Start(r) => r.encoded_len(),
            Record::End(_) => FRAME_END_LEN,
            Record::Dropped(_) => EXT_HEADER_LEN + 8,
            Record::WorkerInfo(r) => EXT_HEADER_LEN + 4 + truncate_label(r.name).len(),
            Record::ThreadInfo(r) => EXT_HEADER_LEN + truncate_label(r.name).len(),
            Record::Plot(r) => EXT_HEADER_LEN + crate::instant::PLOT_FIXED + r.encoded_name().len(),
            Record::Message(r) => EXT_HEADER_LEN + r.payload_len(),
            Record::FrameAlloc(r) => EXT_HEADER_LEN + r.payload().1,
            Record::FramePolls(r) => EXT_HEADER_LEN + r.payload().1,
            Record::SlowPoll(r) => EXT_HEADER_LEN + r.payload().1,
            Record::Unknown(r) => EXT_HEADER_LEN + r.payload.len(),
        }
    }

    /// Appends the encoded record to `out` (allocating only if `out` lacks capacity).
    pub fn encode_to_vec(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.resize(start + self.encoded_len(), 0);
        let n = self.encode(&mut out[start..]).unwrap_or(0);
        out.truncate(start + n);
    }
}

/// Iterates the whole records in a byte slice, stopping cleanly at a partial tail.
///
/// Yields `(offset, record)` with offsets shifted by `base` (the slice's position in its
/// file). After an error it yields that error once and then stops.
pub struct RecordIter<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
    failed: bool,
}

impl<'a> RecordIter<'a> {
    /// Iterates `buf`, which starts at byte `base` of its file.
    pub fn new(buf: &'a [u8], base: u64) -> Self {
        Self {
            buf,
            pos: 0,
            base,
            failed: false,
        }
    }

    /// Bytes of `buf` consumed by whole records so far.
    pub fn consumed(&self) -> usize {
        self.pos
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<(u64, Record<'a>), DecodeError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let offset = self.base + self.pos as u64;
        match decode_record(&self.buf[self.pos..]) {
            Ok(Decoded::Record(rec, len)) => {
                self.pos += len;
                Some(Ok((offset, rec)))
            }
            Ok(Decoded::NeedMore) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(e.shifted(offset)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instant::{Level, PlotMode, PlotUnit};
    use proptest::prelude::*;

    fn round_trip(rec: Record<'_>) {
        let mut buf = vec![0u8; 70_000];
        let n = rec.encode(&mut buf).expect("fits");
        assert_eq!(rec.encoded_len(), n);
        match decode_record(&buf[..n]).expect("decodes") {
            Decoded::Record(back, len) => {
                assert_eq!(len, n);
                assert_eq!(back, rec);
            }
            Decoded::NeedMore => panic!("whole record reported as partial"),
        }
        // Every strict prefix is "need more", never an error or a record.
        for cut in 0..n {
            assert_eq!(
                decode_record(&buf[..cut]),
                Ok(Decoded::NeedMore),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn seed_sizes() {
        let start = FrameStart {
            id: 1,
            worker: 2,
            timestamp: 3,
            context: 1,
            category: Category::DATABASE,
            label: "User: Select",
            parent: Parent::NotRecorded,
        };
        assert_eq!(start.encoded_len(), 20 + 12);
        let mut buf = [0u8; 64];
        assert_eq!(start.encode(&mut buf), Some(32));
        // id u32 LE, worker, type 0, timestamp u64 LE, context u32 LE, category, label size.
        assert_eq!(&buf[..4], &1u32.to_le_bytes());
        assert_eq!(buf[4], 2);
        assert_eq!(buf[5], 0);
        assert_eq!(&buf[6..14], &3u64.to_le_bytes());
        assert_eq!(&buf[14..18], &1u32.to_le_bytes());
        assert_eq!(buf[18], 8);
        assert_eq!(buf[19], 12);
        assert_eq!(&buf[20..32], b"User: Select");
        let end = FrameEnd {
            id: 1,
            worker: 2,
            timestamp: 9,
        };
        assert_eq!(end.encode(&mut buf), Some(14));
        assert_eq!(buf[5], 1);
        assert_eq!(start.encode(&mut buf[..31]), None);
        // With its parent: type 6, the extension layout, 25 bytes before the label.
        let child = FrameStart {
            parent: Parent::Frame(0x0102_0304),
            ..start
        };
        assert_eq!(child.encoded_len(), 25 + 12);
        assert_eq!(child.encode(&mut buf), Some(37));
        assert_eq!(buf[5], 6);
        assert_eq!(&buf[14..16], &21u16.to_le_bytes());
        assert_eq!(&buf[16..20], &1u32.to_le_bytes());
        assert_eq!(&buf[20..24], &0x0102_0304u32.to_le_bytes());
        assert_eq!(buf[24], 8);
        assert_eq!(&buf[25..37], b"User: Select");
        assert_eq!(crate::batch::record_len(&buf), Some(37));
        let root = FrameStart {
            parent: Parent::Root,
            ..start
        };
        root.encode(&mut buf).unwrap();
        assert_eq!(&buf[20..24], &[0; 4]);
        round_trip(Record::Start(child));
        round_trip(Record::Start(root));
    }

    #[test]
    fn starts_with_parent_of_impossible_sizes_are_errors() {
        let child = FrameStart {
            id: 1,
            worker: 2,
            timestamp: 3,
            context: 1,
            category: Category::DATABASE,
            label: "abc",
            parent: Parent::Frame(9),
        };
        let mut buf = [0u8; 64];
        let n = child.encode(&mut buf).unwrap();
        for size in [0u16, 8, 265, u16::MAX] {
            let mut b = buf;
            b[14..16].copy_from_slice(&size.to_le_bytes());
            let err = decode_record(&b[..n]).unwrap_err();
            assert!(
                matches!(err.kind, ErrorKind::BadPayload { .. }),
                "{size}: {err}"
            );
            // Even before the fixed part is all there.
            assert!(decode_record(&b[..18]).is_err() || size >= 9, "{size}");
        }
        buf[25] = 0xff;
        assert_eq!(
            decode_record(&buf[..n]).unwrap_err().kind,
            ErrorKind::BadLabel
        );
    }

    #[test]
    fn long_labels_are_cut_on_encode() {
        let label = "é".repeat(200); // 400 bytes
        let rec = FrameStart {
            id: 7,
            worker: 0,
            timestamp: 0,
            context: 7,
            category: Category::FUNCTION,
            label: &label,
            parent: Parent::Frame(3),
        };
        let mut buf = [0u8; 512];
        let n = rec.encode(&mut buf).unwrap();
        let Decoded::Record(Record::Start(back), _) = decode_record(&buf[..n]).unwrap() else {
            panic!("not a start");
        };
        assert_eq!(back.label.len(), 254);
        assert!(label.starts_with(back.label));
    }

    #[test]
    fn malformed_known_payloads_are_errors_with_offsets() {
        let mut bytes = vec![0u8; 14 + 64];
        let end = FrameEnd {
            id: 1,
            worker: 1,
            timestamp: 1,
        };
        end.encode(&mut bytes).unwrap();
        let bad_dropped = Extension {
            id: 0,
            worker: 1,
            kind: 2,
            timestamp: 5,
            payload: &[1, 2, 3],
        };
        let n = bad_dropped.encode(&mut bytes[14..]).unwrap();
        bytes.truncate(14 + n);
        let items: Vec<_> = RecordIter::new(&bytes, 100).collect();
        assert_eq!(items.len(), 2);
        let err = items[1].clone().unwrap_err();
        assert_eq!(err.offset, 114);
        assert!(matches!(
            err.kind,
            ErrorKind::BadPayload {
                name: "dropped",
                len: 3
            }
        ));
    }

    #[test]
    fn iterator_stops_cleanly_at_a_partial_tail() {
        let mut bytes = [0u8; 14 * 3];
        for i in 0..3 {
            FrameEnd {
                id: i,
                worker: 0,
                timestamp: 10 + i as u64,
            }
            .encode(&mut bytes[i as usize * 14..])
            .unwrap();
        }
        let mut it = RecordIter::new(&bytes[..14 * 3 - 5], 16);
        let offsets: Vec<u64> = it.by_ref().map(|r| r.unwrap().0).collect();
        assert_eq!(offsets, vec![16, 30]);
        assert_eq!(it.consumed(), 28);
    }

    fn arb_str(max: usize) -> impl Strategy<Value = String> {
        proptest::collection::vec(any::<char>(), 0..max).prop_map(|v| v.into_iter().collect())
    }

    proptest! {
        #[test]
        fn starts_round_trip(id: u32, worker: u8, ts: u64, ctx: u32, cat: u8, label in arb_str(300),
                             parent in prop_oneof![Just(Parent::NotRecorded), Just(Parent::Root), (1u32..).prop_map(Parent::Frame)]) {
            let label = truncate_label(&label).to_owned();
            round_trip(Record::Start(FrameStart { id, worker, timestamp: ts, context: ctx, category: Category(cat), label: &label, parent }));
        }

        #[test]
        fn ends_round_trip(id: u32, worker: u8, ts: u64) {
            round_trip(Record::End(FrameEnd { id, worker, timestamp: ts }));
        }

        #[test]
        fn extensions_round_trip(worker: u8, ts: u64, count: u64, pid: u32, thread: u32, name in arb_str(40),
                                 kind in (5u8..).prop_filter("6-11 are known", |k| !(6..=11).contains(k)), id: u32, payload in proptest::collection::vec(any::<u8>(), 0..300)) {
            let name = truncate_label(&name).to_owned();
            round_trip(Record::Dropped(Dropped { worker, timestamp: ts, count }));
            round_trip(Record::WorkerInfo(WorkerInfo { worker, timestamp: ts, pid, name: &name }));
            round_trip(Record::ThreadInfo(ThreadInfo { worker, thread, timestamp: ts, name: &name }));
            round_trip(Record::Unknown(Extension { id, worker, kind, timestamp: ts, payload: &payload }));
        }

        #[test]
        fn plots_messages_and_allocations_round_trip(id: u32, worker: u8, ts: u64, bits: u64, summed: bool, unit: u8,
                                                    name in arb_str(300), ctx: u32, level: u8, text in arb_str(5000),
                                                    with_fields: bool, counts: [u64; 4], polls: [u64; 7]) {
            let name = if name.is_empty() { "x".to_owned() } else { name };
            let mode = if summed { PlotMode::Summed } else { PlotMode::Value };
            let plot = Plot { worker, timestamp: ts, value: f64::from_bits(bits), mode, unit: PlotUnit(unit), name: truncate_label(&name) };
            round_trip(Record::Plot(plot));
            let fields = bson::to_vec(&bson::doc! { "user": i64::from(id), "name": &name }).unwrap();
            let msg = Message { frame: id, worker, timestamp: ts, context: ctx, level: Level(level), text: &text, fields: with_fields.then_some(&fields[..]) };
            let msg = Message { text: msg.encoded_text(), fields: Some(msg.encoded_fields()).filter(|f| !f.is_empty()), ..msg };
            round_trip(Record::Message(msg));
            let [allocs, alloc_bytes, frees, freed_bytes] = counts;
            round_trip(Record::FrameAlloc(FrameAlloc { id, worker, timestamp: ts, allocs, alloc_bytes, frees, freed_bytes }));
            let [flags, polls, busy_ns, queued_ns, longest_poll_ns, first_poll_ns, slow_polls] = polls;
            round_trip(Record::FramePolls(FramePolls { id, worker, timestamp: ts, flags, polls, busy_ns, queued_ns, longest_poll_ns, first_poll_ns, slow_polls }));
            round_trip(Record::SlowPoll(SlowPoll { id, worker, timestamp: ts, duration_ns: busy_ns }));
        }

        #[test]
        fn any_bytes_decode_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let mut consumed = 0usize;
            for item in RecordIter::new(&bytes, 0) {
                match item {
                    Ok((off, _)) => { prop_assert!(off as usize >= consumed); consumed = off as usize; }
                    Err(e) => { prop_assert!((e.offset as usize) < bytes.len()); }
                }
            }
        }
    }
}
