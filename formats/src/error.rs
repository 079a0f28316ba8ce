//! Decode errors.

/// What is wrong with the bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    /// The file does not start with the expected magic.
    #[error("bad magic {found:?}, expected {expected:?}")]
    BadMagic {
        /// The eight bytes found.
        found: [u8; 8],
        /// The magic this file kind must have.
        expected: &'static str,
    },
    /// The file was written by a newer, incompatible format version.
    #[error("format version {0} is not one this reader knows (it reads versions 1-{NEWEST} of frame logs, 1-2 of data files): update the reader", NEWEST = crate::version::COMPACT_PLOTS_VERSION)]
    UnsupportedVersion(u16),
    /// A header length shorter than the v1 header.
    #[error("header length {0} is shorter than 16 bytes")]
    BadHeaderLen(u16),
    /// A label is not valid UTF-8.
    #[error("label is not valid UTF-8")]
    BadLabel,
    /// A known extension record's payload has the wrong shape.
    #[error("{name} record has a malformed payload of {len} bytes")]
    BadPayload {
        /// The extension's name.
        name: &'static str,
        /// The payload length found.
        len: usize,
    },
    /// A BSON document's length prefix is impossible.
    #[error("BSON document length {0} is invalid")]
    BadDocumentLen(i32),
    /// Bytes given to be appended do not end at a record boundary.
    #[error("the bytes end inside a record ({0} bytes of a partial record)")]
    PartialRecord(usize),
    /// A BSON document does not parse.
    #[error("BSON document is malformed: {0}")]
    BadDocument(String),
    /// A compact (version 2) file's block, index or trailer does not follow the format.
    #[error("{0}")]
    Compact(String),
}

/// An error decoding bytes, with the offset (relative to the slice decoded) where it was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at offset {offset}: {kind}")]
pub struct DecodeError {
    /// Byte offset of the bad record or field, relative to the decoded slice.
    pub offset: u64,
    /// What is wrong.
    pub kind: ErrorKind,
}

impl DecodeError {
    /// Builds an error at `offset`.
    pub fn new(offset: u64, kind: ErrorKind) -> Self {
        Self { offset, kind }
    }

    /// The same error moved by `base` bytes (for a slice that starts `base` bytes into a file).
    pub fn shifted(mut self, base: u64) -> Self {
        self.offset += base;
        self
    }
}
