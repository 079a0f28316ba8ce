//! The window's dialogs: File > Open log… (and its folder picker), Open remote…, Export…,
//! Listen…, and what to do with a temporary log on quitting.

use super::*;

/// File > Open remote…: the server's address, and its token when it asks for one.
#[derive(Clone, Debug, Default)]
pub(super) struct RemoteDialog {
    pub(super) url: String,
    pub(super) token: String,
    /// What the server said when it refused the window for want of a token.
    pub(super) token_needed: Option<String>,
}

impl DebuggerApp {
    #[cfg(not(target_arch = "wasm32"))]
    pub(super) fn open_dialog(&mut self, ctx: &egui::Context) {
        let Some(mut path) = self.open_dialog.take() else {
            return;
        };
        let mut open = true;
        let mut chosen = None;
        let mut cancel = false;
        let title = if self.open_for_compare {
            "Compare with log"
        } else {
            "Open log"
        };
        egui::Window::new(title)
            .collapsible(false)
            .resizable(false)
            .open(&mut open)
            .show(ctx, |ui| {
                ui.label("Log directory (holds frames-NNNNNN.framelog files):");
                let r = ui.add(TextEdit::singleline(&mut path).desired_width(420.0));
                let r = r.accessible_name("Log directory");
                if std::mem::take(&mut self.focus_path) {
                    r.request_focus();
                }
                let enter = r.lost_focus() && ui.input(|i| i.key_pressed(Key::Enter));
                ui.horizontal(|ui| {
                    if ui.button("Open").clicked() || enter {
                        chosen = Some(PathBuf::from(path.trim()));
                    }
                    let picking = self.folder_pick.is_some();
                    if ui
                        .add_enabled(!picking, egui::Button::new("Browse…"))
                        .on_hover_text("Choose the folder in your desktop's file dialog")
                        .clicked()
                    {
                        self.folder_pick = Some(pick_folder(title));
                    }
                    if picking {
                        ui.spinner();
                    }
                    if ui.button("Cancel").clicked() {
                        cancel = true;
                    }
                });
                if let Some(rx) = &self.folder_pick {
                    match rx.try_recv() {
                        Ok(Some(p)) => {
                            chosen = Some(p);
                            self.folder_pick = None;
                        }
                        // Cancelled, or no dialog on this desktop: the path box remains.
                        Ok(None) | Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                            self.folder_pick = None;
                        }
                        Err(std::sync::mpsc::TryRecvError::Empty) => {
                            ui.ctx().request_repaint_after(Duration::from_millis(100));
                        }
                    }
                }
                if self.recent.dirs().next().is_some() {
                    ui.separator();
                    ui.label("Recent logs:");
                    for p in self.recent.dirs() {
                        if ui.link(p.display().to_string()).clicked() {
                            chosen = Some(p.to_owned());
                        }
                    }
                }
                ui.label(
                    RichText::new("Tip: you can also drop a log folder on the window.").weak(),
                );
            });
        if let Some(p) = chosen {
            if self.open_for_compare {
                self.compare_with(p);
            } else {
                self.open_log(p);
            }
        } else if open && !cancel {
            self.open_dialog = Some(path);
        }
    }

    /// The running or last export: (output path, outcome so far: None while running).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn export_state(&self) -> Option<(&Path, Option<&str>)> {
        self.export
            .as_ref()
            .map(|j| (j.path.as_path(), self.export_note.as_deref()))
    }

    #[cfg(not(target_arch = "wasm32"))]
    pub(super) fn export_dialog(&mut self, ctx: &egui::Context, log: Option<&Path>) {
        if let Some(job) = &mut self.export
            && let Some(outcome) = job.poll()
        {
            self.export_note = Some(match outcome {
                Ok(s) => format!(
                    "Exported {} frames to {} ({} on async tracks)",
                    s.frames,
                    job.path.display(),
                    s.async_frames
                ),
                Err(e) => format!("Export failed: {e}"),
            });
            ctx.request_repaint();
        }
        if self.export.as_ref().is_some_and(ExportJob::running) {
            ctx.request_repaint_after(Duration::from_millis(100));
        }
        let Some((mut format, mut path)) = self.export_dialog.take() else {
            return;
        };
        let Some(dir) = log else {
            return;
        };
        let mut open = true;
        let (mut go, mut cancel) = (false, false);
        egui::Window::new("Export log")
            .collapsible(false)
            .resizable(false)
            .open(&mut open)
            .show(ctx, |ui| {
                ui.horizontal(|ui| {
                    for (f, name) in [
                        (
                            ExportFormat::Chrome,
                            "Chrome JSON (Perfetto, chrome://tracing)",
                        ),
                        (ExportFormat::Speedscope, "speedscope"),
                    ] {
                        if ui.selectable_label(format == f, name).clicked() && format != f {
                            format = f;
                            path = f.default_path(dir).display().to_string();
                        }
                    }
                });
                ui.add(TextEdit::singleline(&mut path).desired_width(420.0))
                    .accessible_name("Export file");
                ui.horizontal(|ui| {
                    go = ui.button("Export").clicked();
                    cancel = ui.button("Cancel").clicked();
                });
            });
        if go {
            self.export_note = None;
            self.export = Some(ExportJob::start(dir, Path::new(path.trim()), format));
        } else if open && !cancel {
            self.export_dialog = Some((format, path));
        }
    }

    pub(super) fn remote_dialog(&mut self, ctx: &egui::Context, log: Option<&OpenLog>) {
        // The server refused the open log for want of a token: ask for it (once per refusal).
        if let Some(l) = log
            && !l.token_asked.get()
            && let Some(said) = l.ingest.status().needs_token
        {
            l.token_asked.set(true);
            self.remote_dialog = Some(RemoteDialog {
                url: l.source.url().unwrap_or_default().to_owned(),
                token: String::new(),
                token_needed: Some(said),
            });
            self.focus_path = true;
        }
        let Some(mut d) = self.remote_dialog.take() else {
            return;
        };
        let mut open = true;
        let (mut go, mut cancel) = (false, false);
        egui::Window::new("Open remote log")
            .collapsible(false)
            .resizable(false)
            .open(&mut open)
            .show(ctx, |ui| {
                ui.label(
                    "Server address (the http://HOST:PORT/ a server prints, or ws://HOST:PORT/ws):",
                );
                let r = ui
                    .add(TextEdit::singleline(&mut d.url).desired_width(420.0))
                    .accessible_name("Server address");
                let focus = std::mem::take(&mut self.focus_path);
                if focus && d.token_needed.is_none() {
                    r.request_focus();
                }
                let mut enter = r.lost_focus() && ui.input(|i| i.key_pressed(Key::Enter));
                if let Some(said) = &d.token_needed {
                    ui.colored_label(
                        Color32::from_rgb(255, 120, 60),
                        format!("The server asks for a token: {said}"),
                    );
                    let r = ui
                        .add(
                            TextEdit::singleline(&mut d.token)
                                .password(true)
                                .desired_width(260.0),
                        )
                        .accessible_name("Token");
                    if focus {
                        r.request_focus();
                    }
                    enter |= r.lost_focus() && ui.input(|i| i.key_pressed(Key::Enter));
                }
                ui.horizontal(|ui| {
                    go = ui.button("Connect").clicked() || enter;
                    cancel = ui.button("Cancel").clicked();
                });
                #[cfg(not(target_arch = "wasm32"))]
                if d.token_needed.is_none() && self.recent.urls().next().is_some() {
                    ui.separator();
                    ui.label("Recent remote logs:");
                    for url in self.recent.urls() {
                        if ui.link(url).clicked() {
                            d.url = url.to_owned();
                            go = true;
                        }
                    }
                }
            });
        if go && !d.url.trim().is_empty() {
            self.open_remote(d.url.trim(), d.token.trim());
        } else if open && !cancel {
            self.remote_dialog = Some(d);
        }
    }

    /// File > Quit: asks first what to do with a temporary log that holds frames (see
    /// [`crate::temp_log`]); otherwise tells the window to close.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn quit(&mut self, ctx: &egui::Context) {
        if self.temp_log_to_ask().is_some() {
            self.quit_dialog.get_or_insert_default();
        } else {
            self.quitting = true;
            ctx.send_viewport_cmd(egui::ViewportCommand::Close);
        }
    }

    /// The window was told to close (it closes unless a question stops it).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn quit_requested(&self) -> bool {
        self.quitting
    }

    /// Whether the window asks what to do with its temporary log before quitting.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn asks_before_quitting(&self) -> bool {
        self.quit_dialog.is_some()
    }

    /// What became of the temporary log when quitting (where it is now), once decided.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn quit_note(&self) -> Option<&str> {
        self.quit_note.as_deref()
    }

    /// The temporary log to ask about before quitting: a listening window's own temporary
    /// directory, once it holds frames and until the user said what to do with it.
    #[cfg(not(target_arch = "wasm32"))]
    pub(super) fn temp_log_to_ask(&self) -> Option<(PathBuf, u64)> {
        if self.quit_note.is_some() {
            return None;
        }
        let l = self.listener.as_ref()?;
        let dir = l.temp_dir()?;
        let frames = l.frames();
        (frames > 0).then(|| (dir.to_owned(), frames))
    }

    /// Closing the window (its close button, or File > Quit) while the temporary log holds
    /// frames asks first; the choice is carried out, then the window closes. An error keeps
    /// the dialog open and says what went wrong.
    #[cfg(not(target_arch = "wasm32"))]
    pub(super) fn quit_dialog(&mut self, ctx: &egui::Context) {
        use crate::ui::quit_dialog::{self, QuitAction};
        let Some((dir, frames)) = self.temp_log_to_ask() else {
            self.quit_dialog = None;
            return;
        };
        if ctx.input(|i| i.viewport().close_requested()) {
            ctx.send_viewport_cmd(egui::ViewportCommand::CancelClose);
            self.quitting = false;
            self.quit_dialog.get_or_insert_default();
        }
        let Some(d) = &mut self.quit_dialog else {
            return;
        };
        match quit_dialog::show(ctx, d, &dir, frames) {
            Some(QuitAction::Cancel) => self.quit_dialog = None,
            Some(QuitAction::Quit(choice)) => {
                let Some(listener) = &mut self.listener else {
                    return;
                };
                match listener.settle(&choice) {
                    Ok(note) => {
                        // Said where the user started the window, too: the window closes now.
                        eprintln!("{note}");
                        self.quit_note = Some(note);
                        self.quit_dialog = None;
                        self.quitting = true;
                        ctx.send_viewport_cmd(egui::ViewportCommand::Close);
                    }
                    Err(e) => d.error = Some(e),
                }
            }
            None => {}
        }
    }

    #[cfg(not(target_arch = "wasm32"))]
    pub(super) fn listen_dialog(&mut self, ctx: &egui::Context) {
        let Some(mut addr) = self.listen_dialog.take() else {
            return;
        };
        let mut open = true;
        let mut go = false;
        let mut cancel = false;
        egui::Window::new("Listen for programs")
            .collapsible(false)
            .resizable(false)
            .open(&mut open)
            .show(ctx, |ui| {
                ui.label("Address (127.0.0.1 unless FRAMELOG_TOKEN is set):");
                let r = ui
                    .add(TextEdit::singleline(&mut addr).desired_width(260.0))
                    .accessible_name("Listen address");
                let enter = r.lost_focus() && ui.input(|i| i.key_pressed(Key::Enter));
                ui.horizontal(|ui| {
                    go = ui.button("Listen").clicked() || enter;
                    cancel = ui.button("Cancel").clicked();
                });
                ui.label(
                    RichText::new(
                        "Programs started with FRAMELOG_CONNECT=ADDRESS are recorded into a temporary log this window follows.",
                    )
                    .weak(),
                );
            });
        if go {
            let token = std::env::var("FRAMELOG_TOKEN").ok();
            self.start_listening(addr.trim(), None, token);
        } else if open && !cancel {
            self.listen_dialog = Some(addr);
        }
    }
}

/// Opens the desktop's folder dialog on its own thread (it blocks until closed); the
/// receiver gets the chosen folder, or `None` if cancelled or no dialog is available.
#[cfg(not(target_arch = "wasm32"))]
pub(super) fn pick_folder(title: &str) -> std::sync::mpsc::Receiver<Option<PathBuf>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let title = title.to_owned();
    std::thread::spawn(move || {
        let _ = tx.send(rfd::FileDialog::new().set_title(title).pick_folder());
    });
    rx
}
