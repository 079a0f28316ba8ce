//! Checks that bytes are one whole, well-formed BSON document before anyone parses them.
//!
//! The walk is iterative (an explicit stack, no recursion per level) and refuses documents
//! nested deeper than [`MAX_DEPTH`], so a hostile or runaway document can neither overflow
//! the checker's stack nor, once accepted, the recursive parsers that read it later (the
//! `bson` crate's, the viewers').

/// Deepest nesting of documents and arrays accepted (MongoDB's limit too).
pub const MAX_DEPTH: usize = 100;

/// Why bytes are not an acceptable BSON document: what is wrong and at which byte offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("BSON document: {what} at byte {offset}")]
pub struct BsonError {
    /// Offset in the document of the first byte found wrong.
    pub offset: usize,
    /// What is wrong.
    pub what: String,
}

fn err<T>(offset: usize, what: impl Into<String>) -> Result<T, BsonError> {
    Err(BsonError {
        offset,
        what: what.into(),
    })
}

fn i32_at(b: &[u8], at: usize, end: usize) -> Result<i32, BsonError> {
    match b.get(at..at + 4) {
        Some(x) if at + 4 <= end => Ok(i32::from_le_bytes([x[0], x[1], x[2], x[3]])),
        _ => err(at, "a length runs past its document"),
    }
}

/// The end (exclusive) of the NUL-terminated UTF-8 string at `at`, inside `..end`.
fn cstring(b: &[u8], at: usize, end: usize) -> Result<usize, BsonError> {
    let Some(nul) = b[at.min(end)..end].iter().position(|&c| c == 0) else {
        return err(at, "a name runs past its document");
    };
    if std::str::from_utf8(&b[at..at + nul]).is_err() {
        return err(at, "a name is not UTF-8");
    }
    Ok(at + nul + 1)
}

/// The end (exclusive) of the length-prefixed UTF-8 string at `at`, inside `..end`.
fn string(b: &[u8], at: usize, end: usize) -> Result<usize, BsonError> {
    let len = i32_at(b, at, end)?;
    let Ok(len) = usize::try_from(len) else {
        return err(at, "a negative string length");
    };
    let stop = at + 4 + len;
    if len == 0 || stop > end {
        return err(at, format!("a string length of {len} does not fit"));
    }
    if b[stop - 1] != 0 {
        return err(stop - 1, "a string without its terminating zero");
    }
    if std::str::from_utf8(&b[at + 4..stop - 1]).is_err() {
        return err(at + 4, "a string is not UTF-8");
    }
    Ok(stop)
}

/// The end (exclusive) of a fixed-size value of `n` bytes at `at`, inside `..end`.
fn fixed(at: usize, n: usize, end: usize) -> Result<usize, BsonError> {
    if at + n > end {
        return err(at, format!("a {n}-byte value runs past its document"));
    }
    Ok(at + n)
}

/// Checks that `bytes` is exactly one well-formed BSON document nested at most
/// [`MAX_DEPTH`] deep.
pub fn check_document(bytes: &[u8]) -> Result<(), BsonError> {
    check_at(bytes, 0, bytes.len(), MAX_DEPTH)
}

/// Checks the document occupying exactly `start..end` of `b`, with `depth` levels allowed.
fn check_at(b: &[u8], start: usize, end: usize, depth: usize) -> Result<(), BsonError> {
    let len = i32_at(b, start, end)?;
    if usize::try_from(len).ok() != Some(end - start) || len < 5 {
        return err(
            start,
            format!(
                "a length of {len} where the document has {} bytes",
                end - start
            ),
        );
    }
    // Each entry is the offset of an open document's terminating zero.
    let mut open: Vec<usize> = vec![end - 1];
    let mut at = start + 4;
    while let Some(&stop) = open.last() {
        if at == stop {
            if b[at] != 0 {
                return err(at, "a document without its terminating zero");
            }
            open.pop();
            at += 1;
            continue;
        }
        let kind = b[at];
        let name = at + 1;
        at = cstring(b, name, stop)?;
        at = match kind {
            0x01 | 0x09 | 0x11 | 0x12 => fixed(at, 8, stop)?,
            0x10 => fixed(at, 4, stop)?,
            0x13 => fixed(at, 16, stop)?,
            0x07 => fixed(at, 12, stop)?,
            0x08 => {
                let next = fixed(at, 1, stop)?;
                if b[at] > 1 {
                    return err(at, format!("a boolean of {}", b[at]));
                }
                next
            }
            0x06 | 0x0A | 0x7F | 0xFF => at,
            0x02 | 0x0D | 0x0E => string(b, at, stop)?,
            0x0B => cstring(b, cstring(b, at, stop)?, stop)?,
            0x0C => fixed(string(b, at, stop)?, 12, stop)?,
            0x05 => {
                let n = i32_at(b, at, stop)?;
                let Ok(n) = usize::try_from(n) else {
                    return err(at, "a negative binary length");
                };
                fixed(at + 4, 1 + n, stop)?
            }
            0x03 | 0x04 => {
                let n = i32_at(b, at, stop)?;
                let sub_end = usize::try_from(n)
                    .ok()
                    .filter(|&n| n >= 5 && at + n <= stop)
                    .map(|n| at + n);
                let Some(sub_end) = sub_end else {
                    return err(at, format!("a nested length of {n} does not fit"));
                };
                if open.len() >= depth {
                    return err(at, format!("nested deeper than {MAX_DEPTH} levels"));
                }
                open.push(sub_end - 1);
                at + 4
            }
            0x0F => {
                // Code with scope: total length, code string, scope document.
                let n = i32_at(b, at, stop)?;
                let total_end = usize::try_from(n)
                    .ok()
                    .filter(|&n| n >= 14 && at + n <= stop)
                    .map(|n| at + n);
                let Some(total_end) = total_end else {
                    return err(at, format!("a code-with-scope length of {n} does not fit"));
                };
                let scope = string(b, at + 4, total_end)?;
                if open.len() >= depth {
                    return err(at, format!("nested deeper than {MAX_DEPTH} levels"));
                }
                check_at(b, scope, total_end, depth - open.len())?;
                total_end
            }
            other => return err(name - 1, format!("unknown element type 0x{other:02x}")),
        };
    }
    if at != end {
        return err(at, "bytes after the document");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(v: &bson::Document) -> Vec<u8> {
        let mut out = Vec::new();
        v.to_writer(&mut out).unwrap();
        out
    }

    #[test]
    fn accepts_what_bson_writes() {
        let d = bson::doc! {
            "s": "text", "i": 1i32, "l": 2i64, "f": 1.5, "b": true, "n": bson::Bson::Null,
            "a": [1i32, "x", {"k": [ {} ]}],
            "bin": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1, 2] },
            "t": bson::DateTime::from_millis(5),
            "re": bson::Regex { pattern: "a+".into(), options: "i".into() },
            "o": bson::oid::ObjectId::from_bytes([7; 12]),
        };
        check_document(&doc(&d)).unwrap();
        check_document(&doc(&bson::doc! {})).unwrap();
    }

    #[test]
    fn refuses_a_document_bson_from_bytes_lets_through() {
        // Found sent to `framelog serve`: the length and the final zero are right, the
        // element (an int32 with no room for its value) is not.
        let bad = [0x08, 0, 0, 0, 0x10, 0, 0, 0];
        assert!(bson::RawDocument::from_bytes(&bad).is_ok());
        let e = check_document(&bad).unwrap_err();
        assert!(e.what.contains("4-byte value"), "{e}");
    }

    #[test]
    fn refuses_damage_anywhere_without_panicking() {
        let good = doc(&bson::doc! { "sql": "select 1", "p": [1i32, 2i32], "m": {"x": 1.0} });
        for i in 0..good.len() {
            for v in [0u8, 0xff, 0x7f, 0x03] {
                let mut b = good.clone();
                b[i] = v;
                // Either accepted (a harmless change) and then parsed by bson without
                // error, or refused with an offset inside the document.
                match check_document(&b) {
                    Ok(()) => assert!(bson::Document::from_reader(&b[..]).is_ok(), "byte {i}"),
                    Err(e) => assert!(e.offset < b.len()),
                }
            }
        }
        for cut in 0..good.len() {
            assert!(check_document(&good[..cut]).is_err());
        }
    }

    /// `depth` arrays nested in one another, built as bytes (no recursion).
    fn nested(depth: usize) -> Vec<u8> {
        // {"": [ [ ... [] ... ] ]}: every level is type 0x04, an empty name, a length.
        let mut inner: Vec<u8> = vec![5, 0, 0, 0, 0];
        for _ in 0..depth {
            let mut outer = Vec::with_capacity(inner.len() + 7);
            let len = (inner.len() + 7) as i32;
            outer.extend_from_slice(&len.to_le_bytes());
            outer.push(0x04);
            outer.push(0);
            outer.extend_from_slice(&inner);
            outer.push(0);
            inner = outer;
        }
        inner
    }

    #[test]
    fn depth_is_limited_and_checked_without_recursion() {
        check_document(&nested(MAX_DEPTH - 1)).unwrap();
        let e = check_document(&nested(MAX_DEPTH + 1)).unwrap_err();
        assert!(e.what.contains("deeper"), "{e}");
        // Far deeper than any stack could recurse: refused, not a crash.
        assert!(check_document(&nested(200_000)).is_err());
    }
}
