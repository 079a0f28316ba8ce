//! framelog's storage engine: one log is a directory of numbered, append-only segments.
//!
//! - Write path: [`LogWriter`] appends checksummed batches of whole records under an advisory
//!   lock, so any number of threads and processes can share one log ([`writer`]; the append
//!   protocol, torn-tail repair and worker slots are private modules `append`, `repair`,
//!   `worker`).
//! - Read path: [`LogReader`] streams records in file order, skipping and reporting damaged
//!   bytes ([`Damage`]), and follows a live log ([`reader`], [`follow`]); [`DataStore`] fetches
//!   one frame's data on demand ([`data_store`]).
//! - Rules every reader shares (feature `analysis`: the `analysis` crate's, re-exported):
//!   start/end `pairing`, each frame's `parents`, label patterns (`label_match`); and the
//!   statistics built on them (`stats`).
//! - Remote sessions: [`remote`] records programs that stream to it over TCP
//!   (`docs/PROTOCOL.md`).
//! - Export (feature `export`): [`export`] writes Chrome Trace Event JSON, speedscope and OTLP
//!   (feature `parquet`: the SQL tables as Parquet files).
//! - SQL (feature `sql`): [`sql`] runs SQLite queries on virtual tables over the log.
//! - Inspection and repair: [`check`] validates every file, [`recover`] copies what is valid.
//! - Compaction (feature `compact`, which pulls zstd; the CLI has it): `compact` rewrites sealed
//!   segments in their compact form, and the writer does it in the background
//!   ([`WriterOptions::compact`]); every reader reads both forms. Without the feature, sealed
//!   segments stay raw, and every reader that meets a compact segment (written by a build with
//!   it) returns [`Error::CompactUnsupported`] naming the file.
//!
//! The byte layouts live in the `formats` crate and are described in `docs/FORMAT.md`; the map
//! of the crates and of both paths through them is `docs/ARCHITECTURE.md`.
//!
//! ```
//! use formats::{Category, FrameEnd, FrameStart, Parent, Record};
//! use framelog::{LogReader, LogWriter};
//!
//! let dir = tempfile::tempdir()?;
//! // Append one frame (its start and end) as one batch…
//! let writer = LogWriter::open(dir.path())?;
//! let w = writer.worker();
//! let mut batch = Vec::new();
//! Record::Start(FrameStart {
//!     id: 1,
//!     worker: w,
//!     timestamp: 1_000,
//!     context: 1,
//!     category: Category::HTTP,
//!     label: "GET /users",
//!     parent: Parent::Root,
//! })
//! .encode_to_vec(&mut batch);
//! Record::End(FrameEnd { id: 1, worker: w, timestamp: 2_500 }).encode_to_vec(&mut batch);
//! writer.append_frames(&batch)?;
//!
//! // …and read the log back (any process may, while others write).
//! let mut labels = Vec::new();
//! LogReader::open(dir.path())?.read_available(|_, rec| {
//!     if let Record::Start(s) = rec {
//!         labels.push(s.label.to_owned());
//!     }
//! })?;
//! assert_eq!(labels, ["GET /users"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
mod append;
pub mod check;
#[cfg(feature = "compact")]
#[cfg_attr(docsrs, doc(cfg(feature = "compact")))]
pub mod compact;
#[cfg(test)]
mod compact_fixture;
mod damage;
pub mod data_store;
mod error;
#[cfg(feature = "export")]
#[cfg_attr(docsrs, doc(cfg(feature = "export")))]
pub mod export;
pub mod follow;
#[cfg(feature = "analysis")]
#[cfg_attr(docsrs, doc(cfg(feature = "analysis")))]
pub use analysis::label_pattern as label_match;
#[cfg(feature = "analysis")]
#[cfg_attr(docsrs, doc(cfg(feature = "analysis")))]
pub mod instant_stats;
#[cfg(feature = "analysis")]
#[cfg_attr(docsrs, doc(cfg(feature = "analysis")))]
pub use analysis::{pairing, parents};
mod pread;
pub mod reader;
pub mod recover;
pub mod remote;
mod repair;
pub mod retention;
mod secret;
pub mod segments;
#[cfg(feature = "sql")]
#[cfg_attr(docsrs, doc(cfg(feature = "sql")))]
pub mod sql;
#[cfg(feature = "analysis")]
#[cfg_attr(docsrs, doc(cfg(feature = "analysis")))]
pub mod stats;
pub mod viewer;
mod worker;
pub mod writer;

pub use append::{DamageHook, DataBatch, SyncPolicy};
pub use damage::{Damage, DamageLog};
pub use data_store::DataStore;
pub use error::{Error, Result};
pub use reader::{LogReader, Position, RecordHandler};
pub use retention::{Pruned, Retention};
pub use worker::is_writing;
pub use writer::{LogWriter, WriterOptions};

pub use formats;
