//! Parents: random async programs (tasks that hop worker threads between child frames on
//! tokio's multi-thread runtime, nested `in_frame` futures, futures handed to other threads by
//! hand, contexts entered on pool threads, explicit `Frame::child` / `Context::child`) record
//! into a real log directory; every frame's parent read back (raw, then compacted) is the one
//! the program knew when it started the frame.

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use formats::{FrameKey, Parent, Record};
use framelog::LogReader;
use framelog::compact::{CompactOptions, SegmentOutcome, compact_log};
use proptest::prelude::*;
use stopwatch::{Frame, FutureExt, InFrame, Recorder, Sampling, Stopwatch};

/// How a node's frame is started, relative to its parent's frame.
#[derive(Debug, Clone, Copy)]
enum How {
    /// `Recorder::start` on the thread where the parent is current (a guard).
    Guard,
    /// Explicit: `parent.child()` while another frame (a decoy sibling) is current on a
    /// thread; in async code, `Context::child` of the task's current context.
    Child,
    /// `in_frame`: a future wrapped in the frame, awaited where it is (in sync code: handed
    /// to another thread that runs it with `Handle::block_on`).
    InFrame,
    /// `in_frame`, spawned as a tokio task (on any worker) and awaited.
    Spawn,
    /// The parent's context entered on a pool thread (`spawn_blocking` or a new thread),
    /// the frame started there.
    Pool,
    /// `Context::child` of the parent's context on a pool thread.
    ContextChild,
}

#[derive(Debug, Clone)]
struct Node {
    how: How,
    /// Before the node, in async code: 0 nothing, 1 `yield_now`, 2 a short sleep (the task
    /// usually resumes on whichever worker is free).
    pause: u8,
    children: Vec<Node>,
}

fn how() -> impl Strategy<Value = How> {
    prop_oneof![
        Just(How::Guard),
        Just(How::Child),
        Just(How::InFrame),
        Just(How::Spawn),
        Just(How::Pool),
        Just(How::ContextChild),
    ]
}

fn node() -> impl Strategy<Value = Node> {
    let leaf = (how(), 0u8..3).prop_map(|(how, pause)| Node {
        how,
        pause,
        children: Vec::new(),
    });
    leaf.prop_recursive(4, 48, 4, |inner| {
        (how(), 0u8..3, prop::collection::vec(inner, 0..4)).prop_map(|(how, pause, children)| {
            Node {
                how,
                pause,
                children,
            }
        })
    })
}

/// What every part of the program shares: the recorder, the runtime, and the parent each
/// frame was started under (as the program knew it).
#[derive(Clone)]
struct Prog {
    rec: Arc<Recorder>,
    rt: tokio::runtime::Handle,
    want: Arc<Mutex<HashMap<FrameKey, Parent>>>,
}

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

impl Prog {
    /// Notes that `f` was started as a child of frame `parent` (0: a root); returns its id.
    fn note(&self, f: &Frame, parent: u32) -> u32 {
        let key = f.key().expect("every frame is recorded");
        let old = self
            .want
            .lock()
            .unwrap()
            .insert(key, Parent::from_field(parent));
        assert!(old.is_none(), "keys are unique: {key:?}");
        key.id
    }

    /// A frame started here (a child of `parent`, the current frame) around a future running
    /// `children` (no `Frame` is held across an `.await`: it is `!Send`).
    fn framed(&self, label: String, parent: u32, children: Vec<Node>) -> InFrame<BoxFuture> {
        let f = self.rec.start(label);
        let id = self.note(&f, parent);
        self.clone().run_async(id, children).in_frame(f)
    }

    /// Runs `nodes` as children of frame `parent`, the task's current frame (an `in_frame`
    /// future's).
    fn run_async(self, parent: u32, nodes: Vec<Node>) -> BoxFuture {
        Box::pin(async move {
            for n in nodes {
                match n.pause {
                    1 => tokio::task::yield_now().await,
                    2 => tokio::time::sleep(Duration::from_micros(200)).await,
                    _ => {}
                }
                let label = format!("async {:?}", n.how);
                match n.how {
                    How::Guard => {
                        let f = self.rec.start(label);
                        let id = self.note(&f, parent);
                        self.run_sync(id, &f, n.children);
                    }
                    How::Child => {
                        let ctx = self.rec.current_context().expect("in the task's context");
                        assert_eq!(ctx.parent_id(), Some(parent));
                        let f = ctx.child(label);
                        let id = self.note(&f, parent);
                        self.run_sync(id, &f, n.children);
                    }
                    How::InFrame => self.framed(label, parent, n.children).await,
                    How::Spawn => {
                        let task = self.framed(label, parent, n.children);
                        tokio::spawn(task).await.unwrap();
                    }
                    How::Pool | How::ContextChild => {
                        let ctx = self.rec.current_context().expect("in the task's context");
                        let p = self.clone();
                        tokio::task::spawn_blocking(move || {
                            let (_entered, f) = if let How::Pool = n.how {
                                let entered = ctx.enter();
                                (Some(entered), p.rec.start(label))
                            } else {
                                (None, ctx.child(label))
                            };
                            let id = p.note(&f, parent);
                            p.run_sync(id, &f, n.children);
                        })
                        .await
                        .unwrap();
                    }
                }
            }
        })
    }

    /// Runs `nodes` as children of `parent` (id `parent_id`), the thread's current frame.
    fn run_sync(&self, parent_id: u32, parent: &Frame, nodes: Vec<Node>) {
        for n in nodes {
            let label = format!("sync {:?}", n.how);
            match n.how {
                How::Guard => {
                    let f = self.rec.start(label);
                    let id = self.note(&f, parent_id);
                    self.run_sync(id, &f, n.children);
                }
                How::Child => {
                    // Another frame is current: the explicit form names its parent all the
                    // same, and ending it makes the decoy current again.
                    let decoy = self.rec.start("decoy");
                    let decoy_id = self.note(&decoy, parent_id);
                    let f = parent.child(label);
                    let id = self.note(&f, parent_id);
                    self.run_sync(id, &f, n.children);
                    drop(f);
                    let after = self.rec.start("after the child");
                    self.note(&after, decoy_id);
                }
                How::InFrame | How::Spawn => {
                    let fut = self.framed(label, parent_id, n.children);
                    let rt = self.rt.clone();
                    blocking(move || {
                        if let How::Spawn = n.how {
                            let task = rt.spawn(fut);
                            std::thread::spawn(move || rt.block_on(task).unwrap())
                                .join()
                                .unwrap();
                        } else {
                            // Handed to another thread by hand, polled there.
                            std::thread::spawn(move || rt.block_on(fut)).join().unwrap();
                        }
                    });
                }
                How::Pool | How::ContextChild => {
                    let ctx = parent.context().expect("a recorded frame's context");
                    blocking(|| {
                        std::thread::scope(|s| {
                            s.spawn(|| {
                                let (_entered, f) = if let How::Pool = n.how {
                                    let entered = ctx.enter();
                                    (Some(entered), self.rec.start(label))
                                } else {
                                    (None, ctx.child(label))
                                };
                                let id = self.note(&f, parent_id);
                                self.run_sync(id, &f, n.children);
                            });
                        })
                    });
                }
            }
            // The parent is current again.
            let ctx = self
                .rec
                .current_context()
                .expect("still in the parent's context");
            assert_eq!(ctx.parent_id(), Some(parent_id), "after a {:?}", n.how);
        }
    }
}

/// Waits for other threads without holding up a runtime worker (its other tasks move to
/// another thread meanwhile).
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    tokio::task::block_in_place(f)
}

/// Every frame start of the log in `dir`: key → parent read back.
fn parents_read_back(dir: &Path) -> HashMap<FrameKey, Parent> {
    let mut got = HashMap::new();
    LogReader::open(dir)
        .unwrap()
        .read_available(|_, r| {
            if let Record::Start(s) = r {
                assert!(
                    got.insert(FrameKey::new(s.worker, s.id), s.parent)
                        .is_none(),
                    "one start per key"
                );
            }
        })
        .unwrap();
    got
}

/// Runs `requests` (each a root frame in a task of its own, all at once) and returns the
/// parents the program knew, after the recorder shut down. On a thread of its own: every
/// thread that recorded has exited after it (a thread's registration keeps its recorder's
/// log open until then, and compaction needs it closed).
fn run_program(dir: &Path, requests: Vec<Node>) -> HashMap<FrameKey, Parent> {
    run_program_with(requests, |b| b.dir(dir))
}

/// [`run_program`], recording where `to` says (a directory, a stream to a server).
fn run_program_with(
    requests: Vec<Node>,
    to: impl FnOnce(stopwatch::Builder) -> stopwatch::Builder + Send,
) -> HashMap<FrameKey, Parent> {
    std::thread::scope(|s| s.spawn(|| run_program_here(requests, to)).join().unwrap())
}

fn run_program_here(
    requests: Vec<Node>,
    to: impl FnOnce(stopwatch::Builder) -> stopwatch::Builder,
) -> HashMap<FrameKey, Parent> {
    let rec = Arc::new(
        to(Stopwatch::builder())
            .sampling(Sampling::All)
            .build()
            .unwrap(),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(3)
        .enable_time()
        .build()
        .unwrap();
    let prog = Prog {
        rec: rec.clone(),
        rt: rt.handle().clone(),
        want: Arc::default(),
    };
    rt.block_on(async {
        let tasks: Vec<_> = requests
            .into_iter()
            .map(|n| {
                let f = prog.rec.start(format!("request {:?}", n.how));
                prog.note(&f, 0);
                let id = f.key().unwrap().id;
                tokio::spawn(prog.clone().run_async(id, n.children).in_frame(f))
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    drop(rt);
    let want = std::mem::take(&mut *prog.want.lock().unwrap());
    drop(prog);
    let rec = Arc::into_inner(rec).expect("every task and thread is done");
    let stats = rec.shutdown();
    assert_eq!((stats.dropped, stats.unsent), (0, 0), "{stats:?}");
    want
}

/// Checks the parents read back from `dir`, raw and then compacted.
fn check(dir: &Path, want: &HashMap<FrameKey, Parent>) {
    let got = parents_read_back(dir);
    assert_eq!(got.len(), want.len(), "every frame read back");
    for (key, parent) in want {
        assert_eq!(got.get(key), Some(parent), "raw: the parent of {key:?}");
    }
    let report = compact_log(
        dir,
        &CompactOptions {
            all: true,
            ..CompactOptions::default()
        },
    )
    .unwrap();
    assert!(
        report.segments.iter().any(|(kind, _, o)| {
            *kind == formats::FileKind::FrameLog && matches!(o, SegmentOutcome::Compacted { .. })
        }),
        "a frame log was compacted: {report:?}"
    );
    let compacted = parents_read_back(dir);
    assert_eq!(compacted, got, "compacted: the same starts and parents");
}

/// Records `requests` through a remote session into a server's log, and checks the parents
/// read back there, and as a viewer that reads Records version 2 gets them: the same tree,
/// under the keys the server gave (its worker; ids moved by a block base).
fn check_remote(requests: Vec<Node>) {
    use framelog::remote::{Server, ServerOptions};
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::bind("127.0.0.1:0", ServerOptions::recorder(dir.path())).unwrap();
    let addr = server.local_addr().to_string();
    // Suspended until the server starts the session: every record goes to it.
    let want = run_program_with(requests, |b| {
        b.connect(addr).suspend(Duration::from_secs(60))
    });
    // Closing drains: everything the program sent is in the log.
    server.close();
    let got = parents_read_back(dir.path());
    assert_eq!(
        got.len(),
        want.len(),
        "every frame reached the server's log"
    );
    // The program's ids fit one block of 65,536, so the server moved them all by one base.
    let (prog_min, server_min) = (
        want.keys().map(|k| k.id).min().unwrap(),
        got.keys().map(|k| k.id).min().unwrap(),
    );
    assert!(want.keys().all(|k| k.id - prog_min < 1 << 16));
    let worker = got.keys().next().unwrap().worker;
    let moved = |id: u32| id - prog_min + server_min;
    for (key, parent) in &want {
        let there = FrameKey::new(worker, moved(key.id));
        let expected = match *parent {
            Parent::Frame(p) => Parent::Frame(moved(p)),
            other => other,
        };
        assert_eq!(
            got.get(&there),
            Some(&expected),
            "remote: parent of {key:?}"
        );
    }
    // A viewer of that log (Records version 2) gets the same starts.
    let mut viewer = framelog::viewer::ViewerSession::new(dir.path());
    viewer.send_parents(true);
    viewer.read(formats::protocol::viewer::ReadFrom::Start);
    let mut seen = HashMap::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while seen.len() < got.len() {
        assert!(
            std::time::Instant::now() < deadline,
            "the viewer stream stalled"
        );
        viewer.credit(1 << 20);
        viewer
            .step(&mut |m| {
                use formats::protocol::viewer::ToViewer;
                if let Ok(ToViewer::Records { records, .. }) = ToViewer::decode(&m) {
                    for r in formats::RecordIter::new(records, 0) {
                        if let Ok((_, Record::Start(s))) = r {
                            seen.insert(FrameKey::new(s.worker, s.id), s.parent);
                        }
                    }
                }
            })
            .unwrap();
    }
    assert_eq!(seen, got, "viewer: the same starts and parents");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn parents_cross_a_remote_session_and_the_viewer_protocol_unchanged(
        requests in prop::collection::vec(node(), 1..4)
    ) {
        check_remote(requests);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_frame_reads_back_with_the_parent_the_program_knew(
        requests in prop::collection::vec(node(), 1..4)
    ) {
        let dir = tempfile::tempdir().unwrap();
        let want = run_program(dir.path(), requests);
        check(dir.path(), &want);
    }
}

/// One program with every way of starting a frame, at every depth, many requests at once:
/// the same check on a larger run than the property's cases.
#[test]
fn a_busy_service_of_every_kind_of_frame_keeps_every_parent() {
    let leaf = |how| Node {
        how,
        pause: 2,
        children: Vec::new(),
    };
    let all = [
        How::Guard,
        How::Child,
        How::InFrame,
        How::Spawn,
        How::Pool,
        How::ContextChild,
    ];
    let level = |children: Vec<Node>| -> Vec<Node> {
        all.iter()
            .enumerate()
            .map(|(i, &how)| Node {
                how,
                pause: (i % 3) as u8,
                children: children.clone(),
            })
            .collect()
    };
    let tree = level(level(all.iter().map(|&h| leaf(h)).collect()));
    let requests: Vec<Node> = (0..8)
        .map(|_| Node {
            how: How::Spawn,
            pause: 0,
            children: tree.clone(),
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let want = run_program(dir.path(), requests);
    assert!(want.len() > 8 * 6 * 6 * 6, "{} frames", want.len());
    check(dir.path(), &want);
}
