//! [`FrameScan`]: the log's frames as rows, streamed from the reader in file order, for the
//! `slice` table and the tree functions. Records pair by the one pairing rule
//! ([`analysis::pairing`]), parents come from [`analysis::parents`]; a frame becomes a row when its
//! end is read (a frame still open when the log ends becomes one then, without a `dur`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use formats::{Category, FrameAlloc, FrameKey, Record};
use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet};

use super::Shared;
use crate::LogReader;
use crate::compact::locate::Start;
use analysis::pairing::Pairing;
use analysis::parents::Parents;

/// Raw bytes read per refill: enough to amortize a call, little enough to stay responsive.
const BUDGET: usize = 1 << 20;
/// Allocation records whose frame's start has not been read yet (its end came first), kept
/// for it; past this many the oldest are dropped.
const EARLY_ALLOCS: usize = 1 << 16;

/// A frame as a row of `slice`.
#[derive(Debug, Clone)]
pub(crate) struct SliceRow {
    /// Its key.
    pub key: FrameKey,
    /// Start, ns since the Unix epoch.
    pub ts: u64,
    /// Duration; `None` while it has not ended.
    pub dur: Option<u64>,
    /// Its label, as an index into [`FrameScan::labels`].
    pub label: u32,
    /// Category.
    pub category: Category,
    /// Ancestors open (started and not ended, in file order) when it started.
    pub depth: u32,
    /// Its parent (recorded, or inferred for a type 0 start), `None` for a root.
    pub parent: Option<FrameKey>,
    /// `parent` was inferred.
    pub parent_inferred: bool,
    /// Its context (the root frame's id, same worker).
    pub context: u32,
    /// The thread it started on.
    pub thread: u32,
    /// What its code allocated and freed, if recorded (boxed, as the next field: most frames
    /// have neither, and a row is moved three times on its way to SQLite).
    pub alloc: Option<Box<FrameAlloc>>,
    /// Where its time went, for an asynchronous frame that recorded it.
    pub polls: Option<Box<formats::FramePolls>>,
}

/// The id SQL shows for a frame: worker in bits 32-39, id in bits 0-31.
pub fn slice_id(k: FrameKey) -> i64 {
    (i64::from(k.worker) << 32) | i64::from(k.id)
}

/// The frame an SQL id names, if it can name one.
pub fn key_of(id: i64) -> Option<FrameKey> {
    let worker = u8::try_from(id >> 32).ok()?;
    let n = u32::try_from(id & 0xffff_ffff).ok()?;
    Some(FrameKey::new(worker, n))
}

/// The id of a thread: worker in bits 32-39, thread number in bits 0-31.
pub(crate) fn thread_id(worker: u8, thread: u32) -> i64 {
    (i64::from(worker) << 32) | i64::from(thread)
}

/// Which frames a scan returns. Every frame is still paired and followed (depth and parents
/// need them); only the rows are filtered.
#[derive(Debug, Clone, Default)]
pub(crate) struct Wanted {
    /// Start at or after, ns.
    pub ts_from: Option<u64>,
    /// Start at or before, ns.
    pub ts_to: Option<u64>,
    /// Exactly this label.
    pub name: Option<String>,
    /// Only this frame (the scan stops once it is found).
    pub key: Option<FrameKey>,
    /// Only frames of this context (its root's key).
    pub context: Option<FrameKey>,
    /// Only these frames (the scan stops once all were found).
    pub keys: Option<FxHashSet<FrameKey>>,
    /// Only the descendants of this frame (see [`Mode::Descendants`]).
    pub descendants_of: Option<FrameKey>,
    /// Nobody reads `depth`, `parent` or `parent_inferred`: parents are not followed (those
    /// fields of a row are 0, `None` and `false`), which spares a set and a stack per frame.
    pub no_tree: bool,
}

impl Wanted {
    fn in_range(&self, ts: u64) -> bool {
        self.ts_from.is_none_or(|f| ts >= f) && self.ts_to.is_none_or(|t| ts <= t)
    }
}

/// A frame started and not ended yet.
#[derive(Debug, Clone, Copy)]
struct Open {
    label: u32,
    category: Category,
    depth: u32,
    parent: Option<FrameKey>,
    inferred: bool,
    context: u32,
    thread: u32,
    /// It becomes a row.
    wanted: bool,
    /// The nearest ancestor (the parent, or the parent's `unsure`, …) that was not open
    /// when its child started: its `depth` is right only if that one's start was read.
    unsure: Option<FrameKey>,
}

/// What the scan does when it stops early: the ancestors of the target, found when its
/// start is read.
#[derive(Debug, Default)]
pub(crate) struct Chain {
    /// The target's ancestors, innermost first, as far as they were open at its start.
    pub ancestors: Option<Vec<FrameKey>>,
    /// The parent of the outermost of them (or of the target, without any), when it has one
    /// that was not open: not started yet where the scan began, or ended.
    pub beyond: Option<FrameKey>,
    /// A parent on the chain was inferred (from what its thread had open, which a scan that
    /// did not start at the log's start may not know).
    pub inferred: bool,
    /// The outermost ancestor's `unsure` ([`Open`]): the depths are right if it started
    /// after the scan began.
    pub unsure: Option<FrameKey>,
    /// The target was not found, and the scan read past every place it could be
    /// ([`Start::past`]).
    pub absent: bool,
}

/// The pairing state and the rows found, fed by the reader.
struct State {
    pairing: Pairing<Open, FxBuildHasher>,
    parents: Parents,
    thread: FxHashMap<u8, u32>,
    allocs: FxHashMap<FrameKey, FrameAlloc>,
    early_allocs: FxHashMap<FrameKey, FrameAlloc>,
    /// Frame-polls records of wanted frames not completed yet (written right before the
    /// end), and of frames whose start was not read yet (at most [`EARLY_ALLOCS`]).
    polls: FxHashMap<FrameKey, formats::FramePolls>,
    labels: Vec<String>,
    label_ids: FxHashMap<String, u32>,
    /// The ids of the compact block's labels read now.
    block_labels: formats::BlockLabels,
    wanted: Wanted,
    /// Descendants found and open (for [`Wanted::descendants_of`]).
    family: FxHashSet<FrameKey>,
    family_open: u64,
    /// The frame whose descendants are wanted has ended.
    root_done: bool,
    /// The target of `ancestors_of` ended or its chain was found: nothing more to read.
    stop: bool,
    ancestors_of: Option<FrameKey>,
    chain: Chain,
    /// Wanted frames open now (the block filter keeps reading while any is).
    pending: Arc<AtomicU64>,
    out: VecDeque<SliceRow>,
}

impl State {
    fn label_id(&mut self, key: formats::LabelKey, label: &str) -> u32 {
        let (labels, ids) = (&mut self.labels, &mut self.label_ids);
        self.block_labels.id(key, || {
            if let Some(&id) = ids.get(label) {
                return id;
            }
            let id = labels.len() as u32;
            labels.push(label.to_owned());
            ids.insert(label.to_owned(), id);
            id
        })
    }

    #[inline]
    fn record(&mut self, rec: Record<'_>, key: formats::LabelKey) {
        if self.stop {
            return;
        }
        match rec {
            Record::ThreadInfo(t) => {
                if !self.wanted.no_tree {
                    self.parents.add(&rec);
                }
                self.thread.insert(t.worker, t.thread);
            }
            Record::Start(s) => {
                let parent = if self.wanted.no_tree {
                    None
                } else {
                    Some(self.parents.add(&rec).expect("a start has a parent answer"))
                };
                let label_key = key;
                let key = FrameKey::new(s.worker, s.id);
                let parent_key = parent.and_then(|p| p.key());
                let parent_open = parent_key.and_then(|p| self.pairing.info(p).copied());
                let depth = parent_open.map_or(0, |p| p.depth + 1);
                if self.ancestors_of == Some(key) {
                    let is_open = |q: &FrameKey| self.pairing.info(*q).is_some();
                    let mut chain = Vec::new();
                    let mut inferred =
                        matches!(parent, Some(analysis::parents::ParentOf::Inferred(_)));
                    let mut beyond = parent_key.filter(|q| !is_open(q));
                    let mut unsure = None;
                    let mut at = parent_open.and(parent_key);
                    while let Some(p) = at {
                        chain.push(p);
                        let o = self.pairing.info(p).expect("an open ancestor");
                        inferred |= o.inferred;
                        beyond = o.parent.filter(|q| !is_open(q));
                        unsure = o.unsure;
                        at = o.parent.filter(is_open);
                    }
                    self.chain = Chain {
                        ancestors: Some(chain),
                        beyond,
                        inferred,
                        unsure,
                        absent: false,
                    };
                    self.stop = true;
                    return;
                }
                let w = &self.wanted;
                let mut wanted = w.in_range(s.timestamp)
                    && w.key.is_none_or(|k| k == key)
                    && w.context
                        .is_none_or(|c| c == FrameKey::new(s.worker, s.context))
                    && w.name.as_deref().is_none_or(|n| n == s.label)
                    && w.keys.as_ref().is_none_or(|k| k.contains(&key));
                if w.descendants_of.is_some() {
                    let child = parent_key.is_some_and(|p| self.family.contains(&p));
                    wanted &= child;
                    if child {
                        self.family.insert(key);
                        self.family_open += 1;
                    }
                }
                let label = self.label_id(label_key, s.label);
                let open = Open {
                    label,
                    category: s.category,
                    depth,
                    parent: parent_key,
                    inferred: matches!(parent, Some(analysis::parents::ParentOf::Inferred(_))),
                    context: s.context,
                    thread: self.thread.get(&s.worker).copied().unwrap_or(0),
                    wanted,
                    unsure: match parent_open {
                        Some(p) => p.unsure,
                        None => parent_key,
                    },
                };
                match self.pairing.take_early_end(key) {
                    Some(end) => self.completed(key, s.timestamp, Some(end), open),
                    None => {
                        if wanted {
                            self.pending.fetch_add(1, Ordering::Relaxed);
                        }
                        self.pairing.wait_for_end(key, s.timestamp, open);
                    }
                }
            }
            Record::End(e) => {
                let key = FrameKey::new(e.worker, e.id);
                if !self.wanted.no_tree {
                    self.parents.add(&rec);
                }
                if let Some(p) = self.pairing.end(key, e.timestamp) {
                    if p.start_info.wanted {
                        self.pending.fetch_sub(1, Ordering::Relaxed);
                    }
                    self.completed(key, p.start_ns, Some(p.end_ns), p.start_info);
                }
            }
            Record::FrameAlloc(a) => {
                let key = FrameKey::new(a.worker, a.id);
                match self.pairing.info(key) {
                    Some(o) if o.wanted => add_alloc(&mut self.allocs, key, a),
                    Some(_) => {}
                    None if self.early_allocs.len() < EARLY_ALLOCS => {
                        add_alloc(&mut self.early_allocs, key, a)
                    }
                    None => {}
                }
            }
            Record::FramePolls(p) => {
                let key = FrameKey::new(p.worker, p.id);
                match self.pairing.info(key) {
                    Some(o) if o.wanted => {
                        self.polls.insert(key, p);
                    }
                    Some(_) => {}
                    None if self.polls.len() < EARLY_ALLOCS => {
                        self.polls.insert(key, p);
                    }
                    None => {}
                }
            }
            _ => {}
        }
    }

    fn completed(&mut self, key: FrameKey, start: u64, end: Option<u64>, o: Open) {
        let descendants_of = self.wanted.descendants_of;
        if let Some(root) = descendants_of {
            if key == root {
                self.root_done = true;
            } else if o.wanted {
                self.family_open -= 1;
            }
            // Descendants start while the frame or one of them is open.
            if self.root_done && self.family_open == 0 {
                self.stop = true;
            }
        }
        if !o.wanted {
            return;
        }
        let alloc = if self.allocs.is_empty() && self.early_allocs.is_empty() {
            None
        } else {
            self.allocs
                .remove(&key)
                .or_else(|| self.early_allocs.remove(&key))
                .map(Box::new)
        };
        let polls = if self.polls.is_empty() {
            None
        } else {
            self.polls.remove(&key).map(Box::new)
        };
        self.out.push_back(SliceRow {
            polls,
            key,
            ts: start,
            dur: end.map(|e| e.saturating_sub(start)),
            label: o.label,
            category: o.category,
            depth: o.depth,
            parent: o.parent,
            parent_inferred: o.inferred,
            context: o.context,
            thread: o.thread,
            alloc,
        });
        if self.wanted.key == Some(key) {
            self.stop = true;
        }
        if let Some(keys) = &mut self.wanted.keys {
            keys.remove(&key);
            if keys.is_empty() {
                self.stop = true;
            }
        }
    }
}

/// Adds one allocation record of `key` to what `map` holds for it.
fn add_alloc(map: &mut FxHashMap<FrameKey, FrameAlloc>, key: FrameKey, a: FrameAlloc) {
    use std::collections::hash_map::Entry;
    match map.entry(key) {
        Entry::Occupied(mut e) => {
            let into = e.get_mut();
            into.allocs += a.allocs;
            into.alloc_bytes += a.alloc_bytes;
            into.frees += a.frees;
            into.freed_bytes += a.freed_bytes;
        }
        Entry::Vacant(v) => {
            v.insert(a);
        }
    }
}

/// The frames of a log as rows, read as a cursor asks for them.
pub(crate) struct FrameScan {
    shared: Arc<Shared>,
    reader: LogReader,
    state: State,
    /// The log's end was reached (and the frames still open were released).
    finished: bool,
}

impl FrameScan {
    /// Starts reading the log for the frames `wanted` selects. With `skip_blocks`, compact
    /// blocks that cannot hold a wanted frame's start (outside the `ts` range) or the end of
    /// one still open are not decoded: depth, parents and threads are then only right for
    /// what was read, so a caller asks for it only when those columns are not used.
    pub fn new(shared: &Arc<Shared>, wanted: Wanted, skip_blocks: bool) -> rusqlite::Result<Self> {
        Self::new_from(shared, wanted, skip_blocks, None)
    }

    /// Like [`FrameScan::new`], reading from `start` (with the threads current there)
    /// instead of the log's first record: depth and parents are then only right for frames
    /// whose ancestors all started after it.
    pub fn new_from(
        shared: &Arc<Shared>,
        wanted: Wanted,
        skip_blocks: bool,
        start: Option<&Start>,
    ) -> rusqlite::Result<Self> {
        let mut reader = match start {
            Some(s) => LogReader::open_at(shared.dir(), s.pos),
            None => LogReader::open(shared.dir()),
        }
        .map_err(super::log_error)?;
        let pending = Arc::new(AtomicU64::new(0));
        let wanted_root = wanted.descendants_of;
        if skip_blocks && (wanted.ts_from.is_some() || wanted.ts_to.is_some()) {
            let (from, to) = (
                wanted.ts_from.unwrap_or(0),
                wanted.ts_to.unwrap_or(u64::MAX),
            );
            let pending = pending.clone();
            // A wanted frame starts in the range; its end comes later in time (the same
            // process's clock), anywhere later in the file.
            reader.skip_blocks(move |min, max| {
                max >= from && (min <= to || pending.load(Ordering::Relaxed) > 0)
            });
        }
        Ok(Self {
            shared: shared.clone(),
            reader,
            state: State {
                pairing: Pairing::new(),
                parents: Parents::new(),
                thread: start.map_or_else(FxHashMap::default, |s| {
                    s.threads.iter().map(|(&w, &t)| (w, t)).collect()
                }),
                allocs: FxHashMap::default(),
                early_allocs: FxHashMap::default(),
                polls: FxHashMap::default(),
                labels: Vec::new(),
                label_ids: FxHashMap::default(),
                block_labels: formats::BlockLabels::default(),
                wanted,
                family: wanted_root.into_iter().collect(),
                family_open: 0,
                root_done: false,
                stop: false,
                ancestors_of: None,
                chain: Chain::default(),
                pending,
                out: VecDeque::new(),
            },
            finished: false,
        })
    }

    /// A scan that reads (from `start`, else the log's first record) until the start of
    /// `target` and finds its open ancestors.
    pub fn ancestors_of(
        shared: &Arc<Shared>,
        target: FrameKey,
        start: Option<&Start>,
    ) -> rusqlite::Result<Chain> {
        let mut scan = Self::new_from(shared, Wanted::default(), false, start)?;
        scan.state.wanted.keys = Some(FxHashSet::default());
        scan.state.ancestors_of = Some(target);
        let past = start.and_then(|s| s.past);
        while !scan.finished && !scan.state.stop {
            scan.fill()?;
            scan.state.out.clear();
            if let Some(p) = past
                && scan.state.chain.ancestors.is_none()
                && (scan.finished || scan.reader.position() >= p)
            {
                scan.state.chain.absent = true;
                break;
            }
        }
        Ok(std::mem::take(&mut scan.state.chain))
    }

    /// Reads until the scan is finished, keeping every row for [`FrameScan::next_row`].
    pub fn read_all(&mut self) -> rusqlite::Result<()> {
        while !self.finished {
            self.fill()?;
        }
        Ok(())
    }

    /// The rows read and not handed out yet.
    pub fn rows_read(&self) -> impl Iterator<Item = &SliceRow> {
        self.state.out.iter()
    }

    /// Label `i`.
    pub fn label(&self, i: u32) -> &str {
        &self.state.labels[i as usize]
    }

    /// The labels its rows name, by index.
    pub fn into_labels(self) -> Vec<String> {
        self.state.labels
    }

    /// The next row, reading more of the log when none is ready; `None` at the end.
    pub fn next_row(&mut self) -> rusqlite::Result<Option<SliceRow>> {
        loop {
            if let Some(r) = self.state.out.pop_front() {
                return Ok(Some(r));
            }
            if self.finished {
                return Ok(None);
            }
            self.fill()?;
        }
    }

    /// Reads about [`BUDGET`] bytes of records; at the log's end, releases the wanted frames
    /// still open (in start order) and marks the scan finished.
    fn fill(&mut self) -> rusqlite::Result<()> {
        self.shared.check_interrupt()?;
        if self.state.stop {
            self.finished = true;
            return Ok(());
        }
        let before = self.reader.position();
        let state = &mut self.state;
        let n = self
            .reader
            .read_some_labelled(BUDGET, |_, rec: Record<'_>, key| state.record(rec, key))
            .map_err(super::log_error);
        self.shared.add_damage(self.reader.take_damage());
        let n = n?;
        if self.state.stop {
            self.finished = true;
        } else if n == 0 && self.reader.position() == before {
            let mut open: Vec<_> = self
                .state
                .pairing
                .open()
                .filter(|(_, _, o)| o.wanted)
                .map(|(k, t, o)| (t, k, *o))
                .collect();
            open.sort_unstable_by_key(|&(t, k, _)| (t, k.worker, k.id));
            for (t, k, o) in open {
                self.state.completed(k, t, None, o);
            }
            self.finished = true;
        }
        Ok(())
    }
}
