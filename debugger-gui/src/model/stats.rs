//! Per-label statistics, kept up to date as frames close: count, total, self time, mean, p99
//! and max. p99 comes from a log-linear histogram (16 sub-buckets per power of two), so it is
//! within about 3% of the exact value while costing O(1) per frame and a few KiB per label.

/// Sub-buckets per power of two.
const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
/// Buckets needed for any u64 duration.
const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUB;

#[inline]
fn bucket(d: u64) -> usize {
    if d < SUB as u64 {
        return d as usize;
    }
    let exp = 63 - d.leading_zeros(); // >= SUB_BITS
    let mant = ((d >> (exp - SUB_BITS)) as usize) & (SUB - 1);
    (exp - SUB_BITS + 1) as usize * SUB + mant
}

/// Smallest and largest duration that fall into bucket `b`.
fn bucket_bounds(b: usize) -> (u64, u64) {
    if b < SUB {
        return (b as u64, b as u64);
    }
    let exp = (b / SUB) as u32 + SUB_BITS - 1;
    let mant = (b % SUB) as u64;
    let lo = (SUB as u64 + mant) << (exp - SUB_BITS);
    let width = 1u64 << (exp - SUB_BITS);
    (lo, lo.saturating_add(width - 1))
}

/// Running statistics of one label.
#[derive(Clone, Debug, Default)]
pub struct LabelStats {
    /// Closed frames with this label.
    pub count: u64,
    /// Sum of their durations (ns).
    pub total_ns: u64,
    /// Sum of durations minus their direct children's (ns; may dip below zero transiently).
    pub self_ns: i64,
    /// Longest duration (ns).
    pub max_ns: u64,
    hist: Option<Box<[u32]>>,
}

impl LabelStats {
    /// Mean duration (ns).
    pub fn mean_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total_ns as f64 / self.count as f64
        }
    }

    /// Self time, clamped at zero.
    pub fn self_time_ns(&self) -> u64 {
        self.self_ns.max(0) as u64
    }

    /// Approximate quantile `q` (0..=1) of the durations (ns).
    pub fn quantile_ns(&self, q: f64) -> u64 {
        let Some(hist) = &self.hist else { return 0 };
        if self.count == 0 {
            return 0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0u64;
        for (b, &n) in hist.iter().enumerate() {
            seen += n as u64;
            if seen >= rank {
                let (lo, hi) = bucket_bounds(b);
                return (lo + (hi - lo) / 2).min(self.max_ns);
            }
        }
        self.max_ns
    }

    /// 99th percentile duration (ns).
    pub fn p99_ns(&self) -> u64 {
        self.quantile_ns(0.99)
    }
}

/// Statistics of every label, indexed by interned label id.
#[derive(Default, Debug)]
pub struct Stats {
    by_label: Vec<LabelStats>,
}

impl Stats {
    #[inline]
    fn entry(&mut self, label: u32) -> &mut LabelStats {
        let i = label as usize;
        if i >= self.by_label.len() {
            self.by_label.resize_with(i + 1, LabelStats::default);
        }
        &mut self.by_label[i]
    }

    #[inline]
    pub(crate) fn on_close(&mut self, label: u32, dur: u64) {
        let s = self.entry(label);
        s.count += 1;
        s.total_ns = s.total_ns.saturating_add(dur);
        s.self_ns = s.self_ns.saturating_add(dur as i64);
        s.max_ns = s.max_ns.max(dur);
        let hist = s
            .hist
            .get_or_insert_with(|| vec![0u32; BUCKETS].into_boxed_slice());
        let b = &mut hist[bucket(dur)];
        *b = b.saturating_add(1);
    }

    #[inline]
    pub(crate) fn on_child(&mut self, parent_label: u32, child_dur: u64) {
        let s = self.entry(parent_label);
        s.self_ns = s.self_ns.saturating_sub(child_dur as i64);
    }

    /// Statistics of one label (zeroes if it never closed).
    pub fn get(&self, label: u32) -> LabelStats {
        self.by_label
            .get(label as usize)
            .cloned()
            .unwrap_or_default()
    }

    /// Borrowed statistics of one label, if any frame with it closed.
    pub fn get_ref(&self, label: u32) -> Option<&LabelStats> {
        self.by_label.get(label as usize).filter(|s| s.count > 0)
    }

    /// `(label id, stats)` for every label with at least one closed frame.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &LabelStats)> {
        self.by_label
            .iter()
            .enumerate()
            .filter(|(_, s)| s.count > 0)
            .map(|(i, s)| (i as u32, s))
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.by_label.capacity() * std::mem::size_of::<LabelStats>()
            + self.by_label.iter().filter(|s| s.hist.is_some()).count() * BUCKETS * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::Log;
    use rand::{Rng, SeedableRng};

    #[test]
    fn buckets_are_monotonic_and_cover_their_values() {
        let mut last = 0;
        for d in (0..5000u64).chain([u64::MAX / 3, u64::MAX]) {
            let b = bucket(d);
            assert!(b >= last);
            last = b;
            let (lo, hi) = bucket_bounds(b);
            assert!(lo <= d && d <= hi, "{d} not in {lo}..={hi} (bucket {b})");
        }
        assert!(bucket(u64::MAX) < BUCKETS);
    }

    #[test]
    fn p99_is_close_to_exact() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut s = LabelStats::default();
        let mut stats = Stats::default();
        let mut all = Vec::new();
        for _ in 0..20_000 {
            let d: u64 = rng.gen_range(1_000..5_000_000);
            all.push(d);
            stats.on_close(0, d);
        }
        s.clone_from(&stats.by_label[0]);
        all.sort_unstable();
        let exact = all[(0.99 * all.len() as f64).ceil() as usize - 1];
        let approx = s.p99_ns();
        let err = (approx as f64 - exact as f64).abs() / exact as f64;
        assert!(err < 0.035, "p99 {approx} vs exact {exact}");
        assert_eq!(s.max_ns, *all.last().unwrap());
        assert_eq!(s.total_ns, all.iter().sum::<u64>());
    }

    #[test]
    fn self_time_subtracts_children() {
        let mut l = Log::default();
        l.start(0, 1, 0, 1, "request");
        l.start(0, 2, 10, 1, "db").end(0, 2, 30);
        l.start(0, 3, 40, 1, "db").end(0, 3, 70);
        l.end(0, 1, 100);
        let m = l.model();
        let req = m.stats().get(m.labels().get("request").unwrap());
        let db = m.stats().get(m.labels().get("db").unwrap());
        assert_eq!((req.count, req.total_ns, req.self_time_ns()), (1, 100, 50));
        assert_eq!(
            (db.count, db.total_ns, db.self_time_ns(), db.max_ns),
            (2, 50, 50, 30)
        );
        assert_eq!(db.mean_ns(), 25.0);
        // Order independence: the child ends after its parent in file order.
        let mut l = Log::default();
        l.start(0, 1, 0, 1, "request")
            .start(0, 2, 10, 1, "db")
            .end(0, 1, 100)
            .end(0, 2, 30);
        let m = l.model();
        let req = m.stats().get(m.labels().get("request").unwrap());
        assert_eq!(req.self_time_ns(), 80);
    }
}
