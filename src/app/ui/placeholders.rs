//! Tabs whose capability is not built yet, registered like any panel (`panels.rs`). Each says
//! plainly which capability fills it; a capability's own panel replaces its entry there.

use super::super::Command;
use super::super::state::AppState;
use super::super::textures::Textures;

pub fn prompts(ui: &mut egui::Ui, _: &AppState, _: &mut Textures, _: &mut Vec<Command>) {
    say(
        ui,
        "Text prompts (Endo-CLIP) — not built yet",
        "Filled by the Endo-CLIP capability: zero-shot text-prompt scores for the selected frames and text-to-image search. Capsule caption retrieval has its own tab, Captions.",
    );
}

fn say(ui: &mut egui::Ui, what: &str, text: &str) {
    ui.add_space(24.0);
    ui.heading(what);
    ui.add_space(8.0);
    ui.label(text);
}
