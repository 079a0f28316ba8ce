//! The HTTP side of viewer sessions: the viewer's static files at `/`, the WebSocket at `/ws`.
//!
//! Each viewer's socket is served by an async task (cheap while idle) and its log reading by a
//! thread of its own (file reads block); a bounded channel between them is all the server
//! buffers for a viewer, so a viewer that stops reading stalls only its own thread and is
//! disconnected once its socket has taken nothing for [`STALL_LIMIT`].

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path as UrlPath, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use formats::protocol::RefuseReason;
use formats::protocol::viewer::{
    MAX_PENDING_REQUESTS, MAX_VIEWER_MESSAGE, ToServer, ToViewer, ViewerKind,
};
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::ViewerSession;
use crate::error::{Error, Result};
use crate::secret::same_secret;

/// A viewer must say Hello within this time.
pub const HELLO_DEADLINE: Duration = Duration::from_secs(10);
/// A viewer whose socket takes no bytes for this long is disconnected.
pub const STALL_LIMIT: Duration = Duration::from_secs(30);
/// Viewers served at once unless told otherwise.
pub const DEFAULT_MAX_VIEWERS: usize = 64;
/// Encoded messages queued between a viewer's reading thread and its socket.
const QUEUE: usize = 4;
/// How often an idle session looks for new records (the live latency's floor).
const POLL: Duration = Duration::from_millis(20);

/// What a viewer server serves and to whom.
#[derive(Clone)]
pub struct ViewerOptions {
    /// The log directory.
    pub dir: PathBuf,
    /// The built browser viewer (its `index.html` and files); `None` serves a page saying
    /// how to build it.
    pub web_root: Option<PathBuf>,
    /// The secret viewers must present; required on any address but loopback.
    pub token: Option<String>,
    /// Viewers served at once; more are refused as busy.
    pub max_viewers: usize,
    /// Whether this process records the log (`serve`) rather than only reads it (`view`).
    pub recording: bool,
    /// Where one-line notes go (refusals, disconnections).
    pub log: Arc<dyn Fn(&str) + Send + Sync>,
}

impl ViewerOptions {
    /// Options for serving the log in `dir` on loopback without a token.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            web_root: None,
            token: None,
            max_viewers: DEFAULT_MAX_VIEWERS,
            recording: false,
            log: Arc::new(|_| {}),
        }
    }
}

/// A running viewer server; stops when closed or dropped.
pub struct ViewerServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    opts: ViewerOptions,
    slots: Arc<Semaphore>,
}

impl ViewerServer {
    /// Binds `addr` (port 0 picks a free one) and starts serving on a thread of its own.
    pub fn bind(addr: &str, opts: ViewerOptions) -> Result<Self> {
        // Checked before binding: an address off this machine is never opened without one.
        let resolved: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|e| Error::io(addr, e))?
            .collect();
        if resolved.iter().any(|a| !a.ip().is_loopback())
            && opts.token.as_deref().unwrap_or("").is_empty()
        {
            return Err(Error::TokenRequired(addr.to_owned()));
        }
        let listener = TcpListener::bind(&resolved[..]).map_err(|e| Error::io(addr, e))?;
        let local = listener.local_addr().map_err(|e| Error::io(addr, e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::io(addr, e))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| Error::io(addr, e))?;
        let shared = Arc::new(Shared {
            slots: Arc::new(Semaphore::new(opts.max_viewers.max(1))),
            opts,
        });
        let app = axum::Router::new()
            .route("/ws", get(upgrade))
            .route("/", get(index))
            .route("/{*path}", get(static_file))
            .with_state(shared);
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("framelog-viewers".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    let _ = axum::serve(listener, app)
                        .with_graceful_shutdown(async {
                            let _ = stopped.await;
                        })
                        .await;
                });
            })
            .map_err(|e| Error::io(addr, e))?;
        Ok(Self {
            addr: local,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting and ends every viewer's connection.
    pub fn close(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ViewerServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

async fn upgrade(ws: WebSocketUpgrade, State(shared): State<Arc<Shared>>) -> Response {
    ws.max_message_size(MAX_VIEWER_MESSAGE)
        .max_frame_size(MAX_VIEWER_MESSAGE)
        .on_upgrade(move |socket| viewer(socket, shared))
}

/// Sends one encoded message, or gives up after [`STALL_LIMIT`].
async fn send(socket: &mut WebSocket, bytes: Vec<u8>) -> std::result::Result<(), &'static str> {
    match tokio::time::timeout(STALL_LIMIT, socket.send(Message::Binary(bytes.into()))).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err("connection lost"),
        Err(_) => Err("viewer stopped reading"),
    }
}

async fn close(socket: &mut WebSocket, code: u16, reason: &str) {
    let frame = CloseFrame {
        code,
        reason: reason.chars().take(120).collect::<String>().into(),
    };
    let sent = tokio::time::timeout(
        Duration::from_secs(1),
        socket.send(Message::Close(Some(frame))),
    )
    .await;
    if !matches!(sent, Ok(Ok(()))) {
        return;
    }
    // The closing handshake: read what the viewer sent meanwhile, up to its own Close. A
    // socket dropped with unread bytes (a viewer sends Read and Credit right after Hello, and
    // a refusal reads only the Hello) is reset by the kernel, and the viewer may then lose
    // what it had not read yet: the Refused message and this Close. A browser showed a bare
    // "closed the connection" instead of asking for the token, one run in ~13. Bounded, for
    // a viewer that never answers.
    let _ = tokio::time::timeout(CLOSE_HANDSHAKE, async {
        while let Some(Ok(m)) = socket.recv().await {
            if matches!(m, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
}

/// How long a closing server waits for the viewer's side of the closing handshake.
const CLOSE_HANDSHAKE: Duration = Duration::from_secs(2);

async fn refuse(socket: &mut WebSocket, reason: RefuseReason, text: &str) {
    let mut out = Vec::new();
    ToViewer::Refused {
        reason,
        text: text.into(),
    }
    .encode(&mut out);
    let _ = send(socket, out).await;
    close(socket, 1008, text).await;
}

/// Close code for a protocol error.
const PROTOCOL_ERROR: u16 = 1002;
/// Close code for a policy violation (a viewer that stopped reading, too many requests).
const POLICY: u16 = 1008;

async fn viewer(mut socket: WebSocket, shared: Arc<Shared>) {
    let opts = &shared.opts;
    let Ok(_slot) = shared.slots.clone().try_acquire_owned() else {
        refuse(
            &mut socket,
            RefuseReason::Busy,
            "too many viewers; try again later",
        )
        .await;
        return;
    };
    let hello = match tokio::time::timeout(HELLO_DEADLINE, socket.recv()).await {
        Ok(Some(Ok(Message::Binary(b)))) => ToServer::decode(&b),
        Ok(_) => return,
        Err(_) => {
            close(&mut socket, POLICY, "no Hello within 10 seconds").await;
            return;
        }
    };
    let hello = match hello {
        Ok(ToServer::Hello(h)) => h,
        Ok(_) => {
            close(
                &mut socket,
                PROTOCOL_ERROR,
                "the first message must be Hello",
            )
            .await;
            return;
        }
        Err(e) => {
            close(&mut socket, PROTOCOL_ERROR, &e.to_string()).await;
            return;
        }
    };
    if let Some(token) = opts.token.as_deref().filter(|t| !t.is_empty())
        && !same_secret(token.as_bytes(), hello.token.as_bytes())
    {
        (opts.log)("viewer refused: wrong or missing token");
        refuse(
            &mut socket,
            RefuseReason::Token,
            "this server needs its token",
        )
        .await;
        return;
    }
    let needed = [
        ViewerKind::Welcome,
        ViewerKind::Records,
        ViewerKind::Damage,
        ViewerKind::Status,
        ViewerKind::DataReply,
    ];
    if let Some(k) = needed.iter().find(|k| {
        !hello
            .kinds
            .iter()
            .any(|(kind, v)| *kind == **k as u8 && *v >= 1)
    }) {
        let text = format!("the viewer does not understand {k:?} version 1: update the viewer");
        refuse(&mut socket, RefuseReason::ProtocolVersion, &text).await;
        return;
    }
    let mut out = Vec::new();
    ToViewer::Welcome {
        recording: opts.recording,
        name: opts.dir.display().to_string(),
    }
    .encode(&mut out);
    if send(&mut socket, out).await.is_err() {
        return;
    }

    // A viewer that reads Records version 2 gets each frame's recorded parent; an older one
    // gets the same starts without it (PROTOCOL.md, Records version 2).
    let parents = hello.kinds.iter().any(|&(kind, v)| {
        kind == ViewerKind::Records as u8 && v >= formats::protocol::viewer::RECORDS_WITH_PARENTS
    });
    let (cmd_tx, cmd_rx) = std::sync::mpsc::sync_channel::<ToServer>(MAX_PENDING_REQUESTS + 8);
    let (out_tx, mut out_rx) = mpsc::channel::<Vec<u8>>(QUEUE);
    let dir = opts.dir.clone();
    let reader = std::thread::Builder::new()
        .name("framelog-viewer".into())
        .spawn(move || run_session(&dir, parents, &cmd_rx, &out_tx));
    if reader.is_err() {
        close(&mut socket, 1011, "the server cannot start a reader").await;
        return;
    }
    let mut pending = 0usize;
    loop {
        tokio::select! {
            incoming = socket.recv() => {
                let bytes = match incoming {
                    Some(Ok(Message::Binary(b))) => b,
                    Some(Ok(Message::Text(_))) => {
                        close(&mut socket, PROTOCOL_ERROR, "text messages are not part of the protocol").await;
                        break;
                    }
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                    _ => break,
                };
                let msg = match ToServer::decode(&bytes) {
                    Ok(ToServer::Hello(_)) => {
                        close(&mut socket, PROTOCOL_ERROR, "Hello sent twice").await;
                        break;
                    }
                    Ok(m) => m,
                    Err(e) => {
                        close(&mut socket, PROTOCOL_ERROR, &e.to_string()).await;
                        break;
                    }
                };
                if matches!(msg, ToServer::DataRequest { .. }) {
                    pending += 1;
                    if pending > MAX_PENDING_REQUESTS {
                        close(&mut socket, POLICY, "more than 64 data requests unanswered").await;
                        break;
                    }
                }
                if cmd_tx.try_send(msg).is_err() {
                    close(&mut socket, POLICY, "too many requests at once").await;
                    break;
                }
            }
            outgoing = out_rx.recv() => {
                let Some(bytes) = outgoing else { break };
                if bytes.first() == Some(&(ViewerKind::DataReply as u8)) {
                    pending = pending.saturating_sub(1);
                }
                if let Err(why) = send(&mut socket, bytes).await {
                    if why == "viewer stopped reading" {
                        (opts.log)("viewer disconnected: it stopped reading");
                        close(&mut socket, POLICY, why).await;
                    }
                    break;
                }
            }
        }
    }
    // Dropping the command sender ends the session thread at its next look.
}

/// One viewer's reading thread: follows its commands, streams what its credit allows, and
/// ends when the socket side is gone.
fn run_session(
    dir: &Path,
    parents: bool,
    cmds: &std::sync::mpsc::Receiver<ToServer>,
    out: &mpsc::Sender<Vec<u8>>,
) {
    use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
    let mut session = ViewerSession::new(dir);
    session.send_parents(parents);
    let gone = std::cell::Cell::new(false);
    let mut send = |m: Vec<u8>| {
        if out.blocking_send(m).is_err() {
            gone.set(true);
        }
    };
    let handle =
        |cmd: ToServer, session: &mut ViewerSession, send: &mut dyn FnMut(Vec<u8>)| match cmd {
            ToServer::Read(from) => session.read(from),
            ToServer::Credit(n) => session.credit(n),
            ToServer::DataRequest { request, key } => send(session.data(request, key)),
            ToServer::Hello(_) => {}
        };
    loop {
        loop {
            match cmds.try_recv() {
                Ok(cmd) => handle(cmd, &mut session, &mut send),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
        // An error is the log's (not there yet, a segment unreadable): look again later.
        let delivered = session.step(&mut send).unwrap_or(false);
        if gone.get() {
            return;
        }
        if !delivered {
            match cmds.recv_timeout(POLL) {
                Ok(cmd) => handle(cmd, &mut session, &mut send),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }
}

async fn index(State(shared): State<Arc<Shared>>) -> Response {
    match &shared.opts.web_root {
        Some(root) => file_response(&root.join("index.html")).await,
        None => (
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            NOT_BUILT_PAGE,
        )
            .into_response(),
    }
}

async fn static_file(
    UrlPath(path): UrlPath<String>,
    State(shared): State<Arc<Shared>>,
) -> Response {
    let Some(root) = &shared.opts.web_root else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let rel = Path::new(&path);
    // Only plain names below the root: no `..`, no absolute paths.
    if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return StatusCode::NOT_FOUND.into_response();
    }
    file_response(&root.join(rel)).await
}

async fn file_response(path: &Path) -> Response {
    match tokio::fs::read(path).await {
        Ok(bytes) => ([(header::CONTENT_TYPE, content_type(path))], bytes).into_response(),
        Err(_) => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The content type browsers need (WebAssembly must be `application/wasm` to stream).
fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript",
        Some("wasm") => "application/wasm",
        Some("css") => "text/css",
        Some("json") => "application/json",
        Some("png") => "image/png",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

const NOT_BUILT_PAGE: &str = "<!doctype html><meta charset=utf-8><title>framelog</title>\
<p>This framelog server streams its log to viewers at <code>/ws</code>, but the browser \
viewer is not built. Build it (see the README, <em>The debugger in a browser</em>) and pass \
<code>--web DIR</code>, or open the log with <code>debugger-gui ws://HOST:PORT/ws</code>.";
