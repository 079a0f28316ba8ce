//! `framelog sql`: SQL over the log where it lies (an embedded SQLite with virtual tables).

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use framelog::sql::rusqlite::fallible_iterator::FallibleIterator;
use framelog::sql::rusqlite::types::ValueRef;
use framelog::sql::rusqlite::{self, Batch};
use framelog::sql::{SqlLog, TABLES};

/// Arguments of `framelog sql`.
#[derive(Args)]
pub struct SqlArgs {
    /// The log directory.
    dir: PathBuf,
    /// The SQL to run (several statements separated by `;`); without it, a prompt reads
    /// statements from standard input.
    query: Option<String>,
    /// Comma-separated values (RFC 4180), a header line first.
    #[arg(long, conflicts_with = "json")]
    csv: bool,
    /// One JSON array of objects per statement.
    #[arg(long)]
    json: bool,
}

/// How rows are printed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Table,
    Csv,
    Json,
}

/// Rows the aligned table reads before it fixes its column widths (the rest stream).
const WIDTH_ROWS: usize = 1000;

/// Runs the query (exit 2 if SQLite refuses it), or the prompt.
pub fn run(a: &SqlArgs) -> Result<ExitCode> {
    let log = SqlLog::open(&a.dir)?;
    let mode = if a.csv {
        Mode::Csv
    } else if a.json {
        Mode::Json
    } else {
        Mode::Table
    };
    let interrupt = log.interrupt_handle();
    // Ctrl-C stops the running statement, not the program (the prompt goes on).
    let _ = ctrlc::set_handler(move || interrupt.interrupt());
    let mut out = std::io::stdout().lock();
    match &a.query {
        Some(q) if q.trim_start().starts_with('.') => {
            Ok(match dot_command(&log, q.trim(), &mut out)? {
                Dot::Unknown => ExitCode::from(2),
                Dot::Done | Dot::Quit => ExitCode::SUCCESS,
            })
        }
        Some(q) => Ok(match run_sql(&log, q, mode, &mut out)? {
            true => ExitCode::SUCCESS,
            false => ExitCode::from(2),
        }),
        None => prompt(&log, mode, &mut out),
    }
}

/// Runs every statement of `sql`, printing rows; says SQLite's error on stderr and returns
/// false if one fails (the ones after it are not run).
fn run_sql(log: &SqlLog, sql: &str, mode: Mode, out: &mut impl Write) -> Result<bool> {
    log.refresh();
    let result = run_statements(log, sql, mode, out);
    for d in log.take_damage() {
        eprintln!("framelog: {d}");
    }
    match result {
        Ok(()) => Ok(true),
        Err(Failure::Sql(e)) => {
            eprintln!("framelog: error: {}", sql_message(&e));
            Ok(false)
        }
        Err(Failure::Output(e)) => Err(e.into()),
    }
}

enum Failure {
    Sql(rusqlite::Error),
    Output(std::io::Error),
}

impl From<rusqlite::Error> for Failure {
    fn from(e: rusqlite::Error) -> Self {
        Failure::Sql(e)
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Output(e)
    }
}

/// SQLite's message for `e` (what the sqlite3 shell would say).
fn sql_message(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(f, Some(m))
            if f.code == rusqlite::ErrorCode::OperationInterrupted =>
        {
            format!("{m} (Ctrl-C)")
        }
        rusqlite::Error::SqliteFailure(_, Some(m)) => m.clone(),
        other => other.to_string(),
    }
}

fn run_statements(
    log: &SqlLog,
    sql: &str,
    mode: Mode,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let conn = log.connection();
    let mut batch = Batch::new(conn, sql);
    while let Some(mut stmt) = batch.next()? {
        let names: Vec<String> = stmt.column_names().map(str::to_owned).collect();
        let mut rows = stmt.query([])?;
        if names.is_empty() {
            while rows.next()?.is_some() {}
            continue;
        }
        let mut printer = Printer::new(mode, names);
        while let Some(row) = rows.next()? {
            let cells: Vec<Cell> = (0..printer.names.len())
                .map(|i| row.get_ref(i).map(Cell::from))
                .collect::<rusqlite::Result<_>>()?;
            printer.row(cells, out)?;
        }
        printer.finish(out)?;
    }
    Ok(())
}

/// One value as printed.
#[derive(Clone)]
enum Cell {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl From<ValueRef<'_>> for Cell {
    fn from(v: ValueRef<'_>) -> Self {
        match v {
            ValueRef::Null => Cell::Null,
            ValueRef::Integer(i) => Cell::Int(i),
            ValueRef::Real(x) => Cell::Real(x),
            ValueRef::Text(t) => Cell::Text(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(b) => Cell::Blob(b.to_vec()),
        }
    }
}

impl Cell {
    /// As text (the table and CSV): NULL is empty in CSV, `NULL` in the table.
    fn text(&self, null: &str) -> String {
        match self {
            Cell::Null => null.to_owned(),
            Cell::Int(i) => i.to_string(),
            Cell::Real(x) => x.to_string(),
            Cell::Text(t) => t.clone(),
            Cell::Blob(b) => b.iter().map(|x| format!("{x:02x}")).collect(),
        }
    }

    fn json(&self) -> serde_json::Value {
        match self {
            Cell::Null => serde_json::Value::Null,
            Cell::Int(i) => (*i).into(),
            Cell::Real(x) => {
                serde_json::Number::from_f64(*x).map_or(serde_json::Value::Null, Into::into)
            }
            Cell::Text(t) => t.clone().into(),
            Cell::Blob(_) => self.text("").into(),
        }
    }

    fn right_aligned(&self) -> bool {
        matches!(self, Cell::Int(_) | Cell::Real(_))
    }
}

/// Prints one statement's rows.
struct Printer {
    mode: Mode,
    names: Vec<String>,
    /// The table's first rows, held until the widths are known.
    held: Vec<Vec<Cell>>,
    widths: Option<Vec<usize>>,
    rows: u64,
}

impl Printer {
    fn new(mode: Mode, names: Vec<String>) -> Self {
        Self {
            mode,
            names,
            held: Vec::new(),
            widths: None,
            rows: 0,
        }
    }

    fn row(&mut self, cells: Vec<Cell>, out: &mut impl Write) -> std::io::Result<()> {
        self.rows += 1;
        match self.mode {
            Mode::Csv => {
                if self.rows == 1 {
                    let header: Vec<Cell> = self.names.iter().cloned().map(Cell::Text).collect();
                    csv_line(&header, out)?;
                }
                csv_line(&cells, out)
            }
            Mode::Json => {
                let obj: serde_json::Map<String, serde_json::Value> = self
                    .names
                    .iter()
                    .cloned()
                    .zip(cells.iter().map(Cell::json))
                    .collect();
                let sep = if self.rows == 1 { "[\n" } else { ",\n" };
                write!(out, "{sep}{}", serde_json::Value::Object(obj))
            }
            Mode::Table => {
                if self.widths.is_none() {
                    self.held.push(cells);
                    if self.held.len() >= WIDTH_ROWS {
                        self.fix_widths(out)?;
                    }
                    return Ok(());
                }
                self.table_line(&cells, out)
            }
        }
    }

    fn fix_widths(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        let mut w: Vec<usize> = self.names.iter().map(|n| n.chars().count()).collect();
        for r in &self.held {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.text("NULL").chars().count());
            }
        }
        let header: Vec<String> = self.names.clone();
        let line: Vec<String> = header
            .iter()
            .zip(&w)
            .map(|(n, &width)| format!("{n:<width$}"))
            .collect();
        writeln!(out, "{}", line.join("  ").trim_end())?;
        let rule: Vec<String> = w.iter().map(|&n| "-".repeat(n)).collect();
        writeln!(out, "{}", rule.join("  "))?;
        self.widths = Some(w);
        for r in std::mem::take(&mut self.held) {
            self.table_line(&r, out)?;
        }
        Ok(())
    }

    fn table_line(&self, cells: &[Cell], out: &mut impl Write) -> std::io::Result<()> {
        let w = self.widths.as_ref().expect("fixed before lines");
        let parts: Vec<String> = cells
            .iter()
            .zip(w)
            .map(|(c, &width)| {
                let t = c.text("NULL").replace('\n', "\\n");
                if c.right_aligned() {
                    format!("{t:>width$}")
                } else {
                    format!("{t:<width$}")
                }
            })
            .collect();
        writeln!(out, "{}", parts.join("  ").trim_end())
    }

    fn finish(mut self, out: &mut impl Write) -> std::io::Result<()> {
        match self.mode {
            Mode::Table => {
                if self.widths.is_none() {
                    self.fix_widths(out)?;
                }
                eprintln!(
                    "({} row{})",
                    self.rows,
                    if self.rows == 1 { "" } else { "s" }
                );
            }
            Mode::Json if self.rows == 0 => writeln!(out, "[]")?,
            Mode::Json => writeln!(out, "\n]")?,
            Mode::Csv if self.rows == 0 => {
                let header: Vec<Cell> = self.names.iter().cloned().map(Cell::Text).collect();
                csv_line(&header, out)?;
            }
            Mode::Csv => {}
        }
        out.flush()
    }
}

/// One CSV record: fields quoted when they hold a comma, a quote or a line break.
fn csv_line(cells: &[Cell], out: &mut impl Write) -> std::io::Result<()> {
    let fields: Vec<String> = cells
        .iter()
        .map(|c| {
            let t = c.text("");
            if t.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", t.replace('"', "\"\""))
            } else {
                t
            }
        })
        .collect();
    write!(out, "{}\r\n", fields.join(","))
}

/// Where the prompt's lines come from: a line editor with history on a terminal, else plain
/// standard input (a script piped in).
enum Input {
    Editor {
        // Boxed: the editor is large, the plain reader small.
        editor: Box<rustyline::DefaultEditor>,
        history: Option<PathBuf>,
    },
    Plain(std::io::Lines<std::io::StdinLock<'static>>),
}

/// The history file: `FRAMELOG_SQL_HISTORY`, else `$XDG_STATE_HOME/framelog/sql_history`,
/// else `~/.local/state/framelog/sql_history`.
fn history_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FRAMELOG_SQL_HISTORY") {
        return Some(PathBuf::from(p));
    }
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
    Some(state.join("framelog").join("sql_history"))
}

impl Input {
    fn open() -> Input {
        let stdin = std::io::stdin();
        if stdin.is_terminal() && std::io::stderr().is_terminal() {
            match rustyline::DefaultEditor::new() {
                Ok(mut editor) => {
                    let history = history_path();
                    if let Some(p) = &history
                        && p.exists()
                        && let Err(e) = editor.load_history(p)
                    {
                        eprintln!("framelog: warning: reading history {}: {e}", p.display());
                    }
                    return Input::Editor {
                        editor: Box::new(editor),
                        history,
                    };
                }
                Err(e) => eprintln!("framelog: warning: no line editing ({e})"),
            }
        }
        Input::Plain(stdin.lock().lines())
    }

    fn is_terminal(&self) -> bool {
        matches!(self, Input::Editor { .. })
    }

    /// The next line (`prompt` shown on a terminal); `None` at the end of input. Ctrl-C at
    /// the prompt gives an empty line and clears what was typed (`cleared`).
    fn line(&mut self, prompt: &str, cleared: &mut bool) -> Option<std::io::Result<String>> {
        match self {
            Input::Plain(lines) => lines.next(),
            Input::Editor { editor, history } => match editor.readline(prompt) {
                Ok(line) => {
                    if !line.trim().is_empty() {
                        let _ = editor.add_history_entry(line.as_str());
                        if let Some(p) = history {
                            save_history(editor, p);
                        }
                    }
                    Some(Ok(line))
                }
                Err(rustyline::error::ReadlineError::Interrupted) => {
                    *cleared = true;
                    Some(Ok(String::new()))
                }
                Err(rustyline::error::ReadlineError::Eof) => None,
                Err(e) => Some(Err(std::io::Error::other(e))),
            },
        }
    }
}

/// Writes the history file (its directory made if missing); a failure is a warning.
fn save_history(editor: &mut rustyline::DefaultEditor, path: &std::path::Path) {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(e) = editor.save_history(path) {
        eprintln!("framelog: warning: writing history {}: {e}", path.display());
    }
}

/// Reads statements (ending with `;`) and dot commands from standard input: on a terminal,
/// with line editing and a history kept across runs (↑ recalls earlier lines).
fn prompt(log: &SqlLog, mode: Mode, out: &mut impl Write) -> Result<ExitCode> {
    let mut input = Input::open();
    let tty = input.is_terminal();
    if tty {
        eprintln!(
            "framelog sql on {}: end statements with ';'. .tables, .schema [TABLE], .quit; Ctrl-C stops a query; ↑ recalls earlier lines",
            log_name(log)
        );
    }
    let mut failed = false;
    let mut pending = String::new();
    loop {
        let shown = if pending.is_empty() { "sql> " } else { "...> " };
        let mut cleared = false;
        let Some(line) = input.line(shown, &mut cleared) else {
            break;
        };
        if cleared {
            pending.clear();
            continue;
        }
        let line = line?;
        let trimmed = line.trim();
        if pending.is_empty() && trimmed.starts_with('.') {
            match dot_command(log, trimmed, out)? {
                Dot::Quit => break,
                Dot::Done => {}
                Dot::Unknown => failed = true,
            }
            continue;
        }
        pending.push_str(&line);
        pending.push('\n');
        if pending.trim_end().ends_with(';') {
            let sql = std::mem::take(&mut pending);
            failed |= !run_sql(log, &sql, mode, out)?;
        }
    }
    if !pending.trim().is_empty() {
        failed |= !run_sql(log, &pending, mode, out)?;
    }
    Ok(if failed {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// What a dot command did.
enum Dot {
    Done,
    Quit,
    /// Not a command (said on stderr).
    Unknown,
}

/// Runs a dot command (`.tables`, `.schema [TABLE]`, `.help`, `.quit`): at the prompt, or
/// given as the query.
fn dot_command(log: &SqlLog, line: &str, out: &mut impl Write) -> Result<Dot> {
    let mut words = line.split_whitespace();
    match words.next() {
        Some(".quit" | ".exit") => return Ok(Dot::Quit),
        Some(".tables") => writeln!(out, "{}", TABLES.join("  "))?,
        Some(".schema") => {
            let only = words.next();
            if let Some(o) = only
                && !TABLES.contains(&o)
            {
                eprintln!(
                    "framelog: error: no table {o} (the tables: {})",
                    TABLES.join(", ")
                );
                return Ok(Dot::Unknown);
            }
            for t in TABLES.iter().filter(|t| only.is_none_or(|o| o == **t)) {
                writeln!(out, "{}", schema_of(log, t)?)?;
            }
        }
        Some(".help") => writeln!(out, ".tables  .schema [TABLE]  .quit")?,
        Some(other) => {
            eprintln!("framelog: error: unknown command {other} (.tables, .schema, .quit)");
            return Ok(Dot::Unknown);
        }
        None => {}
    }
    Ok(Dot::Done)
}

fn log_name(_log: &SqlLog) -> String {
    "the log".into()
}

/// A table's columns as a `CREATE` statement (`.schema`).
fn schema_of(log: &SqlLog, table: &str) -> Result<String> {
    let conn = log.connection();
    let mut q = conn.prepare(&format!(
        "select name, type, hidden from pragma_table_xinfo('{table}')"
    ))?;
    let cols: Vec<String> = q
        .query_map([], |r| {
            let (name, ty, hidden): (String, String, i64) = (r.get(0)?, r.get(1)?, r.get(2)?);
            Ok(if hidden != 0 {
                format!("{name} HIDDEN")
            } else {
                format!("{name} {ty}")
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(format!("CREATE TABLE {table}({});", cols.join(", ")))
}
