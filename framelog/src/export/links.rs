//! [`LinkWindow`]: holds an export's last events back for a while, so that a child drawn apart
//! from its parent (another thread or lane) and that parent can both be marked as the two ends
//! of a link, whichever of them is released first. Pure logic.
//!
//! Frames are released per thread in start order, but threads are released independently: a
//! parent may come out before or after its children on other threads. Writing a link's start
//! on every frame in case a child turns up (as the Chrome export once did) leaves most of them
//! unfinished; writing both ends when the second frame comes needs the first one's event still
//! at hand. The window keeps the last [`WINDOW`] events in order (events leave it, oldest
//! first, to be written); while both ends of a link are in it, both are marked. A link whose
//! other end left the window before it came, or never came (the parent is not in the export),
//! is not drawn, and counted ([`LinkWindow::unlinked`]). Memory: the window's events.

use std::collections::VecDeque;

use formats::FrameKey;
use rustc_hash::FxHashMap;

/// Events held back (and so how far apart, in events, a parent and its child may be
/// released and still be linked).
pub const WINDOW: usize = 1 << 16;

/// An event held in the window, with the links found for it.
#[derive(Debug)]
pub struct Held<T> {
    /// The event.
    pub item: T,
    /// The children linked to this frame's begin event (it is their parent), in link order.
    pub children: Vec<FrameKey>,
    /// The parent this frame's begin event is linked to.
    pub parent: Option<FrameKey>,
    key: Option<FrameKey>,
    waits_for: Option<FrameKey>,
}

/// The window (see the module doc).
pub struct LinkWindow<T> {
    held: VecDeque<Held<T>>,
    /// The position (since the start) of `held[0]`.
    first: u64,
    /// Frames that may be parents, by the position of their begin event.
    begun: FxHashMap<FrameKey, u64>,
    /// Per parent not seen yet, the positions of the children waiting for it.
    waiting: FxHashMap<FrameKey, Vec<u64>>,
    cap: usize,
    linked: u64,
    unlinked: u64,
}

impl<T> Default for LinkWindow<T> {
    fn default() -> Self {
        Self::with_capacity(WINDOW)
    }
}

impl<T> LinkWindow<T> {
    /// A window holding `cap` events (at least 1).
    pub fn with_capacity(cap: usize) -> Self {
        Self {
            held: VecDeque::new(),
            first: 0,
            begun: FxHashMap::default(),
            waiting: FxHashMap::default(),
            cap: cap.max(1),
            linked: 0,
            unlinked: 0,
        }
    }

    /// Links drawn so far (both ends marked).
    pub fn linked(&self) -> u64 {
        self.linked
    }

    /// Children apart from their parent whose link could not be drawn: the parent was not
    /// in the window while the child was (not in the export, or released too far away).
    pub fn unlinked(&self) -> u64 {
        self.unlinked
    }

    fn at(&mut self, pos: u64) -> &mut Held<T> {
        let i = (pos - self.first) as usize;
        &mut self.held[i]
    }

    /// An event that is no frame's begin.
    pub fn push(&mut self, item: T, out: &mut impl FnMut(Held<T>)) {
        self.held.push_back(Held {
            item,
            children: Vec::new(),
            parent: None,
            key: None,
            waits_for: None,
        });
        self.evict(out);
    }

    /// The begin event of frame `key`: `may_parent` if children may link to it (its start
    /// recorded its parent, so its children name theirs); `apart_from` its parent when it
    /// is drawn apart from it and must be linked to it.
    pub fn push_begin(
        &mut self,
        item: T,
        key: FrameKey,
        may_parent: bool,
        apart_from: Option<FrameKey>,
        out: &mut impl FnMut(Held<T>),
    ) {
        let pos = self.first + self.held.len() as u64;
        self.held.push_back(Held {
            item,
            children: Vec::new(),
            parent: None,
            key: Some(key),
            waits_for: None,
        });
        if let Some(p) = apart_from {
            match self.begun.get(&p) {
                Some(&ppos) => {
                    self.at(ppos).children.push(key);
                    self.at(pos).parent = Some(p);
                    self.linked += 1;
                }
                None => {
                    self.at(pos).waits_for = Some(p);
                    self.waiting.entry(p).or_default().push(pos);
                }
            }
        }
        if may_parent {
            self.begun.insert(key, pos);
            if let Some(children) = self.waiting.remove(&key) {
                for c in children {
                    let child = self.at(c);
                    child.parent = Some(key);
                    child.waits_for = None;
                    let ck = child.key.expect("a waiting child is a begin");
                    self.at(pos).children.push(ck);
                    self.linked += 1;
                }
            }
        }
        self.evict(out);
    }

    fn evict(&mut self, out: &mut impl FnMut(Held<T>)) {
        while self.held.len() > self.cap {
            self.pop(out);
        }
    }

    fn pop(&mut self, out: &mut impl FnMut(Held<T>)) {
        let Some(h) = self.held.pop_front() else {
            return;
        };
        let pos = self.first;
        self.first += 1;
        if let Some(k) = h.key
            && self.begun.get(&k) == Some(&pos)
        {
            self.begun.remove(&k);
        }
        if let Some(p) = h.waits_for
            && let Some(w) = self.waiting.get_mut(&p)
        {
            w.retain(|&c| c != pos);
            if w.is_empty() {
                self.waiting.remove(&p);
            }
            self.unlinked += 1;
        }
        out(h);
    }

    /// Lets every held event out, in order.
    pub fn drain(&mut self, out: &mut impl FnMut(Held<T>)) {
        while !self.held.is_empty() {
            self.pop(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(id: u32) -> FrameKey {
        FrameKey::new(0, id)
    }

    /// (item, children, parent) in the order they left.
    type Out = Vec<(u32, Vec<u32>, Option<u32>)>;

    fn collect(out: &mut Out) -> impl FnMut(Held<u32>) + '_ {
        |h| {
            out.push((
                h.item,
                h.children.iter().map(|c| c.id).collect(),
                h.parent.map(|p| p.id),
            ))
        }
    }

    #[test]
    fn a_link_is_drawn_whichever_end_comes_first_and_only_then() {
        let mut got = Out::new();
        let mut w = LinkWindow::with_capacity(100);
        // Parent 1 first, then its child 2 apart; child 3 apart before its parent 4; child 5
        // of 99, which never comes; 6, a frame nobody links to.
        w.push_begin(1, k(1), true, None, &mut collect(&mut got));
        w.push(100, &mut collect(&mut got));
        w.push_begin(2, k(2), true, Some(k(1)), &mut collect(&mut got));
        w.push_begin(3, k(3), true, Some(k(4)), &mut collect(&mut got));
        w.push_begin(4, k(4), true, None, &mut collect(&mut got));
        w.push_begin(5, k(5), true, Some(k(99)), &mut collect(&mut got));
        w.push_begin(6, k(6), true, None, &mut collect(&mut got));
        assert!(got.is_empty(), "held back");
        w.drain(&mut collect(&mut got));
        assert_eq!(
            got,
            vec![
                (1, vec![2], None),
                (100, vec![], None),
                (2, vec![], Some(1)),
                (3, vec![], Some(4)),
                (4, vec![3], None),
                (5, vec![], None),
                (6, vec![], None),
            ]
        );
        assert_eq!((w.linked(), w.unlinked()), (2, 1));
    }

    #[test]
    fn a_parent_links_many_children_and_one_outside_the_window_is_counted() {
        let mut got = Out::new();
        let mut w = LinkWindow::with_capacity(3);
        w.push_begin(1, k(1), true, None, &mut collect(&mut got));
        w.push_begin(2, k(2), true, Some(k(1)), &mut collect(&mut got));
        w.push_begin(3, k(3), true, Some(k(1)), &mut collect(&mut got));
        // 1 leaves the window here: its child 5 comes too late.
        w.push(4, &mut collect(&mut got));
        w.push_begin(5, k(5), true, Some(k(1)), &mut collect(&mut got));
        // A frame that may not be a parent (no recorded parents) is never linked to.
        w.push_begin(6, k(6), false, None, &mut collect(&mut got));
        w.push_begin(7, k(7), true, Some(k(6)), &mut collect(&mut got));
        w.drain(&mut collect(&mut got));
        assert_eq!(got[0], (1, vec![2, 3], None));
        let five = got.iter().find(|g| g.0 == 5).unwrap();
        assert_eq!(five, &(5, vec![], None));
        assert_eq!(got.len(), 7);
        assert_eq!((w.linked(), w.unlinked()), (2, 2));
    }
}
