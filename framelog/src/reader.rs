//! [`LogReader`]: streams the records of every frame-log segment in file order.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use formats::{
    BATCH_RECORD_LEN, DamageKind, Decoded, FLAG_BATCHES, FileKind, Framing, LabelKey,
    MAX_FRAMES_BATCH_LEN, Record, RecordType, Unit, batch_records, decode_record,
};

#[cfg(feature = "compact")]
use formats::compact::frames::BlockDecoder;

#[cfg(feature = "compact")]
use crate::compact::frames::{Item, Plan, raw_len_of, read_block};
use crate::damage::{Damage, DamageLog};
use crate::error::{Error, Result};
use crate::follow::DirWatch;
use crate::pread::{read_full_at, read_header_any};
use crate::segments::{self, segment_path};

/// Where a record starts: segment number and byte offset in that segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct Position {
    /// Segment number (1-based; 0 means "before the first segment").
    pub segment: u32,
    /// Byte offset within the segment file.
    pub offset: u64,
}

/// What takes the records [`LogReader::read_some_labelled`] reads: any
/// `FnMut(Position, Record, LabelKey)`, or a reader's own type.
pub trait RecordHandler {
    /// One record, where it is, with its [`LabelKey`].
    fn record(&mut self, pos: Position, rec: Record<'_>, key: LabelKey);
}

impl<F: FnMut(Position, Record<'_>, LabelKey)> RecordHandler for F {
    #[inline(always)]
    fn record(&mut self, pos: Position, rec: Record<'_>, key: LabelKey) {
        self(pos, rec, key)
    }
}

/// A [`RecordHandler`] fed by the compact decoder of one segment.
#[cfg(feature = "compact")]
struct AtSegment<'a, S> {
    sink: &'a mut S,
    segment: u32,
}

#[cfg(feature = "compact")]
impl<S: RecordHandler> formats::compact::frames::RecordHandler for AtSegment<'_, S> {
    #[inline(always)]
    fn record(&mut self, offset: u64, rec: Record<'_>, key: LabelKey) {
        let segment = self.segment;
        self.sink.record(Position { segment, offset }, rec, key);
    }
}

/// Bytes read per system call.
const CHUNK: usize = 4 << 20;
/// The smallest read: one whole batch of the largest size always fits.
const MIN_READ: usize = (BATCH_RECORD_LEN + MAX_FRAMES_BATCH_LEN).next_power_of_two();

/// Reads a log's records in order, resumable, and able to follow a growing log.
pub struct LogReader {
    dir: PathBuf,
    /// Current segment and the offset just past the last whole record delivered from it
    /// (0 until its header has been read).
    pos: Position,
    file: Option<(File, PathBuf)>,
    /// Whether the current segment is batch-framed (known once its header was read).
    framed: bool,
    /// Damaged bytes skipped so far.
    damage: DamageLog,
    /// File length seen by the last read of the current segment, to detect growth.
    seen_len: u64,
    buf: Vec<u8>,
    /// A packed batch's records, unpacked.
    unpacked: Vec<u8>,
    /// Opened at a position inside a packed batch: the records before it are passed over.
    from_inside: Option<u64>,
    bytes_read: u64,
    watch: Option<DirWatch>,
    /// Segments found deleted (by retention) before this reader got to them.
    pruned: u32,
    /// Their numbers, as ranges, until [`LogReader::take_pruned`] takes them.
    pruned_ranges: Vec<std::ops::Range<u32>>,
    /// The current segment is compact (version 2): where its blocks are, and the next one.
    #[cfg(feature = "compact")]
    compact: Option<(Plan, usize)>,
    /// Decodes compact blocks (keeps its buffers).
    #[cfg(feature = "compact")]
    decoder: BlockDecoder,
    /// A compact block's bytes as read.
    #[cfg(feature = "compact")]
    block_buf: Vec<u8>,
    /// Raw lengths of compact segments by (segment, inode, size), for progress.
    #[cfg(feature = "compact")]
    raw_lens: parking_lot::Mutex<std::collections::HashMap<u32, (u64, u64, u64)>>,
    /// Which compact blocks to decode, by their (min_time, max_time) ([`LogReader::skip_blocks`]).
    #[cfg(feature = "compact")]
    block_filter: Option<BlockFilter>,
}

/// Says by a compact block's (min_time, max_time) whether to decode it.
#[cfg(feature = "compact")]
pub type BlockFilter = Box<dyn FnMut(u64, u64) -> bool + Send>;

impl LogReader {
    /// Opens the log in `dir` at its first record.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_at(dir, Position::default())
    }

    /// Opens the log in `dir` at `pos` (a position a reader returned earlier).
    pub fn open_at(dir: impl AsRef<Path>, pos: Position) -> Result<Self> {
        let dir = dir.as_ref().to_owned();
        if !segments::is_log(&dir) {
            return Err(Error::NotALog(dir));
        }
        Ok(Self {
            dir,
            pos,
            file: None,
            framed: false,
            damage: DamageLog::default(),
            seen_len: 0,
            buf: Vec::new(),
            unpacked: Vec::new(),
            from_inside: None,
            bytes_read: 0,
            watch: None,
            pruned: 0,
            pruned_ranges: Vec::new(),
            #[cfg(feature = "compact")]
            compact: None,
            #[cfg(feature = "compact")]
            decoder: BlockDecoder::new(),
            #[cfg(feature = "compact")]
            block_buf: Vec::new(),
            #[cfg(feature = "compact")]
            raw_lens: Default::default(),
            #[cfg(feature = "compact")]
            block_filter: None,
        })
    }

    /// From now on, decodes only the compact blocks for which `keep(min_time, max_time)`
    /// holds (their records' smallest and largest timestamps); the others are passed over
    /// undecoded, their records not delivered. Raw segments are read whole as always: a
    /// reader that wants a time range still filters their records itself.
    #[cfg(feature = "compact")]
    pub fn skip_blocks(&mut self, keep: impl FnMut(u64, u64) -> bool + Send + 'static) {
        self.block_filter = Some(Box::new(keep));
    }

    /// The log directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the next record will be read from.
    pub fn position(&self) -> Position {
        self.pos
    }

    /// Bytes of records delivered so far (counted as in the raw segments, also for compact
    /// ones, so that it compares with [`LogReader::total_bytes`]).
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// Total bytes of all frame-log segments now (for progress); a compact segment counts
    /// as the raw segment it replaced.
    pub fn total_bytes(&self) -> Result<u64> {
        let mut total = 0;
        for n in segments::list(&self.dir, FileKind::FrameLog)? {
            let p = segment_path(&self.dir, FileKind::FrameLog, n);
            let m = match std::fs::metadata(&p) {
                Ok(m) => m,
                // Deleted by retention since it was listed.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io(p, e)),
            };
            total += self.counted_len(n, &p, &m);
        }
        Ok(total)
    }

    /// The bytes segment `n` (at `p`, with metadata `m`) counts for in
    /// [`LogReader::total_bytes`]: its length, or the raw length of a compact one.
    #[cfg(feature = "compact")]
    fn counted_len(&self, n: u32, p: &Path, m: &std::fs::Metadata) -> u64 {
        use std::os::unix::fs::MetadataExt;
        let key = (m.ino(), m.len());
        let mut cache = self.raw_lens.lock();
        match cache.get(&n) {
            Some(&(ino, len, raw)) if (ino, len) == key => raw,
            _ => {
                // Only sealed segments can be compact; a file that turns compact gets a
                // new inode (it is renamed into place), so the cache never goes stale.
                let raw = if segments::exists(&self.dir, FileKind::FrameLog, n + 1) {
                    raw_len_of(p).ok().flatten()
                } else {
                    None
                };
                if let Some(raw) = raw {
                    cache.insert(n, (key.0, key.1, raw));
                }
                raw.unwrap_or(m.len())
            }
        }
    }

    /// Without the `compact` feature: the file's length (reading a compact segment is refused
    /// by [`LogReader::read_some`], not guessed at here).
    #[cfg(not(feature = "compact"))]
    fn counted_len(&self, _n: u32, _p: &Path, m: &std::fs::Metadata) -> u64 {
        m.len()
    }

    /// Delivers every whole record available now, in file order; returns how many.
    ///
    /// Stops cleanly at a partial batch (one being written); the next call picks it up.
    /// Damaged bytes (a batch that fails its checksum, bytes that are not a batch) are skipped
    /// and reported through [`LogReader::take_damage`]; reading goes on at the next valid batch.
    /// Errors are I/O errors and segment headers this reader refuses (wrong magic, newer
    /// version, and in a build without the `compact` feature a compact segment:
    /// [`Error::CompactUnsupported`]); [`LogReader::skip_segment`] moves past such a segment.
    pub fn read_available(&mut self, f: impl FnMut(Position, Record<'_>)) -> Result<u64> {
        self.read_some(usize::MAX, f)
    }

    /// Damage skipped since the last call, each with file, offset, length and reason.
    pub fn take_damage(&mut self) -> Vec<Damage> {
        self.damage.take()
    }

    /// All damage skipped so far: (bytes, places).
    pub fn damage_totals(&self) -> (u64, u64) {
        (self.damage.bytes(), self.damage.places())
    }

    /// Like [`LogReader::read_available`], but returns after about `max_bytes` of records.
    pub fn read_some(
        &mut self,
        max_bytes: usize,
        mut f: impl FnMut(Position, Record<'_>),
    ) -> Result<u64> {
        self.read_some_labelled(max_bytes, |pos, rec: Record<'_>, _| f(pos, rec))
    }

    /// [`LogReader::read_some`], with a [`LabelKey`] beside each record: a reader that
    /// interns labels looks each label of a compact block up once, not at every start. `f` is
    /// any `FnMut(Position, Record, LabelKey)`, or a [`RecordHandler`] whose `record` is
    /// `#[inline(always)]` (then its work runs inside the compact decoder's loop).
    pub fn read_some_labelled(
        &mut self,
        max_bytes: usize,
        mut f: impl RecordHandler,
    ) -> Result<u64> {
        let mut delivered = 0u64;
        let mut budget = max_bytes;
        loop {
            if self.pos.segment == 0 {
                match segments::list(&self.dir, FileKind::FrameLog)?.first() {
                    Some(&n) => {
                        self.pos = Position {
                            segment: n,
                            offset: 0,
                        }
                    }
                    None => return Ok(delivered),
                }
            }
            if self.file.is_none() {
                let path = segment_path(&self.dir, FileKind::FrameLog, self.pos.segment);
                match File::open(&path) {
                    Ok(file) => self.file = Some((file, path)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        // Deleted by retention before this reader got to it: go on at the
                        // oldest segment still there.
                        match self.later_segment()? {
                            Some(n) => {
                                self.pruned += n - self.pos.segment;
                                self.pruned_ranges.push(self.pos.segment..n);
                                self.pos = Position {
                                    segment: n,
                                    offset: 0,
                                };
                                continue;
                            }
                            None => return Ok(delivered),
                        }
                    }
                    Err(e) => return Err(Error::io(path, e)),
                }
                self.seen_len = 0;
            }
            let (file, path) = self.file.as_ref().expect("opened above");
            if self.pos.offset == 0 || self.seen_len == 0 {
                // Refuses a compact segment in a build without the `compact` feature.
                match read_header_any(file, path, FileKind::FrameLog)? {
                    #[cfg(feature = "compact")]
                    Some(h) if h.is_compact() => {
                        self.decoder.set_version(h.version);
                        if self.compact.is_none() {
                            self.compact = Some((crate::compact::frames::plan(file, path)?, 0));
                        }
                        if self.pos.offset == 0 {
                            self.pos.offset = u64::from(h.header_len);
                        }
                        // Marks the header as read.
                        self.seen_len = self.pos.offset.max(1);
                    }
                    Some(h) => {
                        self.framed = h.flags & FLAG_BATCHES != 0;
                        if self.pos.offset == 0 {
                            self.pos.offset = u64::from(h.header_len);
                        } else if self.framed {
                            // Opened at a position: it may be inside a (packed) batch.
                            self.start_at_batch(u64::from(h.header_len))?;
                        }
                    }
                    // Being created: its header is not written yet.
                    None if !self.next_exists() => return Ok(delivered),
                    None => {
                        self.advance();
                        continue;
                    }
                }
            }
            #[cfg(feature = "compact")]
            if self.compact.is_some() {
                let (n, used, done) = self.read_compact(budget, &mut f)?;
                delivered += n;
                budget = budget.saturating_sub(used);
                if done {
                    // A compact segment is sealed by definition.
                    self.advance();
                    continue;
                }
                return Ok(delivered);
            }
            let (file, path) = self.file.as_ref().expect("opened above");
            // Whether the segment is sealed must be known before reading it, so that no
            // byte written before the seal can be missed.
            let sealed = self.next_exists();
            let want = CHUNK.min(budget.max(MIN_READ));
            // Only raw segments are read through this buffer: a log of compact segments never
            // zeroes its 4 MiB.
            if self.buf.len() < CHUNK {
                self.buf.resize(CHUNK, 0);
            }
            let n = read_full_at(file, path, &mut self.buf[..want], self.pos.offset)?;
            self.seen_len = self.pos.offset + n as u64;
            // The bytes read reach the end of a segment no one will write again.
            let at_end = sealed && n < want;
            let base = self.pos.offset;
            let mut used = 0usize;
            let mut records = 0usize;
            while used < n {
                let rest = &self.buf[used..n];
                let unit = if self.framed {
                    Framing::Frames.next_unit(rest, true, at_end)
                } else {
                    // Older, unframed segment: records one by one.
                    match decode_record(rest) {
                        // A valid batch in a segment whose header lacks the flag: the header
                        // was damaged. Read the rest of the segment as framed.
                        Ok(Decoded::Record(rec, _))
                            if rec.type_byte() == RecordType::Batch as u8
                                && matches!(
                                    Framing::Frames.next_unit(rest, true, at_end),
                                    Unit::Batch { .. }
                                ) =>
                        {
                            self.framed = true;
                            continue;
                        }
                        Ok(Decoded::Record(rec, len)) => {
                            self.damage.saw(&rec);
                            f.record(
                                Position {
                                    segment: self.pos.segment,
                                    offset: base + used as u64,
                                },
                                rec,
                                LabelKey::NONE,
                            );
                            delivered += 1;
                            used += len;
                            records += len;
                            continue;
                        }
                        _ => Framing::Frames.next_unit(rest, false, at_end),
                    }
                };
                match unit {
                    Unit::Batch {
                        len, body, packed, ..
                    } => {
                        let body_at = base + (used + BATCH_RECORD_LEN) as u64;
                        let items =
                            match batch_records(body, packed.as_ref(), body_at, &mut self.unpacked)
                            {
                                Ok(items) => items,
                                Err(why) => {
                                    let at = base + used as u64;
                                    self.damage.add(path, at, len as u64, why);
                                    used += len;
                                    continue;
                                }
                            };
                        // Skips records before where this reader was opened (a position
                        // inside a packed batch).
                        let from = self.from_inside.take().unwrap_or(0);
                        for item in items {
                            match item {
                                Ok((offset, _)) if offset < from => {}
                                Ok((offset, rec)) => {
                                    self.damage.saw(&rec);
                                    f.record(
                                        Position {
                                            segment: self.pos.segment,
                                            offset,
                                        },
                                        rec,
                                        LabelKey::NONE,
                                    );
                                    delivered += 1;
                                }
                                // A batch whose checksum holds but whose records do not
                                // decode was written wrong: skip the rest of it.
                                Err(e) => {
                                    let end = body_at + body.len() as u64;
                                    self.damage.add(
                                        path,
                                        e.offset,
                                        end - e.offset,
                                        DamageKind::BadRecord(e.kind),
                                    );
                                }
                            }
                        }
                        used += len;
                        records += len;
                    }
                    Unit::Unframed(len) => used += len,
                    Unit::Damaged { len, why } => {
                        self.damage.add(path, base + used as u64, len as u64, why);
                        used += len;
                    }
                    Unit::NeedMore => break,
                }
            }
            self.pos.offset += used as u64;
            self.bytes_read += records as u64;
            budget = budget.saturating_sub(used);
            if used == 0 || n < want {
                // At the end of what this segment holds now.
                if sealed {
                    self.advance();
                    if budget == 0 {
                        return Ok(delivered);
                    }
                    continue;
                }
                return Ok(delivered);
            }
            if budget == 0 {
                return Ok(delivered);
            }
        }
    }

    /// Opened at a position inside a batch of a framed segment: starts at that batch's header
    /// and passes over the records before the position (`docs/FORMAT.md`, *Packed batches*:
    /// positions of packed records lie inside their batch). Walks the batch headers from
    /// `header_len`; a position at a batch boundary, or past damage, is left as it is.
    fn start_at_batch(&mut self, header_len: u64) -> Result<()> {
        let (file, path) = self.file.as_ref().expect("opened before");
        let target = self.pos.offset;
        let mut at = header_len;
        let mut head = [0u8; BATCH_RECORD_LEN];
        while at < target {
            let n = read_full_at(file, path, &mut head, at)?;
            let formats::Probe::Valid(h) = formats::BatchHeader::probe(&head[..n]) else {
                return Ok(());
            };
            let end = at + (BATCH_RECORD_LEN as u64) + u64::from(h.len);
            if target < end {
                self.from_inside = Some(target);
                self.pos.offset = at;
                return Ok(());
            }
            at = end;
        }
        Ok(())
    }

    /// Moves to the start of the next segment (after a corrupt one, or a torn tail).
    pub fn skip_segment(&mut self) {
        self.advance();
    }

    fn advance(&mut self) {
        self.pos = Position {
            segment: self.pos.segment + 1,
            offset: 0,
        };
        self.file = None;
        self.framed = false;
        self.seen_len = 0;
        #[cfg(feature = "compact")]
        {
            self.compact = None;
        }
    }

    /// Delivers records of the current compact segment's blocks until about `budget` raw
    /// bytes went by; returns (records, raw bytes, whether the segment is done).
    #[cfg(feature = "compact")]
    fn read_compact(
        &mut self,
        budget: usize,
        f: &mut impl RecordHandler,
    ) -> Result<(u64, usize, bool)> {
        let (file, path) = self.file.as_ref().expect("opened before");
        let (plan, next) = self.compact.as_mut().expect("compact segment");
        let mut delivered = 0u64;
        let mut used = 0usize;
        while *next < plan.items.len() {
            if used >= budget {
                return Ok((delivered, used, false));
            }
            let item = plan.items[*next];
            *next += 1;
            match item {
                Item::Damage { at, len } => {
                    self.damage.add(path, at, len, DamageKind::BadHeader);
                }
                Item::Block {
                    at,
                    len,
                    entry,
                    next_first,
                } => {
                    // Wholly before where this reader starts (opened at a position).
                    if next_first <= self.pos.offset {
                        continue;
                    }
                    let skip = |filter: &mut Option<BlockFilter>, min: u64, max: u64| {
                        filter.as_mut().is_some_and(|keep| !keep(min, max))
                    };
                    // Passed over by the block filter: known from the index without reading.
                    if let Some(e) = entry
                        && skip(&mut self.block_filter, e.min_time, e.max_time)
                    {
                        if next_first != u64::MAX && next_first > self.pos.offset {
                            self.bytes_read += next_first - self.pos.offset;
                            self.pos.offset = next_first;
                        }
                        continue;
                    }
                    let Some(h) = read_block(file, path, at, len, entry, &mut self.block_buf)?
                    else {
                        self.damage.add(path, at, len, DamageKind::BadHeader);
                        continue;
                    };
                    // No index: the header says the block's times.
                    if entry.is_none() && skip(&mut self.block_filter, h.min_time, h.max_time) {
                        continue;
                    }
                    let body = &self.block_buf[formats::compact::frames::BLOCK_HEADER_LEN..];
                    if let Err(why) = self.decoder.decode(&h, body) {
                        self.damage.add(path, at, len, DamageKind::BadBlock(why));
                        continue;
                    }
                    let from = self.decoder.first_at_or_after(self.pos.offset);
                    let segment = self.pos.segment;
                    // Damage found after these records is placed after the block's frames
                    // (known from decoding it: nothing to look at per record here).
                    self.damage.saw_time(self.decoder.max_frame_time());
                    self.decoder.for_each_labelled_from(
                        from,
                        AtSegment {
                            sink: &mut *f,
                            segment,
                        },
                    );
                    delivered += (self.decoder.len() - from) as u64;
                    if let Some(end) = self.decoder.end_offset()
                        && end > self.pos.offset
                    {
                        let step = end - self.pos.offset;
                        self.bytes_read += step;
                        used = used.saturating_add(step as usize);
                        self.pos.offset = end;
                    }
                }
            }
        }
        // The rest of the raw segment (batch headers after the last record).
        self.bytes_read += plan.raw_len.saturating_sub(self.pos.offset);
        Ok((delivered, used, true))
    }

    /// Whether a later segment exists (the current one is sealed).
    fn next_exists(&self) -> bool {
        segments::exists(&self.dir, FileKind::FrameLog, self.pos.segment + 1)
            || self.later_segment().is_ok_and(|n| n.is_some())
    }

    /// The oldest segment after the current one, when the next one is gone (retention
    /// deleted it): the directory is listed only then.
    fn later_segment(&self) -> Result<Option<u32>> {
        Ok(segments::list(&self.dir, FileKind::FrameLog)?
            .into_iter()
            .find(|&n| n > self.pos.segment))
    }

    /// Segments deleted (by retention, see [`crate::retention`]) before this reader reached
    /// them: the log it reads now starts later than where it began.
    pub fn pruned_segments(&self) -> u32 {
        self.pruned
    }

    /// The frame-log segments found deleted (by retention) before this reader reached them,
    /// as ranges of segment numbers, since the last call.
    pub fn take_pruned(&mut self) -> Vec<std::ops::Range<u32>> {
        std::mem::take(&mut self.pruned_ranges)
    }

    /// Whether the log has bytes this reader has not looked at yet (never blocks).
    pub fn has_new_bytes(&self) -> bool {
        if self.next_exists() {
            return true;
        }
        let path = segment_path(&self.dir, FileKind::FrameLog, self.pos.segment.max(1));
        match std::fs::metadata(&path) {
            Ok(m) => m.len() > self.seen_len.max(self.pos.offset),
            Err(_) => false,
        }
    }

    /// Follow mode: blocks until the log grows or a new segment appears, or `timeout`
    /// passes. Returns whether there may be new records.
    pub fn wait_for_growth(&mut self, timeout: Duration) -> Result<bool> {
        let watch = self.watch.get_or_insert_with(|| DirWatch::new(&self.dir));
        let dir = &self.dir;
        let seg = self.pos.segment.max(1);
        let seen = self.seen_len.max(self.pos.offset);
        Ok(watch.wait_until(timeout, || {
            segments::exists(dir, FileKind::FrameLog, seg + 1)
                || std::fs::metadata(segment_path(dir, FileKind::FrameLog, seg)).map_or_else(
                    // The current segment is gone (retention): a later one is news.
                    |_| {
                        segments::list(dir, FileKind::FrameLog)
                            .is_ok_and(|v| v.iter().any(|&n| n > seg))
                    },
                    |m| m.len() > seen,
                )
        }))
    }
}
