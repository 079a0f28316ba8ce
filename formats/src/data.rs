//! Frame data (`.framedata`) entries and their index (`.frameidx`) entries.
//!
//! A data entry is `id u32, worker u8, bson document`; the document's own i32 length prefix
//! makes the file walkable. An index entry is `id u32, worker u8, seek u32`, where `seek` is
//! the byte offset of the data entry's `id` field in the paired data file.

use serde::Serialize;
use zerocopy::little_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::FrameKey;
use crate::error::{DecodeError, ErrorKind};

/// Bytes of a data entry before its BSON document.
pub const DATA_ENTRY_HEADER_LEN: usize = 5;
/// Bytes of one index entry.
pub const INDEX_ENTRY_LEN: usize = 9;
/// The smallest valid BSON document (`{}`): an i32 length and a terminating zero.
const MIN_DOCUMENT_LEN: i32 = 5;

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
#[repr(C)]
struct RawDataHeader {
    id: U32,
    worker: u8,
    doc_len: zerocopy::little_endian::I32,
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
#[repr(C)]
struct RawIndex {
    id: U32,
    worker: u8,
    seek: U32,
}

/// One frame-data entry, borrowing its BSON bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataEntry<'a> {
    /// The frame the data belongs to.
    pub key: FrameKey,
    /// The raw BSON document, length prefix included.
    pub document: &'a [u8],
}

impl DataEntry<'_> {
    /// Bytes the entry takes in the data file.
    pub fn encoded_len(&self) -> usize {
        DATA_ENTRY_HEADER_LEN + self.document.len()
    }

    /// Parses the BSON document.
    pub fn parse(&self) -> Result<bson::Document, DecodeError> {
        // Checked first, without recursion: the parser below recurses once per level.
        crate::bson_check::check_document(self.document).map_err(|e| {
            DecodeError::new(
                (DATA_ENTRY_HEADER_LEN + e.offset) as u64,
                ErrorKind::BadDocument(e.to_string()),
            )
        })?;
        bson::Document::from_reader(self.document).map_err(|e| {
            DecodeError::new(
                DATA_ENTRY_HEADER_LEN as u64,
                ErrorKind::BadDocument(e.to_string()),
            )
        })
    }
}

/// One index entry: where a frame's data entry starts in the paired data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// The frame the data belongs to.
    pub key: FrameKey,
    /// Byte offset of the data entry in the `.framedata` file.
    pub seek: u32,
}

impl IndexEntry {
    /// The entry's nine bytes.
    pub fn encode(&self) -> [u8; INDEX_ENTRY_LEN] {
        let raw = RawIndex {
            id: U32::new(self.key.id),
            worker: self.key.worker,
            seek: U32::new(self.seek),
        };
        let mut out = [0u8; INDEX_ENTRY_LEN];
        out.copy_from_slice(raw.as_bytes());
        out
    }
}

/// Decodes the index entry at the front of `buf`, or `None` if fewer than 9 bytes remain.
#[inline]
pub fn decode_index_entry(buf: &[u8]) -> Option<IndexEntry> {
    let (raw, _) = RawIndex::ref_from_prefix(buf).ok()?;
    Some(IndexEntry {
        key: FrameKey::new(raw.worker, raw.id.get()),
        seek: raw.seek.get(),
    })
}

/// Decodes the data entry at the front of `buf`: `Ok(None)` means the entry is not whole yet.
///
/// Checks the framing (the document's length prefix and terminating zero), not the BSON
/// contents; call [`DataEntry::parse`] for that.
pub fn decode_data_entry(buf: &[u8]) -> Result<Option<DataEntry<'_>>, DecodeError> {
    let Ok((raw, _)) = RawDataHeader::ref_from_prefix(buf) else {
        return Ok(None);
    };
    let doc_len = raw.doc_len.get();
    if doc_len < MIN_DOCUMENT_LEN {
        return Err(DecodeError::new(
            DATA_ENTRY_HEADER_LEN as u64,
            ErrorKind::BadDocumentLen(doc_len),
        ));
    }
    let Some(document) = buf.get(DATA_ENTRY_HEADER_LEN..DATA_ENTRY_HEADER_LEN + doc_len as usize)
    else {
        return Ok(None);
    };
    if document.last() != Some(&0) {
        return Err(DecodeError::new(
            DATA_ENTRY_HEADER_LEN as u64,
            ErrorKind::BadDocumentLen(doc_len),
        ));
    }
    Ok(Some(DataEntry {
        key: FrameKey::new(raw.worker, raw.id.get()),
        document,
    }))
}

/// Appends a data entry for `key` with the BSON `document` bytes to `out`.
pub fn encode_data_entry(out: &mut Vec<u8>, key: FrameKey, document: &[u8]) {
    out.extend_from_slice(&key.id.to_le_bytes());
    out.push(key.worker);
    out.extend_from_slice(document);
}

/// Serializes any `Serialize` value to BSON document bytes.
///
/// Maps and structs become the document itself; any other value (a string, a number, a
/// list) is stored as `{"value": …}` because BSON's top level must be a document. A value
/// nested deeper than [`crate::nesting::MAX_NESTING`] levels is refused with an error.
pub fn to_document<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, bson::ser::Error> {
    let doc = match bson::to_bson(&crate::nesting::Bounded::new(value))? {
        bson::Bson::Document(d) => d,
        other => bson::doc! { "value": other },
    };
    let mut out = Vec::with_capacity(64);
    doc.to_writer(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn data_entries_round_trip_any_serialize_value() {
        let v = json!({"sql": "SELECT * FROM user WHERE id = ?", "params": [1, "x"], "ms": 1.5});
        let doc = to_document(&v).unwrap();
        let mut buf = Vec::new();
        encode_data_entry(&mut buf, FrameKey::new(3, 99), &doc);
        let entry = decode_data_entry(&buf).unwrap().unwrap();
        assert_eq!(entry.key, FrameKey::new(3, 99));
        assert_eq!(entry.encoded_len(), buf.len());
        let parsed = entry.parse().unwrap();
        assert_eq!(
            parsed.get_str("sql").unwrap(),
            "SELECT * FROM user WHERE id = ?"
        );
        assert_eq!(parsed.get_array("params").unwrap().len(), 2);

        let scalar = to_document("just a string").unwrap();
        let d = bson::Document::from_reader(&scalar[..]).unwrap();
        assert_eq!(d.get_str("value").unwrap(), "just a string");
        for cut in 0..buf.len() {
            assert_eq!(decode_data_entry(&buf[..cut]), Ok(None));
        }
    }

    /// Lists nested `.0` deep (as a value, built on the fly: no deep structure to drop).
    struct Lists(usize);
    impl Serialize for Lists {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeSeq;
            if self.0 == 0 {
                return s.serialize_u32(7);
            }
            let mut seq = s.serialize_seq(Some(1))?;
            seq.serialize_element(&Lists(self.0 - 1))?;
            seq.end()
        }
    }

    /// Options nested `.0` deep around a map.
    struct Options(usize);
    impl Serialize for Options {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            match self.0 {
                0 => json!({"leaf": true}).serialize(s),
                n => s.serialize_some(&Options(n - 1)),
            }
        }
    }

    #[test]
    fn data_nested_deeper_than_readers_accept_is_an_error_not_a_stack_overflow() {
        use crate::nesting::MAX_NESTING;
        // As deep as allowed: written, and accepted by the readers' check.
        let doc = to_document(&Lists(MAX_NESTING)).unwrap();
        crate::bson_check::check_document(&doc).unwrap();
        let doc = to_document(&json!({"a": {"b": [1, {"c": 2}]}})).unwrap();
        crate::bson_check::check_document(&doc).unwrap();
        // One level more, 2,000 (the reported stack overflow) and 100,000 levels: refused.
        for depth in [MAX_NESTING + 1, 2_000, 100_000] {
            let e = to_document(&Lists(depth)).unwrap_err();
            assert!(e.to_string().contains("nested deeper than"), "{e}");
        }
        // A chain of options is followed a while, then refused the same way.
        to_document(&Options(50)).unwrap();
        let e = to_document(&Options(100_000)).unwrap_err();
        assert!(e.to_string().contains("nested deeper than"), "{e}");
    }

    #[test]
    fn impossible_document_lengths_are_errors() {
        let mut buf = vec![1, 0, 0, 0, 0];
        buf.extend_from_slice(&2i32.to_le_bytes());
        let err = decode_data_entry(&buf).unwrap_err();
        assert_eq!(err.kind, ErrorKind::BadDocumentLen(2));
        assert_eq!(err.offset, 5);
    }

    #[test]
    fn index_entries_are_nine_bytes() {
        let e = IndexEntry {
            key: FrameKey::new(7, 0xDEAD_BEEF),
            seek: 1234,
        };
        let b = e.encode();
        assert_eq!(&b[..4], &0xDEAD_BEEFu32.to_le_bytes());
        assert_eq!(b[4], 7);
        assert_eq!(&b[5..], &1234u32.to_le_bytes());
        assert_eq!(decode_index_entry(&b), Some(e));
        assert_eq!(decode_index_entry(&b[..8]), None);
    }

    proptest! {
        #[test]
        fn any_bytes_never_panic_the_data_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(Some(entry)) = decode_data_entry(&bytes) {
                let _ = entry.parse();
            }
            let _ = decode_index_entry(&bytes);
        }
    }
}
