//! The search bar: a label pattern (the rule `framelog dump --label` uses), its matches, and
//! the buttons that walk them.

use std::time::Duration;
use web_time::Instant;

use egui::{Color32, Key, Modifiers, RichText, TextEdit, Ui};

use crate::model::Model;
use crate::model::search::{Matches, Pattern};
use crate::ui::status_bar;

struct SearchState {
    pattern: Pattern,
    matches: Matches,
    generation: u64,
    at: Instant,
}

/// The search text and what it matches.
#[derive(Default)]
pub struct SearchBar {
    text: String,
    state: Option<SearchState>,
}

impl SearchBar {
    /// The search text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Sets the search text (as if typed).
    pub fn set_text(&mut self, text: &str) {
        self.text = text.to_owned();
    }

    /// The current matches, if a pattern is active.
    pub fn matches(&self) -> Option<&Matches> {
        self.state.as_ref().map(|s| &s.matches)
    }

    /// Forgets the matches (a new log was opened).
    pub fn clear(&mut self) {
        self.state = None;
    }

    /// Recomputes the matches when the pattern or the model changed (at most every 300 ms
    /// while a log grows).
    pub fn update(&mut self, model: &Model) {
        // A pattern that does not parse (an unclosed `[`) selects nothing until it does.
        let Some(pattern) = Pattern::parse(&self.text).ok().flatten() else {
            self.state = None;
            return;
        };
        let fresh = match &self.state {
            Some(s) => {
                s.pattern == pattern
                    && (s.generation == model.generation()
                        || s.at.elapsed() < Duration::from_millis(300))
            }
            None => false,
        };
        if !fresh {
            self.state = Some(SearchState {
                matches: model.search(&pattern),
                pattern,
                generation: model.generation(),
                at: Instant::now(),
            });
        }
    }

    /// Draws the field, Prev/Next and the match count; returns `Some(backward)` when the
    /// user asks for the next (or previous) match.
    pub fn ui(&mut self, ui: &mut Ui) -> Option<bool> {
        let resp = ui.add(
            TextEdit::singleline(&mut self.text)
                .hint_text("Search labels (db, \"exact\", http/*)")
                .desired_width(240.0),
        );
        let resp = resp.accessible_name("Search");
        // Shift is read from the Enter key event itself: a quick tap of Shift+Enter may have
        // released Shift by the time this frame runs, so the frame's modifier state can miss it.
        let enter_event = ui.input(|i| {
            i.events.iter().find_map(|e| match e {
                egui::Event::Key {
                    key: Key::Enter,
                    pressed: true,
                    modifiers,
                    ..
                } => Some(modifiers.shift),
                _ => None,
            })
        });
        let enter = resp.lost_focus() && enter_event.is_some();
        let shift = enter_event.unwrap_or(false);
        if ui.input_mut(|i| i.consume_key(Modifiers::COMMAND, Key::F)) {
            resp.request_focus();
        }
        let prev = ui
            .button("⏶ Prev")
            .on_hover_text("Previous match")
            .clicked();
        let next = ui.button("⏷ Next").on_hover_text("Next match").clicked();
        if let Some(s) = &self.state {
            let text = format!(
                "{} in {}",
                status_bar::count(s.matches.frames, "matching frame", "matching frames"),
                status_bar::count(s.matches.labels as u64, "label", "labels")
            );
            ui.label(if s.matches.labels == 0 {
                RichText::new("no match").color(Color32::from_rgb(255, 120, 60))
            } else {
                RichText::new(text)
            });
        }
        if enter {
            resp.request_focus();
        }
        if (next || prev || enter) && self.state.is_some() {
            return Some(prev || (enter && shift));
        }
        None
    }
}
