//! What a log names: its processes (workers), threads and counter tracks, from one read of
//! the log, kept by the connection until the next [`super::SqlLog::refresh`] (a join reads
//! these tables once per row of the other side).

use std::collections::BTreeMap;
use std::ffi::{CStr, c_int};
use std::sync::Arc;

use formats::{PlotMode, PlotUnit, Record};
use rusqlite::types::{Null, ToSqlOutput, Value};
use rusqlite::vtab::{Filters, IndexInfo};

use super::frames::thread_id;
use super::slice::schema;
use super::vtab::{Bound, Rows, plan_constraints};
use super::{Arg, Shared, arg};
use crate::LogReader;

/// A log's processes, threads and counter tracks.
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    /// Per worker: pid and process name, from its latest `worker_info`.
    pub processes: BTreeMap<u8, (u32, String)>,
    /// Per (worker, thread): its latest name.
    pub threads: BTreeMap<(u8, u32), String>,
    /// Per (worker, series name): unit and mode of its latest value.
    pub tracks: BTreeMap<(u8, String), (PlotUnit, PlotMode)>,
}

impl Catalog {
    /// Reads the whole log.
    pub fn read(shared: &Shared) -> rusqlite::Result<Self> {
        let mut c = Catalog::default();
        let mut reader = LogReader::open(shared.dir()).map_err(super::log_error)?;
        loop {
            shared.check_interrupt()?;
            let before = reader.position();
            let n = reader.read_some(4 << 20, |_, rec| match rec {
                Record::WorkerInfo(w) => {
                    c.processes.insert(w.worker, (w.pid, w.name.to_owned()));
                }
                // Thread 0 announces the ends of an exiting thread: no thread of its own.
                Record::ThreadInfo(t) if t.thread != 0 => {
                    let slot = c.threads.entry((t.worker, t.thread)).or_default();
                    if slot != t.name {
                        t.name.clone_into(slot);
                    }
                }
                Record::Plot(p) => match c.tracks.get_mut(&(p.worker, p.name.to_owned())) {
                    Some(v) => *v = (p.unit, p.mode),
                    None => {
                        c.tracks
                            .insert((p.worker, p.name.to_owned()), (p.unit, p.mode));
                    }
                },
                _ => {}
            });
            shared.add_damage(reader.take_damage());
            let n = n.map_err(super::log_error)?;
            if n == 0 && reader.position() == before {
                return Ok(c);
            }
        }
    }
}

/// The id of the counter track (`worker`, `name`): the same in every read and process (a hash,
/// FNV-1a, kept positive), so `counter.track_id` needs no read of the whole log.
pub(crate) fn track_id(worker: u8, name: &str) -> i64 {
    let h = std::iter::once(worker)
        .chain(name.bytes())
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
    (h >> 1) as i64
}

/// Which catalog table a [`CatalogRows`] lists.
pub(crate) trait CatalogTable {
    /// Its `CREATE TABLE`.
    const SCHEMA: &'static CStr;
    /// Its rows, `id` first.
    fn rows(c: &Catalog) -> Vec<Vec<Value>>;
}

/// `process`: one row per worker (a writing process's slot).
pub(crate) struct Process;
impl CatalogTable for Process {
    const SCHEMA: &'static CStr =
        schema!("CREATE TABLE process(id INTEGER, worker INTEGER, pid INTEGER, name TEXT)");
    fn rows(c: &Catalog) -> Vec<Vec<Value>> {
        c.processes
            .iter()
            .map(|(&w, (pid, name))| {
                vec![
                    Value::Integer(w.into()),
                    Value::Integer(w.into()),
                    Value::Integer((*pid).into()),
                    Value::Text(name.clone()),
                ]
            })
            .collect()
    }
}

/// `thread`: one row per (worker, thread).
pub(crate) struct Thread;
impl CatalogTable for Thread {
    const SCHEMA: &'static CStr = schema!(
        "CREATE TABLE thread(id INTEGER, worker INTEGER, thread INTEGER, name TEXT, process_id INTEGER)"
    );
    fn rows(c: &Catalog) -> Vec<Vec<Value>> {
        c.threads
            .iter()
            .map(|(&(w, t), name)| {
                vec![
                    Value::Integer(thread_id(w, t)),
                    Value::Integer(w.into()),
                    Value::Integer(t.into()),
                    Value::Text(name.clone()),
                    Value::Integer(w.into()),
                ]
            })
            .collect()
    }
}

/// `counter_track`: one row per plot series (worker, name).
pub(crate) struct CounterTrack;
impl CatalogTable for CounterTrack {
    const SCHEMA: &'static CStr = schema!(
        "CREATE TABLE counter_track(id INTEGER, name TEXT, worker INTEGER, unit TEXT, summed INTEGER)"
    );
    fn rows(c: &Catalog) -> Vec<Vec<Value>> {
        let mut rows: Vec<_> = c
            .tracks
            .iter()
            .map(|((w, name), (unit, mode))| {
                vec![
                    Value::Integer(track_id(*w, name)),
                    Value::Text(name.clone()),
                    Value::Integer((*w).into()),
                    Value::Text(unit.name().into_owned()),
                    Value::Integer(i64::from(*mode == PlotMode::Summed)),
                ]
            })
            .collect();
        rows.sort_by_key(|r| match r[0] {
            Value::Integer(i) => i,
            _ => 0,
        });
        rows
    }
}

/// A scan of a catalog table: its rows, or the one whose `id` a constraint names.
pub(crate) struct CatalogRows<T> {
    rows: Vec<Vec<Value>>,
    at: usize,
    kind: std::marker::PhantomData<T>,
}

impl<T: CatalogTable> Rows for CatalogRows<T> {
    const SCHEMA: &'static CStr = T::SCHEMA;

    fn best_index(info: &mut IndexInfo) -> rusqlite::Result<bool> {
        let idx = plan_constraints(info, &[(0, Bound::Eq, 1)]);
        info.set_idx_num(idx);
        info.set_estimated_cost(if idx != 0 { 1.0 } else { 100.0 });
        info.set_estimated_rows(if idx != 0 { 1 } else { 100 });
        Ok(true)
    }

    fn filter(
        shared: &Arc<Shared>,
        idx_num: c_int,
        _idx_str: Option<&str>,
        args: &Filters<'_>,
    ) -> rusqlite::Result<Self> {
        let catalog = shared.catalog()?;
        let mut rows = T::rows(&catalog);
        if idx_num & 1 != 0 {
            match arg(args, 0, false)? {
                Arg::Int(id) => rows.retain(|r| r[0] == Value::Integer(id)),
                Arg::Null => rows.clear(),
                Arg::Other => {}
            }
        }
        Ok(Self {
            rows,
            at: 0,
            kind: std::marker::PhantomData,
        })
    }

    fn next(&mut self) -> rusqlite::Result<()> {
        self.at += 1;
        Ok(())
    }

    fn eof(&self) -> bool {
        self.at >= self.rows.len()
    }

    fn scan_all(shared: &Arc<Shared>) -> rusqlite::Result<Self> {
        Ok(Self {
            rows: T::rows(&*shared.catalog()?),
            at: 0,
            kind: std::marker::PhantomData,
        })
    }

    fn cell(&self, i: c_int) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(
            match self.rows.get(self.at).and_then(|r| r.get(i as usize)) {
                Some(v) => ToSqlOutput::Borrowed(v.into()),
                None => Null.into(),
            },
        )
    }

    fn rowid(&self) -> i64 {
        self.at as i64
    }
}
