//! The contexts list: one row per request/job (root frame) with label, start, duration and
//! frame count; sortable by any column, filterable by label and minimum duration. Selecting a
//! row zooms the flamegraph to it.

use std::time::Duration;
use web_time::Instant;

use egui::{DragValue, Sense, TextEdit, Ui};
use egui_extras::{Column, TableBuilder};

use crate::model::plots::format_value;

use crate::model::Model;
use crate::model::context_list::ContextList;
use crate::model::contexts::{ContextQuery, ContextRow, ContextSort};
use crate::timefmt;
use crate::ui::present;

/// Filter, sort and a cached result of the contexts list.
#[derive(Default)]
pub struct ContextsPanel {
    /// The current filter and sort.
    pub query: ContextQuery,
    /// Minimum duration filter in milliseconds (mirrors `query.min_duration_ns`).
    pub min_ms: f64,
    /// The selected context (index into the model's context entries).
    pub selected: Option<u32>,
    /// The user asked to see this context root's context as a tree (the context view).
    pub open_tree: Option<crate::model::FrameRef>,
    rows: ContextList,
    computed: Option<(u64, ContextQuery, Instant)>,
    cost: Duration,
    /// The list is behind the model and waits for the load to finish.
    waits_for_load: bool,
}

/// While a log loads, the list is remade only if making it took at most this long.
const LOADING_BUDGET: Duration = Duration::from_millis(50);

impl ContextsPanel {
    /// The rows shown, recomputed when the query changes, and when the model grows at most
    /// every ten times the last computation's cost (so big live logs stay smooth); a change
    /// left for later asks `ctx` for a frame when it is due (an idle window would otherwise
    /// show the list stale, e.g. after a big load's last frames).
    /// (Context entry indices; [`Model::context_row`] makes the row shown.)
    pub fn rows(&mut self, model: &Model, ctx: &egui::Context) -> &ContextList {
        let stale = match &self.computed {
            None => true,
            Some((generation, q, at)) => {
                let grown = *generation != model.generation();
                // A list that takes long to make (millions of contexts) waits for the load
                // to finish: made meanwhile, it would hold the model for that long each
                // time, freezing the window and stalling the load.
                let loading = super::loading(ctx);
                let deferred = loading && self.cost > LOADING_BUDGET;
                let wait = (self.cost * 10).saturating_sub(at.elapsed());
                let due = wait.is_zero() && !deferred;
                // While loading, the ingest's own repaints (and the one at its end) come.
                if grown && !due && !loading {
                    ctx.request_repaint_after(wait);
                }
                self.waits_for_load = grown && deferred;
                *q != self.query || (grown && due)
            }
        };
        if stale {
            let t = Instant::now();
            self.rows = model.list_contexts(&self.query);
            self.cost = t.elapsed();
            self.computed = Some((model.generation(), self.query.clone(), Instant::now()));
        }
        &self.rows
    }
}

fn sort_header(ui: &mut Ui, q: &mut ContextQuery, col: ContextSort, name: &str) {
    let arrow = if q.sort == col {
        if q.descending { " ⏷" } else { " ⏶" }
    } else {
        ""
    };
    if ui
        .button(format!("{name}{arrow}"))
        .on_hover_text(format!("Sort by {}", name.to_lowercase()))
        .clicked()
    {
        if q.sort == col {
            q.descending = !q.descending;
        } else {
            q.sort = col;
            q.descending = matches!(col, ContextSort::Duration | ContextSort::Frames);
        }
    }
}

/// Shows the panel; returns the row the user selected this frame.
pub fn show(ui: &mut Ui, panel: &mut ContextsPanel, model: &Model) -> Option<ContextRow> {
    let mut picked = None;
    let mut open_tree = None;
    ui.horizontal(|ui| {
        ui.label("Filter:");
        ui.add(
            TextEdit::singleline(&mut panel.query.label)
                .hint_text("label contains…")
                .desired_width(180.0),
        )
        .accessible_name("Filter contexts");
        ui.label("slower than");
        ui.add(
            DragValue::new(&mut panel.min_ms)
                .range(0.0..=1e9)
                .speed(0.1)
                .suffix(" ms"),
        )
        .accessible_name("Minimum duration")
        .on_hover_text("Only contexts that took at least this long");
        panel.query.min_duration_ns = (panel.min_ms * 1e6) as u64;
        let root = panel
            .selected
            .and_then(|e| model.context_row(e))
            .map(|r| r.root);
        if ui
            .add_enabled(root.is_some(), egui::Button::new("Show as tree"))
            .on_hover_text("The selected context's frames as one tree, across threads (or double-click a context)")
            .clicked()
        {
            panel.open_tree = root;
        }
    });
    let base = model.time_range().map_or(0, |r| r.0);
    let mut query = panel.query.clone();
    let selected = panel.selected;
    panel.rows(model, ui.ctx());
    let rows = std::mem::take(&mut panel.rows);
    if panel.waits_for_load {
        ui.label(format!(
            "{} contexts so far (the list is completed when the log has loaded)",
            rows.len()
        ));
    } else {
        ui.label(format!("{} contexts", rows.len()));
    }
    let names = model.labels();
    // Allocation columns only for logs recorded with a counting allocator: the root frame's
    // counts, which include its children's.
    let allocs = !model.allocs().is_empty();
    TableBuilder::new(ui)
        .id_salt("contexts-table")
        .striped(true)
        .sense(Sense::click())
        .column(
            Column::initial(260.0)
                .at_least(80.0)
                .clip(true)
                .resizable(true),
        )
        .column(Column::initial(110.0).resizable(true))
        .column(Column::initial(100.0).resizable(true))
        .column(Column::initial(60.0).resizable(true))
        .columns(
            Column::initial(80.0).resizable(true),
            if allocs { 2 } else { 0 },
        )
        .column(Column::remainder().at_least(80.0).clip(true))
        .header(20.0, |mut h| {
            h.col(|ui| sort_header(ui, &mut query, ContextSort::Label, "Label"));
            h.col(|ui| sort_header(ui, &mut query, ContextSort::Start, "Start"));
            h.col(|ui| sort_header(ui, &mut query, ContextSort::Duration, "Duration"));
            h.col(|ui| sort_header(ui, &mut query, ContextSort::Frames, "Frames"));
            if allocs {
                h.col(|ui| {
                    ui.strong("Allocs")
                        .on_hover_text("Allocations of its root frame (and all it called)");
                });
                h.col(|ui| {
                    ui.strong("Bytes")
                        .on_hover_text("Bytes its root frame (and all it called) allocated");
                });
            }
            h.col(|ui| {
                ui.strong("Process · thread");
            });
        })
        .body(|body| {
            let mut cursor = rows.cursor(model);
            body.rows(18.0, rows.len(), |mut row| {
                let Some(r) = cursor.get(row.index()).and_then(|e| model.context_row(e)) else {
                    return;
                };
                row.set_selected(selected == Some(r.entry));
                row.col(|ui| {
                    if ui
                        .selectable_label(selected == Some(r.entry), names.name(r.label))
                        .clicked()
                    {
                        picked = Some(r);
                    }
                });
                row.col(|ui| {
                    ui.label(format!("+{}", timefmt::duration((r.start - base) as f64)));
                });
                row.col(|ui| {
                    let d = timefmt::duration(r.duration as f64);
                    ui.label(if r.open { format!("{d} (running)") } else { d });
                });
                row.col(|ui| {
                    ui.label(r.frames.to_string());
                });
                if allocs {
                    let c = model.allocs().of(r.root).copied().unwrap_or_default();
                    row.col(|ui| {
                        ui.label(c.allocs.to_string());
                    });
                    row.col(|ui| {
                        ui.label(format_value(c.alloc_bytes as f64, formats::PlotUnit::BYTES));
                    });
                }
                row.col(|ui| {
                    ui.label(present::lane_title(model, r.root.lane));
                });
                let resp = row.response();
                if resp.clicked() {
                    picked = Some(r);
                }
                if resp.double_clicked() {
                    picked = Some(r);
                    open_tree = Some(r.root);
                }
            });
        });
    panel.rows = rows;
    panel.query = query;
    if open_tree.is_some() {
        panel.open_tree = open_tree;
    }
    if let Some(r) = picked {
        panel.selected = Some(r.entry);
    }
    picked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_log::Log;
    use std::sync::{Arc, Mutex};

    /// A one-request log, and a context that records the delays of the frames asked of it.
    fn one_request() -> (Model, egui::Context, Arc<Mutex<Vec<Duration>>>) {
        let mut log = Log::default();
        log.start(0, 1, 100, 1, "request").end(0, 1, 200);
        let ctx = egui::Context::default();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let a = asked.clone();
        ctx.set_request_repaint_callback(move |info| a.lock().unwrap().push(info.delay));
        (log.model(), ctx, asked)
    }

    /// One frame of the panel.
    fn paint(ctx: &egui::Context, panel: &mut ContextsPanel, model: &Model) {
        let mut out = ctx.run_ui(egui::RawInput::default(), |ui| {
            show(ui, panel, model);
        });
        out.textures_delta.clear();
    }

    #[test]
    fn a_list_left_stale_by_the_refresh_limit_asks_for_a_frame_when_it_is_due() {
        let (mut model, ctx, asked) = one_request();
        let mut panel = ContextsPanel::default();
        let frame = |panel: &mut ContextsPanel, model: &Model| paint(&ctx, panel, model);
        frame(&mut panel, &model);
        assert_eq!(panel.rows.len(), 1);
        // As if the list took 40 ms to compute (a big log): refreshed at most every 400 ms.
        panel.cost = Duration::from_millis(40);
        // egui's own first frames ask for more frames: paint until it is idle.
        for _ in 0..10 {
            asked.lock().unwrap().clear();
            frame(&mut panel, &model);
            if asked.lock().unwrap().is_empty() {
                break;
            }
        }
        assert!(asked.lock().unwrap().is_empty(), "idle");
        // The load's last frames arrive just after the list was computed; then nothing
        // happens (no input, no more news).
        let mut more = Log::default();
        more.start(0, 2, 300, 2, "request").end(0, 2, 400);
        model.apply_bytes(&more.bytes);
        asked.lock().unwrap().clear();
        frame(&mut panel, &model);
        let delays = asked.lock().unwrap().clone();
        assert!(
            delays
                .iter()
                .any(|d| *d > Duration::ZERO && *d <= Duration::from_millis(500)),
            "a frame is asked for when the refresh is due: {delays:?}"
        );
        // That frame, once due, shows the whole log.
        std::thread::sleep(Duration::from_millis(550));
        frame(&mut panel, &model);
        assert_eq!(panel.rows.len(), 2);
    }

    #[test]
    fn a_costly_list_waits_for_the_load_to_finish_and_then_shows_everything() {
        let (mut model, ctx, asked) = one_request();
        let mut panel = ContextsPanel::default();
        let frame = |panel: &mut ContextsPanel, model: &Model| paint(&ctx, panel, model);
        crate::ui::set_loading(&ctx, true);
        frame(&mut panel, &model);
        assert_eq!(panel.rows.len(), 1);
        // As if the list took 60 ms to make (millions of contexts): while the log loads, it
        // is not made again, and asks for no frames of its own (the load paints).
        panel.cost = Duration::from_millis(60);
        let mut more = Log::default();
        more.start(0, 2, 300, 2, "request").end(0, 2, 400);
        model.apply_bytes(&more.bytes);
        asked.lock().unwrap().clear();
        frame(&mut panel, &model);
        assert!(
            asked.lock().unwrap().iter().all(|d| d.is_zero()),
            "no frames of its own: {:?}",
            asked.lock().unwrap()
        );
        // Even once a refresh would be due (ten times its cost later).
        std::thread::sleep(Duration::from_millis(700));
        frame(&mut panel, &model);
        assert_eq!(panel.rows.len(), 1, "not remade while loading");
        assert!(panel.waits_for_load, "and says so");
        // Loaded: the next frame shows the whole log.
        crate::ui::set_loading(&ctx, false);
        frame(&mut panel, &model);
        assert_eq!(panel.rows.len(), 2);
        assert!(!panel.waits_for_load);
    }
}
