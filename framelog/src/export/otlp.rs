//! [`OtlpSender`]: frames as OpenTelemetry spans, sent to a collector over OTLP/HTTP
//! (protobuf `ExportTraceServiceRequest` to `/v1/traces`, the `opentelemetry-proto`
//! definitions, a blocking HTTP client).
//!
//! - Trace id per context (the log's start time, the worker and the context id); span id per
//!   frame, a bijective mix of the log's start time, the worker and the frame id, so spans of
//!   different logs never share ids while a log sent twice keeps its ids.
//! - Parent span: the frame's parent ([`super::Frame::parent`]): the one its start records,
//!   whatever thread either ran on, in the same trace; in a log written before parents were
//!   recorded, the innermost frame of its context open on its thread when it started, else
//!   its context's root. Every trace has exactly one root: its root frame, or, when that
//!   frame is not in the export (dropped, filtered out, lost to damage), a span standing in
//!   for it (same span id, named "context W:C (root frame not in the export)",
//!   `framelog.synthetic`), covering the context's spans, sent at the end. A recorded parent
//!   that is not in the export either gets a stand-in of its own at the end (its span id, so
//!   the child's `parent_span_id` stays its real parent; named "frame W:ID (not in the
//!   export)", `framelog.synthetic`, under the trace's root: where it was called from is not
//!   known). A parent already sent in another trace (its context differs from the child's,
//!   which a recording program does not do) is not a parent across traces: the child hangs
//!   under its own trace's root, with a span link and `framelog.parent` naming the real one.
//! - Resource per worker: `service.name` = process name, `process.pid`, `framelog.worker`.
//! - Attributes: `framelog.category`, `framelog.frame`, `framelog.context`, `framelog.open`
//!   for a frame still running at the end, and the frame data's top-level fields
//!   (strings, integers, floats and booleans as themselves, anything else as JSON text).
//! - The frame data's `events` (what `TracingLayer` records: objects with `message`,
//!   `level`, `target` and fields) become span events: named by `message`, timed by
//!   `time_unix_nano` when present (else the frame's end), the other fields as attributes;
//!   `events_dropped` becomes the dropped-events count.
//! - Status: error when the data or an event has an HTTP status ≥ 500 (`status`,
//!   `status_code`, `http.status_code`, `http.response.status_code`), an `error` or
//!   `exception.message` field, or an event of level `ERROR`.
//! - A span keeps at most [`MAX_EVENTS`] events (the earliest); the rest are counted in its
//!   `dropped_events_count` and `framelog.events_dropped`.
//! - Plot values (with [`Signal::Metrics`]) are gauge points: NaN (a gap) a point flagged as
//!   having no recorded value, ±inf as it is.
//! - Batches of [`BATCH`] spans (or [`OtlpSender::with_batch`]) are sent by a [`Poster`]
//!   (its rules: signals not taken switched off, 413 split, retries until
//!   [`OtlpSender::with_timeout`]'s time or a [`Deadline`]), or queued in a bounded [`Queue`]
//!   for a sending thread ([`OtlpSender::forwarding`]). What became of every item is in
//!   [`Books`], per signal.
//! - Spans go in the same order for the same log, so a run that stopped can be continued:
//!   [`OtlpSender::skip`] passes over the spans a previous run delivered
//!   ([`OtlpSender::delivered`], reported after every batch).
//! - Memory does not grow with the number of traces: frames sent are remembered with their
//!   context for the last 64 Ki to 128 Ki spans, and as one bit per frame id for the last 16 M
//!   ids of each worker (a child ending longer after its parent than that gets a stand-in).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::metrics::v1::{
    Gauge, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    ResourceSpans, ScopeSpans, Span, Status, span, status,
};
use parking_lot::Mutex;
use prost::Message;

use formats::FrameKey;

use super::{Frame, FrameSink};

mod queue;
mod send;

pub use queue::Queue;
pub use send::{
    BadEndpoint, Batch, Books, Deadline, Poster, Signal, Signals, Tally, endpoint_base, split,
};

/// Spans per request, unless told otherwise ([`OtlpSender::with_batch`]).
pub const BATCH: usize = 2048;
/// How long one batch may keep being retried, unless told otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// Events kept per span, unless told otherwise ([`OtlpSender::with_max_events`]); the rest
/// are counted in the span's `dropped_events_count` (and `framelog.events_dropped`).
pub const MAX_EVENTS: usize = 1024;

/// A parent named by spans sent and not sent itself (yet): its trace and its children's
/// extent, for a stand-in.
struct Awaited {
    context: u32,
    start: u64,
    end: u64,
}

/// Frames remembered as sent with their context, per generation (two generations: a child
/// sent up to twice this many spans after its parent finds its context).
const SENT_GENERATION: usize = 1 << 16;

/// Ids per block of [`SentSet`].
const SENT_BLOCK: u32 = 1024;
/// Blocks a [`SentSet`] keeps (16 M ids, at most ~2.5 MB): past it the oldest is forgotten.
const SENT_BLOCKS: usize = 1 << 14;

/// Which frames were sent, one bit per frame id in blocks of [`SENT_BLOCK`] ids of a worker,
/// forgetting the oldest block past [`SENT_BLOCKS`]: memory stays bounded however long a
/// forwarder runs (a worker's ids only grow), and a child sent millions of spans after its
/// parent still finds it.
#[derive(Default)]
struct SentSet {
    blocks: HashMap<(u8, u32), Box<[u64; SENT_BLOCK as usize / 64]>>,
    order: VecDeque<(u8, u32)>,
}

impl SentSet {
    fn insert(&mut self, k: FrameKey) {
        let b = (k.worker, k.id / SENT_BLOCK);
        let bits = match self.blocks.get_mut(&b) {
            Some(bits) => bits,
            None => {
                if self.order.len() >= SENT_BLOCKS
                    && let Some(old) = self.order.pop_front()
                {
                    self.blocks.remove(&old);
                }
                self.order.push_back(b);
                self.blocks.entry(b).or_insert_with(|| Box::new([0; 16]))
            }
        };
        let i = (k.id % SENT_BLOCK) as usize;
        bits[i / 64] |= 1 << (i % 64);
    }

    fn contains(&self, k: FrameKey) -> bool {
        let i = (k.id % SENT_BLOCK) as usize;
        self.blocks
            .get(&(k.worker, k.id / SENT_BLOCK))
            .is_some_and(|bits| bits[i / 64] & (1 << (i % 64)) != 0)
    }
}

/// OTLP's `DataPointFlags` bit: the point has no recorded value (a gap).
const NO_RECORDED_VALUE: u32 = 1;

/// Where finished batches go.
enum Outlet {
    /// Posted at once, on the caller's thread (`framelog export`).
    Direct(Poster),
    /// Queued for a sending thread (`framelog serve`), dropped past the queue's budget.
    Queue(Arc<Queue>),
}

/// Turns frames, messages and plot values into OTLP batches and sends them to an OTLP/HTTP
/// endpoint (or queues them for a sending thread: [`OtlpSender::forwarding`]).
pub struct OtlpSender {
    resources: HashMap<u8, Vec<KeyValue>>,
    /// Spans waiting, by worker.
    pending: HashMap<u8, Vec<Span>>,
    waiting: usize,
    /// Distinguishes this log's traces and spans from other logs' (the log's start time).
    salt: Option<u64>,
    /// Frames sent recently, with their context (this generation, the one before).
    sent_now: HashMap<FrameKey, u32>,
    sent_before: HashMap<FrameKey, u32>,
    /// Frames sent (far longer back than the two generations, without their context).
    sent: SentSet,
    /// Parents (context roots included) named by spans sent, not sent themselves (yet).
    awaited: HashMap<FrameKey, Awaited>,
    /// Messages written in frames not sent yet: their spans' events.
    events: HashMap<FrameKey, Vec<span::Event>>,
    /// Log records waiting (messages outside frames, or whose frame was not exported).
    logs: Waiting<u8, Vec<LogRecord>>,
    /// Plot values waiting as gauge points, by (worker, series): its unit and the points.
    gauges: Waiting<(u8, String), (formats::PlotUnit, Vec<NumberDataPoint>)>,
    /// The signals sent.
    signals: Signals,
    /// Items per request.
    batch: usize,
    /// Events kept per span.
    max_events: usize,
    /// Plot values that were NaN (a gap: sent as points with no recorded value).
    pub gap_points: u64,
    /// Plot values that were +inf or -inf (sent as they are).
    pub infinite_points: u64,
    /// Spans that had more events than kept (their events counted as dropped).
    pub spans_with_dropped_events: u64,
    /// Events left out of spans for the cap.
    pub dropped_events: u64,
    /// Stand-in root spans sent for contexts whose root frame was not in the export.
    pub synthetic_roots: u64,
    /// Stand-in spans sent for other recorded parents not in the export.
    pub synthetic_parents: u64,
    /// Spans delivered (accepted or rejected by the collector, or not sent for good: too
    /// large) or skipped, in order.
    delivered: u64,
    /// Spans still to pass over (delivered by an earlier run).
    skip: u64,
    /// Called with [`OtlpSender::delivered`] after every batch.
    on_progress: Option<Box<dyn FnMut(u64) + Send>>,
    books: Arc<Mutex<Books>>,
    outlet: Outlet,
    base: String,
    timeout: Duration,
    deadline: Arc<Deadline>,
    note: Arc<dyn Fn(&str) + Send + Sync>,
}

/// When to try a batch again after a retryable failure: `retry_after` (the collector's ask)
/// or `backoff` with up to half of it added as jitter (`jitter` in 0..1), never past
/// `remaining`. `None`: the deadline comes first, give up now.
pub fn next_wait(
    backoff: Duration,
    retry_after: Option<Duration>,
    jitter: f64,
    remaining: Duration,
) -> Option<Duration> {
    let wait = retry_after.unwrap_or_else(|| backoff.mul_f64(1.0 + jitter.clamp(0.0, 1.0) / 2.0));
    (wait < remaining).then_some(wait)
}

/// A `Retry-After` value in seconds (its HTTP-date form is not used: back-off applies).
pub fn retry_after(value: &str) -> Option<Duration> {
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// The answers after which the OTLP exporter rules say to try again.
fn retryable(status: u16) -> bool {
    matches!(status, 429 | 502 | 503 | 504)
}

/// The collector's message from an error answer's body, on one line (at most 300 bytes).
fn server_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let mut end = line.len().min(300);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end].to_owned()
}

fn kv(key: &str, v: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(v) }),
        ..Default::default()
    }
}

fn attr_of(v: &bson::Bson) -> any_value::Value {
    use any_value::Value as V;
    match v {
        bson::Bson::String(s) => V::StringValue(s.clone()),
        bson::Bson::Int32(i) => V::IntValue(i64::from(*i)),
        bson::Bson::Int64(i) => V::IntValue(*i),
        bson::Bson::Double(d) => V::DoubleValue(*d),
        bson::Bson::Boolean(b) => V::BoolValue(*b),
        other => V::StringValue(other.clone().into_relaxed_extjson().to_string()),
    }
}

/// The trace id of a context: unique per log (`salt`), worker and context.
pub fn trace_id(salt: u64, worker: u8, context: u32) -> Vec<u8> {
    let mut id = Vec::with_capacity(16);
    id.extend_from_slice(&salt.to_be_bytes());
    id.extend_from_slice(&[worker, 0, 0, 1]);
    id.extend_from_slice(&context.to_be_bytes());
    id
}

/// splitmix64's finalizer: a bijection of u64 that mixes every bit.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The span id of frame `(worker, id)` of the log with `salt`: distinct for every frame of
/// one log (a bijection of the key), unrelated across logs, never all zero.
pub fn span_id(salt: u64, worker: u8, id: u32) -> Vec<u8> {
    let key = (u64::from(worker) << 32) | u64::from(id);
    let v = mix(key.wrapping_add(mix(salt ^ 0x6672_616d_656c_6f67)));
    // One key in 2^64 maps to zero, which OTLP forbids.
    let v = if v == 0 { 1 } else { v };
    v.to_be_bytes().to_vec()
}

/// An HTTP status from a field value: an integer, or text starting with one ("503 …").
fn http_status(v: &bson::Bson) -> Option<i64> {
    match v {
        bson::Bson::Int32(i) => Some(i64::from(*i)),
        bson::Bson::Int64(i) => Some(*i),
        bson::Bson::Double(d) if d.fract() == 0.0 => Some(*d as i64),
        bson::Bson::String(s) => {
            let digits: String = s.trim().chars().take_while(char::is_ascii_digit).collect();
            (digits.len() == 3).then(|| digits.parse().ok()).flatten()
        }
        _ => None,
    }
}

const STATUS_KEYS: [&str; 4] = [
    "status",
    "status_code",
    "http.status_code",
    "http.response.status_code",
];

/// Why a span's fields (the frame's data, or one event's) say it failed, if they do.
fn error_in(fields: &bson::Document) -> Option<String> {
    for k in STATUS_KEYS {
        if let Some(code) = fields.get(k).and_then(http_status)
            && (500..600).contains(&code)
        {
            return Some(format!("HTTP {code}"));
        }
    }
    for k in ["error", "exception.message"] {
        match fields.get(k) {
            None | Some(bson::Bson::Null) | Some(bson::Bson::Boolean(false)) => {}
            Some(bson::Bson::String(s)) if s.is_empty() => {}
            Some(bson::Bson::String(s)) => return Some(s.clone()),
            Some(other) => return Some(other.clone().into_relaxed_extjson().to_string()),
        }
    }
    if fields
        .get_str("level")
        .is_ok_and(|l| l.eq_ignore_ascii_case("error"))
    {
        return Some(
            fields
                .get_str("message")
                .map_or_else(|_| "an ERROR event".to_owned(), str::to_owned),
        );
    }
    None
}

/// Frame data into span attributes, its `events` list into span events (unless `messages`:
/// the frame's messages, which `tracing` events also became, are its events then) and an
/// error in either into the span's status.
fn data_to_span(d: &bson::Document, end_ns: u64, span: &mut Span, messages: bool) {
    let mut error = error_in(d);
    for (k, v) in d {
        match (k.as_str(), v) {
            ("events", bson::Bson::Array(events)) => {
                for e in events {
                    let bson::Bson::Document(e) = e else {
                        continue;
                    };
                    if error.is_none() {
                        error = error_in(e);
                    }
                    if messages {
                        continue;
                    }
                    let time = match e.get("time_unix_nano") {
                        Some(bson::Bson::Int64(t)) if *t > 0 => *t as u64,
                        _ => end_ns,
                    };
                    span.events.push(span::Event {
                        time_unix_nano: time,
                        name: e.get_str("message").unwrap_or("event").to_owned(),
                        attributes: e
                            .iter()
                            .filter(|(k, _)| *k != "message" && *k != "time_unix_nano")
                            .map(|(k, v)| kv(k, attr_of(v)))
                            .collect(),
                        ..Default::default()
                    });
                }
            }
            ("events_dropped", v) => {
                span.dropped_events_count = http_status(v)
                    .and_then(|n| u32::try_from(n).ok())
                    .unwrap_or(0);
            }
            _ => span.attributes.push(kv(k, attr_of(v))),
        }
    }
    if let Some(message) = error {
        span.status = Some(Status {
            message,
            code: status::StatusCode::Error as i32,
        });
    }
}

/// Rejected spans and message in a collector's answer (protobuf or JSON), if any.
fn partial_success(content_type: &str, body: &[u8]) -> Option<(u64, String)> {
    if body.is_empty() {
        return None;
    }
    if content_type.contains("json") {
        let v: serde_json::Value = serde_json::from_slice(body).ok()?;
        let p = v
            .get("partialSuccess")
            .or_else(|| v.get("partial_success"))?;
        let n = p.get("rejectedSpans").or_else(|| p.get("rejected_spans"));
        let n = match n {
            Some(serde_json::Value::Number(n)) => n.as_u64().unwrap_or(0),
            Some(serde_json::Value::String(s)) => s.parse().unwrap_or(0),
            _ => 0,
        };
        let msg = p
            .get("errorMessage")
            .or_else(|| p.get("error_message"))
            .and_then(|m| m.as_str())
            .unwrap_or("")
            .to_owned();
        return (n > 0 || !msg.is_empty()).then_some((n, msg));
    }
    let r = ExportTraceServiceResponse::decode(body).ok()?;
    let p = r.partial_success?;
    let n = u64::try_from(p.rejected_spans).unwrap_or(0);
    (n > 0 || !p.error_message.is_empty()).then_some((n, p.error_message))
}

impl OtlpSender {
    /// A sender to `endpoint` (`http://HOST:4318`; `/v1/traces`, `/v1/logs` and
    /// `/v1/metrics` beside it), checked ([`endpoint_base`]).
    pub fn new(endpoint: &str) -> Result<Self, BadEndpoint> {
        let base = endpoint_base(endpoint)?;
        let books = Arc::new(Mutex::new(Books::default()));
        let deadline = Arc::new(Deadline::default());
        let note: Arc<dyn Fn(&str) + Send + Sync> =
            Arc::new(|line: &str| eprintln!("framelog: {line}"));
        let outlet = Outlet::Direct(Poster::new(
            base.clone(),
            DEFAULT_TIMEOUT,
            deadline.clone(),
            books.clone(),
            note.clone(),
        ));
        Ok(Self {
            resources: HashMap::new(),
            pending: HashMap::new(),
            waiting: 0,
            salt: None,
            sent_now: HashMap::new(),
            sent_before: HashMap::new(),
            sent: SentSet::default(),
            awaited: HashMap::new(),
            events: HashMap::new(),
            logs: Waiting::default(),
            gauges: Waiting::default(),
            signals: Signals::default(),
            batch: BATCH,
            max_events: MAX_EVENTS,
            gap_points: 0,
            infinite_points: 0,
            spans_with_dropped_events: 0,
            dropped_events: 0,
            synthetic_roots: 0,
            synthetic_parents: 0,
            delivered: 0,
            skip: 0,
            on_progress: None,
            books,
            outlet,
            base,
            timeout: DEFAULT_TIMEOUT,
            deadline,
            note,
        })
    }

    /// A poster with this sender's endpoint, books, retry time, deadline and notes.
    fn poster(&self) -> Poster {
        Poster::new(
            self.base.clone(),
            self.timeout,
            self.deadline.clone(),
            self.books.clone(),
            self.note.clone(),
        )
    }

    /// Keeps retrying a batch the collector cannot take now for at most `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self.rebuild();
        self
    }

    /// Stops sending (waits and tries) once `deadline` passes (a server shutting down).
    pub fn with_deadline(mut self, deadline: Arc<Deadline>) -> Self {
        self.deadline = deadline;
        self.rebuild();
        self
    }

    /// Tells `note` (instead of standard error) when a signal is switched off or an item is
    /// refused as too large, once each.
    pub fn with_note(mut self, note: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.note = Arc::new(note);
        self.rebuild();
        self
    }

    /// Sends only these signals (default: traces and logs). Without traces, messages written
    /// in frames go as log records naming their frame's span.
    pub fn with_signals(mut self, signals: Signals) -> Self {
        self.signals = signals;
        self
    }

    /// Sends plot values as OTLP gauges to `/v1/metrics` too (one gauge per series).
    pub fn with_metrics(mut self) -> Self {
        self.signals = self.signals.with(Signal::Metrics);
        self
    }

    /// Puts at most `n` spans (log records; 8 times as many gauge points) in a request.
    pub fn with_batch(mut self, n: usize) -> Self {
        self.batch = n.max(1);
        self
    }

    /// Keeps at most `n` events per span (the rest are counted as dropped).
    pub fn with_max_events(mut self, n: usize) -> Self {
        self.max_events = n;
        self
    }

    /// Queues batches (at most `budget` bytes: see [`Queue`]) instead of posting them: the
    /// queue, and the poster a sending thread gives them to. Set the deadline first.
    pub fn forwarding(mut self, budget: usize) -> (Self, Arc<Queue>, Poster) {
        let queue =
            Arc::new(Queue::new(budget, self.books.clone()).with_deadline(self.deadline.clone()));
        self.outlet = Outlet::Queue(queue.clone());
        let poster = self.poster();
        (self, queue, poster)
    }

    fn rebuild(&mut self) {
        if let Outlet::Direct(_) = self.outlet {
            self.outlet = Outlet::Direct(self.poster());
        }
    }

    /// What became of everything sent so far.
    pub fn books(&self) -> Books {
        self.books.lock().clone()
    }

    /// The books, shared (a forwarder reads them while this sender works).
    pub fn shared_books(&self) -> Arc<Mutex<Books>> {
        self.books.clone()
    }

    /// Passes over the first `spans` spans (an earlier run delivered them) without sending.
    pub fn skip(mut self, spans: u64) -> Self {
        self.skip = spans;
        self.delivered = spans;
        self
    }

    /// Calls `f` with [`OtlpSender::delivered`] after every batch the collector answered.
    pub fn on_progress(mut self, f: impl FnMut(u64) + Send + 'static) -> Self {
        self.on_progress = Some(Box::new(f));
        self
    }

    /// Spans delivered so far, counting the ones skipped: what a later run skips to go on.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// The context of frame `key` if it was sent (for a frame sent long ago, whose context
    /// is forgotten: `context`, the asking child's).
    fn sent_context(&self, key: FrameKey, context: u32) -> Option<u32> {
        self.sent_now
            .get(&key)
            .or_else(|| self.sent_before.get(&key))
            .copied()
            .or_else(|| self.sent.contains(key).then_some(context))
    }

    /// Frame `key` of `context` is sent: remembered for its children.
    fn mark_sent(&mut self, key: FrameKey, context: u32) {
        if self.sent_now.len() >= SENT_GENERATION {
            self.sent_before = std::mem::take(&mut self.sent_now);
        }
        self.sent_now.insert(key, context);
        self.sent.insert(key);
        self.awaited.remove(&key);
    }

    /// A span of `context` spanning `[start, end]` names `parent`, not sent (yet).
    fn await_parent(&mut self, parent: FrameKey, context: u32, start: u64, end: u64) {
        let a = self.awaited.entry(parent).or_insert(Awaited {
            context,
            start,
            end,
        });
        a.start = a.start.min(start);
        a.end = a.end.max(end);
    }

    fn salt(&mut self, f: &Frame<'_>) -> u64 {
        *self.salt.get_or_insert(f.start_unix_ns - f.start_ns)
    }

    fn push(&mut self, worker: u8, span: Span) -> std::io::Result<()> {
        if self.skip > 0 {
            // Delivered by an earlier run (already counted in `delivered`).
            self.skip -= 1;
            return Ok(());
        }
        self.pending.entry(worker).or_default().push(span);
        self.waiting += 1;
        if self.waiting >= self.batch {
            self.flush_spans()?;
        }
        Ok(())
    }

    /// Sends (or queues) everything waiting now: spans, log records, gauge points (a live
    /// forwarder calls it after each pass, so records outside frames go as they arrive).
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.flush_spans()?;
        self.flush_logs()?;
        self.flush_metrics()
    }

    /// Hands `b` to the outlet, counted as made.
    fn deliver(&mut self, b: Batch) -> std::io::Result<()> {
        self.books.lock().tally[b.signal.index()].made += b.items;
        match &self.outlet {
            Outlet::Direct(p) => p.send(b),
            Outlet::Queue(q) => {
                q.push(b);
                Ok(())
            }
        }
    }

    /// Sends the spans waiting now.
    fn flush_spans(&mut self) -> std::io::Result<()> {
        if self.waiting == 0 {
            return Ok(());
        }
        let mut workers: Vec<u8> = self.pending.keys().copied().collect();
        workers.sort_unstable();
        let mut resource_spans = Vec::new();
        for worker in workers {
            let spans = self.pending.remove(&worker).unwrap_or_default();
            resource_spans.push(ResourceSpans {
                resource: Some(self.resource(worker)),
                scope_spans: vec![ScopeSpans {
                    spans,
                    ..Default::default()
                }],
                ..Default::default()
            });
        }
        let body = ExportTraceServiceRequest { resource_spans }.encode_to_vec();
        let n = self.waiting as u64;
        self.waiting = 0;
        self.deliver(Batch {
            signal: Signal::Traces,
            items: n,
            body,
        })?;
        self.delivered += n;
        let delivered = self.delivered;
        if let Some(f) = &mut self.on_progress {
            f(delivered);
        }
        Ok(())
    }

    /// The resource of `worker`'s process (its service name and pid when known).
    fn resource(&self, worker: u8) -> Resource {
        Resource {
            attributes: self.resources.get(&worker).cloned().unwrap_or_else(|| {
                vec![kv(
                    "framelog.worker",
                    any_value::Value::IntValue(i64::from(worker)),
                )]
            }),
            ..Default::default()
        }
    }

    /// Sends the log records waiting now to `/v1/logs`.
    fn flush_logs(&mut self) -> std::io::Result<()> {
        if self.logs.waiting == 0 {
            return Ok(());
        }
        let mut workers: Vec<u8> = self.logs.pending.keys().copied().collect();
        workers.sort_unstable();
        let resource_logs = workers
            .into_iter()
            .map(|w| ResourceLogs {
                resource: Some(self.resource(w)),
                scope_logs: vec![ScopeLogs {
                    log_records: self.logs.pending.remove(&w).unwrap_or_default(),
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect();
        let body = ExportLogsServiceRequest { resource_logs }.encode_to_vec();
        let n = std::mem::take(&mut self.logs.waiting) as u64;
        self.deliver(Batch {
            signal: Signal::Logs,
            items: n,
            body,
        })
    }

    /// Sends the plot values waiting now to `/v1/metrics`, one gauge per series.
    fn flush_metrics(&mut self) -> std::io::Result<()> {
        if self.gauges.waiting == 0 {
            return Ok(());
        }
        let mut series: Vec<_> = self.gauges.pending.drain().collect();
        series.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut by_worker: std::collections::BTreeMap<u8, Vec<Metric>> = Default::default();
        for ((worker, name), (unit, data_points)) in series {
            by_worker.entry(worker).or_default().push(Metric {
                name,
                unit: otlp_unit(unit).to_owned(),
                data: Some(metric::Data::Gauge(Gauge { data_points })),
                ..Default::default()
            });
        }
        let resource_metrics = by_worker
            .into_iter()
            .map(|(w, metrics)| ResourceMetrics {
                resource: Some(self.resource(w)),
                scope_metrics: vec![ScopeMetrics {
                    metrics,
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect();
        let body = ExportMetricsServiceRequest { resource_metrics }.encode_to_vec();
        let n = std::mem::take(&mut self.gauges.waiting) as u64;
        self.deliver(Batch {
            signal: Signal::Metrics,
            items: n,
            body,
        })
    }

    /// A log record for message `m` (its frame's trace and span when it was written in one).
    fn log_record(&mut self, m: &super::ExportMessage<'_>, salt: u64) -> LogRecord {
        use any_value::Value as V;
        let mut attributes = Vec::new();
        if let Some(fields) = &m.fields {
            for (k, v) in fields {
                attributes.push(kv(k, attr_of(v)));
            }
        }
        let (trace_id, span_id) = match m.frame {
            Some(f) => {
                attributes.push(kv(
                    "framelog.frame",
                    V::StringValue(format!("{}:{}", f.worker, f.id)),
                ));
                (
                    trace_id(salt, f.worker, m.context),
                    span_id(salt, f.worker, f.id),
                )
            }
            None => (Vec::new(), Vec::new()),
        };
        LogRecord {
            time_unix_nano: m.unix_ns,
            observed_time_unix_nano: m.unix_ns,
            severity_number: severity_number(m.level),
            severity_text: m.level.name().to_ascii_uppercase(),
            body: Some(AnyValue {
                value: Some(V::StringValue(m.text.to_owned())),
            }),
            attributes,
            trace_id,
            span_id,
            ..Default::default()
        }
    }

    fn push_log(&mut self, worker: u8, record: LogRecord) -> std::io::Result<()> {
        if !self.signals.contains(Signal::Logs) {
            return Ok(());
        }
        self.logs.pending.entry(worker).or_default().push(record);
        self.logs.waiting += 1;
        if self.logs.waiting >= self.batch {
            self.flush_logs()?;
        }
        Ok(())
    }
}

/// OTLP's severity number for a level (SeverityNumber: TRACE 1, DEBUG 5, INFO 9, WARN 13,
/// ERROR 17; 0 unspecified).
fn severity_number(level: formats::Level) -> i32 {
    match level {
        formats::Level::ERROR => 17,
        formats::Level::WARN => 13,
        formats::Level::INFO => 9,
        formats::Level::DEBUG => 5,
        formats::Level::TRACE => 1,
        _ => 0,
    }
}

/// The UCUM unit OTLP metrics use for a plot unit.
fn otlp_unit(unit: formats::PlotUnit) -> &'static str {
    match unit {
        formats::PlotUnit::BYTES => "By",
        formats::PlotUnit::PERCENT => "%",
        formats::PlotUnit::NANOS => "ns",
        _ => "1",
    }
}

/// Log records or gauge points waiting to be sent, by worker (or series).
#[derive(Default)]
struct Waiting<K, V> {
    pending: HashMap<K, V>,
    waiting: usize,
}

/// A duration as a user writes it (`300s`, `2m`).
fn humanize(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 && s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        let secs = format!("{:.3}", d.as_secs_f64());
        format!("{}s", secs.trim_end_matches('0').trim_end_matches('.'))
    }
}

impl FrameSink for OtlpSender {
    fn process(&mut self, worker: u8, pid: u32, name: &str) -> std::io::Result<()> {
        use any_value::Value as V;
        self.resources.insert(
            worker,
            vec![
                kv("service.name", V::StringValue(name.to_owned())),
                kv("process.pid", V::IntValue(i64::from(pid))),
                kv("framelog.worker", V::IntValue(i64::from(worker))),
            ],
        );
        Ok(())
    }

    fn thread(&mut self, _worker: u8, _thread: u32, _name: &str) -> std::io::Result<()> {
        Ok(())
    }

    fn frame(&mut self, f: &Frame<'_>) -> std::io::Result<()> {
        use any_value::Value as V;
        let salt = self.salt(f);
        if !self.signals.contains(Signal::Traces) {
            return Ok(());
        }
        let worker = f.key.worker;
        let root_key = FrameKey::new(worker, f.context);
        let mut links = Vec::new();
        let mut parent = f.parent;
        if let Some(p) = parent
            && p != root_key
        {
            match self.sent_context(p, f.context) {
                Some(c) if c != f.context => {
                    // Its parent went to another trace: a link, under this trace's root.
                    links.push(span::Link {
                        trace_id: trace_id(salt, p.worker, c),
                        span_id: span_id(salt, p.worker, p.id),
                        attributes: vec![kv(
                            "framelog.parent",
                            V::StringValue(format!("{}:{}", p.worker, p.id)),
                        )],
                        ..Default::default()
                    });
                    parent = (f.key != root_key).then_some(root_key);
                }
                Some(_) => {}
                None => self.await_parent(p, f.context, f.start_unix_ns, f.end_unix_ns),
            }
        }
        if parent == Some(root_key) && self.sent_context(root_key, f.context).is_none() {
            self.await_parent(root_key, f.context, f.start_unix_ns, f.end_unix_ns);
        }
        self.mark_sent(f.key, f.context);
        let mut span = Span {
            trace_id: trace_id(salt, worker, f.context),
            span_id: span_id(salt, worker, f.key.id),
            parent_span_id: parent
                .map(|p| span_id(salt, p.worker, p.id))
                .unwrap_or_default(),
            links,
            name: f.label.to_owned(),
            kind: span::SpanKind::Internal as i32,
            start_time_unix_nano: f.start_unix_ns,
            end_time_unix_nano: f.end_unix_ns,
            attributes: vec![
                kv("framelog.category", V::StringValue(f.category.to_string())),
                kv(
                    "framelog.frame",
                    V::StringValue(format!("{}:{}", f.key.worker, f.key.id)),
                ),
                kv("framelog.context", V::IntValue(i64::from(f.context))),
            ],
            ..Default::default()
        };
        if f.open {
            span.attributes
                .push(kv("framelog.open", V::BoolValue(true)));
        }
        if let (Some(p), false) = (f.parent, span.links.is_empty()) {
            span.attributes.push(kv(
                "framelog.parent",
                V::StringValue(format!("{}:{}", p.worker, p.id)),
            ));
        }
        if let Some(d) = &f.data {
            data_to_span(
                d,
                f.end_unix_ns,
                &mut span,
                self.events.contains_key(&f.key),
            );
        }
        if let Some(a) = &f.allocs {
            for (name, v) in [
                ("framelog.allocs", a.allocs),
                ("framelog.alloc_bytes", a.alloc_bytes),
                ("framelog.frees", a.frees),
                ("framelog.freed_bytes", a.freed_bytes),
            ] {
                span.attributes
                    .push(kv(name, V::IntValue(i64::try_from(v).unwrap_or(i64::MAX))));
            }
        }
        if let Some(p) = &f.polls {
            // tracing-opentelemetry's names for the two it sends (idle: not busy), and ours
            // for what it cannot see.
            let split = p.split(f.end_unix_ns.saturating_sub(f.start_unix_ns));
            for (name, v) in [
                ("busy_ns", split.busy_ns),
                ("idle_ns", split.queued_ns + split.waiting_ns),
                ("framelog.queued_ns", split.queued_ns),
                ("framelog.waiting_ns", split.waiting_ns),
                ("framelog.polls", p.polls),
                ("framelog.slow_polls", p.slow_polls),
            ] {
                span.attributes
                    .push(kv(name, V::IntValue(i64::try_from(v).unwrap_or(i64::MAX))));
            }
        }
        if let Some(events) = self.events.remove(&f.key) {
            span.events.extend(events);
        }
        if span.events.len() > self.max_events {
            // The earliest are kept; the rest counted as OTLP counts dropped events.
            span.events.sort_by_key(|e| e.time_unix_nano);
            let cut = (span.events.len() - self.max_events) as u64;
            span.events.truncate(self.max_events);
            span.dropped_events_count = span
                .dropped_events_count
                .saturating_add(u32::try_from(cut).unwrap_or(u32::MAX));
            self.spans_with_dropped_events += 1;
            self.dropped_events += cut;
        }
        if span.dropped_events_count > 0 {
            span.attributes.push(kv(
                "framelog.events_dropped",
                V::IntValue(i64::from(span.dropped_events_count)),
            ));
        }
        self.push(worker, span)
    }

    /// With [`Signal::Metrics`], a plot value becomes a gauge point of its series: NaN (a
    /// gap) a point flagged as having no recorded value, ±inf as it is (OTLP's doubles are
    /// IEEE 754).
    fn plot(&mut self, p: &super::PlotPoint<'_>) -> std::io::Result<()> {
        if !self.signals.contains(Signal::Metrics) {
            return Ok(());
        }
        let flags = if p.value.is_nan() {
            self.gap_points += 1;
            NO_RECORDED_VALUE
        } else {
            self.infinite_points += u64::from(p.value.is_infinite());
            0
        };
        let entry = match self.gauges.pending.get_mut(&(p.worker, p.name.to_owned())) {
            Some(e) => e,
            None => self
                .gauges
                .pending
                .entry((p.worker, p.name.to_owned()))
                .or_insert((p.unit, Vec::new())),
        };
        entry.1.push(NumberDataPoint {
            time_unix_nano: p.unix_ns,
            value: Some(number_data_point::Value::AsDouble(p.value)),
            flags,
            ..Default::default()
        });
        self.gauges.waiting += 1;
        if self.gauges.waiting >= self.batch * 8 {
            self.flush_metrics()?;
        }
        Ok(())
    }

    /// A message written in a frame becomes an event of the frame's span (sent with it).
    fn message(&mut self, m: &super::ExportMessage<'_>) -> std::io::Result<()> {
        use any_value::Value as V;
        let Some(frame) = m.frame.filter(|_| self.signals.contains(Signal::Traces)) else {
            // Outside every frame (or no spans sent): a log record of its own.
            let salt = self.salt.unwrap_or(m.unix_ns - m.at_ns);
            let record = self.log_record(m, salt);
            return self.push_log(m.thread.0, record);
        };
        let mut attributes = vec![kv("level", V::StringValue(m.level.name().into_owned()))];
        if let Some(fields) = &m.fields {
            for (k, v) in fields {
                attributes.push(kv(k, attr_of(v)));
            }
        }
        self.events.entry(frame).or_default().push(span::Event {
            time_unix_nano: m.unix_ns,
            name: m.text.to_owned(),
            attributes,
            dropped_attributes_count: 0,
        });
        Ok(())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        use any_value::Value as V;
        // Messages whose frame never came (its start is not in the log): log records, with
        // the frame named.
        let mut left: Vec<_> = self.events.drain().collect();
        left.sort_unstable_by_key(|(k, _)| *k);
        for (frame, events) in left {
            for e in events {
                let level = e
                    .attributes
                    .iter()
                    .find(|a| a.key == "level")
                    .and_then(|a| match &a.value.as_ref()?.value {
                        Some(V::StringValue(s)) => formats::Level::from_name(s),
                        _ => None,
                    })
                    .unwrap_or_default();
                let mut attributes = e.attributes;
                attributes.push(kv(
                    "framelog.frame",
                    V::StringValue(format!("{}:{}", frame.worker, frame.id)),
                ));
                let record = LogRecord {
                    time_unix_nano: e.time_unix_nano,
                    observed_time_unix_nano: e.time_unix_nano,
                    severity_number: severity_number(level),
                    severity_text: level.name().to_ascii_uppercase(),
                    body: Some(AnyValue {
                        value: Some(V::StringValue(e.name)),
                    }),
                    attributes,
                    ..Default::default()
                };
                self.push_log(frame.worker, record)?;
            }
        }
        let salt = self.salt.unwrap_or(0);
        // Stand-ins for parents not in the export, under their trace's root; then for root
        // frames not in the export: every span's parent is sent, every trace has one root.
        let mut awaited: Vec<_> = self.awaited.drain().collect();
        awaited.sort_unstable_by_key(|&(k, _)| k);
        let mut roots: Vec<(FrameKey, Awaited)> = Vec::new();
        for (key, a) in awaited {
            let root_key = FrameKey::new(key.worker, a.context);
            if key == root_key {
                roots.push((key, a));
                continue;
            }
            if self.sent_context(root_key, a.context).is_none() {
                roots.push((
                    root_key,
                    Awaited {
                        context: a.context,
                        start: a.start,
                        end: a.end,
                    },
                ));
            }
            let span = Span {
                trace_id: trace_id(salt, key.worker, a.context),
                span_id: span_id(salt, key.worker, key.id),
                parent_span_id: span_id(salt, key.worker, a.context),
                name: format!("frame {}:{} (not in the export)", key.worker, key.id),
                kind: span::SpanKind::Internal as i32,
                start_time_unix_nano: a.start,
                end_time_unix_nano: a.end,
                attributes: vec![
                    kv(
                        "framelog.frame",
                        V::StringValue(format!("{}:{}", key.worker, key.id)),
                    ),
                    kv("framelog.context", V::IntValue(i64::from(a.context))),
                    kv("framelog.synthetic", V::BoolValue(true)),
                ],
                ..Default::default()
            };
            self.synthetic_parents += 1;
            self.push(key.worker, span)?;
        }
        // One stand-in per context, covering all that wait for it.
        roots.sort_unstable_by_key(|&(k, _)| k);
        let mut merged: Vec<(FrameKey, Awaited)> = Vec::new();
        for (k, a) in roots {
            match merged.last_mut() {
                Some((lk, la)) if *lk == k => {
                    la.start = la.start.min(a.start);
                    la.end = la.end.max(a.end);
                }
                _ => merged.push((k, a)),
            }
        }
        for (key, r) in merged {
            let (worker, context) = (key.worker, r.context);
            if self.sent_context(key, context).is_some() {
                continue;
            }
            self.mark_sent(key, context);
            let span = Span {
                trace_id: trace_id(salt, worker, context),
                span_id: span_id(salt, worker, context),
                name: format!("context {worker}:{context} (root frame not in the export)"),
                kind: span::SpanKind::Internal as i32,
                start_time_unix_nano: r.start,
                end_time_unix_nano: r.end,
                attributes: vec![
                    kv("framelog.context", V::IntValue(i64::from(context))),
                    kv("framelog.synthetic", V::BoolValue(true)),
                ],
                ..Default::default()
            };
            self.synthetic_roots += 1;
            self.push(worker, span)?;
        }
        self.flush()?;
        self.flush_logs()?;
        self.flush_metrics()
    }
}

#[cfg(test)]
mod retry_tests {
    use super::*;

    #[test]
    fn waits_follow_retry_after_else_back_off_with_jitter_within_the_deadline() {
        let ms = Duration::from_millis;
        let long = Duration::from_secs(300);
        assert_eq!(next_wait(ms(100), None, 0.0, long), Some(ms(100)));
        assert_eq!(next_wait(ms(100), None, 1.0, long), Some(ms(150)));
        assert_eq!(
            next_wait(ms(100), Some(Duration::from_secs(20)), 0.7, long),
            Some(Duration::from_secs(20)),
            "the collector's Retry-After wins"
        );
        assert_eq!(
            next_wait(ms(100), Some(Duration::from_secs(20)), 0.0, ms(19_999)),
            None
        );
        assert_eq!(next_wait(ms(800), None, 0.0, ms(500)), None);
        assert_eq!(retry_after(" 7 "), Some(Duration::from_secs(7)));
        assert_eq!(retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert!(retryable(503) && retryable(429) && !retryable(400) && !retryable(500));
        assert_eq!(
            server_message(b"Server is at\ncapacity\r\n"),
            "Server is at capacity"
        );
        assert_eq!(humanize(Duration::from_secs(300)), "5m");
        assert_eq!(humanize(Duration::from_millis(2500)), "2.5s");
    }
}
