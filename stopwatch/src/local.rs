//! The per-thread side of a recorder: a thread-local registry of [`Entry`]s (one per recorder
//! the thread has used), each holding the thread's current buffer, its context state and its
//! chunk of frame ids.
//!
//! The hot path is: find the entry (compare with the last one used), take a timestamp,
//! encode the record into the buffer with a few stores, publish the new length with a
//! Release store. No lock, no read-modify-write, no allocation (for `&'static str` labels).
//! Everything else (buffer swaps, id refills, registration) is out of line and `#[cold]`.

// The hot path writes records into the current buffer through a cached raw pointer (no lock,
// no bounds re-derivation): see the SAFETY comments below.
#![allow(unsafe_code)]

use std::cell::{Cell, RefCell};
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use formats::{Category, FrameEnd, FrameStart};

use crate::buffer::{Buf, Encode};
use crate::clock::Clock;
use crate::ids::CHUNK;
use crate::inner::Inner;
use crate::sink::{Msg, count_frame_records};
use crate::slot::Slot;

/// The outermost frame of a thread asks the writer to flush when the thread's records have
/// waited this long (the writer's own periodic pass covers threads that go idle).
const FLUSH_AGE_NS: u64 = 5_000_000;

/// One thread's recording state for one recorder.
pub(crate) struct Entry {
    /// Keeps the recorder alive while this thread can still record into it.
    pub(crate) inner: Arc<Inner>,
    slot: Arc<Slot>,
    clock: &'static Clock,
    pub(crate) worker: u8,
    records_all: bool,
    // The current buffer: `buf` owns it (null when none), `base`/`cap`/`len` cache it.
    buf: Cell<*mut Buf>,
    base: Cell<NonNull<u8>>,
    cap: Cell<usize>,
    len: Cell<usize>,
    // Context state: inside a frame (or an entered context)? recorded? which context?
    pub(crate) in_frame: Cell<bool>,
    pub(crate) sampled: Cell<bool>,
    pub(crate) ctx: Cell<u32>,
    // This thread's chunk of frame ids.
    next_id: Cell<u32>,
    ids_left: Cell<u32>,
    pub(crate) rng: Cell<u64>,
    last_nudge: Cell<u64>,
    retired: Cell<bool>,
}

/// A snapshot of an entry's context state (saved and restored around polls and guards).
#[derive(Clone, Copy)]
pub(crate) struct CtxState {
    pub(crate) in_frame: bool,
    pub(crate) sampled: bool,
    pub(crate) ctx: u32,
}

impl Entry {
    fn new(inner: Arc<Inner>, slot: Arc<Slot>) -> Entry {
        let e = Entry {
            clock: inner.clock,
            worker: inner.worker,
            records_all: inner.sampler.records_all(),
            slot,
            buf: Cell::new(std::ptr::null_mut()),
            base: Cell::new(NonNull::dangling()),
            cap: Cell::new(0),
            len: Cell::new(0),
            in_frame: Cell::new(false),
            sampled: Cell::new(false),
            ctx: Cell::new(0),
            next_id: Cell::new(0),
            ids_left: Cell::new(0),
            rng: Cell::new(crate::sampling::seed()),
            last_nudge: Cell::new(0),
            retired: Cell::new(false),
            inner,
        };
        // The thread's first buffer is its own allocation, not one of the pool's: a thread
        // that goes idle keeps its buffer, and must not starve the pool (or deadlock Block
        // mode) by doing so. Later buffers come from the pool.
        e.install(Buf::new(e.inner.pool.buf_size()));
        e
    }

    /// The entry's context state.
    #[inline]
    pub(crate) fn ctx_state(&self) -> CtxState {
        CtxState {
            in_frame: self.in_frame.get(),
            sampled: self.sampled.get(),
            ctx: self.ctx.get(),
        }
    }

    /// Replaces the context state.
    #[inline]
    pub(crate) fn set_ctx_state(&self, s: CtxState) {
        self.in_frame.set(s.in_frame);
        self.sampled.set(s.sampled);
        self.ctx.set(s.ctx);
    }

    /// The next frame id of this thread's chunk.
    #[inline(always)]
    pub(crate) fn next_id(&self) -> u32 {
        let left = self.ids_left.get();
        if left == 0 {
            self.refill_ids();
        }
        let id = self.next_id.get();
        self.next_id.set(id.wrapping_add(1));
        self.ids_left.set(self.ids_left.get() - 1);
        id
    }

    #[cold]
    #[inline(never)]
    fn refill_ids(&self) {
        let inner = &self.inner;
        let first = inner.ids.chunk(&*inner.sink, |e| inner.reporter.report(e));
        self.next_id.set(first);
        self.ids_left.set(CHUNK);
    }

    /// Timestamp from the recorder's clock.
    #[inline(always)]
    pub(crate) fn now(&self) -> u64 {
        self.clock.now()
    }

    /// Starts a frame in the thread's current context (or opens a new context).
    #[inline(always)]
    pub(crate) fn start(&self, label: &str, category: Category) -> (u32, u8) {
        if self.in_frame.get() {
            if !self.sampled.get() || self.inner.gate.skips(category) {
                return (0, 0);
            }
            let id = self.next_id();
            let timestamp = self.now();
            self.emit(&FrameStart {
                id,
                worker: self.worker,
                timestamp,
                context: self.ctx.get(),
                category,
                label,
            });
            (id, RECORDING)
        } else {
            self.start_root(label, category)
        }
    }

    /// Opens a new context: the sampling decision is taken here, once.
    #[inline(always)]
    fn start_root(&self, label: &str, category: Category) -> (u32, u8) {
        let timestamp = self.now();
        let inner = &self.inner;
        let own = || self.records_all || inner.sampler.sample(&self.rng, timestamp);
        let sampled = if inner.gate.is_plain() {
            own()
        } else {
            inner.gate.sample(own, &self.rng, timestamp)
        };
        self.in_frame.set(true);
        self.sampled.set(sampled);
        if !sampled {
            return (0, ROOT);
        }
        let id = self.next_id();
        self.ctx.set(id);
        if inner.gate.skips(category) {
            // The context opens (its frames keep one id) but its root is left out.
            return (0, ROOT);
        }
        self.emit(&FrameStart {
            id,
            worker: self.worker,
            timestamp,
            context: id,
            category,
            label,
        });
        (id, ROOT | RECORDING)
    }

    /// Ends a frame started with [`Entry::start`] (or detached from one).
    #[inline(always)]
    pub(crate) fn end(&self, id: u32, flags: u8) {
        if flags & RECORDING != 0 {
            let timestamp = self.now();
            self.emit(&FrameEnd {
                id,
                worker: self.worker,
                timestamp,
            });
            if flags & ROOT != 0 {
                self.in_frame.set(false);
                self.maybe_nudge(timestamp);
            }
        } else if flags & ROOT != 0 {
            self.in_frame.set(false);
        }
    }

    /// Outermost frame ended: if this thread's records have waited a few ms and the writer
    /// has not flushed recently, ask it to flush now instead of at its next periodic pass.
    #[inline(always)]
    fn maybe_nudge(&self, now: u64) {
        if now.wrapping_sub(self.last_nudge.get()) > FLUSH_AGE_NS {
            self.nudge(now);
        }
    }

    #[cold]
    #[inline(never)]
    fn nudge(&self, now: u64) {
        self.last_nudge.set(now);
        let last_flush = self.inner.last_flush_ns.load(Ordering::Relaxed);
        if now.saturating_sub(last_flush) > FLUSH_AGE_NS
            && !self.inner.closed.load(Ordering::Relaxed)
        {
            let _ = self.inner.msgs.send(Msg::Flush(None));
        }
    }

    /// Appends one record to the current buffer.
    #[inline(always)]
    pub(crate) fn emit(&self, rec: &impl Encode) {
        let len = self.len.get();
        // SAFETY: `base..base+cap` is the current buffer (or an empty range when there is
        // none); this thread is the only writer above `len`, and the writer thread only reads
        // below the `committed` we published, which is <= len.
        let tail = unsafe {
            std::slice::from_raw_parts_mut(self.base.get().as_ptr().add(len), self.cap.get() - len)
        };
        match rec.encode_into(tail) {
            Some(n) => {
                let len = len + n;
                self.len.set(len);
                self.slot.committed.store(len, Ordering::Release);
            }
            None => self.emit_slow(rec),
        }
    }

    /// The record did not fit (or there is no buffer): hand the buffer to the writer, get a
    /// new one per the buffering mode, retry once; a record that still has nowhere to go is
    /// counted as dropped.
    #[cold]
    #[inline(never)]
    fn emit_slow(&self, rec: &dyn Encode) {
        if self.inner.closed.load(Ordering::Acquire) {
            self.slot.count_dropped(1);
            return;
        }
        if self.retired.get() {
            // The thread is exiting and its last buffer went to the writer: a frame that
            // ends now (a guard dropped by another thread-local's destructor) goes on its own.
            if !self.inner.send_late(rec) {
                self.slot.count_dropped(1);
            }
            return;
        }
        self.hand_off();
        if let Some(buf) = self.inner.pool.take() {
            self.install(buf);
        }
        let len = self.len.get();
        // SAFETY: as in `emit`.
        let tail = unsafe {
            std::slice::from_raw_parts_mut(self.base.get().as_ptr().add(len), self.cap.get() - len)
        };
        match rec.encode_into(tail) {
            Some(n) => {
                self.len.set(len + n);
                self.slot.committed.store(len + n, Ordering::Release);
            }
            None => self.slot.count_dropped(1),
        }
    }

    /// Makes `buf` the current buffer.
    fn install(&self, buf: Box<Buf>) {
        let raw = Box::into_raw(buf);
        // SAFETY: `raw` is a live buffer we own.
        let (base, cap) = unsafe { ((*raw).base(), (*raw).cap()) };
        {
            let mut st = self.slot.lock();
            st.current = raw;
            self.slot.committed.store(0, Ordering::Release);
        }
        self.buf.set(raw);
        self.base
            .set(NonNull::new(base).unwrap_or(NonNull::dangling()));
        self.cap.set(cap);
        self.len.set(0);
    }

    /// Gives the current buffer to the writer (or back to the pool when empty).
    fn hand_off(&self) {
        let raw = self.buf.replace(std::ptr::null_mut());
        if raw.is_null() {
            return;
        }
        let len = self.len.get();
        self.base.set(NonNull::dangling());
        self.cap.set(0);
        self.len.set(0);
        // The writer thread reads the buffer (`steal_all`) under the slot lock: take it before
        // reclaiming ownership, so no reference of ours exists while it may still read.
        let mut st = self.slot.lock();
        // SAFETY: `raw` came from `Box::into_raw` in `install` and is still the slot's current
        // buffer; with the slot lock held the writer cannot be reading it, and clearing
        // `current` below (before unlocking) means it never will again through the slot.
        let buf = unsafe { Box::from_raw(raw) };
        st.current = std::ptr::null();
        self.slot.committed.store(0, Ordering::Release);
        if len <= buf.stolen() {
            drop(st);
            self.inner.pool.give_back(buf);
            return;
        }
        st.pending += 1;
        let msg = Msg::Full {
            slot: self.slot.clone(),
            buf,
            len,
        };
        if let Err(e) = self.inner.msgs.send(msg) {
            // The writer is gone (shut down): the unwritten records are lost; count them.
            st.pending -= 1;
            if let Msg::Full { buf, len, .. } = e.into_inner() {
                // SAFETY: we own the buffer again; `stolen..len` is what we wrote.
                let lost = count_frame_records(unsafe { buf.bytes(buf.stolen().min(len), len) });
                self.slot.count_dropped(lost);
            }
        }
    }

    /// Thread exit (or recorder gone): hands the last buffer over and marks the slot orphaned.
    pub(crate) fn retire(&self) {
        if self.retired.replace(true) {
            return;
        }
        self.hand_off();
        self.slot.lock().orphaned = true;
    }
}

/// Frame flag: the frame's records are written.
pub(crate) const RECORDING: u8 = 1;
/// Frame flag: the frame opened its context (ending it leaves the context).
pub(crate) const ROOT: u8 = 2;

/// The thread's entries.
///
/// Entries are handed out as `Rc<Entry>`: a call that uses one holds a strong reference for
/// its whole duration, so user code that runs inside it (a `Serialize` impl, an error
/// callback) and starts frames on other recorders can never free the entry under it.
pub(crate) struct LocalState {
    /// The entry used last (fast path).
    last: RefCell<Option<Rc<Entry>>>,
    entries: RefCell<Vec<Rc<Entry>>>,
    thread: Cell<u32>,
}

impl LocalState {
    const fn new() -> LocalState {
        LocalState {
            last: RefCell::new(None),
            entries: RefCell::new(Vec::new()),
            thread: Cell::new(u32::MAX),
        }
    }

    /// Runs `f` with the entry for `inner`, registering this thread with it on first use.
    ///
    /// Fast path: the entry used last, borrowed from `last` for the whole call. While that
    /// borrow is held, nothing can replace or drop `last`'s strong reference (`entry_slow`
    /// only updates `last` when it can borrow it mutably), so the entry outlives the call.
    #[inline(always)]
    fn with<R>(&self, inner: &Arc<Inner>, f: impl FnOnce(&Rc<Entry>) -> R) -> R {
        if let Ok(last) = self.last.try_borrow()
            && let Some(e) = last.as_ref()
            && Arc::ptr_eq(&e.inner, inner)
        {
            return f(e);
        }
        let e = self.entry_slow(inner);
        f(&e)
    }

    #[cold]
    #[inline(never)]
    fn entry_slow(&self, inner: &Arc<Inner>) -> Rc<Entry> {
        // Entries of recorders that were shut down are dropped only after every borrow of the
        // registry is released: dropping one may run arbitrary code (its recorder's drop).
        let mut forgotten = Vec::new();
        // (`last` is borrowed when user code inside a fast-path call gets here: leave it.)
        let last = self.last.try_borrow_mut().ok().and_then(|mut l| l.take());
        let found = {
            let mut entries = self.entries.borrow_mut();
            match entries.iter().find(|e| Arc::ptr_eq(&e.inner, inner)) {
                Some(e) => e.clone(),
                None => {
                    // Forget recorders that were shut down (their buffers go back first).
                    let mut i = 0;
                    while i < entries.len() {
                        if entries[i].inner.closed.load(Ordering::Acquire) {
                            let e = entries.swap_remove(i);
                            e.retire();
                            forgotten.push(e);
                        } else {
                            i += 1;
                        }
                    }
                    let slot = Arc::new(Slot::new(self.thread_number(), thread_name()));
                    inner.register_slot(slot.clone());
                    let e = Rc::new(Entry::new(inner.clone(), slot));
                    entries.push(e.clone());
                    e
                }
            }
        };
        if let Ok(mut l) = self.last.try_borrow_mut() {
            *l = Some(found.clone());
        }
        drop(last);
        drop(forgotten);
        found
    }

    fn thread_number(&self) -> u32 {
        static NEXT: AtomicU32 = AtomicU32::new(1);
        if self.thread.get() == u32::MAX {
            self.thread.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        self.thread.get()
    }
}

fn thread_name() -> String {
    std::thread::current().name().unwrap_or("").to_owned()
}

impl Drop for LocalState {
    fn drop(&mut self) {
        // Thread exit: every recorder gets this thread's last records.
        self.last.get_mut().take();
        for e in self.entries.get_mut().drain(..) {
            e.retire();
        }
    }
}

thread_local! {
    static LOCAL: LocalState = const { LocalState::new() };
}

/// Runs `f` with this thread's entry for `inner`; `None` during thread teardown.
///
/// `f` gets a strong reference: the entry outlives the call even if code inside it (user
/// code included) makes the registry forget it.
#[inline(always)]
pub(crate) fn with_entry<R>(inner: &Arc<Inner>, f: impl FnOnce(&Rc<Entry>) -> R) -> Option<R> {
    LOCAL.try_with(|l| l.with(inner, f)).ok()
}
