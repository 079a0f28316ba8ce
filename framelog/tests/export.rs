//! `framelog export --format chrome` on real logs: nesting, async tracks, open frames, data,
//! filters, damage; the JSON checked the way a trace viewer reads it.

use std::collections::HashMap;
use std::process::{Command, Output};

use formats::{Category, FrameEnd, FrameKey, FrameStart, Parent, Record, ThreadInfo};
use framelog::{DataBatch, LogWriter, WriterOptions};
use serde_json::Value;

const T0: u64 = 1_700_000_000_000_000_000;

fn framelog(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_framelog"))
        .args(args)
        .output()
        .unwrap()
}

/// One event: start (id, label, context, time), start naming its parent (id, label,
/// context, time, parent), or end (id, time), on `thread`.
enum Ev {
    S(u32, &'static str, u32, u64),
    P(u32, &'static str, u32, u64, Parent),
    E(u32, u64),
}

/// Writes `events` of thread `thread` (one ThreadInfo first) as worker `w`.
fn write(w: &LogWriter, thread: u32, events: &[Ev]) {
    let worker = w.worker();
    let mut bytes = Vec::new();
    let name = format!("worker-{thread}");
    Record::ThreadInfo(ThreadInfo {
        worker,
        thread,
        timestamp: T0,
        name: &name,
    })
    .encode_to_vec(&mut bytes);
    for e in events {
        match *e {
            Ev::S(id, label, context, t) => Record::Start(FrameStart {
                parent: formats::Parent::NotRecorded,
                id,
                worker,
                timestamp: T0 + t,
                context,
                category: Category::HTTP,
                label,
            }),
            Ev::P(id, label, context, t, parent) => Record::Start(FrameStart {
                parent,
                id,
                worker,
                timestamp: T0 + t,
                context,
                category: Category::HTTP,
                label,
            }),
            Ev::E(id, t) => Record::End(FrameEnd {
                id,
                worker,
                timestamp: T0 + t,
            }),
        }
        .encode_to_vec(&mut bytes);
    }
    w.append_frames(&bytes).unwrap();
}

/// A log with: a request with nested db and template frames (thread 1); on thread 2 an async
/// task that outlives the request it started in; a job still open at the end; data on the
/// db frame.
fn sample_log() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open_with(
        dir.path(),
        WriterOptions {
            process_name: Some("orders-api".into()),
            ..Default::default()
        },
    )
    .unwrap();
    write(
        &w,
        1,
        &[
            Ev::S(1, "GET /orders", 1, 1_000),
            Ev::S(2, "db: select", 1, 1_000), // same start as its parent
            Ev::E(2, 2_500),
            Ev::S(3, "template: orders", 1, 3_000),
            Ev::E(3, 3_700),
            Ev::E(1, 4_000),
        ],
    );
    write(
        &w,
        2,
        &[
            Ev::S(10, "POST /pay", 10, 10_000),
            Ev::S(11, "spawned: notify", 10, 11_000), // outlives its parent
            Ev::S(12, "email: render", 10, 11_500),
            Ev::E(12, 12_000),
            Ev::E(10, 13_000),
            Ev::E(11, 20_000),
            Ev::S(20, "job: nightly", 20, 21_000), // never ends
            Ev::S(21, "job: step", 20, 21_100),
            Ev::E(21, 21_600),
        ],
    );
    let mut batch = DataBatch::new();
    let doc = bson::to_vec(&bson::doc! {"sql": "SELECT * FROM \"orders\"", "rows": 3}).unwrap();
    batch.push(FrameKey::new(w.worker(), 2), &doc);
    w.append_data(&batch).unwrap();
    dir
}

fn export_json(dir: &std::path::Path, extra: &[&str]) -> (Vec<Value>, String) {
    let out = dir.join("out.json");
    let mut args = vec!["export", dir.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = framelog(&args);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["displayTimeUnit"], "ns");
    (v["traceEvents"].as_array().unwrap().clone(), stderr)
}

/// The `B`/`E` pairs as `X`-like events (`ts`, `dur`, the begin's fields), in begin order;
/// checks that each `E` ends the innermost frame begun on its tid, in time order.
fn durations(events: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut open: HashMap<(u64, u64), Vec<usize>> = HashMap::new();
    for e in events {
        let tid = (
            e["pid"].as_u64().unwrap_or(0),
            e["tid"].as_u64().unwrap_or(0),
        );
        match e["ph"].as_str().unwrap() {
            "B" => {
                let mut x = e.clone();
                x["ph"] = "X".into();
                out.push(x);
                open.entry(tid).or_default().push(out.len() - 1);
            }
            "E" => {
                let i = open.get_mut(&tid).and_then(Vec::pop).expect("E without B");
                let b = &mut out[i];
                assert_eq!((&b["id"], &b["name"]), (&e["id"], &e["name"]));
                assert_eq!(b["args"], e["args"], "the end repeats the args");
                let dur = ns(&e["ts"]) - ns(&b["ts"]);
                b["dur"] = format!("{}.{:03}", dur / 1000, dur % 1000)
                    .parse::<serde_json::Number>()
                    .unwrap()
                    .into();
            }
            _ => {}
        }
    }
    assert!(open.values().all(Vec::is_empty), "B without E");
    out
}

fn ns(v: &Value) -> u64 {
    // µs with three decimals → ns, exactly.
    let s = v.to_string();
    let (int, frac) = s.split_once('.').unwrap_or((&s, "0"));
    int.parse::<u64>().unwrap() * 1000 + format!("{frac:0<3}")[..3].parse::<u64>().unwrap()
}

#[test]
fn chrome_export_nests_moves_overlaps_to_lanes_and_marks_open_frames() {
    let dir = sample_log();
    let (events, stderr) = export_json(dir.path(), &[]);
    assert!(
        stderr.contains(
            "exported 8 frames (1 on overlap lanes, 0 on async tracks, 1 still open at the end)"
        ),
        "{stderr}"
    );

    // Names: the process and both threads.
    let meta: Vec<&Value> = events.iter().filter(|e| e["ph"] == "M").collect();
    assert!(meta.iter().any(|m| {
        m["name"] == "process_name"
            && m["args"]["name"]
                .as_str()
                .unwrap()
                .starts_with("orders-api (pid ")
    }));
    for t in [1, 2] {
        assert!(meta.iter().any(|m| m["name"] == "thread_name"
            && m["tid"] == t
            && m["args"]["name"] == format!("worker-{t}")));
    }

    // B/E pairs: times exact to the ns, from the log's first record.
    let xs = durations(&events);
    let xs: Vec<&Value> = xs.iter().collect();
    let by_name: HashMap<&str, &Value> = xs
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), *e))
        .collect();
    let get = |n: &str| by_name.get(n).unwrap_or_else(|| panic!("{n} missing"));
    let t0 = 0; // the ThreadInfo at T0 is the first record
    assert_eq!(
        (
            ns(&get("GET /orders")["ts"]) - t0,
            ns(&get("GET /orders")["dur"])
        ),
        (1_000, 3_000)
    );
    assert_eq!(ns(&get("template: orders")["ts"]), 3_000);
    assert_eq!(ns(&get("template: orders")["dur"]), 700);

    // Per thread, in file order: parents before children, strictly nested.
    let mut by_thread: HashMap<(u64, u64), Vec<(u64, u64)>> = HashMap::new();
    for e in &xs {
        let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        let s = ns(&e["ts"]);
        by_thread
            .entry(key)
            .or_default()
            .push((s, s + ns(&e["dur"])));
    }
    for (t, frames) in &by_thread {
        let mut stack: Vec<(u64, u64)> = Vec::new();
        for &(s, e) in frames {
            while stack
                .last()
                .is_some_and(|&(_, pe)| pe <= s && !(pe == s && e == s))
            {
                stack.pop();
            }
            if let Some(&(ps, pe)) = stack.last() {
                assert!(
                    ps <= s && e <= pe,
                    "thread {t:?}: [{s},{e}] overlaps [{ps},{pe}] without nesting"
                );
            }
            stack.push((s, e));
        }
    }
    // The db frame starts with its parent and comes after it.
    let order: Vec<&str> = xs.iter().map(|e| e["name"].as_str().unwrap()).collect();
    let pos = |n: &str| order.iter().position(|x| *x == n).unwrap();
    assert!(pos("GET /orders") < pos("db: select"));

    // The task that outlived its parent is on the thread's overlap lane: its own tid,
    // named after the thread.
    let notify = get("spawned: notify");
    let lane_tid = notify["tid"].as_u64().unwrap();
    assert!(lane_tid >= u64::from(framelog::export::chrome::LANE_TID_BASE));
    assert!(meta.iter().any(|m| m["name"] == "thread_name"
        && m["tid"] == lane_tid
        && m["args"]["name"] == "worker-2 (overlap 1)"));
    assert_eq!((ns(&notify["ts"]), ns(&notify["dur"])), (11_000, 9_000));
    assert!(events.iter().all(|e| e["ph"] != "b" && e["ph"] != "e"));
    // Its child stays on the thread track, inside the frame that is still there.
    assert!(by_name.contains_key("email: render"));
    // Keys outside `args` (speedscope merges frames by name and args).
    for x in &xs {
        let args = x.get("args");
        assert!(args.is_none_or(|a| a.get("frame").is_none() && a.get("context").is_none()));
        assert!(x["id"].as_str().unwrap().contains(':') && x["context"].is_u64());
    }
    assert_eq!(get("POST /pay")["context"], 10);

    // The job still open: ended at the log's last time, marked.
    let job = get("job: nightly");
    assert_eq!(job["args"]["open"], true);
    assert_eq!(ns(&job["ts"]) + ns(&job["dur"]), 21_600);
    assert!(get("job: step")["args"].get("open").is_none());

    // Frame data in args, as written (no escaping beyond JSON's own).
    assert_eq!(
        get("db: select")["args"]["data"]["sql"],
        "SELECT * FROM \"orders\""
    );
    assert_eq!(get("db: select")["args"]["data"]["rows"], 3);
}

#[test]
fn filters_keep_one_context_a_label_or_a_time_window() {
    let dir = sample_log();
    let names = |events: &[Value]| -> Vec<String> {
        let mut v: Vec<String> = events
            .iter()
            .filter(|e| e["ph"] == "B" || e["ph"] == "b")
            .map(|e| e["name"].as_str().unwrap().to_owned())
            .collect();
        v.sort();
        v
    };
    let (e, _) = export_json(dir.path(), &["--context", "1"]);
    assert_eq!(names(&e), ["GET /orders", "db: select", "template: orders"]);
    let (e, _) = export_json(dir.path(), &["--label", "job*"]);
    assert_eq!(names(&e), ["job: nightly", "job: step"]);
    let (e, _) = export_json(dir.path(), &["--from", "11us", "--to", "12us", "--no-data"]);
    assert_eq!(names(&e), ["POST /pay", "email: render", "spawned: notify"]);
}

#[test]
fn damaged_bytes_mid_log_are_skipped_and_said_and_the_rest_exports() {
    let dir = sample_log();
    let seg = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "framelog"))
        .unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    // Thread 1's batch is the second (after the worker info's); zero 20 bytes inside it.
    let mid = bytes.len() / 3;
    bytes[mid..mid + 20].fill(0);
    std::fs::write(&seg, bytes).unwrap();
    let (events, stderr) = export_json(dir.path(), &[]);
    assert!(
        stderr.contains("skipped") && stderr.contains("damaged bytes"),
        "{stderr}"
    );
    assert!(
        events.iter().any(|e| e["name"] == "POST /pay"),
        "the later batch still exports"
    );
}

#[test]
fn a_missing_log_or_unwritable_output_is_one_clear_error() {
    let o = framelog(&["export", "/nonexistent/log"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("/nonexistent/log") && err.lines().count() == 1,
        "{err}"
    );
    let dir = sample_log();
    let o = framelog(&[
        "export",
        dir.path().to_str().unwrap(),
        "-o",
        "/nonexistent/dir/out.json",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("/nonexistent/dir/out.json"), "{err}");
    // A missing log leaves no broken output file behind, and an existing one untouched.
    let out_dir = tempfile::tempdir().unwrap();
    let out = out_dir.path().join("out.json");
    std::fs::write(&out, "earlier export").unwrap();
    let o = framelog(&["export", "/nonexistent/log", "-o", out.to_str().unwrap()]);
    assert!(!o.status.success());
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "earlier export");
    assert_eq!(std::fs::read_dir(out_dir.path()).unwrap().count(), 1);
    let o = framelog(&[
        "export",
        dir.path().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(v.is_object() || v.is_array());
    assert_eq!(std::fs::read_dir(out_dir.path()).unwrap().count(), 1);
    // An ordinary file others can read (to share it), not the temporary file's 0600.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&out).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o644, "{mode:o}");
}

/// Checks what speedscope's importer requires of an evented profile: frame indexes in range,
/// events in time order within [startValue, endValue], every close matching the innermost open.
fn check_speedscope(v: &Value) -> usize {
    assert_eq!(
        v["$schema"],
        "https://www.speedscope.app/file-format-schema.json"
    );
    let nframes = v["shared"]["frames"].as_array().unwrap().len();
    let mut opened = 0;
    for p in v["profiles"].as_array().unwrap() {
        assert_eq!(p["type"], "evented");
        assert_eq!(p["unit"], "nanoseconds");
        let (start, end) = (
            p["startValue"].as_u64().unwrap(),
            p["endValue"].as_u64().unwrap(),
        );
        let mut stack = Vec::new();
        let mut last = start;
        for e in p["events"].as_array().unwrap() {
            let (f, at) = (e["frame"].as_u64().unwrap(), e["at"].as_u64().unwrap());
            assert!((f as usize) < nframes);
            assert!(
                at >= last && at <= end,
                "{}: events out of order",
                p["name"]
            );
            last = at;
            match e["type"].as_str().unwrap() {
                "O" => {
                    stack.push(f);
                    opened += 1;
                }
                "C" => assert_eq!(
                    stack.pop(),
                    Some(f),
                    "{}: close without its open",
                    p["name"]
                ),
                t => panic!("event type {t}"),
            }
        }
        assert!(stack.is_empty(), "{}: frames left open", p["name"]);
    }
    opened
}

#[test]
fn speedscope_export_is_one_valid_evented_profile_per_thread_lane() {
    let dir = sample_log();
    let out = dir.path().join("out.speedscope.json");
    let o = framelog(&[
        "export",
        dir.path().to_str().unwrap(),
        "--format",
        "speedscope",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(check_speedscope(&v), 8, "every frame opened once");
    let names: Vec<&str> = v["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("orders-api (pid ") && n.ends_with("/ worker-1"))
    );
    assert!(
        names.iter().any(|n| n.ends_with("/ worker-2 (overlap 1)")),
        "{names:?}"
    );
    // Against speedscope's published schema when CI provides it (`.ci/run` fetches the
    // `speedscope` npm package and installs the `jsonschema` Python package).
    match std::env::var("SPEEDSCOPE_SCHEMA") {
        Ok(schema) => {
            let status = Command::new("python3")
                .args([
                    "-c",
                    "import json,sys,jsonschema; s=json.load(open(sys.argv[1])); \
                     jsonschema.validate(json.load(open(sys.argv[2])), s, \
                     cls=jsonschema.validators.validator_for(s))",
                    &schema,
                    out.to_str().unwrap(),
                ])
                .status()
                .unwrap();
            assert!(
                status.success(),
                "the file does not validate against {schema}"
            );
        }
        Err(_) => eprintln!("SPEEDSCOPE_SCHEMA not set: checked the importer's rules only"),
    }
}

/// A small OTLP/HTTP receiver on 127.0.0.1: decodes each `ExportTraceServiceRequest`;
/// answers the first request 503 (the exporter must retry), the rest 200.
fn otlp_receiver() -> (
    String,
    std::sync::Arc<
        std::sync::Mutex<
            Vec<opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest>,
        >,
    >,
) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let g = got.clone();
    std::thread::spawn(move || {
        let mut first = true;
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut conn = conn;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                assert!(line.starts_with("POST /v1/traces "), "{line}");
                let mut len = 0usize;
                loop {
                    let mut h = String::new();
                    reader.read_line(&mut h).unwrap();
                    if h == "\r\n" {
                        break;
                    }
                    let lower = h.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                    if lower.starts_with("content-type:") {
                        assert!(lower.contains("application/x-protobuf"), "{h}");
                    }
                }
                let mut body = vec![0u8; len];
                reader.read_exact(&mut body).unwrap();
                let status = if std::mem::take(&mut first) {
                    "503 Service Unavailable"
                } else {
                    let req = <opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest as prost::Message>::decode(&body[..]).unwrap();
                    g.lock().unwrap().push(req);
                    "200 OK"
                };
                write!(conn, "HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").unwrap();
            }
        }
    });
    (addr, got)
}

#[test]
fn otlp_export_sends_spans_with_parents_traces_attributes_and_resources() {
    use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
    let dir = sample_log();
    let (url, got) = otlp_receiver();
    let o = framelog(&["export", dir.path().to_str().unwrap(), "--otlp", &url]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("sent 8 spans"), "{stderr}");
    let requests = got.lock().unwrap();
    let mut spans = Vec::new();
    for r in requests.iter() {
        for rs in &r.resource_spans {
            let res = rs.resource.as_ref().unwrap();
            let name = res
                .attributes
                .iter()
                .find(|a| a.key == "service.name")
                .unwrap();
            assert!(
                matches!(&name.value.as_ref().unwrap().value, Some(V::StringValue(s)) if s == "orders-api")
            );
            assert!(res.attributes.iter().any(|a| a.key == "process.pid"));
            for ss in &rs.scope_spans {
                spans.extend(ss.spans.iter().cloned());
            }
        }
    }
    assert_eq!(spans.len(), 8, "every frame once, after the retried 503");
    let by: HashMap<&str, _> = spans.iter().map(|s| (s.name.as_str(), s)).collect();
    let (req, db) = (by["GET /orders"], by["db: select"]);
    assert_eq!(
        db.parent_span_id, req.span_id,
        "the db frame's parent is its request"
    );
    assert!(req.parent_span_id.is_empty(), "a root has no parent");
    assert_eq!(db.trace_id, req.trace_id, "one trace per context");
    assert_ne!(by["POST /pay"].trace_id, req.trace_id);
    assert_eq!(
        by["spawned: notify"].parent_span_id, by["POST /pay"].span_id,
        "async task's parent"
    );
    assert_eq!(db.end_time_unix_nano - db.start_time_unix_nano, 1_500);
    assert_eq!(db.start_time_unix_nano, T0 + 1_000);
    let attr = |s: &opentelemetry_proto::tonic::trace::v1::Span, k: &str| {
        s.attributes
            .iter()
            .find(|a| a.key == k)
            .and_then(|a| a.value.clone())
            .and_then(|v| v.value)
    };
    assert_eq!(
        attr(db, "sql"),
        Some(V::StringValue("SELECT * FROM \"orders\"".into()))
    );
    assert_eq!(attr(db, "rows"), Some(V::IntValue(3)));
    assert_eq!(
        attr(db, "framelog.category"),
        Some(V::StringValue("http".into()))
    );
    assert_eq!(
        attr(by["job: nightly"], "framelog.open"),
        Some(V::BoolValue(true))
    );
}

#[test]
fn otlp_export_to_nothing_listening_fails_with_one_line_after_retrying() {
    let dir = sample_log();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let o = framelog(&[
        "export",
        dir.path().to_str().unwrap(),
        "--otlp",
        &format!("http://127.0.0.1:{port}"),
        "--timeout",
        "2s",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("8 spans not sent, gave up after")
            && err.contains("(--timeout 2s)")
            && err.contains("Connection refused")
            && err.lines().count() == 1,
        "{err}"
    );
}

/// `framelog serve --otlp`: a program's frames reach the OTLP receiver while it is still
/// connected (forwarded as they arrive), and the server exits 0 on SIGTERM.
#[test]
fn serve_forwards_frames_to_otlp_as_they_arrive() {
    use formats::protocol::{self, Advertise, Kind, Reply};
    use std::io::{BufRead, Write};
    let dir = tempfile::tempdir().unwrap();
    let (url, got) = otlp_receiver();
    let mut serve = Command::new(env!("CARGO_BIN_EXE_framelog"))
        .args(["serve", "--listen", "127.0.0.1:0", "--dir"])
        .arg(dir.path().join("served"))
        .args(["--otlp", &url])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(serve.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();
    // A program, by hand: Advertise, answer StartSession, stream two frames.
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    let mut out = Vec::new();
    Advertise {
        protocol: protocol::PROTOCOL_VERSION,
        instance: 42,
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
    let mut records = Vec::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    for (id, label, t) in [(1, "GET /live", 0), (2, "db: live", 100)] {
        Record::Start(FrameStart {
            parent: formats::Parent::NotRecorded,
            id,
            worker: 0,
            timestamp: now + t,
            context: 1,
            category: Category::HTTP,
            label,
        })
        .encode_to_vec(&mut records);
    }
    Record::End(FrameEnd {
        id: 2,
        worker: 0,
        timestamp: now + 500,
    })
    .encode_to_vec(&mut records);
    Record::End(FrameEnd {
        id: 1,
        worker: 0,
        timestamp: now + 900,
    })
    .encode_to_vec(&mut records);
    protocol::encode_frames(&records, &mut out);
    s.write_all(&out).unwrap();
    // Forwarded while the program is still connected.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let names = || -> Vec<String> {
        got.lock()
            .unwrap()
            .iter()
            .flat_map(|r| r.resource_spans.iter())
            .flat_map(|rs| rs.scope_spans.iter())
            .flat_map(|ss| ss.spans.iter().map(|s| s.name.clone()))
            .collect()
    };
    while names().len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "spans not forwarded: {:?}",
            names()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut n = names();
    n.sort();
    assert_eq!(n, ["GET /live", "db: live"]);
    drop(s);
    Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status()
        .unwrap();
    let status = serve.wait().unwrap();
    assert!(status.success());
    assert_eq!(names().len(), 2, "nothing forwarded twice");
}

/// An async service's log, by hand: on thread 2 request `GET /user` (context 10) runs; its
/// child `load_user` runs on thread 1, where an unrelated `task: after order` (context 50)
/// encloses it in time; `load_user`'s child `db: select` runs inside it; `render` (a child of
/// the request) runs on thread 2 inside it; `task: step` is the task's child; `orphan` names
/// a parent (999) that is not in the log; `GET /next` (context 60) starts on thread 1 inside
/// the task too; `prefetch`, another child of the request, runs on thread 1, and while it
/// runs `audit`, a child of `render` (thread 2), starts there. With `recorded`, starts name their parents; without, they are type 0 (a log
/// written before parents were recorded).
fn async_log(recorded: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open_with(
        dir.path(),
        WriterOptions {
            process_name: Some("users-api".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let p = |parent: Parent| {
        if recorded {
            parent
        } else {
            Parent::NotRecorded
        }
    };
    write(
        &w,
        2,
        &[
            Ev::P(10, "GET /user", 10, 1_000, p(Parent::Root)),
            Ev::P(13, "render", 10, 6_000, p(Parent::Frame(10))),
            Ev::E(13, 7_000),
            Ev::E(10, 8_000),
            Ev::P(14, "orphan", 10, 8_500, p(Parent::Frame(999))),
            Ev::E(14, 9_000),
        ],
    );
    write(
        &w,
        1,
        &[
            Ev::P(50, "task: after order", 50, 0, p(Parent::Root)),
            Ev::P(11, "load_user", 10, 2_000, p(Parent::Frame(10))),
            Ev::P(12, "db: select", 10, 2_500, p(Parent::Frame(11))),
            Ev::E(12, 3_000),
            Ev::E(11, 5_000),
            Ev::P(15, "prefetch", 10, 5_500, p(Parent::Frame(10))),
            Ev::P(51, "task: step", 50, 6_000, p(Parent::Frame(50))),
            Ev::P(16, "audit", 10, 6_100, p(Parent::Frame(13))),
            Ev::E(16, 6_300),
            Ev::E(51, 6_500),
            Ev::P(60, "GET /next", 60, 7_000, p(Parent::Root)),
            Ev::E(60, 7_500),
            Ev::E(15, 6_800),
            Ev::E(50, 10_000),
        ],
    );
    dir
}

/// Each frame's real parent, by label (`None`: a root; `Some(None)`: not in the log).
fn real_parents() -> HashMap<&'static str, Option<&'static str>> {
    HashMap::from([
        ("GET /user", None),
        ("render", Some("GET /user")),
        ("orphan", Some("frame 999")),
        ("task: after order", None),
        ("load_user", Some("GET /user")),
        ("db: select", Some("load_user")),
        ("task: step", Some("task: after order")),
        ("GET /next", None),
        ("prefetch", Some("GET /user")),
        ("audit", Some("render")),
    ])
}

/// Each slice's enclosing slice, by name.
type Enclosing = HashMap<String, Option<String>>;

/// What a Chrome JSON viewer makes of `events` (Perfetto's import rules): per `(pid, tid)`,
/// `B`/`E` slices nested in time order; a flow start (`s`) binds to the innermost slice open
/// on its tid at its time, a flow end (`f`, `"bp":"e"`) to the innermost slice open on its
/// tid, events taken in time order and, at equal times, in file order. Returns each slice's
/// enclosing slice (by name) and the flows (from, to) by name; flow ends without a start are
/// left out, as Perfetto leaves them out.
fn as_a_viewer_reads_it(events: &[Value]) -> (Enclosing, Vec<(String, String)>) {
    let mut order: Vec<(u64, usize)> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e["ph"] != "M")
        .map(|(i, e)| (ns(&e["ts"]), i))
        .collect();
    order.sort();
    let mut stacks: HashMap<(u64, u64), Vec<String>> = HashMap::new();
    let mut enclosing = HashMap::new();
    let mut sources: HashMap<u64, String> = HashMap::new();
    let mut flows = Vec::new();
    for (_, i) in order {
        let e = &events[i];
        let tid = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        let stack = stacks.entry(tid).or_default();
        let name = e["name"].as_str().unwrap().to_owned();
        match e["ph"].as_str().unwrap() {
            "B" => {
                enclosing.insert(name.clone(), stack.last().cloned());
                stack.push(name);
            }
            "E" => assert_eq!(stack.pop(), Some(name)),
            "s" => {
                assert_eq!(e["name"], "parent");
                let top = stack.last().expect("a flow start inside no slice").clone();
                assert!(
                    sources.insert(e["id"].as_u64().unwrap(), top).is_none(),
                    "flow id twice"
                );
            }
            "f" => {
                assert_eq!(e["bp"], "e");
                let top = stack.last().expect("a flow end inside no slice").clone();
                if let Some(from) = sources.get(&e["id"].as_u64().unwrap()) {
                    flows.push((from.clone(), top));
                }
            }
            ph => panic!("event type {ph}"),
        }
    }
    flows.sort();
    (enclosing, flows)
}

#[test]
fn chrome_nests_only_real_parents_and_links_children_that_ran_elsewhere() {
    let dir = async_log(true);
    let (events, stderr) = export_json(dir.path(), &[]);
    assert!(stderr.contains("exported 10 frames"), "{stderr}");
    let (enclosing, flows) = as_a_viewer_reads_it(&events);
    let real = real_parents();
    for (name, parent) in &enclosing {
        if let Some(p) = parent {
            assert_eq!(
                real[name.as_str()],
                Some(p.as_str()),
                "{name} is drawn inside {p}, which is not its parent"
            );
        }
    }
    assert_eq!(enclosing.len(), 10, "every frame once");
    assert_eq!(enclosing["db: select"].as_deref(), Some("load_user"));
    assert_eq!(enclosing["render"].as_deref(), Some("GET /user"));
    assert_eq!(
        enclosing["task: step"].as_deref(),
        Some("task: after order")
    );
    for apart in ["load_user", "GET /next", "orphan", "prefetch", "audit"] {
        assert_eq!(
            enclosing[apart], None,
            "{apart} is drawn inside another frame"
        );
    }
    // Every child drawn apart from a parent in the log is linked to it, and only those.
    let want: Vec<(String, String)> = [
        ("GET /user", "load_user"),
        ("GET /user", "prefetch"),
        ("render", "audit"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(flows, want, "flows from a parent to each child drawn apart");
    // Flow events only where a flow is drawn: one start per parent with children apart, one
    // end per such child, every end with its start (the orphan, whose parent is not in the
    // log, has none; no frame starts a flow in case a child needs one).
    let ids = |ph: &str| -> Vec<u64> {
        let mut v: Vec<u64> = events
            .iter()
            .filter(|e| e["ph"] == ph)
            .map(|e| e["id"].as_u64().unwrap())
            .collect();
        v.sort_unstable();
        v
    };
    let (starts, mut ends) = (ids("s"), ids("f"));
    assert_eq!((starts.len(), ends.len()), (2, 3), "{starts:?} {ends:?}");
    ends.dedup();
    assert_eq!(starts, ends, "every flow start finishes, every end starts");
}

#[test]
fn chrome_export_of_a_log_without_parents_is_as_before_with_no_flows() {
    let dir = async_log(false);
    let (events, _) = export_json(dir.path(), &[]);
    assert!(events.iter().all(|e| e["ph"] != "s" && e["ph"] != "f"));
    let (enclosing, _) = as_a_viewer_reads_it(&events);
    // Nested by time on the thread, whatever the context (as before parents were recorded).
    assert_eq!(enclosing["load_user"].as_deref(), Some("task: after order"));
    assert_eq!(enclosing["GET /next"].as_deref(), Some("task: after order"));
    assert_eq!(enclosing["db: select"].as_deref(), Some("load_user"));
    assert_eq!(enclosing["audit"].as_deref(), Some("task: step"));
    // The summary says the parents are inferred.
    let mut sink = framelog::export::chrome::ChromeTrace::new(Vec::new()).unwrap();
    let summary = framelog::export::export(dir.path(), &Default::default(), &mut sink).unwrap();
    assert_eq!((summary.inferred_parents, summary.linked_children), (10, 0));
    let dir = async_log(true);
    let mut sink = framelog::export::chrome::ChromeTrace::new(Vec::new()).unwrap();
    let summary = framelog::export::export(dir.path(), &Default::default(), &mut sink).unwrap();
    assert_eq!((summary.inferred_parents, summary.linked_children), (0, 4));
    assert_eq!(
        (sink.flows(), sink.unlinked()),
        (3, 1),
        "load_user's, prefetch's and audit's flows; the orphan's parent is not in the log"
    );
}

#[test]
fn speedscope_stacks_are_chains_of_real_ancestors() {
    let dir = async_log(true);
    let out = dir.path().join("out.speedscope.json");
    let o = framelog(&[
        "export",
        dir.path().to_str().unwrap(),
        "--format",
        "speedscope",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(check_speedscope(&v), 10);
    let frames: Vec<&str> = v["shared"]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    let real = real_parents();
    let mut stacks = Vec::new();
    for p in v["profiles"].as_array().unwrap() {
        let mut stack: Vec<&str> = Vec::new();
        for e in p["events"].as_array().unwrap() {
            let name = frames[e["frame"].as_u64().unwrap() as usize];
            if e["type"] == "O" {
                if let Some(&outer) = stack.last() {
                    assert_eq!(real[name], Some(outer), "{name} under {outer}");
                }
                stack.push(name);
                stacks.push(stack.join(" > "));
            } else {
                stack.pop();
            }
        }
    }
    stacks.sort();
    assert_eq!(
        stacks,
        [
            "GET /next",
            "GET /user",
            "GET /user > render",
            "audit",
            "load_user",
            "load_user > db: select",
            "orphan",
            "prefetch",
            "task: after order",
            "task: after order > task: step",
        ]
    );
}

#[test]
fn otlp_parents_are_the_recorded_ones_in_the_same_trace() {
    let dir = async_log(true);
    let (url, got) = otlp_receiver();
    let o = framelog(&["export", dir.path().to_str().unwrap(), "--otlp", &url]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let spans: Vec<_> = got
        .lock()
        .unwrap()
        .iter()
        .flat_map(|r| r.resource_spans.iter())
        .flat_map(|rs| rs.scope_spans.iter())
        .flat_map(|ss| ss.spans.iter().cloned())
        .collect();
    let by: HashMap<&str, _> = spans.iter().map(|s| (s.name.as_str(), s)).collect();
    assert_eq!(
        spans.len(),
        11,
        "10 frames and a stand-in for the orphan's parent"
    );
    let stand_in = by["frame 0:999 (not in the export)"];
    for (name, parent) in real_parents() {
        let s = by[name];
        match parent {
            None => assert!(s.parent_span_id.is_empty(), "{name} is a root"),
            Some("frame 999") => assert_eq!(s.parent_span_id, stand_in.span_id),
            Some(p) => assert_eq!(s.parent_span_id, by[p].span_id, "{name}'s parent is {p}"),
        }
    }
    // The stand-in is in its child's trace, under the trace's root; traces follow contexts.
    assert_eq!(stand_in.trace_id, by["orphan"].trace_id);
    assert_eq!(stand_in.parent_span_id, by["GET /user"].span_id);
    for n in [
        "load_user",
        "db: select",
        "render",
        "orphan",
        "prefetch",
        "audit",
    ] {
        assert_eq!(by[n].trace_id, by["GET /user"].trace_id, "{n}");
    }
    assert_ne!(by["load_user"].trace_id, by["task: after order"].trace_id);
}

#[test]
fn otlp_a_parent_in_another_trace_is_a_link_not_a_parent() {
    // A writer never does this: frame 71 of context 70 names frame 10, the root of context
    // 10, as its parent. A parent span must be in the child's trace.
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open(dir.path()).unwrap();
    write(
        &w,
        1,
        &[
            Ev::P(10, "GET /a", 10, 0, Parent::Root),
            Ev::P(71, "stray", 70, 10, Parent::Frame(10)),
            Ev::E(71, 20),
            Ev::E(10, 100),
        ],
    );
    let (url, got) = otlp_receiver();
    let o = framelog(&["export", dir.path().to_str().unwrap(), "--otlp", &url]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let spans: Vec<_> = got
        .lock()
        .unwrap()
        .iter()
        .flat_map(|r| r.resource_spans.iter())
        .flat_map(|rs| rs.scope_spans.iter())
        .flat_map(|ss| ss.spans.iter().cloned())
        .collect();
    let by: HashMap<&str, _> = spans.iter().map(|s| (s.name.as_str(), s)).collect();
    let (a, stray) = (by["GET /a"], by["stray"]);
    let root = by["context 0:70 (root frame not in the export)"];
    assert_eq!(
        stray.parent_span_id, root.span_id,
        "under its own trace's root"
    );
    assert_eq!(stray.trace_id, root.trace_id);
    assert_ne!(stray.trace_id, a.trace_id);
    assert_eq!(stray.links.len(), 1);
    assert_eq!(
        (&stray.links[0].trace_id, &stray.links[0].span_id),
        (&a.trace_id, &a.span_id),
        "a link to the parent it named"
    );
}

/// An OTLP/HTTP receiver whose answer is set from outside: while `busy` is set it answers 503
/// "Server is at capacity" with `Retry-After: 1`; otherwise it decodes and keeps each request.
/// Counts every request it answered.
struct BusyReceiver {
    url: String,
    busy: std::sync::Arc<std::sync::atomic::AtomicBool>,
    spans: std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    refused: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Accept this many more requests, then turn busy (u64::MAX: no limit).
    accept_left: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

fn busy_receiver() -> BusyReceiver {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::{Arc, Mutex, atomic};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let r = BusyReceiver {
        url: format!("http://{}", listener.local_addr().unwrap()),
        busy: Arc::new(atomic::AtomicBool::new(false)),
        spans: Arc::new(Mutex::new(Vec::new())),
        refused: Arc::new(atomic::AtomicU64::new(0)),
        accept_left: Arc::new(atomic::AtomicU64::new(u64::MAX)),
    };
    let (busy, spans, refused, left) = (
        r.busy.clone(),
        r.spans.clone(),
        r.refused.clone(),
        r.accept_left.clone(),
    );
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let (busy, spans, refused, left) =
                (busy.clone(), spans.clone(), refused.clone(), left.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut conn = conn;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
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
                    if left.load(SeqCst) == 0 {
                        busy.store(true, SeqCst);
                    }
                    let answer = if busy.load(SeqCst) {
                        refused.fetch_add(1, SeqCst);
                        let msg = "Server is at capacity";
                        format!(
                            "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{msg}",
                            msg.len()
                        )
                    } else {
                        let _ = left.fetch_update(SeqCst, SeqCst, |n| Some(n.saturating_sub(1)));
                        let req = <opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest as prost::Message>::decode(&body[..]).unwrap();
                        let mut got = spans.lock().unwrap();
                        for rs in req.resource_spans {
                            for ss in rs.scope_spans {
                                got.extend(ss.spans.into_iter().map(|s| s.span_id));
                            }
                        }
                        "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_owned()
                    };
                    if conn.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    r
}

/// A log of `n` one-frame contexts on one thread.
fn many_frames(n: u32) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open(dir.path()).unwrap();
    let mut events = Vec::new();
    for i in 1..=n {
        let t = u64::from(i) * 1000;
        events.push(Ev::P(i, "job", i, t, Parent::Root));
        events.push(Ev::E(i, t + 500));
    }
    write(&w, 1, &events);
    dir
}

#[test]
fn otlp_export_waits_out_a_busy_collector_and_every_span_arrives_once() {
    use std::sync::atomic::Ordering::SeqCst;
    let dir = many_frames(5000);
    let r = busy_receiver();
    r.busy.store(true, SeqCst);
    let child = Command::new(env!("CARGO_BIN_EXE_framelog"))
        .args(["export", dir.path().to_str().unwrap(), "--otlp", &r.url])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Busy until it has been asked three times (Retry-After: 1 each), then it takes all.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while r.refused.load(SeqCst) < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the exporter stopped asking"
        );
        std::thread::yield_now();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    r.busy.store(false, SeqCst);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let spans = r.spans.lock().unwrap();
    let unique: std::collections::HashSet<_> = spans.iter().collect();
    assert_eq!(spans.len(), 5000, "{err}");
    assert_eq!(unique.len(), 5000, "every span once");
    assert!(
        !dir.path().read_dir().unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".progress")),
        "a finished export leaves no progress behind"
    );
}

#[test]
fn otlp_export_gives_up_at_its_timeout_with_the_collectors_message_and_resume_sends_the_rest() {
    use std::sync::atomic::Ordering::SeqCst;
    let dir = many_frames(9000);
    let r = busy_receiver();
    // Two batches, then busy for good.
    r.accept_left.store(2, SeqCst);
    let d = dir.path().to_str().unwrap();
    let o = framelog(&["export", d, "--otlp", &r.url, "--timeout", "2500ms"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("Server is at capacity"), "{err}");
    assert!(err.contains("HTTP 503"), "{err}");
    assert!(err.contains("4096 spans were delivered"), "{err}");
    assert!(err.contains("--resume"), "{err}");
    assert_eq!(r.spans.lock().unwrap().len(), 4096);

    // Killed while waiting on the busy collector: its progress is on disk.
    let child = Command::new(env!("CARGO_BIN_EXE_framelog"))
        .args(["export", d, "--otlp", &r.url, "--resume"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let before = r.refused.load(SeqCst);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while r.refused.load(SeqCst) == before {
        assert!(
            std::time::Instant::now() < deadline,
            "the resumed export never asked"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-9", &pid])
            .status()
            .unwrap()
            .success()
    );
    let mut child = child;
    child.wait().unwrap();

    r.busy.store(false, SeqCst);
    r.accept_left.store(u64::MAX, SeqCst);
    let o = framelog(&["export", d, "--otlp", &r.url, "--resume"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("resuming: 4096 spans"), "{err}");
    let spans = r.spans.lock().unwrap();
    let unique: std::collections::HashSet<_> = spans.iter().collect();
    assert_eq!(spans.len(), 9000, "only the rest was sent: {err}");
    assert_eq!(unique.len(), 9000);
}

/// Plot values JSON cannot hold (NaN gaps, infinities) are left out of the Chrome export and
/// said per series on stderr, never dropped silently; the Perfetto export keeps the
/// infinities (a double holds them) and says which gaps it left out.
#[test]
fn plot_values_a_format_cannot_hold_are_counted_per_series_not_dropped_silently() {
    use formats::{Plot, PlotMode, PlotUnit};
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open(dir.path()).unwrap();
    let (nan, inf) = (f64::NAN, f64::INFINITY);
    let series: [(&str, &[f64]); 3] = [
        ("temp", &[1.0, nan, inf, -inf, 2.0, nan]),
        ("load", &[3.0]),
        ("ghost", &[nan, inf]),
    ];
    let mut buf = Vec::new();
    let mut t = 1_700_000_000_000_000_000u64;
    for (name, values) in series {
        for &value in values {
            t += 1000;
            Record::Plot(Plot {
                worker: w.worker(),
                timestamp: t,
                value,
                mode: PlotMode::Value,
                unit: PlotUnit::COUNT,
                name,
            })
            .encode_to_vec(&mut buf);
        }
    }
    w.append_frames(&buf).unwrap();
    let worker = w.worker();
    drop(w);

    let (events, stderr) = export_json(dir.path(), &[]);
    let count = |name: &str| {
        events
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"] == name)
            .count()
    };
    assert_eq!((count("temp"), count("load"), count("ghost")), (2, 1, 0));
    assert!(
        stderr.contains(&format!(
            "plot \"temp\" (worker {worker}): left out 2 NaN (gaps), 1 +inf, 1 -inf values that Chrome JSON cannot hold"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "plot \"ghost\" (worker {worker}): left out 1 NaN (gaps), 1 +inf values"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("\"load\""), "{stderr}");

    let out = dir.path().join("out.pftrace");
    let o = framelog(&[
        "export",
        dir.path().to_str().unwrap(),
        "--format",
        "perfetto",
        "-o",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "plot \"temp\" (worker {worker}): left out 2 NaN (gaps) values that Perfetto cannot hold"
        )) && stderr.contains("plot \"ghost\""),
        "{stderr}"
    );
    let trace = perfetto_trace(&out);
    let values: Vec<f64> = trace
        .packet
        .iter()
        .filter_map(|p| p.track_event.as_ref()?.double_counter_value)
        .collect();
    assert_eq!(values, [1.0, inf, -inf, 2.0, 3.0, inf]);
}

/// A Perfetto trace file, decoded with the export's own message definitions.
fn perfetto_trace(path: &std::path::Path) -> PerfettoFile {
    use prost::Message;
    PerfettoFile::decode(std::fs::read(path).unwrap().as_slice()).unwrap()
}

/// Perfetto's `Trace`: its packets.
#[derive(Clone, PartialEq, prost::Message)]
struct PerfettoFile {
    #[prost(message, repeated, tag = "1")]
    packet: Vec<framelog::export::perfetto::proto::TracePacket>,
}

/// The Perfetto export links the same children as the Chrome export: one flow id per child
/// drawn apart from a parent in the log, listed by the parent's begin (`flow_ids`) and the
/// child's (`terminating_flow_ids`), each exactly once; the orphan, whose parent is not in
/// the log, has none.
#[test]
fn perfetto_export_links_each_child_drawn_apart_to_its_parent_once() {
    let dir = async_log(true);
    let out = dir.path().join("out.pftrace");
    let o = framelog(&[
        "export",
        dir.path().to_str().unwrap(),
        "--format",
        "perfetto",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let trace = perfetto_trace(&out);
    // Event names by (sequence, iid), to name each flow's two slices.
    let mut names: HashMap<(u32, u64), String> = HashMap::new();
    let (mut from, mut to): (HashMap<u64, String>, HashMap<u64, String>) = Default::default();
    for p in &trace.packet {
        let seq = p.trusted_packet_sequence_id.unwrap_or(0);
        if let Some(i) = &p.interned_data {
            for n in &i.event_names {
                names.insert((seq, n.iid.unwrap()), n.name.clone().unwrap());
            }
        }
        let Some(e) = &p.track_event else { continue };
        let name = || names[&(seq, e.name_iid.unwrap())].clone();
        for &f in &e.flow_ids {
            assert!(from.insert(f, name()).is_none(), "flow {f} starts twice");
        }
        for &f in &e.terminating_flow_ids {
            assert!(to.insert(f, name()).is_none(), "flow {f} ends twice");
        }
    }
    let mut flows: Vec<(String, String)> = from
        .iter()
        .map(|(f, parent)| {
            (
                parent.clone(),
                to.remove(f).expect("a flow without its end"),
            )
        })
        .collect();
    flows.sort();
    assert!(to.is_empty(), "flow ends without a start: {to:?}");
    let want: Vec<(String, String)> = [
        ("GET /user", "load_user"),
        ("GET /user", "prefetch"),
        ("render", "audit"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(flows, want);
}

#[test]
fn perfetto_exports_second_pass_writes_the_packets_its_first_pass_planned() {
    // Threads that start in later batches (their packet sequences are set up mid-trace) and
    // overlapping times across threads: the first pass counts packets without building them,
    // and the sorter's points are only safe if the second writes exactly those packets.
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open(dir.path()).unwrap();
    let mut id = 0;
    for batch in 0..4u64 {
        for thread in 1..=(2 + batch as u32) {
            let mut events = Vec::new();
            for i in 0..600u64 {
                id += 1;
                let t = batch * 1_000_000 + i * 1_000 + u64::from(thread) * 7;
                events.push(Ev::P(id, "job", id, t, Parent::Root));
                events.push(Ev::E(id, t + 500));
            }
            write(&w, thread, &events);
        }
    }
    drop(w);
    let (summary, trace) = framelog::export::perfetto::export_perfetto(
        dir.path(),
        &framelog::export::ExportOptions::default(),
        Vec::new(),
    )
    .unwrap();
    assert_eq!(summary.frames, u64::from(id));
    assert!(!trace.diverged(), "the second pass wrote other packets");
    assert!(trace.sort_points() > 0, "no sorter point placed");
}
