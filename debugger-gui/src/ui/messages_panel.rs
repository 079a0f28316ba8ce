//! The Messages tab: every message of the log in time order, filtered by level and text;
//! clicking one jumps the timeline to it and selects the frame it was written in.

use std::time::Duration;
use web_time::Instant;

use egui::{RichText, Sense, TextEdit, Ui};
use egui_extras::{Column, TableBuilder};
use formats::Level;

use crate::model::Model;
use crate::model::messages::MessageFilter;
use crate::timefmt;
use crate::ui::message_markers::level_color;
use crate::ui::present;

/// What the cached rows were computed for: model generation, filter, when, and the cost.
type Computed = (u64, MessageFilter, Instant, Duration);

/// The Messages tab's filter, cached rows and selection.
#[derive(Default)]
pub struct MessagesPanel {
    /// Levels and text shown.
    pub filter: MessageFilter,
    /// The message clicked last (its index in the model).
    pub selected: Option<u32>,
    rows: Vec<u32>,
    computed: Option<Computed>,
}

impl MessagesPanel {
    /// The messages shown (indices, in time order), recomputed when the filter changes or,
    /// at most twice a second, when the model grows.
    pub fn rows(&mut self, model: &Model, ctx: &egui::Context) -> &[u32] {
        let stale = match &self.computed {
            None => true,
            Some((g, f, at, cost)) => {
                let grown = *g != model.generation();
                let due = super::refresh_due(ctx, at.elapsed(), *cost);
                if grown && !due {
                    super::repaint_when_due(ctx, at.elapsed(), *cost);
                }
                *f != self.filter || (grown && due)
            }
        };
        if stale {
            let t = Instant::now();
            self.rows = model.messages().filter(&self.filter);
            self.computed = Some((
                model.generation(),
                self.filter.clone(),
                Instant::now(),
                t.elapsed(),
            ));
        }
        &self.rows
    }
}

/// The levels with a toggle, most severe first.
const LEVELS: [Level; 5] = [
    Level::ERROR,
    Level::WARN,
    Level::INFO,
    Level::DEBUG,
    Level::TRACE,
];

/// Shows the tab; returns the message the user clicked (its index in the model).
pub fn show(ui: &mut Ui, panel: &mut MessagesPanel, model: &Model) -> Option<u32> {
    let mut picked = None;
    let counts = model.messages().level_counts();
    ui.horizontal(|ui| {
        for level in LEVELS {
            let bit = MessageFilter::bit(level);
            let mut on = panel.filter.levels & bit != 0;
            let n = counts.iter().find(|c| c.0 == level).map_or(0, |c| c.1);
            let text = RichText::new(format!("{} {n}", level.name())).color(level_color(level));
            if ui.toggle_value(&mut on, text).changed() {
                panel.filter.levels ^= bit;
            }
        }
        ui.add(
            TextEdit::singleline(&mut panel.filter.text)
                .hint_text("Filter messages")
                .desired_width(220.0),
        );
        let shown = panel.rows(model, ui.ctx()).len();
        ui.label(format!("{shown} of {} messages", model.messages().len()));
    });
    let rows = panel.rows(model, ui.ctx()).to_vec();
    let msgs = model.messages();
    let origin = model.time_range().map_or(0, |r| r.0);
    TableBuilder::new(ui)
        .id_salt("messages-table")
        .striped(true)
        .sense(Sense::click())
        .column(Column::initial(90.0).resizable(true))
        .column(Column::initial(50.0).resizable(true))
        .column(Column::initial(120.0).resizable(true).clip(true))
        .column(Column::initial(160.0).resizable(true).clip(true))
        .column(Column::remainder().at_least(120.0).clip(true))
        .header(20.0, |mut h| {
            for name in ["Time", "Level", "Thread", "Frame", "Message"] {
                h.col(|ui| {
                    ui.strong(name);
                });
            }
        })
        .body(|body| {
            body.rows(18.0, rows.len(), |mut row| {
                let i = rows[row.index()];
                let Some(e) = msgs.get(i) else { return };
                row.set_selected(panel.selected == Some(i));
                row.col(|ui| {
                    ui.label(timefmt::duration(e.time.saturating_sub(origin) as f64));
                });
                row.col(|ui| {
                    ui.colored_label(level_color(e.level), e.level.name());
                });
                row.col(|ui| {
                    if (e.lane as usize) < model.lanes().len() {
                        ui.label(present::thread_name(model, e.lane));
                    }
                });
                row.col(|ui| {
                    let frame = model.message_frame(e).and_then(|at| model.info(at));
                    match frame {
                        Some(f) => ui.label(f.label),
                        None => ui.weak(if e.frame == 0 { "none" } else { "not in log" }),
                    };
                });
                row.col(|ui| {
                    if ui
                        .selectable_label(panel.selected == Some(i), msgs.text(e))
                        .on_hover_text("Show it on the timeline, and its frame")
                        .clicked()
                    {
                        picked = Some(i);
                    }
                });
                if row.response().clicked() {
                    picked = Some(i);
                }
            });
        });
    if picked.is_some() {
        panel.selected = picked;
    }
    picked
}
