//! SQL over a log as it lies on disk (feature `sql`): an in-memory SQLite connection whose
//! tables are virtual tables reading the log's segments (raw and compact, a log still being
//! written, a damaged one) through [`crate::LogReader`], with Perfetto's table names where the
//! meaning is the same. `docs/SQL.md` describes the tables.
//!
//! ```no_run
//! let log = framelog::sql::SqlLog::open("my-log")?;
//! let mut q = log.connection().prepare("select name, count(*), sum(dur) from slice group by name")?;
//! let rows = q.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
//! for row in rows {
//!     println!("{:?}", row?);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod by_id;
mod catalog;
mod context;
mod events;
mod frames;
mod near;
mod slice;
mod tree;
mod vtab;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use rusqlite::Connection;
use rusqlite::vtab::{Filters, Module};

use crate::Damage;
#[cfg(feature = "parquet")]
pub(crate) use context::ContextTally;
use vtab::LogTab;
pub(crate) use vtab::Rows;

pub use frames::{key_of as frame_key, slice_id};
pub use rusqlite;

/// The tables and functions a connection has, in the order `.tables` lists them.
pub const TABLES: [&str; 9] = [
    "slice",
    "thread",
    "process",
    "counter",
    "counter_track",
    "message",
    "context",
    "ancestor_slice",
    "descendant_slice",
];

/// Damage found, and the places already reported (file, offset).
type DamageSeen = (Vec<Damage>, rustc_hash::FxHashSet<(PathBuf, u64)>);

/// What every table of one connection shares: the log, damage seen, the interrupt flag and
/// the catalog.
pub(crate) struct Shared {
    dir: PathBuf,
    damage: Mutex<DamageSeen>,
    interrupted: AtomicBool,
    catalog: Mutex<Option<Arc<catalog::Catalog>>>,
    lookups: Mutex<by_id::Lookups>,
}

impl Shared {
    /// The log directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Keeps damage a reader skipped, each place once (a query may read the log twice).
    pub(crate) fn add_damage(&self, found: Vec<Damage>) {
        if found.is_empty() {
            return;
        }
        let mut d = self.damage.lock();
        for x in found {
            if d.1.insert((x.path.clone(), x.offset)) {
                d.0.push(x);
            }
        }
    }

    /// An error once the connection was interrupted (a long read checks between chunks).
    pub(crate) fn check_interrupt(&self) -> rusqlite::Result<()> {
        if self.interrupted.load(Ordering::Relaxed) {
            return Err(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_INTERRUPT),
                Some("interrupted".into()),
            ));
        }
        Ok(())
    }

    /// The catalog, read on first use.
    pub(crate) fn catalog(&self) -> rusqlite::Result<Arc<catalog::Catalog>> {
        if let Some(c) = &*self.catalog.lock() {
            return Ok(c.clone());
        }
        let c = Arc::new(catalog::Catalog::read(self)?);
        *self.catalog.lock() = Some(c.clone());
        Ok(c)
    }
}

/// A reader's error as SQLite reports it (the statement fails with this message).
pub(crate) fn log_error(e: crate::Error) -> rusqlite::Error {
    rusqlite::Error::ModuleError(e.to_string())
}

/// A BSON document as JSON text (relaxed extended JSON: numbers stay numbers).
pub(crate) fn bson_json(doc: bson::Document) -> String {
    bson::Bson::Document(doc).into_relaxed_extjson().to_string()
}

/// A constraint's value as a scan can use it.
pub(crate) enum Arg {
    /// An integer (a real is rounded outward: the scan reads a little more, never less).
    Int(i64),
    /// NULL: nothing compares equal or in range.
    Null,
    /// Text or a blob: the scan does not filter; SQLite compares each row.
    Other,
}

/// Argument `i` of xFilter; `lower` says which way to round a real.
pub(crate) fn arg(args: &Filters<'_>, i: usize, lower: bool) -> rusqlite::Result<Arg> {
    use rusqlite::types::Value;
    Ok(match args.get::<Value>(i)? {
        Value::Integer(n) => Arg::Int(n),
        Value::Real(x) if x.is_nan() => Arg::Null,
        Value::Real(x) => Arg::Int(if lower { x.floor() } else { x.ceil() } as i64),
        Value::Null => Arg::Null,
        _ => Arg::Other,
    })
}

/// What the Parquet export does with one table's rows read without SQLite (the same cursor
/// and the same cells as SQL's; SQLite's statement machinery per row would cost more than
/// the read). Generic over the table, so each cell is a direct call the compiler can inline.
#[cfg_attr(not(feature = "parquet"), allow(dead_code))]
pub(crate) trait TableVisitor {
    /// What a visit returns.
    type Out;
    /// Reads `rows` to their end.
    fn visit<R: Rows>(self, rows: R) -> Self::Out;
}

/// Stops what a connection is running, from any thread ([`SqlLog::interrupt_handle`]).
pub struct Interrupt {
    sqlite: rusqlite::InterruptHandle,
    shared: Arc<Shared>,
}

impl Interrupt {
    /// Makes the running statement fail with "interrupted" (SQLite's `SQLITE_INTERRUPT`).
    pub fn interrupt(&self) {
        self.shared.interrupted.store(true, Ordering::Relaxed);
        self.sqlite.interrupt();
    }
}

/// A log open for SQL: an in-memory SQLite connection with the log's tables.
pub struct SqlLog {
    conn: Connection,
    shared: Arc<Shared>,
}

impl SqlLog {
    /// Opens the log in `dir` (its files are read by each query, never copied).
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, SqlError> {
        let dir = dir.as_ref().to_owned();
        if !crate::segments::is_log(&dir) {
            return Err(SqlError::Log(crate::Error::NotALog(dir)));
        }
        let shared = Arc::new(Shared {
            dir,
            damage: Mutex::default(),
            interrupted: AtomicBool::new(false),
            catalog: Mutex::new(None),
            lookups: Mutex::default(),
        });
        let conn = Connection::open_in_memory()?;
        register(&conn, &shared)?;
        Ok(Self { conn, shared })
    }

    /// The connection: prepare and run statements on it.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Before a query: forgets the catalog and the frames by id read by earlier ones (the log
    /// may have grown) and
    /// clears an interrupt.
    pub fn refresh(&self) {
        *self.shared.catalog.lock() = None;
        *self.shared.lookups.lock() = by_id::Lookups::default();
        self.shared.interrupted.store(false, Ordering::Relaxed);
    }

    /// Every row of the log's table `name`, read directly (no SQL) by `v`; `None` for a
    /// name that is not one of the log's tables.
    #[cfg_attr(not(feature = "parquet"), allow(dead_code))]
    pub(crate) fn visit_table<V: TableVisitor>(
        &self,
        name: &str,
        v: V,
    ) -> Option<rusqlite::Result<V::Out>> {
        use catalog::CatalogRows as Catalog;
        use events::EventRows as Events;
        let s = &self.shared;
        Some(match name {
            "slice" => slice::SliceRows::scan_all(s).map(|r| v.visit(r)),
            "thread" => Catalog::<catalog::Thread>::scan_all(s).map(|r| v.visit(r)),
            "process" => Catalog::<catalog::Process>::scan_all(s).map(|r| v.visit(r)),
            "counter_track" => Catalog::<catalog::CounterTrack>::scan_all(s).map(|r| v.visit(r)),
            "counter" => Events::<events::Counter>::scan_all(s).map(|r| v.visit(r)),
            "message" => Events::<events::Message>::scan_all(s).map(|r| v.visit(r)),
            "context" => context::ContextRows::scan_all(s).map(|r| v.visit(r)),
            _ => return None,
        })
    }

    /// Damage the readers skipped since the last call (each place once).
    pub fn take_damage(&self) -> Vec<Damage> {
        let mut d = self.shared.damage.lock();
        std::mem::take(&mut d.0)
    }

    /// A handle that interrupts the running statement from another thread (Ctrl-C).
    pub fn interrupt_handle(&self) -> Interrupt {
        Interrupt {
            sqlite: self.conn.get_interrupt_handle(),
            shared: self.shared.clone(),
        }
    }
}

/// Why a log could not be opened for SQL.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The directory is not a log.
    #[error(transparent)]
    Log(#[from] crate::Error),
    /// SQLite could not set the connection up.
    #[error("SQLite: {0}")]
    Sql(#[from] rusqlite::Error),
}

/// Registers every table on `conn`.
fn register(conn: &Connection, shared: &Arc<Shared>) -> rusqlite::Result<()> {
    type Catalog<T> = catalog::CatalogRows<T>;
    type Events<E> = events::EventRows<E>;
    type Tree<T> = tree::TreeRows<T>;
    const SLICE: Module<LogTab<slice::SliceRows>> = Module::eponymous_only_module();
    const THREAD: Module<LogTab<Catalog<catalog::Thread>>> = Module::eponymous_only_module();
    const PROCESS: Module<LogTab<Catalog<catalog::Process>>> = Module::eponymous_only_module();
    const TRACK: Module<LogTab<Catalog<catalog::CounterTrack>>> = Module::eponymous_only_module();
    const COUNTER: Module<LogTab<Events<events::Counter>>> = Module::eponymous_only_module();
    const MESSAGE: Module<LogTab<Events<events::Message>>> = Module::eponymous_only_module();
    const CONTEXT: Module<LogTab<context::ContextRows>> = Module::eponymous_only_module();
    const ANCESTORS: Module<LogTab<Tree<tree::Ancestors>>> = Module::eponymous_only_module();
    const DESCENDANTS: Module<LogTab<Tree<tree::Descendants>>> = Module::eponymous_only_module();
    conn.create_module(c"slice", &SLICE, Some(shared.clone()))?;
    conn.create_module(c"thread", &THREAD, Some(shared.clone()))?;
    conn.create_module(c"process", &PROCESS, Some(shared.clone()))?;
    conn.create_module(c"counter_track", &TRACK, Some(shared.clone()))?;
    conn.create_module(c"counter", &COUNTER, Some(shared.clone()))?;
    conn.create_module(c"message", &MESSAGE, Some(shared.clone()))?;
    conn.create_module(c"context", &CONTEXT, Some(shared.clone()))?;
    conn.create_module(c"ancestor_slice", &ANCESTORS, Some(shared.clone()))?;
    conn.create_module(c"descendant_slice", &DESCENDANTS, Some(shared.clone()))
}
