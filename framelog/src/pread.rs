//! Positioned reads shared by the writer's repair, the reader and the data store: whole
//! buffers at an offset, and file headers (where compact segments are told from raw ones, and
//! refused by a build without the `compact` feature).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use formats::{DecodeError, FileHeader, FileKind, HEADER_LEN};

use crate::error::{Error, Result};

/// Reads the header of `file`; `Ok(None)` if it holds fewer than 16 bytes.
pub(crate) fn read_header(file: &File, path: &Path, kind: FileKind) -> Result<Option<FileHeader>> {
    let mut buf = [0u8; HEADER_LEN];
    let n = read_full_at(file, path, &mut buf, 0)?;
    FileHeader::decode(kind, &buf[..n]).map_err(|e| Error::corrupt(path, 0, e))
}

/// Like [`read_header`], but also accepts a compact (version 2, 4 or 5) file: for readers that
/// handle both forms (see [`decode_header_any`]).
pub(crate) fn read_header_any(
    file: &File,
    path: &Path,
    kind: FileKind,
) -> Result<Option<FileHeader>> {
    let mut buf = [0u8; HEADER_LEN];
    let n = read_full_at(file, path, &mut buf, 0)?;
    decode_header_any(path, kind, &buf[..n])?.map_err(|e| Error::corrupt(path, 0, e))
}

/// Decodes the header at the start of `bytes`, the first bytes of the segment of `kind` at
/// `path`, accepting the raw and the compact forms: every reader that handles both (reader,
/// data store, check, recover, retention, compaction) tells them apart here.
///
/// This is also where a build without the `compact` feature refuses a compact segment, once for
/// all of them: the outer error, [`Error::CompactUnsupported`] naming the file, so no reader
/// ever takes a compact segment for a raw one or passes over it. In such a build a header that
/// comes out of here is never compact. The inner result is the header's own decoding (`None`:
/// fewer than 16 bytes, a file being created), for the caller to report its way.
pub(crate) fn decode_header_any(
    path: &Path,
    kind: FileKind,
    bytes: &[u8],
) -> Result<std::result::Result<Option<FileHeader>, DecodeError>> {
    match FileHeader::decode_any(kind, bytes) {
        Ok(Some(h)) if h.is_compact() && !cfg!(feature = "compact") => {
            Err(Error::CompactUnsupported {
                path: path.to_owned(),
                version: h.version,
            })
        }
        decoded => Ok(decoded),
    }
}

/// Reads as many bytes as are there at `offset`, up to `buf.len()`.
pub(crate) fn read_full_at(file: &File, path: &Path, buf: &mut [u8], offset: u64) -> Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    Ok(done)
}

/// Reads `len` bytes at `offset` into a new buffer (fewer if the file ends first).
pub(crate) fn read_vec_at(file: &File, path: &Path, offset: u64, len: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let n = read_full_at(file, path, &mut buf, offset)?;
    buf.truncate(n);
    Ok(buf)
}
