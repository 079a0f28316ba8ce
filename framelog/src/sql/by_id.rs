//! `slice` rows by id, as a join asks for them: once per row of its other side
//! (`join slice p on p.id = s.parent_id`). One lookup alone reads the log from its start to
//! that frame's end (a frame's depth and parent follow from every record before it), so a
//! join read the log once per row: 9 s for 2,000 requests of a pruned log in a debug build,
//! where each parent the pruning deleted was looked for to the log's end. After a few
//! lookups a connection reads the log once and keeps its frames by key (at most
//! [`MAX_ROWS`]) until the next [`super::SqlLog::refresh`].

use std::sync::Arc;

use formats::FrameKey;
use rustc_hash::FxHashMap;

use super::Shared;
use super::frames::{FrameScan, SliceRow, Wanted};

/// Lookups a connection answers by reading the log before it reads the whole log once: a
/// query that asks for a few ids reads no more than it needs.
pub(crate) const LOOKUPS_BEFORE_INDEX: u32 = 8;

/// Frames kept at most, about 200 bytes each with the map (400 MiB): past this many, each
/// lookup reads the log again.
pub(crate) const MAX_ROWS: usize = 1 << 21;

/// Every frame of the log by key, with the labels its rows name.
#[derive(Debug)]
pub(crate) struct ById {
    rows: FxHashMap<FrameKey, SliceRow>,
    labels: Vec<String>,
}

impl ById {
    /// Reads the whole log; `None` if it holds more than [`MAX_ROWS`] frames.
    fn read(shared: &Arc<Shared>) -> rusqlite::Result<Option<Self>> {
        let mut scan = FrameScan::new(shared, Wanted::default(), false)?;
        let mut rows = FxHashMap::default();
        while let Some(r) = scan.next_row()? {
            if rows.len() == MAX_ROWS {
                return Ok(None);
            }
            // The first row of a key, as a lookup that stops at it returns.
            rows.entry(r.key).or_insert(r);
        }
        Ok(Some(Self {
            rows,
            labels: scan.into_labels(),
        }))
    }

    /// The row of `key`, if the log holds that frame.
    pub fn get(&self, key: FrameKey) -> Option<&SliceRow> {
        self.rows.get(&key)
    }

    /// Label `i` of a row this holds.
    pub fn label(&self, i: u32) -> &str {
        &self.labels[i as usize]
    }
}

/// A connection's id lookups since its last refresh.
#[derive(Debug)]
pub(crate) enum Lookups {
    /// This many were answered by reading the log.
    Counting(u32),
    /// The log was read once for the ones after them.
    Indexed(Arc<ById>),
    /// The log holds more than [`MAX_ROWS`] frames: each lookup reads it.
    TooMany,
}

impl Default for Lookups {
    fn default() -> Self {
        Self::Counting(0)
    }
}

/// The log's frames by key, once this connection has looked up enough ids for one read
/// of the whole log to pay; `None`: read the log for this lookup.
pub(crate) fn index(shared: &Arc<Shared>) -> rusqlite::Result<Option<Arc<ById>>> {
    match &mut *shared.lookups.lock() {
        Lookups::Indexed(ix) => return Ok(Some(ix.clone())),
        Lookups::TooMany => return Ok(None),
        Lookups::Counting(n) if *n < LOOKUPS_BEFORE_INDEX => {
            *n += 1;
            return Ok(None);
        }
        Lookups::Counting(_) => {}
    }
    // Not under the lock: the read records damage and checks for an interrupt through
    // `shared`. An interrupted read fails the statement and leaves the count where it was.
    let read = ById::read(shared)?.map(Arc::new);
    *shared.lookups.lock() = match &read {
        Some(ix) => Lookups::Indexed(ix.clone()),
        None => Lookups::TooMany,
    };
    Ok(read)
}

#[cfg(test)]
mod tests {
    use formats::{Category, FrameEnd, FrameStart, Parent, Record};

    use super::*;
    use crate::sql::SqlLog;

    #[test]
    fn a_connection_reads_the_whole_log_once_after_a_few_lookups_and_again_after_a_refresh() {
        let dir = tempfile::tempdir().unwrap();
        let w = crate::LogWriter::open(dir.path()).unwrap();
        let (worker, first) = (w.worker(), w.reserve_ids(2).unwrap());
        let mut buf = Vec::new();
        let t = 1_700_000_000_000_000_000u64;
        for (id, parent, label) in [
            (first, Parent::Root, "root"),
            (first + 1, Parent::Frame(first), "child"),
        ] {
            Record::Start(FrameStart {
                id,
                worker,
                timestamp: t + u64::from(id - first),
                context: first,
                category: Category::HTTP,
                label,
                parent,
            })
            .encode_to_vec(&mut buf);
        }
        for id in [first + 1, first] {
            Record::End(FrameEnd {
                id,
                worker,
                timestamp: t + 10 + u64::from(first + 1 - id),
            })
            .encode_to_vec(&mut buf);
        }
        w.append_frames(&buf).unwrap();
        let log = SqlLog::open(dir.path()).unwrap();
        for _ in 0..LOOKUPS_BEFORE_INDEX {
            assert!(index(&log.shared).unwrap().is_none(), "read for the lookup");
        }
        let ix = index(&log.shared).unwrap().expect("the log, read whole");
        let child = ix.get(FrameKey::new(worker, first + 1)).expect("the child");
        assert_eq!(ix.label(child.label), "child");
        assert_eq!(child.parent, Some(FrameKey::new(worker, first)));
        assert_eq!(child.depth, 1);
        assert!(
            Arc::ptr_eq(&ix, &index(&log.shared).unwrap().unwrap()),
            "kept"
        );
        // A later query may see a log that grew: it counts again.
        log.refresh();
        assert!(index(&log.shared).unwrap().is_none());
    }
}
