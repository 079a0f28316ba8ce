//! One frame's rows read from near its start: the compact segments' id indexes
//! (`docs/FORMAT.md`, *Id index*) say which block the start may be in, so `ancestor_slice(id)`
//! and `slice where id = ?` decode the blocks around it instead of the log before it, with
//! the rows a read from the log's start gives.

use std::sync::Arc;

use formats::FrameKey;

use super::Shared;
use super::frames::{Chain, FrameScan, Wanted};
use crate::compact::locate::{Located, Start, locate_start};

/// What a read from near a frame's start found.
pub(crate) enum Near {
    /// The rows, all read (the scan hands them out).
    Rows(Box<FrameScan>),
    /// No rows: the frame is not in the log, or the rows asked for are none.
    Nothing,
    /// Only a read from the log's start can tell.
    FromStart,
}

/// The rows `wanted` selects once the ancestors of `target` are known (`None`: no rows),
/// read from near the start of `target`.
///
/// A row that has not ended by the log's end sends the caller to a read from the start: its
/// end may have been written before its start (it moved threads), before the place this read
/// began, where the read from the start pairs it (and may then find it was not open).
pub(crate) fn rows_near(
    shared: &Arc<Shared>,
    target: FrameKey,
    wanted: impl FnOnce(&Chain) -> Option<Wanted>,
) -> rusqlite::Result<Near> {
    let Some((start, chain)) = chain_near(shared, target)? else {
        return Ok(Near::FromStart);
    };
    let (Some(start), Some(wanted)) = (start, wanted(&chain)) else {
        return Ok(Near::Nothing);
    };
    let mut scan = FrameScan::new_from(shared, wanted, false, Some(&start))?;
    scan.read_all()?;
    if scan.rows_read().any(|r| r.dur.is_none()) {
        return Ok(Near::FromStart);
    }
    Ok(Near::Rows(Box::new(scan)))
}

/// The ancestors of `target` read from near its start, with where to read their rows from
/// (`None` with an empty chain: `target` is not in the log). The scan starts at the block the
/// target's start may be in, and again earlier while a frame that decides the answer may have
/// started before it (the outermost ancestor's parent, which may have been open; the frame
/// that decides the ancestors' depths). `None` when only a read from the log's start can tell
/// (a segment without an id index, a parent inferred from its thread, a target not where the
/// index says).
pub(crate) fn chain_near(
    shared: &Arc<Shared>,
    target: FrameKey,
) -> rusqlite::Result<Option<(Option<Start>, Chain)>> {
    let locate = |key| locate_start(shared.dir(), key).map_err(super::log_error);
    let mut start = match locate(target)? {
        Located::At(s) => s,
        Located::Absent => return Ok(Some((None, Chain::default()))),
        Located::Unknown => return Ok(None),
    };
    loop {
        let chain = FrameScan::ancestors_of(shared, target, Some(&start))?;
        if chain.absent {
            // Not in any block that may hold it: not in the log.
            return Ok(Some((None, Chain::default())));
        }
        if chain.ancestors.is_none() || chain.inferred {
            return Ok(None);
        }
        let mut earliest: Option<Start> = None;
        for key in [chain.beyond, chain.unsure].into_iter().flatten() {
            match locate(key)? {
                // It may have started before this scan did.
                Located::At(s)
                    if s.pos < start.pos && earliest.as_ref().is_none_or(|e| s.pos < e.pos) =>
                {
                    // The target is known to be found now: no stopping short.
                    earliest = Some(Start { past: None, ..s })
                }
                // Read by this scan (and not open when it mattered), or not in the log.
                Located::At(_) | Located::Absent => {}
                Located::Unknown => return Ok(None),
            }
        }
        match earliest {
            Some(s) => start = s,
            None => return Ok(Some((Some(start), chain))),
        }
    }
}

#[cfg(test)]
mod tests {
    use formats::{Category, FrameEnd, FrameStart, Parent, Record};

    use super::*;
    use crate::compact::locate::Located;
    use crate::sql::SqlLog;
    use crate::{LogWriter, WriterOptions};

    const T0: u64 = 1_700_000_000_000_000_000;

    /// A frame that moved threads can have its end written before its start. Where the end
    /// is the last record of one compact block and the start the first of the next, a read
    /// from the start's block does not see the end: the rows come from a read from the
    /// log's start, which pairs them.
    #[test]
    fn an_end_written_before_its_start_in_an_earlier_block_is_still_paired() {
        let dir = tempfile::tempdir().unwrap();
        let w = LogWriter::open_with(
            dir.path(),
            WriterOptions {
                compact: false,
                ..WriterOptions::default()
            },
        )
        .unwrap();
        let worker = w.worker();
        let mut buf = Vec::new();
        let start = |buf: &mut Vec<u8>, id, t, parent| {
            Record::Start(FrameStart {
                id,
                worker,
                timestamp: t,
                context: id,
                category: Category::HTTP,
                label: "job",
                parent,
            })
            .encode_to_vec(buf)
        };
        let end = |buf: &mut Vec<u8>, id, t| {
            Record::End(FrameEnd {
                id,
                worker,
                timestamp: t,
            })
            .encode_to_vec(buf)
        };
        // The writer's own first record and 2 × 32,767: the moved frame's end is the
        // block's 65,536th record.
        let filler = 32_767u32;
        for i in 0..filler {
            let t = T0 + u64::from(i) * 1_000;
            start(&mut buf, 1 + i, t, Parent::Root);
            end(&mut buf, 1 + i, t + 500);
        }
        let moved = filler + 1;
        let t = T0 + u64::from(filler) * 1_000;
        end(&mut buf, moved, t + 900);
        start(&mut buf, moved, t, Parent::Root);
        // Its child, started after its end was written: not under it (read from the start).
        start(&mut buf, moved + 1, t + 950, Parent::Frame(moved));
        end(&mut buf, moved + 1, t + 990);
        w.append_frames(&buf).unwrap();
        drop(w);
        crate::sql::tree::tests::compact_all(dir.path());
        let log = SqlLog::open(dir.path()).unwrap();
        let key = FrameKey::new(worker, moved);
        let Located::At(at) = locate_start(dir.path(), key).unwrap() else {
            panic!("the compacted log has an id index");
        };
        // The case is real: read from the start's block, the frame has no end.
        let mut from_block = FrameScan::new_from(
            &log.shared,
            Wanted {
                key: Some(key),
                ..Wanted::default()
            },
            false,
            Some(&at),
        )
        .unwrap();
        let row = from_block.next_row().unwrap().expect("its start is read");
        assert_eq!(row.dur, None, "the end is in the block before");
        let id = super::super::frames::slice_id(key);
        let q = |sql: &str| -> Vec<(i64, Option<i64>)> {
            let c = log.connection();
            let mut st = c.prepare(sql).unwrap();
            st.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        assert_eq!(
            q("select id, dur from slice where id = ?1"),
            vec![(id, Some(900))]
        );
        let child = super::super::frames::slice_id(FrameKey::new(worker, moved + 1));
        let c = log.connection();
        let ancestors: i64 = c
            .query_row("select count(*) from ancestor_slice(?1)", [child], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(ancestors, 0, "its parent had ended when it started");
    }
}
