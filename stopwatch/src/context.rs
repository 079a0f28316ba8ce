//! Contexts: the unit of work (a request, a job) frames belong to, and how it travels.
//!
//! A frame started with no enclosing frame opens a new context whose value is its own id;
//! frames nested in it carry that value. On one thread this is implicit (thread-local
//! state). Across threads, take the context with [`Frame::context`](crate::Frame::context) or
//! [`Stopwatch::current_context`](crate::Stopwatch::current_context) and [`Context::enter`]
//! it on the other thread; across `.await`s, [`InFrame`](crate::InFrame) enters it on every
//! poll. The sampling decision travels with the context.

use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;

use crate::inner::Inner;
use crate::local::{self, CtxState, Entry};

/// A unit of work's identity, to carry frames of one request across threads (`Send + Sync`).
#[derive(Clone)]
pub struct Context {
    inner: Arc<Inner>,
    ctx: u32,
    sampled: bool,
}

impl Context {
    pub(crate) fn new(inner: Arc<Inner>, ctx: u32, sampled: bool) -> Context {
        Context {
            inner,
            ctx,
            sampled,
        }
    }

    /// The calling thread's current context in `inner`, if it is inside a frame.
    pub(crate) fn current_on(inner: &Arc<Inner>) -> Option<Context> {
        local::with_entry(inner, |e| {
            e.in_frame
                .get()
                .then(|| Context::new(inner.clone(), e.ctx.get(), e.sampled.get()))
        })
        .flatten()
    }

    /// The context value written in FrameStart records (the id of the frame that opened it).
    pub fn id(&self) -> u32 {
        self.ctx
    }

    /// Whether frames in this context are recorded (the root's sampling decision).
    pub fn is_sampled(&self) -> bool {
        self.sampled
    }

    /// Makes this the calling thread's current context until the guard drops: frames started
    /// meanwhile carry it (and its sampling decision) instead of opening new contexts.
    pub fn enter(&self) -> ContextGuard {
        let entered = local::with_entry(&self.inner, |e| {
            let saved = e.ctx_state();
            e.set_ctx_state(CtxState {
                in_frame: true,
                sampled: self.sampled,
                ctx: self.ctx,
            });
            (e.clone(), saved)
        });
        ContextGuard {
            entered,
            _not_send: PhantomData,
        }
    }

    /// Runs `f` inside this context (see [`Context::enter`]).
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        let _g = self.enter();
        f()
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("id", &self.ctx)
            .field("sampled", &self.sampled)
            .finish()
    }
}

/// Restores the thread's previous context when dropped (`!Send`: it belongs to the thread).
#[must_use = "the context is left when the guard drops"]
pub struct ContextGuard {
    entered: Option<(Rc<Entry>, CtxState)>,
    _not_send: PhantomData<*const ()>,
}

impl Drop for ContextGuard {
    fn drop(&mut self) {
        if let Some((e, saved)) = self.entered.take() {
            e.set_ctx_state(saved);
        }
    }
}
