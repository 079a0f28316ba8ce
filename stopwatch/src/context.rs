//! Contexts: the unit of work (a request, a job) frames belong to, and how it travels.
//!
//! A frame started with no enclosing frame opens a new context whose value is its own id;
//! frames nested in it carry that value. On one thread this is implicit (thread-local
//! state). Across threads, take the context with [`Frame::context`](crate::Frame::context) or
//! [`Stopwatch::current_context`](crate::Stopwatch::current_context) and [`Context::enter`]
//! it on the other thread; across `.await`s, [`InFrame`](crate::InFrame) enters it on every
//! poll. The sampling decision travels with the context, and so does its current frame: frames
//! started wherever a context is entered record that frame as their parent.

use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;

use crate::inner::Inner;
use crate::local::{self, CtxState, Entry};

/// A unit of work's identity, to carry frames of one request across threads (`Send + Sync`).
///
/// It also carries the frame it was taken from (or the thread's current frame): frames
/// started where it is entered, or with [`Context::child`], are that frame's children.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<Inner>,
    /// The state entered: `in_frame` is always true.
    pub(crate) state: CtxState,
}

impl Context {
    pub(crate) fn new(inner: Arc<Inner>, state: CtxState) -> Context {
        Context {
            inner,
            state: CtxState {
                in_frame: true,
                ..state
            },
        }
    }

    /// The calling thread's current context in `inner`, if it is inside a frame.
    pub(crate) fn current_on(inner: &Arc<Inner>) -> Option<Context> {
        local::with_entry(inner, |e| {
            e.in_frame
                .get()
                .then(|| Context::new(inner.clone(), e.ctx_state()))
        })
        .flatten()
    }

    /// The context value written in FrameStart records (the id of the frame that opened it).
    pub fn id(&self) -> u32 {
        self.state.ctx
    }

    /// Whether frames in this context are recorded (the root's sampling decision).
    pub fn is_sampled(&self) -> bool {
        self.state.sampled
    }

    /// The id of the frame that frames started in this context name as their parent (the
    /// recorded frame it was taken from, or its nearest recorded ancestor); `None`: they are
    /// roots of the context.
    pub fn parent_id(&self) -> Option<u32> {
        (self.state.frame != 0).then_some(self.state.frame)
    }

    /// Makes this the calling thread's current context until the guard drops: frames started
    /// meanwhile carry it (and its sampling decision) instead of opening new contexts, and
    /// are children of its frame.
    pub fn enter(&self) -> ContextGuard {
        let entered = local::with_entry(&self.inner, |e| {
            let saved = e.ctx_state();
            e.set_ctx_state(self.state);
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
            .field("id", &self.state.ctx)
            .field("sampled", &self.state.sampled)
            .field("parent", &self.state.frame)
            .finish()
    }
}

/// Restores the thread's previous context when dropped (`!Send`: it belongs to the thread).
#[must_use = "the context is left when the guard drops"]
pub struct ContextGuard {
    entered: Option<(Rc<Entry>, CtxState)>,
    _not_send: PhantomData<*const ()>,
}

impl ContextGuard {
    /// Leaves this context out of order, while `next` (entered after it, still entered)
    /// stays: `next` takes over the state this guard would restore, so leaving `next` later
    /// returns the thread to where it was before both.
    #[cfg(feature = "tracing")]
    pub(crate) fn leave_under(mut self, next: &mut ContextGuard) {
        if let (Some((_, mine)), Some((_, theirs))) = (self.entered.take(), next.entered.as_mut()) {
            *theirs = mine;
        }
    }
}

impl Drop for ContextGuard {
    fn drop(&mut self) {
        if let Some((e, saved)) = self.entered.take() {
            e.set_ctx_state(saved);
        }
    }
}
