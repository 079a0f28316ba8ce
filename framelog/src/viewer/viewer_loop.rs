//! One viewer's connection once its WebSocket is open: Hello, then records and data answers
//! from its session (read on a thread of its own: file reads block), pings, and the budget's
//! limits (idle, stalled, too many requests), until it or the server closes.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use formats::protocol::RefuseReason;
use formats::protocol::viewer::{
    MAX_PENDING_REQUESTS, MAX_VIEWER_MESSAGE, ToServer, ToViewer, ViewerKind,
};
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;

use super::ViewerSession;
use super::admission::{
    CLOSE_HANDSHAKE, HELLO_DEADLINE, IDLE_LIMIT, PING_EVERY, POLL, QUEUE, STALL_LIMIT, Shared,
    Slot, VIEWER_QUEUE_BYTES,
};
use super::limits::{Admit, ByteBudget, Held};
use super::ws::{Incoming, PROTOCOL_ERROR, ReadError, WebSocket};
use crate::secret::same_secret;

/// Close code for a policy violation (a viewer that stopped reading, too many requests).
pub(super) const POLICY: u16 = 1008;
/// Close code when the server goes away.
pub(super) const GOING_AWAY: u16 = 1001;

type Socket = WebSocket<TokioIo<hyper::upgrade::Upgraded>>;

/// Waits for the upgrade to complete, then serves the viewer.
pub(super) async fn viewer_task(
    slot: Arc<Slot>,
    peer: SocketAddr,
    on_upgrade: hyper::upgrade::OnUpgrade,
) {
    let entry = slot.entry.clone();
    let upgraded = tokio::select! {
        u = on_upgrade => u,
        () = entry.kill.wait() => return,
    };
    let Ok(upgraded) = upgraded else {
        return;
    };
    let mut ws = WebSocket::new(TokioIo::new(upgraded), MAX_VIEWER_MESSAGE);
    let mut v = Viewer {
        slot: &slot,
        peer,
        last_sent: Instant::now(),
    };
    tokio::select! {
        () = v.serve(&mut ws) => {}
        () = entry.kill.wait() => {}
    }
}

/// One viewer's connection.
pub(super) struct Viewer<'a> {
    slot: &'a Arc<Slot>,
    peer: SocketAddr,
    /// When something was last written to it (pings are sent when nothing was for a while).
    last_sent: Instant,
}

/// What came from a viewer.
pub(super) enum Event {
    /// A binary message.
    Message(Vec<u8>),
    Ping(Vec<u8>),
    Closed(Option<u16>),
    /// A protocol violation, said how.
    Violation(String),
    /// The socket closed or failed.
    Gone,
}

impl Viewer<'_> {
    fn shared(&self) -> &Shared {
        &self.slot.shared
    }

    /// Sends one message, or gives up after [`STALL_LIMIT`] with the reason.
    async fn send(
        &mut self,
        ws: &mut Socket,
        bytes: &[u8],
    ) -> std::result::Result<(), &'static str> {
        match tokio::time::timeout(STALL_LIMIT, ws.send_binary(bytes)).await {
            Ok(Ok(())) => {
                self.last_sent = Instant::now();
                Ok(())
            }
            Ok(Err(_)) => Err("connection lost"),
            Err(_) => Err("viewer stopped reading"),
        }
    }

    /// Sends a close frame, then reads what the viewer sent meanwhile, up to its own Close
    /// (bounded): a socket dropped with unread bytes (a viewer sends Read and Credit right
    /// after Hello, and a refusal reads only the Hello) is reset by the kernel, and the
    /// viewer may then lose what it had not read yet: the Refused message and this Close. A
    /// browser showed a bare "closed the connection" instead of asking for the token, one
    /// run in ~13.
    async fn close(&mut self, ws: &mut Socket, code: u16, reason: &str) {
        let sent = tokio::time::timeout(Duration::from_secs(1), ws.send_close(code, reason)).await;
        if !matches!(sent, Ok(Ok(()))) {
            return;
        }
        let _ = tokio::time::timeout(CLOSE_HANDSHAKE, async {
            while let Ok(Some(m)) = ws.next().await {
                if matches!(m, Incoming::Close(_)) {
                    break;
                }
            }
        })
        .await;
        ws.shutdown().await;
    }

    async fn refuse(&mut self, ws: &mut Socket, reason: RefuseReason, text: &str) {
        let mut out = Vec::new();
        ToViewer::Refused {
            reason,
            text: text.into(),
        }
        .encode(&mut out);
        let _ = self.send(ws, &out).await;
        self.close(ws, POLICY, text).await;
    }

    /// Reads until something comes that is not a pong (cancel-safe: it only reads).
    async fn receive(&self, ws: &mut Socket) -> Event {
        loop {
            let m = ws.next().await;
            self.slot
                .entry
                .active
                .store(self.shared().now(), Ordering::Release);
            return match m {
                Ok(Some(Incoming::Binary(b))) => Event::Message(b),
                Ok(Some(Incoming::Ping(p))) => Event::Ping(p),
                Ok(Some(Incoming::Pong)) => continue,
                Ok(Some(Incoming::Text)) => {
                    Event::Violation("text messages are not part of the protocol".into())
                }
                Ok(Some(Incoming::Close(code))) => Event::Closed(code),
                Err(ReadError::Protocol(why)) => Event::Violation(why),
                Ok(None) | Err(ReadError::Io(_)) => Event::Gone,
            };
        }
    }

    /// Answers what [`Viewer::receive`] returned: a message to handle, or `None` when the
    /// connection goes on (a ping answered) — `Err` when it ends (a close answered, a
    /// violation closed).
    async fn react(
        &mut self,
        ws: &mut Socket,
        event: Event,
    ) -> std::result::Result<Option<Vec<u8>>, ()> {
        match event {
            Event::Message(b) => Ok(Some(b)),
            Event::Ping(p) => {
                let pong = tokio::time::timeout(STALL_LIMIT, ws.send_pong(&p)).await;
                match pong {
                    Ok(Ok(())) => Ok(None),
                    _ => Err(()),
                }
            }
            Event::Closed(code) => {
                // Answer with the same code (1000 when none), then end.
                let code = code.unwrap_or(1000);
                let _ = tokio::time::timeout(Duration::from_secs(1), ws.send_close(code, "")).await;
                ws.shutdown().await;
                Err(())
            }
            Event::Violation(why) => {
                self.violation(ws, &why).await;
                Err(())
            }
            Event::Gone => Err(()),
        }
    }

    /// Closes with 1002 and says why in the log.
    async fn violation(&mut self, ws: &mut Socket, why: &str) {
        let peer = self.peer;
        self.shared().note(&format!(
            "closed the WebSocket of {peer}: protocol error: {why}"
        ));
        self.close(ws, PROTOCOL_ERROR, why).await;
    }

    async fn serve(&mut self, ws: &mut Socket) {
        let shared = self.slot.shared.clone();
        let entry = self.slot.entry.clone();
        let opts = &shared.opts;
        let peer = self.peer;
        let deadline = tokio::time::Instant::now() + HELLO_DEADLINE;
        let hello = loop {
            let event = tokio::select! {
                e = tokio::time::timeout_at(deadline, self.receive(ws)) => e,
                () = shared.stop.wait() => return,
            };
            let Ok(event) = event else {
                self.close(ws, POLICY, "no Hello within 10 seconds").await;
                return;
            };
            match self.react(ws, event).await {
                Ok(Some(b)) => break ToServer::decode(&b),
                Ok(None) => {}
                Err(()) => return,
            }
        };
        let hello = match hello {
            Ok(ToServer::Hello(h)) => h,
            Ok(_) => {
                self.violation(ws, "the first message must be Hello").await;
                return;
            }
            Err(e) => {
                self.violation(ws, &e.to_string()).await;
                return;
            }
        };
        if let Some(token) = opts.token.as_deref().filter(|t| !t.is_empty()) {
            // Guesses from one address are checked one at a time, slower after each wrong
            // one; a queue longer than the Hello deadline is refused unchecked.
            match shared.throttle.admit(peer.ip(), HELLO_DEADLINE) {
                Admit::Now => {}
                Admit::After(wait) => {
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = shared.stop.wait() => return,
                    }
                }
                Admit::Refuse => {
                    shared.note(&format!(
                        "viewer from {peer} refused unchecked: too many wrong tokens from its \
                         address"
                    ));
                    self.refuse(
                        ws,
                        RefuseReason::Token,
                        "too many wrong tokens from this address: wait and try again",
                    )
                    .await;
                    return;
                }
            }
            if !same_secret(token.as_bytes(), hello.token.as_bytes()) {
                let n = shared.throttle.failed(peer.ip());
                let what = if hello.token.is_empty() {
                    "no token"
                } else {
                    "a wrong token"
                };
                shared.note(&format!(
                    "viewer from {peer} refused: {what} ({n} in a row from its address)"
                ));
                self.refuse(ws, RefuseReason::Token, "this server needs its token")
                    .await;
                return;
            }
            shared.throttle.succeeded(peer.ip());
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
            self.refuse(ws, RefuseReason::ProtocolVersion, &text).await;
            return;
        }
        if !shared.admit_viewer(&entry) {
            shared.note(&format!(
                "viewer from {peer} refused: {} viewers already",
                shared.max_viewers
            ));
            self.refuse(ws, RefuseReason::Busy, "too many viewers; try again later")
                .await;
            return;
        }
        let mut out = Vec::new();
        ToViewer::Welcome {
            recording: opts.recording,
            name: opts.dir.display().to_string(),
        }
        .encode(&mut out);
        if self.send(ws, &out).await.is_err() {
            return;
        }

        // A viewer that reads Records version 2 gets each frame's recorded parent; an older
        // one gets the same starts without it (PROTOCOL.md, Records version 2).
        let parents = hello.kinds.iter().any(|&(kind, v)| {
            kind == ViewerKind::Records as u8
                && v >= formats::protocol::viewer::RECORDS_WITH_PARENTS
        });
        let (cmd_tx, cmd_rx) = std::sync::mpsc::sync_channel::<ToServer>(MAX_PENDING_REQUESTS + 8);
        let (out_tx, mut out_rx) = mpsc::channel::<(Vec<u8>, Held)>(QUEUE);
        let dir = opts.dir.clone();
        let all = shared.all_queued.clone();
        let reader = std::thread::Builder::new()
            .name("framelog-viewer".into())
            .spawn(move || run_session(&dir, parents, &cmd_rx, &out_tx, &all));
        if reader.is_err() {
            self.close(ws, 1011, "the server cannot start a reader")
                .await;
            return;
        }
        let mut pending = 0usize;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shared.stop.wait() => {
                    self.close(ws, GOING_AWAY, "the server is shutting down").await;
                    break;
                }
                incoming = self.receive(ws) => {
                    let bytes = match self.react(ws, incoming).await {
                        Ok(Some(b)) => b,
                        Ok(None) => continue,
                        Err(()) => break,
                    };
                    let msg = match ToServer::decode(&bytes) {
                        Ok(ToServer::Hello(_)) => {
                            self.violation(ws, "Hello sent twice").await;
                            break;
                        }
                        Ok(m) => m,
                        Err(e) => {
                            self.violation(ws, &e.to_string()).await;
                            break;
                        }
                    };
                    if matches!(msg, ToServer::DataRequest { .. }) {
                        pending += 1;
                        if pending > MAX_PENDING_REQUESTS {
                            self.close(ws, POLICY, "more than 64 data requests unanswered").await;
                            break;
                        }
                    }
                    if cmd_tx.try_send(msg).is_err() {
                        self.close(ws, POLICY, "too many requests at once").await;
                        break;
                    }
                }
                outgoing = out_rx.recv() => {
                    let Some((bytes, held)) = outgoing else { break };
                    if bytes.first() == Some(&(ViewerKind::DataReply as u8)) {
                        pending = pending.saturating_sub(1);
                    }
                    if let Err(why) = self.send(ws, &bytes).await {
                        if why == "viewer stopped reading" {
                            shared.note(&format!("viewer {peer} disconnected: it stopped reading"));
                            self.close(ws, POLICY, why).await;
                        }
                        break;
                    }
                    drop(held);
                    entry.active.store(shared.now(), Ordering::Release);
                }
                _ = tick.tick() => {
                    let silent = shared.now().saturating_sub(entry.active.load(Ordering::Acquire));
                    if silent >= IDLE_LIMIT.as_millis() as u64 {
                        shared.note(&format!(
                            "viewer {peer} disconnected: nothing sent or taken for {} s",
                            IDLE_LIMIT.as_secs()
                        ));
                        self.close(ws, POLICY, "idle: no answer to pings").await;
                        break;
                    }
                    if self.last_sent.elapsed() >= PING_EVERY {
                        let ping = tokio::time::timeout(STALL_LIMIT, ws.send_ping(b"framelog")).await;
                        if !matches!(ping, Ok(Ok(()))) {
                            break;
                        }
                        self.last_sent = Instant::now();
                    }
                }
            }
        }
        // Dropping the command sender ends the session thread at its next look.
    }
}

/// One viewer's reading thread: follows its commands, streams what its credit allows (each
/// message held in the viewer's and the server's byte budgets until it is written), and
/// ends when the socket side is gone.
pub(super) fn run_session(
    dir: &Path,
    parents: bool,
    cmds: &std::sync::mpsc::Receiver<ToServer>,
    out: &mpsc::Sender<(Vec<u8>, Held)>,
    all: &Arc<ByteBudget>,
) {
    use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
    let own = ByteBudget::new(VIEWER_QUEUE_BYTES);
    let mut session = ViewerSession::new(dir);
    session.send_parents(parents);
    let gone = std::cell::Cell::new(false);
    let mut send = |m: Vec<u8>| {
        if gone.get() {
            return;
        }
        let open = || !out.is_closed();
        let Some(held) = Held::take(m.len(), &own, all, &open) else {
            gone.set(true);
            return;
        };
        if out.blocking_send((m, held)).is_err() {
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
