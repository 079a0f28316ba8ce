//! Small helpers for printing: times, durations, and a closed stdout.

use std::time::{Duration, UNIX_EPOCH};

/// Whether an error is stdout being closed by the reader (`framelog dump | head`).
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// A timestamp (ns since the Unix epoch) as RFC 3339 UTC with nanoseconds.
pub fn time(ns: u64) -> String {
    humantime::format_rfc3339_nanos(UNIX_EPOCH + Duration::from_nanos(ns)).to_string()
}

/// A duration in ns with a unit that keeps 3-4 significant digits.
pub fn duration(ns: u64) -> String {
    let v = ns as f64;
    if ns < 1_000 {
        format!("{ns}ns")
    } else if ns < 1_000_000 {
        format!("{:.2}µs", v / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2}ms", v / 1e6)
    } else {
        format!("{:.3}s", v / 1e9)
    }
}

/// Bytes with a binary unit (`512 B`, `3.0 MiB`).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Text a recorded program wrote (a label, a message, a thread, process or series name) made
/// safe for a terminal: control characters (C0, DEL, C1), line and paragraph separators and
/// bidirectional overrides are written as escapes (`\n`, `\t`, `\x1b`, `\u{202e}`), and a
/// backslash as `\\`, so a program cannot move the cursor, set the window title, clear the
/// screen or split one record over several lines. Text without them is returned as it is.
pub fn text(s: &str) -> std::borrow::Cow<'_, str> {
    fn unsafe_char(c: char) -> bool {
        c == '\\'
            || c.is_control()
            || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    }
    if !s.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 && unsafe_char(c) => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if unsafe_char(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A plot value as JSON: a number; null for NaN, a plot's gap (no value); and for the
/// infinities, which JSON has no number for, the form message fields use (BSON's extended
/// JSON): `{"$numberDouble": "Infinity"}` or `"-Infinity"`. So all three stay apart.
pub fn json_f64(x: f64) -> serde_json::Value {
    if x.is_finite() {
        serde_json::json!(x)
    } else if x.is_nan() {
        serde_json::Value::Null
    } else if x > 0.0 {
        serde_json::json!({ "$numberDouble": "Infinity" })
    } else {
        serde_json::json!({ "$numberDouble": "-Infinity" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_are_escaped_and_plain_text_is_kept() {
        assert_eq!(text("GET /users/:id"), "GET /users/:id");
        assert!(matches!(
            text("naïve ünïcode"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(text("\x1b[31mRED\x1b[0m"), "\\x1b[31mRED\\x1b[0m");
        assert_eq!(text("\x1b]0;title\x07"), "\\x1b]0;title\\x07");
        assert_eq!(text("a\nb\r\tc\\d"), "a\\nb\\r\\tc\\\\d");
        assert_eq!(
            text("\u{9b}2J \u{202e}txt.exe"),
            "\\u{9b}2J \\u{202e}txt.exe"
        );
        assert_eq!(text("\x7f"), "\\x7f");
    }

    #[test]
    fn non_finite_plot_values_stay_apart_in_json() {
        assert_eq!(json_f64(1.5), serde_json::json!(1.5));
        assert_eq!(json_f64(1e308), serde_json::json!(1e308));
        assert!(json_f64(f64::NAN).is_null());
        assert_eq!(json_f64(f64::INFINITY)["$numberDouble"], "Infinity");
        assert_eq!(json_f64(f64::NEG_INFINITY)["$numberDouble"], "-Infinity");
    }
}
