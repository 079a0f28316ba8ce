//! The histogram tab (Tracy's find zone): how one label's durations spread, on a log scale;
//! click a bar to list its frames, "Go to slowest" to jump to the worst one.

use std::time::Duration;
use web_time::Instant;

use egui::{
    Align2, Color32, CornerRadius, FontId, Rect, RichText, Role, Sense, Stroke, Ui, WidgetInfo,
    pos2, vec2,
};

use crate::model::histogram::Histogram;
use crate::model::{FrameRef, Model};
use crate::timefmt;

/// Bars drawn.
const BINS: usize = 48;
/// Frames listed for a clicked bar.
const LISTED: usize = 200;
/// Height of that list.
const LIST_H: f32 = 64.0;

/// A computed histogram: label, range, model generation, when, its cost, the histogram.
type Cached = (u32, Option<(u64, u64)>, u64, Instant, Duration, Histogram);

/// The histogram tab's state.
#[derive(Default)]
pub struct HistogramPanel {
    /// The label shown (interned id).
    pub label: Option<u32>,
    /// Limit to frames starting in this range (ns since the epoch).
    pub range: Option<(u64, u64)>,
    /// The clicked bar, and its frames (longest first).
    pub picked: Option<(usize, Vec<(FrameRef, u64)>)>,
    cache: Option<Cached>,
}

impl HistogramPanel {
    /// The histogram for the current label and range (recomputed when they change, and twice
    /// a second while the log grows).
    pub fn histogram(&mut self, model: &Model, ctx: &egui::Context) -> Option<&Histogram> {
        let label = self.label?;
        let stale = match &self.cache {
            None => true,
            Some((l, r, g, at, cost, _)) => {
                *l != label
                    || *r != self.range
                    || (*g != model.generation() && super::refresh_due(ctx, at.elapsed(), *cost))
            }
        };
        if stale {
            if self
                .cache
                .as_ref()
                .is_none_or(|(l, r, ..)| (*l, *r) != (label, self.range))
            {
                self.picked = None;
            }
            let t = Instant::now();
            let h = model.histogram(label, BINS, self.range);
            let cost = t.elapsed();
            self.cache = Some((
                label,
                self.range,
                model.generation(),
                Instant::now(),
                cost,
                h,
            ));
        }
        self.cache.as_ref().map(|c| &c.5)
    }
}

/// Shows the tab; returns a frame to select and bring into view.
pub fn show(ui: &mut Ui, panel: &mut HistogramPanel, model: &Model) -> Option<FrameRef> {
    let Some(label) = panel.label else {
        ui.label(
            RichText::new(
                "Select a frame, or click a label in Statistics, to see how its durations spread.",
            )
            .weak(),
        );
        return None;
    };
    let name = model.labels().name(label).to_owned();
    let h = panel.histogram(model, ui.ctx()).cloned()?;
    let mut go = None;
    ui.horizontal(|ui| {
        ui.strong(&name);
        if panel.range.is_some() {
            ui.label(RichText::new("(in the selected range)").weak());
        }
        ui.label(format!(
            "{} frames · min {} · mean {} · p50 {} · p99 {} · max {}",
            h.count,
            timefmt::duration(h.min_ns as f64),
            timefmt::duration(h.mean_ns),
            timefmt::duration(h.p50_ns as f64),
            timefmt::duration(h.p99_ns as f64),
            timefmt::duration(h.max_ns as f64),
        ));
        if ui
            .add_enabled(h.slowest.is_some(), egui::Button::new("Go to slowest"))
            .clicked()
        {
            go = h.slowest;
        }
    });
    if h.count == 0 {
        ui.label(RichText::new("No closed frame with this label here.").weak());
        return go;
    }
    // The list of a clicked bar gets a fixed height under the bars, so the tab never
    // outgrows the panel (which would move everything while it grows).
    let list_h = if panel.picked.is_some() { LIST_H } else { 0.0 };
    let gap = ui.spacing().item_spacing.y;
    let size = vec2(
        ui.available_width(),
        (ui.available_height() - list_h - gap).max(40.0),
    );
    let (rect, response) = ui.allocate_exact_size(size, Sense::click());
    response.widget_info(|| WidgetInfo::labeled(Role::Canvas, true, "Duration histogram"));
    let painter = ui.painter_at(rect);
    let visuals = ui.visuals().clone();
    painter.rect_filled(rect, CornerRadius::ZERO, visuals.extreme_bg_color);
    let axis_h = 16.0;
    let plot = Rect::from_min_max(rect.min, pos2(rect.right(), rect.bottom() - axis_h));
    let top = h.bins.iter().map(|b| b.count).max().unwrap_or(1).max(1) as f32;
    let bw = plot.width() / h.bins.len() as f32;
    let hover = response.hover_pos();
    let mut hovered = None;
    for (i, b) in h.bins.iter().enumerate() {
        let x0 = plot.left() + i as f32 * bw;
        let col = Rect::from_min_max(pos2(x0, plot.top()), pos2(x0 + bw, plot.bottom()));
        if hover.is_some_and(|p| col.contains(p)) {
            hovered = Some(i);
            painter.rect_filled(col, CornerRadius::ZERO, visuals.faint_bg_color);
        }
        if b.count == 0 {
            continue;
        }
        let bh = (b.count as f32 / top * (plot.height() - 4.0)).max(2.0);
        let bar = Rect::from_min_max(
            pos2(x0 + 1.0, plot.bottom() - bh),
            pos2(x0 + bw - 1.0, plot.bottom()),
        );
        let picked = panel.picked.as_ref().is_some_and(|(p, _)| *p == i);
        let fill = if picked {
            visuals.selection.bg_fill
        } else {
            Color32::from_rgb(237, 150, 60)
        };
        painter.rect_filled(bar, CornerRadius::same(1), fill);
    }
    // Axis: a few durations along the log scale.
    for i in (0..=h.bins.len()).step_by((h.bins.len() / 6).max(1)) {
        let x = plot.left() + i as f32 * bw;
        let ns = h.bins.get(i).map_or(h.max_ns, |b| b.from_ns);
        painter.line_segment(
            [pos2(x, plot.bottom()), pos2(x, plot.bottom() + 4.0)],
            Stroke::new(1.0, visuals.text_color()),
        );
        painter.text(
            pos2(x + 2.0, plot.bottom() + 2.0),
            Align2::LEFT_TOP,
            timefmt::duration(ns as f64),
            FontId::proportional(10.0),
            visuals.weak_text_color(),
        );
    }
    if let Some(i) = hovered {
        let b = h.bins[i];
        response.clone().on_hover_ui_at_pointer(|ui| {
            ui.label(format!(
                "{} lasting {} to {}",
                super::status_bar::count(b.count, "frame", "frames"),
                timefmt::duration(b.from_ns as f64),
                timefmt::duration(b.to_ns as f64)
            ));
            ui.weak("Click to list them");
        });
        if response.clicked() {
            let frames = model.frames_lasting(label, b.from_ns, b.to_ns, panel.range, LISTED);
            panel.picked = Some((i, frames));
        }
    }
    if let Some((i, frames)) = &panel.picked {
        let b = h.bins[*i];
        let area = Rect::from_min_size(ui.cursor().min, vec2(ui.available_width(), list_h));
        let mut ui = ui.new_child(egui::UiBuilder::new().max_rect(area));
        ui.set_clip_rect(area.intersect(ui.clip_rect()));
        let ui = &mut ui;
        ui.label(format!(
            "{} lasting {} to {}{}, longest first:",
            super::status_bar::count(b.count, "frame", "frames"),
            timefmt::duration(b.from_ns as f64),
            timefmt::duration(b.to_ns as f64),
            if b.count as usize > frames.len() {
                format!(" (the first {})", frames.len())
            } else {
                String::new()
            }
        ));
        let base = model.time_range().map_or(0, |r| r.0);
        egui::ScrollArea::horizontal()
            .id_salt("histogram-frames")
            .show(ui, |ui| {
                ui.horizontal(|ui| {
                    for &(at, d) in frames {
                        let start = model.row(at).start(at.index as usize);
                        let text = format!(
                            "{} at +{}",
                            timefmt::duration(d as f64),
                            timefmt::duration(start.saturating_sub(base) as f64)
                        );
                        if ui.button(text).clicked() {
                            go = Some(at);
                        }
                    }
                });
            });
    }
    go
}
