//! [`Queue`]: encoded batches waiting for a forwarder's sending thread, up to a budget of
//! bytes, so a slow or absent collector costs at most the budget in memory. When it is full,
//! whoever fills it waits while the sender makes progress (a burst bigger than the budget to a
//! healthy collector loses nothing: a forwarder reading a log just reads on later), and a batch
//! is dropped and counted only when the sender is stuck (a failure being retried, or nothing
//! taken for [`STUCK`]), the batch alone is bigger than the budget, or sending has stopped.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::send::{Batch, Books, Deadline};

/// How long the sender may take nothing from a full queue before batches are dropped.
pub const STUCK: Duration = Duration::from_secs(5);

/// Batches waiting to be sent, at most `budget` bytes of them.
pub struct Queue {
    inner: Mutex<Inner>,
    ready: Condvar,
    room: Condvar,
    budget: usize,
    books: Arc<Mutex<Books>>,
    deadline: Option<Arc<Deadline>>,
}

struct Inner {
    batches: VecDeque<Batch>,
    bytes: usize,
    closed: bool,
    /// When the sender last took a batch.
    taken: Instant,
    /// Time whoever fills the queue spent waiting for room, in all.
    waited: Duration,
}

impl Queue {
    /// An empty queue holding at most `budget` bytes of encoded batches, counting what it
    /// drops in `books`.
    pub fn new(budget: usize, books: Arc<Mutex<Books>>) -> Queue {
        Queue {
            inner: Mutex::new(Inner {
                batches: VecDeque::new(),
                bytes: 0,
                closed: false,
                taken: Instant::now(),
                waited: Duration::ZERO,
            }),
            ready: Condvar::new(),
            room: Condvar::new(),
            budget,
            books,
            deadline: None,
        }
    }

    /// Past `deadline`, batches pushed are not queued (counted as still waiting).
    pub fn with_deadline(mut self, deadline: Arc<Deadline>) -> Queue {
        self.deadline = Some(deadline);
        self
    }

    /// Time spent waiting for room so far.
    pub fn waited(&self) -> Duration {
        self.inner.lock().waited
    }

    /// Queues `b`, waiting for room while the sender makes progress; drops it (counted) when
    /// the sender is stuck or `b` alone is bigger than the budget. Whether it was queued.
    pub fn push(&self, b: Batch) -> bool {
        let mut q = self.inner.lock();
        loop {
            if self.deadline.as_ref().is_some_and(|d| d.passed()) {
                // Sending has stopped: it stays counted as made, not sent (still waiting).
                return false;
            }
            if q.closed || b.body.len() > self.budget {
                break;
            }
            if q.bytes + b.body.len() <= self.budget {
                q.bytes += b.body.len();
                q.batches.push_back(b);
                drop(q);
                self.ready.notify_one();
                return true;
            }
            let stuck = q.taken.elapsed() >= STUCK || self.books.lock().problem.is_some();
            if stuck {
                break;
            }
            let t = Instant::now();
            self.room.wait_for(&mut q, Duration::from_millis(50));
            q.waited += t.elapsed();
        }
        drop(q);
        self.books.lock().tally[b.signal.index()].dropped += b.items;
        false
    }

    /// The oldest batch, waiting for one until the queue is closed (then `None` once it is
    /// empty) or `until` passes.
    pub fn pop(&self, until: Option<Instant>) -> Option<Batch> {
        let mut q = self.inner.lock();
        loop {
            if let Some(b) = q.batches.pop_front() {
                q.bytes -= b.body.len();
                q.taken = Instant::now();
                self.room.notify_all();
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
        assert!(!q.push(batch(9, 101)), "bigger than the whole budget");
        // The sender failing: a batch that does not fit is dropped at once.
        books.lock().problem = Some("HTTP 503".into());
        assert!(!q.push(batch(7, 50)), "60 + 50 is past 100");
        assert!(q.push(batch(3, 40)));
        assert_eq!(q.waiting(), (2, 100));
        assert_eq!(books.lock().of(Signal::Traces).dropped, 16);
        assert_eq!(q.pop(None).unwrap().items, 10);
        assert!(q.push(batch(5, 60)), "room again");
        q.close();
        assert!(!q.push(batch(1, 1)), "closed: counted as dropped");
        assert_eq!(q.pop(None).unwrap().items, 3);
        assert_eq!(q.pop(None).unwrap().items, 5);
        assert!(q.pop(None).is_none());
        assert_eq!(books.lock().of(Signal::Traces).dropped, 17);
    }

    #[test]
    fn a_full_queue_waits_for_a_sender_that_makes_progress() {
        let books = Arc::new(Mutex::new(Books::default()));
        let q = Arc::new(Queue::new(100, books.clone()));
        assert!(q.push(batch(10, 80)));
        let q2 = q.clone();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            q2.pop(None).map(|b| b.items)
        });
        assert!(
            q.push(batch(5, 80)),
            "queued once the sender took the first"
        );
        assert_eq!(sender.join().unwrap(), Some(10));
        assert_eq!(books.lock().of(Signal::Traces).dropped, 0);
        assert!(q.waited() >= std::time::Duration::from_millis(100));
        let d = Arc::new(Deadline::default());
        d.set(Instant::now());
        let q = Queue::new(100, books.clone()).with_deadline(d);
        assert!(!q.push(batch(3, 10)), "sending stopped");
        assert_eq!(books.lock().of(Signal::Traces).dropped, 0, "not a drop");
    }

    #[test]
    fn pop_gives_up_at_its_time() {
        let q = Queue::new(100, Arc::new(Mutex::new(Books::default())));
        let t = Instant::now() + std::time::Duration::from_millis(30);
        assert!(q.pop(Some(t)).is_none());
        assert!(Instant::now() >= t);
    }
}
