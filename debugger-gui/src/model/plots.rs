//! Plot series (counter tracks, record type 7): one series per (worker, name), its unit and
//! mode, its values in time order, and what the tracks under the timeline ask of them.
//!
//! A value is the series' value from its timestamp on (a step function); NaN is a gap. The
//! level-of-detail query ([`Series::lod`]) gives the minimum and maximum of the values in
//! each pixel's time bucket, so drawing follows pixels, not values: values are kept in runs
//! in time order, each with a min/max summary over aligned blocks of 32, 1,024, 32,768 and
//! 1,048,576 values, each block summarized when its last value arrives (queries read only
//! complete blocks, and the values after the last one).
//!
//! Values arrive out of time order whenever a thread's buffer is flushed after another
//! thread's newer values (with 8 threads writing one series, most flushes start behind).
//! Inserting each into the middle of the main run cost a move of every value after it and a
//! new summary for them (issue 30: ~180 ns a value). So a value behind the main run's newest
//! is appended to a second run (the side run) instead; the side run is merged into the main
//! run in one pass (from the side's oldest value on) only when a value is behind the side's
//! newest too, i.e. about once per late flush. Every query reads both runs, as one sequence:
//! by time, a main value before a side value of the same time (it arrived first).

use formats::{Plot, PlotMode, PlotUnit};
use rustc_hash::FxHashMap;

/// Values per summary block at the first level; each level's blocks hold this many of the
/// level below.
const FAN: usize = 32;
/// Summary levels above the values.
const LEVELS: usize = 4;

/// Values in time order (equal times in arrival order), with their min/max summary.
#[derive(Clone, Debug, Default)]
struct Run {
    times: Vec<u64>,
    values: Vec<f64>,
    /// By level: (min, max) of each complete aligned block (NaN: the block holds only gaps).
    /// Queries read complete blocks only, so a value costs one 32-value fold per block
    /// instead of an update of every level.
    summary: [Vec<(f64, f64)>; LEVELS],
}

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
    /// Values that arrived in time order, and those merged in from `side`.
    main: Run,
    /// Values that arrived behind `main`'s newest (all of them older than it), in time order.
    side: Run,
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

impl Run {
    fn len(&self) -> usize {
        self.times.len()
    }

    fn last_time(&self) -> Option<u64> {
        self.times.last().copied()
    }

    /// Appends a value no older than the newest.
    #[inline]
    fn push(&mut self, t: u64, v: f64) {
        debug_assert!(self.last_time().is_none_or(|l| l <= t));
        self.times.push(t);
        self.values.push(v);
        if self.values.len().is_multiple_of(FAN) {
            self.summarize_last_blocks();
        }
    }

    /// Summarizes the blocks the newest value completed, level by level.
    #[inline(never)]
    fn summarize_last_blocks(&mut self) {
        let mut below_len = self.values.len();
        for k in 0..LEVELS {
            if !below_len.is_multiple_of(FAN) {
                return;
            }
            let r = below_len - FAN..below_len;
            let (lower, upper) = self.summary.split_at_mut(k);
            let mm = if k == 0 {
                self.values[r].iter().fold(EMPTY, |a, &v| merge(a, (v, v)))
            } else {
                lower[k - 1][r].iter().fold(EMPTY, |a, &x| merge(a, x))
            };
            upper[0].push(mm);
            below_len = upper[0].len();
        }
    }

    /// Moves every value of `other` (whose values all arrived after this run's values of the
    /// same time) into this run, and empties it. The work is `other`'s values plus this run's
    /// values newer than `other`'s oldest, not this run's whole length.
    fn absorb(&mut self, other: &mut Run) {
        let Some(&oldest) = other.times.first() else {
            return;
        };
        // Late values are seldom far behind: gallop back from the newest (a binary search
        // over the whole run missed the cache at every step, a third of the push's time).
        let len = self.times.len();
        let mut step = 1;
        while step < len && self.times[len - step] > oldest {
            step *= 2;
        }
        let lo = len - step.min(len);
        let hi = len - step / 2;
        let from = lo + self.times[lo..hi].partition_point(|&x| x <= oldest);
        let (old, n) = (self.times.len(), other.len());
        self.times.resize(old + n, 0);
        self.values.resize(old + n, 0.0);
        // Merge from the back, in place: the larger time goes last; of equal times, `other`'s
        // (they arrived later).
        let (mut i, mut j, mut k) = (old, n, old + n);
        while j > 0 {
            k -= 1;
            if i > from && self.times[i - 1] > other.times[j - 1] {
                i -= 1;
                self.times[k] = self.times[i];
                self.values[k] = self.values[i];
            } else {
                j -= 1;
                self.times[k] = other.times[j];
                self.values[k] = other.values[j];
            }
        }
        self.resummarize(from);
        other.times.clear();
        other.values.clear();
        for level in &mut other.summary {
            level.clear();
        }
    }

    /// Recomputes every summary block holding value `from` or a later one.
    fn resummarize(&mut self, from: usize) {
        let mut from = from;
        let mut below_len = self.values.len();
        for k in 0..LEVELS {
            let first = from / FAN;
            let blocks = below_len / FAN;
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
    fn range_min_max(&self, a: usize, b: usize) -> (f64, f64) {
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

    /// The newest value at or before `t`, with its time.
    fn value_at(&self, t: u64) -> Option<(u64, f64)> {
        let i = self.times.partition_point(|&x| x <= t);
        (i > 0).then(|| (self.times[i - 1], self.values[i - 1]))
    }

    /// Index range of the values in `[t0, t1)`.
    fn span(&self, t0: u64, t1: u64) -> (usize, usize) {
        (
            self.times.partition_point(|&x| x < t0),
            self.times.partition_point(|&x| x < t1),
        )
    }

    fn heap_bytes(&self) -> usize {
        self.times.capacity() * 8
            + self.values.capacity() * 8
            + self
                .summary
                .iter()
                .map(|l| l.capacity() * 16)
                .sum::<usize>()
    }
}

impl Series {
    fn new(worker: u8, name: &str) -> Self {
        Self {
            worker,
            name: name.to_owned(),
            unit: PlotUnit::COUNT,
            mode: PlotMode::default(),
            main: Run::default(),
            side: Run::default(),
        }
    }

    /// Values held.
    pub fn len(&self) -> usize {
        self.main.len() + self.side.len()
    }

    /// True if it holds no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// First and last time, if any value.
    pub fn time_range(&self) -> Option<(u64, u64)> {
        let (m, s) = (&self.main.times, &self.side.times);
        let first = match (m.first(), s.first()) {
            (Some(&a), Some(&b)) => a.min(b),
            (a, b) => *a.or(b)?,
        };
        // Side values are all older than the main run's newest.
        let last = self.main.last_time().or(self.side.last_time())?;
        Some((first, last))
    }

    /// Smallest and largest value over the whole series (NaN if only gaps).
    pub fn value_range(&self) -> (f64, f64) {
        merge(
            self.main.range_min_max(0, self.main.len()),
            self.side.range_min_max(0, self.side.len()),
        )
    }

    fn push(&mut self, t: u64, v: f64) {
        if self.main.last_time().is_none_or(|l| l <= t) {
            self.main.push(t, v);
        } else {
            // Behind the newest value (another thread's buffer flushed later). A late
            // flush's values come in time order, so they append to the side run; one behind
            // that too (the next late flush) first merges the side run into the main run.
            if self.side.last_time().is_some_and(|l| l > t) {
                self.main.absorb(&mut self.side);
            }
            self.side.push(t, v);
        }
    }

    /// The value in force at `t` (the newest value at or before it) and its time, if any.
    pub fn value_at(&self, t: u64) -> Option<(u64, f64)> {
        match (self.main.value_at(t), self.side.value_at(t)) {
            // Of equal times the side's is the later.
            (Some(m), Some(s)) => Some(if s.0 >= m.0 { s } else { m }),
            (m, s) => m.or(s),
        }
    }

    /// Appends to `out` one bucket per pixel of `[t0, t1)` (pixels of `px_ns` ns from `t0`, see
    /// [`bucket_start`]) that holds values, with their min, max, first and last. Returns the
    /// value in force at `t0` (the one before the first bucket), if any. The work follows the
    /// buckets with values (at most one per pixel), not the values in view.
    pub fn lod(&self, t0: u64, t1: u64, px_ns: f64, out: &mut Vec<PlotBucket>) -> Option<f64> {
        let px_ns = px_ns.max(1e-3);
        let before = self.value_at(t0.saturating_sub(1)).map(|(_, v)| v);
        let before = if t0 == 0 { None } else { before };
        let (m, s) = (&self.main, &self.side);
        let (mut am, end_m) = m.span(t0, t1);
        let (mut as_, end_s) = s.span(t0, t1);
        loop {
            let t = match (am < end_m, as_ < end_s) {
                (true, true) => m.times[am].min(s.times[as_]),
                (true, false) => m.times[am],
                (false, true) => s.times[as_],
                (false, false) => break,
            };
            // The bucket holding t: estimated, then corrected for rounding.
            let mut j = ((t - t0) as f64 / px_ns) as u64;
            while j > 0 && bucket_start(t0, px_ns, j) > t {
                j -= 1;
            }
            while bucket_start(t0, px_ns, j + 1) <= t {
                j += 1;
            }
            let next = bucket_start(t0, px_ns, j + 1);
            let bm = am + m.times[am..end_m].partition_point(|&x| x < next);
            let bs = as_ + s.times[as_..end_s].partition_point(|&x| x < next);
            let (min, max) = merge(m.range_min_max(am, bm), s.range_min_max(as_, bs));
            // First: the older; of equal times the main run's (it arrived first). Last: the
            // newer; of equal times the side run's.
            let first = if am < bm && (as_ == bs || m.times[am] <= s.times[as_]) {
                m.values[am]
            } else {
                s.values[as_]
            };
            let last = if as_ < bs && (am == bm || s.times[bs - 1] >= m.times[bm - 1]) {
                s.values[bs - 1]
            } else {
                m.values[bm - 1]
            };
            out.push(PlotBucket {
                index: j as u32,
                min,
                max,
                first,
                last,
            });
            (am, as_) = (bm, bs);
        }
        before
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.main.heap_bytes() + self.side.heap_bytes() + self.name.capacity()
    }

    /// Every (time, value), in order (one merged copy; for tests).
    #[cfg(test)]
    fn points(&self) -> Vec<(u64, f64)> {
        let mut c = self.clone();
        c.main.absorb(&mut c.side);
        c.main.times.into_iter().zip(c.main.values).collect()
    }
}

/// Series ids by (worker, name), in order of first appearance. The model keeps one, and so
/// does the reader stage, which hands values over by id (no name looked up per value).
#[derive(Debug, Default)]
pub struct SeriesIds {
    /// By worker: id by name.
    by_name: FxHashMap<u8, FxHashMap<Box<str>, u32>>,
    /// Each id's worker and name.
    keys: Vec<(u8, Box<str>)>,
    /// The previous lookup's id (a run of one series' values looks up nothing).
    last: Option<u32>,
}

impl SeriesIds {
    /// The id of `worker`'s series `name`, and whether it was new.
    #[inline]
    pub fn id(&mut self, worker: u8, name: &str) -> (u32, bool) {
        if let Some(i) = self.last
            && let (w, n) = &self.keys[i as usize]
            && *w == worker
            && super::intern::same(n, name)
        {
            return (i, false);
        }
        self.id_slow(worker, name)
    }

    #[cold]
    fn id_slow(&mut self, worker: u8, name: &str) -> (u32, bool) {
        let names = self.by_name.entry(worker).or_default();
        let (i, new) = match names.get(name) {
            Some(&i) => (i, false),
            None => {
                let i = self.keys.len() as u32;
                self.keys.push((worker, name.into()));
                names.insert(name.into(), i);
                (i, true)
            }
        };
        self.last = Some(i);
        (i, new)
    }

    /// Whether more than one worker has a series of this name.
    fn name_is_shared(&self, name: &str) -> bool {
        self.by_name
            .values()
            .filter(|m| m.contains_key(name))
            .count()
            > 1
    }
}

/// Every plot series of a log.
#[derive(Debug, Default)]
pub struct Plots {
    series: Vec<Series>,
    ids: SeriesIds,
}

impl Plots {
    /// Adds one value.
    pub fn push(&mut self, p: &Plot<'_>) {
        let i = self.series_id(p.worker, p.name);
        self.push_value(i, p.unit, p.mode, p.timestamp, p.value);
    }

    /// The id of `worker`'s series `name` (a new, empty series if it has none).
    pub fn series_id(&mut self, worker: u8, name: &str) -> u32 {
        let (i, new) = self.ids.id(worker, name);
        if new {
            self.series.push(Series::new(worker, name));
        }
        i
    }

    /// Adds a value to series `i` (from [`Plots::series_id`]), in `unit` and `mode`.
    #[inline]
    pub fn push_value(&mut self, i: u32, unit: PlotUnit, mode: PlotMode, t: u64, v: f64) {
        let s = &mut self.series[i as usize];
        s.unit = unit;
        s.mode = mode;
        s.push(t, v);
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
        self.ids.name_is_shared(name)
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
            let got: Vec<(u64, u64)> = s.points().iter().map(|&(t, v)| (t, v.to_bits())).collect();
            let want: Vec<(u64, u64)> = reference.iter().map(|&(t, v)| (t, v.to_bits())).collect();
            assert_eq!(got, want, "seed {seed}");
            // The index ranges below are over the whole series, merged.
            let mut merged = s.clone();
            merged.main.absorb(&mut merged.side);
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
                let got = merged.main.range_min_max(a, b);
                assert!(same(got.0, want.0) && same(got.1, want.1));
            }
        }
    }

    /// Eight threads write one series, each in time order into its own buffer, and the
    /// buffers reach the log whole at random moments (one thread lagging far behind, clocks
    /// coarse enough that threads often share a time): most values arrive behind the newest,
    /// so the side run fills and is merged over and over. Between flushes, every query (lod
    /// with its value before, value_at, time and value range, length) gives exactly what the
    /// brute force gives over the values inserted one by one where they belong (equal times
    /// in arrival order: the values are arrival numbers, so a wrong order shows).
    #[test]
    fn out_of_order_flushes_interleaved_with_queries_match_brute_force() {
        for seed in 0..6u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(100 + seed);
            let threads = 8usize;
            let mut clocks = vec![1_000u64; threads];
            let mut bufs: Vec<Vec<(u64, f64)>> = vec![Vec::new(); threads];
            let mut plots = Plots::default();
            let mut reference: Vec<(u64, f64)> = Vec::new();
            let mut arrivals = 0u32;
            let mut queries = 0;
            while reference.len() < 40_000 {
                let th = rng.gen_range(0..threads);
                clocks[th] += rng.gen_range(0..4);
                let v = if rng.gen_bool(0.02) {
                    f64::NAN
                } else {
                    f64::from(arrivals)
                };
                arrivals += 1;
                bufs[th].push((clocks[th], v));
                // Thread 0 flushes rarely: its values land far behind the newest.
                let cap = if th == 0 { 3_000 } else { 200 };
                if bufs[th].len() < rng.gen_range(1..cap) {
                    continue;
                }
                for (t, v) in bufs[th].drain(..) {
                    plots.push(&plot(3, "q", t, v));
                    let p = reference.partition_point(|&(x, _)| x <= t);
                    reference.insert(p, (t, v));
                }
                let s = &plots.series()[0];
                assert!(
                    s.side
                        .last_time()
                        .is_none_or(|l| l < s.main.last_time().unwrap()),
                    "side values are older than the main run's newest"
                );
                if !rng.gen_bool(0.3) {
                    continue;
                }
                queries += 1;
                let (times, values): (Vec<u64>, Vec<f64>) = reference.iter().copied().unzip();
                let (lo, hi) = (times[0], times[times.len() - 1]);
                assert_eq!(s.len(), reference.len());
                assert_eq!(s.time_range(), Some((lo, hi)));
                let want = values.iter().fold(EMPTY, |m, &v| merge(m, (v, v)));
                let got = s.value_range();
                assert!(same(got.0, want.0) && same(got.1, want.1));
                for _ in 0..4 {
                    let t0 = rng.gen_range(lo.saturating_sub(10)..=hi);
                    let t1 = rng.gen_range(t0..hi + 10);
                    let px = rng.gen_range(0.5..(t1 - t0 + 1) as f64 / 3.0 + 1.0);
                    let mut got = Vec::new();
                    let before = s.lod(t0, t1, px, &mut got);
                    let want = brute(&times, &values, t0, t1, px);
                    assert_eq!(got.len(), want.len(), "seed {seed} {t0}..{t1} px {px}");
                    for (g, w) in got.iter().zip(&want) {
                        assert_eq!(g.index, w.index);
                        assert!(
                            same(g.min, w.min)
                                && same(g.max, w.max)
                                && same(g.first, w.first)
                                && same(g.last, w.last),
                            "seed {seed}: {g:?} vs {w:?}"
                        );
                    }
                    let wb = reference.iter().rev().find(|&&(x, _)| x < t0);
                    let wb = wb.filter(|_| t0 > 0).map(|&(_, v)| v.to_bits());
                    assert_eq!(before.map(f64::to_bits), wb);
                    let t = rng.gen_range(lo.saturating_sub(10)..hi + 10);
                    let want = reference.iter().rev().find(|&&(x, _)| x <= t);
                    let bits = |o: Option<(u64, f64)>| o.map(|(x, v)| (x, v.to_bits()));
                    assert_eq!(
                        bits(s.value_at(t)),
                        bits(want.copied()),
                        "seed {seed} at {t}"
                    );
                }
            }
            assert!(queries > 50);
            let s = &plots.series()[0];
            let got: Vec<(u64, u64)> = s.points().iter().map(|&(t, v)| (t, v.to_bits())).collect();
            let want: Vec<(u64, u64)> = reference.iter().map(|&(t, v)| (t, v.to_bits())).collect();
            assert_eq!(got, want, "seed {seed}");
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
