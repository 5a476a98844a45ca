//! The case browser: search, filters, and examinations → polyps / videos with thumbnails.

use super::super::Command;
use super::super::listing::BrowserRow;
use super::super::state::CaseFilter;
use super::super::state::{AppState, ExamNode, Selection};
use super::super::textures::Textures;

const THUMB: f32 = 40.0;

pub fn draw(ui: &mut egui::Ui, state: &AppState, textures: &mut Textures, out: &mut Vec<Command>) {
    ui.heading("Cases");
    let Some(lib) = &state.library else {
        ui.label("No library is open.");
        if ui.button("Open library…").clicked() {
            out.push(Command::PickLibrary);
        }
        return;
    };
    filters(ui, state, out);
    ui.separator();
    let shown_polyps: usize = lib.tree.iter().map(|n| n.polyps.len()).sum();
    ui.label(format!(
        "{} examinations, {} polyps shown",
        lib.tree.len(),
        shown_polyps
    ));
    // Only the lines on screen are laid out (`show_rows`): every line is one height, and
    // the lines were worked out when the library or the filter last changed.
    let height = THUMB + ui.spacing().item_spacing.y;
    let mut area = egui::ScrollArea::vertical().auto_shrink([false, false]);
    // A selection made elsewhere (arrow keys, a twin, a search hit) is scrolled into view
    // once, when it changes and is off screen; a click in the list does not move the list.
    let memory = ui.scope_id().with("browser selection");
    // Before the first frame drew any line, the top screenful counts as visible.
    let first_screen = (0, (ui.available_height() / height) as usize);
    let (last, visible): (Option<Selection>, (usize, usize)) = ui
        .data(|d| d.get_temp(memory))
        .unwrap_or((None, first_screen));
    // The selection's line is looked for only when the selection changed, not every frame.
    if last != Some(state.selection)
        && let Some(at) = lib
            .rows
            .iter()
            .position(|r| lib.row_selection(*r) == state.selection)
        && !(visible.0..visible.1).contains(&at)
    {
        area = area.vertical_scroll_offset((at as f32 - 2.0).max(0.0) * height);
    }
    area.show_rows(ui, THUMB, lib.rows.len(), |ui, range| {
        ui.data_mut(|d| d.insert_temp(memory, (Some(state.selection), (range.start, range.end))));
        for r in &lib.rows[range] {
            match *r {
                BrowserRow::Exam(e) => exam_row(ui, state, &lib.tree[e], out),
                BrowserRow::Polyp(e, i) => {
                    let p = &lib.tree[e].polyps[i];
                    let text = format!(
                        "{}  {} · {} · {}",
                        p.code,
                        p.histology.as_deref().unwrap_or("unknown"),
                        p.size_mm
                            .map(|s| format!("{s:.0} mm"))
                            .unwrap_or_else(|| "? mm".into()),
                        p.location.as_deref().unwrap_or("?")
                    );
                    let sel = Selection::Polyp(p.id);
                    row(ui, state, textures, p.first_media_id, sel, text, out);
                }
                BrowserRow::Video(e, i) => {
                    let v = &lib.tree[e].videos[i];
                    let sel = Selection::Video(v.id);
                    let text = format!("Video {}  {} frames", v.code, v.frame_count);
                    row(ui, state, textures, v.first_media_id, sel, text, out);
                }
            }
        }
    });
}

/// An examination's line: its code and what it holds, as tall as a thumbnail line.
fn exam_row(ui: &mut egui::Ui, state: &AppState, node: &ExamNode, out: &mut Vec<Command>) {
    let sel = Selection::Examination(node.exam.id);
    let mut counts = vec![plural(node.polyps.len() as i64, "polyp")];
    if !node.videos.is_empty() {
        counts.push(plural(node.videos.len() as i64, "video"));
    }
    if node.loose_frame_count > 0 {
        counts.push(plural(node.loose_frame_count, "frame"));
    }
    let header = format!("{}  ·  {}", node.exam.code, counts.join(", "));
    ui.horizontal(|ui| {
        ui.set_height(THUMB);
        let r = ui.selectable_label(state.selection == sel, egui::RichText::new(header).strong());
        if r.clicked() {
            out.push(Command::Select(sel));
        }
    });
}

#[allow(clippy::too_many_arguments)]
fn row(
    ui: &mut egui::Ui,
    state: &AppState,
    textures: &mut Textures,
    media_id: Option<i64>,
    sel: Selection,
    text: String,
    out: &mut Vec<Command>,
) {
    ui.horizontal(|ui| {
        ui.set_height(THUMB);
        let tex = media_id.and_then(|id| textures.thumbnail(id));
        match tex {
            Some(t) => {
                ui.add(egui::Image::new(&t).fit_to_exact_size(egui::vec2(THUMB, THUMB)));
            }
            None => {
                ui.allocate_exact_size(egui::vec2(THUMB, THUMB), egui::Sense::hover());
            }
        }
        let picked = matches!(sel, Selection::Polyp(id) if state.picked.contains(&id));
        let text = if picked {
            egui::RichText::new(format!("[x] {text}")).color(egui::Color32::from_rgb(255, 220, 60))
        } else {
            egui::RichText::new(text)
        };
        let r = ui.selectable_label(state.selection == sel, text);
        let ctrl = ui.input(|i| i.modifiers.command);
        match sel {
            // Ctrl+click picks a polyp for a group action (or lets it go).
            Selection::Polyp(id) if r.clicked() && ctrl => out.push(Command::TogglePicked(id)),
            _ if r.clicked() => out.push(Command::Select(sel)),
            _ => {}
        }
    });
}

fn filters(ui: &mut egui::Ui, state: &AppState, out: &mut Vec<Command>) {
    let Some(lib) = &state.library else { return };
    let mut filter: CaseFilter = state.filter.clone();
    ui.horizontal(|ui| {
        let label = ui.label("Search").id;
        ui.add(
            egui::TextEdit::singleline(&mut filter.text)
                .hint_text("code, location, histology…")
                .desired_width(f32::INFINITY),
        )
        .labelled_by(label);
    });
    egui::Grid::new("filters").num_columns(2).show(ui, |ui| {
        let label = ui.label("Pathology").id;
        combo(
            ui,
            "histology",
            label,
            &mut filter.histology,
            &lib.histologies,
        );
        ui.end_row();
        let label = ui.label("Location").id;
        combo(ui, "location", label, &mut filter.location, &lib.locations);
        ui.end_row();
        ui.label("Size (mm)");
        ui.horizontal(|ui| {
            size_box(ui, &mut filter.min_size_mm, "min");
            ui.label("–");
            size_box(ui, &mut filter.max_size_mm, "max");
        });
        ui.end_row();
    });
    if filter != state.filter {
        out.push(Command::SetFilter(filter));
    }
}

fn combo(
    ui: &mut egui::Ui,
    id: &str,
    label: egui::Id,
    value: &mut Option<String>,
    options: &[String],
) {
    egui::ComboBox::from_id_salt(id)
        .selected_text(value.as_deref().unwrap_or("any"))
        .show_ui(ui, |ui| {
            ui.selectable_value(value, None, "any");
            for o in options {
                ui.selectable_value(value, Some(o.clone()), o);
            }
        })
        .response
        .labelled_by(label);
}

fn size_box(ui: &mut egui::Ui, value: &mut Option<f64>, hint: &str) {
    let mut v = value.unwrap_or(0.0);
    let mut on = value.is_some();
    ui.checkbox(&mut on, hint);
    if on {
        ui.add(egui::DragValue::new(&mut v).range(0.0..=100.0).speed(0.5));
    }
    *value = on.then_some(v);
}

fn plural(n: i64, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}
