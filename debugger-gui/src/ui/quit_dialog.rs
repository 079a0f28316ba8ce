//! The quit dialog of a listening window recording into a temporary log: Keep (it stays
//! where it is), Save as… (a path box: the log is moved there), Discard (deleted) or Cancel.
//! It only asks: [`crate::temp_log`] does what was chosen.

use std::path::{Path, PathBuf};

use egui::{Color32, Key, RichText, TextEdit};

use crate::temp_log::Choice;
use crate::ui::status_bar::count;

/// The dialog's state while it is open.
#[derive(Debug, Default)]
pub struct QuitDialog {
    /// Save as…'s path box, once that button was clicked.
    pub save_path: Option<String>,
    /// Why the last choice failed (named in the window; the dialog stays open).
    pub error: Option<String>,
    focus: bool,
}

/// What the user chose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuitAction {
    /// Keep, save or discard the log, then quit.
    Quit(Choice),
    /// Back to the window.
    Cancel,
}

/// Draws the dialog about the temporary log in `dir` holding `frames` frames.
pub fn show(
    ctx: &egui::Context,
    d: &mut QuitDialog,
    dir: &Path,
    frames: u64,
) -> Option<QuitAction> {
    let mut action = None;
    let mut open = true;
    egui::Window::new("Keep the recording?")
        .collapsible(false)
        .resizable(false)
        .anchor(egui::Align2::CENTER_CENTER, egui::Vec2::ZERO)
        .open(&mut open)
        .show(ctx, |ui| {
            ui.label(format!(
                "This window recorded {} into a temporary log, deleted on quitting unless you keep it:",
                count(frames, "frame", "frames")
            ));
            ui.label(RichText::new(dir.display().to_string()).monospace());
            ui.horizontal(|ui| {
                if ui
                    .button("Keep")
                    .on_hover_text(format!("Leave the log in {} and quit", dir.display()))
                    .clicked()
                {
                    action = Some(QuitAction::Quit(Choice::Keep));
                }
                if ui
                    .button("Save as…")
                    .on_hover_text("Move the log to a directory you choose, then quit")
                    .clicked()
                    && d.save_path.is_none()
                {
                    d.save_path = Some(String::new());
                    d.focus = true;
                }
                if ui
                    .button("Discard")
                    .on_hover_text("Delete the log and quit")
                    .clicked()
                {
                    action = Some(QuitAction::Quit(Choice::Discard));
                }
                if ui
                    .button("Cancel")
                    .on_hover_text("Back to the window, still recording")
                    .clicked()
                {
                    action = Some(QuitAction::Cancel);
                }
            });
            if let Some(path) = &mut d.save_path {
                ui.separator();
                ui.label("Save the log to (a new or empty directory):");
                let r = ui
                    .add(TextEdit::singleline(path).desired_width(420.0))
                    .accessible_name("Save log to");
                if std::mem::take(&mut d.focus) {
                    r.request_focus();
                }
                let enter = r.lost_focus() && ui.input(|i| i.key_pressed(Key::Enter));
                if ui.button("Save and quit").clicked() || enter {
                    action = Some(QuitAction::Quit(Choice::SaveAs(PathBuf::from(path.trim()))));
                }
            }
            if let Some(e) = &d.error {
                ui.colored_label(Color32::from_rgb(255, 120, 60), format!("⚠ {e}"));
            }
        });
    if !open {
        action = Some(QuitAction::Cancel);
    }
    action
}
