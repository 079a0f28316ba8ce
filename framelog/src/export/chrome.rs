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
//!   flow arrows, Perfetto's `flow` table): every frame whose start records its parent is the
//!   source of flow `WORKER << 32 | ID` (an `s` event right after its `B`, at its start, on
//!   its `tid`: it binds to that slice), and each child drawn apart ends that flow (an `f`
//!   event with `"bp":"e"` right after its own `B`: it binds to the child). Flow events are
//!   named `parent`, category `framelog`. Frames on async tracks take no part (a flow event
//!   binds to a slice of its thread's track). Logs written before parents were recorded
//!   have no flows: their nesting is inferred, as before.
//! - Each event's `id` is the frame's key "WORKER:ID" and `context` its context: outside
//!   `args`, because speedscope names a frame by its name and `args` (Left Heavy and Sandwich
//!   merge frames of one label only if their `args` are equal). `args` holds the frame's data
//!   (extended JSON; `--no-data` leaves it out) and `"open": true` for a frame still running
//!   when the log ended (ended at the log's last time); the `E` event repeats them (speedscope
//!   matches an end to its begin by name and `args`).
//! - Memory: the rendered `E` events of the frames open on each `tid`.

use rustc_hash::FxHashMap as HashMap;
use std::io::Write;

use serde_json::{Value, json};

use super::{ExportMessage, Frame, FrameSink, PlotPoint};

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

/// A Chrome Trace Event JSON writer over `W`.
pub struct ChromeTrace<W: Write> {
    out: W,
    first: bool,
    thread_names: HashMap<(u8, u32), String>,
    /// Each worker's process name as last written (writers repeat it in every segment).
    process_names: HashMap<u8, String>,
    /// Overlap lanes' tids by (worker, thread, lane), and the next free one per worker.
    lane_tids: HashMap<(u8, u32, u32), u32>,
    next_lane_tid: HashMap<u8, u32>,
    /// Per (pid, tid), the frames begun and not ended yet: (end, the rendered `E` event),
    /// outermost first.
    open: HashMap<(u8, u32), Vec<PendingEnd>>,
    buf: Vec<u8>,
    args: Vec<u8>,
    /// Rendered `E` events' buffers, written and kept for the next frames' ends.
    spare: Vec<Vec<u8>>,
    /// Flows written (children linked to a parent drawn elsewhere).
    pub flows: u64,
}

impl<W: Write> ChromeTrace<W> {
    /// Starts the document.
    pub fn new(mut out: W) -> std::io::Result<Self> {
        out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
        Ok(Self {
            out,
            first: true,
            thread_names: HashMap::default(),
            process_names: HashMap::default(),
            lane_tids: HashMap::default(),
            next_lane_tid: HashMap::default(),
            open: HashMap::default(),
            buf: Vec::new(),
            args: Vec::new(),
            spare: Vec::new(),
            flows: 0,
        })
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
        if !self.first {
            self.out.write_all(b",\n")?;
        }
        self.first = false;
        serde_json::to_writer(&mut self.out, e)?;
        Ok(())
    }

    /// The underlying writer.
    pub fn into_inner(self) -> W {
        self.out
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

/// The frame's `args` object (`{"open":true,"data":…,"allocs":…}`), or nothing when it has
/// none of them.
fn args_of(buf: &mut Vec<u8>, f: &Frame<'_>) -> std::io::Result<()> {
    if !f.open && f.data.is_none() && f.allocs.is_none() {
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
    }
    buf.push(b'}');
    Ok(())
}

impl<W: Write> ChromeTrace<W> {
    /// Writes one rendered event.
    fn raw(&mut self, event: &[u8]) -> std::io::Result<()> {
        if !self.first {
            self.out.write_all(b",\n")?;
        }
        self.first = false;
        self.out.write_all(event)
    }

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
            self.raw(&event)?;
            self.spare.push(event);
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
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let (begin, end) = if f.async_track {
            ("b", "e")
        } else {
            ("B", "E")
        };
        render(&mut buf, begin, f, f.start_ns, tid, &args)?;
        if !f.async_track {
            self.close_until((f.thread.0, tid), f.start_ns, f.end_ns)?;
        }
        self.raw(&buf)?;
        if !f.parent_inferred && !f.async_track {
            // Right after its begin, at its start: bound to this slice and no other.
            buf.clear();
            render_flow(&mut buf, "s", flow_id(f.key), f.start_ns, f.thread.0, tid);
            self.raw(&buf)?;
            if let Some(p) = f.parent
                && !f.under_parent
            {
                buf.clear();
                render_flow(&mut buf, "f", flow_id(p), f.start_ns, f.thread.0, tid);
                self.raw(&buf)?;
                self.flows += 1;
            }
        }
        let mut close = self.spare.pop().unwrap_or_default();
        close.clear();
        // The end repeats the begin's name and args: speedscope matches them by both.
        render(&mut close, end, f, f.end_ns, tid, &args)?;
        if f.async_track {
            self.raw(&close)?;
            self.spare.push(close);
        } else {
            self.open
                .entry((f.thread.0, tid))
                .or_default()
                .push((f.end_ns, close));
        }
        self.buf = buf;
        self.args = args;
        Ok(())
    }

    /// A counter event (`"ph":"C"`, its value keyed by the unit): Perfetto draws one counter
    /// track per process and name.
    /// A gap (NaN, which JSON cannot carry) is left out.
    fn plot(&mut self, p: &PlotPoint<'_>) -> std::io::Result<()> {
        if !p.value.is_finite() {
            return Ok(());
        }
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
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
        self.raw(&buf)?;
        self.buf = buf;
        Ok(())
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
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
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
        self.raw(&buf)?;
        self.buf = buf;
        Ok(())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        let mut lanes: Vec<(u8, u32)> = self.open.keys().copied().collect();
        lanes.sort_unstable();
        for lane in lanes {
            self.close_until(lane, u64::MAX, u64::MAX)?;
        }
        self.out.write_all(b"\n]}\n")?;
        self.out.flush()
    }
}
