//! [`OtlpSender`]: frames as OpenTelemetry spans, sent to a collector over OTLP/HTTP
//! (protobuf `ExportTraceServiceRequest` to `/v1/traces`, the `opentelemetry-proto`
//! definitions, a blocking HTTP client).
//!
//! - Trace id per context (the log's start time, the worker and the context id), span id
//!   per frame (worker and id), parent span: the frame it started inside on its thread.
//! - Resource per worker: `service.name` = process name, `process.pid`, `framelog.worker`.
//! - Attributes: `framelog.category`, `framelog.frame`, `framelog.context`, `framelog.open`
//!   for a frame still running at the end, and the frame data's top-level fields
//!   (strings, integers, floats and booleans as themselves, anything else as JSON text).
//! - Spans go in batches of [`BATCH`]; a batch that fails (connection refused, 429, 5xx) is
//!   retried with back-off (0.1 s doubling, 6 tries) before the export gives up with an error.

use std::collections::HashMap;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, span};
use prost::Message;

use super::{Frame, FrameSink};

/// Spans per request.
pub const BATCH: usize = 2048;
const TRIES: u32 = 6;
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// Sends frames to an OTLP/HTTP endpoint.
pub struct OtlpSender {
    url: String,
    resources: HashMap<u8, Vec<KeyValue>>,
    /// Spans waiting, by worker.
    pending: HashMap<u8, Vec<Span>>,
    waiting: usize,
    /// Distinguishes this log's traces from other logs' (the first frame's wall time).
    salt: Option<u64>,
    /// Spans the collector accepted.
    pub sent: u64,
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

/// The span id of a frame (never all zero: ids start at 1).
pub fn span_id(worker: u8, id: u32) -> Vec<u8> {
    let mut s = vec![0u8, 0, 0, worker];
    s.extend_from_slice(&id.to_be_bytes());
    s
}

impl OtlpSender {
    /// A sender to `endpoint` (`http://HOST:4318`; `/v1/traces` is added unless given).
    pub fn new(endpoint: &str) -> Self {
        let e = endpoint.trim_end_matches('/');
        let url = if e.ends_with("/v1/traces") {
            e.to_owned()
        } else {
            format!("{e}/v1/traces")
        };
        Self {
            url,
            resources: HashMap::new(),
            pending: HashMap::new(),
            waiting: 0,
            salt: None,
            sent: 0,
        }
    }

    fn salt(&mut self, f: &Frame<'_>) -> u64 {
        *self.salt.get_or_insert(f.start_unix_ns - f.start_ns)
    }

    /// Sends the spans waiting now (a live forwarder calls it after each pass).
    pub fn flush(&mut self) -> std::io::Result<()> {
        if self.waiting == 0 {
            return Ok(());
        }
        let mut resource_spans = Vec::new();
        for (worker, spans) in self.pending.drain() {
            resource_spans.push(ResourceSpans {
                resource: Some(Resource {
                    attributes: self.resources.get(&worker).cloned().unwrap_or_else(|| {
                        vec![kv(
                            "framelog.worker",
                            any_value::Value::IntValue(i64::from(worker)),
                        )]
                    }),
                    ..Default::default()
                }),
                scope_spans: vec![ScopeSpans {
                    spans,
                    ..Default::default()
                }],
                ..Default::default()
            });
        }
        let body = ExportTraceServiceRequest { resource_spans }.encode_to_vec();
        let n = self.waiting;
        self.waiting = 0;
        let mut backoff = FIRST_BACKOFF;
        let mut last = String::new();
        for attempt in 1..=TRIES {
            match ureq::post(&self.url)
                .header("Content-Type", "application/x-protobuf")
                .send(&body[..])
            {
                Ok(_) => {
                    self.sent += n as u64;
                    return Ok(());
                }
                Err(ureq::Error::StatusCode(code)) if code != 429 && code < 500 => {
                    return Err(std::io::Error::other(format!(
                        "{} refused {n} spans: HTTP {code}",
                        self.url
                    )));
                }
                Err(e) => last = e.to_string(),
            }
            if attempt < TRIES {
                std::thread::sleep(backoff);
                backoff *= 2;
            }
        }
        Err(std::io::Error::other(format!(
            "{}: {n} spans not sent after {TRIES} tries: {last}",
            self.url
        )))
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
        let mut attributes = vec![
            kv("framelog.category", V::StringValue(f.category.to_string())),
            kv(
                "framelog.frame",
                V::StringValue(format!("{}:{}", f.key.worker, f.key.id)),
            ),
            kv("framelog.context", V::IntValue(i64::from(f.context))),
        ];
        if f.open {
            attributes.push(kv("framelog.open", V::BoolValue(true)));
        }
        if let Some(d) = &f.data {
            for (k, v) in d {
                attributes.push(kv(k, attr_of(v)));
            }
        }
        let span = Span {
            trace_id: trace_id(self.salt(f), f.key.worker, f.context),
            span_id: span_id(f.key.worker, f.key.id),
            parent_span_id: f
                .parent
                .map(|p| span_id(p.worker, p.id))
                .unwrap_or_default(),
            name: f.label.to_owned(),
            kind: span::SpanKind::Internal as i32,
            start_time_unix_nano: f.start_unix_ns,
            end_time_unix_nano: f.end_unix_ns,
            attributes,
            ..Default::default()
        };
        self.pending.entry(f.key.worker).or_default().push(span);
        self.waiting += 1;
        if self.waiting >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.flush()
    }
}
