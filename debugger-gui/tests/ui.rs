//! Headless UI tests (egui_kittest, no display, no GPU): open a log written in the test,
//! check the flamegraph shows its frames, select a frame and see its data, search, follow a
//! growing log, and show bad logs without crashing.

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

#[test]
fn opens_a_log_and_draws_its_frames() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    write_request(&w, 1, T0, "GET /users/:id");
    write_request(&w, 2, T0 + 200_000, "POST /orders");
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| !boxes(h, "User: Select").is_empty());
    // Both requests, each on its own thread lane, with their nested frames.
    assert_eq!(boxes(&h, "GET /users/:id").len(), 1);
    assert_eq!(boxes(&h, "POST /orders").len(), 1);
    assert_eq!(boxes(&h, "User: Select").len(), 2);
    assert_eq!(boxes(&h, "template: user.html").len(), 2);
    // Nested frames are drawn below (at a greater depth than) their request.
    let root = boxes(&h, "GET /users/:id")[0].rect();
    let query = boxes(&h, "User: Select")
        .into_iter()
        .map(|n| n.rect())
        .find(|r| r.center().y > root.center().y && r.center().y - root.center().y < 40.0)
        .expect("query below its request");
    assert!(query.left() > root.left() && query.right() < root.right());
    // The model agrees with what is drawn.
    let app = h.state();
    let model = app.model().unwrap();
    assert_eq!(model.frame_count(), 6);
    assert_eq!(model.lanes().len(), 2);
    drop(model);
    let drawn = &app.timeline().drawn;
    assert_eq!(drawn.frames, 6);
    // Status bar and lane titles.
    assert!(h.query_by_label_contains("6 frames").is_some());
    assert!(h.query_by_label_contains("0 dropped").is_some());
    assert!(h.query_by_label_contains("Following").is_some());
}

#[test]
fn selecting_a_frame_shows_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    let key = write_request(&w, 1, T0, "GET /users/:id");
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| !boxes(h, "User: Select").is_empty());
    assert!(
        h.query_by_label_contains("SELECT id, name").is_none(),
        "data is never preloaded"
    );
    boxes(&h, "User: Select")[0].click();
    step_until(
        &mut h,
        "data",
        |h| matches!(h.state().data_state(), DataState::Ready(k, _) if *k == key),
    );
    h.step();
    h.step();
    let sel = h.state().selected().expect("a frame is selected");
    let info = h.state().model().unwrap().info(sel).unwrap();
    assert_eq!(info.label, "User: Select");
    assert_eq!(info.duration, 500_000);
    // The data tree shows every field with its BSON type.
    assert!(
        h.query_by_label_contains("SELECT id, name FROM users")
            .is_some()
    );
    assert!(
        h.query_by_label("2023-11-14T22:13:20Z").is_some(),
        "date shown as RFC 3339"
    );
    assert!(
        h.query_by_label("ObjectId(\"abababababababababababab\")")
            .is_some()
    );
    assert!(h.query_by_label("2 bytes, generic: cafe").is_some());
    assert!(h.query_by_label("int64").is_some());
    assert!(h.query_by_label_contains("db").is_some());
    assert!(h.query_by_label("📋 Copy as JSON").is_some());
    // The details grid: duration and self time.
    assert_eq!(
        h.query_all_by_label("500 µs").count(),
        2,
        "duration and self time"
    );
    // The selected box is marked selected for assistive technology too.
    let selected = boxes(&h, "User: Select");
    assert_eq!(selected[0].accesskit_node().is_selected(), Some(true));
}

#[test]
fn search_highlights_matches_and_dims_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    write_request(&w, 1, T0, "GET /users/:id");
    write_request(&w, 2, T0 + 300_000, "GET /orders");
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| !boxes(h, "User: Select").is_empty());
    h.get_by_label("Search").focus();
    h.step();
    h.get_by_label("Search").type_text("select");
    step_until(&mut h, "search", |h| h.state().search_matches().is_some());
    h.step();
    let m = h.state().search_matches().unwrap();
    assert_eq!((m.labels, m.frames), (1, 2));
    assert!(
        h.query_by_label_contains("2 matching frames in 1 label")
            .is_some()
    );
    for n in boxes(&h, "User: Select") {
        assert_eq!(
            n.accesskit_node().description().as_deref(),
            Some("search match")
        );
    }
    for label in ["GET /users/:id", "GET /orders", "template: user.html"] {
        for n in boxes(&h, label) {
            assert_eq!(
                n.accesskit_node().description().as_deref(),
                Some("dimmed"),
                "{label}"
            );
        }
    }
    let drawn = &h.state().timeline().drawn;
    let hits = drawn.labeled.iter().filter(|b| b.2).count();
    let dims = drawn.labeled.iter().filter(|b| b.3).count();
    assert_eq!((hits, dims), (2, 4));
    // Next selects the first match by start time, then the second.
    h.get_by_label("⏷ Next").click();
    h.step();
    h.step();
    let first = h.state().selected().unwrap();
    let model_first = h.state().model().unwrap().info(first).unwrap();
    assert_eq!(model_first.label, "User: Select");
    assert_eq!(model_first.start, T0 + 50_000);
    h.get_by_label("⏷ Next").click();
    h.step();
    let second = h
        .state()
        .model()
        .unwrap()
        .info(h.state().selected().unwrap())
        .unwrap();
    assert_eq!(second.start, T0 + 350_000);
    h.get_by_label("⏶ Prev").click();
    h.step();
    assert_eq!(h.state().selected(), Some(first));
}

#[test]
fn enter_searches_forward_and_a_quick_shift_enter_backward() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    for (i, route) in ["GET /a", "GET /b", "GET /c"].into_iter().enumerate() {
        write_request(&w, 1, T0 + i as u64 * 300_000, route);
    }
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| !boxes(h, "User: Select").is_empty());
    h.get_by_label("Search").focus();
    h.step();
    h.get_by_label("Search").type_text("select");
    step_until(&mut h, "search", |h| h.state().search_matches().is_some());
    let start = |h: &Harness<'_, DebuggerApp>| {
        let m = h.state().model().unwrap();
        h.state().selected().map(|at| m.info(at).unwrap().start)
    };
    // Shift is carried by the Enter key event only: a quick tap has released it by the time
    // the frame is drawn, so the frame's modifier state says no Shift.
    let enter = |h: &mut Harness<'_, DebuggerApp>, modifiers: egui::Modifiers| {
        for pressed in [true, false] {
            h.event(egui::Event::Key {
                key: egui::Key::Enter,
                physical_key: None,
                pressed,
                repeat: false,
                modifiers,
            });
        }
        h.step();
        h.step();
    };
    enter(&mut h, egui::Modifiers::NONE);
    assert_eq!(start(&h), Some(T0 + 50_000), "Enter: the first match");
    enter(&mut h, egui::Modifiers::NONE);
    assert_eq!(start(&h), Some(T0 + 350_000), "Enter: the next one");
    enter(&mut h, egui::Modifiers::SHIFT);
    assert_eq!(start(&h), Some(T0 + 50_000), "Shift+Enter: back, not on");
}

#[test]
fn follows_a_growing_log() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    write_request(&w, 1, T0, "GET /first");
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "first request", |h| {
        !boxes(h, "GET /first").is_empty()
    });
    assert!(boxes(&h, "GET /late").is_empty());
    // The program keeps running: a later request arrives while the window is open.
    write_request(&w, 1, T0 + 2_000_000, "GET /late");
    step_until(&mut h, "the new request", |h| {
        !boxes(h, "GET /late").is_empty()
    });
    assert_eq!(h.state().model().unwrap().frame_count(), 6);
    // Following keeps the newest frame in view; after pausing and zooming into the first
    // request, a third request is not brought into view until following resumes.
    let late = boxes(&h, "GET /late")[0].rect();
    assert!(canvas(&h).contains_rect(late));
    h.get_by_label("⟲ Follow").click();
    h.step();
    assert!(!h.state().timeline().follow);
    h.state_mut().timeline_mut().zoom_to(T0, T0 + 1_000_000);
    h.step();
    h.step();
    write_request(&w, 1, T0 + 4_000_000, "GET /third");
    step_until(&mut h, "ingest of the third request", |h| {
        h.state().model().unwrap().frame_count() == 9
    });
    h.step();
    assert!(boxes(&h, "GET /third").is_empty(), "paused view stays put");
    h.get_by_label("⟲ Follow").click();
    step_until(&mut h, "follow resumes", |h| {
        !boxes(h, "GET /third").is_empty()
    });
}

#[test]
fn contexts_and_statistics_panels() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    write_request(&w, 1, T0, "GET /users/:id");
    write_request(&w, 1, T0 + 2_000_000, "GET /orders");
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| !boxes(h, "GET /orders").is_empty());
    // The contexts list has both requests; selecting one zooms to it and selects its root.
    let c = canvas(&h);
    let row = h
        .query_all_by_label("GET /orders")
        .find(|n| !c.contains_rect(n.rect()))
        .expect("contexts row");
    row.click();
    step_until(&mut h, "the context's root selected", |h| {
        h.state().selected().is_some() && boxes(h, "GET /users/:id").is_empty()
    });
    let sel = h.state().selected().unwrap();
    let info = h.state().model().unwrap().info(sel).unwrap();
    assert_eq!(info.label, "GET /orders");
    assert!(!h.state().timeline().follow);
    assert!(
        boxes(&h, "GET /users/:id").is_empty(),
        "zoomed to the selected context"
    );
    // Statistics: one row per label; clicking it searches for exactly that label.
    h.get_by_label("Statistics").click();
    step_until(&mut h, "the statistics table", |h| {
        let c = canvas(h);
        h.query_by_label("Count").is_some()
            && h.query_by_label("p50").is_some()
            && h.query_all_by_label("User: Select")
                .any(|n| !c.contains_rect(n.rect()))
    });
    let c = canvas(&h);
    let stat = h
        .query_all_by_label("User: Select")
        .find(|n| !c.contains_rect(n.rect()))
        .expect("statistics row");
    stat.click();
    step_until(&mut h, "the label searched", |h| {
        h.state().search_matches().is_some_and(|m| m.frames == 2)
    });
    assert_eq!(h.state().search_text(), "\"User: Select\"");
    assert_eq!(h.state().search_matches().unwrap().frames, 2);
}

#[test]
fn a_directory_that_is_not_a_log_shows_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = harness(DebuggerApp::open(dir.path()));
    // Empty (as when listening before any program connected): a plain note, no error.
    step_until(&mut h, "message", |h| {
        h.query_by_label_contains(
            "holds no frames yet (an empty directory: nothing has recorded into it); waiting for programs",
        )
        .is_some()
    });
    assert!(h.query_by_label_contains("⚠").is_none(), "no error banner");
    assert!(h.query_by_label("No frames yet").is_none() || h.state().model().is_some());
}

/// `debugger-gui no/such/dir` says plainly that the directory does not exist (and a file
/// that it is a file), as `framelog` does: a warning, not the dim "waiting" note.
#[test]
fn a_missing_directory_or_a_file_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir");
    let mut h = harness(DebuggerApp::open(&missing));
    let said = format!("⚠ {}: no such directory", missing.display());
    step_until(&mut h, "the missing directory named", |h| {
        h.query_by_label_contains(&said).is_some()
    });
    assert!(
        h.query_by_label_contains("holds no frames yet").is_none(),
        "not the empty directory's note"
    );
    let file = dir.path().join("afile.txt");
    std::fs::write(&file, b"notes").unwrap();
    let mut h = harness(DebuggerApp::open(&file));
    let said = format!("⚠ {}: a file, not a log directory", file.display());
    step_until(&mut h, "the file named as a file", |h| {
        h.query_by_label_contains(&said).is_some()
    });
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

/// File > Quit on a listening window whose temporary log holds frames asks first (and so
/// does the window's close button); Cancel goes back, Keep leaves the log where it is.
#[test]
fn quitting_a_listening_window_asks_and_keep_leaves_the_log() {
    let (mut h, dir) = listening_window_with_frames();
    click_quit(&mut h);
    assert!(h.state().asks_before_quitting(), "the dialog is open");
    assert!(!h.state().quit_requested(), "the window stays open");
    for button in ["Keep", "Save as…", "Discard", "Cancel"] {
        assert!(h.query_by_label(button).is_some(), "{button}");
    }
    assert!(
        h.query_by_label_contains("1 frame into a temporary log")
            .is_some()
    );
    h.get_by_label("Cancel").click();
    h.run_steps(2);
    assert!(!h.state().asks_before_quitting() && !h.state().quit_requested());
    assert!(segments(&dir) > 0, "Cancel keeps the log");
    // The window's close button: the close is cancelled and the dialog asks.
    h.input_mut()
        .viewports
        .entry(egui::ViewportId::ROOT)
        .or_default()
        .events
        .push(egui::ViewportEvent::Close);
    h.step();
    let cancelled = h.output().viewport_output[&egui::ViewportId::ROOT]
        .commands
        .contains(&egui::ViewportCommand::CancelClose);
    assert!(cancelled, "the close is cancelled while the window asks");
    h.run_steps(2);
    assert!(h.query_by_label("Keep the recording?").is_some());
    h.get_by_label("Keep").click();
    h.run_steps(2);
    assert!(h.state().quit_requested(), "the window closes");
    let note = h.state().quit_note().expect("said what became of the log");
    assert!(note.contains(&dir.display().to_string()), "{note}");
    drop(h);
    assert!(segments(&dir) > 0, "the kept log outlives the window");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn discard_on_quitting_deletes_the_temporary_log() {
    let (mut h, dir) = listening_window_with_frames();
    click_quit(&mut h);
    h.get_by_label("Discard").click();
    h.run_steps(2);
    assert!(h.state().quit_requested());
    assert!(!dir.exists(), "deleted");
}

/// Save as… moves the log to the path typed in its box; a path it cannot use is named in
/// the window and the log stays where it was.
#[test]
fn save_as_on_quitting_moves_the_log_to_the_given_path() {
    let (mut h, dir) = listening_window_with_frames();
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("taken.txt");
    std::fs::write(&file, b"x").unwrap();
    click_quit(&mut h);
    h.get_by_label("Save as…").click();
    step_until(&mut h, "the path box", |h| {
        h.query_by_label("Save log to").is_some()
    });
    h.get_by_label("Save log to")
        .type_text(&file.display().to_string());
    h.step();
    h.get_by_label("Save and quit").click();
    h.run_steps(2);
    let said = format!("⚠ {}: a file already", file.display());
    assert!(
        h.query_by_label_contains(&said).is_some(),
        "the error is named"
    );
    assert!(!h.state().quit_requested() && h.state().asks_before_quitting());
    assert!(segments(&dir) > 0, "the log stays where it was");
    let to = out.path().join("saved/run-1");
    h.get_by_label("Save log to").focus();
    h.step();
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    h.step();
    h.get_by_label("Save log to")
        .type_text(&to.display().to_string());
    h.step();
    h.get_by_label("Save and quit").click();
    h.run_steps(2);
    assert!(h.state().quit_requested(), "{:?}", h.state().quit_note());
    let note = h.state().quit_note().unwrap();
    assert!(note.contains(&to.display().to_string()), "{note}");
    drop(h);
    assert!(!dir.exists(), "moved, not copied");
    assert!(segments(&to) > 0, "the log is at the given path");
    let log = framelog::LogReader::open(&to).expect("a readable log");
    drop(log);
}

/// A listening window whose temporary log holds no frames quits at once.
#[test]
fn a_listening_window_with_an_empty_temporary_log_quits_without_asking() {
    let mut h = harness(DebuggerApp::listen("127.0.0.1:0", None, None));
    let dir = h.state().listener().unwrap().temp_dir().unwrap().to_owned();
    h.run_steps(2);
    click_quit(&mut h);
    assert!(h.state().quit_requested(), "the window closes");
    assert!(!h.state().asks_before_quitting());
    assert!(h.query_by_label("Keep the recording?").is_none());
    drop(h);
    assert!(!dir.exists(), "nothing recorded, nothing kept");
}

#[test]
fn a_corrupt_log_keeps_its_valid_part_visible() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    write_request(&w, 1, T0, "GET /users/:id");
    drop(w);
    // Garbage after the valid records: a "dropped" record with a 3-byte payload.
    let seg = dir.path().join("frames-000001.framelog");
    let mut f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
    let mut bad = vec![0u8; 16];
    bad[5] = 2; // type: dropped
    bad[14] = 3; // payload size
    bad.extend_from_slice(&[1, 2, 3]);
    f.write_all(&bad).unwrap();
    drop(f);
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "error message", |h| {
        h.query_by_label_contains("frames-000001.framelog")
            .is_some()
            && h.query_by_label_contains("damaged bytes").is_some()
            && !boxes(h, "GET /users/:id").is_empty()
    });
    assert_eq!(h.state().model().unwrap().frame_count(), 3);
    assert!(h.query_by_label_contains("⚠").is_some());
}

#[test]
fn zeroed_bytes_mid_log_are_reported_and_the_frames_after_them_still_show() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    write_request(&w, 1, T0, "GET /first");
    let seg = dir.path().join("frames-000001.framelog");
    let first_end = std::fs::metadata(&seg).unwrap().len();
    write_request(&w, 1, T0 + 5_000_000, "GET /second");
    drop(w);
    // 30 zero bytes over the middle of the first request's batch.
    let mut bytes = std::fs::read(&seg).unwrap();
    let mid = (first_end - 60) as usize;
    bytes[mid..mid + 30].fill(0);
    std::fs::write(&seg, &bytes).unwrap();
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "damage message and the second request", |h| {
        h.query_by_label_contains("damaged bytes").is_some() && !boxes(h, "GET /second").is_empty()
    });
    assert!(
        boxes(&h, "GET /first").is_empty(),
        "no frame from the damaged batch"
    );
    assert_eq!(h.state().model().unwrap().frame_count(), 3);
}

#[test]
fn a_frame_whose_end_was_in_damaged_bytes_ends_there_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    let worker = w.worker();
    let id = w.reserve_ids(1).unwrap();
    let mut bytes = Vec::new();
    Record::Start(FrameStart {
        parent: formats::Parent::NotRecorded,
        id,
        worker,
        timestamp: T0,
        context: id,
        category: Category::HTTP,
        label: "GET /long",
    })
    .encode_to_vec(&mut bytes);
    w.append_frames(&bytes).unwrap();
    let seg = dir.path().join("frames-000001.framelog");
    let before_end = std::fs::metadata(&seg).unwrap().len();
    bytes.clear();
    Record::End(FrameEnd {
        id,
        worker,
        timestamp: T0 + 2_000_000,
    })
    .encode_to_vec(&mut bytes);
    w.append_frames(&bytes).unwrap();
    let after_end = std::fs::metadata(&seg).unwrap().len();
    // The process goes on to 11 ms, then exits cleanly.
    write_request(&w, 1, T0 + 10_000_000, "GET /after");
    drop(w);
    // The batch holding the end is damaged in its middle.
    let mut file = std::fs::read(&seg).unwrap();
    let mid = ((before_end + after_end) / 2) as usize;
    file[mid..mid + 4].fill(0xA5);
    std::fs::write(&seg, &file).unwrap();
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "the frame's end found lost in the damage", |h| {
        h.state().model().is_some_and(|m| {
            m.find(FrameKey::new(worker, id))
                .is_some_and(|at| m.lost_in(at).is_some())
        })
    });
    let m = h.state().model().unwrap();
    let at = m.find(FrameKey::new(worker, id)).unwrap();
    let end = m.info(at).unwrap().end.unwrap();
    assert!(
        end < T0 + 10_000_000,
        "drawn ending at the damage, not at the log's end: {}",
        end - T0
    );
    assert!(!m.is_cut(at), "not called a stopped process's frame");
    assert!(m.lost_in(at).unwrap().contains("damaged bytes"));
}

#[test]
fn the_demo_records_and_shows_a_live_workload() {
    let mut h = harness(DebuggerApp::demo());
    step_until(&mut h, "demo frames", |h| {
        h.state()
            .model()
            .is_some_and(|m| m.frame_count() > 200 && m.closed_count() > 100)
            && h.state().timeline().drawn.boxes > 0
    });
    assert!(
        h.state().problems().is_empty(),
        "{:?}",
        h.state().problems()
    );
    let m = h.state().model().unwrap();
    // The stopwatch demo's database queries are there, with their SQL as frame data.
    let db = m
        .labels()
        .names()
        .find(|(_, n)| n.contains("Select"))
        .map(|(id, _)| id);
    assert!(
        db.is_some(),
        "labels: {:?}",
        m.labels().names().collect::<Vec<_>>()
    );
    assert!(m.lanes().len() >= 2, "thread-pool and async lanes");
}

#[test]
fn double_click_zooms_to_a_frame_and_fit_zooms_back_out() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    write_request(&w, 1, T0, "GET /users/:id");
    write_request(&w, 1, T0 + 5_000_000, "GET /orders");
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| boxes(h, "User: Select").len() == 2);
    let before = boxes(&h, "User: Select")[0].rect().width();
    let center = boxes(&h, "User: Select")[0].rect().center();
    // The harness advances its clock by whole steps; give the double click room.
    h.ctx
        .options_mut(|o| o.input_options.max_double_click_delay = 2.0);
    // Two presses within egui's double-click time (a harness step is 0.25 s).
    h.event(egui::Event::PointerMoved(center));
    for _ in 0..2 {
        for pressed in [true, false] {
            h.event(egui::Event::PointerButton {
                pos: center,
                button: egui::PointerButton::Primary,
                pressed,
                modifiers: egui::Modifiers::NONE,
            });
        }
        h.step();
    }
    h.step();
    // The frame now fills most of the view, and following stopped.
    let c = canvas(&h);
    let after = boxes(&h, "User: Select");
    assert_eq!(after.len(), 1, "only the zoomed-to query is in view");
    assert!(
        after[0].rect().width() > 0.8 * c.width(),
        "{before} -> {}",
        after[0].rect().width()
    );
    assert!(!h.state().timeline().follow);
    assert!(boxes(&h, "GET /orders").is_empty());
    h.get_by_label("⛶ Zoom to fit").click();
    h.step();
    h.step();
    assert_eq!(boxes(&h, "User: Select").len(), 2);
}

#[test]
fn file_open_log_switches_to_the_chosen_log() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_request(&writer(a.path()), 1, T0, "GET /from-a");
    write_request(&writer(b.path()), 1, T0, "GET /from-b");
    let mut h = harness(DebuggerApp::open(a.path()));
    step_until(&mut h, "log A", |h| !boxes(h, "GET /from-a").is_empty());
    h.get_by_label("File").click();
    step_until(&mut h, "the File menu", |h| {
        h.query_by_label("Open log…").is_some()
    });
    h.get_by_label("Open log…").click();
    step_until(&mut h, "the path box, filled with the open log", |h| {
        h.query_by_label("Log directory")
            .and_then(|n| n.value())
            .is_some_and(|v| v == a.path().display().to_string())
    });
    h.get_by_label("Log directory").focus();
    h.step();
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    h.step();
    h.get_by_label("Log directory")
        .type_text(&b.path().display().to_string());
    h.step();
    h.get_by_label("Open").click();
    step_until(&mut h, "log B shown", |h| {
        h.state().log_dir() == Some(b.path()) && !boxes(h, "GET /from-b").is_empty()
    });
    assert!(boxes(&h, "GET /from-a").is_empty(), "log A is gone");
}

#[test]
fn a_finished_log_opens_paused_and_a_growing_one_following() {
    let (done, live) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // The writer of the first has exited; the second's is still open.
    write_request(&writer(done.path()), 1, T0, "GET /done");
    let w = writer(live.path());
    write_request(&w, 1, T0, "GET /live");
    for (dir, growing) in [(done.path(), false), (live.path(), true)] {
        let mut h = harness(DebuggerApp::open(dir));
        step_until(&mut h, "the log loaded", |h| {
            h.state().model().is_some_and(|m| m.frame_count() == 3)
                && h.state().ingest_status().caught_up
        });
        h.step();
        assert_eq!(h.state().timeline().follow, growing, "{}", dir.display());
        assert!(h.state().is_following(), "both show the whole log");
    }
    drop(w);
}

#[test]
fn a_log_whose_writer_stops_says_finished_and_is_live_again_when_one_joins() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    write_request(&w, 1, T0, "GET /live");
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "the live log loaded", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 3)
            && h.state().ingest_status().caught_up
    });
    h.step();
    assert!(!h.state().is_finished() && h.state().timeline().follow);
    assert!(h.query_by_label_contains("Following").is_some());
    // Its process goes (the writer's worker lock is released).
    drop(w);
    step_until(&mut h, "finished once its writer stopped", |h| {
        h.state().is_finished() && h.query_by_label_contains("finished").is_some()
    });
    assert!(h.query_by_label_contains("Following").is_none());
    assert!(h.query_by_label_contains("frames/s").is_none());
    // Another process writes to it: live again.
    let w = writer(dir.path());
    write_request(&w, 2, T0 + 1_000_000, "GET /again");
    step_until(&mut h, "live again once a writer joined", |h| {
        !h.state().is_finished() && h.query_by_label_contains("finished").is_none()
    });
    drop(w);
}

#[test]
fn zooming_with_the_pointer_zooms_there_and_pauses_following() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    // 5 s of requests, 50 ms apart.
    for i in 0..100 {
        write_request(&w, 1, T0 + i * 50_000_000, "GET /orders");
    }
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "every request", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 300)
    });
    h.step();
    assert!(h.state().timeline().follow, "opens following");
    let c = canvas(&h);
    // The pointer at a fifth of the timeline (about 1 s), three zoom steps (ctrl+wheel).
    let pointer = egui::pos2(c.left() + c.width() * 0.2, c.center().y);
    let time_at = |h: &Harness<'_, DebuggerApp>| {
        let f = h.state().timeline();
        f.start + 0.2 * f.width
    };
    h.event(egui::Event::PointerMoved(pointer));
    h.step();
    let before = (time_at(&h), h.state().timeline().width);
    for _ in 0..3 {
        h.event(egui::Event::Zoom(1.5));
        h.step();
    }
    h.step();
    let f = h.state().timeline();
    assert!(!f.follow, "zooming at the pointer pauses following");
    assert!(
        f.width < before.1 / 3.0,
        "zoomed in: {} -> {}",
        before.1,
        f.width
    );
    assert!(
        (time_at(&h) - before.0).abs() < before.1 * 0.01,
        "the time under the pointer stays put: {} -> {}",
        before.0,
        time_at(&h)
    );
}

#[test]
fn panning_stops_half_a_view_past_either_end_of_the_log() {
    let dir = tempfile::tempdir().unwrap();
    write_request(&writer(dir.path()), 1, T0, "GET /users/:id");
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| !boxes(h, "GET /users/:id").is_empty());
    h.state_mut().timeline_mut().zoom_to(T0, T0 + 100_000);
    h.step();
    h.step();
    let width = h.state().timeline().width;
    // Far before the log, then far after it.
    for (start, what) in [(-1e12, "before"), (1e12, "after")] {
        h.state_mut().timeline_mut().start = start;
        h.step();
        let f = h.state().timeline();
        let (lo, hi) = {
            let m = h.state().model().unwrap();
            let (a, b) = m.time_range().unwrap();
            let base = f.base.unwrap() as f64;
            (a as f64 - base, b as f64 - base)
        };
        assert!(
            f.start >= lo - width * 0.5 - 1.0 && f.start <= hi - width * 0.5 + 1.0,
            "{what}: view start {} outside [{}, {}]",
            f.start,
            lo - width * 0.5,
            hi - width * 0.5
        );
    }
}

/// The window as a server: a suspended program connects, shows in the Processes tab, is
/// resumed with its button, and its frames appear in the window's log.
#[test]
fn listening_window_resumes_a_suspended_program_and_shows_its_frames() {
    let mut h = harness(DebuggerApp::listen("127.0.0.1:0", None, None));
    let addr = h.state().listener().expect("listening").addr().to_string();
    // A program started with FRAMELOG_CONNECT=ADDR,suspend: build() waits for Resume.
    let program = std::thread::spawn(move || {
        let rec = stopwatch::Stopwatch::builder()
            .connect(format!("{addr},suspend,timeout=60s"))
            .build()
            .unwrap();
        // Start-up work, recorded because the session started before the resume.
        let f = rec.start_with("startup: load config", Category::FUNCTION);
        f.data(&serde_json::json!({"path": "/etc/app.toml"}));
        drop(f);
        rec.flush(Duration::from_secs(10));
        rec
    });
    step_until(&mut h, "the program listed as suspended", |h| {
        h.query_by_label("suspended").is_some() && h.query_by_label("Resume").is_some()
    });
    assert!(!program.is_finished(), "the program waits while suspended");
    // A new row's grid columns settle one frame after it appears: click once it is still.
    let mut last = Rect::NOTHING;
    step_until(&mut h, "the Resume button to settle", |h| {
        let r = h.get_by_label("Resume").rect();
        std::mem::replace(&mut last, r) == r
    });
    h.get_by_label("Resume").click();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !program.is_finished() {
        h.step();
        assert!(
            Instant::now() < deadline,
            "the program was not resumed: {:?}",
            h.state().listener().map(|l| l.lines())
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let rec = program.join().unwrap();
    step_until(
        &mut h,
        "the program's start-up frame in the flamegraph",
        |h| !boxes(h, "startup: load config").is_empty() && h.query_by_label("recording").is_some(),
    );
    drop(rec);
    step_until(&mut h, "the session's end", |h| {
        h.state()
            .listener()
            .is_some_and(|l| l.lines().iter().any(|l| l.contains("ended its session")))
    });
}

/// File > Export… writes the open log as Chrome JSON (off the UI thread) and says so.
#[test]
fn file_export_writes_the_log_for_perfetto() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    write_request(&writer(&log), 1, T0, "GET /exported");
    let mut h = harness(DebuggerApp::open(&log));
    step_until(&mut h, "the log", |h| !boxes(h, "GET /exported").is_empty());
    h.get_by_label("File").click();
    step_until(&mut h, "the File menu", |h| {
        h.query_by_label("Export…").is_some()
    });
    h.get_by_label("Export…").click();
    let default = dir.path().join("log.trace.json").display().to_string();
    step_until(&mut h, "the export dialog with a default path", |h| {
        h.query_by_label("Export file")
            .and_then(|n| n.value())
            .is_some_and(|v| v == default)
    });
    h.get_by_label("Export").click();
    step_until(&mut h, "the export's outcome", |h| {
        h.state()
            .export_state()
            .is_some_and(|(_, note)| note.is_some())
    });
    let (_, note) = h.state().export_state().unwrap();
    assert!(note.unwrap().starts_with("Exported 3 frames"), "{note:?}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&default).unwrap()).unwrap();
    let names: Vec<&str> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "B")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["GET /exported", "User: Select", "template: user.html"]
    );
    // The note goes away with its Dismiss button (a word: no missing-glyph box).
    step_until(&mut h, "the note", |h| {
        h.query_by_label("Dismiss").is_some()
    });
    h.get_by_label("Dismiss").click();
    step_until(&mut h, "the note dismissed", |h| {
        h.query_by_label_contains("Exported 3 frames").is_none()
    });
}

/// Zoomed out, thousands of sub-pixel frames merge into one box that does not pass for a
/// frame: no label (their labels differ), and its tooltip sums what it stands for; a click
/// zooms to the frames it stands for.
#[test]
fn merged_boxes_say_what_they_stand_for_and_zoom_in_on_click() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    // 10,000 frames of 1 µs, 2 µs apart, alternating two labels; then one 1 ms frame.
    let mut frames: Vec<(u64, u64, &str, Category)> = (0..10_000u64)
        .map(|k| {
            let label = if k % 2 == 0 {
                "cache: get"
            } else {
                "cache: set"
            };
            (T0 + k * 2_000, 1_000, label, Category::DATABASE)
        })
        .collect();
    frames.push((T0 + 20_000_000, 1_000_000, "GET /slow", Category::HTTP));
    append_frames(&w, 1, "busy", &frames);

    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "a merged box", |h| {
        !h.state().timeline().drawn.merged_boxes.is_empty()
    });
    assert!(
        h.state()
            .timeline()
            .drawn
            .labeled
            .iter()
            .all(|(_, l, ..)| !l.starts_with("cache")),
        "a merged box of mixed labels carries none"
    );
    let (rect, _, _, b) = h.state().timeline().drawn.merged_boxes[0];
    assert!(b.count > 100, "{b:?}");
    h.hover_at(rect.center());
    let title = format!("{} frames (merged", b.count);
    step_until(&mut h, "the merged tooltip", |h| {
        h.query_by_label_contains(&title).is_some()
    });
    assert!(h.query_by_label_contains("largest: cache: ").is_some());
    h.event(egui::Event::PointerButton {
        pos: rect.center(),
        button: egui::PointerButton::Primary,
        pressed: true,
        modifiers: egui::Modifiers::default(),
    });
    h.event(egui::Event::PointerButton {
        pos: rect.center(),
        button: egui::PointerButton::Primary,
        pressed: false,
        modifiers: egui::Modifiers::default(),
    });
    let span = (b.end - b.start) as f64;
    step_until(&mut h, "the view zoomed to the merged frames", |h| {
        let f = h.state().timeline();
        f.width <= span * 1.3 && f.width >= span
    });
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

#[test]
fn flame_graph_merges_frames_by_call_path_and_focuses_on_click() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    // Three requests of one route and one of another: each is a 1 ms root with a 0.5 ms
    // query and a 0.35 ms template.
    let keys: Vec<FrameKey> = ["GET /a", "GET /a", "GET /a", "POST /b"]
        .iter()
        .enumerate()
        .map(|(k, route)| write_request(&w, 1, T0 + k as u64 * 2_000_000, route))
        .collect();
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| !boxes(h, "User: Select").is_empty());
    h.state_mut()
        .set_view(debugger_gui::app::CentralView::FlameGraph);
    step_until(&mut h, "the merged boxes", |h| {
        merged_box(h, "GET /a").is_some()
    });
    let canvas = h
        .get_by_role_and_label(Role::Canvas, "Aggregated flame graph")
        .rect();
    // Width is total time: GET /a (3 ms) is three quarters of the 4 ms, left of POST /b.
    let a = merged_box(&h, "GET /a").unwrap();
    let b = merged_box(&h, "POST /b").unwrap();
    assert!(
        (a.width() / canvas.width() - 0.75).abs() < 0.01,
        "{a:?} in {canvas:?}"
    );
    assert!(a.right() <= b.left() + 1.0, "the heaviest first");
    // The three queries under GET /a merge into one box, a row below it, half its width.
    let drawn = &h.state().flame_graph().drawn;
    let queries: Vec<Rect> = drawn
        .iter()
        .filter(|(_, l, _)| l == "User: Select")
        .map(|(_, _, r)| *r)
        .collect();
    assert_eq!(
        queries.len(),
        2,
        "one per call path: under GET /a and under POST /b"
    );
    let qa = *queries
        .iter()
        // A row below it (rows are sized to the pane: not a fixed height).
        .find(|r| {
            (a.left()..a.right()).contains(&r.center().x) && (r.top() - a.bottom()).abs() < 2.0
        })
        .unwrap();
    assert!((qa.width() / a.width() - 0.5).abs() < 0.01);
    assert!(qa.top() > a.top());
    // The tooltip tells total, share and count.
    h.hover_at(qa.center());
    step_until(&mut h, "the tooltip", |h| {
        h.query_by_label_contains("3 frames").is_some()
    });
    assert!(h.query_by_label_contains("37.5 %").is_some());
    // Click: the query's subtree is full width.
    click_at(&mut h, qa.center());
    step_until(&mut h, "focus on the query", |h| {
        merged_box(h, "User: Select").is_some_and(|r| r.width() > canvas.width() * 0.99)
    });
    assert!(
        merged_box(&h, "POST /b").is_none(),
        "other paths leave the view"
    );
    // Clicking its caller (the full-width row above) goes back up to GET /a.
    let caller = merged_box(&h, "GET /a").unwrap();
    click_at(&mut h, caller.center());
    step_until(&mut h, "focus on GET /a", |h| {
        merged_box(h, "template: user.html").is_some_and(|r| r.width() > canvas.width() * 0.3)
            && merged_box(h, "POST /b").is_none()
    });
    // Scope: the selected frame's context only.
    h.get_by_label("Reset zoom").click();
    h.get_by_label("Selected context").click();
    step_until(&mut h, "asks for a selection", |h| {
        h.query_by_label_contains("Select a frame").is_some()
    });
    let select = |h: &mut Harness<'_, DebuggerApp>, key: FrameKey| {
        let at = h.state().model().unwrap().find(key).unwrap();
        h.state_mut().select(Some(at));
    };
    select(&mut h, keys[3]);
    // (Selecting opens the frame-data panel: the graph narrows.)
    let full_width = |h: &Harness<'_, DebuggerApp>, label: &str| {
        let c = h
            .get_by_role_and_label(Role::Canvas, "Aggregated flame graph")
            .rect();
        merged_box(h, label).is_some_and(|r| r.width() > c.width() * 0.99)
    };
    step_until(&mut h, "only POST /b's context", |h| {
        full_width(h, "POST /b") && merged_box(h, "GET /a").is_none()
    });
    // Every context like the selected one's: the three GET /a requests merged.
    select(&mut h, keys[0]);
    h.get_by_label("Contexts like selected").click();
    step_until(&mut h, "the three GET /a requests", |h| {
        full_width(h, "GET /a") && merged_box(h, "POST /b").is_none()
    });
    let a = merged_box(&h, "GET /a").unwrap();
    h.hover_at(a.center());
    step_until(&mut h, "the merged requests' tooltip", |h| {
        h.query_by_label_contains("3 frames").is_some()
    });
}

#[test]
fn next_match_starts_from_the_view_and_zooms_until_the_match_is_drawn_as_itself() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    // 400 requests 2 ms apart: zoomed to fit, each 0.5 ms query is far below a pixel.
    let keys: Vec<FrameKey> = (0..400u64)
        .map(|k| write_request(&w, 1, T0 + k * 2_000_000, "GET /users/:id"))
        .collect();
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "the whole log", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 1200)
    });
    // The view: the second half of the log, still zoomed out, nothing selected.
    let half = T0 + 400_000_000;
    h.state_mut().timeline_mut().zoom_to(half, T0 + 800_000_000);
    h.step();
    h.step();
    h.get_by_label("Search").focus();
    h.step();
    h.get_by_label("Search").type_text("\"User: Select\"");
    step_until(&mut h, "the matches", |h| {
        h.state().search_matches().is_some()
    });
    h.get_by_label("⏷ Next").click();
    step_until(&mut h, "a selection", |h| h.state().selected().is_some());
    let at = h.state().selected().unwrap();
    let info = h.state().model().unwrap().info(at).unwrap();
    // The first query after the view's start (the view began 5 % of its width earlier).
    let view_start = half - 20_000_000;
    let expected = keys
        .iter()
        .zip(0u64..)
        .find(|(_, k)| T0 + k * 2_000_000 + 50_000 >= view_start)
        .map(|(key, _)| *key)
        .unwrap();
    assert_eq!(info.key, expected, "not the first match of the whole log");
    // Zoomed to it: the match is a quarter of the view and drawn as itself, labeled.
    step_until(&mut h, "the match drawn as itself", |h| {
        h.state()
            .timeline()
            .drawn
            .labeled
            .iter()
            .any(|(f, l, hit, _)| *f == at && l == "User: Select" && *hit)
    });
    let width = h.state().timeline().width;
    assert!(
        (1_500_000.0..=3_000_000.0).contains(&width),
        "about four times the 0.5 ms match: {width}"
    );
}

#[test]
fn selecting_a_frame_and_switching_tabs_keep_the_layout_still() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    let key = write_request(&w, 1, T0, "GET /users/:id");
    for k in 1..40u64 {
        write_request(
            &w,
            1 + k as u32 % 3,
            T0 + k * 2_000_000,
            "POST /a/very/long/route/name/that/goes/on/and/on/for/quite/a/while/longer/than/the/panel",
        );
    }
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "the whole log", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 120)
    });
    h.step();
    let before = canvas(&h);
    let at = h.state().model().unwrap().find(key).unwrap();
    h.state_mut().select(Some(at));
    step_until(&mut h, "the frame's data", |h| {
        matches!(h.state().data_state(), DataState::Ready(..))
    });
    for _ in 0..3 {
        h.step();
    }
    assert_eq!(
        canvas(&h),
        before,
        "the timeline keeps its size when a frame is selected"
    );
    h.get_by_label("Statistics").click();
    for _ in 0..3 {
        h.step();
    }
    assert_eq!(
        canvas(&h),
        before,
        "the bottom panel keeps its height across tabs"
    );
    h.get_by_label("Contexts").click();
    for _ in 0..3 {
        h.step();
    }
    assert_eq!(canvas(&h), before);
}

/// Set for the child process of `a_killed_writer_is_shown_as_stopped_and_its_open_frames_cut`.
const CHILD_DIR_ENV: &str = "FRAMELOG_UI_TEST_CHILD_DIR";

/// Child process: writes one finished request and one left running, then waits to be killed.
#[test]
#[ignore = "helper: run as a child process by the kill -9 test"]
fn child_writer_waits_to_be_killed() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let w = writer(Path::new(&dir));
    write_request(&w, 1, T0, "GET /done");
    let id = w.reserve_ids(2).unwrap();
    let worker = w.worker();
    let mut bytes = Vec::new();
    for (k, label) in [(0, "GET /stuck"), (1, "User: Select")] {
        Record::Start(FrameStart {
            parent: formats::Parent::NotRecorded,
            id: id + k,
            worker,
            timestamp: T0 + 2_000_000 + u64::from(k) * 100_000,
            context: id,
            category: Category::HTTP,
            label,
        })
        .encode_to_vec(&mut bytes);
    }
    w.append_frames(&bytes).unwrap();
    println!("ready");
    loop {
        std::thread::park();
    }
}

#[test]
fn a_killed_writer_is_shown_as_stopped_and_its_open_frames_cut() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_writer_waits_to_be_killed",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_DIR_ENV, dir.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "two running frames of a live writer", |h| {
        h.state()
            .model()
            .is_some_and(|m| m.frame_count() == 5 && m.open_count() == 2)
    });
    // Alive: still running after a liveness probe or two.
    let probes = Instant::now() + Duration::from_millis(2500);
    while Instant::now() < probes {
        h.step();
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        h.state().model().unwrap().open_count(),
        2,
        "a live writer's frames run"
    );
    assert!(h.query_by_label_contains("(2 running)").is_some());
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    step_until(&mut h, "the frames cut", |h| {
        h.state().model().is_some_and(|m| m.cut_count() == 2)
    });
    let m = h.state().model().unwrap();
    assert_eq!(m.open_count(), 0);
    assert!(m.worker(0).stopped);
    let stuck = m.find(FrameKey::new(0, 4)).unwrap();
    assert_eq!(m.info(stuck).unwrap().label, "GET /stuck");
    assert!(m.is_cut(stuck));
    assert!(
        debugger_gui::ui::present::lane_title(&m, stuck.lane).ends_with("· stopped writing"),
        "the lane says its process stopped writing"
    );
    drop(m);
    step_until(&mut h, "the status bar says so", |h| {
        h.query_by_label_contains("(2 cut)").is_some()
    });
}

/// Where `child_program_waits_to_be_killed` connects (the listening window's address).
const CHILD_CONNECT_ENV: &str = "FRAMELOG_TEST_CHILD_CONNECT";

/// Not a test on its own: the program
/// `a_program_killed_while_the_window_listens_is_shown_as_stopped` starts and kills. It
/// streams one finished and one running frame to the window, says `ready`, and waits.
#[test]
#[ignore = "a child process of another test"]
fn child_program_waits_to_be_killed() {
    let Some(addr) = std::env::var_os(CHILD_CONNECT_ENV) else {
        return;
    };
    let rec = stopwatch::Stopwatch::builder()
        .connect(format!("{},timeout=60s", addr.to_str().unwrap()))
        .build()
        .unwrap();
    drop(rec.start_with("request: finished", Category::HTTP));
    let running = rec.start_with("request: stuck", Category::HTTP);
    rec.flush(Duration::from_secs(10));
    println!("ready");
    // Still running when the process is killed.
    std::mem::forget(running);
    loop {
        std::thread::park();
    }
}

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

/// A listening window (`--listen`) says a program stopped writing as a window on a log
/// directory does: not while it runs, and once it is killed, with its running frame cut.
#[test]
fn a_program_killed_while_the_window_listens_is_shown_as_stopped() {
    let mut h = harness(DebuggerApp::listen("127.0.0.1:0", None, None));
    let addr = h.state().listener().expect("listening").addr().to_string();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_program_waits_to_be_killed",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_CONNECT_ENV, &addr)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    step_until(&mut h, "the program's running frame", |h| {
        h.state()
            .model()
            .is_some_and(|m| m.frame_count() == 2 && m.open_count() == 1)
    });
    // Alive: still running after a liveness probe or two, and nothing says it stopped.
    let probes = Instant::now() + Duration::from_millis(2500);
    while Instant::now() < probes {
        h.step();
        std::thread::sleep(Duration::from_millis(50));
    }
    {
        let m = h.state().model().unwrap();
        assert_eq!(m.open_count(), 1, "a live program's frame runs");
        let stuck = frame_labelled(&m, "request: stuck");
        assert!(
            !debugger_gui::ui::present::lane_title(&m, stuck.lane).contains("stopped writing"),
            "a running program is not said to have stopped"
        );
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    step_until(&mut h, "the running frame cut", |h| {
        h.state().model().is_some_and(|m| m.cut_count() == 1)
    });
    let m = h.state().model().unwrap();
    assert_eq!(m.open_count(), 0);
    let stuck = frame_labelled(&m, "request: stuck");
    assert!(m.is_cut(stuck));
    assert!(!m.is_cut(frame_labelled(&m, "request: finished")));
    assert!(
        debugger_gui::ui::present::lane_title(&m, stuck.lane).ends_with("· stopped writing"),
        "the lane says its process stopped writing"
    );
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

#[test]
fn the_bottom_panel_can_be_dragged_smaller_on_every_tab() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    for k in 0..40u64 {
        write_request(&w, 1 + (k % 4) as u32, T0 + k * 2_000_000, "GET /a");
    }
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "the whole log", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 120)
    });
    for tab in ["Contexts", "Statistics", "Histogram"] {
        h.get_by_label(tab).click();
        h.step();
        h.step();
        let before = canvas(&h).height();
        // The divider: the panel's top edge, just above its tab row.
        let tabs = h.get_by_label("Contexts").rect();
        let edge = egui::pos2(canvas(&h).center().x, tabs.top() - 7.0);
        drag(&mut h, edge, edge + egui::vec2(0.0, 160.0));
        h.step();
        let after = canvas(&h).height();
        assert!(
            after >= before + 100.0,
            "{tab}: the timeline grew from {before} px to only {after} px"
        );
        // Back up for the next tab.
        let tabs = h.get_by_label("Contexts").rect();
        let edge = egui::pos2(canvas(&h).center().x, tabs.top() - 7.0);
        drag(&mut h, edge, edge - egui::vec2(0.0, 160.0));
        h.step();
    }
}

#[test]
fn dragging_on_the_ruler_selects_a_range_that_limits_the_panels_and_the_flame_graph() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    for k in 0..4u64 {
        write_request(&w, 1, T0 + k * 2_000_000, "GET /a");
    }
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "the whole log", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 12)
    });
    h.step();
    let c = canvas(&h);
    let f = h.state().timeline();
    let (base, start, width) = (f.base.unwrap(), f.start, f.width);
    let x = |t: u64| c.left() + ((t - base) as f64 - start) as f32 / width as f32 * c.width();
    let (from, to) = (T0 + 1_500_000, T0 + 5_500_000);
    drag(
        &mut h,
        egui::pos2(x(from), c.top() + 6.0),
        egui::pos2(x(to), c.top() + 6.0),
    );
    let (a, b) = h.state().timeline().selection.expect("a selected range");
    let px = (width / f64::from(c.width())) as u64 * 2;
    assert!(a.abs_diff(from) <= px && b.abs_diff(to) <= px, "{a} {b}");
    assert_eq!(
        (h.state().timeline().start, h.state().timeline().width),
        (start, width),
        "selecting does not pan"
    );
    // The contexts list holds the two requests that start in the range.
    step_until(&mut h, "contexts limited to the range", |h| {
        h.query_by_label("2 contexts").is_some()
    });
    h.get_by_label("Limit statistics and contexts to it")
        .click();
    step_until(&mut h, "all contexts again", |h| {
        h.query_by_label("4 contexts").is_some()
    });
    // The flame graph of the selected range: the two queries in it, merged.
    h.state_mut()
        .set_view(debugger_gui::app::CentralView::FlameGraph);
    h.step();
    h.get_by_label("Selected range").click();
    step_until(&mut h, "the range's flame graph", |h| {
        merged_box(h, "User: Select").is_some()
    });
    let q = merged_box(&h, "User: Select").unwrap();
    h.hover_at(q.center());
    step_until(&mut h, "two queries in the range", |h| {
        h.query_by_label_contains("2 frames").is_some()
    });
    h.get_by_label("Clear").click();
    h.step();
    assert_eq!(h.state().timeline().selection, None);
}

#[test]
fn histogram_shows_a_labels_durations_and_goes_to_the_slowest() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    // 30 queries of 10..300 µs, then one of 5 ms.
    let frames: Vec<(u64, u64, &str, Category)> = (0..31u64)
        .map(|k| {
            let d = if k == 30 { 5_000_000 } else { (k + 1) * 10_000 };
            (T0 + k * 10_000_000, d, "db: query", Category::DATABASE)
        })
        .collect();
    let first = append_frames(&w, 1, "db", &frames);
    let worker = w.worker();
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "the whole log", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 31)
    });
    let at = h
        .state()
        .model()
        .unwrap()
        .find(FrameKey::new(worker, first))
        .unwrap();
    h.state_mut().select(Some(at));
    h.step();
    h.get_by_label("Histogram").click();
    step_until(&mut h, "the histogram", |h| {
        h.query_by_label_contains("31 frames · min 10").is_some()
    });
    // The 5 ms query is alone at the right end of the log scale.
    let c = h
        .get_by_role_and_label(Role::Canvas, "Duration histogram")
        .rect();
    click_at(&mut h, egui::pos2(c.right() - 3.0, c.center().y));
    step_until(&mut h, "the bar's frames", |h| {
        h.query_by_label_contains("longest first").is_some()
    });
    assert!(h.query_by_label_contains("1 frame lasting").is_some());
    h.get_by_label("Go to slowest").click();
    step_until(&mut h, "the slowest selected", |h| {
        h.state()
            .selected()
            .and_then(|at| h.state().model().unwrap().info(at))
            .is_some_and(|i| i.duration == 5_000_000)
    });
}

#[test]
fn clicking_the_overview_strip_moves_the_view_there() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    for k in 0..10u64 {
        write_request(&w, 1, T0 + k * 10_000_000, "GET /a");
    }
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "the whole log", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 30)
    });
    h.state_mut().timeline_mut().zoom_to(T0, T0 + 1_000_000);
    h.step();
    h.step();
    let width = h.state().timeline().width;
    let strip = h.get_by_role_and_label(Role::Canvas, "Overview").rect();
    click_at(
        &mut h,
        egui::pos2(strip.left() + strip.width() * 0.9, strip.center().y),
    );
    h.step();
    let f = h.state().timeline();
    let span = 91_000_000.0; // first start to last end
    let center = f.start + f.width / 2.0;
    assert!(
        (center - 0.9 * span).abs() < span * 0.02,
        "centered at 90 % of the log: {center} of {span}"
    );
    assert_eq!(f.width, width, "the zoom is kept");
    assert!(!f.follow);
}

#[test]
fn comparing_with_a_baseline_log_lists_changes_and_colors_the_flame_graph() {
    let base_dir = tempfile::tempdir().unwrap();
    let new_dir = tempfile::tempdir().unwrap();
    let (bw, nw) = (writer(base_dir.path()), writer(new_dir.path()));
    for k in 0..4u64 {
        write_request(&bw, 1, T0 + k * 2_000_000, "GET /a");
        write_request(&nw, 1, T0 + k * 2_000_000, "GET /a");
        write_request(&nw, 2, T0 + k * 2_000_000 + 1_000_000, "POST /b");
    }
    let mut app = DebuggerApp::open(new_dir.path());
    app.compare_with(base_dir.path());
    let mut h = harness(app);
    step_until(&mut h, "both logs", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 24)
            && h.state()
                .compare_model()
                .is_some_and(|m| m.frame_count() == 12)
    });
    // The Compare tab: a label only the open log has, and unchanged ones.
    step_until(&mut h, "the comparison", |h| {
        h.query_by_label_contains("Baseline:").is_some()
            && h.query_by_label_contains("– -> 4  new").is_some()
    });
    assert!(h.query_by_label_contains("4 -> 4  +0 %").is_some());
    // The flame graph says how each call path's share of the time changed.
    h.state_mut()
        .set_view(debugger_gui::app::CentralView::FlameGraph);
    step_until(&mut h, "the flame graph", |h| {
        merged_box(h, "GET /a").is_some()
    });
    assert!(h.query_by_label("Difference vs compared log").is_some());
    let a = merged_box(&h, "GET /a").unwrap();
    h.hover_at(a.center());
    step_until(&mut h, "the share change", |h| {
        h.query_by_label_contains("(compared log: 100.0 %)")
            .is_some()
    });
}

#[test]
fn fit_keeps_following_pause_stops_it_and_contexts_name_their_thread() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    write_request(&w, 7, T0, "GET /a");
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| !boxes(h, "User: Select").is_empty());
    // The contexts list says where each context ran.
    step_until(&mut h, "the thread column", |h| {
        h.query_by_label_contains("test-app (pid").is_some()
            && h.query_by_label_contains("· worker-7 (7)").is_some()
    });
    // Zoomed in, then F (fit): the whole log stays in view as it grows, and the status says so.
    h.state_mut().timeline_mut().zoom_to(T0, T0 + 100_000);
    step_until(&mut h, "paused by zooming", |h| {
        h.query_by_label_contains("Paused").is_some()
    });
    h.state_mut().timeline_mut().zoom_to_fit();
    step_until(&mut h, "fitted to a growing log: following", |h| {
        h.query_by_label_contains("Following").is_some()
    });
    write_request(&w, 7, T0 + 5_000_000, "GET /b");
    step_until(&mut h, "the view grew with the log", |h| {
        h.state().timeline().width > 5_000_000.0
    });
    // One click pauses: the view stops where it is.
    h.get_by_label_contains("Following").click();
    step_until(&mut h, "paused", |h| {
        h.query_by_label_contains("Paused").is_some()
    });
    let width = h.state().timeline().width;
    write_request(&w, 7, T0 + 20_000_000, "GET /c");
    step_until(&mut h, "the new request loaded", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 9)
    });
    h.step();
    assert_eq!(
        h.state().timeline().width,
        width,
        "paused: the view does not grow"
    );
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

#[test]
fn a_dropped_folder_opens_and_recent_logs_are_kept_and_reopened() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_request(&writer(a.path()), 1, T0, "GET /from-a");
    write_request(&writer(b.path()), 1, T0, "GET /from-b");
    let state = tempfile::tempdir().unwrap();
    let list = state.path().join("framelog/recent-logs");
    let mut app = DebuggerApp::open(a.path());
    app.set_recent_file(Some(list.clone()));
    let mut h = harness(app);
    step_until(&mut h, "log A", |h| !boxes(h, "GET /from-a").is_empty());
    // Drop log B's folder on the window.
    h.input_mut()
        .dropped_files
        .push(std::sync::Arc::new(DroppedFolder(b.path().to_owned())));
    step_until(&mut h, "log B shown", |h| {
        h.state().log_dir() == Some(b.path()) && !boxes(h, "GET /from-b").is_empty()
    });
    let dirs = [b.path(), a.path()].map(|p| LogSource::Dir(p.to_owned()));
    assert_eq!(h.state().recent_logs(), dirs);
    let saved = std::fs::read_to_string(&list).unwrap();
    assert_eq!(
        saved.lines().collect::<Vec<_>>(),
        [b.path().to_str().unwrap(), a.path().to_str().unwrap()]
    );
    // A restarted window knows them; the Open dialog lists them: one click reopens A.
    let mut app = DebuggerApp::new();
    app.set_recent_file(Some(list.clone()));
    let mut h = harness(app);
    h.get_by_label("File").click();
    step_until(&mut h, "the File menu", |h| {
        h.query_by_label("Open log…").is_some()
    });
    h.get_by_label("Open log…").click();
    let a_text = a.path().display().to_string();
    step_until(&mut h, "the recent logs", |h| {
        h.query_by_label(&a_text).is_some()
    });
    h.get_by_label(&a_text).click();
    step_until(&mut h, "log A reopened", |h| {
        h.state().log_dir() == Some(a.path()) && !boxes(h, "GET /from-a").is_empty()
    });
}

#[test]
fn right_click_shows_the_sandwich_of_a_label() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    for (k, route) in ["GET /a", "GET /a", "GET /a", "POST /b"].iter().enumerate() {
        write_request(&w, 1, T0 + k as u64 * 2_000_000, route);
    }
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 12)
    });
    h.state_mut()
        .set_view(debugger_gui::app::CentralView::FlameGraph);
    step_until(&mut h, "the flame graph", |h| {
        merged_box(h, "User: Select").is_some()
    });
    let q = merged_box(&h, "User: Select").unwrap();
    h.hover_at(q.center());
    for pressed in [true, false] {
        h.event(egui::Event::PointerButton {
            pos: q.center(),
            button: egui::PointerButton::Secondary,
            pressed,
            modifiers: egui::Modifiers::default(),
        });
    }
    step_until(&mut h, "the sandwich", |h| {
        h.state().flame_graph().sandwich.is_some()
            && h.query_by_label("Back to the flame graph").is_some()
    });
    h.step();
    // Both routes call the query: callers, each as wide as the query's time under it.
    let drawn = &h.state().flame_graph().drawn;
    let width = |label: &str| {
        drawn
            .iter()
            .filter(|(_, l, _)| l == label)
            .map(|(_, _, r)| r.width())
            .collect::<Vec<f32>>()
    };
    let (a, b, q) = (width("GET /a"), width("POST /b"), width("User: Select"));
    assert_eq!((a.len(), b.len()), (1, 1), "{drawn:?}");
    assert!(
        (a[0] / b[0] - 3.0).abs() < 0.05,
        "three of the four queries are under GET /a"
    );
    assert_eq!(
        q.len(),
        2,
        "the query at the root of callers and of callees"
    );
    h.get_by_label("Back to the flame graph").click();
    step_until(&mut h, "the flame graph again", |h| {
        h.state().flame_graph().sandwich.is_none() && merged_box(h, "POST /b").is_some()
    });
}

#[test]
fn clicking_a_lane_header_collapses_and_expands_it() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    write_request(&w, 1, T0, "GET /one");
    write_request(&w, 2, T0, "GET /two");
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "both lanes", |h| {
        !boxes(h, "GET /one").is_empty() && !boxes(h, "GET /two").is_empty()
    });
    // The first lane's header sits right under the ruler.
    let c = canvas(&h);
    let header = egui::pos2(c.left() + 200.0, c.top() + 22.0 + 9.0);
    let below = boxes(&h, "GET /two")[0].rect().top();
    click_at(&mut h, header);
    step_until(&mut h, "lane one collapsed", |h| {
        boxes(h, "GET /one").is_empty() && !boxes(h, "GET /two").is_empty()
    });
    assert!(
        boxes(&h, "GET /two")[0].rect().top() < below,
        "the lanes below move up"
    );
    click_at(&mut h, header);
    step_until(&mut h, "lane one expanded", |h| {
        !boxes(h, "GET /one").is_empty()
    });
}

/// Appends `n` closed frames labeled `label`, each `dur` ns, on thread 9 from `t`.
fn write_frames(w: &LogWriter, t: u64, label: &str, n: u32, dur: u64) {
    let frames: Vec<(u64, u64, &str, Category)> = (0..u64::from(n))
        .map(|k| (t + k * (dur + 1_000), dur, label, Category::JOB))
        .collect();
    append_frames(w, 9, "jobs", &frames);
}

#[test]
fn the_statistics_table_does_not_resort_under_the_pointer() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    write_frames(&w, T0, "job: alpha", 3, 1_000_000);
    write_frames(&w, T0 + 10_000_000, "job: beta", 1, 1_000_000);
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 4)
    });
    h.get_by_label("Statistics").click();
    // The table's row for a label (not the timeline's box).
    let row = |h: &Harness<'_, DebuggerApp>, label: &str| -> Option<Rect> {
        let c = canvas(h);
        h.query_all_by_label(label)
            .map(|n| n.rect())
            .find(|r| r.top() > c.bottom())
    };
    step_until(
        &mut h,
        "alpha above beta (more total time)",
        |h| matches!((row(h, "job: alpha"), row(h, "job: beta")), (Some(a), Some(b)) if a.top() < b.top()),
    );
    // The pointer rests on the table while beta overtakes alpha.
    let alpha = row(&h, "job: alpha").unwrap();
    h.hover_at(alpha.center());
    h.step();
    write_frames(&w, T0 + 20_000_000, "job: beta", 5, 1_000_000);
    step_until(&mut h, "the new frames loaded", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 9)
    });
    for _ in 0..5 {
        h.step();
    }
    let (a, b) = (
        row(&h, "job: alpha").unwrap(),
        row(&h, "job: beta").unwrap(),
    );
    assert!(a.top() < b.top(), "no re-sort under the pointer");
    // Pointer gone: the table catches up.
    h.hover_at(canvas(&h).center());
    step_until(
        &mut h,
        "beta above alpha",
        |h| matches!((row(h, "job: alpha"), row(h, "job: beta")), (Some(a), Some(b)) if b.top() < a.top()),
    );
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

#[test]
fn a_child_on_another_thread_follows_its_recorded_parent_in_every_view() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    let [req, other, load, ..] = write_hopping_request(&w, true);
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| !boxes(h, "load_user").is_empty());
    {
        let m = h.state().model().unwrap();
        // On the timeline, load_user stays on worker-2's lane, beside the unrelated request.
        let at = |id| m.find(FrameKey::new(w.worker(), id)).unwrap();
        assert_eq!(at(load).lane, at(other).lane);
        assert_ne!(at(load).lane, at(req).lane);
        // The call tree and self times follow the recorded parent.
        assert_eq!(
            call_path_total(&m, &["request", "load_user"]),
            Some(400_000)
        );
        assert_eq!(
            call_path_total(&m, &["request", "load_user", "decode"]),
            Some(100_000)
        );
        assert_eq!(call_path_total(&m, &["other", "load_user"]), None);
        // (Read before its parent, it was a root until the parent came: nothing is left
        // there.)
        assert_eq!(call_path_total(&m, &["load_user"]).unwrap_or(0), 0);
        let stats = |l: &str| m.stats().get(m.labels().get(l).unwrap());
        assert_eq!(
            stats("request").self_time_ns(),
            1_000_000 - 400_000 - 100_000
        );
        assert_eq!(stats("other").self_time_ns(), 2_000_000);
        assert_eq!(m.info(at(req)).unwrap().self_ns, 500_000);
        assert!(!m.parents_inferred());
    }
    assert!(h.query_by_label("parents inferred").is_none());
    // The aggregated flame graph draws load_user under request.
    h.state_mut()
        .set_view(debugger_gui::app::CentralView::FlameGraph);
    step_until(&mut h, "the merged boxes", |h| {
        merged_box(h, "load_user").is_some()
    });
    let (r, l, o) = (
        merged_box(&h, "request").unwrap(),
        merged_box(&h, "load_user").unwrap(),
        merged_box(&h, "other").unwrap(),
    );
    assert!(l.top() > r.top() && l.left() >= r.left() - 0.5 && l.right() <= r.right() + 0.5);
    assert!(
        l.right() <= o.left() + 0.5 || l.left() >= o.right() - 0.5,
        "not under other"
    );
    h.state_mut()
        .set_view(debugger_gui::app::CentralView::Timeline);
    step_until(&mut h, "the timeline", |h| {
        !boxes(h, "load_user").is_empty()
    });
    // Selecting load_user: the panel names its parent and child, and the timeline links the
    // parent on worker-1 to it.
    boxes(&h, "load_user")[0].click();
    step_until(&mut h, "the parent listed", |h| {
        h.query_by_label("request on worker-1 (another thread)")
            .is_some()
    });
    assert!(h.query_by_label("decode on worker-2").is_some());
    let (sel, links) = (
        h.state().selected().unwrap(),
        h.state().timeline().drawn.links.clone(),
    );
    let parent = h
        .state()
        .model()
        .unwrap()
        .find(FrameKey::new(w.worker(), req))
        .unwrap();
    assert_eq!(links, [(parent, sel)]);
    // The parent is a click away, and lists its children on both threads.
    settle(&mut h);
    h.get_by_label("request on worker-1 (another thread)")
        .click();
    step_until(&mut h, "the parent selected", |h| {
        h.state().selected() == Some(parent)
    });
    step_until(&mut h, "its children listed", |h| {
        h.query_by_label("load_user on worker-2 (another thread)")
            .is_some()
    });
    assert!(h.query_by_label("render on worker-1").is_some());
    assert!(h.query_by_label("Children (2)").is_some());
    assert_eq!(h.state().timeline().drawn.links, [(parent, sel)]);
    settle(&mut h);
    // The context view: the request as one tree across both threads; the unrelated
    // request is not in it.
    h.get_by_label("Context view").click();
    step_until(&mut h, "the context view", |h| {
        h.state().context_view().tree().is_some()
            && h.query_by_label(&format!("Context {req} · request"))
                .is_some()
    });
    let m = h.state().model().unwrap();
    let rows: Vec<(String, u32, bool)> = h
        .state()
        .context_view()
        .tree()
        .unwrap()
        .rows
        .iter()
        .map(|r| (m.labels().name(m.label_of(r.at)).to_owned(), r.depth, r.hop))
        .collect();
    drop(m);
    let want = [
        ("request", 0, false),
        ("load_user", 1, true),
        ("decode", 2, false),
        ("render", 1, false),
    ];
    assert_eq!(
        rows,
        want.map(|(l, d, hop)| (l.to_owned(), d, hop)),
        "the request's tree"
    );
    assert!(h.query_by_label_contains("4 frames on 2 threads").is_some());
    assert!(h.query_by_label_contains("1 hop between threads").is_some());
    // A row is a click away from selecting its frame.
    settle(&mut h);
    let decode_row = h
        .query_all_by_label("decode")
        .find(|n| n.accesskit_node().role() == Role::Button)
        .expect("decode's row");
    decode_row.click();
    step_until(&mut h, "decode selected", |h| {
        h.state()
            .selected()
            .and_then(|at| h.state().model().unwrap().info(at))
            .is_some_and(|i| i.label == "decode")
    });
}

#[test]
fn a_log_without_parents_infers_them_as_before_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    let [req, _, load, ..] = write_hopping_request(&w, false);
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| !boxes(h, "load_user").is_empty());
    {
        let m = h.state().model().unwrap();
        assert!(m.parents_inferred());
        // As before parents: load_user ran where no frame of its context ran: a root there.
        assert_eq!(call_path_total(&m, &["load_user"]), Some(400_000));
        assert_eq!(call_path_total(&m, &["load_user", "decode"]), Some(100_000));
        assert_eq!(call_path_total(&m, &["request", "load_user"]), None);
        let at = m.find(FrameKey::new(w.worker(), req)).unwrap();
        assert_eq!(m.info(at).unwrap().self_ns, 900_000);
        let l = m.find(FrameKey::new(w.worker(), load)).unwrap();
        assert_eq!(m.parent_of(l), None);
    }
    assert!(
        h.query_by_label("parents inferred").is_some(),
        "the status bar says so"
    );
    boxes(&h, "load_user")[0].click();
    step_until(&mut h, "the panel", |h| {
        h.query_by_label("(inferred)").is_some()
    });
    assert!(h.query_by_label("none (a root)").is_some());
    assert!(h.state().timeline().drawn.links.is_empty());
    settle(&mut h);
    // The context view still gathers the request's frames from both threads, load_user as
    // a tree of its own.
    h.get_by_label("Context view").click();
    step_until(&mut h, "the context view", |h| {
        h.state().context_view().tree().is_some()
    });
    let m = h.state().model().unwrap();
    let rows: Vec<(String, u32)> = h
        .state()
        .context_view()
        .tree()
        .unwrap()
        .rows
        .iter()
        .map(|r| (m.labels().name(m.label_of(r.at)).to_owned(), r.depth))
        .collect();
    assert_eq!(
        rows,
        [
            ("request", 0),
            ("render", 1),
            ("load_user", 0),
            ("decode", 1)
        ]
        .map(|(l, d)| (l.to_owned(), d))
    );
}
