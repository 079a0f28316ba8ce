//! Search: a label pattern selects a set of interned labels; frames with those labels match.
//!
//! Patterns follow `analysis::LabelPattern` (case-insensitive; `"text"` exactly, globs with
//! `*`, `?` or `[`, anything else as a substring), the same rule as `framelog dump --label`.
//! Matching is decided once per distinct label, so highlighting costs one bit lookup per
//! drawn frame, and next/previous walk the rows by start time.

use super::{FrameRef, Model};

/// A label pattern: the one rule shared with `framelog dump --label`.
pub use analysis::LabelPattern as Pattern;

/// The labels a pattern selects, as a bitset over interned label ids.
#[derive(Clone, Debug, Default)]
pub struct Matches {
    bits: Vec<u64>,
    /// Number of labels matched.
    pub labels: usize,
    /// Number of frames with a matched label (closed frames, from statistics, plus open ones
    /// are not counted).
    pub frames: u64,
}

impl Matches {
    /// True if the label id is selected.
    #[inline]
    pub fn contains(&self, label: u32) -> bool {
        self.bits
            .get(label as usize / 64)
            .is_some_and(|w| w >> (label % 64) & 1 == 1)
    }
}

impl Model {
    /// Which labels `pattern` selects, and how many frames carry them.
    pub fn search(&self, pattern: &Pattern) -> Matches {
        let n = self.labels().len();
        let mut m = Matches {
            bits: vec![0; n.div_ceil(64)],
            ..Default::default()
        };
        for (id, name) in self.labels().names() {
            if pattern.matches(name) {
                m.bits[id as usize / 64] |= 1 << (id % 64);
                m.labels += 1;
                m.frames += self.stats().get_ref(id).map_or(0, |s| s.count());
            }
        }
        m
    }

    /// The first matching frame after `from` in (start, lane, row) order, wrapping around.
    /// With `backward`, the last one before it.
    pub fn next_match(&self, m: &Matches, from: SearchFrom, backward: bool) -> Option<FrameRef> {
        let tree = self.call_tree();
        let cur = match from {
            SearchFrom::Frame(at) => Some((
                self.row(at).start(at.index as usize),
                at.lane,
                at.row,
                at.index,
            )),
            // Forward: frames starting at or after `t0`; backward: starting before `t1`.
            SearchFrom::View(t0, t1) => Some(if backward {
                (t1, 0, 0, 0)
            } else {
                (t0.saturating_sub(1), u32::MAX, u32::MAX, u32::MAX)
            }),
            SearchFrom::Start => None,
        };
        let mut best: Option<((u64, u32, u32, u32), FrameRef)> = None;
        let mut wrap: Option<((u64, u32, u32, u32), FrameRef)> = None;
        for (li, lane) in self.lanes().iter().enumerate() {
            for (ri, row) in lane.rows.iter().enumerate() {
                let mk = |i: usize| {
                    let at = FrameRef {
                        lane: li as u32,
                        row: ri as u32,
                        index: i as u32,
                    };
                    ((row.start(i), at.lane, at.row, at.index), at)
                };
                let n = row.len();
                // Candidate strictly after (or before) `cur` in this row, and the wrap-around one.
                if !backward {
                    let p = match cur {
                        None => 0,
                        Some(c) => row.start_partition_point(|s| s < c.0),
                    };
                    if let Some(i) = (p..n).find(|&i| {
                        m.contains(tree.label(row.node(i))) && cur.is_none_or(|c| mk(i).0 > c)
                    }) {
                        let k = mk(i);
                        if best.is_none_or(|b| k.0 < b.0) {
                            best = Some(k);
                        }
                    }
                    if let Some(i) = (0..n).find(|&i| m.contains(tree.label(row.node(i)))) {
                        let k = mk(i);
                        if wrap.is_none_or(|b| k.0 < b.0) {
                            wrap = Some(k);
                        }
                    }
                } else {
                    let p = match cur {
                        None => n,
                        Some(c) => row.start_partition_point(|s| s <= c.0),
                    };
                    if let Some(i) = (0..p).rev().find(|&i| {
                        m.contains(tree.label(row.node(i))) && cur.is_none_or(|c| mk(i).0 < c)
                    }) {
                        let k = mk(i);
                        if best.is_none_or(|b| k.0 > b.0) {
                            best = Some(k);
                        }
                    }
                    if let Some(i) = (0..n).rev().find(|&i| m.contains(tree.label(row.node(i)))) {
                        let k = mk(i);
                        if wrap.is_none_or(|b| k.0 > b.0) {
                            wrap = Some(k);
                        }
                    }
                }
            }
        }
        best.or(wrap).map(|(_, at)| at)
    }
}

/// Where walking the matches starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchFrom {
    /// The selected frame.
    Frame(FrameRef),
    /// Nothing selected: the visible time range `[t0, t1)` (ns since the epoch).
    View(u64, u64),
    /// The log's beginning (or end, backward).
    Start,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_log::Log;

    #[test]
    fn patterns_follow_the_shared_rule() {
        let p = |t: &str| Pattern::parse(t).unwrap().unwrap();
        assert!(p("db").matches("DB/query") && !p("db").matches("http"));
        assert!(p("\"User: Select\"").matches("user: select"));
        assert!(
            p("http/*/get").matches("HTTP/users/GET")
                && !p("http/*/get").matches("http/users/post")
        );
        assert_eq!(p(&Pattern::exact_text("x")), p("\"x\""));
    }

    #[test]
    fn next_and_previous_walk_matches_by_start_time() {
        let mut l = Log::default();
        l.thread(0, 1, "a")
            .start(0, 1, 0, 1, "req")
            .start(0, 2, 10, 1, "db/query")
            .end(0, 2, 20)
            .start(0, 3, 40, 1, "db/query")
            .end(0, 3, 50)
            .end(0, 1, 100)
            .thread(0, 2, "b")
            .start(0, 4, 30, 4, "db/insert")
            .end(0, 4, 35);
        let m = l.model();
        let matches = m.search(&Pattern::parse("db/").unwrap().unwrap());
        assert_eq!(matches.labels, 2);
        assert_eq!(matches.frames, 3);
        let id = |at: Option<FrameRef>| m.info(at.unwrap()).unwrap().key.id;
        let from = |at: Option<FrameRef>| SearchFrom::Frame(at.unwrap());
        let first = m.next_match(&matches, SearchFrom::Start, false);
        assert_eq!(id(first), 2);
        let second = m.next_match(&matches, from(first), false);
        assert_eq!(id(second), 4);
        let third = m.next_match(&matches, from(second), false);
        assert_eq!(id(third), 3);
        // Wraps around.
        assert_eq!(id(m.next_match(&matches, from(third), false)), 2);
        assert_eq!(id(m.next_match(&matches, from(third), true)), 4);
        assert_eq!(id(m.next_match(&matches, from(first), true)), 3);
        // Nothing selected: from the visible range, not the log's beginning.
        assert_eq!(
            id(m.next_match(&matches, SearchFrom::View(25, 45), false)),
            4
        );
        assert_eq!(
            id(m.next_match(&matches, SearchFrom::View(30, 45), false)),
            4
        );
        assert_eq!(
            id(m.next_match(&matches, SearchFrom::View(31, 45), false)),
            3
        );
        assert_eq!(id(m.next_match(&matches, SearchFrom::View(5, 35), true)), 4);
        assert_eq!(
            id(m.next_match(&matches, SearchFrom::View(60, 90), false)),
            2,
            "wraps"
        );
        let none = m.search(&Pattern::parse("nothing").unwrap().unwrap());
        assert_eq!(m.next_match(&none, SearchFrom::Start, false), None);
    }
}
