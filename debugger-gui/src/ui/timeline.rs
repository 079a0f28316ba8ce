//! The Timeline view: time on x with an adaptive ruler, one lane per worker + thread, rows by
//! depth. Zoom (ctrl/cmd + wheel, pinch, W/S, +/-) around the pointer, pan (drag, wheel,
//! A/D, arrow keys), zoom to fit (F, Home), double-click a frame to zoom to it. Boxes are
//! colored by category, labeled when wide enough; sub-pixel frames are merged per row by the
//! model's level-of-detail query, so drawing cost follows pixels, not frames. Slow polls
//! are marked on their thread's lane; asynchronous frames wide enough carry a strip with the
//! shares of their time spent busy, queued and waiting.

use egui::{
    Align2, Color32, CornerRadius, FontId, Key, Pos2, Rect, Response, Role, Sense, Stroke,
    StrokeKind, Ui, WidgetInfo, pos2, vec2,
};
use formats::Category;

use rustc_hash::FxHashSet;

use crate::model::lod::{LodBox, merged_look, merged_summary};
use crate::model::polls::SlowMark;
use crate::model::search::Matches;
use crate::model::{FrameRef, Model};
use crate::timefmt;
use crate::ui::overview::{self, Overview};
use crate::ui::{
    BUSY_SHADE, QUEUED_SHADE, SLOW_POLL_COLOR, WAITING_SHADE, category_color, frame_info,
    message_markers, text_color_on,
};

/// Height of the time ruler.
pub const RULER_H: f32 = 22.0;
/// Height of a lane's title bar.
pub const LANE_HEADER_H: f32 = 18.0;
/// Height of one row of frames.
pub const ROW_H: f32 = 18.0;
/// The edge drawn where a cut frame stops.
const CUT_COLOR: Color32 = Color32::from_rgb(220, 40, 40);
/// Boxes narrower than this get no label.
const MIN_LABEL_W: f32 = 28.0;
/// At most this many boxes get an accessibility node per frame.
const MAX_A11Y_BOXES: usize = 400;
/// Asynchronous frames narrower than this get no busy / queued / waiting strip.
const MIN_STRIP_W: f32 = 12.0;
/// Height of that strip, at the bottom of the frame's box.
const STRIP_H: f32 = 3.0;
/// Height of a slow poll's bar in its lane's title bar.
const SLOW_BAR_H: f32 = 5.0;

/// Where the flamegraph looks and what it follows.
#[derive(Clone, Debug)]
pub struct TimelineState {
    /// Time origin for the f64 view math (the first timestamp seen), ns since the Unix epoch.
    pub base: Option<u64>,
    /// View start, ns after `base`.
    pub start: f64,
    /// Visible time span, ns.
    pub width: f64,
    /// Vertical scroll offset of the lanes, points.
    pub scroll_y: f32,
    /// Keep the newest time in view: the last [`TimelineState::follow_window`] of the log.
    pub follow: bool,
    /// How much of the log's newest time Follow shows, ns (10 s by default; zooming with the
    /// keys while following changes it).
    pub follow_window: f64,
    /// The mouse wheel zooms (Tracy) instead of panning (ctrl/cmd + wheel then pans).
    pub wheel_zooms: bool,
    /// Keep the whole log in view (until the user zooms).
    pub fitted: bool,
    /// The frame under the pointer.
    pub hovered: Option<FrameRef>,
    /// What the last paint drew (for tests and the status bar).
    pub drawn: Drawn,
    /// The selected time range (ns since the epoch): drag on the ruler, or shift+drag.
    pub selection: Option<(u64, u64)>,
    /// Where the selecting drag began (ns since the epoch), while it lasts.
    selecting: Option<f64>,
    /// The overview strip's cached activity.
    overview: Overview,
    /// Lanes shown as their header only (click a header to collapse or expand it; shift+click:
    /// every lane of its process).
    pub collapsed: FxHashSet<u32>,
    pending_zoom_to: Option<(u64, u64)>,
}

/// How much of the newest time Follow shows by default, ns.
pub const DEFAULT_FOLLOW_WINDOW: f64 = 10e9;

/// Counts and labeled boxes from the last paint.
#[derive(Clone, Debug, Default)]
pub struct Drawn {
    /// Boxes drawn (merged runs count once).
    pub boxes: usize,
    /// Merged boxes among them.
    pub merged: usize,
    /// Frames the boxes stand for.
    pub frames: u64,
    /// Boxes wide enough to carry a label: (frame, label, highlighted by the search, dimmed).
    pub labeled: Vec<(FrameRef, String, bool, bool)>,
    /// Merged boxes as drawn: (rect, lane, row, the box), for their tooltip and clicks.
    pub merged_boxes: Vec<(Rect, u32, u32, LodBox)>,
    /// Links drawn from a parent to a child on another lane: (parent, child).
    pub links: Vec<(FrameRef, FrameRef)>,
    /// Message markers drawn: (rect, lane, marker).
    pub markers: Vec<(Rect, u32, crate::model::messages::Marker)>,
    /// Slow polls marked: (the bar in the lane's title bar, lane, the polls it stands for).
    pub slow_marks: Vec<(Rect, u32, SlowMark)>,
    /// Asynchronous frames drawn with their busy / queued / waiting strip.
    pub strips: usize,
}

/// Merged boxes remembered per paint (for hovering); beyond this, they are drawn only.
const MAX_MERGED_KEPT: usize = 8192;

impl Default for TimelineState {
    fn default() -> Self {
        Self {
            base: None,
            start: 0.0,
            width: 1e6,
            scroll_y: 0.0,
            follow: true,
            follow_window: DEFAULT_FOLLOW_WINDOW,
            wheel_zooms: false,
            fitted: false,
            hovered: None,
            drawn: Drawn::default(),
            selection: None,
            selecting: None,
            overview: Overview::default(),
            collapsed: FxHashSet::default(),
            pending_zoom_to: None,
        }
    }
}

impl TimelineState {
    /// Zooms to `[start, end]` (absolute ns) with a small margin, and stops following.
    pub fn zoom_to(&mut self, start: u64, end: u64) {
        self.pending_zoom_to = Some((start, end.max(start + 1)));
        self.follow = false;
        self.fitted = false;
    }

    /// Shows the whole log (and keeps showing it as it grows, until the user zooms).
    pub fn zoom_to_fit(&mut self) {
        self.fitted = true;
        self.scroll_y = 0.0;
    }

    /// Turns following on or off (on: the view shows the last [`TimelineState::follow_window`]).
    pub fn set_follow(&mut self, on: bool) {
        self.follow = on;
        if on {
            self.fitted = false;
            self.width = self.follow_window;
        }
    }

    /// The overview's view box as last drawn (zoomed far in: a marker a few points wide).
    pub fn overview_box(&self) -> Option<Rect> {
        self.overview.drawn_box
    }

    fn apply_zoom(&mut self, factor: f64, anchor_frac: f64) {
        let factor = factor.clamp(0.01, 100.0);
        let new_w = (self.width / factor).clamp(10.0, 1e15);
        let anchor_t = self.start + anchor_frac * self.width;
        self.start = anchor_t - anchor_frac * new_w;
        self.width = new_w;
        self.fitted = false;
    }
}

/// What happened in the flamegraph this frame.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TimelineOutput {
    /// A click selected this frame (or `Some(None)`: a click on empty space cleared it).
    pub clicked: Option<Option<FrameRef>>,
}

/// Lane layout: (lane index, y offset of its header from the content top, rows shown: 0 for
/// a collapsed lane), and the content's height.
pub fn layout(model: &Model, collapsed: &FxHashSet<u32>) -> (Vec<(u32, f32, usize)>, f32) {
    let mut y = 0.0;
    let mut out = Vec::new();
    for lane in model.lane_order() {
        let l = &model.lanes()[lane as usize];
        // Sized to its content: a lane with no frames (a thread that only named itself) is
        // not shown, and rows past the deepest frame are not drawn.
        let Some(deepest) = l.rows.iter().rposition(|r| !r.is_empty()) else {
            continue;
        };
        let rows = if collapsed.contains(&lane) {
            0
        } else {
            deepest + 1
        };
        out.push((lane, y, rows));
        y += LANE_HEADER_H + rows as f32 * ROW_H + 4.0;
    }
    (out, y)
}

/// One paint's geometry: where the timeline and its lanes are on screen, and which times
/// they show (`base` + `start` at the left edge, `width` ns across).
#[derive(Clone, Copy)]
struct Canvas {
    rect: Rect,
    /// Below the ruler: where the lanes are drawn.
    body: Rect,
    /// The y of the first lane's top (scrolled).
    top: f32,
    base: u64,
    start: f64,
    width: f64,
}

impl Canvas {
    /// Nanoseconds a pixel stands for.
    fn px_ns(&self) -> f64 {
        self.width / self.rect.width() as f64
    }

    /// The x of time `t`.
    fn x_of(&self, t: u64) -> f32 {
        self.rect.left()
            + ((t as f64 - self.base as f64 - self.start) / self.width * self.rect.width() as f64)
                as f32
    }

    /// The time at `x`.
    fn t_of(&self, x: f32) -> f64 {
        self.base as f64
            + self.start
            + (x - self.rect.left()) as f64 / self.rect.width() as f64 * self.width
    }
}

/// The lanes as laid out this paint: (lane, y from the content's top, rows shown).
type Lanes = [(u32, f32, usize)];

/// Draws the Timeline into all of `ui`'s available space and handles its input: the input
/// first (it moves the view), then the ruler, the lanes, the links and the selected range,
/// then what the pointer is over or clicked.
pub fn show(
    ui: &mut Ui,
    state: &mut TimelineState,
    model: &Model,
    matches: Option<&Matches>,
    selected: Option<FrameRef>,
) -> TimelineOutput {
    let mut out = TimelineOutput::default();
    // A zoom asked for since the last paint is applied before the overview draws the view.
    if let (Some((tmin, _)), Some((s, e))) = (model.time_range(), state.pending_zoom_to) {
        state.pending_zoom_to = None;
        let base = *state.base.get_or_insert(tmin);
        let d = (e - s) as f64;
        state.width = (d * 1.1).max(10.0);
        state.start = s as f64 - base as f64 - d * 0.05;
    }
    if let Some((tmin, tmax)) = model.time_range() {
        let base = state.base.unwrap_or(tmin) as f64;
        let view = (base + state.start, base + state.start + state.width);
        if let Some(t) = overview::show(ui, &mut state.overview, model, (tmin, tmax), view) {
            // Center the view there, keeping the zoom.
            state.start = t as f64 - base - state.width / 2.0;
            state.follow = false;
            state.fitted = false;
        }
    }
    let size = ui.available_size().max(vec2(50.0, 50.0));
    let (rect, response) = ui.allocate_exact_size(size, Sense::click_and_drag());
    response.widget_info(|| WidgetInfo::labeled(Role::Canvas, true, "Flamegraph"));
    let painter = ui.painter_at(rect);
    let visuals = ui.visuals().clone();
    painter.rect_filled(rect, CornerRadius::ZERO, visuals.extreme_bg_color);

    let Some((tmin, tmax)) = model.time_range() else {
        painter.text(
            rect.center(),
            Align2::CENTER_CENTER,
            "No frames yet",
            FontId::proportional(16.0),
            visuals.weak_text_color(),
        );
        state.drawn = Drawn::default();
        return out;
    };
    let base = *state.base.get_or_insert(tmin);
    let lo = tmin as f64 - base as f64;
    let hi = tmax as f64 - base as f64;

    let (lanes, content_h) = layout(model, &state.collapsed);
    let view_h = rect.height() - RULER_H;
    if let Some((s, e)) = state.pending_zoom_to.take() {
        let d = (e - s) as f64;
        state.width = (d * 1.1).max(10.0);
        state.start = s as f64 - base as f64 - d * 0.05;
    }
    let hover = response.hover_pos();
    apply_input(
        ui,
        state,
        &response,
        rect,
        base,
        (lo, hi),
        content_h - view_h,
    );
    let body = Rect::from_min_max(pos2(rect.left(), rect.top() + RULER_H), rect.max);
    let canvas = Canvas {
        rect,
        body,
        top: body.top() - state.scroll_y,
        base,
        start: state.start,
        width: state.width,
    };
    draw_ruler(&painter, &visuals, &canvas, lo);
    let lane_painter = painter.with_clip_rect(body);
    let mut drawn = draw_lanes(
        ui,
        &response,
        &lane_painter,
        model,
        &lanes,
        &canvas,
        matches,
        selected,
    );
    if let Some(sel) = selected {
        draw_links(&lane_painter, model, &lanes, &canvas, sel, &mut drawn);
    }
    state.drawn = drawn;
    if let Some(range) = state.selection {
        draw_selected_range(&painter, &visuals, &canvas, range);
    }
    out.clicked = pointer(
        ui,
        &response,
        state,
        model,
        &lanes,
        &canvas,
        &lane_painter,
        hover,
    );
    if content_h > view_h {
        draw_scrollbar(
            &painter,
            &visuals,
            &canvas,
            state.scroll_y,
            content_h,
            view_h,
        );
    }
    out
}

/// Zoom, pan, follow and range selection from this frame's input; then the view is kept
/// within the log (`lo..hi`, ns from `base`) and the lanes' scroll within `overflow` pixels.
fn apply_input(
    ui: &Ui,
    state: &mut TimelineState,
    response: &Response,
    rect: Rect,
    base: u64,
    (lo, hi): (f64, f64),
    overflow: f32,
) {
    let span = (hi - lo).max(1000.0);
    let w = rect.width() as f64;
    // Following: the last `follow_window` of the log, or all of a shorter log.
    let follow_width = |st: &TimelineState| st.follow_window.clamp(1e3, 1e15).min(span * 1.02);
    if state.follow && !state.fitted {
        state.width = follow_width(state);
    }
    let width_before = state.width;
    let hover = response.hover_pos();
    let typing = ui.ctx().text_edit_focused();
    let (zoom, scroll, keys) = ui.input(|i| {
        let key = |k: Key| !typing && i.key_down(k);
        let pressed = |k: Key| !typing && i.key_pressed(k);
        (
            i.zoom_delta() as f64,
            i.smooth_scroll_delta(),
            (
                key(Key::W) || key(Key::Plus) || key(Key::Equals),
                key(Key::S) || key(Key::Minus),
                key(Key::A) || key(Key::ArrowLeft),
                key(Key::D) || key(Key::ArrowRight),
                key(Key::ArrowUp),
                key(Key::ArrowDown),
                pressed(Key::F) || pressed(Key::Home),
                i.stable_dt.clamp(0.001, 0.1) as f64,
            ),
        )
    });
    // Zooming with the pointer over the timeline zooms around the pointer and pauses
    // following (as a drag does); without a pointer (keys, with focus) around the right edge.
    let pointer = hover.map(|p| ((p.x - rect.left()) as f64 / w).clamp(0.0, 1.0));
    let zoom_at = |state: &mut TimelineState, factor: f64| {
        if let Some(anchor) = pointer {
            state.follow = false;
            state.apply_zoom(factor, anchor);
        } else {
            state.apply_zoom(factor, 1.0);
        }
    };
    if response.contains_pointer() {
        if zoom != 1.0 {
            zoom_at(state, zoom);
        }
        // Tracy's wheel: up zooms in around the pointer (an option: by default it pans).
        let scroll = if state.wheel_zooms && scroll.y != 0.0 {
            zoom_at(state, f64::from((scroll.y * 0.004).exp()));
            vec2(scroll.x, 0.0)
        } else {
            scroll
        };
        if scroll.x != 0.0 {
            state.start -= scroll.x as f64 / w * state.width;
            state.fitted = false;
            if scroll.x > 0.0 {
                state.follow = false;
            }
        }
        if scroll.y != 0.0 {
            if overflow > 0.0 {
                state.scroll_y -= scroll.y;
            } else {
                state.start -= scroll.y as f64 / w * state.width;
                state.fitted = false;
                if scroll.y > 0.0 {
                    state.follow = false;
                }
            }
        }
    }
    let (k_in, k_out, k_left, k_right, k_up, k_down, k_fit, dt) = keys;
    if response.contains_pointer() || response.has_focus() {
        if k_in {
            zoom_at(state, 1.0 + 3.0 * dt);
        }
        if k_out {
            zoom_at(state, 1.0 / (1.0 + 3.0 * dt));
        }
        if k_left {
            state.start -= state.width * 1.0 * dt;
            state.follow = false;
            state.fitted = false;
        }
        if k_right {
            state.start += state.width * 1.0 * dt;
            state.fitted = false;
        }
        if k_up {
            state.scroll_y -= 600.0 * dt as f32;
        }
        if k_down {
            state.scroll_y += 600.0 * dt as f32;
        }
        if k_fit {
            state.zoom_to_fit();
        }
        if k_in || k_out || k_left || k_right || k_up || k_down {
            ui.ctx().request_repaint();
        }
    }
    // A drag that starts on the ruler (or with shift) selects a time range instead of panning.
    let t_at = |x: f32, st: &TimelineState| {
        base as f64 + st.start + f64::from(x - rect.left()) / w * st.width
    };
    if response.drag_started() {
        let (origin, shift) = ui.input(|i| (i.pointer.press_origin(), i.modifiers.shift));
        if let Some(p) = origin
            && (p.y < rect.top() + RULER_H || shift)
        {
            state.selecting = Some(t_at(p.x, state));
        }
    }
    if response.dragged()
        && let Some(a) = state.selecting
    {
        if let Some(p) = response.interact_pointer_pos() {
            let b = t_at(p.x, state);
            state.selection = Some((a.min(b).max(0.0) as u64, a.max(b).max(0.0) as u64));
        }
    } else if response.dragged() {
        let d = response.drag_delta();
        if d.x != 0.0 {
            state.start -= d.x as f64 / w * state.width;
            state.fitted = false;
            if d.x > 0.0 {
                state.follow = false;
            }
        }
        state.scroll_y -= d.y;
    }
    if state.fitted {
        state.width = span * 1.02;
        state.start = lo - span * 0.01;
    } else if state.follow {
        // A zoom with the keys while following sets the window.
        if state.width != width_before {
            state.follow_window = state.width.clamp(1e3, 1e15);
        }
        state.width = follow_width(state);
        state.start = hi + state.width * 0.01 - state.width;
    }
    state.width = state.width.clamp(10.0, 1e15);
    // Panning stops once half the view is past either end of the log.
    state.start = state
        .start
        .clamp(lo - state.width * 0.5, hi - state.width * 0.5);
    state.scroll_y = state.scroll_y.clamp(0.0, (overflow + 20.0).max(0.0));

    let px_ns = state.width / w;
    if response.drag_stopped() && state.selecting.take().is_some() {
        // A selection narrower than a few pixels was a click on the ruler: none.
        if let Some((a, b)) = state.selection
            && ((b - a) as f64) < px_ns * 3.0
        {
            state.selection = None;
        }
    }
    if !typing && ui.input(|i| i.key_pressed(Key::Escape)) {
        state.selection = None;
    }
}

/// The ruler: a tick every ~90 pixels with its time (from the log's start, `lo` ns after
/// `base`), and the grid lines under it.
fn draw_ruler(painter: &egui::Painter, visuals: &egui::Visuals, canvas: &Canvas, lo: f64) {
    let rect = canvas.rect;
    let w = rect.width() as f64;
    let px_ns = canvas.px_ns();
    let (start, width) = (canvas.start, canvas.width);
    let ruler = Rect::from_min_size(rect.min, vec2(rect.width(), RULER_H));
    painter.rect_filled(ruler, CornerRadius::ZERO, visuals.faint_bg_color);
    let step = timefmt::tick_step(px_ns * 90.0);
    let first_tick = ((start - lo) / step).floor() * step;
    let mut tick = first_tick;
    let grid = visuals
        .widgets
        .noninteractive
        .bg_stroke
        .color
        .gamma_multiply(0.5);
    while tick <= start - lo + width + step {
        let x = rect.left() + ((tick + lo - start) / width * w) as f32;
        if x >= rect.left() - 1.0 && x <= rect.right() + 1.0 {
            painter.line_segment(
                [pos2(x, rect.top() + RULER_H), pos2(x, rect.bottom())],
                Stroke::new(1.0, grid),
            );
            painter.line_segment(
                [
                    pos2(x, rect.top() + RULER_H - 6.0),
                    pos2(x, rect.top() + RULER_H),
                ],
                Stroke::new(1.0, visuals.text_color()),
            );
            // Right of its tick, or left of it where it would run past the edge.
            let galley = painter.layout_no_wrap(
                timefmt::tick_label(tick, step),
                FontId::proportional(11.0),
                visuals.text_color(),
            );
            let lx = if x + 3.0 + galley.size().x > rect.right() {
                x - 3.0 - galley.size().x
            } else {
                x + 3.0
            };
            painter.galley(pos2(lx, rect.top() + 3.0), galley, visuals.text_color());
        }
        tick += step;
    }
}

/// The lanes: a header each (title, message markers), then each row's boxes at this zoom
/// (merged below a pixel), coloured by category, dimmed outside a search, labelled where
/// wide enough; returns what was drawn (for hit tests and tests).
#[allow(clippy::too_many_arguments)]
fn draw_lanes(
    ui: &Ui,
    response: &Response,
    lane_painter: &egui::Painter,
    model: &Model,
    lanes: &Lanes,
    canvas: &Canvas,
    matches: Option<&Matches>,
    selected: Option<FrameRef>,
) -> Drawn {
    let (rect, body, top) = (canvas.rect, canvas.body, canvas.top);
    let visuals = ui.visuals();
    let px_ns = canvas.px_ns();
    let x_of = |t: u64| canvas.x_of(t);
    let t0 = canvas.t_of(rect.left()).max(0.0) as u64;
    let t1 = canvas.t_of(rect.right()).max(0.0).ceil() as u64 + 1;
    let mut drawn = Drawn::default();
    let mut boxes: Vec<LodBox> = Vec::with_capacity(1024);
    let mut marks: Vec<SlowMark> = Vec::new();
    let polls = model.polls();
    let label_font = FontId::proportional(12.0);
    let searching = matches.is_some();
    let header_bg = visuals.widgets.noninteractive.weak_bg_fill;
    let mut a11y = 0usize;
    let a11y_on = ui
        .ctx()
        .accesskit_node_builder(response.id, |_| ())
        .is_some();
    for &(lane, y0, nrows) in lanes {
        let ly = top + y0;
        let lane_bottom = ly + LANE_HEADER_H + nrows as f32 * ROW_H;
        if lane_bottom < body.top() || ly > body.bottom() {
            continue;
        }
        let header = Rect::from_min_size(pos2(rect.left(), ly), vec2(rect.width(), LANE_HEADER_H));
        lane_painter.rect_filled(header, CornerRadius::ZERO, header_bg);
        let folded = nrows == 0;
        let title = super::present::lane_title(model, lane);
        let title = if folded {
            let n = model.lanes()[lane as usize].frame_count();
            format!("⏵ {title} · {n} frames (click to expand)")
        } else {
            format!("⏷ {title}")
        };
        lane_painter.text(
            pos2(rect.left() + 6.0, ly + LANE_HEADER_H / 2.0),
            Align2::LEFT_CENTER,
            title,
            FontId::proportional(12.0),
            visuals.strong_text_color(),
        );
        if !model.messages().is_empty() {
            let range = (t0, t1);
            message_markers::draw(
                lane_painter,
                model,
                lane,
                header,
                range,
                px_ns,
                x_of,
                &mut drawn.markers,
            );
        }
        let first_mark = drawn.slow_marks.len();
        if !model.polls().slow_polls().is_empty() {
            model.polls().marks(lane, t0, t1, px_ns, &mut marks);
            for m in &marks {
                let x0 = x_of(m.start).max(rect.left() - 2.0);
                let x1 = x_of(m.end).min(rect.right() + 2.0).max(x0 + 2.0);
                let bar = Rect::from_min_max(
                    pos2(x0, header.bottom() - SLOW_BAR_H),
                    pos2(x1, header.bottom()),
                );
                lane_painter.rect_filled(bar, CornerRadius::ZERO, SLOW_POLL_COLOR);
                drawn.slow_marks.push((bar, lane, *m));
            }
        }
        let tree = model.call_tree();
        let all_rows = &model.lanes()[lane as usize].rows;
        let lane_rows = &all_rows[..nrows.min(all_rows.len())];
        for (r, row) in lane_rows.iter().enumerate() {
            let ry = ly + LANE_HEADER_H + r as f32 * ROW_H;
            if ry + ROW_H < body.top() || ry > body.bottom() {
                continue;
            }
            boxes.clear();
            model.lod_row(lane, r as u32, t0, t1, px_ns, &mut boxes);
            for b in &boxes {
                let i = b.first as usize;
                let x0 = x_of(b.start).max(rect.left() - 2.0);
                let x1 = x_of(b.end).min(rect.right() + 2.0).max(x0 + 1.0);
                let brect = Rect::from_min_max(pos2(x0, ry + 1.0), pos2(x1, ry + ROW_H - 1.0));
                // A merged box stands for many frames: the dominant category's colour, lighter
                // and thinner than a frame, labeled only if all its frames share a label.
                let (cat, label_id, brect) = if b.is_merged() {
                    let (dominant, same) = merged_look(row, tree, b);
                    (Category(dominant), same, brect.shrink2(vec2(0.0, 3.0)))
                } else {
                    (
                        Category(row.category[i]),
                        Some(tree.label(row.node(i))),
                        brect,
                    )
                };
                let mut fill = category_color(cat);
                let at = FrameRef {
                    lane,
                    row: r as u32,
                    index: b.first,
                };
                let mut hit = false;
                let mut dim = false;
                if b.is_merged() {
                    fill = fill.gamma_multiply(0.55);
                    if drawn.merged_boxes.len() < MAX_MERGED_KEPT {
                        drawn.merged_boxes.push((brect, lane, r as u32, *b));
                    }
                    if let Some(m) = matches {
                        let end = (i + b.count as usize).min(i + 512);
                        hit = row.nodes(i..end).any(|n| m.contains(tree.label(n)));
                        dim = !hit;
                    }
                } else if let Some(m) = matches {
                    hit = m.contains(tree.label(row.node(i)));
                    dim = !hit;
                }
                if dim {
                    fill = fill.gamma_multiply(0.22);
                }
                lane_painter.rect_filled(brect, CornerRadius::same(2), fill);
                if !b.is_merged() && (model.is_cut(at) || model.lost_in(at).is_some()) {
                    // Cut short (its process stopped, or its end was in damaged bytes): a red
                    // right edge where it stops.
                    let edge = Rect::from_min_max(
                        pos2((brect.right() - 3.0).max(brect.left()), brect.top()),
                        brect.max,
                    );
                    lane_painter.rect_filled(edge, CornerRadius::ZERO, CUT_COLOR);
                }
                if !b.is_merged()
                    && !polls.is_empty()
                    && brect.width() >= MIN_STRIP_W
                    && let Some(p) = polls.of(at)
                {
                    let d = b.end.saturating_sub(b.start);
                    draw_strip(lane_painter, brect, p.split(d), d, dim);
                    drawn.strips += 1;
                }
                drawn.boxes += 1;
                drawn.frames += b.count as u64;
                if b.is_merged() {
                    drawn.merged += 1;
                }
                let Some(label_id) = label_id else {
                    continue;
                };
                if hit && searching && !b.is_merged() {
                    lane_painter.rect_stroke(
                        brect,
                        CornerRadius::same(2),
                        Stroke::new(1.5, Color32::from_rgb(255, 255, 255)),
                        StrokeKind::Inside,
                    );
                }
                if selected == Some(at) {
                    lane_painter.rect_stroke(
                        brect.expand(1.0),
                        CornerRadius::same(3),
                        Stroke::new(2.0, visuals.selection.stroke.color),
                        StrokeKind::Outside,
                    );
                }
                let vis_w = brect.intersect(body).width();
                if vis_w >= MIN_LABEL_W {
                    let label = model.labels().name(label_id);
                    let text_x = brect.left().max(rect.left()) + 4.0;
                    let max_w = (brect.right().min(rect.right()) - text_x - 3.0).max(0.0);
                    // Quantize the width so the text layout cache is hit while zooming.
                    let max_w = (max_w / 6.0).floor() * 6.0;
                    if max_w >= 12.0 {
                        let mut job = egui::text::LayoutJob::simple_singleline(
                            label.to_owned(),
                            label_font.clone(),
                            text_color_on(fill),
                        );
                        job.wrap = egui::text::TextWrapping::truncate_at_width(max_w);
                        let galley = ui.fonts_mut(|f| f.layout_job(job));
                        let gy = ry + (ROW_H - galley.size().y) / 2.0;
                        lane_painter.galley(pos2(text_x, gy), galley, Color32::WHITE);
                    }
                    if a11y_on && a11y < MAX_A11Y_BOXES && body.intersects(brect) && !b.is_merged()
                    {
                        a11y += 1;
                        let vis = brect.intersect(body);
                        let id = response.id.with(("flame-box", lane, r, b.first));
                        ui.ctx().accesskit_node_builder(id, |node| {
                            node.set_role(Role::Button);
                            node.set_label(label.to_owned());
                            node.set_bounds(egui::accesskit::Rect {
                                x0: vis.min.x as f64,
                                y0: vis.min.y as f64,
                                x1: vis.max.x as f64,
                                y1: vis.max.y as f64,
                            });
                            if hit {
                                node.set_description("search match".to_owned());
                            } else if dim {
                                node.set_description("dimmed".to_owned());
                            }
                            if selected == Some(at) {
                                node.set_selected(true);
                            }
                            node.add_action(egui::accesskit::Action::Click);
                        });
                    }
                    if !b.is_merged() {
                        drawn.labeled.push((at, label.to_owned(), hit, dim));
                    }
                }
            }
        }
        // A slow poll held this thread: the lane's rows are washed over in its time, light
        // enough that the frames under it stay readable.
        if nrows > 0 {
            for (bar, ..) in &drawn.slow_marks[first_mark..] {
                let wash = Rect::from_min_max(
                    pos2(bar.left(), header.bottom()),
                    pos2(bar.right(), lane_bottom),
                );
                lane_painter.rect_filled(
                    wash,
                    CornerRadius::ZERO,
                    SLOW_POLL_COLOR.gamma_multiply(0.18),
                );
            }
        }
    }
    drawn
}

/// The strip at the bottom of an asynchronous frame's box `brect`: its busy, queued and
/// waiting shares of `duration` ns, left to right. The records hold each frame's totals,
/// not when each poll ran, so the strip shows proportions, not times.
fn draw_strip(
    painter: &egui::Painter,
    brect: Rect,
    b: formats::Breakdown,
    duration: u64,
    dim: bool,
) {
    let strip = Rect::from_min_max(pos2(brect.left(), brect.bottom() - STRIP_H), brect.max);
    let w = strip.width();
    let total = duration.max(1) as f32;
    let mut x = strip.left();
    for (ns, shade) in [
        (b.busy_ns, BUSY_SHADE),
        (b.queued_ns, QUEUED_SHADE),
        (b.waiting_ns, WAITING_SHADE),
    ] {
        let part = ns as f32 / total * w;
        if part <= 0.0 {
            continue;
        }
        let r = Rect::from_min_max(pos2(x, strip.top()), pos2(x + part, strip.bottom()));
        let shade = if dim {
            shade.gamma_multiply(0.3)
        } else {
            shade
        };
        painter.rect_filled(r, CornerRadius::ZERO, shade);
        x += part;
    }
}

/// Links from the selected frame to its parent and children on other lanes.
fn draw_links(
    lane_painter: &egui::Painter,
    model: &Model,
    lanes: &Lanes,
    canvas: &Canvas,
    sel: FrameRef,
    drawn: &mut Drawn,
) {
    let top = canvas.top;
    let y_of = |at: FrameRef| -> Option<f32> {
        let &(_, y0, nrows) = lanes.iter().find(|l| l.0 == at.lane)?;
        Some(if nrows == 0 {
            top + y0 + LANE_HEADER_H / 2.0
        } else {
            top + y0 + LANE_HEADER_H + (at.row as f32 + 0.5) * ROW_H
        })
    };
    for (parent, child) in model.links_of(sel, 64) {
        let (Some(py), Some(cy)) = (y_of(parent), y_of(child)) else {
            continue;
        };
        let x = canvas.x_of(model.row(child).start(child.index as usize));
        draw_link(lane_painter, pos2(x, py), pos2(x, cy));
        drawn.links.push((parent, child));
    }
}

/// The selected time range: shaded, its edges, its duration.
fn draw_selected_range(
    painter: &egui::Painter,
    visuals: &egui::Visuals,
    canvas: &Canvas,
    (a, b): (u64, u64),
) {
    let rect = canvas.rect;
    let x0 = canvas.x_of(a).max(rect.left());
    let x1 = canvas.x_of(b).min(rect.right());
    if x1 > x0 {
        let sel = Rect::from_min_max(pos2(x0, rect.top()), pos2(x1, rect.bottom()));
        let c = visuals.selection.bg_fill;
        painter.rect_filled(sel, CornerRadius::ZERO, c.gamma_multiply(0.18));
        for x in [x0, x1] {
            painter.line_segment(
                [pos2(x, rect.top()), pos2(x, rect.bottom())],
                Stroke::new(1.0, c),
            );
        }
        painter.text(
            pos2((x0 + x1) / 2.0, rect.top() + RULER_H + 2.0),
            Align2::CENTER_TOP,
            timefmt::duration((b - a) as f64),
            FontId::proportional(12.0),
            visuals.strong_text_color(),
        );
    }
}

/// What the pointer is over (a frame, a merged box, a message marker: tooltips and
/// outlines) and what it did: a click on a marker selects its frame, on a lane header folds
/// the lane, on a merged box zooms to it, on a frame selects it (`Some(None)`: on nothing);
/// a double-click zooms to the frame.
#[allow(clippy::too_many_arguments)]
fn pointer(
    ui: &Ui,
    response: &Response,
    state: &mut TimelineState,
    model: &Model,
    lanes: &Lanes,
    canvas: &Canvas,
    lane_painter: &egui::Painter,
    hover: Option<Pos2>,
) -> Option<Option<FrameRef>> {
    let (rect, body, top) = (canvas.rect, canvas.body, canvas.top);
    let visuals = ui.visuals();
    let px_ns = canvas.px_ns();
    let mut clicked = None;
    let pick = |p: Pos2| -> Option<FrameRef> {
        if !body.contains(p) {
            return None;
        }
        let y = p.y - top;
        let t = canvas.t_of(p.x).max(0.0) as u64;
        let tol = (px_ns * 3.0) as u64;
        for &(lane, y0, nrows) in lanes {
            let ry = y - y0 - LANE_HEADER_H;
            if ry >= 0.0 && ry < nrows as f32 * ROW_H {
                return model.hit(lane, (ry / ROW_H) as u32, t, tol);
            }
        }
        None
    };
    let merged_at = |p: Pos2| {
        state
            .drawn
            .merged_boxes
            .iter()
            .find(|(r, ..)| r.contains(p))
            .copied()
    };
    let hovered_merged = hover.filter(|p| body.contains(*p)).and_then(merged_at);
    let marker_at = |p: Pos2| message_markers::at(&state.drawn.markers, p);
    let hovered_marker = hover.filter(|p| body.contains(*p)).and_then(marker_at);
    let slow_at = |p: Pos2| {
        state
            .drawn
            .slow_marks
            .iter()
            .find(|(r, ..)| r.expand2(vec2(2.0, 2.0)).contains(p))
            .map(|&(_, lane, m)| (lane, m))
    };
    let hovered_slow = hover
        .filter(|p| body.contains(*p) && hovered_marker.is_none())
        .and_then(slow_at);
    state.hovered =
        if hovered_merged.is_some() || hovered_marker.is_some() || hovered_slow.is_some() {
            None
        } else {
            hover.and_then(pick)
        };
    let header_at = |p: Pos2| -> Option<u32> {
        if !body.contains(p) {
            return None;
        }
        let y = p.y - top;
        lanes
            .iter()
            .find(|&&(_, y0, _)| y >= y0 && y < y0 + LANE_HEADER_H)
            .map(|&(lane, ..)| lane)
    };
    // A click on a message marker selects the frame it was written in.
    let clicked_marker = if response.clicked() {
        response
            .interact_pointer_pos()
            .or(hover)
            .and_then(marker_at)
    } else {
        None
    };
    // A click on a slow poll's mark selects the frame whose code blocked.
    let clicked_slow = if response.clicked() && clicked_marker.is_none() {
        response.interact_pointer_pos().or(hover).and_then(slow_at)
    } else {
        None
    };
    let clicked_header = if response.clicked() && clicked_marker.is_none() && clicked_slow.is_none()
    {
        response
            .interact_pointer_pos()
            .or(hover)
            .and_then(header_at)
    } else {
        None
    };
    if let Some((_, m)) = clicked_marker {
        let frame = model
            .messages()
            .get(m.first)
            .and_then(|e| model.message_frame(e));
        if frame.is_some() {
            clicked = Some(frame);
        }
    } else if let Some((_, m)) = clicked_slow {
        let frame = model.polls().slow_polls()[m.worst as usize].frame;
        if frame.is_some() {
            clicked = Some(frame);
        }
    } else if let Some(lane) = clicked_header {
        let fold = !state.collapsed.contains(&lane);
        let shift = ui.input(|i| i.modifiers.shift);
        let worker = model.lanes()[lane as usize].worker;
        // Shift: every lane of the same process.
        let group: Vec<u32> = if shift {
            (0..model.lanes().len() as u32)
                .filter(|&l| model.lanes()[l as usize].worker == worker)
                .collect()
        } else {
            vec![lane]
        };
        for l in group {
            if fold {
                state.collapsed.insert(l);
            } else {
                state.collapsed.remove(&l);
            }
        }
        ui.ctx().request_repaint();
    } else if response.clicked() {
        let p = response.interact_pointer_pos().or(hover);
        match p.and_then(merged_at) {
            // A click on a merged box zooms to the frames it stands for.
            Some((_, _, _, b)) => {
                let pad = (b.end - b.start) / 10 + 1;
                state.zoom_to(b.start.saturating_sub(pad), b.end + pad);
                ui.ctx().request_repaint();
            }
            None => clicked = Some(p.and_then(pick)),
        }
    }
    if let Some((brect, lane, row, b)) = hovered_merged
        && !response.dragged()
    {
        lane_painter.rect_stroke(
            brect,
            CornerRadius::same(2),
            Stroke::new(1.0, visuals.strong_text_color()),
            StrokeKind::Inside,
        );
        merged_tooltip(response, model, lane, row, &b);
    }
    if let Some((lane, m)) = hovered_marker
        && !response.dragged()
    {
        message_markers::tooltip(response, model, lane, &m, px_ns);
    }
    if let Some((_, m)) = hovered_slow
        && !response.dragged()
    {
        slow_tooltip(response, model, &m);
    }
    if response.double_clicked()
        && let Some(at) = response.interact_pointer_pos().and_then(pick)
        && let Some(info) = model.info(at)
    {
        state.zoom_to(info.start, info.start + info.duration);
        ui.ctx().request_repaint();
    }
    if let Some(at) = state.hovered
        && !response.dragged()
    {
        tooltip(response, model, at);
        if let Some(info) = model.info(at) {
            let x0 = canvas.x_of(info.start).max(rect.left());
            let x1 = canvas
                .x_of(info.start + info.duration)
                .min(rect.right())
                .max(x0 + 1.0);
            if let Some(&(_, y0, _)) = lanes.iter().find(|l| l.0 == at.lane) {
                let ry = top + y0 + LANE_HEADER_H + at.row as f32 * ROW_H;
                lane_painter.rect_stroke(
                    Rect::from_min_max(pos2(x0, ry + 1.0), pos2(x1, ry + ROW_H - 1.0)),
                    CornerRadius::same(2),
                    Stroke::new(1.0, visuals.strong_text_color()),
                    StrokeKind::Inside,
                );
            }
        }
    }
    clicked
}

/// A scrollbar's thumb where the lanes overflow the view.
fn draw_scrollbar(
    painter: &egui::Painter,
    visuals: &egui::Visuals,
    canvas: &Canvas,
    scroll_y: f32,
    content_h: f32,
    view_h: f32,
) {
    let (rect, body) = (canvas.rect, canvas.body);
    let frac = view_h / content_h;
    let h = (body.height() * frac).max(20.0);
    let y = body.top() + (scroll_y / content_h) * body.height();
    painter.rect_filled(
        Rect::from_min_size(pos2(rect.right() - 6.0, y), vec2(4.0, h)),
        CornerRadius::same(2),
        visuals.widgets.inactive.bg_fill,
    );
}

/// Color of a link from a parent to its child on another lane.
pub const LINK_COLOR: Color32 = crate::ui::context_view::HOP_COLOR;

/// A link from a point of the parent (at the child's start) to the child's start: a curve
/// out to the left and back, a dot where it leaves, an arrowhead where it arrives.
fn draw_link(painter: &egui::Painter, from: Pos2, to: Pos2) {
    let stroke = Stroke::new(1.8, LINK_COLOR);
    let bulge = 14.0 + ((to.y - from.y).abs() * 0.15).min(40.0);
    let curve = egui::epaint::CubicBezierShape::from_points_stroke(
        [
            from,
            pos2(from.x - bulge, from.y),
            pos2(to.x - bulge * 1.5, to.y),
            pos2(to.x - 1.0, to.y),
        ],
        false,
        Color32::TRANSPARENT,
        stroke,
    );
    painter.add(curve);
    painter.circle_filled(from, 3.0, LINK_COLOR);
    painter.add(egui::Shape::convex_polygon(
        vec![
            to,
            pos2(to.x - 8.0, to.y - 4.5),
            pos2(to.x - 8.0, to.y + 4.5),
        ],
        LINK_COLOR,
        Stroke::NONE,
    ));
}

fn merged_tooltip(response: &Response, model: &Model, lane: u32, row: u32, b: &LodBox) {
    let Some(r) = model
        .lanes()
        .get(lane as usize)
        .and_then(|l| l.rows.get(row as usize))
    else {
        return;
    };
    let s = merged_summary(r, b, model.newest());
    let largest = model
        .labels()
        .name(model.call_tree().label(r.node(s.largest.0 as usize)))
        .to_owned();
    response.clone().on_hover_ui_at_pointer(|ui| {
        ui.strong(format!(
            "{} frames (merged: each narrower than a pixel)",
            s.frames
        ));
        let of = if s.scanned < s.frames {
            format!(" (first {} frames)", s.scanned)
        } else {
            String::new()
        };
        ui.label(format!(
            "total {}{of}",
            timefmt::duration(s.total_ns as f64)
        ));
        ui.label(format!(
            "largest: {largest}, {}",
            timefmt::duration(s.largest.1 as f64)
        ));
        ui.label(egui::RichText::new("Click to zoom in").weak());
    });
}

/// What a slow poll's mark says: "slow poll 7.10 ms in LABEL", its thread and time.
pub fn slow_poll_text(model: &Model, s: &crate::model::polls::SlowPollAt) -> String {
    let label = s.frame.map_or_else(
        || "a frame not in the log".to_owned(),
        |at| model.labels().name(model.label_of(at)).to_owned(),
    );
    format!(
        "slow poll {} in {label}",
        timefmt::duration(s.duration_ns as f64)
    )
}

fn slow_tooltip(response: &Response, model: &Model, m: &SlowMark) {
    let Some(s) = model.polls().slow_polls().get(m.worst as usize).copied() else {
        return;
    };
    let origin = model.time_range().map_or(0, |r| r.0);
    response.clone().on_hover_ui_at_pointer(|ui| {
        ui.strong(slow_poll_text(model, &s));
        ui.label(format!(
            "blocked {}, +{} to +{}",
            super::present::lane_title(model, s.lane),
            timefmt::duration(s.start.saturating_sub(origin) as f64),
            timefmt::duration(s.end().saturating_sub(origin) as f64)
        ));
        if m.count > 1 {
            ui.label(format!(
                "{} slow polls here (closer than a pixel), the longest named",
                m.count
            ));
        }
        ui.weak("Click to select the frame whose code blocked");
    });
}

fn tooltip(response: &Response, model: &Model, at: FrameRef) {
    let Some(info) = model.info(at) else { return };
    response.clone().on_hover_ui_at_pointer(|ui| {
        ui.strong(&info.label);
        egui::Grid::new("flame-tooltip")
            .num_columns(2)
            .show(ui, |ui| {
                ui.label("Category");
                ui.label(info.category.to_string());
                ui.end_row();
                frame_info::timing_rows(ui, model, &info);
                ui.label("Frame");
                ui.label(info.key.to_string());
                ui.end_row();
            });
    });
}
