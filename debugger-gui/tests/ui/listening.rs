//! A window that records (`--listen`): quitting it (keep, discard, save as), resuming a suspended program, a program killed while it streams.

use super::*;

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

/// A listening window (`--listen`) says a program stopped writing as a window on a log
/// directory does: not while it runs, and once it is killed, with its running frame cut.
#[test]
fn a_program_killed_while_the_window_listens_is_shown_as_stopped() {
    let mut h = harness(DebuggerApp::listen("127.0.0.1:0", None, None));
    let addr = h.state().listener().expect("listening").addr().to_string();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "listening::child_program_waits_to_be_killed",
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
