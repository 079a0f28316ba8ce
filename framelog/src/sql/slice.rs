//! The `slice` table: one row per frame (Perfetto's name and columns where they mean the
//! same), read by a [`FrameScan`] as SQLite asks for rows.

use std::cell::RefCell;
use std::ffi::{CStr, c_int};
use std::sync::Arc;

use rusqlite::types::{Null, ToSqlOutput};
use rusqlite::vtab::{Filters, IndexInfo};

use super::by_id::{self, ById};
use super::frames::{FrameScan, SliceRow, Wanted, key_of, slice_id, thread_id};
use super::near::{Near, rows_near};
use super::vtab::{Bound, Rows, opt, plan_constraints};
use super::{Arg, Shared, arg};
use crate::DataStore;

/// Columns of `slice` (the tree functions add a hidden argument).
macro_rules! slice_columns {
    () => {
        "id INTEGER, ts INTEGER, dur INTEGER, name TEXT, category TEXT, depth INTEGER, \
         parent_id INTEGER, context_id INTEGER, thread_id INTEGER, worker INTEGER, \
         allocs INTEGER, alloc_bytes INTEGER, frees INTEGER, freed_bytes INTEGER, data TEXT, \
         parent_inferred INTEGER, busy_ns INTEGER, queued_ns INTEGER, waiting_ns INTEGER, \
         polls INTEGER, slow_polls INTEGER"
    };
}
pub(crate) use slice_columns;

/// How many columns [`slice_columns`] lists (a table-valued function's hidden argument
/// comes after them).
pub(crate) const SLICE_COLUMNS: c_int = 21;

/// A `CREATE TABLE` statement as the C string SQLite takes.
macro_rules! schema {
    ($($part:expr),+) => {
        match ::std::ffi::CStr::from_bytes_with_nul(concat!($($part),+, "\0").as_bytes()) {
            Ok(c) => c,
            Err(_) => panic!("a schema holds no NUL"),
        }
    };
}
pub(crate) use schema;

const ID: c_int = 0;
const TS: c_int = 1;
const NAME: c_int = 3;
const DEPTH: c_int = 5;
const PARENT_ID: c_int = 6;
const CONTEXT_ID: c_int = 7;
const THREAD_ID: c_int = 8;
const PARENT_INFERRED: c_int = 15;

// Bits of `idx_num`: the constraints used, in the order of their arguments, and whether
// compact blocks outside the time range may be passed over.
const BY_ID: c_int = 1;
const TS_FROM: c_int = 2;
const TS_TO: c_int = 4;
const BY_NAME: c_int = 8;
const BY_CONTEXT: c_int = 16;
const SKIP_BLOCKS: c_int = 64;
const NO_TREE: c_int = 128;

/// Column `i` of a frame row named `name` (`data` looks up its data).
#[inline(always)]
pub(crate) fn slice_cell<'a>(
    i: c_int,
    r: &SliceRow,
    name: &'a str,
    data: &RefCell<Option<DataStore>>,
    shared: &Shared,
) -> rusqlite::Result<ToSqlOutput<'a>> {
    let alloc = |f: fn(&formats::FrameAlloc) -> u64| opt(r.alloc.as_ref().map(|a| f(a) as i64));
    Ok(match i {
        0 => slice_id(r.key).into(),
        1 => (r.ts as i64).into(),
        2 => opt(r.dur.map(|d| d as i64)),
        3 => name.into(),
        4 => match r.category.name() {
            Some(n) => n.into(),
            None => r.category.0.to_string().into(),
        },
        5 => r.depth.into(),
        6 => opt(r.parent.map(slice_id)),
        7 => slice_id(formats::FrameKey::new(r.key.worker, r.context)).into(),
        8 => thread_id(r.key.worker, r.thread).into(),
        9 => r.key.worker.into(),
        10 => alloc(|a| a.allocs),
        11 => alloc(|a| a.alloc_bytes),
        12 => alloc(|a| a.frees),
        13 => alloc(|a| a.freed_bytes),
        14 => {
            let mut store = data.borrow_mut();
            if store.is_none() {
                *store = Some(DataStore::open(shared.dir()).map_err(super::log_error)?);
            }
            let s = store.as_mut().expect("opened above");
            let doc = s.get(r.key);
            shared.add_damage(s.take_damage());
            match doc {
                Ok(doc) => opt(doc.map(super::bson_json)),
                // Damage costs the frames whose data it holds (reported with the rest of the
                // damage the query met), not the query.
                Err(crate::Error::Corrupt { .. }) => Null.into(),
                Err(e) => return Err(super::log_error(e)),
            }
        }
        15 => r.parent_inferred.into(),
        16..=20 => {
            // An asynchronous frame's split (its duration's three parts), its polls.
            let v = r.polls.as_ref().and_then(|p| {
                let split = p.split(r.dur?);
                Some(match i {
                    16 => split.busy_ns,
                    17 => split.queued_ns,
                    18 => split.waiting_ns,
                    19 => p.polls,
                    _ => p.slow_polls,
                })
            });
            opt(v.map(|v| i64::try_from(v).unwrap_or(i64::MAX)))
        }
        _ => Null.into(),
    })
}

/// A scan of `slice`.
pub(crate) struct SliceRows {
    shared: Arc<Shared>,
    scan: Option<FrameScan>,
    /// The frames by id the row came from, for a lookup answered from them.
    by_id: Option<Arc<ById>>,
    row: Option<SliceRow>,
    data: RefCell<Option<DataStore>>,
}

impl SliceRows {
    /// Rows from `scan` (`None`: no rows).
    pub(crate) fn over(shared: &Arc<Shared>, scan: Option<FrameScan>) -> rusqlite::Result<Self> {
        let mut rows = Self {
            shared: shared.clone(),
            scan,
            by_id: None,
            row: None,
            data: RefCell::new(None),
        };
        rows.next()?;
        Ok(rows)
    }
}

impl Rows for SliceRows {
    const SCHEMA: &'static CStr = schema!("CREATE TABLE slice(", slice_columns!(), ")");

    fn best_index(info: &mut IndexInfo) -> rusqlite::Result<bool> {
        let mut idx = plan_constraints(
            info,
            &[
                (ID, Bound::Eq, BY_ID),
                (TS, Bound::Lower, TS_FROM),
                (TS, Bound::Upper, TS_TO),
                (NAME, Bound::Eq, BY_NAME),
                (CONTEXT_ID, Bound::Eq, BY_CONTEXT),
            ],
        );
        // Depth, parents and threads follow from every record before a frame: a scan that
        // passes blocks over cannot give them.
        let used = info.col_used();
        let needs_all = [DEPTH, PARENT_ID, THREAD_ID, PARENT_INFERRED]
            .iter()
            .any(|&c| used & (1 << c) != 0);
        if idx & (TS_FROM | TS_TO) != 0 && !needs_all {
            idx |= SKIP_BLOCKS;
        }
        // Parents are followed for these columns only (a group by name or a sum of durations
        // does not pay for them).
        if [DEPTH, PARENT_ID, PARENT_INFERRED]
            .iter()
            .all(|&c| used & (1 << c) == 0)
        {
            idx |= NO_TREE;
        }
        let mut plan = Vec::new();
        if idx & BY_ID != 0 {
            plan.push(
                "id = ?: read from the block the id index places it in, else from the log's start to that frame's end (a join's later lookups: one read of the log)",
            );
        }
        match (idx & (TS_FROM | TS_TO), idx & SKIP_BLOCKS != 0) {
            (0, _) => {}
            (_, true) => plan.push("ts range: compact blocks outside it are not read"),
            (_, false) => plan.push(
                "ts range: rows filtered, every block read (depth, parent_id or thread_id is used)",
            ),
        }
        if idx & BY_NAME != 0 {
            plan.push("name = ?");
        }
        if idx & BY_CONTEXT != 0 {
            plan.push("context_id = ?");
        }
        if plan.is_empty() {
            plan.push("full scan of the log");
        }
        if idx & NO_TREE != 0 {
            plan.push("parents not followed (depth and parent_id unused)");
        }
        info.set_idx_num(idx);
        info.set_idx_str(&plan.join("; "));
        let cost = if idx & BY_ID != 0 {
            1e4
        } else if idx & SKIP_BLOCKS != 0 && idx & TS_FROM != 0 && idx & TS_TO != 0 {
            1e5
        } else if idx & (BY_NAME | BY_CONTEXT | TS_FROM | TS_TO) != 0 {
            1e6
        } else {
            1e7
        };
        info.set_estimated_cost(cost);
        info.set_estimated_rows(if idx & BY_ID != 0 {
            1
        } else {
            cost as i64 / 10
        });
        Ok(true)
    }

    fn filter(
        shared: &Arc<Shared>,
        idx_num: c_int,
        _idx_str: Option<&str>,
        args: &Filters<'_>,
    ) -> rusqlite::Result<Self> {
        let mut wanted = Wanted {
            no_tree: idx_num & NO_TREE != 0,
            ..Wanted::default()
        };
        let mut i = 0;
        let mut none = false;
        let mut next_arg = |lower: bool| {
            let a = arg(args, i, lower);
            i += 1;
            a
        };
        if idx_num & BY_ID != 0 {
            match next_arg(false)? {
                Arg::Int(id) => match key_of(id) {
                    Some(k) => wanted.key = Some(k),
                    None => none = true,
                },
                Arg::Null => none = true,
                Arg::Other => {}
            }
        }
        if idx_num & TS_FROM != 0 {
            match next_arg(true)? {
                Arg::Int(t) => wanted.ts_from = Some(t.max(0) as u64),
                Arg::Null => none = true,
                Arg::Other => {}
            }
        }
        if idx_num & TS_TO != 0 {
            match next_arg(false)? {
                Arg::Int(t) if t < 0 => none = true,
                Arg::Int(t) => wanted.ts_to = Some(t as u64),
                Arg::Null => none = true,
                Arg::Other => {}
            }
        }
        if idx_num & BY_NAME != 0 {
            match args.get::<rusqlite::types::Value>(i)? {
                rusqlite::types::Value::Text(t) => wanted.name = Some(t),
                rusqlite::types::Value::Null => none = true,
                // A number compared with a text column: SQLite decides, row by row.
                _ => {}
            }
            i += 1;
        }
        if idx_num & BY_CONTEXT != 0 {
            match arg(args, i, false)? {
                Arg::Int(id) => match key_of(id) {
                    Some(k) => wanted.context = Some(k),
                    None => none = true,
                },
                Arg::Null => none = true,
                Arg::Other => {}
            }
        }
        if let (Some(key), false) = (wanted.key, none)
            && let Some(ix) = by_id::index(shared)?
        {
            // SQLite checks the other constraints on the row (none is omitted).
            return Ok(Self {
                shared: shared.clone(),
                scan: None,
                row: ix.get(key),
                by_id: Some(ix),
                data: RefCell::new(None),
            });
        }
        if let (Some(key), false) = (wanted.key, none) {
            match rows_near(shared, key, |_| Some(wanted.clone()))? {
                Near::Rows(scan) => return Self::over(shared, Some(*scan)),
                Near::Nothing => return Self::over(shared, None),
                Near::FromStart => {}
            }
        }
        let scan = if none {
            None
        } else {
            Some(FrameScan::new(shared, wanted, idx_num & SKIP_BLOCKS != 0)?)
        };
        Self::over(shared, scan)
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

    fn scan_all(shared: &Arc<Shared>) -> rusqlite::Result<Self> {
        Self::over(
            shared,
            Some(FrameScan::new(shared, Wanted::default(), false)?),
        )
    }

    #[inline(always)]
    fn cell(&self, i: c_int) -> rusqlite::Result<ToSqlOutput<'_>> {
        let Some(r) = &self.row else {
            return Ok(Null.into());
        };
        let name = match (&self.scan, &self.by_id) {
            (Some(s), _) => s.label(r.label),
            (None, Some(ix)) => ix.label(r.label),
            (None, None) => return Ok(Null.into()),
        };
        slice_cell(i, r, name, &self.data, &self.shared)
    }

    fn rowid(&self) -> i64 {
        self.row.as_ref().map_or(0, |r| slice_id(r.key))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn slice_columns_counts_the_schema() {
        let n = slice_columns!().split(',').count();
        assert_eq!(n as std::ffi::c_int, super::SLICE_COLUMNS);
    }
}
