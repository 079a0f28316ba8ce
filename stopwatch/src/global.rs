//! The process-global recorder behind `Stopwatch::start` and friends: installed once by
//! `Builder::install`, read on every call with one relaxed load.

// The global recorder is an `Arc<Inner>` kept as a raw pointer in an atomic: see the
// SAFETY comments below.
#![allow(unsafe_code)]

use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::inner::Inner;

/// The process-global recorder. It holds one strong count that is never released: a thread
/// may have loaded the pointer just before `uninstall`, so the `Inner` must outlive it. That
/// leaks one small struct per install (buffers are freed at shutdown).
static GLOBAL: AtomicPtr<Inner> = AtomicPtr::new(std::ptr::null_mut());

/// The global recorder, if one is installed (borrowed: the result never releases the strong
/// count `GLOBAL` holds).
#[inline(always)]
pub(crate) fn global() -> Option<ManuallyDrop<Arc<Inner>>> {
    // One relaxed load decides the no-recorder case (a plain load, nothing else).
    let p = GLOBAL.load(Ordering::Relaxed);
    if p.is_null() {
        return None;
    }
    // Pairs with `install`'s Release (its compare-exchange): the `Inner` behind `p` is seen
    // fully initialised. Free on x86 (a compiler barrier).
    std::sync::atomic::fence(Ordering::Acquire);
    // SAFETY: `p` came from `Arc::into_raw` and its strong count is never released (see
    // `GLOBAL`), so it is alive; `ManuallyDrop` keeps this borrow from releasing it.
    Some(ManuallyDrop::new(unsafe { Arc::from_raw(p) }))
}

/// Runs `f` with the global recorder, if one is installed.
#[inline(always)]
pub(crate) fn with_global<R>(f: impl FnOnce(&Arc<Inner>) -> R) -> Option<R> {
    global().map(|inner| f(&inner))
}

/// Makes `inner` the global recorder; false (and nothing changes) if one is installed.
pub(crate) fn publish(inner: &Arc<Inner>) -> bool {
    let raw = Arc::into_raw(inner.clone()) as *mut Inner;
    if GLOBAL
        .compare_exchange(
            std::ptr::null_mut(),
            raw,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_err()
    {
        // SAFETY: `raw` came from `Arc::into_raw` just above and was not published.
        drop(unsafe { Arc::from_raw(raw) });
        return false;
    }
    true
}

/// No global recorder from now on: new calls are no-ops (the `Inner` stays alive, see
/// `GLOBAL`).
pub(crate) fn withdraw() {
    GLOBAL.store(std::ptr::null_mut(), Ordering::Release);
}

/// Whether a global recorder is installed.
pub(crate) fn is_installed() -> bool {
    !GLOBAL.load(Ordering::Acquire).is_null()
}
