//! A viewer's stream, without sockets: the records it gets are the log's, credit bounds what
//! it is sent, data requests are answered, damage and writers are reported.

mod common;

use formats::protocol::viewer::{DataAnswer, ReadFrom, ToViewer};
use formats::{FrameKey, Record};
use framelog::viewer::ViewerSession;
use framelog::{LogReader, LogWriter, WriterOptions};

/// Every (segment, offset, record bytes) the log delivers, as a reader sees it.
fn log_records(dir: &std::path::Path) -> Vec<u8> {
    let mut out = Vec::new();
    LogReader::open(dir)
        .unwrap()
        .read_available(|_, r| r.encode_to_vec(&mut out))
        .unwrap();
    out
}

/// Steps `s` until it reports caught up, granting `grant` bytes whenever credit runs out;
/// returns the record bytes received and every decoded message kind.
fn drain(s: &mut ViewerSession, grant: u32) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut records = Vec::new();
    let mut messages = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        assert!(std::time::Instant::now() < deadline, "never caught up");
        if !s.can_send() {
            s.credit(grant);
        }
        let mut caught_up = false;
        s.step(&mut |m| {
            match ToViewer::decode(&m).expect("the server's messages decode") {
                ToViewer::Records { records: r, .. } => {
                    assert!(r.len() <= formats::protocol::viewer::MAX_RECORDS_BYTES);
                    records.extend_from_slice(r);
                }
                ToViewer::Status(st) => caught_up |= st.caught_up,
                _ => {}
            }
            messages.push(m);
        })
        .unwrap();
        if caught_up {
            return (records, messages);
        }
    }
}

#[test]
fn a_viewer_gets_the_logs_records_within_its_credit_and_its_data_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open_with(
        dir.path(),
        WriterOptions {
            frames_segment_bytes: 64 << 10,
            ..Default::default()
        },
    )
    .unwrap();
    for i in 0..20 {
        common::write_with_data(&w, 1 + i * 500, 500);
    }
    let mut s = ViewerSession::new(dir.path());
    // Nothing before Read, even with credit.
    s.credit(1 << 20);
    let mut sent = 0;
    s.step(&mut |_| sent += 1).unwrap();
    assert_eq!(sent, 0);

    s.read(ReadFrom::Start);
    // A small credit: many Records messages, none far past the credit.
    let (records, messages) = drain(&mut s, 10_000);
    assert_eq!(
        records,
        log_records(dir.path()),
        "the same bytes as the log, in order"
    );
    let records_messages = messages.iter().filter(|m| m[0] == 18).count();
    assert!(records_messages > 1, "the small credit split the stream");

    // Data on request, merged; a frame without data says so.
    let key = FrameKey::new(w.worker(), 777);
    let reply = s.data(7, key);
    match ToViewer::decode(&reply).unwrap() {
        ToViewer::DataReply {
            request: 7,
            answer: DataAnswer::Found(doc),
        } => {
            let doc = bson::Document::from_reader(doc).unwrap();
            assert_eq!(doc.get_str("sql").unwrap(), "SELECT 777");
        }
        other => panic!("{other:?}"),
    }
    let reply = s.data(8, FrameKey::new(w.worker(), 999_999));
    assert!(matches!(
        ToViewer::decode(&reply).unwrap(),
        ToViewer::DataReply {
            request: 8,
            answer: DataAnswer::None
        }
    ));

    // The log grows: only the new records come, and the writer is reported while it lives.
    common::write_with_data(&w, 20_001, 100);
    let (more, messages) = drain(&mut s, 1 << 20);
    let all = log_records(dir.path());
    assert_eq!(more, all[records.len()..]);
    let writers: Vec<_> = messages
        .iter()
        .filter_map(|m| match ToViewer::decode(m).unwrap() {
            ToViewer::Status(st) => Some(st.writers),
            _ => None,
        })
        .collect();
    assert!(
        writers.iter().any(|w2| w2 == &vec![w.worker()]),
        "{writers:?}"
    );
    drop(w);
}

#[test]
fn without_credit_nothing_is_sent_and_nothing_is_buffered() {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open(dir.path()).unwrap();
    common::write_with_data(&w, 1, 1000);
    let mut s = ViewerSession::new(dir.path());
    s.read(ReadFrom::Start);
    s.credit(100);
    let mut record_bytes = 0;
    for _ in 0..5 {
        s.step(&mut |m| {
            if let ToViewer::Records { records, .. } = ToViewer::decode(&m).unwrap() {
                record_bytes += records.len();
            }
        })
        .unwrap();
    }
    // The credit (100 bytes) may be overdrawn by at most one message, which at this size
    // is one read step (256 KiB) of records: never the whole log past it.
    assert!(
        record_bytes > 0 && record_bytes <= 256 << 10,
        "{record_bytes}"
    );
    assert!(!s.can_send());
}

#[test]
fn a_stream_from_a_time_leaves_out_earlier_starts_and_damage_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let w = LogWriter::open(dir.path()).unwrap();
    common::write_with_data(&w, 1, 2000);
    drop(w);
    // Frames of `frames_batch` start at 1_000_000 + id * 100.
    let mut s = ViewerSession::new(dir.path());
    s.read(ReadFrom::Time(1_000_000 + 1500 * 100));
    let (records, _) = drain(&mut s, 1 << 20);
    let mut starts = Vec::new();
    for item in formats::RecordIter::new(&records, 0) {
        if let (_, Record::Start(st)) = item.unwrap() {
            starts.push(st.id);
        }
    }
    assert_eq!(starts.first(), Some(&1500));
    assert_eq!(starts.len(), 501);

    // Damage in the middle of the frame log: reported by name and offset, the rest still sent.
    let seg = dir.path().join("frames-000001.framelog");
    let mut bytes = std::fs::read(&seg).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 64] {
        *b ^= 0x5a;
    }
    std::fs::write(&seg, &bytes).unwrap();
    let mut s = ViewerSession::new(dir.path());
    s.read(ReadFrom::Start);
    let (records, messages) = drain(&mut s, 1 << 20);
    let damage: Vec<_> = messages
        .iter()
        .filter_map(|m| match ToViewer::decode(m).unwrap() {
            ToViewer::Damage(d) => Some(d),
            _ => None,
        })
        .collect();
    assert_eq!(damage.len(), 1, "{damage:?}");
    assert_eq!(damage[0].file, "frames-000001.framelog");
    assert!(damage[0].offset <= mid as u64 && damage[0].offset + damage[0].len >= mid as u64 + 64);
    assert_eq!(records, log_records(dir.path()));
    assert!(!records.is_empty());
}
