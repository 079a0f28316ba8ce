//! Errors and the once-per-kind error reporter.

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};

use parking_lot::Mutex;

/// An error from a sink (the log writer), type-erased so tests can plug in their own sinks.
pub type SinkError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What can go wrong in the stopwatch.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The builder was given neither a log directory nor a server.
    #[error(
        "no log directory or server given: call .dir(..) or .connect(..) on the builder, or set FRAMELOG_CONNECT"
    )]
    NoDir,
    /// `FRAMELOG_CONNECT` (or the builder's connect string) does not parse.
    #[error(
        "FRAMELOG_CONNECT={value:?}: {reason} (expected HOST:PORT[,suspend][,timeout=30s][,session=v3])"
    )]
    ConnectSyntax {
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The server cannot be reached, refused this program, or its stream failed; the program
    /// keeps running and retries in the background.
    #[error("remote session: {0}")]
    Remote(String),
    /// At exit, records a streaming program recorded never reached a server (no session
    /// took them, or a stream failed): the count, as `Stats::unsent` has it, and each
    /// output's books.
    #[error(
        "{records} records and {data} frame-data updates were not sent to {addr} (no session took them, or a stream failed); counted as unsent. {}",
        books(.addr, .stream, .dir)
    )]
    NotSent {
        /// The server's address.
        addr: String,
        /// Frame records (starts and ends) not sent, in all.
        records: u64,
        /// Frame-data updates not sent, in all.
        data: u64,
        /// The stream's books.
        stream: crate::SinkStats,
        /// The log directory's books, if the program has one.
        dir: Option<crate::SinkStats>,
    },
    /// At shutdown, a Block-mode recorder had dropped records (a stalled server, a failed
    /// writer, threads still recording as it shut down): the count, as `Stats::dropped`
    /// has it (the logs hold Dropped records for what could be written).
    #[error(
        "{records} records were dropped in Block mode (a stalled server or failed log, or threads still recording at shutdown); the logs hold Dropped records for them where they could be written"
    )]
    DroppedInBlockMode {
        /// Frame records (starts and ends) dropped, in all.
        records: u64,
    },
    /// Suspended at start-up, no server resumed the program in time; it runs on.
    #[error(
        "suspended for {waited:?} waiting for {addr} to resume the program; running without it"
    )]
    SuspendTimeout {
        /// The server's address.
        addr: String,
        /// How long the program waited.
        waited: std::time::Duration,
    },
    /// The log could not be opened.
    #[error("opening the log: {0}")]
    Open(#[source] SinkError),
    /// `install` was called while another stopwatch is installed.
    #[error("a global stopwatch is already installed")]
    AlreadyInstalled,
    /// The writer thread could not be started.
    #[error("starting the writer thread: {0}")]
    Spawn(#[source] std::io::Error),
    /// Writing to the log failed; from now on records are counted as dropped.
    #[error("writing the log failed, later records are counted as dropped: {0}")]
    Write(#[source] SinkError),
    /// Reserving frame ids in the log failed (ids continue unpersisted).
    #[error("reserving frame ids failed, ids continue unpersisted: {0}")]
    ReserveIds(#[source] SinkError),
    /// A value given to `Frame::data` could not be encoded as BSON (that update is dropped).
    #[error("frame data could not be encoded as BSON: {0}")]
    Data(String),
    /// The writer thread panicked (a bug); records are counted as dropped from then on.
    #[error("the writer thread panicked; later records are counted as dropped")]
    WriterPanicked,
    /// The log holds damaged bytes (not a torn tail): they are left untouched and recording
    /// goes on in a new segment. `framelog check` lists the damage, `framelog recover` copies
    /// what is valid.
    #[error(
        "the log is damaged; the damaged segment is left untouched and recording continues in a new one: {0}"
    )]
    Damaged(#[source] SinkError),
    /// Deleting the log's oldest segments (its retention limits) failed; recording goes on and
    /// the next attempt retries.
    #[error("applying the log's retention limits: {0}")]
    Retention(#[source] SinkError),
}

impl Error {
    fn kind_bit(&self) -> u16 {
        match self {
            Error::NoDir
            | Error::ConnectSyntax { .. }
            | Error::Open(_)
            | Error::AlreadyInstalled
            | Error::Spawn(_) => 1,
            Error::Write(_) => 2,
            Error::ReserveIds(_) => 4,
            Error::Data(_) => 8,
            Error::WriterPanicked => 16,
            Error::Damaged(_) => 32,
            Error::Remote(_) => 64,
            Error::SuspendTimeout { .. } => 128,
            Error::NotSent { .. } => 256,
            Error::Retention(_) => 512,
            Error::DroppedInBlockMode { .. } => 1024,
        }
    }
}

/// Each output's books, for the line a program prints at exit.
fn books(addr: &str, stream: &crate::SinkStats, dir: &Option<crate::SinkStats>) -> String {
    let mut line = format!(
        "Of {} records recorded, {addr} got {} ({} dropped, {} unsent)",
        stream.recorded(),
        stream.written,
        stream.dropped,
        stream.unsent
    );
    if let Some(d) = dir {
        line += &format!(
            "; the log directory got {} ({} dropped)",
            d.written, d.dropped
        );
    }
    line
}

/// The callback errors are reported through.
pub type ErrorCallback = Arc<dyn Fn(&Error) + Send + Sync + 'static>;

/// Reports each kind of error once, so a dead disk does not flood the application's stderr.
///
/// Reporting and calling the callback are two steps: [`Reporter::report`] only queues the
/// error (it may be called with any of our locks held), and [`Reporter::deliver`] calls the
/// callback for what is queued. `deliver` runs only where no lock of ours is held and no
/// thread-local state is borrowed (the writer thread's loop, the connect thread's loop,
/// `build` and shutdown), so a callback may re-enter the API: start frames, read stats,
/// even drop the last handle of the recorder.
pub(crate) struct Reporter {
    seen: AtomicU16,
    pending: Mutex<Vec<Error>>,
    callback: ErrorCallback,
}

impl Reporter {
    /// A reporter calling `callback`, or printing one line to stderr when `None`.
    pub(crate) fn new(callback: Option<ErrorCallback>) -> Reporter {
        Reporter {
            seen: AtomicU16::new(0),
            pending: Mutex::new(Vec::new()),
            callback: callback.unwrap_or_else(|| Arc::new(|e| eprintln!("stopwatch: {e}"))),
        }
    }

    /// Queues `e` for the callback unless an error of its kind was reported before.
    pub(crate) fn report(&self, e: Error) {
        let bit = e.kind_bit();
        if self.seen.fetch_or(bit, Ordering::AcqRel) & bit == 0 {
            self.pending.lock().push(e);
        }
    }

    /// Calls the callback for every queued error. The caller holds no lock of ours.
    pub(crate) fn deliver(&self) {
        loop {
            // The lock is released before the callback runs (it may report again).
            let queued = std::mem::take(&mut *self.pending.lock());
            if queued.is_empty() {
                return;
            }
            for e in queued {
                // A panicking callback must not take the writer thread (or the app) down.
                let cb = &self.callback;
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(&e)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn each_kind_is_reported_once() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        let r = Reporter::new(Some(Arc::new(move |e: &Error| {
            g.lock().unwrap().push(e.to_string())
        })));
        for _ in 0..3 {
            r.report(Error::Write("disk full".into()));
            r.report(Error::Data("bad".into()));
        }
        assert!(got.lock().unwrap().is_empty(), "queued, not called");
        r.deliver();
        let got = got.lock().unwrap();
        assert_eq!(got.len(), 2);
        assert!(got[0].contains("disk full"));
        assert!(got[1].contains("bad"));
    }
}
