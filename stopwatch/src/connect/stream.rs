//! [`RemoteStream`]: the session's stream connection, written by the recorder's writer thread
//! (`docs/PROTOCOL.md`, Frames, Data, End, Loss and back-pressure); and [`Outputs`], the sink
//! that sends every batch to the stream and, when the program also has a log directory, to
//! that log.

use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use formats::protocol::{
    DataEntryRef, Kind, MAX_STREAM_PAYLOAD, encode_data_body, encode_end, encode_frames,
    encode_header,
};
use formats::{Dropped, FrameKey, Record};
use parking_lot::Mutex;

use crate::clock::Clock;
use crate::error::{Error, Reporter, SinkError};
use crate::gate::Gate;
use crate::sink::{Sink, count_frame_records};

/// A write that blocks longer than this ends the stream (a stalled server never hangs the
/// program, in Block mode either).
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

struct State {
    conn: Option<TcpStream>,
    /// Message being built (reused).
    out: Vec<u8>,
    /// Records lost since the last stream began (sent as a Dropped record on the next).
    unsent: u64,
}

/// The current session's stream, if any.
pub(crate) struct RemoteStream {
    state: Mutex<State>,
    /// Records lost in all (for `Stats::unsent`).
    total_unsent: AtomicU64,
    /// Whether a log directory also gets the records (then no session is not a loss).
    records_locally: bool,
    worker: u8,
    clock: &'static Clock,
    gate: Arc<Gate>,
    reporter: Arc<Reporter>,
    addr: String,
}

impl RemoteStream {
    pub(crate) fn new(
        addr: String,
        worker: u8,
        records_locally: bool,
        gate: Arc<Gate>,
        reporter: Arc<Reporter>,
    ) -> Self {
        Self {
            state: Mutex::new(State {
                conn: None,
                out: Vec::new(),
                unsent: 0,
            }),
            total_unsent: AtomicU64::new(0),
            records_locally,
            worker,
            clock: Clock::process(),
            gate,
            reporter,
            addr,
        }
    }

    /// Records the streams could not carry, in all.
    pub(crate) fn unsent(&self) -> u64 {
        self.total_unsent.load(Ordering::Relaxed)
    }

    /// Whether a session streams now.
    pub(crate) fn is_streaming(&self) -> bool {
        self.state.lock().conn.is_some()
    }

    /// Makes `conn` the session's stream (ending a previous one); the loss since the last
    /// stream goes first, as a Dropped record.
    pub(crate) fn start(&self, conn: TcpStream) {
        let _ = conn.set_write_timeout(Some(WRITE_TIMEOUT));
        let mut st = self.state.lock();
        end_stream(&mut st);
        st.conn = Some(conn);
        if st.unsent > 0 {
            let mut rec = Vec::new();
            Record::Dropped(Dropped {
                worker: self.worker,
                timestamp: self.clock.now(),
                count: st.unsent,
            })
            .encode_to_vec(&mut rec);
            st.unsent = 0;
            self.write_frames(&mut st, &rec);
        }
    }

    /// Ends the stream with End (StopSession, or the recorder shutting down).
    pub(crate) fn finish(&self) {
        end_stream(&mut self.state.lock());
    }

    fn lose(&self, st: &mut State, records: u64) {
        st.unsent += records;
        self.total_unsent.fetch_add(records, Ordering::Relaxed);
    }

    /// The stream failed: drop it, count what it held, stop recording if nothing else gets
    /// the records.
    fn fail(&self, st: &mut State, records: u64, e: &std::io::Error) {
        if let Some(c) = st.conn.take() {
            let _ = c.shutdown(Shutdown::Both);
        }
        self.lose(st, records);
        if !self.records_locally {
            self.gate.close(true);
        }
        self.reporter.report(Error::Remote(format!(
            "the stream to {} failed ({e}); {records} records unsent, the program runs on and reconnects",
            self.addr
        )));
    }

    fn write_frames(&self, st: &mut State, records: &[u8]) {
        if st.conn.is_none() {
            if !self.records_locally {
                self.lose(st, count_frame_records(records));
            }
            return;
        }
        let mut result = Ok(());
        let mut rest = records;
        while !rest.is_empty() && result.is_ok() {
            let cut = cut_at_record(rest, MAX_STREAM_PAYLOAD);
            st.out.clear();
            encode_frames(&rest[..cut], &mut st.out);
            rest = &rest[cut..];
            if let Some(c) = st.conn.as_mut() {
                result = c.write_all(&st.out);
            }
        }
        if let Err(e) = result {
            self.fail(st, count_frame_records(records), &e);
        }
    }

    fn write_data(&self, st: &mut State, entries: &[(FrameKey, Vec<u8>)]) {
        if st.conn.is_none() {
            return;
        }
        let mut result = Ok(());
        let mut i = 0;
        while i < entries.len() && result.is_ok() {
            // As many entries as fit one message (a single oversized one goes alone).
            let mut size = 4;
            let mut j = i;
            while j < entries.len() {
                let add = 9 + entries[j].1.len();
                if j > i && size + add > MAX_STREAM_PAYLOAD {
                    break;
                }
                size += add;
                j += 1;
            }
            let mut body = Vec::with_capacity(size);
            encode_data_body(
                entries[i..j].iter().map(|(k, doc)| DataEntryRef {
                    worker: k.worker,
                    id: k.id,
                    doc,
                }),
                &mut body,
            );
            i = j;
            if body.len() > MAX_STREAM_PAYLOAD {
                continue; // one document over 8 MiB: never sent (the server would refuse it)
            }
            st.out.clear();
            encode_header(Kind::Data, body.len(), &mut st.out);
            st.out.extend_from_slice(&body);
            if let Some(c) = st.conn.as_mut() {
                result = c.write_all(&st.out);
            }
        }
        if let Err(e) = result {
            self.fail(st, 0, &e);
        }
    }
}

fn end_stream(st: &mut State) {
    if let Some(mut c) = st.conn.take() {
        let mut end = Vec::new();
        encode_end(st.unsent, &mut end);
        let _ = c.write_all(&end);
        let _ = c.flush();
        let _ = c.shutdown(Shutdown::Write);
    }
}

/// The largest prefix of whole records of `bytes` not over `max` (at least one record).
fn cut_at_record(bytes: &[u8], max: usize) -> usize {
    if bytes.len() <= max {
        return bytes.len();
    }
    let mut at = 0;
    while let Some(len) = formats::record_len(&bytes[at..]) {
        if at > 0 && at + len > max {
            break;
        }
        at += len;
        if at >= bytes.len() {
            break;
        }
    }
    at.clamp(1, bytes.len())
}

/// The sink of a connecting recorder: the stream, plus the log directory if there is one.
pub(crate) struct Outputs {
    pub(crate) local: Option<Arc<dyn Sink>>,
    pub(crate) remote: Arc<RemoteStream>,
    /// Ids of a recorder without a log (its keys are rewritten by the server).
    next_id: AtomicU32,
}

impl Outputs {
    pub(crate) fn new(local: Option<Arc<dyn Sink>>, remote: Arc<RemoteStream>) -> Self {
        Self {
            local,
            remote,
            next_id: AtomicU32::new(1),
        }
    }
}

impl Sink for Outputs {
    fn worker(&self) -> u8 {
        self.local.as_ref().map_or(0, |l| l.worker())
    }

    fn reserve_ids(&self, count: u32) -> Result<u32, SinkError> {
        match &self.local {
            Some(l) => l.reserve_ids(count),
            None => Ok(self.next_id.fetch_add(count, Ordering::Relaxed)),
        }
    }

    fn append_frames(&self, records: &[u8]) -> Result<(), SinkError> {
        {
            let mut st = self.remote.state.lock();
            self.remote.write_frames(&mut st, records);
        }
        match &self.local {
            Some(l) => l.append_frames(records),
            None => Ok(()),
        }
    }

    fn append_data(&self, entries: &[(FrameKey, Vec<u8>)]) -> Result<(), SinkError> {
        {
            let mut st = self.remote.state.lock();
            self.remote.write_data(&mut st, entries);
        }
        match &self.local {
            Some(l) => l.append_data(entries),
            None => Ok(()),
        }
    }

    fn close(&self) {
        self.remote.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use formats::{FrameEnd, RecordIter};

    #[test]
    fn cuts_fall_on_record_boundaries_under_the_limit() {
        let mut bytes = Vec::new();
        for id in 0..100 {
            Record::End(FrameEnd {
                id,
                worker: 0,
                timestamp: 1,
            })
            .encode_to_vec(&mut bytes);
        }
        let mut rest = &bytes[..];
        let mut n = 0;
        while !rest.is_empty() {
            let cut = cut_at_record(rest, 100);
            assert!(cut <= 100 && cut.is_multiple_of(formats::FRAME_END_LEN));
            n += RecordIter::new(&rest[..cut], 0).count();
            rest = &rest[cut..];
        }
        assert_eq!(n, 100);
    }
}
