//! Who may use a viewer server: a request's `Host` must be this machine's loopback, and a
//! WebSocket upgrade's `Origin` this server's own page (`docs/PROTOCOL.md`, *Viewer
//! security*). Pure functions of the headers' text.

use std::net::IpAddr;

/// Whether `host` (a `Host` header's value) names this machine's loopback: `localhost`, or
/// a loopback address literal, with any port.
pub(super) fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        // `[::1]:8080`
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(n, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                n
            } else {
                host
            }
        }),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// `host[:port]` as (lower-case host, port), port 80 when absent.
pub(super) fn host_port(s: &str) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => 80,
            None => return None,
        };
        (format!("[{h}]"), port)
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), p.parse().ok()?),
            None => (s.to_owned(), 80),
        }
    };
    (!host.is_empty()).then(|| (host.to_ascii_lowercase(), port))
}

/// Whether a WebSocket upgrade's `Origin` is the page this server serves at `Host`.
pub(super) fn same_origin(origin: &str, host: &str) -> bool {
    let Some(rest) = origin.strip_prefix("http://") else {
        return false;
    };
    host_port(rest).is_some_and(|o| host_port(host).is_some_and(|h| o == h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_hosts_are_this_server() {
        for ok in [
            "127.0.0.1:8080",
            "127.0.0.1",
            "localhost:8080",
            "LOCALHOST",
            "[::1]:8080",
            "[::1]",
            "127.1.2.3:9",
        ] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.example:8080",
            "evil.example",
            "localhost.evil.example:8080",
            "10.0.0.1:8080",
            "",
            "[::2]:8080",
            "127.0.0.1.evil.example",
        ] {
            assert!(!loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn an_origin_is_this_servers_page_only_with_the_same_host_and_port() {
        assert!(same_origin("http://127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(same_origin("http://LOCALHOST:8080", "localhost:8080"));
        assert!(same_origin("http://localhost", "localhost:80"));
        assert!(same_origin("http://[::1]:8080", "[::1]:8080"));
        assert!(!same_origin("http://evil.example:8080", "127.0.0.1:8080"));
        assert!(!same_origin("null", "127.0.0.1:8080"));
        assert!(!same_origin("https://127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(!same_origin("http://127.0.0.1:8081", "127.0.0.1:8080"));
        assert!(!same_origin("http://localhost:8080", "127.0.0.1:8080"));
        assert!(!same_origin("http://127.0.0.1:8080", ""));
    }
}
