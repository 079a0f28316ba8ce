//! Retention: keeps a log within a disk budget and an age by deleting its oldest sealed
//! segments, whole.
//!
//! Only sealed segments are deleted (a later segment of the same kind exists, so no writer
//! appends to them again): the live ones are never touched. Frame-log and data segments are
//! taken together, oldest first, so a frame's data goes at about the same time as the frame.
//! A data segment goes with its index. Readers that have a deleted segment open keep reading
//! it (the file lives until they close it); a reader that reaches a gap moves on to the
//! oldest segment still there.
//!
//! Age and order never come from file times alone: a copied log (`cp -r`) has new ones, in
//! whatever order the copy made them. Within a kind, order is the segment number: a segment
//! is never deleted while an older one of its kind stays. A frame-log segment's age is the
//! newest time inside it (its last block's, once compact; otherwise the time its successor's
//! first batch was appended, which no record of it is later than). Data segments hold no
//! times: theirs is their last write, capped by the next data segment's (so a copy, whose
//! files all look new, only ever makes them look younger: never deleted too early).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use formats::FileKind;

use crate::error::{Error, IoContext, Result};
use crate::segments;

/// How much of a log to keep. `None` fields do not limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    /// Most bytes the log's segments may take together.
    pub max_bytes: Option<u64>,
    /// Oldest a sealed segment may be (since its last write).
    pub max_age: Option<Duration>,
}

impl Retention {
    /// Whether any limit is set.
    pub fn is_set(&self) -> bool {
        self.max_bytes.is_some() || self.max_age.is_some()
    }
}

/// One segment on disk, as retention sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentFile {
    /// Frame log or data (a data segment's index is counted with it).
    pub kind: FileKind,
    /// Segment number.
    pub number: u32,
    /// Bytes (data: with its index).
    pub bytes: u64,
    /// The newest time of its contents (see the module docs).
    pub modified: SystemTime,
    /// A later segment of the same kind exists.
    pub sealed: bool,
}

/// Which of `files` to delete to honour `retention` at `now`: indices, oldest first.
///
/// Pure: deletes sealed segments older than the age limit, then the oldest sealed ones
/// until the whole log fits the byte budget (or nothing sealed is left).
pub fn plan(files: &[SegmentFile], retention: &Retention, now: SystemTime) -> Vec<usize> {
    // Each segment's time capped by every later segment's of its kind: within a kind, older
    // numbers are never younger (whatever the clocks or a copy did).
    // A live segment is being written: it caps nothing (its file time may be anything).
    let mut time: Vec<SystemTime> = files
        .iter()
        .map(|f| {
            if f.sealed {
                f.modified
            } else {
                now.max(f.modified)
            }
        })
        .collect();
    let mut by_number: Vec<usize> = (0..files.len()).collect();
    by_number.sort_by_key(|&i| (files[i].kind == FileKind::FrameData, files[i].number));
    for w in by_number.windows(2).rev() {
        let (a, b) = (w[0], w[1]);
        if files[a].kind == files[b].kind {
            time[a] = time[a].min(time[b]);
        }
    }
    let mut sealed: Vec<usize> = (0..files.len()).filter(|&i| files[i].sealed).collect();
    sealed.sort_by_key(|&i| (time[i], files[i].number));
    let mut total: u64 = files.iter().map(|f| f.bytes).sum();
    let mut out = Vec::new();
    for i in sealed {
        let f = &files[i];
        let too_old = retention
            .max_age
            .is_some_and(|age| now.duration_since(time[i]).is_ok_and(|d| d > age));
        let over = retention.max_bytes.is_some_and(|max| total > max);
        if !(too_old || over) {
            // Oldest first: once one may stay, so may every younger one.
            break;
        }
        total -= f.bytes;
        out.push(i);
    }
    out
}

/// What [`prune`] deleted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Files deleted.
    pub files: Vec<PathBuf>,
    /// Bytes they held.
    pub bytes: u64,
    /// The oldest frame-log segment left.
    pub oldest_frames_segment: Option<u32>,
}

/// The segments of the log in `dir`, as retention sees them.
pub fn segment_files(dir: &Path) -> Result<Vec<SegmentFile>> {
    let mut out = Vec::new();
    for kind in [FileKind::FrameLog, FileKind::FrameData] {
        let numbers = segments::list(dir, kind)?;
        let last = numbers.last().copied();
        for &n in &numbers {
            let path = segments::segment_path(dir, kind, n);
            let meta = match std::fs::metadata(&path) {
                Ok(m) => m,
                // Deleted meanwhile (another pruner): nothing to count.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e).at(&path),
            };
            let mut bytes = meta.len();
            if kind == FileKind::FrameData {
                let idx = segments::segment_path(dir, FileKind::FrameIndex, n);
                bytes += std::fs::metadata(&idx).map_or(0, |m| m.len());
            }
            let sealed = Some(n) != last;
            let inside = match kind {
                FileKind::FrameLog if sealed => frames_time(dir, n, &numbers)?,
                _ => None,
            };
            let modified = match inside {
                Some(ns) => SystemTime::UNIX_EPOCH + Duration::from_nanos(ns),
                None => meta.modified().at(&path)?,
            };
            out.push(SegmentFile {
                kind,
                number: n,
                bytes,
                modified,
                sealed,
            });
        }
    }
    Ok(out)
}

/// The newest time inside sealed frame-log segment `n` (ns since the Unix epoch), if its
/// bytes tell: a compact segment's last block's; a raw one's successor's first record's (a
/// batch header's append time). A segment whose bytes do not tell (unreadable, being created)
/// falls back to its file time; a compact one that this build cannot read (without the
/// `compact` feature) is an error.
fn frames_time(dir: &Path, n: u32, numbers: &[u32]) -> Result<Option<u64>> {
    #[cfg(feature = "compact")]
    use crate::compact::frames::{Item, plan as blocks};
    let open = |n: u32| -> Result<Option<(std::fs::File, PathBuf, formats::FileHeader)>> {
        let path = segments::segment_path(dir, FileKind::FrameLog, n);
        let Ok(file) = std::fs::File::open(&path) else {
            return Ok(None);
        };
        match crate::pread::read_header_any(&file, &path, FileKind::FrameLog) {
            Ok(Some(header)) => Ok(Some((file, path, header))),
            Err(e @ Error::CompactUnsupported { .. }) => Err(e),
            Ok(None) | Err(_) => Ok(None),
        }
    };
    let this = open(n)?;
    #[cfg(feature = "compact")]
    if let Some((file, path, header)) = &this
        && header.is_compact()
    {
        return Ok(blocks(file, path).ok().and_then(|plan| {
            plan.items.iter().rev().find_map(|i| match i {
                Item::Block { entry: Some(e), .. } => Some(e.max_time),
                _ => None,
            })
        }));
    }
    if this.is_none() {
        return Ok(None);
    }
    let Some(&next) = numbers.iter().find(|&&m| m > n) else {
        return Ok(None);
    };
    let Some((file, path, header)) = open(next)? else {
        return Ok(None);
    };
    #[cfg(feature = "compact")]
    if header.is_compact() {
        return Ok(blocks(&file, &path).ok().and_then(|plan| {
            plan.items.iter().find_map(|i| match i {
                Item::Block { entry: Some(e), .. } => Some(e.min_time),
                _ => None,
            })
        }));
    }
    // Every record, batch headers included, has its timestamp at bytes 6-13.
    let mut first = [0u8; formats::FRAME_END_LEN];
    let got = crate::pread::read_full_at(&file, &path, &mut first, u64::from(header.header_len));
    Ok(got
        .is_ok_and(|got| got == first.len())
        .then(|| u64::from_le_bytes(first[6..14].try_into().expect("8 bytes"))))
}

/// Deletes the log's oldest sealed segments in `dir` as `retention` says. Safe while
/// writers append and readers read (see the module docs), and against another pruner
/// deleting the same files.
pub fn prune(dir: &Path, retention: &Retention) -> Result<Pruned> {
    let mut pruned = Pruned::default();
    if retention.is_set() {
        let files = segment_files(dir)?;
        for i in plan(&files, retention, SystemTime::now()) {
            let f = &files[i];
            let mut paths = vec![segments::segment_path(dir, f.kind, f.number)];
            if f.kind == FileKind::FrameData {
                // The index first: a reader that finds no index sees no entries (the
                // frames' data is gone), where an index left without its data segment
                // would point into a missing file.
                paths.insert(
                    0,
                    segments::segment_path(dir, FileKind::FrameIndex, f.number),
                );
            }
            for p in paths {
                match std::fs::remove_file(&p) {
                    Ok(()) => pruned.files.push(p),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e).at(&p),
                }
            }
            pruned.bytes += f.bytes;
        }
    }
    pruned.oldest_frames_segment = segments::list(dir, FileKind::FrameLog)?.first().copied();
    Ok(pruned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(kind: FileKind, number: u32, bytes: u64, age_s: u64, sealed: bool) -> SegmentFile {
        SegmentFile {
            kind,
            number,
            bytes,
            modified: SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 - age_s),
            sealed,
        }
    }

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000)
    }

    #[test]
    fn the_oldest_sealed_segments_go_until_the_log_fits_and_live_ones_never() {
        let files = vec![
            file(FileKind::FrameLog, 1, 100, 50, true),
            file(FileKind::FrameLog, 2, 100, 40, true),
            file(FileKind::FrameData, 1, 300, 45, true),
            file(FileKind::FrameLog, 3, 100, 0, false),
            file(FileKind::FrameData, 2, 50, 0, false),
        ];
        let keep = |max_bytes| Retention {
            max_bytes: Some(max_bytes),
            max_age: None,
        };
        // 650 bytes in all.
        assert!(plan(&files, &keep(650), now()).is_empty());
        assert_eq!(
            plan(&files, &keep(600), now()),
            vec![0],
            "frames 1 is oldest"
        );
        assert_eq!(plan(&files, &keep(300), now()), vec![0, 2], "then data 1");
        assert_eq!(plan(&files, &keep(150), now()), vec![0, 2, 1]);
        // Never the live segments, even when the budget cannot be met.
        assert_eq!(plan(&files, &keep(0), now()), vec![0, 2, 1]);
        assert!(plan(&files, &Retention::default(), now()).is_empty());
    }

    #[test]
    fn within_a_kind_older_numbers_go_first_whatever_their_times() {
        // A copy gave segment 3 the oldest time and segment 1 the newest.
        let files = vec![
            file(FileKind::FrameLog, 1, 100, 10, true),
            file(FileKind::FrameLog, 2, 100, 20, true),
            file(FileKind::FrameLog, 3, 100, 30, true),
            file(FileKind::FrameLog, 4, 100, 40, false),
        ];
        let keep = |max_bytes| Retention {
            max_bytes: Some(max_bytes),
            max_age: None,
        };
        assert_eq!(plan(&files, &keep(300), now()), vec![0]);
        assert_eq!(plan(&files, &keep(200), now()), vec![0, 1]);
        let old = Retention {
            max_bytes: None,
            max_age: Some(Duration::from_secs(25)),
        };
        // Segment 3 looks 30 s old, so 1 and 2 are at least as old.
        assert_eq!(plan(&files, &old, now()), vec![0, 1, 2]);
    }

    #[test]
    fn sealed_segments_older_than_the_age_limit_go() {
        let files = vec![
            file(FileKind::FrameLog, 1, 100, 7200, true),
            file(FileKind::FrameData, 1, 100, 3000, true),
            file(FileKind::FrameLog, 2, 100, 1800, true),
            file(FileKind::FrameLog, 3, 100, 9999, false),
        ];
        let r = Retention {
            max_bytes: None,
            max_age: Some(Duration::from_secs(3600)),
        };
        // The live segment is never deleted, however old its last write.
        assert_eq!(plan(&files, &r, now()), vec![0]);
        let both = Retention {
            max_bytes: Some(250),
            ..r
        };
        assert_eq!(plan(&files, &both, now()), vec![0, 1]);
    }

    #[test]
    fn prune_deletes_files_and_tolerates_another_pruner() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for n in 1..=3 {
            std::fs::write(
                segments::segment_path(d, FileKind::FrameLog, n),
                vec![0u8; 1000],
            )
            .unwrap();
        }
        std::fs::write(
            segments::segment_path(d, FileKind::FrameData, 1),
            vec![0u8; 500],
        )
        .unwrap();
        std::fs::write(
            segments::segment_path(d, FileKind::FrameIndex, 1),
            vec![0u8; 10],
        )
        .unwrap();
        let r = Retention {
            max_bytes: Some(1500),
            max_age: None,
        };
        let pruned = prune(d, &r).unwrap();
        // 3,510 bytes: the two sealed frame segments go (the data segment is live).
        assert_eq!(pruned.bytes, 2000);
        assert_eq!(pruned.oldest_frames_segment, Some(3));
        assert!(segments::exists(d, FileKind::FrameData, 1));
        // Again: nothing more to do.
        assert_eq!(prune(d, &r).unwrap().bytes, 0);
    }
}
