//! Recovering a damaged log: copies every valid batch (and every record of older, unframed
//! segments that decodes) into a new log, and lists what was skipped.

use std::path::Path;

#[cfg(feature = "compact")]
use formats::compact::frames::FileEvent;
use formats::{FLAG_BATCHES, FileHeader, FileKind, Framing, Unit, decode_data_entry};

use crate::append::{AppendConfig, DataAppender, DataBatch, FramesAppender, SyncPolicy};
use crate::damage::{Damage, DamageLog};
use crate::error::{Error, IoContext, Result};
use crate::segments::{self, segment_path};
use crate::worker;

/// What a recovery copied and skipped.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Frame-log batches (or unframed records) copied.
    pub frame_units: u64,
    /// Bytes of frame-log records copied.
    pub frame_bytes: u64,
    /// Data entries copied.
    pub data_entries: u64,
    /// Every damaged run skipped, with file, offset, length and reason.
    pub skipped: Vec<Damage>,
}

fn framed(path: &Path, kind: FileKind, bytes: &[u8]) -> Result<Option<(usize, bool)>> {
    match FileHeader::decode(kind, bytes) {
        Ok(Some(h)) => Ok(Some((h.header_len as usize, h.flags & FLAG_BATCHES != 0))),
        Ok(None) => Ok(None),
        Err(e) => Err(Error::corrupt(path, 0, e)),
    }
}

/// Calls `f` with the contents of every valid batch (or unframed record or entry) of the
/// raw frame-log or data file at `path`, whose bytes are `bytes`, and records the damage
/// between them.
fn valid_units(
    path: &Path,
    bytes: &[u8],
    kind: FileKind,
    damage: &mut DamageLog,
    mut f: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let Some((mut pos, is_framed)) = framed(path, kind, bytes)? else {
        return Ok(());
    };
    let framing = match kind {
        FileKind::FrameLog => Framing::Frames,
        _ => Framing::Data,
    };
    let mut unpacked = Vec::new();
    while pos < bytes.len() {
        match framing.next_unit(&bytes[pos..], is_framed, true) {
            Unit::Batch {
                len,
                body,
                packed: Some(h),
                ..
            } => {
                match formats::packed::unpack(h.worker, h.timestamp, h.count, body, &mut unpacked) {
                    Ok(()) => f(&unpacked)?,
                    Err(why) => {
                        let why = formats::DamageKind::BadPacked(why);
                        damage.add(path, pos as u64, len as u64, why);
                    }
                }
                pos += len;
            }
            Unit::Batch { len, body, .. } => {
                f(body)?;
                pos += len;
            }
            Unit::Unframed(len) => {
                f(&bytes[pos..pos + len])?;
                pos += len;
            }
            Unit::Damaged { len, why } => {
                damage.add(path, pos as u64, len as u64, why);
                pos += len;
            }
            Unit::NeedMore => break,
        }
    }
    Ok(())
}

/// Copies the valid contents of the log in `src` into a new log in `dst` (which must not
/// exist or be empty). Worker id high-water marks are carried over, so programs that later
/// append to `dst` never repeat a frame key.
pub fn recover(src: &Path, dst: &Path) -> Result<Recovered> {
    if !segments::is_log(src) {
        return Err(Error::NotALog(src.to_owned()));
    }
    if dst.exists() && std::fs::read_dir(dst).at(dst)?.next().is_some() {
        return Err(Error::io(
            dst,
            std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "the output directory is not empty",
            ),
        ));
    }
    std::fs::create_dir_all(dst).at(dst)?;
    let config = |limit| AppendConfig {
        worker: 0,
        limit,
        // One sync at the end instead of one per append.
        sync: SyncPolicy::Interval(std::time::Duration::MAX),
        on_damage: None,
        pack: true,
    };
    let mut frames = FramesAppender::new(dst, config(256 << 20));
    let mut data = DataAppender::new(dst, config(1 << 30));
    let mut out = Recovered::default();
    let mut damage = DamageLog::default();
    // Records are gathered and appended in large writes (framed again into new batches).
    let mut pending = Vec::new();
    for n in segments::list(src, FileKind::FrameLog)? {
        let path = segment_path(src, FileKind::FrameLog, n);
        let bytes = std::fs::read(&path).at(&path)?;
        // Refuses a compact segment in a build without the `compact` feature.
        match crate::pread::decode_header_any(&path, FileKind::FrameLog, &bytes)? {
            #[cfg(feature = "compact")]
            Ok(Some(h)) if h.is_compact() => {
                // A compact segment: its records, rebuilt as version 1 records block by block.
                formats::compact::frames::decode_file(&bytes, |e| match e {
                    FileEvent::Record(_, rec) => {
                        let at = pending.len();
                        rec.encode_to_vec(&mut pending);
                        out.frame_units += 1;
                        out.frame_bytes += (pending.len() - at) as u64;
                    }
                    FileEvent::Damaged(offset, len, why) => {
                        damage.add(&path, offset, len, formats::DamageKind::BadBlock(why))
                    }
                });
                if pending.len() >= 4 << 20 {
                    frames.append(&pending)?;
                    pending.clear();
                }
            }
            _ => valid_units(&path, &bytes, FileKind::FrameLog, &mut damage, |records| {
                pending.extend_from_slice(records);
                out.frame_units += 1;
                out.frame_bytes += records.len() as u64;
                if pending.len() >= 4 << 20 {
                    frames.append(&pending)?;
                    pending.clear();
                }
                Ok(())
            })?,
        }
    }
    frames.append(&pending)?;
    for n in segments::list(src, FileKind::FrameData)? {
        let path = segment_path(src, FileKind::FrameData, n);
        let bytes = std::fs::read(&path).at(&path)?;
        let mut batch = DataBatch::new();
        // Refuses a compact segment in a build without the `compact` feature.
        match crate::pread::decode_header_any(&path, FileKind::FrameData, &bytes)? {
            #[cfg(feature = "compact")]
            Ok(Some(h)) if h.is_compact() => {
                compact_data_entries(&path, &bytes, &mut damage, &mut batch);
            }
            _ => valid_units(&path, &bytes, FileKind::FrameData, &mut damage, |entries| {
                let mut at = 0;
                while let Ok(Some(e)) = decode_data_entry(&entries[at..]) {
                    batch.push(e.key, e.document);
                    at += e.encoded_len();
                }
                Ok(())
            })?,
        }
        out.data_entries += batch.len() as u64;
        data.append(&batch)?;
    }
    frames.sync()?;
    data.sync()?;
    worker::copy_high_water_marks(src, dst)?;
    out.skipped = damage.take();
    Ok(out)
}

/// Pushes the entries of the good blocks of the compact (version 2) data file at `path`,
/// whose bytes are `bytes`, onto `batch`, and records the damage.
#[cfg(feature = "compact")]
fn compact_data_entries(path: &Path, bytes: &[u8], damage: &mut DamageLog, batch: &mut DataBatch) {
    use formats::compact::data::{DataFile, block_entries};
    let lost = |e: &formats::DecodeError, what: &str| {
        formats::DamageKind::BadBlock(format!("{what}: {}", e.kind))
    };
    let mut file = match DataFile::parse(bytes) {
        Ok(f) => f,
        Err(e) => {
            // Without its index the file's blocks cannot be trusted to be whole: all lost.
            damage.add(
                path,
                0,
                bytes.len() as u64,
                lost(&e, "compact data file's index unreadable"),
            );
            return;
        }
    };
    let blocks = file.index.blocks.clone();
    for (b, &at) in blocks.iter().enumerate() {
        let next = blocks
            .get(b + 1)
            .copied()
            .unwrap_or(file.trailer.index_offset);
        let found = file.block(b).and_then(|(h, at, raw)| {
            let checked = block_entries(&raw, h.count).map(|_| ());
            checked.map_err(|e| e.shifted(at)).map(|()| raw)
        });
        match found {
            Ok(raw) => {
                let mut pos = 0;
                while let Ok(Some(e)) = decode_data_entry(&raw[pos..]) {
                    batch.push(e.key, e.document);
                    pos += e.encoded_len();
                }
            }
            Err(e) => damage.add(path, at, next - at, lost(&e, &format!("data block {b}"))),
        }
    }
}
