//! Positioned reads shared by the writer's repair, the reader and the data store: whole
//! buffers at an offset, and file headers.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use formats::{FileHeader, FileKind, HEADER_LEN};

use crate::error::{Error, Result};

/// Reads the header of `file`; `Ok(None)` if it holds fewer than 16 bytes.
pub(crate) fn read_header(file: &File, path: &Path, kind: FileKind) -> Result<Option<FileHeader>> {
    let mut buf = [0u8; HEADER_LEN];
    let n = read_full_at(file, path, &mut buf, 0)?;
    FileHeader::decode(kind, &buf[..n]).map_err(|e| Error::corrupt(path, 0, e))
}

/// Like [`read_header`], but also accepts a compact (version 2) file: for readers that
/// handle both forms.
pub(crate) fn read_header_any(
    file: &File,
    path: &Path,
    kind: FileKind,
) -> Result<Option<FileHeader>> {
    let mut buf = [0u8; HEADER_LEN];
    let n = read_full_at(file, path, &mut buf, 0)?;
    FileHeader::decode_any(kind, &buf[..n]).map_err(|e| Error::corrupt(path, 0, e))
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
