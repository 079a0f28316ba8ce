//! Frame ids: unique per worker within a log, persisted so a restarted process never repeats
//! a `(worker, id)` key.
//!
//! The process reserves blocks of ids from the log (`LogWriter::reserve_ids`, a rare slow
//! path that touches the disk) and hands each thread a small chunk of the current block, so
//! the per-frame cost is a thread-local increment: a shared atomic counter per frame would
//! bounce its cache line between cores on every frame.

use parking_lot::Mutex;

use crate::error::Error;
use crate::sink::Sink;

/// Ids reserved from the log per disk round-trip.
const BLOCK: u32 = 1 << 16;
/// Ids handed to a thread at a time.
pub(crate) const CHUNK: u32 = 1 << 10;

/// The process's source of frame ids for one log.
pub(crate) struct IdSource {
    /// `(next id, ids left in the reserved block)`.
    block: Mutex<(u32, u32)>,
}

impl IdSource {
    /// An empty source (the first chunk reserves a block).
    pub(crate) fn new() -> IdSource {
        IdSource {
            block: Mutex::new((0, 0)),
        }
    }

    /// The first of `CHUNK` consecutive ids (wrapping at `u32::MAX`).
    ///
    /// On a reservation error the ids continue past the last block (unpersisted) and the
    /// error goes to `report`: recording must not stop because the id file is unwritable.
    /// Neither the sink nor `report` runs with the lock held: a callback that starts frames
    /// on this recorder (needing ids) must not deadlock.
    pub(crate) fn chunk(&self, sink: &dyn Sink, report: impl FnOnce(Error)) -> u32 {
        let mut report = Some(report);
        loop {
            {
                let mut b = self.block.lock();
                if b.1 >= CHUNK {
                    let first = b.0;
                    b.0 = b.0.wrapping_add(CHUNK);
                    b.1 -= CHUNK;
                    return first;
                }
            }
            let reserved = sink.reserve_ids(BLOCK);
            let mut b = self.block.lock();
            // Another thread may have refilled meanwhile; then this block is simply unused.
            let refill = b.1 < CHUNK;
            match reserved {
                Ok(first) if refill => *b = (first, BLOCK),
                Ok(_) => {}
                Err(e) => {
                    if refill {
                        b.1 = BLOCK;
                    }
                    drop(b);
                    if let Some(r) = report.take() {
                        r(Error::ReserveIds(e));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem_sink::MemSink;

    #[test]
    fn chunks_never_overlap_and_come_from_reserved_blocks() {
        let sink = MemSink::new(3);
        let ids = IdSource::new();
        let mut firsts: Vec<u32> = (0..200)
            .map(|_| ids.chunk(&sink, |e| panic!("{e}")))
            .collect();
        // 200 chunks of 1024 need four 65,536-id blocks.
        assert_eq!(sink.reservations(), 4);
        firsts.sort_unstable();
        for w in firsts.windows(2) {
            assert!(w[1] - w[0] >= CHUNK);
        }
    }
}
