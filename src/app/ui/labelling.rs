//! The Labelling panel: keyboard-first labelling of the selected polyp. The polyp's views on
//! top (the viewer), below them its five labels, each with its choices numbered. A letter
//! picks the field (H histology, P Paris class, S surface pattern, L location, Z size), a
//! number sets its choice, 0 clears it, J or Enter goes to the next polyp, K to the previous,
//! N to the next polyp still without the field. Keys never fire while a text box has the
//! keyboard. Every label goes through the audited path and undoes with Ctrl+Z.

use super::super::Command;
use super::super::state::{AppState, LabelField, Selection};
use super::super::textures::Textures;
use super::viewer;
use egui::{Color32, Key, RichText};

pub fn draw(ui: &mut egui::Ui, state: &AppState, textures: &mut Textures, out: &mut Vec<Command>) {
    let panel = &state.labelling;
    let Selection::Polyp(polyp) = state.selection else {
        if super::frame_labels::applies(state) {
            super::frame_labels::draw(ui, state, textures, out);
            super::history::draw(ui, state, out);
            return;
        }
        ui.add_space(24.0);
        ui.heading("Labelling");
        ui.label(
            "Select a polyp in the browser, or press J to start at the first one and N to go to \
             the next one without a histology. Then label it with the keyboard: H, P, S, L or Z \
             picks the field, a number its value. Select an examination or a video to label \
             its frames: polyp or no polyp.",
        );
        keys(ui, state, None, out);
        super::review::draw(ui, state, out);
        super::history::draw(ui, state, out);
        return;
    };
    let writable = state.library.as_ref().is_some_and(|l| !l.read_only);
    ui.horizontal(|ui| {
        if let Some((i, n)) = panel.position {
            ui.label(format!("Labelling polyp {} of {n}", i + 1));
        }
        if !writable {
            ui.colored_label(
                Color32::LIGHT_RED,
                "read-only library: labels cannot change",
            );
        }
    });
    let height = ui.available_height();
    ui.allocate_ui(
        egui::vec2(ui.available_width(), (height * 0.42).max(140.0)),
        |ui| viewer::draw(ui, state, textures, out),
    );
    ui.separator();
    egui::ScrollArea::vertical()
        .id_salt("labelling-fields")
        .auto_shrink([false, false])
        .show(ui, |ui| {
            for (f, field) in LabelField::ALL.iter().enumerate() {
                let focused = panel.field == *field;
                let current = panel.current.get(f).cloned().flatten();
                ui.horizontal_wrapped(|ui| {
                    let title = format!("[{:?}] {}", field.shortcut(), field.title());
                    let title = RichText::new(title).strong();
                    let title = if focused {
                        title.color(Color32::from_rgb(120, 200, 255))
                    } else {
                        title
                    };
                    if ui.selectable_label(focused, title).clicked() {
                        out.push(Command::SetLabelField(*field));
                    }
                    ui.label(format!("= {}", current.as_deref().unwrap_or("—")));
                    if *field == LabelField::Size {
                        size_box(ui, polyp, current.as_deref(), writable, out);
                        return;
                    }
                    let options = panel.options.get(f).map(Vec::as_slice).unwrap_or(&[]);
                    for (k, option) in options.iter().enumerate().take(9) {
                        let chosen = current.as_deref() == Some(option.as_str());
                        let text = format!("{} {option}", k + 1);
                        let button = egui::Button::selectable(chosen, text);
                        if ui.add_enabled(writable, button).clicked() {
                            out.push(set(polyp, *field, Some(option.clone())));
                        }
                    }
                });
            }
            keys(ui, state, Some(polyp), out);
            super::review::draw(ui, state, out);
            super::history::draw(ui, state, out);
        });
}

fn set(polyp: i64, field: LabelField, value: Option<String>) -> Command {
    Command::SetPolypLabel {
        polyp_id: polyp,
        key: field.key().to_string(),
        value,
    }
}

/// The size field: type the millimetres, Enter sets them.
fn size_box(
    ui: &mut egui::Ui,
    polyp: i64,
    current: Option<&str>,
    writable: bool,
    out: &mut Vec<Command>,
) {
    let id = ui.scope_id().with(("size", polyp));
    let mut text: String = ui
        .data(|d| d.get_temp(id))
        .unwrap_or_else(|| current.unwrap_or("").to_string());
    let edit = ui.add_enabled(
        writable,
        egui::TextEdit::singleline(&mut text)
            .desired_width(60.0)
            .hint_text("mm"),
    );
    let typing_elsewhere = ui.ctx().egui_wants_keyboard_input() && !edit.has_focus();
    if !typing_elsewhere && ui.input(|i| i.key_pressed(Key::Z) && !i.modifiers.command) {
        edit.request_focus();
    }
    if edit.lost_focus() && ui.input(|i| i.key_pressed(Key::Enter)) && !text.trim().is_empty() {
        out.push(set(polyp, LabelField::Size, Some(text.trim().to_string())));
    }
    ui.data_mut(|d| d.insert_temp(id, text));
    ui.label(RichText::new("type, then Enter").small().weak());
}

/// The panel's keys, and the list of them.
fn keys(ui: &mut egui::Ui, state: &AppState, polyp: Option<i64>, out: &mut Vec<Command>) {
    ui.add_space(8.0);
    ui.label(
        RichText::new(
            "Keys: H P S L Z pick the field · 1-9 set its value · 0 clears it · J or Enter next \
             polyp · K previous (the review queue's order when followed) · N next without this \
             field · Ctrl+Z undo",
        )
        .small()
        .weak(),
    );
    if ui.ctx().egui_wants_keyboard_input() {
        return;
    }
    let writable = state.library.as_ref().is_some_and(|l| !l.read_only);
    let panel = &state.labelling;
    ui.input(|i| {
        if i.modifiers.command || i.modifiers.alt {
            return;
        }
        for field in LabelField::ALL {
            if i.key_pressed(field.shortcut()) {
                out.push(Command::SetLabelField(field));
            }
        }
        if i.key_pressed(Key::J) || i.key_pressed(Key::Enter) {
            out.push(Command::StepPolyp(1));
        }
        if i.key_pressed(Key::K) {
            out.push(Command::StepPolyp(-1));
        }
        if i.key_pressed(Key::N) {
            out.push(Command::NextUnlabelled);
        }
        let (Some(polyp), true) = (polyp, writable) else {
            return;
        };
        if panel.field == LabelField::Size {
            return;
        }
        let f = LabelField::ALL
            .iter()
            .position(|f| *f == panel.field)
            .unwrap_or(0);
        let options = panel.options.get(f).map(Vec::as_slice).unwrap_or(&[]);
        let digits = [
            Key::Num1,
            Key::Num2,
            Key::Num3,
            Key::Num4,
            Key::Num5,
            Key::Num6,
            Key::Num7,
            Key::Num8,
            Key::Num9,
        ];
        for (k, key) in digits.iter().enumerate() {
            if i.key_pressed(*key)
                && let Some(option) = options.get(k)
            {
                out.push(set(polyp, panel.field, Some(option.clone())));
            }
        }
        if i.key_pressed(Key::Num0) {
            out.push(set(polyp, panel.field, None));
        }
    });
}
