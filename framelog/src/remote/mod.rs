//! Remote sessions (`docs/PROTOCOL.md`): programs connect out to a server that records them.
//!
//! - [`wire`]: reading framed messages from a connection, with the protocol's limits.
//! - [`rewrite`]: moving a program's worker and ids into the server's log (pure).
//! - [`server`]: the recording server behind `framelog serve` and `debugger-gui --listen`.
//!
//! The program side lives in `stopwatch` (its `connect` module).

pub mod rewrite;
pub mod server;
pub mod wire;

pub use server::{ProcessInfo, ProcessState, ServeError, Server, ServerOptions};
