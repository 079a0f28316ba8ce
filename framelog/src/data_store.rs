//! [`DataStore`]: a frame's data on demand, without scanning the data files.
//!
//! The index files are loaded into a map from `(worker, id)` to entry locations; the data
//! files are memory-mapped and sliced at those locations.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use formats::{
    FileKind, FrameKey, HEADER_LEN, INDEX_ENTRY_LEN, decode_data_entry, decode_index_entry,
};
use memmap2::Mmap;

use crate::error::{Error, IoContext, Result};
use crate::repair::{read_full_at, read_header};
use crate::segments::{self, segment_path};

/// Where one data entry is: which data segment (index into `segments`) and at what offset.
#[derive(Debug, Clone, Copy)]
struct Loc {
    segment: u32,
    seek: u32,
}

/// A frame's entry locations; most frames have exactly one.
#[derive(Debug, Clone)]
enum Locs {
    One(Loc),
    Many(Vec<Loc>),
}

impl Locs {
    fn push(&mut self, loc: Loc) {
        match self {
            Locs::One(first) => *self = Locs::Many(vec![*first, loc]),
            Locs::Many(v) => v.push(loc),
        }
    }

    fn as_slice(&self) -> &[Loc] {
        match self {
            Locs::One(l) => std::slice::from_ref(l),
            Locs::Many(v) => v,
        }
    }
}

/// One data/index segment pair.
struct Segment {
    data_path: PathBuf,
    idx_path: PathBuf,
    idx: Option<File>,
    /// Bytes of the index file consumed so far (0 until its header was read).
    idx_read: u64,
    map: Option<Mmap>,
}

/// Looks up frame data by key, merging every entry of a frame in file order.
pub struct DataStore {
    dir: PathBuf,
    segments: Vec<(u32, Segment)>,
    index: HashMap<FrameKey, Locs>,
    entries: usize,
}

impl DataStore {
    /// Opens the data of the log in `dir` and loads its index.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_owned();
        if !dir.is_dir() {
            return Err(Error::NotALog(dir));
        }
        let mut store = Self {
            dir,
            segments: Vec::new(),
            index: HashMap::new(),
            entries: 0,
        };
        store.refresh()?;
        Ok(store)
    }

    /// Number of index entries loaded.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Whether no index entry is loaded.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Whether `key` has any data.
    pub fn contains(&self, key: FrameKey) -> bool {
        self.index.contains_key(&key)
    }

    /// Loads index entries appended since the last call (and new segments); returns how many.
    pub fn refresh(&mut self) -> Result<usize> {
        for n in segments::list(&self.dir, FileKind::FrameIndex)? {
            if !self.segments.iter().any(|(m, _)| *m == n) {
                self.segments.push((
                    n,
                    Segment {
                        data_path: segment_path(&self.dir, FileKind::FrameData, n),
                        idx_path: segment_path(&self.dir, FileKind::FrameIndex, n),
                        idx: None,
                        idx_read: 0,
                        map: None,
                    },
                ));
            }
        }
        let mut added = 0;
        let mut buf = vec![0u8; 1 << 20];
        for (i, (_, seg)) in self.segments.iter_mut().enumerate() {
            if seg.idx.is_none() {
                seg.idx = Some(File::open(&seg.idx_path).at(&seg.idx_path)?);
            }
            let file = seg.idx.as_ref().expect("opened above");
            if seg.idx_read == 0 {
                match read_header(file, &seg.idx_path, FileKind::FrameIndex)? {
                    Some(h) => seg.idx_read = u64::from(h.header_len),
                    None => continue,
                }
            }
            loop {
                let n = read_full_at(file, &seg.idx_path, &mut buf, seg.idx_read)?;
                let whole = n / INDEX_ENTRY_LEN * INDEX_ENTRY_LEN;
                for chunk in buf[..whole].chunks_exact(INDEX_ENTRY_LEN) {
                    let e = decode_index_entry(chunk).expect("nine bytes");
                    let loc = Loc {
                        segment: i as u32,
                        seek: e.seek,
                    };
                    match self.index.get_mut(&e.key) {
                        Some(locs) => locs.push(loc),
                        None => {
                            self.index.insert(e.key, Locs::One(loc));
                        }
                    }
                }
                added += whole / INDEX_ENTRY_LEN;
                seg.idx_read += whole as u64;
                if n < buf.len() {
                    break;
                }
            }
        }
        self.entries += added;
        Ok(added)
    }

    /// The raw BSON documents of `key`, in file order (each checked against the index).
    pub fn raw_entries(&mut self, key: FrameKey) -> Result<Vec<Vec<u8>>> {
        let Some(locs) = self.index.get(&key) else {
            return Ok(Vec::new());
        };
        let locs = locs.as_slice().to_vec();
        let mut out = Vec::with_capacity(locs.len());
        for loc in locs {
            let (_, seg) = &mut self.segments[loc.segment as usize];
            let seek = loc.seek as usize;
            let idx_path = seg.idx_path.clone();
            let bytes = mapped_from(seg, seek)?;
            let entry = match decode_data_entry(bytes) {
                Ok(Some(e)) => e,
                Ok(None) => {
                    return Err(Error::corrupt(
                        &seg.data_path,
                        seek as u64,
                        formats::DecodeError::new(
                            0,
                            formats::ErrorKind::BadDocument(
                                "the entry runs past the end of the data file".into(),
                            ),
                        ),
                    ));
                }
                Err(e) => return Err(Error::corrupt(&seg.data_path, seek as u64, e)),
            };
            if entry.key != key {
                return Err(Error::corrupt(
                    &idx_path,
                    0,
                    formats::DecodeError::new(
                        0,
                        formats::ErrorKind::BadDocument(format!(
                            "index entry for {key} points at seek {seek}, which holds data of {}",
                            entry.key
                        )),
                    ),
                ));
            }
            out.push(entry.document.to_vec());
        }
        Ok(out)
    }

    /// The frame's data: every entry merged in file order, later keys winning.
    pub fn get(&mut self, key: FrameKey) -> Result<Option<bson::Document>> {
        let raw = self.raw_entries(key)?;
        if raw.is_empty() {
            return Ok(None);
        }
        let mut merged = bson::Document::new();
        for doc in raw {
            let d = bson::Document::from_reader(&doc[..]).map_err(|e| {
                Error::corrupt(
                    &self.dir,
                    0,
                    formats::DecodeError::new(0, formats::ErrorKind::BadDocument(e.to_string())),
                )
            })?;
            for (k, v) in d {
                merged.insert(k, v);
            }
        }
        Ok(Some(merged))
    }
}

/// The mapped bytes of `seg` from `seek` on, remapping if the file grew past the mapping.
fn mapped_from(seg: &mut Segment, seek: usize) -> Result<&[u8]> {
    let need_remap = match &seg.map {
        // An entry's header and length prefix must be inside the mapping; a longer
        // document is checked again below.
        Some(m) => m.len() < seek + 9,
        None => true,
    };
    if need_remap {
        remap(seg)?;
    }
    let len = seg.map.as_ref().map_or(0, |m| m.len());
    if seek < HEADER_LEN || seek >= len {
        return Err(Error::corrupt(
            &seg.data_path,
            seek as u64,
            formats::DecodeError::new(
                0,
                formats::ErrorKind::BadDocument(format!(
                    "index points at seek {seek}, outside the data file ({len} bytes)"
                )),
            ),
        ));
    }
    // If the document runs past the mapping, the file may have grown since: remap once.
    let doc_len = {
        let m = seg.map.as_ref().expect("mapped");
        let b = m.get(seek + 5..seek + 9).unwrap_or(&[0, 0, 0, 0]);
        i32::from_le_bytes(b.try_into().expect("4 bytes")).max(0) as usize
    };
    if seek + 5 + doc_len > len {
        remap(seg)?;
    }
    Ok(&seg.map.as_ref().expect("mapped")[seek..])
}

fn remap(seg: &mut Segment) -> Result<()> {
    let file = File::open(&seg.data_path).at(&seg.data_path)?;
    // SAFETY: data files are append-only; bytes already written are never changed, so the
    // mapped prefix stays valid. A writer cutting a torn tail only removes bytes no index
    // entry points at, and every slice is bounds-checked against the mapping's length.
    let map = unsafe { Mmap::map(&file) }.at(&seg.data_path)?;
    seg.map = Some(map);
    Ok(())
}
