//! Compacting a sealed data segment (`.framedata` + `.frameidx`) into one version 2 file
//! (`docs/FORMAT.md`, *Compact frame data*).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use formats::compact::data::DataFileEncoder;
use formats::{
    DATA_MARKER_LEN, DamageKind, DataMarker, FLAG_BATCHES, FileHeader, FileKind, FrameKey, Framing,
    HEADER_LEN, INDEX_ENTRY_LEN, Probe, Unit, check_index_entries, data_batch_entries,
    decode_data_entry, decode_index_entry,
};

use super::{SegmentOutcome, replace_atomically, sync_dir};
use crate::check::{Report, check_data_framing};
use crate::error::{Error, IoContext, Result};
use crate::pread::{read_full_at, read_vec_at};
use crate::segments::{exists, segment_path};

/// Data blocks are closed before 32 KiB of entries. Measured (zstd -3, `compact_data`
/// bench): the demo workload takes 9.6 B/frame against 9.0 with 64 KiB blocks, 8.7 with
/// 256 KiB and 10.7 with 16 KiB, and a random lookup in a 1 GiB segment p50 33 µs against
/// 49 µs with 64 KiB blocks: a lookup decompresses one block, so its size is the latency.
pub const BLOCK_TARGET: usize = 32 << 10;

/// Rewrites sealed data segment `n` of the log in `dir` in compact form (zstd `level`).
///
/// Only a sealed, clean, raw pair is rewritten: the newest data segment is `NotSealed`, one
/// with any damage (a torn tail included) stays raw as `Damaged`. The compact file replaces
/// the `.framedata` atomically, then the `.frameidx` is deleted; a `.frameidx` left beside a
/// compact file (a crash between the two) is deleted here.
pub fn compact_data_segment(dir: &Path, n: u32, level: i32) -> Result<SegmentOutcome> {
    let data_path = segment_path(dir, FileKind::FrameData, n);
    let idx_path = segment_path(dir, FileKind::FrameIndex, n);
    let data = match File::open(&data_path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(SegmentOutcome::Gone),
        Err(e) => return Err(Error::io(&data_path, e)),
    };
    // Sealed is decided under the data file's lock, as appenders do (FORMAT.md, *Appending*).
    // The lock is held to the end: once sealed no appender waits for it, and two compactions
    // of this segment (two processes, or two threads of one, which would share the temporary
    // file's name) take turns; the second finds the first's work done.
    let _locked = Locked::new(&data, &data_path)?;
    let sealed = exists(dir, FileKind::FrameData, n + 1);
    let mut head = [0u8; HEADER_LEN];
    let got = read_full_at(&data, &data_path, &mut head, 0)?;
    let compact = |head: &[u8]| {
        FileHeader::decode_any(FileKind::FrameData, head)
            .is_ok_and(|h| h.is_some_and(|h| h.is_compact()))
    };
    // The file this handle holds, or the one now under its name (replaced while we waited).
    if compact(&head[..got]) || is_compact(&data_path)? {
        remove_leftover_index(&idx_path)?;
        return Ok(SegmentOutcome::AlreadyCompact);
    }
    if !sealed {
        return Ok(SegmentOutcome::NotSealed);
    }
    let idx = match std::fs::read(&idx_path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Compacted by another process since the header was read; else never indexed
            // (the check says so).
            if is_compact(&data_path)? {
                return Ok(SegmentOutcome::AlreadyCompact);
            }
            return damaged(dir, n, &data_path);
        }
        Err(e) => return Err(Error::io(&idx_path, e)),
    };
    let framed = |kind, bytes: &[u8]| {
        FileHeader::decode(kind, bytes)
            .ok()
            .flatten()
            .is_some_and(|h| h.flags & FLAG_BATCHES != 0 && usize::from(h.header_len) == HEADER_LEN)
    };
    if !(framed(FileKind::FrameIndex, &idx) && framed(FileKind::FrameData, &head[..got])) {
        return compact_whole(dir, n, level, &data_path, &idx);
    }
    // Framed (every pair written since batch framing): one streaming pass, a batch at a
    // time, so a 1 GiB segment never sits in memory; anything not clean stops it.
    let data_len = data.metadata().at(&data_path)?.len();
    let raw_len = data_len + idx.len() as u64;
    let mut walked = None;
    let written = replace_atomically(&data_path, |file| {
        // No dictionary: measured on the demo workload, a trained one (4-64 KiB) saves at
        // most 1 % with these blocks (5 % on a sample of the benchmark's synthetic 1 GiB log) and
        // costs more than it saves in small segments (its own bytes): blocks this size
        // already hold the repetition a dictionary would capture.
        let mut enc = DataFileEncoder::new(level, None, BLOCK_TARGET);
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let mut write_err = None;
        let walk = walk_framed(&data, &data_path, data_len, &idx, |key, doc| {
            enc.push(key, doc);
            match out.write_all(&enc.take_output()) {
                Ok(()) => true,
                Err(e) => {
                    write_err = Some(e);
                    false
                }
            }
        })?;
        if let Some(e) = write_err {
            return Err(Error::io(&data_path, e));
        }
        let stop = !matches!(walk, Walk::Clean(_));
        walked = Some(walk);
        if stop {
            // Not an error: the outcome says why below (the temporary file is removed).
            return Err(Error::BadAppend("not compacted".into()));
        }
        out.write_all(&enc.finish(raw_len)).at(&data_path)?;
        out.flush().at(&data_path)?;
        Ok(())
    });
    let compact_bytes = match (written, walked) {
        (Ok(len), _) => len,
        (Err(_), Some(Walk::Damaged)) => return damaged(dir, n, &data_path),
        (Err(_), Some(Walk::TooLarge(key, len))) => return Err(too_large(&data_path, key, len)),
        (Err(e), _) => return Err(e),
    };
    let Some(Walk::Clean(items)) = walked else {
        unreachable!("written only when clean")
    };
    remove_leftover_index(&idx_path)?;
    Ok(SegmentOutcome::Compacted {
        raw_bytes: raw_len,
        compact_bytes,
        items,
    })
}

/// Releases a file's advisory lock when dropped.
struct Locked<'a>(&'a File);

impl<'a> Locked<'a> {
    fn new(file: &'a File, path: &Path) -> Result<Self> {
        file.lock().at(path)?;
        Ok(Self(file))
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // Closing the file releases the lock anyway.
        let _ = self.0.unlock();
    }
}

/// What walking a framed pair found.
#[derive(Debug, Clone, Copy)]
enum Walk {
    /// Every batch whole, indexed and valid: this many entries.
    Clean(u64),
    /// Something is not (the check says what).
    Damaged,
    /// An entry too large for a compact block: its key and document length.
    TooLarge(FrameKey, usize),
}

/// Walks a framed pair batch by batch in index order, checking what `framelog check` checks
/// but the documents' BSON (markers, checksums, index entries against their batch, batches
/// back to back from the header to the end of the data file, no partial index batch), and
/// calls `f` with every entry; `f` returns `false` to stop (it could not write).
fn walk_framed(
    data: &File,
    path: &Path,
    data_len: u64,
    idx: &[u8],
    mut f: impl FnMut(FrameKey, &[u8]) -> bool,
) -> Result<Walk> {
    let mut pos = HEADER_LEN;
    let mut seek = HEADER_LEN as u64;
    let mut items = 0u64;
    while pos < idx.len() {
        let Some(own) = decode_index_entry(&idx[pos..]) else {
            return Ok(Walk::Damaged);
        };
        if own.key.id != 0 || u64::from(own.seek) != seek {
            return Ok(Walk::Damaged);
        }
        let mut head = [0u8; DATA_MARKER_LEN];
        let got = read_full_at(data, path, &mut head, seek)?;
        let Probe::Valid(m) = DataMarker::probe(&head[..got]) else {
            return Ok(Walk::Damaged);
        };
        let need = (1 + m.count as usize) * INDEX_ENTRY_LEN;
        let body_at = seek + DATA_MARKER_LEN as u64;
        let Some(entries) = idx
            .get(pos + INDEX_ENTRY_LEN..pos + need)
            .and_then(|e| check_index_entries(&m, e, body_at))
        else {
            return Ok(Walk::Damaged);
        };
        let body = read_vec_at(data, path, body_at, m.len as usize)?;
        if !m.body_matches(&body) {
            return Ok(Walk::Damaged);
        }
        let Some(walked) = data_batch_entries(&body) else {
            return Ok(Walk::Damaged);
        };
        if walked.len() != entries.len() {
            return Ok(Walk::Damaged);
        }
        for (&(key, off), e) in walked.iter().zip(&entries) {
            if e.key != key || u64::from(e.seek) != body_at + u64::from(off) {
                return Ok(Walk::Damaged);
            }
            let Ok(Some(entry)) = decode_data_entry(&body[off as usize..]) else {
                return Ok(Walk::Damaged);
            };
            if !DataFileEncoder::fits(entry.document.len()) {
                return Ok(Walk::TooLarge(key, entry.document.len()));
            }
            if !f(key, entry.document) {
                return Ok(Walk::Damaged);
            }
            items += 1;
        }
        seek = body_at + u64::from(m.len);
        pos += need;
    }
    // Anything after the last indexed batch is unindexed batches or a torn tail.
    Ok(if seek == data_len {
        Walk::Clean(items)
    } else {
        Walk::Damaged
    })
}

/// Whether the data file at `path` is compact now.
fn is_compact(path: &Path) -> Result<bool> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io(path, e)),
    };
    let mut head = [0u8; HEADER_LEN];
    let got = read_full_at(&file, path, &mut head, 0)?;
    Ok(FileHeader::decode_any(FileKind::FrameData, &head[..got])
        .is_ok_and(|h| h.is_some_and(|h| h.is_compact())))
}

/// The outcome for a pair that is not clean, counting what `framelog check` finds in it.
fn damaged(dir: &Path, n: u32, data_path: &Path) -> Result<SegmentOutcome> {
    let mut report = Report::default();
    check_data_framing(dir, n, &mut report)?;
    let bytes = std::fs::read(data_path).at(data_path)?;
    Ok(SegmentOutcome::Damaged {
        bytes: damaged_bytes(&bytes),
        places: report.problems.len().max(1) as u64,
    })
}

/// The error for an entry a compact block cannot hold (over 16 MiB): the segment stays raw,
/// and readable.
fn too_large(path: &Path, key: FrameKey, len: usize) -> Error {
    Error::BadAppend(format!(
        "{}: frame {key} has {len} bytes of data, over the 16 MiB a compact block holds; the segment stays raw",
        path.display()
    ))
}

/// Compacts an older pair (written before batch framing) from both files in memory, after
/// the check `framelog check` makes (but for the documents' BSON).
fn compact_whole(
    dir: &Path,
    n: u32,
    level: i32,
    data_path: &Path,
    idx_bytes: &[u8],
) -> Result<SegmentOutcome> {
    let mut report = Report::default();
    check_data_framing(dir, n, &mut report)?;
    let data_bytes = std::fs::read(data_path).at(data_path)?;
    if !report.problems.is_empty() {
        return Ok(SegmentOutcome::Damaged {
            bytes: damaged_bytes(&data_bytes),
            places: report.problems.len() as u64,
        });
    }
    // The entries a reader delivers: the index's, in its order (file order), markers left out
    // (frame id 0 never names a frame).
    let mut entries = Vec::new();
    for chunk in idx_bytes
        .get(HEADER_LEN..)
        .unwrap_or_default()
        .chunks_exact(9)
    {
        let e = decode_index_entry(chunk).expect("nine bytes");
        if e.key.id == 0 {
            continue;
        }
        let at = e.seek as usize;
        match data_bytes.get(at..).map(decode_data_entry) {
            Some(Ok(Some(d))) if d.key == e.key => entries.push((e.key, d.document)),
            // `check` found every seek valid; the files changed under us.
            _ => {
                return Err(Error::corrupt(
                    data_path,
                    at as u64,
                    formats::DecodeError::new(
                        0,
                        formats::ErrorKind::Compact(format!(
                            "index entry for {} no longer points at its data",
                            e.key
                        )),
                    ),
                ));
            }
        }
    }
    if let Some((key, doc)) = entries
        .iter()
        .find(|(_, d)| !DataFileEncoder::fits(d.len()))
    {
        return Err(too_large(data_path, *key, doc.len()));
    }
    let raw_len = (data_bytes.len() + idx_bytes.len()) as u64;
    let compact_bytes = replace_atomically(data_path, |file| {
        let mut enc = DataFileEncoder::new(level, None, BLOCK_TARGET);
        let mut out = BufWriter::with_capacity(1 << 20, file);
        for (key, doc) in &entries {
            enc.push(*key, doc);
            out.write_all(&enc.take_output()).at(data_path)?;
        }
        out.write_all(&enc.finish(raw_len)).at(data_path)?;
        out.flush().at(data_path)?;
        Ok(())
    })?;
    remove_leftover_index(&segment_path(dir, FileKind::FrameIndex, n))?;
    Ok(SegmentOutcome::Compacted {
        raw_bytes: raw_len,
        compact_bytes,
        items: entries.len() as u64,
    })
}

/// Deletes the `.frameidx` beside a compact `.framedata` (durably), if it is there.
fn remove_leftover_index(idx_path: &Path) -> Result<()> {
    match std::fs::remove_file(idx_path) {
        Ok(()) => sync_dir(idx_path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(idx_path, e)),
    }
}

/// Damaged bytes in a data file's batches (what readers skip), for the outcome's count.
fn damaged_bytes(bytes: &[u8]) -> u64 {
    let Ok(Some(h)) = FileHeader::decode(FileKind::FrameData, bytes) else {
        return bytes.len() as u64;
    };
    let framed = h.flags & formats::FLAG_BATCHES != 0;
    let mut pos = usize::from(h.header_len).min(bytes.len());
    let mut damaged = 0u64;
    while pos < bytes.len() {
        match Framing::Data.next_unit(&bytes[pos..], framed, true) {
            Unit::Batch { len, .. } | Unit::Unframed(len) => pos += len,
            Unit::Damaged { len, why } => {
                let _: DamageKind = why;
                damaged += len as u64;
                pos += len;
            }
            Unit::NeedMore => break,
        }
    }
    damaged
}
