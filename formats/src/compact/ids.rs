//! The id index of a compact frame log (`docs/FORMAT.md`, *Id index*): per block, the range of
//! each worker's FrameStart ids and each worker's thread at the block's first record, so that
//! a reader looking for one frame starts near it instead of at the segment's start. Pure, no
//! I/O.

use super::{get_varint, put_varint};
use crate::FrameKey;

/// Magic of the id index.
pub const ID_INDEX_MAGIC: [u8; 4] = *b"FLID";

/// Bytes of the id index around its body: magic, `len`, `crc`.
pub const ID_INDEX_OVERHEAD: usize = 12;

/// The smallest and largest FrameStart id one worker has in a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartRange {
    /// The worker.
    pub worker: u8,
    /// Its smallest FrameStart id in the block.
    pub min: u32,
    /// Its largest.
    pub max: u32,
}

/// One block's entry: its start ranges and the threads current at its first record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockIds {
    /// Workers with a FrameStart in the block, in increasing order.
    pub starts: Vec<StartRange>,
    /// (worker, thread) for each worker with a `thread_info` earlier in the segment.
    pub threads: Vec<(u8, u32)>,
}

/// A compact file's id index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdIndex {
    /// One entry per block of the block index, in its order.
    pub blocks: Vec<BlockIds>,
    /// (worker, thread) after the segment's last record.
    pub end_threads: Vec<(u8, u32)>,
}

impl IdIndex {
    /// The first block that may hold the FrameStart of `key` (no later block holds it before
    /// this one does).
    pub fn first_block_for(&self, key: FrameKey) -> Option<usize> {
        (0..self.blocks.len()).find(|&b| self.may_hold(b, key))
    }

    /// Whether block `b` may hold the FrameStart of `key`.
    pub fn may_hold(&self, b: usize, key: FrameKey) -> bool {
        self.blocks[b]
            .starts
            .iter()
            .any(|r| r.worker == key.worker && (r.min..=r.max).contains(&key.id))
    }

    /// The whole section: magic, `len`, body, `crc`.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        let threads = |out: &mut Vec<u8>, t: &[(u8, u32)]| {
            put_varint(out, t.len() as u64);
            for &(w, thread) in t {
                out.push(w);
                put_varint(out, u64::from(thread));
            }
        };
        for b in &self.blocks {
            put_varint(&mut body, b.starts.len() as u64);
            for r in &b.starts {
                body.push(r.worker);
                put_varint(&mut body, u64::from(r.min));
                put_varint(&mut body, u64::from(r.max - r.min));
            }
            threads(&mut body, &b.threads);
        }
        threads(&mut body, &self.end_threads);
        let mut out = Vec::with_capacity(body.len() + ID_INDEX_OVERHEAD);
        out.extend_from_slice(&ID_INDEX_MAGIC);
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&body);
        let c = crc32c::crc32c(&out);
        out.extend_from_slice(&c.to_le_bytes());
        out
    }

    /// Decodes the section in `bytes` (all of it, from its magic) for a file of `blocks`
    /// blocks: `None` unless its length, crc and every entry check.
    pub fn decode(bytes: &[u8], blocks: usize) -> Option<Self> {
        let len = section_len(bytes)?;
        if bytes.len() != len {
            return None;
        }
        let body_end = len - 4;
        let stated = u32::from_le_bytes(bytes[len - 4..].try_into().ok()?);
        if crc32c::crc32c(&bytes[..body_end]) != stated {
            return None;
        }
        let mut s = &bytes[8..body_end];
        let mut index = IdIndex::default();
        for _ in 0..blocks {
            let n = small_count(&mut s)?;
            let mut starts = Vec::with_capacity(n);
            for _ in 0..n {
                let worker = byte(&mut s)?;
                let min = u32::try_from(get_varint(&mut s)?).ok()?;
                let max = min.checked_add(u32::try_from(get_varint(&mut s)?).ok()?)?;
                if starts
                    .last()
                    .is_some_and(|r: &StartRange| r.worker >= worker)
                {
                    return None;
                }
                starts.push(StartRange { worker, min, max });
            }
            let threads = decode_threads(&mut s)?;
            index.blocks.push(BlockIds { starts, threads });
        }
        index.end_threads = decode_threads(&mut s)?;
        s.is_empty().then_some(index)
    }
}

/// The length of the section starting at `bytes` as its header states it (`None` if it does
/// not start with the magic or states more than `u32` bytes can).
pub fn section_len(bytes: &[u8]) -> Option<usize> {
    if bytes.len() < ID_INDEX_OVERHEAD || bytes[0..4] != ID_INDEX_MAGIC {
        return None;
    }
    let body = u32::from_le_bytes(bytes[4..8].try_into().ok()?) as usize;
    body.checked_add(ID_INDEX_OVERHEAD)
}

fn byte(s: &mut &[u8]) -> Option<u8> {
    let (&b, rest) = s.split_first()?;
    *s = rest;
    Some(b)
}

/// A count of per-worker entries: at most one a worker.
fn small_count(s: &mut &[u8]) -> Option<usize> {
    let n = get_varint(s)?;
    (n <= 256).then_some(n as usize)
}

fn decode_threads(s: &mut &[u8]) -> Option<Vec<(u8, u32)>> {
    let n = small_count(s)?;
    let mut out: Vec<(u8, u32)> = Vec::with_capacity(n);
    for _ in 0..n {
        let w = byte(s)?;
        let t = u32::try_from(get_varint(s)?).ok()?;
        if out.last().is_some_and(|&(prev, _)| prev >= w) {
            return None;
        }
        out.push((w, t));
    }
    Some(out)
}

/// Builds the id index as a segment's records are encoded, block by block.
#[derive(Debug, Clone)]
pub(crate) struct IdIndexBuilder {
    index: IdIndex,
    /// Per worker: smallest and largest start id in the open block (`min > max`: none).
    min: Box<[u32; 256]>,
    max: Box<[u32; 256]>,
    /// Per worker: its current thread, if a `thread_info` of it was seen.
    thread: Box<[Option<u32>; 256]>,
    /// The threads at the open block's first record.
    block_threads: Vec<(u8, u32)>,
}

impl Default for IdIndexBuilder {
    fn default() -> Self {
        Self {
            index: IdIndex::default(),
            min: Box::new([u32::MAX; 256]),
            max: Box::new([0; 256]),
            thread: Box::new([None; 256]),
            block_threads: Vec::new(),
        }
    }
}

impl IdIndexBuilder {
    fn threads(&self) -> Vec<(u8, u32)> {
        (0..=255u8)
            .filter_map(|w| self.thread[w as usize].map(|t| (w, t)))
            .collect()
    }

    /// A block begins: called before its first record.
    pub fn begin_block(&mut self) {
        self.block_threads = self.threads();
    }

    /// A FrameStart of `worker` with `id` is in the open block.
    #[inline]
    pub fn start(&mut self, worker: u8, id: u32) {
        let w = worker as usize;
        self.min[w] = self.min[w].min(id);
        self.max[w] = self.max[w].max(id);
    }

    /// A `thread_info` of `worker` names `thread` (after the block began).
    #[inline]
    pub fn thread(&mut self, worker: u8, thread: u32) {
        self.thread[worker as usize] = Some(thread);
    }

    /// The open block was written.
    pub fn end_block(&mut self) {
        let mut starts = Vec::new();
        for w in 0..256 {
            if self.min[w] <= self.max[w] {
                starts.push(StartRange {
                    worker: w as u8,
                    min: self.min[w],
                    max: self.max[w],
                });
            }
        }
        self.min.fill(u32::MAX);
        self.max.fill(0);
        self.index.blocks.push(BlockIds {
            starts,
            threads: std::mem::take(&mut self.block_threads),
        });
    }

    /// The index, after the last block.
    pub fn finish(mut self) -> IdIndex {
        self.index.end_threads = self.threads();
        self.index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> IdIndex {
        IdIndex {
            blocks: vec![
                BlockIds {
                    starts: vec![
                        StartRange {
                            worker: 0,
                            min: 1,
                            max: 900,
                        },
                        StartRange {
                            worker: 3,
                            min: 70_000,
                            max: 70_000,
                        },
                    ],
                    threads: vec![],
                },
                BlockIds {
                    starts: vec![StartRange {
                        worker: 0,
                        min: 850,
                        max: u32::MAX,
                    }],
                    threads: vec![(0, 7), (3, u32::MAX)],
                },
            ],
            end_threads: vec![(0, 8), (3, 1)],
        }
    }

    #[test]
    fn round_trips_and_finds_the_first_block_that_may_hold_a_start() {
        let ix = sample();
        let bytes = ix.encode();
        assert_eq!(section_len(&bytes), Some(bytes.len()));
        assert_eq!(IdIndex::decode(&bytes, 2), Some(ix.clone()));
        assert_eq!(ix.first_block_for(FrameKey::new(0, 860)), Some(0));
        assert_eq!(ix.first_block_for(FrameKey::new(0, 901)), Some(1));
        assert_eq!(ix.first_block_for(FrameKey::new(3, 70_000)), Some(0));
        assert_eq!(ix.first_block_for(FrameKey::new(3, 69_999)), None);
        assert_eq!(ix.first_block_for(FrameKey::new(1, 5)), None);
    }

    #[test]
    fn refuses_every_damaged_or_cut_section() {
        let bytes = sample().encode();
        assert_eq!(
            IdIndex::decode(&bytes, 1),
            None,
            "entries for another block count"
        );
        assert_eq!(IdIndex::decode(&bytes, 3), None);
        for cut in 0..bytes.len() {
            assert_eq!(IdIndex::decode(&bytes[..cut], 2), None, "cut at {cut}");
        }
        for at in 0..bytes.len() {
            let mut b = bytes.clone();
            b[at] ^= 0x10;
            assert_eq!(IdIndex::decode(&b, 2), None, "byte {at} flipped");
        }
    }

    #[test]
    fn the_builder_records_ranges_per_block_and_threads_at_each_block_start() {
        let mut b = IdIndexBuilder::default();
        b.begin_block();
        b.thread(2, 40);
        b.start(2, 10);
        b.start(2, 4);
        b.start(0, 99);
        b.end_block();
        b.begin_block();
        b.thread(2, 41);
        b.end_block();
        let ix = b.finish();
        assert_eq!(ix.blocks.len(), 2);
        assert_eq!(
            ix.blocks[0].starts,
            vec![
                StartRange {
                    worker: 0,
                    min: 99,
                    max: 99
                },
                StartRange {
                    worker: 2,
                    min: 4,
                    max: 10
                }
            ]
        );
        assert!(ix.blocks[0].threads.is_empty());
        assert!(ix.blocks[1].starts.is_empty());
        assert_eq!(ix.blocks[1].threads, vec![(2, 40)]);
        assert_eq!(ix.end_threads, vec![(2, 41)]);
    }
}
