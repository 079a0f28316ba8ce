//! The bounded buffer pool and the two buffering modes (Drop and Block).
//!
//! Free buffers sit in a bounded crossbeam channel. A producer whose buffer is full takes a
//! fresh one from it; the writer thread returns buffers after writing them. What happens when
//! the pool is empty is the stopwatch's [`BufferingMode`]:
//!
//! - **Drop**: `take` fails at once; the caller discards its record and counts it.
//! - **Block**: the producer joins a FIFO queue of parked threads (one parker per thread, like
//!   the EventPipe seed). Only the thread at the front may take the next freed buffer, so
//!   waiters are served first come, first served; the writer wakes the front waiter each time
//!   it returns a buffer. [`Pool::abort`] (shutdown, writer failure) wakes every waiter and
//!   turns later `take`s into non-blocking ones, so a Block-mode producer never hangs: it
//!   falls back to a counted drop.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

use parking_lot::Mutex;
use std::thread::Thread;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};

use crate::buffer::Buf;

/// What a producer does when every buffer of the pool is in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BufferingMode {
    /// Discard the record without blocking and count it (written as a dropped marker).
    #[default]
    Drop,
    /// Park the producer until the writer frees a buffer; nothing is lost while the writer
    /// is healthy. Shutdown or writer failure releases parked producers (counted drops).
    Block,
}

/// A parked producer. `Arc` so the writer can unpark it without holding the producer alive.
struct Waiter {
    thread: Thread,
}

/// The bounded pool of free buffers plus the FIFO queue of producers waiting for one.
pub(crate) struct Pool {
    free_tx: Sender<Box<Buf>>,
    free_rx: Receiver<Box<Buf>>,
    buf_size: usize,
    /// `BufferingMode` as a byte (a remote session may change it).
    mode: AtomicU8,
    /// Free buffers the pool keeps; more are freed on return (a session may resize it).
    budget: AtomicUsize,
    waiters: Mutex<VecDeque<Arc<Waiter>>>,
    /// `waiters.len()`, readable without the lock (the writer skips the lock when zero).
    nwaiters: AtomicUsize,
    aborted: AtomicBool,
    /// Longest a Block-mode producer waits for a buffer (streaming recorders: the stall
    /// limit); `None` waits as long as the writer is healthy.
    stall_limit: Option<Duration>,
    /// A producer waited the whole stall limit: until the writer catches up (half the pool
    /// free again), producers count drops instead of waiting again.
    stalled: AtomicBool,
}

/// How long a parked producer sleeps before re-checking on its own. Only a safety net: the
/// writer unparks the front waiter whenever it frees a buffer.
const PARK_RECHECK: Duration = Duration::from_millis(20);

/// Most buffers a pool may grow to (4096 × 64 KiB = 256 MiB).
pub(crate) const MAX_BUFFERS: usize = 4096;

fn mode_byte(mode: BufferingMode) -> u8 {
    match mode {
        BufferingMode::Drop => 0,
        BufferingMode::Block => 1,
    }
}

impl Pool {
    /// A pool of `count` buffers of `buf_size` bytes each.
    pub(crate) fn new(
        count: usize,
        buf_size: usize,
        mode: BufferingMode,
        stall_limit: Option<Duration>,
    ) -> Pool {
        let count = count.clamp(1, MAX_BUFFERS);
        let (free_tx, free_rx) = crossbeam_channel::bounded(MAX_BUFFERS);
        for _ in 0..count {
            // Cannot fail: the channel has room for exactly `count` buffers.
            let _ = free_tx.try_send(Buf::new(buf_size));
        }
        Pool {
            free_tx,
            free_rx,
            buf_size,
            mode: AtomicU8::new(mode_byte(mode)),
            budget: AtomicUsize::new(count),
            waiters: Mutex::new(VecDeque::new()),
            nwaiters: AtomicUsize::new(0),
            aborted: AtomicBool::new(false),
            stall_limit,
            stalled: AtomicBool::new(false),
        }
    }

    /// Size of each buffer.
    pub(crate) fn buf_size(&self) -> usize {
        self.buf_size
    }

    /// The buffering mode.
    pub(crate) fn mode(&self) -> BufferingMode {
        if self.mode.load(Ordering::Relaxed) == 1 {
            BufferingMode::Block
        } else {
            BufferingMode::Drop
        }
    }

    /// Changes the buffering mode (parked producers finish their wait under the old one).
    pub(crate) fn set_mode(&self, mode: BufferingMode) {
        self.mode.store(mode_byte(mode), Ordering::Relaxed);
        if mode == BufferingMode::Drop {
            for w in self.waiters.lock().iter() {
                w.thread.unpark();
            }
        }
    }

    /// Grows or shrinks the pool to `count` buffers: new ones are added at once, surplus
    /// ones are freed as they come back.
    pub(crate) fn resize(&self, count: usize) {
        let count = count.clamp(2, MAX_BUFFERS);
        let old = self.budget.swap(count, Ordering::AcqRel);
        for _ in old..count {
            self.give_back(Buf::new(self.buf_size));
        }
        while self.free_rx.len() > count {
            let _ = self.free_rx.try_recv();
        }
    }

    /// Whether [`Pool::abort`] was called.
    pub(crate) fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::Acquire)
    }

    /// Buffers the pool holds in all (free or in use).
    pub(crate) fn budget(&self) -> usize {
        self.budget.load(Ordering::Relaxed)
    }

    /// Buffers currently free.
    pub(crate) fn free(&self) -> usize {
        self.free_rx.len()
    }

    /// A free buffer: at once in Drop mode (or `None`), after waiting in turn in Block mode
    /// (`None` only once the pool is aborted).
    pub(crate) fn take(&self) -> Option<Box<Buf>> {
        if self.mode() == BufferingMode::Drop
            || self.is_aborted()
            || self.stalled.load(Ordering::Relaxed)
        {
            return self.free_rx.try_recv().ok();
        }
        // Fast path: nobody is queued, so taking directly cannot overtake anyone.
        if self.nwaiters.load(Ordering::Acquire) == 0
            && let Ok(buf) = self.free_rx.try_recv()
        {
            return Some(buf);
        }
        self.take_in_turn()
    }

    #[cold]
    fn take_in_turn(&self) -> Option<Box<Buf>> {
        let me = Arc::new(Waiter {
            thread: std::thread::current(),
        });
        {
            let mut q = self.waiters.lock();
            q.push_back(me.clone());
            self.nwaiters.store(q.len(), Ordering::Release);
        }
        let deadline = self
            .stall_limit
            .and_then(|limit| std::time::Instant::now().checked_add(limit));
        loop {
            let stalled = deadline.is_some_and(|d| std::time::Instant::now() >= d);
            if stalled {
                self.stalled.store(true, Ordering::Relaxed);
            }
            if stalled || self.is_aborted() || self.mode() == BufferingMode::Drop {
                self.leave(&me);
                // Aborted: no more waiting, but a buffer that is free right now may still be
                // used (the caller counts a drop only if there is none).
                return self.free_rx.try_recv().ok();
            }
            {
                let mut q = self.waiters.lock();
                let at_front = q.front().is_some_and(|w| Arc::ptr_eq(w, &me));
                if at_front && let Ok(buf) = self.free_rx.try_recv() {
                    q.pop_front();
                    self.nwaiters.store(q.len(), Ordering::Release);
                    // More buffers may have been freed while we slept: pass the turn on.
                    if !self.free_rx.is_empty()
                        && let Some(next) = q.front()
                    {
                        next.thread.unpark();
                    }
                    return Some(buf);
                }
            }
            std::thread::park_timeout(PARK_RECHECK);
        }
    }

    fn leave(&self, me: &Arc<Waiter>) {
        let mut q = self.waiters.lock();
        q.retain(|w| !Arc::ptr_eq(w, me));
        self.nwaiters.store(q.len(), Ordering::Release);
        // If we were at the front, the next waiter may now take a buffer.
        if let Some(next) = q.front() {
            next.thread.unpark();
        }
    }

    /// Returns a written buffer (called by the writer thread) and wakes the front waiter.
    pub(crate) fn give_back(&self, buf: Box<Buf>) {
        buf.set_stolen(0);
        // Beyond the budget this buffer was a thread's private first buffer (or the pool
        // shrank): free it rather than grow the pool. Two concurrent returns may both pass
        // the check and keep one buffer over the budget: harmless, and undone by the next
        // shrink.
        let budget = self.budget.load(Ordering::Acquire);
        if self.free_rx.len() < budget {
            let _ = self.free_tx.try_send(buf);
        }
        if self.stalled.load(Ordering::Relaxed) && self.free_rx.len() * 2 >= budget {
            self.stalled.store(false, Ordering::Relaxed);
        }
        if self.nwaiters.load(Ordering::Acquire) > 0
            && let Some(front) = self.waiters.lock().front()
        {
            front.thread.unpark();
        }
    }

    /// Releases every parked producer and makes later `take`s non-blocking.
    pub(crate) fn abort(&self) {
        self.aborted.store(true, Ordering::Release);
        for w in self.waiters.lock().iter() {
            w.thread.unpark();
        }
    }

    /// Frees the buffers still in the pool (after the writer is gone).
    pub(crate) fn release_memory(&self) {
        while self.free_rx.try_recv().is_ok() {}
    }
}

impl Pool {
    /// Sends `msg` on a bounded queue to the writer per the buffering mode, the same policy
    /// as for buffers: Drop gives up at once when the queue is full; Block waits (in short
    /// steps) until there is room, unless the pool is aborted (shutdown, writer failure).
    /// Returns whether the message was queued (if not, the caller counts it as dropped).
    pub(crate) fn send_per_mode<T>(&self, tx: &Sender<T>, msg: T) -> bool {
        use crossbeam_channel::SendTimeoutError;
        match self.mode() {
            BufferingMode::Drop => tx.try_send(msg).is_ok(),
            BufferingMode::Block => {
                let mut msg = msg;
                let deadline = self
                    .stall_limit
                    .and_then(|limit| std::time::Instant::now().checked_add(limit));
                loop {
                    if self.is_aborted()
                        || self.stalled.load(Ordering::Relaxed)
                        || deadline.is_some_and(|d| std::time::Instant::now() >= d)
                    {
                        // Never wait on a writer that is gone.
                        return tx.try_send(msg).is_ok();
                    }
                    match tx.send_timeout(msg, PARK_RECHECK) {
                        Ok(()) => return true,
                        Err(SendTimeoutError::Timeout(m)) => msg = m,
                        Err(SendTimeoutError::Disconnected(_)) => return false,
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;
    use std::time::Instant;

    #[test]
    fn drop_mode_never_waits() {
        let pool = Pool::new(2, 1024, BufferingMode::Drop, None);
        let a = pool.take().expect("first");
        let b = pool.take().expect("second");
        let t = Instant::now();
        assert!(pool.take().is_none());
        // Under Miri (an interpreter) the clock says nothing about blocking.
        if !cfg!(miri) {
            assert!(t.elapsed() < Duration::from_millis(50));
        }
        pool.give_back(a);
        assert_eq!(pool.free(), 1);
        assert!(pool.take().is_some());
        drop(b);
    }

    #[test]
    fn block_mode_serves_waiters_in_arrival_order() {
        let pool = Arc::new(Pool::new(1, 1024, BufferingMode::Block, None));
        let held = pool.take().expect("the only buffer");
        let order = Arc::new(Mutex::new(Vec::new()));
        let queued = Arc::new(AtomicU32::new(0));
        let mut handles = Vec::new();
        for i in 0..4u32 {
            // Start waiters one at a time so their queue order is known.
            let (p, order, queued) = (pool.clone(), order.clone(), queued.clone());
            handles.push(std::thread::spawn(move || {
                queued.fetch_add(1, Ordering::SeqCst);
                let buf = p.take().expect("block mode waits for a buffer");
                order.lock().push(i);
                std::thread::sleep(Duration::from_millis(2));
                p.give_back(buf);
            }));
            while pool.nwaiters.load(Ordering::SeqCst) < (i + 1) as usize {
                std::thread::yield_now();
            }
        }
        assert_eq!(queued.load(Ordering::SeqCst), 4);
        pool.give_back(held);
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(*order.lock(), vec![0, 1, 2, 3]);
        assert_eq!(pool.free(), 1);
    }

    #[test]
    fn abort_releases_every_parked_producer() {
        let pool = Arc::new(Pool::new(1, 1024, BufferingMode::Block, None));
        let _held = pool.take().expect("the only buffer");
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let pool = pool.clone();
                std::thread::spawn(move || pool.take().is_none())
            })
            .collect();
        while pool.nwaiters.load(Ordering::SeqCst) < 3 {
            std::thread::yield_now();
        }
        pool.abort();
        // Without a stall limit a parked producer waits for ever, so a producer abort did not
        // release never finishes: wait for them with a generous deadline (Miri on a busy
        // machine takes seconds to join threads) instead of timing a prompt release.
        let deadline = Instant::now() + Duration::from_secs(120);
        while !handles.iter().all(|h| h.is_finished()) {
            assert!(Instant::now() < deadline, "abort left a producer parked");
            std::thread::yield_now();
        }
        let released: Vec<bool> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(released, vec![true, true, true]);
        // After abort, Block mode no longer waits.
        assert!(pool.take().is_none());
    }

    #[test]
    fn block_mode_waits_at_most_the_stall_limit_then_counts_until_the_writer_catches_up() {
        let limit = Duration::from_millis(200);
        let pool = Pool::new(4, 1024, BufferingMode::Block, Some(limit));
        let held: Vec<_> = (0..4).map(|_| pool.take().expect("free")).collect();
        let t = Instant::now();
        assert!(pool.take().is_none(), "given up after the stall limit");
        assert!(t.elapsed() >= limit);
        // Stalled: later producers count at once instead of each waiting the limit again.
        let t = Instant::now();
        assert!(pool.take().is_none());
        if !cfg!(miri) {
            assert!(t.elapsed() < limit, "{:?}", t.elapsed());
        }
        // One buffer back is not a recovery; half the pool free is.
        let mut held = held.into_iter();
        pool.give_back(held.next().unwrap());
        assert!(pool.stalled.load(Ordering::Relaxed));
        pool.give_back(held.next().unwrap());
        assert!(!pool.stalled.load(Ordering::Relaxed));
        assert!(pool.take().is_some(), "waits (and gets one) again");
    }
}
