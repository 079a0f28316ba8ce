//! The "recent logs" list: the last logs opened (directories, and remote logs' URLs), newest
//! first, kept in a small text file (one per line) so they survive restarts. Tokens are never
//! kept: a server that asks for one asks again.

use std::path::{Path, PathBuf};

use crate::source::LogSource;

/// Logs kept.
pub const KEPT: usize = 10;

/// Recently opened logs, newest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecentLogs {
    file: Option<PathBuf>,
    paths: Vec<LogSource>,
}

impl RecentLogs {
    /// The list stored in `file` (empty if it does not exist or cannot be read: a missing
    /// list is not an error), without the paths that are no longer logs (moved, deleted, or
    /// a folder that never held one); URLs are kept (a server may be down for now). `None`:
    /// kept in memory only.
    pub fn load(file: Option<PathBuf>) -> Self {
        let paths = file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .map(|text| {
                text.lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(LogSource::parse)
                    .filter(|s| s.dir().is_none_or(framelog::segments::is_log))
                    .take(KEPT)
                    .collect()
            })
            .unwrap_or_default();
        Self { file, paths }
    }

    /// Where the list is kept by default: `$XDG_STATE_HOME/framelog/recent-logs`, else
    /// `~/.local/state/framelog/recent-logs`.
    pub fn default_file() -> Option<PathBuf> {
        let state = std::env::var_os("XDG_STATE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local/state")))?;
        Some(state.join("framelog").join("recent-logs"))
    }

    /// The logs, newest first.
    pub fn paths(&self) -> &[LogSource] {
        &self.paths
    }

    /// The log directories among them, newest first.
    pub fn dirs(&self) -> impl Iterator<Item = &Path> {
        self.paths.iter().filter_map(LogSource::dir)
    }

    /// The remote logs' URLs among them, newest first.
    pub fn urls(&self) -> impl Iterator<Item = &str> {
        self.paths.iter().filter_map(LogSource::url)
    }

    /// `log` was opened: it moves to the front, and the list is saved. A save that fails
    /// is returned (the list in memory is updated anyway).
    pub fn record(&mut self, log: &LogSource) -> std::io::Result<()> {
        let dir = match log {
            LogSource::Dir(d) => {
                LogSource::Dir(std::path::absolute(d).unwrap_or_else(|_| d.to_owned()))
            }
            remote => remote.clone(),
        };
        self.paths.retain(|p| *p != dir);
        self.paths.insert(0, dir);
        self.paths.truncate(KEPT);
        let Some(file) = &self.file else {
            return Ok(());
        };
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut text = String::new();
        for p in &self.paths {
            text.push_str(&p.to_string());
            text.push('\n');
        }
        // Write a new file and rename it over the old one: a crash never leaves half a list.
        let tmp = file.with_extension("tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_first_without_duplicates_bounded_and_kept_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("state/framelog/recent-logs");
        let mut r = RecentLogs::load(Some(file.clone()));
        assert!(r.paths().is_empty(), "no file yet: an empty list");
        let log = |name: &str| {
            let p = dir.path().join(name);
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("frames-000001.framelog"), b"").unwrap();
            p
        };
        for k in 0..12 {
            r.record(&LogSource::Dir(log(&format!("log{k}")))).unwrap();
        }
        r.record(&LogSource::Dir(dir.path().join("log5"))).unwrap();
        let names: Vec<String> = r
            .paths()
            .iter()
            .map(|p| {
                p.dir()
                    .unwrap()
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(names.len(), KEPT);
        assert_eq!(&names[..3], ["log5", "log11", "log10"]);
        assert_eq!(names.iter().filter(|n| *n == "log5").count(), 1);
        // A restart reads the same list.
        assert_eq!(RecentLogs::load(Some(file.clone())), r);
        // A log deleted since, and a folder that is not a log, are gone after a restart.
        std::fs::remove_dir_all(dir.path().join("log11")).unwrap();
        std::fs::create_dir_all(dir.path().join("notes")).unwrap();
        r.record(&LogSource::Dir(dir.path().join("notes"))).unwrap();
        let reloaded = RecentLogs::load(Some(file.clone()));
        assert_eq!(reloaded.paths().len(), KEPT - 2, "{:?}", reloaded.paths());
        assert!(
            reloaded
                .dirs()
                .all(|p| !p.ends_with("log11") && !p.ends_with("notes"))
        );
        // Relative paths are stored absolute.
        r.record(&LogSource::Dir("relative/log".into())).unwrap();
        assert!(r.paths()[0].dir().unwrap().is_absolute());
        // Remote logs are kept as their URLs, whether or not the server is up.
        let url = LogSource::Remote("ws://127.0.0.1:9/ws".into());
        r.record(&url).unwrap();
        let reloaded = RecentLogs::load(Some(file.clone()));
        assert_eq!(reloaded.paths()[0], url);
        assert_eq!(reloaded.urls().collect::<Vec<_>>(), ["ws://127.0.0.1:9/ws"]);
    }
}
