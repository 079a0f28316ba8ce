//! The overview strip above the timeline: the whole log's activity at a glance, the view's
//! window drawn on it; click or drag in it to move the view there.

use std::time::Duration;
use web_time::Instant;

use egui::{
    CornerRadius, Rect, Response, Role, Sense, Stroke, StrokeKind, Ui, WidgetInfo, pos2, vec2,
};

use crate::model::Model;

/// Height of the strip, points.
pub const OVERVIEW_H: f32 = 26.0;

/// The strip's cached activity.
#[derive(Clone, Debug, Default)]
pub struct Overview {
    cache: Option<Cached>,
    /// The view's box as last drawn (at least [`MIN_BOX_W`] wide), for tests.
    pub drawn_box: Option<Rect>,
}

/// The view's box is never drawn narrower than this (zoomed far in, it is a marker).
pub const MIN_BOX_W: f32 = 3.0;

#[derive(Clone, Debug)]
struct Cached {
    generation: u64,
    range: (u64, u64),
    buckets: usize,
    at: Instant,
    cost: Duration,
    counts: Vec<u32>,
}

impl Overview {
    /// Activity of `model` in `buckets` slices, and the range they cover: `range` when fresh.
    /// While the log grows (and its range with it) they are recomputed at most as often as
    /// [`super::refresh_due`] allows: they read every frame's start.
    fn counts(
        &mut self,
        model: &Model,
        range: (u64, u64),
        buckets: usize,
        ctx: &egui::Context,
    ) -> (&[u32], (u64, u64)) {
        let stale = self.cache.as_ref().is_none_or(|c| {
            c.buckets != buckets
                || (c.generation != model.generation()
                    && super::refresh_due(ctx, c.at.elapsed(), c.cost))
        });
        if stale {
            let t = Instant::now();
            let counts = model.activity(range.0, range.1 + 1, buckets);
            self.cache = Some(Cached {
                generation: model.generation(),
                range,
                buckets,
                at: Instant::now(),
                cost: t.elapsed(),
                counts,
            });
        }
        let c = self.cache.as_ref().expect("computed above");
        (&c.counts, c.range)
    }
}

/// Allocates and draws the strip for the log's `range` with the view `[view0, view1]` (ns
/// since the epoch); returns the time the user clicked or dragged to, if any.
pub fn show(
    ui: &mut Ui,
    overview: &mut Overview,
    model: &Model,
    range: (u64, u64),
    view: (f64, f64),
) -> Option<u64> {
    let (rect, response): (Rect, Response) = ui.allocate_exact_size(
        vec2(ui.available_width(), OVERVIEW_H),
        Sense::click_and_drag(),
    );
    response.widget_info(|| WidgetInfo::labeled(Role::Canvas, true, "Overview"));
    let painter = ui.painter_at(rect);
    let visuals = ui.visuals().clone();
    painter.rect_filled(rect, CornerRadius::ZERO, visuals.faint_bg_color);
    let w = rect.width().max(1.0);
    let buckets = (w / 2.0) as usize;
    let span = (range.1 - range.0).max(1) as f64;
    let x_of = |t: f64| rect.left() + ((t - range.0 as f64) / span * f64::from(w)) as f32;
    let (counts, counted) = overview.counts(model, range, buckets.max(1), ui.ctx());
    let top = counts.iter().copied().max().unwrap_or(0).max(1) as f32;
    // The counts may cover an earlier, shorter range of a growing log: draw them over it.
    let (cx0, cx1) = (x_of(counted.0 as f64), x_of(counted.1 as f64));
    let bw = (cx1 - cx0).max(1.0) / counts.len().max(1) as f32;
    let fill = visuals.widgets.inactive.fg_stroke.color.gamma_multiply(0.6);
    for (i, &c) in counts.iter().enumerate() {
        if c == 0 {
            continue;
        }
        // Square root: a quiet stretch stays visible next to a burst.
        let h = ((c as f32 / top).sqrt() * (OVERVIEW_H - 4.0)).max(1.0);
        let x = cx0 + i as f32 * bw;
        painter.rect_filled(
            Rect::from_min_max(
                pos2(x, rect.bottom() - h),
                pos2(x + bw.max(1.0), rect.bottom()),
            ),
            CornerRadius::ZERO,
            fill,
        );
    }
    // Zoomed in further than a pixel of the strip, the box is a marker of at least
    // MIN_BOX_W points centered on the view (kept inside the strip).
    let (mut x0, mut x1) = (
        x_of(view.0).clamp(rect.left(), rect.right()),
        x_of(view.1).clamp(rect.left(), rect.right()),
    );
    if x1 - x0 < MIN_BOX_W {
        let c = ((x0 + x1) / 2.0).clamp(
            rect.left() + MIN_BOX_W / 2.0,
            rect.right() - MIN_BOX_W / 2.0,
        );
        (x0, x1) = (c - MIN_BOX_W / 2.0, c + MIN_BOX_W / 2.0);
    }
    let win = Rect::from_min_max(pos2(x0, rect.top()), pos2(x1, rect.bottom()));
    overview.drawn_box = Some(win);
    let sel = visuals.selection.stroke.color;
    painter.rect_filled(
        win.expand2(vec2(1.0, 0.0)),
        CornerRadius::ZERO,
        sel.gamma_multiply(0.15),
    );
    painter.rect_stroke(
        win,
        CornerRadius::ZERO,
        Stroke::new(1.5, sel),
        StrokeKind::Inside,
    );
    if (response.dragged() || response.clicked())
        && let Some(p) = response.interact_pointer_pos()
    {
        let frac = f64::from(((p.x - rect.left()) / w).clamp(0.0, 1.0));
        return Some(range.0 + (frac * span) as u64);
    }
    None
}
