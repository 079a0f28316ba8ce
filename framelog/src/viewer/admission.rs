//! A viewer server's admission state: its limits, the connections it holds (each with its
//! phase: waiting for a request head, busy, a viewer), and what they share. The HTTP side
//! (`http`) admits and routes with it; each viewer's loop (`viewer_loop`) reports through it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hyper::server::conn::http1;
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::limits::{ByteBudget, LogLimit, TokenThrottle};
use super::static_files::Cache;

/// A viewer must say Hello within this time.
pub const HELLO_DEADLINE: Duration = Duration::from_secs(10);
/// A request head must arrive whole within this time (from the connection's start, or from
/// the end of the previous response).
pub const HEAD_DEADLINE: Duration = Duration::from_secs(10);
/// A viewer whose socket takes no bytes for this long is disconnected.
pub const STALL_LIMIT: Duration = Duration::from_secs(30);
/// A viewer is pinged when nothing was sent to it for this long.
pub const PING_EVERY: Duration = Duration::from_secs(5);
/// A viewer that has neither sent anything (a pong, a request) nor taken records for this
/// long is closed.
pub const IDLE_LIMIT: Duration = Duration::from_secs(20);
/// When every viewer slot is taken, a new viewer takes the place of one silent this long
/// (it left a ping unanswered).
pub const EVICTABLE_AFTER: Duration = Duration::from_secs(8);
/// At shutdown, responses under way and viewers' closing handshakes get this long.
pub const DRAIN: Duration = Duration::from_secs(5);
/// Viewers served at once unless told otherwise.
pub const DEFAULT_MAX_VIEWERS: usize = 64;
/// HTTP connections (viewers included) served at once unless told otherwise.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// Bytes queued for one viewer (a larger message goes alone).
pub const VIEWER_QUEUE_BYTES: usize = 4 << 20;
/// Bytes queued for all viewers together.
pub const ALL_VIEWERS_QUEUE_BYTES: usize = 64 << 20;
/// Descriptors a viewer's session may hold besides its socket (log segment, data and index
/// files), for the open-files budget.
pub(super) const FILES_PER_VIEWER: u64 = 8;
/// Encoded messages queued between a viewer's reading thread and its socket.
pub(super) const QUEUE: usize = 4;
/// How often an idle session looks for new records (the live latency's floor).
pub(super) const POLL: Duration = Duration::from_millis(20);
/// How long a closing server waits for the viewer's side of the closing handshake.
pub(super) const CLOSE_HANDSHAKE: Duration = Duration::from_secs(2);
/// Connections killed to make room but not yet gone, at most (beyond, accepting waits).
pub(super) const SLACK: usize = 64;
/// What a viewer server serves and to whom.
#[derive(Clone)]
pub struct ViewerOptions {
    /// The log directory.
    pub dir: PathBuf,
    /// The built browser viewer (its `index.html` and files); `None` serves a page saying
    /// how to build it.
    pub web_root: Option<PathBuf>,
    /// The secret viewers must present; required on any address but loopback.
    pub token: Option<String>,
    /// Viewers served at once; more are refused as busy.
    pub max_viewers: usize,
    /// HTTP connections served at once (viewers included).
    pub max_connections: usize,
    /// Open files kept for the rest of the process: the server takes no more connections
    /// (and viewers, which open log files) than leave this many descriptors under the
    /// open-files limit.
    pub fd_reserve: u64,
    /// Whether this process records the log (`serve`) rather than only reads it (`view`).
    pub recording: bool,
    /// Where one-line notes go (refusals, disconnections).
    pub log: Arc<dyn Fn(&str) + Send + Sync>,
}

impl ViewerOptions {
    /// Options for serving the log in `dir` on loopback without a token.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            web_root: None,
            token: None,
            max_viewers: DEFAULT_MAX_VIEWERS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            fd_reserve: 64,
            recording: false,
            log: Arc::new(|_| {}),
        }
    }
}

/// A one-way switch tasks can wait for.
pub(super) struct Flag {
    pub(super) set: AtomicBool,
    pub(super) notify: Notify,
}

impl Flag {
    pub(super) fn new() -> Self {
        Self {
            set: AtomicBool::new(false),
            notify: Notify::new(),
        }
    }

    pub(super) fn raise(&self) {
        self.set.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub(super) fn is_set(&self) -> bool {
        self.set.load(Ordering::SeqCst)
    }

    pub(super) async fn wait(&self) {
        let notified = self.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.is_set() {
            return;
        }
        notified.await;
    }
}

/// Where a connection is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub(super) enum Phase {
    /// No request under way: its head is not whole yet, or it is idle between requests.
    Waiting = 0,
    /// A request is being answered.
    Busy = 1,
    /// A WebSocket that has not said Hello (or is being checked).
    Upgraded = 2,
    /// A viewer.
    Viewer = 3,
}

/// One connection, as the budget sees it.
pub(super) struct Entry {
    pub(super) id: u64,
    pub(super) phase: AtomicU8,
    /// When the phase last changed (ms since the server's epoch).
    pub(super) since: AtomicU64,
    /// Since when its writes have made no progress (0: they do).
    pub(super) stalled: AtomicU64,
    /// When a viewer last sent something or took records.
    pub(super) active: AtomicU64,
    pub(super) kill: Flag,
}

impl Entry {
    pub(super) fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Acquire) {
            0 => Phase::Waiting,
            1 => Phase::Busy,
            2 => Phase::Upgraded,
            _ => Phase::Viewer,
        }
    }

    pub(super) fn set_phase(&self, p: Phase, now: u64) {
        self.phase.store(p as u8, Ordering::Release);
        self.since.store(now, Ordering::Release);
    }
}

pub(super) struct Shared {
    pub(super) opts: ViewerOptions,
    pub(super) epoch: Instant,
    pub(super) conns: Mutex<HashMap<u64, Arc<Entry>>>,
    pub(super) next_id: AtomicU64,
    pub(super) max_connections: usize,
    pub(super) max_viewers: usize,
    /// The open-files limit and the descriptors the HTTP side may not take from it.
    pub(super) fd_limit: Option<u64>,
    /// Open descriptors, sampled (at most every 250 ms) while the server is full.
    pub(super) fd_open: AtomicU64,
    pub(super) fd_sampled: AtomicU64,
    pub(super) stop: Flag,
    pub(super) all_queued: Arc<ByteBudget>,
    pub(super) throttle: TokenThrottle,
    pub(super) notes: LogLimit,
    pub(super) cache: Cache,
    pub(super) http: http1::Builder,
}

impl Shared {
    pub(super) fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    pub(super) fn log(&self, line: &str) {
        (self.opts.log)(line);
    }

    /// A note about a peer, rate-limited (a flood of peers cannot flood the log).
    pub(super) fn note(&self, line: &str) {
        self.notes.log(&*self.opts.log, line);
    }

    /// Whether open descriptors come within half the reserve of the limit (counted at most
    /// every 250 ms).
    pub(super) fn fds_short(&self, now: u64) -> bool {
        let Some(limit) = self.fd_limit else {
            return false;
        };
        if now.saturating_sub(self.fd_sampled.load(Ordering::Relaxed)) >= 250 {
            self.fd_open
                .store(super::limits::open_files(), Ordering::Relaxed);
            self.fd_sampled.store(now, Ordering::Relaxed);
        }
        self.fd_open.load(Ordering::Relaxed) + self.opts.fd_reserve / 2 >= limit
    }

    /// Connections killed to make room whose tasks have not ended yet.
    pub(super) fn killed_not_gone(&self) -> usize {
        self.conns
            .lock()
            .values()
            .filter(|e| e.kill.is_set())
            .count()
    }

    /// Takes a new connection into the budget, making room if it must; `None`: refuse it.
    pub(super) fn admit(&self) -> Option<Arc<Entry>> {
        let now = self.now();
        let mut conns = self.conns.lock();
        let live = conns.values().filter(|e| !e.kill.is_set()).count();
        if live >= self.max_connections || self.fds_short(now) {
            let victim = conns
                .values()
                .filter(|e| !e.kill.is_set())
                .filter_map(|e| match e.phase() {
                    Phase::Waiting | Phase::Upgraded => {
                        Some((0, e.since.load(Ordering::Acquire), e))
                    }
                    Phase::Busy => {
                        let s = e.stalled.load(Ordering::Acquire);
                        (s != 0 && now.saturating_sub(s) >= 1000).then_some((1, s, e))
                    }
                    Phase::Viewer => None,
                })
                .min_by_key(|(rank, at, _)| (*rank, *at))
                .map(|(_, _, e)| e.clone())?;
            victim.kill.raise();
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let e = Arc::new(Entry {
            id,
            phase: AtomicU8::new(Phase::Waiting as u8),
            since: AtomicU64::new(now),
            stalled: AtomicU64::new(0),
            active: AtomicU64::new(now),
            kill: Flag::new(),
        });
        conns.insert(id, e.clone());
        Some(e)
    }

    /// Makes `entry` a viewer if a viewer slot is free or can be freed (from a viewer
    /// silent for [`EVICTABLE_AFTER`]).
    pub(super) fn admit_viewer(&self, entry: &Entry) -> bool {
        let now = self.now();
        let conns = self.conns.lock();
        let viewers = || {
            conns
                .values()
                .filter(|e| !e.kill.is_set() && e.phase() == Phase::Viewer)
        };
        if viewers().count() >= self.max_viewers {
            let silent = EVICTABLE_AFTER.as_millis() as u64;
            let Some(victim) = viewers()
                .map(|e| (e.active.load(Ordering::Acquire), e))
                .filter(|(at, _)| now.saturating_sub(*at) >= silent)
                .min_by_key(|(at, _)| *at)
                .map(|(_, e)| e)
            else {
                return false;
            };
            victim.kill.raise();
        }
        entry.active.store(now, Ordering::Release);
        entry.set_phase(Phase::Viewer, now);
        true
    }
}

/// A connection's place in the budget; leaves it when the last holder drops it (the HTTP
/// connection, then the WebSocket task if it was upgraded).
pub(super) struct Slot {
    pub(super) shared: Arc<Shared>,
    pub(super) entry: Arc<Entry>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.shared.conns.lock().remove(&self.entry.id);
    }
}
