//! The futures and the stand-in executor the poll benches share (`polls.rs`,
//! `polls_then_now.rs`): a future polled `POLLS` times a frame, `FRAMES` frames a run.

use std::future::Future;
use std::hint::black_box;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use stopwatch::clock::Clock;

/// Polls of each frame's future.
pub const POLLS: u32 = 1000;
/// Frames per run.
pub const FRAMES: u32 = 200;

/// Ready after `left` more polls; wakes itself before each `Pending` when `wake`.
pub struct Ticks {
    pub left: u32,
    pub wake: bool,
}

impl Future for Ticks {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.left == 0 {
            return Poll::Ready(());
        }
        self.left -= 1;
        if self.wake {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

/// A waker that counts its wakes, as an executor marks a task ready.
pub struct Counting(AtomicU64);

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// A counting waker.
pub fn counting_waker() -> Waker {
    Waker::from(Arc::new(Counting(AtomicU64::new(0))))
}

/// Polls `fut` to completion with `waker`.
pub fn drive(fut: impl Future<Output = ()>, waker: &Waker) {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(waker);
    while fut.as_mut().poll(&mut cx).is_pending() {}
}

/// ns per poll: the median of 7 runs of `FRAMES` frames of `POLLS` polls each.
pub fn measure(mut run_frame: impl FnMut()) -> f64 {
    let mut runs = Vec::new();
    for _ in 0..7 {
        let t = Instant::now();
        for _ in 0..FRAMES {
            run_frame();
        }
        runs.push(t.elapsed().as_nanos() as f64 / f64::from(FRAMES * POLLS));
    }
    runs.sort_by(f64::total_cmp);
    runs[3]
}

/// The floor: two reads of the recorder's clock (a poll's start and end), ns, measured as
/// a poll is.
pub fn floor() -> f64 {
    let clock = Clock::process();
    measure(|| {
        for _ in 0..POLLS {
            black_box(clock.now());
            black_box(clock.now());
        }
    })
}
