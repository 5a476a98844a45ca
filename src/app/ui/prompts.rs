//! The Text prompts panel (Endo-CLIP, METHODS §1): a text search of the library's polyps; the
//! prompt sets (shipped, and the user's own, saved with the library) with editable prompts;
//! and for the selection (a polyp's views, a frame, opened images) each prompt's score, the
//! softmax over the set as a bar and the raw cosine, with the model that made them named.

use super::super::Command;
use super::super::prompts::PromptCommand;
use super::super::state::AppState;
use super::super::textures::Textures;
use crate::prompts::query::{FrameKey, PromptScore};
use egui::Color32;

const THUMB: f32 = 72.0;

pub fn draw(ui: &mut egui::Ui, state: &AppState, textures: &mut Textures, out: &mut Vec<Command>) {
    let panel = &state.prompts;
    model_row(ui, state, out);
    search(ui, state, textures, out);
    ui.separator();
    if let Some(problem) = &panel.problem {
        ui.colored_label(Color32::from_rgb(230, 160, 60), problem);
    }
    egui::ScrollArea::vertical()
        .id_salt("prompts-scroll")
        .auto_shrink([false, false])
        .show(ui, |ui| {
            prompt_set(ui, state, out);
            ui.separator();
            scores(ui, state, textures);
        });
}

fn model_row(ui: &mut egui::Ui, state: &AppState, out: &mut Vec<Command>) {
    let panel = &state.prompts;
    ui.horizontal(|ui| {
        let label = ui.label("Model:").id;
        if panel.models.is_empty() {
            ui.colored_label(
                Color32::from_rgb(230, 160, 60),
                "no text-prompt model in the models folder (train one: `endotwin train prompts`)",
            );
            return;
        }
        egui::ComboBox::from_id_salt("prompt-model")
            .selected_text(&panel.model)
            .show_ui(ui, |ui| {
                for m in &panel.models {
                    if ui.selectable_label(*m == panel.model, m).clicked() {
                        out.push(Command::Prompts(PromptCommand::ChooseModel(m.clone())));
                    }
                }
            })
            .response
            .labelled_by(label);
        // The set names the model it is for: say which scores it, and when the user overrode.
        let scoring = panel.scoring_model();
        match panel.sets.get(panel.set).map(|s| s.model_name()) {
            Some(own) if own != scoring => {
                ui.colored_label(
                    Color32::from_rgb(230, 160, 60),
                    format!("this set is for `{own}`; scored with `{scoring}` as you chose"),
                )
                .on_hover_text("Pick the set again to score it with its own model");
            }
            Some(_) => {
                ui.weak(format!("the set is scored by its own model (`{scoring}`)"))
                    .on_hover_text("Search uses the model chosen here");
            }
            None => {}
        }
    });
}

fn search(ui: &mut egui::Ui, state: &AppState, textures: &mut Textures, out: &mut Vec<Command>) {
    let id = ui.make_persistent_id("prompt-search");
    let mut text: String = ui.data_mut(|d| d.get_temp::<String>(id).unwrap_or_default());
    ui.horizontal(|ui| {
        let label = ui.label("Search polyps by text:").id;
        let edit = ui
            .add(
                egui::TextEdit::singleline(&mut text)
                    .desired_width(420.0)
                    .hint_text("e.g. a pedunculated polyp with a stalk in the sigmoid"),
            )
            .labelled_by(label);
        let enter = edit.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
        if ui.button("Search").clicked() || enter {
            out.push(Command::Prompts(PromptCommand::Search(text.clone())));
        }
        if state.prompts.searching.is_some() {
            ui.spinner();
            ui.label("encoding the library where needed, then searching...");
        }
    });
    ui.data_mut(|d| d.insert_temp(id, text));
    let Some(found) = &state.prompts.search else {
        return;
    };
    let encoded = if found.encoded > 0 {
        format!(" (encoded {} frames first)", found.encoded)
    } else {
        String::new()
    };
    ui.label(format!(
        "\"{}\": best {} polyps by {}{encoded}",
        found.text,
        found.hits.len(),
        found.model
    ));
    egui::ScrollArea::horizontal()
        .id_salt("prompt-hits")
        .show(ui, |ui| {
            ui.horizontal(|ui| {
                for hit in &found.hits {
                    ui.vertical(|ui| {
                        ui.set_max_width(THUMB + 8.0);
                        let r = match textures.thumbnail(hit.media_id) {
                            Some(t) => ui.add(
                                egui::Image::new(&t)
                                    .fit_to_exact_size(egui::vec2(THUMB, THUMB))
                                    .sense(egui::Sense::click()),
                            ),
                            None => {
                                ui.allocate_exact_size(
                                    egui::vec2(THUMB, THUMB),
                                    egui::Sense::click(),
                                )
                                .1
                            }
                        };
                        let open = ui.small_button(format!("{:.2} {}", hit.score, hit.code));
                        ui.small(hit.histology.as_deref().unwrap_or("histology unknown"));
                        if r.on_hover_text("open this polyp").clicked() || open.clicked() {
                            out.push(Command::Prompts(PromptCommand::OpenPolyp(hit.polyp_id)));
                        }
                    });
                }
            });
        });
}

fn prompt_set(ui: &mut egui::Ui, state: &AppState, out: &mut Vec<Command>) {
    let panel = &state.prompts;
    ui.horizontal(|ui| {
        let label = ui.label("Prompt set:").id;
        let shown = panel.sets.get(panel.set).map_or("", |s| s.name.as_str());
        egui::ComboBox::from_id_salt("prompt-set")
            .selected_text(shown)
            .show_ui(ui, |ui| {
                for (i, s) in panel.sets.iter().enumerate() {
                    if ui.selectable_label(i == panel.set, &s.name).clicked() {
                        out.push(Command::Prompts(PromptCommand::ChooseSet(i)));
                    }
                }
            })
            .response
            .labelled_by(label);
    });
    let Some(set) = panel.sets.get(panel.set) else {
        return;
    };
    for (i, prompt) in set.prompts.iter().enumerate() {
        let id = ui.make_persistent_id(("prompt-edit", panel.set, i));
        let mut text: String = ui.data_mut(|d| d.get_temp::<String>(id).unwrap_or(prompt.clone()));
        ui.horizontal(|ui| {
            let class = set
                .classes
                .get(i)
                .map_or(String::new(), |c| format!(" ({c})"));
            let label = ui.label(format!("{}{class}", i + 1)).id;
            let edit = ui
                .add(
                    egui::TextEdit::singleline(&mut text)
                        .desired_width((ui.available_width() - 150.0).clamp(120.0, 520.0)),
                )
                .labelled_by(label);
            if edit.lost_focus() && text != *prompt {
                out.push(Command::Prompts(PromptCommand::EditPrompt {
                    index: i,
                    text: text.clone(),
                }));
            }
            if set.prompts.len() > 1
                && ui
                    .small_button("remove")
                    .on_hover_text("remove this prompt")
                    .clicked()
            {
                out.push(Command::Prompts(PromptCommand::RemovePrompt(i)));
            }
        });
        if text == *prompt {
            ui.data_mut(|d| d.remove::<String>(id));
        } else {
            ui.data_mut(|d| d.insert_temp(id, text));
        }
    }
    ui.horizontal(|ui| {
        if ui.button("Add prompt").clicked() {
            out.push(Command::Prompts(PromptCommand::AddPrompt));
        }
        if ui
            .button("Score")
            .on_hover_text("score the set for the selection again")
            .clicked()
        {
            out.push(Command::Prompts(PromptCommand::Score));
        }
    });
    let id = ui.make_persistent_id("new-set-name");
    let mut name: String = ui.data_mut(|d| d.get_temp::<String>(id).unwrap_or_default());
    ui.horizontal(|ui| {
        let label = ui.label("New set:").id;
        ui.add(
            egui::TextEdit::singleline(&mut name)
                .desired_width(160.0)
                .hint_text("name"),
        )
        .labelled_by(label);
        if ui.button("Create (copy of this set)").clicked() {
            out.push(Command::Prompts(PromptCommand::NewSet(name.clone())));
            name.clear();
        }
    });
    ui.data_mut(|d| d.insert_temp(id, name));
    ui.weak("Edits are saved with the library (prompt_sets.toml beside it).");
}

fn scores(ui: &mut egui::Ui, state: &AppState, textures: &mut Textures) {
    let panel = &state.prompts;
    if panel.running.is_some() {
        ui.horizontal(|ui| {
            ui.spinner();
            ui.label("scoring...");
        });
    }
    let Some(scored) = &panel.scores else {
        if panel.running.is_none() {
            ui.label("Select a polyp, a frame or open images to score the prompts.");
        }
        return;
    };
    ui.horizontal(|ui| {
        ui.weak(format!("model: {}", scored.model));
        super::trust::badge(ui, scored.familiarity.as_ref(), &scored.model);
    });
    ui.label(
        egui::RichText::new(
            "Scores: softmax over the set's prompts (not calibrated probabilities)",
        )
        .small()
        .weak(),
    );
    if let Some(together) = &scored.together {
        ui.strong(format!("All {} shown images together", scored.frames.len()));
        bars(ui, "together", together);
        ui.add_space(8.0);
    }
    let focused = state
        .focused
        .and_then(|i| state.details.media.get(i))
        .map(|m| FrameKey::Media(m.id));
    let shown = scored
        .frames
        .iter()
        .enumerate()
        .find(|(_, (k, _))| Some(k) == focused.as_ref())
        .or(scored.frames.first().map(|f| (0, f)));
    if let Some((i, (key, s))) = shown {
        let name = match key {
            FrameKey::Media(id) => state
                .details
                .media
                .iter()
                .find(|m| m.id == *id)
                .map_or(format!("media {id}"), |m| m.source_path.clone()),
            FrameKey::File(p) => p.display().to_string(),
        };
        ui.strong(format!("This image: {name}"));
        ui.horizontal_top(|ui| {
            let texture = match key {
                FrameKey::Media(id) => textures.thumbnail(*id),
                FrameKey::File(_) => None,
            };
            if let Some(t) = texture {
                ui.add(egui::Image::new(&t).fit_to_exact_size(egui::vec2(96.0, 96.0)));
            }
            ui.vertical(|ui| {
                bars(ui, "focused", s);
                if let Some(reading) = &scored.polyp {
                    polyp_line(ui, reading, i);
                }
            });
        });
    }
}

fn bars(ui: &mut egui::Ui, id: &str, scores: &[PromptScore]) {
    egui::Grid::new(("prompt-bars", id))
        .num_columns(3)
        .show(ui, |ui| {
            for s in scores {
                ui.add(
                    egui::ProgressBar::new(s.probability)
                        .desired_width(110.0)
                        .text(format!("{:.2}", s.probability)),
                );
                ui.monospace(format!("cos {:+.3}", s.cosine));
                ui.label(&s.prompt);
                ui.end_row();
            }
        });
}

/// A detector's polyp probability of the shown image: "confidence" only when its card's
/// calibration made it one.
fn polyp_line(ui: &mut egui::Ui, reading: &crate::prompts::trust::PolypReading, i: usize) {
    let Some(label) = reading.label(i) else {
        return;
    };
    let hover = match reading.calibrated {
        true => {
            "How often a frame given this confidence shows a polyp, on validation frames \
             (temperature calibration of the detector, stored with the model)."
        }
        false => {
            "This model's card stores no detector calibration: the number is the softmax of \
             its two sentences, not how often it is right."
        }
    };
    ui.label(label).on_hover_text(hover);
}
