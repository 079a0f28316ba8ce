//! [`AsyncTime`]: where the time of one kind of asynchronous frame went, busy (running on a
//! thread), queued (ready, not running) and waiting (for something else), as the CLI and the
//! debugger summarise it.
//!
//! Fed one frame at a time with the three parts of its duration (they add up to it: see
//! `docs/FORMAT.md`, *Async time*), its poll count and slow polls.

use crate::Durations;

/// One asynchronous frame's time, split three ways, and its polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameAsync {
    /// Running on a thread (the sum of its polls).
    pub busy_ns: u64,
    /// Ready to run but not running (queued behind other work).
    pub queued_ns: u64,
    /// Waiting for something else (a timer, a socket, a child task).
    pub waiting_ns: u64,
    /// Polls of its future.
    pub polls: u64,
    /// Its longest single poll.
    pub longest_poll_ns: u64,
    /// Polls at least as long as the writer's slow-poll threshold.
    pub slow_polls: u64,
    /// Whether queued time was measured from wakes (else only the delay to the first poll).
    pub queued_measured: bool,
}

/// The busy, queued and waiting times of many frames of one kind.
#[derive(Debug, Clone, Default)]
pub struct AsyncTime {
    /// Busy time per frame.
    pub busy: Durations,
    /// Queued time per frame.
    pub queued: Durations,
    /// Waiting time per frame.
    pub waiting: Durations,
    /// Polls, over all its frames.
    pub polls: u64,
    /// Slow polls, over all its frames.
    pub slow_polls: u64,
    /// The longest single poll of any of its frames.
    pub longest_poll_ns: u64,
    /// Frames whose queued time holds only the delay to their first poll.
    pub queued_unmeasured: u64,
}

impl AsyncTime {
    /// No frames yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one frame.
    pub fn record(&mut self, f: &FrameAsync) {
        self.busy.record(f.busy_ns);
        self.queued.record(f.queued_ns);
        self.waiting.record(f.waiting_ns);
        self.polls = self.polls.saturating_add(f.polls);
        self.slow_polls = self.slow_polls.saturating_add(f.slow_polls);
        self.longest_poll_ns = self.longest_poll_ns.max(f.longest_poll_ns);
        if !f.queued_measured {
            self.queued_unmeasured += 1;
        }
    }

    /// Frames added.
    pub fn frames(&self) -> u64 {
        self.busy.count()
    }

    /// The share of the frames' total time they spent busy, queued and waiting (each 0 to 1,
    /// adding up to 1; all 0 without frames or time).
    pub fn shares(&self) -> (f64, f64, f64) {
        let (b, q, w) = (
            self.busy.total_ns() as f64,
            self.queued.total_ns() as f64,
            self.waiting.total_ns() as f64,
        );
        let all = b + q + w;
        if all == 0.0 {
            return (0.0, 0.0, 0.0);
        }
        (b / all, q / all, w / all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_and_cpu_frames_of_the_same_length_tell_apart() {
        // 10 frames that waited 20 ms on a timer and 10 that spun 2.1 ms in three polls,
        // each 22-27 ms long: the breakdown says which is which.
        let mut timer = AsyncTime::new();
        let mut cpu = AsyncTime::new();
        for i in 0..10 {
            timer.record(&FrameAsync {
                busy_ns: 1_000,
                queued_ns: 2_000_000 + i,
                waiting_ns: 20_000_000,
                polls: 2,
                longest_poll_ns: 600,
                slow_polls: 0,
                queued_measured: true,
            });
            cpu.record(&FrameAsync {
                busy_ns: 2_100_000,
                queued_ns: 25_000_000,
                waiting_ns: 0,
                polls: 3,
                longest_poll_ns: 700_000,
                slow_polls: 0,
                queued_measured: true,
            });
        }
        assert_eq!(timer.frames(), 10);
        assert_eq!(timer.polls, 20);
        assert_eq!(timer.busy.percentile_ns(50.0), 1_000);
        assert!(timer.shares().2 > 0.85, "{:?}", timer.shares());
        assert_eq!(cpu.busy.percentile_ns(99.0) / 10_000, 2_100_000 / 10_000);
        assert_eq!(cpu.longest_poll_ns, 700_000);
        let (b, q, w) = cpu.shares();
        assert!((b + q + w - 1.0).abs() < 1e-9);
        assert_eq!(cpu.queued_unmeasured, 0);
    }

    #[test]
    fn no_frames_share_nothing() {
        assert_eq!(AsyncTime::new().shares(), (0.0, 0.0, 0.0));
    }
}
