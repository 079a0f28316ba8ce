//! Message markers on the timeline's lanes: a small tick per pixel and level in the lane's
//! title bar, colored by level (most severe on top); hovering one shows its messages.

use egui::{Color32, CornerRadius, Painter, Rect, Response, pos2};
use formats::Level;

use crate::model::Model;
use crate::model::messages::{Marker, level_rgb};
use crate::timefmt;

/// Markers shown with their text in a tooltip at most.
const TOOLTIP_LINES: usize = 8;

/// The color of a level's markers and list entries.
pub fn level_color(level: Level) -> Color32 {
    let [r, g, b] = level_rgb(level);
    Color32::from_rgb(r, g, b)
}

/// Draws lane `lane`'s markers of `[t0, t1)` in its title bar `header`, `x_of` placing a time;
/// appends each drawn marker with its rectangle to `out` (for hovering and clicks).
#[allow(clippy::too_many_arguments)]
pub fn draw(
    painter: &Painter,
    model: &Model,
    lane: u32,
    header: Rect,
    (t0, t1): (u64, u64),
    px_ns: f64,
    x_of: impl Fn(u64) -> f32,
    out: &mut Vec<(Rect, u32, Marker)>,
) {
    let mut markers = Vec::new();
    model.messages().markers(lane, t0, t1, px_ns, &mut markers);
    for m in markers {
        let x = x_of(m.time);
        let r = Rect::from_min_max(
            pos2(x - 1.5, header.bottom() - 8.0),
            pos2(x + 1.5, header.bottom()),
        );
        painter.rect_filled(r, CornerRadius::ZERO, level_color(m.level));
        out.push((r, lane, m));
    }
}

/// The marker under `p`, if any (the most severe when several overlap).
pub fn at(markers: &[(Rect, u32, Marker)], p: egui::Pos2) -> Option<(u32, Marker)> {
    markers
        .iter()
        .filter(|(r, ..)| r.expand2(egui::vec2(2.0, 3.0)).contains(p))
        .min_by_key(|(.., m)| m.level)
        .map(|&(_, lane, m)| (lane, m))
}

/// The tooltip of a marker: its messages' levels, times and texts.
pub fn tooltip(response: &Response, model: &Model, lane: u32, marker: &Marker, px_ns: f64) {
    let msgs = model.messages();
    let origin = model.time_range().map_or(0, |r| r.0);
    let near = msgs.in_range(
        lane,
        marker.time,
        marker.time + px_ns.ceil().max(1.0) as u64,
    );
    response.clone().on_hover_ui_at_pointer(|ui| {
        for &i in near.iter().take(TOOLTIP_LINES) {
            let Some(e) = msgs.get(i) else { continue };
            ui.horizontal(|ui| {
                ui.colored_label(level_color(e.level), e.level.name());
                ui.label(timefmt::duration(e.time.saturating_sub(origin) as f64));
                ui.label(msgs.text(e));
            });
        }
        if near.len() > TOOLTIP_LINES {
            ui.weak(format!("and {} more here", near.len() - TOOLTIP_LINES));
        }
        ui.weak("Click to select the frame it was written in");
    });
}
