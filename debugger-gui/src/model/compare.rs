//! Comparing two logs (Tracy's compare window, a differential flame graph): per-label
//! statistics side by side with their changes, and each call path's share of the time in
//! both.

use rustc_hash::FxHashMap;

use super::Model;
use super::calltree::{Aggregate, CallTree, ROOT, Scope};

/// One label's statistics in both logs.
#[derive(Clone, Debug, PartialEq)]
pub struct LabelDelta {
    /// Label text.
    pub label: String,
    /// In the baseline (the compared log), if it has the label.
    pub base: Option<Summary>,
    /// In the open log, if it has the label.
    pub new: Option<Summary>,
}

/// Count, mean and p99 of one label in one log.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// Closed frames.
    pub count: u64,
    /// Mean duration (ns).
    pub mean_ns: f64,
    /// 99th percentile (ns).
    pub p99_ns: u64,
}

impl LabelDelta {
    /// The p99's relative change (0.25 = 25 % slower); labels new to the open log count as
    /// the largest regressions, labels gone as the largest improvements.
    pub fn p99_change(&self) -> f64 {
        match (self.base, self.new) {
            (Some(b), Some(n)) => n.p99_ns as f64 / (b.p99_ns.max(1)) as f64 - 1.0,
            (None, Some(_)) => f64::INFINITY,
            (Some(_), None) => f64::NEG_INFINITY,
            (None, None) => 0.0,
        }
    }

    /// The mean's relative change (see [`LabelDelta::p99_change`]).
    pub fn mean_change(&self) -> f64 {
        match (self.base, self.new) {
            (Some(b), Some(n)) => n.mean_ns / b.mean_ns.max(1.0) - 1.0,
            (None, Some(_)) => f64::INFINITY,
            (Some(_), None) => f64::NEG_INFINITY,
            (None, None) => 0.0,
        }
    }
}

fn summaries(m: &Model) -> FxHashMap<&str, Summary> {
    m.stats()
        .iter()
        .map(|(id, s)| {
            (
                m.labels().name(id),
                Summary {
                    count: s.count(),
                    mean_ns: s.mean_ns(),
                    p99_ns: s.p99_ns(),
                },
            )
        })
        .collect()
}

/// Every label of either log, the worst p99 regression first.
pub fn compare_labels(base: &Model, new: &Model) -> Vec<LabelDelta> {
    let b = summaries(base);
    let n = summaries(new);
    let mut labels: Vec<&str> = b.keys().chain(n.keys()).copied().collect();
    labels.sort_unstable();
    labels.dedup();
    let mut out: Vec<LabelDelta> = labels
        .into_iter()
        .map(|l| LabelDelta {
            label: l.to_owned(),
            base: b.get(l).copied(),
            new: n.get(l).copied(),
        })
        .collect();
    out.sort_by(|x, y| {
        y.p99_change()
            .total_cmp(&x.p99_change())
            .then_with(|| x.label.cmp(&y.label))
    });
    out
}

/// For each call-tree node of the open log, its share of the whole log's time minus the same
/// call path's share in the baseline (positive: it takes more of the time now). Shares, not
/// times, so logs of different lengths compare.
pub fn share_changes(base: &Model, new: &Model, new_agg: &Aggregate) -> Vec<f64> {
    let base_agg = Aggregate::build(base, &Scope::All);
    let base_tree = base.call_tree();
    let new_tree = new.call_tree();
    // Base nodes by (parent base node, label text).
    let mut by_path: FxHashMap<(u32, &str), u32> = FxHashMap::default();
    for n in 1..base_tree.len() as u32 {
        let label = base.labels().name(base_tree.label(n));
        by_path.insert((base_tree.parent(n), label), n);
    }
    let share = |agg: &Aggregate, n: u32| {
        agg.total_ns[n as usize] as f64 / agg.total_ns[ROOT as usize].max(1) as f64
    };
    // The base node of each new node (None: a path the baseline never took).
    let mut matched: Vec<Option<u32>> = vec![None; new_tree.len()];
    matched[ROOT as usize] = Some(ROOT);
    let mut out = vec![0.0; new_tree.len()];
    for n in 1..new_tree.len() as u32 {
        let parent = matched[new_tree.parent(n) as usize];
        let label = new.labels().name(new_tree.label(n));
        let m = parent.and_then(|p| by_path.get(&(p, label)).copied());
        matched[n as usize] = m;
        let before = m.map_or(0.0, |b| share(&base_agg, b));
        out[n as usize] = share(new_agg, n) - before;
    }
    out
}

/// The path of labels of `node` (for tests and tooltips).
pub fn path_labels<'a>(model: &'a Model, tree: &CallTree, node: u32) -> Vec<&'a str> {
    tree.path(node)
        .iter()
        .map(|&n| model.labels().name(tree.label(n)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_log::Log;

    /// `requests` requests of 100 ns with a query of `query_ns` and a template of 20 ns.
    fn log(requests: u64, query_ns: u64, extra: Option<&str>) -> Model {
        let mut l = Log::default();
        let mut id = 0;
        for k in 0..requests {
            let t = k * 1_000;
            id += 3;
            l.start(0, id, t, id, "request")
                .start(0, id + 1, t + 1, id, "db")
                .end(0, id + 1, t + 1 + query_ns)
                .start(0, id + 2, t + 200, id, "tpl")
                .end(0, id + 2, t + 220)
                .end(0, id, t + 300);
        }
        if let Some(label) = extra {
            l.start(0, 90_000, 500_000, 90_000, label)
                .end(0, 90_000, 500_100);
        }
        l.model()
    }

    #[test]
    fn labels_are_listed_worst_regression_first() {
        let base = log(10, 50, Some("gone"));
        let new = log(20, 150, Some("added"));
        let rows = compare_labels(&base, &new);
        let order: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(order, vec!["added", "db", "request", "tpl", "gone"]);
        let db = &rows[1];
        assert_eq!((db.base.unwrap().count, db.new.unwrap().count), (10, 20));
        assert!(
            (db.p99_change() - 2.0).abs() < 0.05,
            "50 ns -> 150 ns: {}",
            db.p99_change()
        );
        assert!((db.mean_change() - 2.0).abs() < 1e-9);
        assert_eq!(rows[2].p99_change(), 0.0, "request: unchanged");
    }

    #[test]
    fn call_paths_are_matched_by_labels_and_compared_by_share() {
        let base = log(10, 50, None);
        let new = log(20, 150, Some("added"));
        let agg = Aggregate::build(&new, &Scope::All);
        let d = share_changes(&base, &new, &agg);
        let tree = new.call_tree();
        let node = |path: &[&str]| {
            (1..tree.len() as u32)
                .find(|&n| path_labels(&new, tree, n) == path)
                .unwrap() as usize
        };
        // db took 50/300 of the time, now 150/(300 + a little): more.
        assert!(
            d[node(&["request", "db"])] > 0.3,
            "{}",
            d[node(&["request", "db"])]
        );
        // The template's 20 ns are a smaller share now.
        assert!(d[node(&["request", "tpl"])] < 0.0);
        // A path the baseline never took: all of its share is new.
        let added = node(&["added"]);
        assert!((d[added] - agg.total_ns[added] as f64 / agg.total_ns[0] as f64).abs() < 1e-12);
    }
}
