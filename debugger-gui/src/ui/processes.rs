//! The Processes tab (listening windows only): the address programs connect to, session
//! settings, and one row per connected program (name, pid, protocol, state, frames) with
//! Resume and Start/Stop buttons; the server's last log lines below.

use egui::{Color32, ComboBox, RichText, Slider, Ui};
use framelog::formats::protocol::ModeSetting;
use framelog::remote::ProcessState;

use crate::listen::Listener;

/// Draws the tab; an error from a button goes to `message`.
pub fn show(ui: &mut Ui, listener: &mut Listener, message: &mut Option<String>) {
    ui.horizontal(|ui| {
        ui.label(format!(
            "Listening on {}: run a program with FRAMELOG_CONNECT={} (add ,suspend to record its start-up)",
            listener.addr(),
            listener.addr()
        ));
    });
    match listener.temp_dir() {
        Some(dir) => ui.label(format!(
            "Recording into a temporary log: {} (on quitting, the window asks whether to keep, save or delete it)",
            dir.display()
        )),
        None => ui.label(format!("Recording into {}", listener.dir().display())),
    };
    let before = listener.form.clone();
    ui.horizontal(|ui| {
        let form = &mut listener.form;
        ComboBox::from_label("Buffering")
            .selected_text(match form.mode {
                ModeSetting::Keep => "program's own",
                ModeSetting::Drop => "drop",
                ModeSetting::Block => "block",
            })
            .show_ui(ui, |ui| {
                ui.selectable_value(&mut form.mode, ModeSetting::Keep, "program's own");
                ui.selectable_value(&mut form.mode, ModeSetting::Drop, "drop");
                ui.selectable_value(&mut form.mode, ModeSetting::Block, "block");
            });
        ui.add(
            Slider::new(&mut form.probability, 0.0..=1.0)
                .text("sampled contexts")
                .fixed_decimals(2),
        );
        ui.checkbox(&mut form.frame_data, "Frame data");
        ui.checkbox(&mut form.auto_start, "Record on connect");
        ui.checkbox(&mut form.auto_resume, "Resume on connect");
    });
    if listener.form != before {
        listener.apply_policy();
    }
    ui.separator();
    let processes = listener.processes();
    if processes.is_empty() {
        ui.label(RichText::new("No program has connected yet.").weak());
    }
    let mut action: Option<(u64, &'static str)> = None;
    egui::ScrollArea::vertical()
        .id_salt("processes")
        .max_height(ui.available_height() - 60.0)
        .show(ui, |ui| {
            egui::Grid::new("processes-grid")
                .striped(true)
                .num_columns(6)
                .show(ui, |ui| {
                    for name in ["Program", "PID", "Protocol", "State", "Frames", ""] {
                        ui.strong(name);
                    }
                    ui.end_row();
                    for p in &processes {
                        ui.label(&p.name);
                        ui.label(p.pid.to_string());
                        ui.label(format!(
                            "v{} (StartSession v{})",
                            p.protocol, p.start_session_version
                        ));
                        let color = match p.state {
                            ProcessState::Recording => Color32::from_rgb(90, 170, 90),
                            ProcessState::Suspended => Color32::from_rgb(220, 170, 60),
                            ProcessState::Gone => Color32::GRAY,
                            ProcessState::Waiting => ui.visuals().text_color(),
                        };
                        ui.label(RichText::new(p.state.name()).color(color));
                        ui.label(p.frames.to_string());
                        ui.horizontal(|ui| {
                            let alive = p.state != ProcessState::Gone;
                            if p.suspended
                                && ui.add_enabled(alive, egui::Button::new("Resume")).clicked()
                            {
                                action = Some((p.instance, "resume"));
                            }
                            let (label, what) = if p.stream_active {
                                ("Stop recording", "stop")
                            } else {
                                ("Start recording", "start")
                            };
                            if ui.add_enabled(alive, egui::Button::new(label)).clicked() {
                                action = Some((p.instance, what));
                            }
                            if let Some(e) = &p.last_error {
                                ui.label(
                                    RichText::new(format!("⚠ {e}"))
                                        .color(Color32::from_rgb(230, 120, 100)),
                                );
                            }
                        });
                        ui.end_row();
                    }
                });
        });
    if let Some((instance, what)) = action {
        let r = match what {
            "resume" => listener.resume(instance),
            "stop" => listener.stop_session(instance),
            _ => listener.start_session(instance),
        };
        *message = r.err();
    }
    if let Some(m) = message {
        ui.label(RichText::new(format!("⚠ {m}")).color(Color32::from_rgb(230, 120, 100)));
    }
    ui.separator();
    for line in listener.lines().iter().rev().take(6) {
        ui.label(RichText::new(line).monospace());
    }
}
