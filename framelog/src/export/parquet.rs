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

use crate::sql::{ContextTally, Rows, SqlLog, TABLES, TableVisitor};

/// Rows per row group, at most.
pub const ROW_GROUP_ROWS: usize = 1 << 20;
/// Bytes of buffered values per row group, at most (long frame data fills one sooner).
pub const ROW_GROUP_BYTES: usize = 32 << 20;

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
    columns: Vec<(String, Kind)>,
    /// Per column, the table's cell that holds its value (`None`: always null), when the
    /// table's rows are read directly.
    cells: Vec<Option<c_int>>,
}

/// The tables exported, in the order the export lists them: every table of the log
/// ([`TABLES`] without its last two, the tree functions, which take an argument).
const EXPORTED: &[&str] = TABLES.split_at(TABLES.len() - 2).0;

/// The tables exported: every table with a fixed column list (the tree functions take an
/// argument and are not tables of the log).
fn tables(log: &SqlLog, with_data: bool) -> rusqlite::Result<Vec<Table>> {
    let mut out = Vec::new();
    for &name in EXPORTED {
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
        let mut cells: Vec<Option<c_int>> = (0..columns.len() as c_int)
            .map(|i| (!skip(&columns[i as usize].0)).then_some(i))
            .collect();
        if name == "slice" {
            let context = columns.iter().position(|(n, _)| n == "context_id");
            cells.push(context.map(|i| i as c_int));
            columns.push(("root_id".into(), Kind::Int));
        }
        out.push(Table {
            name,
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
    /// Texts as indices into the column's [`Texts`]: the row's side hashes a text, the
    /// encoder's thread makes the values the writer takes.
    Text(Vec<u32>, Vec<i16>, Texts),
}

/// A text column's distinct short texts (labels, categories, levels: kept from group to
/// group) and this group's other texts (long ones, and any past [`Texts::MOST`]).
#[derive(Default)]
struct Texts {
    ids: rustc_hash::FxHashMap<Box<[u8]>, u32>,
    short: Vec<ByteArray>,
    other: Vec<ByteArray>,
    /// The values as the writer takes them (kept to reuse the allocation).
    values: Vec<ByteArray>,
}

impl Texts {
    /// At most this many short texts are kept, each at most [`Texts::LONGEST`] bytes.
    const MOST: usize = 4096;
    const LONGEST: usize = 128;
    /// An index into `other`, not `short`.
    const OTHER: u32 = 1 << 31;

    /// The index of text `t`.
    fn id(&mut self, t: &[u8]) -> u32 {
        if let Some(&i) = self.ids.get(t) {
            return i;
        }
        if t.len() <= Self::LONGEST && self.short.len() < Self::MOST {
            let i = self.short.len() as u32;
            self.short.push(ByteArray::from(t.to_vec()));
            self.ids.insert(t.into(), i);
            return i;
        }
        self.other(t.to_vec())
    }

    /// The index of a text used once.
    fn other(&mut self, t: Vec<u8>) -> u32 {
        self.other.push(ByteArray::from(t));
        Self::OTHER | (self.other.len() - 1) as u32
    }

    /// The bytes of text `id`.
    fn text(&self, id: u32) -> &[u8] {
        let v = if id & Self::OTHER != 0 {
            &self.other[(id & !Self::OTHER) as usize]
        } else {
            &self.short[id as usize]
        };
        v.data()
    }

    /// The values of indices `ids`, in `self.values`.
    fn values_of(&mut self, ids: &[u32]) -> &[ByteArray] {
        self.values.clear();
        let mut other = std::mem::take(&mut self.other).into_iter();
        for &i in ids {
            let v = if i & Self::OTHER != 0 {
                // Each is used once, in order.
                other.next().expect("an index per text")
            } else {
                self.short[i as usize].clone()
            };
            self.values.push(v);
        }
        &self.values
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
    #[inline(always)]
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
                x.push(texts.id(t));
                d.push(1);
                t.len() + 26
            }
            (Buf::Text(x, d, texts), ValueRef::Integer(i)) => {
                x.push(texts.other(i.to_string().into_bytes()));
                d.push(1);
                30
            }
            (Buf::Text(x, d, texts), ValueRef::Real(r)) => {
                x.push(texts.other(r.to_string().into_bytes()));
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
            Buf::Text(x, d, texts) => {
                x.clear();
                d.clear();
                texts.other.clear();
                texts.values.clear();
            }
        }
    }
}

/// Writes every table of the log in `dir` into `out` (created if missing), each file under a
/// temporary name renamed into place once whole. Without `with_data`, `slice.data` is null
/// (no data lookup per frame).
///
/// One read of the log writes `slice` and adds `context` up on the way; the small tables
/// (threads, processes, counters, messages: one more read) are written beside it on a second
/// thread, and each file's column chunks are encoded and compressed on a thread of their own
/// while the next row group fills.
pub fn export_parquet(
    dir: &Path,
    out: &Path,
    with_data: bool,
) -> Result<Vec<Written>, ParquetError> {
    export_in_groups(dir, out, with_data, Groups::DEFAULT)
}

/// How big a row group gets, at most.
#[derive(Debug, Clone, Copy)]
struct Groups {
    rows: usize,
    bytes: usize,
}

impl Groups {
    const DEFAULT: Self = Self {
        rows: ROW_GROUP_ROWS,
        bytes: ROW_GROUP_BYTES,
    };
}

/// [`export_parquet`] with row groups of at most `groups`.
fn export_in_groups(
    dir: &Path,
    out: &Path,
    with_data: bool,
    groups: Groups,
) -> Result<Vec<Written>, ParquetError> {
    let log = SqlLog::open(dir)?;
    std::fs::create_dir_all(out).map_err(|e| ParquetError::Write {
        path: out.to_owned(),
        source: Box::new(e),
    })?;
    let (mut frames, others): (Vec<Table>, Vec<Table>) = tables(&log, with_data)?
        .into_iter()
        .partition(|t| matches!(t.name, "slice" | "context"));
    let (Some(context), Some(slice)) = (frames.pop(), frames.pop()) else {
        unreachable!("EXPORTED names slice, then context");
    };
    let (mut written, damage) = std::thread::scope(|s| {
        let others = std::thread::Builder::new()
            .name("parquet tables".into())
            .spawn_scoped(s, move || -> Result<_, ParquetError> {
                let log = SqlLog::open(dir)?;
                let mut written = Vec::new();
                for t in &others {
                    written.push(write_log_table(&log, t, out, groups, None)?);
                }
                Ok((written, log.take_damage()))
            })
            .map_err(|e| ParquetError::Write {
                path: out.to_owned(),
                source: Box::new(e),
            })?;
        let mut tally = ContextTally::new();
        let mut written = vec![write_log_table(
            &log,
            &slice,
            out,
            groups,
            Some(&mut tally),
        )?];
        let path = out.join("context.parquet");
        let rows = WriteTable {
            table: &context,
            path: &path,
            groups,
            tally: None,
        }
        .visit(tally.into_rows()?)?;
        written.push(Written {
            table: context.name,
            rows,
            path,
        });
        let (more, mut damage) = others
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))?;
        written.extend(more);
        let mut seen: rustc_hash::FxHashSet<_> =
            damage.iter().map(|d| (d.path.clone(), d.offset)).collect();
        for d in log.take_damage() {
            if seen.insert((d.path.clone(), d.offset)) {
                damage.push(d);
            }
        }
        Ok::<_, ParquetError>((written, damage))
    })?;
    written.sort_by_key(|w| EXPORTED.iter().position(|n| *n == w.table));
    for d in damage {
        eprintln!("framelog: {d}");
    }
    Ok(written)
}

/// Writes the log's table `t` into `out/<name>.parquet`, counting its frames' contexts in
/// `tally` if it is `slice`.
fn write_log_table(
    log: &SqlLog,
    t: &Table,
    out: &Path,
    groups: Groups,
    tally: Option<&mut ContextTally>,
) -> Result<Written, ParquetError> {
    let path = out.join(format!("{}.parquet", t.name));
    let rows = log
        .visit_table(
            t.name,
            WriteTable {
                table: t,
                path: &path,
                groups,
                tally,
            },
        )
        .expect("one of the log's tables")??;
    Ok(Written {
        table: t.name,
        rows,
        path,
    })
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
#[inline(always)]
fn value_of<'a>(out: &'a ToSqlOutput<'a>) -> ValueRef<'a> {
    match out {
        ToSqlOutput::Borrowed(v) => *v,
        ToSqlOutput::Owned(v) => v.into(),
        _ => ValueRef::Null,
    }
}

/// Writes one row group's buffered columns as its column chunks (encoding, statistics and
/// compression happen here), leaving the buffers empty for the next group.
fn write_group(
    writer: &mut SerializedFileWriter<File>,
    bufs: &mut [Buf],
) -> Result<(), parquet::errors::ParquetError> {
    let mut rg = writer.next_row_group()?;
    for b in bufs.iter_mut() {
        let mut col = rg.next_column()?.expect("one column per buffer");
        match b {
            Buf::Int(x, d) => col.typed::<Int64Type>().write_batch(x, Some(d), None),
            Buf::Real(x, d) => col.typed::<DoubleType>().write_batch(x, Some(d), None),
            Buf::Text(x, d, texts) => {
                col.typed::<ByteArrayType>()
                    .write_batch(texts.values_of(x), Some(d), None)
            }
        }?;
        col.close()?;
        b.clear();
    }
    rg.close()?;
    Ok(())
}

/// Where `slice`'s columns are that `context` adds up.
struct TallyColumns {
    id: usize,
    ts: usize,
    dur: usize,
    name: usize,
    context: usize,
}

impl TallyColumns {
    /// The columns of `t` (`slice`).
    fn of(t: &Table) -> Result<Self, FileError> {
        let at = |name: &str| {
            t.columns
                .iter()
                .position(|(n, _)| n == name)
                .ok_or_else(|| format!("{} has no column {name}", t.name))
        };
        Ok(Self {
            id: at("id")?,
            ts: at("ts")?,
            dur: at("dur")?,
            name: at("name")?,
            context: at("context_id")?,
        })
    }

    /// Counts the rows of one row group in their contexts.
    fn add_up(&self, bufs: &[Buf], tally: &mut ContextTally) -> Result<(), ParquetError> {
        let ints = |i: usize| match &bufs[i] {
            Buf::Int(x, d) => Some((x.as_slice(), d.as_slice())),
            _ => None,
        };
        let (Some(id), Some(ts), Some(dur), Some(context), Buf::Text(names, name_defs, texts)) = (
            ints(self.id),
            ints(self.ts),
            ints(self.dur),
            ints(self.context),
            &bufs[self.name],
        ) else {
            return Err(ParquetError::Read(rusqlite::Error::ModuleError(
                "slice's columns are not of their types".into(),
            )));
        };
        // Each column holds values for its non-null rows only.
        let mut cursors = [0usize; 4];
        let mut take = |k: usize, (x, d): (&[i64], &[i16]), row: usize| {
            (d[row] != 0).then(|| {
                cursors[k] += 1;
                x[cursors[k] - 1]
            })
        };
        let mut name_at = 0;
        for (row, &named) in name_defs.iter().enumerate() {
            let (id, ts, dur, context) = (
                take(0, id, row),
                take(1, ts, row),
                take(2, dur, row),
                take(3, context, row),
            );
            let name = if named != 0 {
                name_at += 1;
                texts.text(names[name_at - 1])
            } else {
                &[]
            };
            if let (Some(id), Some(ts), Some(context)) = (id, ts, context) {
                tally.add(
                    id,
                    context,
                    ts,
                    dur,
                    std::str::from_utf8(name).unwrap_or(""),
                )?;
            }
        }
        Ok(())
    }
}

/// The writing of one table's file: a visit of its rows.
struct WriteTable<'a> {
    table: &'a Table,
    path: &'a Path,
    groups: Groups,
    /// Where `slice`'s frames are counted by context.
    tally: Option<&'a mut ContextTally>,
}

impl TableVisitor for WriteTable<'_> {
    type Out = Result<u64, ParquetError>;

    fn visit<R: Rows>(self, mut rows: R) -> Self::Out {
        let (t, path, groups) = (self.table, self.path, self.groups);
        let werr = |e: FileError| ParquetError::Write {
            path: path.to_owned(),
            source: e,
        };
        let (tmp, writer) = open_file(t, path, groups).map_err(werr)?;
        let tally = match self.tally {
            Some(tally) => Some((tally, TallyColumns::of(t).map_err(werr)?)),
            None => None,
        };
        // Row groups are filled here and written on a thread of their own: one group fills
        // while the one before it is encoded (two groups' buffers at most, handed back and
        // forth). That thread also adds `slice`'s rows up by context, from the columns.
        let (total, writer) = std::thread::scope(|s| {
            let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<Vec<Buf>>(0);
            let (empty_tx, empty_rx) = std::sync::mpsc::channel::<Vec<Buf>>();
            let encoder = std::thread::Builder::new()
                .name(format!("parquet {}", t.name))
                .spawn_scoped(s, move || {
                    let (mut writer, mut tally) = (writer, tally);
                    for mut bufs in full_rx {
                        if let Some((tally, at)) = &mut tally {
                            at.add_up(&bufs, tally)?;
                        }
                        write_group(&mut writer, &mut bufs).map_err(|e| werr(e.into()))?;
                        if empty_tx.send(bufs).is_err() {
                            break;
                        }
                    }
                    Ok::<_, ParquetError>(writer)
                })
                .map_err(|e| werr(Box::new(e)))?;
            let new_bufs = || t.columns.iter().map(|(_, k)| Buf::new(*k)).collect();
            let mut bufs: Vec<Buf> = new_bufs();
            let (mut in_group, mut bytes, mut total) = (0usize, 0usize, 0u64);
            let send = |bufs: Vec<Buf>| -> Result<Vec<Buf>, ParquetError> {
                // A closed channel: the encoder stopped on an error, reported below.
                full_tx
                    .send(bufs)
                    .map_err(|_| werr("the column writer stopped".into()))?;
                Ok(empty_rx.try_recv().unwrap_or_else(|_| new_bufs()))
            };
            let filled = (|| -> Result<(), ParquetError> {
                while !rows.eof() {
                    let mut row_bytes = 0;
                    for (b, cell) in bufs.iter_mut().zip(&t.cells) {
                        row_bytes += match cell {
                            Some(i) => b.push(value_of(&rows.cell(*i)?)),
                            None => b.push(ValueRef::Null),
                        };
                    }
                    (in_group, bytes, total) = (in_group + 1, bytes + row_bytes, total + 1);
                    if in_group >= groups.rows || bytes >= groups.bytes {
                        bufs = send(std::mem::take(&mut bufs))?;
                        (in_group, bytes) = (0, 0);
                    }
                    rows.next()?;
                }
                if in_group > 0 {
                    send(std::mem::take(&mut bufs))?;
                }
                Ok(())
            })();
            drop(full_tx);
            let written = encoder
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))?;
            filled?;
            Ok::<_, ParquetError>((total, written))
        })?;
        writer.close().map_err(|e| werr(e.into()))?;
        super::persist(tmp, path).map_err(|e| werr(Box::new(e)))?;
        Ok(total)
    }
}

/// An error of the file being written.
type FileError = Box<dyn std::error::Error + Send + Sync>;

/// Creates the temporary file that becomes `path`, with a Parquet writer of `t`'s schema
/// (zstd; ids and times as deltas, durations split by byte).
fn open_file(
    t: &Table,
    path: &Path,
    groups: Groups,
) -> Result<(tempfile::NamedTempFile, SerializedFileWriter<File>), FileError> {
    let fields: Vec<String> = t
        .columns
        .iter()
        .map(|(n, k)| match k {
            Kind::Int => format!("OPTIONAL INT64 {n};"),
            Kind::Real => format!("OPTIONAL DOUBLE {n};"),
            Kind::Text => format!("OPTIONAL BYTE_ARRAY {n} (UTF8);"),
        })
        .collect();
    let schema = parse_message_type(&format!("message {} {{ {} }}", t.name, fields.join(" ")))?;
    let mut props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(3).expect("a valid level"),
        ))
        .set_max_row_group_row_count(Some(groups.rows));
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
    let tmp = super::temp_beside(path, ".framelog-parquet-")?;
    let file: File = tmp.as_file().try_clone()?;
    let writer = SerializedFileWriter::new(file, Arc::new(schema), Arc::new(props))?;
    Ok((tmp, writer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use formats::{Category, FrameEnd, FrameStart, Parent, Record, ThreadInfo};
    use parquet::file::reader::{FileReader, SerializedFileReader};

    /// Requests of three nested frames on two threads; every 97th root has a label of its
    /// own, longer than the texts a column keeps.
    fn write_log(dir: &Path, requests: u32) {
        let w = crate::LogWriter::open(dir).unwrap();
        let mut buf = Vec::new();
        let labels = ["GET /a", "db", "render", "GET /b", "cache", "encode"];
        for thread in 0..2u32 {
            Record::ThreadInfo(ThreadInfo {
                worker: w.worker(),
                thread,
                timestamp: 1,
                name: "worker",
            })
            .encode_to_vec(&mut buf);
        }
        for r in 0..requests {
            let root = 1 + r * 3;
            let t = 1_000 + u64::from(r) * 100;
            let long = format!("GET /{}", "x".repeat(200 + r as usize % 7));
            for depth in 0..3u32 {
                let label = match (depth, r % 97) {
                    (0, 0) => long.as_str(),
                    _ => labels[(r as usize % 2) * 3 + depth as usize],
                };
                Record::Start(FrameStart {
                    parent: match depth {
                        0 => Parent::Root,
                        d => Parent::Frame(root + d - 1),
                    },
                    id: root + depth,
                    worker: w.worker(),
                    timestamp: t + u64::from(depth),
                    context: root,
                    category: Category::HTTP,
                    label,
                })
                .encode_to_vec(&mut buf);
            }
            for depth in (0..3u32).rev() {
                // Every 10th request's root is still open at the end.
                if depth == 0 && r % 10 == 3 {
                    continue;
                }
                Record::End(FrameEnd {
                    id: root + depth,
                    worker: w.worker(),
                    timestamp: t + 50 - u64::from(depth) + u64::from(r % 5),
                })
                .encode_to_vec(&mut buf);
            }
        }
        w.append_frames(&buf).unwrap();
    }

    /// A file's rows as text, and its row groups.
    fn rows_of(path: &Path) -> (Vec<String>, usize) {
        let r = SerializedFileReader::new(File::open(path).unwrap()).unwrap();
        let groups = r.metadata().num_row_groups();
        let rows = r
            .get_row_iter(None)
            .unwrap()
            .map(|row| row.unwrap().to_string())
            .collect();
        (rows, groups)
    }

    /// Row groups of a few rows (the encoder's thread handing buffers back and forth, texts
    /// kept across groups) hold the rows one big group does, for every table.
    #[test]
    fn small_row_groups_hold_what_one_group_does() {
        let dir = tempfile::tempdir().unwrap();
        write_log(dir.path(), 400);
        let (one, small) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let whole = export_in_groups(dir.path(), one.path(), false, Groups::DEFAULT).unwrap();
        let tiny = Groups {
            rows: 7,
            bytes: 1 << 30,
        };
        let split = export_in_groups(dir.path(), small.path(), false, tiny).unwrap();
        let names = |w: &[Written]| w.iter().map(|w| (w.table, w.rows)).collect::<Vec<_>>();
        assert_eq!(names(&whole), names(&split));
        assert_eq!(
            whole.iter().map(|w| w.table).collect::<Vec<_>>(),
            [
                "slice",
                "thread",
                "process",
                "counter",
                "counter_track",
                "message",
                "context"
            ]
        );
        assert_eq!(whole[0].rows, 1200, "{:?}", names(&whole));
        assert_eq!(whole[6].rows, 400, "{:?}", names(&whole));
        for w in &whole {
            let (a, ga) = rows_of(&w.path);
            let (b, gb) = rows_of(&small.path().join(format!("{}.parquet", w.table)));
            assert_eq!(a, b, "{}", w.table);
            assert!(ga <= 1, "{}: {ga} groups", w.table);
            assert_eq!(gb, b.len().div_ceil(7), "{}", w.table);
        }
        let (slice, _) = rows_of(&whole[0].path);
        assert!(
            slice.iter().any(|r| r.contains(&"x".repeat(200))),
            "the long labels"
        );
        assert!(
            slice.iter().any(|r| r.contains("dur: null")),
            "the open roots"
        );
        // Every frame is in one context, and every context has its root's name.
        let r = SerializedFileReader::new(File::open(&whole[6].path).unwrap()).unwrap();
        let (mut frames, mut named) = (0, 0);
        for row in r.get_row_iter(None).unwrap() {
            use parquet::record::RowAccessor;
            let row = row.unwrap();
            frames += row.get_long(5).unwrap();
            named += i32::from(row.get_string(2).is_ok());
        }
        assert_eq!((frames, named), (1200, 400));
        let (context, _) = rows_of(&whole[6].path);
        assert!(context[0].contains("root_name: \"GET /x"), "{}", context[0]);
        assert!(
            context[1].contains("root_name: \"GET /b\""),
            "{}",
            context[1]
        );
    }

    /// Texts past the kept ones, and numbers in a text column, come back in row order.
    #[test]
    fn texts_past_the_kept_ones_keep_their_rows_order() {
        let mut b = Buf::new(Kind::Text);
        let long = "y".repeat(Texts::LONGEST + 1);
        for v in [
            ValueRef::Text(b"a"),
            ValueRef::Text(long.as_bytes()),
            ValueRef::Null,
            ValueRef::Integer(7),
            ValueRef::Text(b"a"),
            ValueRef::Text(b"b"),
        ] {
            b.push(v);
        }
        let Buf::Text(ids, defs, texts) = &mut b else {
            unreachable!()
        };
        assert_eq!(defs, &[1, 1, 0, 1, 1, 1]);
        let got: Vec<&[u8]> = texts.values_of(ids).iter().map(|v| v.data()).collect();
        let want: Vec<&[u8]> = vec![b"a", long.as_bytes(), b"7", b"a", b"b"];
        assert_eq!(got, want);
        b.clear();
        b.push(ValueRef::Text(b"b"));
        let Buf::Text(ids, _, texts) = &mut b else {
            unreachable!()
        };
        assert_eq!(ids, &[1], "kept across groups");
        assert_eq!(texts.values_of(ids)[0].data(), b"b");
    }
}
