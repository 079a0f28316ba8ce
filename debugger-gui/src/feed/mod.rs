//! Records into model updates, whatever their source: a log directory read by the native
//! shell's `ingest`, or a viewer session over a WebSocket (the shell's `remote`, or the page's
//! socket). The portable core: it names no shell module (see the crate's docs).
//!
//! Nothing here opens a file, starts a thread or reads a clock, so it runs unchanged where
//! there are none (the debugger compiled to WebAssembly). The drivers decide where each stage
//! runs: the file ingest digests on its reader thread and applies on a second one, holding the
//! model lock one chunk at a time.
//!
//! - [`ReaderStage`] (the reader stage) decodes nothing itself: it takes decoded records, interns
//!   their labels, numbers plot series, indexes their contexts and pairs starts with ends, into
//!   a [`Batch`] the model applies without hashing a key. A frame that ends within its batch
//!   has its start carry the end, so the applier has half the records to apply.
//! - [`LabelMap`] and `apply_events` / [`apply_marks`] (the applier stage) put a batch into
//!   the [`Model`].
//! - [`WriterWatch`] decides which writing processes stopped, from whatever tells it who is
//!   alive (worker locks on disk, a server's Status messages).
//! - [`viewer`]: the client side of a viewer session (`docs/PROTOCOL.md`).

pub mod viewer;

use std::collections::BTreeSet;

use formats::{
    Decoded, FrameKey, LabelKey, Level, Message, PlotMode, PlotUnit, Record, decode_record,
};

use crate::model::contexts::ContextIndex;
use crate::model::intern::Interner;
use crate::model::pair::{Pairer, StartPair};
use crate::model::plots::SeriesIds;
use crate::model::{Model, StartRec};

/// What the reader stage knew when it handed over a batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadState {
    /// Bytes of the log read so far.
    pub bytes_read: u64,
    /// Bytes the log holds (at the source's last look).
    pub total_bytes: u64,
    /// Everything the log held at that look has been read.
    pub at_end: bool,
}

/// One record as the reader stage hands it to the applier: starts and ends decoded, labels
/// interned and paired already, anything else kept encoded.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Event {
    Start(StartRec, StartPair),
    /// Worker, time, and the slot of its start (`u32::MAX`: not seen).
    End(u8, u64, u32),
    /// A message, its text and fields in [`Batch::texts`] and [`Batch::raw`] (checked once,
    /// when the reader decoded it).
    Message(MessageRec),
    /// Byte range of an encoded record in [`Batch::raw`].
    Raw(u32, u32),
}

/// A plot value as the reader stage hands it over: its name looked up already. Kept beside
/// the events, not among them, at half an event's size: a log with plots has one every few
/// frames, and the reader stage is the slower one on such logs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlotRec {
    timestamp: u64,
    value: f64,
    /// The reader stage's series id.
    series: u32,
    unit: PlotUnit,
    mode: PlotMode,
}

/// A message as the reader stage hands it over: [`formats::Message`] with its text and
/// fields moved into the batch's buffers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MessageRec {
    timestamp: u64,
    frame: u32,
    context: u32,
    /// Its text: `Batch::texts[text_at..text_at + text_len]`.
    text_at: u32,
    text_len: u32,
    /// Its fields: `Batch::raw[fields_at..fields_at + fields_len]` (`u32::MAX`: none).
    fields_at: u32,
    fields_len: u32,
    worker: u8,
    level: Level,
}

/// A slice of the log, digested by the reader stage.
#[derive(Default)]
pub struct Batch {
    pub(crate) events: Vec<Event>,
    /// Plot values, applied after the events (a plot's place among frames changes nothing).
    plots: Vec<PlotRec>,
    raw: Vec<u8>,
    /// Messages' texts.
    texts: String,
    /// Labels first seen in this batch, in id order.
    new_labels: Vec<Box<str>>,
    /// The reader's id of `new_labels[0]`.
    first_new_label: u32,
    /// Plot series first seen in this batch (worker, name), in id order.
    new_series: Vec<(u8, Box<str>)>,
    /// The reader's id of `new_series[0]`.
    first_new_series: u32,
    /// Workers whose process stopped writing, each with whether it was seen writing
    /// (applied after the batch's records).
    pub stopped_workers: Vec<(u8, bool)>,
    /// Damaged bytes skipped: (newest time read before them, what and where).
    pub damage: Vec<(u64, String)>,
    /// Record bytes in the batch that a viewer session gives back as credit once applied.
    pub credit: u64,
    /// Which batch this is to the reader stage (0 until its first record), so it knows which
    /// starts it holds.
    epoch: u32,
}

impl Batch {
    /// Empties the batch for reuse (its buffers keep their capacity).
    pub fn clear(&mut self) {
        self.events.clear();
        self.plots.clear();
        self.raw.clear();
        self.texts.clear();
        self.new_labels.clear();
        self.new_series.clear();
        self.stopped_workers.clear();
        self.damage.clear();
        self.credit = 0;
        self.epoch = 0;
    }

    /// True if it holds no records.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.plots.is_empty()
    }

    /// Records in the batch.
    pub fn len(&self) -> usize {
        self.events.len() + self.plots.len()
    }

    /// True if it carries anything for the model: records, labels, stopped workers, damage.
    pub fn has_news(&self) -> bool {
        !self.is_empty()
            || !self.new_labels.is_empty()
            || !self.stopped_workers.is_empty()
            || !self.damage.is_empty()
    }

    // Always inlined: the file ingest digests inside the compact decoder's loop (`IntoBatch`).
    #[inline(always)]
    fn push(&mut self, rec: &Record<'_>, key: LabelKey, d: &mut DigestMaps) {
        let DigestMaps {
            labels,
            block_labels,
            series,
            contexts,
            pairer,
            starts,
            epoch,
            announcements,
            last_start,
            last_early,
        } = d;
        if self.epoch == 0 {
            *epoch = epoch.wrapping_add(1).max(1);
            self.epoch = *epoch;
        }
        match rec {
            Record::Start(s) => {
                // A compact block's starts name their label by its index in the block's table:
                // each label is interned once per block, then looked up by index.
                let label = block_labels.id(key, || {
                    let before = labels.len();
                    let label = labels.intern(s.label);
                    if label as usize == before {
                        if self.new_labels.is_empty() {
                            self.first_new_label = label;
                        }
                        self.new_labels.push(s.label.into());
                    }
                    label
                });
                let context = contexts.index(s.worker, s.context);
                let pair = pairer.start(FrameKey::new(s.worker, s.id));
                if let StartPair::Waits(slot) = pair {
                    let slot = slot as usize;
                    if slot >= starts.len() {
                        starts.resize(slot + 1, (0, 0, 0));
                    }
                    starts[slot] = (self.epoch, self.events.len() as u32, *announcements);
                }
                if let StartPair::Ended(_) = pair {
                    *last_early = (self.epoch, self.events.len() as u32);
                }
                *last_start = (self.events.len() as u32, s.timestamp);
                self.events
                    .push(Event::Start(StartRec::new(s, label, context), pair));
            }
            Record::End(e) => {
                let slot = pairer.end(FrameKey::new(e.worker, e.id), e.timestamp);
                // Its start is in this batch, still waiting; no thread was announced since (so
                // every record between them is its thread's); every frame started since
                // started before this end; and none of them had its end already (those look
                // at their parents' ends). Then the model is the same whether this frame ends
                // now or when it is placed, so its start carries the end, and the applier has
                // one record fewer to apply (most frames end within a batch).
                if let Some(s) = slot
                    && let Some(&(epoch, at, announced)) = starts.get(s as usize)
                    && epoch == self.epoch
                    && announced == *announcements
                    && (last_start.0 == at || last_start.1 < e.timestamp)
                    && !(last_early.0 == self.epoch && last_early.1 > at)
                    && let Some(Event::Start(_, pair)) = self.events.get_mut(at as usize)
                    && *pair == StartPair::Waits(s)
                {
                    *pair = StartPair::EndsLater(e.timestamp);
                    starts[s as usize].0 = 0;
                    return;
                }
                self.events
                    .push(Event::End(e.worker, e.timestamp, slot.unwrap_or(u32::MAX)));
            }
            Record::Plot(p) => {
                let (id, new) = series.id(p.worker, p.name);
                if new {
                    if self.new_series.is_empty() {
                        self.first_new_series = id;
                    }
                    self.new_series.push((p.worker, p.name.into()));
                }
                self.plots.push(PlotRec {
                    timestamp: p.timestamp,
                    value: p.value,
                    series: id,
                    unit: p.unit,
                    mode: p.mode,
                });
            }
            Record::Message(m) => {
                let text_at = self.texts.len() as u32;
                self.texts.push_str(m.text);
                let fields_at = self.raw.len() as u32;
                if let Some(f) = m.fields {
                    self.raw.extend_from_slice(f);
                }
                self.events.push(Event::Message(MessageRec {
                    timestamp: m.timestamp,
                    frame: m.frame,
                    context: m.context,
                    text_at,
                    text_len: m.text.len() as u32,
                    fields_at,
                    fields_len: m.fields.map_or(u32::MAX, |f| f.len() as u32),
                    worker: m.worker,
                    level: m.level,
                }));
            }
            other => {
                if matches!(other, Record::ThreadInfo(_) | Record::WorkerInfo(_)) {
                    *announcements = announcements.wrapping_add(1);
                }
                let start = self.raw.len();
                self.raw.resize(start + other.encoded_len(), 0);
                let n = other.encode(&mut self.raw[start..]).unwrap_or(0);
                self.raw.truncate(start + n);
                self.events.push(Event::Raw(start as u32, n as u32));
            }
        }
    }
}

/// What the reader stage looks records up in, so the applier looks nothing up.
#[derive(Default)]
struct DigestMaps {
    labels: Interner,
    /// The label ids of the compact block read now, by its [`LabelKey`]s.
    block_labels: formats::BlockLabels,
    /// Plot series are numbered here, as labels are interned.
    series: SeriesIds,
    /// Contexts are indexed here, as labels are interned.
    contexts: ContextIndex,
    /// Starts and ends are paired here.
    pairer: Pairer,
    /// By pairing slot: the batch (its epoch), event index and announcement count of the
    /// start waiting in it.
    starts: Vec<(u32, u32, u32)>,
    /// The newest batch's epoch.
    epoch: u32,
    /// Thread and worker announcements read so far (a new one: records from then on may be
    /// another thread's).
    announcements: u32,
    /// The newest start: its event index in its batch, and its time.
    last_start: (u32, u64),
    /// The newest start whose end came first: its batch's epoch and its event index.
    last_early: (u32, u32),
}

/// The reader stage's state: labels interned and frames paired so far, the newest time read,
/// and the writers announced in the log.
#[derive(Default)]
pub struct ReaderStage {
    maps: DigestMaps,
    newest: u64,
    /// The log's writing processes.
    pub writers: WriterWatch,
}

impl ReaderStage {
    /// Adds one record (in log order) to `batch`.
    pub fn push(&mut self, rec: &Record<'_>, batch: &mut Batch) {
        self.push_keyed(rec, LabelKey::NONE, batch);
    }

    /// [`ReaderStage::push`] for a record read with its [`LabelKey`] (a compact block's start:
    /// its label is interned once per block, not compared at every start).
    #[inline(always)]
    pub fn push_keyed(&mut self, rec: &Record<'_>, key: LabelKey, batch: &mut Batch) {
        match rec {
            Record::WorkerInfo(w) => self.writers.announced(w.worker),
            Record::Start(s) => self.newest = self.newest.max(s.timestamp),
            Record::End(e) => self.newest = self.newest.max(e.timestamp),
            _ => {}
        }
        batch.push(rec, key, &mut self.maps);
    }

    /// `read` of the log's `total` bytes went by: its maps make room for what the rest will
    /// likely hold (see [`ContextIndex::expect`]).
    pub fn expect_bytes(&mut self, read: u64, total: u64) {
        self.maps.contexts.expect(read, total);
    }

    /// The newest frame time read so far (ns since the epoch; 0 before any frame).
    pub fn newest(&self) -> u64 {
        self.newest
    }

    /// Moves the writers found stopped into `batch` (call once everything they wrote has
    /// been read): the model ends their open frames after the batch, so their keys are free.
    pub fn stop_writers(&mut self, batch: &mut Batch) {
        batch.stopped_workers = self.writers.take_stopped();
        for &(w, _) in &batch.stopped_workers {
            self.maps.pairer.stop_worker(w);
            self.maps.contexts.forget_worker(w);
        }
    }
}

/// Which writing processes are alive, from whatever can tell: each announces itself in the
/// log (WorkerInfo), and is then looked at (a worker lock, a server's list of writers).
#[derive(Default)]
pub struct WriterWatch {
    /// Workers that announced themselves or were found writing, and were not found stopped
    /// since.
    writers: BTreeSet<u8>,
    /// Workers found writing (alive while this window watched).
    seen_writing: BTreeSet<u8>,
    /// Found not writing, each with whether it was seen writing before; reported once the
    /// log is read to its end again.
    stopped: Vec<(u8, bool)>,
}

impl WriterWatch {
    /// Worker `w` announced itself in the log (a new process in the slot, perhaps).
    pub fn announced(&mut self, w: u8) {
        self.writers.insert(w);
    }

    /// The workers to look at.
    pub fn writers(&self) -> Vec<u8> {
        self.writers.iter().copied().collect()
    }

    /// Worker `w` was found writing, or not: a worker not writing any more has stopped.
    pub fn observe(&mut self, w: u8, writing: bool) {
        if writing {
            self.writers.insert(w);
            self.seen_writing.insert(w);
        } else if self.writers.remove(&w) {
            let seen = self.seen_writing.remove(&w);
            self.stopped.push((w, seen));
        }
    }

    /// True if some worker was found stopped and not reported yet.
    pub fn any_stopped(&self) -> bool {
        !self.stopped.is_empty()
    }

    /// The workers found stopped since the last call, with whether each was seen writing.
    pub fn take_stopped(&mut self) -> Vec<(u8, bool)> {
        std::mem::take(&mut self.stopped)
    }
}

/// The reader stage's label and plot series ids mapped to the model's: equal by construction
/// today, but a lookup table (no hashing per record) keeps them right even if the two ever
/// disagree (a model that already held labels).
#[derive(Default)]
pub struct LabelMap {
    labels: Vec<u32>,
    series: Vec<u32>,
}

impl LabelMap {
    /// Interns the labels and plot series `batch` introduces into `model`; apply a batch's
    /// events only after.
    pub fn learn(&mut self, model: &mut Model, batch: &Batch) -> Result<(), String> {
        // Batches arrive in order, so neither can be out of step; say so rather than mislabel.
        if !batch.new_labels.is_empty() && batch.first_new_label as usize != self.labels.len() {
            return Err(format!(
                "internal error: label ids out of step (batch starts at {}, {} known); frames may be missing",
                batch.first_new_label,
                self.labels.len()
            ));
        }
        if !batch.new_series.is_empty() && batch.first_new_series as usize != self.series.len() {
            return Err(format!(
                "internal error: plot series ids out of step (batch starts at {}, {} known); plot values may be missing",
                batch.first_new_series,
                self.series.len()
            ));
        }
        for name in &batch.new_labels {
            self.labels.push(model.intern_label(name));
        }
        for (worker, name) in &batch.new_series {
            self.series.push(model.intern_series(*worker, name));
        }
        Ok(())
    }
}

/// Applies up to `max` of `events` (an iterator over `batch`'s) to `model`; returns how many
/// it applied (fewer than `max`: the batch is done). Drivers that must let others at the
/// model call it in chunks.
pub(crate) fn apply_events(
    model: &mut Model,
    batch: &Batch,
    labels: &LabelMap,
    events: &mut std::slice::Iter<'_, Event>,
    max: usize,
) -> usize {
    let mut n = 0;
    for ev in events.by_ref() {
        match ev {
            Event::Start(s, pair) => {
                let mut s = *s;
                s.label = labels
                    .labels
                    .get(s.label as usize)
                    .copied()
                    .unwrap_or(s.label);
                model.apply_start_paired(&s, *pair);
            }
            &Event::End(worker, t, slot) => {
                model.apply_end_paired(worker, t, (slot != u32::MAX).then_some(slot));
            }
            Event::Message(m) => {
                let at = m.text_at as usize;
                let fields = (m.fields_len != u32::MAX).then(|| {
                    let at = m.fields_at as usize;
                    &batch.raw[at..at + m.fields_len as usize]
                });
                model.apply(&Record::Message(Message {
                    frame: m.frame,
                    worker: m.worker,
                    timestamp: m.timestamp,
                    context: m.context,
                    level: m.level,
                    text: &batch.texts[at..at + m.text_len as usize],
                    fields,
                }));
            }
            &Event::Raw(at, len) => {
                let bytes = &batch.raw[at as usize..(at + len) as usize];
                if let Ok(Decoded::Record(rec, _)) = decode_record(bytes) {
                    model.apply(&rec);
                }
            }
        }
        n += 1;
        if n == max {
            break;
        }
    }
    n
}

/// Applies what follows a batch's events: its plot values, damaged bytes skipped, then writers
/// that stopped.
pub fn apply_marks(model: &mut Model, batch: &Batch, labels: &LabelMap) {
    for p in &batch.plots {
        if let Some(&series) = labels.series.get(p.series as usize) {
            model.apply_plot(series, p.unit, p.mode, p.timestamp, p.value);
        }
    }
    for (t, what) in &batch.damage {
        model.note_damage(*t, what.clone());
    }
    for &(w, seen_writing) in &batch.stopped_workers {
        model.mark_stopped(w, seen_writing);
    }
}

/// Applies a whole batch at once (a driver with the model to itself).
pub fn apply_batch(model: &mut Model, batch: &Batch, labels: &mut LabelMap) -> Result<(), String> {
    labels.learn(model, batch)?;
    apply_events(model, batch, labels, &mut batch.events.iter(), usize::MAX);
    apply_marks(model, batch, labels);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_log::Log;
    use rand::{Rng, SeedableRng};

    /// One record of a thread's stream, before the streams are interleaved into a log.
    #[derive(Clone, Copy)]
    enum Rec {
        Start(u8, u32, u64, u32, usize, formats::Parent),
        End(u8, u32, u64),
    }

    /// A random log as programs write one: threads of two processes each record frames in
    /// time order (nested, zero-length, at equal times, some handed to another thread to end,
    /// as async work is), and the writer appends each thread's records a chunk at a time,
    /// announcing the thread before its chunk. `parents`: starts record their parent (the
    /// thread's innermost frame, or now and then the other thread's, as async work that moved,
    /// or a frame not in the log), as type 6 records.
    fn random_log(seed: u64, parents: bool) -> Log {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let labels = ["request", "db", "render", "io", "job"];
        let threads = 4usize;
        let mut streams: Vec<Vec<Rec>> = vec![Vec::new(); threads];
        let mut clock = vec![1_000u64; threads];
        let mut stacks: Vec<Vec<(u32, u32)>> = vec![Vec::new(); threads];
        let mut next_id = [0u32; 2];
        for _ in 0..4_000 {
            let th = rng.gen_range(0..threads);
            let w = (th / 2) as u8;
            // With parents, a thread's times go up at each record: a parent ending at the very
            // nanosecond its child starts (which real clocks never show) is the one case the
            // rows cannot tell apart from the frame after it.
            clock[th] += rng.gen_range(u64::from(parents)..3);
            let t = clock[th];
            match rng.gen_range(0..10) {
                0..=4 if stacks[th].len() < 6 => {
                    next_id[w as usize] += 1;
                    let id = next_id[w as usize];
                    let mut ctx = stacks[th].last().map_or(id, |&(_, c)| c);
                    let mut parent = match stacks[th].last() {
                        _ if !parents => formats::Parent::NotRecorded,
                        Some(&(p, _)) => formats::Parent::Frame(p),
                        None => formats::Parent::Root,
                    };
                    let other = w as usize * 2 + (th + 1) % 2;
                    if parents && rng.gen_bool(0.2) {
                        if let Some(&(p, c)) = stacks[other].last() {
                            (parent, ctx) = (formats::Parent::Frame(p), c);
                        } else if rng.gen_bool(0.2) {
                            parent = formats::Parent::Frame(1_000_000 + id);
                        }
                    }
                    let label = rng.gen_range(0..labels.len());
                    streams[th].push(Rec::Start(w, id, t, ctx, label, parent));
                    stacks[th].push((id, ctx));
                }
                5 => {
                    // Async: another thread of the process ends it, later or earlier in the
                    // file than this thread's next records.
                    if let Some((id, _)) = stacks[th].pop() {
                        let other = w as usize * 2 + (th + 1) % 2;
                        clock[other] = clock[other].max(t) + rng.gen_range(0..3);
                        streams[other].push(Rec::End(w, id, clock[other]));
                    }
                }
                _ => {
                    if let Some((id, _)) = stacks[th].pop() {
                        streams[th].push(Rec::End(w, id, t));
                    }
                }
            }
        }
        let mut log = Log::default();
        let mut at = vec![0usize; threads];
        while (0..threads).any(|th| at[th] < streams[th].len()) {
            let th = rng.gen_range(0..threads);
            let n = rng.gen_range(1..40).min(streams[th].len() - at[th]);
            if n == 0 {
                continue;
            }
            log.thread((th / 2) as u8, th as u32, "t");
            for r in &streams[th][at[th]..at[th] + n] {
                match *r {
                    Rec::Start(w, id, t, ctx, l, p) => log.start_with(w, id, t, ctx, labels[l], p),
                    Rec::End(w, id, t) => log.end(w, id, t),
                };
            }
            at[th] += n;
        }
        log
    }

    #[test]
    fn ends_carried_by_their_starts_build_the_model_records_one_by_one_build() {
        let mut carried = 0;
        for seed in 0..24 {
            // Half of them with recorded parents.
            let log = random_log(seed, seed % 2 == 1);
            let mut direct = Model::new();
            direct.apply_bytes(&log.bytes);
            // The reader stage, in batches cut at random places.
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed + 100);
            let (mut digest, mut labels, mut model) =
                (ReaderStage::default(), LabelMap::default(), Model::new());
            let mut batch = Batch::default();
            for item in formats::RecordIter::new(&log.bytes, 0) {
                digest.push(&item.unwrap().1, &mut batch);
                if rng.gen_bool(0.01) {
                    carried += count_carried(&batch);
                    apply_batch(&mut model, &batch, &mut labels).unwrap();
                    batch.clear();
                }
            }
            carried += count_carried(&batch);
            apply_batch(&mut model, &batch, &mut labels).unwrap();
            assert_eq!(
                crate::model::same::difference(&model, &direct),
                None,
                "seed {seed}"
            );
            assert_eq!(model.record_count(), direct.record_count(), "seed {seed}");
        }
        assert!(carried > 1_000, "the shortcut is taken: {carried}");
    }

    /// Plot values handed over by series id (names looked up by the reader stage only) and
    /// messages handed over decoded build what a model given the records one by one builds:
    /// the same series (worker, name, newest unit and mode), values and order, the same
    /// messages (texts, fields, frames), whatever the batches' cuts, and into a model that
    /// already held series of its own (the ids then differ from the reader's).
    #[test]
    fn plots_and_messages_handed_over_decoded_build_what_records_one_by_one_build() {
        use formats::{Plot, PlotMode, PlotUnit};
        let names = ["queue depth", "rss", "queue", "q", "inflight"];
        for seed in 0..16 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut bytes = Vec::new();
            for i in 0..3_000u64 {
                let unit = PlotUnit(rng.gen_range(0..2));
                let mode = if rng.gen_bool(0.1) {
                    PlotMode::Summed
                } else {
                    PlotMode::Value
                };
                let p = Plot {
                    worker: rng.gen_range(0..3),
                    // Times out of order now and then, as threads' flushes are.
                    timestamp: 1_000 + i * 10 - rng.gen_range(0..3) * 25,
                    value: if rng.gen_bool(0.02) {
                        f64::NAN
                    } else {
                        rng.gen_range(-5.0..100.0)
                    },
                    mode,
                    unit,
                    name: names[rng.gen_range(0..names.len())],
                };
                Record::Plot(p).encode_to_vec(&mut bytes);
                if rng.gen_bool(0.2) {
                    let fields =
                        bson::to_vec(&bson::doc! { "i": i as i64, "user": "ann" }).unwrap();
                    let text = ["cache miss", "", "slow query é", "x"][rng.gen_range(0..4)];
                    Record::Message(Message {
                        frame: rng.gen_range(0..5),
                        worker: rng.gen_range(0..3),
                        timestamp: p.timestamp + 3,
                        context: rng.gen_range(0..5),
                        level: Level(rng.gen_range(1..6)),
                        text,
                        fields: rng.gen_bool(0.5).then_some(&fields[..]),
                    })
                    .encode_to_vec(&mut bytes);
                }
            }
            let mut direct = Model::new();
            let mut model = Model::new();
            if seed % 2 == 1 {
                // Series the model held before this reader's.
                for m in [&mut direct, &mut model] {
                    let own = Plot {
                        worker: 1,
                        timestamp: 5,
                        value: 1.0,
                        mode: PlotMode::Value,
                        unit: PlotUnit::COUNT,
                        name: "rss",
                    };
                    m.apply(&Record::Plot(own));
                    m.apply(&Record::Plot(Plot {
                        name: "other",
                        ..own
                    }));
                }
            }
            direct.apply_bytes(&bytes);
            let (mut digest, mut labels) = (ReaderStage::default(), LabelMap::default());
            let mut batch = Batch::default();
            for item in formats::RecordIter::new(&bytes, 0) {
                digest.push(&item.unwrap().1, &mut batch);
                if rng.gen_bool(0.02) {
                    apply_batch(&mut model, &batch, &mut labels).unwrap();
                    batch.clear();
                }
            }
            apply_batch(&mut model, &batch, &mut labels).unwrap();
            let (a, b) = (model.plots().series(), direct.plots().series());
            assert_eq!(a.len(), b.len(), "seed {seed}");
            for (x, y) in a.iter().zip(b) {
                let key = |s: &crate::model::plots::Series| {
                    (
                        s.worker,
                        s.name.clone(),
                        s.unit,
                        s.mode,
                        s.len(),
                        s.time_range(),
                    )
                };
                assert_eq!(key(x), key(y), "seed {seed}");
                let mut out = (Vec::new(), Vec::new());
                let (t0, t1) = (0, 40_000);
                let ax = x.lod(t0, t1, 7.0, &mut out.0);
                let bx = y.lod(t0, t1, 7.0, &mut out.1);
                assert_eq!(
                    format!("{ax:?} {:?}", out.0),
                    format!("{bx:?} {:?}", out.1),
                    "seed {seed}"
                );
            }
            let (a, b) = (model.messages(), direct.messages());
            assert!(b.len() > 400, "seed {seed}: {} messages", b.len());
            assert_eq!(a.len(), b.len(), "seed {seed}");
            for (x, y) in a.entries().iter().zip(b.entries()) {
                let key = |m: &crate::model::messages::Messages,
                           e: &crate::model::messages::Entry| {
                    let fields = m.fields(e).map(<[u8]>::to_vec);
                    (
                        e.time,
                        e.frame,
                        e.context,
                        e.worker,
                        e.level,
                        m.text(e).to_owned(),
                        fields,
                    )
                };
                assert_eq!(key(a, x), key(b, y), "seed {seed}");
            }
            assert_eq!(model.record_count(), direct.record_count(), "seed {seed}");
            assert_eq!(model.time_range(), direct.time_range(), "seed {seed}");
        }
    }

    /// Every frame's parent is the one its start recorded (a frame when it is in the log,
    /// unknown when not), whatever thread it ran on and wherever its start is in the file, and
    /// its call path is its recorded ancestors' labels.
    #[test]
    fn parents_read_back_are_the_recorded_ones() {
        use crate::model::ParentOf;
        for seed in 0..8 {
            let log = random_log(seed, true);
            let mut recorded = std::collections::HashMap::new();
            for item in formats::RecordIter::new(&log.bytes, 0) {
                if let Record::Start(s) = item.unwrap().1 {
                    recorded.insert(
                        FrameKey::new(s.worker, s.id),
                        (s.parent, s.label.to_owned()),
                    );
                }
            }
            let m = log.model();
            let tree = m.call_tree();
            let mut hops = 0;
            m.for_each_frame(|at, row, i| {
                let k = FrameKey::new(m.lanes()[at.lane as usize].worker, row.id(i));
                let want = match recorded[&k].0 {
                    formats::Parent::Frame(p) => {
                        let pk = FrameKey::new(k.worker, p);
                        Some(match recorded.get(&pk) {
                            Some(_) => ParentOf::Frame(m.find(pk).unwrap()),
                            None => ParentOf::Missing(pk),
                        })
                    }
                    _ => None,
                };
                assert_eq!(m.parent_of(at), want, "seed {seed}, frame {k}");
                if let Some(ParentOf::Frame(p)) = want {
                    hops += usize::from(p.lane != at.lane);
                    assert!(m.children_of(p).contains(&at), "seed {seed}, frame {k}");
                }
                // The call path: the labels up the recorded parents.
                let mut path = vec![recorded[&k].1.clone()];
                let mut up = recorded[&k].0;
                while let formats::Parent::Frame(p) = up
                    && let Some((pp, label)) = recorded.get(&FrameKey::new(k.worker, p))
                {
                    path.push(label.clone());
                    up = *pp;
                }
                path.reverse();
                let got: Vec<&str> = tree
                    .path(row.node(i))
                    .iter()
                    .map(|&n| m.labels().name(tree.label(n)))
                    .collect();
                assert_eq!(got, path, "seed {seed}, frame {k}");
            });
            assert!(hops > 50, "seed {seed}: {hops} parents on another thread");
        }
    }

    /// A process stops, and a new one in its worker slot uses the same context value: its
    /// request is a context of its own, read through the reader stage as applied directly.
    #[test]
    fn a_new_process_in_a_stopped_workers_slot_starts_its_own_contexts() {
        let mut before = Log::default();
        before.worker(0, 10, "first");
        before
            .start(0, 1, 100, 1, "request")
            .start(0, 2, 110, 1, "query");
        before.end(0, 2, 120).end(0, 1, 130);
        let mut after = Log::default();
        after.worker(0, 11, "second");
        after.start(0, 1, 200, 1, "request").end(0, 1, 230);
        // Directly.
        let mut direct = Model::new();
        direct.apply_bytes(&before.bytes);
        direct.mark_stopped(0, false);
        direct.apply_bytes(&after.bytes);
        // Through the reader stage, the stop found after the first process's records.
        let (mut digest, mut labels, mut model) =
            (ReaderStage::default(), LabelMap::default(), Model::new());
        for (i, log) in [&before, &after].into_iter().enumerate() {
            let mut batch = Batch::default();
            for item in formats::RecordIter::new(&log.bytes, 0) {
                digest.push(&item.unwrap().1, &mut batch);
            }
            if i == 0 {
                digest.writers.observe(0, false);
                digest.stop_writers(&mut batch);
            }
            apply_batch(&mut model, &batch, &mut labels).unwrap();
        }
        for m in [&direct, &model] {
            let frames: Vec<u32> = m.contexts().entries().iter().map(|e| e.frames()).collect();
            assert_eq!(frames, [2, 1], "two requests, not one of three frames");
        }
        assert_eq!(crate::model::same::difference(&model, &direct), None);
    }

    fn count_carried(b: &Batch) -> usize {
        b.events
            .iter()
            .filter(|e| matches!(e, Event::Start(_, StartPair::EndsLater(_))))
            .count()
    }

    #[test]
    fn a_label_key_names_its_label_within_its_block_only() {
        // Two compact blocks number the same two labels in opposite orders; a start without a
        // key (a raw segment's) is interned by its text.
        let mut digest = ReaderStage::default();
        let mut batch = Batch::default();
        let start = |id: u32, label: &'static str| {
            Record::Start(formats::FrameStart {
                id,
                worker: 0,
                timestamp: u64::from(id),
                context: id,
                category: formats::Category(0),
                label,
                parent: formats::Parent::NotRecorded,
            })
        };
        let key = |block, label| LabelKey { block, label };
        digest.push_keyed(&start(1, "a"), key(7, 0), &mut batch);
        digest.push_keyed(&start(2, "b"), key(7, 1), &mut batch);
        digest.push_keyed(&start(3, "a"), key(7, 0), &mut batch);
        digest.push_keyed(&start(4, "b"), key(8, 0), &mut batch);
        digest.push_keyed(&start(5, "a"), key(8, 1), &mut batch);
        digest.push_keyed(&start(6, "b"), LabelKey::NONE, &mut batch);
        let labels: Vec<u32> = batch
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Start(s, _) => Some(s.label),
                _ => None,
            })
            .collect();
        assert_eq!(labels, [0, 1, 0, 1, 0, 1]);
        assert_eq!(&batch.new_labels[..], [Box::from("a"), Box::from("b")]);
    }
}
