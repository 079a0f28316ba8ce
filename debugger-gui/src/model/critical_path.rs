//! A request's critical path: from its root, the chain of children that decided when it
//! finished. At each level it is the child that ended last among those that ended within
//! their parent (a child still running when its parent ended, such as a task spawned and
//! left behind, did not hold the parent up).
//!
//! It is read from the frames' start and end times alone, so it says which child the
//! parent finished after, not that the parent waited for it: a parent that went on working
//! after its last child shows that as the time between the child's end and its own.

use super::{FrameRef, Model};

/// Levels followed at most (a guard against a damaged log whose parents form a cycle).
const MAX_DEPTH: usize = 10_000;

/// One frame of a critical path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CriticalStep {
    /// The frame.
    pub at: FrameRef,
    /// Its start, ns since the epoch.
    pub start: u64,
    /// Its end (a running frame: the newest time seen).
    pub end: u64,
    /// From its end to its parent's end, ns (0 for the root): what the parent did after it.
    pub after_ns: u64,
}

/// The critical path of frame `root`: the root first, then at each level the child that
/// ended last within its parent (of two ending together, the one that started first).
pub fn critical_path(model: &Model, root: FrameRef) -> Vec<CriticalStep> {
    let newest = model.newest();
    let span = |at: FrameRef| {
        let row = model.row(at);
        let i = at.index as usize;
        (row.start(i), row.end_or(i, newest))
    };
    let (start, end) = span(root);
    let mut path = vec![CriticalStep {
        at: root,
        start,
        end,
        after_ns: 0,
    }];
    let mut current = root;
    while path.len() < MAX_DEPTH {
        let parent_end = path.last().expect("the root at least").end;
        let mut best: Option<CriticalStep> = None;
        for child in model.children_of(current) {
            let (start, end) = span(child);
            if end > parent_end {
                continue;
            }
            let better = match best {
                None => true,
                Some(b) => end > b.end || (end == b.end && start < b.start),
            };
            if better {
                best = Some(CriticalStep {
                    at: child,
                    start,
                    end,
                    after_ns: parent_end - end,
                });
            }
        }
        let Some(step) = best else { break };
        if path.iter().any(|s| s.at == step.at) {
            break;
        }
        current = step.at;
        path.push(step);
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_log::Log;
    use formats::{FrameKey, Parent};

    fn labels(m: &Model, path: &[CriticalStep]) -> Vec<String> {
        path.iter()
            .map(|s| m.labels().name(m.label_of(s.at)).to_owned())
            .collect()
    }

    #[test]
    fn the_path_follows_the_child_that_ended_last_within_its_parent() {
        // request [0, 100): auth [5, 20), then fetch [20, 90) on another thread with two
        // queries, the slower ending at 80; a spawned audit task runs past the request's end.
        let mut l = Log::default();
        l.thread(0, 1, "w1")
            .start_with(0, 1, 0, 1, "request", Parent::Root)
            .start_with(0, 2, 5, 1, "auth", Parent::Frame(1))
            .end(0, 2, 20)
            .start_with(0, 6, 30, 1, "audit", Parent::Frame(1))
            .thread(0, 2, "w2")
            .start_with(0, 3, 20, 1, "fetch", Parent::Frame(1))
            .start_with(0, 4, 25, 1, "query A", Parent::Frame(3))
            .end(0, 4, 80)
            .start_with(0, 5, 30, 1, "query B", Parent::Frame(3))
            .end(0, 5, 60)
            .end(0, 3, 90)
            .thread(0, 1, "w1")
            .end(0, 1, 100)
            .end(0, 6, 150);
        let m = l.model();
        let root = m.find(FrameKey::new(0, 1)).unwrap();
        let path = critical_path(&m, root);
        assert_eq!(labels(&m, &path), ["request", "fetch", "query A"]);
        assert_eq!(
            path.iter().map(|s| s.after_ns).collect::<Vec<_>>(),
            [0, 10, 10],
            "the request ended 10 ns after fetch, fetch 10 ns after query A"
        );
        assert_eq!((path[1].start, path[1].end), (20, 90));
        // From a leaf: just itself.
        let q = m.find(FrameKey::new(0, 5)).unwrap();
        assert_eq!(labels(&m, &critical_path(&m, q)), ["query B"]);
    }

    #[test]
    fn of_two_children_ending_together_the_longer_is_on_the_path() {
        let mut l = Log::default();
        l.start_with(0, 1, 0, 1, "root", Parent::Root)
            .start_with(0, 2, 10, 1, "short", Parent::Frame(1))
            .end(0, 2, 50);
        // Another row: they overlap.
        l.start_with(0, 3, 5, 1, "long", Parent::Frame(1))
            .end(0, 3, 50)
            .end(0, 1, 60);
        let m = l.model();
        let root = m.find(FrameKey::new(0, 1)).unwrap();
        assert_eq!(labels(&m, &critical_path(&m, root)), ["root", "long"]);
    }

    #[test]
    fn children_that_outlive_their_parent_are_not_on_it() {
        let mut l = Log::default();
        l.start_with(0, 1, 0, 1, "root", Parent::Root)
            .start_with(0, 2, 10, 1, "spawned", Parent::Frame(1))
            .end(0, 1, 20)
            .end(0, 2, 40);
        let m = l.model();
        let root = m.find(FrameKey::new(0, 1)).unwrap();
        assert_eq!(labels(&m, &critical_path(&m, root)), ["root"]);
    }
}
