//! Context propagation: nesting on a thread, across threads, across tokio tasks and awaits.

mod common;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use common::read_log;
use stopwatch::{Category, FutureExt, Stopwatch};

#[test]
fn nested_frames_carry_the_root_context_and_roots_open_new_ones() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Stopwatch::builder().dir(dir.path()).build().unwrap();
    let mut expected = Vec::new(); // (root key, child keys)
    for _ in 0..3 {
        let root = rec.start("request");
        let a = rec.start_with("User: Select", Category::DATABASE);
        let b = rec.start(String::from("owned label"));
        let keys = vec![a.key().unwrap(), b.key().unwrap()];
        drop(b);
        drop(a);
        expected.push((root.key().unwrap(), keys));
        let ctx = root.context().unwrap();
        assert_eq!(ctx.id(), root.key().unwrap().id);
        assert!(ctx.is_sampled());
    }
    assert!(rec.current_context().is_none(), "all roots ended");
    drop(rec);
    let log = read_log(dir.path());
    let starts = log.start_map();
    assert_eq!(log.starts.len(), 9);
    let mut contexts = HashSet::new();
    for (root, children) in &expected {
        assert_eq!(
            starts[root].context, root.id,
            "a root's context is its own id"
        );
        contexts.insert(root.id);
        for c in children {
            assert_eq!(starts[c].context, root.id);
        }
    }
    assert_eq!(contexts.len(), 3);
    let db: Vec<_> = log.starts.iter().filter(|s| s.category == 8).collect();
    assert_eq!(db.len(), 3);
    assert!(db.iter().all(|s| s.label == "User: Select"));
    assert_eq!(
        log.starts
            .iter()
            .filter(|s| s.label == "owned label")
            .count(),
        3
    );
}

#[test]
fn ending_twice_is_harmless_and_frames_out_of_order_still_pair() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Stopwatch::builder().dir(dir.path()).build().unwrap();
    let mut a = rec.start("a");
    let b = rec.start("b");
    a.end();
    a.end();
    drop(a);
    drop(b); // ended after its parent
    let c = rec.start("c"); // a new root: the previous context was left
    let c_key = c.key().unwrap();
    drop(c);
    drop(rec);
    let log = read_log(dir.path());
    assert_eq!(log.starts.len(), 3);
    assert_eq!(log.end_records, 3);
    assert_eq!(log.start_map()[&c_key].context, c_key.id);
}

#[test]
fn contexts_cross_threads() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Stopwatch::builder().dir(dir.path()).build().unwrap();
    let root = rec.start("request");
    let ctx = root.context().unwrap();
    let root_id = root.key().unwrap().id;
    std::thread::scope(|s| {
        for i in 0..4 {
            let ctx = ctx.clone();
            let rec = &rec;
            s.spawn(move || {
                // Without entering, a frame on another thread opens its own context.
                let own = rec.start("unrelated");
                assert_eq!(own.context().unwrap().id(), own.key().unwrap().id);
                drop(own);
                ctx.run(|| {
                    let _f = rec.start(format!("worker {i}"));
                    let _g = rec.start("inner");
                });
                // Leaving restored the thread's state: new root again.
                let after = rec.start("after");
                assert_eq!(after.context().unwrap().id(), after.key().unwrap().id);
            });
        }
    });
    drop(root);
    drop(rec);
    let log = read_log(dir.path());
    let in_request: Vec<_> = log.starts.iter().filter(|s| s.context == root_id).collect();
    // The root, 4 "worker i" and 4 "inner".
    assert_eq!(in_request.len(), 9);
    let threads: HashSet<u32> = in_request.iter().map(|s| s.thread).collect();
    assert_eq!(threads.len(), 5, "root thread + 4 workers");
    assert_eq!(
        log.starts
            .iter()
            .filter(|s| s.label == "unrelated" && s.context == s.key.id)
            .count(),
        4
    );
}

#[test]
fn async_frames_cover_the_awaited_duration_and_propagate_on_a_multi_thread_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let rec = std::sync::Arc::new(Stopwatch::builder().dir(dir.path()).build().unwrap());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .unwrap();
    const TASKS: usize = 40;
    let roots: Vec<u32> = rt.block_on(async {
        let mut handles = Vec::new();
        for i in 0..TASKS {
            let rec = rec.clone();
            let root = rec.start_with(format!("request {i}"), Category::HTTP);
            let root_id = root.key().unwrap().id;
            let r2 = rec.clone();
            let fut = async move {
                {
                    let _q = r2.start_with("User: Select", Category::DATABASE);
                }
                tokio::time::sleep(Duration::from_millis(30)).await;
                tokio::task::yield_now().await;
                // A sub-task on any worker, in the same context.
                let sub = r2.start("sub-task");
                let r3 = r2.clone();
                tokio::spawn(
                    async move {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        let _x = r3.start("in sub-task");
                    }
                    .in_frame(sub),
                )
                .await
                .unwrap();
                // A blocking section on a different thread, in the same context.
                let ctx = stopwatch_ctx(&r2);
                let r4 = r2.clone();
                tokio::task::spawn_blocking(move || {
                    let _g = ctx.enter();
                    let _f = r4.start("blocking");
                })
                .await
                .unwrap();
                let _t = r2.start_with("render", Category::TEMPLATE);
            };
            handles.push((root_id, tokio::spawn(root.instrument(fut))));
        }
        let mut ids = Vec::new();
        for (id, h) in handles {
            h.await.unwrap();
            ids.push(id);
        }
        ids
    });
    drop(rt);
    let rec = std::sync::Arc::into_inner(rec).expect("all tasks done");
    drop(rec);

    let log = read_log(dir.path());
    let starts = log.start_map();
    let mut by_ctx: HashMap<u32, Vec<&common::Start>> = HashMap::new();
    for s in &log.starts {
        by_ctx.entry(s.context).or_default().push(s);
    }
    let mut threads_seen = HashSet::new();
    for id in &roots {
        let frames = &by_ctx[id];
        let mut labels: Vec<&str> = frames
            .iter()
            .map(|s| s.label.as_str())
            .filter(|l| !l.starts_with("request "))
            .collect();
        labels.sort_unstable();
        assert_eq!(
            labels,
            [
                "User: Select",
                "blocking",
                "in sub-task",
                "render",
                "sub-task"
            ],
            "context {id}"
        );
        assert_eq!(frames.len(), 6, "the request frame itself");
        // The root frame covers the whole awaited duration, not just the first poll.
        let key = formats::FrameKey::new(rec_worker(&log), *id);
        let start = starts[&key].timestamp;
        let end = log.ends[&key].0;
        assert!(end - start >= 35_000_000, "root lasted {} ns", end - start);
        // And every frame of the context lies inside it.
        for f in frames {
            let e = log.ends[&f.key].0;
            assert!(f.timestamp >= start && e <= end);
            threads_seen.insert(f.thread);
        }
    }
    assert_eq!(by_ctx.len(), TASKS, "no stray contexts");
    // Polled on several workers (and the blocking pool).
    assert!(threads_seen.len() >= 2, "{threads_seen:?}");
}

fn stopwatch_ctx(rec: &stopwatch::Recorder) -> stopwatch::Context {
    rec.current_context()
        .expect("inside the instrumented frame")
}

fn rec_worker(log: &common::Log) -> u8 {
    log.starts[0].key.worker
}

#[test]
fn without_an_installed_stopwatch_frames_are_inert() {
    // This test binary never installs a global stopwatch.
    assert!(!Stopwatch::is_installed());
    let f = Stopwatch::start("nothing");
    assert!(!f.is_recording());
    assert!(f.key().is_none());
    f.data(&serde_json::json!({"x": 1}));
    assert!(f.context().is_none());
    assert!(Stopwatch::current_context().is_none());
    assert!(!Stopwatch::flush(Duration::from_millis(10)));
}

thread_local! {
    // Registered before the stopwatch's own thread state, so destroyed after it.
    static HELD_FRAME: std::cell::RefCell<Option<stopwatch::Frame>> =
        const { std::cell::RefCell::new(None) };
    static HELD_FUTURE: std::cell::RefCell<Option<Box<dyn std::any::Any>>> =
        const { std::cell::RefCell::new(None) };
}

#[test]
fn frames_ended_by_a_thread_local_destructor_after_the_stopwatch_state_reach_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let rec = std::sync::Arc::new(Stopwatch::builder().dir(dir.path()).build().unwrap());
    // An instrumented future started here and dropped on the other thread during its exit
    // (as a runtime's worker drops the tasks it still holds).
    let fut = rec.start("task").instrument(async {});
    let r = rec.clone();
    std::thread::spawn(move || {
        HELD_FRAME.with(|_| {});
        HELD_FUTURE.with(|h| *h.borrow_mut() = Some(Box::new(fut)));
        // First use of the stopwatch on this thread: its state is destroyed before the two
        // thread-locals above, which then end their frames.
        let frame = r.start("guard");
        HELD_FRAME.with(|h| *h.borrow_mut() = Some(frame));
    })
    .join()
    .unwrap();
    // The thread is joined: its thread-local destructors have run.
    drop(rec);
    let log = read_log(dir.path());
    let ended: HashSet<&str> = log
        .starts
        .iter()
        .filter(|s| log.ends.contains_key(&s.key))
        .map(|s| s.label.as_str())
        .collect();
    assert_eq!(ended, HashSet::from(["task", "guard"]), "{log:?}");
}
