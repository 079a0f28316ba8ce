//! Compacting a sealed data segment (`.framedata` + `.frameidx`) into one version 2 file
//! (`docs/FORMAT.md`, *Compact frame data*).

use std::fs::File;
use std::io::Write;
use std::path::Path;

use formats::compact::data::DataFileEncoder;
use formats::{
    DamageKind, FileHeader, FileKind, Framing, HEADER_LEN, Unit, decode_data_entry,
    decode_index_entry,
};

use super::{SegmentOutcome, replace_atomically, sync_dir};
use crate::check::{Report, check_data_framing};
use crate::error::{Error, IoContext, Result};
use crate::segments::{exists, segment_path};

/// Data blocks are closed before 64 KiB of entries. Measured on the demo workload (zstd -3):
/// 9.0 B/frame against 8.7 with 256 KiB blocks and 10.7 with 16 KiB, while a lookup
/// decompresses a quarter of what a 256 KiB block costs.
pub const BLOCK_TARGET: usize = 64 << 10;

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
    // Sealed is decided under the data file's lock, as appenders do (FORMAT.md, *Appending*):
    // once the next segment exists no appender writes here again, so the lock can go.
    data.lock().at(&data_path)?;
    let sealed = exists(dir, FileKind::FrameData, n + 1);
    let _ = data.unlock();
    let mut head = [0u8; HEADER_LEN];
    let got = crate::pread::read_full_at(&data, &data_path, &mut head, 0)?;
    if let Ok(Some(h)) = FileHeader::decode_any(FileKind::FrameData, &head[..got])
        && h.is_compact()
    {
        remove_leftover_index(&idx_path)?;
        return Ok(SegmentOutcome::AlreadyCompact);
    }
    if !sealed {
        return Ok(SegmentOutcome::NotSealed);
    }
    // Clean means what `framelog check` means for a sealed pair, no finding at all, but for
    // parsing the documents: they are copied as bytes, as readers deliver them.
    let mut report = Report::default();
    check_data_framing(dir, n, &mut report)?;
    let data_bytes = std::fs::read(&data_path).at(&data_path)?;
    if !report.problems.is_empty() {
        return Ok(SegmentOutcome::Damaged {
            bytes: damaged_bytes(&data_bytes),
            places: report.problems.len() as u64,
        });
    }
    let idx_bytes = match std::fs::read(&idx_path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Compacted by another process since the header was read.
            return Ok(SegmentOutcome::AlreadyCompact);
        }
        Err(e) => return Err(Error::io(&idx_path, e)),
    };
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
                    &data_path,
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
        // A compact block holds at most 16 MiB: such a segment stays raw (still readable).
        return Err(Error::BadAppend(format!(
            "{}: frame {key} has {} bytes of data, over the 16 MiB a compact block holds; the segment stays raw",
            data_path.display(),
            doc.len()
        )));
    }
    // No dictionary: measured on the demo workload, a trained one (4-64 KiB) saves at most
    // 1 % with 64 KiB blocks and costs more than it saves in small segments (its own bytes);
    // blocks this size already hold the repetition a dictionary would capture.
    let raw_len = (data_bytes.len() + idx_bytes.len()) as u64;
    let compact_bytes = replace_atomically(&data_path, |file| {
        let mut enc = DataFileEncoder::new(level, None, BLOCK_TARGET);
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        for (key, doc) in &entries {
            enc.push(*key, doc);
            out.write_all(&enc.take_output()).at(&data_path)?;
        }
        out.write_all(&enc.finish(raw_len)).at(&data_path)?;
        out.flush().at(&data_path)?;
        Ok(())
    })?;
    remove_leftover_index(&idx_path)?;
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
