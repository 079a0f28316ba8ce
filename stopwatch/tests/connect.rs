//! Connect mode against a real server on 127.0.0.1 (`framelog::remote::Server`, in this
//! process) and against raw sockets acting as old, new and malicious peers.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use formats::RecordType::{self, StartWithParent};
use formats::protocol::{
    self, Advertise, Command, Kind, Reply, SessionSettings, Status, encode_frames,
};
use formats::{Category, FrameKey, Parent, Record};
use framelog::LogReader;
use framelog::remote::wire::read_message;
use framelog::remote::{ProcessInfo, ProcessState, Server, ServerOptions};
use stopwatch::{BufferingMode, Recorder, Stopwatch};

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A server whose log lines are kept for assertions.
fn server(
    dir: &std::path::Path,
    tweak: impl FnOnce(&mut ServerOptions),
) -> (Server, Arc<Mutex<Vec<String>>>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let l = lines.clone();
    let mut opts = ServerOptions::recorder(dir);
    opts.log = Arc::new(move |line: &str| l.lock().unwrap().push(line.to_owned()));
    tweak(&mut opts);
    (Server::bind("127.0.0.1:0", opts).unwrap(), lines)
}

fn process(server: &Server) -> Option<ProcessInfo> {
    server.processes().into_iter().next()
}

/// (label, category, key) of every frame in the log, in order (none while the server has
/// not created the log yet: callers poll).
fn frames(dir: &std::path::Path) -> Vec<(String, Category, FrameKey)> {
    let mut v = Vec::new();
    let mut reader = match LogReader::open(dir) {
        Ok(r) => r,
        Err(framelog::Error::NotALog(_)) => return v,
        Err(e) => panic!("{e}"),
    };
    reader
        .read_available(|_, r| {
            if let Record::Start(s) = r {
                v.push((
                    s.label.to_owned(),
                    s.category,
                    FrameKey::new(s.worker, s.id),
                ));
            }
        })
        .unwrap();
    v
}

fn record(rec: &Recorder, label: &'static str, category: Category) {
    let f = rec.start_with(label, category);
    f.data(&serde_json::json!({"label": label}));
}

#[test]
fn new_program_new_server_v1_then_v2_settings_apply_while_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = server(dir.path(), |o| o.auto_start = None);
    let rec = Stopwatch::builder()
        .connect(server.local_addr().to_string())
        .build()
        .unwrap();
    wait_until("the program to advertise", || {
        process(&server).is_some_and(|p| p.state == ProcessState::Waiting)
    });
    let p = process(&server).unwrap();
    assert_eq!(
        (p.protocol, p.start_session_version),
        (1, protocol::LATEST_START_SESSION)
    );
    assert_eq!(p.pid, std::process::id());
    // Before a session: recorded and held, sent first when the session starts.
    record(&rec, "before", Category::HTTP);

    server
        .start_session(p.instance, SessionSettings::keep())
        .unwrap();
    wait_until("the session to stream", || rec.is_streaming());
    record(&rec, "v1", Category::HTTP);
    assert!(rec.flush(Duration::from_secs(10)));
    wait_until("v1 frames in the log", || {
        frames(dir.path()).iter().any(|f| f.0 == "v1")
    });

    // v2: frame data off, only database frames.
    let v2 = SessionSettings {
        frame_data: false,
        categories: vec![Category::DATABASE],
        mode: protocol::ModeSetting::Block,
        ..SessionSettings::keep()
    };
    wait_until("an idle control connection", || {
        server.start_session(p.instance, v2.clone()).is_ok()
    });
    wait_until("the block mode of the v2 session", || {
        rec.mode() == BufferingMode::Block
    });
    record(&rec, "v2-http", Category::HTTP);
    record(&rec, "v2-db", Category::DATABASE);
    assert!(rec.flush(Duration::from_secs(10)));
    wait_until("v2 frames", || {
        frames(dir.path()).iter().any(|f| f.0 == "v2-db")
    });

    // StopSession: what was recorded before it still arrives; nothing after it is recorded.
    record(&rec, "before-stop", Category::DATABASE);
    server.stop_session(p.instance).unwrap();
    wait_until("the session to stop", || !rec.is_streaming());
    record(&rec, "after-stop", Category::DATABASE);
    let stats = rec.shutdown();
    assert_eq!(stats.unsent, 0, "a stopped session loses nothing");

    let got = frames(dir.path());
    let labels: Vec<&str> = got.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(
        labels,
        ["before", "v1", "v2-db", "before-stop"],
        "what came before the session held and sent, the filter applied"
    );
    let mut store = framelog::DataStore::open(dir.path()).unwrap();
    assert!(
        store.get(got[0].2).unwrap().is_some(),
        "held frame data sent with its frame"
    );
    assert!(store.get(got[1].2).unwrap().is_some(), "v1 kept frame data");
    assert!(
        store.get(got[2].2).unwrap().is_none(),
        "v2 turned frame data off"
    );
}

#[test]
fn new_server_old_program_v1_works_and_a_v2_option_says_which_side_to_update() {
    let dir = tempfile::tempdir().unwrap();
    let (server, lines) = server(dir.path(), |o| o.auto_start = None);
    let rec = Stopwatch::builder()
        .connect(server.local_addr().to_string())
        .start_session_version(1)
        .build()
        .unwrap();
    wait_until("the program", || process(&server).is_some());
    let p = process(&server).unwrap();
    assert_eq!(p.start_session_version, 1);
    let v2 = SessionSettings {
        frame_data: false,
        ..SessionSettings::keep()
    };
    let err = server.start_session(p.instance, v2).unwrap_err();
    assert!(
        err.contains("supports StartSession up to v1; frame data off needs v2: update the program's stopwatch"),
        "{err}"
    );
    // The same session without the v2 option goes out as v1 and records.
    server
        .start_session(p.instance, SessionSettings::keep())
        .unwrap();
    wait_until("the session", || rec.is_streaming());
    record(&rec, "old-program", Category::JOB);
    drop(rec);
    wait_until("the frame", || frames(dir.path()).len() == 1);
    assert!(lines.lock().unwrap().iter().all(|l| !l.contains("closing")));
}

/// Plays the server side by hand: accepts one Advertise and returns the connection.
fn accept_advertise(listener: &TcpListener) -> (TcpStream, Advertise) {
    let (mut s, _) = listener.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut payload = Vec::new();
    assert_eq!(
        read_message(&mut s, &mut payload, usize::MAX).unwrap(),
        Some(Kind::Advertise)
    );
    let adv = Advertise::decode(&payload).unwrap();
    (s, adv)
}

/// Plays a server that starts a v1 session for the program `rec` and returns its control
/// connection once the program streams.
fn stream_started(listener: &TcpListener, rec: &Recorder) -> TcpStream {
    let (mut c, _) = accept_advertise(listener);
    let reply = send(
        &mut c,
        &Command::StartSession {
            version: 1,
            settings: SessionSettings::keep(),
        },
    );
    assert_eq!(reply.status, Status::Ok);
    wait_until("the stream", || rec.is_streaming());
    c
}

fn send(s: &mut TcpStream, cmd: &Command) -> Reply {
    let mut out = Vec::new();
    cmd.encode(&mut out);
    s.write_all(&out).unwrap();
    let mut payload = Vec::new();
    assert_eq!(
        read_message(s, &mut payload, usize::MAX).unwrap(),
        Some(Kind::Reply)
    );
    Reply::decode(&payload).unwrap()
}

#[test]
fn an_old_server_sending_v1_and_unknown_commands_get_clear_answers_from_a_new_program() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let rec = Stopwatch::builder()
        .connect(listener.local_addr().unwrap().to_string())
        .build()
        .unwrap();
    let (mut c, adv) = accept_advertise(&listener);
    assert_eq!(
        adv.command_version(protocol::START_SESSION),
        protocol::LATEST_START_SESSION
    );

    // A newer server's command this program does not know: an explicit error, no hang.
    let mut out = Vec::new();
    protocol::encode_header(Kind::Command, 2, &mut out);
    out.extend_from_slice(&[42, 1]);
    c.write_all(&out).unwrap();
    let mut payload = Vec::new();
    read_message(&mut c, &mut payload, usize::MAX).unwrap();
    let r = Reply::decode(&payload).unwrap();
    assert_eq!(r.status, Status::UnknownCommand);
    assert!(r.text.contains("unknown command code 42"), "{}", r.text);

    // A StartSession newer than any this program knows (from a future server): unsupported,
    // naming what it knows.
    let (mut c, _) = accept_advertise(&listener);
    let mut out = Vec::new();
    protocol::encode_header(Kind::Command, 2, &mut out);
    out.extend_from_slice(&[protocol::START_SESSION, protocol::LATEST_START_SESSION + 1]);
    c.write_all(&out).unwrap();
    read_message(&mut c, &mut payload, usize::MAX).unwrap();
    let r = Reply::decode(&payload).unwrap();
    assert_eq!(r.status, Status::UnsupportedVersion);
    assert!(
        r.text.contains(&format!(
            "StartSession v{} is not supported (this program knows up to v{})",
            protocol::LATEST_START_SESSION + 1,
            protocol::LATEST_START_SESSION
        )),
        "{}",
        r.text
    );

    // An old server: StartSession v1. The program answers Ok and streams on this connection.
    let (mut c, _) = accept_advertise(&listener);
    let reply = send(
        &mut c,
        &Command::StartSession {
            version: 1,
            settings: SessionSettings::keep(),
        },
    );
    assert_eq!(reply, Reply::ok(protocol::START_SESSION, 1));
    // ... and advertises again on a new connection.
    let (_next, _) = accept_advertise(&listener);
    wait_until("the stream", || rec.is_streaming());
    let outer = rec.start("over-v1");
    record(&rec, "nested-over-v1", Category::JOB);
    drop(outer);
    drop(rec);
    let mut starts = Vec::new();
    loop {
        match read_message(&mut c, &mut payload, usize::MAX).unwrap() {
            Some(Kind::Frames) => {
                assert_eq!(
                    record_types(&payload)[&StartWithParent],
                    0,
                    "v1: no parents"
                );
                for r in formats::RecordIter::new(&payload, 0) {
                    if let Record::Start(s) = r.unwrap().1 {
                        assert_eq!(s.parent, Parent::NotRecorded);
                        starts.push(s.label.to_owned());
                    }
                }
            }
            Some(Kind::Data) => {}
            Some(Kind::End) => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(starts, ["over-v1", "nested-over-v1"]);
}

/// How many records of each type `records` holds, by the type byte (every type counted,
/// zero included, for the two starts).
fn record_types(records: &[u8]) -> HashMap<RecordType, usize> {
    let mut n = HashMap::from([(RecordType::Start, 0), (StartWithParent, 0)]);
    let mut at = 0;
    while at < records.len() {
        let len = formats::record_len(&records[at..]).expect("whole records");
        let kind = RecordType::from_byte(records[at + 5]).expect("a known type");
        *n.entry(kind).or_default() += 1;
        at += len;
    }
    n
}

/// Plays a server for a session started with StartSession `version` (v3 and later:
/// acknowledged): the program records a small tree of frames (a context entered on another
/// thread included) and shuts down; returns the records it streamed, in order, and its
/// stats. Every Frames message is acknowledged as it arrives (from v3).
fn session_by_hand(version: u8) -> (Vec<u8>, Vec<(&'static str, FrameKey)>, stopwatch::Stats) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let rec = Stopwatch::builder()
        .connect(listener.local_addr().unwrap().to_string())
        .build()
        .unwrap();
    let (mut c, adv) = accept_advertise(&listener);
    assert_eq!(
        adv.command_version(protocol::START_SESSION),
        protocol::LATEST_START_SESSION
    );
    let reply = send(
        &mut c,
        &Command::StartSession {
            version,
            settings: SessionSettings::keep(),
        },
    );
    assert_eq!(reply, Reply::ok(protocol::START_SESSION, version));
    let reader = std::thread::spawn(move || {
        let (mut records, mut payload, mut count) = (Vec::new(), Vec::new(), 0u64);
        let mut out = Vec::new();
        loop {
            match read_message(&mut c, &mut payload, usize::MAX).unwrap() {
                Some(Kind::Frames) => {
                    records.extend_from_slice(&payload);
                    count += formats::RecordIter::new(&payload, 0)
                        .filter(|r| matches!(r, Ok((_, Record::Start(_) | Record::End(_)))))
                        .count() as u64;
                    if version >= protocol::ACKED_START_SESSION {
                        out.clear();
                        protocol::encode_ack(count, &mut out);
                        c.write_all(&out).unwrap();
                    }
                }
                Some(Kind::Data) => {}
                Some(Kind::End) => return records,
                other => panic!("unexpected {other:?}"),
            }
        }
    });
    let _next = accept_advertise(&listener);
    wait_until("the stream", || rec.is_streaming());
    let mut keys = Vec::new();
    {
        let root = rec.start("root");
        keys.push(("root", root.key().unwrap()));
        let a = rec.start("a");
        keys.push(("a", a.key().unwrap()));
        let ctx = a.context().unwrap();
        let on_pool = std::thread::scope(|s| {
            s.spawn(|| {
                let _in = ctx.enter();
                rec.start("on-pool").key().unwrap()
            })
            .join()
            .unwrap()
        });
        keys.push(("on-pool", on_pool));
        drop(a);
        keys.push(("b", rec.start("b").key().unwrap()));
    }
    let stats = rec.shutdown();
    (reader.join().unwrap(), keys, stats)
}

#[test]
fn a_session_before_v4_never_gets_a_start_with_parent_and_acks_stay_exact() {
    for version in [2, 3] {
        let (records, keys, stats) = session_by_hand(version);
        let types = record_types(&records);
        assert_eq!(types[&StartWithParent], 0, "v{version}: {types:?}");
        assert_eq!(
            types[&RecordType::Start],
            keys.len(),
            "v{version}: every start"
        );
        assert_eq!(types[&RecordType::End], keys.len(), "v{version}: every end");
        assert_eq!(
            (stats.unsent, stats.dropped),
            (0, 0),
            "v{version}: every record acknowledged: {stats:?}"
        );
        let mut got: Vec<(String, FrameKey, Parent)> = formats::RecordIter::new(&records, 0)
            .filter_map(|r| match r.unwrap().1 {
                Record::Start(s) => {
                    Some((s.label.to_owned(), FrameKey::new(s.worker, s.id), s.parent))
                }
                _ => None,
            })
            .collect();
        let mut want: Vec<(String, FrameKey, Parent)> = keys
            .iter()
            .map(|(l, k)| ((*l).to_owned(), *k, Parent::NotRecorded))
            .collect();
        got.sort_by_key(|s| s.1.id);
        want.sort_by_key(|s| s.1.id);
        assert_eq!(got, want, "v{version}: the same starts, without parents");
    }
}

#[test]
fn a_v4_session_gets_every_start_with_its_parent() {
    let (records, keys, stats) = session_by_hand(protocol::PARENTS_START_SESSION);
    let types = record_types(&records);
    assert_eq!(types[&StartWithParent], keys.len(), "{types:?}");
    assert_eq!(types[&RecordType::Start], 0, "{types:?}");
    assert_eq!((stats.unsent, stats.dropped), (0, 0), "{stats:?}");
    let key = |label: &str| keys.iter().find(|k| k.0 == label).unwrap().1;
    let parents: HashMap<FrameKey, Parent> = formats::RecordIter::new(&records, 0)
        .filter_map(|r| match r.unwrap().1 {
            Record::Start(s) => Some((FrameKey::new(s.worker, s.id), s.parent)),
            _ => None,
        })
        .collect();
    assert_eq!(parents[&key("root")], Parent::Root);
    assert_eq!(parents[&key("a")], Parent::Frame(key("root").id));
    assert_eq!(parents[&key("on-pool")], Parent::Frame(key("a").id));
    assert_eq!(parents[&key("b")], Parent::Frame(key("root").id));
}

#[test]
fn through_a_real_server_v4_keeps_parents_under_rewritten_keys_and_v3_infers_them() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = server(dir.path(), |_| {});
    let addr = server.local_addr().to_string();
    for (version, prefix) in [(protocol::LATEST_START_SESSION, "new"), (3, "old")] {
        let rec = Stopwatch::builder()
            .connect(addr.clone())
            .start_session_version(version)
            .build()
            .unwrap();
        wait_until("the session", || rec.is_streaming());
        let root = rec.start(format!("{prefix}/root"));
        let child = root.child(format!("{prefix}/child"));
        let ctx = child.context().unwrap();
        std::thread::scope(|s| {
            s.spawn(|| drop(ctx.child(format!("{prefix}/grandchild"))));
        });
        drop((child, root));
        let stats = rec.shutdown();
        assert_eq!((stats.unsent, stats.dropped), (0, 0), "{stats:?}");
    }
    let mut starts: HashMap<String, (FrameKey, Parent)> = HashMap::new();
    wait_until("every frame in the log", || {
        starts.clear();
        if let Ok(mut reader) = LogReader::open(dir.path()) {
            reader
                .read_available(|_, r| {
                    if let Record::Start(s) = r {
                        starts.insert(
                            s.label.to_owned(),
                            (FrameKey::new(s.worker, s.id), s.parent),
                        );
                    }
                })
                .unwrap();
        }
        starts.len() == 6
    });
    let (root, child, gc) = (
        starts["new/root"],
        starts["new/child"],
        starts["new/grandchild"],
    );
    assert_eq!(root.1, Parent::Root);
    assert_eq!(child.1, Parent::Frame(root.0.id), "{starts:?}");
    assert_eq!(gc.1, Parent::Frame(child.0.id), "{starts:?}");
    assert_eq!(
        (root.0.worker, gc.0.worker),
        (child.0.worker, child.0.worker)
    );
    for label in ["old/root", "old/child", "old/grandchild"] {
        assert_eq!(starts[label].1, Parent::NotRecorded, "v3: {label}");
    }
}

#[test]
fn a_wrong_token_is_refused_and_logged_a_right_one_records() {
    let dir = tempfile::tempdir().unwrap();
    let (server, lines) = server(dir.path(), |o| o.token = Some("s3cret".into()));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let e = errors.clone();
    let wrong = Stopwatch::builder()
        .connect(server.local_addr().to_string())
        .token("guess")
        .on_error(move |err| e.lock().unwrap().push(err.to_string()))
        .build()
        .unwrap();
    wait_until("the refusal in the server's log", || {
        lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("refused") && l.contains("wrong token"))
    });
    wait_until("the refusal reported by the program", || {
        errors
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("refused this program: wrong token"))
    });
    assert!(
        server.processes().is_empty(),
        "a refused program is not listed"
    );
    drop(wrong);
    let right = Stopwatch::builder()
        .connect(server.local_addr().to_string())
        .token("s3cret")
        .build()
        .unwrap();
    wait_until("the session", || right.is_streaming());
}

#[test]
fn listening_beyond_loopback_needs_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let err = Server::bind("0.0.0.0:0", ServerOptions::recorder(dir.path()))
        .err()
        .expect("refused without a token");
    assert!(err.to_string().contains("needs a token"), "{err}");
}

#[test]
fn malformed_peers_are_cut_off_with_one_line_and_others_keep_recording() {
    let dir = tempfile::tempdir().unwrap();
    let (server, lines) = server(dir.path(), |_| {});
    let addr = server.local_addr();
    let rec = Stopwatch::builder()
        .connect(addr.to_string())
        .build()
        .unwrap();
    wait_until("the good program's session", || rec.is_streaming());

    // 1: not our protocol at all.
    let mut bad = TcpStream::connect(addr).unwrap();
    bad.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    // 2: a header announcing 2 GiB.
    let mut huge = TcpStream::connect(addr).unwrap();
    huge.write_all(&[0xff, 0xff, 0xff, 0x7f, Kind::Frames as u8])
        .unwrap();
    // 3: a valid Advertise, then corrupt records on what the server thinks is its stream.
    let mut evil = TcpStream::connect(addr).unwrap();
    let mut out = Vec::new();
    Advertise {
        protocol: protocol::PROTOCOL_VERSION,
        instance: 7,
        pid: 1,
        suspended: false,
        records_locally: false,
        name: "evil".into(),
        token: String::new(),
        commands: vec![(protocol::START_SESSION, 1)],
    }
    .encode(&mut out);
    evil.write_all(&out).unwrap();
    let mut payload = Vec::new();
    assert_eq!(
        read_message(&mut evil, &mut payload, usize::MAX).unwrap(),
        Some(Kind::Command)
    );
    out.clear();
    Reply::ok(protocol::START_SESSION, 1).encode(&mut out);
    encode_frames(&[0xAB; 40], &mut out);
    evil.write_all(&out).unwrap();

    for s in [&mut bad, &mut huge, &mut evil] {
        // Each is closed by the server (read returns 0 or an error).
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut buf = [0u8; 64];
        while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
    }
    wait_until("three closing lines", || {
        lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("closing connection"))
            .count()
            >= 3
    });
    // The good program still records.
    record(&rec, "still-here", Category::JOB);
    drop(rec);
    wait_until("the good frame", || {
        frames(dir.path()).iter().any(|f| f.0 == "still-here")
    });
    let mut reader = LogReader::open(dir.path()).unwrap();
    reader.read_available(|_, _| {}).unwrap();
    assert_eq!(
        reader.damage_totals().0,
        0,
        "nothing a peer sent reached the log unchecked"
    );
}

#[test]
fn a_stalled_server_never_hangs_block_mode_producers() {
    // Accepts, starts a session, then never reads: the socket fills up.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let rec = Arc::new(
        Stopwatch::builder()
            .connect(listener.local_addr().unwrap().to_string())
            .mode(BufferingMode::Block)
            .buffer_kib(64)
            .build()
            .unwrap(),
    );
    let c = stream_started(&listener, &rec);
    let r = rec.clone();
    let t = Instant::now();
    let worker = std::thread::spawn(move || {
        for _ in 0..2_000_000 {
            drop(r.start("flood"));
        }
    });
    worker.join().unwrap();
    let stats = Arc::into_inner(rec).unwrap().shutdown();
    assert!(
        t.elapsed() < Duration::from_secs(60),
        "producers were released after the write timeout"
    );
    assert!(
        stats.unsent > 0,
        "what the stalled stream held is counted: {stats:?}"
    );
    drop(c);
}

/// The recorder the error callback below reaches for (held weakly: the test owns it).
static STREAMING: Mutex<Option<std::sync::Weak<Recorder>>> = Mutex::new(None);

#[test]
fn an_error_callback_that_asks_whether_the_stream_is_up_after_the_server_vanishes() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let e = errors.clone();
    let rec = Arc::new(
        Stopwatch::builder()
            .connect(listener.local_addr().unwrap().to_string())
            .on_error(move |err| {
                // Re-enters the recorder from the callback: the stream's state and stats.
                let rec = STREAMING.lock().unwrap().as_ref().and_then(|w| w.upgrade());
                if let Some(rec) = rec {
                    let _ = rec.is_streaming();
                    let _ = rec.stats();
                }
                e.lock().unwrap().push(err.to_string());
            })
            .build()
            .unwrap(),
    );
    *STREAMING.lock().unwrap() = Some(Arc::downgrade(&rec));
    let c = stream_started(&listener, &rec);
    // The server vanishes mid-session, without a word, while frames keep coming.
    drop(c);
    drop(listener);
    let r = rec.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        while r.is_streaming() {
            drop(r.start("after the server went"));
            std::thread::yield_now();
        }
        for _ in 0..1000 {
            drop(r.start("after the stream failed"));
        }
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the program noticed the server was gone");
    wait_until("the stream failure reported", || {
        !errors.lock().unwrap().is_empty()
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut rec = rec;
        let stats = loop {
            match Arc::try_unwrap(rec) {
                Ok(rec) => break rec.shutdown(),
                Err(again) => rec = again,
            }
            std::thread::yield_now();
        };
        let _ = tx.send(stats);
    });
    let stats = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("shut down with the callback re-entering");
    assert!(stats.unsent > 0, "{stats:?}");
    let errors = errors.lock().unwrap();
    assert!(
        errors.iter().any(|e| e.starts_with("remote session")),
        "{errors:?}"
    );
}

#[test]
fn the_longest_suspend_timeout_and_flush_interval_are_accepted_and_record() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = server(dir.path(), |_| {});
    let addr = server.local_addr().to_string();
    let by_spec = Stopwatch::builder()
        .connect(format!("{addr},suspend,timeout=18446744073709551615s"))
        .flush_interval(Duration::MAX);
    let by_builder = Stopwatch::builder()
        .connect(addr.clone())
        .suspend(Duration::MAX)
        .flush_interval(Duration::MAX);
    for (n, builder) in [by_spec, by_builder].into_iter().enumerate() {
        // The server starts a session for every program, which ends the suspension.
        let rec = builder.build().unwrap();
        for _ in 0..10 {
            drop(rec.start(if n == 0 { "by spec" } else { "by builder" }));
        }
        let stats = rec.shutdown();
        assert_eq!((stats.dropped, stats.unsent), (0, 0), "{stats:?}");
        assert!(!stats.writer_failed);
    }
    wait_until("every frame in the log", || {
        let f = frames(dir.path());
        f.iter().filter(|f| f.0 == "by spec").count() == 10
            && f.iter().filter(|f| f.0 == "by builder").count() == 10
    });
}

#[test]
fn frames_a_session_leaves_out_give_way_to_their_nearest_recorded_ancestor() {
    let dir = tempfile::tempdir().unwrap();
    let (server, lines) = server(dir.path(), |o| o.auto_start = None);
    let rec = Stopwatch::builder()
        .connect(server.local_addr().to_string())
        .build()
        .unwrap();
    wait_until("the program", || process(&server).is_some());
    let p = process(&server).unwrap();
    let only_db = SessionSettings {
        categories: vec![Category::DATABASE],
        ..SessionSettings::keep()
    };
    server.start_session(p.instance, only_db).unwrap();
    wait_until("the session", || rec.is_streaming());
    {
        // http (left out) > db1 > function (left out) > db2, and db3 in the left-out
        // function's context entered on another thread; a left-out child of db1 made by hand.
        let request = rec.start_with("request", Category::HTTP);
        assert!(!request.is_recording());
        let db1 = rec.start_with("db1", Category::DATABASE);
        let f = rec.start_with("function", Category::FUNCTION);
        assert!(!f.is_recording());
        drop(rec.start_with("db2", Category::DATABASE));
        let ctx = f.context().unwrap();
        assert_eq!(ctx.parent_id(), Some(db1.key().unwrap().id));
        std::thread::scope(|s| {
            s.spawn(|| {
                let _in = ctx.enter();
                drop(rec.start_with("db3", Category::DATABASE));
            });
        });
        let by_hand = db1.child_with("by hand", Category::FUNCTION);
        drop(by_hand.child_with("db4", Category::DATABASE));
        drop((by_hand, f, db1));
        // A database frame of its own context: a root.
        drop(request);
        drop(rec.start_with("db5", Category::DATABASE));
    }
    let stats = rec.shutdown();
    assert_eq!(
        (stats.unsent, stats.dropped),
        (0, 0),
        "{stats:?}; the server said: {:?}",
        lines.lock().unwrap()
    );
    let mut starts: HashMap<String, (FrameKey, Parent)> = HashMap::new();
    wait_until("every recorded frame in the log", || {
        starts.clear();
        if let Ok(mut reader) = LogReader::open(dir.path()) {
            reader
                .read_available(|_, r| {
                    if let Record::Start(s) = r {
                        starts.insert(
                            s.label.to_owned(),
                            (FrameKey::new(s.worker, s.id), s.parent),
                        );
                    }
                })
                .unwrap();
        }
        starts.len() == 5
    });
    let db1 = starts["db1"].0.id;
    assert_eq!(starts["db1"].1, Parent::Root, "its parent was left out");
    for label in ["db2", "db3", "db4"] {
        assert_eq!(starts[label].1, Parent::Frame(db1), "{label}: {starts:?}");
    }
    assert_eq!(starts["db5"].1, Parent::Root);
}

/// A program that writes a message inside a frame and a frame that allocates, streaming to
/// a server played by hand with StartSession `version`: the records it streamed.
fn instants_by_hand(version: u8) -> (Vec<u8>, FrameKey) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let rec = Stopwatch::builder()
        .connect(listener.local_addr().unwrap().to_string())
        .build()
        .unwrap();
    let (mut c, _) = accept_advertise(&listener);
    let reply = send(
        &mut c,
        &Command::StartSession {
            version,
            settings: SessionSettings::keep(),
        },
    );
    assert_eq!(reply, Reply::ok(protocol::START_SESSION, version));
    let reader = std::thread::spawn(move || {
        let (mut records, mut payload, mut count) = (Vec::new(), Vec::new(), 0u64);
        let mut out = Vec::new();
        loop {
            match read_message(&mut c, &mut payload, usize::MAX).unwrap() {
                Some(Kind::Frames) => {
                    records.extend_from_slice(&payload);
                    count += formats::RecordIter::new(&payload, 0)
                        .filter(|r| matches!(r, Ok((_, Record::Start(_) | Record::End(_)))))
                        .count() as u64;
                    out.clear();
                    protocol::encode_ack(count, &mut out);
                    c.write_all(&out).unwrap();
                }
                Some(Kind::Data) => {}
                Some(Kind::End) => return records,
                other => panic!("unexpected {other:?}"),
            }
        }
    });
    let _next = accept_advertise(&listener);
    wait_until("the stream", || rec.is_streaming());
    let key = {
        let f = rec.start("request");
        rec.plot("queue depth", 3.0);
        rec.message_at(formats::Level::WARN, "slow");
        f.key().unwrap()
    };
    let stats = rec.shutdown();
    assert_eq!((stats.unsent, stats.dropped), (0, 0), "{stats:?}");
    (reader.join().unwrap(), key)
}

#[test]
fn a_session_before_v5_gets_messages_without_their_frame_and_v5_with_it() {
    for version in [3, 4, protocol::MESSAGES_START_SESSION] {
        let (records, key) = instants_by_hand(version);
        let mut messages = Vec::new();
        let mut plots = 0;
        for r in formats::RecordIter::new(&records, 0) {
            match r.unwrap().1 {
                Record::Message(m) => messages.push((m.frame, m.context, m.text.to_owned())),
                Record::Plot(p) => plots += usize::from(p.name == "queue depth"),
                // This test binary has no counting allocator: none are recorded.
                Record::FrameAlloc(_) => panic!("v{version}: no frame allocations"),
                _ => {}
            }
        }
        assert_eq!(plots, 1, "v{version}: plots travel on every session");
        let want = if version >= protocol::MESSAGES_START_SESSION {
            (key.id, key.id, "slow".to_owned())
        } else {
            (0, 0, "slow".to_owned())
        };
        assert_eq!(messages, vec![want], "v{version}");
    }
}

#[test]
fn through_a_real_server_v5_messages_keep_their_frame_under_rewritten_keys_and_v4_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = server(dir.path(), |_| {});
    let addr = server.local_addr().to_string();
    for (version, prefix) in [(protocol::LATEST_START_SESSION, "new"), (4, "old")] {
        let rec = Stopwatch::builder()
            .connect(addr.clone())
            .start_session_version(version)
            .build()
            .unwrap();
        wait_until("the session", || rec.is_streaming());
        {
            let root = rec.start(format!("{prefix}/root"));
            let _child = root.child(format!("{prefix}/child"));
            rec.message(&format!("{prefix}: in child"));
            rec.plot(&format!("{prefix}/depth"), 7.0);
        }
        let stats = rec.shutdown();
        assert_eq!((stats.unsent, stats.dropped), (0, 0), "{stats:?}");
    }
    let mut starts: HashMap<String, (FrameKey, u32)> = HashMap::new();
    let mut messages: HashMap<String, (u8, u32, u32)> = HashMap::new();
    let mut plots: HashMap<String, f64> = HashMap::new();
    wait_until("every record in the log", || {
        starts.clear();
        messages.clear();
        plots.clear();
        if let Ok(mut reader) = LogReader::open(dir.path()) {
            reader
                .read_available(|_, r| match r {
                    Record::Start(s) => {
                        starts.insert(
                            s.label.to_owned(),
                            (FrameKey::new(s.worker, s.id), s.context),
                        );
                    }
                    Record::Message(m) => {
                        messages.insert(m.text.to_owned(), (m.worker, m.frame, m.context));
                    }
                    Record::Plot(p) => {
                        plots.insert(p.name.to_owned(), p.value);
                    }
                    _ => {}
                })
                .unwrap();
        }
        starts.len() == 4 && messages.len() == 2 && plots.len() == 2
    });
    let (child, ctx) = starts["new/child"];
    assert_eq!(
        messages["new: in child"],
        (child.worker, child.id, ctx),
        "v5: the message names its frame and context under the server's keys"
    );
    assert_eq!(messages["old: in child"].1, 0, "v4: no frame");
    assert_eq!(messages["old: in child"].2, 0, "v4: no context");
    assert_eq!((plots["new/depth"], plots["old/depth"]), (7.0, 7.0));
}

/// A future that blocks its thread 3 ms in its first poll (a slow poll at the default 1 ms
/// threshold), wakes itself, and is ready at its second.
struct BlocksOnce(bool);

impl std::future::Future for BlocksOnce {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        std::thread::sleep(Duration::from_millis(3));
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

#[test]
fn through_a_real_server_v6_polls_name_their_frame_under_rewritten_keys_and_v5_has_none() {
    use stopwatch::FutureExt;
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = server(dir.path(), |_| {});
    let addr = server.local_addr().to_string();
    for (version, prefix) in [(protocol::LATEST_START_SESSION, "new"), (5, "old")] {
        let rec = Stopwatch::builder()
            .connect(addr.clone())
            .start_session_version(version)
            .build()
            .unwrap();
        wait_until("the session", || rec.is_streaming());
        let mut fut =
            std::pin::pin!(BlocksOnce(false).in_frame(rec.start(format!("{prefix}/task"))));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        while fut.as_mut().poll(&mut cx).is_pending() {}
        let stats = rec.shutdown();
        assert_eq!((stats.unsent, stats.dropped), (0, 0), "{stats:?}");
    }
    let mut starts: HashMap<String, FrameKey> = HashMap::new();
    let mut polls: HashMap<FrameKey, formats::FramePolls> = HashMap::new();
    let mut slow: Vec<FrameKey> = Vec::new();
    let mut warnings: Vec<(FrameKey, String)> = Vec::new();
    wait_until("every record in the log", || {
        starts.clear();
        polls.clear();
        slow.clear();
        warnings.clear();
        if let Ok(mut reader) = LogReader::open(dir.path()) {
            reader
                .read_available(|_, r| match r {
                    Record::Start(s) => {
                        starts.insert(s.label.to_owned(), FrameKey::new(s.worker, s.id));
                    }
                    Record::FramePolls(p) => {
                        polls.insert(FrameKey::new(p.worker, p.id), p);
                    }
                    Record::SlowPoll(p) => slow.push(FrameKey::new(p.worker, p.id)),
                    Record::Message(m) => {
                        warnings.push((FrameKey::new(m.worker, m.frame), m.text.to_owned()))
                    }
                    _ => {}
                })
                .unwrap();
        }
        starts.len() == 2 && warnings.len() == 2
    });
    let new = starts["new/task"];
    let p = polls
        .get(&new)
        .expect("v6: the frame's polls, under its rewritten key");
    assert_eq!((p.polls, p.slow_polls), (2, 1), "{p:?}");
    assert!(
        p.queued_measured() && p.longest_poll_ns >= 3_000_000,
        "{p:?}"
    );
    assert_eq!(slow, vec![new], "v6: one slow poll, naming the frame");
    assert_eq!(polls.len(), 1, "v5: no frame polls: {polls:?}");
    // Both sessions carry the warning, in its frame (messages travel from v5).
    let old = starts["old/task"];
    for key in [new, old] {
        assert!(
            warnings
                .iter()
                .any(|(k, t)| *k == key && t.starts_with("slow poll: thread ")),
            "{key:?}: {warnings:?}"
        );
    }
}
