//! Finding where the whole records of a segment end, to cut a torn tail left by a crash.
//!
//! Called by writers under the segment's lock before their first append, so the bytes past
//! the returned end can only be an unfinished batch of a process that died mid-write.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use formats::{
    DATA_ENTRY_HEADER_LEN, Decoded, FileHeader, FileKind, HEADER_LEN, INDEX_ENTRY_LEN,
    decode_data_entry, decode_index_entry, decode_record,
};

use crate::error::{Error, IoContext, Result};

/// What the tail of a segment looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// Whole records end at this length (cut anything after it).
    WholeUpTo(u64),
    /// The segment holds bytes that are not a torn tail; leave it alone and start a new one.
    Corrupt,
}

const CHUNK: usize = 4 << 20;

/// Reads the header of `file`; `Ok(None)` if it holds fewer than 16 bytes.
pub fn read_header(file: &File, path: &Path, kind: FileKind) -> Result<Option<FileHeader>> {
    let mut buf = [0u8; HEADER_LEN];
    let n = read_full_at(file, path, &mut buf, 0)?;
    FileHeader::decode(kind, &buf[..n]).map_err(|e| Error::corrupt(path, 0, e))
}

/// Reads as many bytes as are there at `offset`, up to `buf.len()`.
pub fn read_full_at(file: &File, path: &Path, buf: &mut [u8], offset: u64) -> Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    Ok(done)
}

/// Scans a frame-log segment and reports where its whole records end.
pub fn frames_tail(file: &File, path: &Path, header_len: u64) -> Result<Tail> {
    let len = file.metadata().at(path)?.len();
    let mut buf = vec![0u8; CHUNK];
    let mut pos = header_len;
    while pos < len {
        let n = read_full_at(file, path, &mut buf, pos)?;
        let mut used = 0;
        loop {
            match decode_record(&buf[used..n]) {
                Ok(Decoded::Record(_, l)) => used += l,
                Ok(Decoded::NeedMore) => break,
                Err(_) => return Ok(Tail::Corrupt),
            }
        }
        if used == 0 {
            // Less than one whole record left: that is the torn tail.
            break;
        }
        pos += used as u64;
    }
    Ok(Tail::WholeUpTo(pos))
}

/// Checks a data/index pair from the end and reports where each file's whole entries end.
///
/// Entries are appended to both files in the same order under one lock, so the last index
/// entry names the last data entry; a torn batch shows as index entries pointing past the
/// data's end, or data past the last indexed entry.
pub fn data_tail(
    data: &File,
    data_path: &Path,
    idx: &File,
    idx_path: &Path,
    data_header: u64,
    idx_header: u64,
) -> Result<(Tail, u64)> {
    let data_len = data.metadata().at(data_path)?.len();
    let idx_len = idx.metadata().at(idx_path)?.len();
    let mut idx_end = idx_header
        + (idx_len.saturating_sub(idx_header) / INDEX_ENTRY_LEN as u64) * INDEX_ENTRY_LEN as u64;
    while idx_end > idx_header {
        let mut raw = [0u8; INDEX_ENTRY_LEN];
        read_full_at(idx, idx_path, &mut raw, idx_end - INDEX_ENTRY_LEN as u64)?;
        let entry = decode_index_entry(&raw).expect("nine bytes");
        let seek = u64::from(entry.seek);
        let mut head = [0u8; DATA_ENTRY_HEADER_LEN + 4];
        let n = read_full_at(data, data_path, &mut head, seek)?;
        if n < head.len() || seek < data_header {
            // Points past the data's end: the data of this batch was never written.
            idx_end -= INDEX_ENTRY_LEN as u64;
            continue;
        }
        let doc_len = i32::from_le_bytes(head[5..9].try_into().expect("4 bytes"));
        let end = seek + DATA_ENTRY_HEADER_LEN as u64 + doc_len.max(0) as u64;
        if end > data_len {
            idx_end -= INDEX_ENTRY_LEN as u64;
            continue;
        }
        let mut entry_bytes = vec![0u8; (end - seek) as usize];
        read_full_at(data, data_path, &mut entry_bytes, seek)?;
        return Ok(match decode_data_entry(&entry_bytes) {
            Ok(Some(e)) if e.key == entry.key => (Tail::WholeUpTo(end), idx_end),
            _ => (Tail::Corrupt, idx_end),
        });
    }
    // No index entry survives: any data bytes are an unfinished batch.
    Ok((Tail::WholeUpTo(data_header), idx_header))
}
