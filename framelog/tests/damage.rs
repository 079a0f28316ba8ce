//! Random damage to real log files (flipped, zeroed, inserted, deleted or cut bytes in the
//! frame log, the data file or the index): no reader panics, `check` notices, readers lose at
//! most the batches the damage touches and never deliver a byte that was not written, and a
//! writer appending afterwards never shortens a file except by a torn tail.

mod common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use common::write_with_data;
use formats::{
    FileKind, FrameKey, Framing, INDEX_ENTRY_LEN, Record, RecordIter, Unit, data_batch_entries,
};
use framelog::{DataStore, LogReader, LogWriter, segments};
use proptest::prelude::*;

/// What a record is, for comparing what was written with what is read.
type Rec = (u8, u32, u8);

fn rec_of(r: &Record<'_>) -> Rec {
    (r.worker(), r.id(), r.type_byte())
}

/// The byte range of every batch of a clean framed file, with what it holds (a packed
/// frame-log batch's records unpacked).
fn batches(bytes: &[u8], framing: Framing) -> Vec<(std::ops::Range<usize>, Vec<u8>)> {
    let mut out = Vec::new();
    let mut pos = 16;
    while let Unit::Batch {
        len, body, packed, ..
    } = framing.next_unit(&bytes[pos..], true, true)
    {
        let body = match packed {
            Some(h) => {
                let mut records = Vec::new();
                formats::packed::unpack(h.worker, h.timestamp, h.count, body, &mut records)
                    .unwrap();
                records
            }
            None => body.to_vec(),
        };
        out.push((pos..pos + len, body));
        pos += len;
    }
    assert_eq!(pos, bytes.len(), "a clean file is all whole batches");
    out
}

/// Damage of `kind` at `at` (`len` bytes, `seed` inserted) into `clean`.
struct Hit<'a> {
    kind: u8,
    at: usize,
    len: usize,
    seed: u8,
    clean: &'a [u8],
}

impl Hit<'_> {
    /// Whether the damage changes the batch at `range`. An insertion or deletion inside a run
    /// of equal bytes could have happened anywhere along the run with the same result, so it
    /// touches every batch along the run.
    fn touches(&self, range: &std::ops::Range<usize>) -> bool {
        let (c, at) = (self.clean, self.at);
        let len = self.len.min(c.len().saturating_sub(at));
        let (mut lo, mut hi) = (at, at);
        match self.kind {
            2 => {
                while lo > 0 && c[lo - 1] == self.seed {
                    lo -= 1;
                }
                while hi < c.len() && c[hi] == self.seed {
                    hi += 1;
                }
                // Inserting at a batch boundary leaves both neighbours whole.
                range.start < hi && lo < range.end
            }
            3 => {
                while lo > 0 && lo - 1 + len < c.len() && c[lo - 1] == c[lo - 1 + len] {
                    lo -= 1;
                }
                while hi + len < c.len() && c[hi] == c[hi + len] {
                    hi += 1;
                }
                range.start < hi + len && lo < range.end
            }
            // Truncation at `at` removes everything after it.
            4 => range.end > at,
            _ => range.start < at + len && at < range.end,
        }
    }
}

fn damage(bytes: &mut Vec<u8>, kind: u8, at: usize, len: usize, seed: u8) {
    let end = (at + len).min(bytes.len());
    match kind {
        0 => bytes[at..end].iter_mut().for_each(|b| *b ^= seed | 1),
        1 => bytes[at..end].iter_mut().for_each(|b| *b = 0),
        2 => {
            bytes.splice(at..at, std::iter::repeat_n(seed, len));
        }
        3 => {
            bytes.drain(at..end);
        }
        _ => bytes.truncate(at),
    }
}

fn seg(dir: &Path, kind: FileKind) -> PathBuf {
    segments::segment_path(dir, kind, 1)
}

fn expected_doc(key: FrameKey) -> bson::Document {
    let v = serde_json::json!({"sql": format!("SELECT {}", key.id), "n": key.id});
    bson::Document::from_reader(&formats::to_document(&v).unwrap()[..]).unwrap()
}

fn read_all(dir: &Path) -> (HashSet<Rec>, Vec<framelog::Damage>) {
    let mut r = LogReader::open(dir).unwrap();
    let mut seen = HashSet::new();
    r.read_available(|_, rec| {
        seen.insert(rec_of(&rec));
    })
    .unwrap();
    (seen, r.take_damage())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn damage_costs_only_the_batches_it_touches(
        file in 0u8..3, kind in 0u8..5, at in 0.0f64..1.0, len in 1usize..300, seed: u8,
        appends in 3u32..7,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        {
            let w = LogWriter::open(d).unwrap();
            for i in 0..appends {
                write_with_data(&w, 1 + i * 40, 25 + i * 3);
            }
        }
        let paths = [seg(d, FileKind::FrameLog), seg(d, FileKind::FrameData), seg(d, FileKind::FrameIndex)];
        let clean: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();

        // What each batch holds, before the damage.
        let frame_batches: Vec<(std::ops::Range<usize>, Vec<Rec>)> = batches(&clean[0], Framing::Frames)
            .into_iter()
            .map(|(r, body)| (r.clone(), RecordIter::new(&body, 0).map(|x| rec_of(&x.unwrap().1)).collect()))
            .collect();
        let data_batches: Vec<(std::ops::Range<usize>, Vec<FrameKey>)> = batches(&clean[1], Framing::Data)
            .into_iter()
            .map(|(r, body)| (r, data_batch_entries(&body).unwrap().into_iter().map(|(k, _)| k).collect()))
            .collect();
        // Index batches: the marker's entry plus one entry per key of its data batch.
        let mut index_batches = Vec::new();
        let mut pos = 16;
        for (_, keys) in &data_batches {
            let n = (1 + keys.len()) * INDEX_ENTRY_LEN;
            index_batches.push((pos..pos + n, keys.clone()));
            pos += n;
        }
        prop_assert_eq!(pos, clean[2].len());

        // Damage one file, past its 16-byte header.
        let mut bytes = clean[file as usize].clone();
        let at = 16 + ((bytes.len() - 16) as f64 * at) as usize;
        damage(&mut bytes, kind, at, len, seed);
        let hit = Hit { kind, at, len, seed, clean: &clean[file as usize] };
        std::fs::write(&paths[file as usize], &bytes).unwrap();
        let changed = bytes != clean[file as usize];

        // Readers: nothing from outside what was written, everything from untouched batches.
        let (seen, _) = read_all(d);
        let written: HashSet<Rec> = frame_batches.iter().flat_map(|b| b.1.iter().copied()).collect();
        prop_assert!(seen.is_subset(&written), "delivered a record that was never written");
        for (range, recs) in &frame_batches {
            if file != 0 || !hit.touches(range) {
                for r in recs {
                    prop_assert!(seen.contains(r), "lost {:?} of untouched batch {:?}", r, range);
                }
            }
        }
        let mut store = DataStore::open(d).unwrap();
        let lost_keys: HashSet<FrameKey> = match file {
            1 => data_batches.iter().filter(|b| hit.touches(&b.0)).flat_map(|b| b.1.clone()).collect(),
            2 => index_batches.iter().filter(|b| hit.touches(&b.0)).flat_map(|b| b.1.clone()).collect(),
            _ => HashSet::new(),
        };
        for (_, keys) in &data_batches {
            for &key in keys {
                match store.get(key) {
                    Ok(Some(doc)) => prop_assert_eq!(doc, expected_doc(key), "wrong data for {}", key),
                    other => prop_assert!(lost_keys.contains(&key), "lost data of {}: {:?}", key, other),
                }
            }
        }

        // check notices every change.
        let report = framelog::check::check_log(d).unwrap();
        // (A cut exactly between batches looks like a shorter log: nothing can notice it.)
        let boundaries: Vec<usize> = match file {
            0 => frame_batches.iter().map(|b| b.0.end).collect(),
            1 => data_batches.iter().map(|b| b.0.end).collect(),
            _ => index_batches.iter().map(|b| b.0.end).collect(),
        };
        let clean_cut = kind == 4 && (at == 16 || boundaries.contains(&at));
        if changed && !clean_cut {
            prop_assert!(!report.problems.is_empty(), "damage went unnoticed");
        }

        // A writer appending afterwards only cuts a torn tail; everything it writes reads back.
        let before: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
        let after_worker;
        {
            let w = LogWriter::open(d).unwrap();
            after_worker = w.worker();
            write_with_data(&w, 10_000, 10);
        }
        for (i, p) in paths.iter().enumerate() {
            let now = std::fs::read(p).unwrap();
            let old = &before[i];
            // Where the new file first differs: everything before is kept as it was.
            let kept = now.iter().zip(old.iter()).take_while(|(a, b)| a == b).count();
            if kept < old.len() {
                // The cut is at or a little before `kept` (new bytes may start like the old).
                let torn = (kept.saturating_sub(64)..=kept).any(|c| match i {
                    0 => Framing::Frames.is_torn_tail(&old[c..]),
                    1 => Framing::Data.is_torn_tail(&old[c..]),
                    // The partial index run of one batch (rewritten whole by the writer).
                    _ => old.len() - c < (1 + 64) * INDEX_ENTRY_LEN,
                });
                prop_assert!(torn, "{} lost {} bytes at {} that were not a torn tail", p.display(), old.len() - kept, kept);
            }
        }
        let (seen_after, _) = read_all(d);
        for id in 10_000..10_010 {
            prop_assert!(seen_after.contains(&(after_worker, id, 0)));
            prop_assert!(seen_after.contains(&(after_worker, id, 1)));
        }
        let mut store = DataStore::open(d).unwrap();
        let key = FrameKey::new(after_worker, 10_005);
        prop_assert_eq!(store.get(key).unwrap(), Some(expected_doc(key)));
    }
}
