//! Records for readers that predate parents, and for sessions that predate messages naming
//! their frame: every FrameStart with parent (type 6) written as the type 0 start with the
//! same fields, so a version 1 segment, a session started with StartSession v1-v3 or a viewer
//! that reads Records version 1 never sees a type it would skip; and, for a session started
//! with StartSession v1-v4 (whose server would not rewrite their ids), every message written
//! with `id` and `context` 0 and every frame allocation record left out.

use crate::batch::{BatchHeader, FRAMES_BATCH_TARGET, check_batches, record_len, split_records};
use crate::error::{DecodeError, ErrorKind};
use crate::record::{Decoded, Record, RecordType, decode_record};

/// What to take out of records for an older peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Strip {
    /// Write FrameStarts with parent (type 6) as type 0 starts.
    pub parents: bool,
    /// Write messages (type 8) with `id` and `context` 0, and leave frame allocation
    /// records (type 9) out.
    pub frame_refs: bool,
    /// Leave frame polls and slow polls (types 10, 11) out (a session before v6).
    pub polls: bool,
}

/// Whether `records` (records back to back) holds a FrameStart with parent, by type bytes
/// and lengths alone (a partial record at the end is not looked at).
pub fn has_parents(records: &[u8]) -> bool {
    needs_strip(
        records,
        Strip {
            parents: true,
            ..Strip::default()
        },
    )
}

/// Whether `records` holds anything `strip` takes out (by type bytes, ids and lengths
/// alone; a partial record at the end is not looked at).
pub fn needs_strip(records: &[u8], strip: Strip) -> bool {
    let mut pos = 0;
    while let Some(len) = records.get(pos..).and_then(record_len) {
        // At least the 14 bytes of the common prefix (`record_len` checked); the record
        // itself may be cut short.
        let r = &records[pos..];
        let kind = r[5];
        if strip.parents && kind == RecordType::StartWithParent as u8 {
            return true;
        }
        if strip.polls
            && (kind == RecordType::FramePolls as u8 || kind == RecordType::SlowPoll as u8)
        {
            return true;
        }
        if strip.frame_refs
            && (kind == RecordType::FrameAlloc as u8
                || (kind == RecordType::Message as u8 && r[..4] != [0; 4]))
        {
            return true;
        }
        pos += len;
    }
    false
}

/// Appends `records` (whole records back to back, no batch records) to `out`, each FrameStart
/// with parent written as a type 0 FrameStart. Errors (nothing appended) at a record that does
/// not decode whole, with its offset.
pub fn strip_parents(records: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    strip_records(
        records,
        Strip {
            parents: true,
            ..Strip::default()
        },
        out,
    )
}

/// Appends `records` (whole records back to back, no batch records) to `out` without what
/// `strip` takes out. Errors (nothing appended) at a record that does not decode whole, with
/// its offset.
pub fn strip_records(records: &[u8], strip: Strip, out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let start = out.len();
    let mut pos = 0;
    while pos < records.len() {
        let rest = &records[pos..];
        let failed = |e: DecodeError| e.shifted(pos as u64);
        match decode_record(rest).map_err(failed) {
            Ok(Decoded::Record(rec @ Record::Start(s), len))
                if strip.parents && s.parent.is_recorded() =>
            {
                rec.without_parent().encode_to_vec(out);
                pos += len;
            }
            Ok(Decoded::Record(Record::Message(m), len))
                if strip.frame_refs && (m.frame != 0 || m.context != 0) =>
            {
                Record::Message(crate::Message {
                    frame: 0,
                    context: 0,
                    ..m
                })
                .encode_to_vec(out);
                pos += len;
            }
            Ok(Decoded::Record(Record::FrameAlloc(_), len)) if strip.frame_refs => {
                pos += len;
            }
            Ok(Decoded::Record(Record::FramePolls(_) | Record::SlowPoll(_), len))
                if strip.polls =>
            {
                pos += len;
            }
            Ok(Decoded::Record(_, len)) => {
                out.extend_from_slice(&rest[..len]);
                pos += len;
            }
            Ok(Decoded::NeedMore) => {
                out.truncate(start);
                return Err(DecodeError::new(
                    pos as u64,
                    ErrorKind::PartialRecord(records.len() - pos),
                ));
            }
            Err(e) => {
                out.truncate(start);
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Re-frames `batches` (whole batches, as [`check_batches`] accepts, packed ones unpacked) with
/// every FrameStart with parent written as type 0: plain batches with new headers (same worker and timestamp), new
/// checksums. Errors with the offset of a batch header that does not hold or a record that
/// does not decode.
pub fn strip_parents_framed(batches: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let mut bodies = Vec::new();
    let bad = |at: u64| {
        DecodeError::new(
            at,
            ErrorKind::BadPayload {
                name: "batch",
                len: 0,
            },
        )
    };
    check_batches(batches, |h, body| bodies.push((*h, body))).map_err(bad)?;
    let mut out = Vec::with_capacity(batches.len());
    let mut records = Vec::new();
    let mut unpacked = Vec::new();
    for (h, body) in bodies {
        records.clear();
        let plain = if h.packed {
            let at = (body.start - crate::BATCH_RECORD_LEN) as u64;
            crate::packed::unpack(
                h.worker,
                h.timestamp,
                h.count,
                &batches[body.clone()],
                &mut unpacked,
            )
            .map_err(|_| bad(at))?;
            &unpacked[..]
        } else {
            &batches[body.clone()]
        };
        strip_parents(plain, &mut records).map_err(|e| e.shifted(body.start as u64))?;
        split_records(&records, FRAMES_BATCH_TARGET, |r, count| {
            let head = BatchHeader::for_records(h.worker, h.timestamp, &records[r.clone()], count);
            out.extend_from_slice(&head.encode());
            out.extend_from_slice(&records[r]);
        })?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Category, FrameEnd, FrameStart, Parent, RecordIter};

    fn start(id: u32, parent: Parent) -> FrameStart<'static> {
        FrameStart {
            id,
            worker: 3,
            timestamp: 1000 + u64::from(id),
            context: 1,
            category: Category::DATABASE,
            label: "db/query",
            parent,
        }
    }

    fn records() -> Vec<u8> {
        let mut v = Vec::new();
        Record::Start(start(1, Parent::Root)).encode_to_vec(&mut v);
        Record::Start(start(2, Parent::Frame(1))).encode_to_vec(&mut v);
        Record::Start(start(3, Parent::NotRecorded)).encode_to_vec(&mut v);
        Record::End(FrameEnd {
            id: 2,
            worker: 3,
            timestamp: 5000,
        })
        .encode_to_vec(&mut v);
        v
    }

    #[test]
    fn stripped_records_are_the_same_starts_without_parents() {
        let v = records();
        assert!(has_parents(&v));
        let mut out = Vec::new();
        strip_parents(&v, &mut out).unwrap();
        assert!(!has_parents(&out));
        let before: Vec<_> = RecordIter::new(&v, 0).map(|r| r.unwrap().1).collect();
        let after: Vec<_> = RecordIter::new(&out, 0).map(|r| r.unwrap().1).collect();
        assert_eq!(before.len(), after.len());
        for (b, a) in before.iter().zip(&after) {
            match (b, a) {
                (Record::Start(b), Record::Start(a)) => {
                    assert_eq!(a.parent, Parent::NotRecorded);
                    assert_eq!(
                        FrameStart {
                            parent: Parent::NotRecorded,
                            ..*b
                        },
                        *a
                    );
                    assert_eq!(a.record_type(), RecordType::Start);
                }
                (b, a) => assert_eq!(b, a),
            }
        }
        // Five bytes fewer per type 6 start.
        assert_eq!(v.len() - out.len(), 2 * 5);
    }

    #[test]
    fn frame_refs_are_stripped_for_old_sessions_and_nothing_else() {
        use crate::{FrameAlloc, Level, Message};
        let mut v = records();
        let m = Message {
            frame: 2,
            worker: 3,
            timestamp: 4000,
            context: 1,
            level: Level::WARN,
            text: "slow",
            fields: None,
        };
        Record::Message(m).encode_to_vec(&mut v);
        Record::FrameAlloc(FrameAlloc {
            id: 2,
            worker: 3,
            timestamp: 5000,
            allocs: 10,
            alloc_bytes: 100,
            frees: 1,
            freed_bytes: 8,
        })
        .encode_to_vec(&mut v);
        let refs = Strip {
            frame_refs: true,
            ..Strip::default()
        };
        assert!(needs_strip(&v, refs));
        let mut out = Vec::new();
        strip_records(&v, refs, &mut out).unwrap();
        assert!(!needs_strip(&out, refs));
        assert!(has_parents(&out), "parents kept");
        // A record cut short at the end is not looked at (and does not panic).
        assert!(!needs_strip(&out[..out.len() - 3], refs));
        let after: Vec<_> = RecordIter::new(&out, 0).map(|r| r.unwrap().1).collect();
        assert_eq!(after.len(), 5, "the allocation record is left out");
        assert_eq!(
            after[4],
            Record::Message(Message {
                frame: 0,
                context: 0,
                ..m
            })
        );
        // Both at once: nothing of either is left.
        let both = Strip {
            parents: true,
            frame_refs: true,
            polls: false,
        };
        out.clear();
        strip_records(&v, both, &mut out).unwrap();
        assert!(!needs_strip(&out, both));
    }

    #[test]
    fn polls_are_left_out_for_sessions_before_v6_and_nothing_else() {
        use crate::{FramePolls, SlowPoll};
        let mut v = records();
        let before = RecordIter::new(&v, 0).count();
        Record::FramePolls(FramePolls {
            id: 2,
            worker: 3,
            timestamp: 5000,
            polls: 2,
            busy_ns: 10,
            ..FramePolls::default()
        })
        .encode_to_vec(&mut v);
        Record::SlowPoll(SlowPoll {
            id: 2,
            worker: 3,
            timestamp: 4000,
            duration_ns: 1_000_000,
        })
        .encode_to_vec(&mut v);
        let polls = Strip {
            polls: true,
            ..Strip::default()
        };
        assert!(needs_strip(&v, polls));
        assert!(!needs_strip(
            &v,
            Strip {
                frame_refs: true,
                ..Strip::default()
            }
        ));
        let mut out = Vec::new();
        strip_records(&v, polls, &mut out).unwrap();
        assert_eq!(out, records(), "everything else kept byte for byte");
        assert_eq!(RecordIter::new(&out, 0).count(), before);
    }

    #[test]
    fn a_cut_record_is_an_error_and_appends_nothing() {
        let v = records();
        let mut out = vec![7];
        let err = strip_parents(&v[..v.len() - 3], &mut out).unwrap_err();
        assert_eq!(out, vec![7]);
        assert!(matches!(err.kind, ErrorKind::PartialRecord(11)), "{err}");
    }

    #[test]
    fn framed_batches_are_reframed_with_valid_checksums() {
        let v = records();
        let mut framed = Vec::new();
        framed.extend_from_slice(&BatchHeader::for_records(3, 77, &v, 4).encode());
        framed.extend_from_slice(&v);
        let out = strip_parents_framed(&framed).unwrap();
        let mut bodies = Vec::new();
        check_batches(&out, |h, body| bodies.push((*h, body))).unwrap();
        assert_eq!(bodies.len(), 1);
        let (h, body) = &bodies[0];
        assert_eq!((h.worker, h.timestamp, h.count), (3, 77, 4));
        assert_eq!(h.crc, crc32c::crc32c(&out[body.clone()]));
        assert!(!has_parents(&out[body.clone()]));
        // Damage is refused, not passed on.
        let mut bad = framed.clone();
        bad[40] ^= 0xff;
        assert!(strip_parents_framed(&bad[..framed.len() - 1]).is_err());
    }
}
