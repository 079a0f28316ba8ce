//! [`RemoteStream`]: the session's stream connection, written by the recorder's writer thread
//! (`docs/PROTOCOL.md`, Frames, Data, End, Loss and back-pressure); and [`Outputs`], the sink
//! that sends every batch to the stream and, when the program also has a log directory, to
//! that log.
//!
//! Accounting, the stream's books: every frame-log record the writer hands over is
//! *written* (the server acknowledged it in its log), held for the next session, or counted as
//! *unsent*, never dropped silently; with or without a log directory beside the stream, whose
//! books [`Outputs`] keeps apart. Until a session starts (and between sessions) records are
//! held, up to the pool's size, and sent first when one starts; past that, and at shutdown for
//! what is still held, they count as unsent.

use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use formats::downgrade::Strip;
use formats::protocol::{
    ACKED_START_SESSION, DataEntryRef, Kind, MAX_STREAM_PAYLOAD, MESSAGES_START_SESSION,
    PARENTS_START_SESSION, POLLS_START_SESSION, encode_data_body, encode_end, encode_frames,
    encode_header,
};
use formats::{Dropped, FrameKey, Record};
use parking_lot::{Condvar, Mutex};

use super::acks::Acks;
use crate::clock::Clock;
use crate::error::{Error, Reporter, SinkError};
use crate::sink::{Sink, count_frame_records};

/// The stall limit: a batch the server has not taken whole within this ends the stream (its
/// records count as unsent), and a Block-mode producer of a streaming recorder parks at most
/// this long for a buffer before it counts a drop. A stalled server never hangs a program.
pub const STALL_LIMIT: Duration = Duration::from_secs(5);

/// The stream of the running session.
struct Live {
    conn: TcpStream,
    /// Frame records written to it whole.
    sent: u64,
    /// What the server acknowledged (v3 sessions).
    acks: Option<Arc<Acks>>,
    /// What the session cannot take: before v4 every FrameStart with parent is sent as the
    /// type 0 start with the same fields (an older server would skip them); before v5 every
    /// message goes with `id` and `context` 0 and frame allocations are not sent (an older
    /// server would not rewrite their ids).
    strip: Strip,
}

impl Live {
    /// Records sent that the server has not acknowledged (all are in doubt without Acks:
    /// none are counted then, as before v3).
    fn unacknowledged(&self, wait: Duration) -> u64 {
        match &self.acks {
            Some(a) => {
                a.wait_closed(wait);
                self.sent.saturating_sub(a.settle())
            }
            None => 0,
        }
    }
}

struct State {
    conn: Option<Live>,
    /// Message being built (reused).
    out: Vec<u8>,
    /// Records stripped for a session before v5 (reused).
    stripped: Vec<u8>,
    /// Records lost since the last stream began (sent as a Dropped record on the next).
    unsent: u64,
    /// What the Dropped records among records counted as unsent said (they never reached
    /// the server's log either): added to that Dropped record.
    owed_dropped: u64,
    /// Whole records waiting for a session (streaming-only recorders).
    held: Vec<u8>,
    held_records: u64,
    /// Frame data waiting for a session, and its size.
    held_data: Vec<(FrameKey, Vec<u8>)>,
    held_data_bytes: usize,
    /// Until the program learns whether a session starts (it connected and the server
    /// answered, or it could not connect), a Block-mode writer waits for it when the hold is
    /// full rather than count records as unsent.
    undecided: bool,
    /// Shut down: no stream starts again.
    finished: bool,
}

/// The current session's stream, if any.
pub(crate) struct RemoteStream {
    state: Mutex<State>,
    /// Signalled when a session starts, the first decision is known, or the stream finishes.
    changed: Condvar,
    /// Records lost in all (for `Stats::unsent`).
    total_unsent: AtomicU64,
    /// Records in the server's log, in all: acknowledged (v3 and later), or written whole
    /// to the socket (v1, v2).
    written: Arc<AtomicU64>,
    /// Frame-data updates lost in all (counted with `Stats::dropped_data`).
    unsent_data: AtomicU64,
    /// Bytes of records (and, separately, of frame data) held while no session runs.
    hold_bytes: usize,
    /// Whether the program's own mode is Block (it waits for the first decision).
    block: bool,
    worker: u8,
    clock: &'static Clock,
    reporter: Arc<Reporter>,
    addr: String,
}

/// A recorder's stream settings.
pub(crate) struct StreamConfig {
    pub(crate) addr: String,
    pub(crate) worker: u8,
    pub(crate) hold_bytes: usize,
    pub(crate) block: bool,
}

impl RemoteStream {
    pub(crate) fn new(cfg: StreamConfig, reporter: Arc<Reporter>) -> Self {
        Self {
            state: Mutex::new(State {
                conn: None,
                out: Vec::new(),
                stripped: Vec::new(),
                unsent: 0,
                owed_dropped: 0,
                held: Vec::new(),
                held_records: 0,
                held_data: Vec::new(),
                held_data_bytes: 0,
                undecided: true,
                finished: false,
            }),
            changed: Condvar::new(),
            total_unsent: AtomicU64::new(0),
            written: Arc::new(AtomicU64::new(0)),
            unsent_data: AtomicU64::new(0),
            hold_bytes: cfg.hold_bytes,
            block: cfg.block,
            worker: cfg.worker,
            clock: Clock::process(),
            reporter,
            addr: cfg.addr,
        }
    }

    /// Records the streams could not carry, in all.
    pub(crate) fn unsent(&self) -> u64 {
        self.total_unsent.load(Ordering::Relaxed)
    }

    /// Records the streams got into the server's log, in all.
    pub(crate) fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Frame-data updates the streams could not carry, in all.
    pub(crate) fn unsent_data(&self) -> u64 {
        self.unsent_data.load(Ordering::Relaxed)
    }

    /// Whether a session streams now.
    pub(crate) fn is_streaming(&self) -> bool {
        self.state.lock().conn.is_some()
    }

    /// The program now knows whether a session starts soon (the server answered with
    /// something else, refused it, or cannot be reached): a waiting writer goes on.
    pub(crate) fn decided(&self) {
        let mut st = self.state.lock();
        if st.undecided {
            st.undecided = false;
            self.changed.notify_all();
        }
    }

    /// Waits, at most `timeout`, until the program knows whether a session starts.
    pub(crate) fn wait_decided(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut st = self.state.lock();
        while st.undecided && !st.finished {
            if self.changed.wait_until(&mut st, deadline).timed_out() {
                return;
            }
        }
    }

    /// Makes `conn` the session's stream (ending a previous one), for a session started with
    /// StartSession `version`: the server acknowledges it from v3, takes parents from v4,
    /// messages naming their frame and frame allocations from v5, frame polls and slow polls
    /// from v6.
    /// The loss since the last stream goes first, as a Dropped record, then what was held for
    /// the session. False if the recorder is shutting down (no stream starts then).
    pub(crate) fn start(&self, conn: TcpStream, version: u8) -> bool {
        let acked = version >= ACKED_START_SESSION;
        let mut st = self.state.lock();
        if st.finished {
            return false;
        }
        self.end_stream(&mut st);
        let acks = if acked {
            match conn
                .try_clone()
                .and_then(|c| Acks::spawn(c, self.written.clone()))
            {
                Ok(a) => Some(a),
                Err(_) => return false,
            }
        } else {
            None
        };
        st.conn = Some(Live {
            conn,
            sent: 0,
            acks,
            strip: Strip {
                parents: version < PARENTS_START_SESSION,
                frame_refs: version < MESSAGES_START_SESSION,
                polls: version < POLLS_START_SESSION,
            },
        });
        st.undecided = false;
        self.changed.notify_all();
        let lost = st.unsent + st.owed_dropped;
        if lost > 0 {
            let mut rec = Vec::new();
            Record::Dropped(Dropped {
                worker: self.worker,
                timestamp: self.clock.now(),
                count: lost,
            })
            .encode_to_vec(&mut rec);
            self.send_frames(&mut st, &rec, 0);
        }
        if st.conn.is_some() {
            st.unsent = 0;
            st.owed_dropped = 0;
        }
        let held = std::mem::take(&mut st.held);
        let held_records = std::mem::take(&mut st.held_records);
        if !held.is_empty() {
            self.send_frames(&mut st, &held, held_records);
        }
        let held_data = std::mem::take(&mut st.held_data);
        st.held_data_bytes = 0;
        if !held_data.is_empty() {
            self.write_data(&mut st, held_data);
        }
        true
    }

    /// Ends the stream with End (StopSession).
    pub(crate) fn end(&self) {
        self.end_stream(&mut self.state.lock());
    }

    /// Ends the stream for good (the recorder shuts down): what is still held for a session
    /// that never came counts as unsent, and the report says so.
    pub(crate) fn finish(&self) {
        let mut st = self.state.lock();
        st.finished = true;
        st.undecided = false;
        self.changed.notify_all();
        self.end_stream(&mut st);
        let held = std::mem::take(&mut st.held_records);
        st.held.clear();
        let held_data = st.held_data.len() as u64;
        st.held_data.clear();
        st.held_data_bytes = 0;
        drop(st);
        if held > 0 || held_data > 0 {
            self.lose_records(held);
            self.unsent_data.fetch_add(held_data, Ordering::Relaxed);
        }
    }

    /// The server's address.
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    fn lose_records(&self, records: u64) {
        self.total_unsent.fetch_add(records, Ordering::Relaxed);
    }

    /// The stream failed: drop it and count what it held (the failed write's records, and
    /// on an acknowledged stream every record the server did not acknowledge).
    fn fail(&self, st: &mut State, records: u64, e: &std::io::Error) {
        let mut lost = records;
        if let Some(live) = st.conn.take() {
            // Half-close first: the server (if it lives) sees the end and its last Acks
            // arrive; a dead one's connection closes at once.
            let _ = live.conn.shutdown(Shutdown::Write);
            lost += live.unacknowledged(ACK_WAIT_AFTER_FAILURE);
            let _ = live.conn.shutdown(Shutdown::Both);
        }
        st.unsent += lost;
        self.lose_records(lost);
        self.reporter.report(Error::Remote(format!(
            "the stream to {} failed ({e}); its records are counted as unsent from now on (Stats::unsent), the program runs on and reconnects",
            self.addr
        )));
    }

    /// Sends `records` (`n` frame records) on the stream, or holds or counts them; the same
    /// with or without a log directory beside the stream.
    fn write_frames(&self, st: &mut parking_lot::MutexGuard<'_, State>, records: &[u8], n: u64) {
        loop {
            if st.conn.is_some() {
                self.send_frames(st, records, n);
                return;
            }
            if st.held.len() + records.len() <= self.hold_bytes && !st.finished {
                st.held.extend_from_slice(records);
                st.held_records += n;
                return;
            }
            // The hold is full. A Block-mode program that does not know yet whether a
            // session starts waits for that (at most the stall limit); otherwise the records
            // count as unsent.
            if self.block && st.undecided && !st.finished {
                let deadline = Instant::now() + STALL_LIMIT;
                while st.undecided && st.conn.is_none() && !st.finished {
                    if self.changed.wait_until(st, deadline).timed_out() {
                        st.undecided = false;
                    }
                }
                continue;
            }
            st.unsent += n;
            st.owed_dropped += dropped_in(records);
            self.lose_records(n);
            return;
        }
    }

    /// Writes records on the stream in messages of at most 8 MiB, the whole call within the
    /// stall limit; on failure the stream ends and `count` records are unsent. A session
    /// before v4 gets them with parents stripped, one before v5 without the frames of
    /// messages and without frame allocations (the same frame records, the same count).
    fn send_frames(&self, st: &mut State, records: &[u8], count: u64) {
        let strip = st.conn.as_ref().map_or(Strip::default(), |l| l.strip);
        if strip == Strip::default() || !formats::downgrade::needs_strip(records, strip) {
            return self.send_frames_as_is(st, records, count);
        }
        let mut stripped = std::mem::take(&mut st.stripped);
        stripped.clear();
        match formats::downgrade::strip_records(records, strip, &mut stripped) {
            Ok(()) => self.send_frames_as_is(st, &stripped, count),
            Err(e) => {
                // Never happens with the recorder's own records; counted, not sent whole.
                st.unsent += count;
                self.lose_records(count);
                self.reporter.report(Error::Remote(format!(
                    "{count} records for {} were not sent: {e}",
                    self.addr
                )));
            }
        }
        if stripped.capacity() <= STRIPPED_KEEP {
            st.stripped = stripped;
        }
    }

    /// [`RemoteStream::send_frames`] of records the session takes as they are.
    fn send_frames_as_is(&self, st: &mut State, records: &[u8], count: u64) {
        let deadline = Instant::now() + STALL_LIMIT;
        let mut rest = records;
        while !rest.is_empty() {
            let cut = cut_at_record(rest, MAX_STREAM_PAYLOAD);
            // One message in the common case; records are counted per message otherwise.
            let n = if cut == records.len() {
                count
            } else {
                count_frame_records(&rest[..cut])
            };
            st.out.clear();
            encode_frames(&rest[..cut], &mut st.out);
            rest = &rest[cut..];
            let State { conn, out, .. } = st;
            let Some(live) = conn.as_mut() else {
                return;
            };
            match write_all_by(&mut live.conn, out, deadline) {
                Ok(()) => {
                    live.sent += n;
                    if live.acks.is_none() {
                        // Unacknowledged (v1, v2): what was written whole counts as written.
                        self.written.fetch_add(n, Ordering::Relaxed);
                    }
                }
                Err(e) => {
                    let left = n + count_frame_records(rest);
                    self.fail(st, left, &e);
                    return;
                }
            }
        }
    }

    fn add_data(&self, st: &mut State, entries: &[(FrameKey, Vec<u8>)]) {
        if st.conn.is_some() {
            self.write_data(st, entries.to_vec());
            return;
        }
        for (key, doc) in entries {
            if st.held_data_bytes + doc.len() <= self.hold_bytes && !st.finished {
                st.held_data_bytes += doc.len();
                st.held_data.push((*key, doc.clone()));
            } else {
                self.unsent_data.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn write_data(&self, st: &mut State, entries: Vec<(FrameKey, Vec<u8>)>) {
        let deadline = Instant::now() + STALL_LIMIT;
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
            if body.len() > MAX_STREAM_PAYLOAD {
                // One document over 8 MiB: never sent (the server would refuse it).
                self.unsent_data
                    .fetch_add((j - i) as u64, Ordering::Relaxed);
                i = j;
                continue;
            }
            st.out.clear();
            encode_header(Kind::Data, body.len(), &mut st.out);
            st.out.extend_from_slice(&body);
            if let Some(live) = st.conn.as_mut() {
                result = write_all_by(&mut live.conn, &st.out, deadline);
            }
            if result.is_ok() {
                i = j;
            }
        }
        if let Err(e) = result {
            self.unsent_data
                .fetch_add((entries.len() - i) as u64, Ordering::Relaxed);
            self.fail(st, 0, &e);
        }
    }
}

impl RemoteStream {
    /// Ends the stream with End and waits (at most the stall limit) for the server to
    /// acknowledge everything; what it does not acknowledge counts as unsent.
    fn end_stream(&self, st: &mut State) {
        let Some(mut live) = st.conn.take() else {
            return;
        };
        let mut end = Vec::new();
        encode_end(st.unsent, &mut end);
        if write_all_by(&mut live.conn, &end, Instant::now() + STALL_LIMIT).is_ok() {
            st.unsent = 0;
        }
        let _ = live.conn.flush();
        let lost = match &live.acks {
            Some(a) => {
                a.wait_for(live.sent, STALL_LIMIT);
                live.sent.saturating_sub(a.settle())
            }
            None => 0,
        };
        let _ = live.conn.shutdown(Shutdown::Both);
        if lost > 0 {
            st.unsent += lost;
            self.lose_records(lost);
            self.reporter.report(Error::Remote(format!(
                "{} did not acknowledge {lost} records at the end of the stream (counted as unsent)",
                self.addr
            )));
        }
    }
}

/// The stripping buffer kept between messages, at most (a larger one, made for a big held
/// backlog, is freed).
const STRIPPED_KEEP: usize = 4 << 20;

/// How long a failed stream waits for the last Acks the server sent (a dead server's
/// connection closes at once; a stopped one's does not).
const ACK_WAIT_AFTER_FAILURE: Duration = Duration::from_secs(1);

/// Writes all of `bytes` unless `deadline` passes first (a server that reads slowly or not
/// at all ends the stream instead of holding the program).
fn write_all_by(conn: &mut TcpStream, mut bytes: &[u8], deadline: Instant) -> std::io::Result<()> {
    use std::io::ErrorKind;
    while !bytes.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                ErrorKind::TimedOut,
                format!(
                    "the server took less than the data within the {} s stall limit",
                    STALL_LIMIT.as_secs()
                ),
            ));
        }
        conn.set_write_timeout(Some(left.max(Duration::from_millis(1))))?;
        match conn.write(bytes) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::Interrupted | ErrorKind::WouldBlock | ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
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
///
/// Each keeps its own books. A directory that fails (full disk, removed) stops getting
/// records, which are counted as dropped for it alone; the stream goes on (and the other way
/// round: a failed stream holds or counts its records as unsent, the directory goes on).
pub(crate) struct Outputs {
    pub(crate) local: Option<Arc<dyn Sink>>,
    pub(crate) remote: Arc<RemoteStream>,
    /// Ids of a recorder without a log (its keys are rewritten by the server).
    next_id: AtomicU32,
    /// Frame records the directory took, and the ones it lost after failing.
    local_written: AtomicU64,
    local_lost: AtomicU64,
    local_lost_data: AtomicU64,
    local_failed: AtomicBool,
}

/// The books of the directory beside a stream.
#[derive(Clone, Copy)]
pub(crate) struct LocalBooks {
    pub(crate) written: u64,
    pub(crate) lost: u64,
    pub(crate) lost_data: u64,
    pub(crate) failed: bool,
}

impl Outputs {
    pub(crate) fn new(local: Option<Arc<dyn Sink>>, remote: Arc<RemoteStream>) -> Self {
        Self {
            local,
            remote,
            next_id: AtomicU32::new(1),
            local_written: AtomicU64::new(0),
            local_lost: AtomicU64::new(0),
            local_lost_data: AtomicU64::new(0),
            local_failed: AtomicBool::new(false),
        }
    }

    /// The directory's books.
    pub(crate) fn local_books(&self) -> LocalBooks {
        LocalBooks {
            written: self.local_written.load(Ordering::Relaxed),
            lost: self.local_lost.load(Ordering::Relaxed),
            lost_data: self.local_lost_data.load(Ordering::Relaxed),
            failed: self.local_failed.load(Ordering::Relaxed),
        }
    }

    /// Appends `n` frame records to the directory with `append`, keeping its books: after
    /// its first error (reported once) it gets nothing more and its records are counted.
    fn to_local(
        &self,
        n: u64,
        append: impl FnOnce(&dyn Sink) -> Result<(), SinkError>,
    ) -> Result<(), SinkError> {
        let Some(local) = &self.local else {
            return Ok(());
        };
        if self.local_failed.load(Ordering::Relaxed) {
            self.local_lost.fetch_add(n, Ordering::Relaxed);
            return Ok(());
        }
        match append(&**local) {
            Ok(()) => {
                self.local_written.fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => {
                self.local_failed.store(true, Ordering::Relaxed);
                self.local_lost.fetch_add(n, Ordering::Relaxed);
                self.remote.reporter.report(Error::Write(
                    format!("{e} (the stream to {} goes on)", self.remote.addr).into(),
                ));
            }
        }
        Ok(())
    }

    fn to_remote(&self, records: &[u8], n: u64) {
        let mut st = self.remote.state.lock();
        self.remote.write_frames(&mut st, records, n);
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
        let n = count_frame_records(records);
        self.to_remote(records, n);
        self.to_local(n, |l| l.append_frames(records))
    }

    fn append_batches(&self, batches: &[u8]) -> Result<(), SinkError> {
        // The session protocol carries plain records (`docs/PROTOCOL.md`): the stream gets
        // them unframed; the local log takes the batches as they are.
        let records = crate::sink::unframe(batches)?;
        let n = count_frame_records(&records);
        self.to_remote(&records, n);
        self.to_local(n, |l| l.append_batches(batches))
    }

    fn append_data(&self, entries: &[(FrameKey, Vec<u8>)]) -> Result<(), SinkError> {
        {
            let mut st = self.remote.state.lock();
            self.remote.add_data(&mut st, entries);
        }
        let Some(local) = &self.local else {
            return Ok(());
        };
        if self.local_failed.load(Ordering::Relaxed) {
            self.local_lost_data
                .fetch_add(entries.len() as u64, Ordering::Relaxed);
        } else if let Err(e) = local.append_data(entries) {
            self.local_failed.store(true, Ordering::Relaxed);
            self.local_lost_data
                .fetch_add(entries.len() as u64, Ordering::Relaxed);
            self.remote.reporter.report(Error::Write(e));
        }
        Ok(())
    }

    fn close(&self) {
        if let Some(l) = &self.local {
            l.close();
        }
        self.remote.finish();
    }

    fn prune(&self) -> Result<(), SinkError> {
        match &self.local {
            Some(l) if !self.local_failed.load(Ordering::Relaxed) => l.prune(),
            _ => Ok(()),
        }
    }
}

/// The sum of the counts of the Dropped records among whole encoded records.
fn dropped_in(records: &[u8]) -> u64 {
    formats::RecordIter::new(records, 0)
        .filter_map(|r| match r {
            Ok((_, Record::Dropped(d))) => Some(d.count),
            _ => None,
        })
        .sum()
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
