//! A slot: the part of one thread's recording state that the writer thread shares.
//!
//! The owning thread appends records to its current buffer and publishes the length of the
//! whole records with a Release store to `committed` (a plain store on x86: no lock, no
//! read-modify-write). The writer can then *steal* the committed-but-unwritten prefix at any
//! time, under the slot's mutex, which the owner takes only when it swaps buffers (rare). That
//! is how ended frames reach the log within ~100 ms even when their thread goes idle, without
//! the owner ever taking a lock per record.
//!
//! Ordering rule: when the owner hands a full buffer to the writer it bumps `pending`; the
//! writer does not steal from the slot's next buffer until it has written that full one, so
//! one thread's records stay in order in the file.
//!
//! Shutdown rule: the writer's final pass *seals* each slot under its mutex, once the slot
//! has no hand-off in flight, taking what is committed as it does. A hand-off (or a late
//! record) checks the seal under the same mutex: before the seal it is pending and the
//! writer waits for it; after it, the writer will never read again, so its records are
//! counted as dropped. There is no moment where a hand-off is neither waited for nor counted.

// A slot hands the writer thread a raw pointer to its thread's current buffer, guarded by the
// slot's lock: see the SAFETY comments below.
#![allow(unsafe_code)]

use parking_lot::{Mutex, MutexGuard};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::buffer::Buf;

/// Shared per-(thread, recorder) state.
pub(crate) struct Slot {
    /// Process-wide thread number (the ThreadInfo record's id).
    pub(crate) thread: u32,
    /// Thread name at registration (may be empty).
    pub(crate) name: String,
    /// Whole records in the current buffer, a [`crate::buffer::Pos`] (bytes and count; owner:
    /// Release store; writer: Acquire).
    pub(crate) committed: AtomicU64,
    /// Records this thread discarded (only the owner thread changes it; the late slot's, any
    /// thread, atomically).
    pub(crate) dropped: AtomicU64,
    /// Part of `dropped` already written as dropped markers (writer only).
    pub(crate) reported: AtomicU64,
    state: Mutex<SlotState>,
}

/// What the writer needs to steal, changed only under the slot's mutex.
pub(crate) struct SlotState {
    /// The buffer the owner is filling, or null.
    pub(crate) current: *const Buf,
    /// Full buffers handed to the writer and not yet written.
    pub(crate) pending: u32,
    /// The owning thread has exited (its last buffer was handed over).
    pub(crate) orphaned: bool,
    /// The writer's final pass took what this slot had: nothing handed over after this is
    /// read (it is counted as dropped instead).
    pub(crate) sealed: bool,
    /// Where the writer's reading of the current coded buffer stopped inside a body (the
    /// body's start, and its decoder), once it stole from it (`formats::packed::Coder`: a
    /// piece of a body unpacks only after the pieces before it).
    pub(crate) unpacker: Option<(crate::buffer::Pos, Box<formats::packed::Unpacker>)>,
}

// SAFETY: the raw pointer is only dereferenced by the writer under the mutex while the owner
// cannot free or hand over the buffer (both also need the mutex); see the module docs.
unsafe impl Send for SlotState {}

impl Slot {
    /// A slot for a thread.
    pub(crate) fn new(thread: u32, name: String) -> Slot {
        Slot {
            thread,
            name,
            committed: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            reported: AtomicU64::new(0),
            state: Mutex::new(SlotState {
                current: std::ptr::null(),
                pending: 0,
                orphaned: false,
                sealed: false,
                unpacker: None,
            }),
        }
    }

    /// Locks the shared state (poisoning ignored: the state is plain data).
    pub(crate) fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock()
    }

    /// Adds one discarded record. Owner thread only, so load + store suffices (no RMW).
    #[inline]
    pub(crate) fn count_dropped(&self, n: u64) {
        let d = self.dropped.load(Ordering::Relaxed);
        self.dropped.store(d + n, Ordering::Relaxed);
    }

    /// Adds discarded records from any thread (the late slot, which no thread owns).
    pub(crate) fn count_dropped_shared(&self, n: u64) {
        self.dropped.fetch_add(n, Ordering::Relaxed);
    }
}
