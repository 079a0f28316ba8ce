//! Whether two models hold the same log, as every view sees it: the check that a log read
//! from a socket and the same log read from its directory agree (and the ingest's stages
//! agree with applying the bytes directly).

use super::Model;
use super::calltree::{Aggregate, Scope};

/// The first way `a` and `b` differ in what the views show (frames and where they are drawn,
/// per-label statistics with percentiles, the call tree's totals, contexts, processes), or
/// `None` if they hold the same log.
pub fn difference(a: &Model, b: &Model) -> Option<String> {
    macro_rules! same {
        ($what:expr, $x:expr, $y:expr) => {
            if $x != $y {
                return Some(format!("{}: {:?} against {:?}", $what, $x, $y));
            }
        };
    }
    same!("frames", a.frame_count(), b.frame_count());
    same!("closed frames", a.closed_count(), b.closed_count());
    same!("frames cut", a.cut_count(), b.cut_count());
    same!("records", a.record_count(), b.record_count());
    same!("time range", a.time_range(), b.time_range());
    same!("labels", a.labels().len(), b.labels().len());
    for (id, name) in b.labels().names() {
        let Some(mine) = a.labels().get(name) else {
            return Some(format!("label {name:?} missing"));
        };
        let (x, y) = (a.stats().get(mine), b.stats().get(id));
        let figures = |s: &super::stats::LabelStats| {
            let (count, total, own, max) = (s.count(), s.total_ns(), s.self_ns(), s.max_ns());
            (count, total, own, max, s.quantile_ns(0.5), s.p99_ns())
        };
        same!(format!("statistics of {name:?}"), figures(&x), figures(&y));
    }
    let (x, y) = (
        Aggregate::build(a, &Scope::All),
        Aggregate::build(b, &Scope::All),
    );
    same!(
        "call tree totals",
        (&x.total_ns, &x.count),
        (&y.total_ns, &y.count)
    );
    same!("contexts", a.contexts().entries(), b.contexts().entries());
    for w in 0..=u8::MAX {
        let (x, y) = (a.worker(w), b.worker(w));
        same!(format!("process {w}"), (&x.name, x.pid), (&y.name, y.pid));
    }
    same!("parents", a.parent_counts(), b.parent_counts());
    let frames = |m: &Model| {
        let mut v = Vec::new();
        m.for_each_frame(|at, row, i| {
            v.push((at, row.start(i), row.end(i), row.node(i), m.parent_of(at)))
        });
        v
    };
    let (x, y) = (frames(a), frames(b));
    if x != y {
        let i = x
            .iter()
            .zip(&y)
            .position(|(p, q)| p != q)
            .unwrap_or(x.len().min(y.len()));
        return Some(format!(
            "frame {i} differs: {:?} against {:?}",
            x.get(i),
            y.get(i)
        ));
    }
    None
}
