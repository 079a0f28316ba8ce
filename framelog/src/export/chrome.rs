//! [`ChromeTrace`]: Chrome Trace Event JSON (the "JSON Object Format"), written as frames are
//! released. Opens in Perfetto UI, chrome://tracing, speedscope and Tracy's importer.
//!
//! - Processes are workers (`pid` = worker id, named "NAME (pid P)"), threads are the log's
//!   thread ids; both named with one `M` event each (threads of one process sharing a name
//!   are told apart: "worker", "worker #2").
//! - Frames are `X` events (`ts`/`dur` in µs with ns fractions, from the log's start: its
//!   earliest thread or frame record), exact to the ns; on every `tid` they nest strictly,
//!   parents first. Frames that would overlap their thread's track (concurrent async work)
//!   are on the thread's overlap lanes: extra `tid`s from [`LANE_TID_BASE`] up, named
//!   "THREAD (overlap N)", each nesting strictly too.
//! - A frame that could not be placed in time order (see [`super::tracks`]) is a `b`/`e`
//!   async pair instead.
//! - Each event's `id` is the frame's key "WORKER:ID" and `context` its context: outside
//!   `args`, because speedscope names a frame by its name and `args` (Left Heavy and Sandwich
//!   merge frames of one label only if their `args` are equal). `args` holds the frame's data
//!   (extended JSON; `--no-data` leaves it out) and `"open": true` for a frame still running
//!   when the log ended (ended at the log's last time).

use std::collections::HashMap;
use std::io::Write;

use serde_json::{Value, json};

use super::{Frame, FrameSink};

/// The first `tid` given to overlap lanes (in each process, counting up); far above the
/// thread numbers a process uses.
pub const LANE_TID_BASE: u32 = 1_000_000_000;

/// A Chrome Trace Event JSON writer over `W`.
pub struct ChromeTrace<W: Write> {
    out: W,
    first: bool,
    thread_names: HashMap<(u8, u32), String>,
    /// Overlap lanes' tids by (worker, thread, lane), and the next free one per worker.
    lane_tids: HashMap<(u8, u32, u32), u32>,
    next_lane_tid: HashMap<u8, u32>,
}

impl<W: Write> ChromeTrace<W> {
    /// Starts the document.
    pub fn new(mut out: W) -> std::io::Result<Self> {
        out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
        Ok(Self {
            out,
            first: true,
            thread_names: HashMap::new(),
            lane_tids: HashMap::new(),
            next_lane_tid: HashMap::new(),
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

/// ns as µs with three decimals (exact to the ns).
struct Micros(u64);

impl std::fmt::Display for Micros {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

impl<W: Write> ChromeTrace<W> {
    /// Starts an event: the separator, then `{"ph":PH,"name":LABEL,"cat":CAT`.
    fn begin(&mut self, ph: &str, f: &Frame<'_>) -> std::io::Result<()> {
        self.out.write_all(if self.first {
            b"{\"ph\":\""
        } else {
            b",\n{\"ph\":\""
        })?;
        self.first = false;
        write!(self.out, "{ph}\",\"name\":")?;
        serde_json::to_writer(&mut self.out, f.label)?;
        write!(self.out, ",\"cat\":\"{}\"", f.category)
    }

    /// `,"context":C[,"args":{...}]}`: context, then open and data (only what a viewer may
    /// merge on).
    fn args_and_close(&mut self, f: &Frame<'_>) -> std::io::Result<()> {
        write!(self.out, ",\"context\":{}", f.context)?;
        if f.open || f.data.is_some() {
            self.out.write_all(b",\"args\":{")?;
            if f.open {
                self.out.write_all(b"\"open\":true")?;
            }
            if let Some(d) = &f.data {
                if f.open {
                    self.out.write_all(b",")?;
                }
                self.out.write_all(b"\"data\":")?;
                serde_json::to_writer(
                    &mut self.out,
                    &bson::Bson::Document(d.clone()).into_relaxed_extjson(),
                )?;
            }
            self.out.write_all(b"}")?;
        }
        self.out.write_all(b"}")
    }
}

impl<W: Write> FrameSink for ChromeTrace<W> {
    fn process(&mut self, worker: u8, pid: u32, name: &str) -> std::io::Result<()> {
        self.event(
            &json!({"ph": "M", "name": "process_name", "pid": worker, "tid": 0,
                           "args": {"name": format!("{name} (pid {pid})")}}),
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
        let pid = f.thread.0;
        let tid = self.tid(f)?;
        if f.async_track {
            let id = (f.key.worker, f.key.id);
            self.begin("b", f)?;
            write!(
                self.out,
                ",\"id\":\"{}:{}\",\"ts\":{},\"pid\":{pid},\"tid\":{tid}",
                id.0,
                id.1,
                Micros(f.start_ns)
            )?;
            self.args_and_close(f)?;
            self.begin("e", f)?;
            write!(
                self.out,
                ",\"id\":\"{}:{}\",\"ts\":{},\"pid\":{pid},\"tid\":{tid}}}",
                id.0,
                id.1,
                Micros(f.end_ns)
            )
        } else {
            self.begin("X", f)?;
            write!(
                self.out,
                ",\"id\":\"{}:{}\",\"ts\":{},\"dur\":{},\"pid\":{pid},\"tid\":{tid}",
                f.key.worker,
                f.key.id,
                Micros(f.start_ns),
                Micros(f.end_ns - f.start_ns)
            )?;
            self.args_and_close(f)
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.out.write_all(b"\n]}\n")?;
        self.out.flush()
    }
}
