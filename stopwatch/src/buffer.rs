//! Record buffers: fixed-size byte blocks one producer thread appends to while the writer
//! thread may read (steal) the committed prefix at the same time.
//!
//! Ownership moves: the pool hands a buffer to a producer, the producer hands it (full, or at
//! thread exit) to the writer, the writer writes it and returns it to the pool. While a
//! producer owns a buffer the writer may still *read* the bytes below the producer's published
//! `committed` length (see `slot`); the producer only ever writes above it, so the two never
//! touch the same bytes.

// Buffers are raw allocations shared between a recording thread and the writer thread
// (which steals committed bytes): the unsafe blocks below each say why they are sound.
#![allow(unsafe_code)]

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use formats::{FrameAlloc, FrameEnd, FrameStart, Message, Plot};

/// A record that can be encoded into the front of a byte slice.
pub(crate) trait Encode {
    /// Encodes into the front of `out`; `None` if it does not fit.
    fn encode_into(&self, out: &mut [u8]) -> Option<usize>;
    /// Whether it is a frame record (a start or an end): the recorder's books (`Stats`)
    /// count those; plots, messages and allocation records are counted apart.
    #[inline(always)]
    fn is_frame(&self) -> bool {
        true
    }
}

impl Encode for FrameStart<'_> {
    #[inline(always)]
    fn encode_into(&self, out: &mut [u8]) -> Option<usize> {
        self.encode(out)
    }
}

impl Encode for FrameEnd {
    #[inline(always)]
    fn encode_into(&self, out: &mut [u8]) -> Option<usize> {
        self.encode(out)
    }
}

impl Encode for Plot<'_> {
    #[inline(always)]
    fn encode_into(&self, out: &mut [u8]) -> Option<usize> {
        self.encode(out)
    }
    #[inline(always)]
    fn is_frame(&self) -> bool {
        false
    }
}

impl Encode for Message<'_> {
    #[inline(always)]
    fn encode_into(&self, out: &mut [u8]) -> Option<usize> {
        self.encode(out)
    }
    #[inline(always)]
    fn is_frame(&self) -> bool {
        false
    }
}

impl Encode for formats::FramePolls {
    #[inline(always)]
    fn encode_into(&self, out: &mut [u8]) -> Option<usize> {
        self.encode(out)
    }
    #[inline(always)]
    fn is_frame(&self) -> bool {
        false
    }
}

impl Encode for formats::SlowPoll {
    #[inline(always)]
    fn encode_into(&self, out: &mut [u8]) -> Option<usize> {
        self.encode(out)
    }
    #[inline(always)]
    fn is_frame(&self) -> bool {
        false
    }
}

impl Encode for FrameAlloc {
    #[inline(always)]
    fn encode_into(&self, out: &mut [u8]) -> Option<usize> {
        self.encode(out)
    }
    #[inline(always)]
    fn is_frame(&self) -> bool {
        false
    }
}

/// A position in a buffer, packed into one word so that one store publishes all three: the
/// bytes of whole records (low 32 bits), how many frame records (starts and ends) they are
/// (bits 32-47) and how many other records (plots, messages, allocations; bits 48-63). The
/// writer frames what it takes into checksummed batches from these alone, never walking
/// records, and keeps the books (frame records) apart from the other records. A buffer holds
/// at most 64 KiB of records of at least 14 bytes, so neither count can carry over.
pub(crate) type Pos = u64;

/// What one frame record adds to a [`Pos`] besides its bytes.
pub(crate) const ONE_RECORD: Pos = 1 << 32;

/// What one other record (plot, message, frame allocations) adds to a [`Pos`].
pub(crate) const ONE_OTHER: Pos = 1 << 48;

/// The bytes of a [`Pos`].
#[inline(always)]
pub(crate) fn pos_len(p: Pos) -> usize {
    p as u32 as usize
}

/// The records of a [`Pos`], of every kind.
#[inline(always)]
pub(crate) fn pos_count(p: Pos) -> u32 {
    pos_frames(p) + pos_others(p)
}

/// The frame records (starts and ends) of a [`Pos`].
#[inline(always)]
pub(crate) fn pos_frames(p: Pos) -> u32 {
    (p >> 32) as u32 & 0xFFFF
}

/// The other records (plots, messages, allocations) of a [`Pos`].
#[inline(always)]
pub(crate) fn pos_others(p: Pos) -> u32 {
    (p >> 48) as u32
}

/// Smallest buffer: must hold the largest record (a FrameStart with a 255-byte label).
pub(crate) const MIN_BUFFER: usize = 1024;

/// One record buffer. Accessed only through raw pointers and shared references, never
/// `&mut Buf`, because producer and writer use disjoint byte ranges of it concurrently.
pub(crate) struct Buf {
    data: NonNull<u8>,
    cap: usize,
    /// The [`Pos`] below which the writer has already written (only the writer changes it,
    /// under the slot lock; atomic because the buffer is shared while the producer owns it).
    stolen: AtomicU64,
    /// A coded buffer's bodies (`formats::packed::Coder`), one after another, each within
    /// what one batch may unpack to: where each begins and the timestamp it is coded against.
    /// The owning thread writes an entry, then `bodies`, before it publishes the body's
    /// records (the writer reads them after those records, so it sees them).
    body_starts: [AtomicU64; MAX_BODIES],
    body_bases: [AtomicU64; MAX_BODIES],
    bodies: AtomicUsize,
}

/// Most coded bodies one buffer holds (a thread hands the buffer over after the last).
pub(crate) const MAX_BODIES: usize = 32;

/// One coded body of a buffer, as far as it was written: see [`Buf::bodies`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Body {
    /// Where it begins.
    pub(crate) start: Pos,
    /// Where it ends: where the next body begins, or how far the buffer was read.
    pub(crate) end: Pos,
    /// The timestamp it is coded against.
    pub(crate) base: u64,
    /// Whether a later body begins where it ends (then nothing more is written to it).
    pub(crate) closed: bool,
}

// SAFETY: `Buf` owns its heap block; concurrent access follows the disjoint-range protocol
// described in the module docs (producer writes above `committed`, writer reads below).
unsafe impl Send for Buf {}
// SAFETY: as above; shared references only hand out raw pointers and an atomic.
unsafe impl Sync for Buf {}

impl Buf {
    /// Allocates a zeroed buffer of `cap` bytes (at least [`MIN_BUFFER`]).
    pub(crate) fn new(cap: usize) -> Box<Buf> {
        let cap = cap.max(MIN_BUFFER);
        let block: Box<[u8]> = vec![0u8; cap].into_boxed_slice();
        let data = NonNull::from(Box::leak(block)).cast::<u8>();
        Box::new(Buf {
            data,
            cap,
            stolen: AtomicU64::new(0),
            body_starts: std::array::from_fn(|_| AtomicU64::new(0)),
            body_bases: std::array::from_fn(|_| AtomicU64::new(0)),
            bodies: AtomicUsize::new(0),
        })
    }

    /// Capacity in bytes.
    #[inline]
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// Start of the byte block.
    #[inline]
    pub(crate) fn base(&self) -> *mut u8 {
        self.data.as_ptr()
    }

    /// Forgets the buffer's coded bodies (it is about to be filled again, by its owner).
    pub(crate) fn clear_bodies(&self) {
        self.bodies.store(0, Ordering::Release);
    }

    /// Records that a coded body coded against `base` begins at `at` (the owning thread,
    /// before it publishes any of its records); false if the buffer holds [`MAX_BODIES`].
    pub(crate) fn begin_body(&self, at: Pos, base: u64) -> bool {
        let n = self.bodies.load(Ordering::Relaxed);
        if n == MAX_BODIES {
            return false;
        }
        self.body_starts[n].store(at, Ordering::Relaxed);
        self.body_bases[n].store(base, Ordering::Relaxed);
        self.bodies.store(n + 1, Ordering::Release);
        true
    }

    /// The coded bodies that have records below `upto` (a published position, or the end of
    /// a buffer handed over), in order, into `out` (cleared first: the writer reuses it, and
    /// allocates nothing per buffer).
    pub(crate) fn bodies(&self, upto: Pos, out: &mut Vec<Body>) {
        out.clear();
        let n = self.bodies.load(Ordering::Acquire);
        for i in 0..n {
            let start = self.body_starts[i].load(Ordering::Relaxed);
            if pos_len(start) >= pos_len(upto) {
                break;
            }
            let next = (i + 1 < n).then(|| self.body_starts[i + 1].load(Ordering::Relaxed));
            out.push(Body {
                start,
                end: next.map_or(upto, |s| if pos_len(s) < pos_len(upto) { s } else { upto }),
                base: self.body_bases[i].load(Ordering::Relaxed),
                // A body begun past `upto` may still have records of this one before it.
                closed: next.is_some_and(|s| pos_len(s) <= pos_len(upto)),
            });
        }
    }

    /// The position below which the writer has already taken everything.
    pub(crate) fn stolen(&self) -> Pos {
        self.stolen.load(Ordering::Relaxed)
    }

    /// Records that the writer has taken everything below `upto`.
    pub(crate) fn set_stolen(&self, upto: Pos) {
        self.stolen.store(upto, Ordering::Relaxed);
    }

    /// The bytes `from..to`.
    ///
    /// # Safety
    /// `from <= to <= cap`, and no thread may be writing inside `from..to` (the caller holds a
    /// `committed` length `>= to` published with Release by the owning producer).
    pub(crate) unsafe fn bytes(&self, from: usize, to: usize) -> &[u8] {
        debug_assert!(from <= to && to <= self.cap);
        // SAFETY: in bounds by the caller's contract; nobody writes this range.
        unsafe { std::slice::from_raw_parts(self.base().add(from), to - from) }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: `data`/`cap` came from `Box::leak` of a `Box<[u8]>` of exactly `cap` bytes.
        unsafe {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.data.as_ptr(),
                self.cap,
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_have_at_least_the_minimum_size_and_track_stolen_bytes() {
        let b = Buf::new(10);
        assert_eq!(b.cap(), MIN_BUFFER);
        let b = Buf::new(4096);
        assert_eq!(b.cap(), 4096);
        // SAFETY: nobody else has the buffer; writes stay in bounds.
        unsafe {
            std::ptr::copy_nonoverlapping(b"hello".as_ptr(), b.base().add(3), 5);
            assert_eq!(b.bytes(3, 8), b"hello");
        }
        assert_eq!(b.stolen(), 0);
        b.set_stolen(8 + 2 * ONE_RECORD + 3 * ONE_OTHER);
        let p = b.stolen();
        assert_eq!((pos_len(p), pos_count(p)), (8, 5));
        assert_eq!((pos_frames(p), pos_others(p)), (2, 3));
    }
}
