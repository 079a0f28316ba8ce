//! The panels around the central view: the problems banner, the selection bar, the bottom
//! tabs (contexts, statistics, histogram, messages, slow polls, query, compare, processes) and the Frame panel's
//! remembered width.

use super::*;

impl DebuggerApp {
    pub(super) fn problems_banner(&mut self, ui: &mut Ui, log: Option<&OpenLog>) {
        let mut problems = self.messages.clone();
        #[cfg(not(target_arch = "wasm32"))]
        problems.extend(self.demo.as_ref().and_then(Demo::error));
        if let Some(l) = log {
            let status = l.ingest.status();
            problems.extend(status.errors);
            if let Some(note) = status.waiting {
                // Not a problem: said plainly, without the warning colours.
                ui.label(RichText::new(note).weak());
            }
            if status.pruned_segments > 0 {
                ui.label(
                    RichText::new(format!(
                        "Retention deleted {} of this log's oldest segments before they were \
                         read: the log now starts later than it did.",
                        status.pruned_segments
                    ))
                    .weak(),
                );
            }
        }
        for p in problems.iter().rev().take(3) {
            egui::Frame::new()
                .fill(Color32::from_rgb(90, 30, 30))
                .inner_margin(6.0)
                .corner_radius(4.0)
                .show(ui, |ui| {
                    ui.label(RichText::new(format!("⚠ {p}")).color(Color32::WHITE));
                });
        }
    }

    pub(super) fn bottom_panel(&mut self, ui: &mut Ui, model: &Model, dir: Option<&Path>) {
        let limit = self.timeline.selection.filter(|_| self.limit_to_selection);
        self.stats.range = limit;
        self.contexts.query.range = limit;
        self.histogram.range = limit;
        ui.horizontal(|ui| {
            ui.selectable_value(&mut self.tab, BottomTab::Contexts, "Contexts");
            ui.selectable_value(&mut self.tab, BottomTab::Statistics, "Statistics");
            ui.selectable_value(&mut self.tab, BottomTab::Histogram, "Histogram");
            if !model.messages().is_empty() || self.tab == BottomTab::Messages {
                ui.selectable_value(&mut self.tab, BottomTab::Messages, "Messages");
            }
            if !model.polls().slow_polls().is_empty() || self.tab == BottomTab::SlowPolls {
                ui.selectable_value(&mut self.tab, BottomTab::SlowPolls, "Slow polls");
            }
            ui.selectable_value(&mut self.tab, BottomTab::Query, "Query");
            if self.compare.is_some() {
                ui.selectable_value(&mut self.tab, BottomTab::Compare, "Compare");
            }
            #[cfg(not(target_arch = "wasm32"))]
            if self.listener.is_some() {
                ui.selectable_value(&mut self.tab, BottomTab::Processes, "Processes");
            }
        });
        ui.separator();
        match self.tab {
            #[cfg(not(target_arch = "wasm32"))]
            BottomTab::Processes => match &mut self.listener {
                Some(l) => crate::ui::processes::show(ui, l, &mut self.process_message),
                None => self.tab = BottomTab::Contexts,
            },
            #[cfg(target_arch = "wasm32")]
            BottomTab::Processes => self.tab = BottomTab::Contexts,
            BottomTab::Contexts => {
                let picked = contexts::show(ui, &mut self.contexts, model);
                if let Some(root) = self.contexts.open_tree.take() {
                    self.open_context(root);
                }
                if let Some(row) = picked {
                    self.select(Some(row.root));
                    self.timeline
                        .zoom_to(row.start, row.start + row.duration.max(1));
                    if let Some(info) = model.info(row.root) {
                        self.reveal(model, info);
                        self.timeline
                            .zoom_to(row.start, row.start + row.duration.max(1));
                    }
                }
            }
            BottomTab::Statistics => {
                if let Some(label) = stats::show(ui, &mut self.stats, model) {
                    self.search.set_text(&Pattern::exact_text(&label));
                    self.histogram.label = model.labels().get(&label);
                }
            }
            BottomTab::Compare => match &self.compare {
                Some((dir, ingest)) => {
                    let name = dir.display().to_string();
                    let status = ingest.status();
                    if let Some(e) = status.errors.last() {
                        ui.colored_label(Color32::from_rgb(255, 120, 60), format!("⚠ {e}"));
                    }
                    let base = ingest.model();
                    compare_tab::show(ui, &mut self.compare_panel, &base, model, &name);
                }
                None => self.tab = BottomTab::Contexts,
            },
            BottomTab::Messages => {
                if let Some(i) = messages_panel::show(ui, &mut self.messages_panel, model) {
                    self.jump_to_message(model, i);
                }
            }
            BottomTab::SlowPolls => {
                if let Some(s) = slow_polls::show(ui, &mut self.slow_polls_panel, model) {
                    self.jump_to_slow_poll(model, &s);
                }
            }
            BottomTab::Query => {
                if let Some(key) = query_tab::show(ui, &mut self.query_panel, dir) {
                    self.jump_to_slice(model, key);
                }
            }
            BottomTab::Histogram => {
                if let Some(at) = histogram::show(ui, &mut self.histogram, model) {
                    self.select(Some(at));
                    if let Some(info) = model.info(at) {
                        self.reveal(model, info);
                    }
                }
            }
        }
    }

    /// The selected range: its span, and whether the panels are limited to it.
    pub(super) fn selection_bar(&mut self, ui: &mut Ui, model: &Model) {
        let Some((a, b)) = self.timeline.selection else {
            return;
        };
        ui.separator();
        let base = model.time_range().map_or(a, |r| r.0);
        ui.label(format!(
            "Selected +{} … +{} ({})",
            crate::timefmt::duration(a.saturating_sub(base) as f64),
            crate::timefmt::duration(b.saturating_sub(base) as f64),
            crate::timefmt::duration((b - a) as f64)
        ));
        ui.checkbox(
            &mut self.limit_to_selection,
            "Limit statistics and contexts to it",
        );
        if ui.button("Zoom to it").clicked() {
            self.timeline.zoom_to(a, b);
        }
        if ui
            .button("Clear")
            .on_hover_text("Clear the selection (Esc)")
            .clicked()
        {
            self.timeline.selection = None;
        }
    }

    /// Keeps the Frame panel's width the user gave it (once the drag is over) for the next
    /// start.
    pub(super) fn remember_panel_width(&mut self, ui: &Ui, width: f32) {
        // Only a width the user dragged to (kept as the drag ends), not one the window
        // imposed (a narrow window shrinks the panel for now).
        let drag_ended = ui.input(|i| i.pointer.any_released());
        if (width - self.panel_width).abs() < 1.0 || !drag_ended {
            return;
        }
        self.panel_width = width;
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(f) = &self.panel_file {
            let _ = std::fs::write(f, format!("{width:.0}\n"));
        }
    }
}
