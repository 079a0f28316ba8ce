//! Validating every file of a log: headers, batch checksums, record framing, index seeks,
//! BSON documents. Every problem is listed with its file and byte offset.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use formats::{
    BATCH_RECORD_LEN, DATA_MARKER_LEN, DamageKind, DataMarker, FLAG_BATCHES, FileHeader, FileKind,
    FrameKey, Framing, INDEX_ENTRY_LEN, Probe, Unit, batch_records, check_index_entries,
    decode_data_entry, decode_index_entry,
};

use crate::error::{IoContext, Result};
use crate::segments::{self, segment_path};

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Harmless: e.g. a batch being written, or a torn tail the next writer cuts.
    Note,
    /// Bytes that fail the format's checks: readers skip them and their records are lost.
    Error,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// How serious it is.
    pub severity: Severity,
    /// The file.
    pub path: PathBuf,
    /// Byte offset in the file.
    pub offset: u64,
    /// What is wrong.
    pub message: String,
}

/// What was checked.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Files checked.
    pub files: usize,
    /// Frame-log records read.
    pub records: u64,
    /// Data entries read.
    pub data_entries: u64,
    /// Index entries read.
    pub index_entries: u64,
    /// Batches whose checksums held.
    pub batches: u64,
    /// Everything found, in file order.
    pub problems: Vec<Problem>,
    /// Skip parsing BSON documents (the compactor copies documents as bytes, so their
    /// framing, checksums and index are what it needs; parsing costs most of a check).
    skip_documents: bool,
}

impl Report {
    /// Whether any finding is an error.
    pub fn has_errors(&self) -> bool {
        self.problems.iter().any(|p| p.severity == Severity::Error)
    }

    fn add(&mut self, severity: Severity, path: &Path, offset: u64, message: impl Into<String>) {
        self.problems.push(Problem {
            severity,
            path: path.to_owned(),
            offset,
            message: message.into(),
        });
    }

    /// Reports a damaged run; a torn tail in a live (last) segment is only a note.
    fn damaged(&mut self, path: &Path, offset: u64, len: usize, why: &DamageKind, live: bool) {
        let severity = if live && *why == DamageKind::TornTail {
            Severity::Note
        } else {
            Severity::Error
        };
        let why = if severity == Severity::Note {
            "a batch being written, or torn by a crash (the next writer cuts it)".to_owned()
        } else {
            why.to_string()
        };
        self.add(
            severity,
            path,
            offset,
            format!("{len} bytes skipped: {why}"),
        );
    }
}

/// The header's length and whether the file is batch-framed, or `None` (reported).
fn header(report: &mut Report, path: &Path, kind: FileKind, bytes: &[u8]) -> Option<(usize, bool)> {
    match FileHeader::decode(kind, bytes) {
        Ok(Some(h)) if (h.header_len as usize) <= bytes.len() => {
            Some((h.header_len as usize, h.flags & FLAG_BATCHES != 0))
        }
        Ok(_) => {
            // Files are created empty and get their header from the first writer under the
            // lock: a process killed in between (a writer rotating, `compact --all` sealing)
            // leaves a file that holds nothing yet. Only other short bytes are damage.
            let magic = kind.magic();
            let n = bytes.len().min(magic.len());
            if bytes.len() < formats::HEADER_LEN && bytes[..n] == magic[..n] {
                report.add(
                    Severity::Note,
                    path,
                    0,
                    format!(
                        "file is {} bytes, its header not written yet (being created, or its creation was cut short): nothing lost",
                        bytes.len()
                    ),
                );
            } else {
                report.add(
                    Severity::Error,
                    path,
                    0,
                    format!("file is {} bytes, shorter than its header", bytes.len()),
                );
            }
            None
        }
        Err(e) => {
            report.add(Severity::Error, path, e.offset, e.kind.to_string());
            None
        }
    }
}

/// Checks every segment of the log in `dir`.
pub fn check_log(dir: &Path) -> Result<Report> {
    let mut report = Report::default();
    let frames = segments::list(dir, FileKind::FrameLog)?;
    let last = frames.last().copied();
    for n in frames {
        let path = segment_path(dir, FileKind::FrameLog, n);
        let bytes = std::fs::read(&path).at(&path)?;
        report.files += 1;
        // Refuses a compact segment in a build without the `compact` feature.
        match crate::pread::decode_header_any(&path, FileKind::FrameLog, &bytes)? {
            #[cfg(feature = "compact")]
            Ok(Some(h)) if h.is_compact() => check_compact_frames(&mut report, &path, &bytes),
            _ => check_frames(&mut report, &path, &bytes, Some(n) == last),
        }
    }
    let data = segments::list(dir, FileKind::FrameData)?;
    let last = data.last().copied();
    for &n in &data {
        check_data_pair(dir, n, Some(n) == last, &mut report)?;
    }
    // An index without its data file.
    for n in segments::list(dir, FileKind::FrameIndex)? {
        if !data.contains(&n) {
            let path = segment_path(dir, FileKind::FrameIndex, n);
            report.add(
                Severity::Error,
                &path,
                0,
                "index file has no paired .framedata file",
            );
        }
    }
    Ok(report)
}

fn check_frames(report: &mut Report, path: &Path, bytes: &[u8], live: bool) {
    let Some((mut pos, mut framed)) = header(report, path, FileKind::FrameLog, bytes) else {
        return;
    };
    let mut unpacked = Vec::new();
    while pos < bytes.len() {
        match Framing::Frames.next_unit(&bytes[pos..], framed, true) {
            Unit::Batch {
                len, body, packed, ..
            } => {
                report.batches += 1;
                let body_at = (pos + BATCH_RECORD_LEN) as u64;
                let mut decoded = 0u32;
                let items = match batch_records(body, packed.as_ref(), body_at, &mut unpacked) {
                    Ok(items) => items,
                    Err(why) => {
                        report.add(Severity::Error, path, pos as u64, why.to_string());
                        pos += len;
                        continue;
                    }
                };
                for item in items {
                    match item {
                        Ok(_) => decoded += 1,
                        Err(e) => report.add(
                            Severity::Error,
                            path,
                            e.offset,
                            format!(
                                "a record in a batch whose checksum holds does not decode: {}",
                                e.kind
                            ),
                        ),
                    }
                }
                let head = match formats::BatchHeader::probe(&bytes[pos..]) {
                    Probe::Valid(h) => h.count,
                    _ => decoded,
                };
                if head != decoded {
                    report.add(
                        Severity::Error,
                        path,
                        pos as u64,
                        format!("batch says {head} records, holds {decoded}"),
                    );
                }
                report.records += u64::from(decoded);
                pos += len;
            }
            Unit::Unframed(len) => {
                if let Unit::Batch { .. } = Framing::Frames.next_unit(&bytes[pos..], true, true) {
                    report.add(
                        Severity::Error,
                        path,
                        12,
                        "the file holds checksummed batches but its header lacks FLAG_BATCHES (a damaged header); reading it as framed",
                    );
                    framed = true;
                    continue;
                }
                report.records += 1;
                pos += len;
            }
            Unit::Damaged { len, why } => {
                report.damaged(path, pos as u64, len, &why, live);
                pos += len;
            }
            Unit::NeedMore => break,
        }
    }
}

/// Checks a compact (version 2) frame log: trailer, index, and every block (header, CRC32C,
/// decompression, decoding).
#[cfg(feature = "compact")]
fn check_compact_frames(report: &mut Report, path: &Path, bytes: &[u8]) {
    use formats::compact::frames::{FileEvent, TRAILER_LEN, Trailer, decode_file, read_index};
    let trailer = Trailer::decode(bytes, bytes.len() as u64);
    match trailer {
        None => report.add(
            Severity::Error,
            path,
            bytes.len().saturating_sub(TRAILER_LEN) as u64,
            "compact file's trailer is damaged: blocks found by walking their headers",
        ),
        Some(t) => {
            let ix = &bytes[t.index_offset as usize..bytes.len() - TRAILER_LEN];
            if read_index(ix, t.index_offset).is_none() {
                report.add(
                    Severity::Error,
                    path,
                    t.index_offset,
                    "compact file's block index is damaged: blocks found by walking their headers",
                );
            }
        }
    }
    let mut records = 0u64;
    let mut damaged = false;
    decode_file(bytes, |e| match e {
        FileEvent::Record(..) => records += 1,
        FileEvent::Damaged(offset, len, why) => {
            damaged = true;
            report.add(
                Severity::Error,
                path,
                offset,
                format!("{len} bytes skipped: compact block: {why}"),
            );
        }
    });
    if let Some(t) = trailer
        && !damaged
        && t.records != records
    {
        report.add(
            Severity::Error,
            path,
            bytes.len().saturating_sub(TRAILER_LEN) as u64,
            format!(
                "trailer says {} records, the blocks hold {records}",
                t.records
            ),
        );
    }
    report.records += records;
}

fn check_data_pair(dir: &Path, n: u32, live: bool, report: &mut Report) -> Result<()> {
    let data_path = segment_path(dir, FileKind::FrameData, n);
    let bytes = std::fs::read(&data_path).at(&data_path)?;
    report.files += 1;
    // Refuses a compact segment in a build without the `compact` feature.
    match crate::pread::decode_header_any(&data_path, FileKind::FrameData, &bytes)? {
        #[cfg(feature = "compact")]
        Ok(Some(h)) if h.is_compact() => {
            check_compact_data(report, &data_path, &bytes);
            let idx_path = segment_path(dir, FileKind::FrameIndex, n);
            if idx_path.exists() {
                report.add(
                    Severity::Note,
                    &idx_path,
                    0,
                    "index left beside a compact data file by an interrupted compaction: ignored (the next compaction deletes it)",
                );
            }
            return Ok(());
        }
        _ => {}
    }
    // Start offset of every whole, valid data entry, and the markers of valid batches.
    let mut starts: HashMap<u32, FrameKey> = HashMap::new();
    let mut markers: HashMap<u32, DataMarker> = HashMap::new();
    let mut lost = std::collections::HashSet::new();
    let mut framed = false;
    if let Some((mut pos, f)) = header(report, &data_path, FileKind::FrameData, &bytes) {
        framed = f;
        let mut framed_now = f;
        while pos < bytes.len() {
            match Framing::Data.next_unit(&bytes[pos..], framed_now, true) {
                Unit::Batch { len, body, .. } => {
                    report.batches += 1;
                    if let Probe::Valid(m) = DataMarker::probe(&bytes[pos..]) {
                        markers.insert(pos as u32, m);
                    }
                    check_entries(report, &data_path, body, pos + DATA_MARKER_LEN, &mut starts);
                    pos += len;
                }
                Unit::Unframed(len) => {
                    if let Unit::Batch { .. } = Framing::Data.next_unit(&bytes[pos..], true, true) {
                        report.add(
                            Severity::Error,
                            &data_path,
                            12,
                            "the file holds checksummed batches but its header lacks FLAG_BATCHES (a damaged header); reading it as framed",
                        );
                        (framed, framed_now) = (true, true);
                        continue;
                    }
                    check_entries(report, &data_path, &bytes[pos..pos + len], pos, &mut starts);
                    pos += len;
                }
                Unit::Damaged { len, why } => {
                    // A batch whose header holds but whose entries do not: its index entries
                    // are still checked against the marker, but not against the lost entries.
                    if why == DamageKind::BadChecksum
                        && let Probe::Valid(m) = DataMarker::probe(&bytes[pos..])
                    {
                        markers.insert(pos as u32, m);
                        lost.insert(pos as u32);
                    }
                    report.damaged(&data_path, pos as u64, len, &why, live);
                    pos += len;
                }
                Unit::NeedMore => break,
            }
        }
    }
    let idx_path = segment_path(dir, FileKind::FrameIndex, n);
    let idx = match std::fs::read(&idx_path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // A pair is created data file first: a process killed before it created the
            // index (a writer rotating, `framelog compact --all` sealing) leaves a data file
            // with no entries and no index. Nothing is lost; the next writer creates the index.
            let (severity, message) = if bytes.len() <= formats::HEADER_LEN {
                (
                    Severity::Note,
                    "data file with no entries and no .frameidx yet (its creation was cut short): nothing lost",
                )
            } else {
                (Severity::Error, "data file has no paired .frameidx file")
            };
            report.add(severity, &data_path, 0, message);
            return Ok(());
        }
        Err(e) => return Err(crate::Error::io(&idx_path, e)),
    };
    report.files += 1;
    let Some((start, _)) = header(report, &idx_path, FileKind::FrameIndex, &idx) else {
        return Ok(());
    };
    if framed {
        let data = DataFacts {
            markers: &markers,
            lost: &lost,
            starts: &starts,
        };
        check_framed_index(report, &idx_path, &idx, start, &data, live);
    } else {
        check_unframed_index(report, &idx_path, &idx, start, &starts);
    }
    Ok(())
}

/// Checks the framing, checksums and index of data segment `n` (sealed), not its documents'
/// BSON: what the compactor needs, since it copies documents as bytes.
#[cfg(feature = "compact")]
pub(crate) fn check_data_framing(dir: &Path, n: u32, report: &mut Report) -> Result<()> {
    report.skip_documents = true;
    check_data_pair(dir, n, false, report)
}

/// Walks the data entries in `bytes` (at `base` in the file), parsing each document.
fn check_entries(
    report: &mut Report,
    path: &Path,
    bytes: &[u8],
    base: usize,
    starts: &mut HashMap<u32, FrameKey>,
) {
    let mut pos = 0;
    while pos < bytes.len() {
        match decode_data_entry(&bytes[pos..]) {
            Ok(Some(entry)) => {
                if let Some(Err(e)) = (!report.skip_documents).then(|| entry.parse()) {
                    let at = (base + pos) as u64 + e.offset;
                    report.add(Severity::Error, path, at, e.kind.to_string());
                }
                starts.insert((base + pos) as u32, entry.key);
                report.data_entries += 1;
                pos += entry.encoded_len();
            }
            Ok(None) => {
                let at = (base + pos) as u64;
                report.add(Severity::Error, path, at, "data entry runs past its batch");
                return;
            }
            Err(e) => {
                let at = (base + pos) as u64 + e.offset;
                report.add(Severity::Error, path, at, e.kind.to_string());
                return;
            }
        }
    }
}

/// Checks one index entry against the data entries found.
fn check_seek(
    report: &mut Report,
    path: &Path,
    offset: u64,
    e: formats::IndexEntry,
    starts: &HashMap<u32, FrameKey>,
) {
    match starts.get(&e.seek) {
        Some(k) if *k == e.key => {}
        Some(k) => report.add(
            Severity::Error,
            path,
            offset,
            format!(
                "entry for {} points at seek {}, which holds data of {k}",
                e.key, e.seek
            ),
        ),
        None => report.add(
            Severity::Error,
            path,
            offset,
            format!(
                "entry for {} points at seek {}, which is not the start of a valid data entry",
                e.key, e.seek
            ),
        ),
    }
}

fn check_unframed_index(
    report: &mut Report,
    path: &Path,
    idx: &[u8],
    start: usize,
    starts: &HashMap<u32, FrameKey>,
) {
    for (i, chunk) in idx[start..].chunks(INDEX_ENTRY_LEN).enumerate() {
        let offset = (start + i * INDEX_ENTRY_LEN) as u64;
        let Some(e) = decode_index_entry(chunk) else {
            report.add(
                Severity::Note,
                path,
                offset,
                format!("{} bytes: partial index entry at the end", chunk.len()),
            );
            break;
        };
        report.index_entries += 1;
        check_seek(report, path, offset, e, starts);
    }
}

/// The index bytes of one whole batch at the front of `idx`, if they match a valid marker.
fn index_batch_len(idx: &[u8], markers: &HashMap<u32, DataMarker>) -> Option<usize> {
    let own = decode_index_entry(idx)?;
    let m = markers.get(&own.seek).filter(|_| own.key.id == 0)?;
    let need = (1 + m.count as usize) * INDEX_ENTRY_LEN;
    let body = u64::from(own.seek) + DATA_MARKER_LEN as u64;
    check_index_entries(m, idx.get(INDEX_ENTRY_LEN..need)?, body).map(|_| need)
}

/// What the walk of a data file found, for checking its index.
struct DataFacts<'a> {
    /// Markers of batches whose header holds, by offset.
    markers: &'a HashMap<u32, DataMarker>,
    /// Offsets of those whose entries fail their checksum.
    lost: &'a std::collections::HashSet<u32>,
    /// Start offsets of valid data entries and their keys.
    starts: &'a HashMap<u32, FrameKey>,
}

fn check_framed_index(
    report: &mut Report,
    path: &Path,
    idx: &[u8],
    start: usize,
    data: &DataFacts<'_>,
    live: bool,
) {
    let (markers, lost, starts) = (data.markers, data.lost, data.starts);
    let mut indexed = std::collections::HashSet::new();
    let mut pos = start;
    while pos < idx.len() {
        if let Some(need) = index_batch_len(&idx[pos..], markers) {
            let own = decode_index_entry(&idx[pos..]).expect("checked");
            indexed.insert(own.seek);
            if lost.contains(&own.seek) {
                // Its data batch is damaged (reported there); the entries point into it.
                pos += need;
                continue;
            }
            for k in 1..need / INDEX_ENTRY_LEN {
                let at = pos + k * INDEX_ENTRY_LEN;
                let e = decode_index_entry(&idx[at..]).expect("whole");
                report.index_entries += 1;
                check_seek(report, path, at as u64, e, starts);
            }
            pos += need;
            continue;
        }
        // A batch's entries that do not all exist yet: being written, or torn.
        let own = decode_index_entry(&idx[pos..]);
        let marker = own.and_then(|o| markers.get(&o.seek).filter(|_| o.key.id == 0));
        let need = marker.map(|m| (1 + m.count as usize) * INDEX_ENTRY_LEN);
        if own.is_none() || need.is_some_and(|n| pos + n > idx.len()) {
            report.damaged(
                path,
                pos as u64,
                idx.len() - pos,
                &DamageKind::TornTail,
                live,
            );
            break;
        }
        let to = (pos + 1..idx.len())
            .find(|&q| index_batch_len(&idx[q..], markers).is_some())
            .unwrap_or(idx.len());
        report.damaged(path, pos as u64, to - pos, &DamageKind::BadIndex, live);
        // Name the entries that are wrong, where the batch's marker is known.
        if let Some(need) = need {
            for at in (pos + INDEX_ENTRY_LEN..pos + need).step_by(INDEX_ENTRY_LEN) {
                let e = decode_index_entry(&idx[at..]).expect("whole");
                check_seek(report, path, at as u64, e, starts);
            }
        }
        pos = to;
    }
    let mut unindexed: Vec<_> = markers.keys().filter(|s| !indexed.contains(s)).collect();
    unindexed.sort();
    for seek in unindexed {
        let data_path = path.with_extension(FileKind::FrameData.extension());
        report.add(
            if live {
                Severity::Note
            } else {
                Severity::Error
            },
            &data_path,
            u64::from(*seek),
            "data batch has no index entries (the next writer indexes it again)",
        );
    }
}

/// Checks a compact (version 2) data file: trailer, dictionary and index, then every data
/// block (header, checksum, decompression, entries, BSON) and that every index entry points
/// at the start of an entry with its key.
#[cfg(feature = "compact")]
fn check_compact_data(report: &mut Report, path: &Path, bytes: &[u8]) {
    use formats::compact::data::{DataFile, block_entries};
    let mut file = match DataFile::parse(bytes) {
        Ok(f) => f,
        Err(e) => {
            report.add(
                Severity::Error,
                path,
                e.offset,
                format!(
                    "{}: the file's index is unreadable, so its {} bytes of data are lost",
                    e.kind,
                    bytes.len()
                ),
            );
            return;
        }
    };
    let index = std::mem::take(&mut file.index.entries);
    report.index_entries += index.len() as u64;
    let blocks = file.index.blocks.clone();
    let end_of_blocks = file.trailer.index_offset;
    let mut starts: HashMap<(u32, u32), FrameKey> = HashMap::new();
    let mut lost = std::collections::HashSet::new();
    for (b, &at) in blocks.iter().enumerate() {
        let next = blocks.get(b + 1).copied().unwrap_or(end_of_blocks);
        match file.block(b) {
            Ok((h, _, raw)) => {
                report.batches += 1;
                if at + h.total_len() != next {
                    report.add(
                        Severity::Error,
                        path,
                        at + h.total_len(),
                        format!(
                            "{} bytes after data block {b} belong to no block",
                            next - (at + h.total_len())
                        ),
                    );
                }
                match block_entries(&raw, h.count) {
                    Ok(entries) => {
                        for (offset, e) in entries {
                            if let Err(err) = e.parse() {
                                report.add(
                                    Severity::Error,
                                    path,
                                    at,
                                    format!(
                                        "data block {b}, entry of {} at byte {offset} of the block: {}",
                                        e.key, err.kind
                                    ),
                                );
                            }
                            starts.insert((b as u32, offset), e.key);
                            report.data_entries += 1;
                        }
                    }
                    Err(e) => {
                        lost.insert(b as u32);
                        report.add(
                            Severity::Error,
                            path,
                            at,
                            format!("data block {b} (byte {} of its body): {}", e.offset, e.kind),
                        );
                    }
                }
            }
            Err(e) => {
                lost.insert(b as u32);
                report.add(
                    Severity::Error,
                    path,
                    e.offset,
                    format!(
                        "{} bytes skipped: data block {b}: {}",
                        next.saturating_sub(at),
                        e.kind
                    ),
                );
            }
        }
    }
    for (i, e) in index.iter().enumerate() {
        if lost.contains(&e.block) {
            // Its block is damaged (reported above).
            continue;
        }
        match starts.get(&(e.block, e.offset)) {
            Some(k) if *k == e.key => {}
            found => report.add(
                Severity::Error,
                path,
                end_of_blocks,
                format!(
                    "index entry {i} for {} points at byte {} of data block {}, which {}",
                    e.key,
                    e.offset,
                    e.block,
                    match found {
                        Some(k) => format!("holds data of {k}"),
                        None => "is not the start of a data entry".to_owned(),
                    }
                ),
            ),
        }
    }
}
