//! [`ChromeTrace`]: Chrome Trace Event JSON (the "JSON Object Format"), written as frames are
//! released. Opens in Perfetto UI, chrome://tracing, speedscope and Tracy's importer.
//!
//! - Processes are workers (`pid` = worker id, named "NAME (pid P)"), threads are the log's
//!   thread ids; both named with one `M` event each (threads of one process sharing a name
//!   are told apart: "worker", "worker #2").
//! - Frames are `B`/`E` duration events (`ts` in µs with ns fractions, from the log's start:
//!   its earliest thread or frame record), exact to the ns. On every `tid` they nest strictly
//!   and come in time order in the file, each `E` right where its frame ends (an end before
//!   a begin at the same time). Not `X` events: viewers compute an `X` event's end as
//!   `ts + dur` in floating point, so frames that end at the same nanosecond (a frame and
//!   its parent, every frame still open at the end) could end in either order, and
//!   speedscope then reports them mis-nested. Frames that would overlap their thread's track
//!   (concurrent async work), or be drawn inside frames that are not their parent, are on
//!   the thread's overlap lanes: extra `tid`s from [`LANE_TID_BASE`] up, named "THREAD
//!   (overlap N)", each nesting strictly too.
//! - A frame that could not be placed in time order (see [`super::tracks`]) is a `b`/`e`
//!   async pair instead.
//! - A slice only encloses frames it is the real parent of (see [`super::tracks`]): a child
//!   drawn apart from its parent (on another thread or lane) is linked to it by a flow (the
//!   format's flow events, version 1, which Perfetto and chrome://tracing import into their
//!   flow arrows, Perfetto's `flow` table). Flow `WORKER << 32 | ID` starts at the parent (an
//!   `s` event right after its `B`, at its start, on its `tid`: it binds to that slice) and
//!   each child drawn apart ends it (an `f` event with `"bp":"e"` right after the child's
//!   own `B`). Both are written only for a link whose two frames were found: events are held
//!   back a while ([`super::links`]) so the first of the two can still be marked when the
//!   second comes; a parent without such children has no flow event. Flow events are named
//!   `parent`, category `framelog`. Frames on async tracks take no part (a flow event binds
//!   to a slice of its thread's track). Logs written before parents were recorded have no
//!   flows: their nesting is inferred, as before.
//! - Each event's `id` is the frame's key "WORKER:ID" and `context` its context: outside
//!   `args`, because speedscope names a frame by its name and `args` (Left Heavy and Sandwich
//!   merge frames of one label only if their `args` are equal). `args` holds the frame's data
//!   (extended JSON; `--no-data` leaves it out) and `"open": true` for a frame still running
//!   when the log ended (ended at the log's last time); the `E` event repeats them (speedscope
//!   matches an end to its begin by name and `args`).
//! - Plot values are counter events; JSON has no NaN (a gap) or infinity, so those values
//!   are left out and counted per series ([`ChromeTrace::not_written`]), for the caller to
//!   say so.
//! - Memory: the rendered `E` events of the frames open on each `tid`, and the last
//!   [`super::links::WINDOW`] events.

use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;
use std::io::Write;

use serde_json::{Value, json};

use super::links::{Held, LinkWindow};
use super::{ExportMessage, Frame, FrameSink, PlotPoint, SlowPollEvent};

/// The first `tid` given to overlap lanes (in each process, counting up); far above the
/// thread numbers a process uses.
pub const LANE_TID_BASE: u32 = 1_000_000_000;

/// The flow id of frame `key` (as parent): its key as one number.
fn flow_id(key: formats::FrameKey) -> u64 {
    (u64::from(key.worker) << 32) | u64::from(key.id)
}

/// A flow event (`s` or `f`) of flow `id` at `ts` on `(pid, tid)`.
fn render_flow(buf: &mut Vec<u8>, ph: &str, id: u64, ts: u64, pid: u8, tid: u32) {
    buf.extend_from_slice(b"{\"ph\":\"");
    buf.extend_from_slice(ph.as_bytes());
    buf.extend_from_slice(b"\",\"name\":\"parent\",\"cat\":\"framelog\",\"id\":");
    push_int(buf, id);
    buf.extend_from_slice(b",\"ts\":");
    push_micros(buf, ts);
    buf.extend_from_slice(b",\"pid\":");
    push_int(buf, pid);
    buf.extend_from_slice(b",\"tid\":");
    push_int(buf, tid);
    if ph == "f" {
        buf.extend_from_slice(b",\"bp\":\"e\"");
    }
    buf.push(b'}');
}

/// A frame begun on a tid: its end time and its rendered `E` event.
type PendingEnd = (u64, Vec<u8>);

/// A rendered event on its way out; a frame's `B` event says which frame and where it is,
/// for flow events written right after it: (key, tid, ts).
struct Event {
    bytes: Vec<u8>,
    at: Option<(formats::FrameKey, u32, u64)>,
}

/// Values of one plot series the format could not hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NotWritten {
    /// NaN values (gaps).
    pub nan: u64,
    /// +inf values.
    pub pos_inf: u64,
    /// -inf values.
    pub neg_inf: u64,
}

/// Where events go once out of the link window: the document, and buffers to reuse.
struct Output<W> {
    out: W,
    first: bool,
    spare: Vec<Vec<u8>>,
    flow: Vec<u8>,
    error: Option<std::io::Error>,
}

impl<W: Write> Output<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if !self.first {
            self.out.write_all(b",\n")?;
        }
        self.first = false;
        self.out.write_all(bytes)
    }

    /// Writes an event leaving the window, with the flow events its links need; keeps the
    /// first error.
    fn held(&mut self, h: Held<Event>) {
        if self.error.is_none() {
            let r = (|| {
                self.write(&h.item.bytes)?;
                if let Some((key, tid, ts)) = h.item.at {
                    let pid = key.worker;
                    let mut flow = std::mem::take(&mut self.flow);
                    // Right after its begin, at its start: bound to this slice and no other.
                    // One start per parent: its children's ends all name it.
                    if !h.children.is_empty() {
                        flow.clear();
                        render_flow(&mut flow, "s", flow_id(key), ts, pid, tid);
                        self.write(&flow)?;
                    }
                    if let Some(p) = h.parent {
                        flow.clear();
                        render_flow(&mut flow, "f", flow_id(p), ts, pid, tid);
                        self.write(&flow)?;
                    }
                    self.flow = flow;
                }
                Ok(())
            })();
            if let Err(e) = r {
                self.error = Some(e);
            }
        }
        let mut bytes = h.item.bytes;
        bytes.clear();
        self.spare.push(bytes);
    }
}

/// A Chrome Trace Event JSON writer over `W`.
pub struct ChromeTrace<W: Write> {
    output: Output<W>,
    window: LinkWindow<Event>,
    thread_names: HashMap<(u8, u32), String>,
    /// Each worker's process name as last written (writers repeat it in every segment).
    process_names: HashMap<u8, String>,
    /// Overlap lanes' tids by (worker, thread, lane), and the next free one per worker.
    lane_tids: HashMap<(u8, u32, u32), u32>,
    next_lane_tid: HashMap<u8, u32>,
    /// Per (pid, tid), the frames begun and not ended yet: (end, the rendered `E` event),
    /// outermost first.
    open: HashMap<(u8, u32), Vec<PendingEnd>>,
    args: Vec<u8>,
    not_written: BTreeMap<(u8, String), NotWritten>,
}

impl<W: Write> ChromeTrace<W> {
    /// Starts the document.
    pub fn new(mut out: W) -> std::io::Result<Self> {
        out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
        Ok(Self {
            output: Output {
                out,
                first: true,
                spare: Vec::new(),
                flow: Vec::new(),
                error: None,
            },
            window: LinkWindow::default(),
            thread_names: HashMap::default(),
            process_names: HashMap::default(),
            lane_tids: HashMap::default(),
            next_lane_tid: HashMap::default(),
            open: HashMap::default(),
            args: Vec::new(),
            not_written: BTreeMap::new(),
        })
    }

    /// Flows written: children drawn apart from their parent, linked to it (counted once
    /// both ends are found; written as the events leave the window).
    pub fn flows(&self) -> u64 {
        self.window.linked()
    }

    /// Children drawn apart from a recorded parent that got no flow: the parent is not in
    /// the export, or was released too far from the child (see [`super::links`]).
    pub fn unlinked(&self) -> u64 {
        self.window.unlinked()
    }

    /// Per (worker, series), the plot values left out: JSON has no NaN or infinity.
    pub fn not_written(&self) -> &BTreeMap<(u8, String), NotWritten> {
        &self.not_written
    }

    /// A buffer for one event.
    fn buffer(&mut self) -> Vec<u8> {
        let mut b = self.output.spare.pop().unwrap_or_default();
        b.clear();
        b
    }

    /// Sends one event through the window.
    fn push(&mut self, bytes: Vec<u8>) -> std::io::Result<()> {
        let output = &mut self.output;
        self.window
            .push(Event { bytes, at: None }, &mut |h| output.held(h));
        self.check()
    }

    fn check(&mut self) -> std::io::Result<()> {
        match self.output.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The tid of a frame's lane, naming a new overlap lane when it first appears.
    fn tid(&mut self, f: &Frame<'_>) -> std::io::Result<u32> {
        let (worker, thread) = f.thread;
        if f.lane == 0 || f.async_track {
            return Ok(thread);
        }
        if let Some(&t) = self.lane_tids.get(&(worker, thread, f.lane)) {
            return Ok(t);
        }
        let next = self.next_lane_tid.entry(worker).or_insert(LANE_TID_BASE);
        let tid = *next;
        *next = next.saturating_add(1);
        self.lane_tids.insert((worker, thread, f.lane), tid);
        let name = match self.thread_names.get(&f.thread) {
            Some(n) => format!("{n} (overlap {})", f.lane),
            None => format!("thread {thread} (overlap {})", f.lane),
        };
        self.event(
            &json!({"ph": "M", "name": "thread_name", "pid": worker, "tid": tid,
                           "args": {"name": name}}),
        )?;
        Ok(tid)
    }

    fn event(&mut self, e: &Value) -> std::io::Result<()> {
        let mut b = self.buffer();
        serde_json::to_writer(&mut b, e)?;
        self.push(b)
    }

    /// The underlying writer (after [`FrameSink::finish`]).
    pub fn into_inner(self) -> W {
        self.output.out
    }
}

/// Appends `n` in decimal.
fn push_int(buf: &mut Vec<u8>, n: impl itoa::Integer) {
    buf.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Appends ns as µs with three decimals (exact to the ns).
fn push_micros(buf: &mut Vec<u8>, ns: u64) {
    push_int(buf, ns / 1000);
    let r = ns % 1000;
    let digit = |d: u64| b'0' + d as u8;
    buf.extend_from_slice(&[b'.', digit(r / 100), digit(r / 10 % 10), digit(r % 10)]);
}

/// One event of frame `f` into `buf`: `{"ph":PH,"name":…,"cat":…,"id":"W:ID","context":C,
/// "ts":…,"pid":…,"tid":…[,"args":{…}]}`. `args` (open, data) is all a viewer may merge on.
/// Written with plain appends: formatting machinery was a quarter of the export's time.
fn render(
    buf: &mut Vec<u8>,
    ph: &str,
    f: &Frame<'_>,
    ts: u64,
    tid: u32,
    args: &[u8],
) -> std::io::Result<()> {
    buf.extend_from_slice(b"{\"ph\":\"");
    buf.extend_from_slice(ph.as_bytes());
    buf.extend_from_slice(b"\",\"name\":");
    serde_json::to_writer(&mut *buf, f.label)?;
    buf.extend_from_slice(b",\"cat\":\"");
    match f.category.name() {
        Some(n) => buf.extend_from_slice(n.as_bytes()),
        None => write!(buf, "{}", f.category)?,
    }
    buf.extend_from_slice(b"\",\"id\":\"");
    push_int(buf, f.key.worker);
    buf.push(b':');
    push_int(buf, f.key.id);
    buf.extend_from_slice(b"\",\"context\":");
    push_int(buf, f.context);
    buf.extend_from_slice(b",\"ts\":");
    push_micros(buf, ts);
    buf.extend_from_slice(b",\"pid\":");
    push_int(buf, f.thread.0);
    buf.extend_from_slice(b",\"tid\":");
    push_int(buf, tid);
    if !args.is_empty() {
        buf.extend_from_slice(b",\"args\":");
        buf.extend_from_slice(args);
    }
    buf.push(b'}');
    Ok(())
}

/// The frame's `args` object (`{"open":true,"data":…,"allocs":…,"busy_ns":…}`), or nothing
/// when it has none of them.
///
/// An asynchronous frame's polls go in as args (`busy_ns`, `queued_ns`, `waiting_ns`,
/// `polls`, `longest_poll_ns`, `slow_polls`), not as a slice per poll: a frame polled a
/// thousand times would be a thousand events, and its polls run on whatever worker, where
/// slices of their own would break the nesting of that thread's frames. The polls worth
/// seeing, the slow ones, are instants on the thread they blocked (see `slow_poll`).
fn args_of(buf: &mut Vec<u8>, f: &Frame<'_>) -> std::io::Result<()> {
    if !f.open && f.data.is_none() && f.allocs.is_none() && f.polls.is_none() {
        return Ok(());
    }
    buf.push(b'{');
    let mut sep = "";
    if f.open {
        buf.extend_from_slice(b"\"open\":true");
        sep = ",";
    }
    if let Some(d) = &f.data {
        buf.extend_from_slice(sep.as_bytes());
        buf.extend_from_slice(b"\"data\":");
        serde_json::to_writer(
            &mut *buf,
            &bson::Bson::Document(d.clone()).into_relaxed_extjson(),
        )?;
        sep = ",";
    }
    if let Some(a) = &f.allocs {
        buf.extend_from_slice(sep.as_bytes());
        for (i, (name, v)) in [
            ("allocs", a.allocs),
            ("alloc_bytes", a.alloc_bytes),
            ("frees", a.frees),
            ("freed_bytes", a.freed_bytes),
        ]
        .into_iter()
        .enumerate()
        {
            if i > 0 {
                buf.push(b',');
            }
            buf.push(b'"');
            buf.extend_from_slice(name.as_bytes());
            buf.extend_from_slice(b"\":");
            push_int(buf, v);
        }
        sep = ",";
    }
    if let Some(p) = &f.polls {
        let split = p.split(f.end_unix_ns.saturating_sub(f.start_unix_ns));
        for (name, v) in [
            ("busy_ns", split.busy_ns),
            ("queued_ns", split.queued_ns),
            ("waiting_ns", split.waiting_ns),
            ("polls", p.polls),
            ("longest_poll_ns", p.longest_poll_ns),
            ("slow_polls", p.slow_polls),
        ] {
            buf.extend_from_slice(sep.as_bytes());
            buf.push(b'"');
            buf.extend_from_slice(name.as_bytes());
            buf.extend_from_slice(b"\":");
            push_int(buf, v);
            sep = ",";
        }
    }
    buf.push(b'}');
    Ok(())
}

impl<W: Write> ChromeTrace<W> {
    /// Ends the frames open on `(pid, tid)` that are over by `[start, end]`.
    fn close_until(&mut self, lane: (u8, u32), start: u64, end: u64) -> std::io::Result<()> {
        while let Some(stack) = self.open.get_mut(&lane)
            && stack
                .last()
                .is_some_and(|(e, _)| *e < start || (*e == start && end > start))
        {
            let Some((_, event)) = stack.pop() else {
                break;
            };
            self.push(event)?;
        }
        Ok(())
    }
}

impl<W: Write> FrameSink for ChromeTrace<W> {
    fn process(&mut self, worker: u8, pid: u32, name: &str) -> std::io::Result<()> {
        let shown = format!("{name} (pid {pid})");
        if self.process_names.get(&worker) == Some(&shown) {
            // The same process again (its writer repeats itself in every segment).
            return Ok(());
        }
        self.process_names.insert(worker, shown.clone());
        self.event(
            &json!({"ph": "M", "name": "process_name", "pid": worker, "tid": 0,
                           "args": {"name": shown}}),
        )?;
        self.event(
            &json!({"ph": "M", "name": "process_sort_index", "pid": worker, "tid": 0,
                           "args": {"sort_index": worker}}),
        )
    }

    fn thread(&mut self, worker: u8, thread: u32, name: &str) -> std::io::Result<()> {
        self.thread_names.insert((worker, thread), name.to_owned());
        self.event(
            &json!({"ph": "M", "name": "thread_name", "pid": worker, "tid": thread,
                           "args": {"name": name}}),
        )
    }

    fn frame(&mut self, f: &Frame<'_>) -> std::io::Result<()> {
        // Written by hand: building a JSON value per event was 5x slower than the reading.
        let tid = self.tid(f)?;
        let mut args = std::mem::take(&mut self.args);
        args.clear();
        args_of(&mut args, f)?;
        let mut buf = self.buffer();
        let (begin, end) = if f.async_track {
            ("b", "e")
        } else {
            ("B", "E")
        };
        render(&mut buf, begin, f, f.start_ns, tid, &args)?;
        if !f.async_track {
            self.close_until((f.thread.0, tid), f.start_ns, f.end_ns)?;
        }
        let mut close = self.buffer();
        // The end repeats the begin's name and args: speedscope matches them by both.
        render(&mut close, end, f, f.end_ns, tid, &args)?;
        self.args = args;
        if f.async_track {
            self.push(buf)?;
            return self.push(close);
        }
        // A frame whose start recorded its parent may be one (its children name it); a
        // child drawn apart from its recorded parent is linked to it.
        let recorded = !f.parent_inferred;
        let apart = f.parent.filter(|_| recorded && !f.under_parent);
        let output = &mut self.output;
        self.window.push_begin(
            Event {
                bytes: buf,
                at: Some((f.key, tid, f.start_ns)),
            },
            f.key,
            recorded,
            apart,
            &mut |h| output.held(h),
        );
        self.check()?;
        self.open
            .entry((f.thread.0, tid))
            .or_default()
            .push((f.end_ns, close));
        Ok(())
    }

    /// A counter event (`"ph":"C"`, its value keyed by the unit): Perfetto draws one counter
    /// track per process and name.
    /// A gap (NaN) or an infinity, which JSON cannot carry, is left out and counted
    /// ([`ChromeTrace::not_written`]).
    fn plot(&mut self, p: &PlotPoint<'_>) -> std::io::Result<()> {
        if !p.value.is_finite() {
            let n = self
                .not_written
                .entry((p.worker, p.name.to_owned()))
                .or_default();
            match p.value {
                v if v.is_nan() => n.nan += 1,
                v if v > 0.0 => n.pos_inf += 1,
                _ => n.neg_inf += 1,
            }
            return Ok(());
        }
        let mut buf = self.buffer();
        buf.extend_from_slice(b"{\"ph\":\"C\",\"name\":");
        serde_json::to_writer(&mut buf, p.name)?;
        buf.extend_from_slice(b",\"ts\":");
        push_micros(&mut buf, p.at_ns);
        buf.extend_from_slice(b",\"pid\":");
        push_int(&mut buf, p.worker);
        // The arg's key is the unit: Perfetto names the track "<name> <key>" ("rss bytes").
        buf.extend_from_slice(b",\"args\":{");
        serde_json::to_writer(&mut buf, &p.unit.name())?;
        buf.push(b':');
        serde_json::to_writer(&mut buf, &p.value)?;
        buf.extend_from_slice(b"}}");
        self.push(buf)
    }

    /// A thread-scoped instant event (`"ph":"i"`) on the thread it was written on, named by
    /// its text, with its level, frame and fields in `args`.
    fn message(&mut self, m: &ExportMessage<'_>) -> std::io::Result<()> {
        let mut args = serde_json::Map::new();
        args.insert("level".into(), m.level.name().into());
        if let Some(f) = m.frame {
            args.insert("frame".into(), f.to_string().into());
            args.insert("context".into(), m.context.into());
        }
        if let Some(d) = &m.fields {
            args.insert(
                "fields".into(),
                bson::Bson::Document(d.clone()).into_relaxed_extjson(),
            );
        }
        let mut buf = self.buffer();
        buf.extend_from_slice(b"{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"message\",\"name\":");
        serde_json::to_writer(&mut buf, m.text)?;
        buf.extend_from_slice(b",\"ts\":");
        push_micros(&mut buf, m.at_ns);
        buf.extend_from_slice(b",\"pid\":");
        push_int(&mut buf, m.thread.0);
        buf.extend_from_slice(b",\"tid\":");
        push_int(&mut buf, m.thread.1);
        buf.extend_from_slice(b",\"args\":");
        serde_json::to_writer(&mut buf, &args)?;
        buf.push(b'}');
        self.push(buf)
    }

    /// A thread-scoped instant (`"ph":"i"`) where a poll began to block its thread, with its
    /// duration and frame in `args`: an instant never breaks the nesting of the thread's
    /// slices, which a slice of its own could (the frames on that lane are not the poll's).
    fn slow_poll(&mut self, p: &SlowPollEvent) -> std::io::Result<()> {
        let mut buf = self.buffer();
        buf.extend_from_slice(b"{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"slow_poll\",\"name\":");
        serde_json::to_writer(
            &mut buf,
            &format!("slow poll {:.1} ms", p.duration_ns as f64 / 1e6),
        )?;
        buf.extend_from_slice(b",\"ts\":");
        push_micros(&mut buf, p.start_ns);
        buf.extend_from_slice(b",\"pid\":");
        push_int(&mut buf, p.thread.0);
        buf.extend_from_slice(b",\"tid\":");
        push_int(&mut buf, p.thread.1);
        buf.extend_from_slice(b",\"args\":{\"duration_ns\":");
        push_int(&mut buf, p.duration_ns);
        buf.extend_from_slice(b",\"frame\":");
        serde_json::to_writer(&mut buf, &p.frame.to_string())?;
        buf.extend_from_slice(b"}}");
        self.push(buf)
    }

    fn finish(&mut self) -> std::io::Result<()> {
        let mut lanes: Vec<(u8, u32)> = self.open.keys().copied().collect();
        lanes.sort_unstable();
        for lane in lanes {
            self.close_until(lane, u64::MAX, u64::MAX)?;
        }
        let output = &mut self.output;
        self.window.drain(&mut |h| output.held(h));
        self.check()?;
        self.output.out.write_all(b"\n]}\n")?;
        self.output.out.flush()
    }
}
