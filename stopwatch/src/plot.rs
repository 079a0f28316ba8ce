//! Plots: named `f64` series with a timestamp per value (plot records, type 7), drawn as
//! counter tracks under the timeline.
//!
//! `Stopwatch::plot("queue depth", 12.0)` writes one value; a [`Series`] handle configures
//! a series once (its unit, whether it sums deltas) and keeps its current value, so that
//! `add` can record running sums: the record always carries the series' value, never a
//! delta (`docs/FORMAT.md`), so a reader needs no earlier record to draw a point.
//! Values go through the calling thread's buffer like frames (no lock, no allocation).

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use formats::{PlotMode, PlotUnit};

use crate::global::with_global;
use crate::inner::Inner;
use crate::local;

/// Writes one value of series `name` on `inner` from the calling thread.
#[inline]
pub(crate) fn plot_on(inner: &Arc<Inner>, name: &str, value: f64, mode: PlotMode, unit: PlotUnit) {
    if local::with_entry(inner, |e| e.emit_plot(name, value, mode, unit)).is_none() {
        inner.count_refused(0, 1);
    }
}

/// Which recorder a series writes to.
enum Target {
    /// The global one at the time of each value (none installed: nothing is written).
    Global,
    Recorder(Arc<Inner>),
}

/// A configured plot series: its name, unit and mode, and its current value.
///
/// ```no_run
/// use stopwatch::{PlotUnit, Stopwatch};
/// let in_flight = Stopwatch::series("bytes in flight").unit(PlotUnit::BYTES).summed();
/// in_flight.add(4096.0);  // records 4096
/// in_flight.add(-1024.0); // records 3072
/// ```
///
/// `Send + Sync`: share it (in an `Arc` or a `static`) between the threads that update it.
/// Values written concurrently are each a value the series had (for a summed series, the
/// running sum after that thread's delta).
pub struct Series {
    name: Cow<'static, str>,
    unit: PlotUnit,
    mode: PlotMode,
    /// The current value, as `f64` bits (updated by compare-and-swap).
    value: AtomicU64,
    target: Target,
}

impl Series {
    /// A series of the global recorder.
    pub(crate) fn global(name: Cow<'static, str>) -> Series {
        Series::new(name, Target::Global)
    }

    /// A series of one recorder.
    pub(crate) fn on(inner: Arc<Inner>, name: Cow<'static, str>) -> Series {
        Series::new(name, Target::Recorder(inner))
    }

    fn new(name: Cow<'static, str>, target: Target) -> Series {
        Series {
            name,
            unit: PlotUnit::COUNT,
            mode: PlotMode::Value,
            value: AtomicU64::new(0f64.to_bits()),
            target,
        }
    }

    /// The series' unit (default [`PlotUnit::COUNT`]).
    pub fn unit(mut self, unit: PlotUnit) -> Series {
        self.unit = unit;
        self
    }

    /// Marks the series as a running sum of deltas ([`Series::add`]); its records say so
    /// (mode "summed"), and carry the sum.
    pub fn summed(mut self) -> Series {
        self.mode = PlotMode::Summed;
        self
    }

    /// The series' name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The series' current value (0 until set).
    pub fn value(&self) -> f64 {
        f64::from_bits(self.value.load(Ordering::Relaxed))
    }

    /// Sets the value and records it.
    pub fn set(&self, value: f64) {
        self.value.store(value.to_bits(), Ordering::Relaxed);
        self.write(value);
    }

    /// Adds `delta` to the value and records the result (which it returns).
    pub fn add(&self, delta: f64) -> f64 {
        let mut old = self.value.load(Ordering::Relaxed);
        let new = loop {
            let new = f64::from_bits(old) + delta;
            match self.value.compare_exchange_weak(
                old,
                new.to_bits(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break new,
                Err(now) => old = now,
            }
        };
        self.write(new);
        new
    }

    fn write(&self, value: f64) {
        match &self.target {
            Target::Recorder(inner) => plot_on(inner, &self.name, value, self.mode, self.unit),
            Target::Global => {
                with_global(|inner| plot_on(inner, &self.name, value, self.mode, self.unit));
            }
        }
    }
}

impl std::fmt::Debug for Series {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Series")
            .field("name", &self.name)
            .field("unit", &self.unit)
            .field("mode", &self.mode)
            .field("value", &self.value())
            .finish()
    }
}
