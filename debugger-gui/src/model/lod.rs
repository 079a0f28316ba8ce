//! Level of detail: which boxes to draw for one row in a time window at a given resolution.
//!
//! Frames at least one pixel wide are returned one by one. Runs of consecutive frames that are
//! narrower than a pixel, with gaps under a pixel between them, are merged into one box.
//! Because a row is sorted by start and by end (its frames never overlap), the query binary
//! searches for the first visible frame and then *gallops* (exponential search) over each
//! merged run: every step covers at least half a pixel of time, so the cost is
//! O(pixels · log(frames per pixel)) per row however many frames the window holds. The sorted
//! row arrays are the multi-resolution summary: no extra memory is spent on precomputed levels,
//! and nothing has to be rebuilt while a live log grows.

use super::{Model, OPEN, Row};

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

/// First index `j >= from` with `start[j] >= limit` (exponential then binary search).
#[inline]
fn gallop(start: &[u64], from: usize, limit: u64) -> usize {
    let n = start.len();
    if from >= n || start[from] >= limit {
        return from;
    }
    // start[lo] < limit holds throughout.
    let mut lo = from;
    let mut step = 1usize;
    let mut hi = loop {
        let probe = lo + step;
        if probe >= n {
            break n;
        }
        if start[probe] >= limit {
            break probe;
        }
        lo = probe;
        step *= 2;
    };
    // Binary search in (lo, hi].
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if start[mid] >= limit {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
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
        let e = row.end[i];
        if e == OPEN {
            newest.max(row.start[i])
        } else {
            e
        }
    };
    // Ends are sorted (open frames only at the tail), so the first visible frame is found by
    // binary search.
    let mut i = row.end.partition_point(|&e| e != OPEN && e < t0);
    while i < n && row.start[i] < t1 {
        let s = row.start[i];
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
        // A run of narrow frames: extend while the next frames start within a pixel.
        let first = i;
        let mut last = i; // last frame merged so far
        let mut run_end = e;
        loop {
            let limit = run_end.saturating_add(px).min(t1);
            let j = gallop(&row.start, last + 1, limit);
            if j == last + 1 {
                break; // nothing starts within a pixel of the run
            }
            let cand = j - 1;
            let ce = end_of(cand);
            if ce - row.start[cand] < px {
                last = cand;
                run_end = ce;
                if run_end >= t1 {
                    break;
                }
            } else {
                // A wide frame starts within the pixel: the frames before it are narrow and
                // lie between the run's end and its start, so they join the run.
                if cand > last + 1 {
                    last = cand - 1;
                    run_end = end_of(last);
                }
                break;
            }
        }
        out.push(LodBox {
            start: row.start[first],
            end: run_end,
            first: first as u32,
            count: (last - first + 1) as u32,
        });
        i = last + 1;
    }
}

impl Model {
    /// Boxes of one lane row visible in `[t0, t1)` at `px_ns` ns per pixel (see [`row_boxes`]).
    pub fn lod_row(&self, lane: u32, row: u32, t0: u64, t1: u64, px_ns: f64, out: &mut Vec<LodBox>) {
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
    use crate::model::tests::Log;

    fn row_of(frames: &[(u64, u64)]) -> Row {
        let mut r = Row::default();
        for (k, &(s, e)) in frames.iter().enumerate() {
            r.push(s, e, 0, 0, k as u32, 0);
        }
        r
    }

    /// Reference: the same merge rule, frame by frame.
    fn naive(row: &Row, t0: u64, t1: u64, px: u64, newest: u64) -> Vec<LodBox> {
        let mut out: Vec<LodBox> = Vec::new();
        let mut open_run = false;
        for i in 0..row.len() {
            let s = row.start[i];
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
                        assert!(row.end[i] - row.start[i] < px);
                    }
                }
                assert_eq!(b.start, row.start[b.first as usize]);
                assert_eq!(b.end, row.end[last]);
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
