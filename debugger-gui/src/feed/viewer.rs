//! The viewer's side of a viewer session (`docs/PROTOCOL.md`, *Viewer sessions*) without a
//! socket: server messages in, model batches and messages to send out. A driver moves the
//! bytes (the shell's `remote`: natively a socket thread; in a browser, the page's WebSocket).
//!
//! - [`ViewerFeed`] digests Records into [`Batch`]es, places Damage, and turns Status into
//!   progress and stopped writers (a writer missing from a caught-up Status stopped: every
//!   record it wrote has been sent by then).
//! - [`CreditWindow`] grants record bytes as the model takes them in, so a slow model never
//!   makes the server buffer: what is unread stays in the server's log files.
//! - [`DataRequests`] numbers data requests and keeps at most the protocol's 64 unanswered.

use formats::FrameKey;
use formats::protocol::RefuseReason;
use formats::protocol::viewer::{
    DataAnswer, Hello, MAX_PENDING_REQUESTS, ReadFrom, StreamStatus, ToServer, ToViewer, ViewerKind,
};
use rustc_hash::FxHashMap;

use super::{Batch, ReadState, ReaderStage};

/// Record bytes granted at the start and kept in flight: enough to keep loopback and a LAN
/// busy, small enough that a window that stops taking records in holds little.
pub const CREDIT_WINDOW: u32 = 8 << 20;

/// The answer to one frame-data request, from a log directory or a server.
#[derive(Clone, Debug, PartialEq)]
pub enum DataResult {
    /// The frame's merged document.
    Found(bson::Document),
    /// The frame has no data.
    None,
    /// The data could not be read (the message says why and where).
    Error(String),
}

/// What a server message meant, for the driver.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    /// The server accepted the viewer.
    Welcome {
        /// The server records this log (`framelog serve`), not only reads it.
        recording: bool,
        /// The log as the server names it.
        name: String,
    },
    /// The server refused the viewer (it closes the connection next).
    Refused {
        /// Why (a wrong or missing token: ask the user for one).
        reason: RefuseReason,
        /// One line to show.
        text: String,
    },
    /// Records, Damage or Status went into the batch: hand it to the model with this state.
    Stream(ReadState),
    /// Damaged bytes the server skipped (also in the batch): one line to show.
    Damage(String),
    /// The answer to data request `request`.
    Data(u32, DataResult),
}

/// The stream's side of a session: what the records, damage and status messages mean to the
/// model.
#[derive(Default)]
pub struct ViewerFeed {
    digest: ReaderStage,
    status: Option<StreamStatus>,
    /// Records arrived after the last Status (it is not caught up with them).
    records_since_status: bool,
    record_bytes: u64,
}

impl ViewerFeed {
    /// The messages that open a session: Hello (with `token`, empty if none), Read from the
    /// log's start, and the first credit.
    pub fn opening(token: &str, credit: &CreditWindow) -> Vec<Vec<u8>> {
        [
            ToServer::Hello(Hello {
                token: token.to_owned(),
                kinds: ViewerKind::server_kinds(),
            }),
            ToServer::Read(ReadFrom::Start),
            ToServer::Credit(credit.window),
        ]
        .iter()
        .map(encode)
        .collect()
    }

    /// The last Status the server sent.
    pub fn status(&self) -> Option<&StreamStatus> {
        self.status.as_ref()
    }

    /// Record bytes received so far.
    pub fn record_bytes(&self) -> u64 {
        self.record_bytes
    }

    /// Where the stream is: the server's progress figures, and at its end once a Status
    /// said so with no records after it.
    pub fn read_state(&self) -> ReadState {
        let s = self.status.as_ref();
        ReadState {
            bytes_read: s.map_or(0, |s| s.read),
            total_bytes: s.map_or(0, |s| s.total.max(s.read)),
            at_end: s.is_some_and(|s| s.caught_up) && !self.records_since_status,
        }
    }

    /// Takes one server message in; records, damage and stopped writers go into `batch`.
    /// An error means the connection must close (a message that does not decode whole).
    pub fn on_message(&mut self, message: &[u8], batch: &mut Batch) -> Result<Incoming, String> {
        let msg = ToViewer::decode(message).map_err(|e| e.to_string())?;
        Ok(match msg {
            ToViewer::Welcome { recording, name } => Incoming::Welcome { recording, name },
            ToViewer::Refused { reason, text } => Incoming::Refused { reason, text },
            ToViewer::Records { records, .. } => {
                // The decoder checked that every record decodes whole.
                for item in formats::RecordIter::new(records, 0) {
                    let (_, rec) = item.map_err(|e| e.to_string())?;
                    self.digest.push(&rec, batch);
                }
                batch.credit += records.len() as u64;
                self.record_bytes += records.len() as u64;
                self.records_since_status = true;
                Incoming::Stream(self.read_state())
            }
            ToViewer::Damage(d) => {
                // Worded as the file ingest words `framelog::Damage`.
                let what = format!(
                    "{} at byte {}: skipped {} damaged bytes: {}",
                    d.file, d.offset, d.len, d.why
                );
                batch.damage.push((self.digest.newest(), what.clone()));
                Incoming::Damage(what)
            }
            ToViewer::Status(s) => {
                for &w in &s.writers {
                    self.digest.writers.observe(w, true);
                }
                if s.caught_up {
                    // Every record the log holds has been sent, so a writer the server no
                    // longer lists wrote its last record before them: it stopped.
                    for w in self.digest.writers.writers() {
                        if !s.writers.contains(&w) {
                            self.digest.writers.observe(w, false);
                        }
                    }
                    self.digest.stop_writers(batch);
                }
                self.records_since_status = false;
                self.status = Some(s);
                Incoming::Stream(self.read_state())
            }
            ToViewer::DataReply { request, answer } => {
                let result = match answer {
                    DataAnswer::Found(doc) => match bson::Document::from_reader(doc) {
                        Ok(d) => DataResult::Found(d),
                        Err(e) => DataResult::Error(format!("the server sent bad BSON: {e}")),
                    },
                    DataAnswer::None => DataResult::None,
                    DataAnswer::Lost => DataResult::Error(
                        "the server says this frame's data was damaged or deleted by retention"
                            .to_owned(),
                    ),
                };
                Incoming::Data(request, result)
            }
        })
    }
}

/// Credit as the protocol asks: a window granted at the start, and granted again as the model
/// takes records in (whenever half of it has been used), never before.
#[derive(Debug)]
pub struct CreditWindow {
    window: u32,
    /// Record bytes applied and not granted again yet.
    unreturned: u64,
}

impl Default for CreditWindow {
    fn default() -> Self {
        Self::new(CREDIT_WINDOW)
    }
}

impl CreditWindow {
    /// A window of `bytes`.
    pub fn new(bytes: u32) -> Self {
        Self {
            window: bytes.max(2),
            unreturned: 0,
        }
    }

    /// The model took `bytes` of records in: the Credit message to send, if it is time.
    pub fn consumed(&mut self, bytes: u64) -> Option<Vec<u8>> {
        self.unreturned += bytes;
        if self.unreturned < u64::from(self.window / 2) {
            return None;
        }
        let grant = self.unreturned.min(u64::from(u32::MAX)) as u32;
        self.unreturned -= u64::from(grant);
        Some(encode(&ToServer::Credit(grant)))
    }
}

/// Data requests in flight: numbered, at most [`MAX_PENDING_REQUESTS`] unanswered (the server
/// closes a connection with more); past that only the newest key waits, as the panel only
/// shows the newest.
#[derive(Debug, Default)]
pub struct DataRequests {
    next: u32,
    pending: FxHashMap<u32, FrameKey>,
    waiting: Option<FrameKey>,
}

impl DataRequests {
    /// Asks for `key`'s data: the message to send now, or `None` if it must wait for an
    /// answer first.
    pub fn ask(&mut self, key: FrameKey) -> Option<Vec<u8>> {
        if self.pending.len() >= MAX_PENDING_REQUESTS {
            self.waiting = Some(key);
            return None;
        }
        let request = self.next;
        self.next = self.next.wrapping_add(1);
        self.pending.insert(request, key);
        Some(encode(&ToServer::DataRequest { request, key }))
    }

    /// Request `request` was answered: the frame it was for (`None`: not asked, a server
    /// error), and the waiting request's message to send now, if any.
    pub fn answered(&mut self, request: u32) -> (Option<FrameKey>, Option<Vec<u8>>) {
        let key = self.pending.remove(&request);
        let next = self.waiting.take().and_then(|k| self.ask(k));
        (key, next)
    }
}

fn encode(m: &ToServer) -> Vec<u8> {
    let mut out = Vec::new();
    m.encode(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::{LabelMap, apply_batch};
    use crate::model::Model;
    use formats::protocol::viewer::DamageNote;

    fn server(m: ToViewer<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        m.encode(&mut out);
        out
    }

    fn records(bytes: &[u8]) -> Vec<u8> {
        let count = formats::RecordIter::new(bytes, 0).count() as u32;
        server(ToViewer::Records {
            segment: 1,
            offset: 16,
            count,
            records: bytes,
        })
    }

    fn status(caught_up: bool, writers: &[u8]) -> Vec<u8> {
        server(ToViewer::Status(StreamStatus {
            caught_up,
            read: 100,
            total: 200,
            pruned: 0,
            writers: writers.to_vec(),
        }))
    }

    #[test]
    fn records_in_several_messages_build_the_model_the_bytes_build() {
        let mut log = crate::model::test_log::Log::default();
        log.worker(0, 100, "a")
            .start(0, 1, 10, 1, "request")
            .start(0, 2, 12, 1, "db")
            .end(0, 2, 15)
            .end(0, 1, 20)
            .start(0, 3, 30, 3, "request")
            .end(0, 3, 40);
        let mut direct = Model::new();
        direct.apply_bytes(&log.bytes);
        // Cut at every record boundary: the end of frame 1 arrives in a later message.
        let cut: Vec<usize> = formats::RecordIter::new(&log.bytes, 0)
            .map(|r| r.unwrap().0 as usize)
            .collect();
        let mut feed = ViewerFeed::default();
        let (mut model, mut labels) = (Model::new(), LabelMap::default());
        let mut batch = Batch::default();
        for (i, &at) in cut.iter().enumerate() {
            let end = cut.get(i + 1).copied().unwrap_or(log.bytes.len());
            let r = feed.on_message(&records(&log.bytes[at..end]), &mut batch);
            assert!(matches!(r, Ok(Incoming::Stream(s)) if !s.at_end), "{r:?}");
            assert_eq!(batch.credit, (end - at) as u64);
            apply_batch(&mut model, &batch, &mut labels).unwrap();
            batch.clear();
        }
        assert_eq!(model.frame_count(), 3);
        assert_eq!(model.closed_count(), direct.closed_count());
        for (id, name) in direct.labels().names() {
            let m = model.labels().get(name).unwrap();
            assert_eq!(model.stats().get(m).count(), direct.stats().get(id).count());
        }
        assert_eq!(feed.record_bytes(), log.bytes.len() as u64);
        // A caught-up Status ends the load.
        let r = feed.on_message(&status(true, &[0]), &mut batch).unwrap();
        assert_eq!(
            r,
            Incoming::Stream(ReadState {
                bytes_read: 100,
                total_bytes: 200,
                at_end: true
            })
        );
    }

    #[test]
    fn a_writer_missing_from_a_caught_up_status_stopped() {
        let mut log = crate::model::test_log::Log::default();
        log.worker(0, 100, "a")
            .worker(1, 101, "b")
            .start(0, 1, 10, 1, "open in a")
            .start(1, 1, 11, 1, "open in b");
        let mut feed = ViewerFeed::default();
        let mut batch = Batch::default();
        let (mut model, mut labels) = (Model::new(), LabelMap::default());
        feed.on_message(&records(&log.bytes), &mut batch).unwrap();
        feed.on_message(&status(true, &[0, 1]), &mut batch).unwrap();
        assert!(batch.stopped_workers.is_empty(), "both write");
        // Worker 1 is gone, but the stream is not caught up: it may have more records.
        feed.on_message(&status(false, &[0]), &mut batch).unwrap();
        assert!(batch.stopped_workers.is_empty());
        feed.on_message(&status(true, &[0]), &mut batch).unwrap();
        assert_eq!(batch.stopped_workers, [(1, true)]);
        apply_batch(&mut model, &batch, &mut labels).unwrap();
        assert!(model.worker(1).stopped && !model.worker(0).stopped);
        assert_eq!((model.open_count(), model.cut_count()), (1, 1));
        // A writer the server never listed (a finished log's) stopped too, not seen writing.
        let mut feed = ViewerFeed::default();
        batch.clear();
        feed.on_message(&records(&log.bytes), &mut batch).unwrap();
        feed.on_message(&status(true, &[0]), &mut batch).unwrap();
        assert_eq!(batch.stopped_workers, [(1, false)]);
    }

    #[test]
    fn damage_is_placed_after_the_newest_time_read() {
        let mut log = crate::model::test_log::Log::default();
        log.start(0, 1, 10, 1, "request").start(0, 2, 25, 1, "db");
        let mut feed = ViewerFeed::default();
        let mut batch = Batch::default();
        feed.on_message(&records(&log.bytes), &mut batch).unwrap();
        let d = server(ToViewer::Damage(DamageNote {
            offset: 4096,
            len: 100,
            file: "frames-000001.framelog".into(),
            why: "checksum mismatch".into(),
        }));
        let r = feed.on_message(&d, &mut batch).unwrap();
        let what =
            "frames-000001.framelog at byte 4096: skipped 100 damaged bytes: checksum mismatch";
        assert_eq!(r, Incoming::Damage(what.into()));
        assert_eq!(batch.damage, [(25, what.to_owned())]);
    }

    #[test]
    fn bad_messages_are_errors_not_panics() {
        let mut feed = ViewerFeed::default();
        let mut batch = Batch::default();
        for bad in [&[][..], &[18, 1, 0, 0], &[99, 1], &[16, 9, 0, 0, 0]] {
            assert!(feed.on_message(bad, &mut batch).is_err(), "{bad:?}");
        }
        let refused = server(ToViewer::Refused {
            reason: RefuseReason::Token,
            text: "wrong token".into(),
        });
        assert!(matches!(
            feed.on_message(&refused, &mut batch),
            Ok(Incoming::Refused {
                reason: RefuseReason::Token,
                ..
            })
        ));
    }

    #[test]
    fn credit_is_granted_again_only_as_records_are_applied() {
        let mut c = CreditWindow::new(1000);
        assert_eq!(c.consumed(300), None);
        let grant = c.consumed(300).expect("past half the window");
        assert_eq!(ToServer::decode(&grant).unwrap(), ToServer::Credit(600));
        assert_eq!(c.consumed(499), None);
    }

    #[test]
    fn at_most_64_requests_are_unanswered_and_the_newest_waits() {
        let mut r = DataRequests::default();
        let key = |id| FrameKey::new(1, id);
        for id in 0..64 {
            let m = r.ask(key(id)).expect("room");
            assert_eq!(
                ToServer::decode(&m).unwrap(),
                ToServer::DataRequest {
                    request: id,
                    key: key(id)
                }
            );
        }
        assert_eq!(r.ask(key(100)), None);
        assert_eq!(r.ask(key(101)), None, "only the newest waits");
        let (answered, next) = r.answered(5);
        assert_eq!(answered, Some(key(5)));
        let next = ToServer::decode(&next.expect("the waiting one goes")).unwrap();
        assert_eq!(
            next,
            ToServer::DataRequest {
                request: 64,
                key: key(101)
            }
        );
        assert_eq!(r.answered(999), (None, None), "an answer never asked for");
    }
}
