//! `stopwatch`: the application API of framelog, an in-process profiler.
//!
//! ```no_run
//! use stopwatch::{Category, Stopwatch};
//! let _sw = Stopwatch::builder().dir("target/framelog").install()?; // once, at start-up
//! let frame = Stopwatch::start("db/query");          // a guard; ends on drop
//! frame.data(&serde_json::json!({"sql": "select * from user where id = ?", "params": [1]}));
//! drop(frame);
//! let _q = Stopwatch::start_with("User: Select", Category::DATABASE);
//! # Ok::<(), stopwatch::Error>(())
//! ```
//!
//! To stream to `framelog serve` or the debugger instead (or as well), call
//! `.connect("127.0.0.1:7878")` on the builder, or set `FRAMELOG_CONNECT=127.0.0.1:7878` in
//! the environment of a program that calls `install()` (add `,suspend` to wait at start-up
//! until the server resumes it).
//!
//! Architecture (one module per idea):
//! - [`clock`]: ns since the Unix epoch from a monotonic source (TSC) anchored once.
//! - `buffer`, `slot`, `local`: per-thread buffers; records are encoded with a few stores and
//!   published with one Release store; the writer may steal the committed prefix.
//! - `pool`: the bounded buffer pool and the Drop/Block buffering modes (FIFO parking).
//! - `writer`: one writer thread per recorder (full buffers, periodic steal, dropped markers,
//!   frame data, failure handling).
//! - `context`, `instrument`: context propagation across threads and `.await`s, with the
//!   current frame: every frame records its parent (the frame current in its task, thread or
//!   entered context; or named by hand with [`Frame::child`] / [`Context::child`]).
//! - `connect`, `gate`: connect mode (stream to a server, suspend until resumed, session
//!   settings applied while the program runs; `docs/PROTOCOL.md`).
//! - [`sampling`]: fixed-probability and adaptive sampling, decided at the root frame.
//! - `frame`, `recorder`: the public guard and recorder types.
//! - `plot`, `message`, `probe`: plot series ([`Stopwatch::plot`], [`Series`]; the built-in
//!   health and process series), messages ([`Stopwatch::message`]): records of their own in
//!   the thread's buffer, beside its frames.
//! - `counting_alloc`: [`CountingAlloc`], per-thread allocation counts; every recorded frame
//!   records what its code allocated (inclusive of its children).
//! - `tracing_layer` (feature `tracing`): `TracingLayer` records `tracing` spans as frames
//!   and events as messages.
//! - `log_adapter` (feature `log`): `Logger` records `log` records as messages.
//! - `demo`, `stress` (feature `demo`): workloads used by the examples, tests, benchmarks and the viewer.
//!
//! Cargo features, all off by default:
//! - `tracing`: `TracingLayer`; `log`: `Logger`.
//! - `compact`: the recorder's writer compacts each segment it seals, on a background thread
//!   at the lowest priority (a few bytes a frame on disk; `docs/FORMAT.md`, *Compact sealed
//!   segments*). It pulls zstd (C code). Without it sealed segments stay raw: they read the
//!   same (`framelog compact DIR` compacts them later), and the `framelog` storage engine this
//!   crate links, built without the feature, refuses to read a compact segment
//!   (`framelog::Error::CompactUnsupported`, naming the file) rather than misread it.
//! - `demo`: the `demo` and `stress` workloads (pulls tokio; enables `compact`).

#![cfg_attr(docsrs, feature(doc_cfg))]

mod buffer;
pub mod clock;
mod connect;
mod context;
mod counting_alloc;
#[cfg(feature = "demo")]
#[cfg_attr(docsrs, doc(cfg(feature = "demo")))]
pub mod demo;
mod error;
mod frame;
mod gate;
mod global;
mod ids;
mod inner;
mod instrument;
mod local;
#[cfg(feature = "log")]
mod log_adapter;
#[cfg(test)]
mod mem_sink;
mod message;
mod plot;
mod poll_times;
mod polls;
mod pool;
mod probe;
mod recorder;
pub mod sampling;
mod sink;
mod slot;
#[cfg(feature = "demo")]
#[cfg_attr(docsrs, doc(cfg(feature = "demo")))]
pub mod stress;
#[cfg(feature = "tracing")]
mod tracing_layer;
mod writer;

pub use connect::{DEFAULT_SUSPEND_TIMEOUT, STALL_LIMIT};
pub use context::{Context, ContextGuard};
pub use counting_alloc::CountingAlloc;
pub use error::{Error, ErrorCallback, SinkError};
pub use formats::{Category, Level, PlotMode, PlotUnit};
pub use frame::Frame;
pub use inner::{SinkStats, Stats};
pub use instrument::{FutureExt, InFrame};
#[cfg(feature = "log")]
#[cfg_attr(docsrs, doc(cfg(feature = "log")))]
pub use log_adapter::Logger;
pub use plot::Series;
pub use pool::BufferingMode;
pub use probe::{DROPPED_PER_SEC, POOL_USE, PROCESS_CPU, PROCESS_RSS};
pub use recorder::{Builder, InstallGuard, Recorder, Stopwatch};
pub use sampling::Sampling;
pub use sink::Sink;
#[cfg(feature = "tracing")]
#[cfg_attr(docsrs, doc(cfg(feature = "tracing")))]
pub use tracing_layer::TracingLayer;
