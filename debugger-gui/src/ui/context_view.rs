//! The context view: one context's (request's) frames as one tree across threads, each
//! frame a row (indented under its parent, its thread named when its parent ran on another)
//! with a bar on the context's own time axis, as a trace waterfall. A click selects a frame.

use std::time::Duration;

use egui::{
    Align2, Color32, CornerRadius, FontId, Rect, RichText, Role, Sense, Stroke, Ui, WidgetInfo,
    pos2, vec2,
};
use web_time::Instant;

use crate::model::context_tree::ContextTree;
use crate::model::{FrameRef, Model};
use crate::timefmt;
use crate::ui::{category_color, present, relatives, text_color_on};

/// Height of one row.
const ROW_H: f32 = 20.0;
/// Indentation per depth.
const INDENT: f32 = 14.0;
/// Color of the mark on a frame whose parent ran on another thread.
pub const HOP_COLOR: Color32 = Color32::from_rgb(255, 170, 40);

/// Which context the view shows, and its tree as last built.
#[derive(Default)]
pub struct ContextView {
    /// The frame the view was opened from (the context is its).
    from: Option<FrameRef>,
    built: Option<Built>,
}

struct Built {
    from: FrameRef,
    generation: u64,
    at: Instant,
    cost: Duration,
    tree: ContextTree,
}

/// What the user did in the view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextAction {
    /// Clicked a frame's row.
    Select(FrameRef),
    /// Closed the view.
    Close,
}

impl ContextView {
    /// Shows the context of frame `at`.
    pub fn open(&mut self, at: FrameRef) {
        self.from = Some(at);
        self.built = None;
    }

    /// Whether a context is open.
    pub fn is_open(&self) -> bool {
        self.from.is_some()
    }

    /// Closes it.
    pub fn close(&mut self) {
        self.from = None;
        self.built = None;
    }

    /// The tree shown (for tests).
    pub fn tree(&self) -> Option<&ContextTree> {
        self.built.as_ref().map(|b| &b.tree)
    }

    fn update(&mut self, model: &Model, ctx: &egui::Context) {
        let Some(from) = self.from else {
            return;
        };
        let due = match &self.built {
            Some(b) if b.from == from => {
                b.generation != model.generation()
                    && super::refresh_due(ctx, b.at.elapsed(), b.cost)
            }
            _ => true,
        };
        if due {
            let t = Instant::now();
            let tree = ContextTree::of_frame(model, from);
            self.built = Some(Built {
                from,
                generation: model.generation(),
                cost: t.elapsed(),
                at: Instant::now(),
                tree,
            });
        } else if let Some(b) = &self.built
            && b.generation != model.generation()
        {
            super::repaint_when_due(ctx, b.at.elapsed(), b.cost);
        }
    }
}

/// Draws the view into `ui`; `selected` is highlighted.
pub fn show(
    ui: &mut Ui,
    view: &mut ContextView,
    model: &Model,
    selected: Option<FrameRef>,
) -> Option<ContextAction> {
    view.update(model, ui.ctx());
    let mut action = None;
    let Some(b) = &view.built else {
        ui.label(RichText::new("Select a frame, then Context view in its panel (or double-click a context in the list).").weak());
        return None;
    };
    let tree = &b.tree;
    let first = tree.rows.first()?;
    ui.horizontal(|ui| {
        let root_label = model.labels().name(model.label_of(first.at));
        ui.label(RichText::new(format!("Context {} · {root_label}", tree.context.1)).strong());
        let hops = tree.rows.iter().filter(|r| r.hop).count();
        ui.label(format!(
            "{} frames on {} · {} · {}",
            tree.rows.len(),
            crate::ui::status_bar::count(tree.lanes as u64, "thread", "threads"),
            timefmt::duration((tree.span.1 - tree.span.0) as f64),
            crate::ui::status_bar::count(
                hops as u64,
                "hop between threads",
                "hops between threads"
            ),
        ));
        if tree.truncated {
            ui.label(RichText::new("(not every frame is shown)").weak());
        }
        if model.parents_inferred() {
            ui.label(RichText::new("parents inferred").weak())
                .on_hover_text(relatives::INFERRED);
        }
        if ui.button("Close context view").clicked() {
            action = Some(ContextAction::Close);
        }
    });
    ui.separator();
    let visuals = ui.visuals().clone();
    let (t0, t1) = tree.span;
    let span = (t1 - t0).max(1) as f64;
    let newest = model.newest();
    let font = FontId::proportional(12.0);
    egui::ScrollArea::vertical()
        .id_salt("context-view")
        .auto_shrink([false, false])
        .show_rows(ui, ROW_H, tree.rows.len(), |ui, range| {
            let width = ui.available_width();
            let tree_w = (width * 0.42).clamp(160.0, 480.0);
            for r in &tree.rows[range] {
                let (rect, resp) = ui.allocate_exact_size(vec2(width, ROW_H), Sense::click());
                let row = model.row(r.at);
                let i = r.at.index as usize;
                let label = model.labels().name(model.label_of(r.at));
                resp.widget_info(|| WidgetInfo::labeled(Role::Button, true, label));
                let painter = ui.painter_at(rect);
                if selected == Some(r.at) {
                    painter.rect_filled(
                        rect,
                        CornerRadius::ZERO,
                        visuals.selection.bg_fill.gamma_multiply(0.5),
                    );
                } else if resp.hovered() {
                    painter.rect_filled(
                        rect,
                        CornerRadius::ZERO,
                        visuals.widgets.hovered.weak_bg_fill,
                    );
                }
                // The tree: indentation, a guide line per level, the label, the thread when
                // the parent ran on another.
                let x = rect.left() + 4.0 + r.depth as f32 * INDENT;
                for d in 0..r.depth {
                    let gx = rect.left() + 4.0 + d as f32 * INDENT + 4.0;
                    painter.line_segment(
                        [pos2(gx, rect.top()), pos2(gx, rect.bottom())],
                        Stroke::new(1.0, visuals.weak_text_color().gamma_multiply(0.4)),
                    );
                }
                let cat = formats::Category(row.category[i]);
                painter.rect_filled(
                    Rect::from_center_size(pos2(x + 4.0, rect.center().y), vec2(8.0, 8.0)),
                    CornerRadius::same(2),
                    category_color(cat),
                );
                let mut text = label.to_owned();
                if r.hop || r.depth == 0 {
                    text.push_str(&format!("  · {}", present::thread_name(model, r.at.lane)));
                }
                if r.missing_parent {
                    text.push_str("  · parent not in the log");
                }
                let color = if r.hop {
                    HOP_COLOR
                } else {
                    visuals.text_color()
                };
                let clip = painter.with_clip_rect(Rect::from_min_max(
                    rect.min,
                    pos2(rect.left() + tree_w - 4.0, rect.bottom()),
                ));
                if r.hop {
                    // A hop: the arrow from the parent's thread.
                    let ax = x - 3.0;
                    clip.line_segment(
                        [pos2(ax - 7.0, rect.center().y), pos2(ax, rect.center().y)],
                        Stroke::new(1.5, HOP_COLOR),
                    );
                }
                clip.text(
                    pos2(x + 12.0, rect.center().y),
                    Align2::LEFT_CENTER,
                    text,
                    font.clone(),
                    color,
                );
                // The bar, on the context's time axis.
                let bar = Rect::from_min_max(
                    pos2(rect.left() + tree_w, rect.top() + 3.0),
                    pos2(rect.right() - 60.0, rect.bottom() - 3.0),
                );
                let (s, e) = (row.start(i), row.end_or(i, newest));
                let xs =
                    bar.left() + ((s.saturating_sub(t0)) as f64 / span * bar.width() as f64) as f32;
                let xe =
                    bar.left() + ((e.saturating_sub(t0)) as f64 / span * bar.width() as f64) as f32;
                let brect =
                    Rect::from_min_max(pos2(xs, bar.top()), pos2(xe.max(xs + 2.0), bar.bottom()));
                let fill = category_color(cat);
                painter.rect_filled(brect, CornerRadius::same(2), fill);
                let d = timefmt::duration((e - s) as f64);
                if brect.width() > 60.0 {
                    painter.text(
                        pos2(brect.left() + 4.0, brect.center().y),
                        Align2::LEFT_CENTER,
                        d,
                        FontId::proportional(11.0),
                        text_color_on(fill),
                    );
                } else {
                    painter.text(
                        pos2(brect.right() + 4.0, brect.center().y),
                        Align2::LEFT_CENTER,
                        d,
                        FontId::proportional(11.0),
                        visuals.weak_text_color(),
                    );
                }
                if resp.clicked() {
                    action = Some(ContextAction::Select(r.at));
                }
                resp.on_hover_text(format!(
                    "{label} on {}\n+{} in the context, {}",
                    present::lane_title(model, r.at.lane),
                    timefmt::duration(s.saturating_sub(t0) as f64),
                    timefmt::duration((e - s) as f64)
                ));
            }
        });
    action
}
