//! The Slow polls tab: every poll that blocked its thread (at least the writer's slow-poll
//! threshold), the longest first; clicking one selects the frame whose code blocked and
//! brings it into view on the timeline.

use std::time::Duration;
use web_time::Instant;

use egui::{Sense, Ui};
use egui_extras::{Column, TableBuilder};

use crate::model::Model;
use crate::model::polls::SlowPollAt;
use crate::timefmt;
use crate::ui::{SLOW_POLL_COLOR, present};

/// The Slow polls tab's rows (cached) and the row clicked last.
#[derive(Default)]
pub struct SlowPollsPanel {
    /// The poll clicked last (its index in the list, longest first).
    pub selected: Option<usize>,
    rows: Vec<SlowPollAt>,
    /// Slow polls in the model when the rows were sorted (they are only ever added), when,
    /// and what sorting them cost.
    sorted: Option<(usize, Instant, Duration)>,
}

impl SlowPollsPanel {
    /// The slow polls, longest first, sorted again when more have been read (at most twice a
    /// second while a log grows, as the other lists are).
    pub fn rows(&mut self, model: &Model, ctx: &egui::Context) -> &[SlowPollAt] {
        let n = model.polls().slow_polls().len();
        let stale = match &self.sorted {
            None => true,
            Some((had, at, cost)) => {
                let grown = *had != n;
                let due = super::refresh_due(ctx, at.elapsed(), *cost);
                if grown && !due {
                    super::repaint_when_due(ctx, at.elapsed(), *cost);
                }
                grown && due
            }
        };
        if stale {
            let t = Instant::now();
            self.rows = model.polls().worst_slow_polls();
            self.sorted = Some((n, Instant::now(), t.elapsed()));
        }
        &self.rows
    }
}

/// "3 slow polls": what the status bar and the tab say.
pub fn count_text(n: u64) -> String {
    crate::ui::status_bar::count(n, "slow poll", "slow polls")
}

/// Shows the tab; returns the slow poll the user clicked.
pub fn show(ui: &mut Ui, panel: &mut SlowPollsPanel, model: &Model) -> Option<SlowPollAt> {
    let rows = panel.rows(model, ui.ctx()).to_vec();
    let mut picked = None;
    ui.horizontal(|ui| {
        ui.label(format!(
            "{}, the longest first: polls that held their thread, so that every task queued \
             behind them waited",
            count_text(rows.len() as u64)
        ));
    });
    let origin = model.time_range().map_or(0, |r| r.0);
    TableBuilder::new(ui)
        .id_salt("slow-polls-table")
        .striped(true)
        .sense(Sense::click())
        .column(Column::initial(90.0).resizable(true))
        .column(Column::initial(180.0).resizable(true).clip(true))
        .column(Column::initial(300.0).resizable(true).clip(true))
        .column(Column::remainder().at_least(90.0).clip(true))
        .header(20.0, |mut h| {
            for name in ["Duration", "Thread", "Blocked in", "Time"] {
                h.col(|ui| {
                    ui.strong(name);
                });
            }
        })
        .body(|body| {
            body.rows(18.0, rows.len(), |mut row| {
                let k = row.index();
                let s = rows[k];
                row.set_selected(panel.selected == Some(k));
                row.col(|ui| {
                    let text = timefmt::duration(s.duration_ns as f64);
                    if ui
                        .selectable_label(
                            panel.selected == Some(k),
                            egui::RichText::new(text).color(SLOW_POLL_COLOR),
                        )
                        .on_hover_text("Select the frame whose code blocked, on the timeline")
                        .clicked()
                    {
                        picked = Some(k);
                    }
                });
                row.col(|ui| {
                    if (s.lane as usize) < model.lanes().len() {
                        ui.label(present::thread_title(model, s.lane))
                            .on_hover_text(present::lane_title(model, s.lane));
                    }
                });
                row.col(|ui| {
                    match s.frame.and_then(|at| model.info(at)) {
                        Some(f) => ui.label(f.label),
                        None => ui.weak("not in the log"),
                    };
                });
                row.col(|ui| {
                    ui.label(format!(
                        "+{}",
                        timefmt::duration(s.start.saturating_sub(origin) as f64)
                    ));
                });
                if row.response().clicked() {
                    picked = Some(k);
                }
            });
        });
    if picked.is_some() {
        panel.selected = picked;
    }
    picked.map(|k| rows[k])
}
