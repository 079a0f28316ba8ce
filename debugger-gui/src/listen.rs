//! [`Listener`]: the window as a recording server (`debugger-gui --listen`, File > Listen…).
//! Programs that connect (`FRAMELOG_CONNECT`) are recorded into one log directory, which the
//! window opens and follows like any log; the Processes tab drives their sessions.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use framelog::formats::protocol::{ModeSetting, SamplingSetting, SessionSettings};
use framelog::remote::{ProcessInfo, Server, ServerOptions};
use parking_lot::Mutex;

use crate::temp_log::Choice;

/// Server log lines kept for the Processes tab.
const MAX_LINES: usize = 200;

/// Session settings as the Processes tab edits them.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionForm {
    /// Buffering mode the programs use while recorded.
    pub mode: ModeSetting,
    /// Record each context with this probability (1 = all).
    pub probability: f64,
    /// Record frame data.
    pub frame_data: bool,
    /// Start recording programs as soon as they connect.
    pub auto_start: bool,
    /// Resume suspended programs at once (otherwise: the Resume button).
    pub auto_resume: bool,
}

impl Default for SessionForm {
    fn default() -> Self {
        Self {
            mode: ModeSetting::Keep,
            probability: 1.0,
            frame_data: true,
            auto_start: true,
            auto_resume: false,
        }
    }
}

impl SessionForm {
    /// The StartSession settings of this form.
    pub fn settings(&self) -> SessionSettings {
        SessionSettings {
            mode: self.mode,
            sampling: if self.probability >= 1.0 {
                SamplingSetting::Keep
            } else {
                SamplingSetting::Probability(self.probability.clamp(0.0, 1.0))
            },
            frame_data: self.frame_data,
            ..SessionSettings::keep()
        }
    }
}

/// A running server and the log directory it records into.
pub struct Listener {
    server: Server,
    /// The temporary directory recorded into (`--listen` without a directory), deleted
    /// with the listener unless [`Listener::settle`] keeps or moves it.
    temp: Option<tempfile::TempDir>,
    lines: Arc<Mutex<Vec<String>>>,
    /// The settings the tab shows (and new sessions use).
    pub form: SessionForm,
}

impl Listener {
    /// Listens on `addr`, recording into `dir` (a new temporary directory if `None`).
    pub fn start(addr: &str, dir: Option<&Path>, token: Option<String>) -> anyhow::Result<Self> {
        let (dir, temp): (PathBuf, _) = match dir {
            Some(d) => (d.to_owned(), None),
            None => {
                let t = tempfile::Builder::new()
                    .prefix("framelog-listen-")
                    .tempdir()?;
                (t.path().to_owned(), Some(t))
            }
        };
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        let l = lines.clone();
        let form = SessionForm::default();
        let mut opts = ServerOptions::recorder(&dir);
        opts.token = token.filter(|t| !t.is_empty());
        opts.auto_start = form.auto_start.then(|| form.settings());
        opts.auto_resume = form.auto_resume;
        opts.log = Arc::new(move |line: &str| {
            let mut v = l.lock();
            if v.len() == MAX_LINES {
                v.remove(0);
            }
            v.push(line.to_owned());
        });
        let server = Server::bind(addr, opts)?;
        Ok(Self {
            server,
            temp,
            lines,
            form,
        })
    }

    /// The address programs connect to.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.server.local_addr()
    }

    /// The log directory sessions are recorded into.
    pub fn dir(&self) -> &Path {
        self.server.dir()
    }

    /// The log directory, if it is a temporary one (deleted when the window closes unless
    /// the user keeps it).
    pub fn temp_dir(&self) -> Option<&Path> {
        self.temp.as_ref().map(tempfile::TempDir::path)
    }

    /// Frames recorded into the log so far (all programs).
    pub fn frames(&self) -> u64 {
        self.server.frames()
    }

    /// Stops the server (what programs still send is written first), then does `choice`
    /// with the temporary log; says where the log is now. On an error the log stays where
    /// it was, still temporary.
    pub fn settle(&mut self, choice: &Choice) -> Result<String, String> {
        self.server.close();
        crate::temp_log::settle(&mut self.temp, choice)
    }

    /// Every program seen.
    pub fn processes(&self) -> Vec<ProcessInfo> {
        self.server.processes()
    }

    /// The server's log lines, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().clone()
    }

    /// Applies the form's auto-start and auto-resume choices.
    pub fn apply_policy(&self) {
        self.server.set_policy(
            self.form.auto_start.then(|| self.form.settings()),
            self.form.auto_resume,
        );
    }

    /// Starts (or reconfigures) a program's session with the form's settings.
    pub fn start_session(&self, instance: u64) -> Result<(), String> {
        self.server.start_session(instance, self.form.settings())
    }

    /// Stops a program's session.
    pub fn stop_session(&self, instance: u64) -> Result<(), String> {
        self.server.stop_session(instance)
    }

    /// Resumes a suspended program.
    pub fn resume(&self, instance: u64) -> Result<(), String> {
        self.server.resume(instance)
    }
}
