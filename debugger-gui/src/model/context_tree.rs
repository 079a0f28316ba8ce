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
