//! Frame labels in the Labelling tab: for an examination's frames or a video's, whether the
//! focused frame shows a polyp. 1 sets "polyp", 2 "no polyp", 0 clears; J or Enter goes to the
//! next frame, K to the previous, N to the next frame without a label. Audited and undoable
//! like every label; keys never fire while a text box has the keyboard.

use super::super::Command;
use super::super::state::{AppState, FRAME_VALUES};
use super::super::textures::Textures;
use super::viewer;
use egui::{Key, RichText};

/// Whether the selection has frames to label (an examination's or a video's).
pub fn applies(state: &AppState) -> bool {
    !state.labelling.frame_labels.is_empty()
}

pub fn draw(ui: &mut egui::Ui, state: &AppState, textures: &mut Textures, out: &mut Vec<Command>) {
    let labels = &state.labelling.frame_labels;
    let media = &state.details.media;
    let writable = state.library.as_ref().is_some_and(|l| !l.read_only);
    let focused = state.focused.filter(|i| *i < media.len());
    let done = labels.iter().filter(|l| l.is_some()).count();
    ui.label(
        RichText::new(format!(
            "Frame labels of {}: {done} of {} frames labelled",
            state.details.title,
            media.len()
        ))
        .strong(),
    );
    let height = ui.available_height();
    ui.allocate_ui(
        egui::vec2(ui.available_width(), (height * 0.5).max(140.0)),
        |ui| viewer::draw(ui, state, textures, out),
    );
    let Some(i) = focused else {
        ui.label("Press J to start at the first frame (or click one).");
        keys(ui, None, None, labels, out);
        return;
    };
    let current = labels.get(i).cloned().flatten();
    ui.horizontal_wrapped(|ui| {
        ui.label(RichText::new(format!("Frame {} of {}", i + 1, media.len())).strong());
        ui.label(format!("= {}", current.as_deref().unwrap_or("—")));
        for (k, value) in FRAME_VALUES.iter().enumerate() {
            let chosen = current.as_deref() == Some(*value);
            let button = egui::Button::selectable(chosen, format!("{} {value}", k + 1));
            if ui.add_enabled(writable, button).clicked() {
                out.push(Command::SetFrameLabel {
                    media_id: media[i].id,
                    value: Some(value.to_string()),
                });
            }
        }
    });
    keys(ui, Some(i), writable.then_some(media[i].id), labels, out);
}

fn keys(
    ui: &mut egui::Ui,
    focused: Option<usize>,
    media_id: Option<i64>,
    labels: &[Option<String>],
    out: &mut Vec<Command>,
) {
    ui.label(
        RichText::new(
            "Keys: 1 polyp · 2 no polyp · 0 clears · J or Enter next frame · K previous · N next \
             frame without a label · Ctrl+Z undo",
        )
        .small()
        .weak(),
    );
    if ui.ctx().egui_wants_keyboard_input() {
        return;
    }
    ui.input(|i| {
        if i.modifiers.command || i.modifiers.alt {
            return;
        }
        let step = |delta: i32| match focused {
            Some(_) => Command::StepView(delta),
            // Nothing focused yet: J and K start at the first frame.
            None => Command::Focus(Some(0)),
        };
        if i.key_pressed(Key::J) || i.key_pressed(Key::Enter) {
            out.push(step(1));
        }
        if i.key_pressed(Key::K) {
            out.push(step(-1));
        }
        if i.key_pressed(Key::N)
            && let Some(next) = labels.iter().position(Option::is_none)
        {
            out.push(Command::Focus(Some(next)));
        }
        let Some(media_id) = media_id else { return };
        for (key, value) in [
            (Key::Num1, Some(0)),
            (Key::Num2, Some(1)),
            (Key::Num0, None),
        ] {
            if i.key_pressed(key) {
                out.push(Command::SetFrameLabel {
                    media_id,
                    value: value.map(|v| FRAME_VALUES[v].to_string()),
                });
            }
        }
    });
}
