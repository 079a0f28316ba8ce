//! The Query tab's SQL (`framelog sql`'s tables, `docs/SQL.md`) run on a thread of its own
//! over the open log directory, and what a result holds: the cells as shown, which columns
//! name frames, the rows kept.
//!
//! Which columns name a frame (a click on the row selects it), by name, case-insensitively:
//! `slice_id`, `parent_id`, `root_id` and `context_id` always; `id` when the SQL names
//! `slice`, `ancestor_slice`, `descendant_slice` or `context` and none of the tables whose
//! `id` is something else (`thread`, `process`, `counter`, `counter_track`, `message`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;
use web_time::Instant;

use formats::FrameKey;
use framelog::sql::rusqlite::fallible_iterator::FallibleIterator;
use framelog::sql::rusqlite::types::ValueRef;
use framelog::sql::rusqlite::{self, Batch};
use framelog::sql::{Interrupt, SqlLog};
use parking_lot::Mutex;

/// Rows a result keeps; the rest are counted, not kept.
pub const MAX_ROWS: usize = 10_000;

/// Characters of a value a cell shows (the whole value is on hover).
pub const CELL_CHARS: usize = 80;

/// Column names that hold a slice id whatever the table.
pub const FRAME_COLUMNS: [&str; 4] = ["slice_id", "parent_id", "root_id", "context_id"];

/// Tables (and table functions) whose `id` is a slice id.
pub const FRAME_TABLES: [&str; 4] = ["slice", "ancestor_slice", "descendant_slice", "context"];

/// Tables whose `id` is not a slice id.
pub const OTHER_TABLES: [&str; 5] = ["thread", "process", "counter", "counter_track", "message"];

/// One value of a result row.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A real.
    Real(f64),
    /// Text (invalid UTF-8 replaced).
    Text(String),
    /// A blob.
    Blob(Vec<u8>),
}

impl Cell {
    /// The value SQLite returned, as a cell.
    pub fn from_value(v: ValueRef<'_>) -> Self {
        match v {
            ValueRef::Null => Cell::Null,
            ValueRef::Integer(i) => Cell::Int(i),
            ValueRef::Real(x) => Cell::Real(x),
            ValueRef::Text(t) => Cell::Text(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(b) => Cell::Blob(b.to_vec()),
        }
    }

    /// The whole value as text, as `framelog sql` prints it (`NULL`; a blob in hex).
    pub fn text(&self) -> String {
        match self {
            Cell::Null => "NULL".to_owned(),
            Cell::Int(i) => i.to_string(),
            Cell::Real(x) => x.to_string(),
            Cell::Text(t) => t.clone(),
            Cell::Blob(b) => b.iter().map(|x| format!("{x:02x}")).collect(),
        }
    }

    /// What the grid shows: at most [`CELL_CHARS`] characters of the first line, with "…"
    /// when that is not the whole value (then `true`).
    pub fn shown(&self) -> (String, bool) {
        let full = self.text();
        let line = full.lines().next().unwrap_or("");
        let mut chars = line.char_indices();
        let cut_at = chars.nth(CELL_CHARS).map(|(i, _)| i);
        match cut_at {
            Some(i) => (format!("{}…", &line[..i]), true),
            None if line.len() < full.len() => (format!("{line}…"), true),
            None => (full, false),
        }
    }

    /// Whether it is a number (the grid right-aligns numbers).
    pub fn is_number(&self) -> bool {
        matches!(self, Cell::Int(_) | Cell::Real(_))
    }

    /// The frame it names, read as a slice id (an integer `worker << 32 | id`).
    pub fn frame(&self) -> Option<FrameKey> {
        match self {
            Cell::Int(i) => frame_key(*i),
            _ => None,
        }
    }
}

/// The slice id rule is `framelog sql`'s own (`worker << 32 | id`).
pub use framelog::sql::{frame_key, slice_id};

/// The SQL's words (identifiers and keywords, lowercased; double-quoted and bracketed
/// identifiers unquoted), without string literals and comments.
fn words(sql: &str) -> Vec<String> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'\'' {
            // A string literal ('' inside is a quote).
            i += 1;
            while i < b.len() {
                if b[i] == b'\'' {
                    if b.get(i + 1) == Some(&b'\'') {
                        i += 2;
                        continue;
                    }
                    break;
                }
                i += 1;
            }
            i += 1;
        } else if c == b'-' && b.get(i + 1) == Some(&b'-') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                i += 1;
            }
            i += 2;
        } else if matches!(c, b'"' | b'`' | b'[') {
            let close = if c == b'[' { b']' } else { c };
            let start = i + 1;
            i = start;
            while i < b.len() && b[i] != close {
                i += 1;
            }
            out.push(sql[start..i.min(b.len())].to_ascii_lowercase());
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80 {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] >= 0x80) {
                i += 1;
            }
            out.push(sql[start..i].to_ascii_lowercase());
        } else {
            i += 1;
        }
    }
    out
}

/// Which of a result's columns hold slice ids, by the module's rule: `names` are the result's
/// column names, `sql` the text that was run.
pub fn frame_columns(sql: &str, names: &[String]) -> Vec<bool> {
    let words = words(sql);
    let names_any = |tables: &[&str]| words.iter().any(|w| tables.contains(&w.as_str()));
    let id_is_frame = names_any(&FRAME_TABLES) && !names_any(&OTHER_TABLES);
    names
        .iter()
        .map(|n| {
            let n = n.to_ascii_lowercase();
            FRAME_COLUMNS.contains(&n.as_str()) || (id_is_frame && n == "id")
        })
        .collect()
}

/// A statement's rows: the first `max` kept, every one counted.
#[derive(Debug)]
pub struct KeptRows {
    max: usize,
    /// The rows kept, in the order they came.
    pub rows: Vec<Vec<Cell>>,
    /// Every row the statement returned.
    pub total: u64,
}

impl KeptRows {
    /// Keeps at most `max` rows.
    pub fn new(max: usize) -> Self {
        Self {
            max,
            rows: Vec::new(),
            total: 0,
        }
    }

    /// Whether the next row is kept (else it is only counted: no need to read its values).
    pub fn wants_more(&self) -> bool {
        self.rows.len() < self.max
    }

    /// Counts a row, keeping it while there is room.
    pub fn push(&mut self, row: Vec<Cell>) {
        if self.wants_more() {
            self.rows.push(row);
        }
        self.total += 1;
    }

    /// Counts a row that is not kept.
    pub fn count(&mut self) {
        self.total += 1;
    }

    /// Whether rows were left out.
    pub fn cut(&self) -> bool {
        self.total > self.rows.len() as u64
    }
}

/// What a query returned: the last statement with columns (the ones before it ran too).
#[derive(Debug)]
pub struct QueryResult {
    /// The columns' names (none when no statement returns rows, e.g. `create temp table`).
    pub columns: Vec<String>,
    /// Which columns hold slice ids.
    pub frame_columns: Vec<bool>,
    /// The rows (at most [`MAX_ROWS`]) and their count.
    pub rows: KeptRows,
    /// Statements run.
    pub statements: usize,
}

impl QueryResult {
    /// The frame row `i` names: its first slice-id column holding one.
    pub fn row_frame(&self, i: usize) -> Option<FrameKey> {
        let row = self.rows.rows.get(i)?;
        row.iter()
            .zip(&self.frame_columns)
            .filter(|(_, f)| **f)
            .find_map(|(c, _)| c.frame())
    }
}

/// Why a query gave no rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryError {
    /// SQLite refused or failed a statement: its message.
    Sql(String),
    /// The user stopped it.
    Stopped,
    /// The log could not be opened for SQL.
    Open(String),
}

/// A query's outcome.
#[derive(Debug)]
pub struct Finished {
    /// The SQL that ran.
    pub sql: String,
    /// From the request to the last row.
    pub elapsed: Duration,
    /// Damage the readers skipped (one line a place), as `framelog sql` prints it.
    pub damage: Vec<String>,
    /// The rows, or why there are none.
    pub result: Result<QueryResult, QueryError>,
}

/// SQLite's message for `e` (what the sqlite3 shell would say: `near "selec": syntax error`).
fn sql_message(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(_, Some(m)) => m.clone(),
        rusqlite::Error::SqlInputError { msg, .. } => msg.clone(),
        other => other.to_string(),
    }
}

/// Runs every statement of `sql` on `log`; `stop` set ends it as stopped.
fn run_statements(log: &SqlLog, sql: &str, stop: &AtomicBool) -> Result<QueryResult, QueryError> {
    let stopped = |e: rusqlite::Error| {
        if stop.load(Ordering::Relaxed) {
            QueryError::Stopped
        } else {
            QueryError::Sql(sql_message(&e))
        }
    };
    let mut batch = Batch::new(log.connection(), sql);
    let mut statements = 0;
    let mut last = None;
    while let Some(mut stmt) = batch.next().map_err(stopped)? {
        if stop.load(Ordering::Relaxed) {
            return Err(QueryError::Stopped);
        }
        statements += 1;
        let names: Vec<String> = stmt.column_names().map(str::to_owned).collect();
        let mut rows = stmt.query([]).map_err(stopped)?;
        let mut kept = KeptRows::new(if names.is_empty() { 0 } else { MAX_ROWS });
        while let Some(row) = rows.next().map_err(stopped)? {
            if stop.load(Ordering::Relaxed) {
                return Err(QueryError::Stopped);
            }
            if kept.wants_more() {
                let cells = (0..names.len())
                    .map(|i| row.get_ref(i).map(Cell::from_value))
                    .collect::<rusqlite::Result<_>>()
                    .map_err(stopped)?;
                kept.push(cells);
            } else {
                kept.count();
            }
        }
        if !names.is_empty() {
            last = Some((names, kept));
        }
    }
    if statements == 0 {
        return Err(QueryError::Sql("nothing to run: the query is empty".into()));
    }
    let (columns, rows) = last.unwrap_or_else(|| (Vec::new(), KeptRows::new(0)));
    Ok(QueryResult {
        frame_columns: frame_columns(sql, &columns),
        columns,
        rows,
        statements,
    })
}

/// A query sent to the thread.
struct Job {
    sql: String,
    stop: Arc<AtomicBool>,
    repaint: Option<egui::Context>,
}

/// The query running: when it was asked for and its stop flag.
struct Running {
    started: Instant,
    stop: Arc<AtomicBool>,
}

/// A thread running SQL over one log directory, one query at a time, on one connection
/// (temporary tables a query creates stay for the next).
pub struct QueryRunner {
    dir: PathBuf,
    jobs: Option<mpsc::Sender<Job>>,
    done: mpsc::Receiver<Finished>,
    interrupt: Arc<Mutex<Option<Interrupt>>>,
    running: Option<Running>,
}

impl QueryRunner {
    /// Starts the thread for the log in `dir` (the log is opened by the first query).
    pub fn new(dir: &Path) -> Self {
        let (jobs, rx) = mpsc::channel::<Job>();
        let (tx, done) = mpsc::channel();
        let interrupt = Arc::new(Mutex::new(None));
        let (d, i) = (dir.to_owned(), interrupt.clone());
        let spawned = std::thread::Builder::new()
            .name("query".into())
            .spawn(move || work(&d, &rx, &tx, &i));
        Self {
            dir: dir.to_owned(),
            jobs: spawned.is_ok().then_some(jobs),
            done,
            interrupt,
            running: None,
        }
    }

    /// The log directory it queries.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Runs `sql` (ignored while a query runs); `repaint` is asked for a frame when it ends.
    pub fn run(&mut self, sql: &str, repaint: Option<egui::Context>) {
        if self.running.is_some() {
            return;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let job = Job {
            sql: sql.to_owned(),
            stop: stop.clone(),
            repaint,
        };
        if self.jobs.as_ref().is_some_and(|j| j.send(job).is_ok()) {
            self.running = Some(Running {
                started: Instant::now(),
                stop,
            });
        }
    }

    /// Stops the running query.
    pub fn stop(&mut self) {
        if let Some(r) = &self.running {
            r.stop.store(true, Ordering::Relaxed);
            self.interrupt_now();
        }
    }

    fn interrupt_now(&self) {
        let handle = self.interrupt.lock();
        if let Some(i) = &*handle {
            i.interrupt();
        }
    }

    /// How long the running query has run, if one runs.
    pub fn running_for(&self) -> Option<Duration> {
        self.running.as_ref().map(|r| r.started.elapsed())
    }

    /// Whether a stop was asked for the running query.
    pub fn stopping(&self) -> bool {
        self.running
            .as_ref()
            .is_some_and(|r| r.stop.load(Ordering::Relaxed))
    }

    /// The running query's outcome once it is done. Until then, a stop asked for is asked
    /// again: SQLite forgets an interrupt that comes before its statement starts.
    pub fn poll(&mut self) -> Option<Finished> {
        match self.done.try_recv() {
            Ok(f) => {
                self.running = None;
                Some(f)
            }
            Err(mpsc::TryRecvError::Empty) => {
                if self.stopping() {
                    self.interrupt_now();
                }
                None
            }
            Err(mpsc::TryRecvError::Disconnected) => {
                let r = self.running.take()?;
                Some(Finished {
                    sql: String::new(),
                    elapsed: r.started.elapsed(),
                    damage: Vec::new(),
                    result: Err(QueryError::Sql("the query thread ended".into())),
                })
            }
        }
    }
}

impl Drop for QueryRunner {
    fn drop(&mut self) {
        // The thread ends after the query it runs, which is stopped; nobody waits for it.
        self.stop();
        self.jobs = None;
    }
}

/// The thread: opens the log on the first query (again after a failure: an empty directory
/// becomes a log when a program records into it), runs each query after a refresh (a
/// growing log's new records are read).
fn work(
    dir: &Path,
    jobs: &mpsc::Receiver<Job>,
    done: &mpsc::Sender<Finished>,
    interrupt: &Mutex<Option<Interrupt>>,
) {
    let mut log: Option<SqlLog> = None;
    for job in jobs {
        let t = Instant::now();
        if log.is_none() {
            match SqlLog::open(dir) {
                Ok(l) => {
                    *interrupt.lock() = Some(l.interrupt_handle());
                    log = Some(l);
                }
                Err(e) => {
                    let _ = done.send(Finished {
                        sql: job.sql,
                        elapsed: t.elapsed(),
                        damage: Vec::new(),
                        result: Err(QueryError::Open(e.to_string())),
                    });
                    if let Some(c) = job.repaint {
                        c.request_repaint();
                    }
                    continue;
                }
            }
        }
        let Some(l) = log.as_ref() else { continue };
        l.refresh();
        let result = if job.stop.load(Ordering::Relaxed) {
            Err(QueryError::Stopped)
        } else {
            run_statements(l, &job.sql, &job.stop)
        };
        let damage = l.take_damage().iter().map(ToString::to_string).collect();
        let finished = Finished {
            sql: job.sql,
            elapsed: t.elapsed(),
            damage,
            result,
        };
        if done.send(finished).is_err() {
            return;
        }
        if let Some(c) = job.repaint {
            c.request_repaint();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn id_names_a_frame_only_in_queries_on_frames() {
        let cols = names(&["id", "name", "parent_id", "ts"]);
        assert_eq!(
            frame_columns("select id, name, parent_id, ts from slice", &cols),
            [true, false, true, false]
        );
        assert_eq!(
            frame_columns(
                "SELECT ID FROM Descendant_Slice(4294967297)",
                &names(&["ID"])
            ),
            [true]
        );
        assert_eq!(
            frame_columns("select id from \"ancestor_slice\"(1)", &names(&["id"])),
            [true]
        );
        assert_eq!(
            frame_columns(
                "select id, root_name from context",
                &names(&["id", "root_name"])
            ),
            [true, false]
        );
        // `id` of a message, a thread, a counter is not a frame; `slice_id` still is.
        let cols = names(&["id", "slice_id", "context_id"]);
        assert_eq!(
            frame_columns(
                "select m.id, m.slice_id, s.context_id from message m join slice s on s.id = m.slice_id",
                &cols
            ),
            [false, true, true]
        );
        assert_eq!(
            frame_columns("select id from thread", &names(&["id"])),
            [false]
        );
        assert_eq!(
            frame_columns(
                "select id, root_id from counter_track",
                &names(&["id", "root_id"])
            ),
            [false, true]
        );
        // Words in strings and comments do not count; `slice_id` is not `slice`.
        assert_eq!(
            frame_columns("select 1 as id -- from slice", &names(&["id"])),
            [false]
        );
        assert_eq!(
            frame_columns("select 'slice' as id /* slice */", &names(&["id"])),
            [false]
        );
        assert_eq!(
            frame_columns("select slice_id as id from message", &names(&["id"])),
            [false]
        );
        assert_eq!(
            frame_columns("select 'it''s', id from slice", &names(&["'it''s'", "id"])),
            [false, true]
        );
        // A temporary copy made from `slice` in the same run.
        assert_eq!(
            frame_columns(
                "create temp table s as select * from slice; select id from s",
                &names(&["id"])
            ),
            [true]
        );
    }

    #[test]
    fn slice_ids_and_frame_keys_round_trip_and_other_integers_name_no_frame() {
        let k = FrameKey::new(3, 7);
        assert_eq!(slice_id(k), (3 << 32) | 7);
        assert_eq!(frame_key(slice_id(k)), Some(k));
        assert_eq!(
            frame_key(slice_id(FrameKey::new(255, u32::MAX))),
            Some(FrameKey::new(255, u32::MAX))
        );
        assert_eq!(frame_key(-1), None);
        assert_eq!(frame_key(256 << 32), None, "no worker 256");
        assert_eq!(Cell::Int(5).frame(), Some(FrameKey::new(0, 5)));
        assert_eq!(Cell::Real(5.0).frame(), None);
        assert_eq!(Cell::Text("5".into()).frame(), None);
        assert_eq!(Cell::Null.frame(), None);
    }

    #[test]
    fn cells_show_values_as_the_cli_prints_them_cut_when_long() {
        assert_eq!(Cell::from_value(ValueRef::Null), Cell::Null);
        assert_eq!(Cell::Null.shown(), ("NULL".to_owned(), false));
        assert_eq!(
            Cell::from_value(ValueRef::Integer(-42)).shown(),
            ("-42".into(), false)
        );
        assert_eq!(Cell::from_value(ValueRef::Real(1.5)).text(), "1.5");
        assert_eq!(
            Cell::from_value(ValueRef::Text(b"caf\xc3\xa9")).text(),
            "café"
        );
        assert_eq!(
            Cell::from_value(ValueRef::Blob(&[0xca, 0xfe])).text(),
            "cafe"
        );
        assert!(Cell::Int(1).is_number() && Cell::Real(0.5).is_number());
        assert!(!Cell::Text("1".into()).is_number() && !Cell::Null.is_number());
        // Exactly CELL_CHARS characters: whole. One more: cut, with the ellipsis.
        let exact = "é".repeat(CELL_CHARS);
        assert_eq!(Cell::Text(exact.clone()).shown(), (exact.clone(), false));
        let long = Cell::Text(format!("{exact}z"));
        assert_eq!(long.shown(), (format!("{exact}…"), true));
        assert_eq!(long.text().chars().count(), CELL_CHARS + 1);
        // A second line is left out, and said to be.
        assert_eq!(
            Cell::Text("select 1\nfrom slice".into()).shown(),
            ("select 1…".into(), true)
        );
    }

    #[test]
    fn rows_past_the_limit_are_counted_not_kept() {
        let mut k = KeptRows::new(2);
        assert!(!k.cut());
        for i in 0..5 {
            if k.wants_more() {
                k.push(vec![Cell::Int(i)]);
            } else {
                k.count();
            }
        }
        assert_eq!(k.rows, [vec![Cell::Int(0)], vec![Cell::Int(1)]]);
        assert_eq!(k.total, 5);
        assert!(k.cut());
        let mut k = KeptRows::new(2);
        k.push(vec![]);
        k.push(vec![]);
        assert!(!k.cut(), "exactly the limit");
    }

    #[test]
    fn a_row_names_the_frame_of_its_first_slice_id_column_holding_one() {
        let mut rows = KeptRows::new(10);
        rows.push(vec![Cell::Null, Cell::Text("x".into()), Cell::Int(9)]);
        rows.push(vec![Cell::Int(4), Cell::Int(1), Cell::Int(9)]);
        rows.push(vec![Cell::Null, Cell::Int(1), Cell::Null]);
        let r = QueryResult {
            columns: names(&["id", "name", "parent_id"]),
            frame_columns: vec![true, false, true],
            rows,
            statements: 1,
        };
        assert_eq!(r.row_frame(0), Some(FrameKey::new(0, 9)));
        assert_eq!(r.row_frame(1), Some(FrameKey::new(0, 4)));
        assert_eq!(r.row_frame(2), None, "the name column is no slice id");
        assert_eq!(r.row_frame(3), None);
    }

    #[test]
    fn queries_run_on_the_thread_and_errors_are_sqlites() {
        let dir = tempfile::tempdir().unwrap();
        let w = framelog::LogWriter::open(dir.path()).unwrap();
        drop(w);
        let mut q = QueryRunner::new(dir.path());
        let wait = |q: &mut QueryRunner| {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                if let Some(f) = q.poll() {
                    return f;
                }
                assert!(Instant::now() < deadline, "no answer");
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        q.run("select 1 as a, null as b, 'x' as c; select 2 as n", None);
        let f = wait(&mut q);
        let r = f.result.unwrap();
        assert_eq!(r.statements, 2);
        assert_eq!(r.columns, ["n"], "the last statement's rows");
        assert_eq!(r.rows.rows, [vec![Cell::Int(2)]]);
        q.run("select * from nope", None);
        assert_eq!(
            wait(&mut q).result.unwrap_err(),
            QueryError::Sql("no such table: nope".into())
        );
        q.run("select 1;\nselec 2", None);
        assert_eq!(
            wait(&mut q).result.unwrap_err(),
            QueryError::Sql("near \"selec\": syntax error".into())
        );
        q.run("  ", None);
        assert!(matches!(wait(&mut q).result, Err(QueryError::Sql(_))));
        // A temporary table stays for the next query (one connection).
        q.run("create temp table t as select 5 as x", None);
        assert!(wait(&mut q).result.unwrap().columns.is_empty());
        q.run("select x from t", None);
        assert_eq!(wait(&mut q).result.unwrap().rows.rows, [vec![Cell::Int(5)]]);
    }

    #[test]
    fn a_directory_that_is_no_log_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = QueryRunner::new(&dir.path().join("missing"));
        q.run("select 1", None);
        let deadline = Instant::now() + Duration::from_secs(60);
        let f = loop {
            if let Some(f) = q.poll() {
                break f;
            }
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(matches!(f.result, Err(QueryError::Open(_))), "{f:?}");
    }
}
