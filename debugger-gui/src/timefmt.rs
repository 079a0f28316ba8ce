//! Time formatting and ruler tick spacing (ns, µs, ms, s), shared by every panel.

/// Formats a duration in ns with a unit that keeps 3 significant digits ("812 ns", "1.25 ms").
pub fn duration(ns: f64) -> String {
    let a = ns.abs();
    let (v, unit) = if a < 1e3 {
        (ns, "ns")
    } else if a < 1e6 {
        (ns / 1e3, "µs")
    } else if a < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    if unit == "ns" {
        return format!("{} ns", ns.round() as i64);
    }
    let av = v.abs();
    if av >= 100.0 {
        format!("{v:.0} {unit}")
    } else if av >= 10.0 {
        format!("{v:.1} {unit}")
    } else {
        format!("{v:.2} {unit}")
    }
}

/// A ruler step: the smallest 1-2-5 multiple of a power of ten that is at least `min_ns`.
pub fn tick_step(min_ns: f64) -> f64 {
    if min_ns.is_nan() || min_ns <= 1.0 {
        return 1.0;
    }
    let p = 10f64.powf(min_ns.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if p * m >= min_ns {
            return p * m;
        }
    }
    p * 10.0
}

/// Formats a ruler tick at `t` ns (relative to the log start), precise enough for `step`.
///
/// The unit follows the tick's magnitude (so labels read "35.60 s", not "35600 ms"); the
/// decimals follow the step, so neighbouring ticks always differ.
pub fn tick_label(t: f64, step: f64) -> String {
    let a = t.abs().max(step);
    let (div, unit) = if a < 1e3 {
        (1.0, "ns")
    } else if a < 1e6 {
        (1e3, "µs")
    } else if a < 1e9 {
        (1e6, "ms")
    } else {
        (1e9, "s")
    };
    let v = t / div;
    let s = step / div;
    let decimals = if s >= 1.0 {
        0
    } else {
        (-s.log10() - 1e-9).ceil() as usize
    };
    format!("{v:.decimals$} {unit}")
}

/// Formats an absolute timestamp (ns since the Unix epoch) as UTC `HH:MM:SS.mmmuuunnn`.
pub fn clock(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let frac = ns % 1_000_000_000;
    let day = secs % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{:09} UTC",
        day / 3600,
        day / 60 % 60,
        day % 60,
        frac
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_pick_a_unit() {
        assert_eq!(duration(812.0), "812 ns");
        assert_eq!(duration(1_250.0), "1.25 µs");
        assert_eq!(duration(12_500_000.0), "12.5 ms");
        assert_eq!(duration(250_000_000.0), "250 ms");
        assert_eq!(duration(3.5e9), "3.50 s");
    }

    #[test]
    fn steps_are_1_2_5() {
        assert_eq!(tick_step(0.5), 1.0);
        assert_eq!(tick_step(3.0), 5.0);
        assert_eq!(tick_step(130.0), 200.0);
        assert_eq!(tick_step(4_000_000.0), 5_000_000.0);
        assert_eq!(tick_step(1000.0), 1000.0);
    }

    #[test]
    fn tick_labels_adapt() {
        assert_eq!(tick_label(500.0, 100.0), "500 ns");
        assert_eq!(tick_label(1_500_000.0, 500_000.0), "1.5 ms");
        assert_eq!(tick_label(2e9, 1e9), "2 s");
        assert_eq!(tick_label(20_000.0, 10_000.0), "20 µs");
        assert_eq!(tick_label(35_600_000_000.0, 50_000_000.0), "35.60 s");
        assert_eq!(tick_label(0.0, 50_000_000.0), "0 ms");
        assert_eq!(tick_label(1_000_000_200.0, 100.0), "1.0000002 s");
    }

    #[test]
    fn clock_is_utc_time_of_day() {
        assert_eq!(clock(3_723_000_000_123), "01:02:03.000000123 UTC");
    }
}
