//! Where and how a program connects:
//! `FRAMELOG_CONNECT=HOST:PORT[,suspend][,timeout=30s][,session=v3]`.

use std::time::Duration;

/// Default time a suspended program waits for Resume.
pub const DEFAULT_SUSPEND_TIMEOUT: Duration = Duration::from_secs(30);

/// A program's connect settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectConfig {
    /// `HOST:PORT` of the server.
    pub(crate) addr: String,
    /// Wait in `install()` until resumed, at most this long.
    pub(crate) suspend: Option<Duration>,
    /// Highest StartSession version to understand (`session=v1`), when pinned.
    pub(crate) session_version: Option<u8>,
}

/// Parses the `FRAMELOG_CONNECT` syntax; the error says what is wrong.
pub(crate) fn parse(value: &str) -> Result<ConnectConfig, String> {
    let mut parts = value.split(',').map(str::trim);
    let addr = parts.next().unwrap_or_default();
    let Some((host, port)) = addr.rsplit_once(':') else {
        return Err(format!("{addr:?} has no port"));
    };
    if host.is_empty() {
        return Err(format!("{addr:?} has no host"));
    }
    port.parse::<u16>()
        .map_err(|_| format!("port {port:?} is not a number from 0 to 65535"))?;
    let mut suspend = false;
    let mut timeout = DEFAULT_SUSPEND_TIMEOUT;
    let mut session_version = None;
    for part in parts {
        if part == "suspend" {
            suspend = true;
        } else if let Some(t) = part.strip_prefix("timeout=") {
            timeout = humantime::parse_duration(t).map_err(|e| format!("timeout {t:?}: {e}"))?;
        } else if let Some(v) = part.strip_prefix("session=") {
            session_version = Some(match v {
                "v1" | "1" => 1,
                "v2" | "2" => 2,
                "v3" | "3" => 3,
                _ => return Err(format!("session {v:?}: expected v1, v2 or v3")),
            });
        } else if !part.is_empty() {
            return Err(format!("unknown option {part:?}"));
        }
    }
    Ok(ConnectConfig {
        addr: addr.to_owned(),
        suspend: suspend.then_some(timeout),
        session_version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_address_suspend_and_timeout() {
        assert_eq!(
            parse("127.0.0.1:7878").unwrap(),
            ConnectConfig {
                addr: "127.0.0.1:7878".into(),
                suspend: None,
                session_version: None,
            }
        );
        assert_eq!(
            parse("localhost:1,suspend").unwrap().suspend,
            Some(DEFAULT_SUSPEND_TIMEOUT)
        );
        assert_eq!(
            parse("[::1]:9, suspend, timeout=500ms").unwrap().suspend,
            Some(Duration::from_millis(500))
        );
        assert_eq!(parse("h:1,session=v1").unwrap().session_version, Some(1));
        assert!(
            parse("h:1,session=v4")
                .unwrap_err()
                .contains("v1, v2 or v3")
        );
        // A timeout without `suspend` is accepted and unused.
        assert_eq!(parse("h:1,timeout=2s").unwrap().suspend, None);
    }

    #[test]
    fn says_what_is_wrong() {
        assert!(parse("127.0.0.1").unwrap_err().contains("no port"));
        assert!(parse(":80").unwrap_err().contains("no host"));
        assert!(parse("h:99999").unwrap_err().contains("port"));
        assert!(
            parse("h:1,suspnd")
                .unwrap_err()
                .contains("unknown option \"suspnd\"")
        );
        assert!(
            parse("h:1,suspend,timeout=soon")
                .unwrap_err()
                .contains("timeout")
        );
    }
}
