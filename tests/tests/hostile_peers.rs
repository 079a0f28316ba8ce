//! `framelog serve` against hand-made hostile peers on 127.0.0.1, and a program against a
//! hostile server: nothing a peer does exhausts the server, forges its output, writes
//! unreadable bytes into the log, or keeps a program from exiting.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use formats::protocol::{
    self, Advertise, Command as Cmd, Kind, PROTOCOL_VERSION, RESUME, RefuseReason, Refused, Reply,
    SessionSettings, encode_end, encode_frames, encode_header,
};
use framelog::remote::wire::read_message;
use framelog_tests::{Serve, signal, wait_until};

/// An Advertise of a made-up program.
fn advertise(instance: u64, name: &str) -> Vec<u8> {
    let mut out = Vec::new();
    Advertise {
        protocol: PROTOCOL_VERSION,
        instance,
        pid: 1,
        suspended: false,
        records_locally: false,
        name: name.into(),
        token: String::new(),
        commands: vec![
            (protocol::START_SESSION, 3),
            (protocol::STOP_SESSION, 1),
            (RESUME, 1),
        ],
    }
    .encode(&mut out);
    out
}

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s
}

/// Reads one message; `None` when the server closed the connection.
fn read(s: &mut TcpStream) -> Option<(Kind, Vec<u8>)> {
    let mut payload = Vec::new();
    match read_message(s, &mut payload, usize::MAX) {
        Ok(Some(k)) => Some((k, payload)),
        _ => None,
    }
}

/// A whole session of a made-up program: Advertise, StartSession, `frames` frames, End.
/// Returns the stream connection, still open, after the last Ack.
fn fake_session(addr: &str, instance: u64, data: Option<&[u8]>) -> TcpStream {
    let mut s = connect(addr);
    s.write_all(&advertise(instance, "fake")).unwrap();
    let (kind, payload) = read(&mut s).expect("a command");
    assert_eq!(kind, Kind::Command);
    let cmd = Cmd::decode(&payload, 3).unwrap();
    let Cmd::StartSession { version, .. } = cmd else {
        panic!("expected StartSession, got {cmd:?}");
    };
    let mut out = Vec::new();
    Reply::ok(protocol::START_SESSION, version).encode(&mut out);
    let mut records = Vec::new();
    framelog_tests::encode_frames(&mut records, 0, 1, 1, "fake/frame");
    encode_frames(&records, &mut out);
    if let Some(doc) = data {
        let mut body = Vec::new();
        body.extend_from_slice(&1u32.to_le_bytes());
        body.push(0);
        body.extend_from_slice(&1u32.to_le_bytes());
        body.extend_from_slice(&(doc.len() as u32).to_le_bytes());
        body.extend_from_slice(doc);
        encode_header(Kind::Data, body.len(), &mut out);
        out.extend_from_slice(&body);
    }
    s.write_all(&out).unwrap();
    s
}

fn end(mut s: TcpStream) {
    let mut out = Vec::new();
    encode_end(0, &mut out);
    s.write_all(&out).unwrap();
    // The server acknowledges and closes; read until it does.
    while read(&mut s).is_some() {}
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

fn frames_in(dir: &std::path::Path) -> usize {
    let mut n = 0;
    if let Ok(mut r) = framelog::LogReader::open(dir) {
        let _ =
            r.read_available(|_, rec| n += usize::from(matches!(rec, formats::Record::Start(_))));
    }
    n
}

#[test]
fn a_long_running_server_records_any_number_of_programs_over_its_life() {
    // More programs than there are worker ids, one after another.
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start("127.0.0.1:0", dir.path(), &[]);
    for i in 0..300u64 {
        end(fake_session(&serve.addr, 1000 + i, None));
    }
    wait_until(60, "300 frames", || frames_in(dir.path()) == 300);
    let log = serve.log.clone();
    assert!(serve.terminate().success());
    wait_until(10, "the final line", || {
        log.lock().unwrap().iter().any(|l| l.contains("stopped;"))
    });
    let lines = log.lock().unwrap().clone();
    assert!(
        !lines.iter().any(|l| l.contains("worker ids are in use")),
        "{lines:?}"
    );
    assert!(
        lines
            .last()
            .is_some_and(|l| l.contains("300 frames from 300 programs")),
        "the final count comes after the drain: {:?}",
        lines.last()
    );
}

#[test]
fn claimed_lengths_before_advertise_cost_no_memory_and_close_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start("127.0.0.1:0", dir.path(), &[]);
    let pid = serve.child.id();
    let before = rss_kib(pid);
    // 100 peers each claim an 8 MiB Frames message (and a 4 KiB+1 Advertise) and send
    // nothing more.
    let mut peers = Vec::new();
    for i in 0..100u32 {
        let mut s = connect(&serve.addr);
        let mut h = Vec::new();
        let (kind, len) = if i % 2 == 0 {
            (Kind::Frames, 8 << 20)
        } else {
            (Kind::Advertise, 4097)
        };
        encode_header(kind, len, &mut h);
        s.write_all(&h).unwrap();
        peers.push(s);
    }
    for s in &mut peers {
        // The server closes each at once: EOF, not the 60 s read timeout.
        let mut b = [0u8; 1];
        assert!(matches!(s.read(&mut b), Ok(0) | Err(_)));
    }
    let grown = rss_kib(pid).saturating_sub(before);
    assert!(grown < 20 << 10, "serve grew by {grown} KiB");
    wait_until(30, "the refusals logged", || {
        serve
            .lines()
            .iter()
            .filter(|l| l.contains("closing connection from 127.0.0.1:"))
            .count()
            == 100
    });
    assert!(serve.terminate().success());
}

#[test]
fn connections_are_capped_slow_peers_are_cut_off_and_real_programs_still_get_in() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start("127.0.0.1:0", dir.path(), &["--max-connections", "20"]);
    let t = Instant::now();
    // 10 peers that never advertise, 5 that trickle an Advertise a byte at a time, 5 that
    // advertise and then never answer their StartSession.
    let mut silent: Vec<TcpStream> = (0..10).map(|_| connect(&serve.addr)).collect();
    let mut tricklers: Vec<TcpStream> = (0..5).map(|_| connect(&serve.addr)).collect();
    let mut mute: Vec<TcpStream> = (0..5u64)
        .map(|i| {
            let mut s = connect(&serve.addr);
            s.write_all(&advertise(50 + i, "mute")).unwrap();
            s
        })
        .collect();
    wait_until(30, "StartSession sent to the mute peers", || {
        mute.iter_mut().all(|s| {
            s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
            let mut b = [0u8; 1];
            matches!(s.peek(&mut b), Ok(1))
        })
    });
    // The 21st connection: refused as busy at once, with the reason.
    let mut extra = connect(&serve.addr);
    let (kind, payload) = read(&mut extra).expect("a refusal");
    assert_eq!(kind, Kind::Refused);
    assert_eq!(
        Refused::decode(&payload).unwrap().reason,
        RefuseReason::Busy
    );
    // Trickle one byte every 200 ms: the whole-message deadline (10 s) cuts them off.
    let adv = advertise(99, "trickle");
    let mut i = 0;
    let mut closed_at = None;
    while closed_at.is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "tricklers never cut off"
        );
        let alive = tricklers
            .iter_mut()
            .all(|s| s.write_all(&adv[i % adv.len()..][..1]).is_ok());
        if !alive
            || tricklers.iter_mut().any(|s| {
                s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
                matches!(s.read(&mut [0u8; 1]), Ok(0))
            })
        {
            closed_at = Some(t.elapsed());
        }
        i += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    let closed_at = closed_at.unwrap();
    assert!(
        closed_at < Duration::from_secs(15),
        "cut off after {closed_at:?}"
    );
    // The silent and mute peers are closed by their deadlines too.
    for s in silent.iter_mut().chain(mute.iter_mut()) {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
    }
    // A real program gets in and is recorded.
    end(fake_session(&serve.addr, 7, None));
    wait_until(30, "the program's frame", || frames_in(dir.path()) == 1);
    let lines = serve.lines();
    assert!(serve.terminate().success());
    assert!(
        lines
            .iter()
            .any(|l| l.contains("no whole Advertise within 10 s"))
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("no Reply to StartSession within 10 s"))
    );
}

#[test]
fn sigint_stops_the_server_while_a_peer_trickles_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let mut serve = Serve::start("127.0.0.1:0", dir.path(), &[]);
    let mut s = fake_session(&serve.addr, 3, None);
    wait_until(30, "the frame", || frames_in(dir.path()) == 1);
    // Begin an 8 MiB Frames message and send it a byte at a time from a thread.
    let mut h = Vec::new();
    encode_header(Kind::Frames, 8 << 20, &mut h);
    s.write_all(&h).unwrap();
    let trickle = std::thread::spawn(move || {
        while s.write_all(&[0]).is_ok() {
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let t = Instant::now();
    signal(serve.child.id(), "INT");
    let status = loop {
        if let Some(status) = serve.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "serve still running after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    trickle.join().unwrap();
}

#[test]
fn malformed_frame_data_closes_the_connection_and_never_reaches_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start("127.0.0.1:0", dir.path(), &[]);
    // Its length and final zero are right; its int32 has no room for its value.
    let bad = [0x08, 0, 0, 0, 0x10, 0, 0, 0];
    let mut s = fake_session(&serve.addr, 5, Some(&bad));
    // The server closes the stream instead of appending.
    while read(&mut s).is_some() {}
    wait_until(30, "the refusal", || {
        serve
            .lines()
            .iter()
            .any(|l| l.contains("Data message: frame 1"))
    });
    assert!(serve.terminate().success());
    framelog_tests::assert_check_clean(dir.path());
}

#[test]
fn a_peer_cannot_forge_log_lines_or_drive_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start("127.0.0.1:0", dir.path(), &[]);
    let forged = "x\nframelog serve: recording stress (pid 1) as worker 7\u{1b}[2J";
    let mut s = connect(&serve.addr);
    s.write_all(&advertise(11, forged)).unwrap();
    let _ = read(&mut s);
    drop(s);
    wait_until(30, "the program listed", || {
        serve.lines().iter().any(|l| l.contains("connected from"))
    });
    let lines = serve.lines();
    assert!(serve.terminate().success());
    assert!(
        !lines
            .iter()
            .any(|l| l == "framelog serve: recording stress (pid 1) as worker 7"),
        "{lines:?}"
    );
    assert!(lines.iter().all(|l| !l.contains('\u{1b}')), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("x\\u{a}framelog serve")));
}

/// A server that answers every Advertise at once with `answer`, counting connections.
fn hostile_server(answer: Vec<u8>) -> (String, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let c = count.clone();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            if read(&mut s).is_some() {
                let _ = s.write_all(&answer);
                let _ = read(&mut s);
            }
        }
    });
    (addr, count)
}

#[test]
fn a_server_that_answers_every_advertise_neither_spins_nor_holds_a_program_at_exit() {
    let mut resume = Vec::new();
    Cmd::Resume.encode(&mut resume);
    let mut unknown = Vec::new();
    encode_header(Kind::Command, 2, &mut unknown);
    unknown.extend_from_slice(&[42, 1]);
    let mut future = Vec::new();
    Cmd::StartSession {
        version: 9,
        settings: SessionSettings::keep(),
    }
    .encode(&mut future);
    for answer in [resume, unknown, future] {
        let (addr, connections) = hostile_server(answer);
        let mut child = Command::new(env!("CARGO_BIN_EXE_session_child"))
            .args(["--connect", &addr, "--frames", "0", "--mode", "block"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Let it run against the server for a while (until it has connected a few times).
        wait_until(30, "a few connections", || {
            connections.load(std::sync::atomic::Ordering::SeqCst) >= 3
        });
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let in_two_seconds = connections.load(std::sync::atomic::Ordering::SeqCst);
        // Back-off: 100 ms doubling; without it, thousands a second.
        assert!(
            in_two_seconds < 25,
            "{in_two_seconds} connections in about 2 s"
        );
        drop(child.stdin.take());
        let t = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(status.success());
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the program did not exit"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
