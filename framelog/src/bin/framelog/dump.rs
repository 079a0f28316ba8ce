//! `framelog dump`: one line per record, human-readable or JSON, optionally following.

use std::collections::{HashMap, VecDeque};
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use analysis::pairing::Pairing;
use anyhow::Result;
use clap::Args;
use formats::{Breakdown, Category, FrameEnd, FrameKey, Parent, Record, RecordType};
use framelog::LogReader;
use framelog::label_match::LabelPattern;
use serde_json::json;

use crate::output;

/// Arguments of `framelog dump`.
#[derive(Args)]
pub struct DumpArgs {
    /// The log directory.
    dir: PathBuf,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    /// Keep printing as the log grows.
    #[arg(long, short)]
    follow: bool,
    /// Only records of this worker.
    #[arg(long)]
    worker: Option<u8>,
    /// Only frames of this category (name like `database`, or a number).
    #[arg(long, value_parser = parse_category)]
    category: Option<Category>,
    /// Only frames whose label matches: `db` (contains), `"User: Select"` (exactly) or a
    /// glob such as `'db/*'`; case-insensitive.
    #[arg(long)]
    label: Option<String>,
    /// Only frames of this context.
    #[arg(long)]
    context: Option<u32>,
}

fn parse_category(s: &str) -> Result<Category, String> {
    Category::parse(s).ok_or_else(|| {
        let names: Vec<_> = Category::ALL.iter().filter_map(|c| c.name()).collect();
        format!(
            "unknown category {s:?}; expected a number or one of {}",
            names.join(", ")
        )
    })
}

/// The sizes of the log's frame-log segments as last listed: what a segment held is known
/// after retention deletes it only if it was seen before.
#[derive(Default)]
struct SegmentSizes {
    bytes: std::collections::BTreeMap<u32, u64>,
}

impl SegmentSizes {
    /// Lists the segments there now (sizes of deleted ones are kept).
    fn refresh(&mut self, dir: &std::path::Path) {
        let kind = formats::FileKind::FrameLog;
        for n in framelog::segments::list(dir, kind).unwrap_or_default() {
            if let Ok(m) = std::fs::metadata(framelog::segments::segment_path(dir, kind, n)) {
                self.bytes.insert(n, m.len());
            }
        }
    }

    /// One line on segments `gone` deleted before they were read: which, their bytes, and
    /// about how many records that was at the bytes per record read so far.
    fn describe_pruned(
        &self,
        dir: &std::path::Path,
        gone: std::ops::Range<u32>,
        bytes_read: u64,
        records: u64,
    ) -> String {
        let which = if gone.end - gone.start == 1 {
            format!("segment {}", gone.start)
        } else {
            format!("segments {}-{}", gone.start, gone.end - 1)
        };
        let known: Vec<u64> = gone
            .clone()
            .filter_map(|n| self.bytes.get(&n).copied())
            .collect();
        let lost = if known.is_empty() {
            "their size was never seen".to_owned()
        } else {
            let bytes: u64 = known.iter().sum();
            let partly = if known.len() < gone.len() {
                format!(" (of {} of them)", known.len())
            } else {
                String::new()
            };
            let estimate = if records > 0 && bytes_read > 0 {
                let per = bytes_read as f64 / records as f64;
                format!(
                    ", about {} records at the {per:.0} bytes a record read so far",
                    (bytes as f64 / per).round() as u64
                )
            } else {
                String::new()
            };
            format!("{}{partly}{estimate}", output::bytes(bytes))
        };
        format!(
            "{}: {which} deleted by retention before this reader got to them: {lost}",
            dir.display()
        )
    }
}

/// Decides which records to print. Ends carry no label, so they follow their start.
struct Filter {
    worker: Option<u8>,
    category: Option<Category>,
    label: Option<LabelPattern>,
    context: Option<u32>,
}

impl Filter {
    fn frame_filters(&self) -> bool {
        self.category.is_some() || self.label.is_some() || self.context.is_some()
    }

    fn start_matches(&self, s: &formats::FrameStart<'_>) -> bool {
        self.category.is_none_or(|c| c == s.category)
            && self.context.is_none_or(|c| c == s.context)
            && self.label.as_ref().is_none_or(|p| p.matches(s.label))
    }
}

/// Ends held until their start is read, at most this many (the oldest beyond it are printed
/// without a duration). An end comes before its start in the file when a frame moved
/// threads and its end's buffer was written first: a few milliseconds of records apart.
const MAX_HELD_ENDS: usize = 1 << 16;

/// Pairing state: frames seen, with whether their start passed the filter, and the ends
/// read before their start (printed right after it, with their duration).
#[derive(Default)]
struct Starts {
    pairing: Pairing<bool>,
    held: HashMap<FrameKey, u64>,
    held_order: VecDeque<FrameKey>,
    /// Frame-polls records of frames whose end is not printed yet (at most
    /// [`MAX_HELD_ENDS`]; written right before the end, so rarely more than a few).
    polls: HashMap<FrameKey, formats::FramePolls>,
}

impl Starts {
    /// The busy, queued and waiting split of a frame that lasted `duration`, if it recorded
    /// its polls (forgotten once asked for).
    fn split(&mut self, key: FrameKey, duration: Option<u64>) -> Option<Breakdown> {
        let d = duration?;
        if self.polls.is_empty() {
            return None;
        }
        self.polls.remove(&key).map(|p| p.split(d))
    }

    /// Holds an end whose start has not been read; returns an older one pushed out.
    fn hold(&mut self, key: FrameKey, end_ns: u64) -> Option<(FrameKey, u64)> {
        self.held.insert(key, end_ns);
        self.held_order.push_back(key);
        if self.held.len() <= MAX_HELD_ENDS {
            return None;
        }
        self.take_oldest()
    }

    /// The oldest end still held.
    fn take_oldest(&mut self) -> Option<(FrameKey, u64)> {
        while let Some(k) = self.held_order.pop_front() {
            if let Some(ns) = self.held.remove(&k) {
                return Some((k, ns));
            }
        }
        None
    }
}

pub fn run(args: &DumpArgs) -> Result<ExitCode> {
    let label = match &args.label {
        Some(p) => LabelPattern::parse(p).map_err(anyhow::Error::msg)?,
        None => None,
    };
    let filter = Filter {
        worker: args.worker,
        category: args.category,
        label,
        context: args.context,
    };
    let not_yet = !args.dir.exists() || args.dir.is_dir() && !framelog::segments::is_log(&args.dir);
    if args.follow && not_yet {
        // A directory a recorder (`framelog serve`, a program's first run) has not created
        // or not written yet: wait for its first segment, as following waits for growth.
        let why = if args.dir.exists() {
            "no frames yet"
        } else {
            "does not exist yet"
        };
        eprintln!(
            "framelog: {}: {why}; waiting for a program to write",
            args.dir.display()
        );
        while !framelog::segments::is_log(&args.dir) {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let mut reader = LogReader::open(&args.dir)?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut starts = Starts::default();
    let mut sizes = SegmentSizes::default();
    let mut records = 0u64;
    loop {
        if args.follow {
            sizes.refresh(&args.dir);
        }
        let mut io_err = None;
        let result = reader.read_available(|_, rec| {
            records += 1;
            if io_err.is_none()
                && let Err(e) = print(&mut out, &filter, &mut starts, args.json, &rec)
            {
                io_err = Some(e);
            }
        });
        if let Some(e) = io_err {
            return Err(e.into());
        }
        out.flush()?;
        result?;
        // Damaged bytes are skipped; say where on stderr and keep going.
        for d in reader.take_damage() {
            eprintln!("framelog: warning: {d}");
        }
        // So are segments retention deleted before this reader got to them.
        for gone in reader.take_pruned() {
            eprintln!(
                "framelog: warning: {}",
                sizes.describe_pruned(&args.dir, gone, reader.bytes_read(), records)
            );
        }
        if !args.follow {
            // Ends whose start is not in the log (dropped, or cut by retention).
            while let Some((key, end_ns)) = starts.take_oldest() {
                print_orphan_end(&mut out, &filter, args.json, key, end_ns)?;
            }
            out.flush()?;
            return Ok(ExitCode::SUCCESS);
        }
        reader.wait_for_growth(Duration::from_secs(1))?;
    }
}

/// Prints an end whose start was never read (unless frames are filtered: then nothing
/// says it belongs).
fn print_orphan_end(
    out: &mut impl Write,
    filter: &Filter,
    json: bool,
    key: FrameKey,
    end_ns: u64,
) -> std::io::Result<()> {
    if filter.frame_filters() {
        return Ok(());
    }
    let end = FrameEnd {
        id: key.id,
        worker: key.worker,
        timestamp: end_ns,
    };
    print_record(out, json, &Record::End(end), None, None)
}

fn print(
    out: &mut impl Write,
    filter: &Filter,
    starts: &mut Starts,
    json: bool,
    rec: &Record<'_>,
) -> std::io::Result<()> {
    if filter.worker.is_some_and(|w| w != rec.worker()) {
        return Ok(());
    }
    let key = FrameKey::new(rec.worker(), rec.id());
    let mut duration = None;
    match rec {
        Record::Start(s) => {
            let pass = filter.start_matches(s);
            let early = starts.pairing.start(key, s.timestamp, pass);
            if pass {
                print_record(out, json, rec, None, None)?;
            }
            // Its end was read first and held: printed now, after its start.
            if let Some(end_ns) = starts.held.remove(&key)
                && pass
            {
                let end = FrameEnd {
                    id: s.id,
                    worker: s.worker,
                    timestamp: end_ns,
                };
                let d = early.map(|f| f.duration_ns());
                let split = starts.split(key, d);
                print_record(out, json, &Record::End(end), d, split)?;
            }
            return Ok(());
        }
        Record::End(e) => match starts.pairing.end(key, e.timestamp) {
            Some(f) if !f.start_info => {
                starts.polls.remove(&key);
                return Ok(());
            }
            Some(f) => duration = Some(f.duration_ns()),
            // An end whose start comes later (or was dropped): held until its start.
            None => {
                if let Some((old, end_ns)) = starts.hold(key, e.timestamp) {
                    print_orphan_end(out, filter, json, old, end_ns)?;
                }
                return Ok(());
            }
        },
        Record::FramePolls(p) if starts.polls.len() < MAX_HELD_ENDS => {
            starts.polls.insert(key, *p);
        }
        _ => {}
    }
    if filter.frame_filters() && !matches!(rec, Record::End(_)) {
        return Ok(());
    }
    let split = starts.split(key, duration);
    print_record(out, json, rec, duration, split)
}

/// Prints one record; `duration` is an end's, when its start was read, and `split` its
/// busy, queued and waiting time when it recorded its polls.
fn print_record(
    out: &mut impl Write,
    json: bool,
    rec: &Record<'_>,
    duration: Option<u64>,
    split: Option<Breakdown>,
) -> std::io::Result<()> {
    if json {
        let mut v = json!({
            "type": RecordType::name_of(rec.type_byte()),
            "id": rec.id(),
            "worker": rec.worker(),
            "timestamp": rec.timestamp(),
        });
        let o = v.as_object_mut().expect("object");
        match rec {
            Record::Start(s) => {
                o.insert("context".into(), s.context.into());
                o.insert("category".into(), s.category.to_string().into());
                o.insert("label".into(), s.label.into());
                // The recorded parent's id, null for a recorded root; absent when the log
                // does not record it (a reader infers it).
                match s.parent {
                    Parent::Frame(p) => {
                        o.insert("parent".into(), p.into());
                    }
                    Parent::Root => {
                        o.insert("parent".into(), serde_json::Value::Null);
                    }
                    Parent::NotRecorded => {}
                }
            }
            Record::End(_) => {
                if let Some(d) = duration {
                    o.insert("duration_ns".into(), d.into());
                }
                if let Some(s) = split {
                    o.insert("busy_ns".into(), s.busy_ns.into());
                    o.insert("queued_ns".into(), s.queued_ns.into());
                    o.insert("waiting_ns".into(), s.waiting_ns.into());
                }
            }
            Record::Dropped(d) => {
                o.insert("count".into(), d.count.into());
            }
            Record::WorkerInfo(w) => {
                o.insert("pid".into(), w.pid.into());
                o.insert("name".into(), w.name.into());
            }
            Record::ThreadInfo(t) => {
                o.insert("thread".into(), t.thread.into());
                o.insert("name".into(), t.name.into());
            }
            Record::Plot(p) => {
                o.insert("name".into(), p.name.into());
                o.insert("value".into(), output::json_f64(p.value));
                o.insert("unit".into(), p.unit.name().into());
                if p.mode == formats::PlotMode::Summed {
                    o.insert("summed".into(), true.into());
                }
            }
            Record::Message(m) => {
                o.insert("context".into(), m.context.into());
                o.insert("level".into(), m.level.name().into());
                o.insert("text".into(), m.text.into());
                if let Some(doc) = m.fields.and_then(|f| bson::Document::from_reader(f).ok()) {
                    o.insert(
                        "fields".into(),
                        bson::Bson::Document(doc).into_relaxed_extjson(),
                    );
                }
            }
            Record::FrameAlloc(a) => {
                o.insert("allocs".into(), a.allocs.into());
                o.insert("alloc_bytes".into(), a.alloc_bytes.into());
                o.insert("frees".into(), a.frees.into());
                o.insert("freed_bytes".into(), a.freed_bytes.into());
            }
            Record::FramePolls(p) => {
                o.insert("polls".into(), p.polls.into());
                o.insert("busy_ns".into(), p.busy_ns.into());
                o.insert("queued_ns".into(), p.queued_ns.into());
                o.insert("longest_poll_ns".into(), p.longest_poll_ns.into());
                o.insert("first_poll_ns".into(), p.first_poll_ns.into());
                o.insert("slow_polls".into(), p.slow_polls.into());
                o.insert("queued_measured".into(), p.queued_measured().into());
            }
            Record::SlowPoll(p) => {
                o.insert("duration_ns".into(), p.duration_ns.into());
            }
            Record::Unknown(x) => {
                o.insert("payload_size".into(), x.payload.len().into());
            }
        }
        writeln!(out, "{v}")
    } else {
        let head = format!(
            "{}  w{:<3} {:>10}  {:<11}",
            output::time(rec.timestamp()),
            rec.worker(),
            rec.id(),
            RecordType::name_of(rec.type_byte())
        );
        match rec {
            Record::Start(s) => writeln!(
                out,
                "{head} {:<9} ctx {:<10} {:<17} {}",
                s.category.to_string(),
                s.context,
                match s.parent {
                    Parent::Frame(p) => format!("parent {p}"),
                    Parent::Root => "root".to_owned(),
                    Parent::NotRecorded => String::new(),
                },
                output::text(s.label)
            ),
            Record::End(_) => match (duration, split) {
                (Some(d), Some(s)) => writeln!(
                    out,
                    "{head} {}  busy {}, queued {}, waiting {}",
                    output::duration(d),
                    output::duration(s.busy_ns),
                    output::duration(s.queued_ns),
                    output::duration(s.waiting_ns)
                ),
                (Some(d), None) => writeln!(out, "{head} {}", output::duration(d)),
                (None, _) => writeln!(out, "{head} (start not seen)"),
            },
            Record::Dropped(d) => writeln!(out, "{head} {} records dropped", d.count),
            Record::WorkerInfo(w) => {
                writeln!(out, "{head} pid {} {}", w.pid, output::text(w.name))
            }
            Record::ThreadInfo(t) => {
                writeln!(out, "{head} thread {} {}", t.thread, output::text(t.name))
            }
            Record::Plot(p) => writeln!(
                out,
                "{head} {} = {} {}{}",
                output::text(p.name),
                p.value,
                p.unit.name(),
                if p.mode == formats::PlotMode::Summed {
                    " (summed)"
                } else {
                    ""
                }
            ),
            Record::Message(m) => writeln!(
                out,
                "{head} {:<9} ctx {:<10} {}{}",
                m.level.name(),
                m.context,
                output::text(m.text),
                if m.fields.is_some() { " {fields}" } else { "" }
            ),
            Record::FrameAlloc(a) => writeln!(
                out,
                "{head} {} allocs {} B, {} frees {} B",
                a.allocs, a.alloc_bytes, a.frees, a.freed_bytes
            ),
            Record::FramePolls(p) => writeln!(
                out,
                "{head} {} polls, busy {}, queued {}{}, longest poll {}, first poll after {}, {} slow",
                p.polls,
                output::duration(p.busy_ns),
                output::duration(p.queued_ns),
                if p.queued_measured() {
                    ""
                } else {
                    " (to the first poll only)"
                },
                output::duration(p.longest_poll_ns),
                output::duration(p.first_poll_ns),
                p.slow_polls
            ),
            Record::SlowPoll(p) => writeln!(
                out,
                "{head} blocked its thread {}",
                output::duration(p.duration_ns)
            ),
            Record::Unknown(x) => writeln!(out, "{head} {} payload bytes", x.payload.len()),
        }
    }
}
