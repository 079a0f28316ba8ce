//! Validating every file of a log: headers, record framing, index seeks, BSON documents.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use formats::{
    Decoded, FileHeader, FileKind, FrameKey, INDEX_ENTRY_LEN, decode_data_entry,
    decode_index_entry, decode_record,
};

use crate::error::{IoContext, Result};
use crate::segments::{self, segment_path};

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Harmless: e.g. a batch being written, or a torn tail the next writer cuts.
    Note,
    /// The file does not follow the format: data after this point is unreadable.
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
    /// Everything found, in file order.
    pub problems: Vec<Problem>,
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
}

fn header(report: &mut Report, path: &Path, kind: FileKind, bytes: &[u8]) -> Option<usize> {
    match FileHeader::decode(kind, bytes) {
        Ok(Some(h)) if (h.header_len as usize) <= bytes.len() => Some(h.header_len as usize),
        Ok(_) => {
            report.add(
                Severity::Error,
                path,
                0,
                format!("file is {} bytes, shorter than its header", bytes.len()),
            );
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
        let Some(mut pos) = header(&mut report, &path, FileKind::FrameLog, &bytes) else {
            continue;
        };
        loop {
            match decode_record(&bytes[pos..]) {
                Ok(Decoded::Record(_, len)) => {
                    report.records += 1;
                    pos += len;
                }
                Ok(Decoded::NeedMore) => {
                    if pos < bytes.len() {
                        let why = if Some(n) == last {
                            "partial record at the end (a batch being written, or torn by a crash; the next writer cuts it)"
                        } else {
                            "partial record at the end of a closed segment (torn by a crash; readers skip it)"
                        };
                        report.add(
                            Severity::Note,
                            &path,
                            pos as u64,
                            format!("{} bytes: {why}", bytes.len() - pos),
                        );
                    }
                    break;
                }
                Err(e) => {
                    report.add(
                        Severity::Error,
                        &path,
                        pos as u64 + e.offset,
                        e.kind.to_string(),
                    );
                    break;
                }
            }
        }
    }
    for n in segments::list(dir, FileKind::FrameData)? {
        check_data_pair(dir, n, &mut report)?;
    }
    // An index without its data file.
    for n in segments::list(dir, FileKind::FrameIndex)? {
        if !segments::exists(dir, FileKind::FrameData, n) {
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

fn check_data_pair(dir: &Path, n: u32, report: &mut Report) -> Result<()> {
    let data_path = segment_path(dir, FileKind::FrameData, n);
    let bytes = std::fs::read(&data_path).at(&data_path)?;
    report.files += 1;
    let mut starts: HashMap<u32, FrameKey> = HashMap::new();
    if let Some(mut pos) = header(report, &data_path, FileKind::FrameData, &bytes) {
        loop {
            match decode_data_entry(&bytes[pos..]) {
                Ok(Some(entry)) => {
                    if let Err(e) = entry.parse() {
                        report.add(
                            Severity::Error,
                            &data_path,
                            pos as u64 + e.offset,
                            e.kind.to_string(),
                        );
                    }
                    starts.insert(pos as u32, entry.key);
                    report.data_entries += 1;
                    pos += entry.encoded_len();
                }
                Ok(None) => {
                    if pos < bytes.len() {
                        report.add(
                            Severity::Note,
                            &data_path,
                            pos as u64,
                            format!("{} bytes: partial data entry at the end", bytes.len() - pos),
                        );
                    }
                    break;
                }
                Err(e) => {
                    report.add(
                        Severity::Error,
                        &data_path,
                        pos as u64 + e.offset,
                        e.kind.to_string(),
                    );
                    break;
                }
            }
        }
    }
    let idx_path = segment_path(dir, FileKind::FrameIndex, n);
    let idx = match std::fs::read(&idx_path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            report.add(
                Severity::Error,
                &data_path,
                0,
                "data file has no paired .frameidx file",
            );
            return Ok(());
        }
        Err(e) => return Err(crate::Error::io(&idx_path, e)),
    };
    report.files += 1;
    let Some(start) = header(report, &idx_path, FileKind::FrameIndex, &idx) else {
        return Ok(());
    };
    let body = &idx[start..];
    for (i, chunk) in body.chunks(INDEX_ENTRY_LEN).enumerate() {
        let offset = (start + i * INDEX_ENTRY_LEN) as u64;
        let Some(e) = decode_index_entry(chunk) else {
            report.add(
                Severity::Note,
                &idx_path,
                offset,
                format!("{} bytes: partial index entry at the end", chunk.len()),
            );
            break;
        };
        report.index_entries += 1;
        match starts.get(&e.seek) {
            Some(k) if *k == e.key => {}
            Some(k) => report.add(
                Severity::Error,
                &idx_path,
                offset,
                format!(
                    "entry for {} points at seek {}, which holds data of {k}",
                    e.key, e.seek
                ),
            ),
            None => report.add(
                Severity::Error,
                &idx_path,
                offset,
                format!(
                    "entry for {} points at seek {}, which is not the start of a data entry",
                    e.key, e.seek
                ),
            ),
        }
    }
    Ok(())
}
