//! The call tree behind the aggregated flame graph: every frame belongs to a node named by its
//! call path (the labels from its context's root down to it), so frames with the same path
//! merge however often and wherever they ran.
//!
//! The tree grows as frames start (the model gives each frame its node, 4 bytes a frame) and
//! keeps whole-log totals as they close, so the whole log's flame graph costs nothing to
//! build; a time range or a set of contexts is aggregated on demand ([`Aggregate`]), and
//! [`layout`] turns an aggregate into boxes for a focus node.

use rustc_hash::{FxHashMap, FxHashSet};

use super::{Model, OPEN};

/// The node of the (virtual) root: its children are the roots of contexts.
pub const ROOT: u32 = 0;

/// Call paths seen so far, with whole-log totals of their closed frames.
#[derive(Debug)]
pub struct CallTree {
    parent: Vec<u32>,
    label: Vec<u32>,
    depth: Vec<u32>,
    children: FxHashMap<(u32, u32), u32>,
    /// By node: its child looked up last (`ROOT`: none yet). A frame's siblings mostly share
    /// its label (a loop's iterations, a request's steps in turn), so most look-ups end
    /// here without hashing.
    last_child: Vec<u32>,
    total_ns: Vec<u64>,
    count: Vec<u64>,
}

impl Default for CallTree {
    fn default() -> Self {
        Self {
            parent: vec![ROOT],
            label: vec![u32::MAX],
            depth: vec![0],
            children: FxHashMap::default(),
            last_child: vec![ROOT],
            total_ns: vec![0],
            count: vec![0],
        }
    }
}

impl CallTree {
    /// The node for `label` called from `parent` (created on first use).
    #[inline]
    pub(crate) fn child(&mut self, parent: u32, label: u32) -> u32 {
        let last = self.last_child[parent as usize];
        if last != ROOT && self.label[last as usize] == label {
            return last;
        }
        self.child_slow(parent, label)
    }

    /// [`CallTree::child`] when `label` is not the node's last child: looked up, or created.
    #[cold]
    #[inline(never)]
    fn child_slow(&mut self, parent: u32, label: u32) -> u32 {
        let n = match self.children.get(&(parent, label)) {
            Some(&n) => n,
            None => {
                let n = self.parent.len() as u32;
                self.parent.push(parent);
                self.label.push(label);
                self.depth.push(self.depth[parent as usize] + 1);
                self.last_child.push(ROOT);
                self.total_ns.push(0);
                self.count.push(0);
                self.children.insert((parent, label), n);
                n
            }
        };
        self.last_child[parent as usize] = n;
        n
    }

    /// A frame of `node` closed after `dur` ns.
    #[inline]
    pub(crate) fn on_close(&mut self, node: u32, dur: u64) {
        self.total_ns[node as usize] += dur;
        self.count[node as usize] += 1;
    }

    /// A frame counted in `node` after `dur` ns moves to another node (see `on_close`).
    pub(crate) fn on_uncount(&mut self, node: u32, dur: u64) {
        self.total_ns[node as usize] = self.total_ns[node as usize].saturating_sub(dur);
        self.count[node as usize] = self.count[node as usize].saturating_sub(1);
    }

    /// Number of nodes (the root included).
    pub fn len(&self) -> usize {
        self.parent.len()
    }

    /// True if no frame has started yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 1
    }

    /// The node's parent (the root is its own).
    pub fn parent(&self, node: u32) -> u32 {
        self.parent[node as usize]
    }

    /// The node's interned label (`u32::MAX` for the root).
    pub fn label(&self, node: u32) -> u32 {
        self.label[node as usize]
    }

    /// The node's depth (the root is 0, context roots 1).
    pub fn depth(&self, node: u32) -> u32 {
        self.depth[node as usize]
    }

    /// The path from the root's child down to `node`.
    pub fn path(&self, node: u32) -> Vec<u32> {
        let mut p = Vec::new();
        let mut n = node;
        while n != ROOT {
            p.push(n);
            n = self.parent[n as usize];
        }
        p.reverse();
        p
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.parent.capacity() * 4
            + self.label.capacity() * 4
            + self.depth.capacity() * 4
            + self.last_child.capacity() * 4
            + self.total_ns.capacity() * 8
            + self.count.capacity() * 8
            + self.children.capacity() * 16
    }
}

/// Which frames an aggregate covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every closed frame of the log.
    All,
    /// Frames overlapping `[from, to)` (ns since the epoch), clipped to it.
    Range(u64, u64),
    /// Frames of these contexts, `(worker, context)`.
    Contexts(FxHashSet<(u8, u32)>),
}

/// What the aggregated flame graph's widths measure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Weight {
    /// Time (ns).
    #[default]
    Time,
    /// Busy time (ns): what ran on a CPU. An asynchronous frame weighs its polls' time, a
    /// synchronous frame its duration.
    Busy,
    /// Bytes allocated (frames' allocation counts, inclusive of their children's).
    Bytes,
    /// Allocations.
    Allocs,
}

/// Time and frame counts per call-tree node for one scope.
#[derive(Clone, Debug, Default)]
pub struct Aggregate {
    /// Total time per node (ns), never less than the sum of its children's.
    pub total_ns: Vec<u64>,
    /// Frames per node.
    pub count: Vec<u64>,
}

impl Aggregate {
    /// Aggregates the frames in `scope`.
    pub fn build(model: &Model, scope: &Scope) -> Aggregate {
        let mut a = Self::time_unrolled(model, scope);
        // An open parent counts as zero in the whole-log totals; clipping can shorten a
        // parent more than a child.
        a.roll_up(model.call_tree());
        a
    }

    /// Each node's own frames' time in `scope`, not rolled up.
    fn time_unrolled(model: &Model, scope: &Scope) -> Aggregate {
        let tree = model.call_tree();
        match scope {
            Scope::All => Aggregate {
                total_ns: tree.total_ns.clone(),
                count: tree.count.clone(),
            },
            Scope::Range(from, to) => {
                let mut a = Aggregate::zeroed(tree.len());
                let newest = model.newest();
                for lane in model.lanes() {
                    for row in &lane.rows {
                        // Rows are sorted by end too: skip the frames that ended by `from`.
                        let first = row.end_partition_point(|e| e != OPEN && e <= *from);
                        for i in first..row.len() {
                            let s = row.start(i);
                            if s >= *to {
                                break;
                            }
                            let e = row.end_or(i, newest).min(*to);
                            let n = row.node(i) as usize;
                            a.total_ns[n] += e.saturating_sub(s.max(*from));
                            a.count[n] += 1;
                        }
                    }
                }
                a
            }
            Scope::Contexts(set) => {
                let mut a = Aggregate::zeroed(tree.len());
                let newest = model.newest();
                for lane in model.lanes() {
                    for row in &lane.rows {
                        for i in 0..row.len() {
                            if set.contains(&(lane.worker, row.context(i))) {
                                let n = row.node(i) as usize;
                                a.total_ns[n] += row.end_or(i, newest) - row.start(i);
                                a.count[n] += 1;
                            }
                        }
                    }
                }
                a
            }
        }
    }

    /// Aggregates the busy time of the frames in `scope`: their time, less what each
    /// asynchronous frame spent queued or waiting. Only the frames with polls are looked
    /// at beyond [`Aggregate::build`]'s work (the whole log's costs one pass over them, not
    /// over every frame). A frame clipped by a range counts its busy share of the part inside.
    pub fn build_busy(model: &Model, scope: &Scope) -> Aggregate {
        let mut a = Self::time_unrolled(model, scope);
        let newest = model.newest();
        for (&at, p) in model.polls().frames() {
            let lane = &model.lanes()[at.lane as usize];
            let row = &lane.rows[at.row as usize];
            let i = at.index as usize;
            let (start, end) = (row.start(i), row.end_or(i, newest));
            let duration = end - start;
            let inside = match scope {
                // The whole-log totals count closed frames that ended themselves.
                Scope::All => {
                    if row.is_open(i) || model.is_cut(at) || model.lost_in(at).is_some() {
                        continue;
                    }
                    duration
                }
                Scope::Range(from, to) => end.min(*to).saturating_sub(start.max(*from)),
                Scope::Contexts(set) => {
                    if !set.contains(&(lane.worker, row.context(i))) {
                        continue;
                    }
                    duration
                }
            };
            if inside == 0 {
                continue;
            }
            let busy = p.split(duration).busy_ns;
            let busy_inside = if inside == duration {
                busy
            } else {
                (busy as f64 * inside as f64 / duration.max(1) as f64) as u64
            };
            let n = row.node(i) as usize;
            a.total_ns[n] = a.total_ns[n].saturating_sub(inside - busy_inside.min(inside));
        }
        a.roll_up(model.call_tree());
        a
    }

    /// Aggregates the frames in `scope` by `weight`: time, or the allocation counts of the
    /// frames that have them (a frame counts whole when it overlaps a range; `count` is then
    /// the frames with counts). A parent weighs at least what its children weigh together.
    pub fn build_weighted(model: &Model, scope: &Scope, weight: Weight) -> Aggregate {
        match weight {
            Weight::Time => return Self::build(model, scope),
            Weight::Busy => return Self::build_busy(model, scope),
            Weight::Bytes | Weight::Allocs => {}
        }
        let tree = model.call_tree();
        let mut a = Aggregate::zeroed(tree.len());
        let newest = model.newest();
        for (&at, c) in model.allocs().frames() {
            let row = model.row(at);
            let i = at.index as usize;
            let inside = match scope {
                Scope::All => true,
                Scope::Range(from, to) => row.start(i) < *to && row.end_or(i, newest) > *from,
                Scope::Contexts(set) => {
                    set.contains(&(model.lanes()[at.lane as usize].worker, row.context(i)))
                }
            };
            if inside {
                let n = row.node(i) as usize;
                a.total_ns[n] += match weight {
                    Weight::Bytes => c.alloc_bytes,
                    _ => c.allocs,
                };
                a.count[n] += 1;
            }
        }
        a.roll_up(tree);
        a
    }

    /// Makes every node weigh at least what its children weigh together, and the root their
    /// sum. Children are created after their parents, so one backwards pass suffices.
    fn roll_up(&mut self, tree: &CallTree) {
        let mut sums = vec![0u64; self.total_ns.len()];
        for n in (1..self.total_ns.len()).rev() {
            self.total_ns[n] = self.total_ns[n].max(sums[n]);
            sums[tree.parent[n] as usize] += self.total_ns[n];
        }
        self.total_ns[ROOT as usize] = sums[ROOT as usize];
    }

    fn zeroed(n: usize) -> Aggregate {
        Aggregate {
            total_ns: vec![0; n],
            count: vec![0; n],
        }
    }

    /// Time in `node` not spent in its children.
    pub fn self_ns(&self, node: u32, children: &[u32]) -> u64 {
        let kids: u64 = children.iter().map(|&c| self.total_ns[c as usize]).sum();
        self.total_ns[node as usize].saturating_sub(kids)
    }
}

/// One box of the aggregated flame graph.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlameBox {
    /// The call-tree node it stands for.
    pub node: u32,
    /// Row from the top (0 = the outermost shown).
    pub depth: u32,
    /// Left and right edges as fractions of the width (0..=1).
    pub x0: f64,
    /// See `x0`.
    pub x1: f64,
}

/// The boxes of the flame graph of `agg` focused on `focus`: its ancestors as full-width rows
/// on top, the focus node full width under them, its descendants by share of time, the
/// heaviest first (left). Boxes narrower than `min_frac` of the width are left out.
pub fn layout(tree: &CallTree, agg: &Aggregate, focus: u32, min_frac: f64) -> Vec<FlameBox> {
    let mut boxes = Vec::new();
    let path = tree.path(focus);
    for (d, &n) in path.iter().enumerate() {
        boxes.push(FlameBox {
            node: n,
            depth: d as u32,
            x0: 0.0,
            x1: 1.0,
        });
    }
    let total = agg.total_ns.get(focus as usize).copied().unwrap_or(0);
    if total == 0 {
        return boxes;
    }
    let kids = children_of(tree, agg);
    let scale = 1.0 / total as f64;
    // (node, depth, x0) to lay out below.
    let base = if focus == ROOT { 0 } else { path.len() as u32 };
    let mut stack = vec![(focus, base, 0.0f64)];
    while let Some((n, depth, x0)) = stack.pop() {
        let mut x = x0;
        for &c in &kids[n as usize] {
            let w = agg.total_ns[c as usize] as f64 * scale;
            if w < min_frac {
                // Children are sorted by rounded time: a later one may be a little wider.
                continue;
            }
            boxes.push(FlameBox {
                node: c,
                depth,
                x0: x,
                x1: x + w,
            });
            stack.push((c, depth + 1, x));
            x += w;
        }
    }
    boxes
}

/// Each node's children that have time in `agg`, the longest first (by time rounded to 10 %
/// steps, then by label id: a stable order while a live log grows).
pub fn children_of(tree: &CallTree, agg: &Aggregate) -> Vec<Vec<u32>> {
    let mut kids = vec![Vec::new(); tree.len()];
    for n in 1..tree.len().min(agg.total_ns.len()) {
        if agg.total_ns[n] > 0 {
            kids[tree.parent[n] as usize].push(n as u32);
        }
    }
    // By total time rounded to 10 % steps, ties by label: siblings of nearly the same time
    // keep their order while a live log grows (exact totals swapped them back and forth).
    for k in &mut kids {
        k.sort_by_key(|&c| {
            (
                std::cmp::Reverse(stable_rank(agg.total_ns[c as usize])),
                tree.label[c as usize],
            )
        });
    }
    kids
}

/// A total's rank for ordering siblings: its log in 10 % steps (equal within a step).
fn stable_rank(total: u64) -> i64 {
    ((total as f64).max(1.0).ln() / 1.1f64.ln()).floor() as i64
}

/// Speedscope's sandwich for one label: who calls it and what it calls, each merged over
/// every call path it appears on, as small call trees of their own (the label at their root).
#[derive(Debug)]
pub struct Sandwich {
    /// Callers: the label's node at the root, its direct callers as children, their callers
    /// below them, and so on; a caller's width is the label's time under it.
    pub callers: (CallTree, Aggregate),
    /// Callees: the label's subtrees merged by relative path.
    pub callees: (CallTree, Aggregate),
}

impl Sandwich {
    /// The sandwich of `label` in `agg` (occurrences nested in another occurrence of the same
    /// label are counted once, in the outer one, so recursion does not double time).
    pub fn build(tree: &CallTree, agg: &Aggregate, label: u32) -> Sandwich {
        let mut callers = (CallTree::default(), Aggregate::zeroed(1));
        let mut callees = (CallTree::default(), Aggregate::zeroed(1));
        let kids = children_of(tree, agg);
        let add = |t: &mut (CallTree, Aggregate), parent: u32, label: u32, ns: u64, n: u64| {
            let node = t.0.child(parent, label);
            if node as usize >= t.1.total_ns.len() {
                t.1.total_ns.push(0);
                t.1.count.push(0);
            }
            t.1.total_ns[node as usize] += ns;
            t.1.count[node as usize] += n;
            node
        };
        for n in 1..tree.len().min(agg.total_ns.len()) as u32 {
            if tree.label(n) != label || agg.total_ns[n as usize] == 0 {
                continue;
            }
            // Outermost occurrences only.
            let path = tree.path(n);
            if path[..path.len() - 1]
                .iter()
                .any(|&a| tree.label(a) == label)
            {
                continue;
            }
            let (ns, count) = (agg.total_ns[n as usize], agg.count[n as usize]);
            // Callers: up the path from the label.
            let mut at = add(&mut callers, ROOT, label, ns, count);
            for &a in path[..path.len() - 1].iter().rev() {
                at = add(&mut callers, at, tree.label(a), ns, count);
            }
            // Callees: the subtree, merged by relative path.
            let top = add(&mut callees, ROOT, label, ns, count);
            let mut stack = vec![(n, top)];
            while let Some((src, dst)) = stack.pop() {
                for &c in &kids[src as usize] {
                    let (cn, cc) = (agg.total_ns[c as usize], agg.count[c as usize]);
                    let d = add(&mut callees, dst, tree.label(c), cn, cc);
                    stack.push((c, d));
                }
            }
        }
        for t in [&mut callers, &mut callees] {
            t.1.total_ns[ROOT as usize] = t.1.total_ns.get(1).copied().unwrap_or(0);
        }
        Sandwich { callers, callees }
    }
}

/// The contexts whose root frame has label `label` (e.g. every `GET /orders`).
pub fn contexts_with_root_label(model: &Model, label: u32) -> FxHashSet<(u8, u32)> {
    let mut set = FxHashSet::default();
    for lane in model.lanes() {
        for row in &lane.rows {
            for i in 0..row.len() {
                if row.id(i) == row.context(i) && model.call_tree().label(row.node(i)) == label {
                    set.insert((lane.worker, row.context(i)));
                }
            }
        }
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_log::Log;

    /// Two requests with the same shape and one with another: `request > db` merges.
    fn log() -> Model {
        let mut l = Log::default();
        l.thread(0, 1, "main");
        // request 1: [0, 100) with db [10, 40) and tpl [50, 60)
        l.start(0, 1, 0, 1, "request")
            .start(0, 2, 10, 1, "db")
            .end(0, 2, 40)
            .start(0, 3, 50, 1, "tpl")
            .end(0, 3, 60)
            .end(0, 1, 100);
        // request 2: [200, 300) with db [210, 290)
        l.start(0, 4, 200, 4, "request")
            .start(0, 5, 210, 4, "db")
            .end(0, 5, 290)
            .end(0, 4, 300);
        // a job [400, 450) calling db [410, 420): another path for db
        l.start(0, 6, 400, 6, "job")
            .start(0, 7, 410, 6, "db")
            .end(0, 7, 420)
            .end(0, 6, 450);
        l.model()
    }

    fn node(m: &Model, path: &[&str]) -> u32 {
        let t = m.call_tree();
        (1..t.len() as u32)
            .find(|&n| {
                let p: Vec<&str> = t
                    .path(n)
                    .iter()
                    .map(|&x| m.labels().name(t.label(x)))
                    .collect();
                p == path
            })
            .unwrap_or_else(|| panic!("no node {path:?}"))
    }

    #[test]
    fn a_call_path_keeps_its_node_whatever_was_looked_up_before() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut tree = CallTree::default();
        // The rule: one node per (parent, label), made on first use.
        let mut want: std::collections::HashMap<(u32, u32), u32> = Default::default();
        let mut nodes = vec![ROOT];
        for _ in 0..20_000 {
            let parent = nodes[rng.gen_range(0..nodes.len())];
            // Runs of one label (the cached case) mixed with others.
            let label = rng.gen_range(0..4u32);
            for _ in 0..rng.gen_range(1..4) {
                let n = tree.child(parent, label);
                let expected = *want.entry((parent, label)).or_insert_with(|| {
                    nodes.push(n);
                    n
                });
                assert_eq!(n, expected, "({parent}, {label})");
                assert_eq!((tree.parent(n), tree.label(n)), (parent, label));
            }
        }
        assert_eq!(tree.len(), want.len() + 1);
    }

    #[test]
    fn frames_merge_by_call_path_not_by_label() {
        let m = log();
        let a = Aggregate::build(&m, &Scope::All);
        let req_db = node(&m, &["request", "db"]);
        let job_db = node(&m, &["job", "db"]);
        assert_ne!(req_db, job_db, "same label, other path: other node");
        assert_eq!(
            (a.total_ns[req_db as usize], a.count[req_db as usize]),
            (110, 2)
        );
        assert_eq!(a.total_ns[job_db as usize], 10);
        let req = node(&m, &["request"]);
        assert_eq!(a.total_ns[req as usize], 200);
        assert_eq!(a.total_ns[ROOT as usize], 250);
        let kids = children_of(m.call_tree(), &a);
        assert_eq!(a.self_ns(req, &kids[req as usize]), 200 - 110 - 10);
    }

    #[test]
    fn layout_puts_the_heaviest_child_left_and_scales_to_the_focus() {
        let m = log();
        let a = Aggregate::build(&m, &Scope::All);
        let boxes = layout(m.call_tree(), &a, ROOT, 0.0);
        let find = |n: u32| *boxes.iter().find(|b| b.node == n).unwrap();
        let req = find(node(&m, &["request"]));
        let job = find(node(&m, &["job"]));
        assert_eq!((req.depth, req.x0, req.x1), (0, 0.0, 0.8));
        assert_eq!((job.depth, job.x0, job.x1), (0, 0.8, 1.0));
        let db = find(node(&m, &["request", "db"]));
        assert_eq!(db.depth, 1);
        assert!((db.x1 - db.x0 - 110.0 / 250.0).abs() < 1e-9);
        // Focused on `job`: it is full width, its child db 10/50 of it.
        let job_n = node(&m, &["job"]);
        let focused = layout(m.call_tree(), &a, job_n, 0.0);
        assert_eq!(
            focused[0],
            FlameBox {
                node: job_n,
                depth: 0,
                x0: 0.0,
                x1: 1.0
            }
        );
        assert_eq!(focused.len(), 2);
        assert!((focused[1].x1 - 0.2).abs() < 1e-9 && focused[1].depth == 1);
        // Narrow boxes are left out.
        assert!(
            layout(m.call_tree(), &a, ROOT, 0.1)
                .iter()
                .all(|b| b.x1 - b.x0 >= 0.1)
        );
    }

    #[test]
    fn a_range_clips_frames_and_contexts_select_their_frames() {
        let m = log();
        // [20, 220): request 1 from 20 (80 ns), db 1 from 20 (20), tpl (10), request 2 to 220
        // (20), db 2 (10).
        let a = Aggregate::build(&m, &Scope::Range(20, 220));
        let req = node(&m, &["request"]) as usize;
        let db = node(&m, &["request", "db"]) as usize;
        assert_eq!(a.total_ns[req], 100);
        assert_eq!((a.total_ns[db], a.count[db]), (30, 2));
        assert_eq!(a.total_ns[node(&m, &["job"]) as usize], 0);
        // Every context whose root is `request`.
        let label = m.labels().get("request").unwrap();
        let set = contexts_with_root_label(&m, label);
        assert_eq!(set.len(), 2);
        let c = Aggregate::build(&m, &Scope::Contexts(set));
        assert_eq!((c.total_ns[req], c.total_ns[db]), (200, 110));
        assert_eq!(c.total_ns[ROOT as usize], 200);
    }

    #[test]
    fn a_sandwich_merges_every_caller_and_callee_of_a_label() {
        let m = log();
        let a = Aggregate::build(&m, &Scope::All);
        let db = m.labels().get("db").unwrap();
        let s = Sandwich::build(m.call_tree(), &a, db);
        let (ct, ca) = &s.callers;
        // db (120 ns in all) called by request (110) and job (10).
        let name = |t: &CallTree, n: u32| m.labels().name(t.label(n)).to_owned();
        let mut callers: Vec<(String, u64)> = (1..ct.len() as u32)
            .filter(|&n| ct.depth(n) == 2)
            .map(|n| (name(ct, n), ca.total_ns[n as usize]))
            .collect();
        callers.sort();
        assert_eq!(
            callers,
            [("job".to_owned(), 10), ("request".to_owned(), 110)]
        );
        assert_eq!(
            (name(ct, 1), ca.total_ns[1], ca.count[1]),
            ("db".to_owned(), 120, 3)
        );
        assert_eq!(ca.total_ns[ROOT as usize], 120);
        // The request's callees merge both requests' children.
        let req = m.labels().get("request").unwrap();
        let s = Sandwich::build(m.call_tree(), &a, req);
        let (tt, ta) = &s.callees;
        let kids: Vec<(String, u64)> = (1..tt.len() as u32)
            .filter(|&n| tt.depth(n) == 2)
            .map(|n| (name(tt, n), ta.total_ns[n as usize]))
            .collect();
        assert_eq!(kids, [("db".to_owned(), 110), ("tpl".to_owned(), 10)]);
        // And a layout draws it like any call tree.
        let boxes = layout(tt, ta, ROOT, 0.0);
        assert_eq!(boxes[0].x1, 1.0);
    }

    #[test]
    fn an_open_parent_is_as_long_as_its_children() {
        let mut l = Log::default();
        l.start(0, 1, 0, 1, "main")
            .start(0, 2, 10, 1, "step")
            .end(0, 2, 30)
            .start(0, 3, 40, 1, "step")
            .end(0, 3, 45);
        let m = l.model();
        let a = Aggregate::build(&m, &Scope::All);
        let main = node(&m, &["main"]) as usize;
        assert_eq!(a.total_ns[main], 25, "open: its closed children's time");
        let r = Aggregate::build(&m, &Scope::Range(0, 50));
        assert_eq!(
            r.total_ns[main], 45,
            "in a range an open frame runs to the newest time"
        );
    }
}

#[cfg(test)]
mod busy_tests {
    use super::*;
    use crate::model::test_log::Log;

    /// Two async requests of 1,000 ns (busy 300 and 500, a synchronous `db` of 200 inside
    /// each), and a synchronous job of 400.
    fn log() -> Model {
        let mut l = Log::default();
        for (k, busy) in [(0u32, 300u64), (1, 500)] {
            let (id, t) = (1 + k * 2, u64::from(k) * 10_000);
            l.start(0, id, t, id, "request")
                .start(0, id + 1, t + 100, id, "db")
                .end(0, id + 1, t + 300)
                .polls(0, id, t + 1_000, (4, busy, 100, 200, 50, 0), true)
                .end(0, id, t + 1_000);
        }
        l.start(0, 9, 50_000, 9, "job").end(0, 9, 50_400);
        l.model()
    }

    fn node(m: &Model, path: &[&str]) -> usize {
        let t = m.call_tree();
        (1..t.len() as u32)
            .find(|&n| {
                t.path(n)
                    .iter()
                    .map(|&x| m.labels().name(t.label(x)))
                    .eq(path.iter().copied())
            })
            .unwrap() as usize
    }

    #[test]
    fn busy_time_weighs_async_frames_by_their_polls_and_the_rest_by_duration() {
        let m = log();
        let (req, db, job) = (
            node(&m, &["request"]),
            node(&m, &["request", "db"]),
            node(&m, &["job"]),
        );
        let time = Aggregate::build(&m, &Scope::All);
        assert_eq!((time.total_ns[req], time.total_ns[job]), (2_000, 400));
        let busy = Aggregate::build_weighted(&m, &Scope::All, Weight::Busy);
        assert_eq!(busy.total_ns[req], 800, "300 + 500 of polls");
        assert_eq!(busy.total_ns[db], 400, "synchronous: its duration");
        assert_eq!(busy.total_ns[job], 400);
        assert_eq!(busy.total_ns[ROOT as usize], 1_200);
        assert_eq!(busy.count[req], 2);
        // One context: the second request only.
        let set = FxHashSet::from_iter([(0u8, 3u32)]);
        let one = Aggregate::build_weighted(&m, &Scope::Contexts(set), Weight::Busy);
        assert_eq!((one.total_ns[req], one.total_ns[db]), (500, 200));
        // A range holding half of the first request: half its busy time, and db whole.
        let half = Aggregate::build_weighted(&m, &Scope::Range(0, 500), Weight::Busy);
        assert_eq!((half.total_ns[req], half.total_ns[db]), (200, 200));
        assert_eq!(half.total_ns[job], 0);
    }

    #[test]
    fn a_parent_weighs_at_least_its_childrens_busy_time() {
        // An async parent barely busy (10 ns) whose synchronous child ran 200 ns elsewhere.
        let mut l = Log::default();
        l.start(0, 1, 0, 1, "parent")
            .start(0, 2, 100, 1, "child")
            .end(0, 2, 300)
            .polls(0, 1, 1_000, (1, 10, 0, 10, 0, 0), true)
            .end(0, 1, 1_000);
        let m = l.model();
        let busy = Aggregate::build_weighted(&m, &Scope::All, Weight::Busy);
        assert_eq!(busy.total_ns[node(&m, &["parent"])], 200);
        // Without polls (a log from before them), busy time is time.
        let mut l = Log::default();
        l.start(0, 1, 0, 1, "parent").end(0, 1, 1_000);
        let m = l.model();
        let (t, b) = (
            Aggregate::build(&m, &Scope::All),
            Aggregate::build_weighted(&m, &Scope::All, Weight::Busy),
        );
        assert_eq!(t.total_ns, b.total_ns);
    }
}
