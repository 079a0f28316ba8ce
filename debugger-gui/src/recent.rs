//! The "recent logs" list: the last log directories opened, newest first, kept in a small
//! text file (one path per line) so they survive restarts.

use std::path::{Path, PathBuf};

/// Paths kept.
pub const KEPT: usize = 10;

/// Recently opened log directories, newest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecentLogs {
    file: Option<PathBuf>,
    paths: Vec<PathBuf>,
}

impl RecentLogs {
    /// The list stored in `file` (empty if it does not exist or cannot be read: a missing
    /// list is not an error), without the paths that are no longer logs (moved, deleted, or
    /// a folder that never held one). `None`: kept in memory only.
    pub fn load(file: Option<PathBuf>) -> Self {
        let paths = file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .map(|text| {
                text.lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(PathBuf::from)
                    .filter(|p| framelog::segments::is_log(p))
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

    /// The paths, newest first.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// `dir` was opened: it moves to the front, and the list is saved. A save that fails
    /// is returned (the list in memory is updated anyway).
    pub fn record(&mut self, dir: &Path) -> std::io::Result<()> {
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
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
            text.push_str(&p.to_string_lossy());
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
            r.record(&log(&format!("log{k}"))).unwrap();
        }
        r.record(&dir.path().join("log5")).unwrap();
        let names: Vec<String> = r
            .paths()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), KEPT);
        assert_eq!(&names[..3], ["log5", "log11", "log10"]);
        assert_eq!(names.iter().filter(|n| *n == "log5").count(), 1);
        // A restart reads the same list.
        assert_eq!(RecentLogs::load(Some(file.clone())), r);
        // A log deleted since, and a folder that is not a log, are gone after a restart.
        std::fs::remove_dir_all(dir.path().join("log11")).unwrap();
        std::fs::create_dir_all(dir.path().join("notes")).unwrap();
        r.record(&dir.path().join("notes")).unwrap();
        let reloaded = RecentLogs::load(Some(file.clone()));
        assert_eq!(reloaded.paths().len(), KEPT - 2, "{:?}", reloaded.paths());
        assert!(
            reloaded
                .paths()
                .iter()
                .all(|p| !p.ends_with("log11") && !p.ends_with("notes"))
        );
        // Relative paths are stored absolute.
        r.record(Path::new("relative/log")).unwrap();
        assert!(r.paths()[0].is_absolute());
    }
}
