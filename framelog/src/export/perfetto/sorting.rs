//! Where a Perfetto trace lets the trace processor's sorter hand its events on before the end
//! of the file, so that it does not hold the whole trace in memory at once.
//!
//! The trace processor sorts every event by time before parsing it. It holds them all until
//! the end of the file unless the trace carries the tracing service's own marks: "all data
//! sources flushed" twice, then "read tracing buffers completed". At such a point it sorts and
//! hands on what came before the *previous* point, and from then on drops (counting
//! `sorter_push_event_out_of_order`) any event earlier than one it handed on. The export's
//! events are not in time order (a frame is written when it is released, threads' batches
//! interleave in the file, a long frame holds its thread's frames back), so a point is only
//! safe where nothing after it is earlier than anything before the point before it. Whether
//! that holds depends on the whole rest of the file, so an export is planned by a first pass
//! ([`Spans`]: the earliest and latest time of each run of packets) and written by a second
//! that places the points the plan allows ([`Plan`]) while checking that it writes the same
//! packets ([`Replay`]). Pure logic: no I/O.

/// Packets a [`Spans`] run holds; a plan's chunks are whole runs.
pub const SPAN: u64 = 1024;
/// The most chunks a plan makes of a trace (fewer when they would be shorter than one run).
const CHUNKS: u64 = 64;
/// The longest chunk: the sorter then holds at most about two chunks of events.
const MAX_CHUNK: u64 = 64 * SPAN;

/// The earliest and latest timestamp of a run of packets (`None`: no timed packet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    /// Earliest and latest timestamp of the run's timed packets.
    pub times: Option<(u64, u64)>,
}

impl Span {
    fn add(&mut self, ts: u64) {
        self.times = Some(match self.times {
            None => (ts, ts),
            Some((lo, hi)) => (lo.min(ts), hi.max(ts)),
        });
    }
}

/// The times of a trace's packets, run by run, as they are written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spans {
    /// Every whole run, then the run being filled.
    done: Vec<Span>,
    current: Span,
    in_current: u64,
}

impl Spans {
    /// One packet written, with its timestamp if it has one; `true` when it ended a run.
    pub fn packet(&mut self, ts: Option<u64>) -> bool {
        if let Some(ts) = ts {
            self.current.add(ts);
        }
        self.in_current += 1;
        if self.in_current == SPAN {
            self.done.push(std::mem::take(&mut self.current));
            self.in_current = 0;
            return true;
        }
        false
    }

    /// Whole runs so far.
    pub fn runs(&self) -> &[Span] {
        &self.done
    }

    /// Packets recorded.
    pub fn packets(&self) -> u64 {
        self.done.len() as u64 * SPAN + self.in_current
    }

    /// Where the sorter may hand events on in a trace of exactly these packets.
    pub fn plan(&self) -> Plan {
        let total = self.packets();
        let chunk = (total / CHUNKS / SPAN * SPAN).clamp(SPAN, MAX_CHUNK);
        let per = (chunk / SPAN) as usize;
        let mut runs = self.done.clone();
        if self.in_current > 0 {
            runs.push(self.current);
        }
        // Per chunk boundary j (after the first j chunks): the latest time before it, and
        // the earliest at or after it.
        let chunks: Vec<Span> = runs
            .chunks(per)
            .map(|c| {
                let mut s = Span::default();
                for t in c.iter().filter_map(|r| r.times) {
                    s.add(t.0);
                    s.add(t.1);
                }
                s
            })
            .collect();
        let n = chunks.len();
        let mut latest_before = vec![0u64; n + 1];
        for (j, c) in chunks.iter().enumerate() {
            latest_before[j + 1] = latest_before[j].max(c.times.map_or(0, |t| t.1));
        }
        let mut earliest_after = vec![u64::MAX; n + 1];
        for j in (0..n).rev() {
            earliest_after[j] =
                earliest_after[j + 1].min(chunks[j].times.map_or(u64::MAX, |t| t.0));
        }
        // A point at boundary j hands on what came before the previous point p: safe when
        // nothing from j on is earlier than anything before p. The first point hands on
        // nothing (the sorter starts with its limit at its first event). A point after the
        // last chunk would hand on nothing the end does not.
        let mut points = Vec::new();
        let mut prev: Option<usize> = None;
        for (j, &after) in earliest_after.iter().enumerate().take(n).skip(1) {
            if prev.is_none_or(|p| after >= latest_before[p]) {
                points.push(j as u64 * chunk);
                prev = Some(j);
            }
        }
        Plan {
            spans: self.done.clone(),
            points,
        }
    }
}

/// Where to place the sorter's points: packet counts (a point goes after that many packets).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The first pass's whole runs, which the second must repeat.
    spans: Vec<Span>,
    /// Ascending.
    points: Vec<u64>,
}

impl Plan {
    /// The planned points, as packet counts.
    pub fn points(&self) -> &[u64] {
        &self.points
    }
}

/// The second pass: follows a [`Plan`] while the packets written repeat the first pass's.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    plan: Plan,
    seen: Spans,
    next: usize,
    /// Runs of this pass that differed from the plan's (then no point is placed any more).
    diverged: bool,
    placed: u64,
}

impl Replay {
    /// Follows `plan`.
    pub fn new(plan: Plan) -> Self {
        Self {
            plan,
            ..Default::default()
        }
    }

    /// One packet written (after it); `true` if a point goes right after it.
    pub fn packet(&mut self, ts: Option<u64>) -> bool {
        if self.seen.packet(ts) {
            let i = self.seen.runs().len() - 1;
            if self.plan.spans.get(i) != Some(&self.seen.runs()[i]) {
                self.diverged = true;
            }
        }
        let at = self.seen.packets();
        while self.plan.points.get(self.next).is_some_and(|&p| p < at) {
            self.next += 1;
        }
        if self.diverged || self.plan.points.get(self.next) != Some(&at) {
            return false;
        }
        self.next += 1;
        self.placed += 1;
        true
    }

    /// Points placed so far.
    pub fn placed(&self) -> u64 {
        self.placed
    }

    /// Whether this pass wrote other packets than the plan's (the log changed between them).
    pub fn diverged(&self) -> bool {
        self.diverged
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What the trace processor's sorter does with points at `points` (packet counts): the
    /// events it would drop as out of order.
    fn dropped(times: &[Option<u64>], points: &[u64]) -> usize {
        let mut handed_on_max: Option<u64> = None;
        let mut limit = 0usize; // Events before this index are handed on at the next point.
        let mut held: Vec<(u64, usize)> = Vec::new();
        let mut dropped = 0;
        let mut points = points.iter().peekable();
        for (i, t) in times.iter().enumerate() {
            if let Some(t) = *t {
                if handed_on_max.is_some_and(|m| t < m) {
                    dropped += 1;
                } else {
                    held.push((t, i));
                }
            }
            if points.peek() == Some(&&(i as u64 + 1)) {
                points.next();
                // Hands on, in time order, the held events that came before `limit`, up to
                // the first held event that came after it.
                held.sort();
                let stop = held
                    .iter()
                    .position(|&(_, at)| at >= limit)
                    .unwrap_or(held.len());
                if let Some(&(t, _)) = held[..stop].last() {
                    handed_on_max = Some(handed_on_max.map_or(t, |m| m.max(t)));
                }
                held.drain(..stop);
                limit = i + 1;
            }
        }
        dropped
    }

    fn planned(times: &[Option<u64>]) -> Plan {
        let mut s = Spans::default();
        for t in times {
            s.packet(*t);
        }
        s.plan()
    }

    #[test]
    fn times_in_order_get_a_point_per_chunk() {
        let times: Vec<Option<u64>> = (0..100 * SPAN).map(Some).collect();
        let plan = planned(&times);
        // 100 runs: chunks of one run (100 / 64 rounds down to 1 run).
        assert_eq!(plan.points().len(), 99);
        assert_eq!(dropped(&times, plan.points()), 0);
    }

    #[test]
    fn an_early_event_at_the_end_keeps_every_point_before_it_away() {
        // A long frame's begin written last (its thread held back): nothing may be handed on
        // before it is seen, so no point is safe but the first, which hands on nothing.
        let mut times: Vec<Option<u64>> = (1..=20 * SPAN).map(Some).collect();
        times.push(Some(0));
        let plan = planned(&times);
        assert_eq!(plan.points(), [SPAN]);
        assert_eq!(dropped(&times, plan.points()), 0);
        // Placing a point at every chunk would drop it.
        let every: Vec<u64> = (1..20).map(|j| j * SPAN).collect();
        assert_eq!(dropped(&times, &every), 1, "the model sees the loss");
    }

    #[test]
    fn a_small_trace_gets_no_point() {
        let times: Vec<Option<u64>> = (0..SPAN).map(Some).collect();
        assert!(planned(&times).points().is_empty());
    }

    #[test]
    fn a_replay_of_other_packets_places_no_more_points() {
        let times: Vec<Option<u64>> = (0..10 * SPAN).map(Some).collect();
        let plan = planned(&times);
        assert_eq!(plan.points().len(), 9);
        let mut r = Replay::new(plan.clone());
        let mut placed = Vec::new();
        for (i, t) in times.iter().enumerate() {
            // The fourth run differs.
            let t = if i as u64 == 3 * SPAN + 5 {
                Some(0)
            } else {
                *t
            };
            if r.packet(t) {
                placed.push(i as u64 + 1);
            }
        }
        assert!(r.diverged());
        assert_eq!(placed, plan.points()[..3].to_vec());
        // The same packets: every point.
        let mut r = Replay::new(plan.clone());
        let n = times.iter().filter(|t| r.packet(**t)).count();
        assert_eq!(n, 9);
        assert!(!r.diverged());
    }

    proptest! {
        /// Whatever the order of times, the sorter drops nothing at the planned points;
        /// untimed packets (descriptors) anywhere.
        #[test]
        fn planned_points_never_make_the_sorter_drop(
            runs in proptest::collection::vec((0u64..1000, 0u64..300, any::<bool>()), 1..40),
            late in proptest::collection::vec((0usize..40_000, 0u64..1_000_000), 0..4),
        ) {
            // Mostly rising times with jitter, some untimed packets, and a few very late
            // early events.
            let mut times = Vec::new();
            let mut t = 1_000_000u64;
            for (step, jitter, untimed) in &runs {
                for k in 0..SPAN {
                    t += step % 7;
                    if *untimed && k % 97 == 0 {
                        times.push(None);
                    } else {
                        times.push(Some(t.saturating_sub(jitter * (k % 3))));
                    }
                }
            }
            for (at, ts) in &late {
                let at = at % times.len();
                times[at] = Some(*ts);
            }
            let plan = planned(&times);
            prop_assert_eq!(dropped(&times, plan.points()), 0);
        }
    }
}
