//! Viewer sessions (`docs/PROTOCOL.md`, *Viewer sessions*): a log served read-only over a
//! WebSocket to any number of viewers.
//!
//! [`session`] is one viewer's stream, free of sockets; [`http`] is the HTTP server that
//! admits connections and routes requests, within the budgets of [`limits`] and with the
//! connection state of `admission` (which each viewer's loop shares): who may connect
//! is `origin`'s rule, the viewer's page comes from `static_files`, and each WebSocket
//! ([`ws`]) is bridged to a session on its own thread by `viewer_loop`.

#[cfg(feature = "http")]
mod admission;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "http")]
pub mod limits;
#[cfg(feature = "http")]
mod origin;
pub mod session;
#[cfg(feature = "http")]
mod static_files;
#[cfg(feature = "http")]
mod viewer_loop;
#[cfg(feature = "http")]
pub mod ws;

pub use session::ViewerSession;
