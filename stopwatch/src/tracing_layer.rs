//! [`TracingLayer`]: records `tracing` spans as frames (feature `tracing`).
//!
//! ```no_run
//! # #[cfg(feature = "tracing")] {
//! use tracing_subscriber::prelude::*;
//! let _sw = stopwatch::Stopwatch::builder().dir("target/framelog").install()?;
//! tracing_subscriber::registry().with(stopwatch::TracingLayer::global()).init();
//! # }
//! # Ok::<(), stopwatch::Error>(())
//! ```
//!
//! - **A frame is a span's whole life**, from its creation to its close, whatever thread
//!   closes it. For `#[instrument] async fn` that is one frame covering every `.await`, not a
//!   slice per poll; for a sync span entered once it is the same as enter → exit give or take
//!   the creation. Enter and exit do not place frames (only the allocation counts below use
//!   them), so spans entered many times, exited out of order or on other threads cannot
//!   mis-nest.
//! - Label: the span's name (with `.with_target(true)`, `target::name`). Category: a
//!   `category` field (`"database"`, or a number), else the first matching target prefix of
//!   [`TracingLayer::category_for`] (defaults: `sqlx`, `diesel`, `postgres`, `redis` →
//!   database; `hyper`, `axum`, `tower_http`, `reqwest` → http; `tonic` → rpc), else the
//!   recorder's default.
//! - Parent and context: a span's frame is a child of its parent span's frame (the explicit
//!   parent, else the current span: what `tracing` says; a parent the layer does not record
//!   gives way to its nearest recorded ancestor), in that frame's context, whatever thread
//!   either is created on. A span with `parent: None` opens a context of its own; a contextual
//!   span with no current span is started where the thread is: a root opening a context, or
//!   a child of the thread's current frame (a `Stopwatch::start` frame, an `in_frame`
//!   future). While a recorded span is entered on a thread, its frame is the thread's
//!   current frame: a `Stopwatch::start` frame started then is the span's child, and a span
//!   created inside that frame is the frame's child (the innermost of span and frame is the
//!   parent, in code that mixes `#[instrument]` and the stopwatch).
//! - Data: the span's fields and later `record`ed values, and the events inside it (the first
//!   32, with `message`, fields, `level`, `target` and `time_unix_nano`, the event's time in
//!   ns since the Unix epoch; the rest counted as `events_dropped`), attached when the span
//!   closes. `follows_from` links are listed as `follows_from`.
//!
//! - Messages: every event is also a message (`Stopwatch::message`): level mapped one to
//!   one, text its `message` field, fields its other fields and its `target`, in its span's
//!   frame (the thread's current frame for an event outside recorded spans).
//! - Allocations, with [`crate::CountingAlloc`] installed: what the span's code allocated
//!   and freed while the span was entered, summed over every enter → exit on whatever thread
//!   (an `#[instrument] async fn`: over its polls), recorded as the frame's FrameAlloc when it
//!   ends (none if nothing was counted). Inclusive, as for `Stopwatch::start` frames: see
//!   [`TracingLayer`].
//!
//! Cost: values are written as BSON elements into a per-span buffer as they arrive (no map,
//! no JSON or BSON value tree, no `String` per field); the buffer becomes the frame's data
//! document when the span closes. User code (a field's `Debug`) never runs while the span's
//! extensions are locked: values are formatted into buffers of our own first. Without
//! `CountingAlloc`, enter and exit cost a relaxed load each.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::Arc;

use formats::{Category, Level};
use tracing_core::field::{Field, Visit};
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context as LayerContext;
use tracing_subscriber::registry::LookupSpan;

use crate::context::ContextGuard;
use crate::counting_alloc::{self, AllocCounts, Span as AllocSpan};
use crate::frame::Detached;
use crate::global::with_global;
use crate::inner::Inner;
use crate::polls::{self, PollTimes};
use crate::recorder::Recorder;

/// Events kept per span.
const MAX_EVENTS: u32 = 32;

enum Target {
    Global,
    Recorder(Arc<Inner>),
}

/// A `tracing_subscriber::Layer` that records spans as frames.
///
/// With a [`crate::CountingAlloc`] installed, a span's frame records what its thread
/// allocated and freed between each `on_enter` and the matching `on_exit`, summed over every
/// time the span is entered, on whatever thread (an `#[instrument] async fn`: its polls, on
/// whichever worker runs them), as one FrameAlloc written when the frame ends; a span that
/// counted nothing gets none. The counts are inclusive, as those of `Stopwatch::start` frames
/// are (and as time is): a span's include the allocations of the spans (and frames) entered
/// inside it on the same thread while it is entered, a child `#[instrument]` future awaited
/// in its parent's poll included. What runs while the span is not entered is not its own:
/// between its creation and its first enter, between its polls, in a task it spawns or a
/// child entered on another thread. A span entered again while already entered on a thread
/// counts that stretch once. Without a counting allocator, enter and exit cost one relaxed
/// load each.
pub struct TracingLayer {
    target: Target,
    with_target: bool,
    categories: Vec<(String, Category)>,
}

/// What the layer keeps in the extensions of a span it records. The buffers stay empty
/// (unallocated) for a span without fields, events or links.
struct SpanFrame {
    frame: Detached,
    /// Its stretches' times (a recorded span), shared with the stretches under way so that
    /// an exit adds to them without looking the span up.
    polls: Option<Arc<SpanPolls>>,
    /// The data document being built (empty until the span has data): 4 bytes for its
    /// length, the span's fields as BSON elements (one per name), then, once the span has
    /// an event, the `events` array, open (its elements run to the end).
    doc: Vec<u8>,
    /// Where the `events` array's element starts in `doc` (0: no event yet).
    events_at: usize,
    n_events: u32,
    events_dropped: u64,
    /// The elements of the `follows_from` array (strings).
    follows: Vec<u8>,
    n_follows: u32,
    /// A field is named like a key the layer adds (`events`, `events_dropped`,
    /// `follows_from`): checked for when the span closes.
    reserved: bool,
}

impl SpanFrame {
    /// Starts the data document, if not yet started.
    fn open_doc(&mut self) {
        if self.doc.is_empty() {
            self.doc = self.frame.inner.data_buffer();
            self.doc.reserve(256);
            open(&mut self.doc);
        }
    }

    /// The end of the fields in `doc`.
    fn fields_end(&self) -> usize {
        if self.events_at > 0 {
            self.events_at
        } else {
            self.doc.len()
        }
    }
}

/// Where the length of an `events` array starting at `at` is (after its type and name).
const EVENTS_LEN_AT: usize = 1 + "events".len() + 1;

impl TracingLayer {
    /// Records into `recorder`.
    pub fn new(recorder: &Recorder) -> Self {
        Self::with(Target::Recorder(recorder.inner.clone()))
    }

    /// Records into the installed global stopwatch (spans are ignored while none is).
    pub fn global() -> Self {
        Self::with(Target::Global)
    }

    fn with(target: Target) -> Self {
        let defaults = [
            ("sqlx", Category::DATABASE),
            ("diesel", Category::DATABASE),
            ("postgres", Category::DATABASE),
            ("tokio_postgres", Category::DATABASE),
            ("redis", Category::DATABASE),
            ("hyper", Category::HTTP),
            ("axum", Category::HTTP),
            ("tower_http", Category::HTTP),
            ("reqwest", Category::HTTP),
            ("tonic", Category::RPC),
        ];
        Self {
            target,
            with_target: false,
            categories: defaults
                .iter()
                .map(|(p, c)| ((*p).to_owned(), *c))
                .collect(),
        }
    }

    /// Labels become `target::name` instead of `name`.
    pub fn with_target(mut self, yes: bool) -> Self {
        self.with_target = yes;
        self
    }

    /// Spans whose target starts with `prefix` get `category` (checked before the defaults).
    pub fn category_for(mut self, prefix: impl Into<String>, category: Category) -> Self {
        self.categories.insert(0, (prefix.into(), category));
        self
    }

    /// The category of a span with `target`, `field` being its `category` field's if any.
    fn category(&self, target: &str, field: Option<Category>) -> Option<Category> {
        field.or_else(|| {
            self.categories
                .iter()
                .find(|(p, _)| {
                    // The first byte first: most targets match no prefix.
                    p.as_bytes()
                        .first()
                        .is_none_or(|b| target.as_bytes().first() == Some(b))
                        && target.starts_with(p.as_str())
                        && target[p.len()..].chars().next().is_none_or(|c| c == ':')
                })
                .map(|(_, c)| *c)
        })
    }

    /// Starts the frame of a new span; `fields` is an empty buffer to format its fields in
    /// (user `Debug` impls may log: no extensions are locked while they run).
    fn new_span<S>(
        &self,
        attrs: &Attributes<'_>,
        span: &tracing_subscriber::registry::SpanRef<'_, S>,
        fields: &mut Vec<u8>,
    ) where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let (mut category, mut reserved) = (None, false);
        if !attrs.values().is_empty() {
            open(fields);
            let mut enc = Encoder::new(fields);
            attrs.record(&mut enc);
            (category, reserved) = (enc.category, enc.reserved);
        }
        let meta = attrs.metadata();
        let label: Cow<'static, str> = if self.with_target {
            Cow::Owned(format!("{}::{}", meta.target(), meta.name()))
        } else {
            Cow::Borrowed(meta.name())
        };
        let category = self.category(meta.target(), category);
        // The nearest ancestor that has a frame: `parent()` skips spans this layer's filter
        // disabled, but a span it saw without recording (none installed, not sampled) has none.
        let mut ancestor = span.parent();
        let mut parent = if attrs.is_root() {
            Parent::Root
        } else {
            Parent::Thread
        };
        while let Some(p) = ancestor {
            if let Some(f) = p.extensions().get::<SpanFrame>() {
                // A contextual span under the span entered innermost on this thread starts
                // where the thread is: a child of that span, or of a frame started inside
                // it (the innermost of span and frame is the parent).
                parent = if attrs.is_contextual() && self.is_current(&p.id()) {
                    Parent::Thread
                } else {
                    Parent::Span(f.frame.context())
                };
                break;
            }
            ancestor = p.parent();
        }
        if let Some(frame) = self.start(label, category, parent) {
            let mut polls = None;
            if frame.is_recording() {
                // Its polls are timed from its creation; its wakes cannot be seen.
                polls = Some(Arc::new(SpanPolls::new(&frame)));
            }
            let mut doc = Vec::new();
            if !fields.is_empty() {
                // Room for a few more fields and an event or two.
                doc = frame.inner.data_buffer();
                doc.reserve(fields.len() + 192);
                doc.extend_from_slice(fields);
            }
            span.extensions_mut().insert(SpanFrame {
                frame,
                polls,
                doc,
                events_at: 0,
                n_events: 0,
                events_dropped: 0,
                follows: Vec::new(),
                n_follows: 0,
                reserved,
            });
        }
    }

    fn start(
        &self,
        label: Cow<'static, str>,
        category: Option<Category>,
        parent: Parent,
    ) -> Option<Detached> {
        let go = |inner: &Arc<Inner>| {
            let category = category.unwrap_or(inner.default_category);
            match &parent {
                Parent::Span(ctx) => ctx.run(|| Detached::start(inner, &label, category)),
                Parent::Thread => Detached::start(inner, &label, category),
                Parent::Root => Detached::start_root(inner, &label, category),
            }
        };
        match &self.target {
            Target::Recorder(inner) => go(inner),
            Target::Global => with_global(go).flatten(),
        }
    }
}

impl TracingLayer {
    /// Records `event` as a message: in `frame` (its span's frame: the recorder and the
    /// frame and context), else in the thread's current frame. Its `message` field is the
    /// text; its other fields and `target` are the message's fields.
    fn message(&self, event: &Event<'_>, frame: Option<(Arc<Inner>, (u32, u32))>) {
        let meta = event.metadata();
        let level = match *meta.level() {
            tracing_core::Level::ERROR => Level::ERROR,
            tracing_core::Level::WARN => Level::WARN,
            tracing_core::Level::INFO => Level::INFO,
            tracing_core::Level::DEBUG => Level::DEBUG,
            tracing_core::Level::TRACE => Level::TRACE,
        };
        let write = |inner: &Arc<Inner>, at: Option<(u32, u32)>| {
            if !inner.gate.records_instants() {
                return;
            }
            // User `Debug` code runs here, with nothing of the recorder or the span held.
            with_scratch(|doc| {
                with_buffer(&TEXT, |text| {
                    let at_doc = open(doc);
                    event.record(&mut MessageFields {
                        text,
                        fields: Encoder::new(doc),
                    });
                    put_str(doc, "target", meta.target());
                    end_document(doc, at_doc);
                    let text = String::from_utf8_lossy(text);
                    crate::message::message_in(inner, at, level, &text, doc);
                })
            });
        };
        match (frame, &self.target) {
            // The span's recorder (this layer's).
            (Some((inner, at)), _) => write(&inner, Some(at)),
            (None, Target::Recorder(inner)) => write(inner, None),
            (None, Target::Global) => {
                with_global(|inner| write(inner, None));
            }
        }
    }
}

/// Splits an event's fields: `message` is the text, the others go to the document.
struct MessageFields<'a> {
    text: &'a mut Vec<u8>,
    fields: Encoder<'a>,
}

impl Visit for MessageFields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(Bytes(self.text), "{value:?}");
        } else {
            self.fields.record_debug(field, value);
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.text.extend_from_slice(value.as_bytes());
        } else {
            self.fields.record_str(field, value);
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.fields.record_i64(field, value);
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.fields.record_u64(field, value);
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.fields.record_f64(field, value);
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.fields.record_bool(field, value);
    }
}

/// Where a new span's frame goes.
enum Parent {
    /// Under the frame of its nearest recorded ancestor span, in that span's context.
    Span(crate::Context),
    /// A root in a context of its own (`parent: None`).
    Root,
    /// No recorded ancestor span: where the thread is (under its current frame, if any).
    Thread,
}

/// BSON element types written here.
mod kind {
    pub(super) const DOUBLE: u8 = 0x01;
    pub(super) const STRING: u8 = 0x02;
    pub(super) const DOCUMENT: u8 = 0x03;
    pub(super) const ARRAY: u8 = 0x04;
    pub(super) const BOOL: u8 = 0x08;
    pub(super) const INT64: u8 = 0x12;
}

/// Appends text to a byte buffer (for `write!` without a `String`).
struct Bytes<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Bytes<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Starts an element: its type and name (a C string: cut at a NUL, which BSON names cannot
/// hold).
fn element(buf: &mut Vec<u8>, kind: u8, name: &str) {
    buf.push(kind);
    let name = name.as_bytes();
    let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    buf.extend_from_slice(&name[..len]);
    buf.push(0);
}

/// Starts an array element named by its index.
fn index_element(buf: &mut Vec<u8>, kind: u8, index: u32) {
    buf.push(kind);
    let mut digits = [0u8; 10];
    let (mut i, mut n) = (digits.len(), index);
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
    buf.push(0);
}

/// Reserves a length prefix at the end of `buf`; returns where it is.
fn open(buf: &mut Vec<u8>) -> usize {
    let at = buf.len();
    buf.extend_from_slice(&[0; 4]);
    at
}

/// Fills in the length prefix at `at` with `len`.
fn set_len(buf: &mut [u8], at: usize, len: usize) {
    let len = i32::try_from(len).unwrap_or(i32::MAX);
    buf[at..at + 4].copy_from_slice(&len.to_le_bytes());
}

/// Ends the string whose length prefix is at `at` (its length counts the NUL, not itself).
fn end_string(buf: &mut Vec<u8>, at: usize) {
    buf.push(0);
    let len = buf.len() - at - 4;
    set_len(buf, at, len);
}

fn put_str(buf: &mut Vec<u8>, name: &str, value: &str) {
    element(buf, kind::STRING, name);
    let at = open(buf);
    buf.extend_from_slice(value.as_bytes());
    end_string(buf, at);
}

fn put_i64(buf: &mut Vec<u8>, name: &str, value: i64) {
    element(buf, kind::INT64, name);
    buf.extend_from_slice(&value.to_le_bytes());
}

/// Ends the document or array whose length prefix is at `at` (its length counts itself).
fn end_document(buf: &mut Vec<u8>, at: usize) {
    buf.push(0);
    let len = buf.len() - at;
    set_len(buf, at, len);
}

/// The end of the element at `at` of elements this module wrote, and its name's range.
fn element_at(buf: &[u8], at: usize) -> (std::ops::Range<usize>, usize) {
    let name = at + 1;
    let nul = buf[name..]
        .iter()
        .position(|&b| b == 0)
        .map_or(buf.len(), |n| name + n);
    let value = nul + 1;
    let i32_at =
        |i: usize| i32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]).max(0) as usize;
    let end = match buf[at] {
        kind::DOUBLE | kind::INT64 => value + 8,
        kind::BOOL => value + 1,
        kind::STRING => value + 4 + i32_at(value),
        // Documents and arrays.
        _ => value + i32_at(value),
    };
    (name..nul, end.min(buf.len()))
}

/// Removes the element named `name` from the elements in `buf[from..to]`, if there is one;
/// returns the number of bytes removed.
fn remove(buf: &mut Vec<u8>, from: usize, to: usize, name: &[u8]) -> usize {
    let mut at = from;
    while at < to {
        let (n, end) = element_at(buf, at);
        if &buf[n] == name {
            buf.drain(at..end);
            return end - at;
        }
        at = end;
    }
    0
}

/// Writes field values as BSON elements. Integers are Int64 (a `u64` above `i64::MAX` is
/// kept as text); `Debug` values are formatted straight into the buffer.
struct Encoder<'a> {
    buf: &'a mut Vec<u8>,
    /// The `category` field's value, if it names one.
    category: Option<Category>,
    /// A field is named like a key the layer adds.
    reserved: bool,
}

impl<'a> Encoder<'a> {
    fn new(buf: &'a mut Vec<u8>) -> Self {
        Self {
            buf,
            category: None,
            reserved: false,
        }
    }

    /// Starts the element of `field`.
    fn element(&mut self, kind: u8, field: &Field) {
        let name = field.name();
        self.reserved |= matches!(name, "events" | "events_dropped" | "follows_from");
        element(self.buf, kind, name);
    }
}

impl Visit for Encoder<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.element(kind::STRING, field);
        let at = open(self.buf);
        let _ = write!(Bytes(self.buf), "{value:?}");
        if field.name() == "category" {
            self.category = std::str::from_utf8(&self.buf[at + 4..])
                .ok()
                .and_then(Category::parse);
        }
        end_string(self.buf, at);
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "category" {
            self.category = Category::parse(value);
        }
        self.element(kind::STRING, field);
        let at = open(self.buf);
        self.buf.extend_from_slice(value.as_bytes());
        end_string(self.buf, at);
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        if field.name() == "category" {
            self.category = u8::try_from(value).ok().map(Category);
        }
        self.element(kind::INT64, field);
        self.buf.extend_from_slice(&value.to_le_bytes());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        match i64::try_from(value) {
            Ok(v) => self.record_i64(field, v),
            // BSON has no u64: above i64::MAX it is kept as text.
            Err(_) => self.record_debug(field, &value),
        }
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.element(kind::DOUBLE, field);
        self.buf.extend_from_slice(&value.to_le_bytes());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.element(kind::BOOL, field);
        self.buf.push(u8::from(value));
    }
}

thread_local! {
    /// Where a new span's fields and an event's document are formatted before any
    /// extensions are locked (reused: no allocation per span or event). Taken by `try_borrow_mut`: an event logged by a
    /// `Debug` impl while one is being formatted gets a buffer of its own.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// Where an event's message text is formatted, beside its fields in `SCRATCH`.
    static TEXT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with an empty buffer.
fn with_scratch<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    with_buffer(&SCRATCH, f)
}

/// Runs `f` with the empty buffer `key` holds (or a new one while it is in use).
fn with_buffer<R>(
    key: &'static std::thread::LocalKey<RefCell<Vec<u8>>>,
    f: impl FnOnce(&mut Vec<u8>) -> R,
) -> R {
    let mut f = Some(f);
    let reused = key.try_with(|s| {
        let mut s = s.try_borrow_mut().ok()?;
        s.clear();
        let f = f.take()?;
        let r = f(&mut s);
        if s.capacity() > 64 << 10 {
            // A huge value once: not kept for the thread's life.
            *s = Vec::new();
        }
        Some(r)
    });
    match (reused, f) {
        (Ok(Some(r)), _) => r,
        (_, Some(f)) => f(&mut Vec::new()),
        (_, None) => unreachable!("`f` ran but returned nothing"),
    }
}

/// One stretch of a span entered on this thread, its allocations being counted.
struct EnteredSpan {
    /// The layer's address: spans of other subscribers may have the same id.
    layer: usize,
    span: u64,
    count: AllocSpan,
}

thread_local! {
    /// The spans entered on this thread, innermost last, while a `CountingAlloc` is
    /// installed (nothing is pushed otherwise).
    static ENTERED: RefCell<Vec<EnteredSpan>> = const { RefCell::new(Vec::new()) };
}

/// What `make_current` saw of a recorded span being entered.
struct Entering {
    polls: Arc<SpanPolls>,
    /// It was entered before: it is being polled as a future.
    again: bool,
}

/// A recorded span's polls, and what a slow stretch of it reports.
struct SpanPolls {
    times: parking_lot::Mutex<PollTimes>,
    /// A stretch of it ended (it is being polled as a future if entered again): read at
    /// every enter without taking the lock.
    polled: std::sync::atomic::AtomicBool,
    inner: Arc<Inner>,
    /// The frame's id and context.
    frame: (u32, u32),
}

impl SpanPolls {
    fn new(frame: &Detached) -> SpanPolls {
        SpanPolls {
            times: parking_lot::Mutex::new(PollTimes::new(frame.inner.clock.now(), false)),
            polled: std::sync::atomic::AtomicBool::new(false),
            inner: frame.inner.clone(),
            frame: frame.frame_and_context(),
        }
    }

    /// A stretch from `t0` to `t1` ended; reports it if it was a slow poll in the nest.
    fn add(&self, t0: u64, t1: u64, nested: bool) {
        let d = {
            let mut p = self.times.lock();
            p.begin(t0, 0);
            p.end(t0, t1, self.inner.slow_poll_ns)
        };
        self.polled
            .store(true, std::sync::atomic::Ordering::Relaxed);
        if nested {
            let (id, ctx) = self.frame;
            polls::nest_exit(&self.inner, id, ctx, t0, d);
        }
    }
}

/// A recorded span entered on this thread: its frame is the thread's current frame until
/// it is exited (a `Stopwatch::start` frame started meanwhile is its child).
struct CurrentSpan {
    layer: usize,
    span: u64,
    /// Restores the thread's state from before the enter.
    guard: ContextGuard,
    /// The stretch being timed: the span's polls and when it began (`None` for a span
    /// entered again inside itself: the outer stretch times it).
    timed: Option<(Arc<SpanPolls>, u64)>,
    /// The stretch is a poll in the thread's nest of polls (slow-poll attribution).
    nested: bool,
}

/// A stretch of a recorded span that just ended: began at `t0`, ended at `t1`.
struct Stretch {
    polls: Arc<SpanPolls>,
    t0: u64,
    t1: u64,
    nested: bool,
}

thread_local! {
    /// The recorded spans entered on this thread, innermost last.
    static CURRENT: RefCell<Vec<CurrentSpan>> = const { RefCell::new(Vec::new()) };
}

impl TracingLayer {
    /// A span was entered: its frame's context becomes the thread's (the span is the parent
    /// of frames started on the thread until it is exited).
    fn make_current<S>(&self, id: &Id, ctx: &LayerContext<'_, S>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let Some((context, entering)) = ctx.span(id).and_then(|s| {
            s.extensions().get::<SpanFrame>().map(|f| {
                let entering = f.polls.as_ref().map(|p| Entering {
                    polls: p.clone(),
                    again: p.polled.load(std::sync::atomic::Ordering::Relaxed),
                });
                (f.frame.context(), entering)
            })
        }) else {
            return;
        };
        // Entered after the span's extensions are released: entering runs no user code,
        // but registering the thread may allocate (and a global allocator may log).
        let guard = context.enter();
        let (layer, span) = (self.address(), id.into_u64());
        let _ = CURRENT.try_with(|stack| {
            if let Ok(mut stack) = stack.try_borrow_mut() {
                // Entered again inside itself: the outer stretch times this one.
                let again_inside = stack.iter().any(|c| c.layer == layer && c.span == span);
                let (mut timed, mut nested) = (None, false);
                if let Some(e) = entering.filter(|_| !again_inside) {
                    // A stretch is a poll on a thread that polls futures: a span entered
                    // again is one, and makes its thread one.
                    nested = e.again || polls::is_poller();
                    if nested {
                        polls::nest_enter(e.again);
                    }
                    let t0 = e.polls.inner.clock.now();
                    timed = Some((e.polls, t0));
                }
                stack.push(CurrentSpan {
                    layer,
                    span,
                    guard,
                    timed,
                    nested,
                });
            }
        });
    }

    /// Whether `id` is the span entered innermost on this thread.
    fn is_current(&self, id: &Id) -> bool {
        let (layer, span) = (self.address(), id.into_u64());
        CURRENT
            .try_with(|stack| {
                stack.try_borrow().is_ok_and(|stack| {
                    stack
                        .last()
                        .is_some_and(|c| c.layer == layer && c.span == span)
                })
            })
            .unwrap_or(false)
    }

    /// A span was exited: the thread's state goes back to what it was before the enter
    /// (out of order: the span entered after it takes over that state).
    /// Returns the stretch that ended, if it was timed.
    fn leave_current(&self, id: &Id) -> Option<Stretch> {
        let (layer, span) = (self.address(), id.into_u64());
        // Taken out under the borrow, dropped (restoring the thread's state) after it.
        let mut stretch = None;
        let left = CURRENT.try_with(|stack| {
            let mut stack = stack.try_borrow_mut().ok()?;
            let i = stack
                .iter()
                .rposition(|c| c.layer == layer && c.span == span)?;
            let mut left = stack.remove(i);
            stretch = left.timed.take().map(|(polls, t0)| Stretch {
                t1: polls.inner.clock.now(),
                polls,
                t0,
                nested: left.nested,
            });
            match stack.get_mut(i) {
                Some(next) => {
                    left.guard.leave_under(&mut next.guard);
                    None
                }
                None => Some(left),
            }
        });
        drop(left);
        stretch
    }

    /// This layer, in `EnteredSpan::layer`.
    fn address(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// A span was entered: starts counting what this thread allocates for it.
    #[inline(never)]
    fn count_enter(&self, id: &Id) {
        let (layer, span) = (self.address(), id.into_u64());
        let _ = ENTERED.try_with(|stack| {
            let Ok(mut stack) = stack.try_borrow_mut() else {
                return;
            };
            // Room first: growing the stack is not the span's allocation.
            stack.reserve(1);
            // Entered again inside itself: the outer stretch already counts this one.
            let count = if stack.iter().any(|e| e.layer == layer && e.span == span) {
                AllocSpan::default()
            } else {
                AllocSpan::begin()
            };
            stack.push(EnteredSpan { layer, span, count });
        });
    }

    /// What this thread allocated since the matching enter (with a counting allocator).
    #[inline(never)]
    fn count_exit(&self, id: &Id) -> AllocCounts {
        let (layer, span) = (self.address(), id.into_u64());
        let mut counted = AllocCounts::default();
        let _ = ENTERED.try_with(|stack| {
            let Ok(mut stack) = stack.try_borrow_mut() else {
                return;
            };
            // The span's innermost enter (spans may be exited out of order).
            if let Some(i) = stack
                .iter()
                .rposition(|e| e.layer == layer && e.span == span)
            {
                stack.remove(i).count.end_into(&mut counted);
            }
        });
        counted
    }

    /// A span was exited: its stretch's time goes to the span's polls (no lookup: the
    /// stretch holds them), what this thread allocated during it to its frame (summed until
    /// the frame ends, which records them).
    fn stretch_exit<S>(
        &self,
        id: &Id,
        ctx: LayerContext<'_, S>,
        stretch: Option<Stretch>,
        counted: AllocCounts,
    ) where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if let Some(st) = stretch {
            // Reported (a slow poll) after the thread-local stacks are released.
            st.polls.add(st.t0, st.t1, st.nested);
        }
        // Nothing counted (an idle stretch, a nested enter): no lock taken.
        if counted.is_empty() {
            return;
        }
        // No user code runs while the extensions are locked: only an addition.
        if let Some(s) = ctx.span(id)
            && let Some(f) = s.extensions_mut().get_mut::<SpanFrame>()
            && f.frame.is_recording()
        {
            f.frame.alloc = f.frame.alloc.plus(counted);
        }
    }

    /// A span closed: any stretch of it still on this thread's stack (a guard that was
    /// leaked, never exited) goes, so that a later span given the same id is counted.
    #[inline(never)]
    fn forget_entered(&self, id: &Id) {
        let (layer, span) = (self.address(), id.into_u64());
        let _ = ENTERED.try_with(|stack| {
            if let Ok(mut stack) = stack.try_borrow_mut() {
                stack.retain(|e| e.layer != layer || e.span != span);
            }
        });
    }
}

impl<S> Layer<S> for TracingLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: LayerContext<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        with_scratch(|fields| self.new_span(attrs, &span, fields));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: LayerContext<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        if span.extensions().get::<SpanFrame>().is_none() {
            return;
        }
        // Field values are formatted (user `Debug` impls run, and may log) before the
        // span's extensions are locked: a re-entrant event for this span must not find
        // them locked.
        let mut new = Vec::new();
        let mut enc = Encoder::new(&mut new);
        values.record(&mut enc);
        let reserved = enc.reserved;
        if new.is_empty() {
            return;
        }
        if let Some(f) = span.extensions_mut().get_mut::<SpanFrame>() {
            f.open_doc();
            f.reserved |= reserved;
            // A value recorded again replaces the earlier one.
            let mut at = 0;
            while at < new.len() {
                let (name, end) = element_at(&new, at);
                let fields_end = f.fields_end();
                let removed = remove(&mut f.doc, 4, fields_end, &new[name]);
                if f.events_at > 0 {
                    f.events_at -= removed;
                }
                at = end;
            }
            // Fields go before the events array.
            let end = f.fields_end();
            f.doc.splice(end..end, new.iter().copied());
            if f.events_at > 0 {
                f.events_at += new.len();
            }
        }
    }
    fn on_follows_from(&self, id: &Id, follows: &Id, ctx: LayerContext<'_, S>) {
        let Some(other) = ctx.span(follows) else {
            return;
        };
        let key = other
            .extensions()
            .get::<SpanFrame>()
            .map(|f| (f.frame.inner.worker, f.frame.id));
        if let (Some((worker, frame)), Some(span)) = (key, ctx.span(id))
            && let Some(f) = span.extensions_mut().get_mut::<SpanFrame>()
        {
            index_element(&mut f.follows, kind::STRING, f.n_follows);
            let at = open(&mut f.follows);
            let _ = write!(Bytes(&mut f.follows), "{worker}:{frame}");
            end_string(&mut f.follows, at);
            f.n_follows += 1;
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: LayerContext<'_, S>) {
        let span = ctx.event_span(event);
        // The event's span's frame, read and released before any user code runs.
        let frame = span.as_ref().and_then(|s| {
            s.extensions()
                .get::<SpanFrame>()
                .map(|f| (f.frame.inner.clone(), f.frame.message_frame()))
        });
        self.message(event, frame);
        let Some(span) = span else {
            return;
        };
        let time = match span.extensions().get::<SpanFrame>() {
            None => return,
            Some(f) if f.n_events >= MAX_EVENTS => None,
            Some(f) => Some(f.frame.inner.clock.now()),
        };
        let Some(time) = time else {
            if let Some(f) = span.extensions_mut().get_mut::<SpanFrame>() {
                f.events_dropped += 1;
            }
            return;
        };
        // Formatted with no lock held (see `on_record`), into the `events` array's next
        // element once the lock is taken.
        with_scratch(|doc| {
            let at = open(doc);
            event.record(&mut Encoder::new(doc));
            let meta = event.metadata();
            put_str(doc, "level", meta.level().as_str());
            put_str(doc, "target", meta.target());
            put_i64(
                doc,
                "time_unix_nano",
                i64::try_from(time).unwrap_or(i64::MAX),
            );
            end_document(doc, at);
            let mut ext = span.extensions_mut();
            let Some(f) = ext.get_mut::<SpanFrame>() else {
                return;
            };
            if f.n_events < MAX_EVENTS {
                f.open_doc();
                let d = &mut f.doc;
                d.reserve(doc.len() + 24);
                if f.events_at == 0 {
                    f.events_at = d.len();
                    element(d, kind::ARRAY, "events");
                    open(d);
                }
                index_element(d, kind::DOCUMENT, f.n_events);
                d.extend_from_slice(doc);
                f.n_events += 1;
            } else {
                f.events_dropped += 1;
            }
        });
    }

    fn on_enter(&self, id: &Id, ctx: LayerContext<'_, S>) {
        self.make_current(id, &ctx);
        // Without a counting allocator: one relaxed load.
        if counting_alloc::installed() {
            self.count_enter(id);
        }
    }

    fn on_exit(&self, id: &Id, ctx: LayerContext<'_, S>) {
        let counted = if counting_alloc::installed() {
            self.count_exit(id)
        } else {
            AllocCounts::default()
        };
        let stretch = self.leave_current(id);
        self.stretch_exit(id, ctx, stretch, counted);
    }

    fn on_close(&self, id: Id, ctx: LayerContext<'_, S>) {
        if counting_alloc::installed() {
            self.forget_entered(&id);
        }
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(mut f) = span.extensions_mut().remove::<SpanFrame>() else {
            return;
        };
        if !f.doc.is_empty() || f.n_follows > 0 || f.events_dropped > 0 {
            let mut doc = std::mem::take(&mut f.doc);
            if doc.is_empty() {
                open(&mut doc);
            }
            if f.events_at > 0 {
                end_document(&mut doc, f.events_at + EVENTS_LEN_AT);
            }
            // The layer's keys win over fields of the same names.
            if f.reserved {
                let fields_end = if f.events_at > 0 {
                    f.events_at
                } else {
                    doc.len()
                };
                let mut removed = 0;
                for (name, ours) in [
                    ("events", f.events_at > 0),
                    ("events_dropped", f.events_dropped > 0),
                    ("follows_from", f.n_follows > 0),
                ] {
                    if ours {
                        removed += remove(&mut doc, 4, fields_end - removed, name.as_bytes());
                    }
                }
            }
            if f.n_follows > 0 {
                element(&mut doc, kind::ARRAY, "follows_from");
                let at = open(&mut doc);
                doc.extend_from_slice(&f.follows);
                end_document(&mut doc, at);
            }
            if f.events_dropped > 0 {
                put_i64(
                    &mut doc,
                    "events_dropped",
                    i64::try_from(f.events_dropped).unwrap_or(i64::MAX),
                );
            }
            end_document(&mut doc, 0);
            debug_assert_eq!(formats::bson_check::check_document(&doc), Ok(()));
            f.frame.data_document(doc);
        }
        // Records the allocation counts summed by `count_exit` (if any) and the polls, then
        // the end.
        f.frame.polls = f.polls.as_ref().map(|p| *p.times.lock());
        f.frame.end();
    }
}
