//! The one implementation of SQLite's virtual-table interface that every table here shares:
//! a table is a [`Rows`] (its schema, its plan, a cursor's rows), and [`LogTab`] /
//! [`LogCursor`] adapt it to rusqlite's traits.
// rusqlite's VTab traits are `unsafe` to implement: SQLite casts its `sqlite3_vtab` and
// `sqlite3_vtab_cursor` pointers to these structs, so each must be `repr(C)` with that base
// first. That is the only unsafe code here (no unsafe block).
#![allow(unsafe_code)]

use std::borrow::Cow;
use std::ffi::{CStr, c_int};
use std::marker::PhantomData;
use std::sync::Arc;

use rusqlite::types::{Null, ToSqlOutput};
use rusqlite::vtab::{
    Context, Filters, IndexInfo, VTab, VTabConfig, VTabConnection, VTabCursor, sqlite3_vtab,
    sqlite3_vtab_cursor,
};

use super::Shared;

/// A table's rows, as a cursor walks them.
pub(crate) trait Rows: Sized {
    /// The `CREATE TABLE` statement that declares the columns.
    const SCHEMA: &'static CStr;
    /// Chooses how to scan for the constraints SQLite offers (xBestIndex).
    fn best_index(info: &mut IndexInfo) -> rusqlite::Result<bool>;
    /// Starts a scan with the plan `best_index` chose and its arguments (xFilter).
    fn filter(
        shared: &Arc<Shared>,
        idx_num: c_int,
        idx_str: Option<&str>,
        args: &Filters<'_>,
    ) -> rusqlite::Result<Self>;
    /// Moves to the next row.
    fn next(&mut self) -> rusqlite::Result<()>;
    /// Past the last row.
    fn eof(&self) -> bool;
    /// A scan of every row, without constraints (what the Parquet export reads).
    #[cfg_attr(not(feature = "parquet"), allow(dead_code))]
    fn scan_all(shared: &Arc<Shared>) -> rusqlite::Result<Self>;
    /// Column `i` of the current row: the one home of each column's value, for SQL and
    /// for the Parquet export.
    fn cell(&self, i: c_int) -> rusqlite::Result<ToSqlOutput<'_>>;
    /// The current row's rowid.
    fn rowid(&self) -> i64;
}

/// A virtual table over the log, read through `R`.
#[repr(C)]
pub(crate) struct LogTab<R> {
    /// SQLite's part; must be first.
    base: sqlite3_vtab,
    shared: Arc<Shared>,
    rows: PhantomData<fn() -> R>,
}

// SAFETY: `LogTab` is `repr(C)` with `sqlite3_vtab` first, as the trait requires.
unsafe impl<'vtab, R: Rows + 'vtab> VTab<'vtab> for LogTab<R> {
    type Aux = Arc<Shared>;
    type Cursor = LogCursor<'vtab, R>;

    fn connect(
        db: &mut VTabConnection,
        aux: Option<&Arc<Shared>>,
        _module: &[u8],
        _database: &[u8],
        _table: &[u8],
        _args: &[&[u8]],
    ) -> rusqlite::Result<(Cow<'static, CStr>, Self)> {
        let shared = aux.cloned().ok_or_else(|| {
            rusqlite::Error::ModuleError("table registered without its log".into())
        })?;
        // Reading a log has no side effect: usable from triggers and views.
        db.config(VTabConfig::Innocuous)?;
        Ok((
            Cow::Borrowed(R::SCHEMA),
            Self {
                base: sqlite3_vtab::default(),
                shared,
                rows: PhantomData,
            },
        ))
    }

    fn best_index(&self, info: &mut IndexInfo) -> rusqlite::Result<bool> {
        R::best_index(info)
    }

    fn open(&'vtab mut self) -> rusqlite::Result<LogCursor<'vtab, R>> {
        Ok(LogCursor {
            base: sqlite3_vtab_cursor::default(),
            shared: self.shared.clone(),
            rows: None,
            tab: PhantomData,
        })
    }
}

/// A scan of a [`LogTab`].
#[repr(C)]
pub(crate) struct LogCursor<'vtab, R> {
    /// SQLite's part; must be first.
    base: sqlite3_vtab_cursor,
    shared: Arc<Shared>,
    rows: Option<R>,
    tab: PhantomData<&'vtab ()>,
}

// SAFETY: `LogCursor` is `repr(C)` with `sqlite3_vtab_cursor` first, as the trait requires.
unsafe impl<R: Rows> VTabCursor for LogCursor<'_, R> {
    fn filter(
        &mut self,
        idx_num: c_int,
        idx_str: Option<&str>,
        args: &Filters<'_>,
    ) -> rusqlite::Result<()> {
        // A new scan drops the old one first (its reader and maps).
        self.rows = None;
        self.rows = Some(R::filter(&self.shared, idx_num, idx_str, args)?);
        Ok(())
    }

    fn next(&mut self) -> rusqlite::Result<()> {
        match &mut self.rows {
            Some(r) => r.next(),
            None => Ok(()),
        }
    }

    fn eof(&self) -> bool {
        self.rows.as_ref().is_none_or(R::eof)
    }

    fn column(&self, ctx: &mut Context, i: c_int) -> rusqlite::Result<()> {
        match &self.rows {
            Some(r) => ctx.set_result(&r.cell(i)?),
            None => ctx.set_result(rusqlite::types::Null),
        }
    }

    fn rowid(&self) -> rusqlite::Result<i64> {
        Ok(self.rows.as_ref().map_or(0, R::rowid))
    }
}

/// An optional value as a cell (`None` is SQL's NULL).
pub(crate) fn opt<'a, T: Into<ToSqlOutput<'a>>>(v: Option<T>) -> ToSqlOutput<'a> {
    v.map_or(ToSqlOutput::from(Null), Into::into)
}

/// Constraints of a plan, as xBestIndex found them and xFilter gets them back: which
/// constraint kinds are used (bits of `idx_num`), in the order of their arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    /// `column = value`.
    Eq,
    /// `column > value` or `>=` (read as `>=`; SQLite checks the row again).
    Lower,
    /// `column < value` or `<=` (read as `<=`).
    Upper,
}

/// Offers SQLite a plan that uses, per column, its equality and range constraints:
/// `columns` lists (column number, kinds it takes, bit of `idx_num` for each kind). Every
/// constraint used is handed to xFilter in the order of its bit, and SQLite still checks
/// each row (`omit` stays false), so a plan may read more than it needs, never less.
/// Returns the `idx_num` chosen.
pub(crate) fn plan_constraints(info: &mut IndexInfo, columns: &[(c_int, Bound, c_int)]) -> c_int {
    use rusqlite::vtab::IndexConstraintOp as Op;
    let mut chosen: Vec<(c_int, usize)> = Vec::new();
    let constraints: Vec<_> = info
        .constraints()
        .map(|c| (c.column(), c.operator(), c.is_usable()))
        .collect();
    for (i, (col, op, usable)) in constraints.into_iter().enumerate() {
        if !usable {
            continue;
        }
        let kind = match op {
            Op::SQLITE_INDEX_CONSTRAINT_EQ => Bound::Eq,
            Op::SQLITE_INDEX_CONSTRAINT_GT | Op::SQLITE_INDEX_CONSTRAINT_GE => Bound::Lower,
            Op::SQLITE_INDEX_CONSTRAINT_LT | Op::SQLITE_INDEX_CONSTRAINT_LE => Bound::Upper,
            _ => continue,
        };
        if let Some(&(_, _, bit)) = columns.iter().find(|&&(c, k, _)| c == col && k == kind)
            && !chosen.iter().any(|&(b, _)| b == bit)
        {
            chosen.push((bit, i));
        }
    }
    chosen.sort_unstable();
    let mut idx_num = 0;
    for (n, &(bit, i)) in chosen.iter().enumerate() {
        idx_num |= bit;
        let mut usage = info.constraint_usage(i);
        usage.set_argv_index(n as c_int + 1);
        usage.set_omit(false);
    }
    idx_num
}
