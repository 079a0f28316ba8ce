//! The program's diagnostics thread (connect mode, `docs/PROTOCOL.md`, Connections): connect,
//! Advertise, wait for a command, answer it, connect again. It retries with back-off and never
//! makes the application wait, except a suspended `install()` (bounded by its timeout).

use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use formats::protocol::{
    Advertise, Command, Kind, PROTOCOL_VERSION, RESUME, Refused, Reply, START_SESSION,
    STOP_SESSION, SamplingSetting, SessionSettings,
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
    /// Highest StartSession version understood (2; 1 to act as an old program in tests).
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

/// The running diagnostics thread of one recorder.
pub(crate) struct Connector {
    stop: Sender<()>,
    latch: Arc<Latch>,
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
        let latch = Arc::new(Latch {
            released: Mutex::new(cfg.suspend.is_none()),
            cv: Condvar::new(),
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
            latch: latch.clone(),
            stop: stop_rx,
            own,
        };
        let handle = std::thread::Builder::new()
            .name("stopwatch-connect".into())
            .spawn(move || thread.run())
            .map_err(Error::Spawn)?;
        Ok(Connector {
            stop,
            latch,
            handle: Mutex::new(Some(handle)),
            remote,
            addr: cfg.addr.clone(),
        })
    }

    /// Waits until a server resumes the program, at most `timeout`; true if resumed. On
    /// timeout the program stops advertising itself as suspended.
    pub(crate) fn wait_resumed(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut released = self.latch.released.lock();
        while !*released {
            if self
                .latch
                .cv
                .wait_until(&mut released, deadline)
                .timed_out()
            {
                let resumed = *released;
                *released = true;
                return resumed;
            }
        }
        true
    }

    /// The server's address.
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    /// Ends the stream and stops the thread (idempotent).
    pub(crate) fn shutdown(&self) {
        let _ = self.stop.try_send(());
        if let Some(h) = self.handle.lock().take() {
            let _ = h.join();
        }
        self.remote.finish();
        self.release();
    }

    fn release(&self) {
        *self.latch.released.lock() = true;
        self.latch.cv.notify_all();
    }
}

struct Thread {
    inner: Arc<Inner>,
    addr: String,
    identity: Identity,
    remote: Arc<RemoteStream>,
    latch: Arc<Latch>,
    stop: Receiver<()>,
    own: Own,
}

/// What ended a control connection.
enum Next {
    /// Connect again at once (a command was answered).
    Reconnect,
    /// Connect again after the back-off (the connection failed or closed).
    Backoff,
    /// The recorder is shutting down.
    Stop,
}

impl Thread {
    fn run(&mut self) {
        let mut backoff = MIN_BACKOFF;
        loop {
            let next = match self.connect() {
                Ok(conn) => self.serve(conn),
                Err(e) => {
                    self.inner.reporter.report(Error::Remote(format!(
                        "cannot reach {} ({e}); retrying in the background",
                        self.addr
                    )));
                    Next::Backoff
                }
            };
            match next {
                Next::Stop => return,
                Next::Reconnect => backoff = MIN_BACKOFF,
                Next::Backoff => {
                    if self.stop.recv_timeout(backoff).is_ok() || self.stopping() {
                        return;
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    fn stopping(&self) -> bool {
        matches!(
            self.stop.try_recv(),
            Ok(()) | Err(crossbeam_channel::TryRecvError::Disconnected)
        )
    }

    fn connect(&self) -> std::io::Result<TcpStream> {
        let mut last = None;
        for a in self.addr.to_socket_addrs()? {
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
        let adv = Advertise {
            protocol: PROTOCOL_VERSION,
            instance: self.identity.instance,
            pid: std::process::id(),
            suspended: !*self.latch.released.lock(),
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
            return Next::Backoff;
        }
        // Wait for the first byte of a command, checking for shutdown.
        let _ = conn.set_read_timeout(Some(POLL));
        loop {
            match conn.peek(&mut [0u8]) {
                Ok(0) => return Next::Backoff,
                Ok(_) => break,
                Err(e) if is_timeout(&e) => {
                    if self.stopping() {
                        return Next::Stop;
                    }
                }
                Err(_) => return Next::Backoff,
            }
        }
        let _ = conn.set_read_timeout(Some(MESSAGE_TIMEOUT));
        let mut payload = Vec::new();
        let kind = match read_message(&mut conn, &mut payload) {
            Ok(Some(k)) => k,
            Ok(None) => return Next::Backoff,
            Err(e) => {
                self.report(format!("the server at {} sent {e}", self.addr));
                return Next::Backoff;
            }
        };
        match kind {
            Kind::Command => {}
            Kind::Refused => {
                let why = Refused::decode(&payload)
                    .map(|r| r.text)
                    .unwrap_or_else(|e| e.to_string());
                self.report(format!("{} refused this program: {why}", self.addr));
                return Next::Backoff;
            }
            other => {
                self.report(format!(
                    "the server at {} sent {other:?} instead of a command",
                    self.addr
                ));
                return Next::Backoff;
            }
        }
        let (reply, start) = match Command::decode(&payload, self.identity.start_session_version) {
            Err(e) => (e.reply(), None),
            Ok(Command::Resume) => {
                *self.latch.released.lock() = true;
                self.latch.cv.notify_all();
                (Reply::ok(RESUME, 1), None)
            }
            Ok(Command::StopSession) => {
                // Stop recording first, send what was recorded, then end the stream: the
                // session's last frames arrive instead of counting as unsent.
                self.revert();
                self.inner.flush(STOP_FLUSH);
                self.remote.finish();
                (Reply::ok(STOP_SESSION, 1), None)
            }
            Ok(Command::StartSession { version, settings }) => {
                (Reply::ok(START_SESSION, version), Some(settings))
            }
        };
        out.clear();
        reply.encode(&mut out);
        if conn.write_all(&out).is_err() {
            return Next::Backoff;
        }
        if let Some(settings) = start {
            // The reply went first; the records follow on this connection.
            let _ = conn.set_read_timeout(None);
            self.remote.start(conn);
            self.apply(&settings);
        }
        Next::Reconnect
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
