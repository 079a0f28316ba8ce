//! Each frame's parent: the rule ([`recorded_parent`], [`inferred_parent`]) every reader
//! applies, and [`Parents`], which applies it to records fed in file order (`stats`, `sql`).
//!
//! A FrameStart with parent (type 6) names it: that is the answer, whatever the threads did.
//! A type 0 start (a log written before parents were recorded, or streamed to an older peer)
//! does not; its parent is then inferred as readers always did (`docs/FORMAT.md`, *Parents of
//! type 0 starts*): the innermost frame of the same context still open on the same thread
//! when it started, else the context's root, else none.
//!
//! Which frame is the innermost one open is each reader's to find, in the order it reads:
//! [`Parents`] by file order; the exports' tracks by time, holding frames back until every
//! earlier one has ended; the debugger's model in its lanes. The rest of the rule is here.

use formats::{FrameKey, Parent, Record};
use rustc_hash::{FxHashMap, FxHashSet};

/// A frame's parent and where the answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentOf {
    /// The writer recorded it (`None`: a root).
    Recorded(Option<FrameKey>),
    /// Inferred from nesting on the thread (`None`: a root).
    Inferred(Option<FrameKey>),
}

impl ParentOf {
    /// The parent's key, however it was found (`None` for a root).
    pub fn key(self) -> Option<FrameKey> {
        match self {
            ParentOf::Recorded(k) | ParentOf::Inferred(k) => k,
        }
    }
}

/// The parent a start records, if it records one: `Some(None)` for a root, `None` for a
/// type 0 start (its parent is then inferred).
#[inline]
pub fn recorded_parent(worker: u8, parent: Parent) -> Option<Option<FrameKey>> {
    match parent {
        Parent::NotRecorded => None,
        Parent::Root => Some(None),
        Parent::Frame(id) => Some(Some(FrameKey::new(worker, id))),
    }
}

/// A type 0 start's parent, given the innermost frame of its context open on its thread when
/// it started: that frame, else the context's root, else none (a context's root, or a start
/// with no context, is a root).
#[inline]
pub fn inferred_parent(
    key: FrameKey,
    context: u32,
    innermost: Option<FrameKey>,
) -> Option<FrameKey> {
    match innermost {
        Some(k) => Some(k),
        None if context != key.id && context != 0 => Some(FrameKey::new(key.worker, context)),
        None => None,
    }
}

/// Past this many entries a thread's stack of open frames drops the ones that ended.
const COMPACT_AT: usize = 4096;

/// One thread's frames, innermost last, with their contexts; entries that ended are dropped
/// lazily.
#[derive(Debug)]
struct Stack {
    frames: Vec<(u32, u32)>,
    /// The length at which to drop ended entries next: at least twice what the last drop
    /// kept, so a thread with thousands of frames open at once (an async service's in-flight
    /// requests) pays for a drop once per doubling, not on every start.
    compact_at: usize,
}

impl Default for Stack {
    fn default() -> Self {
        Stack {
            frames: Vec::new(),
            compact_at: COMPACT_AT,
        }
    }
}

/// Resolves parents from records fed in file order ([`Parents::add`]).
#[derive(Debug, Default)]
pub struct Parents {
    /// Each worker's current thread (set by its `thread_info` records).
    thread: FxHashMap<u8, u32>,
    /// Per (worker, thread): frames started there.
    stacks: FxHashMap<(u8, u32), Stack>,
    /// Frames of those stacks that have not ended.
    /// (A fast hash: every frame goes in and out once.)
    open: FxHashSet<FrameKey>,
    /// Frames whose end was read before their start (a frame that moved threads, its end
    /// flushed first): their start finds them here and they never count as open.
    early_ends: FxHashSet<FrameKey>,
    recorded: u64,
    inferred: u64,
}

impl Parents {
    /// A resolver with nothing seen.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one record; for a FrameStart, returns its parent.
    pub fn add(&mut self, rec: &Record<'_>) -> Option<ParentOf> {
        match rec {
            Record::ThreadInfo(t) => {
                self.thread.insert(t.worker, t.thread);
                None
            }
            Record::Start(s) => {
                let key = FrameKey::new(s.worker, s.id);
                // Every frame open on a thread may enclose a later type 0 start there,
                // whatever its own start recorded.
                let thread = self.thread.get(&s.worker).copied().unwrap_or(u32::MAX);
                let entry = self.stacks.entry((s.worker, thread)).or_default();
                let stack = &mut entry.frames;
                let open = &self.open;
                while stack
                    .last()
                    .is_some_and(|&(id, _)| !open.contains(&FrameKey::new(s.worker, id)))
                {
                    stack.pop();
                }
                if stack.len() >= entry.compact_at {
                    stack.retain(|&(id, _)| open.contains(&FrameKey::new(s.worker, id)));
                    entry.compact_at = COMPACT_AT.max(2 * stack.len());
                }
                let parent = match recorded_parent(s.worker, s.parent) {
                    Some(p) => {
                        self.recorded += 1;
                        ParentOf::Recorded(p)
                    }
                    None => {
                        self.inferred += 1;
                        let innermost = stack
                            .iter()
                            .rev()
                            .find(|&&(id, c)| {
                                c == s.context && open.contains(&FrameKey::new(s.worker, id))
                            })
                            .map(|&(id, _)| FrameKey::new(s.worker, id));
                        ParentOf::Inferred(inferred_parent(key, s.context, innermost))
                    }
                };
                // A frame whose end came first has ended: it encloses nothing after it (kept
                // open, it would stay in the stack for good and could be inferred a parent).
                if self.early_ends.is_empty() || !self.early_ends.remove(&key) {
                    stack.push((s.id, s.context));
                    self.open.insert(key);
                }
                Some(parent)
            }
            Record::End(e) => {
                let key = FrameKey::new(e.worker, e.id);
                if !self.open.remove(&key) {
                    self.early_ends.insert(key);
                }
                None
            }
            _ => None,
        }
    }

    /// Starts seen that recorded their parent.
    pub fn recorded(&self) -> u64 {
        self.recorded
    }

    /// Starts seen whose parent had to be inferred.
    pub fn inferred(&self) -> u64 {
        self.inferred
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use formats::{Category, FrameEnd, FrameStart, ThreadInfo};

    fn start(id: u32, context: u32, parent: Parent) -> Record<'static> {
        Record::Start(FrameStart {
            id,
            worker: 1,
            timestamp: u64::from(id),
            context,
            category: Category::FUNCTION,
            label: "f",
            parent,
        })
    }

    fn thread(t: u32) -> Record<'static> {
        Record::ThreadInfo(ThreadInfo {
            worker: 1,
            thread: t,
            timestamp: 0,
            name: "",
        })
    }

    fn end(id: u32) -> Record<'static> {
        Record::End(FrameEnd {
            id,
            worker: 1,
            timestamp: 100,
        })
    }

    #[test]
    fn recorded_parents_win_over_nesting_on_the_thread() {
        let mut p = Parents::new();
        let k = |id| Some(FrameKey::new(1, id));
        assert_eq!(p.add(&thread(1)), None);
        // Frame 10 (context 10) is open on thread 1; frame 21 of context 20, whose parent 20
        // ran on thread 2, starts inside it in time.
        assert_eq!(
            p.add(&start(10, 10, Parent::Root)),
            Some(ParentOf::Recorded(None))
        );
        assert_eq!(
            p.add(&start(21, 20, Parent::Frame(20))),
            Some(ParentOf::Recorded(k(20)))
        );
        assert_eq!((p.recorded(), p.inferred()), (2, 0));
    }

    #[test]
    fn type_0_starts_infer_the_innermost_open_frame_of_their_context_on_their_thread() {
        let mut p = Parents::new();
        let k = |id| Some(FrameKey::new(1, id));
        let nr = Parent::NotRecorded;
        p.add(&thread(1));
        assert_eq!(p.add(&start(1, 1, nr)), Some(ParentOf::Inferred(None)));
        assert_eq!(p.add(&start(2, 1, nr)), Some(ParentOf::Inferred(k(1))));
        // Another context on the same thread is never a parent.
        assert_eq!(p.add(&start(5, 5, nr)), Some(ParentOf::Inferred(None)));
        assert_eq!(p.add(&start(3, 1, nr)), Some(ParentOf::Inferred(k(2))));
        p.add(&end(3));
        p.add(&end(2));
        assert_eq!(p.add(&start(4, 1, nr)), Some(ParentOf::Inferred(k(1))));
        // On another thread: the context's root.
        p.add(&thread(2));
        assert_eq!(p.add(&start(6, 1, nr)), Some(ParentOf::Inferred(k(1))));
        assert_eq!(p.inferred(), 6);
    }

    /// A frame whose end was read before its start (it moved threads and its end was flushed
    /// first) is not open: a later start of its context on its thread does not take it for a
    /// parent, and the resolver keeps nothing of it.
    #[test]
    fn a_frame_whose_end_came_first_is_not_open_after_its_start() {
        let mut p = Parents::new();
        let k = |id| Some(FrameKey::new(1, id));
        let nr = Parent::NotRecorded;
        p.add(&thread(1));
        assert_eq!(p.add(&start(1, 1, nr)), Some(ParentOf::Inferred(None)));
        p.add(&end(2));
        assert_eq!(p.add(&start(2, 1, nr)), Some(ParentOf::Inferred(k(1))));
        assert_eq!(p.add(&start(3, 1, nr)), Some(ParentOf::Inferred(k(1))));
        // 100,000 frames of other contexts whose ends came first: nothing kept of them.
        for id in 10..100_010 {
            p.add(&end(id));
            p.add(&start(id, id, nr));
        }
        let kept = |p: &Parents| {
            (
                p.open.len(),
                p.early_ends.len(),
                p.stacks[&(1, 1)].frames.len(),
            )
        };
        assert!(
            kept(&p).0 <= 2 && kept(&p).1 == 0 && kept(&p).2 <= 2,
            "{:?}",
            kept(&p)
        );
    }

    /// An async worker thread with 20,000 requests in flight (each its own context, type 0
    /// starts), half of them ended out of order: the stack drops ended entries several
    /// times, and each new start still finds its own context's innermost open frame.
    #[test]
    fn thousands_of_frames_open_on_one_thread_keep_their_parents_across_compactions() {
        let mut p = Parents::new();
        let k = |id| Some(FrameKey::new(1, id));
        let nr = Parent::NotRecorded;
        p.add(&thread(1));
        // Requests 1..=20,000 (context = id), each open; every even one ends.
        for id in 1..=20_000 {
            assert_eq!(p.add(&start(id, id, nr)), Some(ParentOf::Inferred(None)));
            if id % 2 == 0 {
                p.add(&end(id));
            }
        }
        // A child of every 97th odd request, after all of that.
        for c in (1..=20_000).step_by(194) {
            let child = 100_000 + c;
            assert_eq!(p.add(&start(child, c, nr)), Some(ParentOf::Inferred(k(c))));
            p.add(&end(child));
        }
        // An ended request's context: its root, not a frame.
        assert_eq!(
            p.add(&start(200_000, 2, nr)),
            Some(ParentOf::Inferred(k(2)))
        );
    }
}
