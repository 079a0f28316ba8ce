//! Finding where to start reading a log for one frame: by the id indexes of its compact
//! segments (`docs/FORMAT.md`, *Id index*), the block its start may be in, instead of the
//! log's first record.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;

use formats::{FileKind, FrameKey, HEADER_LEN};

use super::frames::{Item, plan};
use crate::error::{IoContext, Result};
use crate::pread::read_header_any;
use crate::reader::Position;
use crate::segments;

/// A place to start reading at, with what a reader would know there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Start {
    /// The first record of the block the frame's start may be in; no record before it is
    /// that start.
    pub pos: Position,
    /// Each worker's current thread there (from the `thread_info` records before it).
    pub threads: BTreeMap<u8, u32>,
    /// A place from which on no record is that start (`None`: a later segment without an
    /// id index may hold it).
    pub past: Option<Position>,
}

/// Where a frame's start is, as far as the id indexes tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Located {
    /// At or after this place.
    At(Start),
    /// In no segment of the log.
    Absent,
    /// A segment without an id index (raw, or compacted before them) may hold it.
    Unknown,
}

/// Looks for the start of `key` in the log in `dir`, segment by segment.
pub(crate) fn locate_start(dir: &Path, key: FrameKey) -> Result<Located> {
    let mut threads = BTreeMap::new();
    let mut found: Option<Start> = None;
    for n in segments::list(dir, FileKind::FrameLog)? {
        let path = segments::segment_path(dir, FileKind::FrameLog, n);
        let file = match File::open(&path) {
            Ok(f) => f,
            // Deleted by retention since it was listed: a reader would pass it over too.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).at(&path),
        };
        let compact = matches!(
            read_header_any(&file, &path, FileKind::FrameLog)?,
            Some(h) if h.is_compact()
        );
        if !compact {
            // A raw segment of no more than its header holds no record.
            if file.metadata().at(&path)?.len() <= HEADER_LEN as u64 {
                continue;
            }
            return Ok(found.map_or(Located::Unknown, |s| Located::At(Start { past: None, ..s })));
        }
        let plan = plan(&file, &path)?;
        let Some(ids) = &plan.ids else {
            return Ok(found.map_or(Located::Unknown, |s| Located::At(Start { past: None, ..s })));
        };
        let blocks: Vec<_> = plan
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Block {
                    entry: Some(e),
                    next_first,
                    ..
                } => Some((*e, *next_first)),
                _ => None,
            })
            .collect();
        if blocks.len() != ids.blocks.len() {
            return Ok(found.map_or(Located::Unknown, |s| Located::At(Start { past: None, ..s })));
        }
        for (b, &(entry, next_first)) in blocks.iter().enumerate() {
            if !ids.may_hold(b, key) {
                continue;
            }
            // Past this block: the next one's first record, or the next segment.
            let past = match next_first {
                u64::MAX => Position {
                    segment: n + 1,
                    offset: 0,
                },
                offset => Position { segment: n, offset },
            };
            match &mut found {
                Some(s) => s.past = Some(past),
                None => {
                    let mut at = threads.clone();
                    at.extend(ids.blocks[b].threads.iter().copied());
                    found = Some(Start {
                        pos: Position {
                            segment: n,
                            offset: entry.first_offset,
                        },
                        threads: at,
                        past: Some(past),
                    });
                }
            }
        }
        threads.extend(ids.end_threads.iter().copied());
    }
    Ok(found.map_or(Located::Absent, Located::At))
}
