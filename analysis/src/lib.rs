//! framelog's log analysis rules, with no I/O, so the command-line tool, the debugger window
//! and the debugger in a browser (WebAssembly) give the same answers:
//!
//! - [`Pairing`]: the one start/end pairing rule (by key, in either order).
//! - [`parents`]: each frame's parent, recorded or inferred (`docs/FORMAT.md`, *Parents*).
//! - [`Durations`]: count, total, maximum and percentiles (within 1 %) of frame durations.
//! - [`LabelPattern`]: the one rule for matching frame labels (`dump --label`, search).
//! - [`AsyncTime`]: busy, queued and waiting time of asynchronous frames.
//!
//! ```
//! use analysis::{Durations, LabelPattern};
//!
//! let mut d = Durations::new();
//! for ns in 1..=100 {
//!     d.record(ns);
//! }
//! assert_eq!((d.count(), d.max_ns(), d.percentile_ns(50.0)), (100, 100, 50));
//!
//! // `db` contains, `"User: Select"` is exact, `db/*` is a glob.
//! let contains = LabelPattern::parse("db")?.expect("not empty");
//! assert!(contains.matches("app/db/query"));
//! let exact = LabelPattern::parse("\"User: Select\"")?.expect("not empty");
//! assert!(exact.matches("user: select") && !exact.matches("User: Select all"));
//! assert!(LabelPattern::parse("db/*")?.expect("not empty").matches("db/query"));
//! # Ok::<(), String>(())
//! ```

pub mod async_time;
pub mod durations;
pub mod label_pattern;
pub mod pairing;
pub mod parents;

pub use async_time::{AsyncTime, FrameAsync};
pub use durations::Durations;
pub use label_pattern::LabelPattern;
pub use pairing::{Paired, Pairing};
pub use parents::{ParentOf, Parents};
