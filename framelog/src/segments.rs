//! Naming and listing the numbered segment files of a log directory.

use std::path::{Path, PathBuf};

use formats::FileKind;

use crate::error::{IoContext, Result};

/// The path of segment `n` of `kind` in `dir`.
pub fn segment_path(dir: &Path, kind: FileKind, n: u32) -> PathBuf {
    dir.join(kind.file_name(n))
}

/// The segment numbers of `kind` present in `dir`, ascending.
pub fn list(dir: &Path, kind: FileKind) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        if let Some(n) = entry
            .file_name()
            .to_str()
            .and_then(|s| kind.parse_file_name(s))
        {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Whether `dir` holds at least one frame-log segment.
pub fn is_log(dir: &Path) -> bool {
    list(dir, FileKind::FrameLog).is_ok_and(|v| !v.is_empty())
}

/// Whether segment `n` of `kind` exists.
pub fn exists(dir: &Path, kind: FileKind, n: u32) -> bool {
    segment_path(dir, kind, n).exists()
}
