//! Row storage: the frames of one row of one lane as struct-of-arrays, with the per-row
//! summaries the level-of-detail query reads, and the lanes that hold rows.

use rustc_hash::FxHashMap;

use super::{FrameRef, OPEN};

/// A duration column entry for an open frame.
const DUR_OPEN: u32 = u32::MAX;
/// A duration column entry for a frame too long for 32 bits of ns (4.29 s): its end is in
/// [`Row::long_ends`].
const DUR_LONG: u32 = u32::MAX - 1;

/// The frames of one row of one lane, sorted by start and never overlapping.
#[derive(Default, Debug)]
pub struct Row {
    /// Start times, ns since the Unix epoch.
    pub start: Vec<u64>,
    /// Durations in ns, [`DUR_OPEN`] while the end is unknown (only the last frame of a row
    /// can be open) and [`DUR_LONG`] from 4.29 s up: 4 bytes a frame where an end time would
    /// take 8. Read ends with [`Row::end`].
    dur: Vec<u32>,
    /// Ends of the frames whose duration does not fit the column, by index.
    long_ends: FxHashMap<u32, u64>,
    /// Context values.
    pub context: Vec<u32>,
    /// Frame ids (with the lane's worker, the frame's key).
    pub id: Vec<u32>,
    /// Category bytes.
    pub category: Vec<u8>,
    /// Call-tree nodes (the frame's call path, see [`calltree`](super::calltree)); the
    /// frame's label is its node's (`CallTree::label`), so it is not stored twice.
    pub node: Vec<u32>,
    /// Level-of-detail summary: for aligned blocks of 16, 256, 4096 and 65,536 frames, the
    /// largest gap before a frame and the largest duration in the block (ns, saturating at
    /// `u32::MAX`), so a merged run can skip whole blocks (see [`lod`]).
    pub summary: [Vec<(u32, u32)>; SUMMARY_LEVELS],
}

/// Levels of the per-row summary (block sizes 16, 256, 4096, 65,536).
pub const SUMMARY_LEVELS: usize = 4;
/// log2 of the block size ratio between summary levels.
pub const SUMMARY_SHIFT: u32 = 4;

#[inline]
fn sat32(v: u64) -> u32 {
    v.min(u32::MAX as u64) as u32
}

impl Row {
    /// Number of frames in the row.
    #[inline]
    pub fn len(&self) -> usize {
        self.start.len()
    }

    /// True if the row holds no frame.
    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }

    /// End of frame `i` ([`OPEN`] while unknown).
    #[inline]
    pub fn end(&self, i: usize) -> u64 {
        match self.dur[i] {
            DUR_OPEN => OPEN,
            DUR_LONG => self.long_end(i),
            d => self.start[i] + u64::from(d),
        }
    }

    #[cold]
    fn long_end(&self, i: usize) -> u64 {
        self.long_ends[&(i as u32)]
    }

    /// True while frame `i`'s end is unknown.
    #[inline]
    pub fn is_open(&self, i: usize) -> bool {
        self.dur[i] == DUR_OPEN
    }

    /// Sets frame `i`'s end (at or after its start; [`OPEN`]: unknown).
    #[inline]
    pub(crate) fn set_end(&mut self, i: usize, end: u64) {
        self.dur[i] = if end == OPEN {
            DUR_OPEN
        } else {
            // Callers end a frame at or after its start; saturating keeps a bad end harmless.
            let d = end.saturating_sub(self.start[i]);
            if d < u64::from(DUR_LONG) {
                d as u32
            } else {
                self.long_ends.insert(i as u32, end);
                DUR_LONG
            }
        };
    }

    /// The index of the first frame for which `ends_before(end)` is false, given it holds for
    /// a prefix of the row (as `partition_point` over the ends, which rows keep sorted).
    pub fn end_partition_point(&self, ends_before: impl Fn(u64) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if ends_before(self.end(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// True if a frame starting at `t` can be appended (the last frame ended by `t`).
    #[inline]
    pub(crate) fn free_at(&self, t: u64) -> bool {
        match self.len() {
            0 => true,
            n => {
                let e = self.end(n - 1);
                e != OPEN && e <= t && self.start[n - 1] <= t
            }
        }
    }

    /// Summarizes the block of 16 frames ending just before index `len` (all of them are
    /// closed: a frame is only appended after the row's last frame ended), and cascades.
    pub(crate) fn summarize(&mut self, len: usize) {
        let a = len - 16;
        let (mut g, mut d) = (0u64, 0u64);
        for f in a..len {
            if f > 0 {
                g = g.max(self.start[f].saturating_sub(self.end(f - 1)));
            }
            d = d.max(self.end(f).saturating_sub(self.start[f]));
        }
        self.summary[0].push((sat32(g), sat32(d)));
        for lvl in 0..SUMMARY_LEVELS - 1 {
            let n = self.summary[lvl].len();
            if !n.is_multiple_of(1 << SUMMARY_SHIFT) {
                break;
            }
            let (g, d) = self.summary[lvl][n - (1 << SUMMARY_SHIFT)..]
                .iter()
                .fold((0, 0), |(g, d), &(bg, bd)| (g.max(bg), d.max(bd)));
            self.summary[lvl + 1].push((g, d));
        }
    }

    /// Appends a frame (starting at or after the row's last end); returns its index.
    #[inline]
    pub(crate) fn push(&mut self, f: NewFrame) -> u32 {
        let len = self.start.len();
        if len > 0 && len.is_multiple_of(16) {
            self.summarize(len);
        }
        let i = len as u32;
        self.start.push(f.start);
        self.dur.push(DUR_OPEN);
        if f.end != OPEN {
            self.set_end(len, f.end);
        }
        self.context.push(f.context);
        self.id.push(f.id);
        self.category.push(f.category);
        self.node.push(f.node);
        i
    }

    /// End of frame `i`, with open frames ending at `newest`.
    #[inline]
    pub fn end_or(&self, i: usize, newest: u64) -> u64 {
        let e = self.end(i);
        if e == OPEN {
            newest.max(self.start[i])
        } else {
            e
        }
    }

    /// Room for `additional` more frames, exactly (no doubling).
    pub(crate) fn reserve_exact(&mut self, additional: usize) {
        self.start.reserve_exact(additional);
        self.dur.reserve_exact(additional);
        self.context.reserve_exact(additional);
        self.id.reserve_exact(additional);
        self.category.reserve_exact(additional);
        self.node.reserve_exact(additional);
    }

    /// True if the next frame needs the arrays to grow.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.start.len() == self.start.capacity()
    }

    /// Gives back the arrays' spare capacity.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.start.shrink_to_fit();
        self.dur.shrink_to_fit();
        self.long_ends.shrink_to_fit();
        self.context.shrink_to_fit();
        self.id.shrink_to_fit();
        self.category.shrink_to_fit();
        self.node.shrink_to_fit();
        for s in &mut self.summary {
            s.shrink_to_fit();
        }
    }

    /// Heap bytes held by the row's arrays.
    pub fn heap_bytes(&self) -> usize {
        self.start.capacity() * 8
            + self.dur.capacity() * 4
            + self.long_ends.capacity() * 13
            + self.context.capacity() * 4
            + self.id.capacity() * 4
            + self.category.capacity()
            + self.node.capacity() * 4
            + self.summary.iter().map(|v| v.capacity() * 8).sum::<usize>()
    }
}

/// One frame as a row stores it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NewFrame {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) context: u32,
    pub(crate) id: u32,
    pub(crate) category: u8,
    pub(crate) node: u32,
}

/// A frame that may still be running in a lane (a parent candidate for new frames).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Active {
    pub(crate) start: u64,
    /// Its end once known ([`OPEN`] until then: the row then has it).
    pub(crate) end: u64,
    pub(crate) context: u32,
    pub(crate) at: FrameRef,
}

/// One lane: the frames one worker recorded on one thread.
#[derive(Debug)]
pub struct Lane {
    /// Worker (writing process) id.
    pub worker: u8,
    /// Thread number within the process ([`UNKNOWN_THREAD`] if never announced).
    pub thread: u32,
    /// Thread name from the ThreadInfo record (may be empty).
    pub thread_name: String,
    /// Rows by depth.
    pub rows: Vec<Row>,
    pub(crate) active: Vec<Active>,
}

impl Lane {
    /// Number of frames in the lane.
    pub fn frame_count(&self) -> usize {
        self.rows.iter().map(Row::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_round_trip_through_the_duration_column_whatever_their_length() {
        let mut r = Row::default();
        // Short, exactly at the column's limit, just past it, hours long, then open.
        let durs = [
            0u64,
            1_000,
            u64::from(DUR_LONG) - 1,
            u64::from(DUR_LONG),
            3_600_000_000_000,
        ];
        let mut t = 1_700_000_000_000_000_000u64;
        let mut ends = Vec::new();
        for d in durs {
            r.push(NewFrame {
                start: t,
                end: t + d,
                ..NewFrame::default()
            });
            ends.push(t + d);
            t += d + 10;
        }
        r.push(NewFrame {
            start: t,
            end: OPEN,
            ..NewFrame::default()
        });
        let got: Vec<u64> = (0..r.len()).map(|i| r.end(i)).collect();
        assert_eq!(&got[..5], &ends[..]);
        assert_eq!(got[5], OPEN);
        assert!(r.is_open(5) && !r.is_open(4));
        assert_eq!(r.end_or(5, t + 7), t + 7, "open: drawn to the newest time");
        assert!(!r.free_at(t + 1_000_000), "the open frame holds the row");
        // The open frame ends after 5 s (long again); the ends stay sorted for searches.
        r.set_end(5, t + 5_000_000_000);
        assert_eq!(r.end(5), t + 5_000_000_000);
        assert!(r.free_at(t + 5_000_000_000));
        for (i, &e) in ends.iter().enumerate() {
            assert_eq!(r.end_partition_point(|x| x < e), i);
            assert_eq!(r.end_partition_point(|x| x <= e), i + 1);
        }
        assert_eq!(r.end_partition_point(|_| true), r.len());
    }
}
