//! Viewer sessions with real processes on 127.0.0.1: `framelog view` and `framelog serve
//! --http` serving a log that is still being written to real WebSocket clients, and hostile
//! clients that must not stop recording or other viewers.

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use formats::FrameKey;
use formats::protocol::viewer::{
    DataAnswer, Hello, ReadFrom, StreamStatus, ToServer, ToViewer, ViewerKind,
};
use framelog::{DataStore, LogReader};
use framelog_tests::{Serve, framelog_bin, signal, wait_until};
use tungstenite::{Message, WebSocket};

/// A viewer speaking the protocol over a real WebSocket.
struct Viewer {
    ws: WebSocket<TcpStream>,
    records: Vec<u8>,
    status: Option<StreamStatus>,
    credit_left: i64,
}

const CREDIT: u32 = 4 << 20;

impl Viewer {
    /// Connects to `http://HOST:PORT/`'s `/ws` and says Hello with `token`.
    fn connect(url: &str, token: &str) -> (Viewer, ToViewer<'static>) {
        let host = url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let stream = TcpStream::connect(&host).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let (ws, _) = tungstenite::client(format!("ws://{host}/ws"), stream).unwrap();
        let mut v = Viewer {
            ws,
            records: Vec::new(),
            status: None,
            credit_left: 0,
        };
        v.send(ToServer::Hello(Hello {
            token: token.into(),
            kinds: ViewerKind::server_kinds(),
        }));
        let first = v.recv_raw().expect("an answer to Hello");
        let owned = match ToViewer::decode(&first).unwrap() {
            ToViewer::Welcome { recording, name } => ToViewer::Welcome { recording, name },
            ToViewer::Refused { reason, text } => ToViewer::Refused { reason, text },
            other => panic!("first message {other:?}"),
        };
        (v, owned)
    }

    fn send(&mut self, m: ToServer) {
        let mut out = Vec::new();
        m.encode(&mut out);
        self.ws.send(Message::Binary(out.into())).unwrap();
    }

    /// The next binary message; `None` once the server closed the connection.
    fn recv_raw(&mut self) -> Option<Vec<u8>> {
        loop {
            match self.ws.read() {
                Ok(Message::Binary(b)) => return Some(b.to_vec()),
                Ok(Message::Close(_)) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    fn start(&mut self) {
        self.send(ToServer::Read(ReadFrom::Start));
        self.send(ToServer::Credit(CREDIT));
        self.credit_left = i64::from(CREDIT);
    }

    /// Takes one message in, granting credit as it is used.
    fn step(&mut self) -> Option<Vec<u8>> {
        let m = self.recv_raw()?;
        match ToViewer::decode(&m).expect("server messages decode") {
            ToViewer::Records { records, .. } => {
                self.records.extend_from_slice(records);
                self.credit_left -= records.len() as i64;
                if self.credit_left < i64::from(CREDIT / 2) {
                    self.send(ToServer::Credit(CREDIT));
                    self.credit_left += i64::from(CREDIT);
                }
            }
            ToViewer::Status(s) => self.status = Some(s),
            _ => {}
        }
        Some(m)
    }

    /// Reads until the stream is caught up with no process writing the log.
    fn until_finished(&mut self, secs: u64) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while !self
            .status
            .as_ref()
            .is_some_and(|s| s.caught_up && s.writers.is_empty())
        {
            assert!(Instant::now() < deadline, "viewer never caught up");
            self.step().expect("connection open");
        }
    }

    fn data(&mut self, request: u32, key: FrameKey) -> Option<bson::Document> {
        self.send(ToServer::DataRequest { request, key });
        loop {
            let m = self.step().expect("connection open");
            if let ToViewer::DataReply { request: r, answer } = ToViewer::decode(&m).unwrap() {
                assert_eq!(r, request);
                return match answer {
                    DataAnswer::Found(doc) => Some(bson::Document::from_reader(doc).unwrap()),
                    _ => None,
                };
            }
        }
    }
}

/// The log's records, re-encoded in the order a reader delivers them.
fn log_records(dir: &std::path::Path) -> Vec<u8> {
    let mut out = Vec::new();
    LogReader::open(dir)
        .unwrap()
        .read_available(|_, r| r.encode_to_vec(&mut out))
        .unwrap();
    out
}

/// `framelog view DIR --http 127.0.0.1:0 EXTRA…`, and the URL from its first line.
fn view(dir: &std::path::Path, extra: &[&str]) -> (Child, String) {
    let mut child = Command::new(framelog_bin())
        .arg("view")
        .arg(dir)
        .args(["--http", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("serving ")
        .unwrap_or_else(|| panic!("first line {line:?}"))
        .to_owned();
    (child, url)
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
    // The page is served at `/` (a notice while the browser viewer is not built).
    let mut s =
        TcpStream::connect(url.trim_start_matches("http://").trim_end_matches('/')).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut page = String::new();
    s.read_to_string(&mut page).unwrap();
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("/ws"));
    signal(server.id(), "TERM");
    assert!(server.wait().unwrap().success());
}
