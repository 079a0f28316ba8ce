//! Helpers shared by the integration tests and their child-process binaries.

use formats::{Category, FrameEnd, FrameKey, FrameStart};

pub mod viewer_client;

/// The frame data a test child attaches to `key`: derived from the key so a test can
/// recompute and compare it.
pub fn expected_data(key: FrameKey) -> serde_json::Value {
    serde_json::json!({
        "worker": key.worker,
        "id": key.id,
        "sql": format!("SELECT * FROM t WHERE id = {}", key.id),
        "pad": "x".repeat((key.id % 97) as usize),
    })
}

/// Appends `count` start+end frames with ids `first..` of `worker` to `buf`.
pub fn encode_frames(buf: &mut Vec<u8>, worker: u8, first: u32, count: u32, label: &str) {
    let mut tmp = [0u8; 300];
    for i in 0..count {
        let id = first.wrapping_add(i);
        let t = 1_700_000_000_000_000_000 + u64::from(id) * 1000;
        let n = FrameStart {
            parent: formats::Parent::NotRecorded,
            id,
            worker,
            timestamp: t,
            context: id,
            category: Category::JOB,
            label,
        }
        .encode(&mut tmp)
        .expect("fits");
        buf.extend_from_slice(&tmp[..n]);
        let n = FrameEnd {
            id,
            worker,
            timestamp: t + 500,
        }
        .encode(&mut tmp)
        .expect("fits");
        buf.extend_from_slice(&tmp[..n]);
    }
}

/// Says, where a person running `cargo test` sees it, that `test` was skipped and why.
///
/// Written to the process's stderr directly: the test harness captures `eprintln!` of a
/// passing test, so a skipped test would otherwise just say "ok".
pub fn skipped(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "\n    {test}: SKIPPED: {why}");
}

/// The `framelog` CLI, built fresh (once per test process) into this test binary's target
/// directory: it belongs to another package, so Cargo does not build it for these tests.
pub fn framelog_bin() -> std::path::PathBuf {
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| {
        let release = !cfg!(debug_assertions);
        let mut cmd = std::process::Command::new(env!("CARGO"));
        // With the dependencies' features as `cargo test --workspace` unifies them (the whole
        // workspace, dev-dependencies on through a test target): under it this build has
        // nothing to do. `-p framelog` alone resolved other features, rebuilt framelog and
        // tokio, hyper and more beside the test build's, and cost a fresh clone's run 30 s.
        cmd.args([
            "build",
            "--quiet",
            "--workspace",
            "--bin",
            "framelog",
            "--test",
            "cli",
        ]);
        if release {
            cmd.arg("--release");
        }
        let ok = cmd.status().expect("run cargo build").success();
        assert!(ok, "cargo build -p framelog failed");
    });
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test>-<hash> → target/<profile>/framelog
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("framelog"))
        .expect("target directory");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p framelog` (or `cargo test --workspace`) first",
        bin.display()
    );
    bin
}

/// Asserts that `framelog check DIR` finds nothing wrong (printing what it found if not).
pub fn assert_check_clean(dir: &std::path::Path) {
    let check = std::process::Command::new(framelog_bin())
        .arg("check")
        .arg(dir)
        .output()
        .expect("run framelog check");
    assert!(
        check.status.success(),
        "framelog check: {}",
        String::from_utf8_lossy(&check.stdout)
    );
}

/// A running `framelog serve` child process.
pub struct Serve {
    /// The child.
    pub child: std::process::Child,
    /// `HOST:PORT` it listens on.
    pub addr: String,
    /// `http://HOST:PORT/` it serves viewers on (with `--http`).
    pub http: Option<String>,
    /// Its stderr lines, collected by a thread.
    pub log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Serve {
    /// Starts `framelog serve --listen LISTEN --dir DIR EXTRA…` and waits for its
    /// `listening on` line.
    pub fn start(listen: &str, dir: &std::path::Path, extra: &[&str]) -> Serve {
        let mut cmd = std::process::Command::new(framelog_bin());
        cmd.args(["serve", "--listen", listen, "--dir"])
            .arg(dir)
            .args(extra);
        Serve::spawn(cmd)
    }

    /// Runs `cmd` (a `framelog serve …` command line, perhaps wrapped, e.g. by `sh -c
    /// 'ulimit -n 1024 && exec "$@"'`) and waits for its `listening on` line.
    pub fn spawn(mut cmd: std::process::Command) -> Serve {
        use std::io::BufRead;
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn framelog serve");
        // `serving http://…/` comes first when viewers are served too (`--http`).
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut http = None;
        let addr = loop {
            let mut line = String::new();
            stdout
                .read_line(&mut line)
                .expect("read the listening line");
            let line = line.trim();
            if let Some(url) = line.strip_prefix("serving ") {
                http = Some(url.to_owned());
                continue;
            }
            break line
                .strip_prefix("listening on ")
                .unwrap_or_else(|| panic!("line {line:?} is not `listening on ADDR`"))
                .to_owned();
        };
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let l = log.clone();
        let stderr = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                l.lock().unwrap().push(line);
            }
        });
        Serve {
            child,
            addr,
            http,
            log,
        }
    }

    /// Sends SIGTERM and waits; the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        signal(self.child.id(), "TERM");
        self.child.wait().expect("wait for framelog serve")
    }

    /// Its log lines so far.
    pub fn lines(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

/// Sends `SIG<name>` to `pid` with kill(1).
pub fn signal(pid: u32, name: &str) {
    let ok = std::process::Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .expect("run kill")
        .success();
    assert!(ok, "kill -{name} {pid}");
}

/// Polls `cond` every 20 ms until it holds; panics with `what` after `secs` seconds.
pub fn wait_until(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {secs} s waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
