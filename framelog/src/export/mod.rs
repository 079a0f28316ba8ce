//! Exporting a log to other viewers: Chrome Trace Event JSON ([`chrome`]: Perfetto UI,
//! chrome://tracing, speedscope's and Tracy's importers) and speedscope's own format
//! ([`speedscope`]).
//!
//! [`export`] streams the log once, in file order: records become frames on strictly nested
//! per-thread tracks ([`tracks`]), filtered by context, label and time window, each with its
//! frame data when asked, and go to a [`FrameSink`] as they are released. Memory holds the
//! open frames and one root's subtree per thread, not the log.

pub mod chrome;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod speedscope;
pub mod tracks;

use rustc_hash::FxHashMap as HashMap;
use std::path::Path;

use formats::{Category, FrameKey, Record};

use crate::label_match::LabelPattern;
use crate::{DataStore, LogReader};

pub use tracks::Done;

/// What to export.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// Only frames of this context (a root frame's id).
    pub context: Option<u32>,
    /// Only frames whose label matches.
    pub label: Option<LabelPattern>,
    /// Only frames that end after this many ns from the log's start (its earliest thread or
    /// frame record).
    pub from_ns: Option<u64>,
    /// Only frames that start before this many ns from the log's first record.
    pub to_ns: Option<u64>,
    /// Look up each frame's data (an index lookup per frame; a read per frame with data).
    pub with_data: bool,
}

/// A frame as exported.
#[derive(Debug, Clone)]
pub struct Frame<'a> {
    /// Its key.
    pub key: FrameKey,
    /// Worker and thread it started on.
    pub thread: (u8, u32),
    /// Label.
    pub label: &'a str,
    /// Category.
    pub category: Category,
    /// Context (root frame id).
    pub context: u32,
    /// Start, ns since the log's start (its earliest thread or frame record).
    pub start_ns: u64,
    /// End, ns since the log's start.
    pub end_ns: u64,
    /// On an async track (it does not nest on its thread).
    pub async_track: bool,
    /// Still open when the log ended (its end is the log's last time).
    pub open: bool,
    /// The frame it started inside on its thread, if any.
    pub parent: Option<FrameKey>,
    /// The log's start, ns since the Unix epoch (add it to `start_ns`/`end_ns` for wall time).
    pub origin_ns: u64,
    /// Its data, if asked for and present.
    pub data: Option<bson::Document>,
}

/// Receives what an export finds, in release order.
pub trait FrameSink {
    /// A process (worker) appears.
    fn process(&mut self, worker: u8, pid: u32, name: &str) -> std::io::Result<()>;
    /// A thread appears (or is renamed).
    fn thread(&mut self, worker: u8, thread: u32, name: &str) -> std::io::Result<()>;
    /// A frame is released.
    fn frame(&mut self, frame: &Frame<'_>) -> std::io::Result<()>;
    /// The export is complete.
    fn finish(&mut self) -> std::io::Result<()>;
}

/// What an export did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExportSummary {
    /// Frames written.
    pub frames: u64,
    /// Of which on async tracks.
    pub async_frames: u64,
    /// Of which still open at the log's end.
    pub open_frames: u64,
    /// Damaged bytes skipped while reading.
    pub damaged_bytes: u64,
}

struct StartInfo {
    label: u32,
    category: Category,
    context: u32,
}

/// Why an export stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Reading the log failed.
    #[error(transparent)]
    Log(#[from] crate::Error),
    /// Writing the output failed.
    #[error("writing the export: {0}")]
    Output(#[source] std::io::Error),
}

/// Exports the log in `dir` to `sink`.
pub fn export(
    dir: &Path,
    opts: &ExportOptions,
    sink: &mut dyn FrameSink,
) -> std::result::Result<ExportSummary, ExportError> {
    // The time origin: the earliest frame or thread record (a first pass over timestamps;
    // the file is not in time order across workers and threads).
    let mut origin: Option<u64> = None;
    LogReader::open(dir)?.read_available(|_, rec| {
        let ts = match rec {
            Record::Start(s) => s.timestamp,
            Record::ThreadInfo(t) => t.timestamp,
            _ => return,
        };
        origin = Some(origin.map_or(ts, |o| o.min(ts)));
    })?;
    let mut reader = LogReader::open(dir)?;
    let mut store = if opts.with_data {
        Some(DataStore::open(dir)?)
    } else {
        None
    };
    let mut labels: Vec<String> = Vec::new();
    let mut label_ids: HashMap<String, u32> = HashMap::default();
    let mut tracks: Tracks<StartInfo> = Tracks::default();
    let mut current_thread: HashMap<u8, u32> = HashMap::default();
    let mut t0: Option<u64> = origin;
    let mut last = 0u64;
    let mut summary = ExportSummary::default();
    let mut done: Vec<Done<StartInfo>> = Vec::new();
    let mut io_error: Option<std::io::Error> = None;
    let emit = |done: &mut Vec<Done<StartInfo>>,
                labels: &[String],
                t0: u64,
                store: &mut Option<DataStore>,
                sink: &mut dyn FrameSink,
                summary: &mut ExportSummary|
     -> std::io::Result<()> {
        for d in done.drain(..) {
            let (start, end) = (d.start_ns.saturating_sub(t0), d.end_ns.saturating_sub(t0));
            if opts.from_ns.is_some_and(|f| end < f) || opts.to_ns.is_some_and(|t| start > t) {
                continue;
            }
            let data = match store {
                Some(s) if s.contains(d.key) => s.get(d.key).ok().flatten(),
                _ => None,
            };
            let f = Frame {
                key: d.key,
                thread: d.thread,
                label: &labels[d.info.label as usize],
                category: d.info.category,
                context: d.info.context,
                start_ns: start,
                end_ns: end,
                async_track: d.async_track,
                open: d.open,
                parent: d.parent,
                origin_ns: t0,
                data,
            };
            sink.frame(&f)?;
            summary.frames += 1;
            summary.async_frames += u64::from(d.async_track);
            summary.open_frames += u64::from(d.open);
        }
        Ok(())
    };
    reader.read_available(|_, rec| {
        if io_error.is_some() {
            return;
        }
        let result = (|| -> std::io::Result<()> {
            match rec {
                Record::WorkerInfo(w) => {
                    // Not a time origin: a writer stamps it when it opens the log.
                    sink.process(w.worker, w.pid, w.name)?;
                }
                Record::ThreadInfo(t) => {
                    t0.get_or_insert(t.timestamp);
                    if current_thread.insert(t.worker, t.thread) != Some(t.thread) {
                        sink.thread(t.worker, t.thread, t.name)?;
                    }
                }
                Record::Start(s) => {
                    t0.get_or_insert(s.timestamp);
                    last = last.max(s.timestamp);
                    if opts.context.is_some_and(|c| c != s.context)
                        || opts.label.as_ref().is_some_and(|p| !p.matches(s.label))
                    {
                        return Ok(());
                    }
                    let label = match label_ids.get(s.label) {
                        Some(&id) => id,
                        None => {
                            let id = labels.len() as u32;
                            labels.push(s.label.to_owned());
                            label_ids.insert(s.label.to_owned(), id);
                            id
                        }
                    };
                    let thread = (
                        s.worker,
                        current_thread.get(&s.worker).copied().unwrap_or(0),
                    );
                    let info = StartInfo {
                        label,
                        category: s.category,
                        context: s.context,
                    };
                    tracks.start(
                        FrameKey::new(s.worker, s.id),
                        thread,
                        s.timestamp,
                        info,
                        &mut |d| done.push(d),
                    );
                }
                Record::End(e) => {
                    last = last.max(e.timestamp);
                    tracks.end(FrameKey::new(e.worker, e.id), e.timestamp, &mut |d| {
                        done.push(d)
                    });
                }
                Record::Dropped(d) => last = last.max(d.timestamp),
                Record::Unknown(_) => {}
            }
            if !done.is_empty() {
                emit(
                    &mut done,
                    &labels,
                    t0.unwrap_or(0),
                    &mut store,
                    sink,
                    &mut summary,
                )?;
            }
            Ok(())
        })();
        if let Err(e) = result {
            io_error = Some(e);
        }
    })?;
    if let Some(e) = io_error {
        return Err(ExportError::Output(e));
    }
    tracks.finish(last, &mut |d| done.push(d));
    emit(
        &mut done,
        &labels,
        t0.unwrap_or(0),
        &mut store,
        sink,
        &mut summary,
    )
    .map_err(ExportError::Output)?;
    sink.finish().map_err(ExportError::Output)?;
    summary.damaged_bytes = reader.damage_totals().0;
    Ok(summary)
}

use tracks::Tracks;
