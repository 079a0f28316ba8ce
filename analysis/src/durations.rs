//! [`Durations`]: how the CLI and the debugger summarise the durations of one kind of frame.
//!
//! Percentiles come from HDR histograms with 2 significant digits: every percentile is within
//! 1 % of the exact value (exact below 256 ns), in about 20 KiB per label for durations up to
//! a second. The CLI and the debugger both use [`Durations`], so they agree.

/// Durations of one kind of frame: count, total, max exactly; percentiles within 1 %.
#[derive(Debug, Clone)]
pub struct Durations {
    hist: hdrhistogram::Histogram<u64>,
    total_ns: u64,
    max_ns: u64,
}

impl Default for Durations {
    fn default() -> Self {
        Self::new()
    }
}

impl Durations {
    /// Significant decimal digits kept (2: within 1 %).
    pub const SIGNIFICANT_DIGITS: u8 = 2;
    /// The relative precision of percentiles, for display.
    pub const PRECISION: &'static str = "±1 %";

    /// No durations yet.
    pub fn new() -> Self {
        Self {
            hist: hdrhistogram::Histogram::new(Self::SIGNIFICANT_DIGITS)
                .expect("2 significant digits is a valid precision"),
            total_ns: 0,
            max_ns: 0,
        }
    }

    /// Adds one duration.
    pub fn record(&mut self, ns: u64) {
        // `record` grows the auto-resizing histogram; `saturating_record` would clamp to its
        // current range instead. It cannot fail for a u64 once resizing is on.
        if self.hist.record(ns).is_err() {
            self.hist.saturating_record(ns);
        }
        self.total_ns = self.total_ns.saturating_add(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// Number of durations.
    pub fn count(&self) -> u64 {
        self.hist.len()
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
        self.total_ns.checked_div(self.count()).unwrap_or(0)
    }

    /// Heap bytes held by the histogram.
    pub fn heap_bytes(&self) -> usize {
        self.hist.distinct_values() * std::mem::size_of::<u64>()
    }

    /// The `p`th percentile (0-100), within 1 %, never above the maximum.
    pub fn percentile_ns(&self, p: f64) -> u64 {
        self.hist.value_at_quantile(p / 100.0).min(self.max_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
