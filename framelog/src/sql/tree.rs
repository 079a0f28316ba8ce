//! `ancestor_slice(id)` and `descendant_slice(id)`: table-valued functions returning `slice`
//! rows (Perfetto's names), found by following parents in one or two reads of the log.

use std::cell::RefCell;
use std::ffi::{CStr, c_int};
use std::sync::Arc;

use rusqlite::types::{Null, ToSqlOutput};
use rusqlite::vtab::{Filters, IndexConstraintOp, IndexInfo};

use super::frames::{FrameScan, SliceRow, Wanted, key_of, slice_id};
use super::near::{Near, rows_near};
use super::slice::{schema, slice_cell, slice_columns};
use super::vtab::Rows;
use super::{Arg, Shared, arg};
use crate::DataStore;

/// The hidden argument column (after the slice columns).
const ARG: c_int = super::slice::SLICE_COLUMNS;

/// Which relatives a function returns.
pub(crate) trait Relatives {
    /// The function's name (for messages).
    const NAME: &'static str;
    /// Its `CREATE TABLE`.
    const SCHEMA: &'static CStr;
    /// The scan of the relatives of `target` (`None`: there are none).
    fn scan(shared: &Arc<Shared>, target: formats::FrameKey)
    -> rusqlite::Result<Option<FrameScan>>;
}

/// `ancestor_slice(id)`: the frames the frame was called from, as far as they were open
/// when it started (read up to its start, then again for their rows; from near its start
/// where the id index places it).
pub(crate) struct Ancestors;

impl Relatives for Ancestors {
    const NAME: &'static str = "ancestor_slice";
    const SCHEMA: &'static CStr = schema!(
        "CREATE TABLE ancestor_slice(",
        slice_columns!(),
        ", frame HIDDEN)"
    );

    fn scan(
        shared: &Arc<Shared>,
        target: formats::FrameKey,
    ) -> rusqlite::Result<Option<FrameScan>> {
        let rows = |ancestors: Option<Vec<formats::FrameKey>>| {
            ancestors.filter(|k| !k.is_empty()).map(|keys| Wanted {
                keys: Some(keys.into_iter().collect()),
                ..Wanted::default()
            })
        };
        match rows_near(shared, target, |chain| rows(chain.ancestors.clone()))? {
            Near::Rows(scan) => return Ok(Some(*scan)),
            Near::Nothing => return Ok(None),
            Near::FromStart => {}
        }
        let chain = FrameScan::ancestors_of(shared, target, None)?;
        match rows(chain.ancestors) {
            Some(wanted) => Ok(Some(FrameScan::new(shared, wanted, false)?)),
            None => Ok(None),
        }
    }
}

/// `descendant_slice(id)`: the frames started under the frame, at any depth, while it or
/// one of them was open.
pub(crate) struct Descendants;

impl Relatives for Descendants {
    const NAME: &'static str = "descendant_slice";
    const SCHEMA: &'static CStr = schema!(
        "CREATE TABLE descendant_slice(",
        slice_columns!(),
        ", frame HIDDEN)"
    );

    fn scan(
        shared: &Arc<Shared>,
        target: formats::FrameKey,
    ) -> rusqlite::Result<Option<FrameScan>> {
        let wanted = Wanted {
            descendants_of: Some(target),
            ..Wanted::default()
        };
        Ok(Some(FrameScan::new(shared, wanted, false)?))
    }
}

/// A scan of a tree function.
pub(crate) struct TreeRows<T> {
    shared: Arc<Shared>,
    scan: Option<FrameScan>,
    row: Option<SliceRow>,
    target: i64,
    data: RefCell<Option<DataStore>>,
    kind: std::marker::PhantomData<T>,
}

impl<T: Relatives> Rows for TreeRows<T> {
    const SCHEMA: &'static CStr = T::SCHEMA;

    fn best_index(info: &mut IndexInfo) -> rusqlite::Result<bool> {
        let mut found = None;
        let mut unusable = false;
        for (i, c) in info.constraints().enumerate() {
            if c.column() == ARG && c.operator() == IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_EQ {
                if c.is_usable() {
                    found = Some(i);
                } else {
                    unusable = true;
                }
            }
        }
        match found {
            Some(i) => {
                let mut u = info.constraint_usage(i);
                u.set_argv_index(1);
                u.set_omit(true);
                info.set_idx_num(1);
                info.set_estimated_cost(1e4);
                info.set_estimated_rows(16);
                Ok(true)
            }
            // The argument comes from another table of a join: SQLite must read it first.
            None if unusable => Ok(false),
            None => {
                info.set_idx_num(0);
                info.set_estimated_cost(1e12);
                Ok(true)
            }
        }
    }

    fn filter(
        shared: &Arc<Shared>,
        idx_num: c_int,
        _idx_str: Option<&str>,
        args: &Filters<'_>,
    ) -> rusqlite::Result<Self> {
        if idx_num == 0 {
            return Err(rusqlite::Error::ModuleError(format!(
                "{}(id) needs the id of a slice",
                T::NAME
            )));
        }
        let (target, scan) = match arg(args, 0, false)? {
            Arg::Int(id) => match key_of(id) {
                Some(k) => (id, T::scan(shared, k)?),
                None => (id, None),
            },
            Arg::Null => (0, None),
            Arg::Other => {
                return Err(rusqlite::Error::ModuleError(format!(
                    "{}(id): the id must be an integer (a slice's id)",
                    T::NAME
                )));
            }
        };
        let mut rows = Self {
            shared: shared.clone(),
            scan,
            row: None,
            target,
            data: RefCell::new(None),
            kind: std::marker::PhantomData,
        };
        rows.next()?;
        Ok(rows)
    }

    fn next(&mut self) -> rusqlite::Result<()> {
        self.row = match &mut self.scan {
            Some(s) => s.next_row()?,
            None => None,
        };
        Ok(())
    }

    fn eof(&self) -> bool {
        self.row.is_none()
    }

    fn scan_all(_shared: &Arc<Shared>) -> rusqlite::Result<Self> {
        Err(rusqlite::Error::ModuleError(format!(
            "{}(id) needs the id of a slice",
            T::NAME
        )))
    }

    fn cell(&self, i: c_int) -> rusqlite::Result<ToSqlOutput<'_>> {
        match (&self.row, &self.scan) {
            (_, _) if i == ARG => Ok(self.target.into()),
            (Some(r), Some(s)) => slice_cell(i, r, s.label(r.label), &self.data, &self.shared),
            _ => Ok(Null.into()),
        }
    }

    fn rowid(&self) -> i64 {
        self.row.as_ref().map_or(0, |r| slice_id(r.key))
    }
}

#[cfg(test)]
pub(in crate::sql) mod tests {
    use formats::{
        Category, FrameAlloc, FrameEnd, FrameKey, FrameStart, Parent, Record, ThreadInfo,
    };

    use super::*;
    use crate::sql::SqlLog;
    use crate::sql::frames::Chain;
    use crate::sql::near::chain_near;
    use crate::{LogWriter, WriterOptions};

    const T0: u64 = 1_700_000_000_000_000_000;

    /// What a user sees of a row (labels as text: two scans number them apart).
    fn seen(scan: Option<FrameScan>) -> Vec<String> {
        let Some(mut scan) = scan else {
            return Vec::new();
        };
        let mut rows = Vec::new();
        while let Some(r) = scan.next_row().unwrap() {
            rows.push(format!(
                "{} {} {:?} {} {:?} d{} p{:?} {} c{} {:?} t{}",
                r.key,
                r.ts,
                r.dur,
                scan.label(r.label),
                r.category,
                r.depth,
                r.parent,
                r.parent_inferred,
                r.context,
                r.alloc,
                r.thread
            ));
        }
        rows.sort();
        rows
    }

    /// Compacts every segment of the log in `dir`, the newest too.
    pub(in crate::sql) fn compact_all(dir: &std::path::Path) {
        let all = crate::compact::CompactOptions {
            all: true,
            ..Default::default()
        };
        crate::compact::compact_log(dir, &all).unwrap();
    }

    /// Writes `requests` requests of each of two workers (two writers) into `dir`, raw, in
    /// segments of ~65 k records (a block or two each): a session frame open the whole log
    /// that every fifth request is under; requests whose root ends before its child's child
    /// starts; type 0 starts (parents inferred); threads that change every 2,500 requests
    /// (some segments start with no `thread_info` of their own); an id left unused after
    /// every 1,000th request.
    /// Returns, per worker, each request's (root, child, grandchild) ids and the session's.
    fn write_log(dir: &std::path::Path, requests: u32) -> Vec<(u8, u32, Vec<[u32; 3]>)> {
        let opts = WriterOptions {
            frames_segment_bytes: 2 << 20,
            compact: false,
            ..WriterOptions::default()
        };
        let writers = [
            LogWriter::open_with(dir, opts.clone()).unwrap(),
            LogWriter::open_with(dir, opts).unwrap(),
        ];
        let mut out = Vec::new();
        let mut next: Vec<u32> = writers.iter().map(|_| 1).collect();
        let start = |buf: &mut Vec<u8>, w, id, t, context, parent, label| {
            Record::Start(FrameStart {
                id,
                worker: w,
                timestamp: t,
                context,
                category: Category::HTTP,
                label,
                parent,
            })
            .encode_to_vec(buf)
        };
        let end = |buf: &mut Vec<u8>, w, id, t| {
            Record::End(FrameEnd {
                id,
                worker: w,
                timestamp: t,
            })
            .encode_to_vec(buf)
        };
        for (i, wr) in writers.iter().enumerate() {
            let w = wr.worker();
            let mut buf = Vec::new();
            start(&mut buf, w, 1, T0, 1, Parent::Root, "session");
            wr.append_frames(&buf).unwrap();
            next[i] = 2;
            out.push((w, 1, Vec::new()));
        }
        for r in 0..requests {
            for (i, wr) in writers.iter().enumerate() {
                let w = wr.worker();
                let mut buf = Vec::new();
                let t = T0 + 1_000 + u64::from(r) * 10_000;
                if r % 2_500 == 0 {
                    Record::ThreadInfo(ThreadInfo {
                        worker: w,
                        thread: 1 + (r / 2_500) % 3,
                        timestamp: t,
                        name: "worker",
                    })
                    .encode_to_vec(&mut buf);
                }
                let (root, a, b) = (next[i], next[i] + 1, next[i] + 2);
                // Every 1,000th request leaves an id unused (as threads reserving ids do).
                next[i] += if r % 1_000 == 999 { 4 } else { 3 };
                let (rp, ctx) = if r % 5 == 0 {
                    (Parent::Frame(1), 1)
                } else {
                    (Parent::Root, root)
                };
                let inferred = r % 11 == 3;
                let child_parent = |p| {
                    if inferred {
                        Parent::NotRecorded
                    } else {
                        Parent::Frame(p)
                    }
                };
                start(&mut buf, w, root, t, ctx, rp, "GET /users");
                start(&mut buf, w, a, t + 100, ctx, child_parent(root), "db/query");
                if r % 7 == 2 {
                    // The root ends first: its child's child starts under an ended root.
                    end(&mut buf, w, root, t + 200);
                    start(&mut buf, w, b, t + 300, ctx, child_parent(a), "cache/fill");
                } else {
                    start(&mut buf, w, b, t + 300, ctx, child_parent(a), "cache/fill");
                }
                Record::FrameAlloc(FrameAlloc {
                    id: a,
                    worker: w,
                    timestamp: t + 350,
                    allocs: u64::from(r % 3),
                    alloc_bytes: 64,
                    frees: 0,
                    freed_bytes: 0,
                })
                .encode_to_vec(&mut buf);
                end(&mut buf, w, b, t + 400);
                end(&mut buf, w, a, t + 500);
                if r % 7 != 2 {
                    end(&mut buf, w, root, t + 600);
                }
                wr.append_frames(&buf).unwrap();
                out[i].2.push([root, a, b]);
            }
        }
        for (i, wr) in writers.iter().enumerate() {
            let mut buf = Vec::new();
            end(
                &mut buf,
                wr.worker(),
                1,
                T0 + 1_000 + u64::from(requests) * 10_000,
            );
            wr.append_frames(&buf).unwrap();
            let _ = i;
        }
        out
    }

    #[test]
    fn ancestors_found_by_the_id_index_are_what_a_read_from_the_start_finds() {
        let dir = tempfile::tempdir().unwrap();
        let requests = 10_000;
        let workers = write_log(dir.path(), requests);
        let raw = SqlLog::open(dir.path()).unwrap();
        let probe = FrameKey::new(workers[0].0, workers[0].2[9_000][2]);
        assert!(
            chain_near(&raw.shared, probe).unwrap().is_none(),
            "raw segments have no id index"
        );
        compact_all(dir.path());
        let log = SqlLog::open(dir.path()).unwrap();
        let segments = crate::segments::list(dir.path(), formats::FileKind::FrameLog).unwrap();
        assert!(segments.len() >= 3, "{segments:?}");
        let mut targets = vec![
            (FrameKey::new(workers[1].0, 1), "the session: no ancestors"),
            (FrameKey::new(7, 5), "no such frame"),
            (
                FrameKey::new(workers[0].0, workers[0].2[4_999][2] + 1),
                "an unused id among used ones",
            ),
        ];
        // Every kind of request of worker 0; a few of worker 1 (the same log read by another
        // worker's records).
        let kinds = [
            0,
            2,
            3,
            3_001,
            4_502,
            5_005,
            6_001,
            7_002,
            8_003,
            9_001,
            9_602,
            requests - 1,
        ];
        for (i, &(w, _, ref reqs)) in workers.iter().enumerate() {
            let some = [3_001, 7_002, requests - 1];
            for &r in if i == 0 { &kinds[..] } else { &some[..] } {
                let [root, a, b] = reqs[r as usize];
                for id in [root, a, b]
                    .into_iter()
                    .skip(if r % 2 == 0 { 0 } else { 1 })
                {
                    targets.push((FrameKey::new(w, id), "a request's frame"));
                }
            }
        }
        // Where a read from the start begins: the first block of the first segment.
        let first_block = crate::reader::Position {
            segment: segments[0],
            offset: formats::HEADER_LEN as u64 + 32,
        };
        let mut later = 0;
        for (target, what) in targets {
            let found = chain_near(&log.shared, target).unwrap();
            if what.starts_with("an unused id") {
                assert!(
                    matches!(found, Some((None, _))),
                    "the index says it is not in the log without a read from the start"
                );
            }
            let slow = FrameScan::ancestors_of(&log.shared, target, None).unwrap();
            let wanted = |c: &Chain| {
                c.ancestors
                    .clone()
                    .filter(|k| !k.is_empty())
                    .map(|k| Wanted {
                        keys: Some(k.into_iter().collect()),
                        ..Wanted::default()
                    })
            };
            let slow_rows =
                seen(wanted(&slow).map(|w| FrameScan::new(&log.shared, w, false).unwrap()));
            // `slice where id = ?` from near its start: the row a read from the start gives.
            let by_key = || Wanted {
                key: Some(target),
                ..Wanted::default()
            };
            let slow_row = seen(Some(FrameScan::new(&log.shared, by_key(), false).unwrap()));
            match rows_near(&log.shared, target, |_| Some(by_key())).unwrap() {
                Near::Rows(scan) => assert_eq!(seen(Some(*scan)), slow_row, "{target} ({what})"),
                Near::Nothing => assert!(slow_row.is_empty(), "{target} ({what})"),
                Near::FromStart => assert!(slow.inferred, "{target} ({what}) read from the start"),
            }
            if slow.inferred {
                assert!(
                    found.is_none(),
                    "{target} ({what}): inferred parents need the whole log"
                );
                continue;
            }
            let (start, chain) =
                found.unwrap_or_else(|| panic!("{target} ({what}) found by the index"));
            assert_eq!(chain.ancestors, slow.ancestors, "{target} ({what})");
            let fast_rows = seen(
                wanted(&chain)
                    .map(|w| FrameScan::new_from(&log.shared, w, false, start.as_ref()).unwrap()),
            );
            assert_eq!(fast_rows, slow_rows, "{target} ({what})");
            if start.is_some_and(|s| s.pos > first_block) {
                later += 1;
            }
        }
        assert!(
            later >= 12,
            "only {later} lookups started past the first block"
        );
        // Through SQL: `id = ?` (from near the frame) against `+id = ?` (SQLite filters a
        // whole scan), with every column that follows from the records before the frame.
        let c = log.connection();
        let row = |sql: &str, id: i64| -> Vec<String> {
            let mut st = c.prepare(sql).unwrap();
            st.query_map([id], |r| {
                Ok(format!(
                    "{:?}",
                    (0..9)
                        .map(|i| r.get::<_, rusqlite::types::Value>(i))
                        .collect::<rusqlite::Result<Vec<_>>>()?
                ))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect()
        };
        let cols = "id, ts, dur, name, depth, parent_id, context_id, thread_id, allocs";
        for r in [3_001, 9_602] {
            let [_, a, b] = workers[0].2[r];
            for id in [a, b] {
                let id = slice_id(FrameKey::new(workers[0].0, id));
                let fast = row(&format!("select {cols} from slice where id = ?1"), id);
                assert_eq!(fast.len(), 1);
                assert_eq!(
                    fast,
                    row(&format!("select {cols} from slice where +id = ?1"), id)
                );
            }
        }
    }

    /// The rows without their threads (a damaged block's `thread_info` records are lost to
    /// a read from the start; the id index still knows them).
    fn threadless(rows: Vec<String>) -> Vec<String> {
        rows.into_iter()
            .map(|r| r[..r.rfind(" t").unwrap()].to_owned())
            .collect()
    }

    #[test]
    fn a_damaged_id_index_costs_speed_and_a_damaged_block_what_it_held() {
        use formats::compact::frames::{INDEX_ENTRY_LEN, TRAILER_LEN, Trailer};
        let dir = tempfile::tempdir().unwrap();
        let requests = 10_000;
        let workers = write_log(dir.path(), requests);
        compact_all(dir.path());
        let segments = crate::segments::list(dir.path(), formats::FileKind::FrameLog).unwrap();
        let path = |n| crate::segments::segment_path(dir.path(), formats::FileKind::FrameLog, n);
        let (w, _, reqs) = &workers[0];
        let key = |r: usize, i: usize| FrameKey::new(*w, reqs[r][i]);
        let (early, late) = (key(1_001, 2), key(requests as usize - 2, 2));
        let slow = |log: &SqlLog, target| {
            let chain = FrameScan::ancestors_of(&log.shared, target, None).unwrap();
            seen(chain.ancestors.filter(|k| !k.is_empty()).map(|k| {
                let wanted = Wanted {
                    keys: Some(k.into_iter().collect()),
                    ..Wanted::default()
                };
                FrameScan::new(&log.shared, wanted, false).unwrap()
            }))
        };
        let answer = |log: &SqlLog, target| seen(Ancestors::scan(&log.shared, target).unwrap());
        {
            let log = SqlLog::open(dir.path()).unwrap();
            assert!(chain_near(&log.shared, early).unwrap().is_some());
            assert!(chain_near(&log.shared, late).unwrap().is_some());
            assert_eq!(answer(&log, late), slow(&log, late));
            assert!(!answer(&log, late).is_empty());
        }
        // A byte in the middle of the first segment's id index: the lookups from there on
        // read from the log's start, and answer the same.
        let first = path(segments[0]);
        let mut bytes = std::fs::read(&first).unwrap();
        let t = Trailer::decode(&bytes, bytes.len() as u64).unwrap();
        let blocks = u32::from_le_bytes(
            bytes[t.index_offset as usize + 4..][..4]
                .try_into()
                .unwrap(),
        ) as usize;
        let ids_at = t.index_offset as usize + 12 + blocks * INDEX_ENTRY_LEN;
        let mid = (ids_at + bytes.len() - TRAILER_LEN) / 2;
        bytes[mid] ^= 0x21;
        std::fs::write(&first, &bytes).unwrap();
        let log = SqlLog::open(dir.path()).unwrap();
        for target in [early, late] {
            assert!(chain_near(&log.shared, target).unwrap().is_none());
            assert_eq!(answer(&log, target), slow(&log, target));
        }
        assert!(
            log.shared.damage.lock().0.is_empty(),
            "an id index is not records"
        );
        // Repaired, and a byte in the middle of the first block's body instead: its records
        // are lost to every reader; the rest answers as a read from the start does.
        bytes[mid] ^= 0x21;
        let body = formats::HEADER_LEN + formats::compact::frames::BLOCK_HEADER_LEN;
        bytes[body + 1_000] ^= 0x08;
        std::fs::write(&first, &bytes).unwrap();
        let log = SqlLog::open(dir.path()).unwrap();
        for target in [early, late, key(9_001, 1), key(7_002, 2)] {
            assert_eq!(
                threadless(answer(&log, target)),
                threadless(slow(&log, target)),
                "{target}"
            );
        }
        assert!(
            !log.shared.damage.lock().0.is_empty(),
            "the block is reported"
        );
    }
}
