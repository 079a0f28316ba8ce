//! The recording server behind `framelog serve` and `debugger-gui --listen`: accepts
//! programs that connect out, starts and stops their sessions, resumes suspended ones, and
//! appends every session's records to one log directory, one worker per program.
//!
//! One thread per connection, blocking I/O: a control connection's thread waits for the
//! program's Reply (or its disconnect), a stream connection's thread appends what arrives.
//! Commands are written from any thread through the control connection's shared handle.
//! Nothing a peer sends can take the server down: every message is checked
//! (`formats::protocol`, [`super::rewrite`], [`formats::bson_check`]) and a bad one closes
//! only its own connection, with one log line.
//!
//! What a peer can hold is bounded: connections are capped ([`ServerOptions::max_connections`],
//! one descriptor and one thread each; past the cap a peer gets Refused "server busy"), a
//! peer that has not advertised may send only an Advertise-sized message, every message must
//! arrive whole within a deadline, a command's Reply within another, buffers grow only as
//! bytes arrive, and a program that has gone gives its worker id back (its ids stay unique:
//! the worker's high-water mark is kept in the log).

use std::collections::HashMap;
use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use formats::FrameKey;
use formats::protocol::{
    ACKED_START_SESSION, Advertise, Command, Kind, LATEST_START_SESSION, MAX_CONTROL_LEN,
    PROTOCOL_VERSION, RESUME, RefuseReason, Refused, Reply, START_SESSION, STOP_SESSION,
    SessionSettings, Status, command_name, decode_data, decode_end, encode_ack, printable,
};

use super::rewrite::{KeyMap, RewriteError};
use super::wire::{DeadlineReader, WireError, is_timeout, read_message};
use crate::secret::same_secret;
use crate::{DataBatch, LogWriter, WriterOptions};

/// How long a new connection may take to send its whole Advertise.
const ADVERTISE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a program may take to answer a command.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// How long a program that has gone stays in the listing, and how many such are kept.
const GONE_KEEP: Duration = Duration::from_secs(60);
const MAX_GONE: usize = 64;
/// Stack of a connection's thread (it parses and appends; nothing deep).
const CONN_STACK: usize = 256 << 10;
/// How often the accept loop checks for shutdown.
const ACCEPT_POLL: Duration = Duration::from_millis(20);
/// At shutdown, streams are read until quiet for `POLL`, for at most this long.
const DRAIN: Duration = Duration::from_secs(10);
/// How often a connection's thread checks for shutdown while no message arrives.
const POLL: Duration = Duration::from_millis(200);
/// How long a message may take to arrive whole once it began (a peer trickling bytes is
/// cut off here).
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(30);

/// Receives the server's log lines (one event each).
pub type LogFn = Arc<dyn Fn(&str) + Send + Sync>;

/// How a server behaves.
#[derive(Clone)]
pub struct ServerOptions {
    /// The log directory every session is appended to.
    pub dir: PathBuf,
    /// The shared secret programs must present (required to listen beyond loopback).
    pub token: Option<String>,
    /// Start a session with these settings as soon as a program advertises without one
    /// (`None`: only when [`Server::start_session`] asks).
    pub auto_start: Option<SessionSettings>,
    /// Resume a suspended program as soon as its session runs (or at once without
    /// `auto_start`); `false` holds it until [`Server::resume`].
    pub auto_resume: bool,
    /// Options of each program's `LogWriter` (process name and pid come from its Advertise).
    pub writer: WriterOptions,
    /// Where log lines go (default: stderr).
    pub log: LogFn,
    /// Connections served at once; past it a program is refused as busy and retries.
    pub max_connections: usize,
}

impl ServerOptions {
    /// A headless recorder into `dir`: every program is recorded with its own settings and
    /// resumed at once.
    pub fn recorder(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            token: None,
            auto_start: Some(SessionSettings::keep()),
            auto_resume: true,
            writer: WriterOptions::default(),
            log: Arc::new(|line: &str| eprintln!("{line}")),
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address does not resolve or cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The error.
        source: std::io::Error,
    },
    /// A non-loopback address without a token.
    #[error(
        "listening on {0} (not loopback) needs a token: pass --token SECRET or set FRAMELOG_TOKEN"
    )]
    NeedsToken(SocketAddr),
    /// The log directory cannot be created.
    #[error("log directory {0}: {1}")]
    Dir(PathBuf, std::io::Error),
}

/// Where a connected program is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessState {
    /// Connected, no session.
    Waiting,
    /// Connected and waiting for Resume (its session may already be set up).
    Suspended,
    /// A session streams.
    Recording,
    /// No connection open.
    Gone,
}

impl ProcessState {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            ProcessState::Waiting => "waiting",
            ProcessState::Suspended => "suspended",
            ProcessState::Recording => "recording",
            ProcessState::Gone => "gone",
        }
    }
}

/// A snapshot of one program, for listings.
#[derive(Debug, Clone)]
pub struct ProcessInfo {
    /// The program run's random id.
    pub instance: u64,
    /// Process name from its Advertise.
    pub name: String,
    /// Process id.
    pub pid: u32,
    /// Protocol version it speaks.
    pub protocol: u16,
    /// Highest StartSession version it understands.
    pub start_session_version: u8,
    /// Whether it waits for Resume.
    pub suspended: bool,
    /// Where it is.
    pub state: ProcessState,
    /// Whether a session streams (also while suspended).
    pub stream_active: bool,
    /// Its worker in the log, once a session ran.
    pub worker: Option<u8>,
    /// Frame starts appended so far.
    pub frames: u64,
    /// Records it reported as dropped or unsent.
    pub lost: u64,
    /// The last error its commands or streams met, if any.
    pub last_error: Option<String>,
    /// Its address.
    pub peer: SocketAddr,
}

/// The control connection a program is waiting on.
struct Control {
    conn: u64,
    stream: Arc<TcpStream>,
}

/// A program's output into the log: one worker for the server's lifetime.
struct Output {
    writer: LogWriter,
    map: Mutex<KeyMap>,
}

struct Process {
    info: ProcessInfo,
    control: Option<Control>,
    /// Commands sent and waiting for their Reply (since when), by connection.
    pending: HashMap<u64, (Command, Instant)>,
    /// Commands asked for while none could be sent (one in flight, or no idle connection),
    /// sent as soon as one can.
    queued: std::collections::VecDeque<Command>,
    /// Connection id of the running stream.
    stream: Option<u64>,
    /// Connections open (control, stream, and ones closing).
    open: usize,
    output: Option<Arc<Output>>,
    /// A user stopped the session: do not auto-start it again.
    stopped: bool,
    /// Settings of the next auto-started session.
    settings: Option<SessionSettings>,
    /// Its session ended with End (the program is exiting): no new one is auto-started.
    ended: bool,
    /// When its last connection closed.
    gone_since: Option<Instant>,
}

impl Process {
    fn refresh_state(&mut self) {
        self.info.stream_active = self.stream.is_some();
        self.info.state = if self.open == 0 {
            ProcessState::Gone
        } else if self.info.suspended {
            // Waiting for Resume, its session (if any) already set up.
            ProcessState::Suspended
        } else if self.stream.is_some() {
            ProcessState::Recording
        } else {
            ProcessState::Waiting
        };
    }
}

/// When the server starts and resumes programs on its own.
#[derive(Clone)]
struct Policy {
    auto_start: Option<SessionSettings>,
    auto_resume: bool,
}

struct Shared {
    opts: ServerOptions,
    policy: Mutex<Policy>,
    processes: Mutex<HashMap<u64, Process>>,
    /// Every open connection, to shut them at shutdown.
    conns: Mutex<HashMap<u64, Arc<TcpStream>>>,
    /// Programs seen since the server started.
    programs_seen: AtomicU64,
    threads: Mutex<Vec<JoinHandle<()>>>,
    next_conn: AtomicU64,
    closing: AtomicBool,
    /// Set at shutdown: when stream connections stop being read.
    drain_until: Mutex<Option<Instant>>,
    frames: AtomicU64,
}

/// A running server; dropping it (or [`Server::shutdown`]) closes every connection.
pub struct Server {
    shared: Arc<Shared>,
    addr: SocketAddr,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// Listens on `addr` (port 0 picks a free port) and serves until shut down.
    pub fn bind(addr: &str, opts: ServerOptions) -> Result<Server, ServeError> {
        let bind_err = |source| ServeError::Bind {
            addr: addr.to_owned(),
            source,
        };
        let resolved: Vec<SocketAddr> = addr.to_socket_addrs().map_err(bind_err)?.collect();
        if let Some(a) = resolved.iter().find(|a| !a.ip().is_loopback())
            && opts.token.as_deref().unwrap_or("").is_empty()
        {
            return Err(ServeError::NeedsToken(*a));
        }
        std::fs::create_dir_all(&opts.dir).map_err(|e| ServeError::Dir(opts.dir.clone(), e))?;
        let listener = TcpListener::bind(&resolved[..]).map_err(bind_err)?;
        let local = listener.local_addr().map_err(bind_err)?;
        listener.set_nonblocking(true).map_err(bind_err)?;
        let shared = Arc::new(Shared {
            policy: Mutex::new(Policy {
                auto_start: opts.auto_start.clone(),
                auto_resume: opts.auto_resume,
            }),
            opts,
            processes: Mutex::new(HashMap::new()),
            conns: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
            next_conn: AtomicU64::new(1),
            closing: AtomicBool::new(false),
            drain_until: Mutex::new(None),
            frames: AtomicU64::new(0),
            programs_seen: AtomicU64::new(0),
        });
        let s = shared.clone();
        let accept = std::thread::Builder::new()
            .name("framelog-accept".into())
            .spawn(move || accept_loop(&s, &listener))
            .map_err(bind_err)?;
        Ok(Server {
            shared,
            addr: local,
            accept: Some(accept),
        })
    }

    /// The address it listens on (with the port chosen).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The log directory.
    pub fn dir(&self) -> &std::path::Path {
        &self.shared.opts.dir
    }

    /// Every program seen, oldest first by pid.
    pub fn processes(&self) -> Vec<ProcessInfo> {
        let mut v: Vec<_> = self
            .shared
            .processes
            .lock()
            .values()
            .map(|p| p.info.clone())
            .collect();
        v.sort_by_key(|p| (p.pid, p.instance));
        v
    }

    /// Frame starts appended, all programs.
    pub fn frames(&self) -> u64 {
        self.shared.frames.load(Ordering::Relaxed)
    }

    /// Programs seen since the server started (the listing forgets gone ones after a while).
    pub fn programs_seen(&self) -> u64 {
        self.shared.programs_seen.load(Ordering::Relaxed)
    }

    /// Starts (or reconfigures) a program's session with `settings`, using StartSession v1
    /// unless a v2-only option is set. An error says why nothing was sent; the program's
    /// answer shows in [`ProcessInfo::last_error`] and its state.
    pub fn start_session(&self, instance: u64, settings: SessionSettings) -> Result<(), String> {
        let mut procs = self.shared.processes.lock();
        let p = procs.get_mut(&instance).ok_or("no such program")?;
        p.stopped = false;
        p.ended = false;
        p.settings = Some(settings.clone());
        let cmd = start_command(&p.info, settings)?;
        self.shared.send(p, cmd)
    }

    /// Stops a program's session (and keeps it from being auto-started again).
    pub fn stop_session(&self, instance: u64) -> Result<(), String> {
        let mut procs = self.shared.processes.lock();
        let p = procs.get_mut(&instance).ok_or("no such program")?;
        p.stopped = true;
        self.shared.send(p, Command::StopSession)
    }

    /// Changes what the server does on its own from now on: start sessions with these
    /// settings (`None`: only when asked) and resume suspended programs (or hold them).
    pub fn set_policy(&self, auto_start: Option<SessionSettings>, auto_resume: bool) {
        *self.shared.policy.lock() = Policy {
            auto_start,
            auto_resume,
        };
    }

    /// Releases a program waiting at start-up.
    pub fn resume(&self, instance: u64) -> Result<(), String> {
        let mut procs = self.shared.processes.lock();
        let p = procs.get_mut(&instance).ok_or("no such program")?;
        self.shared.send(p, Command::Resume)
    }

    /// Closes every connection and waits for every thread; what arrived is in the log.
    pub fn shutdown(mut self) {
        self.close();
    }

    /// Stops accepting, reads what streams still send (until each is quiet or ends, at
    /// most 10 s in all), closes every connection and waits for every thread. Afterwards
    /// [`Server::frames`] counts everything that reached the log.
    pub fn close(&mut self) {
        let drain_until = Instant::now() + DRAIN;
        *self.shared.drain_until.lock() = Some(drain_until);
        self.shared.closing.store(true, Ordering::Release);
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
        let streams: Vec<u64> = self
            .shared
            .processes
            .lock()
            .values()
            .filter_map(|p| p.stream)
            .collect();
        for (id, c) in self.shared.conns.lock().iter() {
            // Streams are read until their End, or until quiet for `POLL` (their threads
            // check `closing`); other connections close now.
            if !streams.contains(id) {
                let _ = c.shutdown(Shutdown::Both);
            }
        }
        // Past the drain limit every connection is cut, whatever its peer is doing.
        while Instant::now() < drain_until
            && self.shared.threads.lock().iter().any(|t| !t.is_finished())
        {
            std::thread::sleep(ACCEPT_POLL);
        }
        for c in self.shared.conns.lock().values() {
            let _ = c.shutdown(Shutdown::Both);
        }
        let threads = std::mem::take(&mut *self.shared.threads.lock());
        for t in threads {
            let _ = t.join();
        }
        for p in self.shared.processes.lock().values() {
            if let Some(o) = &p.output {
                let _ = o.writer.sync();
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.close();
    }
}

/// The StartSession that carries `settings` for this program, or why it cannot.
fn start_command(info: &ProcessInfo, settings: SessionSettings) -> Result<Command, String> {
    // v3 (acknowledged streams) whenever the program knows it: it makes every loss countable;
    // v4 (the same, with parents) and v5 (messages naming their frame, frame allocations)
    // when it knows those too.
    let version = if info.start_session_version >= ACKED_START_SESSION {
        info.start_session_version.min(LATEST_START_SESSION)
    } else {
        settings.version_needed()
    };
    if info.start_session_version == 0 {
        return Err(format!(
            "{} (pid {}) does not take StartSession: it cannot be recorded",
            info.name, info.pid
        ));
    }
    if version > info.start_session_version {
        return Err(format!(
            "{} (pid {}) supports StartSession up to v{}; {} needs v{version}: update the program's stopwatch",
            info.name,
            info.pid,
            info.start_session_version,
            settings.v2_options().join(" and "),
        ));
    }
    Ok(Command::StartSession { version, settings })
}

fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener) {
    // Accept errors (out of descriptors, mostly) are logged once per `QUIET` with a count.
    const QUIET: Duration = Duration::from_secs(10);
    let mut failures: (u64, Option<Instant>) = (0, None);
    let mut last_sweep = Instant::now();
    while !shared.closing.load(Ordering::Acquire) {
        if last_sweep.elapsed() >= Duration::from_secs(1) {
            shared.forget_gone();
            last_sweep = Instant::now();
        }
        match listener.accept() {
            Ok((stream, peer)) => shared.take_connection(stream, peer),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(ACCEPT_POLL);
            }
            Err(e) => {
                failures.0 += 1;
                if failures.1.is_none_or(|t| t.elapsed() >= QUIET) {
                    shared.log(&format!(
                        "accept failed: {e} ({} times since the last report)",
                        failures.0
                    ));
                    failures = (0, Some(Instant::now()));
                }
                std::thread::sleep(ACCEPT_POLL);
            }
        }
    }
}

/// How a connection ended.
enum Ending {
    /// The peer closed it (between messages).
    Closed,
    /// A stream's End arrived.
    End(u64),
    /// Something was wrong: one log line.
    Error(String),
}

impl Shared {
    fn log(&self, line: &str) {
        (self.opts.log)(line);
    }

    /// Serves a new connection on its own thread, or refuses it as busy at the cap.
    fn take_connection(self: &Arc<Self>, stream: TcpStream, peer: SocketAddr) {
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_nodelay(true);
        let stream = Arc::new(stream);
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        {
            let mut conns = self.conns.lock();
            if conns.len() >= self.opts.max_connections {
                drop(conns);
                // The refusal is small enough for the socket's buffer: never blocks.
                let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
                let mut out = Vec::new();
                Refused {
                    reason: RefuseReason::Busy,
                    text: format!(
                        "the server serves {} connections already; retrying later",
                        self.opts.max_connections
                    ),
                }
                .encode(&mut out);
                let _ = (&*stream).write_all(&out);
                return;
            }
            conns.insert(id, stream.clone());
        }
        let s = self.clone();
        let t = std::thread::Builder::new()
            .name(format!("framelog-conn-{id}"))
            .stack_size(CONN_STACK)
            .spawn(move || {
                s.serve_connection(id, &stream, peer);
                let _ = stream.shutdown(Shutdown::Both);
                s.conns.lock().remove(&id);
            });
        match t {
            Ok(t) => {
                let mut threads = self.threads.lock();
                threads.retain(|t| !t.is_finished());
                threads.push(t);
            }
            Err(e) => {
                self.conns.lock().remove(&id);
                self.log(&format!("cannot start a thread for {peer}: {e}"));
            }
        }
    }

    /// Whether connection threads must stop reading now (shutdown, past the drain limit).
    fn must_stop(&self) -> bool {
        self.closing.load(Ordering::Acquire)
            && self.drain_until.lock().is_none_or(|t| Instant::now() >= t)
    }

    /// Forgets programs gone longer than `GONE_KEEP`, and all but the newest `MAX_GONE`.
    fn forget_gone(&self) {
        let mut procs = self.processes.lock();
        let mut gone: Vec<(Instant, u64)> = procs
            .iter()
            .filter_map(|(k, p)| p.gone_since.map(|t| (t, *k)))
            .collect();
        gone.sort();
        let excess = gone.len().saturating_sub(MAX_GONE);
        for (i, (since, key)) in gone.into_iter().enumerate() {
            if i < excess || since.elapsed() >= GONE_KEEP {
                procs.remove(&key);
            }
        }
    }

    fn serve_connection(self: &Arc<Self>, conn: u64, stream: &Arc<TcpStream>, peer: SocketAddr) {
        let mut payload = Vec::new();
        // Before a peer has advertised (and shown its token) it may send one Advertise-sized
        // message, whole within the deadline.
        let stop = || self.must_stop();
        let mut first =
            DeadlineReader::new(stream, Instant::now() + ADVERTISE_TIMEOUT, POLL, &stop);
        let adv = match read_message(&mut first, &mut payload, MAX_CONTROL_LEN as usize) {
            Ok(Some(Kind::Advertise)) => match Advertise::decode(&payload) {
                Ok(mut a) => {
                    a.name = printable(&a.name).into_owned();
                    a
                }
                Err(e) => {
                    self.log(&format!("closing connection from {peer}: {e}"));
                    return;
                }
            },
            Ok(Some(kind)) => {
                self.log(&format!(
                    "closing connection from {peer}: {kind:?} before Advertise"
                ));
                return;
            }
            Ok(None) => return,
            Err(WireError::Io(e)) if is_timeout(&e) => {
                self.log(&format!(
                    "closing connection from {peer}: no whole Advertise within {} s",
                    ADVERTISE_TIMEOUT.as_secs()
                ));
                return;
            }
            Err(_) if self.closing.load(Ordering::Acquire) => return,
            Err(e) => {
                self.log(&format!("closing connection from {peer}: {e}"));
                return;
            }
        };
        if let Some(refusal) = self.refusal(&adv) {
            self.log(&format!(
                "refused {} (pid {}) from {peer}: {}",
                adv.name, adv.pid, refusal.text
            ));
            let mut out = Vec::new();
            refusal.encode(&mut out);
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = (&**stream).write_all(&out);
            return;
        }
        self.register(conn, stream, &adv, peer);
        let ending = self.read_loop(conn, stream, &adv, &mut payload);
        let who = format!("{} (pid {})", adv.name, adv.pid);
        let mut procs = self.processes.lock();
        if let Some(p) = procs.get_mut(&adv.instance) {
            let was_stream = p.stream == Some(conn);
            match &ending {
                Ending::Closed if was_stream && !self.closing.load(Ordering::Acquire) => {
                    self.log(&format!(
                        "{who} stopped streaming without End (killed?); its log ends at the last whole record"
                    ));
                }
                Ending::End(unsent) => {
                    p.info.lost += unsent;
                    if was_stream {
                        // The program is exiting (or was stopped): no new session for it.
                        p.ended = true;
                    }
                    self.log(&format!(
                        "{who} ended its session ({} frames in all, {unsent} records unsent)",
                        p.info.frames
                    ));
                }
                Ending::Error(e) => {
                    p.info.last_error = Some(e.clone());
                    self.log(&format!("closing connection from {who} at {peer}: {e}"));
                }
                _ => {}
            }
            if was_stream {
                p.stream = None;
            }
            if p.control.as_ref().is_some_and(|c| c.conn == conn) {
                p.control = None;
            }
            p.pending.remove(&conn);
            p.open = p.open.saturating_sub(1);
            p.refresh_state();
            if p.open == 0 {
                // Gone: its worker id goes back to the log for later programs (the id
                // high-water mark stays in the worker's slot file, so keys stay unique).
                p.output = None;
                p.stream = None;
                p.gone_since = Some(Instant::now());
            }
        }
    }

    fn refusal(&self, adv: &Advertise) -> Option<Refused> {
        if adv.protocol != PROTOCOL_VERSION {
            let side = if adv.protocol > PROTOCOL_VERSION {
                "the server"
            } else {
                "the program's stopwatch"
            };
            return Some(Refused {
                reason: RefuseReason::ProtocolVersion,
                text: format!(
                    "program speaks protocol v{}, this server v{PROTOCOL_VERSION}: update {side}",
                    adv.protocol
                ),
            });
        }
        match &self.opts.token {
            Some(t) if !t.is_empty() && !same_secret(t.as_bytes(), adv.token.as_bytes()) => {
                Some(Refused {
                    reason: RefuseReason::Token,
                    text: if adv.token.is_empty() {
                        "this server needs a token: set FRAMELOG_TOKEN".into()
                    } else {
                        "wrong token".into()
                    },
                })
            }
            _ => None,
        }
    }

    /// Records a new control connection and applies the server's policy to it.
    fn register(&self, conn: u64, stream: &Arc<TcpStream>, adv: &Advertise, peer: SocketAddr) {
        let write = stream.clone();
        let mut procs = self.processes.lock();
        let p = procs.entry(adv.instance).or_insert_with(|| {
            self.programs_seen.fetch_add(1, Ordering::Relaxed);
            self.log(&format!(
                "{} (pid {}) connected from {peer}{}",
                adv.name,
                adv.pid,
                if adv.suspended { ", suspended" } else { "" }
            ));
            Process {
                info: ProcessInfo {
                    instance: adv.instance,
                    name: adv.name.clone(),
                    pid: adv.pid,
                    protocol: adv.protocol,
                    start_session_version: 0,
                    suspended: false,
                    state: ProcessState::Waiting,
                    stream_active: false,
                    worker: None,
                    frames: 0,
                    lost: 0,
                    last_error: None,
                    peer,
                },
                control: None,
                pending: HashMap::new(),
                queued: Default::default(),
                stream: None,
                open: 0,
                output: None,
                stopped: false,
                settings: None,
                ended: false,
                gone_since: None,
            }
        });
        p.gone_since = None;
        p.info.start_session_version = adv.command_version(START_SESSION);
        p.info.suspended = adv.suspended;
        p.info.peer = peer;
        p.open += 1;
        if let Some(old) = p.control.take()
            && !p.pending.contains_key(&old.conn)
        {
            // The program gave up on that connection and opened this one.
            let _ = old.stream.shutdown(Shutdown::Both);
        }
        p.control = Some(Control {
            conn,
            stream: write,
        });
        p.refresh_state();
        self.apply_policy(p);
    }

    /// The server's policy, applied whenever a program is idle on a control connection:
    /// start a session first (so start-up is recorded), then resume.
    fn apply_policy(&self, p: &mut Process) {
        if p.control.is_none() || !p.pending.is_empty() {
            return;
        }
        if let Some(cmd) = p.queued.pop_front() {
            if let Err(e) = self.send(p, cmd) {
                self.log(&e);
            }
            return;
        }
        let policy = self.policy.lock().clone();
        let auto_start =
            p.stream.is_none() && !p.stopped && !p.ended && policy.auto_start.is_some();
        let cmd = if auto_start {
            // A user's own settings for this program win over the server's.
            let settings = p.settings.clone().or(policy.auto_start.clone());
            match settings.map(|s| start_command(&p.info, s)) {
                Some(Ok(cmd)) => Some(cmd),
                Some(Err(e)) => {
                    self.log(&e);
                    p.info.last_error = Some(e);
                    p.stopped = true;
                    None
                }
                None => None,
            }
        } else {
            None
        };
        let cmd = cmd.or_else(|| {
            (p.info.suspended
                && policy.auto_resume
                && (p.stream.is_some() || p.stopped || policy.auto_start.is_none()))
            .then_some(Command::Resume)
        });
        if let Some(cmd) = cmd
            && let Err(e) = self.send(p, cmd)
        {
            self.log(&e);
        }
    }

    /// Writes a command on the program's control connection, or queues it until one is
    /// idle (a command is in flight, or the program is between connections).
    fn send(&self, p: &mut Process, cmd: Command) -> Result<(), String> {
        let name = command_name(cmd.code_version().0);
        if p.info.state == ProcessState::Gone {
            return Err(format!("{} (pid {}) is gone", p.info.name, p.info.pid));
        }
        let Some(c) = p.control.as_mut().filter(|_| p.pending.is_empty()) else {
            // A newer request of the same command replaces a queued one.
            let code = cmd.code_version().0;
            p.queued.retain(|q| q.code_version().0 != code);
            p.queued.push_back(cmd);
            return Ok(());
        };
        let mut out = Vec::new();
        cmd.encode(&mut out);
        // A program that does not read its control connection cannot hold this thread (a
        // command is far smaller than a socket buffer).
        let _ = c.stream.set_write_timeout(Some(Duration::from_secs(1)));
        (&*c.stream)
            .write_all(&out)
            .map_err(|e| format!("sending {name} to {}: {e}", p.info.name))?;
        p.pending.insert(c.conn, (cmd, Instant::now()));
        Ok(())
    }

    fn read_loop(
        &self,
        conn: u64,
        stream: &TcpStream,
        adv: &Advertise,
        payload: &mut Vec<u8>,
    ) -> Ending {
        let mut output: Option<Arc<Output>> = None;
        // On an acknowledged (v3) stream: frame records appended so far.
        let mut acked: Option<u64> = None;
        let stop = || self.must_stop();
        loop {
            if self.must_stop() {
                return Ending::Closed;
            }
            // Wait for a message to begin, checking for shutdown (a read already blocked
            // would not notice it) and for a Reply that is overdue; then read it whole
            // within its deadline.
            let _ = stream.set_read_timeout(Some(POLL));
            match stream.peek(&mut [0u8]) {
                Ok(0) => return Ending::Closed,
                Ok(_) => {}
                Err(e) if is_timeout(&e) || e.kind() == std::io::ErrorKind::Interrupted => {
                    if self.closing.load(Ordering::Acquire) && is_timeout(&e) {
                        // Quiet at shutdown: everything sent has been read.
                        return Ending::Closed;
                    }
                    if let Some(what) = self.overdue_reply(adv.instance, conn) {
                        return Ending::Error(format!(
                            "no Reply to {what} within {} s",
                            REPLY_TIMEOUT.as_secs()
                        ));
                    }
                    continue;
                }
                Err(_) if output.is_some() || self.closing.load(Ordering::Acquire) => {
                    return Ending::Closed;
                }
                Err(e) => return Ending::Error(e.to_string()),
            }
            let max = if output.is_some() {
                formats::protocol::MAX_STREAM_PAYLOAD + 1
            } else {
                MAX_CONTROL_LEN as usize
            };
            let mut whole =
                DeadlineReader::new(stream, Instant::now() + MESSAGE_TIMEOUT, POLL, &stop);
            let kind = match read_message(&mut whole, payload, max) {
                Ok(Some(k)) => k,
                Ok(None) => return Ending::Closed,
                Err(WireError::Io(_)) if self.closing.load(Ordering::Acquire) => {
                    return Ending::Closed;
                }
                Err(WireError::Io(e)) if is_timeout(&e) => {
                    return Ending::Error(format!(
                        "a message did not arrive whole within {} s",
                        MESSAGE_TIMEOUT.as_secs()
                    ));
                }
                Err(WireError::Io(_)) if output.is_some() => {
                    // A stream cut mid-message (the program was killed): its whole messages
                    // are in the log already.
                    return Ending::Closed;
                }
                Err(e) => return Ending::Error(e.to_string()),
            };
            // Buffers follow what arrives: one 8 MiB message does not pin 8 MiB forever.
            if payload.capacity() > 1 << 20 && payload.len() < 1 << 16 {
                payload.shrink_to(1 << 16);
            }
            let result = match (kind, &output) {
                (Kind::Reply, None) => match Reply::decode(payload) {
                    Ok(reply) => {
                        let version = reply.version;
                        match self.on_reply(conn, adv, reply) {
                            Ok(o) => {
                                acked =
                                    (o.is_some() && version >= ACKED_START_SESSION).then_some(0);
                                output = o;
                                Ok(())
                            }
                            Err(e) => Err(e),
                        }
                    }
                    Err(e) => Err(e.to_string()),
                },
                (Kind::Frames, Some(o)) => {
                    self.append_frames(adv.instance, o, payload)
                        .and_then(|n| match &mut acked {
                            Some(total) => {
                                *total += n;
                                send_ack(stream, *total)
                            }
                            None => Ok(()),
                        })
                }
                (Kind::Data, Some(o)) => append_data(o, payload),
                (Kind::End, Some(_)) => {
                    return match decode_end(payload) {
                        Ok(unsent) => {
                            // The last Ack: the program waits for it before it closes.
                            if let Some(total) = acked {
                                let _ = send_ack(stream, total);
                            }
                            Ending::End(unsent)
                        }
                        Err(e) => Ending::Error(e.to_string()),
                    };
                }
                (kind, _) => Err(format!("unexpected {kind:?} message")),
            };
            if let Err(e) = result {
                return Ending::Error(e);
            }
        }
    }

    /// The command on `conn` whose Reply is overdue, if any.
    fn overdue_reply(&self, instance: u64, conn: u64) -> Option<&'static str> {
        let procs = self.processes.lock();
        let (cmd, sent) = procs.get(&instance)?.pending.get(&conn)?;
        (sent.elapsed() >= REPLY_TIMEOUT).then(|| command_name(cmd.code_version().0))
    }

    /// Handles a Reply; returns the output to stream into when it started a session.
    fn on_reply(
        &self,
        conn: u64,
        adv: &Advertise,
        reply: Reply,
    ) -> Result<Option<Arc<Output>>, String> {
        let mut procs = self.processes.lock();
        let p = procs.get_mut(&adv.instance).ok_or("program forgotten")?;
        let (pending, _) = p.pending.remove(&conn).ok_or("a Reply without a command")?;
        if pending.code_version() != (reply.code, reply.version) {
            return Err(format!(
                "Reply to {} v{} for {} v{}",
                command_name(reply.code),
                reply.version,
                command_name(pending.code_version().0),
                pending.code_version().1
            ));
        }
        // This connection is no longer the program's control connection: it opens a new one.
        if p.control.as_ref().is_some_and(|c| c.conn == conn) {
            p.control = None;
        }
        let name = command_name(reply.code);
        if reply.status != Status::Ok {
            let e = format!(
                "{} (pid {}) answered {name} v{}: {:?}: {}",
                p.info.name,
                p.info.pid,
                reply.version,
                reply.status,
                printable(&reply.text)
            );
            self.log(&e);
            p.info.last_error = Some(e);
            if reply.code == START_SESSION {
                // Do not ask again on every reconnect; a user may retry.
                p.stopped = true;
            }
            self.apply_policy(p);
            return Ok(None);
        }
        match reply.code {
            START_SESSION => {
                p.info.last_error = None;
                let output = match &p.output {
                    Some(o) => o.clone(),
                    None => {
                        let mut opts = self.opts.writer.clone();
                        opts.process_name = Some(p.info.name.clone());
                        opts.pid = Some(p.info.pid);
                        opts.worker = None;
                        let writer = LogWriter::open_with(&self.opts.dir, opts)
                            .map_err(|e| format!("opening the log for {}: {e}", p.info.name))?;
                        let o = Arc::new(Output {
                            map: Mutex::new(KeyMap::new(writer.worker())),
                            writer,
                        });
                        p.info.worker = Some(o.writer.worker());
                        p.output = Some(o.clone());
                        o
                    }
                };
                p.stream = Some(conn);
                self.log(&format!(
                    "recording {} (pid {}) as worker {}",
                    p.info.name,
                    p.info.pid,
                    output.writer.worker()
                ));
                p.refresh_state();
                self.apply_policy(p);
                Ok(Some(output))
            }
            STOP_SESSION => {
                self.log(&format!("stopped {} (pid {})", p.info.name, p.info.pid));
                Ok(None)
            }
            RESUME => {
                p.info.suspended = false;
                p.refresh_state();
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    /// Appends one Frames message; returns its frame records (starts and ends).
    fn append_frames(&self, instance: u64, o: &Output, payload: &mut [u8]) -> Result<u64, String> {
        let counts = {
            let mut map = o.map.lock();
            map.rewrite_records(payload, &mut |n| o.writer.reserve_ids(n))
                .map_err(|e: RewriteError| format!("Frames message: {e}"))?
        };
        o.writer
            .append_frames(payload)
            .map_err(|e| format!("appending to the log: {e}"))?;
        self.frames.fetch_add(counts.starts, Ordering::Relaxed);
        if let Some(p) = self.processes.lock().get_mut(&instance) {
            p.info.frames += counts.starts;
            p.info.lost += counts.dropped;
        }
        Ok(counts.starts + counts.ends)
    }
}

/// Tells the program of a v3 stream how many of its frame records are in the log.
fn send_ack(stream: &TcpStream, records: u64) -> Result<(), String> {
    let mut out = Vec::with_capacity(13);
    encode_ack(records, &mut out);
    // A program reads its Acks as they come; one that does not is cut off, not waited for.
    let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
    (&*stream)
        .write_all(&out)
        .map_err(|e| format!("sending an Ack: {e}"))
}

fn append_data(o: &Output, payload: &[u8]) -> Result<(), String> {
    let entries = decode_data(payload).map_err(|e| e.to_string())?;
    let mut batch = DataBatch::new();
    let mut map = o.map.lock();
    for e in entries {
        // Whole and well-formed, or the connection closes: nothing unreadable reaches the log.
        formats::bson_check::check_document(e.doc)
            .map_err(|err| format!("Data message: frame {}: {err}", e.id))?;
        let id = map
            .id(e.id, &mut |n| o.writer.reserve_ids(n))
            .map_err(|err| format!("reserving frame ids: {err}"))?;
        batch.push(FrameKey::new(map.worker(), id), e.doc);
    }
    drop(map);
    o.writer
        .append_data(&batch)
        .map_err(|e| format!("appending frame data: {e}"))
}
