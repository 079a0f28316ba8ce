//! Plot series (counter tracks, record type 7): one series per (worker, name), its unit and
//! mode, its values in time order, and what the tracks under the timeline ask of them.
//!
//! A value is the series' value from its timestamp on (a step function); NaN is a gap. The
//! level-of-detail query ([`Series::lod`]) gives the minimum and maximum of the values in
//! each pixel's time bucket, so drawing follows pixels, not values: each series keeps a
//! min/max summary over aligned blocks of 32, 1,024, 32,768 and 1,048,576 values, kept up to
//! date as values arrive (a value out of time order is inserted where it belongs and the
//! summary blocks after it are recomputed).

use formats::{Plot, PlotMode, PlotUnit};
use rustc_hash::FxHashMap;

/// Values per summary block at the first level; each level's blocks hold this many of the
/// level below.
const FAN: usize = 32;
/// Summary levels above the values.
const LEVELS: usize = 4;

/// One named series of one worker.
#[derive(Clone, Debug)]
pub struct Series {
    /// Writing process's worker id.
    pub worker: u8,
    /// The series' name.
    pub name: String,
    /// Its unit (the newest value's).
    pub unit: PlotUnit,
    /// Set values or running sums (the newest value's).
    pub mode: PlotMode,
    times: Vec<u64>,
    values: Vec<f64>,
    /// By level: (min, max) of each aligned block (NaN: the block holds only gaps).
    summary: [Vec<(f64, f64)>; LEVELS],
}

/// The values of one pixel's time bucket.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlotBucket {
    /// The bucket's index from the query's start (its pixel column).
    pub index: u32,
    /// Smallest value in it (NaN: only gaps).
    pub min: f64,
    /// Largest value in it (NaN: only gaps).
    pub max: f64,
    /// The first value in it.
    pub first: f64,
    /// The last value in it: the series' value until the next bucket with values.
    pub last: f64,
}

/// The smaller and larger of two (min, max) pairs, gaps (NaN) ignored.
#[inline]
fn merge(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    (a.0.min(b.0), a.1.max(b.1))
}

const EMPTY: (f64, f64) = (f64::NAN, f64::NAN);

/// Bucket `j`'s first time when buckets of `px_ns` start at `t0` (shared by the query and
/// its tests, so both cut time alike).
pub fn bucket_start(t0: u64, px_ns: f64, j: u64) -> u64 {
    t0.saturating_add((j as f64 * px_ns).floor() as u64)
}

impl Series {
    fn new(p: &Plot<'_>) -> Self {
        Self {
            worker: p.worker,
            name: p.name.to_owned(),
            unit: p.unit,
            mode: p.mode,
            times: Vec::new(),
            values: Vec::new(),
            summary: Default::default(),
        }
    }

    /// Values held.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// True if it holds no value.
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// The values' times, ascending (ns since the epoch).
    pub fn times(&self) -> &[u64] {
        &self.times
    }

    /// The values, in time order.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// First and last time, if any value.
    pub fn time_range(&self) -> Option<(u64, u64)> {
        Some((*self.times.first()?, *self.times.last()?))
    }

    /// Smallest and largest value over the whole series (NaN if only gaps).
    pub fn value_range(&self) -> (f64, f64) {
        self.range_min_max(0, self.len())
    }

    fn push(&mut self, t: u64, v: f64) {
        let n = self.times.len();
        if n == 0 || self.times[n - 1] <= t {
            self.times.push(t);
            self.values.push(v);
            // Grow the last block of every level by the new value.
            let mut i = n;
            for level in &mut self.summary {
                let b = i / FAN;
                if b == level.len() {
                    level.push((v, v));
                } else {
                    level[b] = merge(level[b], (v, v));
                }
                i = b;
            }
        } else {
            // Out of time order (another thread's buffer flushed later): insert it where it
            // belongs, after values of the same time.
            let at = self.times.partition_point(|&x| x <= t);
            self.times.insert(at, t);
            self.values.insert(at, v);
            self.resummarize(at);
        }
    }

    /// Recomputes every summary block holding value `from` or a later one.
    #[cold]
    fn resummarize(&mut self, from: usize) {
        let mut from = from;
        let mut below_len = self.values.len();
        for k in 0..LEVELS {
            let first = from / FAN;
            let blocks = below_len.div_ceil(FAN);
            let (lower, upper) = self.summary.split_at_mut(k);
            let level = &mut upper[0];
            level.truncate(first);
            for b in first..blocks {
                let r = b * FAN..((b + 1) * FAN).min(below_len);
                let mm = if k == 0 {
                    self.values[r].iter().fold(EMPTY, |a, &v| merge(a, (v, v)))
                } else {
                    lower[k - 1][r].iter().fold(EMPTY, |a, &x| merge(a, x))
                };
                level.push(mm);
            }
            from = first;
            below_len = blocks;
        }
    }

    /// Smallest and largest of values `a..b` (NaN if none but gaps).
    pub fn range_min_max(&self, a: usize, b: usize) -> (f64, f64) {
        let mut acc = EMPTY;
        let (mut lo, mut hi) = (a, b.min(self.values.len()));
        if lo >= hi {
            return acc;
        }
        // Level 0 is the values; level k ≥ 1 is `summary[k - 1]`.
        for k in 0..=LEVELS {
            let get = |i: usize| -> (f64, f64) {
                if k == 0 {
                    (self.values[i], self.values[i])
                } else {
                    self.summary[k - 1][i]
                }
            };
            if k == LEVELS || hi - lo <= 2 * FAN {
                for i in lo..hi {
                    acc = merge(acc, get(i));
                }
                return acc;
            }
            let la = lo.next_multiple_of(FAN);
            let lb = hi / FAN * FAN;
            for i in (lo..la).chain(lb..hi) {
                acc = merge(acc, get(i));
            }
            (lo, hi) = (la / FAN, lb / FAN);
            if lo >= hi {
                return acc;
            }
        }
        acc
    }

    /// The value in force at `t` (the newest value at or before it) and its time, if any.
    pub fn value_at(&self, t: u64) -> Option<(u64, f64)> {
        let i = self.times.partition_point(|&x| x <= t);
        (i > 0).then(|| (self.times[i - 1], self.values[i - 1]))
    }

    /// Appends to `out` one bucket per pixel of `[t0, t1)` (pixels of `px_ns` ns from `t0`, see
    /// [`bucket_start`]) that holds values, with their min, max, first and last. Returns the
    /// value in force at `t0` (the one before the first bucket), if any. The work follows the
    /// buckets with values (at most one per pixel), not the values in view.
    pub fn lod(&self, t0: u64, t1: u64, px_ns: f64, out: &mut Vec<PlotBucket>) -> Option<f64> {
        let px_ns = px_ns.max(1e-3);
        let before = self.value_at(t0.saturating_sub(1)).map(|(_, v)| v);
        let before = if t0 == 0 { None } else { before };
        let mut a = self.times.partition_point(|&x| x < t0);
        let end = self.times.partition_point(|&x| x < t1);
        while a < end {
            let t = self.times[a];
            // The bucket holding t: estimated, then corrected for rounding.
            let mut j = ((t - t0) as f64 / px_ns) as u64;
            while j > 0 && bucket_start(t0, px_ns, j) > t {
                j -= 1;
            }
            while bucket_start(t0, px_ns, j + 1) <= t {
                j += 1;
            }
            let next = bucket_start(t0, px_ns, j + 1);
            let b = a + self.times[a..end].partition_point(|&x| x < next);
            let (min, max) = self.range_min_max(a, b);
            out.push(PlotBucket {
                index: j as u32,
                min,
                max,
                first: self.values[a],
                last: self.values[b - 1],
            });
            a = b;
        }
        before
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.times.capacity() * 8
            + self.values.capacity() * 8
            + self
                .summary
                .iter()
                .map(|l| l.capacity() * 16)
                .sum::<usize>()
            + self.name.capacity()
    }
}

/// Every plot series of a log.
#[derive(Debug, Default)]
pub struct Plots {
    series: Vec<Series>,
    /// By worker: series index by name.
    by_name: FxHashMap<u8, FxHashMap<String, u32>>,
    /// The series the previous value went to (a run of one series' values looks up nothing).
    last: Option<(u8, u32)>,
}

impl Plots {
    /// Adds one value.
    pub fn push(&mut self, p: &Plot<'_>) {
        let i = match self.last {
            Some((w, i)) if w == p.worker && self.series[i as usize].name == p.name => i,
            _ => {
                let names = self.by_name.entry(p.worker).or_default();
                match names.get(p.name) {
                    Some(&i) => i,
                    None => {
                        let i = self.series.len() as u32;
                        self.series.push(Series::new(p));
                        names.insert(p.name.to_owned(), i);
                        i
                    }
                }
            }
        };
        self.last = Some((p.worker, i));
        let s = &mut self.series[i as usize];
        s.unit = p.unit;
        s.mode = p.mode;
        s.push(p.timestamp, p.value);
    }

    /// Every series, in the order they first appeared.
    pub fn series(&self) -> &[Series] {
        &self.series
    }

    /// The series indices sorted for display: by name, then worker.
    pub fn display_order(&self) -> Vec<u32> {
        let mut v: Vec<u32> = (0..self.series.len() as u32).collect();
        v.sort_by(|&a, &b| {
            let (a, b) = (&self.series[a as usize], &self.series[b as usize]);
            (&a.name, a.worker).cmp(&(&b.name, b.worker))
        });
        v
    }

    /// Whether more than one worker wrote a series of this name (then the worker is shown).
    pub fn name_is_shared(&self, name: &str) -> bool {
        self.by_name
            .values()
            .filter(|m| m.contains_key(name))
            .count()
            > 1
    }

    /// Values held over all series.
    pub fn value_count(&self) -> usize {
        self.series.iter().map(Series::len).sum()
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.series.iter().map(Series::heap_bytes).sum::<usize>()
            + self.series.capacity() * std::mem::size_of::<Series>()
    }
}

/// A value with its unit, as the tracks and tooltips show it ("12", "1.5 MiB", "42 %", "3 µs").
pub fn format_value(v: f64, unit: PlotUnit) -> String {
    if v.is_nan() {
        return "no value".to_owned();
    }
    let num = |v: f64| {
        if v == v.trunc() && v.abs() < 1e15 {
            format!("{}", v as i64)
        } else if v.abs() >= 100.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.3}")
        }
    };
    match unit {
        PlotUnit::BYTES => {
            let a = v.abs();
            let (d, u) = if a >= (1u64 << 30) as f64 {
                (v / (1u64 << 30) as f64, "GiB")
            } else if a >= (1 << 20) as f64 {
                (v / (1 << 20) as f64, "MiB")
            } else if a >= 1024.0 {
                (v / 1024.0, "KiB")
            } else {
                return format!("{} B", num(v));
            };
            format!("{d:.1} {u}")
        }
        PlotUnit::PERCENT => format!("{} %", num(v)),
        PlotUnit::NANOS => crate::timefmt::duration(v),
        _ => num(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn plot(worker: u8, name: &str, t: u64, value: f64) -> Plot<'_> {
        Plot {
            worker,
            timestamp: t,
            value,
            mode: PlotMode::Value,
            unit: PlotUnit::COUNT,
            name,
        }
    }

    /// The brute-force bucket list: every value looked at.
    fn brute(times: &[u64], values: &[f64], t0: u64, t1: u64, px: f64) -> Vec<PlotBucket> {
        let mut out: Vec<PlotBucket> = Vec::new();
        for (&t, &v) in times.iter().zip(values) {
            if t < t0 || t >= t1 {
                continue;
            }
            let mut j = 0u64;
            while bucket_start(t0, px, j + 1) <= t {
                j += 1;
            }
            match out.last_mut() {
                Some(b) if b.index == j as u32 => {
                    b.min = b.min.min(v);
                    b.max = b.max.max(v);
                    b.last = v;
                }
                _ => out.push(PlotBucket {
                    index: j as u32,
                    min: v,
                    max: v,
                    first: v,
                    last: v,
                }),
            }
        }
        out
    }

    fn same(a: f64, b: f64) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    /// Random values (some NaN, some out of time order, in series big enough to use every
    /// summary level) give exactly the brute-force min, max, first and last per pixel bucket,
    /// at random zooms and windows.
    #[test]
    fn lod_min_max_per_bucket_is_exact() {
        for seed in 0..12u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let n = [50usize, 3_000, 70_000][seed as usize % 3];
            let mut plots = Plots::default();
            let mut reference: Vec<(u64, f64)> = Vec::new();
            let mut t = 1_000u64;
            for k in 0..n {
                t += rng.gen_range(0..50);
                // Now and then a value from earlier (a buffer flushed late).
                let at = if k > 10 && rng.gen_bool(0.02) {
                    t - rng.gen_range(0..t.min(5_000))
                } else {
                    t
                };
                let v = if rng.gen_bool(0.01) {
                    f64::NAN
                } else {
                    rng.gen_range(-1e6..1e6f64).round()
                };
                plots.push(&plot(0, "q", at, v));
                let p = reference.partition_point(|&(x, _)| x <= at);
                reference.insert(p, (at, v));
            }
            let s = &plots.series()[0];
            let (times, values): (Vec<u64>, Vec<f64>) = reference.iter().copied().unzip();
            assert_eq!(s.times(), &times[..], "seed {seed}");
            for _ in 0..40 {
                let t0 = rng.gen_range(0..t);
                let t1 = rng.gen_range(t0..t + 100);
                let px = rng.gen_range(0.3..(t1 - t0 + 1) as f64 / 4.0 + 1.0);
                let mut got = Vec::new();
                let before = s.lod(t0, t1, px, &mut got);
                let want = brute(&times, &values, t0, t1, px);
                assert_eq!(got.len(), want.len(), "seed {seed} {t0}..{t1} px {px}");
                for (g, w) in got.iter().zip(&want) {
                    assert_eq!(g.index, w.index);
                    assert!(
                        same(g.min, w.min) && same(g.max, w.max),
                        "seed {seed}: {g:?} vs {w:?}"
                    );
                    assert!(same(g.first, w.first) && same(g.last, w.last));
                }
                let wb = reference
                    .iter()
                    .rev()
                    .find(|&&(x, _)| x < t0)
                    .map(|&(_, v)| v);
                assert_eq!(before.map(f64::to_bits), wb.map(f64::to_bits));
                // Random ranges of indices, against a plain fold.
                let a = rng.gen_range(0..values.len());
                let b = rng.gen_range(a..=values.len());
                let want = values[a..b].iter().fold(EMPTY, |m, &v| merge(m, (v, v)));
                let got = s.range_min_max(a, b);
                assert!(same(got.0, want.0) && same(got.1, want.1));
            }
        }
    }

    #[test]
    fn series_are_named_by_worker_and_name_and_value_at_is_a_step() {
        let mut p = Plots::default();
        p.push(&plot(0, "queue depth", 100, 3.0));
        p.push(&plot(1, "queue depth", 150, 7.0));
        p.push(&plot(0, "queue depth", 200, 5.0));
        p.push(&plot(0, "rss", 200, 1e6));
        assert_eq!(p.series().len(), 3);
        assert!(p.name_is_shared("queue depth") && !p.name_is_shared("rss"));
        let q = &p.series()[0];
        assert_eq!(q.len(), 2);
        assert_eq!(q.value_at(99), None);
        assert_eq!(q.value_at(100), Some((100, 3.0)));
        assert_eq!(q.value_at(199), Some((100, 3.0)));
        assert_eq!(q.value_at(10_000), Some((200, 5.0)));
        assert_eq!(p.value_count(), 4);
        let order: Vec<(u8, &str)> = p
            .display_order()
            .iter()
            .map(|&i| (p.series()[i as usize].worker, &*p.series()[i as usize].name))
            .collect();
        assert_eq!(order, [(0, "queue depth"), (1, "queue depth"), (0, "rss")]);
    }

    /// Plots and messages reach the model through the reader stage (as the file ingest and
    /// viewer sessions feed it) exactly as when applied directly, frames unchanged.
    #[test]
    fn plots_and_messages_pass_the_reader_stage() {
        use crate::model::test_log::Log;
        let mut l = Log::default();
        l.thread(0, 1, "main");
        for i in 0..200u32 {
            let t = u64::from(i) * 100;
            l.start(0, i + 1, t, i + 1, "request")
                .plot(0, "queue depth", t + 10, f64::from(i % 7))
                .message(
                    0,
                    i + 1,
                    i + 1,
                    t + 20,
                    formats::Level(1 + (i % 5) as u8),
                    "m",
                )
                .end(0, i + 1, t + 50);
        }
        let direct = l.model();
        let staged = crate::model::tests::through_reader_stage(&l.bytes);
        assert_eq!(crate::model::same::difference(&staged, &direct), None);
        for m in [&direct, &staged] {
            let s = &m.plots().series()[0];
            assert_eq!(s.len(), 200);
            assert_eq!(s.value_at(1_615), Some((1_610, 2.0)));
            assert_eq!(m.messages().len(), 200);
            let e = m.messages().entries()[7];
            assert_eq!(m.message_frame(&e), m.find(formats::FrameKey::new(0, 8)));
        }
    }

    #[test]
    fn values_are_shown_with_their_unit() {
        assert_eq!(format_value(12.0, PlotUnit::COUNT), "12");
        assert_eq!(format_value(1.5 * 1048576.0, PlotUnit::BYTES), "1.5 MiB");
        assert_eq!(format_value(42.0, PlotUnit::PERCENT), "42 %");
        assert_eq!(format_value(f64::NAN, PlotUnit::COUNT), "no value");
    }
}
