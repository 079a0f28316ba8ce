//! Appending to the current segment of a log, safely shared by many processes.
//!
//! Protocol (also in `docs/FORMAT.md`): a writer takes the exclusive advisory lock (flock)
//! of the segment it means to append to, then
//! 1. if a newer segment exists, this one is sealed: unlock and move on;
//! 2. if the file is shorter than its header (just created), write the header;
//! 3. once per process and segment, cut a torn tail left by a crashed writer (a segment that
//!    is not batch-framed, or holds damage, is left untouched and the next one started);
//! 4. if the append would push the segment past its size limit, create the next segment,
//!    unlock and move on;
//! 5. append the batches with one `write` (writev) and unlock.
//!
//! Because every step happens under the lock, appends never interleave and a segment is
//! never written again once its successor exists. A data segment and its index are one
//! unit: both are written under the lock of the `.framedata` file.

use std::fs::{File, OpenOptions};
use std::io::{IoSlice, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use formats::{
    BatchHeader, DATA_BATCH_TARGET, FLAG_BATCHES, FRAMES_BATCH_TARGET, FileHeader, FileKind,
    FrameKey, HEADER_LEN, encode_data_entry, frame_data_batch, split_records,
};

use crate::error::{Error, IoContext, Result};
use crate::pread::read_header;
use crate::repair::{self, DataTail, Tail};
use crate::segments::{self, segment_path};

/// When appended bytes are forced to stable storage (`fdatasync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncPolicy {
    /// Never: the operating system writes them back on its own (a process crash loses
    /// nothing; a power loss loses the last seconds).
    #[default]
    Never,
    /// At the first append this long after the last sync, and when the writer is dropped.
    Interval(Duration),
    /// After every append, before it returns.
    EveryBatch,
}

/// Called once for each segment a writer finds damaged and leaves alone.
pub type DamageHook = Arc<dyn Fn(&Error) + Send + Sync>;

/// A batch of frame-data entries, appended together with their index entries.
#[derive(Debug, Default, Clone)]
pub struct DataBatch {
    bytes: Vec<u8>,
    offsets: Vec<(FrameKey, u32)>,
}

impl DataBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one data entry for `key` with BSON `document` bytes (from [`formats::to_document`]).
    pub fn push(&mut self, key: FrameKey, document: &[u8]) {
        self.offsets.push((key, self.bytes.len() as u32));
        encode_data_entry(&mut self.bytes, key, document);
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// Whether the batch has no entries.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Bytes the entries add to the data file (before batch framing).
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// Empties the batch, keeping its memory.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.offsets.clear();
    }

    /// The entries split into on-disk batches of at most [`DATA_BATCH_TARGET`] bytes (a
    /// bigger entry gets one of its own): byte range and entry range of each.
    fn groups(&self) -> Vec<(Range<usize>, Range<usize>)> {
        let mut out = Vec::new();
        let (mut first, mut start) = (0usize, 0usize);
        for i in 0..=self.offsets.len() {
            let at = self
                .offsets
                .get(i)
                .map_or(self.bytes.len(), |o| o.1 as usize);
            let end = self
                .offsets
                .get(i + 1)
                .map_or(self.bytes.len(), |o| o.1 as usize);
            let close = i == self.offsets.len() || (i > first && end - start > DATA_BATCH_TARGET);
            if close && i > first {
                out.push((start..at, first..i));
                first = i;
                start = at;
            }
        }
        out
    }
}

/// Releases a file's advisory lock when dropped.
struct Locked<'a> {
    file: &'a File,
}

impl<'a> Locked<'a> {
    fn new(file: &'a File, path: &Path) -> Result<Self> {
        file.lock().at(path)?;
        Ok(Self { file })
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // Unlock errors are not actionable; closing the file releases the lock anyway.
        let _ = self.file.unlock();
    }
}

fn open_append(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .at(path)
}

/// Writes a framed header into a file that has fewer than 16 bytes (created, not yet
/// written): version 6 for a frame log (it may hold FrameStart with parent and packed batches),
/// 1 for data and index files. Returns the header in effect, or `None` if the file is not one this writer may
/// append to: a header that is not ours (wrong magic, newer version), or a file without batch
/// framing (written before it existed).
fn ensure_header(
    file: &File,
    path: &Path,
    kind: FileKind,
    pack: bool,
) -> Result<Option<FileHeader>> {
    match read_header(file, path, kind) {
        Ok(Some(h)) if h.flags & FLAG_BATCHES != 0 => return Ok(Some(h)),
        Ok(Some(_)) | Err(Error::Corrupt { .. }) => return Ok(None),
        Ok(None) => {}
        Err(e) => return Err(e),
    }
    // A partial header can only come from a creator that died mid-write. Truncate only
    // then: ext4 flushes files truncated to zero when they are closed (auto_da_alloc).
    if file.metadata().at(path)?.len() > 0 {
        file.set_len(0).at(path)?;
    }
    let mut header = match kind {
        FileKind::FrameLog if pack => FileHeader::frames_packed(),
        FileKind::FrameLog => FileHeader::frames_with_parents(),
        _ => FileHeader::new(kind),
    };
    header.flags = FLAG_BATCHES;
    (&*file).write_all(&header.encode()).at(path)?;
    Ok(Some(header))
}

/// Packs batches, each given as (its 32-byte header, its body), into `out` (cleared first) as
/// the same run of batches for a version 6 segment: each plain one packed, or kept plain where
/// packing would not make it smaller, packed ones as they are (`docs/FORMAT.md`, *Packed
/// batches*). Runs before the segment's lock is taken: the work is the writer's, not the other
/// processes'.
fn pack_batches<'a>(batches: impl Iterator<Item = (&'a [u8], &'a [u8])>, out: &mut Vec<u8>) {
    out.clear();
    for (head, body) in batches {
        let formats::Probe::Valid(h) = BatchHeader::probe(head) else {
            unreachable!("the caller framed or checked every header")
        };
        if h.packed {
            out.extend_from_slice(head);
            out.extend_from_slice(body);
            continue;
        }
        let at = out.len();
        out.resize(at + formats::BATCH_RECORD_LEN, 0);
        match formats::packed::pack(h.worker, h.timestamp, body, out) {
            Some(count) if out.len() - at - formats::BATCH_RECORD_LEN < body.len() => {
                let packed = &out[at + formats::BATCH_RECORD_LEN..];
                let head = BatchHeader::for_packed(h.worker, h.timestamp, packed, count);
                out[at..at + formats::BATCH_RECORD_LEN].copy_from_slice(&head.encode());
            }
            _ => {
                out.truncate(at);
                out.extend_from_slice(head);
                out.extend_from_slice(body);
            }
        }
    }
}

/// Cuts a torn tail: shortens `file` to `len` if it is longer.
fn cut_to(file: &File, path: &Path, len: u64) -> Result<()> {
    if file.metadata().at(path)?.len() > len {
        file.set_len(len).at(path)?;
    }
    Ok(())
}

/// Writes every slice with as few `writev` calls as the system allows (usually one).
fn write_all_vectored(file: &File, path: &Path, mut slices: &mut [IoSlice<'_>]) -> Result<()> {
    // Linux's IOV_MAX.
    const MAX_SLICES: usize = 1024;
    while !slices.is_empty() {
        let n = slices.len().min(MAX_SLICES);
        match (&*file).write_vectored(&slices[..n]) {
            Ok(0) => {
                return Err(Error::io(
                    path,
                    std::io::Error::from(std::io::ErrorKind::WriteZero),
                ));
            }
            Ok(written) => IoSlice::advance_slices(&mut slices, written),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    Ok(())
}

fn latest_or_first(dir: &Path, kind: FileKind) -> Result<u32> {
    Ok(segments::list(dir, kind)?.last().copied().unwrap_or(1))
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Settings every appender shares.
#[derive(Clone)]
pub(crate) struct AppendConfig {
    /// Recorded in each batch header.
    pub worker: u8,
    /// Rotate past this many bytes.
    pub limit: u64,
    /// When to `fdatasync`.
    pub sync: SyncPolicy,
    /// Told about damaged segments left alone.
    pub on_damage: Option<DamageHook>,
    /// Pack frame-log batches, in version 6 segments (else plain, in version 3 ones).
    pub pack: bool,
}

impl AppendConfig {
    fn report(&self, e: Error) {
        if let Some(hook) = &self.on_damage {
            hook(&e);
        }
    }
}

/// Tracks when appended bytes were last synced.
struct Syncer {
    policy: SyncPolicy,
    last: Instant,
    dirty: bool,
}

impl Syncer {
    fn new(policy: SyncPolicy) -> Self {
        Self {
            policy,
            last: Instant::now(),
            dirty: false,
        }
    }

    /// After an append to `files`: sync them if the policy says so now.
    fn appended(&mut self, files: &[(&File, &Path)]) -> Result<()> {
        self.dirty = true;
        let due = match self.policy {
            SyncPolicy::Never => false,
            SyncPolicy::EveryBatch => true,
            SyncPolicy::Interval(d) => self.last.elapsed() >= d,
        };
        if due {
            self.sync(files)?;
        }
        Ok(())
    }

    fn sync(&mut self, files: &[(&File, &Path)]) -> Result<()> {
        if self.dirty && self.policy != SyncPolicy::Never {
            for (f, p) in files {
                f.sync_data().at(p)?;
            }
            self.dirty = false;
            self.last = Instant::now();
        }
        Ok(())
    }
}

/// The open segment one appender writes to.
struct Current {
    n: u32,
    path: PathBuf,
    file: File,
    checked: bool,
}

impl Current {
    fn open(dir: &Path, kind: FileKind, n: u32) -> Result<Self> {
        let path = segment_path(dir, kind, n);
        Ok(Self {
            n,
            file: open_append(&path)?,
            path,
            checked: false,
        })
    }
}

/// Appends record batches to the frame-log segments of one log.
pub(crate) struct FramesAppender {
    dir: PathBuf,
    config: AppendConfig,
    current: Option<Current>,
    syncer: Syncer,
    heads: Vec<([u8; formats::BATCH_RECORD_LEN], Range<usize>)>,
    /// The batches of an append, packed (`docs/FORMAT.md`, *Packed batches*), for a version 6
    /// segment.
    packed: Vec<u8>,
    /// This appender has written to a version 6 segment, or started one to move past an
    /// older live segment: an older segment it finds from now on (an older writer's, appending
    /// to the same log) is appended to as that version takes it (plain batches; for version 1
    /// with parents removed), not moved past again (`docs/FORMAT.md`, *Parents: versions 3
    /// and 4*, *Packed batches: versions 6 and 7*).
    on_newest_segment: bool,
}

/// What [`FramesAppender::write_batches`] did.
enum Written {
    Done,
    /// The live segment is version 1 and the batches hold FrameStart with parent: nothing
    /// was written; write them again without parents.
    NeedsVersion1,
    /// The live segment does not take packed batches and no plain form was given: nothing was
    /// written; write them again unpacked.
    NeedsPlain,
}

impl FramesAppender {
    /// An appender for `dir`.
    pub(crate) fn new(dir: &Path, config: AppendConfig) -> Self {
        Self {
            dir: dir.to_owned(),
            syncer: Syncer::new(config.sync),
            config,
            current: None,
            heads: Vec::new(),
            packed: Vec::new(),
            on_newest_segment: false,
        }
    }

    /// The segment appended to last (none yet: 0).
    pub(crate) fn segment(&self) -> u32 {
        self.current.as_ref().map_or(0, |c| c.n)
    }

    /// Appends `bytes` (whole encoded records) as checksummed batches with one write.
    pub(crate) fn append(&mut self, bytes: &[u8]) -> Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        // Framing and checksums are computed before taking the lock.
        self.heads.clear();
        let (worker, ts, heads) = (self.config.worker, now_ns(), &mut self.heads);
        split_records(bytes, FRAMES_BATCH_TARGET, |r, count| {
            let head = BatchHeader::for_records(worker, ts, &bytes[r.clone()], count).encode();
            heads.push((head, r));
        })
        .map_err(|e| Error::BadAppend(e.to_string()))?;
        let heads = std::mem::take(&mut self.heads);
        let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(heads.len() * 2);
        for (head, r) in &heads {
            slices.push(IoSlice::new(head));
            slices.push(IoSlice::new(&bytes[r.clone()]));
        }
        let total = (bytes.len() + heads.len() * formats::BATCH_RECORD_LEN) as u64;
        let mut packed = std::mem::take(&mut self.packed);
        pack_batches(
            heads.iter().map(|(h, r)| (&h[..], &bytes[r.clone()])),
            &mut packed,
        );
        let done = self.write_batches(&mut slices, total, &packed, bytes);
        drop(slices);
        self.packed = packed;
        self.heads = heads;
        match done? {
            Written::Done => Ok(()),
            Written::NeedsVersion1 => {
                let mut stripped = Vec::with_capacity(bytes.len());
                formats::downgrade::strip_parents(bytes, &mut stripped)
                    .map_err(|e| Error::BadAppend(e.to_string()))?;
                self.append(&stripped)
            }
            Written::NeedsPlain => unreachable!("plain batches were given"),
        }
    }

    /// Appends `batches`, a run of whole batches framed by the caller (checked by
    /// [`LogWriter::append_batches`](crate::LogWriter::append_batches)), with one write.
    pub(crate) fn append_framed(&mut self, batches: &[u8]) -> Result<()> {
        if batches.is_empty() {
            return Ok(());
        }
        let len = batches.len() as u64;
        let mut packed = std::mem::take(&mut self.packed);
        let mut each = Vec::new();
        let mut any_packed = false;
        formats::check_batches(batches, |h, body| {
            any_packed |= h.packed;
            each.push((
                &batches[body.start - formats::BATCH_RECORD_LEN..body.start],
                &batches[body],
            ))
        })
        .map_err(|at| Error::BadAppend(format!("no whole batch at offset {at}")))?;
        pack_batches(each.into_iter(), &mut packed);
        // Batches that came packed have no plain form here: one is made only if the segment
        // turns out not to take packed batches (`Written::NeedsPlain`).
        let mut plain = [IoSlice::new(batches)];
        let slices: &mut [IoSlice<'_>] = if any_packed { &mut [] } else { &mut plain };
        let done = self.write_batches(slices, len, &packed, batches);
        self.packed = packed;
        match done? {
            Written::Done => Ok(()),
            Written::NeedsPlain => {
                let plain = formats::packed::unpack_framed(batches).map_err(|at| {
                    Error::BadAppend(format!("the packed batch at offset {at} does not unpack"))
                })?;
                self.append_framed(&plain)
            }
            Written::NeedsVersion1 => {
                let stripped = formats::downgrade::strip_parents_framed(batches)
                    .map_err(|e| Error::BadAppend(e.to_string()))?;
                let len = stripped.len() as u64;
                let mut slices = [IoSlice::new(&stripped)];
                match self.write_batches(&mut slices, len, &[], &stripped)? {
                    Written::Done => Ok(()),
                    Written::NeedsVersion1 => unreachable!("stripped batches hold no parents"),
                    Written::NeedsPlain => unreachable!("plain batches were given"),
                }
            }
        }
    }

    /// Writes `slices` (whole plain batches, `total` bytes, whose records are `records`: the
    /// same bytes, or the records without their batch headers), or into a version 6 segment
    /// the same batches `packed` (when not empty), under the segment's lock, following the
    /// append protocol (sealed segments, header, version, torn tail, rotation). With no
    /// `slices`, only `packed` can be written.
    fn write_batches(
        &mut self,
        slices: &mut [IoSlice<'_>],
        total: u64,
        packed: &[u8],
        records: &[u8],
    ) -> Result<Written> {
        let kind = FileKind::FrameLog;
        loop {
            let cur = match &mut self.current {
                Some(c) => c,
                None => {
                    let n = latest_or_first(&self.dir, kind)?;
                    self.current.insert(Current::open(&self.dir, kind, n)?)
                }
            };
            let next = cur.n + 1;
            let lock = Locked::new(&cur.file, &cur.path)?;
            if segments::exists(&self.dir, kind, next) {
                drop(lock);
                self.current = Some(Current::open(&self.dir, kind, next)?);
                continue;
            }
            let header = ensure_header(&cur.file, &cur.path, kind, self.config.pack)?;
            let mut start_next = header.is_none();
            let header_len = header.map_or(HEADER_LEN as u64, |h| u64::from(h.header_len));
            let parents = header.is_some_and(|h| h.has_parents());
            let takes_packed = header.is_some_and(|h| h.takes_packed());
            // The version this writer creates: 6, or 3 when it does not pack.
            let newest = if self.config.pack {
                takes_packed
            } else {
                parents
            };
            if header.is_some() && !newest && !self.on_newest_segment {
                // A log a writer from before packed batches (or parents) left: move on to a
                // version 6 segment, once (see `on_newest_segment`).
                start_next = true;
                self.on_newest_segment = true;
            }
            if !cur.checked && !start_next {
                match repair::frames_tail(&cur.file, &cur.path, header_len)? {
                    Tail::WholeUpTo(end) => cut_to(&cur.file, &cur.path, end)?,
                    Tail::Damaged(offset) => {
                        self.config.report(Error::SegmentDamaged {
                            path: cur.path.clone(),
                            offset,
                        });
                        start_next = true;
                    }
                }
                cur.checked = true;
            }
            let len = cur.file.metadata().at(&cur.path)?.len();
            let use_packed = takes_packed && self.config.pack && !packed.is_empty();
            let total = if use_packed {
                packed.len() as u64
            } else {
                total
            };
            if start_next || (len > header_len && len + total > self.config.limit) {
                open_append(&segment_path(&self.dir, kind, next))?;
                drop(lock);
                self.current = Some(Current::open(&self.dir, kind, next)?);
                continue;
            }
            if !use_packed && slices.is_empty() {
                return Ok(Written::NeedsPlain);
            }
            if !parents && formats::downgrade::has_parents(records) {
                // Never a type 6 record in a version 1 file: its readers would skip it.
                return Ok(Written::NeedsVersion1);
            }
            self.on_newest_segment |= newest;
            let written = if use_packed {
                write_all_vectored(&cur.file, &cur.path, &mut [IoSlice::new(packed)])
            } else {
                write_all_vectored(&cur.file, &cur.path, slices)
            };
            if let Err(e) = written {
                // A failed append (a full disk) leaves nothing behind: what was written of it
                // is cut while the lock is still held, so readers never see part of a batch
                // the caller was told failed.
                let _ = cur.file.set_len(len);
                return Err(e);
            }
            drop(lock);
            self.syncer.appended(&[(&cur.file, &cur.path)])?;
            return Ok(Written::Done);
        }
    }

    /// Forces appended bytes to stable storage now (unless the policy is `Never`).
    pub(crate) fn sync(&mut self) -> Result<()> {
        match &self.current {
            Some(c) => self.syncer.sync(&[(&c.file, &c.path)]),
            None => Ok(()),
        }
    }
}

/// The open data/index pair one appender writes to.
struct Pair {
    data: Current,
    idx: File,
    idx_path: PathBuf,
}

/// Checks a pair before the first append to it; returns whether to start the next pair.
fn repair_pair(
    config: &AppendConfig,
    pair: &Pair,
    data_header: u64,
    idx_header: u64,
) -> Result<bool> {
    let (cur, idx, idx_path) = (&pair.data, &pair.idx, &pair.idx_path);
    match repair::data_tail(&cur.file, &cur.path, idx, idx_path, data_header, idx_header)? {
        DataTail::Repair {
            idx_len,
            reindex,
            data_len,
        } => {
            // Index first: no index entry may point at bytes about to be cut.
            cut_to(idx, idx_path, idx_len)?;
            (&*idx).write_all(&reindex).at(idx_path)?;
            cut_to(&cur.file, &cur.path, data_len)?;
            Ok(false)
        }
        DataTail::Damaged(in_data, offset) => {
            let path = if in_data { &cur.path } else { idx_path };
            config.report(Error::SegmentDamaged {
                path: path.clone(),
                offset,
            });
            Ok(true)
        }
    }
}

/// Appends frame-data batches (data entries plus their index entries) to one log.
pub(crate) struct DataAppender {
    dir: PathBuf,
    config: AppendConfig,
    current: Option<Pair>,
    syncer: Syncer,
    index_buf: Vec<u8>,
    markers: Vec<[u8; formats::DATA_MARKER_LEN]>,
}

/// The largest offset a data segment may reach: `seek` is a u32.
const MAX_DATA_SEGMENT: u64 = u32::MAX as u64;

impl DataAppender {
    /// The segment appended to last (none yet: 0).
    pub(crate) fn segment(&self) -> u32 {
        self.current.as_ref().map_or(0, |p| p.data.n)
    }

    /// An appender for `dir` (its limit is capped below 4 GiB).
    pub(crate) fn new(dir: &Path, mut config: AppendConfig) -> Self {
        config.limit = config.limit.min(MAX_DATA_SEGMENT);
        Self {
            dir: dir.to_owned(),
            syncer: Syncer::new(config.sync),
            config,
            current: None,
            index_buf: Vec::new(),
            markers: Vec::new(),
        }
    }

    fn open_pair(dir: &Path, n: u32) -> Result<Pair> {
        let data = Current::open(dir, FileKind::FrameData, n)?;
        let idx_path = segment_path(dir, FileKind::FrameIndex, n);
        let idx = open_append(&idx_path)?;
        Ok(Pair {
            data,
            idx,
            idx_path,
        })
    }

    /// Appends every entry of `batch` as checksummed data batches, then their index entries.
    pub(crate) fn append(&mut self, batch: &DataBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let groups = batch.groups();
        let framed_len = (batch.bytes.len() + groups.len() * formats::DATA_MARKER_LEN) as u64;
        loop {
            let pair = match &mut self.current {
                Some(c) => c,
                None => {
                    let n = latest_or_first(&self.dir, FileKind::FrameData)?;
                    self.current.insert(Self::open_pair(&self.dir, n)?)
                }
            };
            let next = pair.data.n + 1;
            let lock = Locked::new(&pair.data.file, &pair.data.path)?;
            if segments::exists(&self.dir, FileKind::FrameData, next) {
                drop(lock);
                self.current = Some(Self::open_pair(&self.dir, next)?);
                continue;
            }
            let data_header =
                ensure_header(&pair.data.file, &pair.data.path, FileKind::FrameData, false)?;
            let idx_header = ensure_header(&pair.idx, &pair.idx_path, FileKind::FrameIndex, false)?;
            let mut start_next = data_header.is_none() || idx_header.is_none();
            let data_header = data_header.map_or(HEADER_LEN as u64, |h| u64::from(h.header_len));
            let idx_header = idx_header.map_or(HEADER_LEN as u64, |h| u64::from(h.header_len));
            if !pair.data.checked && !start_next {
                start_next = repair_pair(&self.config, pair, data_header, idx_header)?;
            }
            pair.data.checked = true;
            let seek = pair.data.file.metadata().at(&pair.data.path)?.len();
            let end = seek + framed_len;
            if start_next || (seek > data_header && end > self.config.limit) {
                open_append(&segment_path(&self.dir, FileKind::FrameData, next))?;
                drop(lock);
                self.current = Some(Self::open_pair(&self.dir, next)?);
                continue;
            }
            if end > MAX_DATA_SEGMENT {
                return Err(Error::BatchTooLarge {
                    path: pair.data.path.clone(),
                    len: framed_len,
                });
            }
            self.index_buf.clear();
            self.markers.clear();
            let mut marker_seek = seek;
            let mut rel = Vec::new();
            for (bytes, entries) in &groups {
                rel.clear();
                rel.extend(
                    batch.offsets[entries.clone()]
                        .iter()
                        .map(|&(k, o)| (k, o - bytes.start as u32)),
                );
                let body = &batch.bytes[bytes.clone()];
                let marker = frame_data_batch(
                    self.config.worker,
                    body,
                    &rel,
                    marker_seek,
                    &mut self.index_buf,
                );
                self.markers.push(marker.encode());
                marker_seek += (formats::DATA_MARKER_LEN + body.len()) as u64;
            }
            let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(groups.len() * 2);
            for (marker, (bytes, _)) in self.markers.iter().zip(&groups) {
                slices.push(IoSlice::new(marker));
                slices.push(IoSlice::new(&batch.bytes[bytes.clone()]));
            }
            // Data first: an index entry must never point at bytes not yet written. A failed
            // append is cut from both files under the lock (see the frame log's).
            let idx_len = pair.idx.metadata().at(&pair.idx_path)?.len();
            let written = write_all_vectored(&pair.data.file, &pair.data.path, &mut slices)
                .and_then(|()| (&pair.idx).write_all(&self.index_buf).at(&pair.idx_path));
            if let Err(e) = written {
                let _ = pair.idx.set_len(idx_len);
                let _ = pair.data.file.set_len(seek);
                return Err(e);
            }
            drop(lock);
            return self.syncer.appended(&[
                (&pair.data.file, &pair.data.path),
                (&pair.idx, &pair.idx_path),
            ]);
        }
    }

    /// Forces appended bytes to stable storage now (unless the policy is `Never`).
    pub(crate) fn sync(&mut self) -> Result<()> {
        match &self.current {
            Some(p) => self
                .syncer
                .sync(&[(&p.data.file, &p.data.path), (&p.idx, &p.idx_path)]),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_groups_stay_under_the_target_unless_one_entry_is_bigger() {
        let mut b = DataBatch::new();
        let small = formats::to_document(&serde_json::json!({"s": "x".repeat(1000)})).unwrap();
        let big = formats::to_document(&serde_json::json!({"s": "y".repeat(40_000)})).unwrap();
        for i in 1..=40u32 {
            let doc = if i == 20 { &big } else { &small };
            b.push(FrameKey::new(1, i), doc);
        }
        let groups = b.groups();
        let mut next_entry = 0;
        let mut next_byte = 0;
        for (bytes, entries) in &groups {
            assert_eq!((bytes.start, entries.start), (next_byte, next_entry));
            assert!(bytes.len() <= DATA_BATCH_TARGET || entries.len() == 1);
            next_entry = entries.end;
            next_byte = bytes.end;
        }
        assert_eq!((next_byte, next_entry), (b.bytes.len(), 40));
        assert!(groups.len() >= 4);
    }
}
