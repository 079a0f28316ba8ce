//! The HTTP side of viewer sessions: the viewer's static files at `/`, the WebSocket at `/ws`.
//!
//! One budget per server holds whatever peers do (`docs/PROTOCOL.md`, *Viewer security*):
//!
//! - **Who.** Every request must name this server by a loopback `Host` (`localhost`,
//!   `127.0.0.1`, `[::1]`, any port) unless the server has a token, else 403 (no DNS
//!   rebinding); a WebSocket upgrade that carries an `Origin` must come from this server's own
//!   page (`http://` and the request's `Host`), else 403 (no other web page reads the log).
//! - **Connections.** At most [`ViewerOptions::max_connections`] at once, fewer when the
//!   open-files limit is low (descriptors are kept in reserve for the rest of the process: the
//!   program port of `serve`). When full, a new connection takes the place of the oldest one
//!   that has no request under way (no whole head yet, idle between requests, or a WebSocket
//!   that has not said Hello), or else of a response whose writes have been stuck for a
//!   second; with none of those it is answered 503. A request head must arrive whole within
//!   [`HEAD_DEADLINE`]; a write that makes no progress for [`STALL_LIMIT`] ends its
//!   connection.
//! - **Viewers.** At most [`ViewerOptions::max_viewers`]; Hello within [`HELLO_DEADLINE`]; a
//!   viewer is pinged every [`PING_EVERY`] and one that neither answers nor takes records for
//!   [`IDLE_LIMIT`] is closed (and when viewers are full, a new one takes the place of one
//!   silent for [`EVICTABLE_AFTER`]). What is queued for viewers is bounded in bytes, per
//!   viewer and in all. Wrong tokens are slowed per address.
//! - **Static files** are read once into a cache (re-read when they change) and sent in
//!   slices of it: an unread response costs a reference, not a copy.
//! - **Shutdown** ([`ViewerServer::close`]) stops accepting, drops connections with no
//!   request under way, tells viewers (Close 1001), lets responses under way finish within
//!   [`DRAIN`], then drops whatever is left: it returns within the drain whatever peers do.
//!
//! Each viewer's socket is served by an async task (cheap while idle) and its log reading by
//! a thread of its own (file reads block).

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::body::{Bytes, Frame, SizeHint};
use hyper::server::conn::http1;
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::limits::{ByteBudget, LogLimit, TokenThrottle};
use crate::error::{Error, Result};

pub use super::admission::{
    ALL_VIEWERS_QUEUE_BYTES, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_VIEWERS, DRAIN, EVICTABLE_AFTER,
    HEAD_DEADLINE, HELLO_DEADLINE, IDLE_LIMIT, PING_EVERY, STALL_LIMIT, VIEWER_QUEUE_BYTES,
    ViewerOptions,
};
use super::admission::{Entry, FILES_PER_VIEWER, Flag, Phase, SLACK, Shared, Slot};
use super::origin::{loopback_host, same_origin};
use super::static_files::{BodyKind, CHUNK, Cache, NOT_BUILT_PAGE, content_type, decode_path};
use super::viewer_loop::viewer_task;

/// Largest request head (hyper answers 431 beyond; URIs over 64 KiB get 414).
const MAX_HEAD: usize = 96 << 10;
/// A write that makes no progress for this long fails (a backstop for responses; viewers
/// are cut at [`STALL_LIMIT`] with a reason first).
const WRITE_STALL: Duration = Duration::from_secs(35);

/// A running viewer server; stops when closed or dropped.
pub struct ViewerServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    caps: (usize, usize),
    thread: Option<std::thread::JoinHandle<()>>,
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
        // The open-files budget: what the limit leaves after the descriptors open now and
        // the reserve; a viewer counts for its socket and its log files.
        let fd_limit = super::limits::open_files_limit();
        let (max_connections, max_viewers) = match fd_limit {
            Some(limit) => {
                let budget = limit
                    .saturating_sub(super::limits::open_files() + opts.fd_reserve)
                    .max(8);
                let viewers = (opts.max_viewers as u64)
                    .min(budget / (2 * (FILES_PER_VIEWER + 1)))
                    .max(1);
                let conns = (opts.max_connections as u64)
                    .min(budget - (viewers * FILES_PER_VIEWER).min(budget - 4))
                    .max(viewers.min(4));
                (conns as usize, viewers as usize)
            }
            None => (opts.max_connections, opts.max_viewers),
        };
        let (max_connections, max_viewers) = (max_connections.max(1), max_viewers.max(1));
        let mut http = http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(HEAD_DEADLINE)
            .max_buf_size(MAX_HEAD)
            .keep_alive(true);
        let shared = Arc::new(Shared {
            epoch: Instant::now(),
            conns: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            max_connections,
            max_viewers,
            fd_limit,
            fd_open: AtomicU64::new(0),
            fd_sampled: AtomicU64::new(0),
            stop: Flag::new(),
            all_queued: ByteBudget::new(ALL_VIEWERS_QUEUE_BYTES),
            throttle: TokenThrottle::new(),
            notes: LogLimit::new(),
            cache: Cache::default(),
            http,
            opts,
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("framelog-viewers".into())
            .spawn(move || {
                runtime.block_on(serve(s, listener));
                // Tasks left are dropped here (their sockets close); nothing blocks.
                runtime.shutdown_timeout(Duration::from_millis(200));
            })
            .map_err(|e| Error::io(addr, e))?;
        Ok(Self {
            addr: local,
            shared,
            caps: (max_connections, max_viewers),
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections and viewers it serves at once (the options, lowered to fit the
    /// open-files limit).
    pub fn capacity(&self) -> (usize, usize) {
        self.caps
    }

    /// Starts shutting down without waiting: stops accepting, tells viewers, and lets
    /// responses under way finish within [`DRAIN`].
    pub fn begin_close(&self) {
        self.shared.stop.raise();
    }

    /// Shuts down and waits: returns within [`DRAIN`] (and a moment) of the first
    /// [`ViewerServer::begin_close`] or of this call, whatever peers are doing.
    pub fn close(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.shared.stop.raise();
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

/// The accept loop, then the drain.
async fn serve(shared: Arc<Shared>, listener: TcpListener) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        shared.log("cannot serve viewers: the listener cannot be registered");
        return;
    };
    let mut failures = 0u64;
    'accepting: loop {
        // Connections killed to make room end at their next poll: while many have not yet,
        // new ones wait in the listen backlog (a burst of peers is taken at the pace its
        // victims go, and nobody is refused for it).
        while shared.killed_not_gone() >= SLACK {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(1)) => {}
                () = shared.stop.wait() => break 'accepting,
            }
        }
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = shared.stop.wait() => break,
        };
        match accepted {
            Ok((stream, peer)) => {
                failures = 0;
                let _ = stream.set_nodelay(true);
                match shared.admit() {
                    Some(entry) => {
                        let slot = Arc::new(Slot {
                            shared: shared.clone(),
                            entry,
                        });
                        tokio::spawn(connection(slot, stream, peer));
                    }
                    None => {
                        refuse_busy(stream);
                        shared.note(&format!(
                            "refused a connection from {peer}: {} connections open already",
                            shared.max_connections
                        ));
                    }
                }
            }
            Err(e) => {
                // Out of descriptors, mostly: wait a little (the budget frees some).
                failures += 1;
                if failures == 1 {
                    shared.note(&format!("accept failed: {e}"));
                }
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(50)) => {}
                    () = shared.stop.wait() => break,
                }
            }
        }
    }
    drop(listener);
    // Connections see the stop themselves: those with no request under way end at once,
    // viewers are sent Close 1001, responses under way finish. Past the drain, all go.
    let until = tokio::time::Instant::now() + DRAIN;
    while !shared.conns.lock().is_empty() && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for e in shared.conns.lock().values() {
        e.kill.raise();
    }
    let until = tokio::time::Instant::now() + Duration::from_millis(500);
    while !shared.conns.lock().is_empty() && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Answers a connection over the budget with 503 and closes it, without reading it.
fn refuse_busy(stream: tokio::net::TcpStream) {
    const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n\
Retry-After: 1\r\nConnection: close\r\nContent-Length: 48\r\n\r\n\
the viewer server is busy: too many connections\n";
    // Bytes it already sent, read so the close does not turn into a reset that loses the
    // answer; the answer fits the socket's buffer.
    let mut buf = [0u8; 4096];
    let _ = stream.try_read(&mut buf);
    let _ = stream.try_write(BUSY);
}

/// Serves one HTTP connection until it ends, is killed, or the server stops.
async fn connection(slot: Arc<Slot>, stream: tokio::net::TcpStream, peer: SocketAddr) {
    let entry = slot.entry.clone();
    let shared = slot.shared.clone();
    let io = TokioIo::new(Guarded {
        io: stream,
        entry: entry.clone(),
        epoch: shared.epoch,
        stall: None,
    });
    let svc_slot = slot.clone();
    let svc = hyper::service::service_fn(move |req| {
        let slot = svc_slot.clone();
        async move { Ok::<_, Infallible>(answer(&slot, peer, req)) }
    });
    let conn = shared.http.serve_connection(io, svc).with_upgrades();
    tokio::pin!(conn);
    drop(slot);
    tokio::select! {
        _ = conn.as_mut() => return,
        () = entry.kill.wait() => return,
        () = shared.stop.wait() => {}
    }
    // Stopping: a connection with no request under way ends now; a response under way may
    // finish (within the drain, when the server kills what is left).
    if entry.phase() != Phase::Busy {
        return;
    }
    conn.as_mut().graceful_shutdown();
    tokio::select! {
        _ = conn.as_mut() => {}
        () = entry.kill.wait() => {}
    }
}

/// A connection's socket, reporting write stalls to the budget and failing a write that
/// makes no progress for [`WRITE_STALL`].
struct Guarded {
    io: tokio::net::TcpStream,
    entry: Arc<Entry>,
    epoch: Instant,
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Guarded {
    fn wrote<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match r {
            Poll::Ready(r) => {
                if self.stall.take().is_some() {
                    self.entry.stalled.store(0, Ordering::Release);
                }
                Poll::Ready(r)
            }
            Poll::Pending => {
                let (entry, epoch) = (&self.entry, self.epoch);
                let stall = self.stall.get_or_insert_with(|| {
                    entry
                        .stalled
                        .store(epoch.elapsed().as_millis() as u64 + 1, Ordering::Release);
                    Box::pin(tokio::time::sleep(WRITE_STALL))
                });
                if stall.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the peer took nothing for 35 s",
                    )));
                }
                Poll::Pending
            }
        }
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        this.wrote(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.wrote(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// The response to one request.
fn answer(
    slot: &Arc<Slot>,
    peer: SocketAddr,
    mut req: Request<hyper::body::Incoming>,
) -> Response<Body> {
    let shared = &slot.shared;
    let entry = &slot.entry;
    entry.set_phase(Phase::Busy, shared.now());
    let busy = BusyGuard(Some(slot.clone()));
    let host = req
        .uri()
        .authority()
        .map(|a| a.as_str().to_owned())
        .or_else(|| {
            req.headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_owned)
        })
        .unwrap_or_default();
    let token = shared.opts.token.as_deref().is_some_and(|t| !t.is_empty());
    if !token && !loopback_host(&host) {
        shared.note(&format!(
            "refused a request from {peer}: Host {:?} is not this server's (it answers \
             localhost and loopback addresses only, or any name with --token)",
            formats::protocol::printable(&host)
        ));
        return text(
            StatusCode::FORBIDDEN,
            "this server answers only to localhost and loopback addresses (no --token set)\n",
            busy,
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n", busy);
    }
    let path = req.uri().path().to_owned();
    if path == "/ws" {
        return upgrade(slot, peer, &host, &mut req, busy);
    }
    let Some(rel) = decode_path(&path) else {
        return text(StatusCode::BAD_REQUEST, "a malformed path\n", busy);
    };
    let file = match (&shared.opts.web_root, rel.as_os_str().is_empty()) {
        (None, true) => {
            return Response::builder()
                .header(header::CONTENT_TYPE, "text/html; charset=utf-8")
                .body(Body::bytes(
                    Bytes::from_static(NOT_BUILT_PAGE.as_bytes()),
                    busy,
                ))
                .unwrap_or_else(|_| Response::new(Body::empty()));
        }
        (None, false) => return text(StatusCode::NOT_FOUND, "not found\n", busy),
        (Some(root), true) => root.join("index.html"),
        (Some(root), false) => root.join(&rel),
    };
    match shared.cache.open(&file) {
        Ok((kind, len)) => {
            let body = if req.method() == Method::HEAD {
                Body::empty()
            } else {
                Body { kind, busy }
            };
            Response::builder()
                .header(header::CONTENT_TYPE, content_type(&file))
                .header(header::CONTENT_LENGTH, len)
                .header(header::CACHE_CONTROL, "no-cache")
                .body(body)
                .unwrap_or_else(|_| Response::new(Body::empty()))
        }
        Err(_) => text(StatusCode::NOT_FOUND, "not found\n", busy),
    }
}

/// A response body: nothing, bytes sent in slices, or a file read as it is sent.
struct Body {
    kind: BodyKind,
    busy: BusyGuard,
}

impl Body {
    fn empty() -> Self {
        Self {
            kind: BodyKind::Empty,
            busy: BusyGuard(None),
        }
    }

    fn bytes(b: Bytes, busy: BusyGuard) -> Self {
        Self {
            kind: BodyKind::Bytes(b),
            busy,
        }
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        let this = self.get_mut();
        let chunk = match &mut this.kind {
            BodyKind::Empty => None,
            BodyKind::Bytes(b) if b.is_empty() => None,
            BodyKind::Bytes(b) => Some(Ok(b.split_to(b.len().min(CHUNK)))),
            BodyKind::File(_, 0) => None,
            BodyKind::File(f, left) => {
                use std::io::Read;
                let mut buf = vec![0u8; (*left).min(CHUNK as u64) as usize];
                match f.read(&mut buf) {
                    Ok(0) => Some(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the file was cut while it was being sent",
                    ))),
                    Ok(n) => {
                        buf.truncate(n);
                        *left -= n as u64;
                        Some(Ok(Bytes::from(buf)))
                    }
                    Err(e) => Some(Err(e)),
                }
            }
        };
        match chunk {
            Some(c) => Poll::Ready(Some(c.map(Frame::data))),
            None => {
                this.busy.0.take();
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            BodyKind::Empty => true,
            BodyKind::Bytes(b) => b.is_empty(),
            BodyKind::File(_, left) => *left == 0,
        }
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(match &self.kind {
            BodyKind::Empty => 0,
            BodyKind::Bytes(b) => b.len() as u64,
            BodyKind::File(_, left) => *left,
        })
    }
}

/// A small text answer.
fn text(status: StatusCode, body: &'static str, busy: BusyGuard) -> Response<Body> {
    let mut r = Response::builder().status(status);
    if status.is_client_error() {
        // A refused or malformed request: its connection is not kept for another.
        r = r.header(header::CONNECTION, "close");
    }
    r.header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Body::bytes(Bytes::from_static(body.as_bytes()), busy))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// Whether header `name` lists `token` (comma-separated, case-insensitive).
fn lists(req: &Request<hyper::body::Incoming>, name: header::HeaderName, token: &str) -> bool {
    req.headers().get_all(name).iter().any(|v| {
        v.to_str()
            .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    })
}

/// `GET /ws`: checks the origin and the handshake, answers 101 and starts the viewer.
fn upgrade(
    slot: &Arc<Slot>,
    peer: SocketAddr,
    host: &str,
    req: &mut Request<hyper::body::Incoming>,
    busy: BusyGuard,
) -> Response<Body> {
    let shared = &slot.shared;
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !same_origin(origin, host) {
            shared.note(&format!(
                "refused a WebSocket from {peer}: Origin {:?} is not this server's page \
                 (http://{})",
                formats::protocol::printable(origin),
                formats::protocol::printable(host)
            ));
            return text(
                StatusCode::FORBIDDEN,
                "WebSockets are served only to this server's own page\n",
                busy,
            );
        }
    }
    if !lists(req, header::UPGRADE, "websocket") || !lists(req, header::CONNECTION, "upgrade") {
        return Response::builder()
            .status(StatusCode::UPGRADE_REQUIRED)
            .header(header::UPGRADE, "websocket")
            .header(header::CONNECTION, "Upgrade")
            .body(Body::bytes(
                Bytes::from_static(b"a WebSocket upgrade is expected here\n"),
                busy,
            ))
            .unwrap_or_else(|_| Response::new(Body::empty()));
    }
    if req
        .headers()
        .get(header::SEC_WEBSOCKET_VERSION)
        .is_none_or(|v| v.as_bytes() != b"13")
    {
        return Response::builder()
            .status(StatusCode::UPGRADE_REQUIRED)
            .header(header::SEC_WEBSOCKET_VERSION, "13")
            .body(Body::bytes(
                Bytes::from_static(b"WebSocket version 13 only\n"),
                busy,
            ))
            .unwrap_or_else(|_| Response::new(Body::empty()));
    }
    let Some(key) = req
        .headers()
        .get(header::SEC_WEBSOCKET_KEY)
        .filter(|k| super::ws::valid_key(k.as_bytes()))
    else {
        return text(StatusCode::BAD_REQUEST, "a bad Sec-WebSocket-Key\n", busy);
    };
    let accept = super::ws::accept_key(key.as_bytes());
    let on_upgrade = hyper::upgrade::on(req);
    slot.entry.set_phase(Phase::Upgraded, shared.now());
    tokio::spawn(viewer_task(slot.clone(), peer, on_upgrade));
    drop(busy);
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::UPGRADE, "websocket")
        .header(header::CONNECTION, "Upgrade")
        .header(header::SEC_WEBSOCKET_ACCEPT, accept)
        .body(Body::empty())
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// Marks its connection as waiting again (no request under way) once the response is
/// sent, unless it became a WebSocket meanwhile.
struct BusyGuard(Option<Arc<Slot>>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take()
            && slot.entry.phase() == Phase::Busy
        {
            slot.entry.set_phase(Phase::Waiting, slot.shared.now());
        }
    }
}
