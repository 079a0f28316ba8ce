//! Where an asynchronous frame's time goes (`docs/FORMAT.md`, *Async time*): each poll of an
//! `in_frame` future (or each enter → exit of a `tracing` span) is timed, wakes are seen
//! through a wrapped waker, and a poll that holds its thread past the slow-poll threshold is
//! reported once, at the outermost poll on the thread, naming the innermost frame that was
//! that slow.
//!
//! Cost per poll of a recorded frame: two clock reads, a relaxed load of the wake time, two
//! relaxed stores of the "being polled" flag, and a `will_wake` comparison; the waker is
//! wrapped again only when the runtime hands the future a different one (tokio: once per
//! task), which is the only allocation. A wake reads the clock only when it comes between
//! polls: a wake during a poll (a self-wake, a sibling in `join!`) counts from the poll's end,
//! which the poll reads anyway.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Wake, Waker};
use std::time::Duration;

use formats::Level;
use serde::Serialize;

use crate::clock::Clock;
use crate::inner::Inner;
use crate::local;

pub(crate) use crate::poll_times::PollTimes;

/// `Builder::slow_poll`'s default.
pub(crate) const DEFAULT_SLOW_POLL: Duration = Duration::from_millis(1);

/// [`WakeState::woken_at`] of a wake during a poll: it counts from that poll's end (a time
/// no later than any poll's end, so [`PollTimes::begin`] takes the end).
const WOKEN_IN_POLL: u64 = 1;

/// What a wrapped waker shares with its future: when it was first woken since the last poll.
struct WakeState {
    /// ns since the epoch of the first wake since the last poll; 0: none; [`WOKEN_IN_POLL`].
    woken_at: AtomicU64,
    /// The future is being polled.
    polling: AtomicBool,
    inner: Waker,
    clock: &'static Clock,
}

impl WakeState {
    fn mark(&self) {
        // The first wake since the last poll is when the future became ready. A load and a
        // store, not a compare-exchange: two wakes racing both set a time of a wake since
        // the poll, and either is right; a wake racing the next poll's `take_woken` is a
        // wake after that poll began, and counts for the one after it. A wake seen during a
        // poll (or racing its end) is ready when the poll ends: no clock read.
        if self.woken_at.load(Ordering::Relaxed) == 0 {
            let t = if self.polling.load(Ordering::Relaxed) {
                WOKEN_IN_POLL
            } else {
                self.clock.now().max(WOKEN_IN_POLL + 1)
            };
            self.woken_at.store(t, Ordering::Relaxed);
        }
    }
}

impl Wake for WakeState {
    fn wake(self: Arc<Self>) {
        self.mark();
        self.inner.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.mark();
        self.inner.wake_by_ref();
    }
}

/// The waker an `in_frame` future is polled with: the runtime's, wrapped to note wakes.
pub(crate) struct WakeHook {
    state: Arc<WakeState>,
    waker: Waker,
}

impl WakeHook {
    /// The hook for a poll given `cx_waker`: `hook` itself while the runtime's waker is the
    /// same, else a new wrapper (the only allocation).
    #[inline]
    pub(crate) fn for_poll<'a>(
        hook: &'a mut Option<WakeHook>,
        cx_waker: &Waker,
        clock: &'static Clock,
    ) -> &'a WakeHook {
        if hook
            .as_ref()
            .is_none_or(|h| !h.state.inner.will_wake(cx_waker))
        {
            *hook = Some(Self::wrap(cx_waker, clock));
        }
        hook.as_ref().expect("set above")
    }

    #[cold]
    fn wrap(cx_waker: &Waker, clock: &'static Clock) -> WakeHook {
        let state = Arc::new(WakeState {
            woken_at: AtomicU64::new(0),
            polling: AtomicBool::new(false),
            inner: cx_waker.clone(),
            clock,
        });
        WakeHook {
            waker: Waker::from(state.clone()),
            state,
        }
    }

    /// The waker to poll the future with.
    pub(crate) fn waker(&self) -> &Waker {
        &self.waker
    }

    /// When the waker was first woken since the last call (0: not woken; a time no later
    /// than the last poll's end: woken during it), and forgets it.
    #[inline]
    pub(crate) fn take_woken(&self) -> u64 {
        let t = self.state.woken_at.load(Ordering::Relaxed);
        if t != 0 {
            // A load and a store, not a swap: a wake between them finds the time set and
            // stores nothing, so none is lost (see `WakeState::mark`).
            self.state.woken_at.store(0, Ordering::Relaxed);
        }
        t
    }

    /// The future's poll begins (`true`) or ended (`false`).
    #[inline]
    pub(crate) fn set_polling(&self, on: bool) {
        self.state.polling.store(on, Ordering::Relaxed);
    }
}

/// The frame a slow poll is blocked in: its recorder, id and context.
#[derive(Clone, Copy)]
struct Blocker {
    inner: *const Inner,
    id: u32,
    ctx: u32,
}

/// The thread's nest of polls (for slow-poll attribution).
#[derive(Clone, Copy, Default)]
struct Nest {
    depth: u32,
    /// The innermost frame whose own poll was slow, in the poll under way.
    blocker: Option<Blocker>,
    /// The thread polls futures (an `in_frame` poll, or a span entered again): a long
    /// stretch of a span on it is a blocked worker, not a synchronous span on a plain thread.
    poller: bool,
}

thread_local! {
    static NEST: Cell<Nest> = const { Cell::new(Nest { depth: 0, blocker: None, poller: false }) };
}

/// A poll begins on this thread (an `in_frame` poll or a span's stretch on a poller thread).
/// `poller`: the thread is now known to poll futures.
#[inline]
pub(crate) fn nest_enter(poller: bool) {
    let _ = NEST.try_with(|n| {
        let mut v = n.get();
        v.depth += 1;
        v.poller |= poller;
        n.set(v);
    });
}

/// A poll begun by [`nest_enter`] that ends in a panic: leaves the nest as [`nest_exit`]
/// would, reporting nothing (the poll is not counted).
#[cold]
pub(crate) fn nest_unwind() {
    let _ = NEST.try_with(|n| {
        let mut v = n.get();
        v.depth = v.depth.saturating_sub(1);
        if v.depth == 0 {
            v.blocker = None;
        }
        n.set(v);
    });
}

/// Whether this thread polls futures (see [`Nest::poller`]).
#[cfg(feature = "tracing")]
pub(crate) fn is_poller() -> bool {
    NEST.try_with(|n| n.get().poller).unwrap_or(false)
}

/// The poll begun by the matching [`nest_enter`] ended after `d` ns (it began at `t0`), in
/// frame `id` (context `ctx`) of `inner`. A slow poll is written when the outermost poll on
/// the thread ends, naming the innermost frame that was that slow.
#[inline]
pub(crate) fn nest_exit(inner: &Arc<Inner>, id: u32, ctx: u32, t0: u64, d: u64) {
    let slow = d >= inner.slow_poll_ns;
    let Ok(mut v) = NEST.try_with(Cell::get) else {
        return;
    };
    v.depth = v.depth.saturating_sub(1);
    if slow && v.blocker.is_none() {
        v.blocker = Some(Blocker {
            inner: Arc::as_ptr(inner),
            id,
            ctx,
        });
    }
    let report = (v.depth == 0).then(|| v.blocker.take()).flatten();
    let _ = NEST.try_with(|n| n.set(v));
    if let Some(b) = report
        && slow
    {
        // Another recorder's frame blocked inside this one's poll: named as this frame.
        let (id, ctx) = if std::ptr::eq(b.inner, Arc::as_ptr(inner)) {
            (b.id, b.ctx)
        } else {
            (id, ctx)
        };
        report_slow(inner, id, ctx, t0, d);
    }
}

/// `d` ns as people read a slow poll: `20.1 ms`.
fn millis(d: u64) -> String {
    format!("{:.1} ms", d as f64 / 1e6)
}

/// The warning message's fields.
#[derive(Serialize)]
struct SlowFields<'a> {
    slow_poll_ns: u64,
    thread: &'a str,
}

/// Writes a slow poll (type 11) and its warning message, on the calling thread's buffer.
#[cold]
#[inline(never)]
fn report_slow(inner: &Arc<Inner>, id: u32, ctx: u32, t0: u64, d: u64) {
    let current = std::thread::current();
    let thread = current.name().unwrap_or("unnamed");
    let text = format!(
        "slow poll: thread {thread} blocked for {} inside one poll",
        millis(d)
    );
    // No user code runs here (the fields are ours), so encoding before taking the entry
    // is only for symmetry with `message_with_on`.
    let fields = if inner.gate.records_instants() {
        inner
            .encode_document(&SlowFields {
                slow_poll_ns: d,
                thread,
            })
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let done = local::with_entry(inner, |e| {
        e.emit_slow_poll(id, t0, d);
        e.emit_message((id, ctx), Level::WARN, &text, &fields);
    });
    if done.is_none() {
        inner.count_refused(0, 2);
    }
}
