//! `TracingLayer` with real `tracing` spans: `#[instrument]` async fns on a multi-thread tokio
//! runtime (frames cover whole lives across `.await`s and threads), explicit parents,
//! `follows_from`, out-of-order exits, spans closed on other threads, per-layer filters. This
//! binary has no `CountingAlloc`: no span gets a FrameAlloc (see `tracing_allocs.rs`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use formats::{Category, FrameKey, Parent, Record};
use framelog::{DataStore, LogReader};
use stopwatch::{Recorder, Stopwatch, TracingLayer};
use tracing::{info, info_span, instrument};
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::prelude::*;

#[derive(Debug, Clone)]
struct F {
    key: FrameKey,
    label: String,
    category: Category,
    context: u32,
    parent: Parent,
    start: u64,
    end: u64,
}

/// The frames in the log: (ended, still open). An end may come before its start in the file
/// (a span closed on another thread than the one it began on: two buffers).
fn read(dir: &std::path::Path) -> (Vec<F>, Vec<F>) {
    let mut starts: HashMap<FrameKey, F> = HashMap::new();
    let mut ends: HashMap<FrameKey, u64> = HashMap::new();
    LogReader::open(dir)
        .unwrap()
        .read_available(|_, r| match r {
            Record::Start(s) => {
                let key = FrameKey::new(s.worker, s.id);
                starts.insert(
                    key,
                    F {
                        key,
                        label: s.label.to_owned(),
                        category: s.category,
                        context: s.context,
                        parent: s.parent,
                        start: s.timestamp,
                        end: 0,
                    },
                );
            }
            Record::End(e) => {
                ends.insert(FrameKey::new(e.worker, e.id), e.timestamp);
            }
            // This binary has no `CountingAlloc`: spans count nothing.
            Record::FrameAlloc(a) => panic!("a FrameAlloc without CountingAlloc: {a:?}"),
            _ => {}
        })
        .unwrap();
    let (mut done, mut open) = (Vec::new(), Vec::new());
    for (key, mut f) in starts {
        match ends.get(&key) {
            Some(&end) => {
                f.end = end;
                done.push(f);
            }
            None => open.push(f),
        }
    }
    (done, open)
}

/// The log's frames once `count` of them have ended and none is open. Polls: a runtime's
/// worker threads may still be exiting (and ending the frames they drop) after the runtime
/// is dropped.
fn frames(rec: &Recorder, dir: &std::path::Path, count: usize) -> Vec<F> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        rec.flush(Duration::from_secs(10));
        let (done, open) = read(dir);
        if done.len() >= count && open.is_empty() {
            return done;
        }
        assert!(
            Instant::now() < deadline,
            "every span's frame ends: {} ended, open: {open:?}",
            done.len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn recorder(dir: &std::path::Path) -> Arc<Recorder> {
    Arc::new(Stopwatch::builder().dir(dir).build().unwrap())
}

#[instrument]
async fn handle(id: u32) {
    tokio::time::sleep(Duration::from_millis(5)).await;
    query(id).await;
    info!(rows = 3, "loaded");
}

#[instrument(fields(category = "database"))]
async fn query(id: u32) {
    // Yield to the other requests, possibly resuming on another worker thread.
    tokio::time::sleep(Duration::from_millis(10)).await;
    tokio::task::yield_now().await;
}

#[test]
fn instrumented_async_fns_are_one_frame_per_span_life_nested_in_their_request() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    let dispatch =
        tracing::Dispatch::new(tracing_subscriber::registry().with(TracingLayer::new(&rec)));
    let d = dispatch.clone();
    // Every runtime thread gets the subscriber (a guard leaked per thread, as a global
    // default would be, without making this test binary's other tests share it).
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d)))
        .build()
        .unwrap();
    tracing::dispatcher::with_default(&dispatch, || {
        rt.block_on(async {
            let tasks: Vec<_> = (1..=4).map(|id| tokio::spawn(handle(id))).collect();
            for t in tasks {
                t.await.unwrap();
            }
        })
    });
    drop(rt);
    let all = frames(&rec, dir.path(), 8);
    let handles: Vec<&F> = all.iter().filter(|f| f.label == "handle").collect();
    let queries: Vec<&F> = all.iter().filter(|f| f.label == "query").collect();
    assert_eq!((handles.len(), queries.len()), (4, 4), "{all:?}");
    let mut store = DataStore::open(dir.path()).unwrap();
    for h in &handles {
        assert_eq!(
            h.context, h.key.id,
            "a span without a parent opens a context"
        );
        assert!(
            h.end - h.start >= 15_000_000,
            "whole life across awaits: {h:?}"
        );
        let data = store.get(h.key).unwrap().expect("fields and events");
        let id = data.get_i64("id").unwrap();
        let q = queries
            .iter()
            .find(|q| q.context == h.key.id)
            .expect("the query runs in its request's context");
        assert_eq!(q.category, Category::DATABASE, "the category field");
        assert_eq!(h.parent, Parent::Root);
        assert_eq!(
            q.parent,
            Parent::Frame(h.key.id),
            "the query's parent is its request"
        );
        assert!(q.end - q.start >= 10_000_000, "{q:?}");
        assert!(
            q.start >= h.start && q.end <= h.end,
            "the query inside its request"
        );
        let qdata = store.get(q.key).unwrap().unwrap();
        assert_eq!(qdata.get_i64("id").unwrap(), id);
        let events = data.get_array("events").unwrap();
        let ev = events[0].as_document().unwrap();
        assert_eq!(ev.get_str("message").unwrap(), "loaded");
        assert_eq!(ev.get_i64("rows").unwrap(), 3);
        assert_eq!(ev.get_str("level").unwrap(), "INFO");
        // The event's own time (ns since the Unix epoch, the frames' clock), which the OTLP
        // export gives its span event: after the query it follows, within the request.
        let t = ev.get_i64("time_unix_nano").unwrap() as u64;
        assert!(q.end <= t && t <= h.end, "{} ≤ {t} ≤ {}", q.end, h.end);
    }
}

#[test]
fn field_types_records_that_replace_and_events_beyond_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    let subscriber = tracing_subscriber::registry().with(TracingLayer::new(&rec));
    let before = stopwatch::clock::now_ns();
    tracing::subscriber::with_default(subscriber, || {
        let span = info_span!(
            "typed",
            int = -7i64,
            big = u64::MAX,
            float = 1.5f64,
            yes = true,
            text = "a\0b",
            took = ?Duration::from_millis(1500),
            status = tracing::field::Empty,
            events = "a field named like the events array",
            category = 5u64,
            "cut\0here" = 1i64,
        );
        span.record("int", 8i64);
        span.record("status", 200u64);
        span.in_scope(|| {
            for i in 0..40u64 {
                info!(i, "event {i}");
            }
        });
        // Recorded after the events: replaces the earlier value all the same.
        span.record("status", 503u64);
    });
    let after = stopwatch::clock::now_ns();
    let all = frames(&rec, dir.path(), 1);
    assert_eq!(all[0].category, Category(5), "an integer category field");
    let d = DataStore::open(dir.path())
        .unwrap()
        .get(all[0].key)
        .unwrap()
        .unwrap();
    assert_eq!(
        d.get_i64("int").unwrap(),
        8,
        "recorded again: the later value"
    );
    assert_eq!(d.get_str("big").unwrap(), u64::MAX.to_string());
    assert_eq!(d.get_f64("float").unwrap(), 1.5);
    assert!(d.get_bool("yes").unwrap());
    assert_eq!(d.get_str("text").unwrap(), "a\0b");
    assert_eq!(d.get_str("took").unwrap(), "1.5s");
    assert_eq!(d.get_i64("status").unwrap(), 503);
    assert_eq!(d.get_i64("category").unwrap(), 5);
    assert_eq!(
        d.get_i64("cut").unwrap(),
        1,
        "a name is cut at a NUL (BSON names end there)"
    );
    let names: Vec<&str> = d.keys().map(String::as_str).collect();
    assert_eq!(
        names
            .iter()
            .filter(|k| **k == "int" || **k == "status")
            .count(),
        2,
        "one entry per name: {names:?}"
    );
    let events = d.get_array("events").unwrap();
    assert_eq!(events.len(), 32);
    assert_eq!(d.get_i64("events_dropped").unwrap(), 8);
    let mut last = before;
    for (i, e) in events.iter().enumerate() {
        let e = e.as_document().unwrap();
        assert_eq!(e.get_str("message").unwrap(), format!("event {i}"));
        assert_eq!(e.get_i64("i").unwrap(), i as i64);
        assert_eq!(e.get_str("target").unwrap(), module_path!());
        let t = e.get_i64("time_unix_nano").unwrap() as u64;
        assert!(
            last <= t && t <= after,
            "in order, in the run: {last} ≤ {t} ≤ {after}"
        );
        last = t;
    }
}

/// A layer without a filter: it enables every span.
struct SeesAll;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for SeesAll {}

#[test]
fn explicit_parents_follows_from_out_of_order_exits_other_threads_and_filters() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    let layer = TracingLayer::new(&rec)
        .category_for("jobs", Category::JOB)
        .with_filter(filter_fn(|m| m.name() != "hidden"));
    // Another layer (a log formatter, say) sees every span, so `hidden` exists; with no
    // layer wanting it, tracing would not create it and its children would be roots.
    let subscriber = tracing_subscriber::registry().with(layer).with(SeesAll);
    tracing::subscriber::with_default(subscriber, || {
        let cause = info_span!("cause");
        let root = info_span!("root", user = "ada");
        // An explicit parent, though no span is entered.
        let child = info_span!(parent: &root, "child");
        child.follows_from(&cause);
        // Entered out of order, exited out of order.
        let r = root.clone().entered();
        let c = child.clone().entered();
        drop(r);
        drop(c);
        // A span the layer's filter hides: its child attaches to the nearest recorded span.
        let hidden = info_span!(parent: &root, "hidden");
        let grandchild = info_span!(target: "jobs::nightly", parent: &hidden, "grandchild",
                                    user = tracing::field::Empty);
        grandchild.record("user", "bob");
        // Closed on another thread, while this one records on.
        let moved = child.clone();
        std::thread::spawn(move || drop(moved)).join().unwrap();
        drop((cause, root, child, hidden, grandchild));
    });
    let all = frames(&rec, dir.path(), 4);
    let by: HashMap<&str, &F> = all.iter().map(|f| (f.label.as_str(), f)).collect();
    assert!(!by.contains_key("hidden"), "filtered out: {all:?}");
    let (root, child, gc) = (by["root"], by["child"], by["grandchild"]);
    assert_eq!(child.context, root.key.id, "explicit parent");
    assert_eq!(child.parent, Parent::Frame(root.key.id), "explicit parent");
    assert_eq!(
        gc.context, root.key.id,
        "through the hidden span to the recorded one"
    );
    assert_eq!(
        gc.parent,
        Parent::Frame(root.key.id),
        "through the hidden span to the recorded one"
    );
    assert_eq!(
        (root.parent, by["cause"].parent),
        (Parent::Root, Parent::Root)
    );
    assert_eq!(gc.category, Category::JOB, "category by target prefix");
    let mut store = DataStore::open(dir.path()).unwrap();
    let d = store.get(child.key).unwrap().unwrap();
    let cause = by["cause"];
    assert_eq!(
        d.get_array("follows_from").unwrap()[0].as_str().unwrap(),
        format!("{}:{}", cause.key.worker, cause.key.id)
    );
    assert_eq!(
        store.get(gc.key).unwrap().unwrap().get_str("user").unwrap(),
        "bob"
    );
    assert_eq!(
        store
            .get(root.key)
            .unwrap()
            .unwrap()
            .get_str("user")
            .unwrap(),
        "ada"
    );
}

#[instrument(skip_all, fields(request = id))]
async fn request(id: u32) {
    // Contextual children, each after an await (the task may resume on the other worker).
    tokio::task::yield_now().await;
    load(id).await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    render(id).await;
    // An explicit parent, the span created on a pool thread.
    let me = tracing::Span::current();
    tokio::task::spawn_blocking(move || {
        let _s = info_span!(parent: &me, "explicit", request = id).entered();
    })
    .await
    .unwrap();
    // `parent: None`: a root, in a context of its own, though created inside the request.
    let background = info_span!(parent: None, "background", request = id);
    tracing::Instrument::instrument(
        async {
            tokio::task::yield_now().await;
            // Its own contextual child.
            render(id).await;
        },
        background,
    )
    .await;
}

#[instrument(skip_all, fields(request = id))]
async fn load(id: u32) {
    tokio::time::sleep(Duration::from_millis(1)).await;
    db(id).await;
    tokio::task::yield_now().await;
    db(id).await;
}

#[instrument(skip_all, fields(request = id, category = "database"))]
async fn db(id: u32) {
    tokio::task::yield_now().await;
    tokio::time::sleep(Duration::from_millis(1)).await;
}

#[instrument(skip_all, fields(request = id))]
async fn render(id: u32) {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

#[test]
fn every_span_frame_names_its_tracing_parent_across_awaits_and_threads() {
    const REQUESTS: usize = 16;
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    let dispatch =
        tracing::Dispatch::new(tracing_subscriber::registry().with(TracingLayer::new(&rec)));
    let d = dispatch.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d)))
        .build()
        .unwrap();
    tracing::dispatcher::with_default(&dispatch, || {
        rt.block_on(async {
            let tasks: Vec<_> = (0..REQUESTS as u32)
                .map(|id| tokio::spawn(request(id)))
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        })
    });
    drop(rt);
    // Per request: request, load, 2 db, render, explicit, background and its render.
    let all = frames(&rec, dir.path(), REQUESTS * 8);
    let mut store = DataStore::open(dir.path()).unwrap();
    let by_key: HashMap<FrameKey, &F> = all.iter().map(|f| (f.key, f)).collect();
    let parent_of = |f: &F| match f.parent {
        Parent::Frame(id) => Some(by_key[&FrameKey::new(f.key.worker, id)]),
        Parent::Root => None,
        Parent::NotRecorded => panic!("a parent is recorded: {f:?}"),
    };
    let mut per_request: HashMap<i64, Vec<&F>> = HashMap::new();
    for f in &all {
        let data = store.get(f.key).unwrap().expect("the request field");
        per_request
            .entry(data.get_i64("request").unwrap())
            .or_default()
            .push(f);
    }
    assert_eq!(per_request.len(), REQUESTS);
    for (id, frames) in &per_request {
        let one = |label: &str| -> Vec<&F> {
            frames
                .iter()
                .copied()
                .filter(|f| f.label == label)
                .collect()
        };
        let (req, load, explicit, background) = (
            one("request")[0],
            one("load")[0],
            one("explicit")[0],
            one("background")[0],
        );
        assert_eq!(req.parent, Parent::Root, "request {id}");
        assert_eq!(req.context, req.key.id, "request {id}");
        for (child, parent) in [(load, req), (explicit, req)] {
            assert_eq!(
                parent_of(child).map(|p| p.key),
                Some(parent.key),
                "request {id}: {child:?}"
            );
            assert_eq!(child.context, req.key.id, "request {id}: {child:?}");
        }
        let dbs = one("db");
        assert_eq!(dbs.len(), 2);
        for db in dbs {
            assert_eq!(parent_of(db).map(|p| p.key), Some(load.key), "request {id}");
            assert_eq!(db.context, req.key.id);
        }
        assert_eq!(background.parent, Parent::Root, "parent: None is a root");
        assert_eq!(
            background.context, background.key.id,
            "parent: None opens a context of its own"
        );
        let renders = one("render");
        assert_eq!(renders.len(), 2);
        let parents: Vec<FrameKey> = renders
            .iter()
            .map(|r| parent_of(r).expect("a parent").key)
            .collect();
        assert!(
            parents.contains(&req.key) && parents.contains(&background.key),
            "request {id}: one render under the request, one under the background span"
        );
        for r in renders {
            assert_eq!(r.context, parent_of(r).unwrap().context);
        }
    }
}

#[test]
fn a_span_without_a_tracing_parent_is_a_child_of_the_current_frame_unless_parent_none() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    let subscriber = tracing_subscriber::registry().with(TracingLayer::new(&rec));
    let (outer, inner) = tracing::subscriber::with_default(subscriber, || {
        let outer = rec.start("outer");
        let inner = rec.start("inner");
        // Contextual, with no current span: under the thread's current frame.
        drop(info_span!("contextual").entered());
        // Explicitly no parent: a root of its own context, whatever the thread is in.
        drop(info_span!(parent: None, "root").entered());
        // After both, the thread's frames are as they were.
        let after = rec.start("after");
        drop(after);
        (outer.key().unwrap(), inner.key().unwrap())
    });
    let all = frames(&rec, dir.path(), 5);
    let by: HashMap<&str, &F> = all.iter().map(|f| (f.label.as_str(), f)).collect();
    assert_eq!(by["outer"].parent, Parent::Root);
    assert_eq!(by["inner"].parent, Parent::Frame(outer.id));
    assert_eq!(by["contextual"].parent, Parent::Frame(inner.id));
    assert_eq!(by["contextual"].context, outer.id);
    assert_eq!(by["root"].parent, Parent::Root);
    assert_eq!(by["root"].context, by["root"].key.id);
    assert_eq!(by["after"].parent, Parent::Frame(inner.id));
    assert_eq!(by["after"].context, outer.id);
}

#[test]
fn events_become_messages_in_their_spans_frame_and_outside_spans_in_the_threads() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    let subscriber = tracing_subscriber::registry().with(TracingLayer::new(&rec));
    let outer_key = tracing::subscriber::with_default(subscriber, || {
        tracing::warn!(code = 7, "outside any span");
        let outer = rec.start("plain frame");
        tracing::info!("in a plain frame");
        let span = info_span!("request", id = 1);
        span.in_scope(|| {
            tracing::error!(user = "ann", retries = 3u64, "failed after {} tries", 3);
            // An event on another thread, in a span entered there, names that span's frame.
            let inner = info_span!("inner");
            let dispatch = tracing::dispatcher::get_default(|d| d.clone());
            std::thread::scope(|s| {
                s.spawn(|| {
                    tracing::dispatcher::with_default(&dispatch, || {
                        inner.in_scope(|| tracing::debug!(message = "on a thread"))
                    })
                });
            });
        });
        outer.key().unwrap()
    });
    let all = frames(&rec, dir.path(), 3);
    let by_label = |l: &str| all.iter().find(|f| f.label == l).unwrap().clone();
    let (request, inner) = (by_label("request"), by_label("inner"));
    let mut got = Vec::new();
    LogReader::open(dir.path())
        .unwrap()
        .read_available(|_, r| {
            if let Record::Message(m) = r {
                let f = bson::Document::from_reader(&mut m.fields.unwrap()).unwrap();
                got.push((m.frame, m.context, m.level, m.text.to_owned(), f));
            }
        })
        .unwrap();
    got.sort_by_key(|m| m.3 == "on a thread");
    let t = module_path!();
    use formats::Level;
    assert_eq!(
        got,
        vec![
            (
                0,
                0,
                Level::WARN,
                "outside any span".into(),
                bson::doc! {"code": 7_i64, "target": t}
            ),
            (
                outer_key.id,
                outer_key.id,
                Level::INFO,
                "in a plain frame".into(),
                bson::doc! {"target": t}
            ),
            (
                request.key.id,
                request.context,
                Level::ERROR,
                "failed after 3 tries".into(),
                bson::doc! {"user": "ann", "retries": 3_i64, "target": t}
            ),
            (
                inner.key.id,
                inner.context,
                Level::DEBUG,
                "on a thread".into(),
                bson::doc! {"target": t}
            ),
        ]
    );
    assert_eq!(inner.context, request.context);
    // The events stay in the span's frame data too.
    let mut data = framelog::DataStore::open(dir.path()).unwrap();
    let doc = data.get(request.key).unwrap().unwrap();
    assert_eq!(doc.get_array("events").unwrap().len(), 1);
}

#[test]
fn without_counting_alloc_a_span_that_allocates_records_no_frame_alloc() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    let subscriber = tracing_subscriber::registry().with(TracingLayer::new(&rec));
    tracing::subscriber::with_default(subscriber, || {
        let span = info_span!("allocates");
        span.in_scope(|| {
            let v = Vec::<u8>::with_capacity(1 << 20);
            std::hint::black_box(&v);
        });
        span.in_scope(|| std::hint::black_box(vec![0u8; 4096]).len());
    });
    let all = frames(&rec, dir.path(), 1);
    assert_eq!(all[0].label, "allocates");
    let mut allocs = 0;
    LogReader::open(dir.path())
        .unwrap()
        .read_available(|_, r| {
            if matches!(r, Record::FrameAlloc(_)) {
                allocs += 1;
            }
        })
        .unwrap();
    assert_eq!(
        allocs, 0,
        "no FrameAlloc (type 9) record without CountingAlloc"
    );
}

#[test]
fn an_event_with_a_field_too_big_for_a_record_keeps_its_other_fields_and_target() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    let subscriber = tracing_subscriber::registry().with(TracingLayer::new(&rec));
    let big = "b".repeat(1 << 20);
    tracing::subscriber::with_default(subscriber, || {
        tracing::warn!(blob = %big, user = 7, "too big");
    });
    rec.flush(Duration::from_secs(10));
    let mut got = Vec::new();
    LogReader::open(dir.path())
        .unwrap()
        .read_available(|_, r| {
            if let Record::Message(m) = r {
                got.push((
                    m.text.to_owned(),
                    m.fields.map(|f| bson::Document::from_reader(f).unwrap()),
                ));
            }
        })
        .unwrap();
    assert_eq!(got.len(), 1, "{got:?}");
    let (text, fields) = &got[0];
    assert_eq!(text, "too big");
    let fields = fields.as_ref().expect("the fields that fit are kept");
    assert_eq!(fields.get_str("target"), Ok(module_path!()));
    assert_eq!(fields.get_i64("user"), Ok(7));
    assert!(fields.get("blob").is_none());
    assert!(
        fields.get_str("cut_fields").unwrap().starts_with("blob ("),
        "{fields}"
    );
}

#[test]
fn a_stopwatch_frame_started_inside_an_entered_span_is_the_spans_child() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    let subscriber = tracing_subscriber::registry().with(TracingLayer::new(&rec));
    tracing::subscriber::with_default(subscriber, || {
        let _outer = rec.start("outer frame");
        let span = info_span!("instrumented");
        span.in_scope(|| {
            // Mixed code: an `#[instrument]` fn calling code that uses the stopwatch.
            let inner = rec.start("inner frame");
            drop(info_span!("span in frame").entered());
            drop(inner);
        });
        // After the span is left, the thread's current frame is the outer one again.
        drop(rec.start("after"));
    });
    let all = frames(&rec, dir.path(), 5);
    let by: HashMap<&str, &F> = all.iter().map(|f| (f.label.as_str(), f)).collect();
    let id = |l: &str| by[l].key.id;
    assert_eq!(by["instrumented"].parent, Parent::Frame(id("outer frame")));
    assert_eq!(
        by["inner frame"].parent,
        Parent::Frame(id("instrumented")),
        "the innermost of span and frame is the parent"
    );
    assert_eq!(by["span in frame"].parent, Parent::Frame(id("inner frame")));
    assert_eq!(by["after"].parent, Parent::Frame(id("outer frame")));
    for f in &all {
        assert_eq!(f.context, id("outer frame"), "one context: {f:?}");
    }
}
