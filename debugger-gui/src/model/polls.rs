//! Where asynchronous frames' time went (record types 10 and 11): each frame's polls in a
//! side table beside the rows (synchronous frames have none), and the slow polls, the
//! moments a thread was blocked, on the lanes they blocked.
//!
//! A frame-polls record comes right before its frame's end, while the frame still runs, so it
//! is placed as a frame-allocation record is (the thread's running frames, else by time). A
//! slow poll comes at the end of the poll, while its frame still runs, on the lane of the
//! thread it blocked.

use formats::{Breakdown, FramePolls};

use super::FrameRef;

/// A poll that held its thread at least the writer's slow-poll threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlowPollAt {
    /// The lane (thread) it blocked.
    pub lane: u32,
    /// When it began, ns since the epoch.
    pub start: u64,
    /// How long it held the thread.
    pub duration_ns: u64,
    /// The frame whose code blocked, if it is in the model.
    pub frame: Option<FrameRef>,
}

impl SlowPollAt {
    /// When it ended.
    pub fn end(&self) -> u64 {
        self.start.saturating_add(self.duration_ns)
    }
}

/// Every asynchronous frame's polls, and every slow poll.
#[derive(Debug, Default)]
pub struct Polls {
    /// Each frame's record, in the order read; found through `by_row`.
    records: Vec<(FrameRef, FramePolls)>,
    /// By lane and row: (frame index, its record's index in `records`), sorted by frame
    /// index. A row's frames end in index order (rows never hold overlapping frames) and a
    /// frame's record comes right before its end, so records are appended, not inserted: a
    /// hash map keyed by frame cost ~0.25-0.45 µs a record on a large log (cache misses and
    /// rehashing), most of what reading them cost.
    by_row: Vec<Vec<Vec<(u32, u32)>>>,
    slow: Vec<SlowPollAt>,
    /// By lane: indices into `slow` sorted by start, and the longest poll's duration there
    /// (how far back from a time range's start a poll can still reach into it).
    by_lane: Vec<(Vec<u32>, u64)>,
    unplaced: u64,
}

/// Slow polls of one lane drawn as one mark: those closer together than a pixel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlowMark {
    /// The first poll's start.
    pub start: u64,
    /// The last poll's end.
    pub end: u64,
    /// The longest poll among them (its index in [`Polls::slow_polls`]).
    pub worst: u32,
    /// How many polls the mark stands for.
    pub count: u32,
}

impl Polls {
    /// Frame `at`'s polls record.
    pub(crate) fn set(&mut self, at: FrameRef, p: FramePolls) {
        let next = self.records.len() as u32;
        let (lane, row) = (at.lane as usize, at.row as usize);
        if self.by_row.len() <= lane {
            self.by_row.resize_with(lane + 1, Vec::new);
        }
        let rows = &mut self.by_row[lane];
        if rows.len() <= row {
            rows.resize_with(row + 1, Vec::new);
        }
        let list = &mut rows[row];
        if list.last().is_none_or(|&(i, _)| i < at.index) {
            list.push((at.index, next));
            self.records.push((at, p));
            return;
        }
        match list.binary_search_by_key(&at.index, |&(i, _)| i) {
            // A second record for a frame: the last one read holds (docs/FORMAT.md).
            Ok(k) => self.records[list[k].1 as usize].1 = p,
            Err(k) => {
                list.insert(k, (at.index, next));
                self.records.push((at, p));
            }
        }
    }

    /// A slow poll.
    pub(crate) fn slow(&mut self, s: SlowPollAt) {
        let i = self.slow.len() as u32;
        self.slow.push(s);
        let lane = s.lane as usize;
        if self.by_lane.len() <= lane {
            self.by_lane.resize_with(lane + 1, Default::default);
        }
        let (list, longest) = &mut self.by_lane[lane];
        *longest = (*longest).max(s.duration_ns);
        // Read mostly in time order: the insertion point is at or near the end.
        let slow = &self.slow;
        let at = list.partition_point(|&j| slow[j as usize].start <= s.start);
        list.insert(at, i);
    }

    /// The slow polls of lane `lane` that overlap `[t0, t1)`, merged into one mark where
    /// they are closer together than `px_ns` (a pixel), in time order.
    pub fn marks(&self, lane: u32, t0: u64, t1: u64, px_ns: f64, out: &mut Vec<SlowMark>) {
        out.clear();
        let Some((list, longest)) = self.by_lane.get(lane as usize) else {
            return;
        };
        let slow = &self.slow;
        let from = t0.saturating_sub(*longest);
        let first = list.partition_point(|&j| slow[j as usize].start < from);
        let gap = px_ns.max(0.0) as u64;
        for &j in &list[first..] {
            let s = &slow[j as usize];
            if s.start >= t1 {
                break;
            }
            if s.end() < t0 {
                continue;
            }
            match out.last_mut() {
                Some(m) if s.start <= m.end.saturating_add(gap) => {
                    m.end = m.end.max(s.end());
                    m.count += 1;
                    if s.duration_ns > slow[m.worst as usize].duration_ns {
                        m.worst = j;
                    }
                }
                _ => out.push(SlowMark {
                    start: s.start,
                    end: s.end(),
                    worst: j,
                    count: 1,
                }),
            }
        }
    }

    /// A record whose frame is not in the model.
    pub(crate) fn unplaced(&mut self) {
        self.unplaced += 1;
    }

    /// Frame `at`'s polls, if it is asynchronous and recorded them.
    pub fn of(&self, at: FrameRef) -> Option<&FramePolls> {
        if self.records.is_empty() {
            return None;
        }
        let list = self.by_row.get(at.lane as usize)?.get(at.row as usize)?;
        let k = list.binary_search_by_key(&at.index, |&(i, _)| i).ok()?;
        self.records.get(list[k].1 as usize).map(|(_, p)| p)
    }

    /// Frame `at`'s duration `duration_ns` split into busy, queued and waiting, if it
    /// recorded its polls.
    pub fn split(&self, at: FrameRef, duration_ns: u64) -> Option<Breakdown> {
        self.of(at).map(|p| p.split(duration_ns))
    }

    /// Every frame with polls.
    pub fn frames(&self) -> impl Iterator<Item = (&FrameRef, &FramePolls)> {
        self.records.iter().map(|(at, p)| (at, p))
    }

    /// Asynchronous frames with polls.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True if no frame recorded polls (a log of synchronous work, or one that predates them).
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Every slow poll, in the order read.
    pub fn slow_polls(&self) -> &[SlowPollAt] {
        &self.slow
    }

    /// Slow polls, longest first.
    pub fn worst_slow_polls(&self) -> Vec<SlowPollAt> {
        let mut v = self.slow.clone();
        v.sort_by(|a, b| {
            b.duration_ns
                .cmp(&a.duration_ns)
                .then(a.start.cmp(&b.start))
        });
        v
    }

    /// Records whose frame was not in the model.
    pub fn unplaced_count(&self) -> u64 {
        self.unplaced
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.records.capacity() * std::mem::size_of::<(FrameRef, FramePolls)>()
            + self.slow.capacity() * std::mem::size_of::<SlowPollAt>()
            + self
                .by_row
                .iter()
                .flatten()
                .map(|r| r.capacity() * 8 + 24)
                .sum::<usize>()
            + self
                .by_lane
                .iter()
                .map(|(l, _)| l.capacity() * 4 + 32)
                .sum::<usize>()
    }
}

impl super::Model {
    /// A frame's polls: placed as a frame-allocation record is (see [`super::allocs`]).
    #[cold]
    pub(super) fn frame_polls(&mut self, p: &FramePolls) {
        match self.running_frame(p.worker, p.id, p.timestamp) {
            Some(at) => self.polls.set(at, *p),
            None => self.polls.unplaced(),
        }
    }

    /// A slow poll, on the lane of the thread it blocked.
    #[cold]
    pub(super) fn slow_poll(&mut self, s: &formats::SlowPoll) {
        // Its start only: it is written as the poll ends, inside a frame whose end comes
        // later; a damaged or foreign record's huge duration must not stretch the timeline.
        self.touch(s.timestamp);
        let lane = self.current_lane(s.worker);
        let frame = self.running_frame(s.worker, s.id, s.timestamp);
        if frame.is_none() {
            self.polls.unplaced();
        }
        self.polls.slow(SlowPollAt {
            lane,
            start: s.timestamp,
            duration_ns: s.duration_ns,
            frame,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;
    use crate::model::test_log::Log;
    use formats::FrameKey;

    /// An async request (polls recorded) with a synchronous child, on thread 1; a slow poll
    /// in it, two more close together on thread 2, and one of a frame not in the log.
    fn log() -> Log {
        let mut l = Log::default();
        l.thread(0, 1, "w1")
            .start(0, 1, 1_000, 1, "task")
            .start(0, 2, 2_000, 1, "reindex")
            .slow_poll(0, 1, 1_500, 7_000)
            .end(0, 2, 8_000)
            .polls(0, 1, 11_000, (3, 7_500, 1_500, 7_000, 500, 1), true)
            .end(0, 1, 11_000)
            .thread(0, 2, "w2")
            .start(0, 3, 20_000, 3, "other")
            .slow_poll(0, 3, 20_000, 1_000)
            .slow_poll(0, 3, 21_100, 3_000)
            .slow_poll(0, 99, 30_000, 2_000)
            .end(0, 3, 40_000);
        l
    }

    #[test]
    fn a_frames_polls_split_its_duration_and_slow_polls_land_on_their_lanes() {
        for m in [
            log().model(),
            crate::model::tests::through_reader_stage(&log().bytes),
        ] {
            let task = m.find(FrameKey::new(0, 1)).unwrap();
            let p = m.polls().of(task).expect("the task's polls");
            assert_eq!((p.polls, p.busy_ns, p.slow_polls), (3, 7_500, 1));
            assert_eq!(
                m.polls().split(task, 10_000),
                Some(Breakdown {
                    busy_ns: 7_500,
                    queued_ns: 1_500,
                    waiting_ns: 1_000
                })
            );
            let reindex = m.find(FrameKey::new(0, 2)).unwrap();
            assert!(m.polls().of(reindex).is_none(), "a synchronous frame");
            assert_eq!(m.polls().len(), 1);
            let worst = m.polls().worst_slow_polls();
            assert_eq!(
                worst.iter().map(|s| s.duration_ns).collect::<Vec<_>>(),
                [7_000, 3_000, 2_000, 1_000]
            );
            assert_eq!(worst[0].frame, Some(task));
            assert_eq!(worst[0].lane, task.lane);
            assert_eq!(worst[2].frame, None, "its frame is not in the log");
            assert_eq!(m.polls().unplaced_count(), 1);
        }
    }

    #[test]
    fn a_slow_poll_claiming_forever_does_not_stretch_the_timeline() {
        let mut l = Log::default();
        l.thread(0, 1, "w1")
            .start_with(0, 1, 1_000, 1, "task", formats::Parent::Root)
            .slow_poll(0, 1, 2_000, u64::MAX)
            .end(0, 1, 5_000);
        let m = l.model();
        assert_eq!(m.newest(), 5_000);
        assert_eq!(m.polls().slow_polls()[0].end(), u64::MAX);
    }

    #[test]
    fn a_second_record_for_a_frame_replaces_the_first() {
        let mut l = Log::default();
        l.start(0, 1, 0, 1, "task")
            .polls(0, 1, 100, (1, 10, 0, 10, 0, 0), true)
            .polls(0, 1, 100, (2, 40, 5, 30, 5, 0), true)
            .end(0, 1, 100);
        let m = l.model();
        let task = m.find(FrameKey::new(0, 1)).unwrap();
        assert_eq!(
            m.polls().of(task).map(|p| (p.polls, p.busy_ns)),
            Some((2, 40))
        );
        assert_eq!((m.polls().len(), m.polls().frames().count()), (1, 1));
    }

    #[test]
    fn records_read_out_of_order_in_a_row_are_found() {
        use crate::model::test_log::at;
        let rec = |busy_ns| FramePolls {
            id: 1,
            worker: 0,
            timestamp: 0,
            flags: 0,
            polls: 1,
            busy_ns,
            queued_ns: 0,
            longest_poll_ns: 0,
            first_poll_ns: 0,
            slow_polls: 0,
        };
        let mut p = Polls::default();
        assert!(p.of(at(0, 0, 0)).is_none());
        for (f, busy) in [
            (at(0, 0, 5), 5),
            (at(0, 0, 2), 2),
            (at(2, 3, 0), 30),
            (at(0, 0, 9), 9),
            (at(0, 0, 4), 4),
            (at(0, 0, 2), 20),
        ] {
            p.set(f, rec(busy));
        }
        let busy = |f| p.of(f).map(|r| r.busy_ns);
        assert_eq!(busy(at(0, 0, 2)), Some(20), "the last record read");
        assert_eq!(
            [4, 5, 9].map(|i| busy(at(0, 0, i))),
            [Some(4), Some(5), Some(9)]
        );
        assert_eq!(busy(at(2, 3, 0)), Some(30));
        for none in [at(0, 0, 3), at(0, 1, 0), at(1, 0, 0), at(2, 3, 1)] {
            assert_eq!(busy(none), None, "{none:?}");
        }
        assert_eq!(p.len(), 5);
        assert_eq!(p.frames().count(), 5);
    }

    fn marks(m: &Model, lane: u32, t0: u64, t1: u64, px: f64) -> Vec<(u64, u64, u32, u64)> {
        let mut out = Vec::new();
        m.polls().marks(lane, t0, t1, px, &mut out);
        out.iter()
            .map(|k| {
                let worst = m.polls().slow_polls()[k.worst as usize].duration_ns;
                (k.start, k.end, k.count, worst)
            })
            .collect()
    }

    #[test]
    fn slow_poll_marks_cover_the_range_and_merge_below_a_pixel() {
        let m = log().model();
        let other = m.find(FrameKey::new(0, 3)).unwrap();
        let lane = other.lane;
        // Zoomed in: each poll its own mark; one that began before the range still shows.
        assert_eq!(
            marks(&m, lane, 0, 100_000, 10.0),
            [
                (20_000, 21_000, 1, 1_000),
                (21_100, 24_100, 1, 3_000),
                (30_000, 32_000, 1, 2_000)
            ]
        );
        assert_eq!(
            marks(&m, lane, 23_000, 25_000, 10.0),
            [(21_100, 24_100, 1, 3_000)]
        );
        assert!(marks(&m, lane, 24_200, 29_000, 10.0).is_empty());
        // Zoomed out (a pixel is 500 ns): the first two merge, named by the longer.
        assert_eq!(
            marks(&m, lane, 0, 100_000, 500.0),
            [(20_000, 24_100, 2, 3_000), (30_000, 32_000, 1, 2_000)]
        );
        // Another lane's poll is on its own lane only.
        let task = m.find(FrameKey::new(0, 1)).unwrap();
        assert_eq!(
            marks(&m, task.lane, 0, 100_000, 10.0),
            [(1_500, 8_500, 1, 7_000)]
        );
        assert!(marks(&m, 99, 0, 100_000, 10.0).is_empty());
    }
}
