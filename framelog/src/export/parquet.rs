//! Parquet export (feature `parquet`): every SQL table ([`crate::sql`]) as one Parquet file
//! named after it (`slice.parquet`, …), with the same ids and columns, so DuckDB, Spark,
//! Polars or ClickHouse answer the same queries. Rows stream from the tables' own cursors
//! (the cells SQL shows, without SQLite's statement machinery per row) into row groups of at
//! most [`ROW_GROUP_ROWS`] rows or [`ROW_GROUP_BYTES`] of values (zstd pages; ids and times
//! as deltas, durations split by byte): memory stays bounded whatever the log's size.
//! `slice.parquet` also has `root_id` (the frame's context root) beside `parent_id` and
//! `depth`, so engines need no recursion.

use std::ffi::c_int;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::ColumnPath;
use rusqlite::types::{ToSqlOutput, ValueRef};

use crate::sql::SqlLog;

/// Rows per row group, at most.
pub const ROW_GROUP_ROWS: usize = 1 << 20;
/// Bytes of buffered values per row group, at most (long frame data fills one sooner).
pub const ROW_GROUP_BYTES: usize = 64 << 20;

/// A column's Parquet type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    Real,
    Text,
}

/// A table and its columns: (name, type), in `SELECT` order.
struct Table {
    name: &'static str,
    /// The query that reads it through SQL (for a view, which has no rows of its own).
    select: String,
    columns: Vec<(String, Kind)>,
    /// Per column, the table's cell that holds its value (`None`: always null), when the
    /// table's rows are read directly.
    cells: Vec<Option<c_int>>,
}

/// The tables exported: every table with a fixed column list (the tree functions take an
/// argument and are not tables of the log).
fn tables(log: &SqlLog, with_data: bool) -> rusqlite::Result<Vec<Table>> {
    let mut out = Vec::new();
    for name in [
        "slice",
        "thread",
        "process",
        "counter",
        "counter_track",
        "message",
        "context",
    ] {
        let conn = log.connection();
        let mut q = conn.prepare(&format!(
            "select name, type from pragma_table_xinfo('{name}') where hidden = 0"
        ))?;
        let mut columns: Vec<(String, Kind)> = q
            .query_map([], |r| {
                let (n, t): (String, String) = (r.get(0)?, r.get(1)?);
                Ok((n, t))
            })?
            .map(|c| {
                c.map(|(n, t)| {
                    let kind = match t.as_str() {
                        "TEXT" => Kind::Text,
                        "REAL" => Kind::Real,
                        _ => Kind::Int,
                    };
                    (n, kind)
                })
            })
            .collect::<rusqlite::Result<_>>()?;
        let skip = |n: &str| n == "data" && !with_data;
        let mut exprs: Vec<String> = columns
            .iter()
            .map(|(n, _)| {
                if skip(n) {
                    "NULL AS data".to_owned()
                } else {
                    format!("\"{n}\"")
                }
            })
            .collect();
        let mut cells: Vec<Option<c_int>> = (0..columns.len() as c_int)
            .map(|i| (!skip(&columns[i as usize].0)).then_some(i))
            .collect();
        if name == "slice" {
            exprs.push("context_id AS root_id".into());
            let context = columns.iter().position(|(n, _)| n == "context_id");
            cells.push(context.map(|i| i as c_int));
            columns.push(("root_id".into(), Kind::Int));
        }
        out.push(Table {
            name,
            select: format!("SELECT {} FROM {name}", exprs.join(", ")),
            columns,
            cells,
        });
    }
    Ok(out)
}

/// Why an export stopped.
#[derive(Debug, thiserror::Error)]
pub enum ParquetError {
    /// Opening the log for SQL failed.
    #[error(transparent)]
    Open(#[from] crate::sql::SqlError),
    /// Reading a table failed (SQLite's message, which names the file for log errors).
    #[error("reading the log: {0}")]
    Read(#[from] rusqlite::Error),
    /// Writing a file failed.
    #[error("writing {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// What one file holds.
#[derive(Debug, Clone)]
pub struct Written {
    /// The table.
    pub table: &'static str,
    /// Rows written.
    pub rows: u64,
    /// The file.
    pub path: PathBuf,
}

/// One column's values of the row group being filled (nulls only in `defs`).
enum Buf {
    Int(Vec<i64>, Vec<i16>),
    Real(Vec<f64>, Vec<i16>),
    Text(Vec<ByteArray>, Vec<i16>, Texts),
}

/// Short texts seen before (labels, categories, levels), each one buffer shared by its rows.
#[derive(Default)]
struct Texts(rustc_hash::FxHashMap<Box<[u8]>, ByteArray>);

impl Texts {
    /// At most this many texts are kept, each at most [`Texts::LONGEST`] bytes.
    const MOST: usize = 4096;
    const LONGEST: usize = 128;

    fn get(&mut self, t: &[u8]) -> ByteArray {
        if t.len() > Self::LONGEST {
            return ByteArray::from(t.to_vec());
        }
        if let Some(b) = self.0.get(t) {
            return b.clone();
        }
        let b = ByteArray::from(t.to_vec());
        if self.0.len() < Self::MOST {
            self.0.insert(t.into(), b.clone());
        }
        b
    }
}

impl Buf {
    fn new(kind: Kind) -> Self {
        match kind {
            Kind::Int => Buf::Int(Vec::new(), Vec::new()),
            Kind::Real => Buf::Real(Vec::new(), Vec::new()),
            Kind::Text => Buf::Text(Vec::new(), Vec::new(), Texts::default()),
        }
    }

    /// Adds a value; returns its bytes.
    fn push(&mut self, v: ValueRef<'_>) -> usize {
        match (self, v) {
            (Buf::Int(_, d) | Buf::Real(_, d) | Buf::Text(_, d, _), ValueRef::Null) => {
                d.push(0);
                2
            }
            (Buf::Int(x, d), ValueRef::Integer(i)) => {
                x.push(i);
                d.push(1);
                10
            }
            (Buf::Int(x, d), ValueRef::Real(r)) => {
                x.push(r as i64);
                d.push(1);
                10
            }
            (Buf::Real(x, d), ValueRef::Real(r)) => {
                x.push(r);
                d.push(1);
                10
            }
            (Buf::Real(x, d), ValueRef::Integer(i)) => {
                x.push(i as f64);
                d.push(1);
                10
            }
            (Buf::Text(x, d, texts), ValueRef::Text(t) | ValueRef::Blob(t)) => {
                x.push(texts.get(t));
                d.push(1);
                t.len() + 26
            }
            (Buf::Text(x, d, _), ValueRef::Integer(i)) => {
                x.push(ByteArray::from(i.to_string().into_bytes()));
                d.push(1);
                30
            }
            (Buf::Text(x, d, _), ValueRef::Real(r)) => {
                x.push(ByteArray::from(r.to_string().into_bytes()));
                d.push(1);
                30
            }
            // A text in a numeric column (SQLite is loosely typed): no number to write.
            (Buf::Int(_, d) | Buf::Real(_, d), _) => {
                d.push(0);
                2
            }
        }
    }

    fn clear(&mut self) {
        match self {
            Buf::Int(x, d) => {
                x.clear();
                d.clear()
            }
            Buf::Real(x, d) => {
                x.clear();
                d.clear()
            }
            Buf::Text(x, d, _) => {
                x.clear();
                d.clear()
            }
        }
    }
}

/// Writes every table of the log in `dir` into `out` (created if missing), each file under a
/// temporary name renamed into place once whole. Without `with_data`, `slice.data` is null
/// (no data lookup per frame).
pub fn export_parquet(
    dir: &Path,
    out: &Path,
    with_data: bool,
) -> Result<Vec<Written>, ParquetError> {
    let log = SqlLog::open(dir)?;
    std::fs::create_dir_all(out).map_err(|e| ParquetError::Write {
        path: out.to_owned(),
        source: Box::new(e),
    })?;
    let mut written = Vec::new();
    for t in tables(&log, with_data)? {
        let path = out.join(format!("{}.parquet", t.name));
        let rows = write_table(&log, &t, &path)?;
        written.push(Written {
            table: t.name,
            rows,
            path,
        });
    }
    for d in log.take_damage() {
        eprintln!("framelog: {d}");
    }
    Ok(written)
}

/// The encoding of an integer column whose values nearly all differ (no dictionary: it
/// would only cost a hash per value before giving up), if not the default.
fn distinct_encoding(column: &str) -> Option<Encoding> {
    match column {
        // Ids and times: neighbours are close (rows come in file order), deltas are small.
        "id" | "ts" | "first_ts" | "last_ts" | "parent_id" | "context_id" | "root_id"
        | "slice_id" => Some(Encoding::DELTA_BINARY_PACKED),
        // Durations: neighbours are not close (a child's, then its parent's), but their
        // high bytes are alike; split by byte, zstd finds that (measured on a 1 M-frame
        // stress log, `dur` at zstd 3: 237 KB, against 523 KB as deltas and 378 KB plain).
        "dur" | "busy_ns" | "queued_ns" | "waiting_ns" => Some(Encoding::BYTE_STREAM_SPLIT),
        _ => None,
    }
}

/// The value a cell holds.
fn value_of<'a>(out: &'a ToSqlOutput<'a>) -> ValueRef<'a> {
    match out {
        ToSqlOutput::Borrowed(v) => *v,
        ToSqlOutput::Owned(v) => v.into(),
        _ => ValueRef::Null,
    }
}

/// The row groups of one file being written: each column's values buffered until a group
/// is full, then written as that group's column chunks.
struct RowGroups<'p> {
    writer: SerializedFileWriter<File>,
    bufs: Vec<Buf>,
    in_group: usize,
    bytes: usize,
    total: u64,
    path: &'p Path,
}

impl RowGroups<'_> {
    /// Counts the row whose values were pushed (`row_bytes` of them); writes a full group.
    fn row_done(&mut self, row_bytes: usize) -> Result<(), ParquetError> {
        self.bytes += row_bytes;
        self.in_group += 1;
        self.total += 1;
        if self.in_group >= ROW_GROUP_ROWS || self.bytes >= ROW_GROUP_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the buffered rows as one row group.
    fn flush(&mut self) -> Result<(), ParquetError> {
        if self.in_group == 0 {
            return Ok(());
        }
        let mut rg = self
            .writer
            .next_row_group()
            .map_err(|e| ParquetError::Write {
                path: self.path.to_owned(),
                source: e.into(),
            })?;
        let werr = |e: parquet::errors::ParquetError| ParquetError::Write {
            path: self.path.to_owned(),
            source: e.into(),
        };
        for b in self.bufs.iter_mut() {
            let mut col = rg
                .next_column()
                .map_err(werr)?
                .expect("one column per buffer");
            match b {
                Buf::Int(x, d) => col.typed::<Int64Type>().write_batch(x, Some(d), None),
                Buf::Real(x, d) => col.typed::<DoubleType>().write_batch(x, Some(d), None),
                Buf::Text(x, d, _) => col.typed::<ByteArrayType>().write_batch(x, Some(d), None),
            }
            .map_err(werr)?;
            col.close().map_err(werr)?;
            b.clear();
        }
        rg.close().map_err(werr)?;
        (self.in_group, self.bytes) = (0, 0);
        Ok(())
    }
}

fn write_table(log: &SqlLog, t: &Table, path: &Path) -> Result<u64, ParquetError> {
    let werr = |e: Box<dyn std::error::Error + Send + Sync>| ParquetError::Write {
        path: path.to_owned(),
        source: e,
    };
    let fields: Vec<String> = t
        .columns
        .iter()
        .map(|(n, k)| match k {
            Kind::Int => format!("OPTIONAL INT64 {n};"),
            Kind::Real => format!("OPTIONAL DOUBLE {n};"),
            Kind::Text => format!("OPTIONAL BYTE_ARRAY {n} (UTF8);"),
        })
        .collect();
    let schema = parse_message_type(&format!("message {} {{ {} }}", t.name, fields.join(" ")))
        .map_err(|e| werr(Box::new(e)))?;
    let mut props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(3).expect("a valid level"),
        ))
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS));
    for (n, encoding) in t
        .columns
        .iter()
        .filter(|(_, k)| *k == Kind::Int)
        .filter_map(|(n, _)| Some((n, distinct_encoding(n)?)))
    {
        props = props
            .set_column_dictionary_enabled(ColumnPath::from(n.as_str()), false)
            .set_column_encoding(ColumnPath::from(n.as_str()), encoding);
    }
    let props = props.build();
    let dirname = path.parent().unwrap_or(Path::new("."));
    let tmp = tempfile::Builder::new()
        .prefix(".framelog-parquet-")
        .tempfile_in(dirname)
        .map_err(|e| werr(Box::new(e)))?;
    let file: File = tmp.as_file().try_clone().map_err(|e| werr(Box::new(e)))?;
    let writer = SerializedFileWriter::new(file, Arc::new(schema), Arc::new(props))
        .map_err(|e| werr(Box::new(e)))?;
    let mut groups = RowGroups {
        writer,
        bufs: t.columns.iter().map(|(_, k)| Buf::new(*k)).collect(),
        in_group: 0,
        bytes: 0,
        total: 0,
        path,
    };
    match log.scan_table(t.name) {
        // A table of the log: its cursor's cells, without SQLite's statement machinery.
        Some(rows) => {
            let mut rows = rows?;
            while !rows.eof() {
                let mut row_bytes = 0;
                for (b, cell) in groups.bufs.iter_mut().zip(&t.cells) {
                    row_bytes += match cell {
                        Some(i) => b.push(value_of(&rows.cell(*i)?)),
                        None => b.push(ValueRef::Null),
                    };
                }
                groups.row_done(row_bytes)?;
                rows.next()?;
            }
        }
        // A view (`context`): SQLite computes it.
        None => {
            let mut stmt = log.connection().prepare(&t.select)?;
            let mut rows = stmt.query([])?;
            while let Some(row) = rows.next()? {
                let mut row_bytes = 0;
                for (i, b) in groups.bufs.iter_mut().enumerate() {
                    row_bytes += b.push(row.get_ref(i)?);
                }
                groups.row_done(row_bytes)?;
            }
        }
    }
    groups.flush()?;
    let total = groups.total;
    groups.writer.close().map_err(|e| werr(e.into()))?;
    // A temporary file is private (0600); the export is an ordinary file.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o644))
            .map_err(|e| werr(Box::new(e)))?;
    }
    tmp.persist(path).map_err(|e| werr(Box::new(e.error)))?;
    Ok(total)
}
