//! The frame guard: a timed span with a label, a category and optional data.

use std::borrow::Cow;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;

use std::sync::atomic::Ordering;

use formats::{Category, FrameEnd, FrameKey};
use serde::Serialize;

use crate::context::Context;
use crate::counting_alloc::{self, AllocCounts};
use crate::inner::Inner;
use crate::local::{self, CtxState, Entry, RECORDING, SAMPLED, Saved, Started};
use crate::polls::PollTimes;

/// A running frame; it ends when dropped or on [`Frame::end`].
///
/// A `Frame` belongs to the thread that started it (it is `!Send`): the context it opened is
/// thread-local state. To let a frame span `.await`s on a multi-threaded runtime, wrap the
/// future with [`Frame::instrument`] (or [`crate::FutureExt::in_frame`]); to carry a context
/// to another thread, use [`Frame::context`] and [`Context::enter`] (or [`Context::child`]).
///
/// While it runs, a recorded frame is its thread's *current frame*: frames started meanwhile
/// on the thread (or in a future it instruments, or in its context entered elsewhere) record
/// it as their parent.
#[must_use = "a frame ends when dropped; bind it: `let _frame = ...`"]
pub struct Frame {
    /// The thread's entry of the recorder; `None` when no recorder is installed.
    entry: Option<Rc<Entry>>,
    /// Id, parent, context and flags (`RECORDING`, `ROOT`, ...; cleared once ended).
    started: Started,
    /// The thread's state before an entered frame (`Frame::child`, `Context::child`).
    saved: Saved,
    /// The thread's allocation counts when the frame started (a recorded frame, with a
    /// `CountingAlloc` installed).
    alloc: Option<AllocCounts>,
    _not_send: PhantomData<*const ()>,
}

/// The allocation counts a frame that `started` snapshots: only a recorded frame's, only
/// with a counting allocator (then one relaxed load).
#[inline(always)]
fn alloc_mark(started: &Started) -> Option<AllocCounts> {
    if started.flags & RECORDING != 0 {
        counting_alloc::mark()
    } else {
        None
    }
}

impl Frame {
    /// A frame that records nothing (no stopwatch installed).
    #[inline(always)]
    pub fn inert() -> Frame {
        Frame {
            entry: None,
            started: Started {
                id: 0,
                parent: 0,
                ctx: 0,
                flags: 0,
            },
            saved: Saved::default(),
            alloc: None,
            _not_send: PhantomData,
        }
    }

    /// Starts a frame on `inner` in the calling thread's current context.
    #[inline(always)]
    pub(crate) fn start_on(inner: &Arc<Inner>, label: &str, category: Category) -> Frame {
        match local::entry(inner) {
            Some(e) => {
                let started = e.start(label, category);
                Frame {
                    entry: Some(e),
                    alloc: alloc_mark(&started),
                    started,
                    saved: Saved::default(),
                    _not_send: PhantomData,
                }
            }
            None => {
                // Its start and end, never written.
                inner.count_refused(2, 0);
                Frame::inert()
            }
        }
    }

    /// Starts a frame on the calling thread in the context state `state`, entered for the
    /// frame's life (its end restores the thread's state).
    pub(crate) fn start_entered(
        e: Rc<Entry>,
        state: CtxState,
        label: &str,
        category: Category,
    ) -> Frame {
        let (started, saved) = e.start_entered(state, label, category);
        Frame {
            entry: Some(e),
            alloc: alloc_mark(&started),
            started,
            saved,
            _not_send: PhantomData,
        }
    }

    /// Starts a child of this frame (its parent is this frame, in this frame's context) on
    /// the calling thread, whatever frame is current there; with the default category.
    pub fn child(&self, label: impl Into<Cow<'static, str>>) -> Frame {
        match &self.entry {
            Some(e) => self.child_with(label, e.inner.default_category),
            None => Frame::inert(),
        }
    }

    /// Starts a child of this frame with a category (see [`Frame::child`]).
    pub fn child_with(&self, label: impl Into<Cow<'static, str>>, category: Category) -> Frame {
        match &self.entry {
            Some(e) => {
                Frame::start_entered(e.clone(), self.children_state(), &label.into(), category)
            }
            None => Frame::inert(),
        }
    }

    /// The context state this frame's children start in.
    fn children_state(&self) -> CtxState {
        CtxState {
            in_frame: true,
            sampled: self.started.flags & SAMPLED != 0,
            ctx: self.started.ctx,
            frame: self.started.children_parent(),
        }
    }

    /// Whether this frame is being written to the log (a stopwatch is installed and the
    /// frame's context is sampled).
    pub fn is_recording(&self) -> bool {
        self.started.flags & RECORDING != 0
    }

    /// The frame's key in the log, if it is recorded.
    pub fn key(&self) -> Option<FrameKey> {
        let e = self.entry.as_ref()?;
        self.is_recording()
            .then(|| FrameKey::new(e.worker, self.started.id))
    }

    /// Attaches data (any `Serialize` value, stored as a BSON document). May be called
    /// several times; readers merge the updates in order, later keys winning. A value that
    /// is not a map is stored as `{"value": ...}`.
    pub fn data<T: Serialize + ?Sized>(&self, value: &T) {
        if let (Some(e), true) = (&self.entry, self.is_recording()) {
            e.inner
                .send_frame_data(FrameKey::new(e.worker, self.started.id), value);
        }
    }

    /// The context this frame runs in, to carry to another thread or task: frames started
    /// in it are this frame's children.
    pub fn context(&self) -> Option<Context> {
        let e = self.entry.as_ref()?;
        Some(Context::new(e.inner.clone(), self.children_state()))
    }

    /// Ends the frame now (dropping it does the same; ending twice is harmless).
    #[inline(always)]
    pub fn end(&mut self) {
        // Only the check is inline: an inert frame (no recorder) costs nothing more, and the
        // drop glue of every `Frame` stays small enough to inline.
        if self.entry.is_some() {
            self.finish();
        }
    }

    /// Records the end and releases the entry.
    #[inline(never)]
    fn finish(&mut self) {
        if let Some(e) = self.entry.take() {
            e.end(&self.started, &self.saved, self.alloc);
            self.started.flags = 0;
        }
    }

    /// Splits the frame from the calling thread so it can move (into a future or another
    /// thread): the thread leaves the frame now (as its end would leave it), the frame's end
    /// is recorded wherever it ends.
    pub(crate) fn detach(mut self) -> Option<Detached> {
        let e = self.entry.take()?;
        let started = self.started;
        self.started.flags = 0;
        let mut d = Detached::from_started(&e, started, &self.saved);
        // What it allocated before it was detached (building the future it wraps...).
        if let Some(at) = self.alloc {
            d.alloc = counting_alloc::snapshot().since(at);
        }
        Some(d)
    }
}

impl Drop for Frame {
    #[inline(always)]
    fn drop(&mut self) {
        self.end();
    }
}

impl std::fmt::Debug for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frame")
            .field("key", &self.key())
            .field("recording", &self.is_recording())
            .finish()
    }
}

/// A frame detached from its thread (`Send`): its context is re-entered wherever it is used,
/// and its end is recorded on the thread that ends it.
pub(crate) struct Detached {
    pub(crate) inner: Arc<Inner>,
    pub(crate) id: u32,
    /// The context state its children start in (this frame current, if it is recorded).
    children: CtxState,
    flags: u8,
    /// What the frame's code allocated so far (summed over the polls of an `InFrame`),
    /// recorded before its end.
    pub(crate) alloc: AllocCounts,
    /// Its polls, for an asynchronous frame (an `InFrame`, a span): recorded before its end.
    pub(crate) polls: Option<PollTimes>,
}

impl Detached {
    /// Starts a frame on the calling thread and detaches it at once (see [`Frame::detach`]).
    #[cfg(feature = "tracing")]
    pub(crate) fn start(inner: &Arc<Inner>, label: &str, category: Category) -> Option<Detached> {
        let d = local::with_entry(inner, |e| {
            let started = e.start(label, category);
            Detached::from_started(e, started, &Saved::default())
        });
        if d.is_none() {
            inner.count_refused(2, 0);
        }
        d
    }

    /// Starts a frame in a new context (a root, whatever the calling thread's state) and
    /// detaches it at once.
    #[cfg(feature = "tracing")]
    pub(crate) fn start_root(
        inner: &Arc<Inner>,
        label: &str,
        category: Category,
    ) -> Option<Detached> {
        let d = local::with_entry(inner, |e| {
            let before = e.ctx_state();
            e.set_ctx_state(CtxState::OUTSIDE);
            let started = e.start(label, category);
            let d = Detached::from_started(e, started, &Saved::default());
            e.set_ctx_state(before);
            d
        });
        if d.is_none() {
            inner.count_refused(2, 0);
        }
        d
    }

    /// The detached form of a frame `e.start` just returned: the thread leaves it.
    fn from_started(e: &Entry, started: Started, saved: &Saved) -> Detached {
        e.leave(&started, saved);
        Detached {
            inner: e.inner.clone(),
            id: started.id,
            children: CtxState {
                in_frame: true,
                sampled: started.flags & SAMPLED != 0,
                ctx: started.ctx,
                frame: started.children_parent(),
            },
            flags: started.flags & RECORDING,
            alloc: AllocCounts::default(),
            polls: None,
        }
    }

    /// Whether the frame is recorded (its allocations are worth counting).
    #[inline]
    pub(crate) fn is_recording(&self) -> bool {
        self.flags & RECORDING != 0
    }

    /// The frame and context a message written inside this frame names (0 and 0 when it
    /// is not recorded).
    #[cfg(feature = "tracing")]
    pub(crate) fn message_frame(&self) -> (u32, u32) {
        if self.is_recording() {
            (self.id, self.children.ctx)
        } else {
            (0, 0)
        }
    }

    /// The frame's id and context, as a message or slow poll in it names them.
    pub(crate) fn frame_and_context(&self) -> (u32, u32) {
        (self.id, self.children.ctx)
    }

    /// The context the frame runs in (its children's).
    pub(crate) fn context(&self) -> Context {
        Context::new(self.inner.clone(), self.children)
    }

    /// Records the end (on the calling thread's buffer), once.
    pub(crate) fn end(&mut self) {
        let flags = std::mem::take(&mut self.flags);
        if flags & RECORDING != 0 {
            let alloc = std::mem::take(&mut self.alloc);
            let polls = self.polls.take();
            let ended = local::with_entry(&self.inner, |e| {
                e.end_record(self.id, alloc, polls.as_ref())
            });
            if ended.is_none() {
                // This thread's recording state is already gone (the frame is dropped by a
                // thread-local destructor, e.g. a runtime's worker exiting).
                let end = FrameEnd {
                    id: self.id,
                    worker: self.inner.worker,
                    timestamp: self.inner.clock.now(),
                };
                if !self.inner.send_late(&end) {
                    self.inner.writer_dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Attaches data to the frame.
    pub(crate) fn data<T: Serialize + ?Sized>(&self, value: &T) {
        if self.flags & RECORDING != 0 {
            let key = FrameKey::new(self.inner.worker, self.id);
            self.inner.send_frame_data(key, value);
        }
    }

    /// Attaches data already encoded as one BSON document (the caller checked it is one).
    #[cfg(feature = "tracing")]
    pub(crate) fn data_document(&self, document: Vec<u8>) {
        if self.flags & RECORDING != 0 && self.inner.gate.records_data() {
            let key = FrameKey::new(self.inner.worker, self.id);
            self.inner.send_data(crate::sink::DataMsg { key, document });
        }
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        self.end();
    }
}

// Starting a frame in a context is the frame's business: `context` does not know frames.
impl Context {
    /// Starts a frame in this context on the calling thread, a child of the context's frame
    /// (the thread is in this context until it ends); with the default category.
    pub fn child(&self, label: impl Into<Cow<'static, str>>) -> Frame {
        self.child_with(label, self.inner.default_category)
    }

    /// Starts a frame in this context with a category (see [`Context::child`]).
    pub fn child_with(&self, label: impl Into<Cow<'static, str>>, category: Category) -> Frame {
        match local::entry(&self.inner) {
            Some(e) => Frame::start_entered(e, self.state, &label.into(), category),
            None => {
                self.inner.count_refused(2, 0);
                Frame::inert()
            }
        }
    }
}
