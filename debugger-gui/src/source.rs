//! Where a log comes from: a directory on this machine, or a server that serves it to
//! viewers (`framelog serve --http`, `framelog view --http`).

use std::fmt;
use std::path::{Path, PathBuf};

/// A log directory, or a remote log's WebSocket URL.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LogSource {
    /// A log directory on this machine.
    Dir(PathBuf),
    /// A viewer session's URL (`ws://HOST:PORT/ws`).
    Remote(String),
}

impl LogSource {
    /// What the user typed: `ws://…` and `wss://…` are remote, and so is the page address a
    /// server prints (`http://HOST:PORT/`, whose WebSocket is `ws://HOST:PORT/ws`); anything
    /// else is a directory.
    pub fn parse(text: &str) -> LogSource {
        let t = text.trim();
        let lower = t.to_ascii_lowercase();
        if lower.starts_with("ws://") || lower.starts_with("wss://") {
            return LogSource::Remote(t.to_owned());
        }
        for (page, ws) in [("http://", "ws://"), ("https://", "wss://")] {
            if lower.starts_with(page) {
                let rest = &t[page.len()..];
                let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
                let path = if path.is_empty() { "ws" } else { path };
                return LogSource::Remote(format!("{ws}{host}/{path}"));
            }
        }
        LogSource::Dir(PathBuf::from(t))
    }

    /// The directory, for a local log.
    pub fn dir(&self) -> Option<&Path> {
        match self {
            LogSource::Dir(d) => Some(d),
            LogSource::Remote(_) => None,
        }
    }

    /// The URL, for a remote log.
    pub fn url(&self) -> Option<&str> {
        match self {
            LogSource::Dir(_) => None,
            LogSource::Remote(u) => Some(u),
        }
    }
}

impl fmt::Display for LogSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogSource::Dir(d) => write!(f, "{}", d.display()),
            LogSource::Remote(u) => f.write_str(u),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_remote_and_the_rest_directories() {
        let remote = |s: &str| LogSource::Remote(s.to_owned());
        assert_eq!(LogSource::parse("ws://h:1/ws"), remote("ws://h:1/ws"));
        assert_eq!(LogSource::parse(" WSS://h/x "), remote("WSS://h/x"));
        // The address `framelog view --http` prints.
        assert_eq!(
            LogSource::parse("http://127.0.0.1:8080/"),
            remote("ws://127.0.0.1:8080/ws")
        );
        assert_eq!(LogSource::parse("http://h:8080"), remote("ws://h:8080/ws"));
        assert_eq!(LogSource::parse("https://h/ws"), remote("wss://h/ws"));
        assert_eq!(
            LogSource::parse("target/framelog"),
            LogSource::Dir("target/framelog".into())
        );
        assert_eq!(LogSource::parse("ws://h:1/ws").to_string(), "ws://h:1/ws");
    }
}
