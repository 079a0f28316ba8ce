//! Rewriting a program's keys into the server's log (`docs/PROTOCOL.md`, Frames): the worker
//! byte becomes the worker the server assigned, and ids move by blocks of 65,536 into ranges
//! the server reserved, so keys stay unique however many programs (and restarts) share a log.
//! Pure logic: the reservation itself is a callback.

use std::collections::HashMap;

use formats::{DecodeError, Decoded, ErrorKind, Record, RecordType, decode_record};

/// Ids per reserved block.
pub const BLOCK: u32 = 1 << 16;

/// Why a Frames payload cannot be appended.
#[derive(Debug, thiserror::Error)]
pub enum RewriteError {
    /// A record does not decode.
    #[error("record at byte {0}")]
    Decode(#[from] DecodeError),
    /// A record kind only the server may write.
    #[error("a {kind} record at byte {offset} (only the server writes these)")]
    Forbidden {
        /// The record's type name.
        kind: &'static str,
        /// Its offset in the payload.
        offset: usize,
    },
    /// Reserving ids in the log failed.
    #[error("reserving frame ids: {0}")]
    Reserve(#[from] crate::Error),
}

/// What a Frames payload held.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Frame starts.
    pub starts: u64,
    /// Frame ends.
    pub ends: u64,
    /// Records the program reported as dropped (sum of Dropped markers).
    pub dropped: u64,
}

/// One program's key translation into the server's log.
#[derive(Debug)]
pub struct KeyMap {
    worker: u8,
    blocks: HashMap<u32, u32>,
}

impl KeyMap {
    /// A map onto `worker` with no blocks reserved yet.
    pub fn new(worker: u8) -> Self {
        Self {
            worker,
            blocks: HashMap::new(),
        }
    }

    /// The server-side worker.
    pub fn worker(&self) -> u8 {
        self.worker
    }

    /// The server-side id of program id `id` (0 stays 0: "none").
    pub fn id(
        &mut self,
        id: u32,
        reserve: &mut impl FnMut(u32) -> crate::Result<u32>,
    ) -> crate::Result<u32> {
        if id == 0 {
            return Ok(0);
        }
        let block = id / BLOCK;
        let base = match self.blocks.get(&block) {
            Some(&b) => b,
            None => {
                let b = reserve(BLOCK)?;
                self.blocks.insert(block, b);
                b
            }
        };
        Ok(base.wrapping_add(id % BLOCK))
    }

    /// Checks that `bytes` are whole, valid records a program may send, and rewrites their
    /// worker and ids in place.
    pub fn rewrite_records(
        &mut self,
        bytes: &mut [u8],
        reserve: &mut impl FnMut(u32) -> crate::Result<u32>,
    ) -> Result<Counts, RewriteError> {
        let mut counts = Counts::default();
        let mut at = 0;
        while at < bytes.len() {
            let mut message_context = None;
            let (len, ids) = match decode_record(&bytes[at..]).map_err(|e| e.shifted(at as u64))? {
                Decoded::NeedMore => {
                    return Err(DecodeError::new(
                        at as u64,
                        ErrorKind::PartialRecord(bytes.len() - at),
                    )
                    .into());
                }
                Decoded::Record(r, len) => match r {
                    Record::Start(s) => {
                        counts.starts += 1;
                        (len, Some((s.id, Some((s.context, s.parent)))))
                    }
                    Record::End(e) => {
                        counts.ends += 1;
                        (len, Some((e.id, None)))
                    }
                    Record::Dropped(d) => {
                        counts.dropped += d.count;
                        (len, None)
                    }
                    Record::ThreadInfo(_) | Record::Plot(_) => (len, None),
                    Record::Message(m) => {
                        message_context = Some(m.context);
                        (len, Some((m.frame, None)))
                    }
                    Record::FrameAlloc(a) => (len, Some((a.id, None))),
                    Record::FramePolls(p) => (len, Some((p.id, None))),
                    Record::SlowPoll(p) => (len, Some((p.id, None))),
                    Record::Unknown(x) if x.kind != RecordType::Batch as u8 => (len, None),
                    Record::WorkerInfo(_) | Record::Unknown(_) => {
                        return Err(RewriteError::Forbidden {
                            kind: if matches!(r, Record::WorkerInfo(_)) {
                                "worker_info"
                            } else {
                                "batch"
                            },
                            offset: at,
                        });
                    }
                },
            };
            let rec = &mut bytes[at..at + len];
            // Common header: id u32 at 0, worker u8 at 4 (FORMAT.md, Frame-log records).
            rec[4] = self.worker;
            if let Some(context) = message_context {
                // Message: context u32 at 16 (0, none, stays 0).
                let new = self.id(context, reserve)?;
                rec[16..20].copy_from_slice(&new.to_le_bytes());
            }
            if let Some((id, context)) = ids {
                let new = self.id(id, reserve)?;
                rec[0..4].copy_from_slice(&new.to_le_bytes());
                if let Some((ctx, parent)) = context {
                    // FrameStart: context u32 at 14; with parent (type 6): context at 16,
                    // parent at 20 (0, none, stays 0).
                    let new = self.id(ctx, reserve)?;
                    if parent.is_recorded() {
                        rec[16..20].copy_from_slice(&new.to_le_bytes());
                        let p = self.id(parent.id().unwrap_or(0), reserve)?;
                        rec[20..24].copy_from_slice(&p.to_le_bytes());
                    } else {
                        rec[14..18].copy_from_slice(&new.to_le_bytes());
                    }
                }
            }
            at += len;
        }
        Ok(counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use formats::{Category, FrameEnd, FrameStart, RecordIter, WorkerInfo};

    fn start(id: u32, context: u32) -> Vec<u8> {
        let mut v = Vec::new();
        Record::Start(FrameStart {
            parent: formats::Parent::NotRecorded,
            id,
            worker: 7,
            timestamp: 10,
            context,
            category: Category::HTTP,
            label: "GET /",
        })
        .encode_to_vec(&mut v);
        v
    }

    #[test]
    fn worker_and_ids_move_into_reserved_blocks() {
        let mut bytes = start(5, 5);
        bytes.extend(start(BLOCK + 3, 5));
        Record::End(FrameEnd {
            id: 5,
            worker: 7,
            timestamp: 11,
        })
        .encode_to_vec(&mut bytes);
        let mut next = 1_000_000u32;
        let mut reserved = Vec::new();
        let mut reserve = |n: u32| {
            reserved.push(next);
            next += n;
            Ok(next - n)
        };
        let mut map = KeyMap::new(2);
        let counts = map.rewrite_records(&mut bytes, &mut reserve).unwrap();
        assert_eq!((counts.starts, counts.ends), (2, 1));
        let recs: Vec<_> = RecordIter::new(&bytes, 0).map(|r| r.unwrap().1).collect();
        let Record::Start(a) = recs[0] else { panic!() };
        let Record::Start(b) = recs[1] else { panic!() };
        let Record::End(e) = recs[2] else { panic!() };
        assert_eq!((a.worker, a.id, a.context), (2, 1_000_005, 1_000_005));
        assert_eq!(
            (b.worker, b.id, b.context),
            (2, 1_000_000 + BLOCK + 3, 1_000_005)
        );
        assert_eq!((e.worker, e.id), (2, 1_000_005));
        assert_eq!(reserved, vec![1_000_000, 1_000_000 + BLOCK]);
        assert_eq!(a.label, "GET /");
    }

    #[test]
    fn parents_move_with_their_frames_and_none_stays_none() {
        let mut bytes = Vec::new();
        for (id, parent) in [
            (5, formats::Parent::Root),
            (BLOCK + 3, formats::Parent::Frame(5)),
            (6, formats::Parent::Frame(BLOCK + 3)),
        ] {
            Record::Start(FrameStart {
                parent,
                id,
                worker: 7,
                timestamp: 10,
                context: 5,
                category: Category::HTTP,
                label: "GET /",
            })
            .encode_to_vec(&mut bytes);
        }
        let mut next = 1_000_000u32;
        let mut reserve = |n: u32| {
            next += n;
            Ok(next - n)
        };
        let counts = KeyMap::new(2)
            .rewrite_records(&mut bytes, &mut reserve)
            .unwrap();
        assert_eq!(counts.starts, 3);
        let got: Vec<_> = RecordIter::new(&bytes, 0)
            .map(|r| match r.unwrap().1 {
                Record::Start(s) => (s.worker, s.id, s.context, s.parent, s.label.to_owned()),
                other => panic!("{other:?}"),
            })
            .collect();
        let (a, b) = (1_000_005, 1_000_000 + BLOCK + 3);
        let label = || "GET /".to_owned();
        assert_eq!(
            got,
            vec![
                (2, a, a, formats::Parent::Root, label()),
                (2, b, a, formats::Parent::Frame(a), label()),
                (2, 1_000_006, a, formats::Parent::Frame(b), label()),
            ]
        );
    }

    #[test]
    fn worker_info_partial_and_corrupt_records_are_refused() {
        let mut reserve = |_| Ok(1);
        let mut map = KeyMap::new(0);
        let mut wi = Vec::new();
        Record::WorkerInfo(WorkerInfo {
            worker: 1,
            timestamp: 1,
            pid: 1,
            name: "x",
        })
        .encode_to_vec(&mut wi);
        assert!(matches!(
            map.rewrite_records(&mut wi, &mut reserve),
            Err(RewriteError::Forbidden { .. })
        ));
        let mut cut = start(1, 1);
        cut.pop();
        assert!(map.rewrite_records(&mut cut, &mut reserve).is_err());
        let mut bad = start(1, 1);
        let n = bad.len();
        bad[n - 2] = 0xff; // the label is no longer UTF-8
        assert!(map.rewrite_records(&mut bad, &mut reserve).is_err());
    }
}
