//! framelog's storage engine: one log is a directory of numbered, append-only segments.
//!
//! - Write path: [`LogWriter`] appends whole-record batches under an advisory lock, so any
//!   number of threads and processes can share one log ([`writer`], [`append`], [`worker`]).
//! - Read path: [`LogReader`] streams records in file order and follows a live log
//!   ([`reader`], [`follow`]); [`DataStore`] fetches one frame's data on demand ([`data_store`]).
//! - Inspection: [`stats`] aggregates a log, [`check`] validates every file.
//!
//! The byte layouts live in the `formats` crate and are described in `docs/FORMAT.md`.

mod append;
pub mod check;
mod damage;
pub mod data_store;
mod error;
pub mod follow;
#[cfg(feature = "analysis")]
pub mod label_match;
pub mod pairing;
mod pread;
pub mod reader;
pub mod recover;
mod repair;
pub mod segments;
#[cfg(feature = "analysis")]
pub mod stats;
mod worker;
pub mod writer;

pub use append::{DamageHook, DataBatch, SyncPolicy};
pub use damage::{Damage, DamageLog};
pub use data_store::DataStore;
pub use error::{Error, Result};
pub use reader::{LogReader, Position};
pub use writer::{LogWriter, WriterOptions};

pub use formats;
