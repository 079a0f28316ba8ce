//! Search: a label pattern selects a set of interned labels; frames with those labels match.
//!
//! Patterns are case-insensitive. `"text"` in double quotes matches the whole label exactly;
//! a pattern with `*` or `?` is a glob over the whole label; anything else matches labels
//! containing it. Matching is decided once per distinct label, so highlighting costs one bit
//! lookup per drawn frame, and next/previous walk the rows by start time.

use super::{FrameRef, Model};

/// A compiled label pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Whole label, case-insensitive.
    Exact(String),
    /// Glob (`*`, `?`) over the whole label, case-insensitive.
    Glob(String),
    /// Substring, case-insensitive.
    Contains(String),
}

impl Pattern {
    /// Parses user input (see the module docs); `None` for an empty pattern.
    pub fn parse(text: &str) -> Option<Self> {
        let t = text.trim();
        if t.is_empty() {
            return None;
        }
        if t.len() >= 2 && t.starts_with('"') && t.ends_with('"') {
            return Some(Pattern::Exact(t[1..t.len() - 1].to_lowercase()));
        }
        if t.contains(['*', '?']) {
            return Some(Pattern::Glob(t.to_lowercase()));
        }
        Some(Pattern::Contains(t.to_lowercase()))
    }

    /// The pattern that matches exactly `label`.
    pub fn exact_text(label: &str) -> String {
        format!("\"{label}\"")
    }

    /// True if `label` matches.
    pub fn matches(&self, label: &str) -> bool {
        let l = label.to_lowercase();
        match self {
            Pattern::Exact(p) => l == *p,
            Pattern::Contains(p) => l.contains(p.as_str()),
            Pattern::Glob(p) => glob(p.as_bytes(), l.as_bytes()),
        }
    }
}

fn glob(p: &[u8], s: &[u8]) -> bool {
    // Iterative matcher with single-star backtracking.
    let (mut pi, mut si) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(sp) = star {
            pi = sp + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

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
                m.frames += self.stats().get_ref(id).map_or(0, |s| s.count);
            }
        }
        m
    }

    /// The first matching frame after `from` in (start, lane, row) order, wrapping around;
    /// from the beginning if `from` is `None`. With `backward`, the last one before it.
    pub fn next_match(
        &self,
        m: &Matches,
        from: Option<FrameRef>,
        backward: bool,
    ) -> Option<FrameRef> {
        let pos = |at: FrameRef| {
            (
                self.row(at).start[at.index as usize],
                at.lane,
                at.row,
                at.index,
            )
        };
        let cur = from.map(pos);
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
                    ((row.start[i], at.lane, at.row, at.index), at)
                };
                let n = row.len();
                // Candidate strictly after (or before) `cur` in this row, and the wrap-around one.
                if !backward {
                    let p = match cur {
                        None => 0,
                        Some(c) => row.start.partition_point(|&s| s < c.0),
                    };
                    if let Some(i) = (p..n)
                        .find(|&i| m.contains(row.label[i]) && cur.is_none_or(|c| mk(i).0 > c))
                    {
                        let k = mk(i);
                        if best.is_none_or(|b| k.0 < b.0) {
                            best = Some(k);
                        }
                    }
                    if let Some(i) = (0..n).find(|&i| m.contains(row.label[i])) {
                        let k = mk(i);
                        if wrap.is_none_or(|b| k.0 < b.0) {
                            wrap = Some(k);
                        }
                    }
                } else {
                    let p = match cur {
                        None => n,
                        Some(c) => row.start.partition_point(|&s| s <= c.0),
                    };
                    if let Some(i) = (0..p)
                        .rev()
                        .find(|&i| m.contains(row.label[i]) && cur.is_none_or(|c| mk(i).0 < c))
                    {
                        let k = mk(i);
                        if best.is_none_or(|b| k.0 > b.0) {
                            best = Some(k);
                        }
                    }
                    if let Some(i) = (0..n).rev().find(|&i| m.contains(row.label[i])) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::Log;

    #[test]
    fn patterns() {
        let p = Pattern::parse("db").unwrap();
        assert!(p.matches("DB/query") && !p.matches("http"));
        let p = Pattern::parse("\"User: Select\"").unwrap();
        assert!(p.matches("user: select") && !p.matches("User: Select all"));
        let p = Pattern::parse("http/*/get").unwrap();
        assert!(p.matches("HTTP/users/GET") && !p.matches("http/users/post"));
        assert!(Pattern::parse("a?c").unwrap().matches("abc"));
        assert!(!Pattern::parse("a?c").unwrap().matches("abbc"));
        assert!(Pattern::parse("  ").is_none());
        assert_eq!(
            Pattern::parse(&Pattern::exact_text("x")),
            Some(Pattern::Exact("x".into()))
        );
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
        let matches = m.search(&Pattern::parse("db/").unwrap());
        assert_eq!(matches.labels, 2);
        assert_eq!(matches.frames, 3);
        let id = |at: Option<FrameRef>| m.info(at.unwrap()).unwrap().key.id;
        let first = m.next_match(&matches, None, false);
        assert_eq!(id(first), 2);
        let second = m.next_match(&matches, first, false);
        assert_eq!(id(second), 4);
        let third = m.next_match(&matches, second, false);
        assert_eq!(id(third), 3);
        // Wraps around.
        assert_eq!(id(m.next_match(&matches, third, false)), 2);
        assert_eq!(id(m.next_match(&matches, third, true)), 4);
        assert_eq!(id(m.next_match(&matches, first, true)), 3);
        let none = m.search(&Pattern::parse("nothing").unwrap());
        assert_eq!(m.next_match(&none, None, false), None);
    }
}
