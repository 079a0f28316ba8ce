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
//!   the creation. Enter and exit are not used at all, so spans entered many times, exited out
//!   of order or on other threads cannot mis-nest.
//! - Label: the span's name (with `.with_target(true)`, `target::name`). Category: a
//!   `category` field (`"database"`, or a number), else the first matching target prefix of
//!   [`TracingLayer::category_for`] (defaults: `sqlx`, `diesel`, `postgres`, `redis` →
//!   database; `hyper`, `axum`, `tower_http`, `reqwest` → http; `tonic` → rpc), else the
//!   recorder's default.
//! - Context: the root span's frame. A span's parent is its explicit parent, else the current
//!   span (what `tracing` says); a span with no parent opens a context of its own.
//! - Data: the span's fields and later `record`ed values, and the events inside it (the first
//!   32, with level, target and fields; the rest counted as `events_dropped`), attached when
//!   the span closes. `follows_from` links are listed as `follows_from`.

use std::borrow::Cow;
use std::sync::Arc;

use formats::Category;
use serde_json::{Map, Value};
use tracing_core::field::{Field, Visit};
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context as LayerContext;
use tracing_subscriber::registry::LookupSpan;

use crate::frame::Detached;
use crate::inner::Inner;
use crate::recorder::{Recorder, with_global};

/// Events kept per span.
const MAX_EVENTS: usize = 32;

enum Target {
    Global,
    Recorder(Arc<Inner>),
}

/// A `tracing_subscriber::Layer` that records spans as frames.
pub struct TracingLayer {
    target: Target,
    with_target: bool,
    categories: Vec<(String, Category)>,
}

/// What the layer keeps in the extensions of a span it records.
struct SpanFrame {
    frame: Detached,
    /// Fields, events and links, once the span has any (most spans have none: no allocation).
    data: Option<Box<SpanData>>,
}

/// A span's frame data, gathered until it closes.
#[derive(Default)]
struct SpanData {
    fields: Map<String, Value>,
    events: Vec<Value>,
    events_dropped: u64,
}

impl SpanFrame {
    fn data(&mut self) -> &mut SpanData {
        self.data.get_or_insert_with(Box::default)
    }
}

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

    fn category(&self, target: &str, fields: Option<&Map<String, Value>>) -> Option<Category> {
        if let Some(v) = fields.and_then(|f| f.get("category")) {
            let parsed = match v {
                Value::String(s) => Category::parse(s),
                Value::Number(n) => n.as_u64().and_then(|n| u8::try_from(n).ok()).map(Category),
                _ => None,
            };
            if parsed.is_some() {
                return parsed;
            }
        }
        self.categories
            .iter()
            .find(|(p, _)| {
                target.starts_with(p.as_str())
                    && target[p.len()..].chars().next().is_none_or(|c| c == ':')
            })
            .map(|(_, c)| *c)
    }

    fn start(
        &self,
        label: Cow<'static, str>,
        category: Option<Category>,
        parent: Option<crate::Context>,
    ) -> Option<Detached> {
        let go = |inner: &Arc<Inner>| {
            let category = category.unwrap_or(inner.default_category);
            let start = || Detached::start(inner, &label, category);
            match &parent {
                Some(ctx) => ctx.run(start),
                None => start(),
            }
        };
        match &self.target {
            Target::Recorder(inner) => go(inner),
            Target::Global => with_global(go).flatten(),
        }
    }
}

/// Collects fields as JSON values.
struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_owned(), Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        // BSON has no u64: above i64::MAX it is kept as text.
        let v = i64::try_from(value).map_or_else(|_| Value::from(value.to_string()), Value::from);
        self.0.insert(field.name().to_owned(), v);
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), Value::from(value));
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
        let data = (!attrs.values().is_empty()).then(|| {
            let mut data = Box::<SpanData>::default();
            attrs.record(&mut Fields(&mut data.fields));
            data
        });
        let meta = attrs.metadata();
        let label: Cow<'static, str> = if self.with_target {
            Cow::Owned(format!("{}::{}", meta.target(), meta.name()))
        } else {
            Cow::Borrowed(meta.name())
        };
        let category = self.category(meta.target(), data.as_ref().map(|d| &d.fields));
        // The nearest ancestor that has a frame: `parent()` skips spans this layer's filter
        // disabled, but a span it saw without recording (none installed, not sampled) has none.
        let mut ancestor = span.parent();
        let mut parent = None;
        while let Some(p) = ancestor {
            parent = p.extensions().get::<SpanFrame>().map(|f| f.frame.context());
            if parent.is_some() {
                break;
            }
            ancestor = p.parent();
        }
        if let Some(frame) = self.start(label, category, parent) {
            span.extensions_mut().insert(SpanFrame { frame, data });
        }
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
        let mut fields = Map::new();
        values.record(&mut Fields(&mut fields));
        if let Some(f) = span.extensions_mut().get_mut::<SpanFrame>() {
            f.data().fields.extend(fields);
        }
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, ctx: LayerContext<'_, S>) {
        let Some(other) = ctx.span(follows) else {
            return;
        };
        let key = other
            .extensions()
            .get::<SpanFrame>()
            .map(|f| format!("{}:{}", f.frame.inner.worker, f.frame.id));
        if let (Some(key), Some(span)) = (key, ctx.span(id))
            && let Some(f) = span.extensions_mut().get_mut::<SpanFrame>()
        {
            let list = f
                .data()
                .fields
                .entry("follows_from")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(v) = list {
                v.push(Value::from(key));
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: LayerContext<'_, S>) {
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        let full = match span.extensions().get::<SpanFrame>() {
            None => return,
            Some(f) => f
                .data
                .as_ref()
                .is_some_and(|d| d.events.len() >= MAX_EVENTS),
        };
        // Formatted with no lock held (see `on_record`); counted once the lock is taken.
        let fields = (!full).then(|| {
            let mut fields = Map::new();
            event.record(&mut Fields(&mut fields));
            let meta = event.metadata();
            fields.insert("level".into(), Value::from(meta.level().as_str()));
            fields.insert("target".into(), Value::from(meta.target()));
            fields
        });
        let mut ext = span.extensions_mut();
        let Some(f) = ext.get_mut::<SpanFrame>() else {
            return;
        };
        let data = f.data();
        match fields {
            Some(fields) if data.events.len() < MAX_EVENTS => {
                data.events.push(Value::Object(fields));
            }
            _ => data.events_dropped += 1,
        }
    }

    fn on_close(&self, id: Id, ctx: LayerContext<'_, S>) {
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(SpanFrame { mut frame, data }) = span.extensions_mut().remove::<SpanFrame>()
        else {
            return;
        };
        if let Some(data) = data {
            let SpanData {
                mut fields,
                events,
                events_dropped,
            } = *data;
            if !events.is_empty() {
                fields.insert("events".into(), Value::Array(events));
            }
            if events_dropped > 0 {
                fields.insert("events_dropped".into(), Value::from(events_dropped));
            }
            if !fields.is_empty() {
                frame.data(&fields);
            }
        }
        frame.end();
    }
}
