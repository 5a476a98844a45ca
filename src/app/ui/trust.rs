//! The mark every answer carries: whether its input is like what the model learned from
//! (a badge with a hover text that says what it means and what to do), and the wording of a
//! confidence that is calibrated.

use crate::trust::{Judgement, UNFAMILIAR_HINT};
use egui::{Color32, RichText};

/// The badge's text for a marked answer (tests look for it).
pub const UNFAMILIAR_BADGE: &str = "UNFAMILIAR INPUT";
pub const FAMILIAR_BADGE: &str = "familiar input";

const WARN: Color32 = Color32::from_rgb(235, 150, 40);

/// The badge for an answer's familiarity (`model`: what the panel calls the model when it
/// has no statistics).
pub fn badge(ui: &mut egui::Ui, judgement: Option<&Judgement>, model: &str) {
    match judgement {
        Some(j) if j.unfamiliar => {
            ui.label(
                RichText::new(UNFAMILIAR_BADGE)
                    .color(Color32::BLACK)
                    .background_color(WARN)
                    .strong(),
            )
            .on_hover_text(hover(j));
        }
        Some(j) => {
            ui.label(RichText::new(FAMILIAR_BADGE).small().weak())
                .on_hover_text(hover(j));
        }
        None => {
            ui.label(RichText::new("familiarity not fitted").small().weak())
                .on_hover_text(format!(
                    "{model} has no familiarity statistics (`endotwin model trust`): nothing \
                     says whether this input is like the frames it learned from."
                ));
        }
    }
}

/// What the badge means, in the words a reader needs.
pub fn hover(j: &Judgement) -> String {
    if j.unfamiliar {
        format!(
            "This input is {UNFAMILIAR_HINT}.\n{} scores it {:.2}; above {:.2} an input is \
             further from the model's training data than about 95 % of the validation inputs it was \
             checked on (of each source, where it was checked on several). The answer below stays visible, but do not rely on it: check the \
             frame, or use a model that learned from frames like it.",
            j.model, j.score, j.threshold
        )
    } else {
        format!(
            "Like the frames {} learned from: it scores {:.2}, below its threshold {:.2}.",
            j.model, j.score, j.threshold
        )
    }
}
