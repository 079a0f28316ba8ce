//! [`PerfettoTrace`]: Perfetto's own protobuf trace format (a `Trace` of `TracePacket`s with
//! `TrackEvent`s), written as frames are released: what the Perfetto UI and its trace
//! processor import fastest, in a fraction of the Chrome JSON's bytes.
//!
//! - Every worker is a process track ("NAME (pid P)", pid = worker id) and every thread a
//!   thread track of it, named as in the other exports. A thread's overlap lanes (see
//!   [`super::tracks`]) are tracks under it, "THREAD (overlap N)"; frames that could not be
//!   placed in time order go on "THREAD (async N)" tracks under it, as many as keep them
//!   from overlapping.
//! - Frames are slices (a `TYPE_SLICE_BEGIN` and a `TYPE_SLICE_END` event, exact to the ns,
//!   from the log's start) named by their label, in their category; a frame with something
//!   more to show has debug annotations: `id` (the frame id; the worker is the process),
//!   `open` for a frame still running when the log ended, `data` (the frame's data,
//!   `--no-data` leaves it out), `allocs`, and for an asynchronous frame `polls` (busy,
//!   queued and waiting ns, polls, longest poll, slow polls). (An argument set per slice
//!   would cost Perfetto's importer more than the slice.)
//! - A child drawn apart from its recorded parent (another thread, lane or track) is linked
//!   to it by a flow: the parent's begin lists the flow id in `flow_ids`, the child's begin
//!   in `terminating_flow_ids`, one id per link; both are written only for links whose two
//!   frames were found ([`super::links`]). Frames on async tracks take part too.
//! - Plot series are counter tracks of their process ("NAME UNIT"), one `TYPE_COUNTER` event
//!   per value; infinities are kept, a NaN (a gap) has no counter value and is left out and
//!   counted ([`PerfettoTrace::not_written`]). Messages are instants (category `message`,
//!   named by their text) on their thread's track, with `level`, `frame`, `context` and
//!   `fields`; slow polls are instants there too (category `slow_poll`, "slow poll 7.1 ms",
//!   with `duration_ns` and `frame`): an instant, because a slice of the poll's own would not
//!   nest with the thread's frames, which are not the poll's.
//! - Each track is its own packet sequence: event names, categories and annotation names are
//!   interned per sequence (written once, then referred to by number), and timestamps are
//!   deltas on the sequence's incremental clock (a packet earlier than the sequence's last
//!   one carries its absolute time instead).
//! - Memory: the frames open on each lane, the last [`super::links::WINDOW`] events, and per
//!   sequence the names it interned.

pub mod proto;
pub mod sorting;

use std::collections::BTreeMap;
use std::io::Write;

use rustc_hash::FxHashMap as HashMap;

use super::chrome::NotWritten;
use super::links::{Held, LinkWindow};
use super::{ExportMessage, Frame, FrameSink, PlotPoint};
use formats::FrameKey;
use proto::*;
use sorting::{Plan, Replay, Spans};

/// Exports the log in `dir` as a Perfetto trace to `out`, in two passes over the same
/// records: the first plans where Perfetto's sorter may hand events on ([`sorting`]), the
/// second writes the trace.
pub fn export_perfetto<W: Write>(
    dir: &std::path::Path,
    opts: &super::ExportOptions,
    out: W,
) -> Result<(super::ExportSummary, PerfettoTrace<W>), super::ExportError> {
    use super::{ExportOptions, Exporter};
    // Frame data gives events annotations, never other events or times.
    let mut first = Exporter::open(
        dir,
        &ExportOptions {
            with_data: false,
            ..opts.clone()
        },
    )?;
    let mut planning = PerfettoTrace::planning();
    first.step(&mut planning)?;
    let (origin, end) = (first.origin(), first.read_to());
    first.finish(&mut planning)?;
    let mut second = Exporter::with_origin(dir, opts, origin)?;
    second.stop_at(end);
    let mut trace = PerfettoTrace::following(out, planning.plan());
    second.step(&mut trace)?;
    let summary = second.finish(&mut trace)?;
    Ok((summary, trace))
}

/// The flow id of the link to `child` (one per link; never 0).
fn flow_id(child: FrameKey) -> u64 {
    ((u64::from(child.worker) << 32) | u64::from(child.id)) + 1
}

/// A packet sequence: one track's events, its interned strings and its clock.
struct Seq {
    id: u32,
    track: u64,
    /// Its first packet (defaults, clock) is written.
    ready: bool,
    /// The incremental clock's value (the last delta-timed packet's time).
    clock: u64,
    /// Interning ids by string id ([`Strings`]), per kind: 0 is not interned yet.
    names: Vec<u64>,
    categories: Vec<u64>,
    annotation_names: Vec<u64>,
    next_iid: u64,
}

/// Strings used by the export, by id (each interned per sequence as it is first used there).
#[derive(Default)]
struct Strings {
    ids: HashMap<String, u32>,
    all: Vec<String>,
}

impl Strings {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.all.len() as u32;
        self.all.push(s.to_owned());
        self.ids.insert(s.to_owned(), id);
        id
    }
}

/// Which interning table a string goes to.
#[derive(Clone, Copy)]
enum Kind {
    Name,
    Category,
    Annotation,
}

/// A debug annotation, its name a string id.
struct Annotation {
    name: u32,
    value: DebugAnnotation,
}

/// What goes out, in order, once it leaves the link window.
enum Item {
    /// Boxed: every event moves through the window, and a descriptor is big and rare.
    Descriptor(Box<TrackDescriptor>),
    /// A slice begins (or an instant) on sequence `seq`.
    Begin {
        seq: usize,
        ts: u64,
        name: u32,
        category: u32,
        instant: bool,
        annotations: Vec<Annotation>,
        key: Option<FrameKey>,
    },
    End {
        seq: usize,
        ts: u64,
    },
    Counter {
        seq: usize,
        ts: u64,
        value: f64,
    },
}

/// A track for frames placed out of order, and the time range its frames cover.
struct AsyncTrack {
    seq: usize,
    lo: u64,
    hi: u64,
}

/// A Perfetto protobuf trace writer over `W`.
pub struct PerfettoTrace<W: Write> {
    out: W,
    buf: Vec<u8>,
    error: Option<std::io::Error>,
    window: LinkWindow<Item>,
    strings: Strings,
    seqs: Vec<Seq>,
    next_uuid: u64,
    processes: HashMap<u8, (u64, String)>,
    threads: HashMap<(u8, u32), (u64, String)>,
    /// The sequence of each lane (lane 0: the thread's own track).
    lanes: HashMap<(u8, u32, u32), usize>,
    asyncs: HashMap<(u8, u32), Vec<AsyncTrack>>,
    /// The sequence of each thread's messages (on its track).
    message_seqs: HashMap<(u8, u32), usize>,
    counters: HashMap<(u8, String), usize>,
    /// Per lane's sequence, the ends of the frames begun on it and not ended yet, outermost
    /// first.
    open: HashMap<usize, Vec<u64>>,
    not_written: BTreeMap<(u8, String), NotWritten>,
    /// String ids of the annotation names and categories used everywhere.
    fixed: Fixed,
    /// Each category's string id, once used (`u32::MAX`: not yet).
    category_ids: Vec<u32>,
    scratch: TrackEvent,
    sorting: Sorting,
}

/// Whether and how the trace tells Perfetto's sorter where it may hand events on.
enum Sorting {
    /// No such points (the trace is sorted whole, at the end).
    Off,
    /// A first pass: records the packets' times, writes nothing.
    Plan(Spans),
    /// Places the points a first pass planned.
    Follow(Replay),
}

struct Fixed {
    id: u32,
    open: u32,
    data: u32,
    allocs: u32,
    polls: u32,
    slow_poll: u32,
    duration_ns: u32,
    level: u32,
    frame: u32,
    context: u32,
    fields: u32,
    message: u32,
}

impl PerfettoTrace<std::io::Sink> {
    /// A first pass that writes nothing: it records when each packet would be, for
    /// [`PerfettoTrace::plan`].
    pub fn planning() -> Self {
        let mut t = Self::new(std::io::sink());
        t.sorting = Sorting::Plan(Spans::default());
        t
    }

    /// Where a [`PerfettoTrace::following`] trace of the same events may place the sorter's
    /// points.
    pub fn plan(&self) -> Plan {
        match &self.sorting {
            Sorting::Plan(s) => s.plan(),
            _ => Plan::default(),
        }
    }
}

impl<W: Write> PerfettoTrace<W> {
    /// A trace written to `out` (nothing is written before the first event).
    pub fn new(out: W) -> Self {
        let mut strings = Strings::default();
        let fixed = Fixed {
            id: strings.id("id"),
            open: strings.id("open"),
            data: strings.id("data"),
            allocs: strings.id("allocs"),
            polls: strings.id("polls"),
            slow_poll: strings.id("slow_poll"),
            duration_ns: strings.id("duration_ns"),
            level: strings.id("level"),
            frame: strings.id("frame"),
            context: strings.id("context"),
            fields: strings.id("fields"),
            message: strings.id("message"),
        };
        Self {
            out,
            buf: Vec::new(),
            error: None,
            window: LinkWindow::default(),
            strings,
            seqs: Vec::new(),
            next_uuid: 1,
            processes: HashMap::default(),
            threads: HashMap::default(),
            lanes: HashMap::default(),
            asyncs: HashMap::default(),
            message_seqs: HashMap::default(),
            counters: HashMap::default(),
            open: HashMap::default(),
            not_written: BTreeMap::new(),
            fixed,
            category_ids: vec![u32::MAX; 256],
            scratch: TrackEvent::default(),
            sorting: Sorting::Off,
        }
    }

    /// A trace written to `out` that tells Perfetto's sorter where it may hand events on, as
    /// `plan` (from a [`PerfettoTrace::planning`] pass over the same log) allows.
    pub fn following(out: W, plan: Plan) -> Self {
        let mut t = Self::new(out);
        t.sorting = Sorting::Follow(Replay::new(plan));
        t
    }

    /// Points written where Perfetto's sorter may hand events on (see [`sorting`]).
    pub fn sort_points(&self) -> u64 {
        match &self.sorting {
            Sorting::Follow(r) => r.placed(),
            _ => 0,
        }
    }

    /// Whether the events differed from the planning pass's (the log changed between the
    /// two), so that points stopped there.
    pub fn diverged(&self) -> bool {
        matches!(&self.sorting, Sorting::Follow(r) if r.diverged())
    }

    /// Flows written: children drawn apart from their parent, linked to it.
    pub fn flows(&self) -> u64 {
        self.window.linked()
    }

    /// Children drawn apart from a recorded parent that got no flow (see
    /// [`super::links`]).
    pub fn unlinked(&self) -> u64 {
        self.window.unlinked()
    }

    /// Per (worker, series), the plot values left out: a NaN (a gap) has no counter value.
    pub fn not_written(&self) -> &BTreeMap<(u8, String), NotWritten> {
        &self.not_written
    }

    /// The underlying writer (after [`FrameSink::finish`]).
    pub fn into_inner(self) -> W {
        self.out
    }

    fn uuid(&mut self) -> u64 {
        let u = self.next_uuid;
        self.next_uuid += 1;
        u
    }

    fn new_seq(&mut self, track: u64) -> usize {
        let id = self.seqs.len() as u32 + 1;
        self.seqs.push(Seq {
            id,
            track,
            ready: false,
            clock: 0,
            names: Vec::new(),
            categories: Vec::new(),
            annotation_names: Vec::new(),
            next_iid: 1,
        });
        self.seqs.len() - 1
    }

    fn push(&mut self, item: Item) -> std::io::Result<()> {
        let (window, mut w) = self.split();
        window.push(item, &mut |h| w.held(h));
        self.check()
    }

    fn check(&mut self) -> std::io::Result<()> {
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The window, and the rest of the writer (what writes the events leaving it).
    fn split(&mut self) -> (&mut LinkWindow<Item>, Writer<'_, W>) {
        (
            &mut self.window,
            Writer {
                out: &mut self.out,
                buf: &mut self.buf,
                error: &mut self.error,
                seqs: &mut self.seqs,
                strings: &self.strings,
                scratch: &mut self.scratch,
                sorting: &mut self.sorting,
            },
        )
    }

    fn process_track(&mut self, worker: u8) -> std::io::Result<u64> {
        if let Some((u, _)) = self.processes.get(&worker) {
            return Ok(*u);
        }
        self.describe_process(worker, &format!("worker {worker}"))
    }

    fn describe_process(&mut self, worker: u8, shown: &str) -> std::io::Result<u64> {
        let uuid = match self.processes.get(&worker) {
            Some((u, _)) => *u,
            None => self.uuid(),
        };
        self.processes.insert(worker, (uuid, shown.to_owned()));
        self.push(Item::Descriptor(Box::new(TrackDescriptor {
            uuid: Some(uuid),
            process: Some(ProcessDescriptor {
                pid: Some(i32::from(worker)),
                process_name: Some(shown.to_owned()),
            }),
            ..Default::default()
        })))?;
        Ok(uuid)
    }

    fn thread_track(&mut self, worker: u8, thread: u32) -> std::io::Result<u64> {
        if let Some((u, _)) = self.threads.get(&(worker, thread)) {
            return Ok(*u);
        }
        self.describe_thread(worker, thread, &format!("thread {thread}"))
    }

    fn describe_thread(&mut self, worker: u8, thread: u32, name: &str) -> std::io::Result<u64> {
        self.process_track(worker)?;
        let uuid = match self.threads.get(&(worker, thread)) {
            Some((u, _)) => *u,
            None => self.uuid(),
        };
        self.threads
            .insert((worker, thread), (uuid, name.to_owned()));
        self.push(Item::Descriptor(Box::new(TrackDescriptor {
            uuid: Some(uuid),
            thread: Some(ThreadDescriptor {
                pid: Some(i32::from(worker)),
                tid: Some(i64::from(thread)),
                thread_name: Some(name.to_owned()),
            }),
            ..Default::default()
        })))?;
        Ok(uuid)
    }

    /// A track under the thread's, named "THREAD (what N)"; its sequence.
    fn child_track(
        &mut self,
        worker: u8,
        thread: u32,
        what: &str,
        n: usize,
    ) -> std::io::Result<usize> {
        let parent = self.thread_track(worker, thread)?;
        let name = format!("{} ({what} {n})", self.threads[&(worker, thread)].1);
        let uuid = self.uuid();
        self.push(Item::Descriptor(Box::new(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(parent),
            name: Some(name),
            ..Default::default()
        })))?;
        Ok(self.new_seq(uuid))
    }

    /// The sequence of a frame's lane.
    fn lane_seq(&mut self, f: &Frame<'_>) -> std::io::Result<usize> {
        let (worker, thread) = f.thread;
        if f.async_track {
            let tracks = self.asyncs.entry(f.thread).or_default();
            // Strictly apart from everything on the track: frames arrive in any order.
            if let Some(t) = tracks
                .iter_mut()
                .find(|t| f.end_ns < t.lo || f.start_ns > t.hi)
            {
                t.lo = t.lo.min(f.start_ns);
                t.hi = t.hi.max(f.end_ns);
                return Ok(t.seq);
            }
            let n = tracks.len() + 1;
            let seq = self.child_track(worker, thread, "async", n)?;
            self.asyncs.entry(f.thread).or_default().push(AsyncTrack {
                seq,
                lo: f.start_ns,
                hi: f.end_ns,
            });
            return Ok(seq);
        }
        if let Some(&s) = self.lanes.get(&(worker, thread, f.lane)) {
            return Ok(s);
        }
        let seq = if f.lane == 0 {
            let uuid = self.thread_track(worker, thread)?;
            self.new_seq(uuid)
        } else {
            self.child_track(worker, thread, "overlap", f.lane as usize)?
        };
        self.lanes.insert((worker, thread, f.lane), seq);
        Ok(seq)
    }

    /// Ends the frames open on `seq` that are over by `[start, end]`.
    fn close_until(&mut self, seq: usize, start: u64, end: u64) -> std::io::Result<()> {
        while let Some(stack) = self.open.get_mut(&seq)
            && stack
                .last()
                .is_some_and(|&e| e < start || (e == start && end > start))
        {
            let Some(ts) = stack.pop() else { break };
            self.push(Item::End { seq, ts })?;
        }
        Ok(())
    }
}

/// Writes events leaving the window: encodes each packet with its sequence's state.
struct Writer<'a, W> {
    out: &'a mut W,
    buf: &'a mut Vec<u8>,
    error: &'a mut Option<std::io::Error>,
    seqs: &'a mut [Seq],
    strings: &'a Strings,
    /// A begin event's vectors, kept for the next one (no allocation per event).
    scratch: &'a mut TrackEvent,
    sorting: &'a mut Sorting,
}

impl<W: Write> Writer<'_, W> {
    fn held(&mut self, h: Held<Item>) {
        if self.error.is_some() {
            return;
        }
        if let Sorting::Plan(spans) = &mut *self.sorting {
            // The first pass: the packets' times, in order, without building them (a
            // sequence's setup packet comes before its first timed one, as `timed` writes it).
            let timed = match h.item {
                Item::Descriptor(_) => None,
                Item::Begin { seq, ts, .. }
                | Item::End { seq, ts }
                | Item::Counter { seq, ts, .. } => Some((seq, ts)),
            };
            if let Some((seq, ts)) = timed {
                let s = &mut self.seqs[seq];
                if !s.ready {
                    s.ready = true;
                    s.clock = ts;
                    spans.packet(None);
                }
            }
            spans.packet(timed.map(|(_, ts)| ts));
            return;
        }
        let (packet, at) = match h.item {
            Item::Descriptor(d) => (
                TracePacket {
                    track_descriptor: Some(*d),
                    ..Default::default()
                },
                None,
            ),
            Item::Begin {
                seq,
                ts,
                name,
                category,
                instant,
                annotations,
                key,
            } => {
                let mut interned = InternedData::default();
                let mut event = std::mem::take(self.scratch);
                event.category_iids.clear();
                event.flow_ids.clear();
                event.terminating_flow_ids.clear();
                event.debug_annotations.clear();
                event.r#type = Some(if instant {
                    TYPE_INSTANT
                } else {
                    TYPE_SLICE_BEGIN
                });
                event.name_iid = Some(self.intern(seq, Kind::Name, name, &mut interned));
                event
                    .category_iids
                    .push(self.intern(seq, Kind::Category, category, &mut interned));
                for a in annotations {
                    let mut v = a.value;
                    v.name_iid = Some(self.intern(seq, Kind::Annotation, a.name, &mut interned));
                    event.debug_annotations.push(v);
                }
                event
                    .flow_ids
                    .extend(h.children.iter().map(|&c| flow_id(c)));
                if let (Some(_), Some(k)) = (h.parent, key) {
                    event.terminating_flow_ids.push(flow_id(k));
                }
                let mut p = self.timed(seq, ts);
                p.track_event = Some(event);
                if interned != InternedData::default() {
                    p.interned_data = Some(interned);
                }
                self.write(&p, Some(ts));
                if let Some(e) = p.track_event.take() {
                    *self.scratch = e;
                }
                return;
            }
            Item::End { seq, ts } => {
                let mut p = self.timed(seq, ts);
                p.track_event = Some(TrackEvent {
                    r#type: Some(TYPE_SLICE_END),
                    ..Default::default()
                });
                (p, Some(ts))
            }
            Item::Counter { seq, ts, value } => {
                let mut p = self.timed(seq, ts);
                p.track_event = Some(TrackEvent {
                    r#type: Some(TYPE_COUNTER),
                    double_counter_value: Some(value),
                    ..Default::default()
                });
                (p, Some(ts))
            }
        };
        self.write(&packet, at);
    }

    /// A packet of `seq` at `ts`; the sequence's first packet sets it up before.
    fn timed(&mut self, seq: usize, ts: u64) -> TracePacket {
        let s = &mut self.seqs[seq];
        let id = s.id;
        if !s.ready {
            // Sets the sequence up: its defaults (track, clock) and its incremental clock,
            // starting at this packet's time.
            s.clock = ts;
            s.ready = true;
            let setup = TracePacket {
                trusted_packet_sequence_id: Some(id),
                sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
                trace_packet_defaults: Some(TracePacketDefaults {
                    timestamp_clock_id: Some(CLOCK_INCREMENTAL),
                    track_event_defaults: Some(TrackEventDefaults {
                        track_uuid: Some(s.track),
                    }),
                }),
                clock_snapshot: Some(ClockSnapshot {
                    clocks: vec![
                        Clock {
                            clock_id: Some(CLOCK_BOOTTIME),
                            timestamp: Some(ts),
                            is_incremental: None,
                        },
                        Clock {
                            clock_id: Some(CLOCK_INCREMENTAL),
                            timestamp: Some(ts),
                            is_incremental: Some(true),
                        },
                    ],
                }),
                ..Default::default()
            };
            self.write(&setup, None);
        }
        let s = &mut self.seqs[seq];
        let mut p = TracePacket {
            trusted_packet_sequence_id: Some(id),
            ..Default::default()
        };
        if ts >= s.clock {
            p.timestamp = Some(ts - s.clock);
            s.clock = ts;
        } else {
            // Before the sequence's last time: absolute, on the trace's clock.
            p.timestamp = Some(ts);
            p.timestamp_clock_id = Some(CLOCK_BOOTTIME);
        }
        p
    }

    /// The interning id of string `id` on `seq`, adding it to `interned` when new there.
    fn intern(&mut self, seq: usize, kind: Kind, id: u32, interned: &mut InternedData) -> u64 {
        let s = &mut self.seqs[seq];
        let table = match kind {
            Kind::Name => &mut s.names,
            Kind::Category => &mut s.categories,
            Kind::Annotation => &mut s.annotation_names,
        };
        let i = id as usize;
        if table.len() <= i {
            table.resize(i + 1, 0);
        }
        if table[i] != 0 {
            return table[i];
        }
        let iid = s.next_iid;
        s.next_iid += 1;
        table[i] = iid;
        let entry = InternedString {
            iid: Some(iid),
            name: Some(self.strings.all[id as usize].clone()),
        };
        match kind {
            Kind::Name => interned.event_names.push(entry),
            Kind::Category => interned.event_categories.push(entry),
            Kind::Annotation => interned.debug_annotation_names.push(entry),
        }
        iid
    }

    /// Appends one packet to the `Trace` (its field 1); `ts`: its time, if it has one.
    fn write(&mut self, p: &TracePacket, ts: Option<u64>) {
        let point = match self.sorting {
            // The first pass: only the times, nothing encoded (`held` takes its events'
            // packets before building them).
            Sorting::Plan(spans) => {
                spans.packet(ts);
                return;
            }
            Sorting::Follow(replay) => replay.packet(ts),
            Sorting::Off => false,
        };
        self.buf.clear();
        prost::encoding::message::encode(1, p, self.buf);
        if point {
            // Twice "flushed", then "read": the trace processor's sorter hands on what it
            // holds from before the previous point (see `sorting`).
            for read in [false, false, true] {
                let mark = TracePacket {
                    timestamp: ts,
                    service_event: Some(TracingServiceEvent {
                        all_data_sources_flushed: (!read).then_some(true),
                        read_tracing_buffers_completed: read.then_some(true),
                    }),
                    ..Default::default()
                };
                prost::encoding::message::encode(1, &mark, self.buf);
            }
        }
        if let Err(e) = self.out.write_all(self.buf) {
            *self.error = Some(e);
        }
    }
}

/// A BSON value as a debug annotation value (its name set by the caller).
fn bson_value(v: &bson::Bson) -> DebugAnnotation {
    use bson::Bson;
    let mut a = DebugAnnotation::default();
    match v {
        Bson::Double(d) => a.double_value = Some(*d),
        Bson::Int32(i) => a.int_value = Some(i64::from(*i)),
        Bson::Int64(i) => a.int_value = Some(*i),
        Bson::Boolean(b) => a.bool_value = Some(*b),
        Bson::String(s) => a.string_value = Some(s.clone()),
        Bson::Document(d) => a.dict_entries = bson_dict(d),
        Bson::Array(items) => a.array_values = items.iter().map(bson_value).collect(),
        // Dates, ids, binary …: as extended JSON text, as the Chrome export shows them.
        other => {
            a.string_value = Some(match other.clone().into_relaxed_extjson() {
                serde_json::Value::String(s) => s,
                j => j.to_string(),
            })
        }
    }
    a
}

fn bson_dict(d: &bson::Document) -> Vec<DebugAnnotation> {
    d.iter()
        .map(|(k, v)| {
            let mut a = bson_value(v);
            a.name = Some(k.clone());
            a
        })
        .collect()
}

impl<W: Write> FrameSink for PerfettoTrace<W> {
    fn process(&mut self, worker: u8, pid: u32, name: &str) -> std::io::Result<()> {
        let shown = format!("{name} (pid {pid})");
        if self
            .processes
            .get(&worker)
            .is_some_and(|(_, n)| *n == shown)
        {
            // The same process again (its writer repeats itself in every segment).
            return Ok(());
        }
        self.describe_process(worker, &shown).map(|_| ())
    }

    fn thread(&mut self, worker: u8, thread: u32, name: &str) -> std::io::Result<()> {
        self.describe_thread(worker, thread, name).map(|_| ())
    }

    fn frame(&mut self, f: &Frame<'_>) -> std::io::Result<()> {
        let seq = self.lane_seq(f)?;
        if !f.async_track {
            self.close_until(seq, f.start_ns, f.end_ns)?;
        }
        let name = self.strings.id(f.label);
        let c = usize::from(f.category.0);
        if self.category_ids[c] == u32::MAX {
            self.category_ids[c] = match f.category.name() {
                Some(n) => self.strings.id(n),
                None => self.strings.id(&f.category.to_string()),
            };
        }
        let category = self.category_ids[c];
        // Only frames with something to show carry annotations, then with their id (for
        // `framelog data`): an argument set per slice costs Perfetto's importer more than
        // the slice itself.
        let mut annotations = Vec::new();
        if f.open || f.data.is_some() || f.allocs.is_some() || f.polls.is_some() {
            annotations.push(Annotation {
                name: self.fixed.id,
                value: DebugAnnotation {
                    uint_value: Some(u64::from(f.key.id)),
                    ..Default::default()
                },
            });
        }
        if f.open {
            annotations.push(Annotation {
                name: self.fixed.open,
                value: DebugAnnotation {
                    bool_value: Some(true),
                    ..Default::default()
                },
            });
        }
        if let Some(d) = &f.data {
            annotations.push(Annotation {
                name: self.fixed.data,
                value: DebugAnnotation {
                    dict_entries: bson_dict(d),
                    ..Default::default()
                },
            });
        }
        if let Some(a) = &f.allocs {
            let n = |name: &str, v: u64| DebugAnnotation {
                name: Some(name.to_owned()),
                uint_value: Some(v),
                ..Default::default()
            };
            annotations.push(Annotation {
                name: self.fixed.allocs,
                value: DebugAnnotation {
                    dict_entries: vec![
                        n("allocs", a.allocs),
                        n("alloc_bytes", a.alloc_bytes),
                        n("frees", a.frees),
                        n("freed_bytes", a.freed_bytes),
                    ],
                    ..Default::default()
                },
            });
        }
        if let Some(p) = &f.polls {
            let n = |name: &str, v: u64| DebugAnnotation {
                name: Some(name.to_owned()),
                uint_value: Some(v),
                ..Default::default()
            };
            let split = p.split(f.end_unix_ns.saturating_sub(f.start_unix_ns));
            annotations.push(Annotation {
                name: self.fixed.polls,
                value: DebugAnnotation {
                    dict_entries: vec![
                        n("busy_ns", split.busy_ns),
                        n("queued_ns", split.queued_ns),
                        n("waiting_ns", split.waiting_ns),
                        n("polls", p.polls),
                        n("longest_poll_ns", p.longest_poll_ns),
                        n("slow_polls", p.slow_polls),
                    ],
                    ..Default::default()
                },
            });
        }
        // A frame whose start recorded its parent may be one (its children name it); a
        // child drawn apart from its recorded parent is linked to it.
        let recorded = !f.parent_inferred;
        let apart = f.parent.filter(|_| recorded && !f.under_parent);
        let item = Item::Begin {
            seq,
            ts: f.start_ns,
            name,
            category,
            instant: false,
            annotations,
            key: Some(f.key),
        };
        let (window, mut w) = self.split();
        window.push_begin(item, f.key, recorded, apart, &mut |h| w.held(h));
        self.check()?;
        if f.async_track {
            self.push(Item::End { seq, ts: f.end_ns })
        } else {
            self.open.entry(seq).or_default().push(f.end_ns);
            Ok(())
        }
    }

    fn plot(&mut self, p: &PlotPoint<'_>) -> std::io::Result<()> {
        if p.value.is_nan() {
            self.not_written
                .entry((p.worker, p.name.to_owned()))
                .or_default()
                .nan += 1;
            return Ok(());
        }
        let seq = match self.counters.get(&(p.worker, p.name.to_owned())) {
            Some(&s) => s,
            None => {
                let parent = self.process_track(p.worker)?;
                let uuid = self.uuid();
                self.push(Item::Descriptor(Box::new(TrackDescriptor {
                    uuid: Some(uuid),
                    parent_uuid: Some(parent),
                    name: Some(format!("{} {}", p.name, p.unit.name())),
                    counter: Some(CounterDescriptor {
                        unit_name: Some(p.unit.name().into_owned()),
                    }),
                    ..Default::default()
                })))?;
                let s = self.new_seq(uuid);
                self.counters.insert((p.worker, p.name.to_owned()), s);
                s
            }
        };
        self.push(Item::Counter {
            seq,
            ts: p.at_ns,
            value: p.value,
        })
    }

    fn message(&mut self, m: &ExportMessage<'_>) -> std::io::Result<()> {
        let seq = match self.message_seqs.get(&m.thread) {
            Some(&s) => s,
            None => {
                let uuid = self.thread_track(m.thread.0, m.thread.1)?;
                let s = self.new_seq(uuid);
                self.message_seqs.insert(m.thread, s);
                s
            }
        };
        let mut annotations = vec![Annotation {
            name: self.fixed.level,
            value: DebugAnnotation {
                string_value: Some(m.level.name().into_owned()),
                ..Default::default()
            },
        }];
        if let Some(f) = m.frame {
            annotations.push(Annotation {
                name: self.fixed.frame,
                value: DebugAnnotation {
                    string_value: Some(f.to_string()),
                    ..Default::default()
                },
            });
            annotations.push(Annotation {
                name: self.fixed.context,
                value: DebugAnnotation {
                    uint_value: Some(u64::from(m.context)),
                    ..Default::default()
                },
            });
        }
        if let Some(d) = &m.fields {
            annotations.push(Annotation {
                name: self.fixed.fields,
                value: DebugAnnotation {
                    dict_entries: bson_dict(d),
                    ..Default::default()
                },
            });
        }
        let name = self.strings.id(m.text);
        let category = self.fixed.message;
        self.push(Item::Begin {
            seq,
            ts: m.at_ns,
            name,
            category,
            instant: true,
            annotations,
            key: None,
        })
    }

    fn slow_poll(&mut self, p: &super::SlowPollEvent) -> std::io::Result<()> {
        let seq = match self.message_seqs.get(&p.thread) {
            Some(&s) => s,
            None => {
                let uuid = self.thread_track(p.thread.0, p.thread.1)?;
                let s = self.new_seq(uuid);
                self.message_seqs.insert(p.thread, s);
                s
            }
        };
        let annotations = vec![
            Annotation {
                name: self.fixed.duration_ns,
                value: DebugAnnotation {
                    uint_value: Some(p.duration_ns),
                    ..Default::default()
                },
            },
            Annotation {
                name: self.fixed.frame,
                value: DebugAnnotation {
                    string_value: Some(p.frame.to_string()),
                    ..Default::default()
                },
            },
        ];
        let name = self
            .strings
            .id(&format!("slow poll {:.1} ms", p.duration_ns as f64 / 1e6));
        let category = self.fixed.slow_poll;
        self.push(Item::Begin {
            seq,
            ts: p.start_ns,
            name,
            category,
            instant: true,
            annotations,
            key: None,
        })
    }

    fn finish(&mut self) -> std::io::Result<()> {
        let mut seqs: Vec<usize> = self.open.keys().copied().collect();
        seqs.sort_unstable();
        for seq in seqs {
            self.close_until(seq, u64::MAX, u64::MAX)?;
        }
        let (window, mut w) = self.split();
        window.drain(&mut |h| w.held(h));
        self.check()?;
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[derive(Clone, PartialEq, prost::Message)]
    struct Trace {
        #[prost(message, repeated, tag = "1")]
        packet: Vec<TracePacket>,
    }

    fn frame(id: u32, label: &'static str, lane: u32, start: u64, end: u64) -> Frame<'static> {
        Frame {
            key: FrameKey::new(0, id),
            thread: (0, 1),
            label,
            category: formats::Category::HTTP,
            context: id,
            start_ns: start,
            end_ns: end,
            lane,
            async_track: false,
            open: false,
            parent: None,
            parent_inferred: false,
            under_parent: false,
            start_unix_ns: start,
            end_unix_ns: end,
            data: None,
            allocs: None,
            polls: None,
        }
    }

    fn point(value: f64, at_ns: u64) -> PlotPoint<'static> {
        PlotPoint {
            worker: 0,
            name: "queue",
            unit: formats::PlotUnit::COUNT,
            value,
            at_ns,
            unix_ns: at_ns,
        }
    }

    /// Each packet's absolute time (as a reader rebuilds it from deltas and absolute
    /// times), sequence, event type and name, in file order; and every sequence's interned
    /// event names.
    type Decoded = (
        Vec<(u64, u32, i32, Option<String>)>,
        HashMap<u32, Vec<String>>,
    );

    fn decode(bytes: &[u8]) -> Decoded {
        let trace = Trace::decode(bytes).unwrap();
        let mut clock: HashMap<u32, u64> = HashMap::default();
        let mut names: HashMap<(u32, u64), String> = HashMap::default();
        let mut interned: HashMap<u32, Vec<String>> = HashMap::default();
        let mut out = Vec::new();
        for p in trace.packet {
            let seq = p.trusted_packet_sequence_id.unwrap_or(0);
            if let Some(c) = &p.clock_snapshot {
                let inc = c.clocks.iter().find(|c| c.is_incremental == Some(true));
                clock.insert(seq, inc.unwrap().timestamp.unwrap());
                assert!(p.trace_packet_defaults.is_some() && p.sequence_flags == Some(1));
                continue;
            }
            if let Some(i) = &p.interned_data {
                for n in &i.event_names {
                    names.insert((seq, n.iid.unwrap()), n.name.clone().unwrap());
                    interned
                        .entry(seq)
                        .or_default()
                        .push(n.name.clone().unwrap());
                }
            }
            let Some(e) = p.track_event else { continue };
            let ts = match p.timestamp_clock_id {
                Some(CLOCK_BOOTTIME) => p.timestamp.unwrap(),
                None => {
                    let c = clock.get_mut(&seq).expect("a clock before the first event");
                    *c += p.timestamp.unwrap();
                    *c
                }
                other => panic!("clock {other:?}"),
            };
            let name = e.name_iid.map(|i| names[&(seq, i)].clone());
            out.push((ts, seq, e.r#type.unwrap(), name));
        }
        (out, interned)
    }

    #[test]
    fn times_rebuild_exactly_and_names_are_interned_once_per_sequence() {
        let mut t = PerfettoTrace::new(Vec::new());
        t.thread(0, 1, "main").unwrap();
        // Lane 0: a [10,100] with b [20,30] and b [40,50] inside; lane 1: b [60,150].
        t.frame(&frame(1, "a", 0, 10, 100)).unwrap();
        t.frame(&frame(2, "b", 0, 20, 30)).unwrap();
        t.frame(&frame(3, "b", 0, 40, 50)).unwrap();
        t.frame(&frame(4, "b", 1, 60, 150)).unwrap();
        // Plot values out of time order: the one going back carries its absolute time.
        t.plot(&point(1.0, 500)).unwrap();
        t.plot(&point(2.0, 200)).unwrap();
        t.plot(&point(3.0, 700)).unwrap();
        t.finish().unwrap();
        let (events, interned) = decode(&t.into_inner());
        let lane0: Vec<_> = events
            .iter()
            .filter(|e| e.1 == events[0].1)
            .map(|e| (e.0, e.2, e.3.as_deref()))
            .collect();
        assert_eq!(
            lane0,
            [
                (10, TYPE_SLICE_BEGIN, Some("a")),
                (20, TYPE_SLICE_BEGIN, Some("b")),
                (30, TYPE_SLICE_END, None),
                (40, TYPE_SLICE_BEGIN, Some("b")),
                (50, TYPE_SLICE_END, None),
                (100, TYPE_SLICE_END, None),
            ]
        );
        let counters: Vec<u64> = events
            .iter()
            .filter(|e| e.2 == TYPE_COUNTER)
            .map(|e| e.0)
            .collect();
        assert_eq!(counters, [500, 200, 700]);
        // "b" once on lane 0's sequence and once on lane 1's.
        let mut per_seq: Vec<Vec<String>> = interned.into_values().collect();
        per_seq.sort();
        assert_eq!(
            per_seq,
            [vec!["a".to_owned(), "b".to_owned()], vec!["b".to_owned()]]
        );
    }
}
