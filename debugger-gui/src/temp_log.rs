//! What becomes of a listening window's temporary log when the window closes: kept where it
//! is, saved elsewhere (moved, or copied where a move cannot go) or deleted. No window
//! needed: the quit dialog (in the views, `ui::quit_dialog`) asks, this does it.

use std::path::{Path, PathBuf};

/// What to do with the temporary log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Leave the directory where it is (no longer deleted).
    Keep,
    /// Move it to this path (a new directory, or an empty one).
    SaveAs(PathBuf),
    /// Delete it.
    Discard,
}

/// Carries out `choice` on the temporary directory in `temp`, and says what was done (for
/// the user: where the log is now). On success `temp` is taken (nothing is deleted later
/// but what `Discard` deleted); on an error it is left as it was, and the error names the
/// path it is about.
pub fn settle(temp: &mut Option<tempfile::TempDir>, choice: &Choice) -> Result<String, String> {
    let Some(dir) = temp.as_ref().map(|t| t.path().to_owned()) else {
        return Err("the temporary log is gone already".to_owned());
    };
    match choice {
        Choice::Keep => {
            let kept = temp.take().map_or(dir, tempfile::TempDir::keep);
            Ok(format!("The recording stays in {}", kept.display()))
        }
        Choice::SaveAs(to) => {
            let saved = save_as(&dir, to)?;
            // Moved away: nothing is left to delete.
            if let Some(t) = temp.take() {
                let _moved = t.keep();
            }
            Ok(format!("The recording was saved to {}", saved.display()))
        }
        Choice::Discard => {
            let t = temp.take().expect("checked above");
            t.close()
                .map_err(|e| format!("{}: could not delete it: {e}", dir.display()))?;
            Ok(format!("The recording in {} was deleted", dir.display()))
        }
    }
}

/// Moves the log directory `from` to `to` (a new directory, created with its parents, or an
/// empty one); where a rename cannot go (another file system), copies it and deletes `from`.
/// Returns where it is now (absolute).
pub fn save_as(from: &Path, to: &Path) -> Result<PathBuf, String> {
    if to.as_os_str().is_empty() {
        return Err("give the directory to save the log to".to_owned());
    }
    let shown = to.display();
    let target = std::path::absolute(to).map_err(|e| format!("{shown}: {e}"))?;
    let source = std::path::absolute(from).map_err(|e| format!("{}: {e}", from.display()))?;
    if target.starts_with(&source) {
        return Err(format!(
            "{shown}: inside the temporary log itself; choose a directory outside it"
        ));
    }
    match std::fs::metadata(&target) {
        Ok(m) if !m.is_dir() => {
            return Err(format!("{shown}: a file already; choose a new directory"));
        }
        Ok(_) => {
            let empty = std::fs::read_dir(&target)
                .map_err(|e| format!("{shown}: {e}"))?
                .next()
                .is_none();
            if !empty {
                return Err(format!(
                    "{shown}: already exists and is not empty; choose a new directory"
                ));
            }
            std::fs::remove_dir(&target).map_err(|e| format!("{shown}: {e}"))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{shown}: {e}")),
    }
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("{}: could not create it: {e}", parent.display()))?;
    }
    if std::fs::rename(&source, &target).is_err() {
        // Another file system (or a rename refused): copy, then delete the original.
        if let Err(e) = copy_dir(&source, &target) {
            let _ = std::fs::remove_dir_all(&target);
            return Err(format!("{shown}: could not copy the log there: {e}"));
        }
        std::fs::remove_dir_all(&source).map_err(|e| {
            format!(
                "the log was copied to {shown}, but {} could not be deleted: {e}",
                source.display()
            )
        })?;
    }
    Ok(target)
}

/// Copies the directory `from` (files and subdirectories) to the new directory `to`.
pub fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let dest = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &dest)?;
        } else {
            std::fs::copy(entry.path(), &dest)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_log() -> Option<tempfile::TempDir> {
        let t = tempfile::Builder::new()
            .prefix("framelog-listen-")
            .tempdir()
            .unwrap();
        std::fs::write(t.path().join("frames-000001.framelog"), b"records").unwrap();
        Some(t)
    }

    #[test]
    fn keep_leaves_the_directory_and_says_where() {
        let mut temp = temp_log();
        let dir = temp.as_ref().unwrap().path().to_owned();
        let said = settle(&mut temp, &Choice::Keep).unwrap();
        assert!(temp.is_none());
        assert!(said.contains(&dir.display().to_string()), "{said}");
        assert!(dir.join("frames-000001.framelog").is_file());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn discard_deletes_it() {
        let mut temp = temp_log();
        let dir = temp.as_ref().unwrap().path().to_owned();
        settle(&mut temp, &Choice::Discard).unwrap();
        assert!(!dir.exists());
    }

    #[test]
    fn save_as_moves_it_into_new_parents_and_says_where() {
        let out = tempfile::tempdir().unwrap();
        let to = out.path().join("a/b/saved");
        let mut temp = temp_log();
        let dir = temp.as_ref().unwrap().path().to_owned();
        let said = settle(&mut temp, &Choice::SaveAs(to.clone())).unwrap();
        assert!(said.contains(&to.display().to_string()), "{said}");
        assert!(!dir.exists());
        assert_eq!(
            std::fs::read(to.join("frames-000001.framelog")).unwrap(),
            b"records"
        );
    }

    #[test]
    fn save_as_onto_an_empty_directory_is_allowed() {
        let out = tempfile::tempdir().unwrap();
        let mut temp = temp_log();
        settle(&mut temp, &Choice::SaveAs(out.path().to_owned())).unwrap();
        assert!(out.path().join("frames-000001.framelog").is_file());
    }

    #[test]
    fn save_as_refuses_a_file_a_full_directory_and_itself_and_keeps_the_log() {
        let out = tempfile::tempdir().unwrap();
        let file = out.path().join("file.txt");
        std::fs::write(&file, b"x").unwrap();
        let mut temp = temp_log();
        let dir = temp.as_ref().unwrap().path().to_owned();
        for (to, says) in [
            (file.clone(), "a file already"),
            (out.path().to_owned(), "not empty"),
            (dir.join("inner"), "inside the temporary log"),
            (PathBuf::new(), "give the directory"),
        ] {
            let e = settle(&mut temp, &Choice::SaveAs(to.clone())).unwrap_err();
            assert!(e.contains(says), "{e}");
            assert!(e.contains(&to.display().to_string()), "{e}");
            assert!(temp.is_some(), "still temporary after {e}");
            assert!(dir.join("frames-000001.framelog").is_file());
        }
    }

    #[test]
    fn copy_dir_copies_files_and_subdirectories() {
        let from = tempfile::tempdir().unwrap();
        std::fs::write(from.path().join("a"), b"1").unwrap();
        std::fs::create_dir(from.path().join("sub")).unwrap();
        std::fs::write(from.path().join("sub/b"), b"2").unwrap();
        let out = tempfile::tempdir().unwrap();
        let to = out.path().join("copy");
        copy_dir(from.path(), &to).unwrap();
        assert_eq!(std::fs::read(to.join("a")).unwrap(), b"1");
        assert_eq!(std::fs::read(to.join("sub/b")).unwrap(), b"2");
    }
}
