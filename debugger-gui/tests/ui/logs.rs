//! Opening and following logs: drawn frames, growing and finished logs, bad and damaged logs, a killed writer, File > Open, recent logs, exports.

use super::*;

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
            "logs::child_writer_waits_to_be_killed",
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
