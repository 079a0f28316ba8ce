//! [`ChromeTrace`]: Chrome Trace Event JSON (the "JSON Object Format"), written as frames are
//! released. Opens in Perfetto UI, chrome://tracing, speedscope and Tracy's importer.
//!
//! - Processes are workers (`pid` = worker id, named "NAME (pid P)"), threads are the log's
//!   thread ids; both named with `M` events.
//! - Frames on a thread track are `X` events (`ts`/`dur` in µs with ns fractions, from the
//!   log's start: its earliest thread or frame record); they nest strictly, parents first.
//! - Frames that overlap their thread without nesting (concurrent async work) are `b`/`e`
//!   async events with id "WORKER:ID", so nothing overlaps illegally.
//! - `args` holds the frame's key and context, its data (extended JSON), and `"open": true`
//!   for a frame still running when the log ended (ended at the log's last time).

use std::io::Write;

use serde_json::{Value, json};

use super::{Frame, FrameSink};

/// A Chrome Trace Event JSON writer over `W`.
pub struct ChromeTrace<W: Write> {
    out: W,
    first: bool,
}

impl<W: Write> ChromeTrace<W> {
    /// Starts the document.
    pub fn new(mut out: W) -> std::io::Result<Self> {
        out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
        Ok(Self { out, first: true })
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

    /// `,"args":{...}}`: key, context, open, data.
    fn args_and_close(&mut self, f: &Frame<'_>) -> std::io::Result<()> {
        write!(
            self.out,
            ",\"args\":{{\"frame\":\"{}:{}\",\"context\":{}",
            f.key.worker, f.key.id, f.context
        )?;
        if f.open {
            self.out.write_all(b",\"open\":true")?;
        }
        if let Some(d) = &f.data {
            self.out.write_all(b",\"data\":")?;
            serde_json::to_writer(
                &mut self.out,
                &bson::Bson::Document(d.clone()).into_relaxed_extjson(),
            )?;
        }
        self.out.write_all(b"}}")
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
        self.event(
            &json!({"ph": "M", "name": "thread_name", "pid": worker, "tid": thread,
                           "args": {"name": name}}),
        )
    }

    fn frame(&mut self, f: &Frame<'_>) -> std::io::Result<()> {
        // Written by hand: building a JSON value per event was 5x slower than the reading.
        let (pid, tid) = f.thread;
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
                ",\"ts\":{},\"dur\":{},\"pid\":{pid},\"tid\":{tid}",
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
