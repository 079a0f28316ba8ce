//! Fitting what a program wrote into a record's limits, visibly: a message text longer than
//! [`MAX_MESSAGE_TEXT`] ends with a mark saying how much was cut, a name longer than 255 bytes
//! ends with `…`, and message fields that do not fit lose only the largest ones, named in a
//! `cut_fields` field (`docs/FORMAT.md`, *Message, type 8*).
//!
//! Writers call these before encoding; the encoders' own plain cut (at a character boundary,
//! no mark) stays as the last resort for writers that do not.

use std::fmt::Write as _;

use crate::instant::MAX_MESSAGE_TEXT;

/// Longest name (a label, a series, a thread or process name) a record holds, in bytes.
pub const MAX_NAME: usize = 255;

/// The key of the field that names the fields left out of a message's document.
pub const CUT_FIELDS_KEY: &str = "cut_fields";

/// `n` with a comma between groups of three digits (`1,044,480`).
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The longest prefix of `s` of at most `max` bytes that ends at a character boundary.
fn prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A message text as it fits a record: as it is when it fits, else cut at a character
/// boundary and ended with ` … (cut, N bytes more)`, at most [`MAX_MESSAGE_TEXT`] bytes in all.
pub fn message_text(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= MAX_MESSAGE_TEXT {
        return std::borrow::Cow::Borrowed(text);
    }
    // The mark's length depends on the count, which depends on the mark's length: the
    // count is at most `text.len()`, so a mark sized for that always leaves room.
    let widest = format!(" … (cut, {} bytes more)", grouped(text.len() as u64));
    let kept = prefix(text, MAX_MESSAGE_TEXT - widest.len());
    let mut out = String::with_capacity(MAX_MESSAGE_TEXT);
    out.push_str(kept);
    let _ = write!(
        out,
        " … (cut, {} bytes more)",
        grouped((text.len() - kept.len()) as u64)
    );
    std::borrow::Cow::Owned(out)
}

/// A name as it fits a record: as it is when it fits, else cut at a character boundary and
/// ended with `…`, at most [`MAX_NAME`] bytes.
pub fn name(name: &str) -> std::borrow::Cow<'_, str> {
    if name.len() <= MAX_NAME {
        return std::borrow::Cow::Borrowed(name);
    }
    let mut out = prefix(name, MAX_NAME - '…'.len_utf8()).to_owned();
    out.push('…');
    std::borrow::Cow::Owned(out)
}

/// A message's fields (one BSON document) cut to at most `max` bytes: the largest fields are
/// left out until the rest fits beside a `cut_fields` string naming each one left out with
/// its size (`"blob (1,048,581 bytes)"`). Empty when not even that fits, or when `document`
/// is not a valid document.
pub fn fields(document: &[u8], max: usize) -> Vec<u8> {
    if document.len() <= max {
        return document.to_vec();
    }
    let Ok(doc) = bson::Document::from_reader(document) else {
        return Vec::new();
    };
    // Each element's encoded size (type byte, key, NUL, value), largest first; later keys
    // win ties so the earlier fields (the ones written first) are kept.
    let mut sizes: Vec<(usize, usize, &String)> = doc
        .iter()
        .enumerate()
        .map(|(i, (k, v))| {
            let one = bson::to_vec(&bson::doc! { k.as_str(): v.clone() }).map_or(0, |b| b.len());
            (one.saturating_sub(5), i, k)
        })
        .collect();
    sizes.sort_by_key(|&(n, i, _)| std::cmp::Reverse((n, i)));
    let mut sizes = sizes.into_iter().map(|(n, _, k)| (n, k));
    let mut left_out: Vec<(&String, usize)> = Vec::new();
    let mut total = document.len();
    loop {
        let named: Vec<String> = left_out
            .iter()
            .map(|(k, n)| format!("{k} ({} bytes)", grouped(*n as u64)))
            .collect();
        // The mark: type byte, key, NUL, i32 length, the string, NUL.
        let mark = named.join(", ");
        let mark_len = 1 + CUT_FIELDS_KEY.len() + 1 + 4 + mark.len() + 1;
        if !left_out.is_empty() && total + mark_len <= max {
            let mut kept = bson::Document::new();
            for (k, v) in &doc {
                if !left_out.iter().any(|(gone, _)| *gone == k) {
                    kept.insert(k.clone(), v.clone());
                }
            }
            kept.insert(CUT_FIELDS_KEY, mark);
            return bson::to_vec(&kept).unwrap_or_default();
        }
        match sizes.next() {
            Some((n, k)) => {
                total -= n;
                left_out.push((k, n));
            }
            None => return Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_text_says_how_much_was_cut_and_stays_within_the_limit() {
        assert_eq!(message_text("short"), "short");
        let big = "x".repeat(1 << 20);
        let t = message_text(&big);
        assert!(t.len() <= MAX_MESSAGE_TEXT, "{}", t.len());
        let kept = t.find(" … (cut, ").unwrap();
        assert_eq!(
            &t[kept..],
            format!(
                " … (cut, {} bytes more)",
                grouped((big.len() - kept) as u64)
            )
        );
        // At a character boundary, with multi-byte characters.
        let euros = "€".repeat(3000);
        let t = message_text(&euros);
        assert!(t.len() <= MAX_MESSAGE_TEXT);
        assert!(t.starts_with("€€€") && t.ends_with(" bytes more)"), "{t}");
        // Exactly at the limit: kept whole.
        let exact = "y".repeat(MAX_MESSAGE_TEXT);
        assert_eq!(message_text(&exact), exact.as_str());
    }

    #[test]
    fn grouping_puts_commas_between_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
        assert_eq!(grouped(1_044_480), "1,044,480");
    }

    #[test]
    fn a_long_name_ends_with_an_ellipsis_within_255_bytes() {
        assert_eq!(name("queue depth"), "queue depth");
        let long = "é".repeat(200);
        let n = name(&long);
        assert!(
            n.len() <= MAX_NAME && n.ends_with('…') && n.starts_with("éé"),
            "{n}"
        );
    }

    #[test]
    fn only_the_fields_that_do_not_fit_are_left_out_and_named() {
        let doc = bson::doc! {
            "target": "app::db",
            "user": 42_i64,
            "blob": "z".repeat(100_000),
        };
        let bytes = bson::to_vec(&doc).unwrap();
        assert_eq!(
            fields(&bytes, bytes.len()),
            bytes,
            "what fits is kept as it is"
        );
        let cut = bson::Document::from_reader(&fields(&bytes, 4_000)[..]).unwrap();
        assert_eq!(cut.get_str("target").unwrap(), "app::db");
        assert_eq!(cut.get_i64("user").unwrap(), 42);
        assert!(cut.get("blob").is_none());
        assert_eq!(
            cut.get_str(CUT_FIELDS_KEY).unwrap(),
            "blob (100,011 bytes)",
            "{cut}"
        );
        assert!(bson::to_vec(&cut).unwrap().len() <= 4_000);
        // Nothing fits: nothing at all (never a document over the limit).
        assert!(fields(&bytes, 10).is_empty());
        assert!(fields(b"not bson", 3).is_empty());
    }
}
