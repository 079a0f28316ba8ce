//! The timing rows shared by the hover tooltip and the selected-frame panel.

use egui::Ui;

use crate::model::{FrameInfo, Model};
use crate::timefmt;

/// Adds Duration, Self time, Start, Thread and Context rows to a two-column grid.
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
