//! framelog's live flamegraph debugger.
//!
//! - [`model`]: frames indexed into lanes and rows, level of detail, hit testing, search,
//!   statistics and contexts — plain Rust, no drawing.
//! - [`feed`]: records into model updates, from files or a socket alike (no I/O, no
//!   threads: it runs in the browser too).
//! - [`ingest`]: a log's records into the model through one applier: a log directory's
//!   reader threads (desktop), or a remote log ([`remote`]).
//! - [`data_loader`]: frame data on demand, off the UI thread.
//! - [`export_job`]: File > Export… (Chrome JSON, speedscope) off the UI thread.
//! - [`remote`]: a log served over a WebSocket (`debugger-gui ws://…`, and the page in a
//!   browser).
//! - [`listen`]: the window as a recording server for programs that connect to it.
//! - [`temp_log`]: a listening window's temporary log kept, saved or deleted on quitting.
//! - [`ui`]: the egui widgets; [`DebuggerApp`] puts them together.
//! - [`synth`] and [`demo`]: synthetic workloads for tests, benchmarks and `--demo`.
//! - `web`: the debugger in a browser (WebAssembly): a served log, and its test hooks.
//!
//! The browser build (`target_arch = "wasm32"`) has no files, threads or processes: it opens
//! only a served log, and leaves out log directories, the demo, listening, exports and the
//! recent logs list (their menu items are hidden, not broken).

// One `unsafe` call, in `memory` (glibc's malloc_trim: the README's memory numbers).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod app;
pub mod data_loader;
#[cfg(not(target_arch = "wasm32"))]
pub mod demo;
#[cfg(not(target_arch = "wasm32"))]
pub mod export_job;
pub mod feed;
pub mod ingest;
#[cfg(not(target_arch = "wasm32"))]
pub mod listen;
mod memory;
pub mod model;
#[cfg(not(target_arch = "wasm32"))]
pub mod recent;
pub mod remote;
pub mod source;
#[cfg(not(target_arch = "wasm32"))]
pub mod synth;
#[cfg(not(target_arch = "wasm32"))]
pub mod temp_log;
pub mod timefmt;
pub mod ui;
#[cfg(target_arch = "wasm32")]
pub mod web;

pub use app::DebuggerApp;
