//! Messages (record type 8): log lines, each an instant on the lane of the thread it was
//! written on (the worker's current ThreadInfo, as for frames), in the frame open there when it
//! was written (the record's id: a frame of the same worker, 0 none).
//!
//! Texts and fields live in two shared buffers (no allocation per message). Each lane keeps
//! its messages' indices in time order per level, so the markers of a time window cost one
//! binary search per drawn pixel ([`Messages::markers`]); the list filters by level and text
//! ([`Messages::filter`]).

use formats::{Level, Message};

/// One message (its text and fields are in [`Messages`]' buffers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// When it was written, ns since the Unix epoch.
    pub time: u64,
    /// The lane (worker + thread) it was written on.
    pub lane: u32,
    /// The frame open on the thread (same worker), or 0.
    pub frame: u32,
    /// That frame's context, or 0.
    pub context: u32,
    /// Writing process's worker id.
    pub worker: u8,
    /// Its severity.
    pub level: Level,
    text_at: usize,
    text_len: u32,
    fields_at: usize,
    fields_len: u32,
}

/// One lane's messages of one level, in time order.
#[derive(Clone, Debug, Default)]
struct LevelIndex {
    level: Level,
    /// (time, message index), ascending by time.
    items: Vec<(u64, u32)>,
}

/// A marker to draw: the messages of one pixel of one lane at one level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    /// Time of the first message it stands for.
    pub time: u64,
    /// Their level.
    pub level: Level,
    /// The first message's index (see [`Messages::get`]).
    pub first: u32,
    /// How many messages it stands for.
    pub count: u32,
}

/// Every message of a log.
#[derive(Debug, Default)]
pub struct Messages {
    entries: Vec<Entry>,
    texts: String,
    fields: Vec<u8>,
    /// By lane: one index per level seen there.
    by_lane: Vec<Vec<LevelIndex>>,
}

/// Which messages the list shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageFilter {
    /// Levels shown: bit `n` for level `n` (levels past 7 share bit 7).
    pub levels: u8,
    /// Shown if the text contains this (ignoring ASCII case); empty: all.
    pub text: String,
}

impl Default for MessageFilter {
    fn default() -> Self {
        Self {
            levels: u8::MAX,
            text: String::new(),
        }
    }
}

impl MessageFilter {
    /// The bit of `level` in [`MessageFilter::levels`].
    pub fn bit(level: Level) -> u8 {
        1 << level.0.min(7)
    }

    /// Whether a message of `level` with `text` passes.
    pub fn passes(&self, level: Level, text: &str) -> bool {
        self.levels & Self::bit(level) != 0 && contains_ignore_case(text, &self.text)
    }
}

fn contains_ignore_case(hay: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return true;
    }
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    h.len() >= n.len() && h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
}

impl Messages {
    /// Adds message `m`, written on lane `lane`.
    pub fn push(&mut self, m: &Message<'_>, lane: u32) {
        let idx = self.entries.len() as u32;
        let text_at = self.texts.len();
        self.texts.push_str(m.text);
        let fields_at = self.fields.len();
        let fields = m.fields.unwrap_or_default();
        self.fields.extend_from_slice(fields);
        self.entries.push(Entry {
            time: m.timestamp,
            lane,
            frame: m.frame,
            context: m.context,
            worker: m.worker,
            level: m.level,
            text_at,
            text_len: m.text.len() as u32,
            fields_at,
            fields_len: fields.len() as u32,
        });
        let lane = lane as usize;
        if lane >= self.by_lane.len() {
            self.by_lane.resize_with(lane + 1, Vec::new);
        }
        let levels = &mut self.by_lane[lane];
        let li = match levels.iter().position(|l| l.level == m.level) {
            Some(i) => i,
            None => {
                levels.push(LevelIndex {
                    level: m.level,
                    items: Vec::new(),
                });
                // Most severe first (the lowest number), so markers draw the severe last.
                levels.sort_by_key(|l| l.level);
                levels.iter().position(|l| l.level == m.level).unwrap_or(0)
            }
        };
        let items = &mut levels[li].items;
        match items.last() {
            Some(&(t, _)) if t > m.timestamp => {
                let at = items.partition_point(|&(t, _)| t <= m.timestamp);
                items.insert(at, (m.timestamp, idx));
            }
            _ => items.push((m.timestamp, idx)),
        }
    }

    /// Messages held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every message, in the order read.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Message `i`.
    pub fn get(&self, i: u32) -> Option<&Entry> {
        self.entries.get(i as usize)
    }

    /// A message's text.
    pub fn text(&self, e: &Entry) -> &str {
        &self.texts[e.text_at..e.text_at + e.text_len as usize]
    }

    /// A message's fields (one BSON document), if it has any.
    pub fn fields(&self, e: &Entry) -> Option<&[u8]> {
        (e.fields_len > 0).then(|| &self.fields[e.fields_at..e.fields_at + e.fields_len as usize])
    }

    /// Messages per level (ascending level).
    pub fn level_counts(&self) -> Vec<(Level, u64)> {
        let mut counts: Vec<(Level, u64)> = Vec::new();
        for lane in &self.by_lane {
            for l in lane {
                match counts.iter_mut().find(|c| c.0 == l.level) {
                    Some(c) => c.1 += l.items.len() as u64,
                    None => counts.push((l.level, l.items.len() as u64)),
                }
            }
        }
        counts.sort_by_key(|c| c.0);
        counts
    }

    /// Indices of lane `lane`'s messages in `[t0, t1)`, all levels, in time order.
    pub fn in_range(&self, lane: u32, t0: u64, t1: u64) -> Vec<u32> {
        let mut v: Vec<(u64, u32)> = Vec::new();
        for l in self.by_lane.get(lane as usize).into_iter().flatten() {
            let a = l.items.partition_point(|&(t, _)| t < t0);
            let b = l.items.partition_point(|&(t, _)| t < t1);
            v.extend_from_slice(&l.items[a..b]);
        }
        v.sort_unstable();
        v.into_iter().map(|(_, i)| i).collect()
    }

    /// Appends to `out` lane `lane`'s markers in `[t0, t1)`: per level, one per pixel of
    /// `px_ns` ns that holds messages of it (most severe level last, to be drawn on top).
    pub fn markers(&self, lane: u32, t0: u64, t1: u64, px_ns: f64, out: &mut Vec<Marker>) {
        let px = px_ns.max(1.0);
        for l in self.by_lane.get(lane as usize).into_iter().flatten().rev() {
            let items = &l.items;
            let mut a = items.partition_point(|&(t, _)| t < t0);
            let end = items.partition_point(|&(t, _)| t < t1);
            while a < end {
                let t = items[a].0;
                let pixel = ((t - t0) as f64 / px).floor();
                let next = t0 + ((pixel + 1.0) * px).ceil() as u64;
                let b = a + items[a..end].partition_point(|&(x, _)| x < next.max(t + 1));
                out.push(Marker {
                    time: t,
                    level: l.level,
                    first: items[a].1,
                    count: (b - a) as u32,
                });
                a = b;
            }
        }
    }

    /// Indices of the messages that pass `filter`, in time order.
    pub fn filter(&self, filter: &MessageFilter) -> Vec<u32> {
        let mut v: Vec<(u64, u32)> = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| filter.passes(e.level, self.text(e)))
            .map(|(i, e)| (e.time, i as u32))
            .collect();
        v.sort_unstable();
        v.into_iter().map(|(_, i)| i).collect()
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<Entry>()
            + self.texts.capacity()
            + self.fields.capacity()
            + self
                .by_lane
                .iter()
                .flatten()
                .map(|l| l.items.capacity() * 16)
                .sum::<usize>()
    }
}

/// The colour name of a level, for markers and the list: errors red, warnings orange, info
/// blue, debug gray, trace light gray (as `[r, g, b]`, so the model needs no egui).
pub fn level_rgb(level: Level) -> [u8; 3] {
    match level.0 {
        1 => [230, 60, 60],
        2 => [240, 160, 40],
        3 => [80, 150, 230],
        4 => [150, 150, 150],
        _ => [200, 200, 200],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FrameRef;
    use crate::model::test_log::Log;
    use formats::FrameKey;
    use rand::{Rng, SeedableRng};

    /// Messages land on the lane of the thread announced before them and in the frame open
    /// there; one outside frames has none; a frame unknown to the log resolves to nothing.
    #[test]
    fn messages_land_on_their_threads_lane_and_frame() {
        let mut l = Log::default();
        l.worker(0, 1, "app").thread(0, 1, "main");
        l.start(0, 1, 100, 1, "request")
            .message(0, 1, 1, 110, Level::INFO, "in request")
            .start(0, 2, 120, 1, "query")
            .message(0, 2, 1, 130, Level::WARN, "slow query")
            .thread(0, 2, "pool")
            .message(0, 0, 0, 135, Level::ERROR, "outside")
            .message(0, 99, 5, 136, Level::DEBUG, "in a frame not in the log")
            .thread(0, 1, "main")
            .end(0, 2, 140)
            .end(0, 1, 200);
        let m = l.model();
        let msgs = m.messages();
        assert_eq!(msgs.len(), 4);
        let main = m.lanes().iter().position(|l| l.thread == 1).unwrap() as u32;
        let pool = m.lanes().iter().position(|l| l.thread == 2).unwrap() as u32;
        let e: Vec<&Entry> = msgs.entries().iter().collect();
        assert_eq!(
            e.iter().map(|e| e.lane).collect::<Vec<_>>(),
            [main, main, pool, pool]
        );
        assert_eq!(msgs.text(e[1]), "slow query");
        let req = m.find(FrameKey::new(0, 1)).unwrap();
        let query = m.find(FrameKey::new(0, 2)).unwrap();
        assert_eq!(m.message_frame(e[0]), Some(req));
        assert_eq!(m.message_frame(e[1]), Some(query));
        assert_eq!(m.message_frame(e[2]), None);
        assert_eq!(m.message_frame(e[3]), None);
        assert_eq!(msgs.in_range(main, 0, 1000), [0, 1]);
        assert_eq!(msgs.in_range(pool, 135, 136), [2]);
        let f = MessageFilter {
            levels: MessageFilter::bit(Level::WARN) | MessageFilter::bit(Level::ERROR),
            text: String::new(),
        };
        assert_eq!(msgs.filter(&f), [1, 2]);
        let f = MessageFilter {
            text: "SLOW".into(),
            ..Default::default()
        };
        assert_eq!(msgs.filter(&f), [1]);
        assert_eq!(
            msgs.level_counts(),
            [
                (Level::ERROR, 1),
                (Level::WARN, 1),
                (Level::INFO, 1),
                (Level::DEBUG, 1)
            ]
        );
    }

    /// A message in a frame that moved to another thread (async) finds it on its own lane.
    #[test]
    fn a_message_finds_its_frame_on_another_lane() {
        let mut l = Log::default();
        l.thread(0, 1, "a").start(0, 1, 100, 1, "task");
        l.thread(0, 2, "b")
            .message(0, 1, 1, 150, Level::INFO, "polled here")
            .end(0, 1, 200);
        let m = l.model();
        let e = m.messages().entries()[0];
        assert_ne!(e.lane, 0);
        assert_eq!(
            m.message_frame(&e),
            Some(FrameRef {
                lane: 0,
                row: 0,
                index: 0
            })
        );
    }

    /// Markers: one per pixel and level with messages, exactly the brute-force set.
    #[test]
    fn markers_cover_every_message_once_per_pixel_and_level() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut l = Log::default();
        l.thread(0, 1, "main");
        let mut all = Vec::new();
        for _ in 0..3_000 {
            let t = rng.gen_range(0..100_000u64);
            let level = Level(rng.gen_range(1..6));
            l.message(0, 0, 0, t, level, "x");
            all.push((t, level));
        }
        let m = l.model();
        for _ in 0..50 {
            let t0 = rng.gen_range(0..100_000u64);
            let t1 = rng.gen_range(t0..110_000);
            let px = rng.gen_range(1.0..500.0);
            let mut out = Vec::new();
            m.messages().markers(0, t0, t1, px, &mut out);
            let n: u32 = out.iter().map(|k| k.count).sum();
            let want = all.iter().filter(|&&(t, _)| t >= t0 && t < t1).count();
            assert_eq!(n as usize, want);
            // No two markers of a level in one pixel.
            let mut seen = std::collections::HashSet::new();
            for k in &out {
                let pixel = ((k.time - t0) as f64 / px).floor() as u64;
                assert!(seen.insert((k.level, pixel)), "{k:?}");
            }
        }
    }
}
