//! Duration histograms of one label (Tracy's find zone): how its frames' durations spread, on
//! a log scale, and which frames fall in a bar.

use super::{FrameRef, Model};

/// Durations of one label's closed frames, binned on a log scale.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    /// The label (interned id).
    pub label: u32,
    /// Bars, shortest durations first; each covers `[from_ns, to_ns)`.
    pub bins: Vec<Bin>,
    /// Frames counted.
    pub count: u64,
    /// Shortest and longest duration (ns).
    pub min_ns: u64,
    /// See `min_ns`.
    pub max_ns: u64,
    /// Mean duration (ns).
    pub mean_ns: f64,
    /// Median and 99th percentile (ns), computed as the Statistics panel and `framelog stats`
    /// compute them (`analysis::Durations`, within 1 %), so all three agree.
    pub p50_ns: u64,
    /// See `p50_ns`.
    pub p99_ns: u64,
    /// The longest frame.
    pub slowest: Option<FrameRef>,
}

/// One bar of a [`Histogram`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Bin {
    /// Shortest duration in the bar (ns, inclusive).
    pub from_ns: u64,
    /// Longest duration in the bar (ns, exclusive; the last bar includes it).
    pub to_ns: u64,
    /// Frames in the bar.
    pub count: u64,
}

impl Model {
    /// The histogram of `label`'s closed frames (those starting in `range` if given), in
    /// `bins` bars evenly spaced on a log scale between the shortest and longest duration.
    pub fn histogram(&self, label: u32, bins: usize, range: Option<(u64, u64)>) -> Histogram {
        let mut durations: Vec<u64> = Vec::new();
        let mut slowest: Option<(u64, FrameRef)> = None;
        self.for_each_closed(label, range, |at, d| {
            durations.push(d);
            if slowest.is_none_or(|(s, _)| d > s) {
                slowest = Some((d, at));
            }
        });
        let mut h = Histogram {
            label,
            count: durations.len() as u64,
            slowest: slowest.map(|(_, at)| at),
            ..Histogram::default()
        };
        if durations.is_empty() {
            return h;
        }
        durations.sort_unstable();
        let n = durations.len();
        h.min_ns = durations[0];
        h.max_ns = durations[n - 1];
        h.mean_ns = durations.iter().map(|&d| d as f64).sum::<f64>() / n as f64;
        let mut percentiles = analysis::Durations::new();
        for &d in &durations {
            percentiles.record(d);
        }
        h.p50_ns = percentiles.percentile_ns(50.0);
        h.p99_ns = percentiles.percentile_ns(99.0);
        let bins = bins.max(1);
        let lo = (h.min_ns.max(1) as f64).ln();
        let hi = ((h.max_ns.max(1) + 1) as f64).ln();
        let step = ((hi - lo) / bins as f64).max(f64::MIN_POSITIVE);
        let edge = |i: usize| -> u64 {
            if i == 0 {
                h.min_ns
            } else if i == bins {
                h.max_ns + 1
            } else {
                (lo + step * i as f64).exp().round() as u64
            }
        };
        h.bins = (0..bins)
            .map(|i| Bin {
                from_ns: edge(i),
                to_ns: edge(i + 1),
                count: 0,
            })
            .collect();
        // The durations are sorted: walk them once, bar by bar.
        let mut b = 0;
        for &d in &durations {
            while b + 1 < bins && d >= h.bins[b].to_ns {
                b += 1;
            }
            h.bins[b].count += 1;
        }
        h
    }

    /// `label`'s closed frames lasting `[from_ns, to_ns)` (starting in `range` if given), the
    /// longest first, at most `limit`.
    pub fn frames_lasting(
        &self,
        label: u32,
        from_ns: u64,
        to_ns: u64,
        range: Option<(u64, u64)>,
        limit: usize,
    ) -> Vec<(FrameRef, u64)> {
        let mut out = Vec::new();
        self.for_each_closed(label, range, |at, d| {
            if d >= from_ns && d < to_ns {
                out.push((at, d));
            }
        });
        out.sort_unstable_by_key(|&(at, d)| (std::cmp::Reverse(d), at));
        out.truncate(limit);
        out
    }

    fn for_each_closed(
        &self,
        label: u32,
        range: Option<(u64, u64)>,
        mut f: impl FnMut(FrameRef, u64),
    ) {
        let (from, to) = range.unwrap_or((0, u64::MAX));
        let tree = self.call_tree();
        for (li, lane) in self.lanes().iter().enumerate() {
            for (ri, row) in lane.rows.iter().enumerate() {
                let first = row.start_partition_point(|s| s < from);
                for i in first..row.len() {
                    if row.start(i) >= to {
                        break;
                    }
                    if row.is_open(i) || tree.label(row.node(i)) != label {
                        continue;
                    }
                    let at = FrameRef {
                        lane: li as u32,
                        row: ri as u32,
                        index: i as u32,
                    };
                    f(at, row.end(i) - row.start(i));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::model::test_log::Log;

    #[test]
    fn durations_spread_on_a_log_scale_with_exact_percentiles() {
        let mut l = Log::default();
        // 100 fast frames (1..=100 µs) and one slow one (50 ms), plus another label.
        let mut id = 0;
        for k in 1..=100u64 {
            id += 1;
            let t = k * 1_000_000;
            l.start(0, id, t, id, "db").end(0, id, t + k * 1_000);
        }
        l.start(0, 500, 200_000_000, 500, "db")
            .end(0, 500, 250_000_000);
        l.start(0, 501, 300_000_000, 501, "other")
            .end(0, 501, 300_000_010);
        let m = l.model();
        let db = m.labels().get("db").unwrap();
        let h = m.histogram(db, 20, None);
        assert_eq!(h.count, 101);
        assert_eq!((h.min_ns, h.max_ns), (1_000, 50_000_000));
        // The same percentiles as the Statistics panel and the CLI, not a second method.
        let s = m.stats().get(db);
        assert_eq!((h.p50_ns, h.p99_ns), (s.quantile_ns(0.5), s.p99_ns()));
        // Nearest rank within 1 %: p50 is the 51st of 101 (51 µs), p99 the 100th (100 µs).
        assert!(h.p50_ns.abs_diff(51_000) <= 510, "{}", h.p50_ns);
        assert!(h.p99_ns.abs_diff(100_000) <= 1_000, "{}", h.p99_ns);
        assert_eq!(h.bins.len(), 20);
        assert_eq!(h.bins.iter().map(|b| b.count).sum::<u64>(), 101);
        // Log scale: each bar is the same ratio wide.
        let r0 = h.bins[1].to_ns as f64 / h.bins[1].from_ns as f64;
        let r1 = h.bins[10].to_ns as f64 / h.bins[10].from_ns as f64;
        assert!((r0 / r1 - 1.0).abs() < 0.01, "{r0} {r1}");
        // The slow frame is alone in the last bar, and is the slowest.
        assert_eq!(h.bins[19].count, 1);
        let slowest = m.info(h.slowest.unwrap()).unwrap();
        assert_eq!(slowest.key.id, 500);
        // The frames of a bar, longest first.
        let b = h.bins[0];
        let frames = m.frames_lasting(db, b.from_ns, b.to_ns, None, 1000);
        assert_eq!(frames.len() as u64, b.count);
        assert!(frames.windows(2).all(|w| w[0].1 >= w[1].1));
        // Limited to a time range: only frames starting in it.
        let h = m.histogram(db, 20, Some((1_000_000, 10_500_000)));
        assert_eq!(h.count, 10);
        assert_eq!(h.max_ns, 10_000);
    }
}
