//! A remote log, natively: a viewer session over a WebSocket (`ewebsock`, whose thread owns
//! the socket) feeding the same applier thread as a log directory's reader.
//!
//! The socket thread digests each server message with [`ViewerFeed`] (the I/O-free session
//! logic the browser build shares) and hands the batches to the applier; the applier grants
//! their bytes back as credit once they are in the model, so the server never sends more
//! than [`crate::feed::viewer::CREDIT_WINDOW`] ahead of what the window took in. Frame data
//! requests go out on the same socket and their answers come back to the
//! [`crate::data_loader::DataLoader`].

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};
use std::thread::JoinHandle;

use ewebsock::{WsEvent, WsMessage};
use formats::FrameKey;
use formats::protocol::viewer::MAX_SERVER_MESSAGE;
use formats::protocol::{RefuseReason, printable};
use parking_lot::Mutex;

use crate::feed::viewer::{CreditWindow, DataRequests, DataResult, Incoming, ViewerFeed};
use crate::feed::{Batch, ReadState};
use crate::ingest::{Shared, applier};

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

    /// Closes the connection (its socket thread then ends).
    pub fn close(&self) {
        self.sender.lock().take();
    }
}

/// Connects to `url` and starts the applier thread; returns the session's link and the
/// applier's handle. Everything that goes wrong is reported in `shared`'s status.
pub(crate) fn start(url: &str, token: &str, shared: Arc<Shared>) -> (Arc<Link>, JoinHandle<()>) {
    let link = Arc::new(Link::default());
    let (tx, rx) = sync_channel::<(Batch, ReadState)>(3);
    let (recycle_tx, recycle_rx) = channel::<Batch>();
    let handle = {
        let shared = shared.clone();
        let link = link.clone();
        std::thread::Builder::new()
            .name("framelog-remote-apply".into())
            .spawn(move || {
                let stopped = || shared.stop.load(Ordering::Relaxed);
                let grant = |bytes| {
                    let credit = link.credit.lock().consumed(bytes);
                    if let Some(m) = credit {
                        link.send(m);
                    }
                };
                applier(&shared, rx, recycle_tx, &stopped, &grant);
            })
            .expect("spawn the remote applier thread")
    };
    shared.status().waiting = Some(format!("Connecting to {url}…"));
    let session = Mutex::new(Session {
        url: url.to_owned(),
        token: token.to_owned(),
        feed: ViewerFeed::default(),
        tx,
        recycle: recycle_rx,
        shared: shared.clone(),
        link: link.clone(),
        opened: false,
        done: false,
    });
    let options = ewebsock::Options {
        max_incoming_frame_size: MAX_SERVER_MESSAGE,
        ..Default::default()
    };
    // Held while connecting, so the socket thread's first event (which sends Hello) finds
    // the sender in place.
    let mut sender = link.sender.lock();
    let on_event = Box::new(move |event| session.lock().on_event(event));
    match ewebsock::ws_connect(url.to_owned(), options, on_event) {
        Ok(s) => *sender = Some(s),
        Err(e) => {
            shared.push_error(format!("Could not connect to {url}: {e}"));
            finish(&shared);
        }
    }
    drop(sender);
    (link, handle)
}

/// The receiving half: lives in the socket thread's event handler.
struct Session {
    url: String,
    token: String,
    feed: ViewerFeed,
    tx: SyncSender<(Batch, ReadState)>,
    recycle: Receiver<Batch>,
    shared: Arc<Shared>,
    link: Arc<Link>,
    /// The WebSocket handshake succeeded.
    opened: bool,
    /// The session is over (refused, closed, failed): later events are not news.
    done: bool,
}

impl Session {
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
        let mut batch = self.recycle.try_recv().unwrap_or_default();
        batch.clear();
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
        if let Some(s) = self.feed.status() {
            let mut status = self.shared.status();
            status.waiting = None;
            status.pruned_segments = s.pruned;
            status.writers = Some(s.writers.clone());
        }
        // Blocks while the applier is behind: what waits is bounded by the credit.
        match self.tx.send((batch, self.feed.read_state())) {
            Ok(()) => std::ops::ControlFlow::Continue(()),
            Err(_) => std::ops::ControlFlow::Break(()),
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
