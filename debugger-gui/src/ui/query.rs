//! The Query tab: SQL over the open log (`framelog sql`'s tables, `docs/SQL.md`), run off the
//! UI thread; a result row that names a frame selects it. Desktop only: the browser page has
//! no log directory (and links no SQLite).

use std::path::Path;

use egui::Ui;
use formats::FrameKey;

/// Queries from `docs/SQL.md`'s cookbook to start from: a title and the SQL.
pub const EXAMPLES: [(&str, &str); 9] = [
    (
        // SQLite takes the bare columns (id, category) from the row with the max.
        "The slowest frame of each label",
        "select id, name, category, max(dur) / 1e6 as ms, count(*) as frames\nfrom slice group by name order by ms desc limit 20;",
    ),
    (
        "The 20 slowest frames",
        "select id, name, category, dur / 1e6 as ms, depth\nfrom slice where dur is not null\norder by dur desc limit 20;",
    ),
    (
        "Per-label count, total and mean",
        "select name, count(dur) as n, sum(dur) as total, avg(dur) as mean\nfrom slice group by name order by total desc;",
    ),
    (
        "The slowest contexts (requests, jobs)",
        "select id, root_name, (last_ts - first_ts) / 1e6 as ms, frames\nfrom context order by ms desc limit 20;",
    ),
    (
        "The call path of the slowest database frame",
        "select id, name, depth, dur from ancestor_slice(\n  (select id from slice where category = 'database' order by dur desc limit 1))\norder by depth;",
    ),
    (
        "Busy time per thread",
        "select t.name as thread, count(*) as frames, sum(s.dur) as busy\nfrom slice s join thread t on t.id = s.thread_id\nwhere s.depth = 0 group by t.name order by busy desc;",
    ),
    (
        "Warnings inside frames longer than 10 ms",
        "select m.ts, m.text, s.name, s.dur / 1e6 as ms, m.slice_id\nfrom message m join slice s on s.id = m.slice_id\nwhere m.level in ('warn', 'error') and s.dur > 10000000 order by s.dur desc;",
    ),
    (
        "The worst slow polls",
        "select s.name, json_extract(m.fields, '$.slow_poll_ns') / 1e6 as ms, m.slice_id\nfrom message m join slice s on s.id = m.slice_id\nwhere m.text like 'slow poll:%' order by ms desc limit 10;",
    ),
    (
        "Mean and peak of every counter",
        "select ct.name, ct.unit, avg(c.value) as mean, max(c.value) as peak\nfrom counter c join counter_track ct on ct.id = c.track_id group by ct.id;",
    ),
];

/// The query a first-time user sees.
const FIRST_SQL: &str = EXAMPLES[0].1;

/// The Query tab's SQL, its runner and its last result.
pub struct QueryPanel {
    /// The SQL in the editor.
    pub sql: String,
    /// A note about the last click (a frame not on the timeline).
    pub note: Option<String>,
    /// The row clicked last.
    pub picked: Option<usize>,
    #[cfg(not(target_arch = "wasm32"))]
    runner: Option<crate::query::QueryRunner>,
    #[cfg(not(target_arch = "wasm32"))]
    last: Option<crate::query::Finished>,
    /// Results shown so far (a new result gets a new table: its columns' widths are its own).
    results: u64,
}

impl Default for QueryPanel {
    fn default() -> Self {
        Self {
            sql: FIRST_SQL.to_owned(),
            note: None,
            picked: None,
            #[cfg(not(target_arch = "wasm32"))]
            runner: None,
            #[cfg(not(target_arch = "wasm32"))]
            last: None,
            results: 0,
        }
    }
}

impl QueryPanel {
    /// Forgets the runner and the result (another log was opened); the SQL stays.
    pub fn reset(&mut self) {
        let sql = std::mem::take(&mut self.sql);
        *self = Self {
            sql,
            results: self.results + 1,
            ..Self::default()
        };
    }

    /// The last query's outcome, once one has finished.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn last(&self) -> Option<&crate::query::Finished> {
        self.last.as_ref()
    }

    /// Whether a query runs.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn running(&self) -> bool {
        self.runner
            .as_ref()
            .is_some_and(|r| r.running_for().is_some())
    }

    /// Takes a finished query's outcome (call every frame: a stop is repeated until it
    /// lands).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn poll(&mut self, ctx: &egui::Context) {
        let Some(r) = &mut self.runner else { return };
        if let Some(f) = r.poll() {
            self.last = Some(f);
            self.picked = None;
            self.results += 1;
        } else if r.stopping() {
            ctx.request_repaint_after(std::time::Duration::from_millis(50));
        }
    }

    /// Runs the editor's SQL on the log in `dir`.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn run(&mut self, dir: &Path, ctx: &egui::Context) {
        if self.runner.as_ref().is_none_or(|r| r.dir() != dir) {
            self.runner = Some(crate::query::QueryRunner::new(dir));
        }
        self.note = None;
        if let Some(r) = &mut self.runner {
            r.run(&self.sql, Some(ctx.clone()));
        }
    }

    /// Stops the running query.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn stop(&mut self) {
        if let Some(r) = &mut self.runner {
            r.stop();
        }
    }
}

/// Shows the tab in the browser: the view needs a desktop window.
#[cfg(target_arch = "wasm32")]
pub fn show(ui: &mut Ui, _panel: &mut QueryPanel, _dir: Option<&Path>) -> Option<FrameKey> {
    ui.label(
        "The Query view is desktop only: SQL over a log runs in the desktop window \
         (debugger-gui DIR) or with `framelog sql DIR`.",
    );
    None
}

/// Shows the tab for the log in `dir` (`None`: no log, or a served log, which has no
/// directory here); returns the frame of a result row the user clicked.
#[cfg(not(target_arch = "wasm32"))]
pub fn show(ui: &mut Ui, panel: &mut QueryPanel, dir: Option<&Path>) -> Option<FrameKey> {
    let Some(dir) = dir else {
        ui.label(
            "The Query view needs a log directory, and this window has none open (a served \
             log has no directory here). Run `framelog sql DIR` where the log is, or open a \
             log directory here.",
        );
        return None;
    };
    let ctx = ui.ctx().clone();
    let run_key = egui::KeyboardShortcut::new(egui::Modifiers::COMMAND, egui::Key::Enter);
    let mut run = ui.input_mut(|i| i.consume_shortcut(&run_key));
    let running = panel.running();
    let rect = ui.available_rect_before_wrap();
    let split = (rect.width() * 0.36).clamp(260.0, 520.0);
    let left = egui::Rect::from_min_max(rect.min, egui::pos2(rect.left() + split, rect.bottom()));
    let right = egui::Rect::from_min_max(egui::pos2(left.right() + 8.0, rect.top()), rect.max);
    ui.scope_builder(egui::UiBuilder::new().max_rect(left), |ui| {
        ui.horizontal(|ui| {
            let hint = format!("Run the SQL ({})", ctx.format_shortcut(&run_key));
            run |= ui
                .add_enabled(!running, egui::Button::new("Run"))
                .on_hover_text(hint)
                .clicked();
            if running && ui.button("Stop").clicked() {
                panel.stop();
            }
            ui.menu_button("Examples", |ui| {
                for (title, sql) in EXAMPLES {
                    if ui.button(title).on_hover_text(sql).clicked() {
                        panel.sql = sql.to_owned();
                        ui.close();
                    }
                }
            })
            .response
            .on_hover_text("Put an example query in the editor (it replaces the SQL there)");
        });
        egui::ScrollArea::vertical()
            .id_salt("query-sql")
            .show(ui, |ui| {
                // As tall as the tab: the panel's height is the user's to drag.
                let rows = (ui.available_height()
                    / ui.text_style_height(&egui::TextStyle::Monospace))
                .floor()
                .max(2.0) as usize;
                ui.add(
                    egui::TextEdit::multiline(&mut panel.sql)
                        .code_editor()
                        .desired_width(f32::INFINITY)
                        .desired_rows(rows.saturating_sub(1).max(2))
                        .hint_text("select name, count(*) from slice group by name"),
                )
                .accessible_name("SQL");
            });
    });
    if run && !running {
        panel.run(dir, &ctx);
    }
    let mut picked = None;
    ui.scope_builder(egui::UiBuilder::new().max_rect(right), |ui| {
        picked = results(ui, panel);
    });
    ui.allocate_rect(rect, egui::Sense::hover());
    picked
}

/// The result side: what ran and how long it took, SQLite's error, the grid.
#[cfg(not(target_arch = "wasm32"))]
fn results(ui: &mut Ui, panel: &mut QueryPanel) -> Option<FrameKey> {
    use crate::query::QueryError;
    use crate::timefmt::duration;
    use crate::ui::status_bar::{count, thousands};
    let error = egui::Color32::from_rgb(255, 110, 90);
    if let Some(t) = panel.runner.as_ref().and_then(|r| r.running_for()) {
        let stopping = panel.runner.as_ref().is_some_and(|r| r.stopping());
        // No spinner: it would ask for a frame after every frame for as long as the query
        // runs; the time is redrawn four times a second instead.
        let doing = if stopping {
            "Stopping…"
        } else {
            "Running…"
        };
        ui.label(format!("{doing} {}", duration(t.as_nanos() as f64)));
        ui.ctx()
            .request_repaint_after(std::time::Duration::from_millis(250));
        return None;
    }
    let Some(f) = &panel.last else {
        ui.weak(
            "Write SQL on the left and run it (Examples has a few to start from). Tables: \
             slice, thread, process, counter, counter_track, message, context, \
             ancestor_slice(id), descendant_slice(id). A row with a slice id (a column \
             named slice_id, parent_id, root_id or context_id, or id in a query on slice, \
             context or the tree functions) selects that frame.",
        );
        return None;
    };
    let took = duration(f.elapsed.as_nanos() as f64);
    for d in &f.damage {
        ui.colored_label(egui::Color32::from_rgb(255, 170, 60), format!("⚠ {d}"));
    }
    if let Some(n) = &panel.note {
        ui.colored_label(egui::Color32::from_rgb(255, 170, 60), n.as_str());
    }
    let r = match &f.result {
        Ok(r) => r,
        Err(QueryError::Sql(m) | QueryError::Open(m)) => {
            ui.colored_label(error, m.as_str());
            ui.weak(format!("Failed after {took}"));
            return None;
        }
        Err(QueryError::Stopped) => {
            ui.label(format!("Stopped after {took}"));
            return None;
        }
    };
    let n = r.rows.rows.len();
    let mut summary = if r.rows.cut() {
        format!(
            "the first {} of {} rows (the rest are not kept) in {took}",
            thousands(n as u64),
            thousands(r.rows.total)
        )
    } else {
        format!("{} in {took}", count(n as u64, "row", "rows"))
    };
    if r.statements > 1 {
        summary.push_str(&format!(
            ", from the last of {} statements that return rows",
            r.statements
        ));
    }
    if r.columns.is_empty() {
        summary = format!("Done in {took}: no statement returned rows");
    }
    ui.label(summary);
    if r.columns.is_empty() {
        return None;
    }
    grid(ui, panel)
}

/// The rows: numbers right-aligned, long values cut (whole on hover), NULL said; a click on
/// a row with a slice id returns its frame (on a slice id cell: that one's).
#[cfg(not(target_arch = "wasm32"))]
fn grid(ui: &mut Ui, panel: &mut QueryPanel) -> Option<FrameKey> {
    use egui::{Align, Label, Layout, RichText, Sense};
    use egui_extras::{Column, TableBuilder};
    let Some(Ok(r)) = panel.last.as_ref().map(|f| &f.result) else {
        return None;
    };
    let mut picked: Option<(usize, FrameKey)> = None;
    let avail = ui.available_width();
    egui::ScrollArea::horizontal()
        .id_salt(("query-grid-scroll", panel.results))
        .show(ui, |ui| {
            let mut table = TableBuilder::new(ui)
                .id_salt(("query-grid", panel.results))
                .striped(true)
                .sense(Sense::click())
                .cell_layout(Layout::left_to_right(Align::Center));
            // The columns share the width at first (a few fit without scrolling sideways;
            // many scroll), and the user resizes them.
            let n = r.columns.len();
            let width = (avail / n as f32 - 8.0).clamp(70.0, 260.0);
            for k in 0..n {
                let column = if k + 1 == n {
                    Column::remainder()
                } else {
                    Column::initial(width)
                };
                table = table.column(column.at_least(40.0).resizable(true).clip(true));
            }
            table
                .header(20.0, |mut h| {
                    for name in &r.columns {
                        h.col(|ui| {
                            ui.strong(name.as_str());
                        });
                    }
                })
                .body(|body| {
                    body.rows(18.0, r.rows.rows.len(), |mut row| {
                        let i = row.index();
                        let cells = &r.rows.rows[i];
                        let frame = r.row_frame(i);
                        row.set_selected(panel.picked == Some(i));
                        for (c, cell) in cells.iter().enumerate() {
                            let own = r.frame_columns[c].then(|| cell.frame()).flatten();
                            row.col(|ui| {
                                let (text, _) = cell.shown();
                                let text = match (cell, own) {
                                    (crate::query::Cell::Null, _) => RichText::new(text).weak(),
                                    (_, Some(_)) => {
                                        RichText::new(text).color(ui.visuals().hyperlink_color)
                                    }
                                    _ => RichText::new(text),
                                };
                                let sense = if frame.is_some() {
                                    Sense::click()
                                } else {
                                    Sense::hover()
                                };
                                let label = Label::new(text).selectable(false).sense(sense);
                                let mut resp = if cell.is_number() {
                                    ui.with_layout(Layout::right_to_left(Align::Center), |ui| {
                                        ui.add(label)
                                    })
                                    .inner
                                } else {
                                    ui.add(label)
                                };
                                // The whole value (a narrow column clips it too), built
                                // only while hovered.
                                resp = resp.on_hover_ui(|ui| {
                                    ui.label(cell.text());
                                    if own.is_some() {
                                        ui.weak("Click: select this frame on the timeline");
                                    }
                                });
                                if resp.clicked()
                                    && let Some(k) = own.or(frame)
                                {
                                    picked = Some((i, k));
                                }
                            });
                        }
                        if picked.is_none()
                            && row.response().clicked()
                            && let Some(k) = frame
                        {
                            picked = Some((i, k));
                        }
                    });
                });
        });
    let (i, key) = picked?;
    panel.picked = Some(i);
    Some(key)
}
