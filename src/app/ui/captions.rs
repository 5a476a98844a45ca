//! The Captions panel (capsule captions, METHODS §2): for the selected capsule examination a
//! strip of its frames with their predicted categories; for the focused frame (or an opened
//! image) its top-5 captions with their shares, the category probabilities, and beside them
//! the finding as written with its refined caption and category when the library knows it;
//! above, a search of the library by a caption or a category.

use super::super::Command;
use super::super::captions::CaptionCommand;
use super::super::state::AppState;
use super::super::textures::Textures;
use crate::captions::query::{CaptionKey, FrameCaptions};
use crate::engine::loader::ImageKey;
use egui::{Color32, RichText};

const STRIP_THUMB: f32 = 72.0;
const LARGE: f32 = 220.0;

pub fn draw(ui: &mut egui::Ui, state: &AppState, textures: &mut Textures, out: &mut Vec<Command>) {
    let panel = &state.captions;
    search_bar(ui, state, textures, out);
    ui.separator();
    if let Some(problem) = &panel.problem {
        ui.colored_label(Color32::from_rgb(230, 160, 60), problem);
    }
    let keys = state.shown_frames(usize::MAX);
    if keys.is_empty() {
        ui.label("Select a capsule examination in the browser (or open capsule images) to see its frames' captions and categories.");
        return;
    }
    if panel.running.is_some() {
        ui.horizontal(|ui| {
            ui.spinner();
            ui.label("captioning the frames...");
        });
    }
    if let Some(model) = &panel.model {
        ui.weak(format!("caption model: {model}"));
    }
    egui::ScrollArea::vertical()
        .id_salt("captions-scroll")
        .auto_shrink([false, false])
        .show(ui, |ui| {
            strip(ui, state, &keys, textures, out);
            ui.separator();
            let focused = state.focused.and_then(|i| keys.get(i).map(|k| (i, k)));
            match focused {
                Some((i, key)) => frame_details(ui, state, i, key, textures),
                None => {
                    ui.label("Click a frame to see its top captions and category.");
                }
            }
        });
}

fn search_bar(
    ui: &mut egui::Ui,
    state: &AppState,
    textures: &mut Textures,
    out: &mut Vec<Command>,
) {
    let id = ui.make_persistent_id("caption-query");
    let mut text: String = ui.data_mut(|d| d.get_temp::<String>(id).unwrap_or_default());
    ui.horizontal(|ui| {
        let label = ui.label("Search frames by caption or category:").id;
        let edit = ui
            .add(egui::TextEdit::singleline(&mut text).hint_text("e.g. ulcer, fibrin  or  polyp"))
            .labelled_by(label);
        let enter = edit.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
        if ui.button("Search").clicked() || enter {
            out.push(Command::Captions(CaptionCommand::Search(text.clone())));
        }
        if state.captions.searching.is_some() {
            ui.spinner();
        }
    });
    ui.data_mut(|d| d.insert_temp(id, text));
    let Some(search) = &state.captions.search else {
        return;
    };
    ui.label(format!(
        "\"{}\" read as {}: best {} of {} capsule frames",
        search.query,
        search.read_as,
        search.hits.len(),
        search.searched
    ));
    egui::ScrollArea::horizontal()
        .id_salt("caption-hits")
        .show(ui, |ui| {
            ui.horizontal(|ui| {
                for hit in &search.hits {
                    ui.vertical(|ui| {
                        ui.set_max_width(STRIP_THUMB);
                        let clicked = match textures.thumbnail(hit.media_id) {
                            Some(t) => ui
                                .add(
                                    egui::Image::new(&t)
                                        .fit_to_exact_size(egui::vec2(STRIP_THUMB, STRIP_THUMB))
                                        .sense(egui::Sense::click()),
                                )
                                .on_hover_text("open this frame")
                                .clicked(),
                            None => {
                                ui.allocate_exact_size(
                                    egui::vec2(STRIP_THUMB, STRIP_THUMB),
                                    egui::Sense::hover(),
                                );
                                false
                            }
                        };
                        ui.small(format!("{:.2} {}", hit.score, hit.category));
                        if clicked {
                            out.push(Command::Captions(CaptionCommand::OpenHit {
                                examination: hit.examination,
                                media_id: hit.media_id,
                            }));
                        }
                    });
                }
            });
        });
}

/// The selection's frames with their predicted categories; a click focuses one.
fn strip(
    ui: &mut egui::Ui,
    state: &AppState,
    keys: &[CaptionKey],
    textures: &mut Textures,
    out: &mut Vec<Command>,
) {
    ui.horizontal_wrapped(|ui| {
        for (i, key) in keys.iter().enumerate() {
            let answer = state.captions.frames.get(key);
            // A known size lets the wrapping layout start a new row before it.
            let cell = egui::vec2(STRIP_THUMB, STRIP_THUMB + 22.0);
            ui.allocate_ui_with_layout(cell, egui::Layout::top_down(egui::Align::Min), |ui| {
                ui.set_max_width(STRIP_THUMB);
                let selected = state.focused == Some(i);
                let r = image(ui, key, STRIP_THUMB, textures);
                r.widget_info(|| {
                    egui::WidgetInfo::labeled(
                        egui::Role::Button,
                        true,
                        format!("Open frame {}", i + 1),
                    )
                });
                if selected {
                    ui.painter().rect_stroke(
                        r.rect.expand(2.0),
                        2.0,
                        egui::Stroke::new(2.0, Color32::from_rgb(90, 170, 250)),
                        egui::StrokeKind::Outside,
                    );
                }
                let text = answer.map_or("…".to_string(), |a| a.category.clone());
                ui.add(
                    egui::Label::new(
                        egui::RichText::new(text)
                            .small()
                            .color(category_colour(answer)),
                    )
                    .truncate(),
                );
                if r.clicked() {
                    out.push(Command::Focus(Some(i)));
                }
            });
        }
    });
}

fn category_colour(answer: Option<&FrameCaptions>) -> Color32 {
    match answer.map(|a| a.category.as_str()) {
        Some("normal") => Color32::from_gray(160),
        Some("inflammation") => Color32::from_rgb(240, 120, 90),
        Some("polyp") => Color32::from_rgb(120, 200, 120),
        Some(_) => Color32::from_rgb(240, 200, 90),
        None => Color32::from_gray(120),
    }
}

fn image(
    ui: &mut egui::Ui,
    key: &CaptionKey,
    side: f32,
    textures: &mut Textures,
) -> egui::Response {
    let texture = match key {
        CaptionKey::Media(id) => textures.thumbnail(*id),
        CaptionKey::File(p) => match textures.full(&ImageKey::File(p.clone())) {
            Some(Ok(t)) => Some(t.clone()),
            _ => None,
        },
    };
    match texture {
        Some(t) => ui.add(
            egui::Image::new(&t)
                .fit_to_exact_size(egui::vec2(side, side))
                .sense(egui::Sense::click()),
        ),
        None => {
            ui.allocate_exact_size(egui::vec2(side, side), egui::Sense::click())
                .1
        }
    }
}

fn frame_details(
    ui: &mut egui::Ui,
    state: &AppState,
    index: usize,
    key: &CaptionKey,
    textures: &mut Textures,
) {
    ui.horizontal_top(|ui| {
        let big = match key {
            CaptionKey::Media(id) => ImageKey::Media(*id),
            CaptionKey::File(p) => ImageKey::File(p.clone()),
        };
        match textures.full(&big) {
            Some(Ok(t)) => {
                ui.add(egui::Image::new(t).fit_to_exact_size(egui::vec2(LARGE, LARGE)));
            }
            _ => {
                ui.allocate_exact_size(egui::vec2(LARGE, LARGE), egui::Sense::hover());
            }
        }
        ui.vertical(|ui| {
            match state.captions.frames.get(key) {
                Some(answer) => {
                    ui.horizontal(|ui| {
                        super::trust::badge(ui, answer.familiarity.as_ref(), "The caption model");
                    });
                    ui.strong("Top captions");
                    egui::Grid::new("top-captions")
                        .num_columns(2)
                        .show(ui, |ui| {
                            for (caption, share) in &answer.captions {
                                ui.add(
                                    egui::ProgressBar::new(*share)
                                        .desired_width(90.0)
                                        .text(format!("{share:.2}")),
                                );
                                ui.label(caption);
                                ui.end_row();
                            }
                        });
                    ui.add_space(6.0);
                    ui.horizontal(|ui| {
                        ui.strong("Predicted category:");
                        ui.label(&answer.category);
                        if let Some(c) = answer.confidence {
                            ui.label(format!("confidence {:.0}% (calibrated)", c * 100.0))
                                .on_hover_text(
                                    "How often a category given with this confidence was right \
                                     on validation frames (temperature calibration of the \
                                     category head, stored with the model).",
                                );
                        }
                    });
                    ui.label(
                        RichText::new("Each category's head output (not calibrated):")
                            .small()
                            .weak(),
                    );
                    egui::Grid::new("category-probabilities")
                        .num_columns(2)
                        .show(ui, |ui| {
                            for (c, p) in &answer.category_probabilities {
                                ui.label(c);
                                ui.add(
                                    egui::ProgressBar::new(*p)
                                        .desired_width(90.0)
                                        .text(format!("{p:.2}")),
                                );
                                ui.end_row();
                            }
                        });
                }
                None if state.captions.running.is_some() => {
                    ui.label("captioning...");
                }
                None => {
                    ui.label("No captions for this frame yet.");
                }
            }
            if let Some(Some((raw, refined))) = state.details.captions.get(index) {
                ui.add_space(6.0);
                ui.strong("Ground truth (the library's finding)");
                egui::Grid::new("caption-truth")
                    .num_columns(2)
                    .show(ui, |ui| {
                        ui.label("Finding");
                        ui.label(raw);
                        ui.end_row();
                        ui.label("Refined caption");
                        ui.label(&refined.caption);
                        ui.end_row();
                        ui.label("Category");
                        ui.label(&refined.category);
                        ui.end_row();
                    });
            }
        });
    });
}
