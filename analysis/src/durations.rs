//! [`Durations`]: how the CLI and the debugger summarise the durations of one kind of frame.
//!
//! Percentiles come from a log-linear histogram with the bucket layout of an HDR histogram of
//! 2 significant digits: exact below 256 ns, then 128 buckets per power of two, so every
//! percentile is within 1 % (1/128) of the exact value, in about 25 KiB per label for durations
//! up to a second. The CLI and the debugger both use [`Durations`], so they agree.
//!
//! It is written out here rather than taken from `hdrhistogram` because the debugger records
//! every frame's duration while it loads a log: the crate's general `record` (any precision,
//! counts of any width, resizing, min tracking) was 6 % of a 100 M-frame load, on the thread
//! that bounds it; this one is a shift, an add and a bounds check (`cargo bench -p
//! framelog-analysis`).

/// Buckets below 256 hold one value each; above, each power of two is split in 128.
const SUB_BUCKETS: u32 = 128;

/// The bucket of `v`: `v` itself below 256, else 128 per power of two (the HDR layout).
#[inline]
fn index(v: u64) -> usize {
    // How far `v` is shifted so that it fits 8 bits: 0 below 256.
    let k = (64 - v.leading_zeros()).saturating_sub(8);
    (k * SUB_BUCKETS) as usize + (v >> k) as usize
}

/// The smallest value of bucket `i`, and how many values it covers.
fn bucket(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < 2 * u64::from(SUB_BUCKETS) {
        return (i, 1);
    }
    let k = i / u64::from(SUB_BUCKETS) - 1;
    let sub = i - k * u64::from(SUB_BUCKETS);
    (sub << k, 1 << k)
}

/// Durations of one kind of frame: count, total, max exactly; percentiles within 1 %.
#[derive(Debug, Clone, Default)]
pub struct Durations {
    /// Durations per bucket ([`index`]), as long as the largest bucket used.
    counts: Vec<u64>,
    count: u64,
    total_ns: u64,
    max_ns: u64,
}

impl Durations {
    /// Significant decimal digits kept (2: within 1 %).
    pub const SIGNIFICANT_DIGITS: u8 = 2;
    /// The relative precision of percentiles, for display.
    pub const PRECISION: &'static str = "±1 %";

    /// No durations yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one duration.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        let i = index(ns);
        match self.counts.get_mut(i) {
            Some(c) => *c += 1,
            None => self.grow_to(i),
        }
        self.count += 1;
        self.total_ns = self.total_ns.saturating_add(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// Makes room for bucket `i` and counts one duration in it.
    #[cold]
    #[inline(never)]
    fn grow_to(&mut self, i: usize) {
        // Whole powers of two at a time: a label's durations reach their range quickly.
        let len = (i + 1).next_multiple_of(SUB_BUCKETS as usize);
        self.counts.resize(len, 0);
        self.counts[i] += 1;
    }

    /// Number of durations.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Sum of durations.
    pub fn total_ns(&self) -> u64 {
        self.total_ns
    }

    /// Longest duration.
    pub fn max_ns(&self) -> u64 {
        self.max_ns
    }

    /// Mean duration (0 when empty).
    pub fn mean_ns(&self) -> u64 {
        self.total_ns.checked_div(self.count).unwrap_or(0)
    }

    /// Heap bytes held by the histogram.
    pub fn heap_bytes(&self) -> usize {
        self.counts.capacity() * std::mem::size_of::<u64>()
    }

    /// The `p`th percentile (0-100), within 1 %, never above the maximum: the largest value
    /// of the bucket that holds the duration of that rank (0 when empty).
    pub fn percentile_ns(&self, p: f64) -> u64 {
        let q = (p / 100.0).clamp(0.0, 1.0);
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count.max(1));
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, width) = bucket(i);
                let v = if q == 0.0 { lo } else { lo + (width - 1) };
                return v.min(self.max_ns);
            }
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn percentiles_hold_for_large_durations_within_one_percent() {
        let mut d = Durations::new();
        let all: Vec<u64> = (1..=10_000u64).map(|i| i * 997_331).collect();
        all.iter().for_each(|&v| d.record(v));
        for p in [50.0, 99.0] {
            let exact = all[((p / 100.0) * all.len() as f64).ceil() as usize - 1] as f64;
            let got = d.percentile_ns(p) as f64;
            assert!((got - exact).abs() / exact < 0.01, "p{p}: {got} vs {exact}");
        }
        assert_eq!((d.count(), d.max_ns()), (10_000, *all.last().unwrap()));
        assert_eq!(d.total_ns(), all.iter().sum::<u64>());
    }

    #[test]
    fn buckets_tile_every_value_in_order() {
        // Each bucket starts where the one before it ends, from 0 to the largest u64.
        let mut next = 0u64;
        for i in 0..=index(u64::MAX) {
            let (lo, width) = bucket(i);
            assert_eq!(lo, next, "bucket {i}");
            assert_eq!(index(lo), i);
            assert_eq!(index(lo + (width - 1)), i);
            next = lo.wrapping_add(width);
        }
        assert_eq!(next, 0, "the last bucket ends at u64::MAX");
    }

    #[test]
    fn small_durations_are_exact_and_empty_is_zero() {
        let mut d = Durations::new();
        assert_eq!((d.percentile_ns(50.0), d.mean_ns()), (0, 0));
        for v in [0, 1, 2, 3, 255] {
            d.record(v);
        }
        assert_eq!(d.percentile_ns(0.0), 0);
        assert_eq!(d.percentile_ns(50.0), 2);
        assert_eq!(d.percentile_ns(100.0), 255);
    }

    proptest! {
        /// Every percentile is within 1/128 of the exact duration of its rank.
        #[test]
        fn every_percentile_is_within_one_percent(
            mut all in prop::collection::vec(0u64..u64::MAX / 2, 1..300),
            p in 0.0f64..=100.0,
        ) {
            let mut d = Durations::new();
            all.iter().for_each(|&v| d.record(v));
            all.sort_unstable();
            let rank = ((p / 100.0 * all.len() as f64).ceil() as usize).clamp(1, all.len());
            let exact = all[rank - 1];
            let got = d.percentile_ns(p);
            let err = got.abs_diff(exact) as f64;
            prop_assert!(err <= exact as f64 / 128.0, "p{}: {} vs {}", p, got, exact);
            prop_assert_eq!(d.count(), all.len() as u64);
        }
    }
}
