//! Activity over time (the overview strip): how many frames start in each slice of the log.

use super::Model;

/// Frames an overview reads at most.
const SAMPLED_FRAMES: u64 = 1_000_000;

impl Model {
    /// Frames starting in each of `buckets` equal slices of `[from, to)`. Beyond 1 M frames,
    /// every k-th frame of each row is counted k times (an overview needs no exact count, and
    /// this keeps it to a few milliseconds on a 100 M-frame log).
    pub fn activity(&self, from: u64, to: u64, buckets: usize) -> Vec<u32> {
        let step = (self.frame_count() / SAMPLED_FRAMES).max(1) as usize;
        let mut out = vec![0u32; buckets];
        if buckets == 0 || to <= from {
            return out;
        }
        let span = (to - from) as f64;
        for lane in self.lanes() {
            for row in &lane.rows {
                let first = row.start_partition_point(|s| s < from);
                for s in row.starts_from(first).step_by(step) {
                    if s >= to {
                        break;
                    }
                    let b = (((s - from) as f64 / span) * buckets as f64) as usize;
                    out[b.min(buckets - 1)] += step as u32;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::model::test_log::Log;

    #[test]
    fn counts_frame_starts_per_slice() {
        let mut l = Log::default();
        // A burst of nested frames early, one frame late.
        l.start(0, 1, 0, 1, "req")
            .start(0, 2, 10, 1, "db")
            .end(0, 2, 20)
            .start(0, 3, 30, 1, "db")
            .end(0, 3, 40)
            .end(0, 1, 50)
            .start(0, 4, 900, 4, "job")
            .end(0, 4, 950);
        let m = l.model();
        let a = m.activity(0, 1000, 10);
        assert_eq!(a, vec![3, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(m.activity(0, 1000, 1), vec![4]);
        assert_eq!(
            m.activity(100, 900, 4),
            vec![0, 0, 0, 0],
            "`to` is exclusive"
        );
    }
}
