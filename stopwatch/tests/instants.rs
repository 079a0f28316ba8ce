//! Plots, messages and frame allocations read back from a real log directory with
//! `framelog::LogReader`: values, units and modes; messages in their frame and context
//! (inside an `in_frame` future polled on two threads too); allocation counts of frames that
//! allocate a known number of boxes and strings; random sequences (proptest).
//!
//! This test binary runs under `CountingAlloc` (its global allocator).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, Wake};
use std::time::{Duration, Instant};

use formats::{FrameAlloc, FrameKey, Level, PlotMode, PlotUnit, Record};
use framelog::LogReader;
use proptest::prelude::*;
use stopwatch::{CountingAlloc, FutureExt, Recorder, Stopwatch};

#[global_allocator]
static ALLOC: CountingAlloc<std::alloc::System> = CountingAlloc::new(std::alloc::System);

/// A plot as read back (owned).
#[derive(Debug, Clone, PartialEq)]
struct P {
    name: String,
    value: u64, // f64 bits: NaN compares equal to itself
    mode: PlotMode,
    unit: PlotUnit,
}

/// A message as read back (owned).
#[derive(Debug, Clone, PartialEq)]
struct M {
    frame: u32,
    context: u32,
    level: Level,
    text: String,
    fields: Option<bson::Document>,
}

#[derive(Default)]
struct Log {
    plots: Vec<P>,
    messages: Vec<M>,
    allocs: HashMap<FrameKey, FrameAlloc>,
    /// Label and context of every frame.
    starts: HashMap<String, (FrameKey, u32)>,
    /// Allocation records that came after their frame's end.
    late_allocs: usize,
    /// The order of records, as (kind, frame) pairs, for order checks.
    ends: Vec<FrameKey>,
}

/// Everything in `dir`, in file order (a recorder writes one thread's records in order).
fn read(dir: &std::path::Path) -> Log {
    let mut log = Log::default();
    LogReader::open(dir)
        .unwrap()
        .read_available(|_, r| match r {
            Record::Plot(p) => log.plots.push(P {
                name: p.name.to_owned(),
                value: p.value.to_bits(),
                mode: p.mode,
                unit: p.unit,
            }),
            Record::Message(m) => log.messages.push(M {
                frame: m.frame,
                context: m.context,
                level: m.level,
                text: m.text.to_owned(),
                fields: m
                    .fields
                    .map(|f| bson::Document::from_reader(&mut &f[..]).unwrap()),
            }),
            Record::FrameAlloc(a) => {
                let key = FrameKey::new(a.worker, a.id);
                if log.ends.contains(&key) {
                    log.late_allocs += 1;
                }
                assert!(log.allocs.insert(key, a).is_none(), "one record per frame");
            }
            Record::Start(s) => {
                log.starts.insert(
                    s.label.to_owned(),
                    (FrameKey::new(s.worker, s.id), s.context),
                );
            }
            Record::End(e) => log.ends.push(FrameKey::new(e.worker, e.id)),
            _ => {}
        })
        .unwrap();
    log
}

fn recorder(dir: &std::path::Path) -> Recorder {
    Stopwatch::builder().dir(dir).build().unwrap()
}

fn p(name: &str, value: f64, mode: PlotMode, unit: PlotUnit) -> P {
    P {
        name: name.to_owned(),
        value: value.to_bits(),
        mode,
        unit,
    }
}

#[test]
fn plots_and_series_read_back_with_their_values_units_and_modes() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    rec.plot("queue depth", 12.0);
    rec.plot("queue depth", f64::NAN);
    let bytes = rec.series("bytes in flight").unit(PlotUnit::BYTES).summed();
    assert_eq!(bytes.add(4096.0), 4096.0);
    assert_eq!(bytes.add(-1024.0), 3072.0);
    bytes.set(10.0);
    let lat = rec.series("latency").unit(PlotUnit::NANOS);
    lat.set(1.5e6);
    // Shared between threads: every delta lands in the running sum.
    let shared = Arc::new(rec.series("hits").summed());
    std::thread::scope(|s| {
        for _ in 0..4 {
            let shared = shared.clone();
            s.spawn(move || {
                for _ in 0..250 {
                    shared.add(1.0);
                }
            });
        }
    });
    assert_eq!(shared.value(), 1000.0);
    drop(rec);
    let log = read(dir.path());
    let (value, summed) = (PlotMode::Value, PlotMode::Summed);
    let mine: Vec<P> = log
        .plots
        .iter()
        .filter(|p| p.name != "hits")
        .cloned()
        .collect();
    assert_eq!(
        mine,
        vec![
            p("queue depth", 12.0, value, PlotUnit::COUNT),
            p("queue depth", f64::NAN, value, PlotUnit::COUNT),
            p("bytes in flight", 4096.0, summed, PlotUnit::BYTES),
            p("bytes in flight", 3072.0, summed, PlotUnit::BYTES),
            p("bytes in flight", 10.0, summed, PlotUnit::BYTES),
            p("latency", 1.5e6, value, PlotUnit::NANOS),
        ]
    );
    let mut hits: Vec<f64> = log
        .plots
        .iter()
        .filter(|p| p.name == "hits")
        .map(|p| f64::from_bits(p.value))
        .collect();
    hits.sort_by(f64::total_cmp);
    // Each value is the sum after one delta: exactly 1 to 1000, once each.
    assert_eq!(hits, (1..=1000).map(f64::from).collect::<Vec<_>>());
}

#[test]
fn messages_name_the_innermost_frame_and_its_context_and_carry_fields() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    rec.message("outside");
    {
        let _root = rec.start("root");
        rec.message_at(Level::WARN, "in root");
        {
            let child = rec.start("child");
            rec.message_with(
                Level::ERROR,
                "in child",
                &serde_json::json!({"user": 42, "why": "cache miss"}),
            );
            // Another thread entering the child's context writes in the child.
            let ctx = child.context().unwrap();
            std::thread::scope(|s| {
                s.spawn(|| {
                    let _in = ctx.enter();
                    rec.message("on another thread");
                });
            });
        }
        rec.message_with(Level::DEBUG, "back in root", &7);
    }
    rec.message_at(Level::TRACE, "after");
    drop(rec);
    let log = read(dir.path());
    let (root, ctx) = log.starts["root"];
    let (child, child_ctx) = log.starts["child"];
    assert_eq!(ctx, root.id);
    assert_eq!(child_ctx, root.id);
    let m = |frame: u32, context: u32, level, text: &str, fields| M {
        frame,
        context,
        level,
        text: text.to_owned(),
        fields,
    };
    let mut got = log.messages.clone();
    // The other thread's buffer may be written before or after this one's.
    got.sort_by_key(|m| m.text == "on another thread");
    assert_eq!(
        got,
        vec![
            m(0, 0, Level::INFO, "outside", None),
            m(root.id, ctx, Level::WARN, "in root", None),
            m(
                child.id,
                ctx,
                Level::ERROR,
                "in child",
                Some(bson::doc! {"user": 42_i64, "why": "cache miss"})
            ),
            m(
                root.id,
                ctx,
                Level::DEBUG,
                "back in root",
                Some(bson::doc! {"value": 7_i32})
            ),
            m(0, 0, Level::TRACE, "after", None),
            m(child.id, ctx, Level::INFO, "on another thread", None),
        ]
    );
}

/// A future that is pending `n` times (waking itself), writing a message and allocating
/// `per_poll` strings at every poll.
struct Steps<'a> {
    rec: &'a Recorder,
    n: u32,
    per_poll: usize,
    kept: Vec<String>,
}

impl Future for Steps<'_> {
    type Output = usize;
    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<usize> {
        let this = &mut *self;
        this.rec.message(&format!("poll {}", this.n));
        for i in 0..this.per_poll {
            this.kept.push(i.to_string());
        }
        if this.n == 0 {
            return Poll::Ready(this.kept.len());
        }
        this.n -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

struct Noop;
impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

#[test]
fn an_in_frame_future_polled_on_two_threads_writes_in_its_frame_and_sums_its_allocations() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    let waker = Arc::new(Noop).into();
    let mut fut = Box::pin(
        Steps {
            rec: &rec,
            n: 3,
            per_poll: 100,
            kept: Vec::new(),
        }
        .in_frame(rec.start("request")),
    );
    // Outside the future, this thread is in no frame.
    rec.message("caller");
    let mut cx = TaskContext::from_waker(&waker);
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    // The rest of its polls on another thread.
    let done = std::thread::scope(|s| {
        s.spawn(move || {
            let mut cx = TaskContext::from_waker(&waker);
            loop {
                if let Poll::Ready(n) = fut.as_mut().poll(&mut cx) {
                    return n;
                }
            }
        })
        .join()
        .unwrap()
    });
    assert_eq!(done, 400);
    drop(rec);
    let log = read(dir.path());
    let (frame, ctx) = log.starts["request"];
    let polls: Vec<&M> = log
        .messages
        .iter()
        .filter(|m| m.text.starts_with("poll"))
        .collect();
    assert_eq!(polls.len(), 4);
    for m in polls {
        assert_eq!((m.frame, m.context), (frame.id, ctx), "{m:?}");
    }
    let caller = log.messages.iter().find(|m| m.text == "caller").unwrap();
    assert_eq!((caller.frame, caller.context), (0, 0));
    // 400 strings kept (each one allocation), 4 messages formatted, the Vec grown: all
    // counted, on both threads.
    let a = log.allocs[&frame];
    assert!(a.allocs >= 400 + 4, "{a:?}");
    assert!(a.alloc_bytes >= 400, "{a:?}");
    // Dropped when it completed, inside its last poll: every string was freed in it too.
    assert!(a.frees >= 400, "{a:?}");
    assert_eq!(log.late_allocs, 0, "written before the frame's end");
}

#[test]
fn an_in_frame_future_on_a_multi_thread_runtime_writes_in_its_frame() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Arc::new(recorder(dir.path()));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let r = rec.clone();
    let threads = rt.block_on(async move {
        let mut tasks = Vec::new();
        for i in 0..8 {
            let r = r.clone();
            let frame = r.start(format!("task {i}"));
            tasks.push(tokio::spawn(
                async move {
                    let mut threads = Vec::new();
                    for step in 0..5 {
                        threads.push(std::thread::current().id());
                        r.message(&format!("task {i} step {step}"));
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    threads
                }
                .in_frame(frame),
            ));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        all
    });
    drop(rt);
    let rec = Arc::into_inner(rec).unwrap();
    drop(rec);
    let log = read(dir.path());
    for i in 0..8 {
        let (frame, ctx) = log.starts[&format!("task {i}")];
        let mine: Vec<&M> = log
            .messages
            .iter()
            .filter(|m| m.text.starts_with(&format!("task {i} ")))
            .collect();
        assert_eq!(mine.len(), 5);
        for m in mine {
            assert_eq!((m.frame, m.context), (frame.id, ctx), "{m:?}");
        }
    }
    // Not asserted (the scheduler decides), but reported: how many workers polled them.
    let mut distinct = threads.clone();
    distinct.sort_by_key(|t| format!("{t:?}"));
    distinct.dedup();
    eprintln!("polled on {} threads", distinct.len());
}

#[test]
fn frame_allocations_count_the_frames_own_code_inclusively_and_nothing_for_idle_frames() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    // Registers this thread with the recorder first (its own allocations).
    drop(rec.start("warm-up"));
    {
        let _idle = rec.start("idle");
    }
    let kept;
    {
        let _parent = rec.start("parent");
        {
            let _boxes = rec.start("boxes");
            let v: Vec<Box<u64>> = (0..1000).map(Box::new).collect();
            std::hint::black_box(&v);
        }
        {
            let _strings = rec.start("strings");
            kept = (0..300)
                .map(|i| format!("user {i}"))
                .collect::<Vec<String>>();
        }
    }
    drop(rec);
    let log = read(dir.path());
    let key = |l: &str| log.starts[l].0;
    assert!(
        !log.allocs.contains_key(&key("idle")),
        "a frame that allocates nothing has no record: {:?}",
        log.allocs.get(&key("idle"))
    );
    let boxes = log.allocs[&key("boxes")];
    // 1000 boxes of 8 bytes, and the Vec holding them (8,000 bytes): all freed inside.
    assert!(boxes.allocs >= 1001, "{boxes:?}");
    assert!(boxes.alloc_bytes >= 1000 * 8 + 8000, "{boxes:?}");
    assert!(boxes.frees >= 1001, "{boxes:?}");
    assert!(boxes.freed_bytes >= 1000 * 8 + 8000, "{boxes:?}");
    let strings = log.allocs[&key("strings")];
    // 300 strings kept (freed after the frame) and the Vec.
    assert!(strings.allocs >= 301, "{strings:?}");
    assert!(
        strings.frees < strings.allocs,
        "the strings outlive it: {strings:?}"
    );
    let parent = log.allocs[&key("parent")];
    assert!(
        parent.allocs >= boxes.allocs + strings.allocs,
        "inclusive: {parent:?}"
    );
    assert!(parent.alloc_bytes >= boxes.alloc_bytes + strings.alloc_bytes);
    assert_eq!(log.late_allocs, 0, "each right before its frame's end");
    assert_eq!(kept.len(), 300);
}

/// One step of a random sequence.
#[derive(Debug, Clone)]
enum Op {
    Plot(usize, f64),
    Add(usize, f64),
    Message(u8, String, Option<i64>),
    Open(String),
    Close,
}

fn op() -> impl Strategy<Value = Op> {
    let text = "[a-z é€]{0,40}";
    prop_oneof![
        (0..3usize, any::<f64>()).prop_map(|(s, v)| Op::Plot(s, v)),
        (0..3usize, -1e6..1e6f64).prop_map(|(s, v)| Op::Add(s, v)),
        (1..=5u8, text, proptest::option::of(any::<i64>()))
            .prop_map(|(l, t, f)| Op::Message(l, t, f)),
        "[a-z]{1,8}".prop_map(Op::Open),
        Just(Op::Close),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random plots and messages, in random frames, read back exactly from a real file.
    #[test]
    fn random_plots_and_messages_read_back_exactly(ops in proptest::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        let rec = recorder(dir.path());
        let names = ["a", "b/c", "queue depth"];
        let series: Vec<_> = names.iter().map(|n| rec.series(*n).summed()).collect();
        let (mut want_plots, mut want_msgs) = (Vec::new(), Vec::new());
        let mut open: Vec<(stopwatch::Frame, String)> = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            match op {
                Op::Plot(s, v) => {
                    rec.plot(names[*s], *v);
                    want_plots.push(p(names[*s], *v, PlotMode::Value, PlotUnit::COUNT));
                }
                Op::Add(s, d) => {
                    let v = series[*s].add(*d);
                    want_plots.push(p(names[*s], v, PlotMode::Summed, PlotUnit::COUNT));
                }
                Op::Message(l, t, f) => {
                    match f {
                        Some(f) => rec.message_with(Level(*l), t, &serde_json::json!({"n": f})),
                        None => rec.message_at(Level(*l), t),
                    }
                    let frame = open.last().map(|(_, label)| label.clone());
                    want_msgs.push((frame, Level(*l), t.clone(), f.map(|f| bson::doc! {"n": f})));
                }
                Op::Open(l) => {
                    let label = format!("{l}#{i}");
                    open.push((rec.start(label.clone()), label));
                }
                Op::Close => {
                    open.pop();
                }
            }
        }
        while open.pop().is_some() {}
        drop(rec);
        let log = read(dir.path());
        prop_assert_eq!(log.plots, want_plots);
        let root_ctx = |label: &Option<String>| label.as_ref().map(|l| log.starts[l].1);
        let got: Vec<_> = log.messages.iter().map(|m| (m.frame, m.context, m.level, m.text.clone(), m.fields.clone())).collect();
        let want: Vec<_> = want_msgs.iter().map(|(frame, level, text, fields)| {
            let id = frame.as_ref().map_or(0, |l| log.starts[l].0.id);
            (id, root_ctx(frame).unwrap_or(0), *level, text.clone(), fields.clone())
        }).collect();
        prop_assert_eq!(got, want);
    }
}

/// Polls `cond` until it holds (generous deadline).
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn health_and_process_series_are_sampled_until_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Stopwatch::builder()
        .dir(dir.path())
        .plot_health(true)
        .plot_process(true)
        .build()
        .unwrap();
    let count = |name: &str| {
        rec.flush(Duration::from_secs(10));
        read(dir.path())
            .plots
            .iter()
            .filter(|p| p.name == name)
            .count()
    };
    wait_until("three pool-use values", || count(stopwatch::POOL_USE) >= 3);
    if cfg!(target_os = "linux") {
        wait_until("RSS and CPU values", || {
            count(stopwatch::PROCESS_RSS) >= 2 && count(stopwatch::PROCESS_CPU) >= 1
        });
    }
    drop(rec);
    let log = read(dir.path());
    let by = |name: &str| -> Vec<&P> { log.plots.iter().filter(|p| p.name == name).collect() };
    for p in by(stopwatch::POOL_USE) {
        let v = f64::from_bits(p.value);
        assert!(
            (0.0..=100.0).contains(&v) && p.unit == PlotUnit::PERCENT,
            "{p:?}"
        );
    }
    assert!(
        by(stopwatch::DROPPED_PER_SEC)
            .iter()
            .all(|p| f64::from_bits(p.value) == 0.0)
    );
    if cfg!(target_os = "linux") {
        for p in by(stopwatch::PROCESS_RSS) {
            assert!(
                f64::from_bits(p.value) > 1e6 && p.unit == PlotUnit::BYTES,
                "{p:?}"
            );
        }
    }
    // The probe stopped with the recorder: a later look finds no new value.
    let n = log.plots.len();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(read(dir.path()).plots.len(), n);
}

#[test]
fn what_does_not_fit_a_record_is_cut_with_a_mark_never_silently() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    let big = "x".repeat(1 << 20);
    rec.message(&big);
    rec.message_with(
        Level::WARN,
        "with a blob",
        &serde_json::json!({ "user": 42, "blob": big, "route": "/users/:id" }),
    );
    rec.plot(&"s".repeat(300), 1.0);
    rec.plot("", 2.0);
    drop(rec);
    let log = read(dir.path());

    let text = &log.messages[0].text;
    assert!(text.len() <= 4096, "{}", text.len());
    let kept = text.find(" … (cut, ").expect("the cut is marked");
    let more: u64 = text[kept + " … (cut, ".len()..]
        .trim_end_matches(" bytes more)")
        .replace(',', "")
        .parse()
        .unwrap();
    assert_eq!(
        kept as u64 + more,
        big.len() as u64,
        "the mark says how much is missing"
    );

    let with = &log.messages[1];
    assert_eq!(with.text, "with a blob");
    let fields = with.fields.as_ref().expect("the fields that fit are kept");
    assert_eq!(
        fields
            .get_i64("user")
            .or(fields.get_i32("user").map(i64::from)),
        Ok(42)
    );
    assert_eq!(fields.get_str("route"), Ok("/users/:id"));
    assert!(fields.get("blob").is_none());
    let cut = fields
        .get_str("cut_fields")
        .expect("what was left out is named");
    assert!(cut.starts_with("blob ("), "{cut}");

    let names: Vec<&str> = log.plots.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names[0].len() <= 255 && names[0].starts_with("sss") && names[0].ends_with('…'));
    assert_eq!(names[1], "(unnamed)");
}

/// Polls `fut` once on this thread with a waker that does nothing.
fn poll_once<F: Future>(fut: Pin<&mut F>) -> Poll<F::Output> {
    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    let waker = Arc::new(Noop).into();
    fut.poll(&mut TaskContext::from_waker(&waker))
}

#[test]
fn a_future_that_panics_in_its_frame_still_records_what_it_allocated() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    let mut fut = Box::pin(
        async {
            let kept = std::hint::black_box(vec![7u8; 10_000]);
            if kept.len() == 10_000 {
                panic!("the handler failed");
            }
        }
        .in_frame(rec.start("panics")),
    );
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| poll_once(fut.as_mut())));
    assert!(caught.is_err(), "the future panicked");
    drop(fut);
    drop(rec);
    let log = read(dir.path());
    let (key, _) = log.starts["panics"];
    assert!(log.ends.contains(&key), "the frame ended");
    let a = log
        .allocs
        .get(&key)
        .expect("the frame has its allocation record");
    assert!(
        a.allocs >= 1 && a.alloc_bytes >= 10_000,
        "what the panicking poll allocated is counted: {a:?}"
    );
}
