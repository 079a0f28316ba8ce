//! Summaries of what is not frames: each plot series' range and mean, messages by level.
//! Pure logic over records, fed in file order by the statistics builder (`stats`).

use std::collections::BTreeMap;

use formats::{Level, PlotMode, PlotUnit, Record};

/// One plot series, summarized.
#[derive(Debug, Clone, PartialEq)]
pub struct PlotSummary {
    /// Worker that wrote it (a series is named by worker and name).
    pub worker: u8,
    /// Series name.
    pub name: String,
    /// Its unit (of its latest value).
    pub unit: PlotUnit,
    /// Whether its values are running sums of deltas.
    pub summed: bool,
    /// Values recorded, gaps (NaN) included.
    pub count: u64,
    /// Of which gaps.
    pub gaps: u64,
    /// Smallest value (`NaN` if every value is a gap).
    pub min: f64,
    /// Mean of the values that are not gaps.
    pub mean: f64,
    /// Largest value.
    pub max: f64,
    /// The latest value by time.
    pub last: f64,
}

#[derive(Debug, Clone)]
struct Series {
    unit: PlotUnit,
    summed: bool,
    count: u64,
    gaps: u64,
    min: f64,
    max: f64,
    sum: f64,
    last: (u64, f64),
}

/// Accumulates plot summaries and message counts.
#[derive(Debug, Clone, Default)]
pub struct InstantStats {
    /// By worker, then name (looked up by `&str`: no allocation per value).
    series: BTreeMap<u8, BTreeMap<String, Series>>,
    messages: BTreeMap<Level, u64>,
    /// Messages written inside a frame (the others were outside every frame).
    in_frames: u64,
}

impl InstantStats {
    /// Adds one record (records other than plots and messages are ignored).
    pub fn add(&mut self, rec: &Record<'_>) {
        match rec {
            Record::Plot(p) => {
                let by_name = self.series.entry(p.worker).or_default();
                if !by_name.contains_key(p.name) {
                    by_name.insert(
                        p.name.to_owned(),
                        Series {
                            unit: p.unit,
                            summed: false,
                            count: 0,
                            gaps: 0,
                            min: f64::INFINITY,
                            max: f64::NEG_INFINITY,
                            sum: 0.0,
                            last: (0, f64::NAN),
                        },
                    );
                }
                let s = by_name.get_mut(p.name).expect("inserted above");
                s.count += 1;
                s.unit = p.unit;
                s.summed = p.mode == PlotMode::Summed;
                if p.value.is_nan() {
                    s.gaps += 1;
                } else {
                    s.min = s.min.min(p.value);
                    s.max = s.max.max(p.value);
                    s.sum += p.value;
                }
                if p.timestamp >= s.last.0 {
                    s.last = (p.timestamp, p.value);
                }
            }
            Record::Message(m) => {
                *self.messages.entry(m.level).or_default() += 1;
                self.in_frames += u64::from(m.frame != 0);
            }
            _ => {}
        }
    }

    /// The series, by worker then name.
    pub fn plots(&self) -> Vec<PlotSummary> {
        self.series
            .iter()
            .flat_map(|(w, by_name)| by_name.iter().map(move |(n, s)| (w, n, s)))
            .map(|(worker, name, s)| {
                let values = s.count - s.gaps;
                PlotSummary {
                    worker: *worker,
                    name: name.clone(),
                    unit: s.unit,
                    summed: s.summed,
                    count: s.count,
                    gaps: s.gaps,
                    min: if values > 0 { s.min } else { f64::NAN },
                    mean: if values > 0 {
                        s.sum / values as f64
                    } else {
                        f64::NAN
                    },
                    max: if values > 0 { s.max } else { f64::NAN },
                    last: s.last.1,
                }
            })
            .collect()
    }

    /// Messages by level, most severe first.
    pub fn messages(&self) -> Vec<(Level, u64)> {
        self.messages.iter().map(|(l, n)| (*l, *n)).collect()
    }

    /// Messages written inside a frame.
    pub fn messages_in_frames(&self) -> u64 {
        self.in_frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use formats::{Message, Plot};

    fn plot(worker: u8, t: u64, name: &str, value: f64) -> Record<'_> {
        Record::Plot(Plot {
            worker,
            timestamp: t,
            value,
            mode: PlotMode::Value,
            unit: PlotUnit::BYTES,
            name,
        })
    }

    #[test]
    fn series_are_per_worker_and_name_with_gaps_left_out_of_the_range() {
        let mut s = InstantStats::default();
        for (i, v) in [3.0, f64::NAN, -1.0, 10.0].into_iter().enumerate() {
            s.add(&plot(0, i as u64, "rss", v));
        }
        s.add(&plot(1, 0, "rss", 7.0));
        // Out of time order: the latest by time stays the last.
        s.add(&plot(0, 1, "rss", 99.0));
        let p = s.plots();
        assert_eq!(p.len(), 2);
        let a = &p[0];
        assert_eq!((a.worker, a.count, a.gaps), (0, 5, 1));
        assert_eq!((a.min, a.max, a.last), (-1.0, 99.0, 10.0));
        assert_eq!(a.mean, (3.0 - 1.0 + 10.0 + 99.0) / 4.0);
        assert_eq!((p[1].worker, p[1].min, p[1].max), (1, 7.0, 7.0));
        // Only gaps: no range.
        let mut s = InstantStats::default();
        s.add(&plot(0, 0, "x", f64::NAN));
        assert!(s.plots()[0].min.is_nan() && s.plots()[0].mean.is_nan());
    }

    #[test]
    fn messages_are_counted_by_level() {
        let mut s = InstantStats::default();
        for (frame, level) in [(0, Level::INFO), (3, Level::ERROR), (4, Level::INFO)] {
            s.add(&Record::Message(Message {
                frame,
                worker: 0,
                timestamp: 1,
                context: frame,
                level,
                text: "t",
                fields: None,
            }));
        }
        assert_eq!(s.messages(), vec![(Level::ERROR, 1), (Level::INFO, 2)]);
        assert_eq!(s.messages_in_frames(), 2);
    }
}
