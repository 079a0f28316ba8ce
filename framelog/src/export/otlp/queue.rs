//! [`Queue`]: encoded batches waiting for a forwarder's sending thread, up to a budget of
//! bytes; past it a batch is dropped and counted in the books, so a slow or absent collector
//! costs at most the budget in memory and never holds up whoever fills the queue.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use super::send::{Batch, Books};

/// Batches waiting to be sent, at most `budget` bytes of them.
pub struct Queue {
    inner: Mutex<Inner>,
    ready: Condvar,
    budget: usize,
    books: Arc<Mutex<Books>>,
}

#[derive(Default)]
struct Inner {
    batches: VecDeque<Batch>,
    bytes: usize,
    closed: bool,
}

impl Queue {
    /// An empty queue holding at most `budget` bytes of encoded batches, counting what it
    /// drops in `books`.
    pub fn new(budget: usize, books: Arc<Mutex<Books>>) -> Queue {
        Queue {
            inner: Mutex::new(Inner::default()),
            ready: Condvar::new(),
            budget,
            books,
        }
    }

    /// Queues `b`, or drops it (counted) when it would take the queue past its budget.
    /// Whether it was queued.
    pub fn push(&self, b: Batch) -> bool {
        let mut q = self.inner.lock();
        if q.closed || q.bytes + b.body.len() > self.budget {
            drop(q);
            self.books.lock().tally[b.signal.index()].dropped += b.items;
            return false;
        }
        q.bytes += b.body.len();
        q.batches.push_back(b);
        drop(q);
        self.ready.notify_one();
        true
    }

    /// The oldest batch, waiting for one until the queue is closed (then `None` once it is
    /// empty) or `until` passes.
    pub fn pop(&self, until: Option<Instant>) -> Option<Batch> {
        let mut q = self.inner.lock();
        loop {
            if let Some(b) = q.batches.pop_front() {
                q.bytes -= b.body.len();
                return Some(b);
            }
            if q.closed {
                return None;
            }
            match until {
                Some(t) => {
                    if self.ready.wait_until(&mut q, t).timed_out() && q.batches.is_empty() {
                        return None;
                    }
                }
                None => self.ready.wait(&mut q),
            }
        }
    }

    /// No more batches come: [`Queue::pop`] returns what is left, then `None`.
    pub fn close(&self) {
        self.inner.lock().closed = true;
        self.ready.notify_all();
    }

    /// Batches and bytes waiting now.
    pub fn waiting(&self) -> (usize, usize) {
        let q = self.inner.lock();
        (q.batches.len(), q.bytes)
    }

    /// Its budget in bytes.
    pub fn budget(&self) -> usize {
        self.budget
    }
}

#[cfg(test)]
mod tests {
    use super::super::send::Signal;
    use super::*;

    fn batch(items: u64, bytes: usize) -> Batch {
        Batch {
            signal: Signal::Traces,
            items,
            body: vec![0; bytes],
        }
    }

    #[test]
    fn past_its_budget_a_batch_is_dropped_and_counted_and_room_comes_back_as_it_drains() {
        let books = Arc::new(Mutex::new(Books::default()));
        let q = Queue::new(100, books.clone());
        assert!(q.push(batch(10, 60)));
        assert!(!q.push(batch(7, 50)), "60 + 50 is past 100");
        assert!(q.push(batch(3, 40)));
        assert_eq!(q.waiting(), (2, 100));
        assert_eq!(books.lock().of(Signal::Traces).dropped, 7);
        assert_eq!(q.pop(None).unwrap().items, 10);
        assert!(q.push(batch(5, 60)), "room again");
        q.close();
        assert!(!q.push(batch(1, 1)), "closed: counted as dropped");
        assert_eq!(q.pop(None).unwrap().items, 3);
        assert_eq!(q.pop(None).unwrap().items, 5);
        assert!(q.pop(None).is_none());
        assert_eq!(books.lock().of(Signal::Traces).dropped, 8);
    }

    #[test]
    fn pop_gives_up_at_its_time() {
        let q = Queue::new(100, Arc::new(Mutex::new(Books::default())));
        let t = Instant::now() + std::time::Duration::from_millis(30);
        assert!(q.pop(Some(t)).is_none());
        assert!(Instant::now() >= t);
    }
}
