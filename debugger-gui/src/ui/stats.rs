//! The statistics table: per label count, total, self time, mean, p99 and max; sortable;
//! clicking a label searches for it.

use std::time::Duration;
use web_time::Instant;

use egui::{Sense, Ui};
use egui_extras::{Column, TableBuilder};

use crate::model::Model;
use crate::model::plots::format_value;
use crate::timefmt;
use formats::PlotUnit;

/// Column the statistics are sorted by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StatSort {
    /// Label text.
    Label,
    /// Frame count.
    Count,
    /// Total time (default).
    #[default]
    Total,
    /// Self time.
    SelfTime,
    /// Mean duration.
    Mean,
    /// Median.
    P50,
    /// 99th percentile.
    P99,
    /// Longest.
    Max,
    /// Allocations per frame.
    Allocs,
    /// Bytes allocated per frame.
    Bytes,
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq)]
pub struct StatRow {
    /// Label text.
    pub label: String,
    /// Closed frames.
    pub count: u64,
    /// Total ns.
    pub total: u64,
    /// Self ns.
    pub self_ns: u64,
    /// Mean ns.
    pub mean: f64,
    /// Median ns.
    pub p50: u64,
    /// p99 ns.
    pub p99: u64,
    /// Max ns.
    pub max: u64,
    /// Allocations per frame (0 without allocation counts).
    pub allocs: f64,
    /// Bytes allocated per frame.
    pub bytes: f64,
}

/// What the cached rows were computed for: model generation, sort, ascending, range, when,
/// and what computing them cost.
type Computed = (u64, StatSort, bool, Option<(u64, u64)>, Instant, Duration);

/// Sort state and cached rows of the statistics panel.
#[derive(Default)]
pub struct StatsPanel {
    /// Sort column.
    pub sort: StatSort,
    /// Ascending instead of descending.
    pub ascending: bool,
    /// Limit the table to frames starting in this time range (ns since the epoch).
    pub range: Option<(u64, u64)>,
    rows: Vec<StatRow>,
    computed: Option<Computed>,
    /// The pointer is over the table: keep the rows still (no re-sort under it).
    frozen: bool,
}

impl StatsPanel {
    /// The rows, recomputed when sorting changes or (twice a second) when the model grows.
    pub fn rows(&mut self, model: &Model, ctx: &egui::Context) -> &[StatRow] {
        let stale = match self.computed {
            None => true,
            Some((g, s, a, r, at, cost)) => {
                let grown = g != model.generation() && !self.frozen;
                let due = (self.range.is_none() && model.labels().len() < 2_000)
                    || super::refresh_due(ctx, at.elapsed(), cost);
                if grown && !due {
                    super::repaint_when_due(ctx, at.elapsed(), cost);
                }
                s != self.sort || a != self.ascending || r != self.range || (grown && due)
            }
        };
        if stale {
            let t = Instant::now();
            let in_range = self.range.map(|(a, b)| model.stats_in(a, b));
            let stats = in_range.as_ref().unwrap_or(model.stats());
            let allocs_in = self.range.map(|(a, b)| model.allocs_in(a, b));
            let alloc = |id: u32| match &allocs_in {
                Some(m) => m.get(&id).copied().unwrap_or_default(),
                None => model.allocs().label(id),
            };
            let mut rows: Vec<StatRow> = stats
                .iter()
                .map(|(id, s)| {
                    let a = alloc(id).sum;
                    let n = s.count().max(1) as f64;
                    (id, s, a.allocs as f64 / n, a.alloc_bytes as f64 / n)
                })
                .map(|(id, s, allocs, bytes)| StatRow {
                    label: model.labels().name(id).to_owned(),
                    count: s.count(),
                    total: s.total_ns(),
                    self_ns: s.self_time_ns(),
                    mean: s.mean_ns(),
                    p50: s.quantile_ns(0.5),
                    p99: s.p99_ns(),
                    max: s.max_ns(),
                    allocs,
                    bytes,
                })
                .collect();
            match self.sort {
                StatSort::Label => rows.sort_by(|a, b| a.label.cmp(&b.label)),
                StatSort::Count => rows.sort_by_key(|r| std::cmp::Reverse(r.count)),
                StatSort::Total => rows.sort_by_key(|r| std::cmp::Reverse(r.total)),
                StatSort::SelfTime => rows.sort_by_key(|r| std::cmp::Reverse(r.self_ns)),
                StatSort::Mean => rows.sort_by(|a, b| b.mean.total_cmp(&a.mean)),
                StatSort::P50 => rows.sort_by_key(|r| std::cmp::Reverse(r.p50)),
                StatSort::P99 => rows.sort_by_key(|r| std::cmp::Reverse(r.p99)),
                StatSort::Max => rows.sort_by_key(|r| std::cmp::Reverse(r.max)),
                StatSort::Allocs => rows.sort_by(|a, b| b.allocs.total_cmp(&a.allocs)),
                StatSort::Bytes => rows.sort_by(|a, b| b.bytes.total_cmp(&a.bytes)),
            }
            if self.ascending {
                rows.reverse();
            }
            self.rows = rows;
            self.computed = Some((
                model.generation(),
                self.sort,
                self.ascending,
                self.range,
                Instant::now(),
                t.elapsed(),
            ));
        }
        &self.rows
    }
}

/// Shows the table; returns the label the user clicked (to search for it).
pub fn show(ui: &mut Ui, panel: &mut StatsPanel, model: &Model) -> Option<String> {
    let mut picked = None;
    // While the pointer is over the table, new frames do not re-sort it under the pointer.
    panel.frozen = ui.rect_contains_pointer(ui.max_rect());
    let rows = panel.rows(model, ui.ctx()).to_vec();
    let (mut sort, mut asc) = (panel.sort, panel.ascending);
    let mut header = |ui: &mut Ui, col: StatSort, name: &str| {
        let arrow = if sort == col {
            if asc { " ⏶" } else { " ⏷" }
        } else {
            ""
        };
        if ui
            .button(format!("{name}{arrow}"))
            .on_hover_text(if matches!(col, StatSort::P50 | StatSort::P99) {
                format!(
                    "Sort by {name} (HDR histogram, {}: the method `framelog stats` uses)",
                    analysis::Durations::PRECISION
                )
            } else {
                format!("Sort by {}", name.to_lowercase())
            })
            .clicked()
        {
            if sort == col {
                asc = !asc;
            } else {
                sort = col;
                asc = col == StatSort::Label;
            }
        }
    };
    // Allocation columns only for logs recorded with a counting allocator.
    let allocs = !model.allocs().is_empty();
    TableBuilder::new(ui)
        .id_salt("stats-table")
        .striped(true)
        .sense(Sense::click())
        .column(
            Column::initial(240.0)
                .at_least(80.0)
                .clip(true)
                .resizable(true),
        )
        .columns(Column::initial(84.0).resizable(true), 6)
        .columns(
            Column::initial(84.0).resizable(true),
            if allocs { 2 } else { 0 },
        )
        .column(Column::remainder().at_least(60.0))
        .header(20.0, |mut h| {
            h.col(|ui| header(ui, StatSort::Label, "Label"));
            h.col(|ui| header(ui, StatSort::Count, "Count"));
            h.col(|ui| header(ui, StatSort::Total, "Total"));
            h.col(|ui| header(ui, StatSort::SelfTime, "Self"));
            h.col(|ui| header(ui, StatSort::Mean, "Mean"));
            h.col(|ui| header(ui, StatSort::P50, "p50"));
            h.col(|ui| header(ui, StatSort::P99, "p99"));
            h.col(|ui| header(ui, StatSort::Max, "Max"));
            if allocs {
                h.col(|ui| header(ui, StatSort::Allocs, "Allocs/frame"));
                h.col(|ui| header(ui, StatSort::Bytes, "Bytes/frame"));
            }
        })
        .body(|body| {
            body.rows(18.0, rows.len(), |mut row| {
                let r = &rows[row.index()];
                row.col(|ui| {
                    if ui
                        .selectable_label(false, &r.label)
                        .on_hover_text("Search for this label")
                        .clicked()
                    {
                        picked = Some(r.label.clone());
                    }
                });
                row.col(|ui| {
                    ui.label(r.count.to_string());
                });
                for v in [
                    r.total as f64,
                    r.self_ns as f64,
                    r.mean,
                    r.p50 as f64,
                    r.p99 as f64,
                    r.max as f64,
                ] {
                    row.col(|ui| {
                        ui.label(timefmt::duration(v));
                    });
                }
                if allocs {
                    row.col(|ui| {
                        ui.label(format_value(r.allocs, PlotUnit::COUNT));
                    });
                    row.col(|ui| {
                        ui.label(format_value(r.bytes, PlotUnit::BYTES));
                    });
                }
                if row.response().clicked() {
                    picked = Some(r.label.clone());
                }
            });
        });
    panel.sort = sort;
    panel.ascending = asc;
    picked
}
