//! The program's diagnostics thread (connect mode, `docs/PROTOCOL.md`, Connections): connect,
//! Advertise, wait for a command, answer it, connect again. It retries with back-off and never
//! makes the application wait, except a suspended `install()` (bounded by its timeout).
//! Every connection is followed by a back-off pause, and shutdown interrupts the thread at
//! once (it shuts the connection being served).

use std::io::Write;
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use formats::protocol::{
    Advertise, Command, Kind, MAX_CONTROL_LEN, PROTOCOL_VERSION, RESUME, RefuseReason, Refused,
    Reply, START_SESSION, STOP_SESSION, SamplingSetting, SessionSettings, Status, printable,
};
use framelog::remote::wire::{is_timeout, read_message};
use parking_lot::{Condvar, Mutex};

use super::config::ConnectConfig;
use super::stream::RemoteStream;
use crate::error::Error;
use crate::inner::Inner;
use crate::pool::BufferingMode;
use crate::sampling::{Sampler, Sampling};

/// First retry delay; doubles up to `MAX_BACKOFF`.
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How often a thread waiting for a command checks for shutdown.
const POLL: Duration = Duration::from_millis(100);
/// How long a command may take to arrive once its first byte has.
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long StopSession waits for the writer to send what was recorded.
const STOP_FLUSH: Duration = Duration::from_secs(5);

/// Who the program is, as it advertises.
pub(crate) struct Identity {
    pub(crate) token: String,
    pub(crate) name: String,
    pub(crate) instance: u64,
    /// Highest StartSession version understood (`LATEST_START_SESSION`; lower to act as an
    /// older program).
    pub(crate) start_session_version: u8,
}

/// The suspend latch: released by Resume or by giving up waiting.
struct Latch {
    released: Mutex<bool>,
    cv: Condvar,
}

/// The program's settings before any session changed them.
#[derive(Clone, Copy)]
struct Own {
    mode: BufferingMode,
    buffers: usize,
}

/// What the connect thread and the recorder share.
struct Shared {
    latch: Latch,
    /// Set when the recorder shuts down: no command is answered any more.
    stopping: AtomicBool,
    /// The control connection being served (shut down to interrupt the thread at once).
    current: Mutex<Option<TcpStream>>,
}

/// The running diagnostics thread of one recorder.
pub(crate) struct Connector {
    stop: Sender<()>,
    shared: Arc<Shared>,
    handle: Mutex<Option<JoinHandle<()>>>,
    pub(crate) remote: Arc<RemoteStream>,
    addr: String,
}

impl Connector {
    /// Starts the thread. `suspended`: advertise as waiting for Resume.
    pub(crate) fn spawn(
        inner: Arc<Inner>,
        cfg: &ConnectConfig,
        identity: Identity,
        remote: Arc<RemoteStream>,
        own_buffers: usize,
    ) -> Result<Connector, Error> {
        let (stop, stop_rx) = crossbeam_channel::bounded(1);
        let shared = Arc::new(Shared {
            latch: Latch {
                released: Mutex::new(cfg.suspend.is_none()),
                cv: Condvar::new(),
            },
            stopping: AtomicBool::new(false),
            current: Mutex::new(None),
        });
        let own = Own {
            mode: inner.pool.mode(),
            buffers: own_buffers,
        };
        let mut thread = Thread {
            inner,
            addr: cfg.addr.clone(),
            identity,
            remote: remote.clone(),
            shared: shared.clone(),
            stop: stop_rx,
            own,
        };
        let handle = std::thread::Builder::new()
            .name("stopwatch-connect".into())
            .spawn(move || thread.run())
            .map_err(Error::Spawn)?;
        Ok(Connector {
            stop,
            shared,
            handle: Mutex::new(Some(handle)),
            remote,
            addr: cfg.addr.clone(),
        })
    }

    /// Waits until a server resumes the program, at most `timeout`; true if resumed. On
    /// timeout the program stops advertising itself as suspended.
    pub(crate) fn wait_resumed(&self, timeout: Duration) -> bool {
        let latch = &self.shared.latch;
        // A timeout too long for the clock waits without one (the server or shutdown ends it).
        let deadline = Instant::now().checked_add(timeout);
        let mut released = latch.released.lock();
        while !*released {
            match deadline {
                Some(d) => {
                    if latch.cv.wait_until(&mut released, d).timed_out() {
                        let resumed = *released;
                        *released = true;
                        return resumed;
                    }
                }
                None => latch.cv.wait(&mut released),
            }
        }
        true
    }

    /// The server's address.
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    /// First step of shutdown: answer no more commands (so no session starts while the
    /// recorder writes its last records) and interrupt whatever the thread waits on.
    pub(crate) fn begin_stop(&self) {
        self.shared.stopping.store(true, Ordering::Release);
        let _ = self.stop.try_send(());
        if let Some(c) = self.shared.current.lock().as_ref() {
            let _ = c.shutdown(Shutdown::Both);
        }
        self.release();
    }

    /// Last step of shutdown: waits for the thread (unless called on it, from an error
    /// callback) and ends the stream (idempotent).
    pub(crate) fn join(&self) {
        self.begin_stop();
        let handle = self.handle.lock().take();
        if let Some(h) = handle
            && h.thread().id() != std::thread::current().id()
        {
            let _ = h.join();
        }
        self.remote.finish();
    }

    fn release(&self) {
        *self.shared.latch.released.lock() = true;
        self.shared.latch.cv.notify_all();
    }
}

struct Thread {
    inner: Arc<Inner>,
    addr: String,
    identity: Identity,
    remote: Arc<RemoteStream>,
    shared: Arc<Shared>,
    stop: Receiver<()>,
    own: Own,
}

/// What ended a control connection.
enum Next {
    /// Connect again after the back-off.
    Again,
    /// The recorder is shutting down.
    Stop,
}

impl Thread {
    fn run(&mut self) {
        let mut backoff = MIN_BACKOFF;
        loop {
            let began = Instant::now();
            let next = match self.connect() {
                Ok(conn) => {
                    let next = self.serve(conn);
                    *self.shared.current.lock() = None;
                    next
                }
                Err(e) => {
                    // Nothing answers there now: records are held for a later session.
                    self.remote.decided();
                    self.report(format!(
                        "cannot reach {} ({e}); retrying in the background",
                        self.addr
                    ));
                    Next::Again
                }
            };
            // Errors reach the user's callback here, with no lock held.
            self.inner.reporter.deliver();
            if matches!(next, Next::Stop) || self.stopping() {
                return;
            }
            // Every connection is followed by a pause, answered or not, so a server that
            // answers at once cannot make the program spin; a connection that stayed open
            // a while (an idle control connection) was healthy: start over from the minimum.
            if began.elapsed() >= MAX_BACKOFF {
                backoff = MIN_BACKOFF;
            }
            if self.stop.recv_timeout(backoff).is_ok() || self.stopping() {
                return;
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    fn stopping(&self) -> bool {
        self.shared.stopping.load(Ordering::Acquire)
            || matches!(
                self.stop.try_recv(),
                Ok(()) | Err(crossbeam_channel::TryRecvError::Disconnected)
            )
    }

    fn connect(&self) -> std::io::Result<TcpStream> {
        let mut last = None;
        for a in self.addr.to_socket_addrs()? {
            if self.stopping() {
                break;
            }
            match TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    return Ok(s);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("the address resolves to nothing")))
    }

    /// Advertises on `conn` and answers the command that comes.
    fn serve(&mut self, mut conn: TcpStream) -> Next {
        match conn.try_clone() {
            Ok(c) => *self.shared.current.lock() = Some(c),
            Err(_) => return Next::Again,
        }
        // Shutdown may have begun before the clone was published.
        if self.stopping() {
            return Next::Stop;
        }
        let adv = Advertise {
            protocol: PROTOCOL_VERSION,
            instance: self.identity.instance,
            pid: std::process::id(),
            suspended: !*self.shared.latch.released.lock(),
            records_locally: self.inner.dir.is_some(),
            name: self.identity.name.clone(),
            token: self.identity.token.clone(),
            commands: vec![
                (START_SESSION, self.identity.start_session_version),
                (STOP_SESSION, 1),
                (RESUME, 1),
            ],
        };
        let mut out = Vec::new();
        adv.encode(&mut out);
        if conn.write_all(&out).is_err() {
            return Next::Again;
        }
        // Wait for the first byte of a command, checking for shutdown.
        let _ = conn.set_read_timeout(Some(POLL));
        loop {
            match conn.peek(&mut [0u8]) {
                Ok(0) => return self.closed(),
                Ok(_) => break,
                Err(e) if is_timeout(&e) || e.kind() == std::io::ErrorKind::Interrupted => {
                    if self.stopping() {
                        return Next::Stop;
                    }
                }
                Err(_) => return self.closed(),
            }
        }
        let _ = conn.set_read_timeout(Some(MESSAGE_TIMEOUT));
        let mut payload = Vec::new();
        let kind = match read_message(&mut conn, &mut payload, MAX_CONTROL_LEN as usize) {
            Ok(Some(k)) => k,
            Ok(None) => return self.closed(),
            Err(e) => {
                self.remote.decided();
                self.report(format!("the server at {} sent {e}", self.addr));
                return Next::Again;
            }
        };
        match kind {
            Kind::Command => {}
            Kind::Refused => {
                self.remote.decided();
                let refused = Refused::decode(&payload);
                let why = refused
                    .as_ref()
                    .map(|r| printable(&r.text).into_owned())
                    .unwrap_or_else(|e| e.to_string());
                // A wrong token or protocol will not change by waiting: a suspended program
                // runs on at once. A busy server may take it later.
                if refused.is_ok_and(|r| r.reason != RefuseReason::Busy) {
                    self.release_suspend();
                }
                self.report(format!("{} refused this program: {why}", self.addr));
                return Next::Again;
            }
            other => {
                self.remote.decided();
                self.report(format!(
                    "the server at {} sent {other:?} instead of a command",
                    self.addr
                ));
                return Next::Again;
            }
        }
        let command = Command::decode(&payload, self.identity.start_session_version);
        let stopping = self.stopping();
        let (reply, start) = match command {
            Err(e) => (e.reply(), None),
            Ok(Command::Resume) => {
                self.release_suspend();
                (Reply::ok(RESUME, 1), None)
            }
            Ok(Command::StopSession) => {
                // Stop recording first, send what was recorded, then end the stream: the
                // session's last frames arrive instead of counting as unsent.
                self.revert();
                self.inner.flush(STOP_FLUSH);
                self.remote.end();
                (Reply::ok(STOP_SESSION, 1), None)
            }
            Ok(Command::StartSession { version, settings }) => {
                // Decided under the lock `begin_stop` shuts the served connection with: this
                // connection becomes the stream, which only the writer ends (with End, after
                // the last records and their Acks). Shut down by `begin_stop` a moment after
                // its records went out, the Acks of records the server appended were lost.
                let mut current = self.shared.current.lock();
                if stopping || self.stopping() {
                    (
                        Reply {
                            code: START_SESSION,
                            version,
                            status: Status::Failed,
                            text: "the program is exiting".into(),
                        },
                        None,
                    )
                } else {
                    *current = None;
                    (Reply::ok(START_SESSION, version), Some((version, settings)))
                }
            }
        };
        if start.is_none() {
            self.remote.decided();
        }
        out.clear();
        reply.encode(&mut out);
        if conn.write_all(&out).is_err() {
            return Next::Again;
        }
        if let Some((version, settings)) = start {
            // The reply went first; the records follow on this connection.
            let _ = conn.set_read_timeout(None);
            self.apply(&settings);
            if !self.remote.start(conn, version) {
                return Next::Stop;
            }
        }
        Next::Again
    }

    /// The server closed the control connection without a command.
    fn closed(&self) -> Next {
        self.remote.decided();
        Next::Again
    }

    fn release_suspend(&self) {
        *self.shared.latch.released.lock() = true;
        self.shared.latch.cv.notify_all();
    }

    fn report(&self, line: String) {
        self.inner.reporter.report(Error::Remote(line));
    }

    /// Applies a session's settings to the recorder.
    fn apply(&self, s: &SessionSettings) {
        use formats::protocol::ModeSetting;
        let pool = &self.inner.pool;
        pool.set_mode(match s.mode {
            ModeSetting::Keep => self.own.mode,
            ModeSetting::Drop => BufferingMode::Drop,
            ModeSetting::Block => BufferingMode::Block,
        });
        pool.resize(if s.pool_kib == 0 {
            self.own.buffers
        } else {
            (s.pool_kib as usize * 1024 / pool.buf_size()).max(2)
        });
        let sampler = match s.sampling {
            SamplingSetting::Keep => None,
            SamplingSetting::All => Some(Sampling::All),
            SamplingSetting::Probability(p) => Some(Sampling::Probability(p)),
            SamplingSetting::Adaptive(n) => Some(Sampling::Adaptive { max_per_second: n }),
        }
        .map(Sampler::new);
        self.inner.gate.open(sampler, s.frame_data, &s.categories);
    }

    /// Back to the program's own settings after a session.
    fn revert(&self) {
        self.inner.pool.set_mode(self.own.mode);
        self.inner.pool.resize(self.own.buffers);
        self.inner.gate.close(self.inner.dir.is_none());
    }
}
