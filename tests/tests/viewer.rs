//! Viewer sessions with real processes on 127.0.0.1: `framelog view` and `framelog serve
//! --http` serving a log that is still being written to real WebSocket clients, and hostile
//! clients that must not stop recording or other viewers.

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use formats::FrameKey;
use formats::protocol::viewer::{ReadFrom, ToServer, ToViewer};
use framelog::{DataStore, LogReader};
use framelog_tests::viewer_client::{Viewer, view};
use framelog_tests::{Serve, framelog_bin, signal, wait_until};
use tungstenite::Message;

/// The log's records, re-encoded in the order a reader delivers them.
fn log_records(dir: &std::path::Path) -> Vec<u8> {
    let mut out = Vec::new();
    LogReader::open(dir)
        .unwrap()
        .read_available(|_, r| r.encode_to_vec(&mut out))
        .unwrap();
    out
}

/// A `session_child` streaming to `addr` (FRAMELOG_CONNECT, as the README runs programs).
fn program(addr: &str, frames: u64) -> Child {
    Command::new(env!("CARGO_BIN_EXE_session_child"))
        .args(["--threads", "2", "--frames", &frames.to_string()])
        .args(["--data-every", "50"])
        .env("FRAMELOG_CONNECT", addr)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A `session_child` writing `dir` directly until its stdin closes.
fn recorder(dir: &std::path::Path) -> Child {
    let mut c = Command::new(env!("CARGO_BIN_EXE_session_child"))
        .arg("--dir")
        .arg(dir)
        .args(["--threads", "2", "--frames", "0", "--data-every", "50"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(c.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "started");
    c
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn a_viewer_of_a_log_being_written_gets_every_record_and_the_frames_data() {
    let dir = tempfile::tempdir().unwrap();
    let mut rec = recorder(dir.path());
    wait_until(30, "the recorder's first segment", || {
        framelog::segments::is_log(dir.path())
    });
    let (mut server, url) = view(dir.path(), &[]);
    let (mut v, welcome) = Viewer::connect(&url, "");
    assert!(matches!(
        welcome,
        ToViewer::Welcome {
            recording: false,
            ..
        }
    ));
    v.start();
    // Frames arrive while the program still records.
    wait_until(60, "records while the log is written", || {
        v.step();
        !v.records.is_empty()
    });
    // Stop the program (it records until its stdin closes) and read to the end.
    drop(rec.stdin.take());
    let out = rec.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    v.until_finished(120);
    assert_eq!(
        v.records,
        log_records(dir.path()),
        "the viewer's records are the log's"
    );

    // Frame data on request, the same as the store's.
    let mut store = DataStore::open(dir.path()).unwrap();
    let mut asked = 0;
    let records = v.records.clone();
    for item in formats::RecordIter::new(&records, 0) {
        let (_, r) = item.unwrap();
        if let formats::Record::Start(s) = r {
            let key = FrameKey::new(s.worker, s.id);
            if let Some(expected) = store.get(key).unwrap() {
                assert_eq!(v.data(asked, key), Some(expected));
                asked += 1;
                if asked == 20 {
                    break;
                }
            }
        }
    }
    assert_eq!(asked, 20, "frames with data were found");
    signal(server.id(), "TERM");
    assert!(server.wait().unwrap().success());
}

#[test]
fn hostile_viewers_never_stop_recording_or_other_viewers_and_memory_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start("127.0.0.1:0", dir.path(), &["--http", "127.0.0.1:0"]);
    let url = serve.http.clone().expect("serving line");
    let host = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();

    // Idle TCP connections that never speak HTTP, and WebSockets that never say Hello.
    let idle: Vec<_> = (0..300)
        .map(|_| TcpStream::connect(&host).unwrap())
        .collect();
    let silent: Vec<_> = (0..50)
        .map(|_| {
            let s = TcpStream::connect(&host).unwrap();
            tungstenite::client(format!("ws://{host}/ws"), s).unwrap().0
        })
        .collect();
    // A viewer that asks for everything and never reads.
    let (mut stalled, _) = Viewer::connect(&url, "");
    stalled.send(ToServer::Read(ReadFrom::Start));
    stalled.send(ToServer::Credit(u32::MAX));

    // Garbage, text and oversized messages: each closes only its own connection.
    for bad in [
        Message::Binary(vec![0xde, 0xad, 0xbe, 0xef].into()),
        Message::Text("hello".into()),
        Message::Binary(vec![1u8; 64 << 10].into()),
    ] {
        let s = TcpStream::connect(&host).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let (mut ws, _) = tungstenite::client(format!("ws://{host}/ws"), s).unwrap();
        let _ = ws.send(bad);
        let closed = loop {
            match ws.read() {
                Ok(Message::Close(_)) | Err(_) => break true,
                Ok(_) => {}
            }
        };
        assert!(closed);
    }

    // Programs record through the server meanwhile, and a good viewer follows.
    let programs: Vec<_> = (0..2).map(|_| program(&serve.addr, 100_000)).collect();
    let (mut good, _) = Viewer::connect(&url, "");
    good.start();
    for p in programs {
        let out = p.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let counters: serde_json::Value =
            serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap())
                .unwrap();
        assert_eq!(counters["dropped"], 0, "{counters}");
        assert_eq!(counters["unsent"], 0, "{counters}");
    }
    // The server is still recording and serving: the good viewer reaches the end (the
    // server itself holds no worker slot once its programs are gone).
    good.until_finished(120);
    assert_eq!(good.records, log_records(dir.path()));
    let rss = rss_kib(serve.child.id());
    assert!(
        rss < 200 * 1024,
        "server RSS {rss} KiB with hostile viewers"
    );
    drop((idle, silent, stalled));
    assert!(serve.terminate().success());
}

#[test]
fn a_token_is_required_off_loopback_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path()).unwrap();
    // Refused before binding anything: no address but loopback is ever opened here.
    let out = Command::new(framelog_bin())
        .arg("view")
        .arg(dir.path())
        .args(["--http", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs a token"), "{err}");

    let (mut server, url) = view(dir.path(), &["--token", "s3cret"]);
    let (_, answer) = Viewer::connect(&url, "wrong");
    assert!(
        matches!(
            answer,
            ToViewer::Refused {
                reason: formats::protocol::RefuseReason::Token,
                ..
            }
        ),
        "{answer:?}"
    );
    let (_, answer) = Viewer::connect(&url, "s3cret");
    assert!(matches!(answer, ToViewer::Welcome { .. }), "{answer:?}");
    // The page is served at `/`: the browser viewer when it is built (FRAMELOG_WEB, as CI
    // sets it), else a notice naming the WebSocket.
    let mut s =
        TcpStream::connect(url.trim_start_matches("http://").trim_end_matches('/')).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut page = String::new();
    s.read_to_string(&mut page).unwrap();
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(
        page.contains("framelog_canvas") || page.contains("/ws"),
        "{page}"
    );
    signal(server.id(), "TERM");
    assert!(server.wait().unwrap().success());
}
