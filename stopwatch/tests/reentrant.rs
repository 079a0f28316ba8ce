//! User code that runs inside the stopwatch (a `Serialize` impl, an error callback, a
//! future's destructor) and re-enters it: starting frames on another recorder after this one was shut down must not
//! free the thread's entry under the call that is using it (a use-after-free found with
//! valgrind and Miri), nor send one recorder's data into another's log.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use formats::{FrameKey, Record, RecordIter};
use stopwatch::{FutureExt, InstallGuard, Recorder, Sink, SinkError, Stopwatch};

/// Keeps what a recorder writes in memory.
#[derive(Default)]
struct MemSink {
    worker: u8,
    fail_ids: bool,
    records: Mutex<Vec<u8>>,
    data: Mutex<Vec<FrameKey>>,
    next: AtomicU32,
}

impl MemSink {
    fn new(worker: u8, fail_ids: bool) -> Arc<Self> {
        Arc::new(Self {
            worker,
            fail_ids,
            next: AtomicU32::new(1),
            ..Default::default()
        })
    }

    /// (worker, label) of every FrameStart written.
    fn starts(&self) -> Vec<(u8, String)> {
        self.starts_with_context()
            .into_iter()
            .map(|(w, l, _, _)| (w, l))
            .collect()
    }

    /// (worker, label, id, context) of every FrameStart written.
    fn starts_with_context(&self) -> Vec<(u8, String, u32, u32)> {
        let bytes = self.records.lock().unwrap();
        RecordIter::new(&bytes, 0)
            .filter_map(|r| match r.unwrap().1 {
                Record::Start(s) => Some((s.worker, s.label.to_owned(), s.id, s.context)),
                _ => None,
            })
            .collect()
    }
}

impl Sink for MemSink {
    fn worker(&self) -> u8 {
        self.worker
    }
    fn reserve_ids(&self, count: u32) -> Result<u32, SinkError> {
        if self.fail_ids {
            return Err("No space left on device (simulated)".into());
        }
        Ok(self.next.fetch_add(count, Ordering::SeqCst))
    }
    fn append_frames(&self, records: &[u8]) -> Result<(), SinkError> {
        self.records.lock().unwrap().extend_from_slice(records);
        Ok(())
    }
    fn append_data(&self, entries: &[(FrameKey, Vec<u8>)]) -> Result<(), SinkError> {
        self.data
            .lock()
            .unwrap()
            .extend(entries.iter().map(|(k, _)| *k));
        Ok(())
    }
}

fn recorder(sink: &Arc<MemSink>) -> Recorder {
    Stopwatch::builder()
        .sink(sink.clone() as Arc<dyn Sink>)
        .build()
        .unwrap()
}

/// A value whose serialization starts (and ends) a frame on another recorder.
struct StartsAFrame<'a>(&'a Recorder);

impl serde::Serialize for StartsAFrame<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        drop(self.0.start("inside serialize"));
        s.serialize_str("value")
    }
}

#[test]
fn frame_data_whose_serialize_starts_a_frame_on_another_recorder() {
    let (sink_a, sink_b) = (MemSink::new(1, false), MemSink::new(2, false));
    let a = recorder(&sink_a);
    let b = recorder(&sink_b);
    // This thread uses A, then A is shut down while a frame of it lives on in a future.
    let fut = std::future::ready(()).in_frame(a.start("outer"));
    let stats = a.shutdown();
    assert_eq!(stats.dropped_data, 0);
    // B's first frame on this thread makes the registry forget A's entry, while the data
    // call below is still using it.
    fut.data(&StartsAFrame(&b));
    drop(fut);
    let b_stats = b.shutdown();
    assert_eq!(
        sink_b.starts(),
        vec![(2, "inside serialize".to_owned())],
        "B's log holds B's frame only"
    );
    assert!(sink_b.data.lock().unwrap().is_empty(), "A's data went to B");
    assert_eq!(b_stats.dropped_data, 0);
    assert!(
        sink_a.data.lock().unwrap().is_empty(),
        "A was already shut down"
    );
}

static GUARD: Mutex<Option<InstallGuard>> = Mutex::new(None);
static OTHER: Mutex<Option<Recorder>> = Mutex::new(None);

#[test]
fn an_error_callback_that_uninstalls_and_records_elsewhere() {
    let (sink_a, sink_b) = (MemSink::new(1, true), MemSink::new(2, false));
    *OTHER.lock().unwrap() = Some(recorder(&sink_b));
    let reported = Arc::new(AtomicU32::new(0));
    let r = reported.clone();
    let guard = Stopwatch::builder()
        .sink(sink_a.clone() as Arc<dyn Sink>)
        .on_error(move |_| {
            r.fetch_add(1, Ordering::SeqCst);
            // Uninstall the global stopwatch (shutting it down) and record on another one,
            // from inside the id refill of the global's first frame on this thread.
            drop(GUARD.lock().unwrap().take());
            if let Some(other) = OTHER.lock().unwrap().as_ref() {
                drop(other.start("from the callback"));
            }
            r.fetch_add(1, Ordering::SeqCst);
        })
        .install()
        .unwrap();
    *GUARD.lock().unwrap() = Some(guard);
    // The first frame needs ids: reserving them fails; the callback runs on the writer
    // thread (never inside the refill, which holds the thread's state), drops the last
    // handle of the recorder from that very thread, and records on another one.
    drop(Stopwatch::start("first"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    // Counted twice: once on entry, once when it is done.
    while Stopwatch::is_installed() || reported.load(Ordering::SeqCst) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the callback never ran"
        );
        std::thread::yield_now();
    }
    assert_eq!(reported.load(Ordering::SeqCst), 2, "called once");
    let other = OTHER.lock().unwrap().take().unwrap();
    other.shutdown();
    assert_eq!(sink_b.starts(), vec![(2, "from the callback".to_owned())]);
    // A's frame was recorded (ids continue unpersisted) or counted: never written to B.
    assert!(sink_a.starts().iter().all(|(w, _)| *w == 1));
}

/// Starts a frame when dropped.
struct StartsOnDrop<'a>(&'a Recorder);

impl Drop for StartsOnDrop<'_> {
    fn drop(&mut self) {
        drop(self.0.start("in drop"));
    }
}

#[test]
fn an_unfinished_future_is_dropped_inside_its_frames_context() {
    let sink = MemSink::new(3, false);
    let rec = recorder(&sink);
    {
        let guard = StartsOnDrop(&rec);
        let fut = async move {
            let _g = guard;
            std::future::pending::<()>().await
        };
        let mut fut = Box::pin(fut.in_frame(rec.start("request")));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        drop(fut);
    }
    rec.shutdown();
    let starts = sink.starts_with_context();
    assert_eq!(starts.len(), 2, "{starts:?}");
    let (_, _, request_id, request_ctx) = starts.iter().find(|s| s.1 == "request").unwrap();
    let (_, _, _, drop_ctx) = starts.iter().find(|s| s.1 == "in drop").unwrap();
    assert_eq!(request_ctx, request_id);
    assert_eq!(
        drop_ctx, request_ctx,
        "the destructor's frame joins the request's context"
    );
}

/// Lists nested `.0` deep, built while serializing (no deep structure to drop).
struct Nested(usize);

impl serde::Serialize for Nested {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(1))?;
        if self.0 > 1 {
            seq.serialize_element(&Nested(self.0 - 1))?;
        }
        seq.end()
    }
}

#[test]
fn frame_data_nested_thousands_deep_is_refused_and_counted_not_a_stack_overflow() {
    let sink = MemSink::new(1, false);
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let e = errors.clone();
    let rec = Stopwatch::builder()
        .sink(sink.clone() as Arc<dyn Sink>)
        .on_error(move |err| e.lock().unwrap().push(err.to_string()))
        .build()
        .unwrap();
    // On a thread with a small stack, as application threads may have.
    let r = &rec;
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn_scoped(s, move || {
                r.start("deep").data(&Nested(2_000));
                r.start("shallow").data(&Nested(10));
            })
            .unwrap()
            .join()
            .unwrap();
    });
    let stats = rec.shutdown();
    assert_eq!(stats.dropped_data, 1, "{stats:?}");
    assert_eq!(sink.data.lock().unwrap().len(), 1, "the shallow one");
    let errors = errors.lock().unwrap();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("nested deeper than"), "{errors:?}");
}
