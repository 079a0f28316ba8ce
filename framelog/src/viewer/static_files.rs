//! The viewer's static files: paths below the web root, a cache of files read once (re-read
//! when they change), and the response body that sends them in slices of the cache (an
//! unread response costs a reference, not a copy).

use std::collections::HashMap;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use hyper::body::Bytes;
use parking_lot::Mutex;

/// Static files are sent in slices of this size.
pub(super) const CHUNK: usize = 64 << 10;
/// Bytes of static files kept in memory (beyond, files are read as they are sent).
pub(super) const CACHE_BYTES: u64 = 64 << 20;

/// A URL path as a relative file path below the web root: percent-decoded, only plain
/// names (no `..`, no absolute parts, no NUL); `None` if it is anything else. `/` is the
/// empty path.
pub(super) fn decode_path(path: &str) -> Option<PathBuf> {
    let raw = path.strip_prefix('/')?;
    let mut bytes = Vec::with_capacity(raw.len());
    let mut it = raw.bytes();
    while let Some(b) = it.next() {
        if b == b'%' {
            let hex = [it.next()?, it.next()?];
            let s = std::str::from_utf8(&hex).ok()?;
            bytes.push(u8::from_str_radix(s, 16).ok()?);
        } else {
            bytes.push(b);
        }
    }
    let s = String::from_utf8(bytes).ok()?;
    if s.contains('\0') || s.contains('\\') {
        return None;
    }
    let rel = PathBuf::from(s);
    rel.components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then_some(rel)
}

pub(super) enum BodyKind {
    Empty,
    Bytes(Bytes),
    File(std::fs::File, u64),
}

/// Static files read once and kept while they do not change on disk (up to
/// [`CACHE_BYTES`]; a file that does not fit is read as it is sent).
#[derive(Default)]
pub(super) struct Cache {
    files: Mutex<HashMap<PathBuf, Cached>>,
}

pub(super) struct Cached {
    bytes: Bytes,
    modified: Option<SystemTime>,
}

impl Cache {
    /// The file's body and length.
    pub(super) fn open(&self, path: &Path) -> io::Result<(BodyKind, u64)> {
        let meta = std::fs::metadata(path)?;
        if !meta.is_file() {
            return Err(io::ErrorKind::NotFound.into());
        }
        let modified = meta.modified().ok();
        let mut files = self.files.lock();
        if let Some(c) = files.get(path)
            && c.bytes.len() as u64 == meta.len()
            && c.modified == modified
        {
            return Ok((BodyKind::Bytes(c.bytes.clone()), meta.len()));
        }
        let held: u64 = files
            .iter()
            .filter(|(p, _)| p.as_path() != path)
            .map(|(_, c)| c.bytes.len() as u64)
            .sum();
        if held + meta.len() <= CACHE_BYTES {
            let bytes = Bytes::from(std::fs::read(path)?);
            let len = bytes.len() as u64;
            files.insert(
                path.to_owned(),
                Cached {
                    bytes: bytes.clone(),
                    modified,
                },
            );
            return Ok((BodyKind::Bytes(bytes), len));
        }
        drop(files);
        let f = std::fs::File::open(path)?;
        Ok((BodyKind::File(f, meta.len()), meta.len()))
    }
}

/// The content type browsers need (WebAssembly must be `application/wasm` to stream).
pub(super) fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript",
        Some("wasm") => "application/wasm",
        Some("css") => "text/css",
        Some("json") => "application/json",
        Some("png") => "image/png",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

pub(super) const NOT_BUILT_PAGE: &str = "<!doctype html><meta charset=utf-8><title>framelog</title>\
<p>This framelog server streams its log to viewers at <code>/ws</code>, but the browser \
viewer is not built. Build it with <code>debugger-gui/web/build.sh target/release/web</code> \
in the framelog repository (see <code>docs/DEBUGGER.md</code>, <em>The debugger in a \
browser</em>) and restart the server, or pass <code>--web DIR</code>; or open the log with \
<code>debugger-gui ws://HOST:PORT/ws</code>.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn paths_below_the_root_only() {
        assert_eq!(decode_path("/"), Some(PathBuf::new()));
        assert_eq!(decode_path("/a/b.js"), Some(PathBuf::from("a/b.js")));
        assert_eq!(decode_path("/a%20b"), Some(PathBuf::from("a b")));
        for bad in [
            "/../etc/passwd",
            "/%2e%2e/etc/passwd",
            "/a/%2E%2E/%2e%2e/x",
            "/%2fetc/passwd",
            "//etc/passwd",
            "/%00",
            "/..%5c..%5cx",
            "/%zz",
            "/%ff",
            "/%",
        ] {
            assert_eq!(decode_path(bad), None, "{bad}");
        }
    }
}
