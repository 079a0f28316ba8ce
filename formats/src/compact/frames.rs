//! Compact frame logs (`docs/FORMAT.md`, *Compact frame log*): a sealed segment's records in
//! column-wise, zstd-compressed blocks with a block index and a trailer. Pure, no I/O.
//!
//! - [`FramesEncoder`] takes the records of one raw segment (with their offsets) and builds the
//!   whole version 2 file (version 5 with [`FramesEncoder::with_parents`]).
//! - [`Trailer`], [`read_index`] and [`walk_blocks`] find the blocks (by the index, or by their
//!   headers when the index is damaged).
//! - [`BlockDecoder`] checks and decodes one block into records that are the version 1 ones
//!   byte for byte, with their raw-segment offsets. A block that does not check delivers
//!   nothing.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::ids::{IdIndex, IdIndexBuilder};
use super::{MAX_RAW_BLOCK_LEN, get_varint, put_varint, unzigzag, zigzag};
use crate::category::Category;
use crate::header::{FileHeader, FileKind, HEADER_LEN};
use crate::instant::{FrameAlloc, Message, PLOT_FIXED, Plot, PlotMode, PlotUnit};
use crate::label::LabelKey;
use crate::polls::{FramePolls, SlowPoll};
use crate::record::{
    Dropped, EXT_HEADER_LEN, Extension, FRAME_END_LEN, FRAME_START_HEADER_LEN,
    FRAME_START_PARENT_HEADER_LEN, FrameEnd, FrameStart, Parent, Record, RecordType, ThreadInfo,
    WorkerInfo,
};

/// Magic of a block header.
pub const BLOCK_MAGIC: [u8; 4] = *b"FLBK";
/// Magic of the block index.
pub const INDEX_MAGIC: [u8; 4] = *b"FLIX";
/// Magic of the trailer.
pub const TRAILER_MAGIC: [u8; 4] = *b"FLTR";
/// Length of a block header.
pub const BLOCK_HEADER_LEN: usize = 48;
/// Length of one block's entry in the block index.
pub const INDEX_ENTRY_LEN: usize = 36;
/// Length of the trailer (the last bytes of the file).
pub const TRAILER_LEN: usize = 32;
/// Most records in one block.
pub const MAX_BLOCK_RECORDS: u32 = 65_536;
/// Number of streams in a version 2 block body.
pub const STREAMS: usize = 10;
/// Number of streams in a version 4 block body (with `parents`).
pub const STREAMS_WITH_PARENTS: usize = 11;
/// Number of streams in a version 5 block body (with `series` and `values`).
pub const STREAMS_WITH_PLOTS: usize = 13;
/// Names of the streams, in body order (for size reports); version 2 has the first ten,
/// version 4 the first eleven.
pub const STREAM_NAMES: [&str; STREAMS_WITH_PLOTS] = [
    "labels",
    "types",
    "workers",
    "gaps",
    "times",
    "ids",
    "label_ids",
    "contexts",
    "categories",
    "payloads",
    "parents",
    "series",
    "values",
];
/// Deepest stack of open frames a lane keeps.
const MAX_STACK: usize = 64;
/// An encoder closes a block before its raw body could pass the 16 MiB limit: the largest
/// record adds at most this much to it.
const MAX_RECORD_RAW: usize = 16 + 1 + 1 + 20 + 10 + 10 + 10 + 65_535;

// Streams the decoder addresses by number (the others are destructured in order).
const LABELS: usize = 0;
const TIMES: usize = 4;
const TYPES: usize = 1;
const WORKERS: usize = 2;
const PAYLOADS: usize = 9;
const SERIES: usize = 11;

const START: u8 = RecordType::Start as u8;
const END: u8 = RecordType::End as u8;
const DROPPED: u8 = RecordType::Dropped as u8;
const WORKER_INFO: u8 = RecordType::WorkerInfo as u8;
const THREAD_INFO: u8 = RecordType::ThreadInfo as u8;
const PLOT: u8 = RecordType::Plot as u8;
const MESSAGE: u8 = RecordType::Message as u8;
const FRAME_ALLOC: u8 = RecordType::FrameAlloc as u8;
const FRAME_POLLS: u8 = RecordType::FramePolls as u8;
const SLOW_POLL: u8 = RecordType::SlowPoll as u8;
const BATCH: u8 = RecordType::Batch as u8;
const START_WITH_PARENT: u8 = RecordType::StartWithParent as u8;

fn crc(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// A block header (48 bytes), see FORMAT.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    /// Bytes of compressed body after the header.
    pub len: u32,
    /// Bytes of the decompressed body.
    pub raw_len: u32,
    /// Records in the block.
    pub count: u32,
    /// Raw-segment offset of the block's first record.
    pub first_offset: u64,
    /// Smallest timestamp in the block.
    pub min_time: u64,
    /// Largest timestamp in the block.
    pub max_time: u64,
    /// CRC32C of the compressed body.
    pub crc: u32,
}

impl BlockHeader {
    /// The header's 48 bytes.
    pub fn encode(&self) -> [u8; BLOCK_HEADER_LEN] {
        let mut b = [0u8; BLOCK_HEADER_LEN];
        b[0..4].copy_from_slice(&BLOCK_MAGIC);
        b[4..8].copy_from_slice(&self.len.to_le_bytes());
        b[8..12].copy_from_slice(&self.raw_len.to_le_bytes());
        b[12..16].copy_from_slice(&self.count.to_le_bytes());
        b[16..24].copy_from_slice(&self.first_offset.to_le_bytes());
        b[24..32].copy_from_slice(&self.min_time.to_le_bytes());
        b[32..40].copy_from_slice(&self.max_time.to_le_bytes());
        b[40..44].copy_from_slice(&self.crc.to_le_bytes());
        let h = crc(&b[..44]);
        b[44..48].copy_from_slice(&h.to_le_bytes());
        b
    }

    /// Decodes a header from the front of `buf`: `None` unless the magic and `header_crc`
    /// hold and the fields are in range (count 1-65,536, `raw_len` 40 B-16 MiB).
    pub fn decode(buf: &[u8]) -> Option<Self> {
        let b = buf.get(..BLOCK_HEADER_LEN)?;
        if b[0..4] != BLOCK_MAGIC || crc(&b[..44]) != u32_at(b, 44) {
            return None;
        }
        let h = Self {
            len: u32_at(b, 4),
            raw_len: u32_at(b, 8),
            count: u32_at(b, 12),
            first_offset: u64_at(b, 16),
            min_time: u64_at(b, 24),
            max_time: u64_at(b, 32),
            crc: u32_at(b, 40),
        };
        let sane = (1..=MAX_BLOCK_RECORDS).contains(&h.count)
            && (4 * STREAMS..=MAX_RAW_BLOCK_LEN).contains(&(h.raw_len as usize))
            && h.min_time <= h.max_time;
        sane.then_some(h)
    }

    /// Bytes the block takes in the file, header included.
    pub fn total_len(&self) -> u64 {
        BLOCK_HEADER_LEN as u64 + u64::from(self.len)
    }
}

/// One block's entry in the block index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockEntry {
    /// Offset of the block's header in the file.
    pub offset: u64,
    /// Records in the block.
    pub count: u32,
    /// Raw-segment offset of its first record.
    pub first_offset: u64,
    /// Smallest timestamp.
    pub min_time: u64,
    /// Largest timestamp.
    pub max_time: u64,
}

impl BlockEntry {
    /// Whether `h` is the header this entry describes.
    pub fn matches(&self, h: &BlockHeader) -> bool {
        self.count == h.count
            && self.first_offset == h.first_offset
            && self.min_time == h.min_time
            && self.max_time == h.max_time
    }
}

/// The trailer (the last 32 bytes of a compact frame log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trailer {
    /// Offset of the block index.
    pub index_offset: u64,
    /// Length of the raw segment the file replaced.
    pub raw_len: u64,
    /// Records in all blocks.
    pub records: u64,
}

impl Trailer {
    /// The trailer's 32 bytes.
    pub fn encode(&self) -> [u8; TRAILER_LEN] {
        let mut b = [0u8; TRAILER_LEN];
        b[0..8].copy_from_slice(&self.index_offset.to_le_bytes());
        b[8..16].copy_from_slice(&self.raw_len.to_le_bytes());
        b[16..24].copy_from_slice(&self.records.to_le_bytes());
        b[24..28].copy_from_slice(&TRAILER_MAGIC);
        let c = crc(&b[..28]);
        b[28..32].copy_from_slice(&c.to_le_bytes());
        b
    }

    /// Decodes the trailer from the last 32 bytes of a file of `file_len` bytes: `None` if
    /// the magic or crc fail or the index cannot be where it says.
    pub fn decode(tail: &[u8], file_len: u64) -> Option<Self> {
        let b = tail.get(tail.len().checked_sub(TRAILER_LEN)?..)?;
        if b[24..28] != TRAILER_MAGIC || crc(&b[..28]) != u32_at(b, 28) {
            return None;
        }
        let t = Self {
            index_offset: u64_at(b, 0),
            raw_len: u64_at(b, 8),
            records: u64_at(b, 16),
        };
        let index_room = file_len.checked_sub(TRAILER_LEN as u64)?;
        (t.index_offset >= HEADER_LEN as u64
            && t.index_offset
                .checked_add(12)
                .is_some_and(|e| e <= index_room))
        .then_some(t)
    }
}

/// Parses a block index: `bytes` runs from `index_offset` to the trailer. `None` unless the
/// magic, length and crc hold and the blocks lie in order between the header and the index.
/// An id index after it ([`read_id_index`]) is passed over.
pub fn read_index(bytes: &[u8], index_offset: u64) -> Option<Vec<BlockEntry>> {
    if bytes.len() < 12 || bytes[0..4] != INDEX_MAGIC {
        return None;
    }
    let count = u32_at(bytes, 4) as usize;
    let body = count.checked_mul(INDEX_ENTRY_LEN)?.checked_add(8)?;
    if bytes.len() < body + 4 || crc(&bytes[..body]) != u32_at(bytes, body) {
        return None;
    }
    // After the block index: nothing, or an id index whose header says it runs to the end.
    let rest = &bytes[body + 4..];
    if !rest.is_empty() && super::ids::section_len(rest) != Some(rest.len()) {
        return None;
    }
    let mut out = Vec::with_capacity(count);
    let mut next_min = HEADER_LEN as u64;
    for e in bytes[8..body].chunks_exact(INDEX_ENTRY_LEN) {
        let entry = BlockEntry {
            offset: u64_at(e, 0),
            count: u32_at(e, 8),
            first_offset: u64_at(e, 12),
            min_time: u64_at(e, 20),
            max_time: u64_at(e, 28),
        };
        if entry.offset < next_min || entry.offset + BLOCK_HEADER_LEN as u64 > index_offset {
            return None;
        }
        next_min = entry.offset + BLOCK_HEADER_LEN as u64;
        out.push(entry);
    }
    Some(out)
}

/// The id index after the block index in `bytes` (from `index_offset` to the trailer), if
/// there is one and it checks for the block index's `blocks` blocks.
pub fn read_id_index(bytes: &[u8], blocks: usize) -> Option<IdIndex> {
    let at = blocks.checked_mul(INDEX_ENTRY_LEN)?.checked_add(12)?;
    IdIndex::decode(bytes.get(at..)?, blocks)
}

/// What walking a compact file by its block headers found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Walk {
    /// Blocks whose header checks, with the offset of the header (bodies not checked yet).
    pub blocks: Vec<(u64, BlockHeader)>,
    /// Runs of bytes that are not blocks: (offset, length).
    pub damage: Vec<(u64, u64)>,
    /// The trailer, if it checks.
    pub trailer: Option<Trailer>,
}

/// Walks the blocks of a whole compact file (`file` holds all of it) by their headers from
/// offset 16, for when the trailer or index does not check: a block header that fails is
/// damage up to the next valid block header, or up to a valid index.
pub fn walk_blocks(file: &[u8]) -> Walk {
    let len = file.len() as u64;
    // Where the blocks end: the index the trailer names, else wherever a valid index starts,
    // else the trailer's place if its magic is there, else the end of the file.
    let end = match Trailer::decode(file, len) {
        Some(t) => t.index_offset as usize,
        None if file.len() >= HEADER_LEN + TRAILER_LEN
            && file[file.len() - 8..file.len() - 4] == TRAILER_MAGIC =>
        {
            file.len() - TRAILER_LEN
        }
        None => file.len(),
    };
    let is_index_at = |pos: usize| {
        file.get(pos..pos + 4) == Some(&INDEX_MAGIC[..])
            && read_index(&file[pos..end.max(pos)], pos as u64).is_some()
    };
    let block_at = |pos: usize| {
        BlockHeader::decode(&file[pos..end.max(pos)])
            .filter(|h| (pos as u64 + h.total_len()) <= end as u64)
    };
    let mut walk = Walk {
        trailer: Trailer::decode(file, len),
        ..Walk::default()
    };
    let mut pos = HEADER_LEN.min(end);
    while pos < end {
        if let Some(h) = block_at(pos) {
            walk.blocks.push((pos as u64, h));
            pos += h.total_len() as usize;
            continue;
        }
        if is_index_at(pos) {
            break;
        }
        let from = pos;
        pos += 1;
        while pos < end {
            if file[pos] == BLOCK_MAGIC[0] && block_at(pos).is_some() {
                break;
            }
            if file[pos] == INDEX_MAGIC[0] && is_index_at(pos) {
                break;
            }
            pos += 1;
        }
        walk.damage.push((from as u64, (pos - from) as u64));
        if pos < end && is_index_at(pos) {
            break;
        }
    }
    walk
}

/// Hashes labels fast (FxHash): the keys are a block's own labels, not hostile input that
/// could make a map slow on purpose in a way that matters here.
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.0 = (self.0.rotate_left(5) ^ u64_at(c, 0)).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// One lane's state (a worker's current thread), the same in encoder and decoder.
#[derive(Debug, Clone, Default)]
struct Lane {
    last_time: u64,
    last_start: u32,
    /// Open frames, innermost last: (id, context).
    stack: Vec<(u32, u32)>,
    /// Decoder only: the name of the lane's last `thread_info` as (start, length) in the
    /// block's checked text, so that a name seen before is neither checked nor copied again.
    name: Option<(u32, u32)>,
}

impl Lane {
    fn reset(&mut self, min_time: u64) {
        self.last_time = min_time;
        self.last_start = 0;
        self.stack.clear();
        self.name = None;
    }

    // Always: once the decoder grew, the compiler stopped inlining it (and `Lanes::of`) into
    // the per-record loop, a tenth of the decode's time.
    #[inline(always)]
    fn push(&mut self, id: u32, context: u32) {
        if self.stack.len() == MAX_STACK {
            self.drop_bottom();
        }
        self.stack.push((id, context));
    }

    #[cold]
    #[inline(never)]
    fn drop_bottom(&mut self) {
        self.stack.remove(0);
    }
}

/// Threads a block holds before [`Lanes`] looks them up in a hash map rather than a list.
const FEW_THREADS: usize = 16;

/// The per-block lane bookkeeping: which lane each worker is on, lanes by (worker, thread).
#[derive(Debug, Default)]
struct Lanes {
    lanes: Vec<Lane>,
    used: usize,
    /// Lane of each worker now (`u32::MAX`: none yet).
    current: Vec<u32>,
    /// Thread lanes in order of appearance: ((worker, thread), lane). Searched in order while
    /// there are few (a block usually holds a handful of threads, each seen many times).
    threads: Vec<((u8, u32), u32)>,
    /// The same, once there are more than [`FEW_THREADS`].
    by_thread: FxMap<(u8, u32), u32>,
    min_time: u64,
}

impl Lanes {
    fn reset(&mut self, min_time: u64) {
        self.used = 0;
        self.current.clear();
        self.current.resize(256, u32::MAX);
        self.threads.clear();
        self.by_thread.clear();
        self.min_time = min_time;
    }

    #[cold]
    #[inline(never)]
    fn new_lane(&mut self) -> u32 {
        if self.used == self.lanes.len() {
            self.lanes.push(Lane::default());
        }
        self.lanes[self.used].reset(self.min_time);
        self.used += 1;
        (self.used - 1) as u32
    }

    /// The lane of `worker`'s next record (its "no thread yet" lane if it has none).
    #[inline(always)]
    fn of(&mut self, worker: u8) -> usize {
        let cur = self.current[worker as usize];
        if cur != u32::MAX {
            return cur as usize;
        }
        let l = self.new_lane();
        self.current[worker as usize] = l;
        l as usize
    }

    /// A `thread_info` of `worker` for `thread`: the worker's lane becomes that thread's.
    #[inline]
    fn switch(&mut self, worker: u8, thread: u32) -> usize {
        let key = (worker, thread);
        let found = if self.threads.len() <= FEW_THREADS {
            self.threads.iter().find(|e| e.0 == key).map(|e| e.1)
        } else {
            self.by_thread.get(&key).copied()
        };
        let l = match found {
            Some(l) => l,
            None => {
                let l = self.new_lane();
                self.threads.push((key, l));
                if self.threads.len() == FEW_THREADS + 1 {
                    self.by_thread.extend(self.threads.iter().copied());
                } else if self.threads.len() > FEW_THREADS {
                    self.by_thread.insert(key, l);
                }
                l
            }
        };
        self.current[worker as usize] = l;
        l as usize
    }
}

/// Why the encoder refused a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("record at offset {offset}: {why}")]
pub struct EncodeError {
    /// The record's offset.
    pub offset: u64,
    /// What is wrong.
    pub why: String,
}

/// Builds a compact (version 2) frame-log file from the records of one raw segment.
///
/// Every stream but `times` is written as records arrive; timestamps wait for the block to
/// close, because each lane's first delta is taken from the block's `min_time`.
pub struct FramesEncoder {
    out: Vec<u8>,
    index: Vec<BlockEntry>,
    records: u64,
    /// Version 4 or 5 (with the `parents` stream) rather than 2.
    parents: bool,
    /// Version 5 or 7 (plots in `series` and `values`).
    plots: bool,
    /// Version 7: `gaps` are signed.
    signed_gaps: bool,
    streams: [Vec<u8>; STREAMS_WITH_PLOTS],
    /// The block's labels: id by label, and the table's bytes in id order.
    label_ids: FxMap<Box<str>, u32>,
    label_table: Vec<u8>,
    labels: u32,
    /// Direct-mapped cache in front of `label_ids`: (label, id) by a cheap hash.
    label_cache: Vec<Option<(Box<str>, u32)>>,
    /// Version 5: the block's plot series table (its bytes after the count), each entry's
    /// index by its (`mode`, `unit`, `name`) bytes, each entry's start in the table and last
    /// value bits, and the entry of the previous plot.
    series_table: Vec<u8>,
    series_ids: FxMap<Box<[u8]>, u32>,
    series_last: Vec<(u32, u64)>,
    series_prev: Option<u32>,
    /// The encoded record, for types whose payload is built by encoding (plots, messages,
    /// frame allocations).
    scratch: Vec<u8>,
    lanes: Lanes,
    /// The block's timestamps and each one's lane, for the `times` stream at close.
    times: Vec<(u64, u32)>,
    count: u32,
    first_offset: u64,
    prev_end: u64,
    min_time: u64,
    max_time: u64,
    compressor: zstd::bulk::Compressor<'static>,
    body: Vec<u8>,
    /// Per stream: raw bytes and bytes each compresses to alone (when measuring).
    measure: Option<[(u64, u64); STREAMS_WITH_PLOTS]>,
    level: i32,
    /// Where each worker's start ids and threads are, block by block.
    ids: IdIndexBuilder,
}

/// Slots of the label cache.
const LABEL_CACHE: usize = 256;

#[inline]
fn label_slot(label: &str) -> usize {
    let b = label.as_bytes();
    let mut h = b.len() as u64;
    if b.len() >= 8 {
        h ^= u64_at(b, 0) ^ u64_at(b, b.len() - 8).rotate_left(29);
    } else {
        for &x in b {
            h = (h << 8) | u64::from(x);
        }
    }
    (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize % LABEL_CACHE
}

impl FramesEncoder {
    /// A new version 2 file (no FrameStart with parent), its blocks compressed at zstd
    /// `level`.
    pub fn new(level: i32) -> Self {
        Self::with_version(level, crate::COMPACT_VERSION)
    }

    /// A new version 5 file (FrameStart with parent allowed, plots in their own streams), for
    /// a version 3 raw segment.
    pub fn with_parents(level: i32) -> Self {
        Self::with_version(level, crate::COMPACT_PLOTS_VERSION)
    }

    /// A new version 4 file, as compactors wrote them before version 5 (for tests of readers
    /// of such files).
    #[doc(hidden)]
    pub fn version_4(level: i32) -> Self {
        Self::with_version(level, crate::COMPACT_PARENTS_VERSION)
    }

    /// A new version 7 file, for a version 6 (packed) raw segment: version 5 with signed gaps.
    pub fn packed(level: i32) -> Self {
        Self::with_version(level, crate::COMPACT_PACKED_VERSION)
    }

    fn with_version(level: i32, version: u16) -> Self {
        let mut header = FileHeader::compact(FileKind::FrameLog);
        header.version = version;
        let parents = version != crate::COMPACT_VERSION;
        let mut out = Vec::new();
        out.extend_from_slice(&header.encode());
        let mut enc = Self {
            out,
            index: Vec::new(),
            records: 0,
            parents,
            plots: version == crate::COMPACT_PLOTS_VERSION
                || version == crate::COMPACT_PACKED_VERSION,
            signed_gaps: version == crate::COMPACT_PACKED_VERSION,
            streams: Default::default(),
            label_ids: FxMap::default(),
            label_table: Vec::new(),
            labels: 0,
            label_cache: vec![None; LABEL_CACHE],
            series_table: Vec::new(),
            series_ids: FxMap::default(),
            series_last: Vec::new(),
            series_prev: None,
            scratch: Vec::new(),
            lanes: Lanes::default(),
            times: Vec::new(),
            count: 0,
            first_offset: 0,
            prev_end: 0,
            min_time: u64::MAX,
            max_time: 0,
            // Creating a compression context fails only when out of memory.
            compressor: zstd::bulk::Compressor::new(level).expect("zstd context"),
            body: Vec::new(),
            measure: None,
            level,
            ids: IdIndexBuilder::default(),
        };
        enc.start_block();
        enc
    }

    fn start_block(&mut self) {
        for s in &mut self.streams {
            s.clear();
        }
        self.label_ids.clear();
        self.label_table.clear();
        self.labels = 0;
        for c in &mut self.label_cache {
            *c = None;
        }
        self.series_table.clear();
        self.series_ids.clear();
        self.series_last.clear();
        self.series_prev = None;
        // Lanes' times are set at close; the rest of their state starts fresh now.
        self.lanes.reset(0);
        self.times.clear();
        self.count = 0;
        self.min_time = u64::MAX;
        self.max_time = 0;
    }

    /// Also compresses each stream alone to report which dominates ([`FramesEncoder::stream_sizes`]).
    pub fn measure_streams(&mut self) {
        self.measure = Some([(0, 0); STREAMS_WITH_PLOTS]);
    }

    /// Per stream (in [`STREAM_NAMES`] order): raw bytes and bytes compressed alone, if
    /// measured (streams a file's version lacks stay 0).
    pub fn stream_sizes(&self) -> Option<[(u64, u64); STREAMS_WITH_PLOTS]> {
        self.measure
    }

    /// Streams of this file's blocks: 10 (version 2), 11 (version 4) or 13 (version 5).
    fn stream_count(&self) -> usize {
        if self.plots {
            STREAMS_WITH_PLOTS
        } else if self.parents {
            STREAMS_WITH_PARENTS
        } else {
            STREAMS
        }
    }

    /// The plot's entry in the block's series table (added if new), and the code of its value
    /// against the entry's last (`docs/FORMAT.md`, *Compact plots: version 5*).
    fn series_code(&mut self, p: &Plot<'_>) -> (u32, u64) {
        let name = p.encoded_name().as_bytes();
        let fixed = p.fixed_payload();
        let key = [fixed[8], fixed[9], name.len() as u8];
        // A table entry's bytes are its key: mode, unit, name size, name.
        let entry_is = |e: u32| {
            let at = self.series_last[e as usize].0 as usize;
            let b = &self.series_table[at..];
            b.get(..3) == Some(&key[..]) && b.get(3..3 + name.len()) == Some(name)
        };
        let entry = match self.series_prev {
            Some(e) if entry_is(e) => e,
            _ => {
                self.scratch.clear();
                self.scratch.extend_from_slice(&key);
                self.scratch.extend_from_slice(name);
                let e = match self.series_ids.get(&self.scratch[..]) {
                    Some(&e) => e,
                    None => {
                        let e = self.series_last.len() as u32;
                        self.series_ids.insert(self.scratch[..].into(), e);
                        self.series_last.push((self.series_table.len() as u32, 0));
                        self.series_table.extend_from_slice(&self.scratch);
                        e
                    }
                };
                self.series_prev = Some(e);
                e
            }
        };
        let bits = p.value.to_bits();
        let last = &mut self.series_last[entry as usize].1;
        let code = (bits ^ *last).swap_bytes();
        *last = bits;
        (entry, code)
    }

    #[inline]
    fn label_id(&mut self, label: &str) -> u32 {
        let slot = label_slot(label);
        if let Some((l, id)) = &self.label_cache[slot]
            && **l == *label
        {
            return *id;
        }
        let id = match self.label_ids.get(label) {
            Some(&id) => id,
            None => {
                let id = self.labels;
                self.labels += 1;
                self.label_ids.insert(label.into(), id);
                self.label_table.push(label.len() as u8);
                self.label_table.extend_from_slice(label.as_bytes());
                id
            }
        };
        self.label_cache[slot] = Some((label.into(), id));
        id
    }

    /// Adds the record found at `offset` of the raw segment (offsets must increase, records
    /// must not overlap). `batch` records are refused: they are the raw segment's framing.
    pub fn push(&mut self, offset: u64, rec: &Record<'_>) -> Result<(), EncodeError> {
        let err = |why: &str| EncodeError {
            offset,
            why: why.to_owned(),
        };
        // Everything that can refuse the record is checked before any stream is written.
        let (payload_len, raw_len) = match rec {
            Record::Start(s) => {
                if s.label.len() > 255 {
                    return Err(err("label longer than 255 bytes"));
                }
                if s.parent.is_recorded() && !self.parents {
                    return Err(err("a FrameStart with parent in a version 2 file"));
                }
                (0, s.encoded_len())
            }
            Record::End(_) => (0, FRAME_END_LEN),
            Record::Dropped(_) => (8, EXT_HEADER_LEN + 8),
            Record::WorkerInfo(w) => (4 + w.name.len(), EXT_HEADER_LEN + 4 + w.name.len()),
            Record::ThreadInfo(t) => (t.name.len(), EXT_HEADER_LEN + t.name.len()),
            Record::Plot(p) if self.plots => {
                let n = PLOT_FIXED + p.encoded_name().len();
                if n == PLOT_FIXED {
                    return Err(err("a plot without a series name"));
                }
                (n, EXT_HEADER_LEN + n)
            }
            Record::Plot(_)
            | Record::Message(_)
            | Record::FrameAlloc(_)
            | Record::FramePolls(_)
            | Record::SlowPoll(_) => {
                self.scratch.clear();
                rec.encode_to_vec(&mut self.scratch);
                (self.scratch.len() - EXT_HEADER_LEN, self.scratch.len())
            }
            Record::Unknown(e) => {
                if e.kind == BATCH {
                    return Err(err("a batch record inside a batch"));
                }
                (e.payload.len(), EXT_HEADER_LEN + e.payload.len())
            }
        };
        if payload_len > u16::MAX as usize {
            return Err(err("payload longer than 65,535 bytes"));
        }
        let gap = if self.count == 0 {
            self.ids.begin_block();
            self.first_offset = offset;
            0
        } else if self.signed_gaps {
            // A packed batch's records are one position apart (version 7).
            zigzag(offset.wrapping_sub(self.prev_end) as i64)
        } else if offset < self.prev_end {
            return Err(err("overlaps the record before it"));
        } else {
            offset - self.prev_end
        };
        self.prev_end = offset + raw_len as u64;
        let (kind, worker, id, timestamp, label) = match rec {
            Record::Start(s) => (
                s.record_type() as u8,
                s.worker,
                s.id,
                s.timestamp,
                self.label_id(s.label),
            ),
            Record::End(e) => (END, e.worker, e.id, e.timestamp, 0),
            _ => (rec.type_byte(), rec.worker(), rec.id(), rec.timestamp(), 0),
        };
        let lane = if kind == THREAD_INFO {
            self.ids.thread(worker, id);
            self.lanes.switch(worker, id)
        } else {
            self.lanes.of(worker)
        };
        self.times.push((timestamp, lane as u32));
        self.min_time = self.min_time.min(timestamp);
        self.max_time = self.max_time.max(timestamp);
        let plot = match rec {
            Record::Plot(p) if self.plots => Some(self.series_code(p)),
            _ => None,
        };
        let [
            _,
            types,
            workers,
            gaps,
            _,
            ids,
            label_ids,
            contexts,
            categories,
            payloads,
            parents,
            _,
            values,
        ] = &mut self.streams;
        types.push(kind);
        workers.push(worker);
        put_varint(gaps, gap);
        let lane = &mut self.lanes.lanes[lane];
        match rec {
            Record::Start(s) => {
                self.ids.start(worker, id);
                put_varint(ids, zigzag(i64::from(id) - i64::from(lane.last_start) - 1));
                lane.last_start = id;
                put_varint(label_ids, u64::from(label));
                let ctx = match lane.stack.last() {
                    Some(&(_, c)) if c == s.context => 0,
                    _ if s.context == id => 1,
                    _ => u64::from(s.context) + 2,
                };
                put_varint(contexts, ctx);
                categories.push(s.category.0);
                match s.parent {
                    Parent::NotRecorded => {}
                    // `Frame(0)` encodes as a root in raw records too.
                    Parent::Root | Parent::Frame(0) => parents.push(1),
                    Parent::Frame(p) if lane.stack.last().is_some_and(|&(top, _)| top == p) => {
                        parents.push(0)
                    }
                    Parent::Frame(p) => {
                        put_varint(parents, 2 + zigzag(i64::from(id) - i64::from(p)))
                    }
                }
                lane.push(id, s.context);
            }
            Record::End(_) => match lane.stack.iter().rev().position(|&(i, _)| i == id) {
                Some(k) => {
                    put_varint(ids, 2 * k as u64);
                    if k == 0 {
                        lane.stack.pop();
                    } else {
                        let at = lane.stack.len() - 1 - k;
                        lane.stack.remove(at);
                    }
                }
                None => put_varint(
                    ids,
                    2 * zigzag(i64::from(id) - i64::from(lane.last_start)) + 1,
                ),
            },
            Record::Plot(_) if plot.is_some() => {
                let (entry, code) = plot.unwrap_or_default();
                put_varint(ids, u64::from(id));
                put_varint(values, u64::from(entry));
                put_varint(values, code);
            }
            _ => {
                put_varint(ids, u64::from(id));
                put_varint(payloads, payload_len as u64);
                match rec {
                    Record::Dropped(d) => payloads.extend_from_slice(&d.count.to_le_bytes()),
                    Record::WorkerInfo(w) => {
                        payloads.extend_from_slice(&w.pid.to_le_bytes());
                        payloads.extend_from_slice(w.name.as_bytes());
                    }
                    Record::ThreadInfo(t) => payloads.extend_from_slice(t.name.as_bytes()),
                    Record::Unknown(e) => payloads.extend_from_slice(e.payload),
                    Record::Plot(_)
                    | Record::Message(_)
                    | Record::FrameAlloc(_)
                    | Record::FramePolls(_)
                    | Record::SlowPoll(_) => {
                        payloads.extend_from_slice(&self.scratch[EXT_HEADER_LEN..]);
                    }
                    Record::Start(_) | Record::End(_) => {}
                }
            }
        }
        self.count += 1;
        self.records += 1;
        // Bound the raw body: every stream but the payloads takes at most 48 bytes a record,
        // and the next record adds at most MAX_RECORD_RAW.
        let est = self.streams[PAYLOADS].len()
            + self.label_table.len()
            + self.series_table.len()
            + self.count as usize * 48;
        if self.count == MAX_BLOCK_RECORDS || est + MAX_RECORD_RAW + 4096 > MAX_RAW_BLOCK_LEN {
            self.close_block();
        }
        Ok(())
    }

    fn close_block(&mut self) {
        if self.count == 0 {
            return;
        }
        let (min_time, max_time) = (self.min_time, self.max_time);
        for lane in &mut self.lanes.lanes[..self.lanes.used] {
            lane.last_time = min_time;
        }
        let times = &mut self.streams[TIMES];
        for &(t, lane) in &self.times {
            let lane = &mut self.lanes.lanes[lane as usize];
            put_varint(times, zigzag(t.wrapping_sub(lane.last_time) as i64));
            lane.last_time = t;
        }
        let labels = &mut self.streams[LABELS];
        put_varint(labels, u64::from(self.labels));
        labels.extend_from_slice(&self.label_table);
        if self.plots {
            let series = &mut self.streams[SERIES];
            put_varint(series, self.series_last.len() as u64);
            series.extend_from_slice(&self.series_table);
        }
        self.body.clear();
        let streams = &self.streams[..self.stream_count()];
        for s in streams {
            self.body.extend_from_slice(&(s.len() as u32).to_le_bytes());
        }
        for s in streams {
            self.body.extend_from_slice(s);
        }
        if let Some(m) = &mut self.measure {
            for (i, s) in streams.iter().enumerate() {
                m[i].0 += s.len() as u64;
                m[i].1 += super::compress(s, self.level).len() as u64;
            }
        }
        // Compressing from memory into memory fails only when out of memory.
        let compressed = self
            .compressor
            .compress(&self.body)
            .expect("zstd compresses");
        let header = BlockHeader {
            len: compressed.len() as u32,
            raw_len: self.body.len() as u32,
            count: self.count,
            first_offset: self.first_offset,
            min_time,
            max_time,
            crc: crc(&compressed),
        };
        self.index.push(BlockEntry {
            offset: self.out.len() as u64,
            count: header.count,
            first_offset: header.first_offset,
            min_time,
            max_time,
        });
        self.out.extend_from_slice(&header.encode());
        self.out.extend_from_slice(&compressed);
        self.ids.end_block();
        self.start_block();
    }

    /// Records pushed so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Like [`FramesEncoder::finish`], also returning the per-stream sizes if measured.
    pub fn finish_measured(
        mut self,
        raw_len: u64,
    ) -> (Vec<u8>, Option<[(u64, u64); STREAMS_WITH_PLOTS]>) {
        self.close_block();
        let sizes = self.measure;
        (self.finish(raw_len), sizes)
    }

    /// Closes the last block and returns the whole file; `raw_len` is the raw segment's length.
    pub fn finish(mut self, raw_len: u64) -> Vec<u8> {
        self.close_block();
        let index_offset = self.out.len() as u64;
        let at = self.out.len();
        self.out.extend_from_slice(&INDEX_MAGIC);
        self.out
            .extend_from_slice(&(self.index.len() as u32).to_le_bytes());
        for e in &self.index {
            self.out.extend_from_slice(&e.offset.to_le_bytes());
            self.out.extend_from_slice(&e.count.to_le_bytes());
            self.out.extend_from_slice(&e.first_offset.to_le_bytes());
            self.out.extend_from_slice(&e.min_time.to_le_bytes());
            self.out.extend_from_slice(&e.max_time.to_le_bytes());
        }
        let c = crc(&self.out[at..]);
        self.out.extend_from_slice(&c.to_le_bytes());
        let ids = std::mem::take(&mut self.ids).finish();
        self.out.extend_from_slice(&ids.encode());
        let trailer = Trailer {
            index_offset,
            raw_len,
            records: self.records,
        };
        self.out.extend_from_slice(&trailer.encode());
        self.out
    }
}

/// One decoded record's fields, before it is handed out as a [`Record`].
#[derive(Debug, Clone, Copy, Default)]
struct Row {
    offset: u64,
    timestamp: u64,
    id: u32,
    /// FrameStart: context; extension: payload length.
    a: u32,
    /// FrameStart: label index; `thread_info`: its name's start in the checked text; other
    /// extensions: payload start in the body.
    b: u32,
    kind: u8,
    worker: u8,
    category: u8,
}

// 32 bytes: a row is written and read once per record, so its size is load speed. A FrameStart
// with parent's `parent` lives beside the rows (`BlockDecoder::row_parents`, versions 4 and 5 only).
const _: () = assert!(size_of::<Row>() == 32);

/// Decodes compact blocks; keeps its buffers between blocks.
pub struct BlockDecoder {
    raw: Vec<u8>,
    rows: Vec<Row>,
    /// Version 4 blocks: each row's `parent` field (0 but for a FrameStart with parent).
    row_parents: Vec<u32>,
    /// Text of the block checked as UTF-8 once, while decoding (labels, thread names), so
    /// that handing records out slices it without checking again.
    text: String,
    /// The label table: (start in `text`, length).
    labels: Vec<(u32, u8)>,
    lanes: Lanes,
    decompressor: Option<zstd::bulk::Decompressor<'static>>,
    /// Blocks of a version 4 or 5 file (FrameStart with parent).
    parents: bool,
    /// Blocks of a version 5 or 7 file (plots in `series` and `values`).
    plots: bool,
    /// Blocks of a version 7 file: `gaps` are signed.
    signed_gaps: bool,
    /// Version 5: the block's plot series table, each entry (name's start in `text`, name's
    /// length, mode, unit).
    series: Vec<(u32, u8, PlotMode, PlotUnit)>,
    /// Version 5: each plot row's value bits (the row's `b` indexes it).
    values: Vec<u64>,
    /// The newest frame start or end time of the block decoded last (0: none).
    max_frame_time: u64,
    /// Which decode this is, unique in the process (see [`BlockDecoder::generation`]).
    generation: u64,
}

/// Numbers every block decode in the process, so that a label's index in a block's table
/// names one label only together with its decode's number.
static GENERATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Default for BlockDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for BlockDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockDecoder").finish_non_exhaustive()
    }
}

/// Reads one varint of a stream, or says which stream ran short.
#[inline(always)]
fn varint(s: &mut &[u8], name: &str) -> Result<u64, String> {
    if let Some(&b) = s.first()
        && b < 0x80
    {
        *s = &s[1..];
        return Ok(u64::from(b));
    }
    get_varint(s).ok_or_else(|| format!("stream {name} ends early or holds a bad varint"))
}

#[inline(always)]
fn byte(s: &mut &[u8], name: &str) -> Result<u8, String> {
    let (&b, rest) = s
        .split_first()
        .ok_or_else(|| format!("stream {name} ends early"))?;
    *s = rest;
    Ok(b)
}

impl BlockDecoder {
    /// A decoder with empty buffers.
    pub fn new() -> Self {
        Self {
            raw: Vec::new(),
            rows: Vec::new(),
            row_parents: Vec::new(),
            text: String::new(),
            labels: Vec::new(),
            lanes: Lanes::default(),
            decompressor: zstd::bulk::Decompressor::new().ok(),
            parents: false,
            plots: false,
            signed_gaps: false,
            series: Vec::new(),
            values: Vec::new(),
            max_frame_time: 0,
            generation: 0,
        }
    }

    /// Decodes blocks of a file of `version` from now on: 4 has the `parents` stream, 5 also
    /// `series` and `values`, 2 none of them.
    pub fn set_version(&mut self, version: u16) {
        use crate::{COMPACT_PACKED_VERSION, COMPACT_PARENTS_VERSION, COMPACT_PLOTS_VERSION};
        self.parents = matches!(
            version,
            COMPACT_PARENTS_VERSION | COMPACT_PLOTS_VERSION | COMPACT_PACKED_VERSION
        );
        self.plots = matches!(version, COMPACT_PLOTS_VERSION | COMPACT_PACKED_VERSION);
        self.signed_gaps = version == COMPACT_PACKED_VERSION;
    }

    /// Checks and decodes the block with header `h` whose compressed body is `body`; on
    /// success its records are ready for [`BlockDecoder::for_each`]. The error says why the
    /// block is damaged.
    pub fn decode(&mut self, h: &BlockHeader, body: &[u8]) -> Result<(), String> {
        self.rows.clear();
        self.row_parents.clear();
        self.labels.clear();
        self.series.clear();
        self.values.clear();
        self.text.clear();
        if body.len() != h.len as usize {
            return Err(format!(
                "block body is {} bytes, its header says {}",
                body.len(),
                h.len
            ));
        }
        if crc(body) != h.crc {
            return Err("compact block fails its CRC32C checksum".to_owned());
        }
        let raw_len = h.raw_len as usize;
        if raw_len > MAX_RAW_BLOCK_LEN {
            return Err(format!("block of {raw_len} bytes is over the 16 MiB limit"));
        }
        self.raw.clear();
        self.raw.reserve(raw_len);
        let n = match &mut self.decompressor {
            Some(d) => d.decompress_to_buffer(body, &mut self.raw),
            None => zstd::bulk::decompress_to_buffer(body, &mut self.raw),
        }
        .map_err(|e| format!("compressed body does not decompress: {e}"))?;
        if n != raw_len || self.raw.len() != raw_len {
            return Err(format!(
                "compressed body holds {n} bytes, its header says {raw_len}"
            ));
        }
        self.generation = GENERATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let res = self.decode_rows(h);
        if res.is_err() {
            self.rows.clear();
            self.row_parents.clear();
        }
        res
    }

    fn decode_rows(&mut self, h: &BlockHeader) -> Result<(), String> {
        let raw = &self.raw[..];
        let nstreams = if self.plots {
            STREAMS_WITH_PLOTS
        } else if self.parents {
            STREAMS_WITH_PARENTS
        } else {
            STREAMS
        };
        if raw.len() < 4 * nstreams {
            return Err(format!(
                "body of {} bytes is shorter than its {nstreams} stream lengths",
                raw.len()
            ));
        }
        let mut lens = [0usize; STREAMS_WITH_PLOTS];
        let mut total = 4 * nstreams;
        for (i, l) in lens[..nstreams].iter_mut().enumerate() {
            *l = u32_at(raw, 4 * i) as usize;
            total = total.saturating_add(*l);
        }
        if total != raw.len() {
            return Err(format!(
                "stream lengths add up to {total} bytes, the body holds {}",
                raw.len()
            ));
        }
        let mut streams: [&[u8]; STREAMS_WITH_PLOTS] = [&[]; STREAMS_WITH_PLOTS];
        let mut starts = [0usize; STREAMS_WITH_PLOTS];
        let mut at = 4 * nstreams;
        for i in 0..nstreams {
            starts[i] = at;
            streams[i] = &raw[at..at + lens[i]];
            at += lens[i];
        }
        let count = h.count as usize;
        if streams[TYPES].len() != count || streams[WORKERS].len() != count {
            return Err(format!(
                "types and workers streams hold {} and {} bytes for {count} records",
                streams[TYPES].len(),
                streams[WORKERS].len()
            ));
        }
        // The label table.
        let mut s = streams[LABELS];
        let n = varint(&mut s, "labels")?;
        if n > s.len() as u64 {
            return Err(format!("label table of {n} labels in {} bytes", s.len()));
        }
        for _ in 0..n {
            let len = byte(&mut s, "labels")? as usize;
            let Some(label) = s.get(..len) else {
                return Err("label table ends inside a label".to_owned());
            };
            let Ok(label) = std::str::from_utf8(label) else {
                return Err("a label is not valid UTF-8".to_owned());
            };
            self.labels.push((self.text.len() as u32, len as u8));
            self.text.push_str(label);
            s = &s[len..];
        }
        if !s.is_empty() {
            return Err("label table has bytes after its labels".to_owned());
        }
        // The plot series table (version 5; an empty stream otherwise).
        let mut s = streams[SERIES];
        if self.plots {
            let n = varint(&mut s, "series")?;
            if n > s.len() as u64 {
                return Err(format!("series table of {n} entries in {} bytes", s.len()));
            }
            for _ in 0..n {
                let mode = match byte(&mut s, "series")? {
                    0 => PlotMode::Value,
                    1 => PlotMode::Summed,
                    m => return Err(format!("plot series of mode {m}")),
                };
                let unit = PlotUnit(byte(&mut s, "series")?);
                let len = byte(&mut s, "series")? as usize;
                let Some(name) = s.get(..len).filter(|n| !n.is_empty()) else {
                    return Err("series table ends inside a name, or a name is empty".to_owned());
                };
                let Ok(name) = std::str::from_utf8(name) else {
                    return Err("a plot series name is not valid UTF-8".to_owned());
                };
                self.series
                    .push((self.text.len() as u32, len as u8, mode, unit));
                self.text.push_str(name);
                s = &s[len..];
            }
        }
        if !s.is_empty() {
            return Err("series table has bytes after its entries".to_owned());
        }
        let mut series_last = vec![0u64; self.series.len()];
        let nlabels = self.labels.len() as u64;
        self.lanes.reset(h.min_time);
        self.rows.reserve(count);
        let types = streams[TYPES];
        let workers = streams[WORKERS];
        let [
            _,
            _,
            _,
            gaps,
            times,
            ids,
            label_ids,
            contexts,
            categories,
            payloads,
            parents,
            _,
            values,
        ] = streams;
        let mut values = values;
        let plots = self.plots;
        let (mut gaps, mut times, mut ids, mut label_ids, mut contexts, mut categories) =
            (gaps, times, ids, label_ids, contexts, categories);
        let mut payloads = payloads;
        let mut parents = parents;
        let with_parents = self.parents;
        let mut prev_end = h.first_offset;
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        let mut frame_hi = 0u64;
        // Plot series names of the block, each checked once and kept once in `text`:
        // (start, length). A block repeats a few names thousands of times.
        let mut plot_names: Vec<(u32, u32)> = Vec::new();
        // A parent for every row (0 but for a FrameStart with parent), set where there is one:
        // not a push per row.
        if with_parents {
            self.row_parents.resize(count, 0);
        }
        let row_parents = &mut self.row_parents[..];
        for i in 0..count {
            let kind = types[i];
            let worker = workers[i];
            let gap = varint(&mut gaps, "gaps")?;
            if i == 0 && gap != 0 {
                return Err("the first record's gap is not 0".to_owned());
            }
            let offset = if self.signed_gaps {
                let o = i128::from(prev_end) + i128::from(unzigzag(gap));
                u64::try_from(o).map_err(|_| "record offset out of range")?
            } else {
                prev_end.checked_add(gap).ok_or("record offset overflows")?
            };
            let id_code = varint(&mut ids, "ids")?;
            let lane = if kind == THREAD_INFO {
                let thread = u32::try_from(id_code).map_err(|_| "thread id over u32")?;
                self.lanes.switch(worker, thread)
            } else {
                self.lanes.of(worker)
            };
            let lane = &mut self.lanes.lanes[lane];
            let dt = unzigzag(varint(&mut times, "times")?);
            let timestamp = lane.last_time.wrapping_add(dt as u64);
            lane.last_time = timestamp;
            lo = lo.min(timestamp);
            hi = hi.max(timestamp);
            let mut row = Row {
                offset,
                timestamp,
                kind,
                worker,
                ..Row::default()
            };
            let len = match kind {
                START | START_WITH_PARENT if kind == START || with_parents => {
                    let id = i64::from(lane.last_start) + 1 + unzigzag(id_code);
                    let id = u32::try_from(id).map_err(|_| "frame id out of range")?;
                    lane.last_start = id;
                    let label = varint(&mut label_ids, "label_ids")?;
                    if label >= nlabels {
                        return Err(format!("label index {label} past the table's {nlabels}"));
                    }
                    let context = match varint(&mut contexts, "contexts")? {
                        0 => match lane.stack.last() {
                            Some(&(_, c)) => c,
                            None => return Err("context of an empty stack".to_owned()),
                        },
                        1 => id,
                        c => u32::try_from(c - 2).map_err(|_| "context out of range")?,
                    };
                    row.category = byte(&mut categories, "categories")?;
                    row.id = id;
                    row.a = context;
                    row.b = label as u32;
                    let head = if kind == START_WITH_PARENT {
                        let parent = match varint(&mut parents, "parents")? {
                            0 => match lane.stack.last() {
                                Some(&(top, _)) => top,
                                None => return Err("parent on an empty stack".to_owned()),
                            },
                            1 => 0,
                            c => u32::try_from(i64::from(id) - unzigzag(c - 2))
                                .ok()
                                .filter(|&p| p != 0)
                                .ok_or("parent out of range")?,
                        };
                        if let Some(p) = row_parents.get_mut(i) {
                            *p = parent;
                        }
                        FRAME_START_PARENT_HEADER_LEN
                    } else {
                        FRAME_START_HEADER_LEN
                    };
                    lane.push(id, context);
                    frame_hi = frame_hi.max(timestamp);
                    head as u64 + u64::from(self.labels[label as usize].1)
                }
                END => {
                    frame_hi = frame_hi.max(timestamp);
                    if id_code & 1 == 0 {
                        let k = id_code / 2;
                        let depth = lane.stack.len() as u64;
                        if k >= depth {
                            return Err(format!("end of open frame {k} of {depth}"));
                        }
                        row.id = if k == 0 {
                            lane.stack.pop().map_or(0, |e| e.0)
                        } else {
                            lane.stack.remove((depth - 1 - k) as usize).0
                        };
                    } else {
                        let id = i64::from(lane.last_start) + unzigzag(id_code / 2);
                        row.id = u32::try_from(id).map_err(|_| "frame id out of range")?;
                    }
                    FRAME_END_LEN as u64
                }
                BATCH => return Err("a batch record in a compact block".to_owned()),
                PLOT if plots => {
                    if id_code != 0 {
                        return Err("a plot's id is not 0".to_owned());
                    }
                    let entry = varint(&mut values, "values")?;
                    let Some(&(_, name_len, ..)) = self.series.get(entry as usize) else {
                        return Err(format!(
                            "plot series {entry} past the table's {}",
                            self.series.len()
                        ));
                    };
                    let last = &mut series_last[entry as usize];
                    *last ^= varint(&mut values, "values")?.swap_bytes();
                    row.id = entry as u32;
                    row.a = (PLOT_FIXED + name_len as usize) as u32;
                    row.b = self.values.len() as u32;
                    self.values.push(*last);
                    EXT_HEADER_LEN as u64 + u64::from(row.a)
                }
                _ => {
                    row.id = u32::try_from(id_code).map_err(|_| "record id over u32")?;
                    let n = varint(&mut payloads, "payloads")?;
                    if n > u64::from(u16::MAX) || n > payloads.len() as u64 {
                        return Err(format!("payload of {n} bytes runs past its stream"));
                    }
                    let n = n as usize;
                    let payload = &payloads[..n];
                    let malformed = || {
                        format!(
                            "{} record with a malformed payload of {n} bytes",
                            RecordType::name_of(kind)
                        )
                    };
                    row.a = n as u32;
                    row.b = (starts[PAYLOADS] + (lens[PAYLOADS] - payloads.len())) as u32;
                    match kind {
                        DROPPED if n != 8 => return Err(malformed()),
                        PLOT => {
                            // The row's id (a plot has none) says where its name is kept. A
                            // name the block had already was checked then: only the fixed part
                            // is checked again.
                            let name = payload.get(PLOT_FIXED..).unwrap_or_default();
                            let text = &self.text;
                            let seen = plot_names.iter().find(|&&(at, len)| {
                                text.as_bytes().get(at as usize..(at + len) as usize) == Some(name)
                            });
                            row.id = match seen {
                                Some(&(at, len)) => {
                                    let kept = text.get(at as usize..(at + len) as usize);
                                    if Plot::with_name(0, 0, payload, kept.unwrap_or_default())
                                        .is_none()
                                    {
                                        return Err(malformed());
                                    }
                                    at
                                }
                                None => {
                                    let Some(p) = Plot::from_payload(0, 0, payload) else {
                                        return Err(malformed());
                                    };
                                    let at = self.text.len() as u32;
                                    self.text.push_str(p.name);
                                    if plot_names.len() < 16 {
                                        plot_names.push((at, name.len() as u32));
                                    }
                                    at
                                }
                            };
                        }
                        MESSAGE if Message::from_payload(0, 0, 0, payload).is_none() => {
                            return Err(malformed());
                        }
                        FRAME_ALLOC if FrameAlloc::from_payload(0, 0, 0, payload).is_none() => {
                            return Err(malformed());
                        }
                        FRAME_POLLS if FramePolls::from_payload(0, 0, 0, payload).is_none() => {
                            return Err(malformed());
                        }
                        SLOW_POLL if SlowPoll::from_payload(0, 0, 0, payload).is_none() => {
                            return Err(malformed());
                        }
                        WORKER_INFO if n < 4 || std::str::from_utf8(&payload[4..]).is_err() => {
                            return Err(malformed());
                        }
                        THREAD_INFO => {
                            // Its name, checked and kept once per lane while it stays the same.
                            let seen = lane.name.filter(|&(at, len)| {
                                self.text.as_bytes().get(at as usize..(at + len) as usize)
                                    == Some(payload)
                            });
                            row.b = match seen {
                                Some((at, _)) => at,
                                None => {
                                    let Ok(name) = std::str::from_utf8(payload) else {
                                        return Err(malformed());
                                    };
                                    let at = self.text.len() as u32;
                                    self.text.push_str(name);
                                    lane.name = Some((at, n as u32));
                                    at
                                }
                            };
                        }
                        _ => {}
                    }
                    payloads = &payloads[n..];
                    EXT_HEADER_LEN as u64 + n as u64
                }
            };
            prev_end = offset.checked_add(len).ok_or("record offset overflows")?;
            self.rows.push(row);
        }
        let left: usize = [
            gaps, times, ids, label_ids, contexts, categories, payloads, parents, values,
        ]
        .iter()
        .map(|s| s.len())
        .sum();
        if left != 0 {
            return Err(format!(
                "{left} bytes of streams left after {count} records"
            ));
        }
        if lo != h.min_time || hi != h.max_time {
            return Err("records' times do not match the block's time range".to_owned());
        }
        self.max_frame_time = frame_hi;
        Ok(())
    }

    /// The newest frame start or end time of the block decoded last (0: none): where a
    /// reader places damage found after it (other records' times, such as a writer's
    /// announcement on the wall clock, are not frame times).
    pub fn max_frame_time(&self) -> u64 {
        self.max_frame_time
    }

    /// The number of the last decode, unique in the process (0 before the first): the `block` of the
    /// [`LabelKey`]s [`BlockDecoder::for_each_labelled_from`] hands out.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Records of the block decoded last, after the header's checks and `decode` succeeded.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether the last decoded block holds no records (or failed).
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The first record of the decoded block at raw offset `offset` or later.
    pub fn first_at_or_after(&self, offset: u64) -> usize {
        self.rows.partition_point(|r| r.offset < offset)
    }

    /// Raw-segment offset of record `i` of the decoded block.
    pub fn offset(&self, i: usize) -> Option<u64> {
        self.rows.get(i).map(|r| r.offset)
    }

    /// Raw-segment offset just past the decoded block's last record: where a reader that
    /// delivered it goes on. In a version 7 file the next record may be one position later
    /// (a packed batch's records are one apart), so it is that.
    pub fn end_offset(&self) -> Option<u64> {
        let r = self.rows.last()?;
        if self.signed_gaps {
            return Some(r.offset + 1);
        }
        let len = match r.kind {
            START => FRAME_START_HEADER_LEN as u64 + u64::from(self.labels[r.b as usize].1),
            START_WITH_PARENT if self.parents => {
                FRAME_START_PARENT_HEADER_LEN as u64 + u64::from(self.labels[r.b as usize].1)
            }
            END => FRAME_END_LEN as u64,
            _ => EXT_HEADER_LEN as u64 + u64::from(r.a),
        };
        Some(r.offset + len)
    }
}

/// What takes a decoded block's records in order ([`BlockDecoder::for_each_labelled_from`]):
/// any `FnMut(offset, record, label key)`, or a reader's own type whose `record` is
/// `#[inline(always)]`, so that its work is compiled into the decoder's hand-out loop.
pub trait RecordHandler {
    /// One record, at raw offset `offset`, with its [`LabelKey`].
    fn record(&mut self, offset: u64, rec: Record<'_>, key: LabelKey);
}

impl<F: FnMut(u64, Record<'_>, LabelKey)> RecordHandler for F {
    #[inline(always)]
    fn record(&mut self, offset: u64, rec: Record<'_>, key: LabelKey) {
        self(offset, rec, key)
    }
}

#[inline]
fn checked_text(b: &[u8]) -> &str {
    // Checked while decoding the block.
    std::str::from_utf8(b).unwrap_or_default()
}

impl BlockDecoder {
    /// Calls `f` with the raw offset and record of every record of the decoded block from
    /// record `from` on, in order.
    #[inline]
    pub fn for_each_from(&self, from: usize, mut f: impl FnMut(u64, Record<'_>)) {
        self.for_each_labelled_from(from, |offset, rec: Record<'_>, _| f(offset, rec));
    }

    /// [`BlockDecoder::for_each_from`], with each start's [`LabelKey`]: the label's index in
    /// the block's table and this decode's [`BlockDecoder::generation`], which name the label
    /// without comparing its bytes.
    // Always inlined, as a `RecordHandler`'s `record` should be: a reader's per-record work then
    // sits in this loop, with no call and no `Record` built in memory per record.
    #[inline(always)]
    pub fn for_each_labelled_from(&self, from: usize, mut f: impl RecordHandler) {
        let block = self.generation;
        let raw = &self.raw[..];
        let text = &self.text[..];
        let mut labels: Vec<&str> = Vec::with_capacity(self.labels.len());
        for &(at, len) in &self.labels {
            let at = at as usize;
            labels.push(text.get(at..at + len as usize).unwrap_or_default());
        }
        let parents = self.parents;
        let plots = self.plots;
        let row_parents = self.row_parents.get(from..).unwrap_or_default();
        for (i, r) in self.rows.get(from..).unwrap_or_default().iter().enumerate() {
            let rec = match r.kind {
                START | START_WITH_PARENT if r.kind == START || parents => {
                    Record::Start(FrameStart {
                        id: r.id,
                        worker: r.worker,
                        timestamp: r.timestamp,
                        context: r.a,
                        category: Category(r.category),
                        label: labels.get(r.b as usize).copied().unwrap_or_default(),
                        parent: if r.kind == START {
                            Parent::NotRecorded
                        } else {
                            Parent::from_field(row_parents.get(i).copied().unwrap_or(0))
                        },
                    })
                }
                END => Record::End(FrameEnd {
                    id: r.id,
                    worker: r.worker,
                    timestamp: r.timestamp,
                }),
                // Checked when the block was decoded.
                PLOT if plots => {
                    let (at, len, mode, unit) = self
                        .series
                        .get(r.id as usize)
                        .copied()
                        .unwrap_or((0, 0, PlotMode::Value, PlotUnit::COUNT));
                    let at = at as usize;
                    Record::Plot(Plot {
                        worker: r.worker,
                        timestamp: r.timestamp,
                        value: f64::from_bits(self.values.get(r.b as usize).copied().unwrap_or(0)),
                        mode,
                        unit,
                        name: text.get(at..at + len as usize).unwrap_or_default(),
                    })
                }
                kind => {
                    let at = r.b as usize;
                    let payload = raw.get(at..at + r.a as usize).unwrap_or_default();
                    let unknown = Extension {
                        id: r.id,
                        worker: r.worker,
                        kind,
                        timestamp: r.timestamp,
                        payload,
                    };
                    match kind {
                        DROPPED => {
                            let mut c = [0u8; 8];
                            c.copy_from_slice(payload.get(..8).unwrap_or(&[0; 8]));
                            Record::Dropped(Dropped {
                                worker: r.worker,
                                timestamp: r.timestamp,
                                count: u64::from_le_bytes(c),
                            })
                        }
                        WORKER_INFO => {
                            let mut pid = [0u8; 4];
                            pid.copy_from_slice(payload.get(..4).unwrap_or(&[0; 4]));
                            Record::WorkerInfo(WorkerInfo {
                                worker: r.worker,
                                timestamp: r.timestamp,
                                pid: u32::from_le_bytes(pid),
                                name: checked_text(payload.get(4..).unwrap_or_default()),
                            })
                        }
                        THREAD_INFO => Record::ThreadInfo(ThreadInfo {
                            worker: r.worker,
                            thread: r.id,
                            timestamp: r.timestamp,
                            name: {
                                let at = r.b as usize;
                                text.get(at..at + r.a as usize).unwrap_or_default()
                            },
                        }),
                        // Checked when the block was decoded.
                        // Its name was checked and kept in `text` when the block was decoded.
                        PLOT => {
                            let at = r.id as usize;
                            let name_len = (r.a as usize).saturating_sub(PLOT_FIXED);
                            let name = text.get(at..at + name_len).unwrap_or_default();
                            Plot::with_name(r.worker, r.timestamp, payload, name)
                                .map_or(Record::Unknown(unknown), Record::Plot)
                        }
                        MESSAGE => Message::from_payload(r.id, r.worker, r.timestamp, payload)
                            .map_or(Record::Unknown(unknown), Record::Message),
                        FRAME_ALLOC => {
                            FrameAlloc::from_payload(r.id, r.worker, r.timestamp, payload)
                                .map_or(Record::Unknown(unknown), Record::FrameAlloc)
                        }
                        FRAME_POLLS => {
                            FramePolls::from_payload(r.id, r.worker, r.timestamp, payload)
                                .map_or(Record::Unknown(unknown), Record::FramePolls)
                        }
                        SLOW_POLL => SlowPoll::from_payload(r.id, r.worker, r.timestamp, payload)
                            .map_or(Record::Unknown(unknown), Record::SlowPoll),
                        _ => Record::Unknown(unknown),
                    }
                }
            };
            let label = if r.kind == START || (r.kind == START_WITH_PARENT && parents) {
                r.b
            } else {
                u32::MAX
            };
            f.record(r.offset, rec, LabelKey { block, label });
        }
    }

    /// Calls `f` with every record of the decoded block.
    pub fn for_each(&self, f: impl FnMut(u64, Record<'_>)) {
        self.for_each_from(0, f)
    }
}

/// One block's outcome while decoding a whole file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileEvent<'a> {
    /// A record of a block that checks.
    Record(u64, Record<'a>),
    /// Bytes of the file that are damage: (offset in the compact file, length, why).
    Damaged(u64, u64, String),
}

/// Where a compact file's blocks are: from its index when the trailer and index check, else
/// by walking their headers.
pub fn locate_blocks(file: &[u8]) -> Walk {
    let len = file.len() as u64;
    let trailer = Trailer::decode(file, len);
    if let Some(t) = trailer {
        let ix = &file[t.index_offset as usize..file.len() - TRAILER_LEN];
        if let Some(entries) = read_index(ix, t.index_offset) {
            let mut blocks = Vec::with_capacity(entries.len());
            let mut damage = Vec::new();
            for (i, e) in entries.iter().enumerate() {
                let next = entries.get(i + 1).map_or(t.index_offset, |n| n.offset);
                let span = &file[e.offset as usize..next as usize];
                match BlockHeader::decode(span) {
                    Some(h) if h.total_len() == span.len() as u64 && e.matches(&h) => {
                        blocks.push((e.offset, h))
                    }
                    _ => damage.push((e.offset, next - e.offset)),
                }
            }
            if entries.first().is_none_or(|e| e.offset > HEADER_LEN as u64) {
                let first = entries.first().map_or(t.index_offset, |e| e.offset);
                if first > HEADER_LEN as u64 {
                    damage.insert(0, (HEADER_LEN as u64, first - HEADER_LEN as u64));
                }
            }
            return Walk {
                blocks,
                damage,
                trailer,
            };
        }
    }
    walk_blocks(file)
}

/// Decodes a whole compact frame-log file held in memory (after its 16-byte header) into
/// records and damage, in file order. For checks and tests; readers go block by block.
pub fn decode_file(file: &[u8], mut f: impl FnMut(FileEvent<'_>)) {
    if file.len() < HEADER_LEN {
        f(FileEvent::Damaged(
            0,
            file.len() as u64,
            "file shorter than its header".into(),
        ));
        return;
    }
    let walk = locate_blocks(file);
    let version = u16::from_le_bytes([file[8], file[9]]);
    enum Part {
        Damage(u64),
        Block(BlockHeader),
    }
    let mut parts: Vec<(u64, Part)> = Vec::new();
    parts.extend(walk.damage.iter().map(|&(o, l)| (o, Part::Damage(l))));
    parts.extend(walk.blocks.iter().map(|&(o, h)| (o, Part::Block(h))));
    parts.sort_by_key(|e| e.0);
    let mut dec = BlockDecoder::new();
    dec.set_version(version);
    for (at, part) in parts {
        match part {
            Part::Damage(l) => f(FileEvent::Damaged(
                at,
                l,
                "not a valid compact block header".into(),
            )),
            Part::Block(h) => {
                let body_at = at as usize + BLOCK_HEADER_LEN;
                let body = &file[body_at..body_at + h.len as usize];
                match dec.decode(&h, body) {
                    Ok(()) => dec.for_each(|off, rec| f(FileEvent::Record(off, rec))),
                    Err(why) => f(FileEvent::Damaged(at, h.total_len(), why)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
