//! Hit testing: which frame of a row lies under a point in time.

use super::{FrameRef, Model};

impl Model {
    /// The frame of `lane`/`row` containing time `t`, or else the nearest one within `tol_ns`
    /// (so frames narrower than a pixel can still be picked).
    pub fn hit(&self, lane: u32, row: u32, t: u64, tol_ns: u64) -> Option<FrameRef> {
        let r = self.lanes().get(lane as usize)?.rows.get(row as usize)?;
        let n = r.len();
        if n == 0 {
            return None;
        }
        let newest = self.newest();
        // First frame starting after t; the candidate containing t is the one before it.
        let p = r.start_partition_point(|s| s <= t);
        let mut best: Option<(u64, usize)> = None;
        if p > 0 {
            let i = p - 1;
            let e = r.end_or(i, newest);
            let dist = t.saturating_sub(e.saturating_sub(1));
            if e > t || dist <= tol_ns {
                best = Some((if e > t { 0 } else { dist }, i));
            }
        }
        if p < n {
            let dist = r.start(p) - t;
            if dist <= tol_ns && best.is_none_or(|(d, _)| dist < d) {
                best = Some((dist, p));
            }
        }
        best.map(|(_, i)| FrameRef {
            lane,
            row,
            index: i as u32,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::model::test_log::{Log, at};

    #[test]
    fn picks_the_frame_under_the_pointer_or_the_nearest() {
        let mut l = Log::default();
        l.start(0, 1, 0, 1, "root")
            .start(0, 2, 100, 1, "a")
            .end(0, 2, 200)
            .start(0, 3, 300, 1, "b")
            .end(0, 3, 301)
            .end(0, 1, 1000);
        let m = l.model();
        assert_eq!(m.hit(0, 0, 500, 0), Some(at(0, 0, 0)));
        assert_eq!(m.hit(0, 1, 150, 0), Some(at(0, 1, 0)));
        assert_eq!(m.hit(0, 1, 250, 0), None);
        // A 1 ns frame is found with a pixel's tolerance.
        assert_eq!(m.hit(0, 1, 298, 5), Some(at(0, 1, 1)));
        assert_eq!(m.hit(0, 1, 305, 5), Some(at(0, 1, 1)));
        assert_eq!(m.hit(0, 1, 203, 5), Some(at(0, 1, 0)));
        assert_eq!(m.hit(0, 2, 150, 5), None);
        assert_eq!(m.hit(9, 0, 150, 5), None);
        assert_eq!(m.hit(0, 1, 2000, 5), None);
    }
}
