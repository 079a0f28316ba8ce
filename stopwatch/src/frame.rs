//! The frame guard: a timed span with a label, a category and optional data.

use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;

use std::sync::atomic::Ordering;

use formats::{Category, FrameEnd, FrameKey};
use serde::Serialize;

use crate::context::Context;
use crate::inner::Inner;
use crate::local::{self, Entry, RECORDING, ROOT};

/// A running frame; it ends when dropped or on [`Frame::end`].
///
/// A `Frame` belongs to the thread that started it (it is `!Send`): the context it opened is
/// thread-local state. To let a frame span `.await`s on a multi-threaded runtime, wrap the
/// future with [`Frame::instrument`] (or [`crate::FutureExt::in_frame`]); to carry a context
/// to another thread, use [`Frame::context`] and [`Context::enter`].
#[must_use = "a frame ends when dropped; bind it: `let _frame = ...`"]
pub struct Frame {
    /// The thread's entry of the recorder; `None` when no recorder is installed.
    entry: Option<Rc<Entry>>,
    id: u32,
    /// `RECORDING` / `ROOT` bits, cleared once ended.
    flags: u8,
    _not_send: PhantomData<*const ()>,
}

impl Frame {
    /// A frame that records nothing (no stopwatch installed).
    #[inline(always)]
    pub fn inert() -> Frame {
        Frame {
            entry: None,
            id: 0,
            flags: 0,
            _not_send: PhantomData,
        }
    }

    /// Starts a frame on `inner` in the calling thread's current context.
    #[inline(always)]
    pub(crate) fn start_on(inner: &Arc<Inner>, label: &str, category: Category) -> Frame {
        match local::entry(inner) {
            Some(e) => {
                let (id, flags) = e.start(label, category);
                Frame {
                    entry: Some(e),
                    id,
                    flags,
                    _not_send: PhantomData,
                }
            }
            None => Frame::inert(),
        }
    }

    /// Whether this frame is being written to the log (a stopwatch is installed and the
    /// frame's context is sampled).
    pub fn is_recording(&self) -> bool {
        self.flags & RECORDING != 0
    }

    /// The frame's key in the log, if it is recorded.
    pub fn key(&self) -> Option<FrameKey> {
        let e = self.entry.as_ref()?;
        self.is_recording()
            .then(|| FrameKey::new(e.worker, self.id))
    }

    /// Attaches data (any `Serialize` value, stored as a BSON document). May be called
    /// several times; readers merge the updates in order, later keys winning. A value that
    /// is not a map is stored as `{"value": ...}`.
    pub fn data<T: Serialize + ?Sized>(&self, value: &T) {
        if let (Some(e), true) = (&self.entry, self.is_recording()) {
            e.inner
                .send_frame_data(FrameKey::new(e.worker, self.id), value);
        }
    }

    /// The context this frame runs in, to carry to another thread or task.
    pub fn context(&self) -> Option<Context> {
        let e = self.entry.as_ref()?;
        Some(Context::new(
            e.inner.clone(),
            e.ctx.get(),
            self.flags & RECORDING != 0 || (e.in_frame.get() && e.sampled.get()),
        ))
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
            e.end(self.id, self.flags);
            self.flags = 0;
        }
    }

    /// Splits the frame from the calling thread so it can move (into a future or another
    /// thread): the thread leaves the frame's context now, the frame's end is recorded
    /// wherever it ends.
    pub(crate) fn detach(mut self) -> Option<Detached> {
        let e = self.entry.take()?;
        let flags = std::mem::take(&mut self.flags);
        Detached::from_started(&e, self.id, flags)
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
    pub(crate) ctx: u32,
    pub(crate) sampled: bool,
    flags: u8,
}

impl Detached {
    /// Starts a frame on the calling thread and detaches it at once (see [`Frame::detach`]).
    #[cfg(feature = "tracing")]
    pub(crate) fn start(inner: &Arc<Inner>, label: &str, category: Category) -> Option<Detached> {
        local::with_entry(inner, |e| {
            let (id, flags) = e.start(label, category);
            Detached::from_started(e, id, flags)
        })
        .flatten()
    }

    /// The detached form of a frame `e.start` just returned.
    fn from_started(e: &Entry, id: u32, flags: u8) -> Option<Detached> {
        let sampled = flags & RECORDING != 0 || (e.in_frame.get() && e.sampled.get());
        if flags & ROOT != 0 {
            // The frame opened the thread's context; the thread is no longer in it.
            e.in_frame.set(false);
        }
        Some(Detached {
            inner: e.inner.clone(),
            id,
            ctx: e.ctx.get(),
            sampled,
            flags,
        })
    }

    /// The context the frame runs in.
    pub(crate) fn context(&self) -> Context {
        Context::new(self.inner.clone(), self.ctx, self.sampled)
    }

    /// Records the end (on the calling thread's buffer), once.
    pub(crate) fn end(&mut self) {
        let flags = std::mem::take(&mut self.flags);
        if flags & RECORDING != 0 {
            // Only the end record: the thread's context state is not this frame's to change
            // (it left its starting thread's context when it was detached).
            let ended = local::with_entry(&self.inner, |e| e.end(self.id, RECORDING));
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
