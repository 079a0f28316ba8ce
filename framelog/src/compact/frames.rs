//! Compact frame logs on disk: finding the blocks of a version 2 file (for [`crate::LogReader`]
//! and `check`), and compacting a sealed raw segment into one.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use formats::compact::frames::{
    BLOCK_HEADER_LEN, BlockEntry, BlockHeader, TRAILER_LEN, Trailer, read_id_index, read_index,
    walk_blocks,
};
use formats::compact::ids::IdIndex;
use formats::{FileKind, HEADER_LEN};

use crate::error::{IoContext, Result};
use crate::pread::{read_full_at, read_vec_at};

/// The largest block index a reader loads (a 16 MiB index would describe ~30 G records).
const MAX_INDEX_LEN: u64 = 16 << 20;

/// One step through a compact frame-log file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Item {
    /// A block: its header's offset, the bytes up to the next block (or the index), and
    /// from the index what its header must say and where the next block's records start.
    Block {
        /// Offset of the block header.
        at: u64,
        /// Bytes from `at` to the next block or the index.
        len: u64,
        /// The block's index entry, when the index checks.
        entry: Option<BlockEntry>,
        /// The raw offset of the next block's first record (`u64::MAX` if unknown or last).
        next_first: u64,
    },
    /// Bytes that are not a block.
    Damage {
        /// Offset in the compact file.
        at: u64,
        /// Length.
        len: u64,
    },
}

/// Where a compact frame-log file's blocks are.
#[derive(Debug, Clone, Default)]
pub(crate) struct Plan {
    /// Blocks and damage, in file order.
    pub items: Vec<Item>,
    /// The raw segment's length (from the trailer; 0 if the trailer is damaged).
    pub raw_len: u64,
    /// Where its FrameStart ids are, block by block (`None`: no id index, or damaged).
    // Read only by `locate` (the `sql` feature); decoded always, so the plan is one shape.
    #[cfg_attr(not(feature = "sql"), allow(dead_code))]
    pub ids: Option<IdIndex>,
}

/// Reads the trailer and index of the compact file `file` (at `path`), or walks its blocks
/// by their headers when they do not check.
pub(crate) fn plan(file: &File, path: &Path) -> Result<Plan> {
    let file_len = file.metadata().at(path)?.len();
    if file_len >= (HEADER_LEN + TRAILER_LEN) as u64 {
        let mut tail = [0u8; TRAILER_LEN];
        let n = read_full_at(file, path, &mut tail, file_len - TRAILER_LEN as u64)?;
        if let Some(t) = Trailer::decode(&tail[..n], file_len) {
            let ix_len = file_len - TRAILER_LEN as u64 - t.index_offset;
            if ix_len <= MAX_INDEX_LEN {
                let ix = read_vec_at(file, path, t.index_offset, ix_len as usize)?;
                if let Some(entries) = read_index(&ix, t.index_offset) {
                    let mut items = Vec::with_capacity(entries.len() + 1);
                    let first = entries.first().map_or(t.index_offset, |e| e.offset);
                    if first > HEADER_LEN as u64 {
                        items.push(Item::Damage {
                            at: HEADER_LEN as u64,
                            len: first - HEADER_LEN as u64,
                        });
                    }
                    for (i, e) in entries.iter().enumerate() {
                        let next = entries.get(i + 1);
                        let end = next.map_or(t.index_offset, |n| n.offset);
                        items.push(Item::Block {
                            at: e.offset,
                            len: end - e.offset,
                            entry: Some(*e),
                            next_first: next.map_or(u64::MAX, |n| n.first_offset),
                        });
                    }
                    return Ok(Plan {
                        items,
                        raw_len: t.raw_len,
                        ids: read_id_index(&ix, entries.len()),
                    });
                }
            }
        }
    }
    // The trailer or index is damaged: walk the whole file by its block headers.
    let bytes = read_vec_at(file, path, 0, file_len as usize)?;
    let walk = walk_blocks(&bytes);
    let mut items: Vec<Item> = walk
        .blocks
        .iter()
        .map(|&(at, h)| Item::Block {
            at,
            len: h.total_len(),
            entry: None,
            next_first: u64::MAX,
        })
        .chain(
            walk.damage
                .iter()
                .map(|&(at, len)| Item::Damage { at, len }),
        )
        .collect();
    items.sort_by_key(|i| match i {
        Item::Block { at, .. } | Item::Damage { at, .. } => *at,
    });
    Ok(Plan {
        items,
        raw_len: walk.trailer.map_or(0, |t| t.raw_len),
        ids: None,
    })
}

/// Reads block `item` into `buf` and checks its header (against the index entry if known):
/// the header, or why the bytes are not that block.
pub(crate) fn read_block(
    file: &File,
    path: &Path,
    at: u64,
    len: u64,
    entry: Option<BlockEntry>,
    buf: &mut Vec<u8>,
) -> Result<Option<BlockHeader>> {
    // A block's span is bounded by the file (the plan came from it); refuse absurd ones.
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    if len > (formats::compact::MAX_RAW_BLOCK_LEN * 2) {
        return Ok(None);
    }
    buf.resize(len, 0);
    let n = read_full_at(file, path, buf, at)?;
    buf.truncate(n);
    let header = BlockHeader::decode(buf).filter(|h| {
        h.total_len() == n as u64 && n >= BLOCK_HEADER_LEN && entry.is_none_or(|e| e.matches(h))
    });
    Ok(header)
}

/// The raw length of the compact frame-log file at `path` (from its trailer), or `None` if
/// the file is not compact.
pub(crate) fn raw_len_of(path: &Path) -> Result<Option<u64>> {
    let file = File::open(path).at(path)?;
    match crate::pread::read_header_any(&file, path, FileKind::FrameLog) {
        Ok(Some(h)) if h.is_compact() => {}
        _ => return Ok(None),
    }
    let file_len = file.metadata().at(path)?.len();
    if file_len < (HEADER_LEN + TRAILER_LEN) as u64 {
        return Ok(Some(file_len));
    }
    let mut tail = [0u8; TRAILER_LEN];
    let n = read_full_at(&file, path, &mut tail, file_len - TRAILER_LEN as u64)?;
    Ok(Some(
        Trailer::decode(&tail[..n], file_len).map_or(file_len, |t| t.raw_len),
    ))
}

/// Bytes read per system call while compacting.
const CHUNK: usize = 4 << 20;

/// What reading a raw segment for compaction found.
#[derive(Debug, Default)]
struct RawRead {
    /// Damaged bytes (a torn tail included) and places.
    damage_bytes: u64,
    damage_places: u64,
    /// The segment holds a `batch` record inside a batch, or a record the encoder refuses.
    refused: Option<String>,
}

/// Reads every record of the sealed raw segment `file` in order, as [`crate::LogReader`]
/// would (batch by batch, or record by record in an unframed segment), into `enc`.
fn read_raw(
    file: &File,
    path: &Path,
    header_len: u64,
    framed: bool,
    enc: &mut formats::compact::frames::FramesEncoder,
    stop: &AtomicBool,
) -> Result<RawRead> {
    use formats::{BATCH_RECORD_LEN, Decoded, Framing, Unit, batch_records, decode_record};
    let mut out = RawRead::default();
    let mut unpacked = Vec::new();
    let mut buf = vec![0u8; CHUNK];
    let mut pos = header_len;
    let mut damage = |len: u64| {
        out.damage_bytes += len;
        out.damage_places += 1;
    };
    let mut refused = None;
    loop {
        let n = read_full_at(file, path, &mut buf, pos)?;
        let at_end = n < buf.len();
        let mut used = 0usize;
        while used < n && refused.is_none() {
            let rest = &buf[used..n];
            let unit = if framed {
                Framing::Frames.next_unit(rest, true, at_end)
            } else {
                match decode_record(rest) {
                    Ok(Decoded::Record(rec, len)) => {
                        if rec.type_byte() == formats::RecordType::Batch as u8 {
                            refused = Some("a batch record in a segment without batch framing");
                            break;
                        }
                        if enc.push(pos + used as u64, &rec).is_err() {
                            refused = Some("a record the compact form cannot hold");
                        }
                        used += len;
                        continue;
                    }
                    _ => Framing::Frames.next_unit(rest, false, at_end),
                }
            };
            match unit {
                Unit::Batch {
                    len, body, packed, ..
                } => {
                    let body_at = pos + (used + BATCH_RECORD_LEN) as u64;
                    let Ok(mut iter) = batch_records(body, packed.as_ref(), body_at, &mut unpacked)
                    else {
                        damage(len as u64);
                        used += len;
                        continue;
                    };
                    for item in &mut iter {
                        match item {
                            Ok((offset, rec)) => {
                                if enc.push(offset, &rec).is_err() {
                                    refused = Some("a record the compact form cannot hold");
                                    break;
                                }
                            }
                            Err(_) => {
                                damage(1);
                                break;
                            }
                        }
                    }
                    if iter.left_over() != 0 && refused.is_none() {
                        // Bytes of a verified batch that are not whole records.
                        damage(iter.left_over() as u64);
                    }
                    used += len;
                }
                Unit::Unframed(len) => used += len,
                Unit::Damaged { len, .. } => {
                    damage(len as u64);
                    used += len;
                }
                Unit::NeedMore => break,
            }
        }
        pos += used as u64;
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if refused.is_some() || at_end || used == 0 {
            if used == 0 && !at_end && refused.is_none() {
                // A unit longer than the buffer cannot be: the rest is damage.
                let len = file.metadata().at(path)?.len();
                damage(len.saturating_sub(pos));
            }
            break;
        }
    }
    out.refused = refused.map(str::to_owned);
    Ok(out)
}

/// Rewrites sealed frame-log segment `n` of the log in `dir` in compact form (zstd `level`):
/// only if it is sealed (checked under its lock, as appenders do), not compact yet and clean
/// (no damage, no torn tail); the compact file replaces it atomically.
pub fn compact_frames_segment(dir: &Path, n: u32, level: i32) -> Result<super::SegmentOutcome> {
    compact_frames_segment_until(dir, n, level, &AtomicBool::new(false))
}

/// [`compact_frames_segment`], given up (the raw segment left as it is) once `stop` is set.
pub(crate) fn compact_frames_segment_until(
    dir: &Path,
    n: u32,
    level: i32,
    stop: &AtomicBool,
) -> Result<super::SegmentOutcome> {
    use super::SegmentOutcome;
    let path = crate::segments::segment_path(dir, FileKind::FrameLog, n);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(SegmentOutcome::Gone),
        Err(e) => return Err(crate::Error::io(path, e)),
    };
    {
        // Under the segment's lock, as an appender checks: once a later segment exists, no
        // appender writes to this one again, and any append begun before has finished.
        file.lock().at(&path)?;
        let sealed = crate::segments::list(dir, FileKind::FrameLog)?
            .iter()
            .any(|&m| m > n);
        let _ = file.unlock();
        if !sealed {
            return Ok(SegmentOutcome::NotSealed);
        }
    }
    let header = match crate::pread::read_header_any(&file, &path, FileKind::FrameLog) {
        Ok(Some(h)) => h,
        Ok(None) => {
            let len = file.metadata().at(&path)?.len();
            return Ok(SegmentOutcome::Damaged {
                bytes: len,
                places: u64::from(len > 0),
            });
        }
        Err(crate::Error::Corrupt { .. }) => {
            return Ok(SegmentOutcome::Damaged {
                bytes: HEADER_LEN as u64,
                places: 1,
            });
        }
        Err(e) => return Err(e),
    };
    if header.is_compact() {
        return Ok(SegmentOutcome::AlreadyCompact);
    }
    let meta = file.metadata().at(&path)?;
    let raw_len = meta.len();
    // A version 6 segment compacts to version 7 (its positions need signed gaps), a version
    // 3 one to version 5 (with its parents and plot streams), a version 1 one to 2.
    let mut enc = if header.takes_packed() {
        formats::compact::frames::FramesEncoder::packed(level)
    } else if header.has_parents() {
        formats::compact::frames::FramesEncoder::with_parents(level)
    } else {
        formats::compact::frames::FramesEncoder::new(level)
    };
    let framed = header.flags & formats::FLAG_BATCHES != 0;
    let read = read_raw(
        &file,
        &path,
        u64::from(header.header_len),
        framed,
        &mut enc,
        stop,
    )?;
    if stop.load(Ordering::Relaxed) {
        return Ok(SegmentOutcome::NotSealed);
    }
    if read.damage_places > 0 || read.refused.is_some() {
        return Ok(SegmentOutcome::Damaged {
            bytes: read.damage_bytes,
            places: read.damage_places.max(1),
        });
    }
    let records = enc.records();
    let bytes = enc.finish(raw_len);
    // Retention may have deleted the segment meanwhile: do not bring it back.
    if !path.exists() {
        return Ok(SegmentOutcome::Gone);
    }
    let modified = meta.modified().at(&path)?;
    let compact_bytes = super::replace_atomically(&path, |tmp| {
        use std::io::Write;
        tmp.write_all(&bytes).at(&path)?;
        // Keep the raw segment's time: retention deletes oldest first by it.
        tmp.set_modified(modified).at(&path)
    })?;
    Ok(SegmentOutcome::Compacted {
        raw_bytes: raw_len,
        compact_bytes,
        items: records,
    })
}

#[cfg(test)]
mod tests;
