//! The per-thread side of a recorder: a thread-local registry of [`Entry`]s (one per recorder
//! the thread has used), each holding the thread's current buffer, its context state and its
//! chunk of frame ids.
//!
//! The hot path is: one thread-local load (the entry used last) and a pointer compare, one
//! relaxed load of the session gate, a timestamp, the record written with one bounds check
//! (coded, for a log directory: `formats::packed::Coder` packs it as it is written, a start in
//! three bytes, an end in two), the new position published with one Release store. No lock, no atomic read-modify-write,
//! no allocation (for `&'static str` labels). Everything else (buffer swaps, id refills,
//! registration, long labels, session rules) is out of line and `#[cold]`.

// The hot path writes records into the current buffer through a cached raw pointer (no lock,
// no bounds re-derivation), and finds the thread's entry through a raw pointer cache: see the
// SAFETY comments below.
#![allow(unsafe_code)]

use std::cell::{Cell, RefCell};
use std::ptr::{self, NonNull};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use formats::packed::Coder;
use formats::{
    Category, FRAME_END_LEN, FRAME_START_PARENT_HEADER_LEN, FrameAlloc, FrameEnd, FrameStart,
    Level, Message, Parent, Plot, PlotMode, PlotUnit,
};

use crate::buffer::{Buf, Encode, ONE_OTHER, ONE_RECORD, Pos, pos_frames, pos_len, pos_others};
use crate::clock::Clock;
use crate::counting_alloc::{self, AllocCounts};
use crate::gate::Gate;
use crate::ids::CHUNK;
use crate::inner::Inner;
use crate::poll_times::PollTimes;
use crate::sink::Msg;
use crate::slot::Slot;

/// Room a coded buffer must have left for a new body to begin in it (below this, the thread
/// hands it over).
const MIN_BODY_ROOM: usize = 1024;

/// How much longer a coded record may be than its plain form (a start with every field given
/// takes up to 53 bytes before its label, against 25 plain).
const CODED_GROWTH: usize = 32;

/// The outermost frame of a thread asks the writer to flush when the thread's records have
/// waited this long (the writer's own periodic pass covers threads that go idle).
const FLUSH_AGE_NS: u64 = 5_000_000;

/// One thread's recording state for one recorder.
pub(crate) struct Entry {
    /// Keeps the recorder alive while this thread can still record into it.
    pub(crate) inner: Arc<Inner>,
    /// `inner.gate`, one pointer closer: the hot path reads its flags once per frame.
    gate: Arc<Gate>,
    slot: Arc<Slot>,
    clock: &'static Clock,
    pub(crate) worker: u8,
    records_all: bool,
    // The current buffer: `buf` owns it (null when none), `base`/`cap`/`pos` cache it
    // (`pos`: bytes and count of the records written, see `buffer::Pos`).
    buf: Cell<*mut Buf>,
    base: Cell<NonNull<u8>>,
    cap: Cell<usize>,
    pos: Cell<Pos>,
    // Context state: inside a frame (or an entered context)? recorded? which context? which
    // frame is current (the parent of the next frame started; 0: none)?
    pub(crate) in_frame: Cell<bool>,
    pub(crate) sampled: Cell<bool>,
    pub(crate) ctx: Cell<u32>,
    pub(crate) cur: Cell<u32>,
    // This thread's chunk of frame ids: `next_id` up to (not including) `id_end`, wrapping.
    next_id: Cell<u32>,
    id_end: Cell<u32>,
    pub(crate) rng: Cell<u64>,
    last_nudge: Cell<u64>,
    retired: Cell<bool>,
    /// Whether this thread codes its buffers as packed bodies (`Inner::packs`): the writer then
    /// frames a full buffer without reading it.
    codes: bool,
    /// The current buffer's coder (when `codes`). Borrowed only while a record is coded, with
    /// no allocation and no code of the program's inside: never twice at once.
    coder: RefCell<Coder>,
}

/// A snapshot of an entry's context state (saved and restored around polls and guards).
#[derive(Clone, Copy)]
pub(crate) struct CtxState {
    pub(crate) in_frame: bool,
    pub(crate) sampled: bool,
    pub(crate) ctx: u32,
    /// The current frame: the id of the innermost recorded frame (0: none).
    pub(crate) frame: u32,
}

impl CtxState {
    /// Outside any context (a frame started now opens one).
    #[cfg(feature = "tracing")]
    pub(crate) const OUTSIDE: CtxState = CtxState {
        in_frame: false,
        sampled: false,
        ctx: 0,
        frame: 0,
    };
}

/// What starting a frame gave: its id (0 when not recorded), its flags, its context and
/// the frame that was current when it started (its parent when it is recorded, the nearest
/// recorded ancestor of its children when it is not).
#[derive(Clone, Copy)]
pub(crate) struct Started {
    pub(crate) id: u32,
    pub(crate) parent: u32,
    pub(crate) ctx: u32,
    pub(crate) flags: u8,
}

impl Started {
    /// The frame children of this one name as their parent.
    #[inline(always)]
    pub(crate) fn children_parent(&self) -> u32 {
        if self.flags & RECORDING != 0 {
            self.id
        } else {
            self.parent
        }
    }
}

impl Entry {
    fn new(inner: Arc<Inner>, slot: Arc<Slot>) -> Entry {
        let e = Entry {
            clock: inner.clock,
            worker: inner.worker,
            records_all: inner.sampler.records_all(),
            gate: inner.gate.clone(),
            slot,
            buf: Cell::new(ptr::null_mut()),
            base: Cell::new(NonNull::dangling()),
            cap: Cell::new(0),
            pos: Cell::new(0),
            in_frame: Cell::new(false),
            sampled: Cell::new(false),
            ctx: Cell::new(0),
            cur: Cell::new(0),
            next_id: Cell::new(0),
            id_end: Cell::new(0),
            rng: Cell::new(crate::sampling::seed()),
            last_nudge: Cell::new(0),
            retired: Cell::new(false),
            codes: inner.packs,
            coder: RefCell::new(Coder::new(inner.worker, 0)),
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
            frame: self.cur.get(),
        }
    }

    /// Replaces the context state.
    #[inline]
    pub(crate) fn set_ctx_state(&self, s: CtxState) {
        self.in_frame.set(s.in_frame);
        self.sampled.set(s.sampled);
        self.ctx.set(s.ctx);
        self.cur.set(s.frame);
    }

    /// The next frame id of this thread's chunk.
    #[inline(always)]
    pub(crate) fn next_id(&self) -> u32 {
        let id = self.next_id.get();
        if id == self.id_end.get() {
            return self.refill_ids();
        }
        self.next_id.set(id.wrapping_add(1));
        id
    }

    /// A new chunk of ids; returns its first (and keeps the rest).
    #[cold]
    #[inline(never)]
    fn refill_ids(&self) -> u32 {
        let inner = &self.inner;
        let first = inner.ids.chunk(&*inner.sink, |e| inner.reporter.report(e));
        self.next_id.set(first.wrapping_add(1));
        self.id_end.set(first.wrapping_add(CHUNK));
        first
    }

    /// Timestamp from the recorder's clock.
    #[inline(always)]
    pub(crate) fn now(&self) -> u64 {
        self.clock.now()
    }

    /// Starts a frame in the thread's current context (or opens a new context). A recorded
    /// frame names the current frame as its parent and becomes current.
    #[inline(always)]
    pub(crate) fn start(&self, label: &str, category: Category) -> Started {
        // The session's rules, read once: 0 (no session rule) is the common case.
        let gate = self.gate.flags();
        if self.in_frame.get() {
            let sampled = self.sampled.get();
            if !sampled || (gate != 0 && self.gate.skips_with(gate, category)) {
                // Left out: it does not become current (its children name the current one).
                return Started {
                    id: 0,
                    parent: self.cur.get(),
                    ctx: self.ctx.get(),
                    flags: if sampled { SAMPLED } else { 0 },
                };
            }
            let id = self.next_id();
            let timestamp = self.now();
            // Read after the clock: nothing kept across its call.
            let (parent, ctx) = (self.cur.get(), self.ctx.get());
            self.emit_start(id, timestamp, ctx, parent, category, label);
            self.cur.set(id);
            Started {
                id,
                parent,
                ctx,
                flags: RECORDING | SAMPLED,
            }
        } else {
            self.start_root(gate, label, category)
        }
    }

    /// Opens a new context: the sampling decision is taken here, once.
    #[inline(always)]
    fn start_root(&self, gate: u8, label: &str, category: Category) -> Started {
        let timestamp = self.now();
        let sampled = if gate == 0 {
            self.records_all || self.inner.sampler.sample(&self.rng, timestamp)
        } else {
            self.sample_gated(timestamp)
        };
        self.in_frame.set(true);
        self.sampled.set(sampled);
        if !sampled {
            self.cur.set(0);
            return Started {
                id: 0,
                parent: 0,
                ctx: 0,
                flags: ROOT,
            };
        }
        let id = self.next_id();
        self.ctx.set(id);
        if gate != 0 && self.gate.skips_with(gate, category) {
            // The context opens (its frames keep one id) but its root is left out: its
            // children are roots.
            self.cur.set(0);
            return Started {
                id: 0,
                parent: 0,
                ctx: id,
                flags: ROOT | SAMPLED,
            };
        }
        self.emit_start(id, timestamp, id, 0, category, label);
        self.cur.set(id);
        Started {
            id,
            parent: 0,
            ctx: id,
            flags: ROOT | RECORDING | SAMPLED,
        }
    }

    /// A new context's sampling decision under a session's rules.
    #[cold]
    #[inline(never)]
    fn sample_gated(&self, timestamp: u64) -> bool {
        let inner = &self.inner;
        let own = || self.records_all || inner.sampler.sample(&self.rng, timestamp);
        self.gate.sample(own, &self.rng, timestamp)
    }

    /// Ends a frame started with [`Entry::start`]: records its end (after its allocation
    /// counts, when `alloc` holds the thread's counts at its start) and restores the state it
    /// changed (the current frame; the context, for a root or an entered frame). `saved`:
    /// the state an entered frame (`ENTERED`) restores.
    #[inline(always)]
    pub(crate) fn end(&self, s: &Started, saved: &Saved, alloc: Option<AllocCounts>) {
        if s.flags & RECORDING != 0 {
            let timestamp = self.now();
            if let Some(at) = alloc {
                self.emit_alloc_since(s.id, timestamp, at);
            }
            self.emit_end(s.id, timestamp);
            self.cur.set(s.parent);
            if s.flags & (ROOT | ENTERED) != 0 {
                if s.flags & ENTERED != 0 {
                    return self.restore(s.flags, saved, Some(timestamp));
                }
                self.in_frame.set(false);
                self.maybe_nudge(timestamp);
            }
        } else if s.flags & (ROOT | ENTERED) != 0 {
            self.leave(s, saved);
        }
    }

    /// Records a frame's end (after `alloc`, its allocation counts), and nothing else: a
    /// detached frame's thread state is not this thread's (it left its starting thread's
    /// context when it was detached).
    #[inline]
    pub(crate) fn end_record(&self, id: u32, alloc: AllocCounts, polls: Option<&PollTimes>) {
        let timestamp = self.now();
        self.emit_alloc(id, timestamp, alloc);
        if let Some(p) = polls {
            self.emit_other(&p.record(id, self.worker, timestamp));
        }
        self.emit_end(id, timestamp);
    }

    /// Appends a slow poll (type 11) of frame `id`: it began at `timestamp` and held this
    /// thread `duration_ns`.
    pub(crate) fn emit_slow_poll(&self, id: u32, timestamp: u64, duration_ns: u64) {
        self.emit_other(&formats::SlowPoll {
            id,
            worker: self.worker,
            timestamp,
            duration_ns,
        });
    }

    /// The frame a message written now belongs to, and its context: the innermost recorded
    /// frame of the thread's current context (what a frame started now names as its
    /// parent), or 0 and 0.
    #[inline]
    pub(crate) fn message_frame(&self) -> (u32, u32) {
        let frame = if self.in_frame.get() && self.sampled.get() {
            self.cur.get()
        } else {
            0
        };
        (frame, if frame != 0 { self.ctx.get() } else { 0 })
    }

    /// Appends a plot value (type 7) to the thread's buffer.
    #[inline]
    pub(crate) fn emit_plot(&self, name: &str, value: f64, mode: PlotMode, unit: PlotUnit) {
        if !self.gate.records_instants() {
            return;
        }
        if name.is_empty() || name.len() > formats::cut::MAX_NAME {
            return self.emit_plot_renamed(name, value, mode, unit);
        }
        let rec = Plot {
            worker: self.worker,
            timestamp: self.now(),
            value,
            mode,
            unit,
            name,
        };
        self.emit_other(&rec);
    }

    /// A plot value whose series name does not fit a record: recorded under the name cut
    /// with a mark (`…`), or `(unnamed)` for an empty one, so it is seen, not lost.
    #[cold]
    #[inline(never)]
    fn emit_plot_renamed(&self, name: &str, value: f64, mode: PlotMode, unit: PlotUnit) {
        let name = if name.is_empty() {
            std::borrow::Cow::Borrowed("(unnamed)")
        } else {
            formats::cut::name(name)
        };
        self.emit_other(&Plot {
            worker: self.worker,
            timestamp: self.now(),
            value,
            mode,
            unit,
            name: &name,
        });
    }

    /// Appends a message (type 8) in `frame` and `context` (see [`Entry::message_frame`]);
    /// `fields` is one BSON document or empty. Fields that would not fit one of the
    /// recorder's buffers are left out (the text is kept).
    #[inline]
    pub(crate) fn emit_message(
        &self,
        (frame, context): (u32, u32),
        level: Level,
        text: &str,
        fields: &[u8],
    ) {
        if !self.gate.records_instants() {
            return;
        }
        let rec = Message {
            frame,
            worker: self.worker,
            timestamp: self.now(),
            context,
            level,
            text,
            fields: (!fields.is_empty()).then_some(fields),
        };
        // The whole length (the encoder would leave out fields over a payload's 64 KiB).
        let whole =
            formats::EXT_HEADER_LEN + formats::instant::MESSAGE_FIXED + text.len() + fields.len();
        if text.len() > formats::instant::MAX_MESSAGE_TEXT || whole > self.max_record() {
            return self.emit_message_cut(rec);
        }
        self.emit_other(&rec);
    }

    /// The longest record a buffer of this recorder holds (and a payload's u16 allows).
    fn max_record(&self) -> usize {
        let room = if self.codes {
            // Coded from a plain copy at the buffer's end (`code_other`).
            self.inner.pool.buf_size().saturating_sub(CODED_GROWTH) / 2
        } else {
            self.inner.pool.buf_size()
        };
        room.min(formats::EXT_HEADER_LEN + u16::MAX as usize)
    }

    /// A message that does not fit a record as it is: its text cut with a mark saying how
    /// much was cut, and only the fields that do not fit left out (named in `cut_fields`).
    #[cold]
    #[inline(never)]
    fn emit_message_cut(&self, rec: Message<'_>) {
        let text = formats::cut::message_text(rec.text);
        let room = self
            .max_record()
            .saturating_sub(formats::EXT_HEADER_LEN + formats::instant::MESSAGE_FIXED + text.len());
        let fields = formats::cut::fields(rec.fields.unwrap_or_default(), room);
        self.emit_other(&Message {
            text: &text,
            fields: (!fields.is_empty()).then_some(&fields[..]),
            ..rec
        });
    }

    /// Appends what the thread allocated since `at` as frame `id`'s counts: out of the
    /// frame's inlined end, which without a counting allocator only tests for `None`.
    #[inline(never)]
    fn emit_alloc_since(&self, id: u32, timestamp: u64, at: AllocCounts) {
        self.emit_alloc(id, timestamp, counting_alloc::snapshot().since(at));
    }

    /// Appends a frame's allocation counts (type 9), if it allocated or freed anything.
    #[inline]
    fn emit_alloc(&self, id: u32, timestamp: u64, a: AllocCounts) {
        if a.is_empty() {
            return;
        }
        self.emit_other(&FrameAlloc {
            id,
            worker: self.worker,
            timestamp,
            allocs: a.allocs,
            alloc_bytes: a.alloc_bytes,
            frees: a.frees,
            freed_bytes: a.freed_bytes,
        });
    }

    /// Appends a record that is not a frame record through the encoder (the buffer's
    /// bounds checked once), or the slow path when it does not fit.
    #[inline(always)]
    fn emit_other<R: Encode>(&self, rec: &R) {
        if !self.try_encode(rec) {
            self.emit_slow(rec);
        }
    }

    /// Restores the thread's state as ending the frame would, without recording its end (the
    /// frame is detached from the thread).
    pub(crate) fn leave(&self, s: &Started, saved: &Saved) {
        if s.flags & RECORDING != 0 {
            self.cur.set(s.parent);
        }
        if s.flags & ENTERED != 0 {
            self.restore(s.flags, saved, None);
        } else if s.flags & ROOT != 0 {
            self.in_frame.set(false);
        }
    }

    /// An entered frame ended or left: the thread goes back to the state before it.
    #[cold]
    #[inline(never)]
    fn restore(&self, flags: u8, saved: &Saved, ended_at: Option<u64>) {
        let in_frame = flags & SAVED_IN_FRAME != 0;
        self.set_ctx_state(CtxState {
            in_frame,
            sampled: flags & SAVED_SAMPLED != 0,
            ctx: saved.ctx,
            frame: saved.frame,
        });
        if let (Some(timestamp), false) = (ended_at, in_frame) {
            // The thread's outermost frame ended.
            self.maybe_nudge(timestamp);
        }
    }

    /// Starts a frame in the context state `state` (entered for the frame's life: its end
    /// restores the thread's state as it is now).
    pub(crate) fn start_entered(
        &self,
        state: CtxState,
        label: &str,
        category: Category,
    ) -> (Started, Saved) {
        let before = self.ctx_state();
        self.set_ctx_state(CtxState {
            in_frame: true,
            ..state
        });
        let mut s = self.start(label, category);
        s.flags |= ENTERED;
        if before.in_frame {
            s.flags |= SAVED_IN_FRAME;
        }
        if before.sampled {
            s.flags |= SAVED_SAMPLED;
        }
        let saved = Saved {
            ctx: before.ctx,
            frame: before.frame,
        };
        (s, saved)
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

    /// Appends a FrameStart with parent (type 6; `parent` 0: none) to the current buffer
    /// (the layout of `docs/FORMAT.md`, the bytes `FrameStart::encode` makes), with one
    /// bounds check.
    #[inline(always)]
    fn emit_start(
        &self,
        id: u32,
        timestamp: u64,
        context: u32,
        parent: u32,
        category: Category,
        label: &str,
    ) {
        let pos = self.pos.get();
        let len = pos_len(pos);
        if self.codes {
            let coded = self.coder.borrow_mut().start_with_parent(
                id,
                timestamp,
                context,
                parent,
                category.0,
                label.as_bytes(),
                self.tail(len),
            );
            return match coded {
                Some(n) => self.publish(pos + n as Pos + ONE_RECORD),
                None => self.emit_start_slow(id, timestamp, context, parent, category, label),
            };
        }
        let n = FRAME_START_PARENT_HEADER_LEN + label.len();
        // `len <= cap` always holds. A label longer than 255 bytes (cut by the encoder) takes
        // the slow path too.
        if label.len() > u8::MAX as usize || n > self.cap.get() - len {
            return self.emit_start_slow(id, timestamp, context, parent, category, label);
        }
        // The layout is `formats`' (one home): built in registers, stored with one copy.
        let head = formats::start_with_parent_head(
            id,
            self.worker,
            timestamp,
            context,
            parent,
            category,
            label.len() as u8,
        );
        // SAFETY: `base..base+cap` is the current buffer (checked above: `len + n <= cap`, so
        // a buffer exists and the record fits); this thread is the only writer above `len`
        // (the committed length it published), and the writer thread only reads below it.
        // `head` and `label` are other memory, so the copies do not overlap.
        unsafe {
            let dst = self.base.get().as_ptr().add(len);
            ptr::copy_nonoverlapping(head.as_ptr(), dst, FRAME_START_PARENT_HEADER_LEN);
            copy_short(label.as_bytes(), dst.add(FRAME_START_PARENT_HEADER_LEN));
        }
        self.publish(pos + n as Pos + ONE_RECORD);
    }

    /// [`Entry::emit_start`] when the record does not fit the current buffer (or its label
    /// is long): through the slow path.
    #[cold]
    #[inline(never)]
    fn emit_start_slow(
        &self,
        id: u32,
        timestamp: u64,
        context: u32,
        parent: u32,
        category: Category,
        label: &str,
    ) {
        self.emit_slow(&FrameStart {
            parent: Parent::from_field(parent),
            id,
            worker: self.worker,
            timestamp,
            context,
            category,
            label,
        });
    }

    /// Appends a FrameEnd to the current buffer, with one bounds check.
    #[inline(always)]
    fn emit_end(&self, id: u32, timestamp: u64) {
        let pos = self.pos.get();
        let len = pos_len(pos);
        if self.codes {
            let coded = self.coder.borrow_mut().end(id, timestamp, self.tail(len));
            return match coded {
                Some(n) => self.publish(pos + n as Pos + ONE_RECORD),
                None => self.emit_slow(&FrameEnd {
                    id,
                    worker: self.worker,
                    timestamp,
                }),
            };
        }
        if FRAME_END_LEN > self.cap.get() - len {
            return self.emit_slow(&FrameEnd {
                id,
                worker: self.worker,
                timestamp,
            });
        }
        let rec = formats::end_bytes(id, self.worker, timestamp);
        // SAFETY: as in `emit_start`: `len + FRAME_END_LEN <= cap` was checked above.
        unsafe {
            ptr::copy_nonoverlapping(
                rec.as_ptr(),
                self.base.get().as_ptr().add(len),
                FRAME_END_LEN,
            );
        }
        self.publish(pos + FRAME_END_LEN as Pos + ONE_RECORD);
    }

    /// Makes the records below `pos` visible to the writer thread.
    #[inline(always)]
    fn publish(&self, pos: Pos) {
        self.pos.set(pos);
        self.slot.committed.store(pos, Ordering::Release);
    }

    /// The record did not fit (or there is no buffer, or its label is long): hand the buffer
    /// to the writer, get a new one per the buffering mode, retry once; a record that still
    /// has nowhere to go is counted as dropped.
    #[cold]
    #[inline(never)]
    fn emit_slow(&self, rec: &dyn Encode) {
        if self.try_encode(rec) || (self.begin_next_body() && self.try_encode(rec)) {
            return;
        }
        if self.inner.closed.load(Ordering::Acquire) {
            self.count_dropped(rec);
            return;
        }
        if self.retired.get() {
            // The thread is exiting and its last buffer went to the writer: a frame that
            // ends now (a guard dropped by another thread-local's destructor) goes on its own.
            // Other records would land on thread 0's lane: they are counted instead.
            if !rec.is_frame() || !self.inner.send_late(rec) {
                self.count_dropped(rec);
            }
            return;
        }
        self.hand_off();
        if let Some(buf) = self.inner.pool.take() {
            if self.buf.get().is_null() {
                self.install(buf);
            } else {
                // A call made from inside the hand-off or the wait for a buffer (a global
                // allocator's) installed one and wrote into it: keep that one (replacing it
                // would lose its records).
                self.inner.pool.give_back(buf);
            }
        }
        if !self.try_encode(rec) {
            self.count_dropped(rec);
        }
    }

    /// Begins a new coded body in the current buffer after this one, if this one is well
    /// used (a body unpacks to at most what a batch holds, about 2,500 frames) and the buffer
    /// has room: the writer frames each body as a batch of its own, and a buffer carries
    /// several, so the thread hands over (and wakes the writer) several times less often.
    #[cold]
    fn begin_next_body(&self) -> bool {
        let raw = self.buf.get();
        let pos = self.pos.get();
        if !self.codes
            || raw.is_null()
            || self.cap.get() - pos_len(pos) < MIN_BODY_ROOM
            || self.coder.borrow().plain_len() < formats::packed::CODED_PLAIN_LIMIT / 2
        {
            return false;
        }
        let now = self.now();
        // SAFETY: `raw` is this thread's current buffer: it stays alive until this thread
        // hands it over, and `begin_body` takes a shared reference (the writer may read it).
        if !unsafe { &*raw }.begin_body(pos, now) {
            return false;
        }
        self.coder.borrow_mut().reset(now);
        true
    }

    /// Counts a record that had nowhere to go: a frame record in the books (`Stats::dropped`,
    /// Dropped records), any other apart (`Stats::dropped_other`).
    fn count_dropped(&self, rec: &dyn Encode) {
        if rec.is_frame() {
            self.slot.count_dropped(1);
        } else {
            self.inner.dropped_other.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The current buffer from byte `len` (this thread's written length) on: where this
    /// thread writes next.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    fn tail(&self, len: usize) -> &mut [u8] {
        // SAFETY: `base..base+cap` is the current buffer (or an empty range when there is
        // none; `len <= cap` always holds) and only this thread writes above `len`, the
        // length it published: the writer thread reads only below it. Callers use the slice
        // for one record and drop it before anything else may touch the buffer.
        unsafe {
            std::slice::from_raw_parts_mut(self.base.get().as_ptr().add(len), self.cap.get() - len)
        }
    }

    /// Codes `rec` (not a start or end of the hot path) into `tail`, the room left: it is
    /// encoded plain at the room's end, then coded to its front (a coded record is at most
    /// [`CODED_GROWTH`] bytes longer than its plain form). `None` if the room is too small.
    fn code_other<R: Encode + ?Sized>(&self, rec: &R, tail: &mut [u8]) -> Option<usize> {
        let n = rec.encode_into(tail)?;
        let room = tail.len();
        if room < 2 * n + CODED_GROWTH {
            return None;
        }
        tail.copy_within(..n, room - n);
        let (front, plain) = tail.split_at_mut(room - n);
        self.coder.borrow_mut().record(plain, front)
    }

    /// Encodes `rec` into the current buffer if it fits there.
    #[inline(always)]
    fn try_encode<R: Encode + ?Sized>(&self, rec: &R) -> bool {
        let pos = self.pos.get();
        let len = pos_len(pos);
        let tail = self.tail(len);
        let written = if self.codes {
            self.code_other(rec, tail)
        } else {
            rec.encode_into(tail)
        };
        match written {
            Some(n) => {
                let one = if rec.is_frame() {
                    ONE_RECORD
                } else {
                    ONE_OTHER
                };
                self.publish(pos + n as Pos + one);
                true
            }
            None => false,
        }
    }

    /// Makes `buf` the current buffer.
    fn install(&self, buf: Box<Buf>) {
        buf.clear_bodies();
        if self.codes {
            // A new body, coded against now (its records' times are differences from it).
            let now = self.now();
            buf.begin_body(0, now);
            self.coder.borrow_mut().reset(now);
        }
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
        self.pos.set(0);
    }

    /// Gives the current buffer to the writer (or back to the pool when empty), with the
    /// checksum of what the writer has not taken yet unless the writer packs: computed here,
    /// once per buffer and off the per-frame path, so a writer that does not pack frames the
    /// records as a batch without reading them.
    fn hand_off(&self) {
        let raw = self.buf.replace(ptr::null_mut());
        if raw.is_null() {
            return;
        }
        let pos = self.pos.get();
        self.base.set(NonNull::dangling());
        self.cap.set(0);
        self.pos.set(0);
        // The writer thread reads the buffer (`steal_all`) under the slot lock: take it before
        // reclaiming ownership, so no reference of ours exists while it may still read.
        let mut st = self.slot.lock();
        // SAFETY: `raw` came from `Box::into_raw` in `install` and is still the slot's current
        // buffer; with the slot lock held the writer cannot be reading it, and clearing
        // `current` below (before unlocking) means it never will again through the slot.
        let buf = unsafe { Box::from_raw(raw) };
        st.current = ptr::null();
        self.slot.committed.store(0, Ordering::Release);
        // Read under the lock: the writer moves `stolen` only while holding it.
        let from = buf.stolen();
        if pos_len(pos) <= pos_len(from) {
            drop(st);
            self.inner.pool.give_back(buf);
            return;
        }
        // Read under the slot lock, where the writer's final pass seals the slot once no
        // hand-off is pending: either it sees this hand-off pending and waits for it, or the
        // slot is sealed (what was committed then was taken) and these records, made after,
        // are counted (never sent to a writer that no longer reads).
        if st.sealed {
            drop(st);
            self.inner.count_lost(from, pos);
            self.inner.pool.give_back(buf);
            return;
        }
        st.pending += 1;
        drop(st);
        // A coded buffer's bodies are checksummed as packed batches by the writer: no pass over
        // the records here.
        // SAFETY: the buffer is ours alone again (the slot no longer points at it), and
        // `from..pos` lies within what this thread wrote (`from <= pos <= cap`).
        let crc = (!self.inner.packs)
            .then(|| crc32c::crc32c(unsafe { buf.bytes(pos_len(from), pos_len(pos)) }));
        let msg = Msg::Full {
            slot: self.slot.clone(),
            buf,
            from,
            to: pos,
            crc,
        };
        if let Err(e) = self.inner.msgs.send(msg) {
            // The writer is gone (shut down): the unwritten records are lost; count them.
            self.slot.lock().pending -= 1;
            if let Msg::Full { from, to, .. } = e.into_inner() {
                self.slot
                    .count_dropped(u64::from(pos_frames(to).wrapping_sub(pos_frames(from))));
                let others = pos_others(to).wrapping_sub(pos_others(from));
                self.inner
                    .dropped_other
                    .fetch_add(u64::from(others), Ordering::Relaxed);
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
/// Frame flag: the frame's context is sampled (its frames are recorded, unless a session's
/// category rule leaves them out).
pub(crate) const SAMPLED: u8 = 4;
/// Frame flag: the frame was started in a context entered for it (`Frame::child`,
/// `Context::child`): ending it restores the thread's state before it ([`Saved`] and the
/// two bits below).
pub(crate) const ENTERED: u8 = 8;
/// Frame flag (with `ENTERED`): the thread was in a context before the frame.
pub(crate) const SAVED_IN_FRAME: u8 = 16;
/// Frame flag (with `ENTERED`): the thread's context before the frame was sampled.
pub(crate) const SAVED_SAMPLED: u8 = 32;

/// The thread's state before an entered frame (`ENTERED`): its context and current frame.
#[derive(Clone, Copy, Default)]
pub(crate) struct Saved {
    pub(crate) ctx: u32,
    pub(crate) frame: u32,
}

/// The thread's entries.
///
/// Entries are handed out as `Rc<Entry>`: a call that uses one holds a strong reference for
/// its whole duration (and a [`crate::Frame`] for its life), so user code that runs inside it
/// (a `Serialize` impl, an error callback, a sink) and starts frames on other recorders can
/// never free the entry under it.
pub(crate) struct LocalState {
    entries: RefCell<Vec<Rc<Entry>>>,
    thread: Cell<u32>,
}

thread_local! {
    static LOCAL: LocalState = const {
        LocalState {
            entries: RefCell::new(Vec::new()),
            thread: Cell::new(u32::MAX),
        }
    };
    /// The entry used last (the fast path's cache), or null.
    ///
    /// Invariant: when not null, it points at an entry `LOCAL.entries` holds a strong
    /// reference to. Whatever releases one of those references first points `LAST`
    /// elsewhere (`find_or_register`, `LocalState::drop`). A `Cell` of a pointer has no
    /// destructor, so reading it never fails, even while the thread's destructors run.
    static LAST: Cell<*const Entry> = const { Cell::new(ptr::null()) };
    /// The recorder whose writer runs on this thread (null: none); compared, never read.
    static WRITER_OF: Cell<*const Inner> = const { Cell::new(ptr::null()) };
}

/// Marks the calling thread as `inner`'s writer: calls into `inner` made on it (from a global
/// allocator, or user code the writer runs) record nothing and are counted as refused. A
/// writer recording into its own recorder would wait for itself for a buffer in Block mode,
/// or register while holding its own slot list: a deadlock either way.
pub(crate) fn mark_writer_thread(inner: &Arc<Inner>) {
    WRITER_OF.with(|w| w.set(Arc::as_ptr(inner)));
    // A call made while the thread was starting (a global allocator's, before this mark)
    // registered it: that entry goes, its records handed over, so later calls find the mark.
    let entry = LOCAL
        .try_with(|l| {
            let mut entries = l.entries.try_borrow_mut().ok()?;
            let i = entries.iter().position(|e| Arc::ptr_eq(&e.inner, inner))?;
            LAST.with(|l| l.set(ptr::null()));
            Some(entries.remove(i))
        })
        .ok()
        .flatten();
    if let Some(e) = entry {
        e.retire();
    }
}

/// This thread's entry for `inner` (registering the thread on first use); `None` during
/// thread teardown, and for a call that re-entered the API while this thread's registry was
/// being changed (from a global allocator, say): the caller drops what it would have written
/// and counts it ([`Inner::count_refused`]).
///
/// Fast path: one thread-local load and a pointer compare, then one non-atomic increment
/// for the reference returned.
#[inline(always)]
pub(crate) fn entry(inner: &Arc<Inner>) -> Option<Rc<Entry>> {
    let last = LAST.with(Cell::get);
    // SAFETY: by `LAST`'s invariant, a non-null `last` points at an entry the registry holds
    // a strong reference to, so it is alive. Nothing runs between this load and the
    // increment below (no user code, no other thread touches this thread's registry), and
    // from the increment on, the returned `Rc` owns a reference of its own: whatever code
    // later makes the registry forget the entry (a nested call registering another
    // recorder, thread exit), it stays alive as long as the caller needs it.
    unsafe {
        if !last.is_null() && Arc::ptr_eq(&(*last).inner, inner) {
            Rc::increment_strong_count(last);
            return Some(Rc::from_raw(last));
        }
    }
    entry_slow(inner)
}

#[cold]
#[inline(never)]
fn entry_slow(inner: &Arc<Inner>) -> Option<Rc<Entry>> {
    // Its writer thread never registers with a recorder, so it always comes here.
    if ptr::eq(WRITER_OF.with(Cell::get), Arc::as_ptr(inner)) {
        return None;
    }
    LOCAL.try_with(|l| l.find_or_register(inner)).ok().flatten()
}

/// Runs `f` with this thread's entry for `inner`; `None` when [`entry`] gives none.
///
/// `f` gets a strong reference: the entry outlives the call even if code inside it (user
/// code included) makes the registry forget it.
#[inline(always)]
pub(crate) fn with_entry<R>(inner: &Arc<Inner>, f: impl FnOnce(&Rc<Entry>) -> R) -> Option<R> {
    entry(inner).map(|e| f(&e))
}

impl LocalState {
    /// The entry for `inner`, registering this thread with it on first use; makes it the
    /// fast path's `LAST`. `None` when the registry is borrowed by a call this one
    /// re-entered.
    ///
    /// Registering allocates (the slot, the entry, its first buffer, room in the registry),
    /// and a global allocator may call the API from inside those allocations. So nothing
    /// is allocated while the registry is borrowed except the registry's own growth (a call
    /// made from inside that one finds the registry borrowed and is refused), and a call
    /// that registered the thread while this one was allocating is found again before this
    /// one's entry is added.
    fn find_or_register(&self, inner: &Arc<Inner>) -> Option<Rc<Entry>> {
        if let Some(e) = self.find(inner)? {
            return Some(e);
        }
        // Outside any borrow: made, not yet registered with the recorder.
        let slot = Arc::new(Slot::new(self.thread_number(), thread_name()));
        let fresh = Rc::new(Entry::new(inner.clone(), slot.clone()));
        // Entries of recorders that were shut down are dropped only after every borrow of
        // the registry is released: dropping one may run arbitrary code (its recorder's drop).
        let mut forgotten = Vec::new();
        let found = {
            let mut entries = self.entries.try_borrow_mut().ok()?;
            match entries.iter().find(|e| Arc::ptr_eq(&e.inner, inner)) {
                // A call from inside the allocations above registered the thread first.
                Some(e) => e.clone(),
                None => {
                    // Forget recorders that were shut down (their buffers go back first).
                    let mut i = 0;
                    while i < entries.len() {
                        if entries[i].inner.closed.load(Ordering::Acquire) {
                            let e = entries.swap_remove(i);
                            if ptr::eq(LAST.with(Cell::get), Rc::as_ptr(&e)) {
                                LAST.with(|l| l.set(ptr::null()));
                            }
                            e.retire();
                            forgotten.push(e);
                        } else {
                            i += 1;
                        }
                    }
                    entries.push(fresh.clone());
                    fresh.clone()
                }
            }
        };
        if Rc::ptr_eq(&found, &fresh) {
            // Registered with the recorder once it is in the registry: a call from inside
            // this (the slot list may grow) finds the entry and records into it.
            inner.register_slot(slot);
        } else {
            // Never registered and never written: its first buffer goes back (freed, being
            // a thread's private one).
            fresh.retire();
            drop(fresh);
        }
        // `found` is held by the registry: it may be `LAST` (the invariant holds).
        LAST.with(|l| l.set(Rc::as_ptr(&found)));
        drop(forgotten);
        Some(found)
    }

    /// The registered entry for `inner` (made `LAST`), `Some(None)` if there is none, `None`
    /// if the registry is mutably borrowed (by a call this one re-entered).
    fn find(&self, inner: &Arc<Inner>) -> Option<Option<Rc<Entry>>> {
        let entries = self.entries.try_borrow().ok()?;
        let found = entries
            .iter()
            .find(|e| Arc::ptr_eq(&e.inner, inner))
            .cloned();
        if let Some(e) = &found {
            // Held by the registry: it may be `LAST` (the invariant holds).
            LAST.with(|l| l.set(Rc::as_ptr(e)));
        }
        Some(found)
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
        // Thread exit: the fast path's cache goes first (the registry's references are about
        // to be released), then every recorder gets this thread's last records.
        LAST.with(|l| l.set(ptr::null()));
        for e in self.entries.get_mut().drain(..) {
            e.retire();
        }
    }
}

/// Copies a label (at most 255 bytes) without a call into `memcpy` for the usual short ones:
/// two overlapping loads and stores cover 4 to 32 bytes.
///
/// # Safety
/// `dst` is valid for writes of `src.len()` bytes and does not overlap `src`.
#[inline(always)]
unsafe fn copy_short(src: &[u8], dst: *mut u8) {
    let n = src.len();
    let s = src.as_ptr();
    // SAFETY: every read is within `src` (each branch's width is at most `n`, and the second
    // access of a pair starts at `n - width`), every write within `dst..dst+n` (the caller's
    // contract); unaligned accesses are used throughout.
    unsafe {
        if n >= 16 {
            if n > 32 {
                ptr::copy_nonoverlapping(s, dst, n);
                return;
            }
            let a = ptr::read_unaligned(s.cast::<[u8; 16]>());
            let b = ptr::read_unaligned(s.add(n - 16).cast::<[u8; 16]>());
            ptr::write_unaligned(dst.cast::<[u8; 16]>(), a);
            ptr::write_unaligned(dst.add(n - 16).cast::<[u8; 16]>(), b);
        } else if n >= 8 {
            let a = ptr::read_unaligned(s.cast::<u64>());
            let b = ptr::read_unaligned(s.add(n - 8).cast::<u64>());
            ptr::write_unaligned(dst.cast::<u64>(), a);
            ptr::write_unaligned(dst.add(n - 8).cast::<u64>(), b);
        } else if n >= 4 {
            let a = ptr::read_unaligned(s.cast::<u32>());
            let b = ptr::read_unaligned(s.add(n - 4).cast::<u32>());
            ptr::write_unaligned(dst.cast::<u32>(), a);
            ptr::write_unaligned(dst.add(n - 4).cast::<u32>(), b);
        } else {
            for i in 0..n {
                *dst.add(i) = *s.add(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hot path's records (formats' fixed bytes, the label copied beside them) are exactly
    /// the encoder's.
    #[test]
    fn hand_written_records_match_the_encoder() {
        let sink = Arc::new(crate::mem_sink::MemSink::new(7));
        let rec = crate::Stopwatch::builder()
            .sink(sink.clone() as Arc<dyn crate::Sink>)
            .build()
            .unwrap();
        let labels: Vec<String> = (0..=40)
            .chain([63, 64, 200, 255, 256, 300])
            .map(|n| "é".repeat(n / 2) + &"x".repeat(n % 2))
            .collect();
        let e = entry(&rec.inner).unwrap();
        let mut want = Vec::new();
        for (i, label) in labels.iter().enumerate() {
            let (id, ts, ctx, cat) = (
                0x0102_0304 + i as u32,
                0x1122_3344_5566_7788 + i as u64,
                0xa0b0_c0d0 ^ i as u32,
                Category(i as u8),
            );
            // Roots (parent 0), small and large parent ids.
            let parent = match i % 3 {
                0 => 0,
                1 => 0x0506_0708 ^ i as u32,
                _ => u32::MAX - i as u32,
            };
            let before = pos_len(e.pos.get());
            e.emit_start(id, ts, ctx, parent, cat, label);
            e.emit_end(id, ts + 1);
            let start = FrameStart {
                parent: Parent::from_field(parent),
                id,
                worker: e.worker,
                timestamp: ts,
                context: ctx,
                category: cat,
                label,
            };
            let end = FrameEnd {
                id,
                worker: e.worker,
                timestamp: ts + 1,
            };
            let mut buf = [0u8; 512];
            let n = start.encode(&mut buf).unwrap();
            want.extend_from_slice(&buf[..n]);
            let m = end.encode(&mut buf).unwrap();
            want.extend_from_slice(&buf[..m]);
            assert_eq!(
                pos_len(e.pos.get()) - before,
                n + m,
                "label of {} bytes",
                label.len()
            );
        }
        assert_eq!(pos_frames(e.pos.get()) as usize, 2 * labels.len());
        // SAFETY: this thread owns the buffer and wrote `0..pos`.
        let got = unsafe { (*e.buf.get()).bytes(0, pos_len(e.pos.get())).to_vec() };
        assert_eq!(got, want);
        // And they decode as what was written: every start with its parent.
        let parents: Vec<Parent> = formats::RecordIter::new(&got, 0)
            .filter_map(|r| match r.unwrap().1 {
                formats::Record::Start(s) => Some(s.parent),
                _ => None,
            })
            .collect();
        assert_eq!(parents.len(), labels.len());
        assert!(parents.iter().all(|p| p.is_recorded()));
    }
}
