//! One context's frames as one tree across threads (the context view): its root, each
//! frame's children under it whatever thread they ran on, by start.
//!
//! Built from the parents ([`Model::children_of`]) down from the root, then the context's
//! frames the root does not reach (a parent not in the log, or a log whose parents were
//! inferred: a frame that ran on another thread is then a root of its lane) are added as
//! trees of their own, found in the root's time on the worker's lanes.

use rustc_hash::FxHashSet;

use super::{FrameRef, Model, ParentOf};

/// Rows a tree shows at most.
pub const MAX_ROWS: usize = 20_000;
/// Frames looked at, at most, for the context's frames the root does not reach.
const MAX_SCANNED: usize = 2_000_000;

/// One row of the tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeRow {
    /// The frame.
    pub at: FrameRef,
    /// Depth in the tree (0: a top frame).
    pub depth: u32,
    /// Its parent ran on another lane (thread) than it: a hop.
    pub hop: bool,
    /// Its recorded parent is not in the log.
    pub missing_parent: bool,
}

/// The tree of one context.
#[derive(Clone, Debug, Default)]
pub struct ContextTree {
    /// Rows in tree order (each frame, then its children by start).
    pub rows: Vec<TreeRow>,
    /// Worker and context value.
    pub context: (u8, u32),
    /// Time the rows span: the earliest start, the latest end (open frames: the newest time).
    pub span: (u64, u64),
    /// Lanes (threads) its frames ran on.
    pub lanes: usize,
    /// More rows than [`MAX_ROWS`], or a search cut short: not every frame is shown.
    pub truncated: bool,
}

impl ContextTree {
    /// The tree of the context of frame `from` (any frame of it): up its parents to the top,
    /// the root of the context when it is in the log.
    pub fn of_frame(model: &Model, from: FrameRef) -> ContextTree {
        let Some(row) = model
            .lanes()
            .get(from.lane as usize)
            .and_then(|l| l.rows.get(from.row as usize))
        else {
            return ContextTree::default();
        };
        let context = row.context(from.index as usize);
        // Up the parents, within the context.
        let mut top = from;
        let mut steps = 0;
        while let Some(ParentOf::Frame(p)) = model.parent_of(top) {
            if model.row(p).context(p.index as usize) != context || steps > 10_000 {
                break;
            }
            top = p;
            steps += 1;
        }
        // Not the context's root (its parent unknown, or inferred where the root ran on
        // another thread): the root, whose id is the context value, if it is near.
        let (worker, tr) = (model.lanes()[top.lane as usize].worker, model.row(top));
        if tr.id(top.index as usize) != context
            && let Some(root) = model.find_parent(worker, context, tr.start(top.index as usize))
            && model.row(root).context(root.index as usize) == context
        {
            top = root;
        }
        Self::build(model, top)
    }

    /// The tree of the context whose root (or topmost known frame) is `root`.
    pub fn build(model: &Model, root: FrameRef) -> ContextTree {
        let worker = model.lanes()[root.lane as usize].worker;
        let rrow = model.row(root);
        let ri = root.index as usize;
        let context = rrow.context(ri);
        let newest = model.newest();
        let mut t = ContextTree {
            context: (worker, context),
            span: (rrow.start(ri), rrow.end_or(ri, newest)),
            ..ContextTree::default()
        };
        let mut seen = FxHashSet::default();
        t.add_subtree(model, root, &mut seen);
        // The context's frames the root does not reach, in its time on the worker's lanes.
        let (from, to) = (rrow.start(ri), rrow.end_or(ri, newest));
        let mut scanned = 0usize;
        {
            let mut tops = Vec::new();
            'lanes: for (l, lane) in model.lanes().iter().enumerate() {
                if lane.worker != worker {
                    continue;
                }
                for (r, row) in lane.rows.iter().enumerate() {
                    let first = row.end_partition_point(|e| e != super::OPEN && e <= from);
                    for i in first..row.len() {
                        if row.start(i) > to {
                            break;
                        }
                        scanned += 1;
                        if scanned > MAX_SCANNED {
                            t.truncated = true;
                            break 'lanes;
                        }
                        if row.context(i) != context {
                            continue;
                        }
                        let at = FrameRef {
                            lane: l as u32,
                            row: r as u32,
                            index: i as u32,
                        };
                        if seen.contains(&at) {
                            continue;
                        }
                        // A top if its parent is not a frame of the context.
                        let top = match model.parent_of(at) {
                            Some(ParentOf::Frame(p)) => {
                                model.row(p).context(p.index as usize) != context
                            }
                            _ => true,
                        };
                        if top {
                            tops.push((row.start(i), at));
                        }
                    }
                }
            }
            tops.sort();
            for (_, at) in tops {
                if !seen.contains(&at) {
                    t.add_subtree(model, at, &mut seen);
                }
            }
        }
        let mut lanes: Vec<u32> = t.rows.iter().map(|r| r.at.lane).collect();
        lanes.sort_unstable();
        lanes.dedup();
        t.lanes = lanes.len();
        t
    }

    fn add_subtree(&mut self, model: &Model, top: FrameRef, seen: &mut FxHashSet<FrameRef>) {
        let newest = model.newest();
        let missing = matches!(model.parent_of(top), Some(ParentOf::Missing(_)));
        let hop = matches!(model.parent_of(top), Some(ParentOf::Frame(p)) if p.lane != top.lane);
        let mut stack = vec![(top, 0u32, hop, missing)];
        while let Some((at, depth, hop, missing_parent)) = stack.pop() {
            if !seen.insert(at) {
                continue;
            }
            if self.rows.len() >= MAX_ROWS {
                self.truncated = true;
                return;
            }
            let row = model.row(at);
            let i = at.index as usize;
            self.span.0 = self.span.0.min(row.start(i));
            self.span.1 = self.span.1.max(row.end_or(i, newest));
            self.rows.push(TreeRow {
                at,
                depth,
                hop,
                missing_parent,
            });
            // Children by start: pushed in reverse so the earliest is shown first.
            for c in model.children_of(at).into_iter().rev() {
                stack.push((c, depth + 1, c.lane != at.lane, false));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_log::Log;
    use formats::{FrameKey, Parent};

    fn labels(m: &Model, t: &ContextTree) -> Vec<(String, u32, bool)> {
        t.rows
            .iter()
            .map(|r| (m.labels().name(m.label_of(r.at)).to_owned(), r.depth, r.hop))
            .collect()
    }

    fn rows(want: &[(&str, u32, bool)]) -> Vec<(String, u32, bool)> {
        want.iter().map(|&(l, d, h)| (l.to_owned(), d, h)).collect()
    }

    /// A request on thread 1 whose `load` runs on thread 2 beside another request there,
    /// with `decode` under it, and `render` back on thread 1; a frame of the request whose
    /// recorded parent is not in the log.
    fn log(recorded: bool) -> Log {
        let p = |id: Option<u32>| match (recorded, id) {
            (false, _) => Parent::NotRecorded,
            (true, None) => Parent::Root,
            (true, Some(id)) => Parent::Frame(id),
        };
        let mut l = Log::default();
        l.thread(0, 1, "w1")
            .start_with(0, 1, 0, 1, "request", p(None))
            .thread(0, 2, "w2")
            .start_with(0, 5, 0, 5, "other", p(None))
            .start_with(0, 2, 10, 1, "load", p(Some(1)))
            .start_with(0, 3, 20, 1, "decode", p(Some(2)))
            .end(0, 3, 30)
            .end(0, 2, 40)
            .start_with(0, 6, 45, 1, "lost", p(Some(99)))
            .end(0, 6, 48)
            .end(0, 5, 200)
            .thread(0, 1, "w1")
            .start_with(0, 4, 50, 1, "render", p(Some(1)))
            .end(0, 4, 60)
            .end(0, 1, 100);
        l
    }

    #[test]
    fn a_context_is_one_tree_across_threads_from_any_of_its_frames() {
        let m = log(true).model();
        let decode = m.find(FrameKey::new(0, 3)).unwrap();
        let t = ContextTree::of_frame(&m, decode);
        assert_eq!(
            labels(&m, &t),
            rows(&[
                ("request", 0, false),
                ("load", 1, true),
                ("decode", 2, false),
                ("render", 1, false),
                ("lost", 0, false),
            ])
        );
        assert!(t.rows[4].missing_parent);
        assert_eq!((t.context, t.lanes, t.span), ((0, 1), 2, (0, 100)));
        assert!(!t.truncated);
        // From the root, the same tree.
        let root = m.find(FrameKey::new(0, 1)).unwrap();
        assert_eq!(ContextTree::build(&m, root).rows, t.rows);
    }

    #[test]
    fn inferred_parents_join_the_frames_of_other_threads_to_their_contexts_root() {
        // `docs/FORMAT.md`, *Parents of type 0 starts*: with no frame of its context running
        // on its thread, a frame's parent is its context's root (as `framelog stats` and the
        // exports infer it).
        let m = log(false).model();
        let load = m.find(FrameKey::new(0, 2)).unwrap();
        let t = ContextTree::of_frame(&m, load);
        assert_eq!(
            labels(&m, &t),
            rows(&[
                ("request", 0, false),
                ("load", 1, true),
                ("decode", 2, false),
                ("lost", 1, true),
                ("render", 1, false),
            ])
        );
    }
}
