//! The egui widgets, one view a file, named as the window names them: the Timeline (`timeline`), the Flame graph (`flame_graph`), frame-data tree, contexts list, statistics table, processes
//! (listening windows) and their quit dialog, slow polls, the SQL query tab, status bar.

pub mod compare;
pub mod context_view;
pub mod contexts;
pub mod data_panel;
pub mod data_tree;
pub mod flame_graph;
pub mod frame_info;
pub mod histogram;
pub mod message_markers;
pub mod messages_panel;
pub mod overview;
pub mod plot_tracks;
pub mod present;
#[cfg(not(target_arch = "wasm32"))]
pub mod processes;
pub mod query;
#[cfg(not(target_arch = "wasm32"))]
pub mod quit_dialog;
pub mod relatives;
pub mod search_bar;
pub mod slow_polls;
pub mod stats;
pub mod status_bar;
pub mod timeline;

use std::time::Duration;

use egui::Color32;
use formats::Category;

/// The color slow polls are marked and named in.
pub const SLOW_POLL_COLOR: Color32 = Color32::from_rgb(235, 80, 40);
/// The shades of an asynchronous frame's time: busy (ran on a thread), queued (ready, not
/// running) and waiting, as strips and bars of their shares.
pub const BUSY_SHADE: Color32 = Color32::from_rgb(30, 30, 30);
/// See [`BUSY_SHADE`].
pub const QUEUED_SHADE: Color32 = Color32::from_rgb(255, 200, 40);
/// See [`BUSY_SHADE`].
pub const WAITING_SHADE: Color32 = Color32::from_rgb(235, 235, 235);

/// The fill color of a category's boxes (unknown categories are gray).
pub fn category_color(c: Category) -> Color32 {
    match c {
        Category::HTTP => Color32::from_rgb(78, 121, 167),
        Category::RPC => Color32::from_rgb(118, 183, 178),
        Category::CLI => Color32::from_rgb(156, 117, 95),
        Category::JOB => Color32::from_rgb(242, 142, 43),
        Category::FUNCTION => Color32::from_rgb(89, 161, 79),
        Category::LOCK => Color32::from_rgb(225, 87, 89),
        Category::WORKFLOW => Color32::from_rgb(176, 122, 161),
        Category::EVENT => Color32::from_rgb(255, 157, 167),
        Category::DATABASE => Color32::from_rgb(237, 201, 72),
        Category::EMAIL => Color32::from_rgb(160, 203, 232),
        Category::TEMPLATE => Color32::from_rgb(134, 112, 214),
        _ => Color32::from_rgb(150, 150, 150),
    }
}

/// Black or white, whichever reads better on `bg`.
pub fn text_color_on(bg: Color32) -> Color32 {
    let l = 0.299 * bg.r() as f32 + 0.587 * bg.g() as f32 + 0.114 * bg.b() as f32;
    if l > 140.0 {
        Color32::from_rgb(20, 20, 20)
    } else {
        Color32::WHITE
    }
}

/// A category's display name ("database", or "category-42").
pub fn category_name(c: Category) -> String {
    c.to_string()
}

/// Whether a view of a growing log, computed `age` ago at a cost of `cost`, is due again: at
/// most twice a second, and never more than a tenth of the time (views that walk every frame
/// would otherwise hold the model lock most of the time on a 100 M-frame log and starve its
/// loading). While a log loads, at most once a second and a fortieth of the time: the load
/// waits for the model while a view holds it.
pub fn refresh_due(ctx: &egui::Context, age: Duration, cost: Duration) -> bool {
    age >= refresh_interval(loading(ctx), cost)
}

/// How long after its computation a view costing `cost` may be computed again.
fn refresh_interval(loading: bool, cost: Duration) -> Duration {
    if loading {
        Duration::from_secs(1).max(cost * 40)
    } else {
        Duration::from_millis(500).max(cost * 10)
    }
}

/// A view of a changed model was left stale by [`refresh_due`]: asks for a frame when it is
/// due, or an idle window (a load that just finished, a log that stopped growing) would show
/// it stale until the next input. Not while a log loads: its ingest repaints a few times a
/// second and once more when done, and each view asking for frames of its own would paint
/// the window several times as often, with the CPU the load needs.
pub fn repaint_when_due(ctx: &egui::Context, age: Duration, cost: Duration) {
    if !loading(ctx) {
        ctx.request_repaint_after(refresh_interval(false, cost).saturating_sub(age));
    }
}

fn loading_id() -> egui::Id {
    egui::Id::unique("framelog-loading")
}

/// Says whether the open log is still loading (its backlog not read yet), for this frame.
pub fn set_loading(ctx: &egui::Context, loading: bool) {
    ctx.data_mut(|d| d.insert_temp(loading_id(), loading));
}

/// Whether the open log is still loading (see [`set_loading`]).
pub fn loading(ctx: &egui::Context) -> bool {
    ctx.data(|d| d.get_temp(loading_id())).unwrap_or(false)
}
