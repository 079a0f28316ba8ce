//! A remote log: a viewer session over a WebSocket (`ewebsock`).
//!
//! Natively, the socket has a thread of its own: it digests each server message with
//! [`ViewerFeed`] (the I/O-free session logic) and hands the batches to the same applier
//! thread a log directory's reader feeds. In the browser there are no threads: the page's
//! event loop calls the message handler, which digests and applies each batch itself. Either
//! way a batch's bytes are granted back as credit once they are in the model, so the server
//! never sends more than [`crate::feed::viewer::CREDIT_WINDOW`] ahead of what the window
//! took in. Frame data
//! requests go out on the same socket and their answers come back to the data loader
//! (`data_loader`, which holds the [`Link`]).

use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;

use ewebsock::{WsEvent, WsMessage};
use formats::FrameKey;
use formats::protocol::viewer::MAX_SERVER_MESSAGE;
use formats::protocol::{RefuseReason, printable};
use parking_lot::Mutex;

use crate::apply::{Applier, Shared};
use crate::feed::viewer::{CreditWindow, DataRequests, DataResult, Incoming, ViewerFeed};
use crate::feed::{Batch, ReadState};

/// The sending half of a session, shared by the socket thread (Hello, data requests waiting
/// their turn), the applier (credit) and the window (data requests).
#[derive(Default)]
pub struct Link {
    sender: Mutex<Option<ewebsock::WsSender>>,
    credit: Mutex<CreditWindow>,
    requests: Mutex<DataRequests>,
    answers: Mutex<Option<Sender<(FrameKey, DataResult)>>>,
}

impl Link {
    fn send(&self, message: Vec<u8>) {
        if let Some(s) = self.sender.lock().as_mut() {
            s.send(WsMessage::Binary(message));
        }
    }

    /// Asks the server for `key`'s data; the answer goes to the data loader set with
    /// [`Link::set_answers`].
    pub fn request_data(&self, key: FrameKey) {
        let ask = self.requests.lock().ask(key);
        if let Some(m) = ask {
            self.send(m);
        }
    }

    /// Where data answers go.
    pub fn set_answers(&self, to: Sender<(FrameKey, DataResult)>) {
        *self.answers.lock() = Some(to);
    }

    /// Gives `bytes` of applied records back to the server as credit.
    fn grant(&self, bytes: u64) {
        let credit = self.credit.lock().consumed(bytes);
        if let Some(m) = credit {
            self.send(m);
        }
    }

    /// Closes the connection (its socket thread then ends).
    pub fn close(&self) {
        self.sender.lock().take();
    }
}

/// Connects to `url` and starts the applier thread; returns the session's link and the
/// applier's handle. Everything that goes wrong is reported in `shared`'s status.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn start(
    url: &str,
    token: &str,
    shared: Arc<Shared>,
) -> (Arc<Link>, Option<JoinHandle<()>>) {
    let link = Arc::new(Link::default());
    let (sink, handle) = Handoff::new(&shared, &link);
    shared.status().waiting = Some(format!("Connecting to {url}…"));
    let session = Mutex::new(Session::new(url, token, sink, &shared, &link));
    // Held while connecting, so the socket thread's first event (which sends Hello) finds
    // the sender in place.
    let mut sender = link.sender.lock();
    let on_event = Box::new(move |event| session.lock().on_event(event));
    match ewebsock::ws_connect(url.to_owned(), options(), on_event) {
        Ok(s) => *sender = Some(s),
        Err(e) => {
            shared.push_error(format!("Could not connect to {url}: {e}"));
            finish(&shared);
        }
    }
    drop(sender);
    (link, handle)
}

/// Connects to `url`; returns the session's link and the [`Driver`] that takes in what
/// arrives. Everything that goes wrong is reported in `shared`'s status.
// The browser's socket sender is not `Send` (a page has one thread), so neither is `Link`
// there; it stays in an `Arc` because the data loader shares it as it does natively.
#[cfg(target_arch = "wasm32")]
#[allow(clippy::arc_with_non_send_sync)]
pub(crate) fn start(url: &str, token: &str, shared: Arc<Shared>) -> (Arc<Link>, Option<Driver>) {
    let link = Arc::new(Link::default());
    let (sink, _) = Handoff::new(&shared, &link);
    shared.status().waiting = Some(format!("Connecting to {url}…"));
    let session = Session::new(url, token, sink, &shared, &link);
    // The driver's timer takes in what arrives; nothing to wake.
    match ewebsock::connect_with_wakeup(url.to_owned(), options(), || {}) {
        Ok((sender, receiver)) => {
            *link.sender.lock() = Some(sender);
            (link, Some(Driver::new(receiver, session)))
        }
        Err(e) => {
            shared.push_error(format!("Could not connect to {url}: {e}"));
            finish(&shared);
            (link, None)
        }
    }
}

/// A browser's session: the page's event loop queues what the socket receives, and a timer
/// of the page takes it in, a slice of at most [`Driver::SLICE`] per tick, so a big log
/// loads between paints (not only during them) and the page stays responsive.
#[cfg(target_arch = "wasm32")]
pub(crate) struct Driver {
    timer: i32,
    // Owned here: the timer calls it until the driver is dropped.
    _tick: eframe::wasm_bindgen::closure::Closure<dyn FnMut()>,
}

#[cfg(target_arch = "wasm32")]
impl Driver {
    /// The most one tick takes in before the page may paint and handle input.
    const SLICE: std::time::Duration = std::time::Duration::from_millis(12);
    /// How long a close waits for messages the browser delivers after it.
    const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_millis(250);
    /// Milliseconds between ticks (browsers clamp repeating timers to about 4 ms).
    const EVERY_MS: i32 = 4;

    fn new(receiver: ewebsock::WsReceiver, mut session: Session) -> Driver {
        use eframe::wasm_bindgen::JsCast as _;
        // The browser may deliver a socket's close before the message that came just ahead
        // of it (a refusal, say): a close is acted on once nothing else has arrived for
        // `CLOSE_GRACE`.
        let mut closed_at: Option<web_time::Instant> = None;
        let tick = eframe::wasm_bindgen::closure::Closure::<dyn FnMut()>::new(move || {
            let started = web_time::Instant::now();
            while started.elapsed() < Self::SLICE {
                match receiver.try_recv() {
                    Some(WsEvent::Closed) => closed_at = Some(web_time::Instant::now()),
                    Some(event) => {
                        let _ = session.on_event(event);
                    }
                    None => {
                        if closed_at.is_some_and(|t| t.elapsed() >= Self::CLOSE_GRACE) {
                            closed_at = None;
                            let _ = session.on_event(WsEvent::Closed);
                        }
                        break;
                    }
                }
            }
        });
        let timer = eframe::web_sys::window()
            .and_then(|w| {
                w.set_interval_with_callback_and_timeout_and_arguments_0(
                    tick.as_ref().unchecked_ref(),
                    Self::EVERY_MS,
                )
                .ok()
            })
            .unwrap_or(-1);
        Driver { timer, _tick: tick }
    }
}

#[cfg(target_arch = "wasm32")]
impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(w) = eframe::web_sys::window() {
            w.clear_interval_with_handle(self.timer);
        }
    }
}

fn options() -> ewebsock::Options {
    ewebsock::Options {
        max_incoming_frame_size: MAX_SERVER_MESSAGE,
        ..Default::default()
    }
}

/// Where digested batches go: the applier thread (natively), or straight into the model.
enum Handoff {
    #[cfg(not(target_arch = "wasm32"))]
    Thread {
        tx: std::sync::mpsc::SyncSender<(Batch, ReadState)>,
        recycle: std::sync::mpsc::Receiver<Batch>,
    },
    #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
    Inline { applier: Box<Applier>, spare: Batch },
}

impl Handoff {
    /// Natively, starts the applier thread; in the browser, applies inline.
    #[cfg(not(target_arch = "wasm32"))]
    fn new(shared: &Arc<Shared>, link: &Arc<Link>) -> (Handoff, Option<JoinHandle<()>>) {
        use std::sync::atomic::Ordering;
        let (tx, rx) = std::sync::mpsc::sync_channel::<(Batch, ReadState)>(3);
        let (recycle_tx, recycle) = std::sync::mpsc::channel::<Batch>();
        let shared = shared.clone();
        let link = link.clone();
        let handle = std::thread::Builder::new()
            .name("framelog-remote-apply".into())
            .spawn(move || {
                let stopped = || shared.stop.load(Ordering::Relaxed);
                let grant = |bytes| link.grant(bytes);
                crate::apply::applier(&shared, rx, recycle_tx, &stopped, &grant);
            })
            .expect("spawn the remote applier thread");
        (Handoff::Thread { tx, recycle }, Some(handle))
    }

    #[cfg(target_arch = "wasm32")]
    fn new(_: &Arc<Shared>, _: &Arc<Link>) -> (Handoff, Option<JoinHandle<()>>) {
        let sink = Handoff::Inline {
            applier: Box::default(),
            spare: Batch::default(),
        };
        (sink, None)
    }

    /// An empty batch to digest into (a used one, when one came back).
    fn batch(&mut self) -> Batch {
        let mut batch = match self {
            #[cfg(not(target_arch = "wasm32"))]
            Handoff::Thread { recycle, .. } => recycle.try_recv().unwrap_or_default(),
            Handoff::Inline { spare, .. } => std::mem::take(spare),
        };
        batch.clear();
        batch
    }

    /// Hands `batch` on; false once the applier is gone.
    fn send(&mut self, shared: &Shared, link: &Link, batch: Batch, state: ReadState) -> bool {
        match self {
            // Blocks while the applier is behind: what waits is bounded by the credit.
            #[cfg(not(target_arch = "wasm32"))]
            Handoff::Thread { tx, .. } => tx.send((batch, state)).is_ok(),
            Handoff::Inline { applier, spare } => {
                applier.take(shared, &batch, state, &|| false);
                if batch.credit > 0 {
                    link.grant(batch.credit);
                }
                *spare = batch;
                if state.at_end {
                    applier.settle(shared);
                }
                true
            }
        }
    }
}

/// The receiving half: lives in the socket's event handler.
struct Session {
    url: String,
    token: String,
    feed: ViewerFeed,
    sink: Handoff,
    shared: Arc<Shared>,
    link: Arc<Link>,
    /// The WebSocket handshake succeeded.
    opened: bool,
    /// The session is over (refused, closed, failed): later events are not news.
    done: bool,
}

impl Session {
    fn new(url: &str, token: &str, sink: Handoff, shared: &Arc<Shared>, link: &Arc<Link>) -> Self {
        Session {
            url: url.to_owned(),
            token: token.to_owned(),
            feed: ViewerFeed::default(),
            sink,
            shared: shared.clone(),
            link: link.clone(),
            opened: false,
            done: false,
        }
    }

    fn on_event(&mut self, event: WsEvent) -> std::ops::ControlFlow<()> {
        use std::ops::ControlFlow::{Break, Continue};
        if self.done {
            return Break(());
        }
        match event {
            WsEvent::Opened => {
                self.opened = true;
                for m in ViewerFeed::opening(&self.token, &self.link.credit.lock()) {
                    self.link.send(m);
                }
                self.shared.status().waiting = Some(format!("Connected to {}…", self.url));
                self.shared.repaint();
                Continue(())
            }
            WsEvent::Message(WsMessage::Binary(bytes)) => self.on_message(&bytes),
            // Pings are answered by the socket layer.
            WsEvent::Message(WsMessage::Ping(_) | WsMessage::Pong(_)) => Continue(()),
            WsEvent::Message(_) => {
                self.fail(format!(
                    "{} sent a text message, which the viewer protocol does not use: is it a framelog server?",
                    self.url
                ));
                Break(())
            }
            WsEvent::Error(e) => {
                let e = printable(&e);
                let msg = if self.opened {
                    format!("Lost the connection to {}: {e}", self.url)
                } else {
                    format!("Could not connect to {}: {e}", self.url)
                };
                self.fail(msg);
                Break(())
            }
            WsEvent::Closed => {
                self.fail(format!("{} closed the connection", self.url));
                Break(())
            }
        }
    }

    fn on_message(&mut self, bytes: &[u8]) -> std::ops::ControlFlow<()> {
        use std::ops::ControlFlow::{Break, Continue};
        let mut batch = self.sink.batch();
        let incoming = match self.feed.on_message(bytes, &mut batch) {
            Ok(i) => i,
            Err(e) => {
                self.fail(format!(
                    "{} sent a message this window cannot read ({}); disconnected",
                    self.url,
                    printable(&e)
                ));
                return Break(());
            }
        };
        match incoming {
            Incoming::Welcome { recording, name } => {
                let what = if recording { "recording" } else { "serving" };
                self.shared.status().waiting = Some(format!(
                    "Connected to {} ({what} {}): waiting for its first records",
                    self.url,
                    printable(&name)
                ));
                self.shared.repaint();
            }
            Incoming::Refused { reason, text } => {
                let text = printable(&text).into_owned();
                if reason == RefuseReason::Token {
                    self.shared.status().needs_token = Some(text.clone());
                }
                self.fail(format!("{} refused this window: {text}", self.url));
                return Break(());
            }
            Incoming::Damage(what) => {
                self.shared.push_error(printable(&what).into_owned());
                return self.hand_over(batch);
            }
            Incoming::Stream(_) => return self.hand_over(batch),
            Incoming::Data(request, result) => {
                let (key, next) = self.link.requests.lock().answered(request);
                if let Some(m) = next {
                    self.link.send(m);
                }
                if let (Some(key), Some(to)) = (key, self.link.answers.lock().as_ref()) {
                    let _ = to.send((key, result));
                }
                self.shared.repaint();
            }
        }
        Continue(())
    }

    /// Hands a batch (and where the stream is) to the applier.
    fn hand_over(&mut self, batch: Batch) -> std::ops::ControlFlow<()> {
        {
            // Records (or the server's word on them) arrived: no longer waiting for them.
            let mut status = self.shared.status();
            status.waiting = None;
            if let Some(s) = self.feed.status() {
                status.pruned_segments = s.pruned;
                status.writers = Some(s.writers.clone());
            }
        }
        let state = self.feed.read_state();
        if self.sink.send(&self.shared, &self.link, batch, state) {
            std::ops::ControlFlow::Continue(())
        } else {
            std::ops::ControlFlow::Break(())
        }
    }

    /// The session is over: says why, once.
    fn fail(&mut self, msg: String) {
        if !self.done {
            self.done = true;
            self.shared.push_error(msg);
            finish(&self.shared);
            self.link.close();
        }
    }
}

fn finish(shared: &Shared) {
    let mut s = shared.status();
    s.finished = true;
    s.waiting = None;
    drop(s);
    shared.repaint();
}
