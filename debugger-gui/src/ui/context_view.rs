//! The context view: one context's (request's) frames as one tree across threads, each
//! frame a row (indented under its parent, its thread named when its parent ran on another)
//! with a bar on the context's own time axis, as a trace waterfall. A click selects a frame.
//! Above it: where the root's time went (busy, queued, waiting, when it recorded its polls),
//! and its critical path, also marked on the rows.

use std::time::Duration;

use egui::{
    Align2, Color32, CornerRadius, FontId, Rect, RichText, Role, Sense, Stroke, Ui, WidgetInfo,
    pos2, vec2,
};
use web_time::Instant;

use crate::model::context_tree::ContextTree;
use crate::model::critical_path::{CriticalStep, critical_path};
use crate::model::{FrameRef, Model};
use crate::timefmt;
use crate::ui::{category_color, present, relatives, text_color_on};

/// Height of one row.
const ROW_H: f32 = 20.0;
/// Indentation per depth.
const INDENT: f32 = 14.0;
/// Color of the mark on a frame whose parent ran on another thread.
pub const HOP_COLOR: Color32 = Color32::from_rgb(255, 170, 40);
/// Color of the critical path's marks.
pub const CRITICAL_COLOR: Color32 = Color32::from_rgb(230, 60, 90);

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
    /// The critical path from the tree's first row (its root).
    critical: Vec<CriticalStep>,
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

    /// The critical path shown, from the root (for tests).
    pub fn critical_path(&self) -> &[CriticalStep] {
        self.built.as_ref().map_or(&[], |b| &b.critical)
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
            let critical = tree
                .rows
                .first()
                .map_or_else(Vec::new, |r| critical_path(model, r.at));
            self.built = Some(Built {
                from,
                generation: model.generation(),
                cost: t.elapsed(),
                at: Instant::now(),
                tree,
                critical,
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
    where_time_went(ui, model, first.at);
    if let Some(a) = critical_line(ui, model, &b.critical) {
        action = Some(a);
    }
    let on_path: rustc_hash::FxHashSet<FrameRef> = b.critical.iter().map(|s| s.at).collect();
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
                let critical = on_path.contains(&r.at);
                if critical {
                    painter.rect_stroke(
                        brect.expand(1.0),
                        CornerRadius::same(3),
                        Stroke::new(2.0, CRITICAL_COLOR),
                        egui::StrokeKind::Outside,
                    );
                    painter.rect_filled(
                        Rect::from_min_size(rect.min, vec2(3.0, rect.height())),
                        CornerRadius::ZERO,
                        CRITICAL_COLOR,
                    );
                }
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
                let critical_note = if critical {
                    "\non the critical path"
                } else {
                    ""
                };
                resp.on_hover_text(format!(
                    "{label} on {}\n+{} in the context, {}{critical_note}",
                    present::lane_title(model, r.at.lane),
                    timefmt::duration(s.saturating_sub(t0) as f64),
                    timefmt::duration((e - s) as f64)
                ));
            }
        });
    action
}

/// "Where its time went": the root's busy, queued and waiting time with their shares and a
/// bar of them, when it recorded its polls.
fn where_time_went(ui: &mut Ui, model: &Model, root: FrameRef) {
    let Some(info) = model.info(root) else { return };
    let Some(p) = model.polls().of(root) else {
        return;
    };
    let b = p.split(info.duration);
    let d = info.duration.max(1) as f64;
    let pct = |ns: u64| ns as f64 * 100.0 / d;
    ui.horizontal(|ui| {
        ui.label("Where its time went:");
        let (bar, _) = ui.allocate_exact_size(vec2(160.0, 10.0), Sense::hover());
        let mut x = bar.left();
        for (ns, shade) in [
            (b.busy_ns, crate::ui::BUSY_SHADE),
            (b.queued_ns, crate::ui::QUEUED_SHADE),
            (b.waiting_ns, crate::ui::WAITING_SHADE),
        ] {
            let w = (ns as f64 / d * bar.width() as f64) as f32;
            ui.painter().rect_filled(
                Rect::from_min_max(pos2(x, bar.top()), pos2(x + w, bar.bottom())),
                CornerRadius::ZERO,
                shade,
            );
            x += w;
        }
        let text = format!(
            "busy {} ({:.1} %) · queued {} ({:.1} %) · waiting {} ({:.1} %)",
            timefmt::duration(b.busy_ns as f64),
            pct(b.busy_ns),
            timefmt::duration(b.queued_ns as f64),
            pct(b.queued_ns),
            timefmt::duration(b.waiting_ns as f64),
            pct(b.waiting_ns),
        );
        let label = ui.label(text);
        if !p.queued_measured() {
            label.on_hover_text(
                "Recorded from a tracing span: queued is only the delay to its first poll, \
                 the rest counts as waiting",
            );
        }
    });
}

/// The critical path as one line of links, root first ("request 12 ms › fetch 9 ms › …"):
/// a click selects the frame.
fn critical_line(ui: &mut Ui, model: &Model, path: &[CriticalStep]) -> Option<ContextAction> {
    let mut action = None;
    if path.len() < 2 {
        return None;
    }
    ui.horizontal_wrapped(|ui| {
        ui.label(RichText::new("Critical path:").color(CRITICAL_COLOR))
            .on_hover_text(
                "From the root, the child that ended last within its parent, at each level: \
                 the chain that decided when the request finished",
            );
        for (k, s) in path.iter().enumerate() {
            if k > 0 {
                ui.label("›");
            }
            let label = model.labels().name(model.label_of(s.at));
            let text = format!("{label} {}", timefmt::duration((s.end - s.start) as f64));
            let hover = if k == 0 {
                "the root".to_owned()
            } else {
                format!(
                    "its parent ended {} after it",
                    timefmt::duration(s.after_ns as f64)
                )
            };
            if ui.link(text).on_hover_text(hover).clicked() {
                action = Some(ContextAction::Select(s.at));
            }
        }
    });
    action
}
