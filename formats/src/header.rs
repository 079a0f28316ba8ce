//! The 16-byte header every file of a log starts with.

use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::error::{DecodeError, ErrorKind};

pub use crate::version::{
    COMPACT_PACKED_VERSION, COMPACT_PARENTS_VERSION, COMPACT_PLOTS_VERSION, COMPACT_VERSION,
    FORMAT_VERSION, PACKED_VERSION, PARENTS_VERSION,
};

/// Length of the v1 file header in bytes.
pub const HEADER_LEN: usize = 16;

/// Which of the three file kinds a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// `frames-NNNNNN.framelog`: FrameStart, FrameEnd and extension records.
    FrameLog,
    /// `data-NNNNNN.framedata`: frame data entries (BSON).
    FrameData,
    /// `data-NNNNNN.frameidx`: 9-byte index entries into the paired data file.
    FrameIndex,
}

impl FileKind {
    /// The eight magic bytes that open a file of this kind.
    pub const fn magic(self) -> &'static [u8; 8] {
        match self {
            FileKind::FrameLog => b"FRAMELOG",
            FileKind::FrameData => b"FRAMEDAT",
            FileKind::FrameIndex => b"FRAMEIDX",
        }
    }

    /// The file-name prefix of segments of this kind (`frames` or `data`).
    pub const fn prefix(self) -> &'static str {
        match self {
            FileKind::FrameLog => "frames",
            FileKind::FrameData | FileKind::FrameIndex => "data",
        }
    }

    /// The file-name extension of segments of this kind, without the dot.
    pub const fn extension(self) -> &'static str {
        match self {
            FileKind::FrameLog => "framelog",
            FileKind::FrameData => "framedata",
            FileKind::FrameIndex => "frameidx",
        }
    }

    /// The file name of segment number `n` (1-based) of this kind.
    pub fn file_name(self, n: u32) -> String {
        format!("{}-{:06}.{}", self.prefix(), n, self.extension())
    }

    /// Parses a segment file name of this kind back to its number.
    pub fn parse_file_name(self, name: &str) -> Option<u32> {
        let rest = name.strip_prefix(self.prefix())?.strip_prefix('-')?;
        let digits = rest.strip_suffix(self.extension())?.strip_suffix('.')?;
        if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok().filter(|n| *n > 0)
    }
}

/// The raw little-endian layout of a file header.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
#[repr(C)]
struct RawHeader {
    magic: [u8; 8],
    version: U16,
    header_len: U16,
    flags: U32,
}

/// A decoded file header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    /// The file kind, from its magic.
    pub kind: FileKind,
    /// Format version the file was written with.
    pub version: u16,
    /// Total header length; records start at this offset.
    pub header_len: u16,
    /// Feature flags (0 in v1).
    pub flags: u32,
}

impl FileHeader {
    /// The v1 header for a new file of `kind`.
    pub const fn new(kind: FileKind) -> Self {
        Self {
            kind,
            version: FORMAT_VERSION,
            header_len: HEADER_LEN as u16,
            flags: 0,
        }
    }

    /// The header of a compact (version 2) sealed segment of `kind`.
    pub const fn compact(kind: FileKind) -> Self {
        Self {
            kind,
            version: COMPACT_VERSION,
            header_len: HEADER_LEN as u16,
            flags: 0,
        }
    }

    /// The header of a new raw frame-log segment that records parents (version 3).
    pub const fn frames_with_parents() -> Self {
        Self {
            kind: FileKind::FrameLog,
            version: PARENTS_VERSION,
            header_len: HEADER_LEN as u16,
            flags: 0,
        }
    }

    /// The header of a new raw frame-log segment whose batches may be packed (version 6).
    pub const fn frames_packed() -> Self {
        Self {
            kind: FileKind::FrameLog,
            version: PACKED_VERSION,
            header_len: HEADER_LEN as u16,
            flags: 0,
        }
    }

    /// Whether the file is a compact sealed segment (version 2, or 4, 5 or 7 for a frame log).
    pub const fn is_compact(&self) -> bool {
        self.version == COMPACT_VERSION
            || self.version == COMPACT_PARENTS_VERSION
            || self.version == COMPACT_PLOTS_VERSION
            || self.version == COMPACT_PACKED_VERSION
    }

    /// Whether the file may hold FrameStart with parent records (version 3 to 7).
    pub const fn has_parents(&self) -> bool {
        self.version >= PARENTS_VERSION && self.version <= COMPACT_PACKED_VERSION
    }

    /// Whether a writer may append packed batches to the file (version 6).
    pub const fn takes_packed(&self) -> bool {
        self.version == PACKED_VERSION
    }

    /// The header's 16 bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let raw = RawHeader {
            magic: *self.kind.magic(),
            version: U16::new(self.version),
            header_len: U16::new(self.header_len),
            flags: U32::new(self.flags),
        };
        let mut out = [0u8; HEADER_LEN];
        out.copy_from_slice(raw.as_bytes());
        out
    }

    /// Decodes the header of a file expected to be of `kind`.
    ///
    /// Returns `Ok(None)` when fewer than 16 bytes are available yet (a file being created).
    /// Accepts raw files only (version 1, and 3 for a frame log), refusing a compact one
    /// (version 2, 4 or 5) like any newer version: code that reads records one by one must never
    /// take a compact file for a raw one. Readers that handle both use
    /// [`FileHeader::decode_any`].
    pub fn decode(kind: FileKind, bytes: &[u8]) -> Result<Option<Self>, DecodeError> {
        Self::decode_with(kind, bytes, false)
    }

    /// Like [`FileHeader::decode`], but also accepts a compact (version 2, 4 or 5) file.
    pub fn decode_any(kind: FileKind, bytes: &[u8]) -> Result<Option<Self>, DecodeError> {
        Self::decode_with(kind, bytes, true)
    }

    fn decode_with(
        kind: FileKind,
        bytes: &[u8],
        compact: bool,
    ) -> Result<Option<Self>, DecodeError> {
        let Ok((raw, _)) = RawHeader::ref_from_prefix(bytes) else {
            return Ok(None);
        };
        if &raw.magic != kind.magic() {
            let expected = std::str::from_utf8(kind.magic()).unwrap_or("?");
            return Err(DecodeError::new(
                0,
                ErrorKind::BadMagic {
                    found: raw.magic,
                    expected,
                },
            ));
        }
        let version = raw.version.get();
        let known = match (kind, version) {
            (_, FORMAT_VERSION) | (FileKind::FrameLog, PARENTS_VERSION | PACKED_VERSION) => true,
            (_, COMPACT_VERSION)
            | (
                FileKind::FrameLog,
                COMPACT_PARENTS_VERSION | COMPACT_PLOTS_VERSION | COMPACT_PACKED_VERSION,
            ) => compact,
            _ => false,
        };
        if !known {
            return Err(DecodeError::new(8, ErrorKind::UnsupportedVersion(version)));
        }
        let header_len = raw.header_len.get();
        if (header_len as usize) < HEADER_LEN {
            return Err(DecodeError::new(10, ErrorKind::BadHeaderLen(header_len)));
        }
        Ok(Some(Self {
            kind,
            version,
            header_len,
            flags: raw.flags.get(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_for_every_kind() {
        for kind in [
            FileKind::FrameLog,
            FileKind::FrameData,
            FileKind::FrameIndex,
        ] {
            let h = FileHeader::new(kind);
            let bytes = h.encode();
            assert_eq!(&bytes[..8], kind.magic());
            assert_eq!(FileHeader::decode(kind, &bytes), Ok(Some(h)));
        }
    }

    #[test]
    fn wrong_magic_newer_version_and_short_input() {
        let bytes = FileHeader::new(FileKind::FrameData).encode();
        let err = FileHeader::decode(FileKind::FrameLog, &bytes).unwrap_err();
        assert!(matches!(err.kind, ErrorKind::BadMagic { .. }));
        let mut newer = FileHeader::new(FileKind::FrameLog);
        newer.version = 2;
        let err = FileHeader::decode(FileKind::FrameLog, &newer.encode()).unwrap_err();
        assert_eq!(err.kind, ErrorKind::UnsupportedVersion(2));
        assert_eq!(
            FileHeader::decode(FileKind::FrameLog, &bytes[..10]),
            Ok(None)
        );
    }

    #[test]
    fn versions_accepted_per_kind_and_reader() {
        // (kind, version, raw readers accept, compact-aware readers accept)
        let cases = [
            (FileKind::FrameLog, 1, true, true),
            (FileKind::FrameLog, 2, false, true),
            (FileKind::FrameLog, 3, true, true),
            (FileKind::FrameLog, 4, false, true),
            (FileKind::FrameLog, 5, false, true),
            (FileKind::FrameLog, 6, true, true),
            (FileKind::FrameLog, 7, false, true),
            (FileKind::FrameLog, 8, false, false),
            (FileKind::FrameData, 2, false, true),
            (FileKind::FrameData, 3, false, false),
            (FileKind::FrameData, 4, false, false),
            (FileKind::FrameData, 5, false, false),
            (FileKind::FrameData, 6, false, false),
            (FileKind::FrameData, 7, false, false),
            (FileKind::FrameIndex, 3, false, false),
        ];
        for (kind, version, raw, any) in cases {
            let mut h = FileHeader::new(kind);
            h.version = version;
            let bytes = h.encode();
            let got = |r: Result<Option<FileHeader>, DecodeError>| match r {
                Ok(Some(d)) => {
                    assert_eq!(d, h);
                    true
                }
                Err(e) => {
                    assert_eq!(e.kind, ErrorKind::UnsupportedVersion(version));
                    assert!(e.to_string().contains("update the reader"), "{e}");
                    false
                }
                Ok(None) => panic!("whole header read as partial"),
            };
            assert_eq!(
                got(FileHeader::decode(kind, &bytes)),
                raw,
                "{kind:?} v{version}"
            );
            assert_eq!(
                got(FileHeader::decode_any(kind, &bytes)),
                any,
                "{kind:?} v{version}"
            );
            assert_eq!(
                h.is_compact(),
                matches!(version, 2 | 4 | 5 | 7),
                "v{version}"
            );
        }
        assert!(FileHeader::frames_with_parents().has_parents());
    }

    #[test]
    fn longer_headers_are_accepted() {
        let mut h = FileHeader::new(FileKind::FrameIndex);
        h.header_len = 32;
        let decoded = FileHeader::decode(FileKind::FrameIndex, &h.encode()).unwrap();
        assert_eq!(decoded.unwrap().header_len, 32);
    }

    #[test]
    fn segment_file_names() {
        assert_eq!(FileKind::FrameLog.file_name(1), "frames-000001.framelog");
        assert_eq!(FileKind::FrameIndex.file_name(12), "data-000012.frameidx");
        assert_eq!(
            FileKind::FrameData.parse_file_name("data-000012.framedata"),
            Some(12)
        );
        assert_eq!(
            FileKind::FrameData.parse_file_name("data-000012.frameidx"),
            None
        );
        assert_eq!(
            FileKind::FrameLog.parse_file_name("frames-1.framelog"),
            None
        );
        assert_eq!(
            FileKind::FrameLog.parse_file_name("frames-1234567.framelog"),
            Some(1234567)
        );
    }
}
