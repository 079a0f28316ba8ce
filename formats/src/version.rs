//! The format's version numbers (`docs/FORMAT.md`, *File header*): what a file header's
//! `version` field may say, and what each adds.

/// The format version this crate writes and reads.
pub const FORMAT_VERSION: u16 = 1;
/// The version of compact sealed segments (`docs/FORMAT.md`, *Compact sealed segments*): only
/// readers that handle them accept it, through [`crate::FileHeader::decode_any`].
pub const COMPACT_VERSION: u16 = 2;
/// The version of raw frame-log segments that may hold FrameStart with parent records
/// (type 6, `docs/FORMAT.md`, *Parents: versions 3 and 4*). Data and index files never have it.
pub const PARENTS_VERSION: u16 = 3;
/// The version of compact frame-log segments that may hold FrameStart with parent records.
pub const COMPACT_PARENTS_VERSION: u16 = 4;
/// The version of compact frame-log segments that keep plot values in their own streams
/// (`docs/FORMAT.md`, *Compact plots: version 5*): version 4 otherwise.
pub const COMPACT_PLOTS_VERSION: u16 = 5;
/// The version of raw frame-log segments whose batches may be packed (`docs/FORMAT.md`,
/// *Packed batches: versions 6 and 7*): version 3 otherwise.
pub const PACKED_VERSION: u16 = 6;
/// The version of compact frame-log segments made from version 6 ones: version 5 with signed
/// `gaps`.
pub const COMPACT_PACKED_VERSION: u16 = 7;
