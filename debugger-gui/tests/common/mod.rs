//! What the UI tests share: a headless window, and stepping it until something shows.

use std::time::{Duration, Instant};

use debugger_gui::DebuggerApp;
use egui_kittest::Harness;

/// The whole window, headless, at a desktop size.
pub fn harness(app: DebuggerApp) -> Harness<'static, DebuggerApp> {
    Harness::builder()
        .with_size(egui::vec2(1400.0, 900.0))
        .build_ui_state(|ui, app: &mut DebuggerApp| app.ui(ui), app)
}

/// Steps the UI (letting background threads and connections work) until `cond` holds;
/// after 60 s fails, saying what the window shows as problems and how its log loads.
pub fn step_until(
    h: &mut Harness<'_, DebuggerApp>,
    what: &str,
    mut cond: impl FnMut(&Harness<'_, DebuggerApp>) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        h.step();
        if cond(h) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; the window's problems: {:?}; its log: {:?} {:?}",
            h.state().problems(),
            h.state().log_source(),
            h.state().ingest_status()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
