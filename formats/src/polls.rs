//! Where an asynchronous frame's time went: frame polls (type 10) and slow polls (type 11),
//! `docs/FORMAT.md`, *Async time (types 10, 11)*.
//!
//! Both are extension records (readers that predate them skip them by `payload_size`); their
//! payloads are varints. [`crate::decode_record`] and the compact decoder read them through
//! [`FramePolls::from_payload`] and [`SlowPoll::from_payload`].

use crate::varint::{get_varint, put_varints};

/// Longest frame-polls payload: seven varints of at most 10 bytes.
pub const MAX_FRAME_POLLS_PAYLOAD: usize = 70;
/// Longest slow-poll payload: one varint.
pub const MAX_SLOW_POLL_PAYLOAD: usize = 10;
/// `flags` bit 0 of a frame-polls record: `queued_ns` was measured (the writer saw wakes).
pub const QUEUED_MEASURED: u64 = 1;

/// Where an asynchronous frame's time went (type 10): written once, before its FrameEnd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FramePolls {
    /// The frame's id (same worker).
    pub id: u32,
    /// Writing process's worker id.
    pub worker: u8,
    /// The frame's end time, ns since the Unix epoch.
    pub timestamp: u64,
    /// Bit 0: [`QUEUED_MEASURED`]; other bits are kept and ignored.
    pub flags: u64,
    /// How many times the frame's future was polled (a span: entered).
    pub polls: u64,
    /// The sum of its polls, in ns.
    pub busy_ns: u64,
    /// Ready but not running: from its start to its first poll, and from each wake to the
    /// next poll, in ns.
    pub queued_ns: u64,
    /// Its longest single poll, in ns.
    pub longest_poll_ns: u64,
    /// From the frame's start to its first poll, in ns (part of `queued_ns`).
    pub first_poll_ns: u64,
    /// Polls that lasted at least the writer's slow-poll threshold.
    pub slow_polls: u64,
}

impl FramePolls {
    /// The counts a type 10 payload holds; `None` unless it is exactly seven varints.
    pub fn from_payload(id: u32, worker: u8, timestamp: u64, payload: &[u8]) -> Option<FramePolls> {
        let mut p = payload;
        let mut v = [0u64; 7];
        for x in &mut v {
            *x = get_varint(&mut p)?;
        }
        if !p.is_empty() {
            return None;
        }
        let [
            flags,
            polls,
            busy_ns,
            queued_ns,
            longest_poll_ns,
            first_poll_ns,
            slow_polls,
        ] = v;
        Some(FramePolls {
            id,
            worker,
            timestamp,
            flags,
            polls,
            busy_ns,
            queued_ns,
            longest_poll_ns,
            first_poll_ns,
            slow_polls,
        })
    }

    /// The payload: seven varints, in a fixed buffer, and its length. Never allocates.
    pub fn payload(&self) -> ([u8; MAX_FRAME_POLLS_PAYLOAD], usize) {
        let mut b = [0u8; MAX_FRAME_POLLS_PAYLOAD];
        let n = put_varints(
            &mut b,
            [
                self.flags,
                self.polls,
                self.busy_ns,
                self.queued_ns,
                self.longest_poll_ns,
                self.first_poll_ns,
                self.slow_polls,
            ],
        );
        (b, n)
    }

    /// Whether the writer measured queued time from wakes (else it holds only the delay to
    /// the first poll, and the rest is counted as waiting).
    pub fn queued_measured(&self) -> bool {
        self.flags & QUEUED_MEASURED != 0
    }

    /// The three parts of a frame that lasted `duration_ns`: busy, queued and waiting, which
    /// add up to it (a record that claims more than the duration is cut to fit: busy first).
    pub fn split(&self, duration_ns: u64) -> Breakdown {
        let busy_ns = self.busy_ns.min(duration_ns);
        let queued_ns = self.queued_ns.min(duration_ns - busy_ns);
        Breakdown {
            busy_ns,
            queued_ns,
            waiting_ns: duration_ns - busy_ns - queued_ns,
        }
    }
}

/// A frame's duration split three ways; the parts add up to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Breakdown {
    /// Running on a thread (its polls).
    pub busy_ns: u64,
    /// Ready to run but not running.
    pub queued_ns: u64,
    /// Waiting for something else (the rest).
    pub waiting_ns: u64,
}

/// One poll that held its thread at least the slow-poll threshold (type 11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlowPoll {
    /// The frame whose code blocked (same worker).
    pub id: u32,
    /// Writing process's worker id.
    pub worker: u8,
    /// The poll's start, ns since the Unix epoch.
    pub timestamp: u64,
    /// How long the poll held its thread, in ns.
    pub duration_ns: u64,
}

impl SlowPoll {
    /// The poll a type 11 payload holds; `None` unless it is exactly one varint.
    pub fn from_payload(id: u32, worker: u8, timestamp: u64, payload: &[u8]) -> Option<SlowPoll> {
        let mut p = payload;
        let duration_ns = get_varint(&mut p)?;
        p.is_empty().then_some(SlowPoll {
            id,
            worker,
            timestamp,
            duration_ns,
        })
    }

    /// The payload: one varint, in a fixed buffer, and its length. Never allocates.
    pub fn payload(&self) -> ([u8; MAX_SLOW_POLL_PAYLOAD], usize) {
        let mut b = [0u8; MAX_SLOW_POLL_PAYLOAD];
        let n = put_varints(&mut b, [self.duration_ns]);
        (b, n)
    }

    /// When the poll ended (its start plus its duration, saturating).
    pub fn end(&self) -> u64 {
        self.timestamp.saturating_add(self.duration_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_polls_are_exactly_seven_varints() {
        let p = FramePolls {
            id: 4,
            worker: 2,
            timestamp: 11,
            flags: QUEUED_MEASURED,
            polls: 3,
            busy_ns: 2_100_000,
            queued_ns: u64::MAX,
            longest_poll_ns: 700_000,
            first_poll_ns: 0,
            slow_polls: 1,
        };
        let (b, n) = p.payload();
        assert_eq!(FramePolls::from_payload(4, 2, 11, &b[..n]), Some(p));
        assert_eq!(FramePolls::from_payload(4, 2, 11, &b[..n - 1]), None);
        let mut more = b[..n].to_vec();
        more.push(0);
        assert_eq!(FramePolls::from_payload(4, 2, 11, &more), None);
    }

    #[test]
    fn a_split_adds_up_to_the_duration_even_when_a_record_claims_more() {
        let p = FramePolls {
            busy_ns: 30,
            queued_ns: 50,
            ..FramePolls::default()
        };
        let s = p.split(100);
        assert_eq!((s.busy_ns, s.queued_ns, s.waiting_ns), (30, 50, 20));
        let s = p.split(60);
        assert_eq!((s.busy_ns, s.queued_ns, s.waiting_ns), (30, 30, 0));
        let s = p.split(10);
        assert_eq!((s.busy_ns, s.queued_ns, s.waiting_ns), (10, 0, 0));
    }

    #[test]
    fn slow_polls_are_exactly_one_varint() {
        let s = SlowPoll {
            id: 9,
            worker: 1,
            timestamp: 100,
            duration_ns: 20_000_000,
        };
        let (b, n) = s.payload();
        assert_eq!(SlowPoll::from_payload(9, 1, 100, &b[..n]), Some(s));
        assert_eq!(SlowPoll::from_payload(9, 1, 100, &[]), None);
        assert_eq!(SlowPoll::from_payload(9, 1, 100, &[0, 0]), None);
        assert_eq!(s.end(), 20_000_100);
    }
}
