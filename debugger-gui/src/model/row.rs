//! Row storage: the frames of one row of one lane (24 bytes each in one array, the category
//! beside it), with the per-row summaries the level-of-detail query reads, and the lanes that
//! hold rows.

use rustc_hash::FxHashMap;

use super::OPEN;

/// A duration column entry for an open frame.
const DUR_OPEN: u32 = u32::MAX;
/// A duration column entry for a frame too long for 32 bits of ns (4.29 s): its end is in
/// [`Row::long_ends`].
const DUR_LONG: u32 = u32::MAX - 1;

/// The frames of one row of one lane, sorted by start and never overlapping.
///
/// A frame's fields are kept together (`Cell`), not a column each: placing a frame writes
/// one place in memory per row instead of six, and a log's lanes have many rows. With six
/// columns a row, the pushes alone cost ~10 ns a frame more (cache misses on 48 streams for
/// 2 lanes of 4 rows, measured in a standalone test).
#[derive(Default, Debug)]
pub struct Row {
    cells: Vec<Cell>,
    /// Ends of the frames whose duration does not fit [`Cell::dur`], by index.
    long_ends: FxHashMap<u32, u64>,
    /// Category bytes (apart: a 25-byte cell would be padded to 32).
    pub category: Vec<u8>,
    /// Level-of-detail summary: for aligned blocks of 16, 256, 4096 and 65,536 frames, the
    /// largest gap before a frame and the largest duration in the block (ns, saturating at
    /// `u32::MAX`), so a merged run can skip whole blocks (see the `lod` module).
    pub summary: [Vec<(u32, u32)>; SUMMARY_LEVELS],
}

/// A frame as a row keeps it (24 bytes).
#[derive(Clone, Copy, Debug, Default)]
struct Cell {
    /// Start time, ns since the Unix epoch.
    start: u64,
    /// Duration in ns, [`DUR_OPEN`] while the end is unknown (only the last frame of a row can
    /// be open) and [`DUR_LONG`] from 4.29 s up: 4 bytes where an end time would take 8. Read
    /// ends with [`Row::end`].
    dur: u32,
    /// Context value.
    context: u32,
    /// Frame id (with the lane's worker, the frame's key).
    id: u32,
    /// Call-tree node (the frame's call path, see [`calltree`](super::calltree)); the frame's
    /// label is its node's (`CallTree::label`), so it is not stored twice.
    node: u32,
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
        self.cells.len()
    }

    /// True if the row holds no frame.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// Start of frame `i` (ns since the Unix epoch).
    #[inline]
    pub fn start(&self, i: usize) -> u64 {
        self.cells[i].start
    }

    /// Context value of frame `i`.
    #[inline]
    pub fn context(&self, i: usize) -> u32 {
        self.cells[i].context
    }

    /// Id of frame `i` (with the lane's worker, its key).
    #[inline]
    pub fn id(&self, i: usize) -> u32 {
        self.cells[i].id
    }

    /// Call-tree node of frame `i` (its label is the node's).
    #[inline]
    pub fn node(&self, i: usize) -> u32 {
        self.cells[i].node
    }

    /// Gives frame `i` another call-tree node (its parent was found after it was placed).
    pub(crate) fn set_node(&mut self, i: usize, node: u32) {
        self.cells[i].node = node;
    }

    /// Call-tree nodes of the frames in `range`.
    pub fn nodes(&self, range: std::ops::Range<usize>) -> impl Iterator<Item = u32> + '_ {
        self.cells[range].iter().map(|c| c.node)
    }

    /// Starts of the frames from index `first` on.
    pub fn starts_from(&self, first: usize) -> impl Iterator<Item = u64> + '_ {
        self.cells[first..].iter().map(|c| c.start)
    }

    /// The index of the first frame whose start fails `pred`, given it holds for a prefix
    /// (as `partition_point` over the starts, which are sorted).
    #[inline]
    pub fn start_partition_point(&self, mut pred: impl FnMut(u64) -> bool) -> usize {
        self.cells.partition_point(|c| pred(c.start))
    }

    /// The index of the frame with id `id`, if the row holds it.
    pub fn position_of_id(&self, id: u32) -> Option<usize> {
        self.cells.iter().position(|c| c.id == id)
    }

    /// End of frame `i` ([`OPEN`] while unknown).
    #[inline]
    pub fn end(&self, i: usize) -> u64 {
        let c = &self.cells[i];
        match c.dur {
            DUR_OPEN => OPEN,
            DUR_LONG => self.long_end(i),
            d => c.start + u64::from(d),
        }
    }

    #[cold]
    fn long_end(&self, i: usize) -> u64 {
        self.long_ends[&(i as u32)]
    }

    /// True while frame `i`'s end is unknown.
    #[inline]
    pub fn is_open(&self, i: usize) -> bool {
        self.cells[i].dur == DUR_OPEN
    }

    /// Sets frame `i`'s end (at or after its start; [`OPEN`]: unknown).
    #[inline]
    pub(crate) fn set_end(&mut self, i: usize, end: u64) {
        self.cells[i].dur = if end == OPEN {
            DUR_OPEN
        } else {
            // Callers end a frame at or after its start; saturating keeps a bad end harmless.
            let d = end.saturating_sub(self.cells[i].start);
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
                e != OPEN && e <= t && self.cells[n - 1].start <= t
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
                g = g.max(self.cells[f].start.saturating_sub(self.end(f - 1)));
            }
            d = d.max(self.end(f).saturating_sub(self.cells[f].start));
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
        let len = self.cells.len();
        if len > 0 && len.is_multiple_of(16) {
            self.summarize(len);
        }
        let i = len as u32;
        self.cells.push(Cell {
            start: f.start,
            dur: DUR_OPEN,
            context: f.context,
            id: f.id,
            node: f.node,
        });
        if f.end != OPEN {
            self.set_end(len, f.end);
        }
        self.category.push(f.category);
        i
    }

    /// End of frame `i`, with open frames ending at `newest`.
    #[inline]
    pub fn end_or(&self, i: usize, newest: u64) -> u64 {
        let e = self.end(i);
        if e == OPEN {
            newest.max(self.cells[i].start)
        } else {
            e
        }
    }

    /// Room for `additional` more frames, exactly (no doubling).
    pub(crate) fn reserve_exact(&mut self, additional: usize) {
        self.cells.reserve_exact(additional);
        self.category.reserve_exact(additional);
    }

    /// Frames the row has room for.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.cells.capacity()
    }

    /// True if the next frame needs the arrays to grow.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.cells.len() == self.cells.capacity()
    }

    /// Gives back the arrays' spare capacity.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.cells.shrink_to_fit();
        self.long_ends.shrink_to_fit();
        self.category.shrink_to_fit();
        for s in &mut self.summary {
            s.shrink_to_fit();
        }
    }

    /// Heap bytes held by the row's arrays.
    pub fn heap_bytes(&self) -> usize {
        self.cells.capacity() * std::mem::size_of::<Cell>()
            + self.long_ends.capacity() * 13
            + self.category.capacity()
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
    /// Where it is in its lane (the lane is the list's).
    pub(crate) row: u32,
    pub(crate) index: u32,
    /// Its frame id (in the padding of the 32 bytes: a recorded parent is checked against
    /// the inferred one without reading the row).
    pub(crate) id: u32,
}

/// One lane: the frames one worker recorded on one thread.
#[derive(Debug)]
pub struct Lane {
    /// Worker (writing process) id.
    pub worker: u8,
    /// Thread number within the process ([`super::UNKNOWN_THREAD`] if never announced).
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
