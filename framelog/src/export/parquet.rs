//! Parquet export (feature `parquet`): every SQL table ([`crate::sql`]) as one Parquet file
//! named after it (`slice.parquet`, …), with the same ids and columns, so DuckDB, Spark,
//! Polars or ClickHouse answer the same queries. Rows stream from the SQL tables into row
//! groups of at most [`ROW_GROUP_ROWS`] rows or [`ROW_GROUP_BYTES`] of values (zstd pages):
//! memory stays bounded whatever the log's size. `slice.parquet` also has `root_id` (the
//! frame's context root) beside `parent_id` and `depth`, so engines need no recursion.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::basic::{Compression, ZstdLevel};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use rusqlite::types::ValueRef;

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
    select: String,
    columns: Vec<(String, Kind)>,
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
                    // The context view's columns have no declared type: all integers but its
                    // root's name.
                    let kind = match t.as_str() {
                        "TEXT" => Kind::Text,
                        "REAL" => Kind::Real,
                        "" if n == "root_name" => Kind::Text,
                        _ => Kind::Int,
                    };
                    (n, kind)
                })
            })
            .collect::<rusqlite::Result<_>>()?;
        let mut exprs: Vec<String> = columns
            .iter()
            .map(|(n, _)| {
                if n == "data" && !with_data {
                    "NULL AS data".to_owned()
                } else {
                    format!("\"{n}\"")
                }
            })
            .collect();
        if name == "slice" {
            exprs.push("context_id AS root_id".into());
            columns.push(("root_id".into(), Kind::Int));
        }
        out.push(Table {
            name,
            select: format!("SELECT {} FROM {name}", exprs.join(", ")),
            columns,
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
    Text(Vec<ByteArray>, Vec<i16>),
}

impl Buf {
    fn new(kind: Kind) -> Self {
        match kind {
            Kind::Int => Buf::Int(Vec::new(), Vec::new()),
            Kind::Real => Buf::Real(Vec::new(), Vec::new()),
            Kind::Text => Buf::Text(Vec::new(), Vec::new()),
        }
    }

    /// Adds a value; returns its bytes.
    fn push(&mut self, v: ValueRef<'_>) -> usize {
        match (self, v) {
            (Buf::Int(_, d) | Buf::Real(_, d) | Buf::Text(_, d), ValueRef::Null) => {
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
            (Buf::Text(x, d), ValueRef::Text(t) | ValueRef::Blob(t)) => {
                x.push(ByteArray::from(t.to_vec()));
                d.push(1);
                t.len() + 26
            }
            (Buf::Text(x, d), ValueRef::Integer(i)) => {
                x.push(ByteArray::from(i.to_string().into_bytes()));
                d.push(1);
                30
            }
            (Buf::Text(x, d), ValueRef::Real(r)) => {
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
            Buf::Text(x, d) => {
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
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(3).expect("a valid level"),
        ))
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .build();
    let dirname = path.parent().unwrap_or(Path::new("."));
    let tmp = tempfile::Builder::new()
        .prefix(".framelog-parquet-")
        .tempfile_in(dirname)
        .map_err(|e| werr(Box::new(e)))?;
    let file: File = tmp.as_file().try_clone().map_err(|e| werr(Box::new(e)))?;
    let mut writer = SerializedFileWriter::new(file, Arc::new(schema), Arc::new(props))
        .map_err(|e| werr(Box::new(e)))?;
    let mut bufs: Vec<Buf> = t.columns.iter().map(|(_, k)| Buf::new(*k)).collect();
    let (mut in_group, mut bytes, mut total) = (0usize, 0usize, 0u64);
    let mut stmt = log.connection().prepare(&t.select)?;
    let mut rows = stmt.query([])?;
    let mut flush = |bufs: &mut Vec<Buf>| -> Result<(), ParquetError> {
        let mut rg = writer.next_row_group().map_err(|e| werr(Box::new(e)))?;
        for b in bufs.iter_mut() {
            let mut col = rg
                .next_column()
                .map_err(|e| werr(Box::new(e)))?
                .expect("one column per buffer");
            match b {
                Buf::Int(x, d) => col.typed::<Int64Type>().write_batch(x, Some(d), None),
                Buf::Real(x, d) => col.typed::<DoubleType>().write_batch(x, Some(d), None),
                Buf::Text(x, d) => col.typed::<ByteArrayType>().write_batch(x, Some(d), None),
            }
            .map_err(|e| werr(Box::new(e)))?;
            col.close().map_err(|e| werr(Box::new(e)))?;
            b.clear();
        }
        rg.close().map_err(|e| werr(Box::new(e)))?;
        Ok(())
    };
    while let Some(row) = rows.next()? {
        for (i, b) in bufs.iter_mut().enumerate() {
            bytes += b.push(row.get_ref(i)?);
        }
        in_group += 1;
        total += 1;
        if in_group >= ROW_GROUP_ROWS || bytes >= ROW_GROUP_BYTES {
            flush(&mut bufs)?;
            (in_group, bytes) = (0, 0);
        }
    }
    if in_group > 0 {
        flush(&mut bufs)?;
    }
    writer.close().map_err(|e| werr(Box::new(e)))?;
    // A temporary file is private (0600); the export is an ordinary file.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o644))
            .map_err(|e| werr(Box::new(e)))?;
    }
    tmp.persist(path).map_err(|e| werr(Box::new(e.error)))?;
    Ok(total)
}
