//! Helpers for writing test logs.
#![allow(dead_code)]

use formats::{BatchHeader, Category, FrameEnd, FrameKey, FrameStart, Record};
use framelog::{DataBatch, LogReader, LogWriter};

/// Encodes `n` nested-free frames `first..first+n` of `worker` into one batch.
pub fn frames_batch(worker: u8, first: u32, n: u32, label: &str) -> Vec<u8> {
    let mut buf = vec![0u8; n as usize * (40 + label.len())];
    let mut len = 0;
    for id in first..first + n {
        let t = 1_000_000 + u64::from(id) * 100;
        len += FrameStart {
            parent: formats::Parent::NotRecorded,
            id,
            worker,
            timestamp: t,
            context: id,
            category: Category::DATABASE,
            label,
        }
        .encode(&mut buf[len..])
        .unwrap();
        len += FrameEnd {
            id,
            worker,
            timestamp: t + 10 + u64::from(id % 7),
        }
        .encode(&mut buf[len..])
        .unwrap();
    }
    buf.truncate(len);
    buf
}

/// Every (worker, id, type) of the log's starts and ends, in file order.
pub fn read_frames(dir: &std::path::Path) -> Vec<(FrameKey, u8)> {
    let mut out = Vec::new();
    LogReader::open(dir)
        .unwrap()
        .read_available(|_, r| {
            if matches!(r, Record::Start(_) | Record::End(_)) {
                out.push((FrameKey::new(r.worker(), r.id()), r.type_byte()));
            }
        })
        .unwrap();
    out
}

/// Writes `n` frames with data on every one.
pub fn write_with_data(w: &LogWriter, first: u32, n: u32) {
    w.append_frames(&frames_batch(w.worker(), first, n, "db/query"))
        .unwrap();
    let mut batch = DataBatch::new();
    for id in first..first + n {
        let doc =
            formats::to_document(&serde_json::json!({"sql": format!("SELECT {id}"), "n": id}))
                .unwrap();
        batch.push(FrameKey::new(w.worker(), id), &doc);
    }
    w.append_data(&batch).unwrap();
}

/// `records` framed as a writer frames them (batch records before runs of records).
pub fn framed(worker: u8, records: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    formats::split_records(records, formats::FRAMES_BATCH_TARGET, |r, count| {
        out.extend_from_slice(
            &BatchHeader::for_records(worker, 1, &records[r.clone()], count).encode(),
        );
        out.extend_from_slice(&records[r]);
    })
    .unwrap();
    out
}

/// Two framed data batches (marker + one entry each) for `keys`, the first starting at
/// `seek` in its data file: the bytes of each.
pub fn data_batches(worker: u8, keys: &[(u8, u32); 2], seek: u64) -> (Vec<u8>, Vec<u8>) {
    let mut out = Vec::new();
    let mut at = seek;
    for &(w, id) in keys {
        let doc = formats::to_document(&serde_json::json!({"n": id})).unwrap();
        let mut body = Vec::new();
        formats::encode_data_entry(&mut body, FrameKey::new(w, id), &doc);
        let marker = formats::frame_data_batch(
            worker,
            &body,
            &[(FrameKey::new(w, id), 0)],
            at,
            &mut Vec::new(),
        );
        let mut bytes = marker.encode().to_vec();
        bytes.extend_from_slice(&body);
        at += bytes.len() as u64;
        out.push(bytes);
    }
    let second = out.pop().unwrap();
    (out.pop().unwrap(), second)
}

/// Runs the `framelog` binary with `args` to completion.
pub fn framelog(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_framelog"))
        .args(args)
        .output()
        .unwrap()
}

/// Bytes of a process's output as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
