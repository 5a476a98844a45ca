//! Tabs whose capability is not built yet, registered like any panel (`panels.rs`). Each says
//! plainly which capability fills it; a capability's own panel replaces its entry there.

use super::super::Command;
use super::super::state::AppState;
use super::super::textures::Textures;

pub fn prompts(ui: &mut egui::Ui, _: &AppState, _: &mut Textures, _: &mut Vec<Command>) {
    say(
        ui,
        "Text prompts (Endo-CLIP) — not built yet",
        "Filled by the Endo-CLIP capability: zero-shot text-prompt scores for the selected frames and caption retrieval (CLIP with the multi-positive KL loss for capsule images).",
    );
}

pub fn training(ui: &mut egui::Ui, _: &AppState, _: &mut Textures, _: &mut Vec<Command>) {
    say(
        ui,
        "Training — not built yet",
        "Filled by the training capability: fine-tune the same burn graphs the viewer uses, with live loss curves, progress, ETA, stop and resume.",
    );
}

fn say(ui: &mut egui::Ui, what: &str, text: &str) {
    ui.add_space(24.0);
    ui.heading(what);
    ui.add_space(8.0);
    ui.label(text);
}
