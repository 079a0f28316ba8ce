//! Parents: the frame each frame was called from, as recorded (type 6 starts) or inferred
//! (type 0 starts: the innermost running frame of the same context on the same thread).
//!
//! Most parents cost nothing to store: a frame's parent is *implicit* when it is the frame
//! below it in its lane (the nearest lower row's frame running at its start) of the same
//! context whose call-tree node is the parent of the frame's node: the rows and the call tree
//! already say so ([`Model::parent_of`] looks it up). Only the other frames have an entry in a
//! side map (`Parents`): a parent that ran on another thread (async work that moved), one
//! that ended before its child started, one in another context, one hidden behind a
//! concurrent frame with the same call path, and a parent that is not in the log (yet).
//!
//! A child whose recorded parent has not been read yet (its start is later in the file, in
//! another thread's buffer) is placed as a root and waits; when the parent arrives, the child
//! and everything placed under it since move to their true call paths (the call tree's and
//! the statistics' totals with them). A parent that never arrives leaves it a root whose
//! parent is unknown.

use formats::FrameKey;
use rustc_hash::FxHashMap;

use super::row::Lane;
use super::{FrameRef, Model, calltree};

/// A frame's parent, as [`Model::parent_of`] tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParentOf {
    /// This frame.
    Frame(FrameRef),
    /// Recorded as this frame, which is not in the log (dropped, deleted with an old segment,
    /// or not read yet).
    Missing(FrameKey),
}

/// The parents the rows do not tell (see the module docs).
#[derive(Default, Debug)]
pub(crate) struct Parents {
    /// Child to parent, for the frames whose parent is not implicit.
    explicit: FxHashMap<FrameRef, ParentOf>,
    /// Parent to its children among `explicit`'s.
    kids: FxHashMap<FrameRef, Vec<FrameRef>>,
    /// A parent not placed yet to the children waiting for it.
    waiting: FxHashMap<FrameKey, Vec<FrameRef>>,
    /// Frames whose call path hangs on a waiting frame, to that waiting frame (a waiting
    /// frame maps to itself).
    provisional: FxHashMap<FrameRef, FrameRef>,
    /// By waiting frame: the frames placed under it since, each with its parent, in placing
    /// order (parents before their children).
    under: FxHashMap<FrameRef, Vec<(FrameRef, FrameRef)>>,
    /// Starts that recorded their parent.
    pub(crate) recorded: u64,
}

impl Parents {
    /// Heap bytes held (approximately: the maps' buckets and the lists).
    pub(crate) fn heap_bytes(&self) -> usize {
        let lists: usize = self.kids.values().map(|v| v.capacity() * 12).sum::<usize>()
            + self
                .waiting
                .values()
                .map(|v| v.capacity() * 12)
                .sum::<usize>()
            + self
                .under
                .values()
                .map(|v| v.capacity() * 24)
                .sum::<usize>();
        self.explicit.capacity() * 33
            + self.kids.capacity() * 37
            + self.waiting.capacity() * 33
            + self.provisional.capacity() * 25
            + self.under.capacity() * 37
            + lists
    }
}

/// How a start's parent was placed, for [`Model::link_parent`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Placed {
    /// In its lane, under this running frame (row, index), of the same context or not:
    /// implicit unless a frame with the parent's call path runs in a row between them.
    Below {
        row: u32,
        index: u32,
        same_context: bool,
    },
    /// Elsewhere (another lane, or ended before the child started).
    Elsewhere(FrameRef),
    /// Recorded but not placed yet: it waits for it.
    Waits(FrameKey),
    /// No parent (a root).
    None,
}

/// How far around a time a row is searched for a parent by id (frames before, after).
const SEARCH_BACK: usize = 64;
const SEARCH_AHEAD: usize = 4;

impl Model {
    /// Starts that recorded their parent, and starts whose parent was inferred (a log written
    /// before parents existed has only the latter: the views say so).
    pub fn parent_counts(&self) -> (u64, u64) {
        (self.parents.recorded, self.frames - self.parents.recorded)
    }

    /// Whether the log's parents are inferred (it recorded none, and holds frames).
    pub fn parents_inferred(&self) -> bool {
        self.parents.recorded == 0 && self.frames > 0
    }

    /// Frame `at`'s parent, `None` for a root.
    pub fn parent_of(&self, at: FrameRef) -> Option<ParentOf> {
        if !self.parents.explicit.is_empty()
            && let Some(&p) = self.parents.explicit.get(&at)
        {
            return Some(p);
        }
        self.implicit_parent(at).map(ParentOf::Frame)
    }

    /// The frame below `at` in its lane that is its parent by the rows alone: the nearest
    /// lower row's frame running at its start, of its context, whose node is its node's
    /// parent.
    fn implicit_parent(&self, at: FrameRef) -> Option<FrameRef> {
        let lane = self.lanes.get(at.lane as usize)?;
        let row = lane.rows.get(at.row as usize)?;
        let i = at.index as usize;
        let pnode = self.calltree.parent(row.node(i));
        if pnode == calltree::ROOT {
            return None;
        }
        let (t, context) = (row.start(i), row.context(i));
        (0..at.row).rev().find_map(|r| {
            let below = &lane.rows[r as usize];
            let j = running_at(below, t)?;
            (below.context(j) == context && below.node(j) == pnode).then_some(FrameRef {
                lane: at.lane,
                row: r,
                index: j as u32,
            })
        })
    }

    /// Calls `f` with each of frame `at`'s children (its lane's rows above it first, in row
    /// and start order; then those elsewhere).
    pub fn for_each_child(&self, at: FrameRef, mut f: impl FnMut(FrameRef)) {
        let Some(lane) = self.lanes.get(at.lane as usize) else {
            return;
        };
        let Some(row) = lane.rows.get(at.row as usize) else {
            return;
        };
        let i = at.index as usize;
        if i >= row.len() {
            return;
        }
        let (start, open, end) = (row.start(i), row.is_open(i), row.end(i));
        let (context, node) = (row.context(i), row.node(i));
        let explicit = !self.parents.explicit.is_empty();
        for (r, above) in lane.rows.iter().enumerate().skip(at.row as usize + 1) {
            let first = above.start_partition_point(|s| s < start);
            for j in first..above.len() {
                let s = above.start(j);
                if !open && s >= end {
                    break;
                }
                if above.context(j) != context || self.calltree.parent(above.node(j)) != node {
                    continue;
                }
                let child = FrameRef {
                    lane: at.lane,
                    row: r as u32,
                    index: j as u32,
                };
                if explicit && self.parents.explicit.contains_key(&child) {
                    continue;
                }
                // Right above: it runs inside this frame, which is then its nearest match.
                if r as u32 > at.row + 1 && self.implicit_parent(child) != Some(at) {
                    continue;
                }
                f(child);
            }
        }
        if let Some(kids) = self.parents.kids.get(&at) {
            kids.iter().copied().for_each(f);
        }
    }

    /// Frame `at`'s children, by start (then lane and row).
    pub fn children_of(&self, at: FrameRef) -> Vec<FrameRef> {
        let mut v = Vec::new();
        self.for_each_child(at, |c| v.push(c));
        v.sort_by_key(|c| (self.row(*c).start(c.index as usize), c.lane, c.row));
        v
    }

    /// The links a view draws for frame `at` between lanes (as Perfetto draws flows):
    /// `(parent, child)` for its parent when that ran on another lane, and for each of its
    /// children that ran on another lane (at most `max` of them).
    pub fn links_of(&self, at: FrameRef, max: usize) -> Vec<(FrameRef, FrameRef)> {
        let mut v = Vec::new();
        if let Some(ParentOf::Frame(p)) = self.parent_of(at)
            && p.lane != at.lane
        {
            v.push((p, at));
        }
        if let Some(kids) = self.parents.kids.get(&at) {
            v.extend(
                kids.iter()
                    .filter(|c| c.lane != at.lane)
                    .take(max)
                    .map(|&c| (at, c)),
            );
        }
        v
    }

    /// Time in frame `at`'s direct children, each clipped to its time. (Computed, not
    /// stored: 8 bytes a frame saved. Concurrent children can add up to more than the frame;
    /// self time is then clamped at zero.)
    pub fn children_ns(&self, at: FrameRef) -> u64 {
        let row = self.row(at);
        let i = at.index as usize;
        let (start, end) = (row.start(i), row.end_or(i, self.max_time));
        let mut sum = 0;
        self.for_each_child(at, |c| {
            let r = self.row(c);
            let j = c.index as usize;
            let (s, e) = (r.start(j).max(start), r.end_or(j, self.max_time).min(end));
            sum += e.saturating_sub(s);
        });
        sum
    }

    /// Where recorded parent `id` of `worker` is, looked for around time `t` (the child's
    /// start) in every lane of the worker: rows around `t` first, then the running frames.
    pub(crate) fn find_parent(&self, worker: u8, id: u32, t: u64) -> Option<FrameRef> {
        for (l, lane) in self.lanes.iter().enumerate() {
            if lane.worker != worker {
                continue;
            }
            for (r, row) in lane.rows.iter().enumerate() {
                let p = row.start_partition_point(|s| s <= t);
                let lo = p.saturating_sub(SEARCH_BACK);
                let hi = (p + SEARCH_AHEAD).min(row.len());
                if let Some(j) = (lo..hi).rev().find(|&j| row.id(j) == id) {
                    return Some(FrameRef {
                        lane: l as u32,
                        row: r as u32,
                        index: j as u32,
                    });
                }
            }
        }
        self.lanes.iter().enumerate().find_map(|(l, lane)| {
            (lane.worker == worker).then(|| running_with_id(lane, l as u32, id))?
        })
    }

    /// Records how the frame just placed at `at` (key `key`) hangs on its parent, `placed`
    /// (see [`Placed`]), and gives it the children that waited for it.
    #[inline]
    pub(crate) fn link_parent(&mut self, at: FrameRef, key: FrameKey, placed: Placed) {
        // Most frames: a root, or right above their parent of the same context, with nothing
        // waiting: the rows tell it all.
        let plain = match placed {
            Placed::None => true,
            Placed::Below {
                row, same_context, ..
            } => same_context && at.row == row + 1,
            _ => false,
        };
        if !(plain && self.parents.waiting.is_empty() && self.parents.provisional.is_empty()) {
            self.link_parent_slow(at, key, placed);
        }
    }

    #[inline(never)]
    fn link_parent_slow(&mut self, at: FrameRef, key: FrameKey, placed: Placed) {
        let parent = match placed {
            Placed::Below {
                row,
                index,
                same_context,
            } => {
                let p = FrameRef {
                    lane: at.lane,
                    row,
                    index,
                };
                // Implicit if the rows tell it: same context, and no frame with its call path
                // in a row between them runs then (none can right above it).
                let implicit =
                    same_context && (at.row == row + 1 || self.implicit_parent(at) == Some(p));
                if !implicit {
                    self.set_explicit(at, ParentOf::Frame(p));
                }
                Some(p)
            }
            Placed::Elsewhere(p) => {
                self.set_explicit(at, ParentOf::Frame(p));
                Some(p)
            }
            Placed::Waits(k) => {
                self.parents.explicit.insert(at, ParentOf::Missing(k));
                self.parents.waiting.entry(k).or_default().push(at);
                self.parents.provisional.insert(at, at);
                self.parents.under.insert(at, Vec::new());
                None
            }
            Placed::None => None,
        };
        // Under a frame whose own path waits for its parent: this one moves with it.
        if let Some(p) = parent
            && !self.parents.provisional.is_empty()
            && let Some(&top) = self.parents.provisional.get(&p)
        {
            self.parents.provisional.insert(at, top);
            self.parents.under.entry(top).or_default().push((at, p));
        }
        // Children that waited for this frame.
        if !self.parents.waiting.is_empty()
            && let Some(kids) = self.parents.waiting.remove(&key)
        {
            for c in kids {
                self.adopt(at, c);
            }
        }
    }

    fn set_explicit(&mut self, child: FrameRef, parent: ParentOf) {
        self.parents.explicit.insert(child, parent);
        if let ParentOf::Frame(p) = parent {
            self.parents.kids.entry(p).or_default().push(child);
        }
    }

    /// Frame `child` waited for its parent, placed now at `parent`: it and the frames placed
    /// under it move to their call paths under the parent's.
    fn adopt(&mut self, parent: FrameRef, child: FrameRef) {
        self.set_explicit(child, ParentOf::Frame(parent));
        let under = self.parents.under.remove(&child).unwrap_or_default();
        self.parents.provisional.remove(&child);
        self.renode_under(child, parent);
        for &(f, p) in &under {
            self.parents.provisional.remove(&f);
            self.renode_under(f, p);
        }
        // The parent's own path may still wait: then they wait with it.
        if !self.parents.provisional.is_empty()
            && let Some(&top) = self.parents.provisional.get(&parent)
        {
            let list = self.parents.under.entry(top).or_default();
            list.push((child, parent));
            list.extend_from_slice(&under);
            self.parents.provisional.insert(child, top);
            for (f, _) in under {
                self.parents.provisional.insert(f, top);
            }
        }
    }

    /// Gives frame `at` the call-tree node of its label under `parent`'s node, moving its
    /// closed time from its old node to the new one.
    fn renode_under(&mut self, at: FrameRef, parent: FrameRef) {
        let pnode = self.row(parent).node(parent.index as usize);
        let i = at.index as usize;
        let old = self.row(at).node(i);
        let new = self.calltree.child(pnode, self.calltree.label(old));
        if new == old {
            return;
        }
        self.row_mut(at).set_node(i, new);
        let row = self.row(at);
        let counted = !row.is_open(i) && !self.cut.contains(&at) && !self.lost.contains_key(&at);
        if counted {
            let dur = row.end(i) - row.start(i);
            self.calltree.on_uncount(old, dur);
            self.calltree.on_close(new, dur);
            let (was, is) = (self.calltree.parent(old), self.calltree.parent(new));
            if was != calltree::ROOT {
                self.stats.off_child(self.calltree.label(was), dur);
            }
            if is != calltree::ROOT {
                self.stats.on_child(self.calltree.label(is), dur);
            }
        }
    }

    /// Worker `w`'s process stopped: frames waiting for one of its parents wait no more (a
    /// new process in the slot reuses its ids); they stay roots whose parent is unknown.
    pub(crate) fn stop_waiting(&mut self, w: u8) {
        if self.parents.waiting.is_empty() {
            return;
        }
        let gone: Vec<FrameKey> = self
            .parents
            .waiting
            .keys()
            .filter(|k| k.worker == w)
            .copied()
            .collect();
        for k in gone {
            for c in self.parents.waiting.remove(&k).unwrap_or_default() {
                self.parents.provisional.remove(&c);
                for (f, _) in self.parents.under.remove(&c).unwrap_or_default() {
                    self.parents.provisional.remove(&f);
                }
            }
        }
    }
}

/// The index of the frame of `row` running at `t` (started by then, not ended by then).
#[inline]
fn running_at(row: &super::Row, t: u64) -> Option<usize> {
    let p = row.start_partition_point(|s| s <= t);
    let j = p.checked_sub(1)?;
    (row.is_open(j) || row.end(j) > t).then_some(j)
}

/// The running frame of `lane` with id `id`.
fn running_with_id(lane: &Lane, l: u32, id: u32) -> Option<FrameRef> {
    lane.active.iter().find_map(|a| {
        (lane.rows[a.row as usize].id(a.index as usize) == id).then_some(FrameRef {
            lane: l,
            row: a.row,
            index: a.index,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::calltree::{Aggregate, ROOT, Scope};
    use crate::model::test_log::Log;
    use formats::Parent;

    /// The node of call path `path` (labels from the root), if there is one.
    fn node(m: &Model, path: &[&str]) -> Option<u32> {
        let t = m.call_tree();
        (1..t.len() as u32).find(|&n| {
            let p: Vec<&str> = t
                .path(n)
                .iter()
                .map(|&x| m.labels().name(t.label(x)))
                .collect();
            p == path
        })
    }

    fn total(m: &Model, path: &[&str]) -> u64 {
        let a = Aggregate::build(m, &Scope::All);
        node(m, path).map_or(0, |n| a.total_ns[n as usize])
    }

    fn key(id: u32) -> FrameKey {
        FrameKey::new(0, id)
    }

    /// Request 1 starts on thread 1 and awaits; its `db` child runs on thread 2, where an
    /// unrelated request (context 5) is running, and `db` calls `decode` there. `reply`
    /// runs on thread 1 under the request. Recorded, or not (`parents` false: type 0 starts,
    /// as a log from before parents).
    fn hop(parents: bool) -> Log {
        let p = |id: u32| {
            if !parents {
                Parent::NotRecorded
            } else if id == 0 {
                Parent::Root
            } else {
                Parent::Frame(id)
            }
        };
        let mut l = Log::default();
        l.thread(0, 1, "worker-1")
            .start_with(0, 1, 0, 1, "request", p(0))
            .thread(0, 2, "worker-2")
            .start_with(0, 5, 0, 5, "other", p(0))
            .start_with(0, 2, 10, 1, "db", p(1))
            .start_with(0, 3, 20, 1, "decode", p(2))
            .end(0, 3, 30)
            .end(0, 2, 50)
            .end(0, 5, 200)
            .thread(0, 1, "worker-1")
            .start_with(0, 4, 60, 1, "reply", p(1))
            .end(0, 4, 70)
            .end(0, 1, 100);
        l
    }

    #[test]
    fn a_child_on_another_thread_hangs_under_its_recorded_parent_not_the_frame_it_ran_in() {
        let m = hop(true).model();
        assert_eq!(m.parent_counts(), (5, 0));
        assert!(!m.parents_inferred());
        let req = m.find(key(1)).unwrap();
        let db = m.find(key(2)).unwrap();
        let decode = m.find(key(3)).unwrap();
        let reply = m.find(key(4)).unwrap();
        let other = m.find(key(5)).unwrap();
        // The timeline keeps db on its own thread's lane, beside the unrelated frame.
        assert_ne!(db.lane, req.lane);
        assert_eq!(db.lane, other.lane);
        assert_eq!(db.row, other.row + 1, "it fits right above: row 1");
        // The call tree follows the recorded parent.
        assert_eq!(total(&m, &["request", "db"]), 40);
        assert_eq!(total(&m, &["request", "db", "decode"]), 10);
        assert_eq!(total(&m, &["request"]), 100);
        assert_eq!(
            node(&m, &["other", "db"]),
            None,
            "never under the unrelated frame"
        );
        assert_eq!(node(&m, &["db"]), None, "not a root either");
        // Parents and children, a click apart.
        assert_eq!(m.parent_of(db), Some(ParentOf::Frame(req)));
        assert_eq!(m.parent_of(decode), Some(ParentOf::Frame(db)));
        assert_eq!(m.parent_of(reply), Some(ParentOf::Frame(req)));
        assert_eq!(m.parent_of(req), None);
        assert_eq!(m.parent_of(other), None);
        assert_eq!(m.children_of(req), [db, reply]);
        assert_eq!(m.children_of(db), [decode]);
        assert_eq!(m.children_of(other), []);
        // Self times subtract the real children, wherever they ran.
        assert_eq!(m.info(req).unwrap().self_ns, 100 - 40 - 10);
        assert_eq!(m.info(db).unwrap().self_ns, 40 - 10);
        assert_eq!(m.info(other).unwrap().self_ns, 200);
        let stats = |label: &str| m.stats().get(m.labels().get(label).unwrap());
        assert_eq!(stats("request").self_ns(), 100 - 40 - 10);
        assert_eq!(stats("other").self_ns(), 200);
        assert_eq!(stats("db").self_ns(), 30);
    }

    #[test]
    fn without_recorded_parents_a_frame_on_another_thread_is_its_contexts_roots_child() {
        let m = hop(false).model();
        assert_eq!(m.parent_counts(), (0, 5));
        assert!(m.parents_inferred());
        let (req, db) = (m.find(key(1)).unwrap(), m.find(key(2)).unwrap());
        // Inference sees no running frame of context 1 on thread 2: db's parent is the
        // context's root (`docs/FORMAT.md`, *Parents of type 0 starts*), as stats says.
        assert_eq!(m.parent_of(db), Some(ParentOf::Frame(req)));
        assert_eq!(total(&m, &["request", "db", "decode"]), 10);
        assert_eq!(node(&m, &["db"]), None, "not a root");
        assert_eq!(m.children_of(req).len(), 2, "db and reply");
        assert_eq!(m.info(req).unwrap().self_ns, 100 - 40 - 10);
    }

    #[test]
    fn a_child_read_before_its_parent_moves_under_it_when_the_parent_arrives() {
        // Thread 2's buffer is written first: db and decode come before the request's start.
        let mut l = Log::default();
        l.thread(0, 2, "worker-2")
            .start_with(0, 2, 10, 1, "db", Parent::Frame(1))
            .start_with(0, 3, 20, 1, "decode", Parent::Frame(2))
            .end(0, 3, 30)
            .end(0, 2, 50);
        let early = l.model();
        let db = early.find(key(2)).unwrap();
        assert_eq!(early.parent_of(db), Some(ParentOf::Missing(key(1))));
        assert_eq!(total(&early, &["db", "decode"]), 10, "a root until then");
        l.thread(0, 1, "worker-1")
            .start_with(0, 1, 0, 1, "request", Parent::Root)
            .end(0, 1, 100);
        let m = l.model();
        let (req, db) = (m.find(key(1)).unwrap(), m.find(key(2)).unwrap());
        assert_eq!(m.parent_of(db), Some(ParentOf::Frame(req)));
        assert_eq!(total(&m, &["request", "db"]), 40);
        assert_eq!(total(&m, &["request", "db", "decode"]), 10);
        assert_eq!(total(&m, &["db"]), 0);
        assert_eq!(total(&m, &["db", "decode"]), 0);
        let stats = |label: &str| m.stats().get(m.labels().get(label).unwrap());
        assert_eq!(stats("request").self_ns(), 60);
        assert_eq!(stats("db").self_ns(), 30);
        assert_eq!(m.info(req).unwrap().self_ns, 60);
        // The call tree's totals are what a log in the other order gives.
        let mut ordered = Log::default();
        ordered
            .thread(0, 1, "worker-1")
            .start_with(0, 1, 0, 1, "request", Parent::Root)
            .end(0, 1, 100)
            .thread(0, 2, "worker-2")
            .start_with(0, 2, 10, 1, "db", Parent::Frame(1))
            .start_with(0, 3, 20, 1, "decode", Parent::Frame(2))
            .end(0, 3, 30)
            .end(0, 2, 50);
        let o = ordered.model();
        for path in [
            &["request"][..],
            &["request", "db"],
            &["request", "db", "decode"],
        ] {
            assert_eq!(total(&m, path), total(&o, path), "{path:?}");
        }
    }

    #[test]
    fn a_parent_that_never_appears_leaves_a_root_with_an_unknown_parent() {
        let mut l = Log::default();
        l.start_with(0, 7, 10, 1, "orphan", Parent::Frame(99))
            .start_with(0, 8, 12, 1, "inner", Parent::Frame(7))
            .end(0, 8, 15)
            .end(0, 7, 20);
        let mut m = l.model();
        let orphan = m.find(key(7)).unwrap();
        assert_eq!(m.parent_of(orphan), Some(ParentOf::Missing(key(99))));
        assert_eq!(m.children_of(orphan), [m.find(key(8)).unwrap()]);
        assert_eq!(total(&m, &["orphan", "inner"]), 3);
        // Its process stops: it waits no more, and a new process's frame 99 is not its parent.
        m.mark_stopped(0, false);
        let mut l = Log::default();
        l.start_with(0, 99, 30, 99, "new", Parent::Root)
            .end(0, 99, 40);
        m.apply_bytes(&l.bytes);
        assert_eq!(m.parent_of(orphan), Some(ParentOf::Missing(key(99))));
        assert_eq!(total(&m, &["orphan"]), 10);
    }

    #[test]
    fn a_parent_behind_a_concurrent_frame_with_its_call_path_is_still_the_parent() {
        // Two concurrent `fetch`es of one request on one thread; the second's child starts
        // while both run. Recorded: the child's parent is the first fetch (row 1), not the
        // second (row 2), which the rows alone would pick.
        let mut l = Log::default();
        l.start_with(0, 1, 0, 1, "request", Parent::Root)
            .start_with(0, 2, 10, 1, "fetch", Parent::Frame(1))
            .start_with(0, 3, 20, 1, "fetch", Parent::Frame(1))
            .start_with(0, 4, 30, 1, "parse", Parent::Frame(2))
            .end(0, 4, 40)
            .end(0, 3, 50)
            .end(0, 2, 60)
            .end(0, 1, 100);
        let m = l.model();
        let (a, b, parse) = (
            m.find(key(2)).unwrap(),
            m.find(key(3)).unwrap(),
            m.find(key(4)).unwrap(),
        );
        assert_eq!((a.row, b.row), (1, 2));
        assert_eq!(m.parent_of(parse), Some(ParentOf::Frame(a)));
        assert_eq!(m.children_of(a), [parse]);
        assert_eq!(m.children_of(b), []);
        assert_eq!(m.info(b).unwrap().self_ns, 30);
        assert_eq!(m.info(a).unwrap().self_ns, 40);
        let _ = ROOT;
    }
}
