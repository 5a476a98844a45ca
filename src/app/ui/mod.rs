//! Drawing only: every function here reads state and pushes commands.

mod browser;
mod captions;
mod details;
mod frame_labels;
mod guide;
mod history;
mod labelling;
pub mod panels;
mod prompts;
mod report;
mod review;
mod status;
mod toasts;
mod tracklets;
mod training;
pub mod trust;
mod twin_map;
mod twins;
mod viewer;

use super::Command;
use super::state::AppState;
use super::textures::Textures;
use crate::data::import::ImportLayout;
use crate::engine::JobHandle;

pub fn draw(
    ui: &mut egui::Ui,
    state: &AppState,
    jobs: &[JobHandle],
    textures: &mut Textures,
    out: &mut Vec<Command>,
) {
    keyboard(ui.ctx(), state, out);
    dropped_files(ui.ctx(), out);

    egui::Panel::top("menu").show(ui, |ui| menu_bar(ui, state, out));
    egui::Panel::bottom("status").show(ui, |ui| status::draw(ui, state, jobs, out));
    egui::Panel::left("browser")
        .default_size(300.0)
        .min_size(220.0)
        .resizable(true)
        .show(ui, |ui| browser::draw(ui, state, textures, out));
    egui::Panel::right("details")
        .default_size(320.0)
        .min_size(240.0)
        .resizable(true)
        .show(ui, |ui| details::draw(ui, state, out));
    egui::CentralPanel::default().show(ui, |ui| {
        ui.horizontal(|ui| {
            for (i, p) in panels::registry().iter().enumerate() {
                let tab = ui
                    .selectable_label(state.tab == p.tab, p.title)
                    .on_hover_text(format!("{} (Ctrl+{})", p.about, i + 1));
                if tab.clicked() {
                    out.push(Command::ShowTab(p.tab));
                }
            }
        });
        ui.separator();
        (panels::panel(state.tab).draw)(ui, state, textures, out);
    });
    guide::draw(ui.ctx(), state, out);
    toasts::draw(ui.ctx(), state, out);
}

fn menu_bar(ui: &mut egui::Ui, state: &AppState, out: &mut Vec<Command>) {
    ui.horizontal(|ui| {
        ui.menu_button("File", |ui| {
            if ui.button("Open library…").clicked() {
                out.push(Command::PickLibrary);
            }
            if ui.button("Open images…").clicked() {
                out.push(Command::PickImages);
            }
            let writable = state.library.as_ref().is_some_and(|l| !l.read_only);
            if ui
                .add_enabled(writable, egui::Button::new("Import image folder…"))
                .clicked()
            {
                out.push(Command::PickImport(ImportLayout::Images));
            }
            if ui
                .add_enabled(writable, egui::Button::new("Import video file…"))
                .on_hover_text("MP4/H.264 or anything else ffmpeg reads (needs ffmpeg on PATH)")
                .clicked()
            {
                out.push(Command::PickImport(ImportLayout::Video));
            }
        });
        ui.menu_button("Edit", |ui| {
            if ui
                .add_enabled(!state.undo.is_empty(), egui::Button::new("Undo (Ctrl+Z)"))
                .clicked()
            {
                out.push(Command::Undo);
            }
            if ui
                .add_enabled(
                    !state.redo.is_empty(),
                    egui::Button::new("Redo (Ctrl+Shift+Z)"),
                )
                .clicked()
            {
                out.push(Command::Redo);
            }
        });
        ui.menu_button("Help", |ui| {
            if ui
                .button("User guide (F1)")
                .on_hover_text("The guide's page for this tab, bundled with EndoTwin (offline)")
                .clicked()
            {
                out.push(guide_for(state));
                ui.close();
            }
            ui.separator();
            ui.strong("Keyboard shortcuts");
            shortcut_list(ui);
        });
        ui.separator();
        ui.strong("EndoTwin");
        if let Some(lib) = &state.library {
            ui.label(lib.path.display().to_string());
        } else {
            ui.label("no library open — File > Open library…");
        }
    });
}

/// Opens the user guide at the current tab's page.
fn guide_for(state: &AppState) -> Command {
    Command::Guide(Some(super::guide::index_of(panels::panel(state.tab).guide)))
}

/// Shortcuts fire only while no text field has the keyboard. The arrow keys and Escape also
/// wait while any other widget has it (a focused slider steps with the arrows; Escape first
/// lets go of the widget); Ctrl+Z, the tab keys and F1 do not (after moving the frame slider
/// with the arrows, Ctrl+Z still undoes).
fn keyboard(ctx: &egui::Context, state: &AppState, out: &mut Vec<Command>) {
    if ctx.text_edit_focused() {
        return;
    }
    let widget_has_keys = ctx.egui_wants_keyboard_input();
    ctx.input(|i| {
        use egui::Key;
        if !widget_has_keys {
            if i.key_pressed(Key::ArrowDown) {
                out.push(Command::MoveSelection(1));
            }
            if i.key_pressed(Key::ArrowUp) {
                out.push(Command::MoveSelection(-1));
            }
            if i.key_pressed(Key::ArrowRight) {
                out.push(Command::StepView(1));
            }
            if i.key_pressed(Key::ArrowLeft) {
                out.push(Command::StepView(-1));
            }
            if i.key_pressed(Key::Escape) {
                out.push(Command::Focus(None));
            }
        }
        if i.key_pressed(Key::F1) {
            out.push(guide_for(state));
        }
        if i.modifiers.command {
            for (n, p) in panels::registry().iter().enumerate() {
                if panels::shortcut_key(n).is_some_and(|k| i.key_pressed(k)) {
                    out.push(Command::ShowTab(p.tab));
                }
            }
        }
        if i.modifiers.command && i.key_pressed(Key::Z) {
            out.push(if i.modifiers.shift {
                Command::Redo
            } else {
                Command::Undo
            });
        }
    });
}

fn dropped_files(ctx: &egui::Context, out: &mut Vec<Command>) {
    let paths: Vec<std::path::PathBuf> = ctx.input(|i| {
        i.raw
            .dropped_files
            .iter()
            .map(|f| f.path().to_path_buf())
            .filter(|p| !p.as_os_str().is_empty())
            .collect()
    });
    if !paths.is_empty() {
        out.push(Command::Dropped(paths));
    }
}

/// The shortcuts, listed where the user can see them.
pub fn shortcut_list(ui: &mut egui::Ui) {
    egui::Grid::new("shortcuts").show(ui, |ui| {
        for (k, v) in [
            ("Up / Down", "previous / next case in the browser"),
            ("Left / Right", "previous / next view"),
            ("Esc", "back to the view grid"),
            ("F1", "the user guide's page for this tab"),
            (
                "Ctrl+Z / Ctrl+Shift+Z",
                "undo / redo a label or tracklet edit",
            ),
            ("Ctrl+1 .. Ctrl+9", "switch tabs, in their order"),
            ("scroll / drag", "zoom / pan the focused image"),
            ("double-click", "reset zoom"),
            (
                "H P S L Z (Labelling)",
                "pick histology, Paris, surface, location, size",
            ),
            ("1-9 / 0 (Labelling)", "set the field's value / clear it"),
            (
                "J or Enter / K (Labelling)",
                "next / previous polyp (in the review queue's order when followed)",
            ),
            ("N (Labelling)", "next polyp without the field"),
            (
                "1 / 2 / 0 (Labelling, frames)",
                "polyp / no polyp / clear on the focused frame",
            ),
            (
                "Shift+drag (video frame)",
                "draw a box; the tracker follows it",
            ),
            ("drag (twin map)", "lasso polyps: picked for a group label"),
            ("Ctrl+click (browser)", "pick / unpick a polyp"),
        ] {
            ui.monospace(k);
            ui.label(v);
            ui.end_row();
        }
    });
}
