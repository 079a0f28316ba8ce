//! The debugger in a real browser: headless Chromium opens the page `framelog view --http`
//! serves for a log that is still being written (the demo workload: a thread pool, async
//! tasks that move across threads, SQL in frame data), and what the app shows, read from the
//! state it publishes on `window` (`debugger-gui/src/web.rs`), matches the log: its first
//! frames while the log grows, every frame once the writer has gone, and one frame's data.
//!
//! Needs the built viewer (`FRAMELOG_WEB`, from `debugger-gui/web/build.sh`), puppeteer-core
//! (`FRAMELOG_WEB_TOOLS`) and Debian's Chromium (`CHROMIUM`); `.ci/run` provides all three.
//! Without them the test says what is missing, and fails under CI (`CI` set) rather than
//! passing silently.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use formats::{FrameKey, Record};
use framelog::{DataStore, LogReader};
use framelog_tests::viewer_client::view;

/// The built viewer and the browser tools, or why they are missing.
fn browser_env() -> Result<(PathBuf, PathBuf), String> {
    let web = std::env::var_os("FRAMELOG_WEB")
        .map(PathBuf::from)
        .filter(|w| w.join("index.html").is_file())
        .ok_or("FRAMELOG_WEB does not name a built viewer (run debugger-gui/web/build.sh)")?;
    let tools = std::env::var_os("FRAMELOG_WEB_TOOLS")
        .map(PathBuf::from)
        .filter(|t| t.join("node_modules/puppeteer-core").is_dir())
        .ok_or("FRAMELOG_WEB_TOOLS has no node_modules/puppeteer-core")?;
    let chromium = std::env::var_os("CHROMIUM").map_or("/usr/bin/chromium".into(), PathBuf::from);
    if !chromium.is_file() {
        return Err(format!("no browser at {}", chromium.display()));
    }
    Ok((web, tools))
}

/// The first frame written with data, once there is one.
fn a_frame_with_data(dir: &Path) -> Option<FrameKey> {
    let mut store = DataStore::open(dir).ok()?;
    let mut found = None;
    LogReader::open(dir)
        .ok()?
        .read_available(|_, rec| {
            if let Record::Start(s) = rec {
                let key = FrameKey {
                    worker: s.worker,
                    id: s.id,
                };
                if found.is_none() && store.contains(key) {
                    found = Some(key);
                }
            }
        })
        .ok()?;
    found
}

fn frames_in(dir: &Path) -> u64 {
    let mut n = 0;
    LogReader::open(dir)
        .unwrap()
        .read_available(|_, rec| n += u64::from(matches!(rec, Record::Start(_))))
        .unwrap();
    n
}

/// One browser at a time: two pages loading at once on a 2-core machine would each wait on
/// the other (and on the demo) for no part of what is tested.
static ONE_BROWSER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The built viewer's directory; `None` (the test returns) if the tools are missing outside
/// CI, having said which; under CI a missing tool fails the test.
fn web_or_skip() -> Option<String> {
    match browser_env() {
        Ok((web, _)) => Some(web.to_str().expect("a UTF-8 path to the viewer").to_owned()),
        Err(why) if std::env::var_os("CI").is_some() => {
            panic!("the browser test cannot run: {why}")
        }
        Err(why) => {
            framelog_tests::skipped("a browser_viewer test", &why.to_string());
            None
        }
    }
}

/// What `tests/web/viewer_check.mjs` reported, phase by phase (one JSON object each).
struct Phases {
    phases: Vec<serde_json::Value>,
    stdout: String,
}

impl Phases {
    /// The report of `name` (`first_frames`, `selected`, `finished`, …).
    fn get(&self, name: &str) -> &serde_json::Value {
        self.phases
            .iter()
            .find(|p| p["phase"] == name)
            .unwrap_or_else(|| panic!("no {name} phase in {}", self.stdout))
    }

    /// The app's state at `name`.
    fn state(&self, name: &str) -> &serde_json::Value {
        &self.get(name)["state"]
    }
}

/// Opens `page` in headless Chromium with `viewer_check.mjs` (selecting `select`, typing
/// `token` when refused), calls `on_phase` with each phase's name as it is reported, and
/// returns them all; panics with what the script said if the page failed.
fn check_page(
    page: &str,
    shot: &Path,
    select: Option<FrameKey>,
    token: Option<&str>,
    mut on_phase: impl FnMut(&str),
) -> Phases {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("web/viewer_check.mjs");
    let mut cmd = Command::new("node");
    cmd.arg(&script).arg(page).arg(shot);
    if let Some(k) = select {
        cmd.arg(format!("{}:{}", k.worker, k.id));
    }
    if let Some(t) = token {
        cmd.env("TOKEN", t);
    }
    let mut node = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run node");
    let mut phases = Vec::new();
    let mut stdout = String::new();
    for line in std::io::BufReader::new(node.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let phase: serde_json::Value = serde_json::from_str(&line).unwrap();
        on_phase(phase["phase"].as_str().unwrap_or_default());
        phases.push(phase);
        stdout.push_str(&line);
        stdout.push('\n');
    }
    let out = node.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the page failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    Phases { phases, stdout }
}

#[test]
fn the_page_asks_for_the_token_a_server_wants_and_then_shows_the_log() {
    let Some(web) = web_or_skip() else {
        return;
    };
    let _one = ONE_BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let status = Command::new(env!("CARGO_BIN_EXE_async_child"))
        .arg("demo")
        .arg(&dir)
        .arg("1")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let (mut view, page) = view(&dir, &["--web", &web, "--token", "s3cret-token"]);
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-viewer-token.png");
    let phases = check_page(&page, &shot, None, Some("s3cret-token"), |_| {});
    let _ = view.kill();
    let _ = view.wait();
    let state = |name| phases.state(name);
    // Refused first, saying so (not a bare "closed the connection"), with nothing shown.
    let refused = state("refused");
    assert_eq!(refused["frames"], 0, "{refused}");
    // Then, with the token typed in, the whole log.
    let done = state("finished");
    assert_eq!(done["frames"].as_u64(), Some(frames_in(&dir)), "{done}");
    assert!(done["errors"].as_array().unwrap().is_empty(), "{done}");
}

#[test]
fn the_browser_viewer_follows_a_live_log_and_shows_its_frames_and_data() {
    let Some(web) = web_or_skip() else {
        return;
    };
    let _one = ONE_BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    // The demo, recording until its stdin closes.
    let mut demo = Command::new(env!("CARGO_BIN_EXE_async_child"))
        .arg("demo")
        .arg(&dir)
        .arg("stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut demo_out = std::io::BufReader::new(demo.stdout.take().unwrap());
    let mut line = String::new();
    demo_out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "started");
    let mut key = None;
    framelog_tests::wait_until(30, "a frame with data in the log", || {
        key = a_frame_with_data(&dir);
        key.is_some()
    });
    let key = key.unwrap();

    // Served as the README runs it: loopback, a free port, the built viewer at `/`.
    let (mut view, page) = view(&dir, &["--web", &web]);

    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-viewer.png");
    // The demo writes until the page has shown its first frames and the selected frame's
    // data; then it ends, and the page must notice and take in the rest.
    let mut demo_stdin = demo.stdin.take();
    let phases = check_page(&page, &shot, Some(key), None, |phase| {
        if phase == "selected" {
            drop(demo_stdin.take());
        }
    });
    drop(demo_stdin);
    let demo_status = demo.wait().unwrap();
    let _ = view.kill();
    let _ = view.wait();
    assert!(demo_status.success());
    let phase = |name| phases.get(name);

    // The first frames arrived while the demo was still writing (the server says so).
    let live = &phase("first_frames")["state"];
    assert!(live["frames"].as_u64().unwrap() > 0, "{live}");
    assert_eq!(live["writers"].as_array().map(Vec::len), Some(1), "{live}");
    assert!(live["waiting"].is_null(), "{live}");
    assert!(live["errors"].as_array().unwrap().is_empty(), "{live}");

    // The selected frame's data is the log's, as `framelog data` prints it.
    let selected = &phase("selected")["state"];
    let expected = bson::Bson::Document(DataStore::open(&dir).unwrap().get(key).unwrap().unwrap())
        .into_relaxed_extjson();
    assert_eq!(selected["data"], expected, "{selected}");

    // Once the writer has gone, the page holds every frame of the log.
    let done = &phase("finished")["state"];
    assert_eq!(done["frames"].as_u64(), Some(frames_in(&dir)), "{done}");
    assert!(done["errors"].as_array().unwrap().is_empty(), "{done}");
    // And its status bar says the log is finished.
    assert_eq!(phase("says_finished")["state"]["says_finished"], true);

    // The screenshot shows the app (not a blank or an error page): many colours.
    let shot_phase = phase("screenshot");
    let colours = shot_phase["colours"].as_u64().unwrap();
    assert!(
        colours > 50,
        "the screenshot has only {colours} colours: {}",
        shot.display()
    );
    eprintln!("screenshot: {}", shot.display());
    // The README's picture of the page, taken here so that it shows the page as it is.
    if std::env::var_os("FRAMELOG_SCREENSHOT").is_some() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/screenshot-web.png");
        std::fs::copy(&shot, &docs).expect("copy the screenshot into docs/");
    }
}

/// Whether the browser tools are there (the built viewer is not needed); `false` (the test
/// returns) if not, having said why; under CI a missing tool fails the test.
fn browser_tools_or_skip() -> bool {
    let tools = std::env::var_os("FRAMELOG_WEB_TOOLS")
        .map(PathBuf::from)
        .filter(|t| t.join("node_modules/puppeteer-core").is_dir());
    let chromium = std::env::var_os("CHROMIUM").map_or("/usr/bin/chromium".into(), PathBuf::from);
    let why = match tools {
        None => "FRAMELOG_WEB_TOOLS has no node_modules/puppeteer-core".to_owned(),
        Some(_) if !chromium.is_file() => format!("no browser at {}", chromium.display()),
        Some(_) => return true,
    };
    assert!(
        std::env::var_os("CI").is_none(),
        "the browser test cannot run: {why}"
    );
    framelog_tests::skipped("a browser_viewer test", &why.to_string());
    false
}

#[test]
fn a_page_from_another_origin_cannot_open_the_servers_websocket() {
    if !browser_tools_or_skip() {
        return;
    }
    let _one = ONE_BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let status = Command::new(env!("CARGO_BIN_EXE_session_child"))
        .arg("--dir")
        .arg(&dir)
        .args(["--frames", "100"])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    // As the README runs it: loopback, no token.
    let (mut view, page) = view(&dir, &[]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("web/cross_origin_check.mjs");
    let out = Command::new("node")
        .arg(&script)
        .arg(&page)
        .output()
        .expect("run node");
    let _ = view.kill();
    let _ = view.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the check failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    // Another site's page cannot open the WebSocket; nor can a page under a rebound name,
    // whose request for the server's own page is refused too.
    assert_eq!(r["foreign"], "error", "{r}");
    assert_eq!(r["rebound_page"], 403, "{r}");
    assert_eq!(r["rebound_ws"], "error", "{r}");
    // The server's own page can (the control: the same code opens it).
    assert_eq!(r["own"], "open", "{r}");
}
