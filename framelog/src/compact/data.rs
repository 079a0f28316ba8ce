//! Compacting a sealed data segment (`.framedata` + `.frameidx`) into one version 2 file.

use std::path::Path;

use super::SegmentOutcome;
use crate::error::Result;

/// Rewrites sealed data segment `n` of the log in `dir` in compact form (zstd `level`).
pub fn compact_data_segment(dir: &Path, n: u32, level: i32) -> Result<SegmentOutcome> {
    // Placeholder until the data side lands: leaves every data segment raw.
    let _ = (dir, n, level);
    Ok(SegmentOutcome::NotSealed)
}
