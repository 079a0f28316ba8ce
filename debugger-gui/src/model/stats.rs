//! Per-label statistics, kept up to date as frames close: count, total, self time, mean, p99
//! and max. Percentiles come from `analysis::Durations` (an HDR histogram, within 1 %),
//! the same method `framelog stats` uses, so the window and the CLI agree.

use analysis::Durations;

/// Running statistics of one label. Count, total and maximum are the durations' own (a
/// closing frame updates one histogram, not copies of what it holds).
#[derive(Clone, Debug, Default)]
pub struct LabelStats {
    /// Sum of the durations of their direct children (ns).
    children_ns: u64,
    durations: Option<Box<Durations>>,
}

impl LabelStats {
    /// Closed frames with this label.
    pub fn count(&self) -> u64 {
        self.durations.as_ref().map_or(0, |d| d.count())
    }

    /// Sum of their durations (ns).
    pub fn total_ns(&self) -> u64 {
        self.durations.as_ref().map_or(0, |d| d.total_ns())
    }

    /// Longest duration (ns).
    pub fn max_ns(&self) -> u64 {
        self.durations.as_ref().map_or(0, |d| d.max_ns())
    }

    /// Sum of durations minus their direct children's (ns; below zero when children
    /// overlap, e.g. concurrent async work).
    pub fn self_ns(&self) -> i64 {
        (i128::from(self.total_ns()) - i128::from(self.children_ns))
            .clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }

    /// Mean duration (ns).
    pub fn mean_ns(&self) -> f64 {
        let n = self.count();
        if n == 0 {
            0.0
        } else {
            self.total_ns() as f64 / n as f64
        }
    }

    /// Self time, clamped at zero.
    pub fn self_time_ns(&self) -> u64 {
        self.self_ns().max(0) as u64
    }

    /// Quantile `q` (0..=1) of the durations (ns), within 1 %.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        self.durations
            .as_ref()
            .map_or(0, |d| d.percentile_ns(q * 100.0))
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
        self.entry(label)
            .durations
            .get_or_insert_with(Box::default)
            .record(dur);
    }

    #[inline]
    pub(crate) fn on_child(&mut self, parent_label: u32, child_dur: u64) {
        let s = self.entry(parent_label);
        s.children_ns = s.children_ns.saturating_add(child_dur);
    }

    /// A child counted with `on_child` moved to another parent.
    pub(crate) fn off_child(&mut self, parent_label: u32, child_dur: u64) {
        let s = self.entry(parent_label);
        s.children_ns = s.children_ns.saturating_sub(child_dur);
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
        self.by_label.get(label as usize).filter(|s| s.count() > 0)
    }

    /// `(label id, stats)` for every label with at least one closed frame.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &LabelStats)> {
        self.by_label
            .iter()
            .enumerate()
            .filter(|(_, s)| s.count() > 0)
            .map(|(i, s)| (i as u32, s))
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.by_label.capacity() * std::mem::size_of::<LabelStats>()
            + self
                .by_label
                .iter()
                .filter_map(|s| s.durations.as_ref())
                .map(|d| d.heap_bytes())
                .sum::<usize>()
    }
}

impl super::Model {
    /// Statistics of the closed frames that start in `[from, to)` (a selected time range),
    /// computed on demand; self time counts the children that start in it too.
    pub fn stats_in(&self, from: u64, to: u64) -> Stats {
        let mut st = Stats::default();
        let tree = self.call_tree();
        for lane in self.lanes() {
            for row in &lane.rows {
                let first = row.start_partition_point(|s| s < from);
                for i in first..row.len() {
                    if row.start(i) >= to {
                        break;
                    }
                    if row.is_open(i) {
                        continue;
                    }
                    let dur = row.end(i) - row.start(i);
                    st.on_close(tree.label(row.node(i)), dur);
                    let parent = tree.parent(row.node(i));
                    if parent != super::calltree::ROOT {
                        st.on_child(tree.label(parent), dur);
                    }
                }
            }
        }
        st
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_log::Log;

    #[test]
    fn statistics_of_a_range_count_the_frames_starting_in_it() {
        let mut l = Log::default();
        for k in 0..10u64 {
            let t = k * 100;
            let id = k as u32 * 2 + 1;
            l.start(0, id, t, id, "req")
                .start(0, id + 1, t + 10, id, "db")
                .end(0, id + 1, t + 10 + 5 * (k + 1))
                .end(0, id, t + 90);
        }
        let m = l.model();
        // Requests 3, 4 and 5 (starting at 300, 400, 500), and their queries.
        let st = m.stats_in(300, 550);
        let req = m.labels().get("req").unwrap();
        let db = m.labels().get("db").unwrap();
        assert_eq!(st.get(req).count(), 3);
        assert_eq!(st.get(db).count(), 3);
        assert_eq!(st.get(db).total_ns(), 20 + 25 + 30);
        assert_eq!(st.get(db).max_ns(), 30);
        assert_eq!(st.get(req).self_time_ns(), 3 * 90 - 75);
        assert_eq!(
            m.stats().get(db).count(),
            10,
            "the whole log's statistics are untouched"
        );
        assert_eq!(m.stats_in(2000, 3000).iter().count(), 0);
    }
    use rand::{Rng, SeedableRng};

    #[test]
    fn p99_is_within_one_percent_and_agrees_with_the_cli() {
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
        assert!(err < 0.01, "p99 {approx} vs exact {exact}");
        // The same method as `framelog stats`: identical answers.
        let mut cli = Durations::new();
        all.iter().for_each(|&d| cli.record(d));
        assert_eq!(approx, cli.percentile_ns(99.0));
        assert_eq!(s.max_ns(), *all.last().unwrap());
        assert_eq!(s.total_ns(), all.iter().sum::<u64>());
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
        assert_eq!(
            (req.count(), req.total_ns(), req.self_time_ns()),
            (1, 100, 50)
        );
        assert_eq!(
            (db.count(), db.total_ns(), db.self_time_ns(), db.max_ns()),
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
