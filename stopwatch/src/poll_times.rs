//! A frame's polls so far (pure accounting, no I/O): busy, queued, longest, first poll and
//! slow polls, and the frame-polls record they make (`docs/FORMAT.md`, *Async time*). The
//! timing around a poll (the wrapped waker, slow-poll reports) is in `polls.rs`.

use formats::FramePolls;

/// A frame's polls so far.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PollTimes {
    /// When the frame could first be polled (it was wrapped, or the span created).
    origin: u64,
    /// The end of its latest poll (0 before the first).
    last_end: u64,
    polls: u64,
    busy: u64,
    queued: u64,
    longest: u64,
    first_poll: u64,
    slow: u64,
    /// Wakes are seen (an `in_frame` future), so queued time after the first poll is known.
    wakes_seen: bool,
}

impl PollTimes {
    /// No polls yet; the frame can be polled from `origin` on.
    pub(crate) fn new(origin: u64, wakes_seen: bool) -> PollTimes {
        PollTimes {
            origin,
            wakes_seen,
            ..PollTimes::default()
        }
    }

    /// A poll begins at `t0`. `woken` is when the frame's waker was first woken since its
    /// previous poll (0: not woken, or not seen).
    #[inline]
    pub(crate) fn begin(&mut self, t0: u64, woken: u64) {
        if self.polls == 0 {
            let d = t0.saturating_sub(self.origin);
            self.first_poll = d;
            self.queued += d;
        } else if woken != 0 {
            // A wake inside the previous poll counts from that poll's end.
            self.queued += t0.saturating_sub(woken.max(self.last_end));
        }
    }

    /// The poll that began at `t0` ended at `t1`; returns its length.
    #[inline]
    pub(crate) fn end(&mut self, t0: u64, t1: u64, slow_ns: u64) -> u64 {
        let d = t1.saturating_sub(t0);
        self.polls += 1;
        self.busy += d;
        self.longest = self.longest.max(d);
        self.slow += u64::from(d >= slow_ns);
        self.last_end = t1;
        d
    }

    /// The frame-polls record of frame `id`, ending at `timestamp`.
    pub(crate) fn record(&self, id: u32, worker: u8, timestamp: u64) -> FramePolls {
        FramePolls {
            id,
            worker,
            timestamp,
            flags: if self.wakes_seen {
                formats::polls::QUEUED_MEASURED
            } else {
                0
            },
            polls: self.polls,
            busy_ns: self.busy,
            queued_ns: self.queued,
            longest_poll_ns: self.longest,
            first_poll_ns: self.first_poll,
            slow_polls: self.slow,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_queued_and_the_rest_add_up_and_a_wake_inside_a_poll_counts_from_its_end() {
        let mut p = PollTimes::new(100, true);
        // Queued 20 ns before the first poll, which runs 30.
        p.begin(120, 0);
        assert_eq!(p.end(120, 150, 1000), 30);
        // Woken at 400 (250 ns waiting), polled at 410 (10 ns queued), runs 50; woken inside
        // that poll at 440 (a self-wake), polled again at 500: queued from 460.
        p.begin(410, 400);
        p.end(410, 460, 1000);
        p.begin(500, 440);
        p.end(500, 2000, 1000);
        let r = p.record(7, 1, 2100);
        assert_eq!(
            (r.polls, r.busy_ns, r.queued_ns),
            (3, 30 + 50 + 1500, 20 + 10 + 40)
        );
        assert_eq!(
            (r.longest_poll_ns, r.first_poll_ns, r.slow_polls),
            (1500, 20, 1)
        );
        assert!(r.queued_measured());
        // The frame lasted from 100 (or earlier) to 2100: nothing claims more.
        let s = r.split(2000);
        assert_eq!(s.busy_ns + s.queued_ns + s.waiting_ns, 2000);
        assert_eq!(s.waiting_ns, 2000 - 1580 - 70);
    }

    #[test]
    fn polls_without_a_wake_add_no_queued_time() {
        let mut p = PollTimes::new(0, true);
        p.begin(0, 0);
        p.end(0, 10, u64::MAX);
        // Polled again without its waker woken (a sibling in `join!` woke the task).
        p.begin(100, 0);
        p.end(100, 110, u64::MAX);
        let r = p.record(1, 0, 200);
        assert_eq!(
            (r.polls, r.busy_ns, r.queued_ns, r.slow_polls),
            (2, 20, 0, 0)
        );
    }
}
