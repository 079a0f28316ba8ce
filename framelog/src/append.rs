//! Appending to the current segment of a log, safely shared by many processes.
//!
//! Protocol (also in `docs/FORMAT.md`): a writer takes the exclusive advisory lock (flock)
//! of the segment it means to append to, then
//! 1. if a newer segment exists, this one is sealed: unlock and move on;
//! 2. if the file is shorter than its header (just created), write the header;
//! 3. once per process and segment, cut a torn tail left by a crashed writer;
//! 4. if the batch would push the segment past its size limit, create the next segment,
//!    unlock and move on;
//! 5. append the batch with one `write` and unlock.
//!
//! Because every step happens under the lock, batches never interleave and a segment is
//! never written again once its successor exists. A data segment and its index are one
//! unit: both are written under the lock of the `.framedata` file.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use formats::{FileHeader, FileKind, HEADER_LEN, IndexEntry};

use crate::error::{Error, IoContext, Result};
use crate::repair::{self, Tail};
use crate::segments::{self, segment_path};
use crate::writer::DataBatch;

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

/// Writes the header into a file that has fewer than 16 bytes (created, not yet written).
/// Returns the header length in effect, or `None` if the file has a header that is not
/// ours (wrong magic, newer version): such a file is left untouched.
fn ensure_header(file: &File, path: &Path, kind: FileKind) -> Result<Option<u64>> {
    match repair::read_header(file, path, kind) {
        Ok(Some(h)) => return Ok(Some(u64::from(h.header_len))),
        Ok(None) => {}
        Err(Error::Corrupt { .. }) => return Ok(None),
        Err(e) => return Err(e),
    }
    // A partial header can only come from a creator that died mid-write. Truncate only
    // then: ext4 flushes files truncated to zero when they are closed (auto_da_alloc).
    if file.metadata().at(path)?.len() > 0 {
        file.set_len(0).at(path)?;
    }
    (&*file)
        .write_all(&FileHeader::new(kind).encode())
        .at(path)?;
    Ok(Some(HEADER_LEN as u64))
}

/// Cuts a torn tail: shortens `file` to `len` if it is longer.
fn cut_to(file: &File, path: &Path, len: u64) -> Result<()> {
    if file.metadata().at(path)?.len() > len {
        file.set_len(len).at(path)?;
    }
    Ok(())
}

fn latest_or_first(dir: &Path, kind: FileKind) -> Result<u32> {
    Ok(segments::list(dir, kind)?.last().copied().unwrap_or(1))
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
pub struct FramesAppender {
    dir: PathBuf,
    limit: u64,
    current: Option<Current>,
}

impl FramesAppender {
    /// An appender for `dir` rotating segments past `limit` bytes.
    pub fn new(dir: &Path, limit: u64) -> Self {
        Self {
            dir: dir.to_owned(),
            limit,
            current: None,
        }
    }

    /// Appends `bytes` (whole encoded records) as one write.
    pub fn append(&mut self, bytes: &[u8]) -> Result<()> {
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
            let header = ensure_header(&cur.file, &cur.path, kind)?;
            let mut start_next = header.is_none();
            let header_len = header.unwrap_or(HEADER_LEN as u64);
            if !cur.checked && !start_next {
                match repair::frames_tail(&cur.file, &cur.path, header_len)? {
                    Tail::WholeUpTo(end) => cut_to(&cur.file, &cur.path, end)?,
                    Tail::Corrupt => start_next = true,
                }
                cur.checked = true;
            }
            let len = cur.file.metadata().at(&cur.path)?.len();
            if start_next || (len > header_len && len + bytes.len() as u64 > self.limit) {
                open_append(&segment_path(&self.dir, kind, next))?;
                drop(lock);
                self.current = Some(Current::open(&self.dir, kind, next)?);
                continue;
            }
            (&cur.file).write_all(bytes).at(&cur.path)?;
            return Ok(());
        }
    }
}

/// Appends frame-data batches (data entries plus their index entries) to one log.
pub struct DataAppender {
    dir: PathBuf,
    limit: u64,
    current: Option<(Current, File, PathBuf)>,
    index_buf: Vec<u8>,
}

/// The largest offset a data segment may reach: `seek` is a u32.
const MAX_DATA_SEGMENT: u64 = u32::MAX as u64;

impl DataAppender {
    /// An appender for `dir` rotating data segments past `limit` bytes (capped below 4 GiB).
    pub fn new(dir: &Path, limit: u64) -> Self {
        Self {
            dir: dir.to_owned(),
            limit: limit.min(MAX_DATA_SEGMENT),
            current: None,
            index_buf: Vec::new(),
        }
    }

    fn open_pair(dir: &Path, n: u32) -> Result<(Current, File, PathBuf)> {
        let data = Current::open(dir, FileKind::FrameData, n)?;
        let idx_path = segment_path(dir, FileKind::FrameIndex, n);
        let idx = open_append(&idx_path)?;
        Ok((data, idx, idx_path))
    }

    /// Appends every entry of `batch` and its index entry, with `seek`s read under the lock.
    pub fn append(&mut self, batch: &DataBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let bytes = batch.bytes();
        loop {
            let (cur, idx, idx_path) = match &mut self.current {
                Some(c) => c,
                None => {
                    let n = latest_or_first(&self.dir, FileKind::FrameData)?;
                    self.current.insert(Self::open_pair(&self.dir, n)?)
                }
            };
            let next = cur.n + 1;
            let lock = Locked::new(&cur.file, &cur.path)?;
            if segments::exists(&self.dir, FileKind::FrameData, next) {
                drop(lock);
                self.current = Some(Self::open_pair(&self.dir, next)?);
                continue;
            }
            let data_header = ensure_header(&cur.file, &cur.path, FileKind::FrameData)?;
            let idx_header = ensure_header(idx, idx_path, FileKind::FrameIndex)?;
            let mut start_next = data_header.is_none() || idx_header.is_none();
            let data_header = data_header.unwrap_or(HEADER_LEN as u64);
            let idx_header = idx_header.unwrap_or(HEADER_LEN as u64);
            if !cur.checked && !start_next {
                let (tail, idx_end) = repair::data_tail(
                    &cur.file,
                    &cur.path,
                    idx,
                    idx_path,
                    data_header,
                    idx_header,
                )?;
                match tail {
                    Tail::WholeUpTo(end) => {
                        cut_to(&cur.file, &cur.path, end)?;
                        cut_to(idx, idx_path, idx_end)?;
                    }
                    Tail::Corrupt => start_next = true,
                }
                cur.checked = true;
            }
            let seek = cur.file.metadata().at(&cur.path)?.len();
            let end = seek + bytes.len() as u64;
            if start_next || (seek > data_header && end > self.limit) {
                open_append(&segment_path(&self.dir, FileKind::FrameData, next))?;
                drop(lock);
                self.current = Some(Self::open_pair(&self.dir, next)?);
                continue;
            }
            if end > MAX_DATA_SEGMENT {
                return Err(Error::BatchTooLarge {
                    path: cur.path.clone(),
                    len: bytes.len() as u64,
                });
            }
            self.index_buf.clear();
            for (key, rel) in batch.offsets() {
                let entry = IndexEntry {
                    key,
                    seek: (seek + u64::from(rel)) as u32,
                };
                self.index_buf.extend_from_slice(&entry.encode());
            }
            // Data first: an index entry must never point at bytes not yet written.
            (&cur.file).write_all(bytes).at(&cur.path)?;
            (&*idx).write_all(&self.index_buf).at(idx_path)?;
            return Ok(());
        }
    }
}
