//! Frames around futures: [`InFrame`] makes a frame cover a future's whole awaited duration
//! (not just its first poll) and makes frames started inside the future, on whatever worker
//! thread polls it, belong to the frame's context and record the frame as their parent. It
//! also records where that duration went (`polls`): busy in polls, queued after a wake, or
//! waiting, and the polls that blocked their thread.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use crate::context::Context;
use crate::counting_alloc::Span;
use crate::frame::{Detached, Frame};
use crate::polls::{self, PollTimes, WakeHook};

pin_project_lite::pin_project! {
    /// A future running inside a frame; see [`Frame::instrument`].
    #[must_use = "futures do nothing unless polled"]
    pub struct InFrame<F> {
        // `None` once finished: the future is dropped as soon as it completes (or when the
        // `InFrame` is), inside the frame's context, as `tracing::Instrumented` does.
        #[pin]
        fut: Option<F>,
        frame: Option<Detached>,
        context: Option<Context>,
        // The runtime's waker, wrapped to see wakes (a recorded frame's, once polled).
        wake: Option<WakeHook>,
    }

    impl<F> PinnedDrop for InFrame<F> {
        fn drop(this: Pin<&mut Self>) {
            let mut this = this.project();
            // Frames started by the future's destructors belong to its context, and what
            // they free to its frame.
            let _entered = this.context.as_ref().map(Context::enter);
            let span = counting(this.frame);
            this.fut.set(None);
            if let Some(f) = this.frame.as_mut() {
                span.end_into(&mut f.alloc);
            }
        }
    }
}

impl Frame {
    /// Wraps `fut` so this frame ends when `fut` completes (or is dropped), and every poll
    /// runs inside the frame's context. The calling thread leaves the frame's context now.
    pub fn instrument<F: Future>(self, fut: F) -> InFrame<F> {
        let mut frame = self.detach();
        if let Some(d) = frame.as_mut().filter(|d| d.is_recording()) {
            d.polls = Some(PollTimes::new(d.inner.clock.now(), true));
        }
        let context = frame.as_ref().map(|d| d.context());
        InFrame {
            fut: Some(fut),
            frame,
            context,
            wake: None,
        }
    }
}

impl<F> InFrame<F> {
    /// Attaches data to the frame (see [`Frame::data`]).
    pub fn data<T: serde::Serialize + ?Sized>(&self, value: &T) {
        if let Some(f) = &self.frame {
            f.data(value);
        }
    }

    /// The frame's context.
    pub fn context(&self) -> Option<&Context> {
        self.context.as_ref()
    }
}

impl<F: Future> Future for InFrame<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        let mut this = self.project();
        let out = {
            let _entered = this.context.as_ref().map(Context::enter);
            let Some(fut) = this.fut.as_mut().as_pin_mut() else {
                panic!("`InFrame` polled after it completed");
            };
            // The frame's allocations are summed over its polls, on whatever thread; a poll
            // that panics counts too (the guard ends the count as the panic unwinds).
            let timed = this.frame.as_ref().is_some_and(|f| f.polls.is_some());
            let counted = PollCount::begin(this.frame);
            let out = if timed {
                timed_poll(fut, cx, counted.frame, this.wake)
            } else {
                fut.poll(cx)
            };
            if out.is_ready() {
                // Drop the finished future inside its context too.
                this.fut.set(None);
            }
            drop(counted);
            out
        };
        if out.is_ready()
            && let Some(mut frame) = this.frame.take()
        {
            frame.end();
        }
        out
    }
}

/// Polls `fut` with the runtime's waker wrapped (to see its wakes), timing the poll into
/// `frame`'s polls; a slow poll is reported when the outermost poll on the thread ends.
#[inline]
fn timed_poll<F: Future>(
    fut: Pin<&mut F>,
    cx: &mut TaskContext<'_>,
    frame: &mut Option<Detached>,
    wake: &mut Option<WakeHook>,
) -> Poll<F::Output> {
    let Some(f) = frame.as_mut() else {
        return fut.poll(cx);
    };
    let clock = f.inner.clock;
    let hook = WakeHook::for_poll(wake, cx.waker(), clock);
    let t0 = clock.now();
    if let Some(p) = f.polls.as_mut() {
        p.begin(t0, hook.take_woken());
    }
    // A poll that panics is not counted; the guard leaves the thread's nest of polls.
    polls::nest_enter(true);
    let unwind = Unwind;
    hook.set_polling(true);
    let out = fut.poll(&mut TaskContext::from_waker(hook.waker()));
    hook.set_polling(false);
    std::mem::forget(unwind);
    let t1 = clock.now();
    let d = match f.polls.as_mut() {
        Some(p) => p.end(t0, t1, f.inner.slow_poll_ns),
        None => t1.saturating_sub(t0),
    };
    let (id, ctx) = f.frame_and_context();
    polls::nest_exit(&f.inner, id, ctx, t0, d);
    out
}

/// Leaves the thread's nest of polls if dropped: only as a poll's panic unwinds.
struct Unwind;

impl Drop for Unwind {
    fn drop(&mut self) {
        polls::nest_unwind();
    }
}

/// Counts a poll's allocations into its frame when dropped: at the poll's end, or as a
/// panic inside the poll unwinds.
struct PollCount<'a> {
    span: Span,
    frame: &'a mut Option<Detached>,
}

impl<'a> PollCount<'a> {
    fn begin(frame: &'a mut Option<Detached>) -> Self {
        PollCount {
            span: counting(frame),
            frame,
        }
    }
}

impl Drop for PollCount<'_> {
    fn drop(&mut self) {
        if let Some(f) = self.frame.as_mut() {
            std::mem::take(&mut self.span).end_into(&mut f.alloc);
        }
    }
}

/// Starts counting a poll's allocations for `frame`, if it is recorded.
#[inline(always)]
fn counting(frame: &Option<Detached>) -> Span {
    match frame {
        Some(f) if f.is_recording() => Span::begin(),
        _ => Span::default(),
    }
}

/// Runs futures inside frames: `fut.in_frame(Stopwatch::start("job"))`.
pub trait FutureExt: Future + Sized {
    /// Same as [`Frame::instrument`].
    fn in_frame(self, frame: Frame) -> InFrame<Self> {
        frame.instrument(self)
    }
}

impl<F: Future> FutureExt for F {}
