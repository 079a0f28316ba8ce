//! The timing rows shared by the hover tooltip and the selected-frame panel.

use egui::{RichText, Ui};
use formats::FramePolls;

use crate::model::{FrameInfo, Model};
use crate::timefmt;
use crate::ui::status_bar::thousands;

/// Adds Duration, Self time, where an asynchronous frame's time went, Start, Thread and
/// Context rows to a two-column grid.
pub fn timing_rows(ui: &mut Ui, model: &Model, info: &FrameInfo) {
    let base = model.time_range().map_or(0, |r| r.0);
    let duration = timefmt::duration(info.duration as f64);
    ui.label("Duration");
    let lost = model.lost_in(info.at);
    ui.label(match info.end {
        Some(_) if let Some(where_) = lost => {
            format!("{duration} (its end was lost in damaged bytes: {where_})")
        }
        Some(_) if model.is_cut(info.at) => {
            format!("{duration} (cut: its process stopped writing before ending it)")
        }
        Some(_) => duration,
        None => format!("{duration} (running)"),
    });
    ui.end_row();
    ui.label("Self time");
    ui.label(timefmt::duration(info.self_ns as f64));
    ui.end_row();
    if let Some(p) = model.polls().of(info.at) {
        for (name, value) in breakdown_rows(p, info.duration) {
            ui.label(name);
            match name {
                "Queued" if !p.queued_measured() => ui.label(value).on_hover_text(
                    "Recorded from a tracing span: its wakes are not seen, so only the time \
                     before its first poll is known to be queued",
                ),
                "Slow polls" if p.slow_polls > 0 => {
                    ui.label(RichText::new(value).color(crate::ui::SLOW_POLL_COLOR))
                }
                _ => ui.label(value),
            };
            ui.end_row();
        }
    }
    ui.label("Start");
    ui.label(format!(
        "+{}  ({})",
        timefmt::duration(info.start.saturating_sub(base) as f64),
        timefmt::clock(info.start)
    ));
    ui.end_row();
    ui.label("Thread");
    ui.label(super::present::lane_title(model, info.at.lane));
    ui.end_row();
    ui.label("Context");
    ui.label(info.context.to_string());
    ui.end_row();
}

/// A time and its share of `of` ("2.10 ms (21.0 %)").
fn share(ns: u64, of: u64) -> String {
    let pct = if of == 0 {
        0.0
    } else {
        ns as f64 * 100.0 / of as f64
    };
    format!("{} ({pct:.1} %)", timefmt::duration(ns as f64))
}

/// The rows saying where an asynchronous frame of `duration_ns` spent its time, from its
/// polls record: (name, value), in the order shown.
pub fn breakdown_rows(p: &FramePolls, duration_ns: u64) -> Vec<(&'static str, String)> {
    let b = p.split(duration_ns);
    let queued = if p.queued_measured() {
        share(b.queued_ns, duration_ns)
    } else {
        format!(
            "{}, only the delay to its first poll: the rest counts as waiting",
            share(b.queued_ns, duration_ns)
        )
    };
    let mut rows = vec![
        ("Busy", share(b.busy_ns, duration_ns)),
        ("Queued", queued),
        ("Waiting", share(b.waiting_ns, duration_ns)),
        ("Polls", thousands(p.polls)),
    ];
    if p.polls == 0 {
        rows.push(("First poll after", "never polled".to_owned()));
    } else {
        rows.push(("Longest poll", timefmt::duration(p.longest_poll_ns as f64)));
        rows.push((
            "First poll after",
            timefmt::duration(p.first_poll_ns as f64),
        ));
    }
    rows.push(("Slow polls", thousands(p.slow_polls)));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn polls(flags: u64, polls: u64) -> FramePolls {
        FramePolls {
            id: 1,
            worker: 0,
            timestamp: 0,
            flags,
            polls,
            busy_ns: 2_100_000,
            queued_ns: 400_000,
            longest_poll_ns: 1_500_000,
            first_poll_ns: 30_000,
            slow_polls: 1,
        }
    }

    fn rows(p: &FramePolls, d: u64) -> Vec<(&'static str, String)> {
        breakdown_rows(p, d)
    }

    #[test]
    fn the_breakdown_rows_give_each_part_with_its_share() {
        let r = rows(&polls(formats::polls::QUEUED_MEASURED, 12), 10_000_000);
        let want: Vec<(&str, String)> = [
            ("Busy", "2.10 ms (21.0 %)"),
            ("Queued", "400 µs (4.0 %)"),
            ("Waiting", "7.50 ms (75.0 %)"),
            ("Polls", "12"),
            ("Longest poll", "1.50 ms"),
            ("First poll after", "30.0 µs"),
            ("Slow polls", "1"),
        ]
        .into_iter()
        .map(|(a, b)| (a, b.to_owned()))
        .collect();
        assert_eq!(r, want);
    }

    #[test]
    fn a_span_says_queued_is_only_the_delay_to_its_first_poll() {
        let r = rows(&polls(0, 3), 10_000_000);
        assert_eq!(
            r[1],
            (
                "Queued",
                "400 µs (4.0 %), only the delay to its first poll: the rest counts as waiting"
                    .to_owned()
            )
        );
    }

    #[test]
    fn a_future_never_polled_was_all_queued_and_a_record_claiming_more_is_cut() {
        let mut p = polls(formats::polls::QUEUED_MEASURED, 0);
        p.busy_ns = 0;
        p.queued_ns = 5_000;
        let r = rows(&p, 5_000);
        assert_eq!(r[0].1, "0 ns (0.0 %)");
        assert_eq!(r[1].1, "5.00 µs (100.0 %)");
        assert!(r.contains(&("First poll after", "never polled".to_owned())));
        assert!(!r.iter().any(|(n, _)| *n == "Longest poll"));
        // Busy and queued past the duration (a damaged record): the parts still add up.
        let mut p = polls(formats::polls::QUEUED_MEASURED, 2);
        p.busy_ns = 900;
        p.queued_ns = 900;
        let r = rows(&p, 1_000);
        assert_eq!(
            (&r[0].1[..], &r[1].1[..], &r[2].1[..]),
            ("900 ns (90.0 %)", "100 ns (10.0 %)", "0 ns (0.0 %)")
        );
    }
}
