//! Compaction: rewriting sealed segments into their compact form (format version 2) and
//! putting it in place atomically (`docs/FORMAT.md`, *Compact sealed segments*).
//!
//! The byte layouts live in `formats::compact`; this module does the file work: which
//! segments are sealed and clean, the temporary file, `fsync`, `rename`, and cleaning up
//! what a crash left behind.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak, mpsc};

use parking_lot::Mutex;

pub mod data;
pub mod frames;
// Only `framelog sql` looks one frame up by its id.
#[cfg(feature = "sql")]
pub(crate) mod locate;

use formats::FileKind;

use crate::error::{Error, IoContext, Result};

/// Suffix of a compaction's temporary file: `<segment file name>.<pid>.<n>.tmp`.
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

/// What [`compact_log`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactOptions {
    /// Also seal the newest segments first (only of a log no process is writing), so that
    /// every segment ends up compact.
    pub all: bool,
    /// zstd compression level.
    pub level: i32,
}

/// The zstd level compaction uses unless told otherwise (chosen by measurement: see the
/// `compact` bench).
pub const DEFAULT_LEVEL: i32 = 3;

impl Default for CompactOptions {
    fn default() -> Self {
        Self {
            all: false,
            level: DEFAULT_LEVEL,
        }
    }
}

/// What compacting a log did, segment by segment.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Abandoned temporary files deleted.
    pub removed_tmp: usize,
    /// Segments sealed (`all`): (kind, the new empty segment's number).
    pub sealed: Vec<(FileKind, u32)>,
    /// Every segment looked at: kind, number, outcome.
    pub segments: Vec<(FileKind, u32, SegmentOutcome)>,
}

impl Report {
    /// Raw and compact bytes, and items, of the segments compacted now.
    pub fn totals(&self) -> (u64, u64, u64) {
        let mut t = (0, 0, 0);
        for (_, _, o) in &self.segments {
            if let SegmentOutcome::Compacted {
                raw_bytes,
                compact_bytes,
                items,
            } = o
            {
                t.0 += raw_bytes;
                t.1 += compact_bytes;
                t.2 += items;
            }
        }
        t
    }
}

/// Compacts every sealed segment of the log in `dir` (frame logs here, data segments through
/// [`data::compact_data_segment`]), after deleting abandoned temporary files. With
/// `options.all`, first seals the newest segments (refused while a process writes the log).
pub fn compact_log(dir: &Path, options: &CompactOptions) -> Result<Report> {
    if !crate::segments::is_log(dir) {
        return Err(Error::NotALog(dir.to_owned()));
    }
    let mut report = Report {
        removed_tmp: remove_abandoned(dir)?,
        ..Report::default()
    };
    if options.all {
        for w in 0..=u8::MAX {
            if crate::worker::is_writing(dir, w)? {
                return Err(Error::io(
                    crate::worker::slot_path(dir, w),
                    std::io::Error::other(format!(
                        "a process is writing this log (worker {w}); compact --all only seals the newest segments of a log no process writes (without --all, the sealed ones are compacted)"
                    )),
                ));
            }
        }
        for kind in [FileKind::FrameLog, FileKind::FrameData] {
            if let Some(n) = seal_newest(dir, kind)? {
                report.sealed.push((kind, n));
            }
        }
    }
    for n in crate::segments::list(dir, FileKind::FrameLog)? {
        let outcome = frames::compact_frames_segment(dir, n, options.level)?;
        report.segments.push((FileKind::FrameLog, n, outcome));
    }
    for n in crate::segments::list(dir, FileKind::FrameData)? {
        let outcome = data::compact_data_segment(dir, n, options.level)?;
        report.segments.push((FileKind::FrameData, n, outcome));
    }
    Ok(report)
}

/// Seals the newest segment of `kind` if it holds anything: creates the next one with its
/// framed header(s), under the newest one's lock as an appender rotates. Returns the new
/// segment's number.
fn seal_newest(dir: &Path, kind: FileKind) -> Result<Option<u32>> {
    let Some(&n) = crate::segments::list(dir, kind)?.last() else {
        return Ok(None);
    };
    let path = crate::segments::segment_path(dir, kind, n);
    let file = OpenOptions::new().read(true).open(&path).at(&path)?;
    file.lock().at(&path)?;
    let result = (|| {
        let next = n + 1;
        if crate::segments::exists(dir, kind, next) {
            return Ok(None);
        }
        let holds = file.metadata().at(&path)?.len() > formats::HEADER_LEN as u64;
        if !holds {
            return Ok(None);
        }
        let kinds: &[FileKind] = match kind {
            FileKind::FrameLog => &[FileKind::FrameLog],
            _ => &[FileKind::FrameData, FileKind::FrameIndex],
        };
        for &k in kinds {
            let p = crate::segments::segment_path(dir, k, next);
            let f = OpenOptions::new()
                .read(true)
                .append(true)
                .create(true)
                .open(&p)
                .at(&p)?;
            f.lock().at(&p)?;
            // An appender may have created it meanwhile: write the header only if none is.
            if f.metadata().at(&p)?.len() == 0 {
                let mut header = match k {
                    FileKind::FrameLog => formats::FileHeader::frames_packed(),
                    _ => formats::FileHeader::new(k),
                };
                header.flags = formats::FLAG_BATCHES;
                (&f).write_all(&header.encode()).at(&p)?;
            }
            f.sync_all().at(&p)?;
        }
        sync_dir(&path)?;
        Ok(Some(next))
    })();
    let _ = file.unlock();
    result
}

/// Compacts a log's sealed segments on a background thread at low priority, woken by
/// writers that seal a segment. One per log directory and process: the writers of one log
/// in one process (`framelog serve` has one per program) share it.
pub struct Background {
    dir: PathBuf,
    level: i32,
    stop: Arc<AtomicBool>,
    /// The thread (started at the first wake) and its wake-up channel.
    thread: Mutex<Option<(mpsc::Sender<()>, std::thread::JoinHandle<()>)>>,
}

/// The background compactors of this process, by log directory.
static BACKGROUND: Mutex<Option<HashMap<PathBuf, Weak<Background>>>> = Mutex::new(None);

impl Background {
    /// The background compactor of the log in `dir` (shared while any holder lives).
    pub fn for_dir(dir: &Path, level: i32) -> Arc<Self> {
        let mut all = BACKGROUND.lock();
        let map = all.get_or_insert_with(HashMap::new);
        map.retain(|_, w| w.strong_count() > 0);
        if let Some(b) = map.get(dir).and_then(Weak::upgrade) {
            return b;
        }
        let b = Arc::new(Self {
            dir: dir.to_owned(),
            level,
            stop: Arc::new(AtomicBool::new(false)),
            thread: Mutex::new(None),
        });
        map.insert(dir.to_owned(), Arc::downgrade(&b));
        b
    }

    /// A segment was sealed: compact what is sealed (never blocks; starts the thread once).
    pub fn wake(&self) {
        let mut t = self.thread.lock();
        if let Some((tx, _)) = &*t {
            let _ = tx.send(());
            return;
        }
        let (tx, rx) = mpsc::channel::<()>();
        let (dir, level, stop) = (self.dir.clone(), self.level, self.stop.clone());
        let spawned = std::thread::Builder::new()
            .name("framelog-compact".into())
            .spawn(move || run_background(&dir, level, &stop, &rx));
        // Without a thread (none can be made now) segments stay raw: a later
        // `framelog compact` does them.
        if let Ok(handle) = spawned {
            let _ = tx.send(());
            *t = Some((tx, handle));
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        // The segment being compacted is given up within one read (a few MiB): its raw form
        // stays, and the thread ends before the writer's drop returns.
        self.stop.store(true, Ordering::Relaxed);
        if let Some((tx, handle)) = self.thread.get_mut().take() {
            drop(tx);
            let _ = handle.join();
        }
    }
}

/// Lowers this thread's scheduling priority to the lowest (nice 19; Linux applies nice per
/// thread), so compaction only uses CPU that recording does not.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 19);
    }
}

fn run_background(dir: &Path, level: i32, stop: &AtomicBool, wake: &mpsc::Receiver<()>) {
    lower_priority();
    while wake.recv().is_ok() {
        // Wakes that came while compacting are covered by the next pass.
        while wake.try_recv().is_ok() {}
        if stop.load(Ordering::Relaxed) {
            return;
        }
        // Errors (a full disk, a deleted directory) leave segments raw; the next wake or a
        // `framelog compact` tries again.
        let _ = background_pass(dir, level, stop);
    }
}

/// One pass: every sealed frame-log and data segment not compact yet.
fn background_pass(dir: &Path, level: i32, stop: &AtomicBool) -> Result<()> {
    for n in crate::segments::list(dir, FileKind::FrameLog)? {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        frames::compact_frames_segment_until(dir, n, level, stop)?;
    }
    for n in crate::segments::list(dir, FileKind::FrameData)? {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        data::compact_data_segment(dir, n, level)?;
    }
    Ok(())
}

/// The temporary file a compaction of `target` by this process writes first.
pub fn tmp_path(target: &Path) -> PathBuf {
    // Unique per call, not only per process: two threads of one process compacting at once
    // must never open (and truncate, or lock after the other renamed it) the same file.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut name = target.file_name().unwrap_or_default().to_owned();
    name.push(format!(".{}.{n}{TMP_SUFFIX}", std::process::id()));
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
        // A new file that no one else can have open (the name is unique to this call).
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
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

/// Whether `name` is a compaction's temporary file (`frames-…framelog.<pid>.<n>.tmp`).
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
    fn two_threads_replacing_one_file_never_mix_or_truncate_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("frames-000001.framelog");
        std::fs::write(&target, b"raw").unwrap();
        let a = vec![b'a'; 1 << 20];
        let b = vec![b'b'; 1 << 20];
        for _ in 0..20 {
            std::thread::scope(|s| {
                for content in [&a, &b] {
                    let target = &target;
                    s.spawn(move || {
                        replace_atomically(target, |f| f.write_all(content).at(target)).unwrap()
                    });
                }
            });
            let got = std::fs::read(&target).unwrap();
            assert!(got == a || got == b, "a whole file, {} bytes", got.len());
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
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
