//! The panel registry: every tab of the central area, in order. A capability adds its panel
//! here (one line) and in its own file under `ui/`; the shell draws whatever is registered,
//! with a shortcut each (Ctrl+1, Ctrl+2, ...), and `--tab <id>` opens any of them.

use super::super::Command;
use super::super::state::{AppState, Tab};
use super::super::textures::Textures;
use super::{captions, labelling, prompts, tracklets, training, twins, viewer};

/// Draws a panel: reads the state, pushes commands.
pub type DrawPanel = fn(&mut egui::Ui, &AppState, &mut Textures, &mut Vec<Command>);

/// One registered tab.
pub struct PanelSpec {
    /// Its id (`--tab`, [`Tab`]).
    pub tab: Tab,
    pub title: &'static str,
    /// What it shows, for the tab's hover text.
    pub about: &'static str,
    /// Its page of the user guide (a file of `docs/`, bundled): Help > User guide opens it.
    pub guide: &'static str,
    pub draw: DrawPanel,
}

static PANELS: [PanelSpec; 7] = [
    PanelSpec {
        tab: Tab::VIEWER,
        title: "Viewer",
        about: "The selected case's views or video frames, with zoom and boxes",
        guide: "guide.md",
        draw: viewer::draw,
    },
    PanelSpec {
        tab: Tab::TWINS,
        title: "Digital twins",
        about: "The most similar library polyps, their pathology and the vote they add up to",
        guide: "twins.md",
        draw: twins::draw,
    },
    PanelSpec {
        tab: super::super::prompts::TAB,
        title: "Text prompts",
        about: "Zero-shot text-prompt scores for the selection (editable prompt sets) and a text search of the library's polyps (Endo-CLIP)",
        guide: "prompts.md",
        draw: prompts::draw,
    },
    PanelSpec {
        tab: super::super::captions::TAB,
        title: "Captions",
        about: "Capsule frames: their top captions and predicted category, the finding as written and refined, and a search by caption or category",
        guide: "captions.md",
        draw: captions::draw,
    },
    PanelSpec {
        tab: super::super::tracklets::TAB,
        title: "Tracklets",
        about: "A video's tracklets on a timeline: re-identification links, the polyp count, merge, split, accept or reject links",
        guide: "tracklets.md",
        draw: tracklets::draw,
    },
    PanelSpec {
        tab: Tab("training"),
        title: "Training",
        about: "Train or fine-tune a model with a recipe of the registry: live loss curve, progress, stop and resume",
        guide: "models.md",
        draw: training::draw,
    },
    PanelSpec {
        tab: Tab("labelling"),
        title: "Labelling",
        about: "Keyboard-first labelling of a polyp's histology, Paris class, surface, location and size",
        guide: "guide.md",
        draw: labelling::draw,
    },
];

pub fn registry() -> &'static [PanelSpec] {
    &PANELS
}

/// The registered panel of `tab` (the first one when the tab is unknown).
pub fn panel(tab: Tab) -> &'static PanelSpec {
    PANELS.iter().find(|p| p.tab == tab).unwrap_or(&PANELS[0])
}

/// Ctrl+1..9 selects the n-th tab.
pub fn shortcut_key(index: usize) -> Option<egui::Key> {
    use egui::Key::*;
    [Num1, Num2, Num3, Num4, Num5, Num6, Num7, Num8, Num9]
        .get(index)
        .copied()
}

/// The registered tab called `id` (`--tab` on the command line).
pub fn tab_by_id(id: &str) -> Option<Tab> {
    PANELS.iter().find(|p| p.tab.0 == id).map(|p| p.tab)
}

/// Every registered tab's id, in order.
pub fn tab_ids() -> Vec<&'static str> {
    PANELS.iter().map(|p| p.tab.0).collect()
}
