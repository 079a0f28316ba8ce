//! Giving memory back to the operating system once a log is loaded.

/// Asks the allocator to return its free memory to the OS (glibc keeps freed memory in its
/// arenas: after loading a big log, the growth copies of the model's arrays would otherwise
/// stay in the window's RSS). Elsewhere, a no-op.
pub fn return_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    glibc::trim();
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
mod glibc {
    unsafe extern "C" {
        /// glibc: releases free memory at the top of the heap and unused pages of every arena.
        fn malloc_trim(pad: usize) -> i32;
    }

    pub(super) fn trim() {
        // SAFETY: malloc_trim takes no pointers and has no preconditions; glibc documents it
        // as safe to call at any time from any thread (it takes each arena's lock).
        unsafe {
            malloc_trim(0);
        }
    }
}
