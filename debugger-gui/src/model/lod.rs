//! Level of detail: which boxes to draw for one row in a time window at a given resolution.
//!
//! Frames at least one pixel wide are returned one by one. Runs of consecutive frames that are
//! narrower than a pixel, with gaps under a pixel between them, are merged into one box.
//! Because a row is sorted by start and by end (its frames never overlap), the query binary
//! searches for the first visible frame. A merged run then grows through the row's
//! multi-resolution summary ([`Row::summary`]): aligned blocks of 16, 256, 4096 and 65,536
//! frames record their largest gap and largest duration, so a block whose frames are all
//! narrow and close together joins the run in one step. Ending a run costs at most a few dozen
//! steps, so the work follows the number of boxes drawn (bounded by pixels), not the number of
//! frames in view. The summary is appended to as frames arrive (half a byte per frame) and
//! never rebuilt.

use super::calltree::CallTree;
use super::{Model, OPEN, Row, SUMMARY_LEVELS, SUMMARY_SHIFT};

/// One box to draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LodBox {
    /// Start (ns since the Unix epoch).
    pub start: u64,
    /// End (ns; open frames end at the newest time).
    pub end: u64,
    /// Index of the (first) frame in the row.
    pub first: u32,
    /// Number of frames the box stands for (1 = a single frame).
    pub count: u32,
}

impl LodBox {
    /// True if the box merges several sub-pixel frames.
    pub fn is_merged(&self) -> bool {
        self.count > 1
    }
}

/// Appends to `out` the boxes of `row` visible in `[t0, t1)` when one pixel spans `px_ns`
/// nanoseconds. Open frames end at `newest`.
pub fn row_boxes(row: &Row, t0: u64, t1: u64, px_ns: f64, newest: u64, out: &mut Vec<LodBox>) {
    let n = row.len();
    if n == 0 || t1 <= t0 {
        return;
    }
    let px = px_ns.max(1.0).ceil() as u64;
    let end_of = |i: usize| {
        let e = row.end(i);
        if e == OPEN {
            newest.max(row.start(i))
        } else {
            e
        }
    };
    // Ends are sorted (open frames only at the tail), so the first visible frame is found by
    // binary search.
    let mut i = row.end_partition_point(|e| e != OPEN && e < t0);
    while i < n && row.start(i) < t1 {
        let s = row.start(i);
        let e = end_of(i);
        if e - s >= px {
            out.push(LodBox {
                start: s,
                end: e,
                first: i as u32,
                count: 1,
            });
            i += 1;
            continue;
        }
        // A run of narrow frames: extend while the next frame is narrow and starts within a
        // pixel of the run's end, skipping whole summarized blocks that satisfy both.
        let first = i;
        let mut last = i; // last frame merged so far
        let mut run_end = e;
        'extend: loop {
            let j = last + 1;
            if j >= n || row.start(j) >= t1 {
                break;
            }
            if j.is_multiple_of(16) {
                for lvl in (0..SUMMARY_LEVELS).rev() {
                    let b = 1usize << (SUMMARY_SHIFT * (lvl as u32 + 1));
                    if !j.is_multiple_of(b) {
                        continue;
                    }
                    if let Some(&(g, d)) = row.summary[lvl].get(j / b)
                        && g != u32::MAX
                        && d != u32::MAX
                        && (g as u64) < px
                        && (d as u64) < px
                        && row.start(j + b - 1) < t1
                    {
                        last = j + b - 1;
                        run_end = row.end(last);
                        continue 'extend;
                    }
                }
            }
            let s = row.start(j);
            if s >= run_end.saturating_add(px) {
                break;
            }
            let ej = end_of(j);
            if ej - s >= px {
                break; // a wide frame: drawn on its own
            }
            last = j;
            run_end = ej;
        }
        out.push(LodBox {
            start: row.start(first),
            end: run_end,
            first: first as u32,
            count: (last - first + 1) as u32,
        });
        i = last + 1;
    }
}

/// Frames a merged box's summary reads at most (beyond, it says so).
pub const MERGED_SCAN: usize = 1 << 20;
/// Frames read to choose a merged box's colour and label: a paint may draw thousands of
/// merged boxes, so each reads only its first few frames.
pub const MERGED_SAMPLE: usize = 16;

/// What a merged box stands for (its tooltip).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergedSummary {
    /// Frames in the box.
    pub frames: u32,
    /// Frames read (less than `frames` when the box is huge).
    pub scanned: u32,
    /// Sum of the read frames' durations, ns.
    pub total_ns: u64,
    /// Index (in the row) of the longest read frame, and its duration.
    pub largest: (u32, u64),
}

/// The look of a merged box: the category most of its first frames have, and their label if
/// they all share one (read over at most [`MERGED_SAMPLE`] frames; a bigger box has none).
pub fn merged_look(row: &Row, tree: &CallTree, b: &LodBox) -> (u8, Option<u32>) {
    let first = b.first as usize;
    let n = (b.count as usize).min(MERGED_SAMPLE);
    let mut counts = [0u32; 256];
    for &c in &row.category[first..first + n] {
        counts[c as usize] += 1;
    }
    let dominant = (0..256).max_by_key(|&c| counts[c]).unwrap_or(0) as u8;
    let l0 = tree.label(row.node(first));
    let same = (b.count as usize) <= MERGED_SAMPLE
        && row
            .nodes(first..first + n)
            .all(|node| tree.label(node) == l0);
    (dominant, same.then_some(l0))
}

/// Sums what a merged box stands for.
pub fn merged_summary(row: &Row, b: &LodBox, newest: u64) -> MergedSummary {
    let first = b.first as usize;
    let n = (b.count as usize).min(MERGED_SCAN).min(row.len() - first);
    let mut total = 0u64;
    let mut largest = (b.first, 0u64);
    for i in first..first + n {
        let d = row.end_or(i, newest) - row.start(i);
        total += d;
        if d > largest.1 {
            largest = (i as u32, d);
        }
    }
    MergedSummary {
        frames: b.count,
        scanned: n as u32,
        total_ns: total,
        largest,
    }
}

impl Model {
    /// Boxes of one lane row visible in `[t0, t1)` at `px_ns` ns per pixel (see [`row_boxes`]).
    pub fn lod_row(
        &self,
        lane: u32,
        row: u32,
        t0: u64,
        t1: u64,
        px_ns: f64,
        out: &mut Vec<LodBox>,
    ) {
        if let Some(r) = self
            .lanes()
            .get(lane as usize)
            .and_then(|l| l.rows.get(row as usize))
        {
            row_boxes(r, t0, t1, px_ns, self.newest(), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::row::NewFrame;
    use crate::model::test_log::Log;

    fn row_of(frames: &[(u64, u64)]) -> Row {
        let mut r = Row::default();
        for (k, &(s, e)) in frames.iter().enumerate() {
            r.push(NewFrame {
                start: s,
                end: e,
                id: k as u32,
                ..NewFrame::default()
            });
        }
        r
    }

    #[test]
    fn a_merged_box_sums_its_frames_and_names_the_longest() {
        let mut r = Row::default();
        let mut tree = CallTree::default();
        // Label 1 on all but the third frame; categories 8, 8, 0.
        for (k, (s, e, label, cat)) in [(0, 10, 1, 8), (12, 40, 1, 8), (41, 45, 2, 0)]
            .into_iter()
            .enumerate()
        {
            r.push(NewFrame {
                start: s,
                end: e,
                node: tree.child(super::super::calltree::ROOT, label),
                id: k as u32,
                category: cat,
                ..NewFrame::default()
            });
        }
        let b = LodBox {
            start: 0,
            end: 45,
            first: 0,
            count: 3,
        };
        let s = merged_summary(&r, &b, 45);
        assert_eq!(
            (s.frames, s.scanned, s.total_ns, s.largest),
            (3, 3, 42, (1, 28))
        );
        assert_eq!(
            merged_look(&r, &tree, &b),
            (8, None),
            "dominant category, labels differ"
        );
        let b2 = LodBox {
            start: 0,
            end: 40,
            first: 0,
            count: 2,
        };
        assert_eq!(
            merged_look(&r, &tree, &b2),
            (8, Some(1)),
            "all share a label"
        );
    }

    /// Reference: the same merge rule, frame by frame.
    fn naive(row: &Row, t0: u64, t1: u64, px: u64, newest: u64) -> Vec<LodBox> {
        let mut out: Vec<LodBox> = Vec::new();
        let mut open_run = false;
        for i in 0..row.len() {
            let s = row.start(i);
            let e = row.end_or(i, newest);
            if e < t0 || s >= t1 {
                continue;
            }
            let narrow = e - s < px;
            if narrow
                && open_run
                && let Some(b) = out.last_mut()
                && s < b.end + px
            {
                b.end = e;
                b.count += 1;
                continue;
            }
            out.push(LodBox {
                start: s,
                end: e,
                first: i as u32,
                count: 1,
            });
            open_run = narrow;
        }
        out
    }

    #[test]
    fn wide_frames_are_returned_one_by_one() {
        let row = row_of(&[(0, 100), (100, 250), (300, 400)]);
        let mut out = Vec::new();
        row_boxes(&row, 0, 1000, 10.0, 400, &mut out);
        assert_eq!(out.len(), 3);
        assert!(out.iter().all(|b| b.count == 1));
        out.clear();
        row_boxes(&row, 120, 260, 10.0, 400, &mut out);
        assert_eq!(out.iter().map(|b| b.first).collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn narrow_runs_merge_into_one_box() {
        // 1000 frames of 2 ns every 3 ns, at 10 ns per pixel: one merged box.
        let frames: Vec<(u64, u64)> = (0..1000).map(|i| (i * 3, i * 3 + 2)).collect();
        let row = row_of(&frames);
        let mut out = Vec::new();
        row_boxes(&row, 0, 10_000, 10.0, 0, &mut out);
        assert_eq!(
            out,
            vec![LodBox {
                start: 0,
                end: 2999,
                first: 0,
                count: 1000
            }]
        );
        // A gap wider than a pixel splits the run.
        let mut frames = frames;
        frames.push((5000, 5002));
        let row = row_of(&frames);
        out.clear();
        row_boxes(&row, 0, 10_000, 10.0, 0, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].count, 1);
    }

    #[test]
    fn matches_the_naive_merge_on_random_rows() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(42);
        for _ in 0..200 {
            let mut t = 0u64;
            let mut frames = Vec::new();
            for _ in 0..rng.gen_range(0..300) {
                t += rng.gen_range(0..40);
                let d = if rng.gen_bool(0.1) {
                    rng.gen_range(20..200)
                } else {
                    rng.gen_range(0..12)
                };
                frames.push((t, t + d));
                t += d;
            }
            let row = row_of(&frames);
            let px = rng.gen_range(1..30u64);
            let t0 = rng.gen_range(0..t.max(1));
            let t1 = t0 + rng.gen_range(1..t.max(2));
            let mut got = Vec::new();
            row_boxes(&row, t0, t1, px as f64, t, &mut got);
            let want = naive(&row, t0, t1, px, t);
            // Every frame visible in the window is covered exactly once, in order.
            let covered: u32 = got.iter().map(|b| b.count).sum();
            let want_cov: u32 = want.iter().map(|b| b.count).sum();
            assert_eq!(covered, want_cov, "px {px} window {t0}..{t1}");
            assert!(got.len() <= want.len() + 1);
            for w in got.windows(2) {
                assert_eq!(w[0].first + w[0].count, w[1].first);
            }
            for b in &got {
                let last = (b.first + b.count - 1) as usize;
                if b.count > 1 {
                    // Merged boxes only hold narrow frames.
                    for i in b.first as usize..=last {
                        assert!(row.end(i) - row.start(i) < px);
                    }
                }
                assert_eq!(b.start, row.start(b.first as usize));
                assert_eq!(b.end, row.end(last));
            }
        }
    }

    #[test]
    fn block_skips_match_the_naive_merge_on_large_rows() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        for round in 0..6 {
            let mut t = 0u64;
            let mut frames = Vec::new();
            for _ in 0..70_000 {
                // Mostly short frames close together, with rare long frames and long gaps.
                t += if rng.gen_bool(0.001) {
                    rng.gen_range(0..5_000)
                } else {
                    rng.gen_range(0..8)
                };
                let d = if rng.gen_bool(0.0005) {
                    rng.gen_range(500..5_000)
                } else {
                    rng.gen_range(0..10)
                };
                frames.push((t, t + d));
                t += d;
            }
            let row = row_of(&frames);
            assert_eq!(
                row.summary[3].len(),
                1,
                "a 65,536-frame block is summarized"
            );
            for px in [1u64, 5, 20, 100, 1_000, 10_000, 1_000_000] {
                let (t0, t1) = if round % 2 == 0 {
                    (0, t + 1)
                } else {
                    (t / 3, t / 3 + t / 4)
                };
                let mut got = Vec::new();
                row_boxes(&row, t0, t1, px as f64, t, &mut got);
                let want = naive(&row, t0, t1, px, t);
                assert_eq!(got, want, "px {px} window {t0}..{t1}");
            }
        }
    }

    #[test]
    fn open_frames_reach_the_newest_time() {
        let mut l = Log::default();
        l.start(0, 1, 100, 1, "open").start(0, 2, 50_000, 2, "x");
        let m = l.model();
        let mut out = Vec::new();
        m.lod_row(0, 0, 0, 100_000, 1.0, &mut out);
        assert_eq!(out[0].end, 50_000);
    }

    #[test]
    fn a_million_frames_reduce_to_pixels() {
        let frames: Vec<(u64, u64)> = (0..1_000_000u64).map(|i| (i * 10, i * 10 + 7)).collect();
        let row = row_of(&frames);
        let mut out = Vec::new();
        // 1000 px over the whole row: everything is sub-pixel and contiguous.
        row_boxes(&row, 0, 10_000_000, 10_000.0, 0, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].count, 1_000_000);
    }
}
