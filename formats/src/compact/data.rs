//! Compact frame data (`data-NNNNNN.framedata`, version 2; `docs/FORMAT.md`, *Compact frame
//! data*): one file with the data entries in zstd-compressed blocks and an index that points at
//! (block, offset), so a lookup decompresses one block. Pure: the caller does the I/O.
//!
//! Encoding is streaming ([`DataFileEncoder`]): the caller pushes entries in file order and
//! takes the finished bytes as blocks close. Decoding is in layers so a reader can fetch only
//! what it needs: [`Trailer`], the index block ([`BlockHeader`], [`BlockDecoder`],
//! [`decode_index`]), then one data block ([`block_entries`]). [`decode_data_file`] does all of
//! it on a whole file in memory.

use crate::FrameKey;
use crate::compact::{MAX_RAW_BLOCK_LEN, get_varint, put_varint, unzigzag, zigzag};
use crate::data::{DataEntry, decode_data_entry};
use crate::error::{DecodeError, ErrorKind};
use crate::header::{FileHeader, FileKind, HEADER_LEN};

/// Bytes of every block's header.
pub const BLOCK_HEADER_LEN: usize = 24;
/// Bytes of the trailer at the end of the file.
pub const TRAILER_LEN: usize = 32;
/// Magic of the dictionary block.
pub const DICT_MAGIC: [u8; 4] = *b"FDDI";
/// Magic of a data block.
pub const DATA_MAGIC: [u8; 4] = *b"FDBK";
/// Magic of the index block.
pub const INDEX_MAGIC: [u8; 4] = *b"FDIX";
/// Magic of the trailer.
pub const TRAILER_MAGIC: [u8; 4] = *b"FDTR";
/// A writer closes a data block before its entries pass this many bytes (unless it holds one).
pub const DATA_BLOCK_TARGET: usize = 256 << 10;
/// The index block's body may decompress to at most this plus 32 bytes per entry.
const INDEX_BASE_LIMIT: u64 = MAX_RAW_BLOCK_LEN as u64;
/// The five stream lengths at the front of the index body.
const STREAMS: usize = 5;

fn bad(offset: u64, why: impl Into<String>) -> DecodeError {
    DecodeError::new(offset, ErrorKind::Compact(why.into()))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The 24-byte header every block starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    /// `FDDI`, `FDBK` or `FDIX`.
    pub magic: [u8; 4],
    /// Bytes of body that follow.
    pub len: u32,
    /// Bytes of the decompressed body.
    pub raw_len: u32,
    /// Data entries in the block (index: in the whole file; dictionary: 0).
    pub count: u32,
    /// CRC32C of the body.
    pub crc: u32,
}

impl BlockHeader {
    /// The header of a block with `magic` and this `body`.
    pub fn for_body(magic: [u8; 4], body: &[u8], raw_len: u32, count: u32) -> Self {
        Self {
            magic,
            len: body.len() as u32,
            raw_len,
            count,
            crc: crc32c::crc32c(body),
        }
    }

    /// The header's 24 bytes.
    pub fn encode(&self) -> [u8; BLOCK_HEADER_LEN] {
        let mut out = [0u8; BLOCK_HEADER_LEN];
        out[0..4].copy_from_slice(&self.magic);
        out[4..8].copy_from_slice(&self.len.to_le_bytes());
        out[8..12].copy_from_slice(&self.raw_len.to_le_bytes());
        out[12..16].copy_from_slice(&self.count.to_le_bytes());
        out[16..20].copy_from_slice(&self.crc.to_le_bytes());
        let header_crc = crc32c::crc32c(&out[0..20]);
        out[20..24].copy_from_slice(&header_crc.to_le_bytes());
        out
    }

    /// Decodes the block header at the front of `buf` (errors at offsets relative to it):
    /// refuses a short buffer, a failed `header_crc`, an unknown magic or an impossible size.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        if buf.len() < BLOCK_HEADER_LEN {
            return Err(bad(
                0,
                format!("block header cut short ({} of 24 bytes)", buf.len()),
            ));
        }
        if crc32c::crc32c(&buf[0..20]) != u32_at(buf, 20) {
            return Err(bad(20, "block header fails its CRC32C checksum"));
        }
        let h = Self {
            magic: buf[0..4].try_into().expect("4 bytes"),
            len: u32_at(buf, 4),
            raw_len: u32_at(buf, 8),
            count: u32_at(buf, 12),
            crc: u32_at(buf, 16),
        };
        if ![DICT_MAGIC, DATA_MAGIC, INDEX_MAGIC].contains(&h.magic) {
            return Err(bad(0, format!("unknown block magic {:?}", h.magic)));
        }
        let limit = if h.magic == INDEX_MAGIC {
            INDEX_BASE_LIMIT + 32 * u64::from(h.count)
        } else {
            MAX_RAW_BLOCK_LEN as u64
        };
        if u64::from(h.raw_len) > limit {
            return Err(bad(
                8,
                format!(
                    "block of {} bytes decompressed is over its limit ({limit})",
                    h.raw_len
                ),
            ));
        }
        if h.magic == DICT_MAGIC && h.raw_len != h.len {
            return Err(bad(8, "dictionary block's raw_len differs from its len"));
        }
        Ok(h)
    }

    /// Bytes the whole block takes (header and body).
    pub fn total_len(&self) -> u64 {
        BLOCK_HEADER_LEN as u64 + u64::from(self.len)
    }

    /// Whether `body` is this block's body (its CRC32C holds).
    pub fn body_matches(&self, body: &[u8]) -> bool {
        body.len() == self.len as usize && crc32c::crc32c(body) == self.crc
    }
}

/// The 32-byte trailer at the end of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trailer {
    /// File offset of the index block's header.
    pub index_offset: u64,
    /// Bytes of the raw `.framedata` and `.frameidx` together.
    pub raw_len: u64,
    /// Data entries in the file.
    pub entries: u64,
}

impl Trailer {
    /// The trailer's 32 bytes.
    pub fn encode(&self) -> [u8; TRAILER_LEN] {
        let mut out = [0u8; TRAILER_LEN];
        out[0..8].copy_from_slice(&self.index_offset.to_le_bytes());
        out[8..16].copy_from_slice(&self.raw_len.to_le_bytes());
        out[16..24].copy_from_slice(&self.entries.to_le_bytes());
        out[24..28].copy_from_slice(&TRAILER_MAGIC);
        let crc = crc32c::crc32c(&out[0..28]);
        out[28..32].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes the last 32 bytes of a file of `file_len` bytes (errors at offsets relative to
    /// the trailer): magic, checksum, and an index block that fits between header and trailer.
    pub fn decode(buf: &[u8], file_len: u64) -> Result<Self, DecodeError> {
        if buf.len() != TRAILER_LEN {
            return Err(bad(0, format!("trailer is {} bytes, not 32", buf.len())));
        }
        if buf[24..28] != TRAILER_MAGIC {
            return Err(bad(24, "no FDTR trailer at the end of the file"));
        }
        if crc32c::crc32c(&buf[0..28]) != u32_at(buf, 28) {
            return Err(bad(28, "trailer fails its CRC32C checksum"));
        }
        let t = Self {
            index_offset: u64_at(buf, 0),
            raw_len: u64_at(buf, 8),
            entries: u64_at(buf, 16),
        };
        let last = file_len.saturating_sub((TRAILER_LEN + BLOCK_HEADER_LEN) as u64);
        if t.index_offset < HEADER_LEN as u64 || t.index_offset > last {
            return Err(bad(
                0,
                format!(
                    "index offset {} is outside the file ({file_len} bytes)",
                    t.index_offset
                ),
            ));
        }
        if t.entries > u64::from(u32::MAX) {
            return Err(bad(
                16,
                format!("{} entries is more than a file holds", t.entries),
            ));
        }
        Ok(t)
    }
}

/// Where one data entry is: its key, its data block, its offset in the block's raw body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexedEntry {
    /// The frame the data belongs to.
    pub key: FrameKey,
    /// Data block number (0-based, in file order).
    pub block: u32,
    /// Byte offset of the entry's `id` field in the block's decompressed body.
    pub offset: u32,
}

/// The decoded index block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DataIndex {
    /// File offset of each data block's header, ascending.
    pub blocks: Vec<u64>,
    /// Every entry, in file order.
    pub entries: Vec<IndexedEntry>,
}

/// Decompresses and checks block bodies (one zstd context, reused; with the file's
/// dictionary for data blocks when it has one).
pub struct BlockDecoder {
    plain: zstd::bulk::Decompressor<'static>,
    dict: Option<zstd::bulk::Decompressor<'static>>,
}

impl BlockDecoder {
    /// A decoder for a file with `dictionary` (the dictionary block's body), if any.
    pub fn new(dictionary: Option<&[u8]>) -> Result<Self, DecodeError> {
        let ctx = |e: std::io::Error| bad(0, format!("zstd context: {e}"));
        let plain = zstd::bulk::Decompressor::new().map_err(ctx)?;
        let dict = match dictionary {
            Some(d) => Some(
                zstd::bulk::Decompressor::with_dictionary(d)
                    .map_err(|e| bad(0, format!("the dictionary does not load: {e}")))?,
            ),
            None => None,
        };
        Ok(Self { plain, dict })
    }

    /// Checks `body` against `header` (CRC32C) and decompresses it to exactly `raw_len` bytes
    /// (errors at offsets relative to the block's header).
    pub fn body(&mut self, header: &BlockHeader, body: &[u8]) -> Result<Vec<u8>, DecodeError> {
        if body.len() != header.len as usize {
            return Err(bad(
                BLOCK_HEADER_LEN as u64,
                format!(
                    "block body cut short ({} of {} bytes)",
                    body.len(),
                    header.len
                ),
            ));
        }
        if crc32c::crc32c(body) != header.crc {
            return Err(bad(16, "block body fails its CRC32C checksum"));
        }
        if header.magic == DICT_MAGIC {
            return Ok(body.to_vec());
        }
        let raw_len = header.raw_len as usize;
        // The frame must state its size, and that size must be the header's: a reader then
        // allocates no more than the header promised (itself bounded by `decode`).
        match zstd::zstd_safe::get_frame_content_size(body) {
            Ok(Some(n)) if n == raw_len as u64 => {}
            Ok(Some(n)) => {
                return Err(bad(
                    BLOCK_HEADER_LEN as u64,
                    format!("compressed body states {n} bytes, its header says {raw_len}"),
                ));
            }
            _ => {
                return Err(bad(
                    BLOCK_HEADER_LEN as u64,
                    "compressed body is not a zstd frame that states its size",
                ));
            }
        }
        let ctx = match &mut self.dict {
            Some(d) if header.magic == DATA_MAGIC => d,
            _ => &mut self.plain,
        };
        let out = ctx.decompress(body, raw_len).map_err(|e| {
            bad(
                BLOCK_HEADER_LEN as u64,
                format!("compressed body does not decompress: {e}"),
            )
        })?;
        if out.len() != raw_len {
            return Err(bad(
                BLOCK_HEADER_LEN as u64,
                format!(
                    "compressed body holds {} bytes, its header says {raw_len}",
                    out.len()
                ),
            ));
        }
        Ok(out)
    }
}

/// Splits the index body into its five streams.
fn streams(raw: &[u8]) -> Result<[&[u8]; STREAMS], DecodeError> {
    if raw.len() < 4 * STREAMS {
        return Err(bad(0, "index body shorter than its stream lengths"));
    }
    let mut out = [&raw[..0]; STREAMS];
    let mut at = 4 * STREAMS;
    for (i, s) in out.iter_mut().enumerate() {
        let len = u32_at(raw, 4 * i) as usize;
        let end = at
            .checked_add(len)
            .filter(|&e| e <= raw.len())
            .ok_or_else(|| bad(4 * i as u64, format!("index stream {i} runs past the body")))?;
        *s = &raw[at..end];
        at = end;
    }
    if at != raw.len() {
        return Err(bad(at as u64, "index body has bytes after its streams"));
    }
    Ok(out)
}

/// Decodes the index body `raw` of a file whose index has `count` entries and starts at
/// `index_offset` (errors at offsets relative to the body). Checks that every stream holds
/// exactly what it must, that blocks are ascending between the file header and the index, and
/// that every entry names a block that exists.
pub fn decode_index(raw: &[u8], count: u32, index_offset: u64) -> Result<DataIndex, DecodeError> {
    let mut entries = Vec::with_capacity(count as usize);
    let blocks = decode_index_with(raw, count, index_offset, |e| entries.push(e))?;
    Ok(DataIndex { blocks, entries })
}

/// [`decode_index`] without holding the entries: each is handed to `each` in file order as it
/// is decoded, and the data blocks' offsets are returned. (An error can come after entries were
/// handed on: a caller that keeps them decodes twice, or drops them on an error.)
pub fn decode_index_with(
    raw: &[u8],
    count: u32,
    index_offset: u64,
    mut each: impl FnMut(IndexedEntry),
) -> Result<Vec<u64>, DecodeError> {
    let [blocks_s, workers, ids_s, eblocks_s, offsets_s] = streams(raw)?;
    let cut = |what: &str| bad(0, format!("index stream {what} is cut short or malformed"));
    let mut s = blocks_s;
    let d = get_varint(&mut s).ok_or_else(|| cut("blocks"))?;
    if d > u64::from(count) {
        return Err(bad(0, format!("{d} data blocks for {count} entries")));
    }
    let mut blocks = Vec::with_capacity(d as usize);
    let mut prev = 0u64;
    for _ in 0..d {
        let delta = get_varint(&mut s).ok_or_else(|| cut("blocks"))?;
        let at = prev.checked_add(delta).ok_or_else(|| cut("blocks"))?;
        let first = blocks.is_empty();
        if (first && at < HEADER_LEN as u64)
            || (!first && delta < BLOCK_HEADER_LEN as u64)
            || at + BLOCK_HEADER_LEN as u64 > index_offset
        {
            return Err(bad(0, format!("data block offset {at} is out of place")));
        }
        blocks.push(at);
        prev = at;
    }
    if !s.is_empty() {
        return Err(bad(0, "index stream blocks has bytes after its values"));
    }
    if workers.len() != count as usize {
        return Err(bad(
            0,
            format!("{} workers for {count} entries", workers.len()),
        ));
    }
    let (mut ids, mut eblocks, mut offsets) = (ids_s, eblocks_s, offsets_s);
    let mut last_id = [0u32; 256];
    let mut block = 0u64;
    for &worker in workers {
        // Exact differences (FORMAT.md, *Integers and varints*): a result outside u32 is bad.
        let diff = unzigzag(get_varint(&mut ids).ok_or_else(|| cut("ids"))?);
        let id = i64::from(last_id[worker as usize])
            .checked_add(diff)
            .and_then(|id| u32::try_from(id).ok())
            .ok_or_else(|| cut("ids"))?;
        last_id[worker as usize] = id;
        block += get_varint(&mut eblocks).ok_or_else(|| cut("entry_blocks"))?;
        if block >= d {
            return Err(bad(0, format!("an entry in data block {block} of {d}")));
        }
        let offset = get_varint(&mut offsets).ok_or_else(|| cut("entry_offsets"))?;
        let offset = u32::try_from(offset)
            .ok()
            .filter(|&o| (o as usize) < MAX_RAW_BLOCK_LEN)
            .ok_or_else(|| cut("entry_offsets"))?;
        each(IndexedEntry {
            key: FrameKey::new(worker, id),
            block: block as u32,
            offset,
        });
    }
    if !(ids.is_empty() && eblocks.is_empty() && offsets.is_empty()) {
        return Err(bad(0, "an index stream has bytes after its values"));
    }
    Ok(blocks)
}

/// The data entries of a decompressed data block body that must hold `count` of them, each
/// with its offset in the body (errors at offsets relative to the body).
pub fn block_entries(raw: &[u8], count: u32) -> Result<Vec<(u32, DataEntry<'_>)>, DecodeError> {
    let mut out = Vec::with_capacity(count.min(1 << 16) as usize);
    let mut at = 0usize;
    while at < raw.len() {
        match decode_data_entry(&raw[at..]) {
            Ok(Some(e)) => {
                out.push((at as u32, e));
                at += e.encoded_len();
            }
            Ok(None) => return Err(bad(at as u64, "data entry runs past the end of its block")),
            Err(e) => return Err(e.shifted(at as u64)),
        }
    }
    if out.len() != count as usize {
        return Err(bad(
            0,
            format!("block holds {} entries, its header says {count}", out.len()),
        ));
    }
    Ok(out)
}

/// The data entry of `key` at `offset` of a decompressed block body, checked.
pub fn entry_at(raw: &[u8], offset: u32, key: FrameKey) -> Result<DataEntry<'_>, DecodeError> {
    let at = offset as usize;
    let e = match raw.get(at..).map(decode_data_entry) {
        Some(Ok(Some(e))) => e,
        Some(Err(e)) => return Err(e.shifted(at as u64)),
        _ => {
            return Err(bad(
                at as u64,
                format!("index points past the block's {} bytes", raw.len()),
            ));
        }
    };
    if e.key != key {
        return Err(bad(
            at as u64,
            format!("index entry for {key} points at data of {}", e.key),
        ));
    }
    Ok(e)
}

/// Builds a compact data file entry by entry, in file order.
pub struct DataFileEncoder {
    ctx: zstd::bulk::Compressor<'static>,
    index_level: i32,
    block_target: usize,
    /// Bytes ready for the caller.
    out: Vec<u8>,
    /// Bytes handed out or ready so far: the file offset of the next byte.
    written: u64,
    block: Vec<u8>,
    block_count: u32,
    blocks: Vec<u8>,
    block_total: u64,
    prev_block_at: u64,
    workers: Vec<u8>,
    ids: Vec<u8>,
    entry_blocks: Vec<u8>,
    entry_offsets: Vec<u8>,
    last_id: [u32; 256],
    /// Block number of the previous entry.
    last_block: u64,
    entries: u64,
}

impl DataFileEncoder {
    /// Starts a file compressed at zstd `level`, with a dictionary block if `dictionary` is
    /// given (every data block is then compressed with it), closing data blocks before their
    /// entries pass `block_target` bytes (at most [`DATA_BLOCK_TARGET`]).
    pub fn new(level: i32, dictionary: Option<&[u8]>, block_target: usize) -> Self {
        // Compressing in memory fails only when allocation does; a dictionary that zstd does
        // not take is dropped rather than trusted (the file is valid without one).
        let with_dict = dictionary.filter(|d| !d.is_empty()).and_then(|d| {
            zstd::bulk::Compressor::with_dictionary(level, d)
                .ok()
                .map(|c| (c, d))
        });
        let mut out = FileHeader::compact(FileKind::FrameData).encode().to_vec();
        let ctx = match with_dict {
            Some((c, d)) => {
                let h = BlockHeader::for_body(DICT_MAGIC, d, d.len() as u32, 0);
                out.extend_from_slice(&h.encode());
                out.extend_from_slice(d);
                c
            }
            None => zstd::bulk::Compressor::new(level).expect("zstd context"),
        };
        Self {
            ctx,
            index_level: level,
            block_target: block_target.clamp(1, DATA_BLOCK_TARGET),
            written: out.len() as u64,
            out,
            block: Vec::new(),
            block_count: 0,
            blocks: Vec::new(),
            block_total: 0,
            prev_block_at: 0,
            workers: Vec::new(),
            ids: Vec::new(),
            entry_blocks: Vec::new(),
            entry_offsets: Vec::new(),
            last_id: [0; 256],
            last_block: 0,
            entries: 0,
        }
    }

    /// Whether an entry of `document_len` bytes fits a block (≤ 16 MiB with its 5-byte head).
    pub fn fits(document_len: usize) -> bool {
        document_len + crate::DATA_ENTRY_HEADER_LEN <= MAX_RAW_BLOCK_LEN
    }

    /// Adds the data entry of `key` (`document` is its BSON bytes); `false` (and nothing
    /// added) if it is too large for a block (see [`DataFileEncoder::fits`]).
    pub fn push(&mut self, key: FrameKey, document: &[u8]) -> bool {
        if !Self::fits(document.len()) {
            return false;
        }
        let len = crate::DATA_ENTRY_HEADER_LEN + document.len();
        if self.block_count > 0 && self.block.len() + len > self.block_target {
            self.close_block();
        }
        let block_no = self.block_total;
        put_varint(&mut self.entry_blocks, block_no - self.last_block);
        self.last_block = block_no;
        put_varint(&mut self.entry_offsets, self.block.len() as u64);
        self.workers.push(key.worker);
        let prev = &mut self.last_id[key.worker as usize];
        put_varint(&mut self.ids, zigzag(i64::from(key.id) - i64::from(*prev)));
        *prev = key.id;
        crate::encode_data_entry(&mut self.block, key, document);
        self.block_count += 1;
        self.entries += 1;
        true
    }

    fn close_block(&mut self) {
        if self.block_count == 0 {
            return;
        }
        let body = self
            .ctx
            .compress(&self.block)
            .expect("zstd compresses in memory");
        let h = BlockHeader::for_body(DATA_MAGIC, &body, self.block.len() as u32, self.block_count);
        let at = self.written;
        put_varint(&mut self.blocks, at - self.prev_block_at);
        self.prev_block_at = at;
        self.out.extend_from_slice(&h.encode());
        self.out.extend_from_slice(&body);
        self.written += h.total_len();
        self.block.clear();
        self.block_count = 0;
        self.block_total += 1;
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// The finished bytes so far (header and closed blocks), to be written in order.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// Closes the last block, writes the index block and the trailer (`raw_len`: bytes of the
    /// raw pair the file replaces); returns the bytes not yet taken.
    pub fn finish(mut self, raw_len: u64) -> Vec<u8> {
        self.close_block();
        let mut blocks = Vec::with_capacity(self.blocks.len() + 10);
        put_varint(&mut blocks, self.block_total);
        blocks.extend_from_slice(&self.blocks);
        let parts = [
            &blocks[..],
            &self.workers,
            &self.ids,
            &self.entry_blocks,
            &self.entry_offsets,
        ];
        let mut raw = Vec::with_capacity(20 + parts.iter().map(|p| p.len()).sum::<usize>());
        for p in parts {
            raw.extend_from_slice(&(p.len() as u32).to_le_bytes());
        }
        for p in parts {
            raw.extend_from_slice(p);
        }
        // The index is compressed without the dictionary (it was trained on entries).
        let body = crate::compact::compress(&raw, self.index_level);
        let count = self.entries as u32;
        let h = BlockHeader::for_body(INDEX_MAGIC, &body, raw.len() as u32, count);
        let index_offset = self.written;
        self.out.extend_from_slice(&h.encode());
        self.out.extend_from_slice(&body);
        let trailer = Trailer {
            index_offset,
            raw_len,
            entries: self.entries,
        };
        self.out.extend_from_slice(&trailer.encode());
        self.out
    }
}

/// Trains a zstd dictionary of at most `max_size` bytes on the BSON `documents` (a sample of
/// them); `None` if there is too little to learn from.
pub fn train_dictionary(documents: &[&[u8]], max_size: usize) -> Option<Vec<u8>> {
    // zstd wants many samples, and at least ~10× the dictionary size in total.
    let total: usize = documents.iter().map(|d| d.len()).sum();
    if documents.len() < 64 || total < 8 * max_size {
        return None;
    }
    let mut joined = Vec::with_capacity(total);
    let mut sizes = Vec::with_capacity(documents.len());
    for d in documents {
        joined.extend_from_slice(d);
        sizes.push(d.len());
    }
    zstd::dict::from_continuous(&joined, &sizes, max_size).ok()
}

/// Encodes a whole compact data file from `entries` (key and BSON document, in file order).
pub fn encode_data_file<'a>(
    entries: impl IntoIterator<Item = (FrameKey, &'a [u8])>,
    raw_len: u64,
    level: i32,
    dictionary: Option<&[u8]>,
) -> Vec<u8> {
    let mut enc = DataFileEncoder::new(level, dictionary, DATA_BLOCK_TARGET);
    let mut out = Vec::new();
    for (key, doc) in entries {
        enc.push(key, doc);
        out.extend_from_slice(&enc.take_output());
    }
    out.extend_from_slice(&enc.finish(raw_len));
    out
}

/// A parsed compact data file in memory: its dictionary, trailer, index and a decoder.
pub struct DataFile<'a> {
    bytes: &'a [u8],
    /// The dictionary block's body, if the file has one.
    pub dictionary: Option<&'a [u8]>,
    /// The trailer.
    pub trailer: Trailer,
    /// The decoded index.
    pub index: DataIndex,
    decoder: BlockDecoder,
}

/// Reads and checks the block header at `at` of `bytes` and returns it with its body.
fn block_at(bytes: &[u8], at: u64, end: u64) -> Result<(BlockHeader, &[u8]), DecodeError> {
    let start = usize::try_from(at).map_err(|_| bad(at, "block offset out of range"))?;
    let h =
        BlockHeader::decode(bytes.get(start..).unwrap_or_default()).map_err(|e| e.shifted(at))?;
    if at + h.total_len() > end {
        return Err(bad(
            at,
            format!("block of {} bytes runs past {end}", h.total_len()),
        ));
    }
    let body = &bytes[start + BLOCK_HEADER_LEN..(at + h.total_len()) as usize];
    Ok((h, body))
}

impl<'a> DataFile<'a> {
    /// Parses a whole compact data file: header, dictionary, trailer and index (errors name
    /// the file offset).
    pub fn parse(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let h = FileHeader::decode_any(FileKind::FrameData, bytes)?
            .ok_or_else(|| bad(0, "file shorter than its header"))?;
        if !h.is_compact() {
            return Err(bad(8, "not a compact (version 2) data file"));
        }
        let file_len = bytes.len() as u64;
        if bytes.len() < HEADER_LEN + TRAILER_LEN + BLOCK_HEADER_LEN {
            return Err(bad(
                0,
                format!("file of {file_len} bytes is too short for a compact file"),
            ));
        }
        let tail = bytes.len() - TRAILER_LEN;
        let trailer =
            Trailer::decode(&bytes[tail..], file_len).map_err(|e| e.shifted(tail as u64))?;
        let header_len = u64::from(h.header_len);
        let dictionary =
            if bytes.get(header_len as usize..header_len as usize + 4) == Some(&DICT_MAGIC[..]) {
                let (dh, body) = block_at(bytes, header_len, trailer.index_offset)?;
                if dh.magic != DICT_MAGIC || !dh.body_matches(body) {
                    return Err(bad(
                        header_len,
                        "dictionary block fails its CRC32C checksum",
                    ));
                }
                Some(body)
            } else {
                None
            };
        let decoder = BlockDecoder::new(dictionary).map_err(|e| e.shifted(header_len))?;
        let mut file = Self {
            bytes,
            dictionary,
            trailer,
            index: DataIndex::default(),
            decoder,
        };
        let at = trailer.index_offset;
        let (ih, body) = block_at(bytes, at, tail as u64)?;
        if ih.magic != INDEX_MAGIC || at + ih.total_len() != tail as u64 {
            return Err(bad(at, "no index block right before the trailer"));
        }
        if u64::from(ih.count) != trailer.entries {
            return Err(bad(
                at + 12,
                "index block's count differs from the trailer's",
            ));
        }
        let raw = file.decoder.body(&ih, body).map_err(|e| e.shifted(at))?;
        let index = decode_index(&raw, ih.count, at)
            .map_err(|e| bad(at, format!("index block: {}", e.kind)))?;
        let first = header_len + dictionary.map_or(0, |d| (BLOCK_HEADER_LEN + d.len()) as u64);
        if index.blocks.first().is_some_and(|&b| b != first) {
            return Err(bad(
                first,
                "the first data block is not where the index says",
            ));
        }
        file.index = index;
        Ok(file)
    }

    /// The header, file offset and decompressed body of data block `block` (checked:
    /// header, checksum, decompression, within the data area).
    pub fn block(&mut self, block: usize) -> Result<(BlockHeader, u64, Vec<u8>), DecodeError> {
        let at = *self
            .index
            .blocks
            .get(block)
            .ok_or_else(|| bad(0, format!("no data block {block}")))?;
        let end = self
            .index
            .blocks
            .get(block + 1)
            .copied()
            .unwrap_or(self.trailer.index_offset);
        let (h, body) = block_at(self.bytes, at, end)?;
        if h.magic != DATA_MAGIC {
            return Err(bad(at, "not a data block where the index says one is"));
        }
        let raw = self.decoder.body(&h, body).map_err(|e| e.shifted(at))?;
        Ok((h, at, raw))
    }
}

/// Every data entry of a whole compact data file, in index order (key and BSON document):
/// checks every block, every entry and that the index points at them; refuses anything else.
pub fn decode_data_file(bytes: &[u8]) -> Result<Vec<(FrameKey, Vec<u8>)>, DecodeError> {
    let mut file = DataFile::parse(bytes)?;
    let mut out = Vec::with_capacity(file.index.entries.len());
    let entries = std::mem::take(&mut file.index.entries);
    let mut next = 0usize;
    for b in 0..file.index.blocks.len() {
        let (h, at, raw) = file.block(b)?;
        let found = block_entries(&raw, h.count).map_err(|e| e.shifted(at))?;
        for (offset, e) in found {
            let Some(ie) = entries.get(next) else {
                return Err(bad(at, "a block holds entries the index does not list"));
            };
            if ie.block as usize != b || ie.offset != offset || ie.key != e.key {
                return Err(bad(
                    at,
                    format!("index entry {next} does not point at its entry"),
                ));
            }
            out.push((e.key, e.document.to_vec()));
            next += 1;
        }
    }
    if next != entries.len() {
        return Err(bad(0, "the index lists entries no block holds"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn doc(i: u32, text: &str) -> Vec<u8> {
        let d = bson::doc! { "sql": format!("SELECT * FROM t WHERE id = {i} -- {text}"), "n": i as i64 };
        let mut out = Vec::new();
        d.to_writer(&mut out).unwrap();
        out
    }

    fn entries_strategy() -> impl Strategy<Value = Vec<(FrameKey, Vec<u8>)>> {
        proptest::collection::vec((0u8..4, any::<u32>(), 0u32..3, "[a-z ]{0,40}"), 0..200).prop_map(
            |raw| {
                let mut ids = [u32::MAX - 5; 4];
                let mut out = Vec::new();
                for (w, r, extra, text) in raw {
                    // Mostly ascending ids per worker, across the u32 wrap, with jumps and repeats.
                    ids[w as usize] = ids[w as usize].wrapping_add(r % 7);
                    if r % 31 == 0 {
                        ids[w as usize] = r;
                    }
                    let key = FrameKey::new(w, ids[w as usize].max(1));
                    for k in 0..=extra {
                        out.push((key, doc(r.wrapping_add(k), &text)));
                    }
                }
                out
            },
        )
    }

    fn encode(entries: &[(FrameKey, Vec<u8>)], dict: Option<&[u8]>, target: usize) -> Vec<u8> {
        let mut enc = DataFileEncoder::new(3, dict, target);
        let mut out = Vec::new();
        for (k, d) in entries {
            assert!(enc.push(*k, d));
            out.extend(enc.take_output());
        }
        out.extend(enc.finish(1234));
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn entries_round_trip(entries in entries_strategy(), target in 1usize..4096) {
            let bytes = encode(&entries, None, target);
            prop_assert_eq!(decode_data_file(&bytes).unwrap(), entries.clone());
            let f = DataFile::parse(&bytes).unwrap();
            prop_assert_eq!(f.trailer.raw_len, 1234);
            prop_assert_eq!(f.index.entries.len(), entries.len());
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let mut with_header = FileHeader::compact(FileKind::FrameData).encode().to_vec();
            with_header.extend_from_slice(&bytes);
            let _ = decode_data_file(&bytes);
            let _ = decode_data_file(&with_header);
        }

        #[test]
        fn corrupted_files_never_panic_and_never_lie(
            entries in entries_strategy(),
            flips in proptest::collection::vec((any::<proptest::sample::Index>(), 1u8..=255), 1..4),
            cut in any::<proptest::sample::Index>(),
            do_cut in any::<bool>(),
        ) {
            let mut bytes = encode(&entries, None, 600);
            for (at, x) in flips {
                let i = at.index(bytes.len());
                bytes[i] ^= x;
            }
            if do_cut {
                bytes.truncate(cut.index(bytes.len()));
            }
            // Whatever decodes must be what was written (checksums everywhere).
            if let Ok(got) = decode_data_file(&bytes) {
                prop_assert_eq!(got, entries);
            }
            if let Ok(mut f) = DataFile::parse(&bytes) {
                for b in 0..f.index.blocks.len() {
                    if let Ok((h, _, raw)) = f.block(b) {
                        let _ = block_entries(&raw, h.count);
                        for e in f.index.entries.clone() {
                            let _ = entry_at(&raw, e.offset, e.key);
                        }
                    }
                }
            }
        }
    }

    fn sample_entries(n: u32) -> Vec<(FrameKey, Vec<u8>)> {
        (1..=n)
            .map(|i| {
                (
                    FrameKey::new((i % 3) as u8, i),
                    doc(i, "users orders items"),
                )
            })
            .collect()
    }

    #[test]
    fn a_dictionary_round_trips_and_damage_to_it_is_refused() {
        let entries = sample_entries(3000);
        let docs: Vec<&[u8]> = entries.iter().map(|(_, d)| &d[..]).collect();
        let dict = train_dictionary(&docs, 4096).expect("enough samples");
        let bytes = encode(&entries, Some(&dict), DATA_BLOCK_TARGET);
        let f = DataFile::parse(&bytes).unwrap();
        assert_eq!(f.dictionary, Some(&dict[..]));
        assert_eq!(decode_data_file(&bytes).unwrap(), entries);
        let mut bad_dict = bytes.clone();
        bad_dict[HEADER_LEN + BLOCK_HEADER_LEN + 10] ^= 1;
        assert!(DataFile::parse(&bad_dict).is_err());
    }

    #[test]
    fn blocks_close_before_the_target_and_damage_costs_one_block() {
        let entries = sample_entries(2000);
        let bytes = encode(&entries, None, 4096);
        let mut f = DataFile::parse(&bytes).unwrap();
        let blocks = f.index.blocks.clone();
        assert!(blocks.len() > 10);
        for b in 0..blocks.len() {
            let (h, _, raw) = f.block(b).unwrap();
            assert!(raw.len() <= 4096 && h.count > 0);
        }
        // A byte in the middle of block 3's body: that block fails, the others still decode.
        let mut damaged = bytes.clone();
        let mid = (blocks[3] + blocks[4]) / 2;
        damaged[mid as usize] ^= 0x40;
        let mut f = DataFile::parse(&damaged).unwrap();
        let err = f.block(3).unwrap_err();
        assert!(err.to_string().contains("CRC32C"), "{err}");
        assert!(err.offset >= blocks[3]);
        for b in (0..blocks.len()).filter(|&b| b != 3) {
            f.block(b).unwrap();
        }
        assert!(decode_data_file(&damaged).is_err());
    }

    #[test]
    fn a_damaged_index_or_trailer_is_refused_with_its_offset() {
        let bytes = encode(&sample_entries(100), None, DATA_BLOCK_TARGET);
        let mut t = bytes.clone();
        let last = t.len() - 5;
        t[last] ^= 1;
        let e = DataFile::parse(&t).err().unwrap();
        assert!(e.offset >= (bytes.len() - TRAILER_LEN) as u64, "{e}");
        let f = DataFile::parse(&bytes).unwrap();
        let mut i = bytes.clone();
        i[f.trailer.index_offset as usize + 30] ^= 1;
        let e = DataFile::parse(&i).err().unwrap();
        assert_eq!(e.offset, f.trailer.index_offset + 16, "{e}");
        assert!(DataFile::parse(&bytes[..bytes.len() - 1]).is_err());
        // A version 1 reader refuses the file by its header.
        assert!(FileHeader::decode(FileKind::FrameData, &bytes).is_err());
    }

    #[test]
    fn the_index_limit_grows_with_its_entries_and_wrapping_ids_stay_small() {
        let index = |raw_len: u32, count: u32| BlockHeader {
            magic: INDEX_MAGIC,
            len: 100,
            raw_len,
            count,
            crc: 0,
        };
        // A full 1 GiB segment: millions of entries, an index over 16 MiB.
        let big = index(40 << 20, 2_000_000).encode();
        assert!(BlockHeader::decode(&big).is_ok());
        let lying = index(40 << 20, 1000).encode();
        assert!(BlockHeader::decode(&lying).is_err());
        let mut data = index(MAX_RAW_BLOCK_LEN as u32 + 1, 2_000_000);
        data.magic = DATA_MAGIC;
        assert!(BlockHeader::decode(&data.encode()).is_err());

        // Ids across u32::MAX: exact differences, 5 bytes for the first and for the wrap.
        let keys = [u32::MAX - 1, u32::MAX, 0, 1, 2].map(|id| FrameKey::new(9, id));
        let entries: Vec<_> = keys.iter().map(|&k| (k, doc(k.id, "wrap"))).collect();
        let bytes = encode(&entries, None, DATA_BLOCK_TARGET);
        assert_eq!(decode_data_file(&bytes).unwrap(), entries);
        let mut f = DataFile::parse(&bytes).unwrap();
        let at = f.trailer.index_offset as usize;
        let h = BlockHeader::decode(&bytes[at..]).unwrap();
        let body = &bytes[at + BLOCK_HEADER_LEN..at + h.total_len() as usize];
        let raw = f.decoder.body(&h, body).unwrap();
        let ids_len = u32_at(&raw, 8) as usize;
        assert_eq!(ids_len, 5 + 1 + 5 + 1 + 1);
    }

    #[test]
    fn an_empty_file_and_oversized_entries() {
        let bytes = encode(&[], None, DATA_BLOCK_TARGET);
        assert_eq!(decode_data_file(&bytes).unwrap(), vec![]);
        assert!(!DataFileEncoder::fits(MAX_RAW_BLOCK_LEN));
        let mut enc = DataFileEncoder::new(1, None, DATA_BLOCK_TARGET);
        assert!(!enc.push(FrameKey::new(0, 1), &vec![0u8; MAX_RAW_BLOCK_LEN]));
        assert_eq!(enc.entries(), 0);
    }
}
