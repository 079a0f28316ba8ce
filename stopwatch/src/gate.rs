//! [`Gate`]: what a remote session lets through, changeable while the program runs.
//!
//! A recorder that only streams records nothing until a session starts; a session may set
//! its own sampling, turn frame data off, or record only some categories
//! (`docs/PROTOCOL.md`, StartSession). The hot path reads one byte: all zero means "no
//! session rule", and the frame costs what it did before.

use std::cell::Cell;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use formats::Category;
use parking_lot::RwLock;

use crate::sampling::Sampler;

/// Nothing is recorded (streaming only, no session).
const OFF: u8 = 1;
/// Frame data is not recorded.
const NO_DATA: u8 = 2;
/// Only the categories in the filter are recorded.
const FILTER: u8 = 4;
/// The session's sampler decides, not the recorder's.
const SAMPLING: u8 = 8;

/// The session rules of one recorder.
pub(crate) struct Gate {
    flags: AtomicU8,
    /// Bit `c` set: category `c` is recorded (read only when `FILTER` is set).
    categories: [AtomicU64; 4],
    sampler: RwLock<Option<Sampler>>,
}

impl Gate {
    /// A gate that lets everything through (`off`: nothing, until a session opens it).
    pub(crate) fn new(off: bool) -> Gate {
        Gate {
            flags: AtomicU8::new(if off { OFF } else { 0 }),
            categories: Default::default(),
            sampler: RwLock::new(None),
        }
    }

    /// Whether no session rule applies.
    #[cfg(test)]
    pub(crate) fn is_plain(&self) -> bool {
        self.flags.load(Ordering::Relaxed) == 0
    }

    /// Decides a new context under the session's rules; `own` is the recorder's decision.
    pub(crate) fn sample(&self, own: impl FnOnce() -> bool, rng: &Cell<u64>, now_ns: u64) -> bool {
        let flags = self.flags.load(Ordering::Acquire);
        if flags & OFF != 0 {
            return false;
        }
        if flags & SAMPLING != 0
            && let Some(s) = &*self.sampler.read()
        {
            return s.sample(rng, now_ns);
        }
        own()
    }

    /// The rule flags, for the hot path to read once per frame (0: no session rule).
    #[inline(always)]
    pub(crate) fn flags(&self) -> u8 {
        self.flags.load(Ordering::Relaxed)
    }

    /// Whether a frame of `category` is left out by the session's category filter.
    #[cfg(test)]
    pub(crate) fn skips(&self, category: Category) -> bool {
        self.skips_with(self.flags(), category)
    }

    /// [`Gate::skips`] with the flags already loaded (by [`Gate::flags`]).
    #[inline(always)]
    pub(crate) fn skips_with(&self, flags: u8, category: Category) -> bool {
        flags & FILTER != 0 && !self.allows(category)
    }

    fn allows(&self, c: Category) -> bool {
        let word = self.categories[usize::from(c.0 / 64)].load(Ordering::Relaxed);
        word & (1u64 << (c.0 % 64)) != 0
    }

    /// Whether frame data is recorded.
    #[inline]
    pub(crate) fn records_data(&self) -> bool {
        self.flags.load(Ordering::Relaxed) & (OFF | NO_DATA) == 0
    }

    /// Whether plots and messages are recorded (everything but "off": they are not
    /// sampled and have no category).
    #[inline]
    pub(crate) fn records_instants(&self) -> bool {
        self.flags.load(Ordering::Relaxed) & OFF == 0
    }

    /// Applies a session's rules: `sampler` replaces the recorder's (None keeps it), `data`
    /// turns frame data on or off, `categories` (empty: all) filters.
    pub(crate) fn open(&self, sampler: Option<Sampler>, data: bool, categories: &[Category]) {
        let mut flags = 0;
        if sampler.is_some() {
            flags |= SAMPLING;
        }
        *self.sampler.write() = sampler;
        if !data {
            flags |= NO_DATA;
        }
        if !categories.is_empty() {
            let mut words = [0u64; 4];
            for c in categories {
                words[usize::from(c.0 / 64)] |= 1u64 << (c.0 % 64);
            }
            for (a, w) in self.categories.iter().zip(words) {
                a.store(w, Ordering::Relaxed);
            }
            flags |= FILTER;
        }
        self.flags.store(flags, Ordering::Release);
    }

    /// Back to the recorder's own rules (`off`: record nothing).
    pub(crate) fn close(&self, off: bool) {
        self.flags
            .store(if off { OFF } else { 0 }, Ordering::Release);
        *self.sampler.write() = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::Sampling;

    #[test]
    fn a_session_filters_categories_data_and_sampling_then_closes() {
        let g = Gate::new(true);
        let rng = Cell::new(1);
        assert!(!g.sample(|| true, &rng, 0), "off until a session opens");
        assert!(!g.records_data());
        g.open(None, false, &[Category::DATABASE]);
        assert!(g.sample(|| true, &rng, 0));
        assert!(!g.records_data());
        assert!(!g.skips(Category::DATABASE));
        assert!(g.skips(Category::HTTP));
        g.open(Some(Sampler::new(Sampling::Probability(0.0))), true, &[]);
        assert!(!g.sample(|| true, &rng, 0), "the session's sampler decides");
        assert!(g.records_data() && !g.skips(Category::HTTP));
        g.close(false);
        assert!(g.is_plain() && g.sample(|| true, &rng, 0));
    }
}
