//! Timestamps: nanoseconds since the Unix epoch from a monotonic source anchored once per
//! process.
//!
//! The wall clock is read exactly once (at the anchor); every later timestamp is the anchor
//! plus a monotonic delta, so timestamps never go backwards within a process (NTP steps
//! cannot move them) while staying comparable across processes that share a log.
//!
//! The monotonic source is the CPU's invariant time-stamp counter through `quanta` when the
//! CPU has one (x86-64 with invariant TSC + RDTSCP, or AArch64's system counter), else
//! `std::time::Instant`. `cargo bench -p framelog-stopwatch` measures both in the same run: on the
//! development machine two TSC reads cost about half of two `Instant::now()` calls, and the
//! frame cost is dominated by its two timestamps, which is why the TSC is the default.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The process clock: an anchor (wall time at start-up) plus a monotonic delta.
#[derive(Debug)]
pub struct Clock {
    source: Source,
    /// Wall-clock time of the anchor, ns since the Unix epoch.
    anchor_epoch_ns: u64,
}

#[derive(Debug)]
enum Source {
    /// Raw counter reads scaled to ns by `quanta`'s calibration, taken over as a fixed-point
    /// factor (`ns = (raw - anchor_raw) * factor >> SCALE_SHIFT`).
    Tsc {
        clock: quanta::Clock,
        anchor_raw: u64,
        factor: u64,
    },
    /// `Instant` (vDSO `clock_gettime(CLOCK_MONOTONIC)` on Linux).
    Std { anchor: Instant },
}

static PROCESS_CLOCK: OnceLock<Clock> = OnceLock::new();

/// The binary point of [`Source::Tsc`]'s factor: 52 bits keep `quanta`'s precision for any
/// counter of up to 4 µs a tick, and a constant shift of one 64×64-bit product is a few
/// instructions where `quanta`'s general scaling (a 128-bit product, a variable shift, a
/// match) is about ten more, twice a frame.
const SCALE_SHIFT: u32 = 52;

/// `ticks` of a counter in ns, `factor` being the ns of 2^[`SCALE_SHIFT`] ticks.
#[inline(always)]
fn scale(ticks: u64, factor: u64) -> u64 {
    ((u128::from(ticks) * u128::from(factor)) >> SCALE_SHIFT) as u64
}

/// Which monotonic source a [`Clock`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockSource {
    /// The CPU's invariant time-stamp counter via `quanta` (which uses the OS clock on a
    /// CPU without one).
    Tsc,
    /// `std::time::Instant`.
    Instant,
}

impl Clock {
    /// The process-wide clock, anchored on first use (TSC when available).
    pub fn process() -> &'static Clock {
        PROCESS_CLOCK.get_or_init(|| {
            // `FRAMELOG_CLOCK=instant` forces the portable source (for machines whose TSC
            // is not trustworthy even though the CPU claims it is invariant).
            let force_std = std::env::var("FRAMELOG_CLOCK").is_ok_and(|v| v == "instant");
            Clock::new(if force_std {
                ClockSource::Instant
            } else {
                ClockSource::Tsc
            })
        })
    }

    /// A clock anchored now, on the given source (TSC falls back to `Instant` without one).
    pub fn new(source: ClockSource) -> Clock {
        // quanta itself falls back to the OS monotonic clock on a CPU without an invariant
        // counter, so `Tsc` is always safe to ask for.
        // Miri cannot run the TSC calibration (inline assembly).
        let tsc = source == ClockSource::Tsc && !cfg!(miri);
        // Read the monotonic source and the wall clock back to back; the pair is the anchor.
        let source = if tsc {
            let clock = quanta::Clock::new();
            let anchor_raw = clock.raw();
            // quanta's scale for 2^52 ticks is the factor (2^52 when it fell back to the OS
            // clock, whose raw reads are already ns).
            let factor = clock.delta_as_nanos(1, 1 + (1 << SCALE_SHIFT));
            Source::Tsc {
                clock,
                anchor_raw,
                factor,
            }
        } else {
            Source::Std {
                anchor: Instant::now(),
            }
        };
        let anchor_epoch_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Clock {
            source,
            anchor_epoch_ns,
        }
    }

    /// Which source this clock reads.
    pub fn source(&self) -> ClockSource {
        match self.source {
            Source::Tsc { .. } => ClockSource::Tsc,
            Source::Std { .. } => ClockSource::Instant,
        }
    }

    /// Now, in ns since the Unix epoch. Never smaller than an earlier reading on this thread.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        match &self.source {
            // A read before the anchor counts as the anchor, so the result never falls below
            // it even if another core's counter lags by a few cycles.
            Source::Tsc {
                clock,
                anchor_raw,
                factor,
            } => self.anchor_epoch_ns + scale(clock.raw().saturating_sub(*anchor_raw), *factor),
            Source::Std { anchor } => self.anchor_epoch_ns + anchor.elapsed().as_nanos() as u64,
        }
    }
}

/// Now, in ns since the Unix epoch, from the process clock.
pub fn now_ns() -> u64 {
    Clock::process().now()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "Miri's clock is virtual: wall-time bounds do not hold")]
    fn timestamps_are_near_wall_time_and_never_go_backwards() {
        for source in [ClockSource::Tsc, ClockSource::Instant] {
            let clock = Clock::new(source);
            let wall = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64;
            let first = clock.now();
            // Within a second of the wall clock (the anchor is the wall clock).
            assert!(first.abs_diff(wall) < 1_000_000_000, "{first} vs {wall}");
            let mut last = first;
            for _ in 0..100_000 {
                let t = clock.now();
                assert!(t >= last, "went backwards: {t} < {last}");
                last = t;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            let later = clock.now();
            let elapsed = later - first;
            // At least the 20 ms slept, and not absurdly more.
            assert!((20_000_000..2_000_000_000).contains(&elapsed), "{elapsed}");
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot run the TSC calibration")]
    fn the_fixed_point_scale_agrees_with_quantas() {
        let clock = Clock::new(ClockSource::Tsc);
        let Source::Tsc {
            clock: q,
            anchor_raw,
            factor,
        } = &clock.source
        else {
            panic!("the TSC source fell back to Instant");
        };
        // From one tick to about a day of a 3 GHz counter.
        for ticks in [1u64, 1_000, 3_000_000, 3_000_000_000, 259_200_000_000_000] {
            let ours = scale(ticks, *factor);
            let theirs = q.delta_as_nanos(*anchor_raw, anchor_raw + ticks);
            // Two roundings apart at most, plus one part in 2^40 of the span.
            assert!(
                ours.abs_diff(theirs) <= 2 + theirs / (1 << 40),
                "{ticks} ticks: {ours} ns against quanta's {theirs}"
            );
        }
    }
}
