//! Records into model updates, whatever their source: a log directory read by
//! [`crate::ingest`] or a viewer session over a WebSocket ([`crate::remote`]).
//!
//! Nothing here opens a file, starts a thread or reads a clock, so it runs unchanged where
//! there are none (the debugger compiled to WebAssembly). The drivers decide where each stage
//! runs: the file ingest digests on its reader thread and applies on a second one, holding the
//! model lock one chunk at a time.
//!
//! - [`Digest`] (the reader stage) decodes nothing itself: it takes decoded records, interns
//!   their labels and pairs starts with ends, into a [`Batch`] the model applies without
//!   hashing a key.
//! - [`LabelMap`] and [`apply_events`] / [`apply_marks`] (the applier stage) put a batch into
//!   the [`Model`].
//! - [`WriterWatch`] decides which writing processes stopped, from whatever tells it who is
//!   alive (worker locks on disk, a server's Status messages).
//! - [`viewer`]: the client side of a viewer session (`docs/PROTOCOL.md`).

pub mod viewer;

use std::collections::BTreeSet;

use formats::{Decoded, FrameKey, Record, decode_record};

use crate::model::contexts::ContextIndex;
use crate::model::intern::Interner;
use crate::model::pair::{Pairer, StartPair};
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
    /// Byte range of an encoded record in [`Batch::raw`].
    Raw(u32, u32),
}

/// A slice of the log, digested by the reader stage.
#[derive(Default)]
pub struct Batch {
    pub(crate) events: Vec<Event>,
    raw: Vec<u8>,
    /// Labels first seen in this batch, in id order.
    new_labels: Vec<Box<str>>,
    /// The reader's id of `new_labels[0]`.
    first_new_label: u32,
    /// Workers whose process stopped writing, each with whether it was seen writing
    /// (applied after the batch's records).
    pub stopped_workers: Vec<(u8, bool)>,
    /// Damaged bytes skipped: (newest time read before them, what and where).
    pub damage: Vec<(u64, String)>,
    /// Record bytes in the batch that a viewer session gives back as credit once applied.
    pub credit: u64,
}

impl Batch {
    /// Empties the batch for reuse (its buffers keep their capacity).
    pub fn clear(&mut self) {
        self.events.clear();
        self.raw.clear();
        self.new_labels.clear();
        self.stopped_workers.clear();
        self.damage.clear();
        self.credit = 0;
    }

    /// True if it holds no records.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Records in the batch.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// True if it carries anything for the model: records, labels, stopped workers, damage.
    pub fn has_news(&self) -> bool {
        !self.is_empty()
            || !self.new_labels.is_empty()
            || !self.stopped_workers.is_empty()
            || !self.damage.is_empty()
    }

    fn push(
        &mut self,
        rec: &Record<'_>,
        labels: &mut Interner,
        contexts: &mut ContextIndex,
        pairer: &mut Pairer,
    ) {
        match rec {
            Record::Start(s) => {
                let before = labels.len();
                let label = labels.intern(s.label);
                if label as usize == before {
                    if self.new_labels.is_empty() {
                        self.first_new_label = label;
                    }
                    self.new_labels.push(s.label.into());
                }
                let context = contexts.index(s.worker, s.context);
                let pair = pairer.start(FrameKey::new(s.worker, s.id));
                self.events
                    .push(Event::Start(StartRec::new(s, label, context), pair));
            }
            Record::End(e) => {
                let slot = pairer.end(FrameKey::new(e.worker, e.id), e.timestamp);
                self.events
                    .push(Event::End(e.worker, e.timestamp, slot.unwrap_or(u32::MAX)));
            }
            other => {
                let start = self.raw.len();
                self.raw.resize(start + other.encoded_len(), 0);
                let n = other.encode(&mut self.raw[start..]).unwrap_or(0);
                self.raw.truncate(start + n);
                self.events.push(Event::Raw(start as u32, n as u32));
            }
        }
    }
}

/// The reader stage's state: labels interned and frames paired so far, the newest time read,
/// and the writers announced in the log.
#[derive(Default)]
pub struct Digest {
    labels: Interner,
    /// Contexts are indexed here, so the applier looks nothing up for them either.
    contexts: ContextIndex,
    /// Starts and ends are paired here, so the applier looks nothing up.
    pairer: Pairer,
    newest: u64,
    /// The log's writing processes.
    pub writers: WriterWatch,
}

impl Digest {
    /// Adds one record (in log order) to `batch`.
    pub fn push(&mut self, rec: &Record<'_>, batch: &mut Batch) {
        match rec {
            Record::WorkerInfo(w) => self.writers.announced(w.worker),
            Record::Start(s) => self.newest = self.newest.max(s.timestamp),
            Record::End(e) => self.newest = self.newest.max(e.timestamp),
            _ => {}
        }
        batch.push(rec, &mut self.labels, &mut self.contexts, &mut self.pairer);
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
            self.pairer.stop_worker(w);
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

/// The reader stage's label ids mapped to the model's: equal by construction today, but a
/// lookup table (no hashing per record) keeps them right even if the two interners ever
/// disagree (a model that already held labels).
#[derive(Default)]
pub struct LabelMap(Vec<u32>);

impl LabelMap {
    /// Interns the labels `batch` introduces into `model`; apply a batch's events only after.
    pub fn learn(&mut self, model: &mut Model, batch: &Batch) -> Result<(), String> {
        if !batch.new_labels.is_empty() && batch.first_new_label as usize != self.0.len() {
            // Batches arrive in order, so this cannot happen; say so rather than mislabel.
            return Err(format!(
                "internal error: label ids out of step (batch starts at {}, {} known); frames may be missing",
                batch.first_new_label,
                self.0.len()
            ));
        }
        for name in &batch.new_labels {
            self.0.push(model.intern_label(name));
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
                s.label = labels.0.get(s.label as usize).copied().unwrap_or(s.label);
                model.apply_start_paired(&s, *pair);
            }
            &Event::End(worker, t, slot) => {
                model.apply_end_paired(worker, t, (slot != u32::MAX).then_some(slot));
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

/// Applies what follows a batch's records: damaged bytes skipped, then writers that stopped.
pub fn apply_marks(model: &mut Model, batch: &Batch) {
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
    apply_marks(model, batch);
    Ok(())
}
