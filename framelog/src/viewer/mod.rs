//! Viewer sessions (`docs/PROTOCOL.md`, *Viewer sessions*): a log served read-only over a
//! WebSocket to any number of viewers.
//!
//! [`session`] is one viewer's stream, free of sockets; [`http`] is the HTTP server that
//! serves the viewer's page and bridges each WebSocket to a session on its own thread.

#[cfg(feature = "http")]
pub mod http;
pub mod session;

pub use session::ViewerSession;
