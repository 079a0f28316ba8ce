//! The storage engine's error type: every error names the file (and offset) involved.

use std::path::PathBuf;

/// Result alias for the storage engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, and where.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O operation on `path` failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Bytes in `path` at `offset` do not follow the format.
    #[error("{} at byte {offset}: {}", path.display(), error.kind)]
    Corrupt {
        /// The file with the bad bytes.
        path: PathBuf,
        /// Absolute byte offset in the file.
        offset: u64,
        /// What is wrong with them (already in the message, so not a `source()`: an error
        /// chain would print it twice).
        error: formats::DecodeError,
    },
    /// The directory does not exist, is a file, or holds no frame-log segments (yet).
    #[error("{}", not_a_log(.0))]
    NotALog(PathBuf),
    /// The requested worker id is held by another live process.
    #[error("worker {0} is in use by another process writing this log")]
    WorkerTaken(u8),
    /// All 256 worker ids are held by live processes.
    #[error("{}: all 256 worker ids are in use", .0.display())]
    NoFreeWorker(PathBuf),
    /// Bytes given to append are not whole encoded records.
    #[error("cannot append: {0}")]
    BadAppend(String),
    /// A segment holds damage that is not a torn tail: it was left untouched.
    #[error("{} at byte {offset}: damaged bytes that are not a torn tail; the segment is left untouched and appends go to the next one", path.display())]
    SegmentDamaged {
        /// The damaged file.
        path: PathBuf,
        /// Where the damage starts.
        offset: u64,
    },
    /// Serving on an address other than loopback without a token.
    #[error(
        "serving viewers on {0} (not loopback) needs a token: pass --token SECRET or set FRAMELOG_TOKEN"
    )]
    TokenRequired(String),
    /// A compact sealed segment met by a build without the `compact` feature, which cannot
    /// read it (its records are zstd-compressed): refused rather than read as raw or skipped.
    /// A build with the feature never returns it.
    #[error(
        "{}: a compact segment (format version {version}): this log has compact segments, and framelog was built without its `compact` feature, which reads them (enable `compact` of framelog or of framelog-stopwatch, or read the log with the `framelog` command)",
        path.display()
    )]
    CompactUnsupported {
        /// The compact segment.
        path: PathBuf,
        /// Its format version (2, or 4 for a frame log that records parents).
        version: u16,
    },
    /// A data batch cannot fit a data segment (seek offsets are u32).
    #[error("{}: a data batch of {len} bytes does not fit in a 4 GiB data segment", path.display())]
    BatchTooLarge {
        /// The data segment.
        path: PathBuf,
        /// The batch's size in bytes.
        len: u64,
    },
}

impl Error {
    /// Wraps an I/O error with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Wraps a decode error (offset relative to `base`) with its file.
    pub fn corrupt(path: impl Into<PathBuf>, base: u64, error: formats::DecodeError) -> Self {
        Error::Corrupt {
            path: path.into(),
            offset: base + error.offset,
            error,
        }
    }
}

/// Adds a path to `std::io::Result`s.
pub(crate) trait IoContext<T> {
    /// Maps an I/O error to [`Error::Io`] naming `path`.
    fn at(self, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|e| Error::io(path, e))
    }
}

/// Why `path` is not a log, as a user can act on it (looked at when the error is shown).
fn not_a_log(path: &std::path::Path) -> String {
    let p = path.display();
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => format!("{p}: no such directory"),
        Err(e) => format!("{p}: {e}"),
        Ok(m) if !m.is_dir() => format!("{p}: a file, not a log directory"),
        Ok(_) => {
            let empty = std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_none());
            if empty {
                format!(
                    "{p}: holds no frames yet (an empty directory: nothing has recorded into it)"
                )
            } else {
                format!("{p}: not a framelog directory (no frames-NNNNNN.framelog files)")
            }
        }
    }
}
