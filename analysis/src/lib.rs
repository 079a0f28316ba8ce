//! framelog's log analysis rules, with no I/O, so the command-line tool, the debugger window
//! and the debugger in a browser (WebAssembly) give the same answers:
//!
//! - [`Durations`]: count, total, maximum and percentiles (within 1 %) of frame durations.
//! - [`LabelPattern`]: the one rule for matching frame labels (`dump --label`, search).

pub mod durations;
pub mod label_pattern;

pub use durations::Durations;
pub use label_pattern::LabelPattern;
