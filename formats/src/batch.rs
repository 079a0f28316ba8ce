//! Batch framing: checksummed, length-framed groups of records, so that damage costs the
//! batch it touches and readers resynchronise at the next valid batch.
//!
//! - **Frame logs.** A batch is a `batch` extension record (type 5, 32 bytes) followed by
//!   `len` bytes of whole records whose CRC32C it carries. Its own fields carry a second
//!   CRC32C, so a reader trusts `len` before the body has arrived: a valid header with a
//!   short body is a batch being written (or torn by a crash), anything else is damage.
//! - **Frame data.** A batch is a *marker* data entry (id 0, a fixed 37-byte BSON document)
//!   followed by `len` bytes of data entries; the index holds the marker's entry followed by
//!   the batch's `count` entries, whose CRC32C the marker carries too.
//!
//! A file written this way has [`FLAG_BATCHES`] set in its header. Byte layouts are in
//! `docs/FORMAT.md`, section "Batch framing". Everything here is pure: no I/O.

use std::ops::Range;

use crate::FrameKey;
use crate::data::{INDEX_ENTRY_LEN, decode_data_entry, decode_index_entry};
use crate::error::{DecodeError, ErrorKind};
use crate::record::{
    Decoded, EXT_HEADER_LEN, FRAME_END_LEN, FRAME_START_HEADER_LEN, RecordType, decode_record,
};

/// Header flag (bit 0): every append to this file is batch-framed.
pub const FLAG_BATCHES: u32 = 1;
/// Length of a frame-log `batch` record (16-byte extension header + 16-byte payload).
pub const BATCH_RECORD_LEN: usize = 32;
/// `payload_size` of a `batch` record.
const BATCH_PAYLOAD_LEN: u16 = 16;
/// The `type` byte of a packed batch's header record (`docs/FORMAT.md`, *Packed batches*;
/// how its body is coded is the packed module's business, not framing's).
pub const PACKED_BATCH_TYPE: u8 = 12;
/// Writers close a frame-log batch before its records pass this many bytes.
pub const FRAMES_BATCH_TARGET: usize = 64 << 10;
/// The largest `len` of a valid frame-log batch: the target plus one largest record.
pub const MAX_FRAMES_BATCH_LEN: usize = FRAMES_BATCH_TARGET + EXT_HEADER_LEN + u16::MAX as usize;
/// Length of a frame-data batch marker entry (5-byte entry header + 37-byte document).
pub const DATA_MARKER_LEN: usize = 42;
/// Writers close a frame-data batch before its entries pass this many bytes.
pub const DATA_BATCH_TARGET: usize = 16 << 10;

fn crc(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// What the bytes at a position look like as the start of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe<T> {
    /// A header whose own checksum holds.
    Valid(T),
    /// Too few bytes to tell, and those present fit a header: may become valid.
    NeedMore,
    /// Not the start of a batch.
    Invalid,
}

impl<T> Probe<T> {
    /// Maps a valid header, keeping the other outcomes.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Probe<U> {
        match self {
            Probe::Valid(t) => Probe::Valid(f(t)),
            Probe::NeedMore => Probe::NeedMore,
            Probe::Invalid => Probe::Invalid,
        }
    }
}

/// The header of a frame-log batch: a `batch` record (type 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Worker of the process that appended the batch (informational).
    pub worker: u8,
    /// When the batch was appended, ns since the Unix epoch.
    pub timestamp: u64,
    /// Bytes of records that follow the header.
    pub len: u32,
    /// Number of records in those bytes.
    pub count: u32,
    /// CRC32C (Castagnoli) of those bytes.
    pub crc: u32,
    /// The bytes are a packed body (type 12, `docs/FORMAT.md`, *Packed batches*), not records.
    pub packed: bool,
}

impl BatchHeader {
    /// The header for `records` (whole encoded records, `count` of them).
    pub fn for_records(worker: u8, timestamp: u64, records: &[u8], count: u32) -> Self {
        Self {
            worker,
            timestamp,
            len: records.len() as u32,
            count,
            crc: crc(records),
            packed: false,
        }
    }

    /// The header of a packed body of `count` records (`docs/FORMAT.md`, *Packed batches*),
    /// coded against `worker` and `timestamp`.
    pub fn for_packed(worker: u8, timestamp: u64, body: &[u8], count: u32) -> Self {
        Self {
            packed: true,
            ..Self::for_records(worker, timestamp, body, count)
        }
    }

    /// The record type byte of this header: 5, or 12 for a packed batch.
    fn type_byte(&self) -> u8 {
        if self.packed {
            PACKED_BATCH_TYPE
        } else {
            RecordType::Batch as u8
        }
    }

    /// The record's 32 bytes, its own checksum last.
    pub fn encode(&self) -> [u8; BATCH_RECORD_LEN] {
        let mut out = [0u8; BATCH_RECORD_LEN];
        // id 0, worker, type 5, timestamp, payload_size 16.
        out[4] = self.worker;
        out[5] = self.type_byte();
        out[6..14].copy_from_slice(&self.timestamp.to_le_bytes());
        out[14..16].copy_from_slice(&BATCH_PAYLOAD_LEN.to_le_bytes());
        out[16..20].copy_from_slice(&self.len.to_le_bytes());
        out[20..24].copy_from_slice(&self.count.to_le_bytes());
        out[24..28].copy_from_slice(&self.crc.to_le_bytes());
        let own = crc(&out[..28]);
        out[28..32].copy_from_slice(&own.to_le_bytes());
        out
    }

    /// Checks the bytes at the front of `buf` as a batch record (not its body).
    pub fn probe(buf: &[u8]) -> Probe<Self> {
        let fits = |range: Range<usize>, want: &[u8]| match buf.get(range.clone()) {
            Some(b) => b == want,
            // Only the bytes present are compared.
            None => buf.get(range.start..).is_none_or(|b| want.starts_with(b)),
        };
        let packed = buf.get(5) == Some(&PACKED_BATCH_TYPE);
        if !fits(0..4, &[0; 4])
            || !(packed || fits(5..6, &[RecordType::Batch as u8]))
            || !fits(14..16, &BATCH_PAYLOAD_LEN.to_le_bytes())
        {
            return Probe::Invalid;
        }
        if let Some(b) = buf.get(16..20) {
            let len = u32::from_le_bytes(b.try_into().expect("4 bytes"));
            if len as usize > MAX_FRAMES_BATCH_LEN {
                return Probe::Invalid;
            }
        }
        let Some(head) = buf.get(..BATCH_RECORD_LEN) else {
            return Probe::NeedMore;
        };
        let word = |at: usize| u32::from_le_bytes(head[at..at + 4].try_into().expect("4 bytes"));
        if crc(&head[..28]) != word(28) {
            return Probe::Invalid;
        }
        Probe::Valid(Self {
            worker: head[4],
            timestamp: u64::from_le_bytes(head[6..14].try_into().expect("8 bytes")),
            len: word(16),
            count: word(20),
            crc: word(24),
            packed,
        })
    }
}

/// The header of a frame-data batch: a marker data entry with id 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataMarker {
    /// Worker of the process that appended the batch (informational).
    pub worker: u8,
    /// Bytes of data entries that follow the marker.
    pub len: u32,
    /// Number of data entries in those bytes (and of index entries after the marker's).
    pub count: u32,
    /// CRC32C of the data entries' bytes.
    pub data_crc: u32,
    /// CRC32C of the batch's `count` index entries (after the marker's own index entry).
    pub index_crc: u32,
}

/// The fixed bytes of a marker's BSON document from its length to the binary's subtype:
/// `{"batch": BinData(0x80, 20 bytes)}`.
const MARKER_DOC_HEAD: [u8; 16] = [
    37, 0, 0, 0, // document length
    0x05, b'b', b'a', b't', b'c', b'h', 0, // binary element "batch"
    20, 0, 0, 0,    // binary length
    0x80, // user-defined subtype
];

impl DataMarker {
    /// The marker entry's 42 bytes.
    pub fn encode(&self) -> [u8; DATA_MARKER_LEN] {
        let mut out = [0u8; DATA_MARKER_LEN];
        out[4] = self.worker;
        out[5..21].copy_from_slice(&MARKER_DOC_HEAD);
        out[21..25].copy_from_slice(&self.len.to_le_bytes());
        out[25..29].copy_from_slice(&self.count.to_le_bytes());
        out[29..33].copy_from_slice(&self.data_crc.to_le_bytes());
        out[33..37].copy_from_slice(&self.index_crc.to_le_bytes());
        let own = crc(&out[..37]);
        out[37..41].copy_from_slice(&own.to_le_bytes());
        out
    }

    /// Whether `body` is the batch's data entries, by length and checksum.
    pub fn body_matches(&self, body: &[u8]) -> bool {
        body.len() == self.len as usize && crc(body) == self.data_crc
    }

    /// Checks the bytes at the front of `buf` as a marker entry (not the entries after it).
    pub fn probe(buf: &[u8]) -> Probe<Self> {
        let head_ok = |range: Range<usize>, want: &[u8]| match buf.get(range.clone()) {
            Some(b) => b == want,
            None => buf.get(range.start..).is_none_or(|b| want.starts_with(b)),
        };
        if !head_ok(0..4, &[0; 4]) || !head_ok(5..21, &MARKER_DOC_HEAD) {
            return Probe::Invalid;
        }
        let Some(m) = buf.get(..DATA_MARKER_LEN) else {
            return Probe::NeedMore;
        };
        let word = |at: usize| u32::from_le_bytes(m[at..at + 4].try_into().expect("4 bytes"));
        if m[41] != 0 || crc(&m[..37]) != word(37) {
            return Probe::Invalid;
        }
        Probe::Valid(Self {
            worker: m[4],
            len: word(21),
            count: word(25),
            data_crc: word(29),
            index_crc: word(33),
        })
    }
}

/// The bytes of the record at the front of `buf` by its length fields alone, or `None` if
/// they have not all arrived. Agrees with [`decode_record`] on every whole record.
#[inline]
pub fn record_len(buf: &[u8]) -> Option<usize> {
    if buf.len() < FRAME_END_LEN {
        return None;
    }
    const START: u8 = RecordType::Start as u8;
    const END: u8 = RecordType::End as u8;
    Some(match buf[5] {
        START => FRAME_START_HEADER_LEN + *buf.get(19)? as usize,
        END => FRAME_END_LEN,
        _ => EXT_HEADER_LEN + u16::from_le_bytes([*buf.get(14)?, *buf.get(15)?]) as usize,
    })
}

/// Splits whole encoded records into batches of at most `target` bytes (a bigger record gets
/// a batch of its own); calls `f(range, count)` for each, in order.
///
/// Errors if `records` does not end at a record boundary (the offset is where the partial
/// record starts).
pub fn split_records(
    records: &[u8],
    target: usize,
    mut f: impl FnMut(Range<usize>, u32),
) -> Result<(), DecodeError> {
    let n = records.len();
    let partial = |pos: usize| DecodeError::new(pos as u64, ErrorKind::PartialRecord(n - pos));
    const START: u8 = RecordType::Start as u8;
    const END: u8 = RecordType::End as u8;
    let (mut start, mut pos, mut count) = (0usize, 0usize, 0u32);
    while pos < n {
        // Hot loop: with a FrameStart header's worth of bytes present, every length field is
        // at a fixed offset of a fixed-size array (no bounds checks).
        let len = match records
            .get(pos..pos + FRAME_START_HEADER_LEN)
            .and_then(|h| <&[u8; FRAME_START_HEADER_LEN]>::try_from(h).ok())
        {
            Some(h) => match h[5] {
                END => FRAME_END_LEN,
                START => FRAME_START_HEADER_LEN + h[19] as usize,
                _ => EXT_HEADER_LEN + u16::from_le_bytes([h[14], h[15]]) as usize,
            },
            None => record_len(&records[pos..]).ok_or_else(|| partial(pos))?,
        };
        if pos + len > n {
            return Err(partial(pos));
        }
        if count > 0 && pos + len - start > target {
            f(start..pos, count);
            start = pos;
            count = 0;
        }
        pos += len;
        count += 1;
    }
    if count > 0 {
        f(start..pos, count);
    }
    Ok(())
}

/// Why bytes were skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DamageKind {
    /// Bytes where a batch header should be are not a valid one.
    BadHeader,
    /// A batch's contents do not match its checksum.
    BadChecksum,
    /// A batch ends where no batch can (a torn tail in a segment no writer will extend).
    TornTail,
    /// Bytes in a segment without batch framing do not decode.
    BadRecord(ErrorKind),
    /// Index entries do not match their batch (checksum, count or seeks).
    BadIndex,
    /// A compact (version 2) block that fails its checks: checksum, decompression, decoding.
    BadBlock(String),
    /// A packed batch whose checksum holds but whose body does not unpack.
    BadPacked(String),
}

impl std::fmt::Display for DamageKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DamageKind::BadHeader => f.write_str("not a valid batch header"),
            DamageKind::BadChecksum => f.write_str("batch fails its CRC32C checksum"),
            DamageKind::TornTail => {
                f.write_str("unfinished batch at the end (torn by a crash while being written)")
            }
            DamageKind::BadRecord(k) => write!(f, "{k}"),
            DamageKind::BadIndex => f.write_str("index entries do not match their batch"),
            DamageKind::BadBlock(why) => write!(f, "compact block: {why}"),
            DamageKind::BadPacked(why) => write!(f, "packed batch: {why}"),
        }
    }
}

/// One step through the bytes of a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unit<'a> {
    /// A verified batch; `body` holds its records (or data entries); `len` is its whole size.
    Batch {
        /// Bytes the batch takes, header included.
        len: usize,
        /// The records (frame log) or data entries (frame data) it carries.
        body: &'a [u8],
        /// The batch's worker field.
        worker: u8,
        /// A packed frame-log batch's header (`batch_records` unpacks its body); `None` for
        /// plain records and frame data.
        packed: Option<BatchHeader>,
    },
    /// A record or data entry outside any batch (a file written without batch framing).
    Unframed(usize),
    /// `len` bytes are not valid: skip them.
    Damaged {
        /// Bytes to skip.
        len: usize,
        /// Why.
        why: DamageKind,
    },
    /// The bytes end inside a batch or record: wait for more (never returned at the end).
    NeedMore,
}

/// The two batch framings, frame logs and frame data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `.framelog`: `batch` records.
    Frames,
    /// `.framedata`: marker entries.
    Data,
}

/// A header found by [`Framing::probe`]: the body's length, checksum and worker.
#[derive(Debug, Clone, Copy)]
struct Head {
    header_len: usize,
    body_len: usize,
    crc: u32,
    worker: u8,
    packed: Option<BatchHeader>,
}

impl Framing {
    fn probe(self, buf: &[u8]) -> Probe<Head> {
        match self {
            Framing::Frames => BatchHeader::probe(buf).map(|h| Head {
                header_len: BATCH_RECORD_LEN,
                body_len: h.len as usize,
                crc: h.crc,
                worker: h.worker,
                packed: h.packed.then_some(h),
            }),
            Framing::Data => DataMarker::probe(buf).map(|m| Head {
                header_len: DATA_MARKER_LEN,
                body_len: m.len as usize,
                crc: m.data_crc,
                worker: m.worker,
                packed: None,
            }),
        }
    }

    /// Checks one unframed record or data entry; `Ok(None)` if it is not whole yet.
    fn unframed(self, buf: &[u8]) -> Result<Option<usize>, DecodeError> {
        match self {
            Framing::Frames => match decode_record(buf)? {
                Decoded::Record(_, len) => Ok(Some(len)),
                Decoded::NeedMore => Ok(None),
            },
            Framing::Data => Ok(decode_data_entry(buf)?.map(|e| e.encoded_len())),
        }
    }

    /// The next unit of `buf`, the bytes of a segment from a batch boundary on.
    ///
    /// `framed`: the file has [`FLAG_BATCHES`]. `at_end`: `buf` ends where the file ends for
    /// good (a sealed segment, or a final check), so a partial batch there is a torn tail.
    /// Otherwise `buf` must be long enough to hold any whole batch the caller wants to see
    /// (a partial batch at its end gives [`Unit::NeedMore`]).
    pub fn next_unit(self, buf: &[u8], framed: bool, at_end: bool) -> Unit<'_> {
        if buf.is_empty() {
            return Unit::NeedMore;
        }
        // A partial batch at the end of a file no one will extend is torn; bytes may also
        // have been lost from its middle, so look for whole batches after it.
        let partial = |why| {
            if at_end {
                self.resync(buf, 1, why, at_end)
            } else {
                Unit::NeedMore
            }
        };
        if !framed {
            return match self.unframed(buf) {
                Ok(Some(len)) => Unit::Unframed(len),
                Ok(None) => partial(DamageKind::TornTail),
                Err(e) => self.resync(buf, 1, DamageKind::BadRecord(e.kind), at_end),
            };
        }
        match self.probe(buf) {
            Probe::Valid(h) => {
                let end = h.header_len + h.body_len;
                match buf.get(h.header_len..end) {
                    Some(body) if crc(body) == h.crc => Unit::Batch {
                        len: end,
                        body,
                        worker: h.worker,
                        packed: h.packed,
                    },
                    Some(_) => self.resync(buf, 1, DamageKind::BadChecksum, at_end),
                    None => partial(DamageKind::TornTail),
                }
            }
            Probe::NeedMore => partial(DamageKind::TornTail),
            Probe::Invalid => self.resync(buf, 1, DamageKind::BadHeader, at_end),
        }
    }

    /// Whether `tail`, the bytes after a file's last whole batch, can be the unfinished
    /// batch of a writer that died mid-write: the start of one batch and nothing more.
    /// Anything else (bad bytes, or a whole valid batch inside) is damage a writer must keep.
    pub fn is_torn_tail(self, tail: &[u8]) -> bool {
        let starts_batch = match self.probe(tail) {
            Probe::Valid(h) => tail.len() < h.header_len + h.body_len,
            Probe::NeedMore => true,
            Probe::Invalid => false,
        };
        starts_batch
            && matches!(self.resync(tail, 1, DamageKind::TornTail, true), Unit::Damaged { len, .. } if len == tail.len())
    }

    /// Damage from the front of `buf` up to the next position (from `from` on) where a
    /// batch starts: a valid header whose body checks, or whose body has not all arrived.
    fn resync(self, buf: &[u8], from: usize, why: DamageKind, at_end: bool) -> Unit<'_> {
        for q in from..buf.len() {
            let rest = &buf[q..];
            match self.probe(rest) {
                Probe::Valid(h) => {
                    let end = h.header_len + h.body_len;
                    match rest.get(h.header_len..end) {
                        Some(body) if crc(body) != h.crc => continue,
                        // Whole and valid, or not yet whole: the next batch starts here.
                        _ => return Unit::Damaged { len: q, why },
                    }
                }
                Probe::NeedMore if !at_end => return Unit::Damaged { len: q, why },
                _ => {}
            }
        }
        Unit::Damaged {
            len: buf.len(),
            why,
        }
    }
}

/// Checks a framed data batch's index entries (those after the marker's own entry) against
/// the marker and the batch's place in the data file.
///
/// `entries` are the `count × 9` index bytes; `body_seek` is where the batch's first data
/// entry starts in the data file. Returns the entries, or `None` if they do not match.
pub fn check_index_entries(
    marker: &DataMarker,
    entries: &[u8],
    body_seek: u64,
) -> Option<Vec<crate::IndexEntry>> {
    if entries.len() != marker.count as usize * INDEX_ENTRY_LEN || crc(entries) != marker.index_crc
    {
        return None;
    }
    let range = body_seek..body_seek + u64::from(marker.len);
    let out: Vec<_> = entries
        .chunks_exact(INDEX_ENTRY_LEN)
        .filter_map(decode_index_entry)
        .collect();
    out.iter()
        .all(|e| range.contains(&u64::from(e.seek)))
        .then_some(out)
}

/// The keys and offsets (relative to `body`) of the data entries of a verified data batch,
/// or `None` if they do not walk exactly to its end.
pub fn data_batch_entries(body: &[u8]) -> Option<Vec<(FrameKey, u32)>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < body.len() {
        let e = decode_data_entry(&body[pos..]).ok()??;
        out.push((e.key, pos as u32));
        pos += e.encoded_len();
    }
    Some(out)
}

/// Walks `buf` as a run of whole frame-log batches, plain or packed (`h.packed`), as built by
/// a writer that framed its own records: every batch header must hold (its own checksum, a
/// `len` within bounds) and every body must be entirely present, ending exactly at the end of
/// `buf`. Calls `each` with every header and the byte range of its body. Bodies are **not**
/// checksummed again: that is what lets a writer hand over batches it framed without a
/// second pass over the records
/// (a body that does not match its `crc` is read back as damage, costing that batch only).
///
/// Errors with the offset of the first batch that does not hold or is cut.
pub fn check_batches(
    buf: &[u8],
    mut each: impl FnMut(&BatchHeader, Range<usize>),
) -> Result<(), u64> {
    let mut pos = 0usize;
    while pos < buf.len() {
        let Probe::Valid(h) = BatchHeader::probe(&buf[pos..]) else {
            return Err(pos as u64);
        };
        let body = pos + BATCH_RECORD_LEN..pos + BATCH_RECORD_LEN + h.len as usize;
        if body.end > buf.len() {
            return Err(pos as u64);
        }
        pos = body.end;
        each(&h, body);
    }
    Ok(())
}

/// Index bytes of a data batch: its `entries` (keys and offsets relative to the batch body)
/// with seeks for a marker at `marker_seek`; returns the marker for them.
pub fn frame_data_batch(
    worker: u8,
    body: &[u8],
    entries: &[(FrameKey, u32)],
    marker_seek: u64,
    index_out: &mut Vec<u8>,
) -> DataMarker {
    let body_seek = marker_seek + DATA_MARKER_LEN as u64;
    let start = index_out.len();
    for &(key, rel) in entries {
        let e = crate::IndexEntry {
            key,
            seek: (body_seek + u64::from(rel)) as u32,
        };
        index_out.extend_from_slice(&e.encode());
    }
    let marker = DataMarker {
        worker,
        len: body.len() as u32,
        count: entries.len() as u32,
        data_crc: crc(body),
        index_crc: crc(&index_out[start..]),
    };
    let own = crate::IndexEntry {
        key: FrameKey::new(worker, 0),
        seek: marker_seek as u32,
    };
    index_out.splice(start..start, own.encode());
    marker
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Category, FrameEnd, FrameStart, Record, encode_data_entry, to_document};
    use proptest::prelude::*;

    fn records(n: u32) -> Vec<u8> {
        let mut out = Vec::new();
        for i in 1..=n {
            Record::Start(FrameStart {
                id: i,
                worker: 1,
                timestamp: u64::from(i),
                context: i,
                category: Category::FUNCTION,
                label: "some/label",
                parent: crate::Parent::NotRecorded,
            })
            .encode_to_vec(&mut out);
            Record::End(FrameEnd {
                id: i,
                worker: 1,
                timestamp: u64::from(i) + 5,
            })
            .encode_to_vec(&mut out);
        }
        out
    }

    fn framed(recs: &[u8], target: usize) -> Vec<u8> {
        let mut out = Vec::new();
        split_records(recs, target, |r, count| {
            out.extend_from_slice(
                &BatchHeader::for_records(7, 99, &recs[r.clone()], count).encode(),
            );
            out.extend_from_slice(&recs[r]);
        })
        .unwrap();
        out
    }

    /// Walks framed `bytes` to the end: the bodies of valid batches, and damage (offset, len).
    fn walk_batches(
        bytes: &[u8],
        framing: Framing,
        at_end: bool,
    ) -> (Vec<&[u8]>, Vec<(usize, usize)>) {
        let (mut pos, mut good, mut bad) = (0, Vec::new(), Vec::new());
        loop {
            match framing.next_unit(&bytes[pos..], true, at_end) {
                Unit::Batch { len, body, .. } => {
                    good.push(body);
                    pos += len;
                }
                Unit::Damaged { len, .. } => {
                    bad.push((pos, len));
                    pos += len;
                }
                Unit::Unframed(_) => unreachable!("framed"),
                Unit::NeedMore => return (good, bad),
            }
        }
    }

    /// Like [`walk_batches`], with the bodies joined.
    fn walk(bytes: &[u8], framing: Framing, at_end: bool) -> (Vec<u8>, Vec<(usize, usize)>) {
        let (good, bad) = walk_batches(bytes, framing, at_end);
        (good.concat(), bad)
    }

    #[test]
    fn batch_record_layout() {
        let h = BatchHeader::for_records(3, 0x0102_0304, b"abc", 1);
        let b = h.encode();
        assert_eq!(&b[..4], &[0; 4]);
        assert_eq!(b[4], 3);
        assert_eq!(b[5], 5);
        assert_eq!(&b[6..14], &0x0102_0304u64.to_le_bytes());
        assert_eq!(&b[14..16], &16u16.to_le_bytes());
        assert_eq!(&b[16..20], &3u32.to_le_bytes());
        assert_eq!(&b[20..24], &1u32.to_le_bytes());
        assert_eq!(&b[24..28], &crc32c::crc32c(b"abc").to_le_bytes());
        assert_eq!(&b[28..32], &crc32c::crc32c(&b[..28]).to_le_bytes());
        assert_eq!(BatchHeader::probe(&b), Probe::Valid(h));
        // A v1 reader sees an extension record it skips by payload_size.
        match decode_record(&b).unwrap() {
            Decoded::Record(Record::Unknown(e), 32) => assert_eq!(e.kind, 5),
            other => panic!("{other:?}"),
        }
        for cut in 0..32 {
            assert_eq!(BatchHeader::probe(&b[..cut]), Probe::NeedMore, "cut {cut}");
        }
        for i in 0..32 {
            let mut bad = b;
            bad[i] ^= 0x10;
            assert_eq!(BatchHeader::probe(&bad), Probe::Invalid, "flip {i}");
        }
    }

    #[test]
    fn marker_is_a_valid_v1_data_entry() {
        let m = DataMarker {
            worker: 2,
            len: 100,
            count: 3,
            data_crc: 7,
            index_crc: 8,
        };
        let b = m.encode();
        let e = decode_data_entry(&b).unwrap().unwrap();
        assert_eq!(e.key, FrameKey::new(2, 0));
        assert_eq!(e.encoded_len(), DATA_MARKER_LEN);
        let doc = e.parse().unwrap();
        assert!(
            doc.get_binary_generic("batch").is_err(),
            "user-defined subtype"
        );
        assert!(doc.contains_key("batch"));
        assert_eq!(DataMarker::probe(&b), Probe::Valid(m));
        for i in 0..DATA_MARKER_LEN {
            let mut bad = b;
            bad[i] ^= 1;
            assert_eq!(DataMarker::probe(&bad), Probe::Invalid, "flip {i}");
        }
    }

    #[test]
    fn splits_at_record_boundaries_and_rejects_partial_input() {
        let recs = records(3000);
        let mut ranges = Vec::new();
        split_records(&recs, 4096, |r, c| ranges.push((r, c))).unwrap();
        assert!(ranges.len() > 10);
        let mut at = 0;
        let mut total = 0;
        for (r, c) in &ranges {
            assert_eq!(r.start, at);
            assert!(r.len() <= 4096);
            at = r.end;
            total += c;
        }
        assert_eq!((at, total), (recs.len(), 6000));
        let err = split_records(&recs[..recs.len() - 3], 4096, |_, _| {}).unwrap_err();
        assert!(matches!(err.kind, ErrorKind::PartialRecord(11)));
    }

    #[test]
    fn clean_and_growing_logs_walk_without_damage() {
        let recs = records(2000);
        let bytes = framed(&recs, 1000);
        assert_eq!(walk(&bytes, Framing::Frames, true), (recs.clone(), vec![]));
        // A live file cut anywhere: every whole batch, then "need more".
        for cut in [1, 31, 32, 33, 500, bytes.len() - 1] {
            let (good, bad) = walk(&bytes[..cut], Framing::Frames, false);
            assert!(bad.is_empty(), "cut {cut}");
            assert!(recs.starts_with(&good));
        }
        // The same cut in a sealed file is one torn tail.
        let (_, bad) = walk(&bytes[..bytes.len() - 1], Framing::Frames, true);
        assert_eq!(bad.len(), 1);
    }

    #[test]
    fn torn_tails_are_told_from_damage() {
        let recs = records(300);
        let bytes = framed(&recs, 1000);
        let len_of = |at: usize| match BatchHeader::probe(&bytes[at..]) {
            Probe::Valid(h) => BATCH_RECORD_LEN + h.len as usize,
            other => panic!("{other:?}"),
        };
        let second = len_of(0);
        let tail = &bytes[second..second + len_of(second)];
        for cut in 1..tail.len() {
            assert!(Framing::Frames.is_torn_tail(&tail[..cut]), "cut {cut}");
        }
        assert!(
            !Framing::Frames.is_torn_tail(tail),
            "a whole batch is not torn"
        );
        assert!(!Framing::Frames.is_torn_tail(&bytes[second..]));
        let mut bad = tail[..500].to_vec();
        bad[3] = 9;
        assert!(
            !Framing::Frames.is_torn_tail(&bad),
            "a bad header is damage"
        );
        // A batch shortened in the middle, followed by a whole batch: damage, not a tail.
        let mut shortened = bytes[..second * 3].to_vec();
        shortened.drain(second + 100..second + 150);
        assert!(!Framing::Frames.is_torn_tail(&shortened[second..]));
    }

    proptest! {
        #[test]
        fn damage_costs_only_the_batches_it_touches(
            n in 50u32..400, at in 0.0f64..1.0, len in 1usize..200, kind in 0u8..4, seed: u8,
        ) {
            let recs = records(n);
            let target = 512;
            let mut batches = Vec::new();
            split_records(&recs, target, |r, _| batches.push(r)).unwrap();
            let clean = framed(&recs, target);
            let pos = (at * clean.len() as f64) as usize;
            let mut bytes = clean.clone();
            let end = (pos + len).min(bytes.len());
            match kind {
                0 => bytes[pos..end].iter_mut().for_each(|b| *b ^= seed | 1),
                1 => bytes[pos..end].iter_mut().for_each(|b| *b = 0),
                2 => { bytes.splice(pos..pos, std::iter::repeat_n(seed, len)); }
                _ => { bytes.drain(pos..end); }
            }
            let (delivered, bad) = walk_batches(&bytes, Framing::Frames, true);
            // An insertion or deletion inside a run of equal bytes could have happened anywhere
            // along the run with the same result: it touches every batch along it.
            let (mut lo, mut hi) = (pos, pos);
            match kind {
                2 => {
                    while lo > 0 && clean[lo - 1] == seed { lo -= 1; }
                    while hi < clean.len() && clean[hi] == seed { hi += 1; }
                }
                3 => {
                    let l = end - pos;
                    while lo > 0 && clean[lo - 1] == clean[lo - 1 + l] { lo -= 1; }
                    while hi + l < clean.len() && clean[hi] == clean[hi + l] { hi += 1; }
                }
                _ => {}
            }
            // Where each batch was in the clean file, and whether the damage touched it.
            let mut at_byte = 0usize;
            let mut expected = Vec::new();
            let mut survivors = Vec::new();
            for r in &batches {
                let (s, e) = (at_byte, at_byte + BATCH_RECORD_LEN + r.len());
                at_byte = e;
                let touched = match kind {
                    2 => s < hi && lo < e && !(hi == s || lo == e),
                    3 => s < hi + (end - pos) && lo < e,
                    _ => s < end && pos < e,
                };
                expected.push(&recs[r.clone()]);
                if !touched {
                    survivors.push(&recs[r.clone()]);
                }
            }
            // Delivered batches are original batches, in order, and include every untouched one.
            let mut it = expected.iter();
            for d in &delivered {
                prop_assert!(it.any(|e| e == d), "delivered a batch that was never written");
            }
            for s in &survivors {
                prop_assert!(delivered.contains(s), "lost a batch the damage did not touch");
            }
            if kind == 0 {
                prop_assert!(!bad.is_empty(), "a flipped byte went unnoticed");
            }
            let skipped: usize = bad.iter().map(|b| b.1).sum();
            let kept: usize = delivered.iter().map(|d| d.len() + BATCH_RECORD_LEN).sum();
            prop_assert_eq!(skipped + kept, bytes.len());
        }

        #[test]
        fn any_bytes_walk_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..600), framed: bool) {
            for framing in [Framing::Frames, Framing::Data] {
                let mut pos = 0;
                while let Unit::Batch { len, .. } | Unit::Unframed(len) | Unit::Damaged { len, .. } =
                    framing.next_unit(&bytes[pos..], framed, true)
                {
                    prop_assert!(len > 0);
                    pos += len;
                }
                prop_assert_eq!(pos, bytes.len());
            }
        }
    }

    #[test]
    fn data_batches_round_trip_and_detect_flips() {
        let mut body = Vec::new();
        let mut entries = Vec::new();
        for i in 1..=20u32 {
            let doc = to_document(&serde_json::json!({"i": i, "sql": "SELECT 1"})).unwrap();
            entries.push((FrameKey::new(4, i), body.len() as u32));
            encode_data_entry(&mut body, FrameKey::new(4, i), &doc);
        }
        assert_eq!(data_batch_entries(&body).unwrap(), entries);
        let mut index = Vec::new();
        let marker = frame_data_batch(4, &body, &entries, 16, &mut index);
        let mut file = marker.encode().to_vec();
        file.extend_from_slice(&body);
        match Framing::Data.next_unit(&file, true, true) {
            Unit::Batch { len, body: b, .. } => {
                assert_eq!(len, file.len());
                assert_eq!(b, &body[..]);
            }
            other => panic!("{other:?}"),
        }
        let own = decode_index_entry(&index).unwrap();
        assert_eq!((own.key.id, own.seek), (0, 16));
        let checked = check_index_entries(&marker, &index[9..], 16 + 42).unwrap();
        assert_eq!(checked.len(), 20);
        assert_eq!(u64::from(checked[0].seek), 16 + 42);
        let mut bad_index = index.clone();
        bad_index[9 + 5] ^= 1;
        assert!(check_index_entries(&marker, &bad_index[9..], 58).is_none());
        // A flipped byte inside a BSON document is detected.
        let mut flipped = file.clone();
        flipped[60] ^= 0x20;
        assert!(matches!(
            Framing::Data.next_unit(&flipped, true, true),
            Unit::Damaged {
                why: DamageKind::BadChecksum,
                ..
            }
        ));
    }
}
