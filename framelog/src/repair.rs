//! Finding a segment's torn tail (the unfinished batch of a writer that died mid-write), and
//! telling it from damage, which a writer never removes.
//!
//! Called by writers under the segment's lock before their first append to it. The rules are
//! in `docs/FORMAT.md` ("Torn tails"): only the start of one batch after the last whole batch
//! is cut; whole data batches that lost their index entries get them back.

use std::fs::File;
use std::path::Path;

use formats::{
    BATCH_RECORD_LEN, BatchHeader, DATA_MARKER_LEN, DataMarker, Framing, INDEX_ENTRY_LEN,
    MAX_FRAMES_BATCH_LEN, Probe, check_index_entries, data_batch_entries, decode_index_entry,
    frame_data_batch,
};

use crate::error::{IoContext, Result};
use crate::pread::{read_full_at, read_vec_at};

/// What to do with a frame-log segment before appending to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tail {
    /// Whole batches end at this length: cut anything after it (a torn tail).
    WholeUpTo(u64),
    /// The segment holds damage at this offset; leave it alone and start a new one.
    Damaged(u64),
}

/// Walks the batch headers of a framed frame-log segment and finds its torn tail.
pub(crate) fn frames_tail(file: &File, path: &Path, header_len: u64) -> Result<Tail> {
    let len = file.metadata().at(path)?.len();
    let mut pos = header_len;
    let mut head = [0u8; BATCH_RECORD_LEN];
    while pos < len {
        let n = read_full_at(file, path, &mut head, pos)?;
        match BatchHeader::probe(&head[..n]) {
            Probe::Valid(h) if pos + (BATCH_RECORD_LEN as u64) + u64::from(h.len) <= len => {
                pos += BATCH_RECORD_LEN as u64 + u64::from(h.len);
            }
            Probe::Valid(_) | Probe::NeedMore => {
                let max = BATCH_RECORD_LEN + MAX_FRAMES_BATCH_LEN;
                let tail = read_vec_at(file, path, pos, max + 1)?;
                return Ok(
                    if tail.len() <= max && Framing::Frames.is_torn_tail(&tail) {
                        Tail::WholeUpTo(pos)
                    } else {
                        Tail::Damaged(pos)
                    },
                );
            }
            Probe::Invalid => return Ok(Tail::Damaged(pos)),
        }
    }
    Ok(Tail::WholeUpTo(pos))
}

/// What to do with a framed data/index pair before appending to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DataTail {
    /// Cut the index to `idx_len`, append `reindex` to it, then cut the data to `data_len`.
    Repair {
        /// Length of the index's whole batches.
        idx_len: u64,
        /// Index entries rebuilt for whole data batches that had none.
        reindex: Vec<u8>,
        /// Length of the data's whole batches.
        data_len: u64,
    },
    /// Damage at this offset of the data (`true`) or index (`false`) file: start a new pair.
    Damaged(bool, u64),
}

/// Walks a framed data/index pair batch by batch and plans its repair.
///
/// Data batches are written before their index entries, so a crash leaves, at worst, whole
/// data batches with a partial run of index entries (or none), then the start of one more
/// data batch. The index is cut back to its last whole batch, the whole data batches after it
/// are indexed again from their own entries, and only the unfinished data batch is cut.
pub(crate) fn data_tail(
    data: &File,
    data_path: &Path,
    idx: &File,
    idx_path: &Path,
    data_header: u64,
    idx_header: u64,
) -> Result<DataTail> {
    let data_len = data.metadata().at(data_path)?.len();
    let idx_len = idx.metadata().at(idx_path)?.len();
    let (mut idx_pos, mut data_pos) = (idx_header, data_header);
    let mut marker = [0u8; DATA_MARKER_LEN];
    // Whole index batches, each checked against its marker.
    while idx_len - idx_pos >= INDEX_ENTRY_LEN as u64 {
        let mut raw = [0u8; INDEX_ENTRY_LEN];
        read_full_at(idx, idx_path, &mut raw, idx_pos)?;
        let own = decode_index_entry(&raw).expect("nine bytes");
        if own.key.id != 0 || u64::from(own.seek) != data_pos {
            return Ok(DataTail::Damaged(false, idx_pos));
        }
        let n = read_full_at(data, data_path, &mut marker, data_pos)?;
        let Probe::Valid(m) = DataMarker::probe(&marker[..n]) else {
            return Ok(DataTail::Damaged(true, data_pos));
        };
        let need = (1 + u64::from(m.count)) * INDEX_ENTRY_LEN as u64;
        if idx_len - idx_pos < need {
            // The index entries of this batch were being written.
            break;
        }
        let entries = read_vec_at(
            idx,
            idx_path,
            idx_pos + INDEX_ENTRY_LEN as u64,
            need as usize - INDEX_ENTRY_LEN,
        )?;
        let body_seek = data_pos + DATA_MARKER_LEN as u64;
        let end = body_seek + u64::from(m.len);
        if end > data_len || check_index_entries(&m, &entries, body_seek).is_none() {
            return Ok(DataTail::Damaged(false, idx_pos));
        }
        idx_pos += need;
        data_pos = end;
    }
    // Data batches after the last indexed one: whole ones are indexed again.
    let mut reindex = Vec::new();
    while data_pos < data_len {
        let n = read_full_at(data, data_path, &mut marker, data_pos)?;
        let whole = match DataMarker::probe(&marker[..n]) {
            Probe::Valid(m) => {
                let end = data_pos + DATA_MARKER_LEN as u64 + u64::from(m.len);
                (end <= data_len).then_some((m, end))
            }
            Probe::NeedMore => None,
            Probe::Invalid => return Ok(DataTail::Damaged(true, data_pos)),
        };
        let Some((m, end)) = whole else {
            let tail = read_vec_at(data, data_path, data_pos, (data_len - data_pos) as usize)?;
            if !Framing::Data.is_torn_tail(&tail) {
                return Ok(DataTail::Damaged(true, data_pos));
            }
            break;
        };
        let body = read_vec_at(
            data,
            data_path,
            data_pos + DATA_MARKER_LEN as u64,
            m.len as usize,
        )?;
        let rebuilt = match data_batch_entries(&body) {
            Some(entries) if m.body_matches(&body) => {
                frame_data_batch(m.worker, &body, &entries, data_pos, &mut reindex)
            }
            _ => return Ok(DataTail::Damaged(true, data_pos)),
        };
        if rebuilt != m {
            return Ok(DataTail::Damaged(true, data_pos));
        }
        data_pos = end;
    }
    Ok(DataTail::Repair {
        idx_len: idx_pos,
        reindex,
        data_len: data_pos,
    })
}
