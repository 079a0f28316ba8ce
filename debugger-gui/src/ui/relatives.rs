//! The selected frame's parent and children, each a click away (in the frame panel).

use egui::{RichText, Ui};

use crate::model::{FrameRef, Model, ParentOf};
use crate::ui::present;

/// Children listed at most (the rest are counted).
const MAX_LISTED: usize = 100;

/// The selected frame's relatives, kept while the model does not change.
#[derive(Default)]
pub struct Relatives {
    key: Option<(FrameRef, u64)>,
    parent: Option<ParentOf>,
    children: Vec<FrameRef>,
}

impl Relatives {
    /// Looks up `at`'s parent and children again if `at` or the model changed.
    fn update(&mut self, model: &Model, at: FrameRef) {
        let key = Some((at, model.generation()));
        if self.key != key {
            self.key = key;
            self.parent = model.parent_of(at);
            self.children = model.children_of(at);
        }
    }
}

/// Shows the Parent and Children rows of frame `at` (in a two-column grid); returns the
/// frame the user clicked.
pub fn rows(ui: &mut Ui, state: &mut Relatives, model: &Model, at: FrameRef) -> Option<FrameRef> {
    state.update(model, at);
    let mut picked = None;
    let inferred = model.parents_inferred();
    ui.label("Parent");
    ui.horizontal_wrapped(|ui| {
        match state.parent {
            Some(ParentOf::Frame(p)) => {
                let mut text = present::frame_link(model, p);
                if p.lane != at.lane {
                    text.push_str(" (another thread)");
                }
                if ui.button(text).on_hover_text("Select the parent").clicked() {
                    picked = Some(p);
                }
            }
            Some(ParentOf::Missing(k)) => {
                ui.label(format!("frame {k}, not in the log"))
                    .on_hover_text(
                        "Its start names this parent, which the log does not hold (dropped, \
                         in a deleted segment, or not read yet).",
                    );
            }
            None => {
                ui.label(RichText::new("none (a root)").weak());
            }
        }
        if inferred {
            ui.label(RichText::new("(inferred)").weak())
                .on_hover_text(INFERRED);
        }
    });
    ui.end_row();
    ui.label(format!("Children ({})", state.children.len()));
    ui.vertical(|ui| {
        if state.children.is_empty() {
            ui.label(RichText::new("none").weak());
        }
        for &c in state.children.iter().take(MAX_LISTED) {
            let mut text = present::frame_link(model, c);
            if c.lane != at.lane {
                text.push_str(" (another thread)");
            }
            if ui.button(text).clicked() {
                picked = Some(c);
            }
        }
        if state.children.len() > MAX_LISTED {
            ui.label(
                RichText::new(format!("and {} more", state.children.len() - MAX_LISTED)).weak(),
            );
        }
    });
    ui.end_row();
    picked
}

/// What "inferred" means, for hover texts.
pub const INFERRED: &str = "This log records no parents (it was written before they were): a \
    frame's parent is taken to be the innermost running frame of its context on its thread, so \
    work that moved to another thread shows as a root there.";
