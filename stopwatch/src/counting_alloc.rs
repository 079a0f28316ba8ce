//! [`CountingAlloc`]: a global allocator wrapper that counts, per thread, what is allocated
//! and freed, so that every frame can record what its own code allocated (a FrameAlloc
//! record, `docs/FORMAT.md`, type 9).
//!
//! The counters are four `Cell<u64>` in a `const`-initialized thread-local without a
//! destructor: reading or bumping them never allocates, never takes a lock, and works at any
//! point of a thread's life (its thread-local destructors included). A frame snapshots its
//! thread's counters when it starts (an `in_frame` future around each poll, a `tracing` span
//! recorded by `TracingLayer` around each enter → exit) and records the difference when it
//! ends; nested frames are inclusive, as time is: a parent's counts include its children's.

// `GlobalAlloc` is an unsafe trait: its implementation only forwards to the wrapped
// allocator (SAFETY comments below).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the first allocation a [`CountingAlloc`] serves: frames take snapshots only then,
/// so a program without one pays a single relaxed load per frame.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// A global allocator that counts allocations per thread, wrapping another (`System`,
/// jemalloc, mimalloc...).
///
/// ```no_run
/// #[global_allocator]
/// static A: stopwatch::CountingAlloc<std::alloc::System> =
///     stopwatch::CountingAlloc::new(std::alloc::System);
/// ```
///
/// With it installed, every recorded frame that allocated or freed anything while it ran
/// gets a FrameAlloc record: allocations (a `realloc` counts as an allocation of the new
/// size and a free of the old), bytes allocated, frees, bytes freed. Counts are inclusive:
/// a frame's include those of the frames nested in it. For a future wrapped with
/// [`crate::FutureExt::in_frame`] they are summed over its polls, on whatever thread; for a
/// `tracing` span recorded by `TracingLayer` (feature `tracing`), over the times it is
/// entered.
/// The cost is four thread-local additions per allocation or free.
pub struct CountingAlloc<A> {
    inner: A,
}

impl<A> CountingAlloc<A> {
    /// Wraps `inner` (usable in a `static`).
    pub const fn new(inner: A) -> Self {
        CountingAlloc { inner }
    }
}

/// One thread's running totals.
struct Counters {
    allocs: Cell<u64>,
    alloc_bytes: Cell<u64>,
    frees: Cell<u64>,
    freed_bytes: Cell<u64>,
}

thread_local! {
    // `const` and no destructor: no lazy registration (which could allocate, recursing into
    // the allocator) and no "destroyed" state, so `try_with` succeeds at every point of the
    // thread's life on targets with native thread-locals (all tier-1 targets).
    static COUNTERS: Counters = const {
        Counters {
            allocs: Cell::new(0),
            alloc_bytes: Cell::new(0),
            frees: Cell::new(0),
            freed_bytes: Cell::new(0),
        }
    };
}

#[inline(always)]
fn count_alloc(size: usize) {
    if !INSTALLED.load(Ordering::Relaxed) {
        INSTALLED.store(true, Ordering::Relaxed);
    }
    let _ = COUNTERS.try_with(|c| {
        c.allocs.set(c.allocs.get().wrapping_add(1));
        c.alloc_bytes
            .set(c.alloc_bytes.get().wrapping_add(size as u64));
    });
}

#[inline(always)]
fn count_free(size: usize) {
    let _ = COUNTERS.try_with(|c| {
        c.frees.set(c.frees.get().wrapping_add(1));
        c.freed_bytes
            .set(c.freed_bytes.get().wrapping_add(size as u64));
    });
}

// SAFETY: every method forwards to `inner` with the caller's arguments unchanged and
// returns its result unchanged, so `inner`'s guarantees (it is a `GlobalAlloc`) are ours;
// the counting around the calls touches only this thread's `Cell`s and an atomic flag (it
// never allocates, unwinds or takes a lock).
unsafe impl<A: GlobalAlloc> GlobalAlloc for CountingAlloc<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which is `inner`'s.
        let p = unsafe { self.inner.alloc(layout) };
        if !p.is_null() {
            count_alloc(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`: the same contract, forwarded.
        let p = unsafe { self.inner.alloc_zeroed(layout) };
        if !p.is_null() {
            count_alloc(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count_free(layout.size());
        // SAFETY: the caller guarantees `ptr` was allocated by this allocator (so by
        // `inner`, which made every block we handed out) with `layout`.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract; `ptr` came from
        // `inner` as above.
        let p = unsafe { self.inner.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // A move to a new size: the old block is freed and a new one allocated (on
            // failure the old block stays allocated: nothing happened).
            count_alloc(new_size);
            count_free(layout.size());
        }
        p
    }
}

/// A thread's allocation counts at one moment, or a difference of two.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AllocCounts {
    pub(crate) allocs: u64,
    pub(crate) alloc_bytes: u64,
    pub(crate) frees: u64,
    pub(crate) freed_bytes: u64,
}

impl AllocCounts {
    /// What happened between `earlier` and `self` (snapshots of one thread).
    #[inline]
    pub(crate) fn since(self, earlier: AllocCounts) -> AllocCounts {
        AllocCounts {
            allocs: self.allocs.wrapping_sub(earlier.allocs),
            alloc_bytes: self.alloc_bytes.wrapping_sub(earlier.alloc_bytes),
            frees: self.frees.wrapping_sub(earlier.frees),
            freed_bytes: self.freed_bytes.wrapping_sub(earlier.freed_bytes),
        }
    }

    /// `self` plus `other` (a sum over polls).
    #[inline]
    pub(crate) fn plus(self, other: AllocCounts) -> AllocCounts {
        AllocCounts {
            allocs: self.allocs.wrapping_add(other.allocs),
            alloc_bytes: self.alloc_bytes.wrapping_add(other.alloc_bytes),
            frees: self.frees.wrapping_add(other.frees),
            freed_bytes: self.freed_bytes.wrapping_add(other.freed_bytes),
        }
    }

    /// Whether nothing was allocated or freed.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.allocs == 0 && self.frees == 0
    }
}

/// Whether a [`CountingAlloc`] has served an allocation (one relaxed load).
#[inline(always)]
pub(crate) fn installed() -> bool {
    INSTALLED.load(Ordering::Relaxed)
}

/// This thread's counts now (zero if the thread-local is unavailable).
#[inline]
pub(crate) fn snapshot() -> AllocCounts {
    COUNTERS
        .try_with(|c| AllocCounts {
            allocs: c.allocs.get(),
            alloc_bytes: c.alloc_bytes.get(),
            frees: c.frees.get(),
            freed_bytes: c.freed_bytes.get(),
        })
        .unwrap_or_default()
}

/// A snapshot when a counting allocator is installed, else `None` (one relaxed load).
#[inline(always)]
pub(crate) fn mark() -> Option<AllocCounts> {
    if installed() {
        Some(snapshot_out_of_line())
    } else {
        None
    }
}

/// [`snapshot`], kept out of the frame's inlined start: a program without a counting
/// allocator pays only the flag's load there.
#[inline(never)]
fn snapshot_out_of_line() -> AllocCounts {
    snapshot()
}

/// Counts what a stretch of code allocates on this thread: started by [`Span::begin`],
/// added up over several stretches (the polls of a future, the enters of a `tracing` span)
/// with [`Span::end_into`].
#[derive(Clone, Copy, Default)]
pub(crate) struct Span(Option<AllocCounts>);

impl Span {
    /// Starts counting (nothing, when no counting allocator is installed).
    #[inline(always)]
    pub(crate) fn begin() -> Span {
        Span(mark())
    }

    /// Adds what was allocated since [`Span::begin`] to `total`.
    #[inline(always)]
    pub(crate) fn end_into(self, total: &mut AllocCounts) {
        if let Some(at) = self.0 {
            *total = total.plus(snapshot().since(at));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::System;

    // Not the test binary's global allocator: the counting is exercised by calling the
    // wrapper directly, so the assertions hold whatever else the harness allocates.
    static ALLOC: CountingAlloc<System> = CountingAlloc::new(System);

    #[test]
    fn counting_alloc_counts_allocs_reallocs_and_frees_of_this_thread() {
        let before = snapshot();
        let layout = Layout::from_size_align(24, 8).unwrap();
        // SAFETY: a non-zero-size layout; each block is freed once, with its layout, by the
        // allocator that made it.
        unsafe {
            let a = ALLOC.alloc(layout);
            assert!(!a.is_null());
            a.write_bytes(7, 24);
            let z = ALLOC.alloc_zeroed(layout);
            assert!(!z.is_null());
            assert_eq!(*z.add(23), 0);
            let b = ALLOC.realloc(a, layout, 100);
            assert!(!b.is_null());
            assert_eq!(*b.add(23), 7, "realloc keeps the contents");
            ALLOC.dealloc(b, Layout::from_size_align(100, 8).unwrap());
            ALLOC.dealloc(z, layout);
        }
        assert!(installed());
        let d = snapshot().since(before);
        assert_eq!(
            d,
            AllocCounts {
                allocs: 3,
                alloc_bytes: 24 + 24 + 100,
                frees: 3,
                freed_bytes: 24 + 100 + 24,
            }
        );
    }

    #[test]
    fn counting_alloc_counts_are_per_thread_and_spans_add_up() {
        let layout = Layout::from_size_align(8, 8).unwrap();
        let mut total = AllocCounts::default();
        for _ in 0..3 {
            let span = Span(Some(snapshot()));
            // SAFETY: as above.
            unsafe { ALLOC.dealloc(ALLOC.alloc(layout), layout) };
            span.end_into(&mut total);
        }
        assert_eq!((total.allocs, total.alloc_bytes), (3, 24));
        assert_eq!((total.frees, total.freed_bytes), (3, 24));
        let here = snapshot();
        std::thread::spawn(move || {
            // SAFETY: as above.
            unsafe { ALLOC.dealloc(ALLOC.alloc(layout), layout) };
        })
        .join()
        .unwrap();
        assert_eq!(snapshot().since(here), AllocCounts::default());
    }
}
