//! [`Acks`]: what the server has acknowledged of an acknowledged (StartSession v3) stream,
//! read from the stream connection by a small thread of its own (`docs/PROTOCOL.md`, Ack).
//!
//! The writer thread only writes the stream; this thread only reads it, so a server that
//! stops reading (or stops acknowledging) never blocks either side.

use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use formats::protocol::{Kind, MAX_CONTROL_LEN, decode_ack};
use framelog::remote::wire::read_message;
use parking_lot::{Condvar, Mutex};

#[derive(Default)]
struct AckState {
    /// Frame records of the stream the server has appended (its last Ack).
    records: u64,
    /// The connection closed or failed: no more Acks will come.
    closed: bool,
    /// The stream's books are closed ([`Acks::settle`]): later Acks change nothing.
    settled: bool,
}

/// The acknowledgements of one stream.
pub(crate) struct Acks {
    state: Mutex<AckState>,
    changed: Condvar,
    /// The recorder's count of records its streams got into the server's log: each Ack
    /// adds what it acknowledges anew, until the stream is settled.
    written: Arc<AtomicU64>,
}

impl Acks {
    /// Starts reading Acks from `conn` (a clone of the stream connection) on a thread;
    /// what they acknowledge is added to `written`.
    pub(crate) fn spawn(conn: TcpStream, written: Arc<AtomicU64>) -> std::io::Result<Arc<Acks>> {
        let acks = Arc::new(Acks {
            state: Mutex::new(AckState::default()),
            changed: Condvar::new(),
            written,
        });
        let for_thread = acks.clone();
        std::thread::Builder::new()
            .name("stopwatch-acks".into())
            .stack_size(64 << 10)
            .spawn(move || for_thread.read(conn))?;
        Ok(acks)
    }

    fn read(&self, mut conn: TcpStream) {
        let _ = conn.set_read_timeout(None);
        let mut payload = Vec::new();
        loop {
            let ack = match read_message(&mut conn, &mut payload, MAX_CONTROL_LEN as usize) {
                Ok(Some(Kind::Ack)) => decode_ack(&payload).ok(),
                _ => None,
            };
            let mut st = self.state.lock();
            match ack {
                Some(n) if !st.settled && n > st.records => {
                    self.written.fetch_add(n - st.records, Ordering::Relaxed);
                    st.records = n;
                }
                Some(_) => {}
                None => st.closed = true,
            }
            self.changed.notify_all();
            if st.closed {
                return;
            }
        }
    }

    /// Waits until `records` are acknowledged, the connection closes, or `timeout` passes;
    /// returns the records acknowledged.
    pub(crate) fn wait_for(&self, records: u64, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        let mut st = self.state.lock();
        while st.records < records && !st.closed {
            if self.changed.wait_until(&mut st, deadline).timed_out() {
                break;
            }
        }
        st.records
    }

    /// Closes the stream's books: returns the records acknowledged, and Acks that come
    /// later (a stopped server that resumes) are no longer counted as written (the
    /// records they name were counted as unsent).
    pub(crate) fn settle(&self) -> u64 {
        let mut st = self.state.lock();
        st.settled = true;
        st.records
    }

    /// Waits until the connection closes (every Ack the server sent has been read), at
    /// most `timeout`; returns the records acknowledged.
    pub(crate) fn wait_closed(&self, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        let mut st = self.state.lock();
        while !st.closed {
            if self.changed.wait_until(&mut st, deadline).timed_out() {
                break;
            }
        }
        st.records
    }
}
