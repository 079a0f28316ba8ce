//! `slice` rows by id, as a join asks for them: once per row of its other side
//! (`join slice p on p.id = s.parent_id`). One lookup alone reads from near the frame where a
//! compact segment's id index places it (`super::near`), else from the log's start to that
//! frame's end (a frame's depth and parent follow from every record before it), so a join of
//! a raw log read it once per row: 9 s for 2,000 requests of a pruned log in a debug build,
//! where each parent the pruning deleted was looked for to the log's end. After a few
//! lookups a connection reads the log once and keeps its frames sorted by key (at most
//! [`MAX_ROWS`]) until the next [`super::SqlLog::refresh`].

use std::sync::Arc;

use formats::{Category, FrameAlloc, FrameKey, FramePolls};

use super::Shared;
use super::frames::{FrameScan, SliceRow, Wanted};

/// Lookups a connection answers by reading the log before it reads the whole log once: a
/// query that asks for a few ids reads no more than it needs.
pub(crate) const LOOKUPS_BEFORE_INDEX: u32 = 8;

/// Frames kept at most (about 72 bytes each, twice that while the log is read): past this
/// many, each lookup reads the log again.
pub(crate) const MAX_ROWS: usize = 1 << 22;

/// Every frame of the log by key, with the labels its rows name.
#[derive(Debug)]
pub(crate) struct ById {
    /// Sorted by key; of two rows with one key, the first the log completed.
    rows: Vec<Kept>,
    /// What the few rows that have them counted: allocations and polls.
    extras: Vec<(Option<FrameAlloc>, Option<FramePolls>)>,
    labels: Vec<String>,
}

/// A [`SliceRow`] as kept: a third of its size (its allocation and poll counts, 144 bytes
/// and absent from most frames, are kept aside).
#[derive(Debug)]
struct Kept {
    key: FrameKey,
    ts: u64,
    dur: Option<u64>,
    parent: Option<FrameKey>,
    label: u32,
    depth: u32,
    context: u32,
    thread: u32,
    /// Index into [`ById::extras`], or [`NO_EXTRAS`].
    extras: u32,
    category: Category,
    parent_inferred: bool,
}

const NO_EXTRAS: u32 = u32::MAX;

impl ById {
    /// Reads the whole log; `None` if it holds more than [`MAX_ROWS`] frames.
    fn read(shared: &Arc<Shared>) -> rusqlite::Result<Option<Self>> {
        let mut scan = FrameScan::new(shared, Wanted::default(), false)?;
        let (mut rows, mut extras) = (Vec::new(), Vec::new());
        while let Some(r) = scan.next_row()? {
            if rows.len() == MAX_ROWS {
                return Ok(None);
            }
            let kept = if r.alloc.is_some() || r.polls.is_some() {
                extras.push((r.alloc.map(|a| *a), r.polls.map(|p| *p)));
                (extras.len() - 1) as u32
            } else {
                NO_EXTRAS
            };
            rows.push(Kept {
                key: r.key,
                ts: r.ts,
                dur: r.dur,
                parent: r.parent,
                label: r.label,
                depth: r.depth,
                context: r.context,
                thread: r.thread,
                extras: kept,
                category: r.category,
                parent_inferred: r.parent_inferred,
            });
        }
        // Stable: the first of a key stays first, and is the one a lookup that stops at it
        // returns.
        rows.sort_by_key(|k| k.key);
        rows.dedup_by_key(|k| k.key);
        rows.shrink_to_fit();
        extras.shrink_to_fit();
        Ok(Some(Self {
            rows,
            extras,
            labels: scan.into_labels(),
        }))
    }

    /// The row of `key`, if the log holds that frame.
    pub fn get(&self, key: FrameKey) -> Option<SliceRow> {
        let i = self.rows.binary_search_by_key(&key, |k| k.key).ok()?;
        let k = &self.rows[i];
        let (alloc, polls) = match k.extras {
            NO_EXTRAS => (None, None),
            e => self.extras[e as usize],
        };
        Some(SliceRow {
            key: k.key,
            ts: k.ts,
            dur: k.dur,
            label: k.label,
            category: k.category,
            depth: k.depth,
            parent: k.parent,
            parent_inferred: k.parent_inferred,
            context: k.context,
            thread: k.thread,
            alloc: alloc.map(Box::new),
            polls: polls.map(Box::new),
        })
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
        // What docs/SQL.md says a kept frame costs.
        assert_eq!(std::mem::size_of::<Kept>(), 72);
        // A later query may see a log that grew: it counts again.
        log.refresh();
        assert!(index(&log.shared).unwrap().is_none());
    }
}
