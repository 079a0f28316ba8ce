//! The API called from inside the global allocator: an allocator that wraps `CountingAlloc`
//! and records a plot value, a message or a frame on each allocation (with its own
//! per-thread guard against unbounded recursion, which lets it nest once). A thread's first call registers
//! the thread with the recorder, and registering allocates: the allocator's call then
//! re-enters the API in the middle of it. The API must never panic there (a panic inside an
//! allocator aborts the process); a call it cannot serve is dropped and counted, so every
//! call is either in the log or in the books.
//!
//! Its own test binary (it installs its own global allocator); each case runs in a child
//! process of it (one global recorder per process, and an abort must fail the test, not
//! end the test binary).

// A global allocator is an `unsafe impl`: it forwards to `CountingAlloc`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use formats::Record;
use framelog::LogReader;
use stopwatch::{BufferingMode, CountingAlloc, Stopwatch};

/// What the allocator's hook calls.
const CALL_PLOT: u8 = 1;
const CALL_MESSAGE: u8 = 2;
const CALL_FRAME: u8 = 3;

static HOOK: AtomicU8 = AtomicU8::new(0);
static ON: AtomicBool = AtomicBool::new(false);
/// Calls the hook made (each a plot, a message, or one frame of two records).
static CALLS: AtomicU64 = AtomicU64::new(0);

/// How deep the hook may nest: 2 lets an allocation made inside the API (registering the
/// thread, a buffer) call the API again once, as a hook that guards only against unbounded
/// recursion does.
const MAX_DEPTH: u8 = 2;

thread_local! {
    // A const initialiser and no destructor: usable from inside the allocator at any
    // point of a thread's life.
    static DEPTH: Cell<u8> = const { Cell::new(0) };
}

/// An allocator that records into the stopwatch on every allocation.
struct Probe(CountingAlloc<System>);

impl Probe {
    fn hook(&self) {
        if !ON.load(Ordering::Relaxed) {
            return;
        }
        let _ = DEPTH.try_with(|g| {
            let depth = g.get();
            if depth >= MAX_DEPTH {
                return;
            }
            g.set(depth + 1);
            CALLS.fetch_add(1, Ordering::Relaxed);
            match HOOK.load(Ordering::Relaxed) {
                CALL_PLOT => Stopwatch::plot("allocations", 1.0),
                CALL_MESSAGE => Stopwatch::message("allocated"),
                _ => drop(Stopwatch::start("alloc")),
            }
            g.set(depth);
        });
    }
}

// SAFETY: every method forwards to `CountingAlloc<System>` with the caller's arguments;
// the hook around it only reads atomics and thread-locals and calls the stopwatch, which
// allocates through this same allocator (the guard keeps that from recursing).
unsafe impl GlobalAlloc for Probe {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.hook();
        // SAFETY: forwarded unchanged (see the impl's comment).
        unsafe { self.0.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged.
        unsafe { self.0.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.hook();
        // SAFETY: forwarded unchanged.
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Probe = Probe(CountingAlloc::new(System));

const THREADS: usize = 4;
const ALLOCATIONS: usize = 5_000;

/// The child's side: record from the allocator on fresh threads, then compare the log and
/// the books with the calls made.
fn child(dir: &str, mode: BufferingMode, hook: u8) {
    HOOK.store(hook, Ordering::Relaxed);
    let guard = Stopwatch::builder()
        .dir(dir)
        .mode(mode)
        .install()
        .expect("install");
    ON.store(true, Ordering::Relaxed);
    // Fresh threads: each one's first call to the API comes from its allocator, in the
    // middle of whatever the thread (or the runtime starting it) allocates first.
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            std::thread::spawn(move || {
                let mut kept = Vec::new();
                for i in 0..ALLOCATIONS {
                    kept.push(black_box(vec![t as u8; 16 + i % 64]));
                    if kept.len() > 32 {
                        kept.clear();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a recording thread panicked");
    }
    ON.store(false, Ordering::Relaxed);
    // The recorder's writer thread allocates too: a call its allocator began before the store
    // above must reach the recorder before `finish` uninstalls it (after that, a call finds
    // no recorder and is neither recorded nor refused). The flush's round trip orders them.
    assert!(
        Stopwatch::flush(std::time::Duration::from_secs(60)),
        "flushed"
    );
    let stats = guard.finish();
    let calls = CALLS.load(Ordering::Relaxed);

    let mut reader = LogReader::open(dir).expect("open the log");
    let mut plots = 0u64;
    let mut messages = 0u64;
    let mut frame_records = 0u64;
    reader
        .read_available(|_, r| match r {
            Record::Plot(p) if p.name == "allocations" => plots += 1,
            Record::Message(m) if m.text == "allocated" => messages += 1,
            Record::Start(s) if s.label == "alloc" => frame_records += 1,
            Record::End(_) => frame_records += 1,
            _ => {}
        })
        .expect("read the log");
    assert!(reader.take_damage().is_empty(), "the log is whole");
    assert!(
        calls > (THREADS * ALLOCATIONS) as u64,
        "the hook ran: {calls}"
    );
    match hook {
        CALL_FRAME => assert_eq!(
            frame_records + stats.dropped,
            2 * calls,
            "every frame's records are in the log or counted: {stats:?}"
        ),
        CALL_PLOT => assert_eq!(
            plots + stats.dropped_other,
            calls,
            "every plot is in the log or counted: {stats:?}"
        ),
        _ => assert_eq!(
            messages + stats.dropped_other,
            calls,
            "every message is in the log or counted: {stats:?}"
        ),
    }
    let refused = match hook {
        CALL_FRAME => stats.dropped / 2,
        _ => stats.dropped_other,
    };
    if mode == BufferingMode::Block {
        // Block mode loses nothing it can serve: what it refuses are calls made on the
        // writer's own thread and calls that re-entered a thread's registration.
        assert!(
            refused < calls / 10,
            "Block mode refuses only what it cannot serve: {refused} of {calls}"
        );
    }
    println!(
        "refused {refused}, calls {calls}, plots {plots}, messages {messages}, frame records {frame_records}, {stats:?}"
    );
}

/// Runs one case in a child process of this test binary.
fn run(mode: &str, hook: u8) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env("ALLOC_REENTRY_DIR", dir.path())
        .env("ALLOC_REENTRY_MODE", mode)
        .env("ALLOC_REENTRY_HOOK", hook.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the child ({mode}, hook {hook}) failed: {:?}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The child's entry point (does nothing when run by the test harness itself).
#[test]
fn child_entry() {
    let Ok(dir) = std::env::var("ALLOC_REENTRY_DIR") else {
        return;
    };
    let mode = match std::env::var("ALLOC_REENTRY_MODE").unwrap().as_str() {
        "block" => BufferingMode::Block,
        _ => BufferingMode::Drop,
    };
    let hook = std::env::var("ALLOC_REENTRY_HOOK")
        .unwrap()
        .parse()
        .unwrap();
    child(&dir, mode, hook);
}

#[test]
fn plots_from_the_allocator_on_fresh_threads_never_abort_and_are_all_counted() {
    for mode in ["block", "drop"] {
        run(mode, CALL_PLOT);
    }
}

#[test]
fn messages_from_the_allocator_on_fresh_threads_never_abort_and_are_all_counted() {
    for mode in ["block", "drop"] {
        run(mode, CALL_MESSAGE);
    }
}

#[test]
fn frames_from_the_allocator_on_fresh_threads_never_abort_and_are_all_counted() {
    for mode in ["block", "drop"] {
        run(mode, CALL_FRAME);
    }
}
