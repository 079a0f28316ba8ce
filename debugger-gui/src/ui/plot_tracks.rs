//! Plot tracks under the timeline: one track per series, on the timeline's time axis (its
//! zoom and pan), drawn from the model's min/max-per-pixel query ([`Series::lod`]): a step
//! line through the values, a vertical stroke where a pixel holds several. Hovering shows the
//! value in force there with its unit ("queue depth 12 at 1.234 s").

use egui::{
    Align2, Color32, CornerRadius, FontId, Rect, Role, ScrollArea, Sense, Stroke, Ui, UiBuilder,
    WidgetInfo, pos2, vec2,
};

use crate::model::Model;
use crate::model::plots::{PlotBucket, Series, format_value};
use crate::model::search::Matches;
use crate::timefmt;
use crate::ui::timeline::{self, TimelineOutput, TimelineState};

/// Height of one track.
pub const TRACK_H: f32 = 48.0;
/// The tracks take at most this share of the timeline's height (they scroll beyond it).
const MAX_SHARE: f32 = 0.4;
const LINE: Color32 = Color32::from_rgb(110, 190, 250);

/// What the tracks drew and point at (for tests and tooltips).
#[derive(Default)]
pub struct TracksState {
    /// The series drawn in the last paint, by their track titles.
    pub drawn: Vec<String>,
    /// What the pointer is over: the hover text ("queue depth 12 at 1.234 s").
    pub hovered: Option<String>,
    buckets: Vec<PlotBucket>,
}

/// The timeline with the plot tracks under it (when the log has plots); returns what the
/// flamegraph reports.
pub fn timeline(
    ui: &mut Ui,
    flame: &mut TimelineState,
    tracks: &mut TracksState,
    model: &Model,
    matches: Option<&Matches>,
    selected: Option<crate::model::FrameRef>,
) -> TimelineOutput {
    let n = model.plots().series().len();
    let avail = ui.available_rect_before_wrap();
    let h = if n == 0 {
        0.0
    } else {
        (n as f32 * TRACK_H + 4.0).min(avail.height() * MAX_SHARE)
    };
    let split = avail.bottom() - h;
    let flame_rect = Rect::from_min_max(avail.min, pos2(avail.right(), split));
    let out = ui
        .scope_builder(UiBuilder::new().max_rect(flame_rect), |ui| {
            timeline::show(ui, flame, model, matches, selected)
        })
        .inner;
    tracks.drawn.clear();
    tracks.hovered = None;
    if n > 0 {
        let r = Rect::from_min_max(pos2(avail.left(), split), avail.max);
        ui.scope_builder(UiBuilder::new().max_rect(r), |ui| {
            show(ui, tracks, flame, model);
        });
    }
    out
}

/// Draws every series' track into `ui` (scrolling when they do not fit).
fn show(ui: &mut Ui, tracks: &mut TracksState, flame: &TimelineState, model: &Model) {
    let Some(base) = flame.base else {
        return;
    };
    let order = model.plots().display_order();
    ScrollArea::vertical()
        .id_salt("plot-tracks")
        .auto_shrink([false, false])
        .show(ui, |ui| {
            for i in order {
                let s = &model.plots().series()[i as usize];
                track(ui, tracks, flame, base, model, s);
            }
        });
}

/// A series' track title: its name, with its worker when another worker has one so named.
fn title(model: &Model, s: &Series) -> String {
    if model.plots().name_is_shared(&s.name) {
        let w = model.worker(s.worker);
        if w.name.is_empty() {
            format!("{} (worker {})", s.name, s.worker)
        } else {
            format!("{} ({})", s.name, w.name)
        }
    } else {
        s.name.clone()
    }
}

fn track(
    ui: &mut Ui,
    tracks: &mut TracksState,
    flame: &TimelineState,
    base: u64,
    model: &Model,
    s: &Series,
) {
    let name = title(model, s);
    let (rect, response) =
        ui.allocate_exact_size(vec2(ui.available_width(), TRACK_H), Sense::hover());
    response.widget_info(|| WidgetInfo::labeled(Role::Canvas, true, format!("Plot {name}")));
    let painter = ui.painter_at(rect);
    let visuals = ui.visuals().clone();
    painter.rect_filled(rect, CornerRadius::ZERO, visuals.extreme_bg_color);
    painter.line_segment(
        [rect.left_bottom(), rect.right_bottom()],
        Stroke::new(1.0, visuals.widgets.noninteractive.bg_stroke.color),
    );
    let w = f64::from(rect.width().max(1.0));
    let (start, width) = (flame.start, flame.width.max(1.0));
    let x_of = |t: u64| rect.left() + ((t as f64 - base as f64 - start) / width * w) as f32;
    let t_of = |x: f32| base as f64 + start + f64::from(x - rect.left()) / w * width;
    let t0 = t_of(rect.left()).max(0.0) as u64;
    let t1 = t_of(rect.right()).max(0.0).ceil() as u64 + 1;
    let px_ns = width / w;
    tracks.buckets.clear();
    let before = s.lod(t0, t1, px_ns, &mut tracks.buckets);
    // The vertical scale: what is in view.
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in before
        .into_iter()
        .chain(tracks.buckets.iter().flat_map(|b| [b.min, b.max]))
        .filter(|v| v.is_finite())
    {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        (lo, hi) = (0.0, 1.0);
    } else if lo == hi {
        (lo, hi) = (lo - 1.0, hi + 1.0);
    }
    // Under the title and scale line, so that neither is drawn over the values.
    let plot = Rect::from_min_max(rect.min + vec2(0.0, 18.0), rect.max - vec2(0.0, 4.0));
    let y_of = |v: f64| plot.bottom() - ((v - lo) / (hi - lo)) as f32 * plot.height();
    let stroke = Stroke::new(1.5, LINE);
    let mut cur = before.unwrap_or(f64::NAN);
    let mut x_prev = rect.left();
    for b in &tracks.buckets {
        let x = rect.left() + b.index as f32 + 0.5;
        if cur.is_finite() {
            painter.line_segment([pos2(x_prev, y_of(cur)), pos2(x, y_of(cur))], stroke);
        }
        // The values in this pixel, joined to the value carried into it.
        let (mut a, mut z) = (b.min, b.max);
        if cur.is_finite() {
            a = a.min(cur);
            z = z.max(cur);
        }
        if a.is_finite() && z.is_finite() {
            painter.line_segment([pos2(x, y_of(a)), pos2(x, y_of(z) - 0.5)], stroke);
        }
        cur = b.last;
        x_prev = x;
    }
    // The last value holds to the newest time read.
    let newest = model.newest().max(s.time_range().map_or(0, |r| r.1));
    let x_end = x_of(newest).min(rect.right());
    if cur.is_finite() && x_end > x_prev {
        painter.line_segment([pos2(x_prev, y_of(cur)), pos2(x_end, y_of(cur))], stroke);
    }
    // Title and scale, as text a screen reader (and a test) finds.
    let unit = s.unit;
    // In a child Ui: `ui.put` would move this Ui's cursor back up to the title, and the next
    // track would be drawn over this one.
    let label_rect = Rect::from_min_size(rect.min + vec2(6.0, 2.0), vec2(rect.width(), 14.0));
    ui.new_child(
        UiBuilder::new()
            .max_rect(label_rect)
            .layout(egui::Layout::left_to_right(egui::Align::Min)),
    )
    .add(egui::Label::new(egui::RichText::new(&name).small().strong()).selectable(false));
    painter.text(
        rect.right_top() + vec2(-6.0, 2.0),
        Align2::RIGHT_TOP,
        format!("{} … {}", format_value(lo, unit), format_value(hi, unit)),
        FontId::proportional(10.0),
        visuals.weak_text_color(),
    );
    tracks.drawn.push(name.clone());
    if let Some(p) = response.hover_pos() {
        let t = t_of(p.x).max(0.0) as u64;
        if let Some((at, v)) = s.value_at(t) {
            let origin = model.time_range().map_or(at, |r| r.0);
            let text = format!(
                "{name} {} at {}",
                format_value(v, unit),
                timefmt::duration(at.saturating_sub(origin) as f64)
            );
            painter.line_segment(
                [pos2(p.x, rect.top()), pos2(p.x, rect.bottom())],
                Stroke::new(1.0, visuals.weak_text_color()),
            );
            if v.is_finite() {
                painter.circle_filled(pos2(p.x, y_of(v)), 3.0, LINE);
            }
            response.on_hover_text_at_pointer(&text);
            tracks.hovered = Some(text);
        }
    }
}
