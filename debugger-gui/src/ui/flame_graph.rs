//! The Flame graph view (the aggregated flame graph): frames merged by call path, width = total time
//! (or busy time, bytes or allocations), for the whole log, the visible time range, or a set of contexts. Click a box to focus its subtree, click
//! one of the full-width rows above it (or Reset) to go back up.

use std::time::Duration;
use web_time::Instant;

use egui::{
    Color32, CornerRadius, FontId, Rect, RichText, Role, Sense, Stroke, StrokeKind, Ui, WidgetInfo,
    pos2, vec2,
};
use rustc_hash::FxHashSet;

use crate::model::Model;
use crate::model::calltree::{self, Aggregate, CallTree, FlameBox, ROOT, Sandwich, Scope, Weight};
use crate::model::compare::path_labels;
use crate::model::plots::format_value;
use crate::timefmt;
use crate::ui::text_color_on;

/// The smallest row height: deeper graphs than their pane fits at this height scroll.
const ROW_H: f32 = 18.0;

/// The height of `depth` rows filling `pane_h` (speedscope's icicle uses the pane), at least
/// [`ROW_H`] (a deeper graph scrolls).
fn row_height(pane_h: f32, depth: u32) -> f32 {
    (pane_h / depth.max(1) as f32).floor().max(ROW_H)
}
const MIN_LABEL_W: f32 = 28.0;
const MAX_A11Y_BOXES: usize = 400;

/// Which frames the flame graph merges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScopeChoice {
    /// The whole log.
    WholeLog,
    /// The timeline's visible time range.
    VisibleRange,
    /// The time range selected on the timeline's ruler.
    SelectedRange,
    /// The selected frame's context.
    SelectedContext,
    /// Every context whose root has the same label as the selected frame's context root.
    ContextsLikeSelected,
}

/// What the scope choice resolves to now (given by the app: the view range, the selection).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeInput {
    /// The timeline's visible range (ns since the epoch).
    pub range: Option<(u64, u64)>,
    /// The range selected on the ruler.
    pub selection: Option<(u64, u64)>,
    /// The selected frame's `(worker, context)` and its context root's label.
    pub context: Option<((u8, u32), Option<u32>)>,
}

/// The aggregated flame graph's state.
pub struct FlameGraphState {
    /// Which frames are merged.
    pub scope: ScopeChoice,
    /// The node shown full width.
    pub focus: u32,
    /// With a compared log: color boxes by how their share of the time changed.
    pub difference: bool,
    /// Showing the sandwich (callers and callees) of this label instead of the flame graph.
    pub sandwich: Option<u32>,
    /// What the widths measure: time, or (with allocation counts) bytes or allocations.
    pub weight: Weight,
    /// What the last paint drew: (node, label, rect), for tests.
    pub drawn: Vec<(u32, String, Rect)>,
    /// The pane the boxes were drawn in last (for tests: how much of it the rows cover).
    pub pane: Rect,
    /// The bounds of every box painted last (labeled or not).
    pub painted: Rect,
    /// Vertical scroll of a flame graph deeper than its pane, points.
    pub scroll_y: f32,
    cache: Option<Cache>,
}

struct Cache {
    scope: Scope,
    weight: Weight,
    generation: u64,
    built: Instant,
    cost: Duration,
    agg: Aggregate,
    kids: Vec<Vec<u32>>,
    /// Boxes for (focus, width in points).
    boxes: Option<(u32, u32, Vec<FlameBox>)>,
    /// Share changes against the compared log, and its generation then.
    diff: Option<(u64, Vec<f64>)>,
    /// The sandwich of a label.
    sandwich: Option<(u32, Sandwich)>,
}

impl Default for FlameGraphState {
    fn default() -> Self {
        Self {
            scope: ScopeChoice::WholeLog,
            focus: ROOT,
            difference: true,
            sandwich: None,
            weight: Weight::Time,
            drawn: Vec::new(),
            pane: Rect::NOTHING,
            painted: Rect::NOTHING,
            scroll_y: 0.0,
            cache: None,
        }
    }
}

impl FlameGraphState {
    /// The scope to aggregate, or why there is none.
    fn resolve(&self, model: &Model, input: &ScopeInput) -> Result<Scope, &'static str> {
        match self.scope {
            ScopeChoice::WholeLog => Ok(Scope::All),
            ScopeChoice::VisibleRange => input
                .range
                .map(|(a, b)| Scope::Range(a, b))
                .ok_or("No visible range yet"),
            ScopeChoice::SelectedRange => input
                .selection
                .map(|(a, b)| Scope::Range(a, b))
                .ok_or("Drag on the timeline's ruler (or shift+drag) to select a range"),
            ScopeChoice::SelectedContext => match input.context {
                Some((c, _)) => Ok(Scope::Contexts(FxHashSet::from_iter([c]))),
                None => Err("Select a frame to see its context's flame graph"),
            },
            ScopeChoice::ContextsLikeSelected => match input.context {
                Some((_, Some(label))) => Ok(Scope::Contexts(calltree::contexts_with_root_label(
                    model, label,
                ))),
                _ => Err("Select a frame to merge every context like its own"),
            },
        }
    }

    /// The aggregate for `scope`, rebuilt when the scope changed or the log grew (throttled).
    fn aggregate(&mut self, model: &Model, scope: Scope, ctx: &egui::Context) -> &mut Cache {
        let weight = self.weight;
        let stale = match &self.cache {
            None => true,
            Some(c) => {
                c.scope != scope
                    || c.weight != weight
                    || (c.generation != model.generation()
                        && super::refresh_due(ctx, c.built.elapsed(), c.cost))
            }
        };
        if stale {
            let t = Instant::now();
            let agg = Aggregate::build_weighted(model, &scope, weight);
            let kids = calltree::children_of(model.call_tree(), &agg);
            if self.cache.as_ref().is_some_and(|c| c.scope != scope) {
                self.focus = ROOT;
            }
            self.cache = Some(Cache {
                scope,
                weight,
                generation: model.generation(),
                built: Instant::now(),
                cost: t.elapsed(),
                agg,
                kids,
                boxes: None,
                diff: None,
                sandwich: None,
            });
        }
        self.cache.as_mut().expect("built above")
    }
}

/// A width in the flame graph's weight, as text ("1.2 ms", "3.0 MiB", "40000 allocations").
fn weight_text(weight: Weight, v: f64) -> String {
    match weight {
        Weight::Time | Weight::Busy => timefmt::duration(v),
        Weight::Bytes => format_value(v, formats::PlotUnit::BYTES),
        Weight::Allocs => format!("{} allocations", v.round() as u64),
    }
}

/// The weight's noun for "share of the …".
fn weight_noun(weight: Weight) -> &'static str {
    match weight {
        Weight::Time => "time",
        Weight::Busy => "busy time",
        Weight::Bytes => "bytes allocated",
        Weight::Allocs => "allocations",
    }
}

/// A warm color per label, as classic flame graphs use (stable across frames and runs).
fn label_color(label: u32) -> Color32 {
    let h = label.wrapping_mul(2_654_435_761);
    let r = 205 + (h % 50) as u8;
    let g = 90 + ((h >> 8) % 130) as u8;
    let b = 30 + ((h >> 16) % 50) as u8;
    Color32::from_rgb(r, g, b)
}

/// Differential flame graph colors: gray when a call path's share of the time is unchanged,
/// redder the more it grew, bluer the more it shrank (full color at 5 points).
fn diff_color(change: f64) -> Color32 {
    let k = (change.abs() / 0.05).min(1.0) as f32;
    let gray = Color32::from_rgb(190, 190, 190);
    let to = if change > 0.0 {
        Color32::from_rgb(225, 60, 50)
    } else {
        Color32::from_rgb(60, 120, 230)
    };
    let mix = |a: u8, b: u8| (f32::from(a) + (f32::from(b) - f32::from(a)) * k) as u8;
    Color32::from_rgb(
        mix(gray.r(), to.r()),
        mix(gray.g(), to.g()),
        mix(gray.b(), to.b()),
    )
}

/// Draws the aggregated flame graph; returns a label to search for when a box is
/// double-clicked (to find its frames in the timeline).
pub fn show(
    ui: &mut Ui,
    state: &mut FlameGraphState,
    model: &Model,
    input: &ScopeInput,
    base: Option<&Model>,
) -> Option<String> {
    let mut wanted = None;
    ui.horizontal(|ui| {
        ui.label("Merge:");
        for (choice, text) in [
            (ScopeChoice::WholeLog, "Whole log"),
            (ScopeChoice::VisibleRange, "Visible range"),
            (ScopeChoice::SelectedRange, "Selected range"),
            (ScopeChoice::SelectedContext, "Selected context"),
            (ScopeChoice::ContextsLikeSelected, "Contexts like selected"),
        ] {
            ui.selectable_value(&mut state.scope, choice, text);
        }
        ui.separator();
        let (busy, allocs) = (!model.polls().is_empty(), !model.allocs().is_empty());
        if busy || allocs || state.weight != Weight::Time {
            ui.label("Weight by:");
            ui.selectable_value(&mut state.weight, Weight::Time, "Time")
                .on_hover_text("Wall time: each frame's duration");
            if busy || state.weight == Weight::Busy {
                ui.selectable_value(&mut state.weight, Weight::Busy, "Busy time")
                    .on_hover_text(
                        "What ran on a CPU: an asynchronous frame's polls (its busy time), a \
                         synchronous frame's whole duration",
                    );
            }
            if allocs || matches!(state.weight, Weight::Bytes | Weight::Allocs) {
                for (w, text) in [
                    (Weight::Bytes, "Bytes allocated"),
                    (Weight::Allocs, "Allocations"),
                ] {
                    ui.selectable_value(&mut state.weight, w, text);
                }
            }
            ui.separator();
        }
        if base.is_some() && state.weight == Weight::Time {
            ui.checkbox(&mut state.difference, "Difference vs compared log")
                .on_hover_text(
                    "Red: a bigger share of the time than in the compared log; blue: smaller",
                );
        }
        if ui
            .add_enabled(state.focus != ROOT, egui::Button::new("Reset zoom"))
            .clicked()
        {
            state.focus = ROOT;
        }
        if state.sandwich.is_some() && ui.button("Back to the flame graph").clicked() {
            state.sandwich = None;
        }
    });
    let size = ui.available_size().max(vec2(50.0, 50.0));
    let (rect, response) = ui.allocate_exact_size(size, Sense::click());
    response.widget_info(|| WidgetInfo::labeled(Role::Canvas, true, "Aggregated flame graph"));
    let painter = ui.painter_at(rect);
    let visuals = ui.visuals().clone();
    painter.rect_filled(rect, CornerRadius::ZERO, visuals.extreme_bg_color);
    let mut drawn = std::mem::take(&mut state.drawn);
    drawn.clear();
    state.pane = rect;
    state.painted = Rect::NOTHING;
    let mut painted = Rect::NOTHING;
    // A label (not painted text) so screen readers and tests see it.
    let message = |ui: &mut Ui, text: &str| {
        ui.put(
            Rect::from_center_size(rect.center(), vec2(rect.width(), 24.0)),
            egui::Label::new(RichText::new(text).size(16.0).weak()),
        );
    };
    let scope = match state.resolve(model, input) {
        Ok(s) => s,
        Err(why) => {
            message(ui, why);
            state.drawn = drawn;
            return None;
        }
    };
    let tree = model.call_tree();
    let focus_in = state.focus;
    let mut scroll_y = state.scroll_y;
    let state_difference = state.difference;
    let state_sandwich = state.sandwich;
    let mut new_sandwich: Option<Option<u32>> = None;
    let cache = state.aggregate(model, scope, ui.ctx());
    let focus = if (focus_in as usize) < cache.agg.total_ns.len() {
        focus_in
    } else {
        ROOT
    };
    let weight = cache.weight;
    let wt = |v: f64| weight_text(weight, v);
    let scope_ns = cache.agg.total_ns[ROOT as usize];
    if scope_ns == 0 {
        message(
            ui,
            if matches!(weight, Weight::Time | Weight::Busy) {
                "No frames in this scope"
            } else {
                "No allocation counts in this scope"
            },
        );
        state.drawn = drawn;
        return None;
    }
    if weight != Weight::Time {
        ui.put(
            Rect::from_min_size(
                pos2(rect.left() + 6.0, rect.bottom() - 20.0),
                vec2(rect.width() - 12.0, 18.0),
            ),
            egui::Label::new(
                RichText::new(if weight == Weight::Busy {
                    format!(
                        "{} busy in this scope (asynchronous frames: their polls; the others: \
                         their duration)",
                        wt(scope_ns as f64)
                    )
                } else {
                    format!("{} in this scope", wt(scope_ns as f64))
                })
                .weak(),
            ),
        );
    }
    let w = rect.width();
    let min_frac = 1.0 / f64::from(w.max(1.0));
    let key = (focus, w as u32);
    if cache
        .boxes
        .as_ref()
        .is_none_or(|(f, pw, _)| (*f, *pw) != key)
    {
        let boxes = calltree::layout(tree, &cache.agg, focus, min_frac);
        cache.boxes = Some((key.0, key.1, boxes));
    }
    let diff_wanted = base.filter(|_| state_difference && weight == Weight::Time);
    if let Some(b) = diff_wanted
        && cache
            .diff
            .as_ref()
            .is_none_or(|(g, _)| *g != b.generation())
    {
        cache.diff = Some((
            b.generation(),
            crate::model::compare::share_changes(b, model, &cache.agg),
        ));
    }
    let diff = diff_wanted.and(cache.diff.as_ref().map(|(_, d)| d.as_slice()));
    let (_, _, boxes) = cache.boxes.as_ref().expect("laid out above");
    let hover = response.hover_pos();
    let mut new_focus = None;
    if let Some(label) = state_sandwich {
        // Speedscope's sandwich: callers above, callees below, the label at both roots.
        if cache.sandwich.as_ref().is_none_or(|(l, _)| *l != label) {
            cache.sandwich = Some((label, Sandwich::build(tree, &cache.agg, label)));
        }
        let (_, sw) = cache.sandwich.as_ref().expect("built above");
        let half = (rect.height() / 2.0).floor();
        let name = model.labels().name(label);
        let mut hovered = None;
        for (k, (title, (t, agg))) in [
            (format!("Callers of {name}"), &sw.callers),
            (format!("Callees of {name}"), &sw.callees),
        ]
        .into_iter()
        .enumerate()
        {
            let part = Rect::from_min_size(
                pos2(rect.left(), rect.top() + k as f32 * half),
                vec2(w, half),
            );
            painter.text(
                part.left_top() + vec2(4.0, 2.0),
                egui::Align2::LEFT_TOP,
                title,
                FontId::proportional(12.0),
                visuals.strong_text_color(),
            );
            let body = Rect::from_min_max(part.min + vec2(0.0, 18.0), part.max);
            let boxes = calltree::layout(t, agg, ROOT, min_frac);
            let depth = boxes.iter().map(|b| b.depth + 1).max().unwrap_or(1);
            let ctx = Boxes {
                rect: body,
                id: response.id.with(("sandwich", k)),
                tree: t,
                hover,
                row_h: row_height(body.height(), depth),
                scroll_y: 0.0,
            };
            if let Some(n) = ctx.draw(
                ui,
                &painter,
                model,
                &boxes,
                |n| label_color(t.label(n)),
                |_| false,
                &mut drawn,
                &mut painted,
            ) {
                hovered = Some((n, t, agg));
            }
        }
        if let Some((node, t, agg)) = hovered {
            let total = agg.total_ns[node as usize];
            let all = agg.total_ns[ROOT as usize].max(1);
            let path = path_labels(model, t, node);
            response.clone().on_hover_ui_at_pointer(|ui| {
                ui.strong(model.labels().name(t.label(node)));
                ui.label(format!(
                    "{} ({:.1} % of {name}'s {}), {} frames",
                    wt(total as f64),
                    total as f64 * 100.0 / all as f64,
                    weight_noun(weight),
                    agg.count[node as usize]
                ));
                ui.weak(path.join(" › "));
                ui.weak("Right-click: the sandwich of this label");
            });
            if response.secondary_clicked() {
                new_sandwich = Some(Some(t.label(node)));
            }
        }
        state.drawn = drawn;
        state.painted = painted;
        if let Some(sw) = new_sandwich {
            state.sandwich = sw;
        }
        return None;
    }
    // Rows fill the pane; a graph deeper than the pane fits at ROW_H scrolls with the wheel.
    let depth = boxes.iter().map(|b| b.depth + 1).max().unwrap_or(1);
    let row_h = row_height(rect.height(), depth);
    let content_h = row_h * depth as f32;
    if response.hovered() {
        scroll_y -= ui.input(|i| i.smooth_scroll_delta().y);
    }
    scroll_y = scroll_y.clamp(0.0, (content_h - rect.height()).max(0.0));
    let ctx = Boxes {
        rect,
        id: response.id,
        tree,
        hover,
        row_h,
        scroll_y,
    };
    let fill_of = |n: u32| match diff {
        Some(d) => diff_color(d.get(n as usize).copied().unwrap_or(0.0)),
        None => label_color(tree.label(n)),
    };
    // Rows above the focus (its callers) are drawn muted.
    let muted = |n: u32| tree.depth(n) <= tree.depth(focus) && n != focus;
    let hovered = ctx.draw(
        ui,
        &painter,
        model,
        boxes,
        fill_of,
        muted,
        &mut drawn,
        &mut painted,
    );
    if let Some(node) = hovered {
        let total = cache.agg.total_ns[node as usize];
        let count = cache.agg.count[node as usize];
        let self_ns = cache.agg.self_ns(node, &cache.kids[node as usize]);
        let path = path_labels(model, tree, node);
        response.clone().on_hover_ui_at_pointer(|ui| {
            ui.strong(model.labels().name(tree.label(node)));
            ui.label(format!(
                "total {} ({:.1} % of the scope), {} frame{}",
                wt(total as f64),
                total as f64 * 100.0 / scope_ns as f64,
                count,
                if count == 1 { "" } else { "s" }
            ));
            ui.label(format!(
                "self {}, mean {}",
                wt(self_ns as f64),
                wt(total as f64 / count.max(1) as f64)
            ));
            if let Some(d) = diff {
                let now = total as f64 / scope_ns as f64;
                let was = now - d.get(node as usize).copied().unwrap_or(0.0);
                ui.label(format!(
                    "share of the time: {:.1} % (compared log: {:.1} %)",
                    now * 100.0,
                    was * 100.0
                ));
            }
            ui.weak(path.join(" › "));
            ui.weak(
                "Click to focus · double-click to find its frames in the timeline · right-click: callers and callees (sandwich)",
            );
        });
        if response.secondary_clicked() {
            new_sandwich = Some(Some(tree.label(node)));
        } else if response.double_clicked() {
            wanted = Some(model.labels().name(tree.label(node)).to_owned());
        } else if response.clicked() {
            new_focus = Some(if node == focus {
                tree.parent(node)
            } else {
                node
            });
        }
    }
    state.drawn = drawn;
    state.painted = painted;
    state.scroll_y = scroll_y;
    if let Some(f) = new_focus {
        state.focus = f;
    }
    if let Some(sw) = new_sandwich {
        state.sandwich = sw;
    }
    wanted
}

/// Where and how one call tree's boxes are drawn.
struct Boxes<'a> {
    rect: Rect,
    id: egui::Id,
    tree: &'a CallTree,
    hover: Option<egui::Pos2>,
    /// Row height, points.
    row_h: f32,
    /// How far the rows are scrolled up, points.
    scroll_y: f32,
}

impl Boxes<'_> {
    /// Draws `boxes` (labeled when wide enough, announced to screen readers); returns the node
    /// under the pointer.
    #[allow(clippy::too_many_arguments)]
    fn draw(
        &self,
        ui: &Ui,
        painter: &egui::Painter,
        model: &Model,
        boxes: &[FlameBox],
        fill_of: impl Fn(u32) -> Color32,
        muted: impl Fn(u32) -> bool,
        drawn: &mut Vec<(u32, String, Rect)>,
        painted: &mut Rect,
    ) -> Option<u32> {
        let rect = self.rect;
        let w = rect.width();
        let visuals = ui.visuals();
        let font = FontId::proportional(12.0);
        let a11y_on = ui.ctx().accesskit_node_builder(self.id, |_| ()).is_some();
        let mut a11y = 0;
        let mut hovered = None;
        for b in boxes {
            let row_h = self.row_h;
            let y = rect.top() + b.depth as f32 * row_h - self.scroll_y;
            if y + row_h > rect.bottom() + 1.0 || y < rect.top() - 0.5 {
                continue;
            }
            let x0 = rect.left() + (b.x0 as f32) * w;
            let x1 = rect.left() + (b.x1 as f32) * w;
            let brect = Rect::from_min_max(pos2(x0, y), pos2(x1.max(x0 + 1.0), y + row_h - 1.0));
            let fill = fill_of(b.node);
            let fill = if muted(b.node) {
                fill.gamma_multiply(0.55)
            } else {
                fill
            };
            painter.rect_filled(brect, CornerRadius::same(2), fill);
            *painted = painted.union(brect);
            painter.rect_stroke(
                brect,
                CornerRadius::same(2),
                Stroke::new(0.5, visuals.extreme_bg_color),
                StrokeKind::Inside,
            );
            if self.hover.is_some_and(|p| brect.contains(p)) {
                hovered = Some(b.node);
            }
            if brect.width() < MIN_LABEL_W {
                continue;
            }
            let label = model.labels().name(self.tree.label(b.node));
            let max_w = ((brect.width() - 8.0) / 6.0).floor() * 6.0;
            if max_w >= 12.0 {
                let mut job = egui::text::LayoutJob::simple_singleline(
                    label.to_owned(),
                    font.clone(),
                    text_color_on(fill),
                );
                job.wrap = egui::text::TextWrapping::truncate_at_width(max_w);
                let galley = ui.fonts_mut(|f| f.layout_job(job));
                let gy = y + (row_h - 1.0 - galley.size().y) / 2.0;
                painter.galley(pos2(brect.left() + 4.0, gy), galley, Color32::WHITE);
            }
            if a11y_on && a11y < MAX_A11Y_BOXES {
                a11y += 1;
                let id = self.id.with(("aggregated-box", b.node));
                ui.ctx().accesskit_node_builder(id, |node| {
                    node.set_role(Role::Button);
                    node.set_label(label.to_owned());
                    node.set_bounds(egui::accesskit::Rect {
                        x0: brect.min.x as f64,
                        y0: brect.min.y as f64,
                        x1: brect.max.x as f64,
                        y1: brect.max.y as f64,
                    });
                    node.add_action(egui::accesskit::Action::Click);
                });
            }
            drawn.push((b.node, label.to_owned(), brect));
        }
        hovered
    }
}
