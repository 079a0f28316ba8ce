//! [`DataStore`]: a frame's data on demand, without scanning the data files.
//!
//! The index files are read once, batch by batch, into key ranges (`key_ranges.rs`): per batch (in
//! a compact file, per data block) the range of ids it holds, so the store's memory grows with the
//! batches, not with the frames (as a map of every key, a 10 M-frame log's data index took ~700
//! MB). A lookup reads again the index entries of the few batches its key may be in (the last ones
//! read are kept). In batch-framed files, index entries are accepted a whole batch at a time
//! (checked against the batch's marker, and again when read again), and a frame's data is read with
//! its whole batch and used only after the batch's CRC32C held. Data files are read, not
//! memory-mapped (except unframed files of old writers): mapped pages stay resident, so an export
//! reading every frame's data would hold the whole data file.
//!
//! A compact (version 2) data segment holds its own index: it is read from the trailer once,
//! and a lookup reads and decompresses the one block holding each entry (the last few blocks
//! are kept decompressed), whose entries are walked and checked against what the index said.
//! Compaction may replace a raw segment while this store reads it: a
//! store that opened the raw pair keeps reading it (the open files outlive their names), and
//! one that finds the index gone after opening the raw data file opens the compact file.
//! Without the `compact` feature, a compact data segment is refused with
//! [`Error::CompactUnsupported`] when the store first opens it.

// Memory-mapping a file is `unsafe` (the mapping must stay backed): the map of an unframed
// file below says why it is.
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

#[cfg(feature = "compact")]
use formats::compact::data::{
    BLOCK_HEADER_LEN, BlockDecoder, BlockHeader, DATA_MAGIC, DICT_MAGIC, INDEX_MAGIC, IndexedEntry,
    TRAILER_LEN, Trailer, decode_index_with, entry_at,
};
use formats::{
    DATA_MARKER_LEN, DamageKind, DataMarker, FLAG_BATCHES, FileKind, FrameKey, HEADER_LEN,
    INDEX_ENTRY_LEN, Probe, check_index_entries, decode_data_entry, decode_index_entry,
};
use memmap2::Mmap;

use crate::damage::{Damage, DamageLog};
use crate::error::{Error, IoContext, Result};
use crate::pread::{read_full_at, read_header, read_vec_at};
use crate::segments::{self, segment_path};

mod key_ranges;

use key_ranges::KeyRanges;

/// No batch: an entry of an unframed (older) data file.
const UNFRAMED: u32 = u32::MAX;

/// Where one data entry is: which segment (index into `segments`), what offset, which batch.
#[derive(Debug, Clone, Copy)]
struct Loc {
    segment: u32,
    seek: u32,
    batch: u32,
}

/// A frame's entry locations; most frames have exactly one.
#[derive(Debug, Clone)]
enum Locs {
    One(Loc),
    Many(Vec<Loc>),
}

impl Locs {
    fn push(&mut self, loc: Loc) {
        match self {
            Locs::One(first) => *self = Locs::Many(vec![*first, loc]),
            Locs::Many(v) => v.push(loc),
        }
    }

    fn as_slice(&self) -> &[Loc] {
        match self {
            Locs::One(l) => std::slice::from_ref(l),
            Locs::Many(v) => v,
        }
    }
}

/// Whether a batch's data checked out, decided at its first lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Checked {
    Unknown,
    Good,
    Bad,
}

/// One data batch of a framed file: where its entries are and their checksum.
#[derive(Debug, Clone)]
struct Batch {
    marker: u32,
    marker_info: DataMarker,
    checked: Checked,
    /// Where its index entries (after the marker's own) are in the index file.
    idx_at: u64,
    /// How far its data sits from where its index entries say (see `Segment::shift`).
    shift: i64,
}

/// A group of entries [`KeyRanges`] names: a framed raw batch or a compact data block.
#[derive(Debug, Clone, Copy)]
enum Group {
    /// Batch `batch` (of `batches`) of segment `segment` (an index into `segments`).
    Raw { segment: u32, batch: u32 },
    /// Data block `block` of compact segment `segment`: `count` entries whose keys and
    /// offsets hash to `keys` ([`entries_hash`]).
    #[cfg(feature = "compact")]
    Compact {
        segment: u32,
        block: u32,
        count: u32,
        keys: u64,
    },
}

/// A group's entries as a lookup wants them: (packed key, seek or block offset), sorted by
/// key, entries of one key in file order.
type GroupEntries = Vec<(u64, u32)>;

/// Groups whose entries are kept for the next lookups (neighbouring frames' data is
/// usually in the same group).
const GROUP_CACHE: usize = 64;

/// Data batch bodies kept for the next lookups (16 KiB each, as writers cut them).
const BATCH_CACHE: usize = 16;

/// Bytes of an index file read at a time while loading it.
const INDEX_CHUNK: usize = 4 << 20;

impl Batch {
    fn body(&self) -> std::ops::Range<usize> {
        let start = self.marker as usize + DATA_MARKER_LEN;
        start..start + self.marker_info.len as usize
    }
}

/// What a segment's data file turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// Not looked at yet (or too short to tell).
    Unknown,
    /// A raw `.framedata` + `.frameidx` pair (version 1).
    Raw,
    /// A compact file (version 2), index loaded.
    #[cfg(feature = "compact")]
    Compact,
    /// A compact file whose trailer, dictionary or index is damaged (reported): no data.
    #[cfg(feature = "compact")]
    Dead,
}

/// A compact (version 2) data segment: the file, its blocks, a decoder.
#[cfg(feature = "compact")]
struct CompactSeg {
    file: File,
    /// File offset of each data block's header.
    blocks: Vec<u64>,
    /// Where the data blocks end (the index block's offset).
    end: u64,
    /// Blocks found damaged (reported once, then refused without reading).
    bad: Vec<bool>,
    decoder: BlockDecoder,
}

/// Decompressed data blocks kept for the next lookups: a lookup in a neighbouring frame
/// (same request, same time) usually hits the same block.
#[cfg(feature = "compact")]
const BLOCK_CACHE: usize = 8;

/// One data/index segment pair.
struct Segment {
    form: Form,
    #[cfg(feature = "compact")]
    compact: Option<CompactSeg>,
    data_path: PathBuf,
    idx_path: PathBuf,
    idx: Option<File>,
    data: Option<File>,
    /// Whether the pair is batch-framed (known once the index header was read).
    framed: bool,
    /// Bytes of the index file accepted so far (0 until its header was read).
    idx_read: u64,
    /// Length of the data file at the last refresh.
    data_len: u64,
    /// How far data batches sit from where the index says (bytes inserted or deleted by
    /// damage earlier in the data file; 0 in an undamaged file).
    shift: i64,
    map: Option<Mmap>,
}

/// Looks up frame data by key, merging every entry of a frame in file order.
pub struct DataStore {
    dir: PathBuf,
    segments: Vec<(u32, Segment)>,
    /// Entries of unframed (older) index files, which have no batches to name.
    unframed: HashMap<FrameKey, Locs>,
    /// Which groups may hold a key.
    ranges: KeyRanges,
    groups: Vec<Group>,
    /// Recently read groups' entries, (group, entries), most recent last.
    group_cache: Vec<(u32, GroupEntries)>,
    /// Recently read data batch bodies, (batch, body), most recent last.
    batch_cache: Vec<(u32, Vec<u8>)>,
    batches: Vec<Batch>,
    entries: usize,
    damage: DamageLog,
    /// Recently decompressed blocks, (segment, block, body), most recent last.
    #[cfg(feature = "compact")]
    cache: Vec<(u32, u32, Vec<u8>)>,
}

fn corrupt(path: &Path, offset: u64, why: impl Into<String>) -> Error {
    Error::corrupt(
        path,
        offset,
        formats::DecodeError::new(0, formats::ErrorKind::BadDocument(why.into())),
    )
}

impl DataStore {
    /// Opens the data of the log in `dir` and loads its index.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_owned();
        if !dir.is_dir() {
            return Err(Error::NotALog(dir));
        }
        let mut store = Self {
            dir,
            segments: Vec::new(),
            unframed: HashMap::new(),
            ranges: KeyRanges::default(),
            groups: Vec::new(),
            group_cache: Vec::new(),
            batch_cache: Vec::new(),
            batches: Vec::new(),
            entries: 0,
            damage: DamageLog::default(),
            #[cfg(feature = "compact")]
            cache: Vec::new(),
        };
        store.refresh()?;
        Ok(store)
    }

    /// Number of index entries loaded.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Whether no index entry is loaded.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Whether `key` has any data (`true` also when looking failed: [`DataStore::get`]
    /// then says why).
    pub fn contains(&mut self, key: FrameKey) -> bool {
        self.locs(key).map_or(true, |l| !l.is_empty())
    }

    /// Damage found since the last call: in index files (the entries there were skipped), in
    /// raw data batches a lookup found failing their CRC32C, and in compact data files (a
    /// damaged index or trailer costs the file, a damaged block the entries in it).
    pub fn take_damage(&mut self) -> Vec<Damage> {
        self.damage.take()
    }

    /// All damage skipped so far: (bytes, places).
    pub fn damage_totals(&self) -> (u64, u64) {
        (self.damage.bytes(), self.damage.places())
    }

    /// Loads index entries appended since the last call (and new segments); returns how many.
    pub fn refresh(&mut self) -> Result<usize> {
        // Data files too: a compact segment has no index file.
        let mut listed = segments::list(&self.dir, FileKind::FrameIndex)?;
        listed.extend(segments::list(&self.dir, FileKind::FrameData)?);
        listed.sort_unstable();
        listed.dedup();
        for &n in &listed {
            if !self.segments.iter().any(|(m, _)| *m == n) {
                self.segments.push((
                    n,
                    Segment {
                        form: Form::Unknown,
                        #[cfg(feature = "compact")]
                        compact: None,
                        data_path: segment_path(&self.dir, FileKind::FrameData, n),
                        idx_path: segment_path(&self.dir, FileKind::FrameIndex, n),
                        idx: None,
                        data: None,
                        framed: false,
                        idx_read: 0,
                        shift: 0,
                        data_len: 0,
                        map: None,
                    },
                ));
            }
        }
        let mut added = 0;
        for i in 0..self.segments.len() {
            let n = self.segments[i].0;
            let sealed = listed.iter().any(|&m| m > n);
            added += self.refresh_segment(i, sealed)?;
        }
        self.entries += added;
        Ok(added)
    }

    fn refresh_segment(&mut self, i: usize, sealed: bool) -> Result<usize> {
        let seg = &mut self.segments[i].1;
        match seg.form {
            // Compact files never change; a dead one stays reported.
            #[cfg(feature = "compact")]
            Form::Compact | Form::Dead => return Ok(0),
            Form::Raw => {}
            Form::Unknown => match open_data(&seg.data_path)? {
                #[cfg(feature = "compact")]
                Opened::Compact(file) => return self.load_compact(i, file),
                Opened::Raw(file) => {
                    // Held from now on: if compaction replaces the file, this store keeps
                    // reading the raw one it indexed.
                    seg.data = Some(file);
                    seg.form = Form::Raw;
                }
                Opened::NotYet => return Ok(0),
            },
        }
        if seg.idx.is_none() {
            match File::open(&seg.idx_path) {
                Ok(f) => seg.idx = Some(f),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    // Compaction may have replaced the data file and deleted its index since
                    // the raw data file was opened: the compact file has everything (refused
                    // by `open_data` without the `compact` feature).
                    match open_data(&seg.data_path)? {
                        #[cfg(feature = "compact")]
                        Opened::Compact(file) => {
                            seg.data = None;
                            return self.load_compact(i, file);
                        }
                        // Not created yet, or deleted by retention: no entries from it (yet).
                        Opened::Raw(_) | Opened::NotYet => return Ok(0),
                    }
                }
                Err(e) => return Err(Error::io(&seg.idx_path, e)),
            }
        }
        let file = seg.idx.as_ref().expect("opened above");
        let just_opened = seg.idx_read == 0;
        if just_opened {
            match read_header(file, &seg.idx_path, FileKind::FrameIndex)? {
                Some(h) => {
                    seg.idx_read = u64::from(h.header_len);
                    seg.framed = h.flags & FLAG_BATCHES != 0;
                }
                None => return Ok(0),
            }
        }
        if just_opened && !seg.framed {
            // A header that lost its flag: the first entry names a batch marker.
            let mut first = [0u8; INDEX_ENTRY_LEN];
            let n = read_full_at(file, &seg.idx_path, &mut first, seg.idx_read)?;
            if n == INDEX_ENTRY_LEN
                && decode_index_entry(&first).is_some_and(|e| e.key.id == 0)
                && seg.data.is_some()
            {
                let found = self.index_batch(i, &first)?;
                self.segments[i].1.framed =
                    matches!(found, IndexBatch::Whole(..) | IndexBatch::Partial);
            }
        }
        let seg = &mut self.segments[i].1;
        let file = seg.idx.as_ref().expect("opened above");
        let len = file.metadata().at(&seg.idx_path)?.len();
        if !seg.framed {
            let tail = read_vec_at(
                file,
                &seg.idx_path,
                seg.idx_read,
                len.saturating_sub(seg.idx_read) as usize,
            )?;
            let whole = tail.len() / INDEX_ENTRY_LEN * INDEX_ENTRY_LEN;
            for chunk in tail[..whole].chunks_exact(INDEX_ENTRY_LEN) {
                let e = decode_index_entry(chunk).expect("nine bytes");
                self.insert_unframed(e.key, i, e.seek);
            }
            self.segments[i].1.idx_read += whole as u64;
            return Ok(whole / INDEX_ENTRY_LEN);
        }
        if seg.data.is_none() {
            match File::open(&seg.data_path) {
                Ok(f) => seg.data = Some(f),
                // The index's data file is gone: nothing can be read from this pair.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
                Err(e) => return Err(Error::io(&seg.data_path, e)),
            }
        }
        let data = seg.data.as_ref().expect("opened above");
        seg.data_len = data.metadata().at(&seg.data_path)?.len();
        // A chunk at a time: the index of a 1 GiB segment is tens of MB.
        let mut added = 0;
        let mut chunk = INDEX_CHUNK;
        loop {
            let seg = &self.segments[i].1;
            let file = seg.idx.as_ref().expect("opened above");
            let left = len.saturating_sub(seg.idx_read);
            let last = left <= chunk as u64;
            let tail = read_vec_at(
                file,
                &seg.idx_path,
                seg.idx_read,
                left.min(chunk as u64) as usize,
            )?;
            let (pos, n) = self.index_chunk(i, &tail, sealed && last)?;
            added += n;
            self.segments[i].1.idx_read += pos as u64;
            if last {
                break;
            }
            // A batch longer than a chunk (never written: a batch's index is under 20 KiB).
            if pos == 0 {
                chunk *= 2;
            }
        }
        Ok(added)
    }

    /// Loads the whole batches of index bytes `tail` (of segment `i`, from its `idx_read`):
    /// returns the bytes consumed and the entries added. `sealed`: nothing follows `tail`.
    fn index_chunk(&mut self, i: usize, tail: &[u8], sealed: bool) -> Result<(usize, usize)> {
        let mut pos = 0usize;
        let mut added = 0;
        while tail.len() - pos >= INDEX_ENTRY_LEN {
            match self.index_batch(i, &tail[pos..])? {
                IndexBatch::Whole(need, marker_seek, m) => {
                    let own = decode_index_entry(&tail[pos..]).expect("whole");
                    let entries = &tail[pos + INDEX_ENTRY_LEN..pos + need];
                    let shift = i64::from(marker_seek) - i64::from(own.seek);
                    let written_body = u64::from(own.seek) + DATA_MARKER_LEN as u64;
                    let list = check_index_entries(&m, entries, written_body).expect("checked");
                    let batch = self.batches.len() as u32;
                    let seg = &mut self.segments[i].1;
                    self.batches.push(Batch {
                        marker: marker_seek,
                        marker_info: m,
                        checked: Checked::Unknown,
                        idx_at: seg.idx_read + (pos + INDEX_ENTRY_LEN) as u64,
                        shift,
                    });
                    let group = self.groups.len() as u32;
                    self.groups.push(Group::Raw {
                        segment: i as u32,
                        batch,
                    });
                    self.ranges.add_group(group, list.iter().map(|e| e.key));
                    added += m.count as usize;
                    seg.shift = shift;
                    pos += need;
                }
                IndexBatch::Partial => break,
                IndexBatch::Bad => {
                    // Skip to the next position where a whole (or growing) batch starts.
                    let mut q = pos + 1;
                    let found = loop {
                        if tail.len() - q < INDEX_ENTRY_LEN {
                            break None;
                        }
                        match self.index_batch(i, &tail[q..])? {
                            IndexBatch::Bad => q += 1,
                            _ => break Some(q),
                        }
                    };
                    let to = match found {
                        Some(q) => q,
                        None if sealed => tail.len(),
                        // A batch may still start in the last 8 bytes.
                        None => tail.len() + 1 - INDEX_ENTRY_LEN,
                    };
                    let seg = &self.segments[i].1;
                    let at = seg.idx_read + pos as u64;
                    self.damage
                        .add(&seg.idx_path, at, (to - pos) as u64, DamageKind::BadIndex);
                    pos = to;
                }
            }
        }
        if sealed && pos < tail.len() {
            let seg = &self.segments[i].1;
            let at = seg.idx_read + pos as u64;
            self.damage.add(
                &seg.idx_path,
                at,
                (tail.len() - pos) as u64,
                DamageKind::TornTail,
            );
            pos = tail.len();
        }
        Ok((pos, added))
    }

    /// Classifies the index bytes at the front of `idx` (of segment `i`) as a batch.
    fn index_batch(&self, i: usize, idx: &[u8]) -> Result<IndexBatch> {
        let seg = &self.segments[i].1;
        let Some(own) = decode_index_entry(idx) else {
            return Ok(IndexBatch::Partial);
        };
        if own.key.id != 0 || (own.seek as usize) < HEADER_LEN {
            return Ok(IndexBatch::Bad);
        }
        let data = seg.data.as_ref().expect("opened by the caller");
        // Where the marker is: at its seek, moved by any bytes damage inserted or deleted
        // earlier in the data file (learned at the damage, then applied to every batch).
        let expected = i64::from(own.seek) + seg.shift;
        let mut raw = [0u8; DATA_MARKER_LEN];
        let n = match u64::try_from(expected) {
            Ok(at) => read_full_at(data, &seg.data_path, &mut raw, at)?,
            Err(_) => 0,
        };
        let matches = |m: &DataMarker, at: u64| -> Option<usize> {
            // Data is written before its index: a batch must be whole in the data file.
            if at + DATA_MARKER_LEN as u64 + u64::from(m.len) > seg.data_len {
                return None;
            }
            let need = (1 + m.count as usize) * INDEX_ENTRY_LEN;
            let entries = idx.get(INDEX_ENTRY_LEN..need)?;
            let body = u64::from(own.seek) + DATA_MARKER_LEN as u64;
            check_index_entries(m, entries, body).map(|_| need)
        };
        if let Probe::Valid(m) = DataMarker::probe(&raw[..n]) {
            let need = (1 + m.count as usize) * INDEX_ENTRY_LEN;
            if idx.len() < need {
                return Ok(IndexBatch::Partial);
            }
            if let Some(need) = matches(&m, expected as u64) {
                return Ok(IndexBatch::Whole(need, expected as u32, m));
            }
        }
        // Not there: search near it for the marker these index entries match.
        const WINDOW: u64 = 64 << 10;
        let from = (expected.max(0) as u64)
            .saturating_sub(WINDOW)
            .max(HEADER_LEN as u64);
        let near = read_vec_at(
            data,
            &seg.data_path,
            from,
            (2 * WINDOW) as usize + DATA_MARKER_LEN,
        )?;
        for q in 0..near.len() {
            if let Probe::Valid(m) = DataMarker::probe(&near[q..])
                && let Some(need) = matches(&m, from + q as u64)
            {
                return Ok(IndexBatch::Whole(need, (from + q as u64) as u32, m));
            }
        }
        Ok(IndexBatch::Bad)
    }

    fn insert_unframed(&mut self, key: FrameKey, segment: usize, seek: u32) {
        let loc = Loc {
            segment: segment as u32,
            seek,
            batch: UNFRAMED,
        };
        match self.unframed.get_mut(&key) {
            Some(locs) => locs.push(loc),
            None => {
                self.unframed.insert(key, Locs::One(loc));
            }
        }
    }

    /// Loads compact segment `i` (its data file already open): trailer, dictionary and index.
    /// Damage there costs the whole file's data: reported, and the segment holds nothing.
    #[cfg(feature = "compact")]
    fn load_compact(&mut self, i: usize, file: File) -> Result<usize> {
        let path = self.segments[i].1.data_path.clone();
        let len = file.metadata().at(&path)?.len();
        let loaded = match read_compact_index(&file, &path, len)? {
            Ok(l) => l,
            Err(e) => {
                let why = DamageKind::BadBlock(format!(
                    "the data file's index or trailer is damaged at byte {}: {}; its data is lost",
                    e.offset, e.kind
                ));
                self.damage.add(&path, 0, len, why);
                self.segments[i].1.form = Form::Dead;
                return Ok(0);
            }
        };
        // Entries are in file order, so each block's are together: a group at each change.
        let mut run: Vec<IndexedEntry> = Vec::new();
        let (groups, ranges) = (&mut self.groups, &mut self.ranges);
        let mut flush = |run: &mut Vec<IndexedEntry>| {
            if let Some(first) = run.first() {
                let group = groups.len() as u32;
                groups.push(Group::Compact {
                    segment: i as u32,
                    block: first.block,
                    count: run.len() as u32,
                    keys: entries_hash(run.iter().map(|e| (e.key, e.offset))),
                });
                ranges.add_group(group, run.iter().map(|e| e.key));
                run.clear();
            }
        };
        loaded.for_each(|e| {
            if run.last().is_some_and(|l| l.block != e.block) {
                flush(&mut run);
            }
            run.push(e);
        });
        flush(&mut run);
        let CompactIndex {
            count,
            at,
            blocks,
            decoder,
            ..
        } = loaded;
        let seg = &mut self.segments[i].1;
        seg.form = Form::Compact;
        seg.compact = Some(CompactSeg {
            file,
            bad: vec![false; blocks.len()],
            blocks,
            end: at,
            decoder,
        });
        Ok(count as usize)
    }

    /// The cache slot holding data block `block` of compact segment `si`, decompressed
    /// (read, checked and decompressed now if it is not cached). A damaged block is reported
    /// once (through [`DataStore::take_damage`]) and refused with an error naming it.
    #[cfg(feature = "compact")]
    fn compact_block(&mut self, si: usize, block: u32) -> Result<usize> {
        if let Some(pos) = self
            .cache
            .iter()
            .position(|(s, b, _)| *s == si as u32 && *b == block)
        {
            let hit = self.cache.remove(pos);
            self.cache.push(hit);
            return Ok(self.cache.len() - 1);
        }
        let seg = &mut self.segments[si].1;
        let path = &seg.data_path;
        let c = seg.compact.as_mut().expect("a compact segment");
        let b = block as usize;
        let at = c.blocks[b];
        let next = c.blocks.get(b + 1).copied().unwrap_or(c.end);
        if c.bad[b] {
            return Err(corrupt(
                path,
                at,
                format!(
                    "data block {block} is damaged ({} bytes skipped)",
                    next - at
                ),
            ));
        }
        let found = (|| -> Result<std::result::Result<Vec<u8>, formats::DecodeError>> {
            let buf = read_vec_at(&c.file, path, at, (next - at) as usize)?;
            let h = match BlockHeader::decode(&buf) {
                Ok(h) if h.magic == DATA_MAGIC && h.total_len() <= next - at => h,
                Ok(_) => {
                    return Ok(Err(formats::DecodeError::new(
                        0,
                        formats::ErrorKind::Compact("not a data block that fits its place".into()),
                    )));
                }
                Err(e) => return Ok(Err(e)),
            };
            Ok(c.decoder
                .body(&h, &buf[BLOCK_HEADER_LEN..h.total_len() as usize]))
        })()?;
        let body = match found {
            Ok(body) => body,
            Err(e) => {
                c.bad[b] = true;
                let why = DamageKind::BadBlock(format!("data block {block}: {}", e.kind));
                self.damage.add(path, at, next - at, why);
                return Err(corrupt(
                    path,
                    at + e.offset,
                    format!(
                        "data block {block} is damaged ({} bytes skipped): {}",
                        next - at,
                        e.kind
                    ),
                ));
            }
        };
        if self.cache.len() >= BLOCK_CACHE {
            self.cache.remove(0);
        }
        self.cache.push((si as u32, block, body));
        Ok(self.cache.len() - 1)
    }

    /// Where `key`'s entries are, in file order.
    fn locs(&mut self, key: FrameKey) -> Result<Vec<Loc>> {
        let mut locs: Vec<Loc> = self
            .unframed
            .get(&key)
            .map_or_else(Vec::new, |l| l.as_slice().to_vec());
        let mut groups = Vec::new();
        self.ranges.candidates(key, &mut groups);
        let k = packed(key);
        for g in groups {
            let c = self.group_entries(g)?;
            let entries = &self.group_cache[c].1;
            let (segment, batch) = match self.groups[g as usize] {
                Group::Raw { segment, batch } => (segment, batch),
                #[cfg(feature = "compact")]
                Group::Compact { segment, block, .. } => (segment, block),
            };
            let from = entries.partition_point(|e| e.0 < k);
            locs.extend(
                entries[from..]
                    .iter()
                    .take_while(|e| e.0 == k)
                    .map(|&(_, seek)| Loc {
                        segment,
                        seek,
                        batch,
                    }),
            );
        }
        // File order across segments: a segment loaded late (its index appeared after a later
        // segment's, or compaction replaced it mid-refresh) still comes before later ones.
        // Within a segment, batches (blocks) and offsets ascend in file order.
        locs.sort_by_key(|l| (self.segments[l.segment as usize].0, l.batch, l.seek));
        Ok(locs)
    }

    /// The cache slot holding group `g`'s entries (read now if they are not cached).
    fn group_entries(&mut self, g: u32) -> Result<usize> {
        if let Some(pos) = self.group_cache.iter().position(|(h, _)| *h == g) {
            let hit = self.group_cache.remove(pos);
            self.group_cache.push(hit);
            return Ok(self.group_cache.len() - 1);
        }
        let mut entries = match self.groups[g as usize] {
            Group::Raw { segment, batch } => self.raw_group(segment as usize, batch)?,
            #[cfg(feature = "compact")]
            Group::Compact {
                segment,
                block,
                count,
                keys,
            } => self.compact_group(segment as usize, block, count, keys)?,
        };
        // Stable: one key's entries stay in file order.
        entries.sort_by_key(|e| e.0);
        if self.group_cache.len() >= GROUP_CACHE {
            self.group_cache.remove(0);
        }
        self.group_cache.push((g, entries));
        Ok(self.group_cache.len() - 1)
    }

    /// The entries of batch `batch` of raw segment `si`, read again from its index file (which
    /// writers only append to) and checked against the batch's marker as when first read.
    fn raw_group(&self, si: usize, batch: u32) -> Result<GroupEntries> {
        let b = &self.batches[batch as usize];
        let seg = &self.segments[si].1;
        let file = seg
            .idx
            .as_ref()
            .expect("a framed segment's index stays open");
        let len = b.marker_info.count as usize * INDEX_ENTRY_LEN;
        let bytes = read_vec_at(file, &seg.idx_path, b.idx_at, len)?;
        let written_body = (i64::from(b.marker) - b.shift) as u64 + DATA_MARKER_LEN as u64;
        let list = check_index_entries(&b.marker_info, &bytes, written_body).ok_or_else(|| {
            corrupt(
                &seg.idx_path,
                b.idx_at,
                format!(
                    "the index entries of the data batch at offset {} changed after they were read",
                    b.marker
                ),
            )
        })?;
        Ok(list
            .iter()
            .map(|e| (packed(e.key), (i64::from(e.seek) + b.shift) as u32))
            .collect())
    }

    /// The entries of data block `block` of compact segment `si`: walked in the decompressed
    /// block when they are the `count` entries the index gave (`keys`), else (a damaged
    /// block, or one that disagrees with the index) the index's own, so that a lookup of one
    /// of them reports the damage as before and other frames' lookups are not refused.
    #[cfg(feature = "compact")]
    fn compact_group(
        &mut self,
        si: usize,
        block: u32,
        count: u32,
        keys: u64,
    ) -> Result<GroupEntries> {
        if let Ok(c) = self.compact_block(si, block)
            && let Some(list) = formats::data_batch_entries(&self.cache[c].2)
            && list.len() == count as usize
            && entries_hash(list.iter().copied()) == keys
        {
            return Ok(list.iter().map(|&(k, o)| (packed(k), o)).collect());
        }
        let seg = &self.segments[si].1;
        let c = seg.compact.as_ref().expect("a compact segment");
        let len = c.file.metadata().at(&seg.data_path)?.len();
        let index = match read_compact_index(&c.file, &seg.data_path, len)? {
            Ok(index) => index,
            Err(e) => {
                return Err(corrupt(
                    &seg.data_path,
                    e.offset,
                    format!("the index changed after it was read: {}", e.kind),
                ));
            }
        };
        let mut out = Vec::new();
        index.for_each(|e| {
            if e.block == block {
                out.push((packed(e.key), e.offset));
            }
        });
        Ok(out)
    }

    /// The bytes of the entry at `seek` of data batch `batch` (of raw segment `si`) up to
    /// the batch's end, read alone when the batch's CRC32C already held and its body is not
    /// kept (a random lookup then reads about a kilobyte, not the batch's 16 KiB); `None`
    /// otherwise (the caller reads, and checks, the whole batch).
    fn verified_entry(&self, si: usize, batch: u32, seek: usize) -> Result<Option<Vec<u8>>> {
        let b = &self.batches[batch as usize];
        if b.checked != Checked::Good || self.batch_cache.iter().any(|(c, _)| *c == batch) {
            return Ok(None);
        }
        let seg = &self.segments[si].1;
        let Some(file) = &seg.data else {
            return Ok(None);
        };
        let end = b.body().end;
        let left = end.saturating_sub(seek);
        // Most documents are well under a kilobyte: one read; a longer one, a second.
        let mut bytes = read_vec_at(file, &seg.data_path, seek as u64, left.min(1024))?;
        if bytes.len() < left && matches!(decode_data_entry(&bytes), Ok(None)) {
            bytes = read_vec_at(file, &seg.data_path, seek as u64, left)?;
        }
        Ok(Some(bytes))
    }

    /// The cache slot holding the body of data batch `batch` (of raw segment `si`), read now
    /// if it is not cached; refused, naming `key`, if it fails its CRC32C checksum. Read, not
    /// mapped: a mapping's pages would stay resident, and a whole-log read (an export) would
    /// hold the whole data file.
    fn batch_body(&mut self, si: usize, batch: u32, key: FrameKey) -> Result<usize> {
        if let Some(pos) = self.batch_cache.iter().position(|(b, _)| *b == batch) {
            let hit = self.batch_cache.remove(pos);
            self.batch_cache.push(hit);
            return Ok(self.batch_cache.len() - 1);
        }
        let b = &mut self.batches[batch as usize];
        let seg = &self.segments[si].1;
        let range = b.body();
        let bad = |b: &Batch| {
            corrupt(
                &seg.data_path,
                u64::from(b.marker),
                format!(
                    "the data batch holding frame {key} fails its CRC32C checksum ({} bytes skipped)",
                    DATA_MARKER_LEN + b.body().len()
                ),
            )
        };
        if b.checked == Checked::Bad {
            return Err(bad(b));
        }
        let file = match &seg.data {
            Some(f) => f,
            None => {
                return Err(Error::io(
                    &seg.data_path,
                    std::io::ErrorKind::NotFound.into(),
                ));
            }
        };
        let body = read_vec_at(file, &seg.data_path, range.start as u64, range.len())?;
        if body.len() < range.len() {
            return Err(corrupt(
                &seg.data_path,
                range.start as u64 + body.len() as u64,
                format!(
                    "the data file ends at byte {}, before the end of the batch its index names ({})",
                    range.start + body.len(),
                    range.end
                ),
            ));
        }
        if b.checked == Checked::Unknown {
            b.checked = if b.marker_info.body_matches(&body) {
                Checked::Good
            } else {
                // Reported once, as a damaged compact block is.
                let len = (DATA_MARKER_LEN + range.len()) as u64;
                self.damage.add(
                    &seg.data_path,
                    u64::from(b.marker),
                    len,
                    DamageKind::BadChecksum,
                );
                Checked::Bad
            };
        }
        if b.checked == Checked::Bad {
            return Err(bad(b));
        }
        if self.batch_cache.len() >= BATCH_CACHE {
            self.batch_cache.remove(0);
        }
        self.batch_cache.push((batch, body));
        Ok(self.batch_cache.len() - 1)
    }

    /// The raw BSON documents of `key`, in file order (each checked against the index, and
    /// in framed files against its batch's checksum).
    pub fn raw_entries(&mut self, key: FrameKey) -> Result<Vec<Vec<u8>>> {
        let locs = self.locs(key)?;
        let mut out = Vec::with_capacity(locs.len());
        for loc in locs {
            let seek = loc.seek as usize;
            let si = loc.segment as usize;
            #[cfg(feature = "compact")]
            if self.segments[si].1.form == Form::Compact {
                let c = self.compact_block(si, loc.batch)?;
                let seg = &self.segments[si].1;
                let body = &self.cache[c].2;
                let e = entry_at(body, loc.seek, key).map_err(|e| {
                    let at = seg
                        .compact
                        .as_ref()
                        .map_or(0, |c| c.blocks[loc.batch as usize]);
                    corrupt(
                        &seg.data_path,
                        at,
                        format!("in data block {} (decompressed): {e}", loc.batch),
                    )
                })?;
                out.push(e.document.to_vec());
                continue;
            }
            let read;
            let bytes = if loc.batch == UNFRAMED {
                mapped_from(&mut self.segments[si].1, seek)?;
                &self.segments[si].1.map.as_ref().expect("mapped above")[seek..]
            } else if let Some(e) = self.verified_entry(si, loc.batch, seek)? {
                read = e;
                &read[..]
            } else {
                // The entry may use the bytes of its batch only.
                let c = self.batch_body(si, loc.batch, key)?;
                let start = self.batches[loc.batch as usize].body().start;
                let body = &self.batch_cache[c].1;
                body.get(seek.saturating_sub(start)..).unwrap_or_default()
            };
            let seg = &self.segments[si].1;
            let entry = match decode_data_entry(bytes) {
                Ok(Some(e)) => e,
                Ok(None) => {
                    return Err(corrupt(
                        &seg.data_path,
                        seek as u64,
                        "the entry runs past the end of its data",
                    ));
                }
                Err(e) => return Err(Error::corrupt(&seg.data_path, seek as u64, e)),
            };
            if entry.key != key {
                return Err(corrupt(
                    &seg.idx_path,
                    0,
                    format!(
                        "index entry for {key} points at seek {seek}, which holds data of {}",
                        entry.key
                    ),
                ));
            }
            out.push(entry.document.to_vec());
        }
        Ok(out)
    }

    /// The frame's data: every entry merged in file order, later keys winning.
    pub fn get(&mut self, key: FrameKey) -> Result<Option<bson::Document>> {
        let raw = self.raw_entries(key)?;
        if raw.is_empty() {
            return Ok(None);
        }
        let mut merged = bson::Document::new();
        for doc in raw {
            // Checked without recursion first: the parser recurses once per level.
            formats::bson_check::check_document(&doc)
                .map_err(|e| corrupt(&self.dir, 0, format!("frame {key}: {e}")))?;
            let d = bson::Document::from_reader(&doc[..])
                .map_err(|e| corrupt(&self.dir, 0, e.to_string()))?;
            for (k, v) in d {
                merged.insert(k, v);
            }
        }
        Ok(Some(merged))
    }
}

/// A key as one integer, ordered by worker, then id.
fn packed(key: FrameKey) -> u64 {
    (u64::from(key.worker) << 32) | u64::from(key.id)
}

/// A hash of a compact block's entries (keys and offsets, in order), to tell whether its
/// decompressed entries are the ones the index listed.
#[cfg(feature = "compact")]
fn entries_hash(entries: impl Iterator<Item = (FrameKey, u32)>) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    entries.fold(0, |h, (key, offset)| {
        let h = (h ^ packed(key)).wrapping_mul(K);
        (h ^ u64::from(offset)).wrapping_mul(K).rotate_left(29)
    })
}

/// What a data file turned out to be when opened.
enum Opened {
    /// A compact (version 2) file.
    #[cfg(feature = "compact")]
    Compact(File),
    /// Anything else: read as the raw data file of a pair, as before compaction existed.
    Raw(File),
    /// Not there, or shorter than its header (being created): look again later.
    NotYet,
}

/// Opens the data file at `path` and tells by its header which form it is (refusing a compact
/// one without the `compact` feature).
fn open_data(path: &Path) -> Result<Opened> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Opened::NotYet),
        Err(e) => return Err(Error::io(path, e)),
    };
    let mut head = [0u8; HEADER_LEN];
    let n = read_full_at(&file, path, &mut head, 0)?;
    Ok(
        match crate::pread::decode_header_any(path, FileKind::FrameData, &head[..n])? {
            Ok(None) => Opened::NotYet,
            #[cfg(feature = "compact")]
            Ok(Some(h)) if h.is_compact() => Opened::Compact(file),
            // A raw file, or a header too damaged to tell: the index decides, as before.
            _ => Opened::Raw(file),
        },
    )
}

/// A compact file's index as a store reads it: checked, still encoded (a few bytes an entry;
/// decoded, 16), with a decoder (holding the dictionary).
#[cfg(feature = "compact")]
struct CompactIndex {
    /// The index block's decompressed body.
    raw: Vec<u8>,
    /// Its entries.
    count: u32,
    /// Where the index block is (the data blocks end there).
    at: u64,
    /// File offset of each data block's header.
    blocks: Vec<u64>,
    decoder: BlockDecoder,
}

#[cfg(feature = "compact")]
impl CompactIndex {
    /// Hands each entry to `each`, in file order (the index was checked when read).
    fn for_each(&self, each: impl FnMut(IndexedEntry)) {
        decode_index_with(&self.raw, self.count, self.at, each).expect("checked when read");
    }
}

/// Reads a compact data file's trailer, dictionary and index block (`Ok(Err(..))`: they are
/// damaged, at the error's file offset).
#[cfg(feature = "compact")]
fn read_compact_index(
    file: &File,
    path: &Path,
    len: u64,
) -> Result<std::result::Result<CompactIndex, formats::DecodeError>> {
    let bad = |at: u64, why: &str| {
        Ok(Err(formats::DecodeError::new(
            at,
            formats::ErrorKind::Compact(why.into()),
        )))
    };
    let min = (HEADER_LEN + BLOCK_HEADER_LEN + TRAILER_LEN) as u64;
    if len < min {
        return bad(0, "file too short for a compact data file");
    }
    let tail_at = len - TRAILER_LEN as u64;
    let tail = read_vec_at(file, path, tail_at, TRAILER_LEN)?;
    let trailer = match Trailer::decode(&tail, len) {
        Ok(t) => t,
        Err(e) => return Ok(Err(e.shifted(tail_at))),
    };
    // The dictionary block, if the file has one, right after the header.
    let head = read_vec_at(file, path, HEADER_LEN as u64, BLOCK_HEADER_LEN)?;
    let mut dictionary = None;
    let mut first_block = HEADER_LEN as u64;
    if head.get(..4) == Some(&DICT_MAGIC[..]) {
        let h = match BlockHeader::decode(&head) {
            Ok(h) if HEADER_LEN as u64 + h.total_len() <= trailer.index_offset => h,
            Ok(_) => return bad(HEADER_LEN as u64, "dictionary block runs past the data"),
            Err(e) => return Ok(Err(e.shifted(HEADER_LEN as u64))),
        };
        let body = read_vec_at(
            file,
            path,
            (HEADER_LEN + BLOCK_HEADER_LEN) as u64,
            h.len as usize,
        )?;
        if !h.body_matches(&body) {
            return bad(
                HEADER_LEN as u64,
                "dictionary block fails its CRC32C checksum",
            );
        }
        first_block += h.total_len();
        dictionary = Some(body);
    }
    let mut decoder = match BlockDecoder::new(dictionary.as_deref()) {
        Ok(d) => d,
        Err(e) => return Ok(Err(e.shifted(HEADER_LEN as u64))),
    };
    let at = trailer.index_offset;
    let ih = read_vec_at(file, path, at, BLOCK_HEADER_LEN)?;
    let h = match BlockHeader::decode(&ih) {
        Ok(h) if h.magic == INDEX_MAGIC && at + h.total_len() == tail_at => h,
        Ok(_) => return bad(at, "no index block right before the trailer"),
        Err(e) => return Ok(Err(e.shifted(at))),
    };
    if u64::from(h.count) != trailer.entries {
        return bad(at + 12, "index block's count differs from the trailer's");
    }
    let body = read_vec_at(file, path, at + BLOCK_HEADER_LEN as u64, h.len as usize)?;
    let raw = match decoder.body(&h, &body) {
        Ok(r) => r,
        Err(e) => return Ok(Err(e.shifted(at))),
    };
    // Checked here without keeping the entries (16 bytes each decoded: 160 MB for a 10 M-entry
    // segment); a reader decodes them again as it needs them.
    let blocks = match decode_index_with(&raw, h.count, at, |_| {}) {
        Ok(b) => b,
        Err(e) => return bad(at, &format!("index block: {}", e.kind)),
    };
    if blocks.first().is_some_and(|&b| b != first_block) {
        return bad(
            first_block,
            "the first data block is not where the index says",
        );
    }
    Ok(Ok(CompactIndex {
        raw,
        count: h.count,
        at,
        blocks,
        decoder,
    }))
}

/// What the index bytes at a position are.
enum IndexBatch {
    /// A whole batch: its index bytes (marker entry included), marker seek and marker.
    Whole(usize, u32, DataMarker),
    /// The start of a batch whose index entries are still being written.
    Partial,
    /// Not the start of a valid batch.
    Bad,
}

/// Maps an unframed `seg` so that its entry at `seek` is inside the mapping, remapping if the
/// file grew.
fn mapped_from(seg: &mut Segment, seek: usize) -> Result<()> {
    let need_remap = match &seg.map {
        // An entry's header and length prefix must be inside the mapping; a longer
        // document is checked again below.
        Some(m) => m.len() < seek + 9,
        None => true,
    };
    if need_remap {
        remap_whole(seg)?;
    }
    let len = seg.map.as_ref().map_or(0, |m| m.len());
    if seek < HEADER_LEN || seek >= len {
        return Err(corrupt(
            &seg.data_path,
            seek as u64,
            format!("index points at seek {seek}, outside the data file ({len} bytes)"),
        ));
    }
    // If the document runs past the mapping, the file may have grown since: remap once.
    let doc_len = {
        let m = seg.map.as_ref().expect("mapped");
        let b = m.get(seek + 5..seek + 9).unwrap_or(&[0, 0, 0, 0]);
        i32::from_le_bytes(b.try_into().expect("4 bytes")).max(0) as usize
    };
    if seek + 5 + doc_len > len {
        remap_whole(seg)?;
    }
    Ok(())
}

/// The segment's data file: the one this store holds open if any (it stays readable after
/// retention deletes it), else opened now.
fn data_file(seg: &Segment) -> Result<File> {
    match &seg.data {
        Some(f) => f.try_clone().at(&seg.data_path),
        None => File::open(&seg.data_path).at(&seg.data_path),
    }
}

fn remap_whole(seg: &mut Segment) -> Result<()> {
    let file = data_file(seg)?;
    // SAFETY: unframed data files were written by writers that predate batch framing; they
    // only append. Writers of this version never cut or write them (they start a new segment
    // instead), compaction renames a new file over the name instead of writing this one, and
    // every slice is bounds-checked against the mapping's length.
    let map = unsafe { Mmap::map(&file) }.at(&seg.data_path)?;
    seg.map = Some(map);
    Ok(())
}
