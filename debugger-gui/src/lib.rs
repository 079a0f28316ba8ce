//! framelog's live flamegraph debugger.
//!
//! - [`model`]: frames indexed into lanes and rows, level of detail, hit testing, search,
//!   statistics and contexts — plain Rust, no drawing.
//! - [`feed`]: records into model updates, from files or a socket alike (no I/O, no
//!   threads: it runs in the browser too).
//! - [`apply`]: the applier stage both sources feed: batches into the shared model a chunk
//!   per lock, the status (progress, rate) and repaints.
//! - [`ingest`]: a log's records into the model through that applier: a log directory's
//!   reader threads (desktop), or a remote log ([`remote`]).
//! - [`data_loader`]: frame data on demand, off the UI thread.
//! - [`export_job`]: File > Export… (Chrome JSON, speedscope) off the UI thread.
//! - [`query`]: the Query tab's SQL over the log directory, on a thread of its own.
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
//!
//! # Rooms: the portable core, the native shell, the views
//!
//! Every arrow points one way, and between sibling modules (the crate's top-level modules;
//! `model`'s files; `ui`'s) there is no cycle. A module and its own parent or children are
//! one room (`model/layout.rs` uses `super::Model`, `model/mod.rs` holds a `ContextIndex`).
//!
//! - **Core** (portable: no I/O, no threads, no window; the browser build runs it as is):
//!   [`model`], [`feed`], [`timefmt`]. The core imports only the core, and its docs name no
//!   other module.
//! - **Shell** (files, threads, sockets, processes; the browser's entry): [`apply`],
//!   [`ingest`], [`remote`], [`data_loader`], [`source`], `memory`, `listen`, `export_job`, `query`,
//!   `recent`, `temp_log`, `demo`, `synth`, `web`. The shell imports the core.
//! - **Views**: [`ui`] and [`app`] draw the core, driven by the shell.
//!
//! ```text
//! views  web ──► app ──► ui
//!        app ──► data_loader, ingest, listen, temp_log, recent, source, demo, export_job
//!        ui  ──► data_loader, ingest, listen, temp_log, query
//! shell  data_loader ──► ingest ──► remote ──► apply ──► memory
//!        data_loader ──► remote     ingest ──► apply, source (ingest/dir: the reader thread)
//!        listen ──► temp_log        recent ──► source        demo, ingest (tests) ──► synth
//! core   web, data_loader, ingest, remote, apply ──► feed ──► model ──► timefmt
//!        app, ui, ingest, apply, synth (tests) ──► model;  app, ui ──► timefmt
//!
//! model  layout ──► parents, pair, row, contexts, messages, calltree
//!        context_list ──► contexts;  lod ──► row, calltree;  parents ──► row, calltree
//!        row, stats, compare ──► calltree;  same ──► stats, calltree;  plots ──► same
//!        (tests) most files ──► test_log
//! ```
//!
//! One known edge against the grain, in tests only: `model`'s tests run records through
//! [`feed`] (`model::tests::through_reader_stage`, used by `plots` and `allocs`) to compare
//! with applying them directly. `tests/rooms.rs` reads the sources and fails on a cycle, on the
//! core naming a module outside it, or on a module placed in no layer
//! (`ROOMS_GRAPH=1 cargo test -p framelog-debugger --test rooms -- --nocapture` prints the
//! graph).
//!
//! The model needs no window: feed it a log's records and ask what the views draw.
//!
//! ```
//! use debugger_gui::model::Model;
//! use formats::{Category, FrameEnd, FrameStart, Parent, Record};
//!
//! let mut log = Vec::new();
//! for (id, label, parent, start, end) in [(1, "request", Parent::Root, 0, 100), (2, "db", Parent::Frame(1), 10, 60)] {
//!     Record::Start(FrameStart { id, worker: 0, timestamp: start, context: 1, category: Category::HTTP, label, parent })
//!         .encode_to_vec(&mut log);
//!     Record::End(FrameEnd { id, worker: 0, timestamp: end }).encode_to_vec(&mut log);
//! }
//! let mut model = Model::new();
//! model.apply_bytes(&log);
//! assert_eq!(model.frame_count(), 2);
//! assert_eq!(model.time_range(), Some((0, 100)));
//! // The call tree behind the flame graph: request > db.
//! let tree = model.call_tree();
//! let db = (1..tree.len() as u32).find(|&n| model.labels().name(tree.label(n)) == "db").unwrap();
//! assert_eq!(tree.depth(db), 2);
//! ```

// One `unsafe` call, in `memory` (glibc's malloc_trim: the README's memory numbers).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod app;
pub mod apply;
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
pub mod query;
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
