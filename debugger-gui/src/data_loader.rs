//! Frame data on demand: a background thread owns a [`framelog::DataStore`] and answers
//! "give me the data of frame K" requests, so the UI never touches the disk. The store is
//! opened at the first request (never preloaded) and refreshed when a key is not found yet
//! (a live log's data may arrive after its frames).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};

use parking_lot::Mutex;

use formats::FrameKey;
use framelog::DataStore;

/// The answer to one request.
#[derive(Clone, Debug, PartialEq)]
pub enum DataResult {
    /// The frame's merged document.
    Found(bson::Document),
    /// The frame has no data.
    None,
    /// The data could not be read (message names file and offset).
    Error(String),
}

/// Handle to the data thread.
pub struct DataLoader {
    requests: Sender<FrameKey>,
    answers: Receiver<(FrameKey, DataResult)>,
    repaint: Arc<Mutex<Option<egui::Context>>>,
}

impl DataLoader {
    /// Starts the thread for the log in `dir` (nothing is read until the first request).
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
            requests: req_tx,
            answers: ans_rx,
            repaint,
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
        let _ = self.requests.send(key);
    }

    /// The answers that arrived since the last call.
    pub fn poll(&self) -> Vec<(FrameKey, DataResult)> {
        self.answers.try_iter().collect()
    }
}

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
