//! Connect mode: the program streams its frames to a server (`framelog serve`, or the debugger
//! started with `--listen`) that starts and stops its session and can resume it at start-up.
//! The protocol is `docs/PROTOCOL.md`.
//!
//! - `config`: the `FRAMELOG_CONNECT=HOST:PORT[,suspend][,timeout=30s][,session=v3]` syntax.
//! - `connector`: the diagnostics thread (connect, Advertise, answer commands, reconnect).
//! - `acks`: reading the server's Acks of an acknowledged (v3) stream.
//! - `stream`: the session's stream, written by the recorder's writer thread, and the sink
//!   that sends each batch to it (and to the log directory, when there is one too).

pub(crate) mod acks;
pub(crate) mod config;
pub(crate) mod connector;
pub(crate) mod stream;

pub use config::DEFAULT_SUSPEND_TIMEOUT;
pub use stream::STALL_LIMIT;
