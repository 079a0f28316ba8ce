//! Frame data on demand. For a log directory, a background thread owns a
//! [`framelog::DataStore`] and answers "give me the data of frame K" requests, so the UI never
//! touches the disk; the store is opened at the first request (never preloaded) and refreshed
//! when a key is not found yet (a live log's data may arrive after its frames). For a remote
//! log, the requests go to the server as DataRequests and its DataReplies come back here.

#[cfg(not(target_arch = "wasm32"))]
use std::path::{Path, PathBuf};
use std::sync::Arc;
#[cfg(not(target_arch = "wasm32"))]
use std::sync::mpsc::Sender;
use std::sync::mpsc::{Receiver, channel};

use parking_lot::Mutex;

use formats::FrameKey;
#[cfg(not(target_arch = "wasm32"))]
use framelog::DataStore;

use crate::ingest::Ingest;
use crate::remote::Link;

pub use crate::feed::viewer::DataResult;

/// Where requests go: the data thread of a log directory, or a remote log's server.
enum Asks {
    #[cfg(not(target_arch = "wasm32"))]
    Thread(Sender<FrameKey>),
    Server(Arc<Link>),
}

/// Handle to the data thread, or to a remote log's session.
pub struct DataLoader {
    requests: Asks,
    answers: Receiver<(FrameKey, DataResult)>,
    repaint: Arc<Mutex<Option<egui::Context>>>,
}

impl DataLoader {
    /// Starts the thread for the log in `dir` (nothing is read until the first request).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn start(dir: impl AsRef<Path>) -> Self {
        let dir: PathBuf = dir.as_ref().to_owned();
        let (req_tx, req_rx) = channel::<FrameKey>();
        let (ans_tx, ans_rx) = channel();
        let repaint: Arc<Mutex<Option<egui::Context>>> = Arc::default();
        let rp = repaint.clone();
        std::thread::Builder::new()
            .name("framelog-data".into())
            .spawn(move || {
                let mut store: Option<DataStore> = None;
                while let Ok(mut key) = req_rx.recv() {
                    // Only the newest request matters.
                    while let Ok(k) = req_rx.try_recv() {
                        key = k;
                    }
                    let result = lookup(&dir, &mut store, key);
                    if ans_tx.send((key, result)).is_err() {
                        return;
                    }
                    if let Some(ctx) = rp.lock().as_ref() {
                        ctx.request_repaint();
                    }
                }
            })
            .expect("spawn data thread");
        Self {
            requests: Asks::Thread(req_tx),
            answers: ans_rx,
            repaint,
        }
    }

    /// Asks a remote log's server (the session wakes the window when an answer arrives).
    pub fn remote(link: Arc<Link>) -> Self {
        let (ans_tx, ans_rx) = channel();
        link.set_answers(ans_tx);
        Self {
            requests: Asks::Server(link),
            answers: ans_rx,
            repaint: Arc::default(),
        }
    }

    /// The loader for `ingest`'s log, wherever it comes from.
    pub fn for_log(ingest: &Ingest) -> Self {
        match (ingest.dir(), ingest.link()) {
            (_, Some(link)) => Self::remote(link.clone()),
            #[cfg(not(target_arch = "wasm32"))]
            (Some(dir), None) => Self::start(dir),
            // An ingest is one or the other; nothing to ask otherwise.
            _ => Self::remote(Arc::default()),
        }
    }

    /// Tells the thread which egui context to wake when an answer is ready.
    pub fn set_repaint(&self, ctx: &egui::Context) {
        let mut r = self.repaint.lock();
        if r.is_none() {
            *r = Some(ctx.clone());
        }
    }

    /// Asks for the data of `key`.
    pub fn request(&self, key: FrameKey) {
        match &self.requests {
            #[cfg(not(target_arch = "wasm32"))]
            Asks::Thread(t) => {
                let _ = t.send(key);
            }
            Asks::Server(link) => link.request_data(key),
        }
    }

    /// The answers that arrived since the last call.
    pub fn poll(&self) -> Vec<(FrameKey, DataResult)> {
        self.answers.try_iter().collect()
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn lookup(dir: &Path, store: &mut Option<DataStore>, key: FrameKey) -> DataResult {
    if store.is_none() {
        match DataStore::open(dir) {
            Ok(s) => *store = Some(s),
            Err(e) => return DataResult::Error(e.to_string()),
        }
    }
    let s = store.as_mut().expect("opened above");
    if !s.contains(key)
        && let Err(e) = s.refresh()
    {
        return DataResult::Error(e.to_string());
    }
    match s.get(key) {
        Ok(Some(doc)) => DataResult::Found(doc),
        Ok(None) => DataResult::None,
        Err(e) => DataResult::Error(e.to_string()),
    }
}
