//! Tabs whose capability is not built yet. Each says plainly which capability fills it.

use super::super::state::Tab;

pub fn draw(ui: &mut egui::Ui, tab: Tab) {
    let (what, text) = match tab {
        Tab::Prompts => (
            "Text prompts (Endo-CLIP) — not built yet",
            "Filled by the Endo-CLIP capability: zero-shot text-prompt scores for the selected frames and caption retrieval (CLIP with the multi-positive KL loss for capsule images).",
        ),
        Tab::Tracklets => (
            "Tracklet re-identification — not built yet",
            "Filled by the tracklet capability: tracklets of a procedure video, their re-identification links, and tools to merge, split and accept or reject links.",
        ),
        Tab::Training => (
            "Training — not built yet",
            "Filled by the training capability: fine-tune the same burn graphs the viewer uses, with live loss curves, progress, ETA, stop and resume.",
        ),
        Tab::Labelling => (
            "Labelling queue — not built yet",
            "Filled by the labelling capability: keyboard-first review queues sorted by confidence and diversity. Today, correct a polyp's pathology in the details panel (with undo and an audit trail).",
        ),
        Tab::Viewer | Tab::Twins => ("", ""),
    };
    ui.add_space(24.0);
    ui.heading(what);
    ui.add_space(8.0);
    ui.label(text);
}
