//! Viewer sessions (`docs/PROTOCOL.md`, *Viewer sessions*): a log served read-only over a
//! WebSocket to any number of viewers.
//!
//! [`session`] is one viewer's stream, free of sockets; [`http`] is the HTTP server that
//! serves the viewer's page and bridges each WebSocket ([`ws`]) to a session on its own
//! thread, within the budgets of [`limits`].

#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "http")]
pub mod limits;
pub mod session;
#[cfg(feature = "http")]
pub mod ws;

pub use session::ViewerSession;
