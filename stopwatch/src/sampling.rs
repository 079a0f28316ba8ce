//! Sampling: which contexts (root frames and everything nested in them) get recorded.
//!
//! The decision is taken once, when a root frame opens a context, and inherited by every
//! frame nested in it (same thread, other threads via [`crate::Context`], futures via
//! [`crate::InFrame`]). A frame in an unsampled context costs a thread-local check.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// How many contexts a stopwatch records.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Sampling {
    /// Every context.
    #[default]
    All,
    /// Each context with this probability (clamped to 0..=1).
    Probability(f64),
    /// At most this many contexts per second; under lower load every context is recorded,
    /// under higher load each is recorded with probability `cap / contexts seen last second`,
    /// so the cost stays flat and the sample is spread over the whole second.
    Adaptive {
        /// Cap on recorded contexts per second.
        max_per_second: u32,
    },
}

/// The shared decision state of one stopwatch.
pub(crate) struct Sampler {
    kind: Kind,
}

enum Kind {
    All,
    /// Record when a uniform u64 is below the threshold.
    Fixed {
        threshold: u64,
        always: bool,
    },
    Adaptive(Adaptive),
}

struct Adaptive {
    cap: u32,
    /// Second (since the epoch) the counters below belong to.
    window: AtomicU64,
    seen: AtomicU32,
    taken: AtomicU32,
    /// Probability for the current window as a u64 threshold, from the previous window's load.
    threshold: AtomicU64,
}

fn threshold_for(p: f64) -> u64 {
    if p >= 1.0 {
        u64::MAX
    } else if p <= 0.0 || p.is_nan() {
        0
    } else {
        (p * u64::MAX as f64) as u64
    }
}

impl Sampler {
    /// The sampler for a configuration.
    pub(crate) fn new(s: Sampling) -> Sampler {
        let kind = match s {
            Sampling::All => Kind::All,
            Sampling::Probability(p) => Kind::Fixed {
                threshold: threshold_for(p),
                always: p >= 1.0,
            },
            Sampling::Adaptive { max_per_second } => Kind::Adaptive(Adaptive {
                cap: max_per_second,
                window: AtomicU64::new(0),
                seen: AtomicU32::new(0),
                taken: AtomicU32::new(0),
                threshold: AtomicU64::new(u64::MAX),
            }),
        };
        Sampler { kind }
    }

    /// Whether every context is recorded (lets the hot path skip the decision).
    pub(crate) fn records_all(&self) -> bool {
        matches!(self.kind, Kind::All | Kind::Fixed { always: true, .. })
    }

    /// Decides for a new context. `rng` is the calling thread's generator state, `now_ns`
    /// the root frame's timestamp.
    pub(crate) fn sample(&self, rng: &Cell<u64>, now_ns: u64) -> bool {
        match &self.kind {
            Kind::All => true,
            Kind::Fixed { threshold, always } => *always || next_u64(rng) < *threshold,
            Kind::Adaptive(a) => a.sample(rng, now_ns),
        }
    }
}

impl Adaptive {
    fn sample(&self, rng: &Cell<u64>, now_ns: u64) -> bool {
        if self.cap == 0 {
            return false;
        }
        let sec = now_ns / 1_000_000_000;
        let window = self.window.load(Ordering::Acquire);
        if sec > window
            && self
                .window
                .compare_exchange(window, sec, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            // This thread rolled the window over: derive the new probability from the load
            // of the window that just ended (if it was the previous second; after an idle
            // gap, start again at "record everything up to the cap").
            let seen = self.seen.swap(0, Ordering::AcqRel);
            self.taken.store(0, Ordering::Release);
            let p = if sec == window + 1 && seen > self.cap {
                self.cap as f64 / seen as f64
            } else {
                1.0
            };
            self.threshold.store(threshold_for(p), Ordering::Release);
        }
        self.seen.fetch_add(1, Ordering::Relaxed);
        if next_u64(rng) >= self.threshold.load(Ordering::Acquire) {
            return false;
        }
        // The hard cap: never more than `cap` per window, whatever the probability said.
        self.taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                (t < self.cap).then_some(t + 1)
            })
            .is_ok()
    }
}

/// xorshift64*: a fast per-thread generator (statistical quality is ample for sampling).
pub(crate) fn next_u64(state: &Cell<u64>) -> u64 {
    let mut x = state.get();
    if x == 0 {
        x = seed();
    }
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    state.set(x);
    x.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// A non-zero seed that differs between threads and runs.
pub(crate) fn seed() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0x9E37_79B9_7F4A_7C15);
    let c = COUNTER.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
    let t = crate::clock::now_ns();
    (c ^ t.rotate_left(17)) | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "100,000 draws, no unsafe code: 17 s under Miri")]
    fn fixed_probability_records_about_that_fraction() {
        let s = Sampler::new(Sampling::Probability(0.25));
        let rng = Cell::new(12345);
        let n = 100_000;
        let taken = (0..n).filter(|_| s.sample(&rng, 0)).count();
        let frac = taken as f64 / n as f64;
        assert!((0.23..0.27).contains(&frac), "{frac}");
        assert!(!Sampler::new(Sampling::Probability(0.0)).sample(&rng, 0));
        assert!(Sampler::new(Sampling::Probability(1.0)).records_all());
        assert!(!s.records_all());
    }

    #[test]
    #[cfg_attr(miri, ignore = "20,000 draws, no unsafe code: 8 s under Miri")]
    fn adaptive_caps_each_second_and_spreads_under_load() {
        let s = Sampler::new(Sampling::Adaptive {
            max_per_second: 100,
        });
        let rng = Cell::new(777);
        let sec = 1_700_000_000u64 * 1_000_000_000;
        // Second 0: 10,000 contexts, evenly spread; only the cap is recorded.
        let taken0: Vec<bool> = (0..10_000u64)
            .map(|i| s.sample(&rng, sec + i * 100_000))
            .collect();
        assert_eq!(taken0.iter().filter(|t| **t).count(), 100);
        // Second 1: same load; probability is now 100/10,000, so picks are spread over the
        // whole second instead of being the first 100.
        let taken1: Vec<bool> = (0..10_000u64)
            .map(|i| s.sample(&rng, sec + 1_000_000_000 + i * 100_000))
            .collect();
        let n1 = taken1.iter().filter(|t| **t).count();
        assert!((60..=100).contains(&n1), "{n1}");
        let last_half = taken1[5_000..].iter().filter(|t| **t).count();
        assert!(last_half > 15, "picks bunched at the start: {last_half}");
        // Light load: everything is recorded.
        let light = (0..50u64)
            .filter(|i| s.sample(&rng, sec + 5_000_000_000 + i))
            .count();
        assert_eq!(light, 50);
    }
}
