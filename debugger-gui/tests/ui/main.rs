//! Headless UI tests (egui_kittest, no display, no GPU), one module a view: open a log
//! written in the test and check what each view shows and does. This file holds what they
//! share (writing logs, finding boxes, clicking, dragging).

#[path = "../common/mod.rs"]
mod common;
use common::{harness, step_until};

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use bson::{Binary, DateTime, doc, oid::ObjectId, spec::BinarySubtype};
use debugger_gui::DebuggerApp;
use debugger_gui::app::DataState;
use debugger_gui::source::LogSource;
use egui::{Rect, Role};
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use formats::{Category, FrameEnd, FrameKey, FrameStart, Record, ThreadInfo};
use framelog::{DataBatch, LogWriter, WriterOptions};

const T0: u64 = 1_700_000_000_000_000_000;

/// Writes one request on `thread`: an HTTP root with a database query (with data) and a
/// template, starting at `t` (ns), 1 ms long. Returns the query's key.
fn write_request(w: &LogWriter, thread: u32, t: u64, route: &str) -> FrameKey {
    let id = w.reserve_ids(3).unwrap();
    let worker = w.worker();
    let mut bytes = Vec::new();
    let name = format!("worker-{thread}");
    let recs = [
        Record::ThreadInfo(ThreadInfo {
            worker,
            thread,
            timestamp: t,
            name: &name,
        }),
        Record::Start(FrameStart {
            parent: formats::Parent::NotRecorded,
            id,
            worker,
            timestamp: t,
            context: id,
            category: Category::HTTP,
            label: route,
        }),
        Record::Start(FrameStart {
            parent: formats::Parent::NotRecorded,
            id: id + 1,
            worker,
            timestamp: t + 50_000,
            context: id,
            category: Category::DATABASE,
            label: "User: Select",
        }),
        Record::End(FrameEnd {
            id: id + 1,
            worker,
            timestamp: t + 550_000,
        }),
        Record::Start(FrameStart {
            parent: formats::Parent::NotRecorded,
            id: id + 2,
            worker,
            timestamp: t + 600_000,
            context: id,
            category: Category::TEMPLATE,
            label: "template: user.html",
        }),
        Record::End(FrameEnd {
            id: id + 2,
            worker,
            timestamp: t + 950_000,
        }),
        Record::End(FrameEnd {
            id,
            worker,
            timestamp: t + 1_000_000,
        }),
    ];
    for r in recs {
        r.encode_to_vec(&mut bytes);
    }
    w.append_frames(&bytes).unwrap();
    let key = FrameKey::new(worker, id + 1);
    let d = doc! {
        "sql": "SELECT id, name FROM users WHERE id = $1",
        "params": [42_i64],
        "issuedAt": DateTime::from_millis(1_700_000_000_000),
        "requestId": ObjectId::from_bytes([0xab; 12]),
        "hash": Binary { subtype: BinarySubtype::Generic, bytes: vec![0xca, 0xfe] },
        "db": { "name": "app", "replica": false },
    };
    let mut buf = Vec::new();
    d.to_writer(&mut buf).unwrap();
    let mut batch = DataBatch::new();
    batch.push(key, &buf);
    w.append_data(&batch).unwrap();
    key
}

fn writer(dir: &Path) -> LogWriter {
    LogWriter::open_with(
        dir,
        WriterOptions {
            process_name: Some("test-app".into()),
            ..Default::default()
        },
    )
    .unwrap()
}

/// Appends closed frames `(start, duration, label, category)`, each its own context, on
/// `thread` (named `name`); returns the first frame's id.
fn append_frames(
    w: &LogWriter,
    thread: u32,
    name: &str,
    frames: &[(u64, u64, &str, Category)],
) -> u32 {
    let worker = w.worker();
    let first = w.reserve_ids(frames.len() as u32).unwrap();
    let mut bytes = Vec::new();
    Record::ThreadInfo(ThreadInfo {
        worker,
        thread,
        timestamp: frames.first().map_or(T0, |f| f.0),
        name,
    })
    .encode_to_vec(&mut bytes);
    for (k, &(t, dur, label, category)) in frames.iter().enumerate() {
        let id = first + k as u32;
        Record::Start(FrameStart {
            parent: formats::Parent::NotRecorded,
            id,
            worker,
            timestamp: t,
            context: id,
            category,
            label,
        })
        .encode_to_vec(&mut bytes);
        Record::End(FrameEnd {
            id,
            worker,
            timestamp: t + dur,
        })
        .encode_to_vec(&mut bytes);
    }
    w.append_frames(&bytes).unwrap();
    first
}

/// The flamegraph's bounds.
fn canvas(h: &Harness<'_, DebuggerApp>) -> Rect {
    h.get_by_role_and_label(Role::Canvas, "Flamegraph").rect()
}

/// Frame boxes in the flamegraph with this label.
fn boxes<'a>(h: &'a Harness<'_, DebuggerApp>, label: &'a str) -> Vec<egui_kittest::Node<'a>> {
    // (No timeline drawn yet, e.g. in the frame a log was opened: no boxes.)
    let Some(c) = h
        .query_by_role_and_label(Role::Canvas, "Flamegraph")
        .map(|n| n.rect())
    else {
        return Vec::new();
    };
    h.query_all_by_label(label)
        .filter(|n| n.accesskit_node().role() == Role::Button && c.contains_rect(n.rect()))
        .collect()
}

/// A listening window (no directory given) whose program recorded a frame: the temporary
/// log holds frames, the program has ended its session, and the window shows where the log is.
fn listening_window_with_frames() -> (Harness<'static, DebuggerApp>, std::path::PathBuf) {
    let mut h = harness(DebuggerApp::listen("127.0.0.1:0", None, None));
    let listener = h.state().listener().expect("listening");
    let addr = listener.addr().to_string();
    let dir = listener.temp_dir().expect("a temporary log").to_owned();
    let rec = stopwatch::Stopwatch::builder()
        .connect(format!("{addr},timeout=60s"))
        .build()
        .unwrap();
    drop(rec.start_with("GET /recorded", Category::HTTP));
    step_until(&mut h, "the program's frame in the window", |h| {
        !boxes(h, "GET /recorded").is_empty()
    });
    drop(rec);
    step_until(&mut h, "the session's end", |h| {
        h.state()
            .listener()
            .is_some_and(|l| l.lines().iter().any(|l| l.contains("ended its session")))
    });
    // While it records, the window says where the temporary log is.
    let shown = dir.display().to_string();
    assert!(h.query_by_label("temporary log:").is_some(), "status bar");
    assert!(
        h.query_by_label(&shown).is_some(),
        "the path in the status bar"
    );
    assert!(
        h.query_by_label_contains(&format!("Recording into a temporary log: {shown}"))
            .is_some(),
        "the Processes tab"
    );
    (h, dir)
}

fn click_quit(h: &mut Harness<'_, DebuggerApp>) {
    h.get_by_label("File").click();
    step_until(h, "the File menu", |h| h.query_by_label("Quit").is_some());
    h.get_by_label("Quit").click();
    h.run_steps(2);
}

fn segments(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".framelog"))
        })
        .count()
    })
}

/// A left click at `pos` (press and release).
fn click_at(h: &mut Harness<'_, DebuggerApp>, pos: egui::Pos2) {
    h.hover_at(pos);
    for pressed in [true, false] {
        h.event(egui::Event::PointerButton {
            pos,
            button: egui::PointerButton::Primary,
            pressed,
            modifiers: egui::Modifiers::default(),
        });
    }
}

/// The aggregated flame graph's box for `label`, if drawn.
fn merged_box(h: &Harness<'_, DebuggerApp>, label: &str) -> Option<Rect> {
    h.state()
        .flame_graph()
        .drawn
        .iter()
        .find(|(_, l, _)| l == label)
        .map(|(_, _, r)| *r)
}

/// Set for the child process of `a_killed_writer_is_shown_as_stopped_and_its_open_frames_cut`.
const CHILD_DIR_ENV: &str = "FRAMELOG_UI_TEST_CHILD_DIR";

/// Where `child_program_waits_to_be_killed` connects (the listening window's address).
const CHILD_CONNECT_ENV: &str = "FRAMELOG_TEST_CHILD_CONNECT";

/// The first frame labelled `label`.
fn frame_labelled(m: &debugger_gui::model::Model, label: &str) -> debugger_gui::model::FrameRef {
    let mut found = None;
    m.for_each_frame(|at, _, _| {
        if found.is_none() && m.info(at).is_some_and(|i| i.label == label) {
            found = Some(at);
        }
    });
    found.unwrap_or_else(|| panic!("no frame labelled {label}"))
}

/// Drags with the primary button from `a` to `b`, a few steps apart.
fn drag(h: &mut Harness<'_, DebuggerApp>, a: egui::Pos2, b: egui::Pos2) {
    h.hover_at(a);
    h.event(egui::Event::PointerButton {
        pos: a,
        button: egui::PointerButton::Primary,
        pressed: true,
        modifiers: egui::Modifiers::default(),
    });
    h.step();
    for k in 1..=4 {
        let p = a + (b - a) * (k as f32 / 4.0);
        h.event(egui::Event::PointerMoved(p));
        h.step();
    }
    h.event(egui::Event::PointerButton {
        pos: b,
        button: egui::PointerButton::Primary,
        pressed: false,
        modifiers: egui::Modifiers::default(),
    });
    h.step();
}

/// A folder dropped on the window, as the windowing integration hands it over.
#[derive(Debug)]
struct DroppedFolder(std::path::PathBuf);

impl egui::DroppedFile for DroppedFolder {
    fn path(&self) -> &Path {
        &self.0
    }

    fn bytes(&self) -> Result<Vec<u8>, String> {
        Err("a folder".into())
    }
}

/// Appends `n` closed frames labeled `label`, each `dur` ns, on thread 9 from `t`.
fn write_frames(w: &LogWriter, t: u64, label: &str, n: u32, dur: u64) {
    let frames: Vec<(u64, u64, &str, Category)> = (0..u64::from(n))
        .map(|k| (t + k * (dur + 1_000), dur, label, Category::JOB))
        .collect();
    append_frames(w, 9, "jobs", &frames);
}

/// A request whose work hops threads, as on tokio's multi-thread runtime: `request` starts on
/// worker-1; its child `load_user` runs on worker-2 while an unrelated request (`other`, a
/// context of its own) is running there, and calls `decode`; `render` runs back on worker-1.
/// Worker-2's records come first in the file (its buffer was written first). `recorded`:
/// type 6 starts that name their parents; else type 0 (a log from before parents).
/// Returns the ids of request, other, load_user, decode, render.
fn write_hopping_request(w: &LogWriter, recorded: bool) -> [u32; 5] {
    let worker = w.worker();
    let id = w.reserve_ids(5).unwrap();
    let [req, other, load, decode, render] = [id, id + 1, id + 2, id + 3, id + 4];
    let parent = |p: Option<u32>| match (recorded, p) {
        (false, _) => formats::Parent::NotRecorded,
        (true, None) => formats::Parent::Root,
        (true, Some(p)) => formats::Parent::Frame(p),
    };
    let start = |id, t, ctx, label, p, cat| {
        Record::Start(FrameStart {
            parent: parent(p),
            id,
            worker,
            timestamp: T0 + t,
            context: ctx,
            category: cat,
            label,
        })
    };
    let end = |id, t| {
        Record::End(FrameEnd {
            id,
            worker,
            timestamp: T0 + t,
        })
    };
    let thread = |thread, name| {
        Record::ThreadInfo(ThreadInfo {
            worker,
            thread,
            timestamp: T0,
            name,
        })
    };
    let recs = [
        thread(2, "worker-2"),
        start(other, 0, other, "other", None, Category::HTTP),
        start(
            load,
            100_000,
            req,
            "load_user",
            Some(req),
            Category::DATABASE,
        ),
        start(
            decode,
            200_000,
            req,
            "decode",
            Some(load),
            Category::FUNCTION,
        ),
        end(decode, 300_000),
        end(load, 500_000),
        end(other, 2_000_000),
        thread(1, "worker-1"),
        start(req, 0, req, "request", None, Category::HTTP),
        start(
            render,
            600_000,
            req,
            "render",
            Some(req),
            Category::TEMPLATE,
        ),
        end(render, 700_000),
        end(req, 1_000_000),
    ];
    let mut bytes = Vec::new();
    for r in recs {
        r.encode_to_vec(&mut bytes);
    }
    w.append_frames(&bytes).unwrap();
    [req, other, load, decode, render]
}

/// The labels of a call path's nodes in the model's call tree, if it has one.
fn call_path_total(m: &debugger_gui::model::Model, path: &[&str]) -> Option<u64> {
    use debugger_gui::model::calltree::{Aggregate, Scope};
    let t = m.call_tree();
    let n = (1..t.len() as u32).find(|&n| {
        t.path(n)
            .iter()
            .map(|&x| m.labels().name(t.label(x)))
            .eq(path.iter().copied())
    })?;
    Some(Aggregate::build(m, &Scope::All).total_ns[n as usize])
}

/// A few frames, so a panel whose content just changed is laid out where it stays (a grid
/// sizes its columns from the frame before) before a click aims at it.
fn settle(h: &mut Harness<'_, DebuggerApp>) {
    for _ in 0..3 {
        h.step();
    }
}

mod async_time;
mod flame_graph;
mod listening;
mod logs;
mod panels;
mod parents;
mod query;
mod timeline;
