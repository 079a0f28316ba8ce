//! Compaction: rewriting sealed segments into their compact form (format version 2) and
//! putting it in place atomically (`docs/FORMAT.md`, *Compact sealed segments*).
//!
//! The byte layouts live in `formats::compact`; this module does the file work: which
//! segments are sealed and clean, the temporary file, `fsync`, `rename`, and cleaning up
//! what a crash left behind.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

pub mod data;

use crate::error::{Error, IoContext, Result};

/// Suffix of a compaction's temporary file: `<segment file name>.<pid>.tmp`.
pub const TMP_SUFFIX: &str = ".tmp";

/// What compacting one segment did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SegmentOutcome {
    /// Rewritten in compact form.
    Compacted {
        /// Bytes of the raw form (for data: `.framedata` and `.frameidx` together).
        raw_bytes: u64,
        /// Bytes of the compact file.
        compact_bytes: u64,
        /// Records (frame logs) or data entries (data segments) it holds.
        items: u64,
    },
    /// Already compact: nothing to do.
    AlreadyCompact,
    /// Not sealed yet (it is the newest of its kind): writers may still append to it.
    NotSealed,
    /// Left raw because it holds damage (which stays reported by readers).
    Damaged {
        /// Damaged bytes found.
        bytes: u64,
        /// Places with damage.
        places: u64,
    },
    /// Deleted (by retention) before it could be compacted.
    Gone,
}

/// The temporary file a compaction of `target` by this process writes first.
pub fn tmp_path(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_owned();
    name.push(format!(".{}{TMP_SUFFIX}", std::process::id()));
    target.with_file_name(name)
}

/// Writes a new file for `target` through a locked temporary file, syncs it and renames it
/// over `target`, then syncs the directory: a crash leaves the old `target` or the new one.
///
/// `write` gets the temporary file; returns the new file's length.
pub fn replace_atomically(
    target: &Path,
    write: impl FnOnce(&mut File) -> Result<()>,
) -> Result<u64> {
    let tmp = tmp_path(target);
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .at(&tmp)?;
        // Held until the file is closed: tells `remove_abandoned` this one is alive.
        file.lock().at(&tmp)?;
        write(&mut file)?;
        file.flush().at(&tmp)?;
        file.sync_all().at(&tmp)?;
        let len = file.metadata().at(&tmp)?.len();
        std::fs::rename(&tmp, target).at(target)?;
        Ok(len)
    })();
    match result {
        Ok(len) => {
            sync_dir(target)?;
            Ok(len)
        }
        Err(e) => {
            // Best effort: a leftover would be removed by the next compaction anyway.
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// `fsync`s the directory holding `path`, so a rename or delete in it is durable.
pub fn sync_dir(path: &Path) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    File::open(dir).and_then(|d| d.sync_all()).at(dir)
}

/// Deletes temporary files of compactions that no process holds locked (a crash's
/// leftovers); returns how many it deleted.
pub fn remove_abandoned(dir: &Path) -> Result<usize> {
    let mut removed = 0;
    for entry in std::fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !is_tmp_name(name) {
            continue;
        }
        let path = entry.path();
        let Ok(file) = File::open(&path) else {
            continue;
        };
        // Locked: a compaction is writing it now.
        if file.try_lock().is_err() {
            continue;
        }
        match std::fs::remove_file(&path) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    Ok(removed)
}

/// Whether `name` is a compaction's temporary file (`frames-…framelog.<pid>.tmp`).
fn is_tmp_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(TMP_SUFFIX) else {
        return false;
    };
    let Some((segment, pid)) = stem.rsplit_once('.') else {
        return false;
    };
    !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
        && (segment.starts_with("frames-") || segment.starts_with("data-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replacing_leaves_the_new_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("frames-000001.framelog");
        std::fs::write(&target, b"raw").unwrap();
        let len = replace_atomically(&target, |f| f.write_all(b"compact").at(&target)).unwrap();
        assert_eq!(len, 7);
        assert_eq!(std::fs::read(&target).unwrap(), b"compact");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file left");
    }

    #[test]
    fn a_failed_write_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("frames-000001.framelog");
        std::fs::write(&target, b"raw").unwrap();
        let err = replace_atomically(&target, |_| Err(Error::BadAppend("disk full".into())));
        assert!(err.is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"raw");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn only_unlocked_temporary_files_are_abandoned() {
        let dir = tempfile::tempdir().unwrap();
        let stale = dir.path().join("frames-000002.framelog.999999.tmp");
        std::fs::write(&stale, b"half").unwrap();
        let live = dir.path().join("data-000003.framedata.1.tmp");
        std::fs::write(&live, b"being written").unwrap();
        let held = File::open(&live).unwrap();
        held.lock().unwrap();
        let other = dir.path().join("notes.tmp");
        std::fs::write(&other, b"not ours").unwrap();
        assert_eq!(remove_abandoned(dir.path()).unwrap(), 1);
        assert!(!stale.exists());
        assert!(live.exists() && other.exists());
        drop(held);
    }
}
