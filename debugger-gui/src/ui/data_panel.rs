//! The frame-data panel: the selected frame's details, and its data, read on demand by the
//! data thread and shown as a tree.

use egui::{Color32, RichText, Ui};
use formats::FrameKey;

use crate::data_loader::{DataLoader, DataResult};
use crate::model::{FrameInfo, FrameRef, Model};
use crate::ui::{category_color, data_tree, frame_info, relatives};

/// What the frame-data panel knows about the selected frame's data.
#[derive(Clone, Debug, PartialEq)]
pub enum DataState {
    /// Nothing selected.
    Empty,
    /// Requested, not answered yet.
    Loading(FrameKey),
    /// Answered.
    Ready(FrameKey, DataResult),
}

/// The panel's state: which frame's data was asked for, and the answer.
pub struct DataPanel {
    state: DataState,
    relatives: relatives::Relatives,
}

impl Default for DataPanel {
    fn default() -> Self {
        Self {
            state: DataState::Empty,
            relatives: relatives::Relatives::default(),
        }
    }
}

/// What the user asked for in the panel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PanelAction {
    /// Zoom the timeline to this time range (ns since the epoch).
    Zoom(u64, u64),
    /// Select this frame (its parent or a child) and bring it into view.
    Select(FrameRef),
    /// Show the context of this frame as a tree.
    OpenContext(FrameRef),
}

impl DataPanel {
    /// What the panel knows about the selected frame's data.
    pub fn state(&self) -> &DataState {
        &self.state
    }

    /// Nothing selected any more.
    pub fn clear(&mut self) {
        self.state = DataState::Empty;
    }

    /// The selected frame is `key`: asks `loader` for its data unless already asked.
    pub fn want(&mut self, key: FrameKey, loader: &DataLoader) {
        let current = match &self.state {
            DataState::Loading(k) | DataState::Ready(k, _) => Some(*k),
            DataState::Empty => None,
        };
        if current != Some(key) {
            loader.request(key);
            self.state = DataState::Loading(key);
        }
    }

    /// An answer from the data thread (ignored unless it is for the frame still wanted).
    pub fn answer(&mut self, key: FrameKey, result: DataResult) {
        if matches!(self.state, DataState::Loading(k) if k == key) {
            self.state = DataState::Ready(key, result);
        }
    }

    /// Draws the panel for the selected frame `info`; returns what the user asked for.
    pub fn ui(
        &mut self,
        ui: &mut Ui,
        model: &Model,
        info: Option<&FrameInfo>,
    ) -> Option<PanelAction> {
        ui.heading("Frame");
        let Some(info) = info else {
            ui.label(RichText::new("Click a frame to see its details and data.").weak());
            return None;
        };
        let mut zoom = None;
        egui::Grid::new("frame-info")
            .num_columns(2)
            .striped(true)
            .max_col_width((ui.available_width() - 90.0).max(60.0))
            .show(ui, |ui| {
                ui.label("Label");
                ui.label(RichText::new(&info.label).strong());
                ui.end_row();
                ui.label("Category");
                ui.horizontal(|ui| {
                    let (r, _) =
                        ui.allocate_exact_size(egui::vec2(10.0, 10.0), egui::Sense::hover());
                    ui.painter()
                        .rect_filled(r, 2.0, category_color(info.category));
                    ui.label(info.category.to_string());
                });
                ui.end_row();
                frame_info::timing_rows(ui, model, info);
                ui.label("Frame key");
                ui.label(info.key.to_string());
                ui.end_row();
                if let Some(at) = relatives::rows(ui, &mut self.relatives, model, info.at) {
                    zoom = Some(PanelAction::Select(at));
                }
            });
        ui.horizontal(|ui| {
            if ui.button("🔍 Zoom to frame").clicked() {
                zoom = Some(PanelAction::Zoom(info.start, info.start + info.duration));
            }
            if ui
                .button("Context view")
                .on_hover_text("Its context's frames as one tree, across threads")
                .clicked()
            {
                zoom = Some(PanelAction::OpenContext(info.at));
            }
        });
        ui.separator();
        ui.heading("Data");
        match &self.state {
            DataState::Empty => {}
            DataState::Loading(_) => {
                ui.horizontal(|ui| {
                    ui.spinner();
                    ui.label("Loading…");
                });
            }
            DataState::Ready(_, DataResult::None) => {
                ui.label(RichText::new("This frame has no data.").weak());
            }
            DataState::Ready(_, DataResult::Error(e)) => {
                ui.colored_label(Color32::from_rgb(255, 120, 60), format!("⚠ {e}"));
            }
            DataState::Ready(key, DataResult::Found(doc)) => {
                let key = *key;
                if ui
                    .button("📋 Copy as JSON")
                    .on_hover_text("Copy the data as extended JSON")
                    .clicked()
                {
                    ui.ctx().copy_text(data_tree::to_json(doc));
                }
                egui::ScrollArea::vertical()
                    .id_salt("data-scroll")
                    .auto_shrink([false, true])
                    .show(ui, |ui| {
                        data_tree::show(ui, doc, (key.worker, key.id));
                    });
            }
        }
        zoom
    }
}
