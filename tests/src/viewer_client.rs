//! A viewer of `docs/PROTOCOL.md`'s viewer sessions over a real WebSocket (tungstenite), for
//! the tests and the benchmark, and a way to start `framelog view`.

use std::io::BufRead;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use formats::FrameKey;
use formats::protocol::viewer::{
    DataAnswer, Hello, ReadFrom, StreamStatus, ToServer, ToViewer, ViewerKind,
};
use tungstenite::{Message, WebSocket};

use crate::framelog_bin;

/// A viewer speaking the protocol over a real WebSocket.
pub struct Viewer {
    ws: WebSocket<TcpStream>,
    /// Record bytes received so far (unless told to count only).
    pub records: Vec<u8>,
    /// Records received so far.
    pub count: u64,
    /// Keep the records' bytes (off: count them only).
    pub keep: bool,
    /// The last Status.
    pub status: Option<StreamStatus>,
    credit_left: i64,
}

/// Credit granted at a time.
pub const CREDIT: u32 = 4 << 20;

impl Viewer {
    /// Connects to `http://HOST:PORT/`'s `/ws` and says Hello with `token`.
    pub fn connect(url: &str, token: &str) -> (Viewer, ToViewer<'static>) {
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
            count: 0,
            keep: true,
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

    /// Sends one message.
    pub fn send(&mut self, m: ToServer) {
        let mut out = Vec::new();
        m.encode(&mut out);
        self.ws.send(Message::Binary(out.into())).unwrap();
    }

    /// The next binary message; `None` once the server closed the connection.
    pub fn recv_raw(&mut self) -> Option<Vec<u8>> {
        loop {
            match self.ws.read() {
                Ok(Message::Binary(b)) => return Some(b.to_vec()),
                Ok(Message::Close(_)) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    /// Asks for the log from its start, with credit.
    pub fn start(&mut self) {
        self.send(ToServer::Read(ReadFrom::Start));
        self.send(ToServer::Credit(CREDIT));
        self.credit_left = i64::from(CREDIT);
    }

    /// Takes one message in, granting credit as it is used.
    pub fn step(&mut self) -> Option<Vec<u8>> {
        let m = self.recv_raw()?;
        match ToViewer::decode(&m).expect("server messages decode") {
            ToViewer::Records { records, count, .. } => {
                self.count += u64::from(count);
                if self.keep {
                    self.records.extend_from_slice(records);
                }
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
    pub fn until_finished(&mut self, secs: u64) {
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

    /// Asks for a frame's data and waits for the answer (taking records in meanwhile).
    pub fn data(&mut self, request: u32, key: FrameKey) -> Option<bson::Document> {
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

/// `framelog view DIR --http 127.0.0.1:0 EXTRA…`, and the URL from its first line.
pub fn view(dir: &std::path::Path, extra: &[&str]) -> (Child, String) {
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
