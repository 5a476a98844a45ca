//! What a person does with the keyboard and the mouse, for the GUI tests: switch a tab by
//! clicking it, select a line of the browser, undo and redo with their keys, move the frame
//! slider, drag a box with Shift held. Each goes through egui's input, as a person's would.

use crate::gui::settle;
use egui::accesskit::Role;
use egui::{Key, Modifiers, PointerButton, Pos2};
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use endotwin::app::{App, Selection};

type H = Harness<'static, App>;

/// Clicks the tab titled `title` in the tab bar.
pub(crate) fn click_tab(h: &mut H, title: &str) {
    h.get_by_role_and_label(Role::Button, title).click();
    settle(h);
}

/// Clicks the first line of the browser (or any widget) whose text starts with `text`.
pub(crate) fn click_line(h: &mut H, text: &str) {
    let node = h
        .query_all_by_label_contains(text)
        .find(|n| {
            n.accesskit_node()
                .label()
                .is_some_and(|l| l.starts_with(text))
        })
        .unwrap_or_else(|| panic!("no line starts with {text:?}"));
    node.click();
    settle(h);
}

/// Types `text` into the browser's Search field (emptied first), as a person does to bring a
/// case of a long list on screen.
pub(crate) fn search(h: &mut H, text: &str) {
    h.get_by_role_and_label(Role::TextInput, "Search").focus();
    settle(h);
    h.key_press_modifiers(Modifiers::COMMAND, Key::A);
    h.key_press(Key::Backspace);
    h.get_by_role_and_label(Role::TextInput, "Search")
        .type_text(text);
    settle(h);
}

/// Clicks the `n`-th image (from 0) offered to open (the viewer's grid, the Captions strip),
/// opening it large.
pub(crate) fn open_view(h: &mut H, n: usize) {
    h.query_all_by(|node| {
        node.role() == Role::Button && node.label().is_some_and(|l| l.starts_with("Open "))
    })
    .nth(n)
    .unwrap_or_else(|| panic!("the grid has no image {n}"))
    .click();
    settle(h);
}

/// Ctrl+Z.
pub(crate) fn undo(h: &mut H) {
    h.key_press_modifiers(Modifiers::COMMAND, Key::Z);
    settle(h);
}

/// Ctrl+Shift+Z.
pub(crate) fn redo(h: &mut H) {
    h.key_press_modifiers(Modifiers::COMMAND | Modifiers::SHIFT, Key::Z);
    settle(h);
}

/// Focuses the slider labelled `label` with the keyboard focus and presses the right (or
/// left) arrow `steps` times: each press moves an integer slider by one.
pub(crate) fn step_slider(h: &mut H, label: &str, steps: i32) {
    h.get_by(|n| n.role() == Role::Slider && n.label().as_deref() == Some(label))
        .focus();
    settle(h);
    let key = if steps >= 0 {
        Key::ArrowRight
    } else {
        Key::ArrowLeft
    };
    for _ in 0..steps.unsigned_abs() {
        h.key_press(key);
        settle(h);
    }
}

/// Holds Shift and drags the primary button from `from` to `to` in a few moves.
pub(crate) fn shift_drag(h: &mut H, from: Pos2, to: Pos2) {
    h.event(egui::Event::ModifiersChanged(Modifiers::SHIFT));
    h.hover_at(from);
    h.event(egui::Event::PointerButton {
        pos: from,
        button: PointerButton::Primary,
        pressed: true,
        modifiers: Modifiers::SHIFT,
    });
    settle(h);
    for k in 1..=4 {
        h.hover_at(from + (to - from) * (k as f32 / 4.0));
        settle(h);
    }
    h.event(egui::Event::PointerButton {
        pos: to,
        button: PointerButton::Primary,
        pressed: false,
        modifiers: Modifiers::SHIFT,
    });
    h.event(egui::Event::ModifiersChanged(Modifiers::NONE));
    settle(h);
}

/// Clicks the browser line of `selection` (a polyp, a video or an examination of `library`),
/// found by the code a person reads on it.
pub(crate) fn click_case(h: &mut H, library: &std::path::Path, selection: Selection) {
    use endotwin::store::{OpenMode, Store};
    let store = Store::open(library, OpenMode::Existing).unwrap();
    let line = match selection {
        Selection::Polyp(id) => {
            let code = store
                .polyps()
                .unwrap()
                .into_iter()
                .find(|p| p.id == id)
                .unwrap()
                .code;
            format!("{code}  ")
        }
        Selection::Video(id) => {
            let code = store
                .videos()
                .unwrap()
                .into_iter()
                .find(|v| v.id == id)
                .unwrap()
                .code;
            format!("Video {code}")
        }
        Selection::Examination(id) => {
            format!("{}  ·", store.examination(id).unwrap().unwrap().code)
        }
        other => panic!("no browser line for {other:?}"),
    };
    drop(store);
    click_line(h, &line);
}
