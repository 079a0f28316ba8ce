//! The sending half of OTLP: endpoints and signals, encoded batches, and [`Poster`], which
//! posts a batch to its signal's path and keeps the books of what became of every item.
//!
//! - A signal the collector does not take (404, 405 or 415 on its path: a trace-only
//!   backend's answer on `/v1/logs` or `/v1/metrics`) is switched off, said in one line, and
//!   its items counted as not sent; the other signals go on.
//! - 413 Payload Too Large splits the batch in two and sends each half (again split while
//!   refused); an item refused alone is counted as too large.
//! - Retryable answers (no connection, 429, 502-504) are retried with back-off, honouring
//!   `Retry-After`, until the batch's retry time or the shared [`Deadline`] passes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::logs::v1::{ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::metrics::v1::{Metric, ResourceMetrics, ScopeMetrics, metric};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans};
use parking_lot::Mutex;
use prost::Message;

use super::{humanize, next_wait, partial_success, retry_after, retryable, server_message};

/// One kind of OTLP data, each sent to its own path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// Spans, to `/v1/traces`.
    Traces,
    /// Log records, to `/v1/logs`.
    Logs,
    /// Gauge points, to `/v1/metrics`.
    Metrics,
}

impl Signal {
    /// Every signal, in the order books list them.
    pub const ALL: [Signal; 3] = [Signal::Traces, Signal::Logs, Signal::Metrics];

    /// Its name in `--signals` and in its path.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Traces => "traces",
            Signal::Logs => "logs",
            Signal::Metrics => "metrics",
        }
    }

    /// What its items are called in messages.
    pub fn items(self) -> &'static str {
        match self {
            Signal::Traces => "spans",
            Signal::Logs => "log records",
            Signal::Metrics => "plot values",
        }
    }

    pub(super) fn index(self) -> usize {
        self as usize
    }
}

/// The signals chosen to be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signals([bool; 3]);

impl Default for Signals {
    /// Traces and logs (plot values as metrics only when asked).
    fn default() -> Self {
        Signals([true, true, false])
    }
}

impl Signals {
    /// `traces,logs,metrics` or any of them, comma-separated.
    pub fn parse(text: &str) -> Result<Signals, String> {
        let mut on = [false; 3];
        for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let s = Signal::ALL
                .into_iter()
                .find(|s| s.name().eq_ignore_ascii_case(word))
                .ok_or_else(|| {
                    format!("unknown signal {word:?}: the signals are traces, logs and metrics")
                })?;
            on[s.index()] = true;
        }
        if on == [false; 3] {
            return Err("no signal chosen: name traces, logs or metrics".into());
        }
        Ok(Signals(on))
    }

    /// Whether `s` is chosen.
    pub fn contains(self, s: Signal) -> bool {
        self.0[s.index()]
    }

    /// These and `s`.
    pub fn with(mut self, s: Signal) -> Signals {
        self.0[s.index()] = true;
        self
    }
}

/// An `--otlp` URL that cannot be sent to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--otlp {url}: {why}")]
pub struct BadEndpoint {
    /// The URL as given.
    pub url: String,
    /// What is wrong with it.
    pub why: String,
}

/// The base of an OTLP/HTTP endpoint (`http://HOST[:PORT][/PREFIX]`, without a trailing
/// `/v1/traces`), checked: the scheme must be `http` (no TLS stack is linked) and a host given.
pub fn endpoint_base(url: &str) -> Result<String, BadEndpoint> {
    let bad = |why: String| BadEndpoint {
        url: url.to_owned(),
        why,
    };
    let uri: ureq::http::Uri = url
        .parse()
        .map_err(|e| bad(format!("not a URL ({e}); write http://HOST:PORT")))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some(s) if s.eq_ignore_ascii_case("https") => {
            return Err(bad(
                "https is not supported (no TLS stack is linked): send to a local collector \
                 over http:// that forwards over TLS"
                    .into(),
            ));
        }
        Some(s) => {
            return Err(bad(format!(
                "scheme {s:?}: OTLP/HTTP URLs start with http://"
            )));
        }
        None => {
            return Err(bad(format!(
                "no scheme: write http://{} (OTLP/HTTP)",
                url.trim_start_matches('/')
            )));
        }
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(bad("no host: write http://HOST:PORT".into()));
    }
    let e = url.trim_end_matches('/');
    let e = e.strip_suffix("/v1/traces").unwrap_or(e);
    Ok(e.trim_end_matches('/').to_owned())
}

/// One request's worth of one signal, encoded (its protobuf `Export…ServiceRequest`).
#[derive(Debug, Clone)]
pub struct Batch {
    /// Its signal.
    pub signal: Signal,
    /// Spans, log records or points in it.
    pub items: u64,
    /// The encoded request.
    pub body: Vec<u8>,
}

/// Moves the items from the `first`-th on (in order, across groups) out of `groups` into new
/// groups made by `empty` (a copy of a group without its items).
fn split_items<G, I>(
    groups: &mut Vec<G>,
    mut first: usize,
    items: impl Fn(&mut G) -> &mut Vec<I>,
    empty: impl Fn(&G) -> G,
) -> Vec<G> {
    let mut tail = Vec::new();
    for g in groups.iter_mut() {
        let list = items(g);
        if first >= list.len() {
            first -= list.len();
            continue;
        }
        let moved = list.split_off(first);
        first = 0;
        let mut t = empty(g);
        *items(&mut t) = moved;
        tail.push(t);
    }
    groups.retain_mut(|g| !items(g).is_empty());
    tail
}

/// The two halves of a batch of two items or more (for a collector that found it too large).
pub fn split(b: &Batch) -> Option<(Batch, Batch)> {
    if b.items < 2 {
        return None;
    }
    let first = (b.items / 2) as usize;
    let (head, tail) = match b.signal {
        Signal::Traces => {
            let mut r = ExportTraceServiceRequest::decode(&b.body[..]).ok()?;
            // Flattened to one scope per resource first: the split point counts spans.
            let mut flat: Vec<ResourceSpans> = Vec::new();
            for rs in r.resource_spans.drain(..) {
                for ss in rs.scope_spans {
                    flat.push(ResourceSpans {
                        resource: rs.resource.clone(),
                        schema_url: rs.schema_url.clone(),
                        scope_spans: vec![ss],
                    });
                }
            }
            let tail = split_items(
                &mut flat,
                first,
                |g| &mut g.scope_spans[0].spans,
                |g| ResourceSpans {
                    resource: g.resource.clone(),
                    schema_url: g.schema_url.clone(),
                    scope_spans: vec![ScopeSpans {
                        scope: g.scope_spans[0].scope.clone(),
                        schema_url: g.scope_spans[0].schema_url.clone(),
                        spans: Vec::new(),
                    }],
                },
            );
            (
                ExportTraceServiceRequest {
                    resource_spans: flat,
                }
                .encode_to_vec(),
                ExportTraceServiceRequest {
                    resource_spans: tail,
                }
                .encode_to_vec(),
            )
        }
        Signal::Logs => {
            let r = ExportLogsServiceRequest::decode(&b.body[..]).ok()?;
            let mut flat: Vec<ResourceLogs> = Vec::new();
            for rl in r.resource_logs {
                for sl in rl.scope_logs {
                    flat.push(ResourceLogs {
                        resource: rl.resource.clone(),
                        schema_url: rl.schema_url.clone(),
                        scope_logs: vec![sl],
                    });
                }
            }
            let tail = split_items(
                &mut flat,
                first,
                |g| &mut g.scope_logs[0].log_records,
                |g| ResourceLogs {
                    resource: g.resource.clone(),
                    schema_url: g.schema_url.clone(),
                    scope_logs: vec![ScopeLogs {
                        scope: g.scope_logs[0].scope.clone(),
                        schema_url: g.scope_logs[0].schema_url.clone(),
                        log_records: Vec::new(),
                    }],
                },
            );
            (
                ExportLogsServiceRequest {
                    resource_logs: flat,
                }
                .encode_to_vec(),
                ExportLogsServiceRequest {
                    resource_logs: tail,
                }
                .encode_to_vec(),
            )
        }
        Signal::Metrics => {
            // One gauge per resource, scope and metric first: the split point counts points.
            let r = ExportMetricsServiceRequest::decode(&b.body[..]).ok()?;
            let mut flat: Vec<ResourceMetrics> = Vec::new();
            for rm in r.resource_metrics {
                for sm in rm.scope_metrics {
                    for m in sm.metrics {
                        flat.push(ResourceMetrics {
                            resource: rm.resource.clone(),
                            schema_url: rm.schema_url.clone(),
                            scope_metrics: vec![ScopeMetrics {
                                scope: sm.scope.clone(),
                                schema_url: sm.schema_url.clone(),
                                metrics: vec![m],
                            }],
                        });
                    }
                }
            }
            fn points(g: &mut ResourceMetrics) -> &mut Vec<super::NumberDataPoint> {
                static_points(&mut g.scope_metrics[0].metrics[0])
            }
            let tail = split_items(&mut flat, first, points, |g| {
                let m = &g.scope_metrics[0].metrics[0];
                ResourceMetrics {
                    resource: g.resource.clone(),
                    schema_url: g.schema_url.clone(),
                    scope_metrics: vec![ScopeMetrics {
                        scope: g.scope_metrics[0].scope.clone(),
                        schema_url: g.scope_metrics[0].schema_url.clone(),
                        metrics: vec![Metric {
                            name: m.name.clone(),
                            description: m.description.clone(),
                            unit: m.unit.clone(),
                            metadata: m.metadata.clone(),
                            data: Some(metric::Data::Gauge(Default::default())),
                        }],
                    }],
                }
            });
            (
                ExportMetricsServiceRequest {
                    resource_metrics: flat,
                }
                .encode_to_vec(),
                ExportMetricsServiceRequest {
                    resource_metrics: tail,
                }
                .encode_to_vec(),
            )
        }
    };
    let half = |body, items| Batch {
        signal: b.signal,
        items,
        body,
    };
    Some((half(head, first as u64), half(tail, b.items - first as u64)))
}

/// A gauge's points (the only metric data framelog sends); an empty list for other data.
fn static_points(m: &mut Metric) -> &mut Vec<super::NumberDataPoint> {
    if !matches!(m.data, Some(metric::Data::Gauge(_))) {
        m.data = Some(metric::Data::Gauge(Default::default()));
    }
    match &mut m.data {
        Some(metric::Data::Gauge(g)) => &mut g.data_points,
        _ => unreachable!("set to a gauge above"),
    }
}

/// What became of one signal's items. Everything made and not `sent` was not delivered:
/// the other counts say why, and what is left ([`Tally::unsent`]) was still waiting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Items put in batches.
    pub made: u64,
    /// Items the collector accepted.
    pub sent: u64,
    /// Items it answered it rejected (OTLP partial success).
    pub rejected: u64,
    /// Items not sent because the collector does not take the signal (404, 405, 415).
    pub off: u64,
    /// Items refused alone as too large (413).
    pub too_large: u64,
    /// Items of batches refused (an error answer, or retries that ran out).
    pub failed: u64,
    /// Items dropped because the queue was over its budget.
    pub dropped: u64,
    /// Items in a request the collector had not answered when sending stopped.
    pub in_flight: u64,
}

impl Tally {
    /// Items made and neither delivered nor accounted for otherwise: still waiting (queued,
    /// or the stop came before their turn).
    pub fn unsent(&self) -> u64 {
        self.made.saturating_sub(
            self.sent
                + self.rejected
                + self.off
                + self.too_large
                + self.failed
                + self.dropped
                + self.in_flight,
        )
    }

    /// Items made and not accepted by the collector.
    pub fn not_delivered(&self) -> u64 {
        self.made.saturating_sub(self.sent)
    }
}

/// The books of a sender, per signal, with the collector's messages.
#[derive(Debug, Clone, Default)]
pub struct Books {
    /// Per signal, in [`Signal::ALL`]'s order.
    pub tally: [Tally; 3],
    /// Per signal: why it was switched off (the collector does not take it), if it was.
    pub off: [Option<String>; 3],
    /// The collector's messages about rejected items (the first few).
    pub rejections: Vec<String>,
    /// Per signal: the first answer refusing an item alone as too large.
    pub too_large: [Option<String>; 3],
    /// The last failure (cleared by a batch delivered): what a live forwarder reports.
    pub problem: Option<String>,
    /// The answer or error that made the last batch fail, per signal.
    pub last_failure: [Option<String>; 3],
}

impl Books {
    /// The tally of `s`.
    pub fn of(&self, s: Signal) -> &Tally {
        &self.tally[s.index()]
    }

    fn of_mut(&mut self, s: Signal) -> &mut Tally {
        &mut self.tally[s.index()]
    }

    /// Why `s`'s items were not delivered, as "N dropped past the queue budget, M …"
    /// (empty when all were); `budget` names the queue's budget.
    pub fn why_not_delivered(&self, s: Signal, budget: &str) -> String {
        let t = self.of(s);
        let mut parts = Vec::new();
        if t.dropped > 0 {
            parts.push(format!(
                "{} dropped past the {budget} queue budget",
                t.dropped
            ));
        }
        if t.failed > 0 {
            let why = self.last_failure[s.index()]
                .as_deref()
                .map(|w| format!(": {w}"))
                .unwrap_or_default();
            parts.push(format!("{} refused or not answered{why}", t.failed));
        }
        if t.off > 0 {
            let why = self.off[s.index()].as_deref().unwrap_or("");
            parts.push(format!(
                "{} not sent: the collector does not take {} ({why})",
                t.off,
                s.name()
            ));
        }
        if t.too_large > 0 {
            let why = self.too_large[s.index()].as_deref().unwrap_or("");
            parts.push(format!("{} too large even alone ({why})", t.too_large));
        }
        if t.rejected > 0 {
            parts.push(format!("{} rejected by the collector", t.rejected));
        }
        if t.in_flight > 0 {
            parts.push(format!(
                "{} in a request the collector had not answered",
                t.in_flight
            ));
        }
        if t.unsent() > 0 {
            let last = self
                .problem
                .as_deref()
                .map(|p| format!("; the last answer: {p}"))
                .unwrap_or_default();
            parts.push(format!(
                "{} still waiting when sending stopped{last}",
                t.unsent()
            ));
        }
        parts.join(", ")
    }
}

/// A time past which sending stops (set at shutdown), shared by a forwarder's threads.
#[derive(Debug, Default)]
pub struct Deadline(Mutex<Option<Instant>>);

impl Deadline {
    /// Sending stops at `at`.
    pub fn set(&self, at: Instant) {
        *self.0.lock() = Some(at);
    }

    /// The time set, if any.
    pub fn get(&self) -> Option<Instant> {
        *self.0.lock()
    }

    /// Whether it is set and passed.
    pub fn passed(&self) -> bool {
        self.get().is_some_and(|d| Instant::now() >= d)
    }
}

/// Why a post did not deliver.
enum Refusal {
    /// The collector does not take this signal (404, 405, 415).
    NotTaken(String),
    /// 413 Payload Too Large.
    TooLarge(String),
    /// The deadline passed before the first try.
    Stopped,
    /// Anything else, with the line to show.
    Failed(String),
}

/// Longest one request may take (connect, send, answer).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// Longest wait between two tries (unless the collector's `Retry-After` asks for more).
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Rejection messages kept (the count is always complete).
const MAX_MESSAGES: usize = 8;

/// Posts batches to an OTLP/HTTP collector, keeping [`Books`].
pub struct Poster {
    base: String,
    agent: ureq::Agent,
    /// How long one batch may keep being retried.
    timeout: Duration,
    deadline: Arc<Deadline>,
    books: Arc<Mutex<Books>>,
    note: Arc<dyn Fn(&str) + Send + Sync>,
}

impl Poster {
    /// A poster to the endpoint whose base ([`endpoint_base`]) is `base`, retrying a batch
    /// for at most `timeout`, stopping at `deadline`; `note` is told (once each) when a
    /// signal is switched off or an item is too large.
    pub fn new(
        base: String,
        timeout: Duration,
        deadline: Arc<Deadline>,
        books: Arc<Mutex<Books>>,
        note: Arc<dyn Fn(&str) + Send + Sync>,
    ) -> Poster {
        Poster {
            base,
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(REQUEST_TIMEOUT))
                .build()
                .into(),
            timeout,
            deadline,
            books,
            note,
        }
    }

    /// The URL of `signal`.
    pub fn url(&self, signal: Signal) -> String {
        format!("{}/v1/{}", self.base, signal.name())
    }

    /// Sends `b`, split while the collector finds it too large. `Err` (counted as failed)
    /// when it was not delivered for another reason than a signal switched off or an item
    /// too large (those are counted, said once, and not errors).
    pub fn send(&self, b: Batch) -> std::io::Result<()> {
        let s = b.signal;
        if self.books.lock().off[s.index()].is_some() {
            self.books.lock().of_mut(s).off += b.items;
            return Ok(());
        }
        let url = self.url(s);
        let what = format!("{} {}", b.items, s.items());
        let answer = self.post(&url, &b, &what);
        let mut books = self.books.lock();
        match answer {
            Ok((content_type, body)) => {
                let rejected = match rejected_in(s, &content_type, &body) {
                    Some((n, msg)) => {
                        if !msg.is_empty() && books.rejections.len() < MAX_MESSAGES {
                            books.rejections.push(msg);
                        }
                        n.min(b.items)
                    }
                    None => 0,
                };
                let t = books.of_mut(s);
                t.rejected += rejected;
                t.sent += b.items - rejected;
                books.problem = None;
                Ok(())
            }
            Err(Refusal::NotTaken(why)) if s != Signal::Traces => {
                books.of_mut(s).off += b.items;
                if books.off[s.index()].is_none() {
                    books.off[s.index()] = Some(why.clone());
                    drop(books);
                    (self.note)(&format!(
                        "{url} does not take {} ({why}): no more {} are sent there, the other signals go on",
                        s.name(),
                        s.items()
                    ));
                }
                Ok(())
            }
            Err(Refusal::TooLarge(why)) => match split(&b) {
                Some((head, tail)) => {
                    drop(books);
                    // Both halves are tried, whatever becomes of the first.
                    let first = self.send(head);
                    let second = self.send(tail);
                    first.and(second)
                }
                None => {
                    books.of_mut(s).too_large += b.items;
                    if books.too_large[s.index()].is_none() {
                        books.too_large[s.index()] = Some(why.clone());
                        drop(books);
                        (self.note)(&format!(
                            "{url} refused one of the {} as too large even alone ({why}): it is not sent",
                            s.items()
                        ));
                    }
                    Ok(())
                }
            },
            Err(Refusal::Stopped) => Err(std::io::Error::other(format!(
                "{url}: {what} not sent: sending stopped"
            ))),
            // /v1/traces itself not taken: nothing can be delivered.
            Err(Refusal::NotTaken(why)) => Err(failed(
                &mut books,
                s,
                b.items,
                format!("{url} refused {what}: {why}"),
            )),
            Err(Refusal::Failed(why)) => Err(failed(&mut books, s, b.items, why)),
        }
    }

    /// Sleeps `d`, waking early (returning `false`) when the deadline passes.
    fn wait(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        loop {
            if self.deadline.passed() {
                return false;
            }
            let now = Instant::now();
            if now >= until {
                return true;
            }
            std::thread::sleep((until - now).min(Duration::from_millis(50)));
        }
    }

    /// Posts `body` (protobuf) to `url` until the collector answers 2xx, retrying what may
    /// pass later (429, 502-504, no connection) with back-off, its `Retry-After` honoured,
    /// for at most the timeout and never past the deadline. The answer's content type and
    /// body; `what` names what is lost in the error otherwise.
    fn post(&self, url: &str, b: &Batch, what: &str) -> Result<(String, Vec<u8>), Refusal> {
        let started = Instant::now();
        let mut backoff = FIRST_BACKOFF;
        let mut tries = 0u32;
        // Jitter from the clock: no two exporters retry in step.
        let mut seed = started.elapsed().as_nanos() as u64 ^ u64::from(std::process::id()) << 32;
        loop {
            let mut request_timeout = REQUEST_TIMEOUT;
            if let Some(d) = self.deadline.get() {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(if tries == 0 {
                        Refusal::Stopped
                    } else {
                        Refusal::Failed(format!("{url}: {what} not sent, sending stopped"))
                    });
                }
                request_timeout = request_timeout.min(left);
            }
            tries += 1;
            // In flight while the request waits for its answer (not between tries).
            self.books.lock().of_mut(b.signal).in_flight += b.items;
            let sent = self
                .agent
                .post(url)
                .config()
                .timeout_global(Some(request_timeout))
                .build()
                .header("Content-Type", "application/x-protobuf")
                .send(&b.body[..]);
            self.books.lock().of_mut(b.signal).in_flight -= b.items;
            let (why, wait_asked) = match sent {
                Ok(mut response) => {
                    let status = response.status().as_u16();
                    let header = |name: &str| {
                        response
                            .headers()
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("")
                            .to_owned()
                    };
                    let content_type = header("content-type").to_ascii_lowercase();
                    let asked = retry_after(&header("retry-after"));
                    let answer = response
                        .body_mut()
                        .with_config()
                        .limit(1 << 20)
                        .read_to_vec()
                        .unwrap_or_default();
                    if (200..300).contains(&status) {
                        return Ok((content_type, answer));
                    }
                    let message = server_message(&answer);
                    let why = if message.is_empty() {
                        format!("HTTP {status}")
                    } else {
                        format!("HTTP {status}: {message}")
                    };
                    match status {
                        404 | 405 | 415 => {
                            return Err(Refusal::NotTaken(why));
                        }
                        413 => return Err(Refusal::TooLarge(why)),
                        s if !retryable(s) => {
                            return Err(Refusal::Failed(format!("{url} refused {what}: {why}")));
                        }
                        _ => {}
                    }
                    (why, asked)
                }
                Err(e) => (e.to_string(), None),
            };
            self.books.lock().problem = Some(why.clone());
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let jitter = (seed >> 11) as f64 / (1u64 << 53) as f64;
            let remaining = self.timeout.saturating_sub(started.elapsed());
            match next_wait(backoff, wait_asked, jitter, remaining) {
                Some(d) if self.wait(d) => {}
                stopped_or_late => {
                    let when = if stopped_or_late.is_some() {
                        "sending stopped".to_owned()
                    } else {
                        format!(
                            "gave up after {tries} tries in {:.1} s (--timeout {})",
                            started.elapsed().as_secs_f64(),
                            humanize(self.timeout)
                        )
                    };
                    return Err(Refusal::Failed(format!(
                        "{url}: {what} not sent, {when}: {why}"
                    )));
                }
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}

/// Counts a batch of `items` of `s` as failed for `why`; the error to return.
fn failed(books: &mut Books, s: Signal, items: u64, why: String) -> std::io::Error {
    books.of_mut(s).failed += items;
    books.last_failure[s.index()] = Some(why.clone());
    books.problem = Some(why.clone());
    std::io::Error::other(why)
}

/// Rejected items and the message in a collector's 2xx answer to a batch of `s`.
fn rejected_in(s: Signal, content_type: &str, body: &[u8]) -> Option<(u64, String)> {
    match s {
        Signal::Traces => partial_success(content_type, body),
        Signal::Logs => ExportLogsServiceResponse::decode(body)
            .ok()?
            .partial_success
            .map(|p| {
                (
                    u64::try_from(p.rejected_log_records).unwrap_or(0),
                    p.error_message,
                )
            }),
        Signal::Metrics => ExportMetricsServiceResponse::decode(body)
            .ok()?
            .partial_success
            .map(|p| {
                (
                    u64::try_from(p.rejected_data_points).unwrap_or(0),
                    p.error_message,
                )
            }),
    }
    .filter(|(n, m)| *n > 0 || !m.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::trace::v1::Span;

    #[test]
    fn endpoints_need_http_and_a_host() {
        assert_eq!(
            endpoint_base("http://127.0.0.1:4318/").unwrap(),
            "http://127.0.0.1:4318"
        );
        assert_eq!(
            endpoint_base("http://c:4318/v1/traces").unwrap(),
            "http://c:4318"
        );
        assert_eq!(
            endpoint_base("http://c:4318/otlp").unwrap(),
            "http://c:4318/otlp"
        );
        let e = endpoint_base("127.0.0.1:19010").unwrap_err();
        assert!(e.to_string().contains("no scheme"), "{e}");
        assert!(e.to_string().contains("http://127.0.0.1:19010"), "{e}");
        let e = endpoint_base("https://c:4318").unwrap_err();
        assert!(e.to_string().contains("https is not supported"), "{e}");
        assert!(endpoint_base("ftp://c").is_err());
        assert!(endpoint_base("http://").is_err());
        assert!(endpoint_base("").is_err());
    }

    #[test]
    fn signals_parse_and_reject_unknown_names() {
        let s = Signals::parse("traces, logs").unwrap();
        assert!(s.contains(Signal::Traces) && s.contains(Signal::Logs));
        assert!(!s.contains(Signal::Metrics));
        assert!(Signals::parse("traces,spans").is_err());
        assert!(Signals::parse(",").is_err());
    }

    #[test]
    fn a_batch_splits_into_halves_that_hold_every_item_once() {
        let spans = |r: std::ops::Range<u8>| -> Vec<Span> {
            r.map(|i| Span {
                span_id: vec![i],
                ..Default::default()
            })
            .collect()
        };
        let req = ExportTraceServiceRequest {
            resource_spans: vec![
                ResourceSpans {
                    scope_spans: vec![ScopeSpans {
                        spans: spans(0..3),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                ResourceSpans {
                    scope_spans: vec![ScopeSpans {
                        spans: spans(3..5),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            ],
        };
        let b = Batch {
            signal: Signal::Traces,
            items: 5,
            body: req.encode_to_vec(),
        };
        let (a, c) = split(&b).unwrap();
        assert_eq!((a.items, c.items), (2, 3));
        let ids = |b: &Batch| -> Vec<u8> {
            ExportTraceServiceRequest::decode(&b.body[..])
                .unwrap()
                .resource_spans
                .iter()
                .flat_map(|r| r.scope_spans.iter())
                .flat_map(|s| s.spans.iter().map(|s| s.span_id[0]))
                .collect()
        };
        assert_eq!(ids(&a), [0, 1]);
        assert_eq!(ids(&c), [2, 3, 4]);
        let (one, _) = split(&a).unwrap();
        assert_eq!(one.items, 1);
        assert!(split(&one).is_none(), "one span cannot be split");
    }

    #[test]
    fn books_account_for_every_item() {
        let mut b = Books::default();
        *b.of_mut(Signal::Traces) = Tally {
            made: 100,
            sent: 50,
            dropped: 20,
            failed: 10,
            in_flight: 5,
            ..Default::default()
        };
        b.last_failure[0] = Some("HTTP 503".into());
        let t = b.of(Signal::Traces);
        assert_eq!(t.unsent(), 15);
        assert_eq!(t.not_delivered(), 50);
        let why = b.why_not_delivered(Signal::Traces, "32 MiB");
        assert_eq!(
            why,
            "20 dropped past the 32 MiB queue budget, 10 refused or not answered: HTTP 503, 5 in a request the collector had not answered, 15 still waiting when sending stopped"
        );
    }
}
