//! Worker ids: each writing process holds one of 256 slots for as long as it writes.
//!
//! A slot is the file `worker-NNN.lock` in the log directory, held with an exclusive
//! advisory lock (released by the OS when the process dies, even by SIGKILL). The file
//! stores the worker's id high-water mark, a u64: ids are reserved in blocks and the mark
//! is persisted before any id of the block is used, so a later process taking over the
//! slot continues past every id the worker ever used.

use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};

/// A claimed worker slot.
#[derive(Debug)]
pub struct WorkerSlot {
    worker: u8,
    path: PathBuf,
    file: File,
    high_water: u64,
}

/// The path of worker `w`'s slot file in `dir`.
pub fn slot_path(dir: &Path, w: u8) -> PathBuf {
    dir.join(format!("worker-{w:03}.lock"))
}

impl WorkerSlot {
    /// Claims `worker` if given, else the lowest slot no live process holds.
    pub fn claim(dir: &Path, worker: Option<u8>) -> Result<Self> {
        match worker {
            Some(w) => {
                // A viewer's liveness probe (`is_writing`) holds the lock for microseconds:
                // try a few times before calling the slot taken.
                for _ in 0..5 {
                    if let Some(slot) = Self::try_claim(dir, w)? {
                        return Ok(slot);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Err(Error::WorkerTaken(w))
            }
            None => {
                for w in 0..=u8::MAX {
                    if let Some(slot) = Self::try_claim(dir, w)? {
                        return Ok(slot);
                    }
                }
                Err(Error::NoFreeWorker(dir.to_owned()))
            }
        }
    }

    fn try_claim(dir: &Path, w: u8) -> Result<Option<Self>> {
        let path = slot_path(dir, w);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .at(&path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(e)) => return Err(Error::io(&path, e)),
        }
        let mut mark = [0u8; 8];
        // A slot file shorter than 8 bytes (new, or torn while being written) counts as 0
        // only if it is empty; otherwise read what there is, missing bytes as 0.
        let n = file.read_at(&mut mark, 0).at(&path)?;
        // Ids start at 1 so that 0 never names a frame or a context.
        let high_water = if n == 0 {
            1
        } else {
            u64::from_le_bytes(mark).max(1)
        };
        Ok(Some(Self {
            worker: w,
            path,
            file,
            high_water,
        }))
    }

    /// The slot's worker id.
    pub fn worker(&self) -> u8 {
        self.worker
    }

    /// Reserves `count` ids and returns the first (ids wrap at `u32::MAX`).
    pub fn reserve(&mut self, count: u32) -> Result<u32> {
        let first = self.high_water;
        let next = first + u64::from(count);
        self.file
            .write_all_at(&next.to_le_bytes(), 0)
            .at(&self.path)?;
        self.high_water = next;
        Ok(first as u32)
    }
}

/// Whether a live process holds worker `w`'s slot in `dir` (is writing as that worker). A
/// process that exited, even by SIGKILL, holds it no more.
pub fn is_writing(dir: &Path, w: u8) -> Result<bool> {
    let path = slot_path(dir, w);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io(&path, e)),
    };
    // A shared lock is refused while a writer holds its exclusive one; if granted, it is
    // released when `file` closes below.
    match file.try_lock_shared() {
        Ok(()) => Ok(false),
        Err(TryLockError::WouldBlock) => Ok(true),
        Err(TryLockError::Error(e)) => Err(Error::io(&path, e)),
    }
}

/// Worker numbers of the processes writing the log in `dir` now, ascending.
pub fn writing_workers(dir: &Path) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).at(dir)? {
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        let Some(w) = name
            .to_str()
            .and_then(|n| n.strip_prefix("worker-"))
            .and_then(|n| n.strip_suffix(".lock"))
            .filter(|n| n.len() == 3)
            .and_then(|n| n.parse::<u8>().ok())
        else {
            continue;
        };
        if is_writing(dir, w)? {
            out.push(w);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Writes into `dst` the id high-water mark of every worker slot of `src`, so that writers of
/// `dst` (a copy of `src`) continue past every id `src` used.
pub(crate) fn copy_high_water_marks(src: &Path, dst: &Path) -> Result<()> {
    for w in 0..=u8::MAX {
        let from = slot_path(src, w);
        let mark = match std::fs::read(&from) {
            Ok(b) if !b.is_empty() => {
                let mut m = [0u8; 8];
                let n = b.len().min(8);
                m[..n].copy_from_slice(&b[..n]);
                m
            }
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(from, e)),
        };
        let to = slot_path(dst, w);
        std::fs::write(&to, mark).at(&to)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_slot_is_writing_and_a_released_or_missing_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_writing(dir.path(), 3).unwrap(), "no slot file");
        let slot = WorkerSlot::claim(dir.path(), Some(3)).unwrap();
        assert!(is_writing(dir.path(), 3).unwrap());
        assert!(!is_writing(dir.path(), 4).unwrap());
        assert_eq!(writing_workers(dir.path()).unwrap(), vec![3]);
        // The probe does not keep the slot from its owner's next claim.
        drop(slot);
        assert!(!is_writing(dir.path(), 3).unwrap());
        let again = WorkerSlot::claim(dir.path(), Some(3)).unwrap();
        assert_eq!(again.worker(), 3);
    }
}
