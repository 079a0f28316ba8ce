//! [`Damage`]: bytes a reader skipped because they fail the format's checks.

use std::path::PathBuf;

use formats::DamageKind;

/// A run of damaged bytes that a reader reported and skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The file.
    pub path: PathBuf,
    /// Byte offset of the first skipped byte.
    pub offset: u64,
    /// Bytes skipped.
    pub len: u64,
    /// Why they were skipped.
    pub why: DamageKind,
    /// The newest frame start or end time the reader delivered before it (0: none), so a
    /// viewer can place the damage in time (the frames whose ends it held end there).
    pub newest_before: u64,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at byte {}: skipped {} damaged bytes: {}",
            self.path.display(),
            self.offset,
            self.len,
            self.why
        )
    }
}

/// Damage found so far, with runs that touch merged into one.
#[derive(Debug, Clone, Default)]
pub struct DamageLog {
    new: Vec<Damage>,
    bytes: u64,
    places: u64,
    last: Option<(PathBuf, u64)>,
    /// The newest frame start or end time delivered so far.
    newest: u64,
}

impl DamageLog {
    /// Notes a record about to be delivered (its time places damage found after it). Other
    /// records' times are not frame times: a writer's announcement carries the wall clock.
    #[inline]
    pub(crate) fn saw(&mut self, rec: &formats::Record<'_>) {
        if let formats::Record::Start(formats::FrameStart { timestamp, .. })
        | formats::Record::End(formats::FrameEnd { timestamp, .. }) = rec
        {
            self.saw_time(*timestamp);
        }
    }

    /// Notes records about to be delivered whose newest frame start or end time is `t`.
    #[inline]
    pub(crate) fn saw_time(&mut self, t: u64) {
        self.newest = self.newest.max(t);
    }

    /// Records `len` damaged bytes at `offset` of `path`.
    pub(crate) fn add(&mut self, path: &std::path::Path, offset: u64, len: u64, why: DamageKind) {
        self.bytes += len;
        let touches = matches!(&self.last, Some((p, end)) if p == path && *end == offset);
        self.last = Some((path.to_owned(), offset + len));
        if touches {
            if let Some(d) = self.new.last_mut().filter(|d| d.path == path) {
                d.len += len;
            }
            return;
        }
        self.places += 1;
        self.new.push(Damage {
            path: path.to_owned(),
            offset,
            len,
            why,
            newest_before: self.newest,
        });
    }

    /// The damage reported since the last call.
    pub fn take(&mut self) -> Vec<Damage> {
        std::mem::take(&mut self.new)
    }

    /// Total damaged bytes skipped so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Number of separate damaged places so far.
    pub fn places(&self) -> u64 {
        self.places
    }
}
