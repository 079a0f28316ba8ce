//! What bounds a viewer server whatever its peers do: open files, bytes queued for viewers,
//! wrong-token guesses per address, and log lines about refusals.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// Raises this process's soft limit on open files to its hard limit (as servers do: the
/// default soft limit, often 1,024, is far under what the hard limit allows) and returns the
/// soft limit now in force (`None` where it cannot be read).
pub fn raise_open_files_limit() -> Option<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut lim = getrlimit(Resource::Nofile);
    if let (Some(cur), Some(max)) = (lim.current, lim.maximum)
        && cur < max
    {
        lim.current = Some(max);
        let _ = setrlimit(Resource::Nofile, lim);
    }
    getrlimit(Resource::Nofile).current
}

/// The soft limit on open files (`None`: unlimited or unknown).
pub fn open_files_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// Descriptors open in this process now (Linux: `/proc/self/fd`; elsewhere a guess).
pub fn open_files() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count() as u64)
        .unwrap_or(64)
}

/// A budget of bytes held by messages queued for viewers: a message waits for room unless
/// nothing is held (so one larger than the budget still goes, alone).
pub struct ByteBudget {
    cap: usize,
    used: Mutex<usize>,
    room: Condvar,
}

impl ByteBudget {
    /// A budget of `cap` bytes.
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self {
            cap,
            used: Mutex::new(0),
            room: Condvar::new(),
        })
    }

    /// Takes `n` bytes, waiting for room in steps of `step` while `go_on()` holds; `false`
    /// if it gave up.
    pub fn take(&self, n: usize, step: Duration, go_on: &dyn Fn() -> bool) -> bool {
        let mut used = self.used.lock();
        while *used != 0 && *used + n > self.cap {
            if !go_on() {
                return false;
            }
            self.room.wait_for(&mut used, step);
        }
        *used += n;
        true
    }

    /// Gives `n` bytes back.
    pub fn give(&self, n: usize) {
        let mut used = self.used.lock();
        *used = used.saturating_sub(n);
        drop(used);
        self.room.notify_all();
    }

    /// Bytes held now.
    pub fn used(&self) -> usize {
        *self.used.lock()
    }
}

/// Bytes of one queued message, held in a viewer's own budget and the server's; given back
/// when dropped (once the message is written to the socket, or dropped unsent).
pub struct Held {
    n: usize,
    budgets: [Arc<ByteBudget>; 2],
}

impl Held {
    /// Takes `n` bytes of `own` (the viewer's), then of `all` (the server's), waiting while
    /// `go_on()` holds; `None` if it gave up.
    pub fn take(
        n: usize,
        own: &Arc<ByteBudget>,
        all: &Arc<ByteBudget>,
        go_on: &dyn Fn() -> bool,
    ) -> Option<Held> {
        const STEP: Duration = Duration::from_millis(100);
        if !own.take(n, STEP, go_on) {
            return None;
        }
        if !all.take(n, STEP, go_on) {
            own.give(n);
            return None;
        }
        Some(Held {
            n,
            budgets: [own.clone(), all.clone()],
        })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        for b in &self.budgets {
            b.give(self.n);
        }
    }
}

/// Wrong tokens, per peer address: each address's guesses are checked one at a time, each
/// after a delay that doubles with every wrong one (from 50 ms to 2 s), so guessing from
/// one address runs at most one guess every 2 s. A right token clears the address.
pub struct TokenThrottle {
    peers: Mutex<HashMap<IpAddr, Failures>>,
}

struct Failures {
    count: u32,
    /// When the next guess from this address may be checked.
    next: Instant,
    last: Instant,
}

/// Most delay between two checks from one address.
const MAX_DELAY: Duration = Duration::from_secs(2);
/// An address's failures are forgotten this long after its last one.
const FORGET: Duration = Duration::from_secs(600);
/// Addresses remembered at most (the oldest are forgotten first).
const MAX_PEERS: usize = 4096;

/// The answer to [`TokenThrottle::admit`].
pub enum Admit {
    /// Check now.
    Now,
    /// Check after this wait.
    After(Duration),
    /// Too many guesses queued from this address: refuse without checking.
    Refuse,
}

impl TokenThrottle {
    /// An empty throttle.
    pub fn new() -> Self {
        Self {
            peers: Mutex::new(HashMap::new()),
        }
    }

    /// When a token from `ip` may be checked; a wait that would pass `most` is refused.
    pub fn admit(&self, ip: IpAddr, most: Duration) -> Admit {
        let now = Instant::now();
        let mut peers = self.peers.lock();
        let Some(f) = peers.get_mut(&ip) else {
            return Admit::Now;
        };
        if now.duration_since(f.last) >= FORGET {
            peers.remove(&ip);
            return Admit::Now;
        }
        let at = f.next.max(now);
        let wait = at - now;
        if wait > most {
            return Admit::Refuse;
        }
        f.next = at + delay(f.count);
        if wait.is_zero() {
            Admit::Now
        } else {
            Admit::After(wait)
        }
    }

    /// Notes a wrong token from `ip`; returns how many in a row.
    pub fn failed(&self, ip: IpAddr) -> u32 {
        let now = Instant::now();
        let mut peers = self.peers.lock();
        if peers.len() >= MAX_PEERS && !peers.contains_key(&ip) {
            peers.retain(|_, f| now.duration_since(f.last) < FORGET);
            if peers.len() >= MAX_PEERS
                && let Some(oldest) = peers.iter().min_by_key(|(_, f)| f.last).map(|(k, _)| *k)
            {
                peers.remove(&oldest);
            }
        }
        let f = peers.entry(ip).or_insert(Failures {
            count: 0,
            next: now,
            last: now,
        });
        f.count = f.count.saturating_add(1);
        f.last = now;
        f.next = f.next.max(now + delay(f.count));
        f.count
    }

    /// Notes a right token from `ip`.
    pub fn succeeded(&self, ip: IpAddr) {
        self.peers.lock().remove(&ip);
    }
}

impl Default for TokenThrottle {
    fn default() -> Self {
        Self::new()
    }
}

fn delay(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let ms = 50u64.saturating_mul(1u64 << (failures - 1).min(16));
    Duration::from_millis(ms).min(MAX_DELAY)
}

/// Log lines about peers (refusals, violations), at most [`LogLimit::PER_WINDOW`] per
/// 10 s; the rest are counted and the count said with the next line let through.
pub struct LogLimit {
    state: Mutex<(Instant, u32, u64)>,
}

impl LogLimit {
    /// Lines let through per window.
    pub const PER_WINDOW: u32 = 20;
    const WINDOW: Duration = Duration::from_secs(10);

    /// A fresh limit.
    pub fn new() -> Self {
        Self {
            state: Mutex::new((Instant::now(), 0, 0)),
        }
    }

    /// Passes `line` to `log` unless the window's lines are used up.
    pub fn log(&self, log: &dyn Fn(&str), line: &str) {
        let mut s = self.state.lock();
        if s.0.elapsed() >= Self::WINDOW {
            *s = (Instant::now(), 0, s.2);
        }
        if s.1 >= Self::PER_WINDOW {
            s.2 += 1;
            return;
        }
        s.1 += 1;
        let dropped = std::mem::take(&mut s.2);
        drop(s);
        if dropped > 0 {
            log(&format!("{line} ({dropped} similar lines left out)"));
        } else {
            log(line);
        }
    }
}

impl Default for LogLimit {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_lets_one_large_message_through_alone_and_waits_otherwise() {
        let b = ByteBudget::new(100);
        assert!(b.take(150, Duration::from_millis(1), &|| true));
        // Full: a second message waits, and gives up when told.
        assert!(!b.take(1, Duration::from_millis(1), &|| false));
        b.give(150);
        assert!(b.take(60, Duration::from_millis(1), &|| true));
        assert!(b.take(40, Duration::from_millis(1), &|| true));
        assert!(!b.take(1, Duration::from_millis(1), &|| false));
        assert_eq!(b.used(), 100);
        let own = ByteBudget::new(10);
        let all = ByteBudget::new(1000);
        let h = Held::take(8, &own, &all, &|| true).unwrap();
        assert!(Held::take(8, &own, &all, &|| false).is_none());
        assert_eq!(all.used(), 8);
        drop(h);
        assert_eq!((own.used(), all.used()), (0, 0));
    }

    #[test]
    fn wrong_tokens_from_one_address_are_slowed_and_a_right_one_clears_them() {
        let t = TokenThrottle::new();
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.1".parse().unwrap();
        assert!(matches!(t.admit(ip, MAX_DELAY * 4), Admit::Now));
        for i in 1..=8 {
            assert_eq!(t.failed(ip), i);
        }
        // The next guess waits the longest delay; queued ones wait more, up to the limit.
        let Admit::After(w) = t.admit(ip, Duration::from_secs(10)) else {
            panic!("not delayed");
        };
        assert!(w > Duration::from_millis(1000) && w <= MAX_DELAY, "{w:?}");
        let Admit::After(w2) = t.admit(ip, Duration::from_secs(10)) else {
            panic!("not delayed");
        };
        assert!(w2 > w);
        while !matches!(t.admit(ip, Duration::from_secs(10)), Admit::Refuse) {}
        assert!(matches!(t.admit(other, MAX_DELAY), Admit::Now));
        t.succeeded(ip);
        assert!(matches!(t.admit(ip, MAX_DELAY), Admit::Now));
    }

    #[test]
    fn the_open_files_limit_is_raised_to_the_hard_limit() {
        let soft = raise_open_files_limit();
        let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum;
        assert_eq!(soft, hard);
        assert!(open_files() >= 3);
    }
}
