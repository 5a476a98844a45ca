//! The details panel: fields, attributes, pathology labelling, report sentences, audit history.

use super::super::Command;
use super::super::state::{AppState, Selection};

/// Histology values offered when correcting a polyp's pathology.
pub const HISTOLOGIES: [&str; 6] = [
    "hyperplastic",
    "sessile serrated",
    "tubular adenoma LG",
    "tubular adenoma HG",
    "carcinoma",
    "unknown",
];

pub fn draw(ui: &mut egui::Ui, state: &AppState, out: &mut Vec<Command>) {
    let d = &state.details;
    ui.heading("Details");
    if state.selection == Selection::Nothing {
        ui.label("Nothing selected.");
        return;
    }
    egui::ScrollArea::vertical()
        .auto_shrink([false, false])
        .show(ui, |ui| {
            ui.strong(&d.title);
            egui::Grid::new("fields")
                .num_columns(2)
                .striped(true)
                .show(ui, |ui| {
                    for (k, v) in &d.fields {
                        ui.label(k);
                        ui.label(v);
                        ui.end_row();
                    }
                });
            if !d.attributes.is_empty() {
                ui.separator();
                ui.strong("Attributes");
                egui::Grid::new("attrs")
                    .num_columns(2)
                    .striped(true)
                    .show(ui, |ui| {
                        for (k, v) in &d.attributes {
                            ui.label(k);
                            ui.label(v);
                            ui.end_row();
                        }
                    });
            }
            if let Some(p) = &d.polyp {
                ui.separator();
                let label = ui.strong("Pathology label").id;
                let read_only = state.library.as_ref().is_none_or(|l| l.read_only);
                ui.add_enabled_ui(!read_only, |ui| {
                    let current = p.histology.clone().unwrap_or_else(|| "unknown".into());
                    let mut chosen = current.clone();
                    egui::ComboBox::from_id_salt("histology-label")
                        .selected_text(&chosen)
                        .show_ui(ui, |ui| {
                            for h in HISTOLOGIES {
                                ui.selectable_value(&mut chosen, h.to_string(), h);
                            }
                        })
                        .response
                        .labelled_by(label);
                    if chosen != current {
                        out.push(Command::SetPolypLabel {
                            polyp_id: p.id,
                            key: "histology".into(),
                            value: Some(chosen),
                        });
                    }
                });
                ui.label(format!(
                    "changes are signed \"{}\" (status bar)",
                    state.reviewer
                ));
            }
            if !d.sentences.is_empty() {
                ui.separator();
                ui.strong("Report");
                for s in &d.sentences {
                    ui.label(format!("• {}", s.text));
                }
            }
            let caption = state
                .focused
                .and_then(|i| d.captions.get(i))
                .and_then(Option::as_ref);
            if let Some(media) = state.focused.and_then(|i| d.media.get(i)) {
                ui.separator();
                ui.strong("Image");
                egui::Grid::new("media").num_columns(2).show(ui, |ui| {
                    ui.label("Size");
                    ui.label(format!(
                        "{}×{} px, {:.0} kB",
                        media.width,
                        media.height,
                        media.bytes as f64 / 1e3
                    ));
                    ui.end_row();
                    ui.label("Source");
                    ui.label(&media.source_path);
                    ui.end_row();
                    if let Some(at) = &media.captured_at {
                        ui.label("Captured");
                        ui.label(at);
                        ui.end_row();
                    }
                    let drawn = state.focused.and_then(|i| d.view_boxes.get(i)).copied();
                    if let Some(drawn) = drawn {
                        ui.label("Polyp box");
                        ui.label(match drawn {
                            Some(b) => format!("{} (drawn)", super::super::labelling::view_box_text(b)),
                            None if media.mask_media_id.is_some() => "its mask's box".into(),
                            None => "none: the centred field of view".into(),
                        });
                        ui.end_row();
                    }
                    ui.label("SHA-256");
                    ui.monospace(&media.hash[..16]);
                    ui.end_row();
                    if let Some((raw, refined)) = caption {
                        ui.label("Finding");
                        ui.label(raw);
                        ui.end_row();
                        ui.label("Caption").on_hover_text(
                            "The finding refined: its clinical entities in canonical order (assets/capsule_entities.toml); the finding itself is kept as written",
                        );
                        ui.label(&refined.caption);
                        ui.end_row();
                        ui.label("Category");
                        ui.label(&refined.category);
                        ui.end_row();
                    }
                });
            }
            if d.polyp.is_some() {
                ui.separator();
                ui.strong("Audit history");
                if d.audit.is_empty() {
                    ui.label("No label changes yet.");
                }
                for a in &d.audit {
                    ui.label(format!(
                        "{}  {} set {}: {} -> {}",
                        a.at,
                        a.who,
                        a.key,
                        a.old_value.as_deref().unwrap_or("—"),
                        a.new_value.as_deref().unwrap_or("—")
                    ));
                }
            }
        });
}
