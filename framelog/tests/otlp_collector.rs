//! `framelog export --otlp` and `framelog serve --otlp` against a real OTLP/HTTP receiver on
//! 127.0.0.1 with each way a collector behaves: healthy, trace-only (404, 405, 415 on
//! `/v1/logs` and `/v1/metrics`), slow, 503 always, 413 above a body limit, accepting and
//! never answering, refusing connections. The receiver decodes what it takes with
//! `opentelemetry-proto`'s types; `serve` is a real child process stopped by a real SIGINT.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use formats::{Category, FrameEnd, FrameKey, FrameStart, Parent, Record, ThreadInfo};
use framelog::{DataBatch, LogWriter, WriterOptions};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::{NumberDataPoint, metric, number_data_point};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

const T0: u64 = 1_700_000_000_000_000_000;

/// How a receiver answers.
#[derive(Clone, Copy, Debug)]
enum Behaviour {
    /// 200 to everything.
    Healthy,
    /// This status on `/v1/logs` and `/v1/metrics` (a trace-only backend), 200 on traces.
    TracesOnly(u16),
    /// 200, after this long.
    Slow(Duration),
    /// 503 "overloaded", always.
    Unavailable,
    /// 413 for a body above this many bytes, 200 otherwise.
    BodyLimit(usize),
    /// Reads the request, never answers.
    Silent,
    /// 200 to everything, counting spans without keeping them.
    Counting,
}

/// What a receiver took (answered 200 for).
#[derive(Default)]
struct Taken {
    spans: Vec<Span>,
    /// Spans taken by a [`Behaviour::Counting`] receiver.
    counted: u64,
    logs: u64,
    points: Vec<NumberDataPoint>,
    /// (path, status) of every request answered.
    answers: Vec<(String, u16)>,
}

struct Receiver {
    url: String,
    taken: Arc<Mutex<Taken>>,
}

impl Receiver {
    fn spans(&self) -> usize {
        self.taken.lock().unwrap().spans.len()
    }
}

fn receiver(b: Behaviour) -> Receiver {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let taken = Arc::new(Mutex::new(Taken::default()));
    let t = taken.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let t = t.clone();
            std::thread::spawn(move || serve_connection(conn, b, &t));
        }
    });
    Receiver { url, taken }
}

/// Answers one connection's requests as `b` says until the peer closes it.
fn serve_connection(conn: TcpStream, b: Behaviour, taken: &Mutex<Taken>) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut conn = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h == "\r\n" {
                break;
            }
            if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0u8; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let signal_path = path == "/v1/logs" || path == "/v1/metrics";
        let (status, text) = match b {
            Behaviour::Silent => {
                // Holds the connection open, answering nothing.
                std::thread::sleep(Duration::from_secs(3600));
                return;
            }
            Behaviour::Unavailable => (503, "overloaded"),
            Behaviour::TracesOnly(code) if signal_path => (code, "not supported"),
            Behaviour::BodyLimit(n) if body.len() > n => (413, "request body too large"),
            Behaviour::Slow(d) => {
                std::thread::sleep(d);
                (200, "")
            }
            _ => (200, ""),
        };
        {
            let mut t = taken.lock().unwrap();
            if status == 200 {
                match path.as_str() {
                    "/v1/traces" => {
                        let r = ExportTraceServiceRequest::decode(&body[..]).unwrap();
                        for rs in r.resource_spans {
                            for ss in rs.scope_spans {
                                if matches!(b, Behaviour::Counting) {
                                    t.counted += ss.spans.len() as u64;
                                } else {
                                    t.spans.extend(ss.spans);
                                }
                            }
                        }
                    }
                    "/v1/logs" => {
                        let r = ExportLogsServiceRequest::decode(&body[..]).unwrap();
                        for rl in r.resource_logs {
                            for sl in rl.scope_logs {
                                t.logs += sl.log_records.len() as u64;
                            }
                        }
                    }
                    "/v1/metrics" => {
                        let r = ExportMetricsServiceRequest::decode(&body[..]).unwrap();
                        for rm in r.resource_metrics {
                            for sm in rm.scope_metrics {
                                for m in sm.metrics {
                                    if let Some(metric::Data::Gauge(g)) = m.data {
                                        t.points.extend(g.data_points);
                                    }
                                }
                            }
                        }
                    }
                    other => panic!("POST to {other}"),
                }
            }
            t.answers.push((path.clone(), status));
        }
        let reason = match status {
            200 => "OK",
            404 => "Not Found",
            405 => "Method Not Allowed",
            413 => "Payload Too Large",
            415 => "Unsupported Media Type",
            _ => "Service Unavailable",
        };
        let answer = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        );
        if conn.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// A URL nothing listens on.
fn refused_url() -> String {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("http://127.0.0.1:{port}")
}

fn framelog(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_framelog"))
        .args(args)
        .output()
        .unwrap()
}

/// `n` one-frame contexts of one thread, each with `data` when given, after `messages`
/// messages outside frames and, with `plots`, plot values (NaN, +inf, -inf among them).
fn records(worker: u8, first: u32, n: u32, messages: u32, plots: bool, at: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    Record::ThreadInfo(ThreadInfo {
        worker,
        thread: 1,
        timestamp: at,
        name: "main",
    })
    .encode_to_vec(&mut bytes);
    for i in 0..messages {
        let text = format!("starting up, step {i}");
        Record::Message(formats::Message {
            frame: 0,
            worker,
            timestamp: at + u64::from(i),
            context: 0,
            level: formats::Level::INFO,
            text: &text,
            fields: None,
        })
        .encode_to_vec(&mut bytes);
    }
    if plots {
        for (i, v) in [1.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 2.0]
            .into_iter()
            .enumerate()
        {
            Record::Plot(formats::Plot {
                worker,
                timestamp: at + 10 + i as u64,
                value: v,
                mode: formats::PlotMode::Value,
                unit: formats::PlotUnit::COUNT,
                name: "queue depth",
            })
            .encode_to_vec(&mut bytes);
        }
    }
    for id in first..first + n {
        let t = at + 1_000 + u64::from(id) * 1_000;
        Record::Start(FrameStart {
            parent: Parent::Root,
            id,
            worker,
            timestamp: t,
            context: id,
            category: Category::HTTP,
            label: "job",
        })
        .encode_to_vec(&mut bytes);
        Record::End(FrameEnd {
            id,
            worker,
            timestamp: t + 500,
        })
        .encode_to_vec(&mut bytes);
    }
    bytes
}

/// A log of `n` frames after `messages` messages outside frames and plot values; frame 1's
/// data holds `events` events and `big` bytes of text when asked.
fn log(n: u32, messages: u32, events: usize, big: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open_with(
        dir.path(),
        WriterOptions {
            process_name: Some("jobs".into()),
            ..Default::default()
        },
    )
    .unwrap();
    w.append_frames(&records(w.worker(), 1, n, messages, true, T0))
        .unwrap();
    let mut batch = DataBatch::new();
    let mut data = Vec::new();
    if events > 0 {
        let list: Vec<bson::Bson> = (0..events)
            .map(|i| {
                bson::Bson::Document(bson::doc! {"message": format!("event {i}"), "level": "INFO"})
            })
            .collect();
        data.push((1, bson::doc! {"events": list}));
    }
    if big > 0 {
        data.push((2, bson::doc! {"blob": "x".repeat(big)}));
    }
    for (id, d) in data {
        batch.push(FrameKey::new(w.worker(), id), &bson::to_vec(&d).unwrap());
    }
    if !batch.is_empty() {
        w.append_data(&batch).unwrap();
    }
    dir
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn unique_spans(r: &Receiver) -> (usize, usize) {
    let t = r.taken.lock().unwrap();
    let ids: std::collections::HashSet<_> = t.spans.iter().map(|s| s.span_id.clone()).collect();
    (t.spans.len(), ids.len())
}

// ---- export --otlp ----

#[test]
fn export_to_a_trace_only_backend_delivers_every_span_and_skips_logs_and_metrics_with_one_line_each()
 {
    for code in [404, 405, 415] {
        // The log starts with 3,000 messages outside frames: their batch goes first.
        let dir = log(6000, 3000, 0, 0);
        let r = receiver(Behaviour::TracesOnly(code));
        let d = dir.path().to_str().unwrap();
        let o = framelog(&["export", d, "--otlp", &r.url, "--metrics"]);
        let err = text(&o);
        assert!(o.status.success(), "HTTP {code}: {err}");
        assert_eq!(unique_spans(&r), (6000, 6000), "HTTP {code}: {err}");
        let lines = |what: &str| err.lines().filter(|l| l.contains(what)).count();
        assert_eq!(
            lines("/v1/logs does not take logs"),
            1,
            "HTTP {code}: {err}"
        );
        assert_eq!(
            lines("/v1/metrics does not take metrics"),
            1,
            "HTTP {code}: {err}"
        );
        assert!(err.contains(&format!("HTTP {code}")), "{err}");
        assert!(err.contains("sent 6000 spans"), "{err}");
        // Once switched off, a signal is not asked again.
        let asked = r
            .taken
            .lock()
            .unwrap()
            .answers
            .iter()
            .filter(|(p, _)| p == "/v1/logs")
            .count();
        assert_eq!(asked, 1, "{err}");
        // Nothing left to resume.
        let o = framelog(&["export", d, "--otlp", &r.url, "--resume"]);
        assert!(o.status.success(), "{}", text(&o));
    }
}

#[test]
fn export_signals_chooses_what_is_sent() {
    let dir = log(100, 10, 0, 0);
    let r = receiver(Behaviour::Healthy);
    let d = dir.path().to_str().unwrap();
    let o = framelog(&["export", d, "--otlp", &r.url, "--signals", "traces"]);
    assert!(o.status.success(), "{}", text(&o));
    {
        let t = r.taken.lock().unwrap();
        assert_eq!(t.spans.len(), 100);
        assert!(
            t.answers.iter().all(|(p, _)| p == "/v1/traces"),
            "{:?}",
            t.answers
        );
    }
    let o = framelog(&["export", d, "--otlp", &r.url, "--signals", "logs,metrics"]);
    assert!(o.status.success(), "{}", text(&o));
    let t = r.taken.lock().unwrap();
    assert_eq!(t.spans.len(), 100, "no spans the second time");
    assert_eq!(t.logs, 10);
    assert_eq!(t.points.len(), 5);
    let o = framelog(&["export", d, "--otlp", &r.url, "--signals", "traces,spans"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("unknown signal \"spans\""),
        "{}",
        text(&o)
    );
}

#[test]
fn export_splits_a_batch_the_collector_finds_too_large_and_caps_events_per_span() {
    // Spans are ~100 bytes: a batch of 2,048 is ~200 KB, above the 64 KB limit.
    let dir = log(9000, 0, 5000, 0);
    let r = receiver(Behaviour::BodyLimit(64 << 10));
    let o = framelog(&["export", dir.path().to_str().unwrap(), "--otlp", &r.url]);
    let err = text(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(unique_spans(&r), (9000, 9000), "every span once: {err}");
    let t = r.taken.lock().unwrap();
    assert!(
        t.answers.iter().any(|(_, s)| *s == 413),
        "the limit was hit: {:?}",
        t.answers.len()
    );
    let one = t
        .spans
        .iter()
        .find(|s| s.events.len() > 1)
        .expect("the frame with events");
    assert_eq!(one.events.len(), 1024, "events capped");
    assert_eq!(one.dropped_events_count, 5000 - 1024);
    assert!(
        one.attributes
            .iter()
            .any(|a| a.key == "framelog.events_dropped")
    );
    assert!(err.contains("3976 events"), "{err}");
}

#[test]
fn export_says_which_span_was_too_large_even_alone_and_exits_1() {
    let dir = log(3000, 0, 0, 200 << 10);
    let r = receiver(Behaviour::BodyLimit(100 << 10));
    let o = framelog(&[
        "export",
        dir.path().to_str().unwrap(),
        "--otlp",
        &r.url,
        "--batch-size",
        "500",
    ]);
    let err = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(unique_spans(&r), (2999, 2999), "all but the big one: {err}");
    assert!(
        err.contains("1 of 3000 spans not delivered: 1 too large even alone (HTTP 413: request body too large)"),
        "{err}"
    );
    // Batches of 500: no request the collector took held more.
    let t = r.taken.lock().unwrap();
    assert!(t.answers.iter().filter(|(_, s)| *s == 200).count() >= 6);
}

#[test]
fn export_sends_non_finite_plot_values_distinguishably() {
    let dir = log(10, 0, 0, 0);
    let r = receiver(Behaviour::Healthy);
    let o = framelog(&[
        "export",
        dir.path().to_str().unwrap(),
        "--otlp",
        &r.url,
        "--metrics",
    ]);
    let err = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("sent 5 plot values as gauge points (of them 1 NaN (gaps) as points flagged as having no recorded value, 2 infinite as ±inf)"),
        "{err}"
    );
    let t = r.taken.lock().unwrap();
    let mut points = t.points.clone();
    points.sort_by_key(|p| p.time_unix_nano);
    let values: Vec<(f64, u32)> = points
        .iter()
        .map(|p| match p.value {
            Some(number_data_point::Value::AsDouble(v)) => (v, p.flags),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(values.len(), 5);
    assert_eq!(values[0], (1.5, 0));
    assert!(
        values[1].0.is_nan() && values[1].1 == 1,
        "a gap: {values:?}"
    );
    assert_eq!(values[2], (f64::INFINITY, 0));
    assert_eq!(values[3], (f64::NEG_INFINITY, 0));
    assert_eq!(values[4], (2.0, 0));
}

#[test]
fn export_refuses_urls_it_cannot_send_to_before_reading_anything() {
    let dir = log(10, 0, 0, 0);
    let d = dir.path().to_str().unwrap();
    for (url, says) in [
        ("127.0.0.1:19010", "no scheme: write http://127.0.0.1:19010"),
        ("https://127.0.0.1:4318", "https is not supported"),
        ("http://", "--otlp http://"),
    ] {
        let o = framelog(&["export", d, "--otlp", url]);
        assert_eq!(o.status.code(), Some(1), "{url}");
        let err = text(&o);
        assert!(err.contains(says), "{url}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

// ---- serve --otlp ----

/// A `framelog serve --otlp URL` child and the address it listens on.
struct Serve {
    child: Child,
    addr: String,
    dir: tempfile::TempDir,
    stderr: Arc<Mutex<String>>,
}

fn serve(url: &str, extra: &[&str]) -> Serve {
    let dir = tempfile::tempdir().unwrap();
    // A measurement may run a release build (`FRAMELOG_BIN`).
    let bin =
        std::env::var("FRAMELOG_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_framelog").into());
    let mut child = Command::new(bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--dir"])
        .arg(dir.path().join("served"))
        .args(["--otlp", url])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_owned();
    let stderr = Arc::new(Mutex::new(String::new()));
    let (mut pipe, s) = (child.stderr.take().unwrap(), stderr.clone());
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            s.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    Serve {
        child,
        addr,
        dir,
        stderr,
    }
}

/// A program by hand: Advertise, accept StartSession, stream `n` frames (after `messages`
/// messages outside frames) in messages of 1,000; the connection, kept open.
fn stream(addr: &str, n: u32, messages: u32) -> TcpStream {
    stream_as(addr, 7, n, messages)
}

/// [`stream`] as program instance `instance`.
fn stream_as(addr: &str, instance: u64, n: u32, messages: u32) -> TcpStream {
    use formats::protocol::{self, Advertise, Kind, Reply};
    let mut s = TcpStream::connect(addr).unwrap();
    let mut out = Vec::new();
    Advertise {
        protocol: protocol::PROTOCOL_VERSION,
        instance,
        pid: 4242,
        suspended: false,
        records_locally: false,
        name: "forwarded-app".into(),
        token: String::new(),
        commands: vec![(protocol::START_SESSION, 2)],
    }
    .encode(&mut out);
    s.write_all(&out).unwrap();
    let mut payload = Vec::new();
    assert_eq!(
        framelog::remote::wire::read_message(&mut s, &mut payload, usize::MAX).unwrap(),
        Some(Kind::Command)
    );
    out.clear();
    Reply::ok(protocol::START_SESSION, payload[1]).encode(&mut out);
    s.write_all(&out).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut first = 1;
    let mut messages = messages;
    while first <= n {
        let count = 1000.min(n - first + 1);
        out.clear();
        let recs = records(0, first, count, std::mem::take(&mut messages), false, now);
        protocol::encode_frames(&recs, &mut out);
        s.write_all(&out).unwrap();
        first += count;
    }
    s
}

/// Polls `cond` until it holds, failing after `secs`.
fn wait_for(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Serve {
    /// A test that failed leaves no server running.
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Serve {
    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Frames the server has appended (its log, read now).
    fn frames_in_log(&self) -> u64 {
        let mut n = 0;
        if let Ok(mut r) = framelog::LogReader::open(self.dir.path().join("served")) {
            let _ = r.read_available(|_, rec| n += u64::from(matches!(rec, Record::End(_))));
        }
        n
    }

    /// SIGINT, then waits for the exit: its status and how long it took.
    fn interrupt(&mut self) -> (std::process::ExitStatus, Duration) {
        let t = Instant::now();
        let ok = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
        let deadline = t + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Its last words.
                wait_for(5, "stderr to close", || {
                    self.stderr().contains("framelog serve: stopped;")
                });
                return (status, t.elapsed());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "serve did not exit within 30 s of SIGINT: {}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The note it wrote into its log about forwarding: (level, text, fields).
    fn note_in_log(&self) -> (formats::Level, String, bson::Document) {
        let mut found = None;
        framelog::LogReader::open(self.dir.path().join("served"))
            .unwrap()
            .read_available(|_, rec| {
                if let Record::Message(m) = rec
                    && m.text.contains("forwarded")
                {
                    found = Some((
                        m.level,
                        m.text.to_owned(),
                        bson::Document::from_reader(m.fields.unwrap()).unwrap(),
                    ));
                }
            })
            .unwrap();
        found.expect("a forwarding note in the log")
    }
}

/// The numbers of the final line: (forwarded, made, not forwarded, in flight).
fn final_counts(err: &str) -> (u64, u64, u64, u64) {
    let line = err
        .lines()
        .find(|l| l.starts_with("framelog serve: forwarded "))
        .unwrap_or_else(|| panic!("no final line: {err}"));
    let num = |after: &str| -> Option<u64> {
        let i = line.find(after)? + after.len();
        line[i..]
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    if let Some(all) = num("forwarded all ") {
        return (all, all, 0, 0);
    }
    let sent = num("forwarded ").unwrap();
    let made = num(&format!("forwarded {sent} of ")).unwrap();
    let lost = num("not forwarded: ").unwrap();
    let in_flight = line
        .find(" in a request the collector had not answered")
        .map(|i| {
            line[..i]
                .rsplit(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .unwrap_or(0);
    (sent, made, lost, in_flight)
}

const FRAMES: u32 = 20_000;

/// Streams [`FRAMES`] frames (and `messages` messages) to a serve forwarding to `url`,
/// waits until they are in the log (and, when `delivered`, at the receiver too: `r`), then
/// SIGINTs it: its stderr, once it exited 0 within 10 s.
fn serve_and_stop(
    url: &str,
    messages: u32,
    extra: &[&str],
    r: Option<&Receiver>,
    said: Option<&str>,
) -> (Serve, String) {
    let mut s = serve(url, extra);
    let conn = stream(&s.addr, FRAMES, messages);
    wait_for(60, "every frame in the log", || {
        s.frames_in_log() == u64::from(FRAMES)
    });
    if let Some(r) = r {
        wait_for(60, "every span at the receiver", || {
            r.spans() >= FRAMES as usize
        });
    }
    if let Some(said) = said {
        wait_for(30, said, || s.stderr().contains(said));
    }
    let (status, took) = s.interrupt();
    drop(conn);
    let err = s.stderr();
    assert!(status.success(), "{err}");
    assert!(
        took < Duration::from_secs(10),
        "exit {took:?} after SIGINT: {err}"
    );
    (s, err)
}

#[test]
fn serve_forwards_every_span_to_a_healthy_collector_and_says_so_in_the_log() {
    let r = receiver(Behaviour::Healthy);
    let (s, err) = serve_and_stop(&r.url, 50, &[], Some(&r), None);
    assert_eq!(
        unique_spans(&r),
        (FRAMES as usize, FRAMES as usize),
        "{err}"
    );
    assert_eq!(
        r.taken.lock().unwrap().logs,
        50,
        "messages outside frames: {err}"
    );
    assert_eq!(final_counts(&err), (20_000, 20_000, 0, 0), "{err}");
    let (level, text, fields) = s.note_in_log();
    assert_eq!(level, formats::Level::INFO);
    assert!(
        text.contains("forwarded all 20000 spans and 50 log records"),
        "{text}"
    );
    assert_eq!(fields.get_i64("otlp.spans_not_forwarded"), Ok(0));
}

#[test]
fn serve_sends_records_outside_frames_as_they_arrive() {
    let r = receiver(Behaviour::Healthy);
    let mut s = serve(&r.url, &[]);
    let conn = stream(&s.addr, 1, 5);
    wait_for(30, "the log records before shutdown", || {
        r.taken.lock().unwrap().logs == 5
    });
    let (status, _) = s.interrupt();
    drop(conn);
    assert!(status.success());
}

#[test]
fn serve_to_a_trace_only_backend_forwards_every_span_and_switches_logs_off_with_one_line() {
    for code in [404, 405] {
        let r = receiver(Behaviour::TracesOnly(code));
        let (s, err) = serve_and_stop(&r.url, 30, &[], Some(&r), None);
        assert_eq!(unique_spans(&r), (20_000, 20_000), "{err}");
        assert_eq!(
            err.lines()
                .filter(|l| l.contains("/v1/logs does not take logs"))
                .count(),
            1,
            "{err}"
        );
        let (sent, made, _, _) = final_counts(&err);
        assert_eq!((sent, made), (20_000, 20_000), "{err}");
        assert!(
            err.contains("30 log records (30 not sent: the collector does not take logs"),
            "{err}"
        );
        let (level, _, fields) = s.note_in_log();
        assert_eq!(level, formats::Level::WARN);
        assert_eq!(fields.get_i64("otlp.log_records_not_forwarded"), Ok(30));
    }
}

#[test]
fn serve_splits_batches_a_collector_finds_too_large() {
    let r = receiver(Behaviour::BodyLimit(50 << 10));
    let (_s, err) = serve_and_stop(&r.url, 0, &[], Some(&r), None);
    assert_eq!(unique_spans(&r), (20_000, 20_000), "{err}");
    assert_eq!(final_counts(&err), (20_000, 20_000, 0, 0), "{err}");
}

/// A collector that cannot take what comes: serve still exits within 10 s of SIGINT, and
/// what it says was forwarded is what the receiver took; the rest is counted, in one line
/// and in the log.
fn lossy(b: Option<Behaviour>, extra: &[&str], said: Option<&str>) -> (String, u64, u64, u64, u64) {
    let (url, r) = match b {
        Some(b) => {
            let r = receiver(b);
            (r.url.clone(), Some(r))
        }
        None => (refused_url(), None),
    };
    let (s, err) = serve_and_stop(&url, 0, extra, None, said);
    let (sent, made, lost, in_flight) = final_counts(&err);
    assert_eq!(made, u64::from(FRAMES), "{err}");
    assert_eq!(sent + lost, made, "{err}");
    let got = r.as_ref().map_or(0, |r| r.spans() as u64);
    // The receiver may have taken a request whose answer serve did not wait for.
    assert!(
        got >= sent && got <= sent + in_flight,
        "receiver took {got}, serve says {sent} (+{in_flight} unanswered): {err}"
    );
    let (_, _, fields) = s.note_in_log();
    assert_eq!(fields.get_i64("otlp.spans_not_forwarded"), Ok(lost as i64));
    (err, sent, made, lost, in_flight)
}

#[test]
fn serve_against_a_slow_collector_stops_within_10_s_and_counts_what_it_did_not_forward() {
    let (err, _, _, lost, _) = lossy(Some(Behaviour::Slow(Duration::from_secs(2))), &[], None);
    assert!(lost > 0, "{err}");
}

#[test]
fn serve_against_an_unavailable_collector_counts_every_span() {
    let (err, sent, _, _, _) = lossy(
        Some(Behaviour::Unavailable),
        &[],
        Some("fails: HTTP 503: overloaded"),
    );
    assert_eq!(sent, 0, "{err}");
    assert!(err.contains("HTTP 503: overloaded"), "{err}");
    assert!(
        err.contains("fails: HTTP 503: overloaded"),
        "said while running: {err}"
    );
}

#[test]
fn serve_against_a_collector_that_never_answers_stops_within_10_s() {
    let (err, sent, _, _, _) = lossy(Some(Behaviour::Silent), &[], None);
    assert_eq!(sent, 0, "{err}");
}

#[test]
fn serve_with_nothing_listening_counts_every_span() {
    let (err, sent, _, _, _) = lossy(None, &[], Some("fails: "));
    assert_eq!(sent, 0, "{err}");
}

#[test]
fn serve_drops_past_its_queue_budget_and_says_so_while_running() {
    let (err, _, _, _, _) = lossy(
        Some(Behaviour::Slow(Duration::from_secs(1))),
        &["--otlp-queue", "64KiB"],
        Some("falls behind"),
    );
    assert!(
        err.contains("dropped past the 64 KiB queue budget"),
        "{err}"
    );
    assert!(err.contains("falls behind"), "said while running: {err}");
}

#[test]
fn serve_stops_at_once_on_a_second_sigint() {
    let r = receiver(Behaviour::Silent);
    let mut s = serve(&r.url, &[]);
    let conn = stream(&s.addr, 5000, 0);
    wait_for(60, "the frames in the log", || s.frames_in_log() == 5000);
    let pid = s.child.id().to_string();
    let kill = || {
        assert!(
            Command::new("kill")
                .args(["-INT", &pid])
                .status()
                .unwrap()
                .success()
        )
    };
    kill();
    // The first is being handled (forwarding waits on the silent collector) ...
    wait_for(10, "the first interrupt taken", || {
        // The server's drain is under way once the listener is closed.
        TcpStream::connect(&s.addr).is_err()
    });
    let t = Instant::now();
    kill();
    let status = loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            break st;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "no exit after a second SIGINT"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    drop(conn);
    assert_eq!(status.code(), Some(130));
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

/// Resident memory of process `pid`, bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap()
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kb * 1024
}

/// 10 M frames (`FRAMELOG_RSS_FRAMES` to change) through one `serve --otlp` to a healthy
/// collector: its resident memory grows by at most 20 MB from the first million on. Minutes
/// long in a debug build, so run on demand: `cargo test -p framelog --test otlp_collector
/// -- --ignored`.
#[test]
#[ignore = "minutes long: a measurement, run on demand"]
fn serve_forwarding_memory_does_not_grow_with_frames_forwarded() {
    let total: u32 = std::env::var("FRAMELOG_RSS_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let r = receiver(Behaviour::Counting);
    let mut s = serve(&r.url, &[]);
    let counted = || r.taken.lock().unwrap().counted;
    let step = 1_000_000u32.min(total);
    let mut conns = Vec::new();
    let mut sent = 0u32;
    let mut first_rss = None;
    let mut samples = Vec::new();
    while sent < total {
        // One program per million frames (ids of one program never repeat).
        let n = step.min(total - sent);
        conns.push(stream_as(&s.addr, 100 + u64::from(sent / step), n, 0));
        sent += n;
        let want = u64::from(sent);
        wait_for(1200, "the receiver to take every span", || {
            counted() >= want
        });
        let now = rss(s.child.id());
        samples.push((sent, now >> 20));
        first_rss.get_or_insert(now);
    }
    let last = samples.last().unwrap().1 << 20;
    let (status, _) = s.interrupt();
    assert!(status.success());
    let growth = last.saturating_sub(first_rss.unwrap());
    eprintln!(
        "RSS (frames, MiB): {samples:?}; growth after the first million: {} MiB",
        growth >> 20
    );
    assert!(growth <= 20 << 20, "grew {} MiB: {samples:?}", growth >> 20);
    assert_eq!(counted(), u64::from(total));
}
