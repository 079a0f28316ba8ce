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
            pack: false,
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

/// Random plots, messages (with and without fields) and frame allocations among frames,
/// written in random batches to small segments: a viewer gets exactly the records written, in
/// order, from raw segments and again once the sealed ones are compacted.
#[test]
fn plots_messages_and_allocations_reach_a_viewer_exactly_raw_and_compacted() {
    use formats::{FrameAlloc, FrameEnd, FrameStart, Level, Message, Plot, PlotMode, PlotUnit};
    use rand::{Rng, SeedableRng};
    for seed in 0..6u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let w = LogWriter::open_with(
            dir.path(),
            WriterOptions {
                frames_segment_bytes: 16 << 10,
                ..Default::default()
            },
        )
        .unwrap();
        let wk = w.worker();
        let names = ["queue depth", "rss", "cpu", "数"];
        let texts: Vec<String> = (0..20)
            .map(|i| format!("message {i} {}", "é".repeat(rng.gen_range(0..40))))
            .collect();
        let fields = bson::to_vec(&bson::doc! { "user": 42_i64, "path": "/a" }).unwrap();
        let mut written = Vec::new();
        let (mut t, mut next, mut open) = (1_000_000u64, 1u32, Vec::new());
        for _ in 0..40 {
            let mut batch = Vec::new();
            for _ in 0..rng.gen_range(1..60) {
                t += rng.gen_range(0..1000);
                let rec = match rng.gen_range(0..6) {
                    0 => {
                        open.push(next);
                        next += 1;
                        Record::Start(FrameStart {
                            id: next - 1,
                            worker: wk,
                            timestamp: t,
                            context: open[0],
                            category: formats::Category::HTTP,
                            label: "request",
                            parent: formats::Parent::Root,
                        })
                    }
                    1 if !open.is_empty() => {
                        let id = open.pop().unwrap();
                        if rng.gen_bool(0.5) {
                            let a = FrameAlloc {
                                id,
                                worker: wk,
                                timestamp: t,
                                allocs: rng.r#gen::<u64>() >> rng.gen_range(0..64),
                                alloc_bytes: rng.r#gen(),
                                frees: rng.gen_range(0..100),
                                freed_bytes: rng.gen_range(0..1 << 20),
                            };
                            Record::FrameAlloc(a).encode_to_vec(&mut batch);
                            Record::FrameAlloc(a).encode_to_vec(&mut written);
                        }
                        Record::End(FrameEnd {
                            id,
                            worker: wk,
                            timestamp: t,
                        })
                    }
                    2 | 3 => Record::Plot(Plot {
                        worker: wk,
                        timestamp: t,
                        value: if rng.gen_bool(0.1) {
                            f64::NAN
                        } else {
                            rng.gen_range(-1e9..1e9)
                        },
                        mode: if rng.gen_bool(0.5) {
                            PlotMode::Summed
                        } else {
                            PlotMode::Value
                        },
                        unit: PlotUnit(rng.gen_range(0..5)),
                        name: names[rng.gen_range(0..names.len())],
                    }),
                    _ => {
                        let frame = open.last().copied().unwrap_or(0);
                        Record::Message(Message {
                            frame,
                            worker: wk,
                            timestamp: t,
                            context: open.first().copied().unwrap_or(0),
                            level: Level(rng.gen_range(1..6)),
                            text: &texts[rng.gen_range(0..texts.len())],
                            fields: rng.gen_bool(0.3).then_some(&fields[..]),
                        })
                    }
                };
                rec.encode_to_vec(&mut batch);
                rec.encode_to_vec(&mut written);
            }
            w.append_frames(&batch).unwrap();
        }
        drop(w);
        let expect = written;
        // Each record as text (the writer's own worker_info and thread records are not ours
        // to compare), so that a difference names the record.
        let only_ours = |bytes: &[u8]| -> Vec<String> {
            formats::RecordIter::new(bytes, 0)
                .map(|item| item.unwrap().1)
                .filter(|r| !matches!(r, Record::WorkerInfo(_) | Record::ThreadInfo(_)))
                .map(|r| format!("{r:?}"))
                .collect()
        };
        let expect = only_ours(&expect);
        let same = |got: Vec<String>, what: &str| {
            assert_eq!(got.len(), expect.len(), "seed {seed}, {what}: record count");
            if let Some(i) = (0..got.len()).find(|&i| got[i] != expect[i]) {
                panic!(
                    "seed {seed}, {what}: record {i}: {} != {}",
                    got[i], expect[i]
                );
            }
        };
        // A viewer that reads Records version 2 (recorded parents).
        let mut s = ViewerSession::new(dir.path());
        s.send_parents(true);
        s.read(ReadFrom::Start);
        let (records, _) = drain(&mut s, rng.gen_range(2_000..50_000));
        same(only_ours(&records), "raw segments");
        // Compacted (every segment, sealed first): the same records.
        framelog::compact::compact_log(
            dir.path(),
            &framelog::compact::CompactOptions {
                all: true,
                ..Default::default()
            },
        )
        .unwrap();
        let segs = framelog::segments::list(dir.path(), formats::FileKind::FrameLog).unwrap();
        let compact = segs
            .iter()
            .filter(|&&n| {
                let p =
                    framelog::segments::segment_path(dir.path(), formats::FileKind::FrameLog, n);
                let b = std::fs::read(p).unwrap();
                matches!(
                    u16::from_le_bytes([b[8], b[9]]),
                    formats::COMPACT_PLOTS_VERSION | formats::COMPACT_PACKED_VERSION
                )
            })
            .count();
        assert!(
            compact > 1,
            "seed {seed}: {compact} of {} segments compacted",
            segs.len()
        );
        let mut s = ViewerSession::new(dir.path());
        s.send_parents(true);
        s.read(ReadFrom::Start);
        let (records, _) = drain(&mut s, rng.gen_range(2_000..50_000));
        same(only_ours(&records), "compacted");
    }
}
