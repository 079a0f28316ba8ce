//! The status bar: frames loaded, ingest rate, dropped records (a warning when above zero),
//! slow polls (a warning, when there are any), follow state, loading progress and the log path.

use egui::{Color32, ProgressBar, RichText, Ui};

use crate::ingest::IngestStatus;

/// What the status bar shows.
pub struct StatusInfo<'a> {
    /// Frames in the model.
    pub frames: u64,
    /// Frames still open.
    pub open: u64,
    /// Frames cut because their process stopped writing.
    pub cut: u64,
    /// Records reported dropped.
    pub dropped: u64,
    /// Whether the view follows the newest time.
    pub following: bool,
    /// The log is finished (no process writes it, read to its end): no rate, no Follow.
    pub finished: bool,
    /// Ingest thread status.
    pub ingest: &'a IngestStatus,
    /// Log path.
    pub path: &'a str,
    /// The log is a listening window's temporary directory (File > Quit asks what to do
    /// with it).
    pub temporary: bool,
    /// The log records no parents: they are inferred.
    pub parents_inferred: bool,
    /// Polls that blocked their thread (slow-poll records).
    pub slow_polls: u64,
}

/// What was clicked in the status bar.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatusClicks {
    /// The follow toggle.
    pub follow: bool,
    /// The slow polls warning (open the Slow polls tab).
    pub slow_polls: bool,
}

/// Formats a count with thousands separators.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A count and its noun, singular for one ("1 frame", "2,000 frames").
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", thousands(n), if n == 1 { one } else { many })
}

/// Shows the bar; returns what was clicked.
pub fn show(ui: &mut Ui, s: &StatusInfo<'_>) -> StatusClicks {
    let mut clicks = StatusClicks::default();
    ui.horizontal(|ui| {
        ui.label(format!("{} frames", thousands(s.frames)));
        if s.open > 0 {
            ui.label(RichText::new(format!("({} running)", thousands(s.open))).weak());
        }
        if s.cut > 0 {
            ui.label(
                RichText::new(format!("({} cut)", thousands(s.cut)))
                    .color(Color32::from_rgb(255, 120, 60)),
            )
            .on_hover_text(
                "Frames a process never ended: it stopped writing (exited or was killed).",
            );
        }
        ui.separator();
        if !s.finished {
            ui.label(format!(
                "{} frames/s",
                thousands(s.ingest.frames_per_sec.round() as u64)
            ));
            ui.separator();
        }
        if s.dropped > 0 {
            ui.label(
                RichText::new(format!("⚠ {} records dropped", thousands(s.dropped)))
                    .color(Color32::from_rgb(255, 120, 60))
                    .strong(),
            )
            .on_hover_text("The program lost records in Drop mode (its buffers were full).");
        } else {
            ui.label("0 dropped");
        }
        if s.slow_polls > 0 {
            ui.separator();
            let text = format!("⚠ {}", count(s.slow_polls, "slow poll", "slow polls"));
            if ui
                .add(
                    egui::Button::new(
                        RichText::new(text)
                            .color(crate::ui::SLOW_POLL_COLOR)
                            .strong(),
                    )
                    .frame(false),
                )
                .on_hover_text(
                    "Polls that held their thread at least the slow-poll threshold: every task \
                     queued behind them waited. Click to list them.",
                )
                .clicked()
            {
                clicks.slow_polls = true;
            }
        }
        if s.parents_inferred {
            ui.separator();
            ui.label(RichText::new("parents inferred").weak())
                .on_hover_text(crate::ui::relatives::INFERRED);
        }
        ui.separator();
        let (text, tip) = if s.finished {
            (
                "■ finished",
                "No process writes this log any more and it is read to its end",
            )
        } else if s.following {
            ("⟲ Following", "Newest time kept in view; click to pause")
        } else {
            ("⏸ Paused", "Click to follow the newest time again")
        };
        if ui
            .selectable_label(s.following, text)
            .on_hover_text(tip)
            .clicked()
        {
            clicks.follow = true;
        }
        ui.separator();
        // No bar while waiting for a log to appear (nothing to load yet).
        if s.ingest.loading() {
            ui.add(
                ProgressBar::new(s.ingest.progress())
                    .desired_width(160.0)
                    .show_percentage(),
            )
            .on_hover_text("Loading the log");
            ui.separator();
        }
        if s.temporary {
            ui.label("temporary log:").on_hover_text(
                "Recorded into a temporary directory: File > Quit asks whether to keep, save or delete it",
            );
        }
        ui.label(RichText::new(s.path).weak().monospace());
    });
    clicks
}

#[cfg(test)]
mod tests {
    #[test]
    fn thousands_groups_digits() {
        assert_eq!(super::thousands(0), "0");
        assert_eq!(super::thousands(999), "999");
        assert_eq!(super::thousands(1000), "1,000");
        assert_eq!(super::thousands(10_000_000), "10,000,000");
    }
}
