//! Remote logs with real processes on 127.0.0.1: programs stream to a live `framelog serve`
//! (connect mode), the server serves the log to viewers (`--http`), and the debugger's model,
//! fed over a real WebSocket, must hold what the same log opened from disk holds: frames,
//! statistics, contexts, which writers stopped (one ends, one is killed), and each frame's
//! data.

mod common;
use common::{harness, step_until};

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use debugger_gui::DebuggerApp;
use debugger_gui::data_loader::{DataLoader, DataResult};
use debugger_gui::ingest::Ingest;
use debugger_gui::model::Model;
use egui_kittest::kittest::Queryable;
use formats::FrameKey;
use framelog_tests::{Serve, viewer_client, wait_until};

/// The environment variable that makes this test binary the recording program.
const PROGRAM: &str = "DEBUGGER_GUI_TEST_PROGRAM";

/// Not a test of its own: the recording program the tests start (this binary run again with
/// [`PROGRAM`] set to a server's address). It runs the stopwatch demo workload (requests on
/// threads and async tasks, SQL as frame data), streaming to the server until its stdin
/// closes.
#[test]
fn recording_program() {
    let Ok(addr) = std::env::var(PROGRAM) else {
        return;
    };
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        s.store(true, Ordering::Relaxed);
    });
    stopwatch::demo::run(stopwatch::demo::DemoOptions {
        dir: None,
        connect: Some(addr),
        duration: None,
        threads: 2,
        requests_per_sec: 400,
        stop,
        ..Default::default()
    })
    .expect("the demo workload runs");
}

/// A recording program streaming to `addr`; it stops when its stdin is closed.
fn program(addr: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "recording_program",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PROGRAM, addr)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start a recording program")
}

/// The server's viewer URL for the page address it printed.
fn ws_url(http: &str) -> String {
    format!(
        "ws://{}/ws",
        http.trim_start_matches("http://").trim_end_matches('/')
    )
}

/// Kills a server this test started if the test fails before stopping it (a server runs
/// until told to stop; a finished test's server is gone already and this does nothing).
struct Reap(u32);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", &self.0.to_string()])
            .stderr(Stdio::null())
            .status();
    }
}

/// Processes (workers) the model has heard of.
fn workers(m: &Model) -> Vec<u8> {
    (0..=u8::MAX)
        .filter(|&w| !m.worker(w).name.is_empty())
        .collect()
}

/// Asks `loader` for `key`'s data and waits for the answer.
fn data(loader: &DataLoader, key: FrameKey) -> DataResult {
    loader.request(key);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some((k, r)) = loader.poll().into_iter().find(|(k, _)| *k == key) {
            assert_eq!(k, key);
            return r;
        }
        assert!(Instant::now() < deadline, "no answer for {key:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_remote_log_streamed_live_holds_what_the_log_on_disk_holds() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start("127.0.0.1:0", dir.path(), &["--http", "127.0.0.1:0"]);
    let _reap_serve = Reap(serve.child.id());
    let url = ws_url(serve.http.as_deref().expect("serving http://"));
    // The window connects before anything is recorded, and follows the log as it grows.
    let remote = Ingest::connect(&url, "");
    let mut programs = [program(&serve.addr), program(&serve.addr)];
    // Live: both programs' frames reach the window while they run.
    wait_until(120, "frames of both programs while they run", || {
        let m = remote.model();
        let listed = remote.status().writers.is_some_and(|w| w.len() == 2);
        workers(&m).len() == 2 && m.closed_count() > 2000 && listed
    });
    let m = remote.model();
    assert!(workers(&m).iter().all(|&w| !m.worker(w).stopped));
    drop(m);
    // One program ends, the other is killed (its frames still open are cut, on both sides).
    drop(programs[0].stdin.take());
    assert!(programs[0].wait().unwrap().success());
    programs[1].kill().unwrap();
    programs[1].wait().unwrap();
    // Both stopped writing: the server's Status no longer lists them, the window says so.
    wait_until(120, "both programs shown stopped", || {
        let m = remote.model();
        let s = remote.status();
        s.caught_up && workers(&m).iter().all(|&w| m.worker(w).stopped)
    });
    let status = remote.status();
    assert!(status.errors.is_empty(), "{:?}", status.errors);
    assert_eq!(status.writers, Some(vec![]));
    assert!(status.compacted && !status.finished, "{status:?}");
    assert!(status.bytes_read > 0 && status.bytes_read <= status.total_bytes);

    // The same log from its directory (followed too, so its writers are looked up).
    let local = Ingest::start(dir.path(), true);
    wait_until(
        120,
        "the log read from disk, its writers found stopped",
        || {
            let m = local.model();
            local.status().caught_up
                && !workers(&m).is_empty()
                && workers(&m).iter().all(|&w| m.worker(w).stopped)
        },
    );
    let (r, l) = (remote.model(), local.model());
    assert_eq!(debugger_gui::model::same::difference(&r, &l), None);
    // Nothing left running: the killed program's open frames were cut where it stopped.
    assert!(r.frame_count() > 2000 && r.open_count() == 0);
    assert!(
        r.labels().get("User: Select").is_some(),
        "the demo's queries"
    );
    let keys: Vec<FrameKey> = {
        let mut v = Vec::new();
        r.for_each_frame(|at, _, _| v.push(r.info(at).unwrap().key));
        v
    };
    drop((r, l));

    // Frame data: asked of the server, as the data panel asks, against the log's own store.
    let (remote_data, local_data) = (DataLoader::for_log(&remote), DataLoader::for_log(&local));
    let mut store = framelog::DataStore::open(dir.path()).unwrap();
    let with_data: Vec<FrameKey> = keys
        .iter()
        .copied()
        .filter(|&k| store.contains(k))
        .collect();
    assert!(
        with_data.len() > 100,
        "the demo attaches data: {}",
        with_data.len()
    );
    let without: Vec<FrameKey> = keys
        .iter()
        .copied()
        .filter(|&k| !store.contains(k))
        .collect();
    let step = (with_data.len() / 7).max(1);
    for &key in with_data.iter().step_by(step).chain(without.iter().take(3)) {
        let expected = match store.get(key).unwrap() {
            Some(doc) => DataResult::Found(doc),
            None => DataResult::None,
        };
        assert_eq!(data(&remote_data, key), expected, "{key:?} from the server");
        assert_eq!(
            data(&local_data, key),
            expected,
            "{key:?} from the directory"
        );
    }
    assert!(serve.terminate().success());
}

#[test]
fn a_log_many_credit_windows_long_loads_whole_and_the_window_exits_when_loaded() {
    // Credit is granted again only as the model takes records in: a log of several windows
    // arrives whole (a viewer that never re-granted would stall at the first window).
    let dir = tempfile::tempdir().unwrap();
    let opts = debugger_gui::synth::SynthOptions {
        frames: 400_000,
        ..Default::default()
    };
    let frames = debugger_gui::synth::write_log(dir.path(), &opts).unwrap();
    // Credit counts the records' bytes as they travel (unpacked), not the packed files'.
    let mut bytes = 0u64;
    framelog::LogReader::open(dir.path())
        .unwrap()
        .read_available(|_, r| bytes += r.encoded_len() as u64)
        .unwrap();
    let window = u64::from(debugger_gui::feed::viewer::CREDIT_WINDOW);
    assert!(bytes > 2 * window, "{bytes} bytes of records");
    let (mut view, page) = viewer_client::view(dir.path(), &[]);
    let _reap_view = Reap(view.id());
    let remote = Ingest::connect(&ws_url(&page), "");
    // What `--exit-when-loaded` waits for.
    wait_until(300, "the whole log loaded", || {
        let s = remote.status();
        assert!(s.errors.is_empty(), "{:?}", s.errors);
        s.compacted && s.caught_up
    });
    let local = Ingest::start(dir.path(), false);
    assert!(local.wait_caught_up(Duration::from_secs(300)));
    let (r, l) = (remote.model(), local.model());
    assert_eq!(r.frame_count(), frames);
    assert_eq!(debugger_gui::model::same::difference(&r, &l), None);
    let s = remote.status();
    // The server read the whole log (its files' bytes but their headers; packed, so fewer
    // than the records' bytes the credit counted).
    assert!(
        s.progress() == 1.0 && s.bytes_read * 100 >= s.total_bytes * 99,
        "{s:?}"
    );
    framelog_tests::signal(view.id(), "TERM");
    assert!(view.wait().unwrap().success());
}

/// Damaged bytes in the middle of a served log: the remote window skips what the reader on
/// disk skips, says the same, and holds the same model (frames whose ends were lost included).
#[test]
fn damage_in_a_served_log_costs_what_it_costs_on_disk_and_is_said_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let opts = debugger_gui::synth::SynthOptions {
        frames: 50_000,
        ..Default::default()
    };
    debugger_gui::synth::write_log(dir.path(), &opts).unwrap();
    // 64 random-looking bytes over the middle of the first frame segment.
    let seg = dir.path().join(formats::FileKind::FrameLog.file_name(1));
    let mut bytes = std::fs::read(&seg).unwrap();
    let mid = bytes.len() / 2;
    for (i, b) in bytes[mid..mid + 64].iter_mut().enumerate() {
        *b ^= 0x5a ^ (i as u8).wrapping_mul(37);
    }
    std::fs::write(&seg, &bytes).unwrap();

    // Both followed, as the window opens them: the writer is found gone, and the frames
    // whose ends were in the damaged bytes end there.
    let local = Ingest::start(dir.path(), true);
    let (mut view, page) = viewer_client::view(dir.path(), &[]);
    let _reap_view = Reap(view.id());
    let remote = Ingest::connect(&ws_url(&page), "");
    let stopped = |i: &Ingest| {
        let m = i.model();
        let w = workers(&m);
        !w.is_empty() && w.iter().all(|&w| m.worker(w).stopped)
    };
    wait_until(120, "both logs loaded and their writer found gone", || {
        stopped(&local) && stopped(&remote) && remote.status().caught_up
    });
    let (r, l) = (remote.model(), local.model());
    assert!(
        l.frame_count() > 0 && l.frame_count() < 50_000,
        "damage cost frames"
    );
    assert_eq!(r.frame_count(), l.frame_count());
    assert_eq!(debugger_gui::model::same::difference(&r, &l), None);
    drop((r, l));
    let (re, le) = (remote.status().errors, local.status().errors);
    assert!(
        le.iter().any(|e| e.contains("frames-000001")),
        "the damage names its file: {le:?}"
    );
    // The same words; a server names its files, never its directory.
    let prefix = format!("{}/", dir.path().display());
    let le: Vec<String> = le.iter().map(|e| e.replace(&prefix, "")).collect();
    assert_eq!(re, le, "the window says what a reader on disk says");
    framelog_tests::signal(view.id(), "TERM");
    assert!(view.wait().unwrap().success());
}

#[test]
fn a_token_is_asked_for_and_a_dead_server_is_said_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start("127.0.0.1:0", dir.path(), &["--http", "127.0.0.1:0"]);
    let _reap_serve = Reap(serve.child.id());
    let mut p = program(&serve.addr);
    wait_until(120, "the program's first frames on disk", || {
        framelog::segments::is_log(dir.path())
    });
    drop(p.stdin.take());
    assert!(p.wait().unwrap().success());
    let (mut view, page) = viewer_client::view(dir.path(), &["--token", "s3cret"]);
    let _reap_view = Reap(view.id());
    let url = ws_url(&page);

    // No token: refused, and the window asks for one.
    let mut h = harness(DebuggerApp::open_url(&url, ""));
    step_until(&mut h, "the token box", |h| {
        h.query_by_label("Token").is_some()
    });
    assert!(
        h.query_by_label_contains("refused this window").is_some(),
        "the server's refusal is shown"
    );
    h.get_by_label("Token").type_text("s3cret");
    h.run_steps(2);
    h.get_by_label("Connect").click();
    step_until(&mut h, "frames from the remote log, drawn", |h| {
        // A frame's label, as the timeline's box for it is named.
        let label = h.state().model().and_then(|m| {
            let mut first = None;
            m.for_each_frame(|at, _, _| {
                first.get_or_insert(at);
            });
            first.and_then(|at| m.info(at)).map(|i| i.label)
        });
        label.is_some_and(|l| h.query_all_by_label(&l).next().is_some())
    });
    assert!(
        h.state().problems().is_empty(),
        "{:?}",
        h.state().problems()
    );
    assert_eq!(
        h.state().log_source().map(ToString::to_string),
        Some(url.clone())
    );
    // A wrong token is refused again: the box comes back.
    h.state_mut().open_remote(&url, "wrong");
    step_until(&mut h, "the token box again", |h| {
        h.query_by_label("Token").is_some()
    });
    framelog_tests::signal(view.id(), "TERM");
    assert!(view.wait().unwrap().success());
    assert!(serve.terminate().success());

    // Nothing listening there any more: a clear message in the window, no panic.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("ws://{}/ws", l.local_addr().unwrap())
    };
    let mut h = harness(DebuggerApp::open_url(&dead, ""));
    step_until(&mut h, "the connection error", |h| {
        h.query_by_label_contains("Could not connect to ws://")
            .is_some()
    });
    assert!(h.state().ingest_status().finished);
    // Not a framelog server (an HTTP server with no WebSocket there): said plainly too.
    let (mut view, page) = viewer_client::view(dir.path(), &[]);
    let _reap_view = Reap(view.id());
    let wrong_path = format!("{}/nothing-here", ws_url(&page).trim_end_matches("/ws"));
    let mut h = harness(DebuggerApp::open_url(&wrong_path, ""));
    step_until(&mut h, "the handshake error", |h| {
        h.query_by_label_contains("Could not connect to ws://")
            .is_some()
    });
    framelog_tests::signal(view.id(), "TERM");
    assert!(view.wait().unwrap().success());
}

/// A log whose starts record their parents, served by `framelog view`: the viewer protocol
/// carries the parents (Records version 2), and the window's model over the socket holds the
/// parents the log on disk gives, children read before their parents and parents on other
/// threads included.
#[test]
fn recorded_parents_arrive_over_the_viewer_protocol() {
    use formats::{Category, FrameEnd, FrameStart, Parent, Record, ThreadInfo};
    let dir = tempfile::tempdir().unwrap();
    let w = framelog::LogWriter::open(dir.path()).unwrap();
    let worker = w.worker();
    const T0: u64 = 1_700_000_000_000_000_000;
    let n = 3_000u32;
    let first = w.reserve_ids(n * 3).unwrap();
    // Each request starts on thread 1, its `load` child runs on thread 2 (written first, as
    // a buffer flushed early) and `decode` under it there.
    for k in 0..n {
        let (req, load, decode) = (first + 3 * k, first + 3 * k + 1, first + 3 * k + 2);
        let t = T0 + u64::from(k) * 10_000;
        let start = |id, dt, label, parent| {
            Record::Start(FrameStart {
                parent,
                id,
                worker,
                timestamp: t + dt,
                context: req,
                category: Category::FUNCTION,
                label,
            })
        };
        let end = |id, dt| {
            Record::End(FrameEnd {
                id,
                worker,
                timestamp: t + dt,
            })
        };
        let thread = |thread, name| {
            Record::ThreadInfo(ThreadInfo {
                worker,
                thread,
                timestamp: t,
                name,
            })
        };
        let mut bytes = Vec::new();
        for r in [
            thread(2, "worker-2"),
            start(load, 1_000, "load", Parent::Frame(req)),
            start(decode, 2_000, "decode", Parent::Frame(load)),
            end(decode, 3_000),
            end(load, 5_000),
            thread(1, "worker-1"),
            start(req, 0, "request", Parent::Root),
            end(req, 9_000),
        ] {
            r.encode_to_vec(&mut bytes);
        }
        w.append_frames(&bytes).unwrap();
    }
    drop(w);
    let (mut view, page) = viewer_client::view(dir.path(), &[]);
    let _reap_view = Reap(view.id());
    let remote = Ingest::connect(&ws_url(&page), "");
    wait_until(120, "the whole log loaded", || {
        let s = remote.status();
        assert!(s.errors.is_empty(), "{:?}", s.errors);
        s.caught_up && remote.model().frame_count() == u64::from(n) * 3
    });
    let local = Ingest::start(dir.path(), false);
    assert!(local.wait_caught_up(Duration::from_secs(120)));
    let (r, l) = (remote.model(), local.model());
    assert_eq!(
        r.parent_counts(),
        (u64::from(n) * 3, 0),
        "every start's parent recorded"
    );
    assert_eq!(debugger_gui::model::same::difference(&r, &l), None);
    // Every load hangs under its request on the other thread.
    let tree = r.call_tree();
    let path_of = |label: &str| {
        let mut paths = Vec::new();
        r.for_each_frame(|at, row, i| {
            if r.labels().name(r.label_of(at)) == label {
                let p: Vec<&str> = tree
                    .path(row.node(i))
                    .iter()
                    .map(|&x| r.labels().name(tree.label(x)))
                    .collect();
                paths.push(p.join("/"));
                let parent = r.parent_of(at);
                assert!(
                    matches!(parent, Some(debugger_gui::model::ParentOf::Frame(p)) if p.lane != at.lane),
                    "{parent:?}"
                );
            }
        });
        paths.dedup();
        paths
    };
    assert_eq!(path_of("load"), ["request/load"]);
    drop((r, l));
    framelog_tests::signal(view.id(), "TERM");
    assert!(view.wait().unwrap().success());
}
