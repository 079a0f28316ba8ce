//! Row storage: the frames of one row of one lane as struct-of-arrays, with the per-row
//! summaries the level-of-detail query reads, and the lanes that hold rows.

use super::{FrameRef, OPEN};

/// The frames of one row of one lane, sorted by start and never overlapping.
#[derive(Default, Debug)]
pub struct Row {
    /// Start times, ns since the Unix epoch.
    pub start: Vec<u64>,
    /// End times ([`OPEN`] while unknown; only the last frame of a row can be open).
    pub end: Vec<u64>,
    /// Interned label ids.
    pub label: Vec<u32>,
    /// Context values.
    pub context: Vec<u32>,
    /// Frame ids (with the lane's worker, the frame's key).
    pub id: Vec<u32>,
    /// Category bytes.
    pub category: Vec<u8>,
    /// Call-tree nodes (the frame's call path, see [`calltree`](super::calltree)).
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

    /// True if a frame starting at `t` can be appended (the last frame ended by `t`).
    #[inline]
    pub(crate) fn free_at(&self, t: u64) -> bool {
        match self.end.last() {
            None => true,
            Some(&e) => e != OPEN && e <= t && self.start.last().is_none_or(|&s| s <= t),
        }
    }

    /// Summarizes the block of 16 frames ending just before index `len` (all of them are
    /// closed: a frame is only appended after the row's last frame ended), and cascades.
    pub(crate) fn summarize(&mut self, len: usize) {
        let a = len - 16;
        let (mut g, mut d) = (0u64, 0u64);
        for f in a..len {
            if f > 0 {
                g = g.max(self.start[f].saturating_sub(self.end[f - 1]));
            }
            d = d.max(self.end[f].saturating_sub(self.start[f]));
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
        self.end.push(f.end);
        self.label.push(f.label);
        self.context.push(f.context);
        self.id.push(f.id);
        self.category.push(f.category);
        self.node.push(f.node);
        i
    }

    /// End of frame `i`, with open frames ending at `newest`.
    #[inline]
    pub fn end_or(&self, i: usize, newest: u64) -> u64 {
        let e = self.end[i];
        if e == OPEN {
            newest.max(self.start[i])
        } else {
            e
        }
    }

    /// Room for `additional` more frames, exactly (no doubling).
    pub(crate) fn reserve_exact(&mut self, additional: usize) {
        self.start.reserve_exact(additional);
        self.end.reserve_exact(additional);
        self.label.reserve_exact(additional);
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
        self.end.shrink_to_fit();
        self.label.shrink_to_fit();
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
            + self.end.capacity() * 8
            + self.label.capacity() * 4
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
    pub(crate) label: u32,
    pub(crate) context: u32,
    pub(crate) id: u32,
    pub(crate) category: u8,
    pub(crate) node: u32,
}

/// A frame that may still be running in a lane (a parent candidate for new frames).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Active {
    pub(crate) start: u64,
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
    pub(crate) last_context: Option<(u64, u32)>,
}

impl Lane {
    /// Number of frames in the lane.
    pub fn frame_count(&self) -> usize {
        self.rows.iter().map(Row::len).sum()
    }
}
