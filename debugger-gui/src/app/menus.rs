//! The menu bar, the toolbar (Follow and its window, zoom, search, the wheel's mode and a
//! hint) and the category legend.

use super::*;

/// Where the legend's text height is kept for [`DebuggerApp::legend_text_height`].
pub(super) const LEGEND_TEXT_H: &str = "framelog-legend-text-height";

impl DebuggerApp {
    #[cfg_attr(target_arch = "wasm32", allow(unused_variables))]
    pub(super) fn menu_bar(&mut self, ui: &mut Ui, current: Option<&Path>) {
        egui::MenuBar::new().ui(ui, |ui| {
            ui.menu_button("File", |ui| {
                #[cfg(not(target_arch = "wasm32"))]
                {
                    if ui.button("Open log…").clicked() {
                        // `self.log` is taken out while the window is drawn: the caller passes it.
                        self.open_dialog =
                            Some(current.map(|d| d.display().to_string()).unwrap_or_default());
                        self.open_for_compare = false;
                        self.focus_path = true;
                        ui.close();
                    }
                }
                if ui
                    .button("Open remote…")
                    .on_hover_text(
                        "A log served by `framelog view --http` or `framelog serve --http`",
                    )
                    .clicked()
                {
                    self.remote_dialog = Some(RemoteDialog::default());
                    self.focus_path = true;
                    ui.close();
                }
                #[cfg(not(target_arch = "wasm32"))]
                self.desktop_file_menu(ui, current);
            });
            ui.menu_button("View", |ui| {
                ui.checkbox(&mut self.show_data, "Frame data panel");
                ui.checkbox(&mut self.show_bottom, "Contexts and statistics");
                ui.checkbox(&mut self.timeline.wheel_zooms, "Wheel zooms (like Tracy)");
                if ui.button("Zoom to fit").clicked() {
                    self.timeline.zoom_to_fit();
                    ui.close();
                }
            });
            ui.menu_button("Help", |ui| {
                ui.label(
                    "Zoom: ctrl/cmd + wheel (the wheel with View > Wheel zooms), pinch, W/S or +/-",
                );
                ui.label(
                    "Pan: drag, wheel (shift + wheel with Wheel zooms), A/D or the arrow keys",
                );
                ui.label("Follow: the last seconds of the log (set how many next to Follow)");
                ui.label("Zoom to fit: F or Home");
                ui.label("Double-click a frame: zoom to it");
                ui.label("Search: Enter = next, Shift+Enter = previous");
            });
        });
    }

    /// The File menu's desktop items: recent logs, the demo, comparing, exporting,
    /// listening and quitting.
    #[cfg(not(target_arch = "wasm32"))]
    pub(super) fn desktop_file_menu(&mut self, ui: &mut Ui, current: Option<&Path>) {
        let recent: Vec<LogSource> = self.recent.paths().to_vec();
        ui.add_enabled_ui(!recent.is_empty(), |ui| {
            ui.menu_button("Open recent", |ui| {
                for log in recent {
                    if ui.button(log.to_string()).clicked() {
                        self.open_source(log, "");
                        ui.close();
                    }
                }
            });
        });
        if ui.button("Open demo").clicked() {
            self.start_demo();
            ui.close();
        }
        if ui
            .button("Compare with log…")
            .on_hover_text("Read another log as a baseline: per-label changes, and the flame graph's difference")
            .clicked()
        {
            self.open_dialog = Some(String::new());
            self.open_for_compare = true;
            self.focus_path = true;
            ui.close();
        }
        if ui
            .add_enabled(current.is_some(), egui::Button::new("Export…"))
            .on_hover_text("Write the log for Perfetto UI or speedscope")
            .clicked()
            && let Some(dir) = current
        {
            let f = ExportFormat::Chrome;
            self.export_dialog = Some((f, f.default_path(dir).display().to_string()));
            ui.close();
        }
        if ui
            .button("Listen…")
            .on_hover_text("Record programs that connect with FRAMELOG_CONNECT")
            .clicked()
        {
            self.listen_dialog = Some("127.0.0.1:7878".to_owned());
            ui.close();
        }
        ui.separator();
        if ui.button("Quit").clicked() {
            self.quit(ui.ctx());
            ui.close();
        }
    }

    pub(super) fn toolbar(&mut self, ui: &mut Ui, model: &Model) {
        ui.horizontal(|ui| {
            let follow = self.timeline.follow;
            if ui
                .selectable_label(follow, "⟲ Follow")
                .on_hover_text("Keep the newest time in view (scrolling back pauses it)")
                .clicked()
            {
                self.toggle_follow();
            }
            let mut secs = self.timeline.follow_window / 1e9;
            if ui
                .add(
                    egui::DragValue::new(&mut secs)
                        .range(0.001..=3600.0)
                        .speed(0.1)
                        .max_decimals(3)
                        .prefix("last ")
                        .suffix(" s"),
                )
                .on_hover_text("How much of the newest time Follow shows")
                .changed()
            {
                self.timeline.follow_window = secs * 1e9;
            }
            if ui
                .button("⛶ Zoom to fit")
                .on_hover_text("Show the whole log (F)")
                .clicked()
            {
                self.timeline.zoom_to_fit();
            }
            ui.separator();
            if let Some(backward) = self.search.ui(ui)
                && let Some(m) = self.search.matches()
                && let Some(at) = model.next_match(m, self.search_from(), backward)
            {
                self.select(Some(at));
                if let Some(info) = model.info(at) {
                    self.reveal(model, info);
                }
            }
            ui.separator();
            ui.checkbox(&mut self.timeline.wheel_zooms, "Wheel zooms")
                .on_hover_text(
                    "Tracy's wheel: the wheel zooms around the pointer; shift + wheel pans",
                );
            ui.label(
                RichText::new(if self.timeline.wheel_zooms {
                    "wheel: zoom · drag: pan"
                } else {
                    "ctrl + wheel: zoom · wheel, drag: pan"
                })
                .weak(),
            );
        });
        ui.horizontal_wrapped(legend);
    }
}

/// The category colors, in body text (readable: not small, not weak) with a swatch as tall
/// as the text.
pub(super) fn legend(ui: &mut Ui) {
    let font = egui::TextStyle::Body.resolve(ui.style());
    let h = ui.fonts_mut(|f| f.row_height(&font));
    for c in Category::ALL {
        let (r, _) = ui.allocate_exact_size(egui::vec2(h, h), egui::Sense::hover());
        ui.painter()
            .rect_filled(r.shrink(1.0), 3.0, category_color(c));
        let text = RichText::new(c.to_string()).font(font.clone());
        let galley =
            ui.fonts_mut(|f| f.layout_no_wrap(c.to_string(), font.clone(), Color32::WHITE));
        ui.data_mut(|d| d.insert_temp(egui::Id::unique(LEGEND_TEXT_H), galley.size().y));
        ui.label(text);
    }
}
