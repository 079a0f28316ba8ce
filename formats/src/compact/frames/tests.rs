use super::*;
use crate::record::RecordIter;
use proptest::prelude::*;

/// An owned record, for generating logs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Own {
    Start(u32, u8, u64, u32, u8, String, Parent),
    End(u32, u8, u64),
    Dropped(u8, u64, u64),
    Worker(u8, u64, u32, String),
    Thread(u8, u32, u64, String),
    Unknown(u32, u8, u8, u64, Vec<u8>),
    Plot(u8, u64, u64, bool, u8, String),
    Message(u32, u8, u64, u32, u8, String, Option<Vec<u8>>),
    Alloc(u32, u8, u64, [u64; 4]),
    Polls(u32, u8, u64, [u64; 7]),
    Slow(u32, u8, u64, u64),
}

impl Own {
    fn record(&self) -> Record<'_> {
        match self {
            Own::Start(id, w, t, c, cat, l, p) => Record::Start(FrameStart {
                id: *id,
                worker: *w,
                timestamp: *t,
                context: *c,
                category: Category(*cat),
                label: l,
                parent: *p,
            }),
            Own::End(id, w, t) => Record::End(FrameEnd {
                id: *id,
                worker: *w,
                timestamp: *t,
            }),
            Own::Dropped(w, t, c) => Record::Dropped(Dropped {
                worker: *w,
                timestamp: *t,
                count: *c,
            }),
            Own::Worker(w, t, pid, name) => Record::WorkerInfo(WorkerInfo {
                worker: *w,
                timestamp: *t,
                pid: *pid,
                name,
            }),
            Own::Thread(w, th, t, name) => Record::ThreadInfo(ThreadInfo {
                worker: *w,
                thread: *th,
                timestamp: *t,
                name,
            }),
            Own::Unknown(id, w, k, t, p) => Record::Unknown(Extension {
                id: *id,
                worker: *w,
                kind: *k,
                timestamp: *t,
                payload: p,
            }),
            Own::Plot(w, t, bits, summed, unit, name) => Record::Plot(Plot {
                worker: *w,
                timestamp: *t,
                value: f64::from_bits(*bits),
                mode: if *summed {
                    crate::PlotMode::Summed
                } else {
                    crate::PlotMode::Value
                },
                unit: crate::PlotUnit(*unit),
                name,
            }),
            Own::Message(id, w, t, ctx, level, text, fields) => Record::Message(Message {
                frame: *id,
                worker: *w,
                timestamp: *t,
                context: *ctx,
                level: crate::Level(*level),
                text,
                fields: fields.as_deref(),
            }),
            Own::Alloc(id, w, t, [a, ab, f, fb]) => Record::FrameAlloc(FrameAlloc {
                id: *id,
                worker: *w,
                timestamp: *t,
                allocs: *a,
                alloc_bytes: *ab,
                frees: *f,
                freed_bytes: *fb,
            }),
            Own::Polls(id, w, t, [flags, polls, busy_ns, queued_ns, longest, first, slow]) => {
                Record::FramePolls(crate::FramePolls {
                    id: *id,
                    worker: *w,
                    timestamp: *t,
                    flags: *flags,
                    polls: *polls,
                    busy_ns: *busy_ns,
                    queued_ns: *queued_ns,
                    longest_poll_ns: *longest,
                    first_poll_ns: *first,
                    slow_polls: *slow,
                })
            }
            Own::Slow(id, w, t, d) => Record::SlowPoll(crate::SlowPoll {
                id: *id,
                worker: *w,
                timestamp: *t,
                duration_ns: *d,
            }),
        }
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn text(rng: &mut Rng, max: usize) -> String {
    const CHARS: [&str; 6] = ["a", "/", "é", "数", "🦀", "Z"];
    let mut s = String::new();
    let n = rng.below(max as u64 + 1) as usize;
    while s.len() < n {
        let c = CHARS[rng.below(6) as usize];
        if s.len() + c.len() > max {
            break;
        }
        s.push_str(c);
    }
    s
}

/// A random log: several workers and threads, nesting, ends before starts and on other
/// threads, open frames, dropped markers, infos, unknown extensions, id wrap; with
/// `parents`, starts with parents too (most the innermost open frame, some roots, some
/// frames elsewhere, some not recorded).
fn random_log(seed: u64, n: usize) -> Vec<(u64, Own)> {
    random_log_with(seed, n, false)
}

fn random_log_with(seed: u64, n: usize, parents: bool) -> Vec<(u64, Own)> {
    let mut rng = Rng(seed | 1);
    let workers = 1 + rng.below(4) as u8;
    let wrap = rng.below(3) == 0;
    let mut next_id: Vec<u32> = (0..workers)
        .map(|_| if wrap { u32::MAX - 40 } else { 1 })
        .collect();
    let mut open: Vec<Vec<(u32, u32)>> = vec![Vec::new(); workers as usize];
    let labels: Vec<String> = (0..1 + rng.below(20))
        .map(|_| text(&mut rng, 255))
        .collect();
    let mut time = rng.next() >> 2;
    let mut out = Vec::new();
    let mut offset = 16u64;
    for _ in 0..n {
        let w = rng.below(u64::from(workers)) as u8;
        time = match rng.below(20) {
            0 => time.wrapping_sub(rng.below(1 << 20)),
            1 => rng.next(),
            _ => time.wrapping_add(rng.below(5000)),
        };
        let rec = match rng.below(21) {
            0..=5 => {
                let id = next_id[w as usize];
                next_id[w as usize] = id.wrapping_add(1 + (rng.below(8) == 0) as u32);
                let ctx = match (open[w as usize].last(), rng.below(4)) {
                    (Some(&(_, c)), 0..=1) => c,
                    (_, 2) => rng.next() as u32,
                    _ => id,
                };
                let parent = match (parents, rng.below(10), open[w as usize].last()) {
                    (false, ..) => Parent::NotRecorded,
                    (true, 0..=4, Some(&(top, _))) => Parent::from_field(top),
                    (true, 5, _) => Parent::Root,
                    (true, 6, _) => Parent::NotRecorded,
                    (true, 7, _) => Parent::Frame(u32::MAX - rng.below(3) as u32),
                    _ => Parent::Frame(id.wrapping_sub(rng.below(50) as u32).max(1)),
                };
                open[w as usize].push((id, ctx));
                let label = labels[rng.below(labels.len() as u64) as usize].clone();
                Own::Start(id, w, time, ctx, rng.below(12) as u8, label, parent)
            }
            6..=11 => {
                let st = &mut open[w as usize];
                let id = if !st.is_empty() && rng.below(8) != 0 {
                    let k = st.len() - 1 - (rng.below(st.len() as u64).min(rng.below(3))) as usize;
                    st.remove(k).0
                } else {
                    rng.next() as u32
                };
                Own::End(id, w, time)
            }
            12 => Own::Dropped(w, time, rng.next() >> rng.below(64)),
            13 => Own::Worker(w, time, rng.next() as u32, text(&mut rng, 255)),
            14 => Own::Thread(w, rng.below(6) as u32, time, text(&mut rng, 40)),
            15 => {
                // Half of them of a few series (a block keeps each name once), half new.
                let mut name = match rng.below(6) {
                    0 => "queue depth".to_owned(),
                    1 => "rss".to_owned(),
                    2 => "é ünits".to_owned(),
                    _ => text(&mut rng, 255),
                };
                if name.is_empty() {
                    name.push('q');
                }
                let bits = match rng.below(4) {
                    0 => f64::NAN.to_bits(),
                    1 => (rng.below(100) as f64).to_bits(),
                    _ => rng.next(),
                };
                Own::Plot(w, time, bits, rng.below(2) == 0, rng.below(5) as u8, name)
            }
            16 => {
                let id = open[w as usize].last().map_or(0, |&(id, _)| id);
                let ctx = open[w as usize].last().map_or(0, |&(_, c)| c);
                let fields = (rng.below(3) == 0).then(|| {
                    bson::to_vec(&bson::doc! { "n": rng.next() as i64, "s": text(&mut rng, 20) })
                        .unwrap()
                });
                let big = if rng.below(40) == 0 { 4096 } else { 60 };
                Own::Message(
                    id,
                    w,
                    time,
                    ctx,
                    rng.below(7) as u8,
                    text(&mut rng, big),
                    fields,
                )
            }
            17 => Own::Alloc(
                rng.next() as u32,
                w,
                time,
                [0; 4].map(|_| rng.next() >> rng.below(64)),
            ),
            18 => Own::Polls(
                open[w as usize]
                    .last()
                    .map_or(rng.next() as u32, |&(id, _)| id),
                w,
                time,
                [0; 7].map(|_| rng.next() >> rng.below(64)),
            ),
            19 => Own::Slow(
                open[w as usize]
                    .last()
                    .map_or(rng.next() as u32, |&(id, _)| id),
                w,
                time,
                rng.next() >> rng.below(64),
            ),
            _ => {
                let kind = 12 + rng.below(244) as u8;
                let max = if rng.below(50) == 0 { 3000 } else { 20 };
                let len = rng.below(max) as usize;
                let payload = (0..len).map(|_| rng.next() as u8).collect();
                Own::Unknown(rng.next() as u32, w, kind, time, payload)
            }
        };
        // Batch headers between records now and then.
        if rng.below(30) == 0 {
            offset += 32;
        }
        let len = rec.record().encode(&mut vec![0u8; 70_000]).unwrap() as u64;
        out.push((offset, rec));
        offset += len;
    }
    out
}

fn encode(log: &[(u64, Own)], level: i32) -> Vec<u8> {
    let parents = log
        .iter()
        .any(|(_, r)| matches!(r, Own::Start(.., p) if p.is_recorded()));
    encode_with(
        log,
        if parents {
            FramesEncoder::with_parents(level)
        } else {
            FramesEncoder::new(level)
        },
    )
}

fn encode_with(log: &[(u64, Own)], mut enc: FramesEncoder) -> Vec<u8> {
    for (o, r) in log {
        enc.push(*o, &r.record()).unwrap();
    }
    let raw_len = log.last().map_or(16, |(o, r)| {
        o + r.record().encode(&mut vec![0u8; 70_000]).unwrap() as u64
    });
    enc.finish(raw_len)
}

/// Every record and damage event of a compact file, records rebuilt as v1 bytes.
type Decoded = (Vec<(u64, Vec<u8>)>, Vec<(u64, u64)>);

fn decode_all(file: &[u8]) -> Decoded {
    let mut recs = Vec::new();
    let mut damage = Vec::new();
    decode_file(file, |e| match e {
        FileEvent::Record(o, r) => {
            let mut buf = vec![0u8; 70_000];
            let n = r.encode(&mut buf).unwrap();
            buf.truncate(n);
            recs.push((o, buf));
        }
        FileEvent::Damaged(o, l, _) => damage.push((o, l)),
    });
    (recs, damage)
}

fn v1(log: &[(u64, Own)]) -> Vec<(u64, Vec<u8>)> {
    log.iter()
        .map(|(o, r)| {
            let mut buf = vec![0u8; 70_000];
            let n = r.record().encode(&mut buf).unwrap();
            buf.truncate(n);
            // And it decodes back to the same record.
            let back: Vec<_> = RecordIter::new(&buf[..n], 0).collect();
            assert_eq!(back.len(), 1);
            (*o, buf)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_logs_round_trip_exactly(seed in any::<u64>(), n in 0usize..3000) {
        let log = random_log(seed, n);
        let file = encode(&log, 1);
        let (recs, damage) = decode_all(&file);
        prop_assert!(damage.is_empty());
        prop_assert_eq!(recs, v1(&log));
        let t = Trailer::decode(&file, file.len() as u64).unwrap();
        prop_assert_eq!(t.records, n as u64);
    }

    #[test]
    fn random_logs_with_parents_round_trip_exactly(seed in any::<u64>(), n in 0usize..3000) {
        let log = random_log_with(seed, n, true);
        let file = encode(&log, 1);
        let version = u16::from_le_bytes([file[8], file[9]]);
        let any_parent = log.iter().any(|(_, r)| matches!(r, Own::Start(.., p) if p.is_recorded()));
        prop_assert_eq!(version, if any_parent { 5 } else { 2 });
        let (recs, damage) = decode_all(&file);
        prop_assert!(damage.is_empty());
        prop_assert_eq!(recs, v1(&log));
    }

    /// Version 4 files (plots in `payloads`), as compactors wrote them before version 5,
    /// still read back exactly.
    #[test]
    fn random_version_4_files_still_round_trip_exactly(seed in any::<u64>(), n in 0usize..3000) {
        let log = random_log_with(seed, n, true);
        let file = encode_with(&log, FramesEncoder::version_4(1));
        prop_assert_eq!(u16::from_le_bytes([file[8], file[9]]), 4);
        let (recs, damage) = decode_all(&file);
        prop_assert!(damage.is_empty());
        prop_assert_eq!(recs, v1(&log));
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4000)) {
        let _ = decode_all(&bytes);
        let mut with_header = FileHeader::compact(FileKind::FrameLog).encode().to_vec();
        with_header.extend_from_slice(&bytes);
        let _ = decode_all(&with_header);
        let _ = walk_blocks(&with_header);
        with_header[8] = crate::COMPACT_PARENTS_VERSION as u8;
        let _ = decode_all(&with_header);
        with_header[8] = crate::COMPACT_PLOTS_VERSION as u8;
        let _ = decode_all(&with_header);
    }

    #[test]
    fn damaged_files_never_panic_and_never_deliver_a_wrong_record(
        seed in any::<u64>(),
        n in 1usize..2000,
        edits in proptest::collection::vec((0u8..5, any::<u64>(), any::<u8>()), 1..4),
        parents: bool,
    ) {
        let log = random_log_with(seed, n, parents);
        let good = v1(&log);
        let mut file = encode(&log, 1);
        for (op, at, b) in edits {
            let at = (at % file.len() as u64) as usize;
            match op {
                0 => file[at] ^= b | 1,
                1 => file[at] = 0,
                2 => file.insert(at, b),
                3 => { file.remove(at); }
                _ => file.truncate(at),
            }
        }
        let (recs, _) = decode_all(&file);
        for (o, bytes) in recs {
            let i = good.binary_search_by_key(&o, |g| g.0);
            prop_assert!(i.is_ok(), "record at {} was never written", o);
            prop_assert_eq!(&good[i.unwrap()].1, &bytes);
        }
    }

    #[test]
    fn random_streams_in_a_valid_block_never_panic(
        streams in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..60), STREAMS..=STREAMS_WITH_PLOTS),
        count in 1u32..40,
    ) {
        let mut body = Vec::new();
        for s in &streams {
            body.extend_from_slice(&(s.len() as u32).to_le_bytes());
        }
        for s in &streams {
            body.extend_from_slice(s);
        }
        let z = crate::compact::compress(&body, 1);
        let h = BlockHeader {
            len: z.len() as u32,
            raw_len: body.len() as u32,
            count,
            first_offset: 16,
            min_time: 0,
            max_time: u64::MAX,
            crc: crc(&z),
        };
        let mut dec = BlockDecoder::new();
        match streams.len() {
            STREAMS_WITH_PARENTS => dec.set_version(crate::COMPACT_PARENTS_VERSION),
            STREAMS_WITH_PLOTS => dec.set_version(crate::COMPACT_PLOTS_VERSION),
            _ => {}
        }
        if dec.decode(&h, &z).is_ok() {
            dec.for_each(|_, _| {});
        }
    }
}

#[test]
fn big_logs_span_blocks_and_damage_costs_one_block() {
    let log = random_log(7, 200_000);
    let mut file = encode(&log, 3);
    let (recs, damage) = decode_all(&file);
    assert!(damage.is_empty());
    assert_eq!(recs, v1(&log));
    let t = Trailer::decode(&file, file.len() as u64).unwrap();
    let ix = &file[t.index_offset as usize..file.len() - TRAILER_LEN];
    let entries = read_index(ix, t.index_offset).unwrap();
    assert_eq!(entries.len(), 4);
    assert_eq!(entries.iter().map(|e| e.count as u64).sum::<u64>(), 200_000);
    // A byte of block 1's body: that block only is lost, and reported at its header.
    let at = entries[1].offset as usize + BLOCK_HEADER_LEN + 10;
    file[at] ^= 0x40;
    let mut reported = Vec::new();
    let mut n = 0;
    decode_file(&file, |e| match e {
        FileEvent::Record(..) => n += 1,
        FileEvent::Damaged(o, l, why) => reported.push((o, l, why)),
    });
    assert_eq!(n, 200_000 - entries[1].count as usize);
    assert_eq!(reported.len(), 1);
    assert_eq!(reported[0].0, entries[1].offset);
    assert_eq!(reported[0].1, entries[2].offset - entries[1].offset);
    assert!(reported[0].2.contains("CRC32C"), "{}", reported[0].2);
    // The index gone too: the blocks are found by walking their headers.
    let ix_at = t.index_offset as usize;
    file[ix_at + 9] ^= 1;
    let mut n2 = 0;
    decode_file(&file, |e| {
        if let FileEvent::Record(..) = e {
            n2 += 1
        }
    });
    assert_eq!(n2, n);
    // A damaged block header: walking resynchronises at the next block.
    file[entries[2].offset as usize + 5] ^= 1;
    let w = walk_blocks(&file);
    assert_eq!(w.blocks.len(), 3);
    assert_eq!(
        w.damage,
        vec![(entries[2].offset, entries[3].offset - entries[2].offset)]
    );
}

#[test]
fn an_empty_segment_and_refused_records() {
    let file = FramesEncoder::new(3).finish(16);
    let (recs, damage) = decode_all(&file);
    assert!(recs.is_empty() && damage.is_empty());
    let mut enc = FramesEncoder::new(3);
    let end = Record::End(FrameEnd {
        id: 1,
        worker: 0,
        timestamp: 5,
    });
    enc.push(100, &end).unwrap();
    assert!(enc.push(105, &end).is_err(), "overlapping records");
    let batch = Record::Unknown(Extension {
        id: 0,
        worker: 0,
        kind: BATCH,
        timestamp: 0,
        payload: &[0; 16],
    });
    assert!(enc.push(200, &batch).is_err());
    let with_parent = Record::Start(FrameStart {
        id: 2,
        worker: 0,
        timestamp: 6,
        context: 2,
        category: Category::FUNCTION,
        label: "x",
        parent: Parent::Root,
    });
    assert!(
        enc.push(300, &with_parent).is_err(),
        "a version 2 file has no parents"
    );
}

/// The parents stream's common case (the innermost open frame) costs next to nothing: a
/// version 4 file of nested frames whose parents are all recorded is within a few bytes a
/// thousand frames of the same frames in version 2.
#[test]
fn recorded_nesting_parents_cost_almost_nothing() {
    let build = |parents: bool| {
        let mut log = Vec::new();
        let mut offset = 16u64;
        let mut id = 1u32;
        for i in 0..20_000u64 {
            let root = id;
            let mut push = |rec: Own, offset: &mut u64| {
                let len = rec.record().encode(&mut [0u8; 600]).unwrap() as u64;
                log.push((*offset, rec));
                *offset += len;
            };
            let p = |x| if parents { x } else { Parent::NotRecorded };
            push(
                Own::Start(
                    root,
                    0,
                    i * 1000,
                    root,
                    0,
                    "request".into(),
                    p(Parent::Root),
                ),
                &mut offset,
            );
            push(
                Own::Start(
                    root + 1,
                    0,
                    i * 1000 + 10,
                    root,
                    8,
                    "db".into(),
                    p(Parent::Frame(root)),
                ),
                &mut offset,
            );
            push(Own::End(root + 1, 0, i * 1000 + 500), &mut offset);
            push(Own::End(root, 0, i * 1000 + 600), &mut offset);
            id += 2;
        }
        encode(&log, 3).len() as f64
    };
    let (with, without) = (build(true), build(false));
    let per_frame = (with - without) / 40_000.0;
    assert!(per_frame < 0.05, "parents cost {per_frame:.3} B/frame");
}

/// A plot series' name is kept once per block in version 5, and a value close to its series'
/// last costs a byte or two: a plot value every tenth frame of nested frames costs a small
/// fraction of what it cost in version 4, and reads back exactly (NaN bit patterns too).
#[test]
fn version_5_plots_cost_a_few_bytes_each() {
    let mut log = Vec::new();
    let mut offset = 16u64;
    let mut push = |rec: Own, offset: &mut u64| {
        let len = rec.record().encode(&mut [0u8; 600]).unwrap() as u64;
        log.push((*offset, rec));
        *offset += len;
    };
    let mut plots = 0;
    for i in 0..50_000u64 {
        let id = i as u32 + 1;
        push(
            Own::Start(id, 0, i * 1000, id, 0, "request".into(), Parent::Root),
            &mut offset,
        );
        if i % 10 == 0 {
            let (name, bits) = match i % 30 {
                0 => ("queue depth", ((i / 10 % 64) as f64).to_bits()),
                10 => ("rss", (1e8 + (i * 4096) as f64).to_bits()),
                _ => ("gap", f64::NAN.to_bits() | (i & 0xff)),
            };
            push(
                Own::Plot(0, i * 1000 + 5, bits, false, 1, name.into()),
                &mut offset,
            );
            plots += 1;
        }
        push(Own::End(id, 0, i * 1000 + 600), &mut offset);
    }
    let v5 = encode_with(&log, FramesEncoder::with_parents(3));
    let v4 = encode_with(&log, FramesEncoder::version_4(3));
    assert_eq!(u16::from_le_bytes([v5[8], v5[9]]), 5);
    for file in [&v5, &v4] {
        let (recs, damage) = decode_all(file);
        assert!(damage.is_empty());
        assert_eq!(recs, v1(&log));
    }
    let frames_only: Vec<_> = log
        .iter()
        .filter(|(_, r)| !matches!(r, Own::Plot(..)))
        .cloned()
        .collect();
    let base = encode_with(&frames_only, FramesEncoder::with_parents(3)).len() as f64;
    let per_plot = |f: &Vec<u8>| (f.len() as f64 - base) / plots as f64;
    let (p5, p4) = (per_plot(&v5), per_plot(&v4));
    assert!(
        p5 < 0.6 * p4,
        "a plot costs {p5:.2} B in version 5, {p4:.2} B in version 4"
    );
}

#[test]
fn the_id_index_places_every_start_and_thread_and_walkers_that_predate_it_lose_nothing() {
    let log = random_log_with(11, 140_000, true);
    let file = encode(&log, 3);
    let t = Trailer::decode(&file, file.len() as u64).unwrap();
    let ix = &file[t.index_offset as usize..file.len() - TRAILER_LEN];
    let entries = read_index(ix, t.index_offset).unwrap();
    assert!(entries.len() >= 3, "{} blocks", entries.len());
    let ids = read_id_index(ix, entries.len()).expect("an id index");
    assert_eq!(ids.blocks.len(), entries.len());
    assert!(
        ids.blocks[1..]
            .iter()
            .all(|b| !b.threads.is_empty() && !b.starts.is_empty())
    );
    // Each start is in the block its offset says; the first block whose range may hold it
    // is never after that one; each block's threads are the ones current at its start.
    let block_of = |offset: u64| {
        entries
            .iter()
            .rposition(|e| e.first_offset <= offset)
            .unwrap()
    };
    let mut thread = std::collections::BTreeMap::new();
    let mut seen_block = usize::MAX;
    for (offset, r) in &log {
        let b = block_of(*offset);
        if b != seen_block {
            let expect: Vec<(u8, u32)> = thread.iter().map(|(&w, &t)| (w, t)).collect();
            assert_eq!(ids.blocks[b].threads, expect, "threads at block {b}");
            seen_block = b;
        }
        match r {
            Own::Start(id, w, ..) => {
                let key = crate::FrameKey::new(*w, *id);
                let first = ids.first_block_for(key).expect("a block may hold it");
                assert!(first <= b, "start {key} in block {b}, index says {first}");
                assert!(
                    ids.blocks[b]
                        .starts
                        .iter()
                        .any(|r| r.worker == *w && (r.min..=r.max).contains(id))
                );
            }
            Own::Thread(w, th, ..) => {
                thread.insert(*w, *th);
            }
            _ => {}
        }
    }
    let end: Vec<(u8, u32)> = thread.into_iter().collect();
    assert_eq!(ids.end_threads, end);
    // A reader from before the id index refuses a block index with bytes after it and walks
    // the blocks by their headers: the same blocks, no damage.
    let w = walk_blocks(&file);
    assert!(w.damage.is_empty(), "{:?}", w.damage);
    assert_eq!(
        w.blocks.iter().map(|(at, _)| *at).collect::<Vec<_>>(),
        entries.iter().map(|e| e.offset).collect::<Vec<_>>()
    );
    // A damaged id index costs only itself: the block index still reads.
    let mut damaged = file.clone();
    let last = damaged.len() - TRAILER_LEN - 3;
    damaged[last] ^= 0x55;
    let ix = &damaged[t.index_offset as usize..damaged.len() - TRAILER_LEN];
    assert_eq!(read_index(ix, t.index_offset), Some(entries.clone()));
    assert_eq!(read_id_index(ix, entries.len()), None);
    assert_eq!(decode_all(&damaged), decode_all(&file));
}
