//! `counter` and `message`: the log's plot values and messages, one row per record, streamed
//! from the reader in file order.

use std::collections::VecDeque;
use std::ffi::{CStr, c_int};
use std::sync::Arc;

use formats::{FrameKey, Record};
use rusqlite::types::{Null, ToSqlOutput};
use rusqlite::vtab::{Filters, IndexInfo};
use rustc_hash::FxHashMap;

use super::catalog::track_id;
use super::frames::{slice_id, thread_id};
use super::slice::schema;
use super::vtab::{Bound, Rows, opt, plan_constraints};
use super::{Arg, Shared, arg};
use crate::{LogReader, Position};

/// The id of the record at `pos`: segment in bits 40 and up, raw offset below (the same
/// after compaction, which keeps every record's position).
fn record_id(pos: Position) -> i64 {
    (i64::from(pos.segment) << 40) | (pos.offset as i64 & ((1 << 40) - 1))
}

/// A row of an event table.
pub(crate) trait Event: Sized {
    /// Its `CREATE TABLE` (`id`, `ts` first).
    const SCHEMA: &'static CStr;
    /// Columns whose value depends on records before this one (then no block is skipped).
    const NEEDS_ALL: &'static [c_int];
    /// The row a record makes, if it makes one; `thread` is its worker's current thread.
    fn from(pos: Position, rec: &Record<'_>, thread: u32) -> Option<Self>;
    /// Its time, ns.
    fn ts(&self) -> u64;
    /// Column `i`.
    fn cell(&self, i: c_int) -> ToSqlOutput<'_>;
    /// Its id.
    fn id(&self) -> i64;
}

/// A plot value as a `counter` row.
pub(crate) struct Counter {
    id: i64,
    ts: u64,
    track: i64,
    value: f64,
}

impl Event for Counter {
    const SCHEMA: &'static CStr =
        schema!("CREATE TABLE counter(id INTEGER, ts INTEGER, track_id INTEGER, value REAL)");
    const NEEDS_ALL: &'static [c_int] = &[];

    fn from(pos: Position, rec: &Record<'_>, _thread: u32) -> Option<Self> {
        match rec {
            Record::Plot(p) => Some(Counter {
                id: record_id(pos),
                ts: p.timestamp,
                track: track_id(p.worker, p.name),
                value: p.value,
            }),
            _ => None,
        }
    }
    fn ts(&self) -> u64 {
        self.ts
    }
    fn cell(&self, i: c_int) -> ToSqlOutput<'_> {
        match i {
            0 => self.id.into(),
            1 => (self.ts as i64).into(),
            2 => self.track.into(),
            // NaN is a gap: SQL's "no value".
            3 => opt((!self.value.is_nan()).then_some(self.value)),
            _ => Null.into(),
        }
    }
    fn id(&self) -> i64 {
        self.id
    }
}

/// A log message as a `message` row.
pub(crate) struct Message {
    id: i64,
    ts: u64,
    worker: u8,
    thread: u32,
    frame: u32,
    context: u32,
    level: formats::Level,
    text: String,
    fields: Option<Vec<u8>>,
}

impl Event for Message {
    const SCHEMA: &'static CStr = schema!(
        "CREATE TABLE message(id INTEGER, ts INTEGER, worker INTEGER, thread_id INTEGER, slice_id INTEGER, context_id INTEGER, level TEXT, text TEXT, fields TEXT)"
    );
    const NEEDS_ALL: &'static [c_int] = &[3];

    fn from(pos: Position, rec: &Record<'_>, thread: u32) -> Option<Self> {
        match rec {
            Record::Message(m) => Some(Message {
                id: record_id(pos),
                ts: m.timestamp,
                worker: m.worker,
                thread,
                frame: m.frame,
                context: m.context,
                level: m.level,
                text: m.text.to_owned(),
                fields: m.fields.map(<[u8]>::to_vec),
            }),
            _ => None,
        }
    }
    fn ts(&self) -> u64 {
        self.ts
    }
    fn cell(&self, i: c_int) -> ToSqlOutput<'_> {
        let frame = |id: u32| opt((id != 0).then(|| slice_id(FrameKey::new(self.worker, id))));
        match i {
            0 => self.id.into(),
            1 => (self.ts as i64).into(),
            2 => self.worker.into(),
            3 => thread_id(self.worker, self.thread).into(),
            4 => frame(self.frame),
            5 => frame(self.context),
            6 => self.level.name().into_owned().into(),
            7 => self.text.as_str().into(),
            8 => opt(self
                .fields
                .as_deref()
                .and_then(|b| bson::Document::from_reader(b).ok())
                .map(super::bson_json)),
            _ => Null.into(),
        }
    }
    fn id(&self) -> i64 {
        self.id
    }
}

const TS_FROM: c_int = 1;
const TS_TO: c_int = 2;
const SKIP_BLOCKS: c_int = 4;

/// A scan of an event table.
pub(crate) struct EventRows<E> {
    shared: Arc<Shared>,
    reader: Option<LogReader>,
    thread: FxHashMap<u8, u32>,
    from: u64,
    to: u64,
    out: VecDeque<E>,
    row: Option<E>,
}

impl<E: Event> EventRows<E> {
    fn fill(&mut self) -> rusqlite::Result<()> {
        self.shared.check_interrupt()?;
        let Some(reader) = &mut self.reader else {
            return Ok(());
        };
        let before = reader.position();
        let (thread, out, from, to) = (&mut self.thread, &mut self.out, self.from, self.to);
        let n = reader.read_some(1 << 20, |pos, rec| {
            if let Record::ThreadInfo(t) = rec {
                thread.insert(t.worker, t.thread);
            }
            let worker = match &rec {
                Record::Message(m) => m.worker,
                _ => 0,
            };
            if let Some(e) = E::from(pos, &rec, thread.get(&worker).copied().unwrap_or(0))
                && (from..=to).contains(&e.ts())
            {
                out.push_back(e);
            }
        });
        self.shared.add_damage(reader.take_damage());
        let n = n.map_err(super::log_error)?;
        if n == 0 && reader.position() == before {
            self.reader = None;
        }
        Ok(())
    }
}

impl<E: Event> Rows for EventRows<E> {
    const SCHEMA: &'static CStr = E::SCHEMA;

    fn best_index(info: &mut IndexInfo) -> rusqlite::Result<bool> {
        let mut idx = plan_constraints(
            info,
            &[(1, Bound::Lower, TS_FROM), (1, Bound::Upper, TS_TO)],
        );
        let used = info.col_used();
        if idx != 0 && !E::NEEDS_ALL.iter().any(|&c| used & (1 << c) != 0) {
            idx |= SKIP_BLOCKS;
        }
        info.set_idx_num(idx);
        info.set_idx_str(match (idx & (TS_FROM | TS_TO), idx & SKIP_BLOCKS != 0) {
            (0, _) => "full scan of the log",
            (_, true) => "ts range: compact blocks outside it are not read",
            (_, false) => "ts range: rows filtered, every block read (thread_id is used)",
        });
        info.set_estimated_cost(if idx & SKIP_BLOCKS != 0 { 1e5 } else { 1e7 });
        Ok(true)
    }

    fn filter(
        shared: &Arc<Shared>,
        idx_num: c_int,
        _idx_str: Option<&str>,
        args: &Filters<'_>,
    ) -> rusqlite::Result<Self> {
        let (mut from, mut to, mut none) = (0u64, u64::MAX, false);
        let mut i = 0;
        if idx_num & TS_FROM != 0 {
            match arg(args, i, true)? {
                Arg::Int(t) => from = t.max(0) as u64,
                Arg::Null => none = true,
                Arg::Other => {}
            }
            i += 1;
        }
        if idx_num & TS_TO != 0 {
            match arg(args, i, false)? {
                Arg::Int(t) if t < 0 => none = true,
                Arg::Int(t) => to = t as u64,
                Arg::Null => none = true,
                Arg::Other => {}
            }
        }
        if none {
            return Self::over(shared, None, from, to);
        }
        let mut r = LogReader::open(shared.dir()).map_err(super::log_error)?;
        if idx_num & SKIP_BLOCKS != 0 {
            r.skip_blocks(move |min, max| max >= from && min <= to);
        }
        Self::over(shared, Some(r), from, to)
    }

    fn scan_all(shared: &Arc<Shared>) -> rusqlite::Result<Self> {
        let r = LogReader::open(shared.dir()).map_err(super::log_error)?;
        Self::over(shared, Some(r), 0, u64::MAX)
    }

    fn next(&mut self) -> rusqlite::Result<()> {
        loop {
            if let Some(e) = self.out.pop_front() {
                self.row = Some(e);
                return Ok(());
            }
            if self.reader.is_none() {
                self.row = None;
                return Ok(());
            }
            self.fill()?;
        }
    }

    fn eof(&self) -> bool {
        self.row.is_none()
    }

    fn cell(&self, i: c_int) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match &self.row {
            Some(e) => e.cell(i),
            None => Null.into(),
        })
    }

    fn rowid(&self) -> i64 {
        self.row.as_ref().map_or(0, E::id)
    }
}

impl<E: Event> EventRows<E> {
    /// The rows `reader` gives (`None`: none) with a `ts` in `from..=to`, at the first.
    fn over(
        shared: &Arc<Shared>,
        reader: Option<LogReader>,
        from: u64,
        to: u64,
    ) -> rusqlite::Result<Self> {
        let mut rows = Self {
            shared: shared.clone(),
            reader,
            thread: FxHashMap::default(),
            from,
            to,
            out: VecDeque::new(),
            row: None,
        };
        rows.next()?;
        Ok(rows)
    }
}
