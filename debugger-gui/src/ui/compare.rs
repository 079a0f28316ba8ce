//! The Compare tab: every label's count, mean and p99 in the compared log (the baseline) and
//! the open one, side by side with their changes, the worst regression first.

use std::time::Duration;
use web_time::Instant;

use egui::{Color32, RichText, Ui};
use egui_extras::{Column, TableBuilder};

use crate::model::Model;
use crate::model::compare::{LabelDelta, compare_labels};
use crate::timefmt;

/// Changes smaller than this are shown neutral.
const NOTICEABLE: f64 = 0.05;

/// The Compare tab's cached rows.
#[derive(Default)]
pub struct ComparePanel {
    rows: Vec<LabelDelta>,
    computed: Option<(u64, u64, Instant)>,
}

/// Red for slower, blue for faster, plain for about the same.
pub fn change_color(change: f64) -> Option<Color32> {
    if change > NOTICEABLE {
        Some(Color32::from_rgb(235, 90, 70))
    } else if change < -NOTICEABLE {
        Some(Color32::from_rgb(90, 150, 240))
    } else {
        None
    }
}

fn change_text(change: f64) -> String {
    if change.is_infinite() {
        if change > 0.0 { "new" } else { "gone" }.to_owned()
    } else {
        format!("{:+.0} %", change * 100.0)
    }
}

/// Shows the tab for `base` (the compared log) against `new` (the open one).
pub fn show(ui: &mut Ui, panel: &mut ComparePanel, base: &Model, new: &Model, base_name: &str) {
    let stale = panel.computed.is_none_or(|(gb, gn, at)| {
        (gb, gn) != (base.generation(), new.generation())
            && at.elapsed() > Duration::from_millis(500)
    });
    if stale {
        panel.rows = compare_labels(base, new);
        panel.computed = Some((base.generation(), new.generation(), Instant::now()));
    }
    ui.label(format!(
        "Baseline: {base_name} ({} frames) · open log: {} frames · the worst p99 regression first",
        base.frame_count(),
        new.frame_count()
    ));
    let rows = &panel.rows;
    let cell = |ui: &mut Ui, before: Option<String>, after: Option<String>, change: f64| {
        let text = format!(
            "{} -> {}  {}",
            before.as_deref().unwrap_or("–"),
            after.as_deref().unwrap_or("–"),
            change_text(change)
        );
        match change_color(change) {
            Some(c) => ui.label(RichText::new(text).color(c)),
            None => ui.label(text),
        };
    };
    TableBuilder::new(ui)
        .id_salt("compare-table")
        .striped(true)
        .column(
            Column::initial(240.0)
                .at_least(80.0)
                .clip(true)
                .resizable(true),
        )
        .columns(Column::initial(170.0).resizable(true), 2)
        .column(Column::remainder().at_least(120.0))
        .header(20.0, |mut h| {
            for name in ["Label", "Count", "Mean", "p99"] {
                h.col(|ui| {
                    ui.strong(name);
                });
            }
        })
        .body(|body| {
            body.rows(18.0, rows.len(), |mut row| {
                let r = &rows[row.index()];
                row.col(|ui| {
                    ui.label(&r.label);
                });
                row.col(|ui| {
                    let (b, n) = (r.base.map(|s| s.count), r.new.map(|s| s.count));
                    let change = match (b, n) {
                        (Some(b), Some(n)) => n as f64 / b.max(1) as f64 - 1.0,
                        _ => r.p99_change(),
                    };
                    // More calls is not slower: the count is shown without color.
                    ui.label(format!(
                        "{} -> {}  {}",
                        b.map_or("–".into(), |c| c.to_string()),
                        n.map_or("–".into(), |c| c.to_string()),
                        change_text(change)
                    ));
                });
                row.col(|ui| {
                    let d = |s: Option<crate::model::compare::Summary>| {
                        s.map(|s| timefmt::duration(s.mean_ns))
                    };
                    cell(ui, d(r.base), d(r.new), r.mean_change());
                });
                row.col(|ui| {
                    let d = |s: Option<crate::model::compare::Summary>| {
                        s.map(|s| timefmt::duration(s.p99_ns as f64))
                    };
                    cell(ui, d(r.base), d(r.new), r.p99_change());
                });
            });
        });
}
