//! `ancestor_slice(id)` and `descendant_slice(id)`: table-valued functions returning `slice`
//! rows (Perfetto's names), found by following parents in one or two reads of the log.

use std::cell::RefCell;
use std::ffi::{CStr, c_int};
use std::sync::Arc;

use rusqlite::types::{Null, ToSqlOutput};
use rusqlite::vtab::{Filters, IndexConstraintOp, IndexInfo};

use super::frames::{FrameScan, SliceRow, Wanted, key_of, slice_id};
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
/// when it started (read up to its start, then again for their rows).
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
        let chain = FrameScan::ancestors_of(shared, target)?;
        match chain.ancestors {
            Some(keys) if !keys.is_empty() => {
                let wanted = Wanted {
                    keys: Some(keys.into_iter().collect()),
                    ..Wanted::default()
                };
                Ok(Some(FrameScan::new(shared, wanted, false)?))
            }
            _ => Ok(None),
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
