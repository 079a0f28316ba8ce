//! framelog's storage engine: one log is a directory of numbered, append-only segments.
//!
//! - Write path: [`LogWriter`] appends whole-record batches under an advisory lock, so any
//!   number of threads and processes can share one log ([`writer`], [`append`], [`worker`]).
//! - Read path: [`LogReader`] streams records in file order and follows a live log
//!   ([`reader`], [`follow`]); [`DataStore`] fetches one frame's data on demand ([`data_store`]).
//! - Inspection: [`stats`] aggregates a log, [`check`] validates every file.
//!
//! The byte layouts live in the `formats` crate and are described in `docs/FORMAT.md`.

pub mod append;
pub mod check;
pub mod data_store;
mod error;
pub mod follow;
pub mod reader;
mod repair;
pub mod segments;
pub mod stats;
pub mod worker;
pub mod writer;

pub use data_store::DataStore;
pub use error::{Error, Result};
pub use reader::{LogReader, Position};
pub use writer::{DataBatch, LogWriter, WriterOptions};

pub use formats;
