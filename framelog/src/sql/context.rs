//! The `context` table: one row per unit of work (its root's id and name, its first start,
//! its last end, its frames), aggregated from the log's frames as a [`FrameScan`] reads
//! them, in `id` order. Contexts past [`IN_MEMORY`] are written to sorted runs in temporary
//! files and merged at the end, so memory stays bounded whatever the log's size.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ffi::{CStr, c_int};
use std::io::{BufReader, BufWriter, Read, Seek, Write};
use std::sync::Arc;

use formats::FrameKey;
use rusqlite::types::{Null, ToSqlOutput};
use rusqlite::vtab::{Filters, IndexInfo};
use rustc_hash::FxHashMap;

use super::frames::{FrameScan, SliceRow, Wanted, key_of, slice_id};
use super::slice::schema;
use super::vtab::{Bound, Rows, opt, plan_constraints};
use super::{Arg, Shared, arg};

/// Contexts aggregated in memory before they are written to a sorted run: the map is made
/// this big at once (2^19 buckets of 41 bytes: ~21 MB), under its load limit (7/8), so it
/// never grows (a growing map holds its old and new tables at once). A spill sorts them in a
/// vector beside the map (~18 MB more): twice this (900,000) put 80 MB of a Parquet export's
/// peak here on a 10 M-frame service log with 2.86 M contexts.
pub(crate) const IN_MEMORY: usize = 450_000;

/// What the frames of one context add up to so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Agg {
    first_ts: i64,
    /// The latest end of a frame that ended; `i64::MIN`: none ended.
    last_ts: i64,
    frames: u64,
    /// The root frame's label (an index into the names); `u32::MAX`: not read.
    root_name: u32,
}

const NONE_ENDED: i64 = i64::MIN;
const NO_NAME: u32 = u32::MAX;

impl Agg {
    fn merge(&mut self, o: &Agg) {
        self.first_ts = self.first_ts.min(o.first_ts);
        self.last_ts = self.last_ts.max(o.last_ts);
        self.frames += o.frames;
        if self.root_name == NO_NAME {
            self.root_name = o.root_name;
        }
    }
}

/// Bytes of one context in a run: id, first, last, frames, name.
const RUN_ENTRY: usize = 8 + 8 + 8 + 8 + 4;

/// A context as a row: (id, what its frames add up to).
type Entry = (i64, Agg);

/// Contexts being aggregated.
struct Contexts {
    map: FxHashMap<i64, Agg>,
    /// The context of the frame added last, not yet in `map` (a context's frames mostly
    /// come one after another: they are added up here without a lookup).
    pending: Option<Entry>,
    limit: usize,
    names: Vec<String>,
    name_ids: FxHashMap<String, u32>,
    /// Name ids by the scan's label index (`NO_NAME`: not seen yet), so a root's label is
    /// looked up by text once.
    by_label: Vec<u32>,
    runs: Vec<std::fs::File>,
}

impl Contexts {
    fn new(limit: usize) -> Self {
        Self {
            map: FxHashMap::with_capacity_and_hasher(limit.min(IN_MEMORY), Default::default()),
            pending: None,
            limit,
            names: Vec::new(),
            name_ids: FxHashMap::default(),
            by_label: Vec::new(),
            runs: Vec::new(),
        }
    }

    /// Counts frame `r` (labelled `label`) in its context.
    fn add(&mut self, r: &SliceRow, label: &str) -> std::io::Result<()> {
        let context = FrameKey::new(r.key.worker, r.context);
        let root_name = if context == r.key {
            self.name_id(r.label, label)
        } else {
            NO_NAME
        };
        let dur = r.dur.map(|d| d as i64);
        self.add_frame(slice_id(context), r.ts as i64, dur, root_name)
    }

    /// Counts a frame of context `id` that started at `ts` and lasted `dur` (`None`: still
    /// open), named `root_name` if it is the context's root.
    fn add_frame(
        &mut self,
        id: i64,
        ts: i64,
        dur: Option<i64>,
        root_name: u32,
    ) -> std::io::Result<()> {
        let agg = Agg {
            first_ts: ts,
            last_ts: dur.map_or(NONE_ENDED, |d| ts.saturating_add(d)),
            frames: 1,
            root_name,
        };
        match &mut self.pending {
            Some((p, a)) if *p == id => a.merge(&agg),
            pending => {
                if let Some((p, a)) = pending.replace((id, agg)) {
                    self.map.entry(p).and_modify(|m| m.merge(&a)).or_insert(a);
                    if self.map.len() >= self.limit {
                        self.spill()?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The name id of `label`.
    fn name_of(&mut self, label: &str) -> u32 {
        match self.name_ids.get(label) {
            Some(&i) => i,
            None => {
                let i = self.names.len() as u32;
                self.names.push(label.to_owned());
                self.name_ids.insert(label.to_owned(), i);
                i
            }
        }
    }

    /// The name id of `label`, label `index` of the scan.
    fn name_id(&mut self, index: u32, label: &str) -> u32 {
        if let Some(&i) = self.by_label.get(index as usize).filter(|&&i| i != NO_NAME) {
            return i;
        }
        let i = self.name_of(label);
        let at = index as usize;
        if at < 1 << 20 {
            if self.by_label.len() <= at {
                self.by_label.resize(at + 1, NO_NAME);
            }
            self.by_label[at] = i;
        }
        i
    }

    /// Moves the pending context into the map.
    fn settle(&mut self) {
        if let Some((p, a)) = self.pending.take() {
            self.map.entry(p).and_modify(|m| m.merge(&a)).or_insert(a);
        }
    }

    /// Writes the contexts in memory, sorted by id, to a new run.
    fn spill(&mut self) -> std::io::Result<()> {
        let mut entries: Vec<Entry> = self.map.drain().collect();
        entries.sort_unstable_by_key(|e| e.0);
        let mut w = BufWriter::new(tempfile::tempfile()?);
        for (id, a) in &entries {
            w.write_all(&id.to_le_bytes())?;
            w.write_all(&a.first_ts.to_le_bytes())?;
            w.write_all(&a.last_ts.to_le_bytes())?;
            w.write_all(&a.frames.to_le_bytes())?;
            w.write_all(&a.root_name.to_le_bytes())?;
        }
        let mut f = w.into_inner().map_err(|e| e.into_error())?;
        f.rewind()?;
        self.runs.push(f);
        Ok(())
    }

    /// The contexts in id order, runs and memory merged.
    fn finish(mut self) -> std::io::Result<Merged> {
        self.settle();
        let mut last: Vec<Entry> = self.map.drain().collect();
        last.sort_unstable_by_key(|e| e.0);
        let mut sources: Vec<Source> = self
            .runs
            .into_iter()
            .map(|f| Source::Run(BufReader::new(f)))
            .collect();
        sources.push(Source::Memory(last.into_iter()));
        let mut heap = BinaryHeap::new();
        for (i, s) in sources.iter_mut().enumerate() {
            if let Some(e) = s.next()? {
                heap.push(Reverse((
                    e.0,
                    i,
                    e.1.first_ts,
                    e.1.last_ts,
                    e.1.frames,
                    e.1.root_name,
                )));
            }
        }
        Ok(Merged {
            sources,
            heap,
            names: self.names,
        })
    }
}

/// Where the merge reads contexts from: a run on disk, or what was still in memory.
enum Source {
    Run(BufReader<std::fs::File>),
    Memory(std::vec::IntoIter<Entry>),
}

impl Source {
    fn next(&mut self) -> std::io::Result<Option<Entry>> {
        match self {
            Source::Memory(it) => Ok(it.next()),
            Source::Run(r) => {
                let mut b = [0u8; RUN_ENTRY];
                match r.read_exact(&mut b) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
                    Err(e) => return Err(e),
                }
                let i64_at = |o: usize| i64::from_le_bytes(b[o..o + 8].try_into().expect("8"));
                Ok(Some((
                    i64_at(0),
                    Agg {
                        first_ts: i64_at(8),
                        last_ts: i64_at(16),
                        frames: i64_at(24) as u64,
                        root_name: u32::from_le_bytes(b[32..36].try_into().expect("4")),
                    },
                )))
            }
        }
    }
}

/// A heap entry: (id, source, first, last, frames, name), smallest id first.
type HeapEntry = Reverse<(i64, usize, i64, i64, u64, u32)>;

/// The merged contexts, read one by one.
struct Merged {
    sources: Vec<Source>,
    heap: BinaryHeap<HeapEntry>,
    names: Vec<String>,
}

impl Merged {
    /// The next context, every run's part of it added up.
    fn next(&mut self) -> std::io::Result<Option<Entry>> {
        let Some(Reverse((id, ..))) = self.heap.peek().copied() else {
            return Ok(None);
        };
        let mut total: Option<Agg> = None;
        while let Some(&Reverse((i, src, first_ts, last_ts, frames, root_name))) = self.heap.peek()
        {
            if i != id {
                break;
            }
            self.heap.pop();
            let a = Agg {
                first_ts,
                last_ts,
                frames,
                root_name,
            };
            match &mut total {
                Some(t) => t.merge(&a),
                None => total = Some(a),
            }
            if let Some(e) = self.sources[src].next()? {
                let a = e.1;
                self.heap.push(Reverse((
                    e.0,
                    src,
                    a.first_ts,
                    a.last_ts,
                    a.frames,
                    a.root_name,
                )));
            }
        }
        Ok(total.map(|t| (id, t)))
    }
}

/// A temporary file's error as SQLite reports it.
fn io_error(e: std::io::Error) -> rusqlite::Error {
    rusqlite::Error::ModuleError(format!("the context table's temporary file: {e}"))
}

/// Reads every frame `scan` gives into contexts (`limit` in memory at most).
fn aggregate(mut scan: FrameScan, limit: usize) -> rusqlite::Result<Merged> {
    let mut contexts = Contexts::new(limit);
    while let Some(r) = scan.next_row()? {
        contexts.add(&r, scan.label(r.label)).map_err(io_error)?;
    }
    contexts.finish().map_err(io_error)
}

/// Contexts added up from the `slice` rows another scan reads (the Parquet export adds them
/// up from the columns it writes), so `context` needs no read of its own.
#[cfg_attr(not(feature = "parquet"), allow(dead_code))]
pub(crate) struct ContextTally(Contexts);

#[cfg_attr(not(feature = "parquet"), allow(dead_code))]
impl ContextTally {
    /// An empty tally.
    pub(crate) fn new() -> Self {
        Self(Contexts::new(IN_MEMORY))
    }

    /// Counts frame `id` (a `slice` id) of context `context`, started at `ts`, lasting `dur`
    /// (`None`: still open), labelled `label`: the `slice` row's cells.
    pub(crate) fn add(
        &mut self,
        id: i64,
        context: i64,
        ts: i64,
        dur: Option<i64>,
        label: &str,
    ) -> rusqlite::Result<()> {
        let root_name = if id == context {
            self.0.name_of(label)
        } else {
            NO_NAME
        };
        self.0
            .add_frame(context, ts, dur, root_name)
            .map_err(io_error)
    }

    /// The `context` rows of the frames counted, as a scan of the whole log gives them.
    pub(crate) fn into_rows(self) -> rusqlite::Result<ContextRows> {
        let mut rows = ContextRows {
            merged: Some(self.0.finish().map_err(io_error)?),
            row: None,
        };
        rows.next()?;
        Ok(rows)
    }
}

const ID: c_int = 0;
const ROOT_ID: c_int = 1;

/// A scan of `context`.
pub(crate) struct ContextRows {
    merged: Option<Merged>,
    row: Option<Entry>,
}

impl ContextRows {
    fn over(shared: &Arc<Shared>, wanted: Option<Wanted>) -> rusqlite::Result<Self> {
        let merged = match wanted {
            Some(w) => Some(aggregate(FrameScan::new(shared, w, false)?, IN_MEMORY)?),
            None => None,
        };
        let mut rows = Self { merged, row: None };
        rows.next()?;
        Ok(rows)
    }
}

impl Rows for ContextRows {
    const SCHEMA: &'static CStr = schema!(
        "CREATE TABLE context(id INTEGER, root_id INTEGER, root_name TEXT, first_ts INTEGER, last_ts INTEGER, frames INTEGER)"
    );

    fn best_index(info: &mut IndexInfo) -> rusqlite::Result<bool> {
        let idx = plan_constraints(info, &[(ID, Bound::Eq, 1), (ROOT_ID, Bound::Eq, 2)]);
        info.set_idx_num(idx);
        info.set_idx_str(if idx != 0 {
            "id = ?: only that context's frames are counted (the log is read to its end)"
        } else {
            "full scan of the log"
        });
        info.set_estimated_cost(if idx != 0 { 1e6 } else { 1e7 });
        Ok(true)
    }

    fn filter(
        shared: &Arc<Shared>,
        idx_num: c_int,
        _idx_str: Option<&str>,
        args: &Filters<'_>,
    ) -> rusqlite::Result<Self> {
        let mut wanted = Wanted::default();
        let mut none = false;
        for i in 0..(idx_num.count_ones() as usize) {
            match arg(args, i, false)? {
                Arg::Int(id) => match key_of(id) {
                    Some(k) if wanted.context.is_none_or(|c| c == k) => wanted.context = Some(k),
                    _ => none = true,
                },
                Arg::Null => none = true,
                Arg::Other => {}
            }
        }
        Self::over(shared, (!none).then_some(wanted))
    }

    fn scan_all(shared: &Arc<Shared>) -> rusqlite::Result<Self> {
        Self::over(shared, Some(Wanted::default()))
    }

    fn next(&mut self) -> rusqlite::Result<()> {
        self.row = match &mut self.merged {
            Some(m) => m.next().map_err(io_error)?,
            None => None,
        };
        Ok(())
    }

    fn eof(&self) -> bool {
        self.row.is_none()
    }

    fn cell(&self, i: c_int) -> rusqlite::Result<ToSqlOutput<'_>> {
        let (Some((id, a)), Some(m)) = (&self.row, &self.merged) else {
            return Ok(Null.into());
        };
        Ok(match i {
            0 | 1 => (*id).into(),
            2 => opt(m.names.get(a.root_name as usize).map(String::as_str)),
            3 => a.first_ts.into(),
            4 => opt((a.last_ts != NONE_ENDED).then_some(a.last_ts)),
            5 => (a.frames as i64).into(),
            _ => Null.into(),
        })
    }

    fn rowid(&self) -> i64 {
        self.row.as_ref().map_or(0, |r| r.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn row(worker: u8, id: u32, context: u32, ts: u64, dur: Option<u64>) -> SliceRow {
        SliceRow {
            key: FrameKey::new(worker, id),
            ts,
            dur,
            // A scan's label index names one text: "label {id}" below.
            label: id,
            category: formats::Category(0),
            depth: 0,
            parent: None,
            parent_inferred: false,
            context,
            thread: 0,
            alloc: None,
            polls: None,
        }
    }

    proptest! {
        /// Spilled to runs of a few contexts or kept in memory, the contexts add up to what
        /// a plain map of every frame says, in id order.
        #[test]
        fn runs_merge_to_what_one_map_says(
            frames in prop::collection::vec(
                (0u8..3, 1u32..40, 1u32..12, 0u64..1_000, prop::option::of(0u64..500)),
                0..300,
            ),
            limit in 1usize..20,
        ) {
            let mut expected: std::collections::BTreeMap<i64, Agg> = Default::default();
            let mut contexts = Contexts::new(limit);
            for &(worker, id, context, ts, dur) in &frames {
                let r = row(worker, id, context, ts, dur);
                let label = format!("label {id}");
                contexts.add(&r, &label).unwrap();
                let root = FrameKey::new(worker, context) == r.key;
                let e = expected.entry(slice_id(FrameKey::new(worker, context))).or_insert(Agg {
                    first_ts: i64::MAX,
                    last_ts: NONE_ENDED,
                    frames: 0,
                    root_name: NO_NAME,
                });
                e.first_ts = e.first_ts.min(ts as i64);
                if let Some(d) = dur {
                    e.last_ts = e.last_ts.max((ts + d) as i64);
                }
                e.frames += 1;
                if root {
                    // Names are interned in the order roots are met: compare texts below.
                    e.root_name = id;
                }
            }
            let mut merged = contexts.finish().unwrap();
            let mut got = Vec::new();
            while let Some((id, a)) = merged.next().unwrap() {
                let name = merged.names.get(a.root_name as usize).cloned();
                got.push((id, a.first_ts, a.last_ts, a.frames, name));
            }
            let want: Vec<_> = expected
                .into_iter()
                .map(|(id, a)| {
                    let name = (a.root_name != NO_NAME).then(|| format!("label {}", a.root_name));
                    (id, a.first_ts, a.last_ts, a.frames, name)
                })
                .collect();
            prop_assert_eq!(got, want);
        }
    }
}
