//! The digital-twin panel: the query's views, the top-k twins as cards, the diagnosis vote as
//! a bar of shares, a pinned twin beside the query, and the 2-D map of the library.

use super::super::Command;
use super::super::state::{AppState, Selection};
use super::super::textures::Textures;
use super::twin_map::pathology_colour;
use crate::engine::TwinQuery;
use crate::engine::loader::ImageKey;
use crate::retrieval::Vote;
use crate::twins::Search;
use egui::{Color32, RichText};

const CARD_THUMB: f32 = 96.0;

pub fn draw(ui: &mut egui::Ui, state: &AppState, textures: &mut Textures, out: &mut Vec<Command>) {
    if state.library.is_none() {
        ui.label("Open a library to retrieve digital twins from.");
        return;
    };
    let panel = &state.twins;
    controls(ui, state, out);
    ui.separator();
    if let Some(problem) = &panel.problem {
        ui.colored_label(Color32::from_rgb(220, 160, 40), problem);
        if problem.contains("index") && ui.button("Index the library now").clicked() {
            out.push(Command::IndexTwins);
        }
        ui.add_space(8.0);
    }
    let Some(answer) = &panel.answer else {
        if panel.running.is_some() {
            ui.spinner();
        } else if panel.problem.is_none() {
            ui.label("Select a polyp in the browser (or open images) and press Retrieve.");
        }
        return;
    };
    egui::ScrollArea::vertical().show(ui, |ui| {
        ui.horizontal(|ui| {
            ui.strong("Query");
            ui.label(format!(
                "{} of {} indexed polyps, model {}, {:.0} ms",
                answer.result.twins.len(),
                answer.indexed,
                answer.version,
                answer.millis
            ));
        });
        match &answer.query {
            TwinQuery::Media { exclude_polyps, .. } if exclude_polyps.len() > 1 => {
                ui.label(
                    RichText::new(format!(
                        "Query: the {} picked polyps together (all their views as one query;                          none of them is a twin). Selecting a case ends the group query.",
                        exclude_polyps.len()
                    ))
                    .strong(),
                );
            }
            _ if matches!(state.selection, Selection::Polyp(_)) => {
                choose_views(ui, state, textures, out);
            }
            _ => query_views(ui, &answer.query, textures),
        }
        // Say how the encoder cut the query: around the polyp, or the whole field of view,
        // and whether each cut was read at several quarter turns.
        let cut = match &answer.query {
                TwinQuery::Media { .. } => {
                    "Each view is cut around its polyp mask (the centred field of view when a \
                     view has none)."
                }
                TwinQuery::Files { boxes, .. } if boxes.iter().all(Option::is_some) => {
                    "Each opened image is cut around the polyp box drawn on it."
                }
                TwinQuery::Files { .. } => {
                    "An opened image without a polyp box is encoded as its centred field of \
                     view: open it in the viewer and Shift+drag a box around the polyp (on \
                     the command line, --box x,y,w,h)."
                }
            };
        let turned = match answer.turns {
            1 => String::new(),
            t => format!(
                " Each cut is read at {t} quarter turns, embeddings averaged: the \
                 endoscope's roll does not change the twins."
            ),
        };
        ui.label(RichText::new(format!("{cut}{turned}")).small().weak());
        ui.add_space(6.0);
        let vote = if panel.weighted {
            &answer.result.weighted_vote
        } else {
            &answer.result.vote
        };
        ui.horizontal(|ui| {
            super::trust::badge(ui, answer.familiarity.as_ref(), "The twin image encoder");
        });
        vote_bar(ui, vote);
        match (answer.vote_confidence, answer.result.vote.winner()) {
            (Some(c), Some(w)) if !panel.weighted => {
                ui.label(format!(
                    "Confidence in {w}: {:.0}% (calibrated on validation votes)",
                    c * 100.0
                ))
                .on_hover_text(
                    "How often a vote like this one was right on validation polyps (isotonic \
                     calibration of the winner's share, stored with the model). The shares \
                     above are counts of twins, not probabilities.",
                );
            }
            _ => {
                ui.label(
                    RichText::new("Shares of the twins' votes (not calibrated probabilities)")
                        .small()
                        .weak(),
                );
            }
        }
        ui.add_space(6.0);
        ui.strong("Twins");
        // Rows of as many cards as fit: a frame's size is known only after it is drawn, so
        // egui's own wrapping cannot place them.
        let card_width = CARD_THUMB * 2.0 + 30.0;
        let per_row = ((ui.available_width() + 8.0) / (card_width + 8.0))
            .floor()
            .max(1.0) as usize;
        let twins: Vec<_> = answer.result.twins.iter().enumerate().collect();
        for row in twins.chunks(per_row) {
            ui.horizontal(|ui| {
                for (rank, twin) in row {
                    card(
                        ui,
                        textures,
                        *rank,
                        twin,
                        answer.result.bits,
                        panel.pinned,
                        out,
                    );
                }
            });
        }
        if panel.pinned.is_some() {
            ui.add_space(8.0);
            ui.separator();
            side_by_side(
                ui,
                textures,
                &answer.query,
                panel.pinned_views.as_ref(),
                out,
            );
        }
        ui.add_space(8.0);
        ui.separator();
        super::twin_map::draw(ui, state, answer, out);
    });
}

fn controls(ui: &mut egui::Ui, state: &AppState, out: &mut Vec<Command>) {
    let panel = &state.twins;
    ui.horizontal_wrapped(|ui| {
        let can_query = matches!(state.selection, Selection::Polyp(_))
            || (state.selection == Selection::OpenedFiles && !state.opened_files.is_empty());
        if ui
            .add_enabled(can_query, egui::Button::new("Retrieve twins"))
            .clicked()
        {
            out.push(Command::RetrieveTwins);
        }
        if panel.running.is_some() {
            ui.spinner();
        }
        ui.separator();
        let k_label = ui.label("k");
        let mut k = panel.k;
        let r = ui
            .add(egui::DragValue::new(&mut k).range(1..=50))
            .labelled_by(k_label.id);
        if r.changed() {
            out.push(Command::SetTwinK(k));
        }
        ui.separator();
        for (search, name) in [
            (Search::Shortlist, "codes, cosine re-rank"),
            (Search::Cosine, "cosine"),
            (Search::Hamming, "Hamming codes"),
            (Search::Asymmetric, "codes, float query"),
        ] {
            if ui.selectable_label(panel.search == search, name).clicked() && panel.search != search
            {
                out.push(Command::SetTwinSearch(search));
            }
        }
        ui.separator();
        let mut weighted = panel.weighted;
        if ui
            .checkbox(&mut weighted, "similarity-weighted vote")
            .changed()
        {
            out.push(Command::SetTwinWeighted(weighted));
        }
        let mut auto = panel.auto;
        if ui.checkbox(&mut auto, "retrieve on selection").changed() {
            out.push(Command::SetTwinAuto(auto));
        }
        ui.separator();
        let writable = state.library.as_ref().is_some_and(|l| !l.read_only);
        if ui
            .add_enabled(writable, egui::Button::new("Re-index"))
            .on_hover_text("Encode library polyps that changed since the last index")
            .clicked()
        {
            out.push(Command::IndexTwins);
        }
    });
}

/// The selected polyp's views; clicking one leaves it out of the query (or back in).
fn choose_views(
    ui: &mut egui::Ui,
    state: &AppState,
    textures: &mut Textures,
    out: &mut Vec<Command>,
) {
    ui.horizontal_wrapped(|ui| {
        for m in &state.details.media {
            let left_out = state.twins.left_out.contains(&m.id);
            let Some(t) = textures.thumbnail(m.id) else {
                ui.allocate_exact_size(egui::vec2(CARD_THUMB, CARD_THUMB), egui::Sense::hover());
                continue;
            };
            let tint = if left_out {
                Color32::from_gray(70)
            } else {
                Color32::WHITE
            };
            let r = ui
                .add(
                    egui::Image::new(&t)
                        .fit_to_exact_size(egui::vec2(CARD_THUMB, CARD_THUMB))
                        .tint(tint)
                        .sense(egui::Sense::click()),
                )
                .on_hover_text(if left_out {
                    "left out of the query: click to use it"
                } else {
                    "in the query: click to leave it out"
                });
            if r.clicked() {
                out.push(Command::ToggleTwinView(m.id));
            }
        }
    });
}

fn query_views(ui: &mut egui::Ui, query: &TwinQuery, textures: &mut Textures) {
    ui.horizontal(|ui| match query {
        TwinQuery::Media { ids, .. } => {
            for id in ids {
                thumb(ui, textures, *id, CARD_THUMB);
            }
        }
        TwinQuery::Files { paths, .. } => {
            for p in paths {
                let key = ImageKey::File(p.clone());
                match textures.full(&key) {
                    Some(Ok(t)) => {
                        ui.add(
                            egui::Image::new(t)
                                .fit_to_exact_size(egui::vec2(CARD_THUMB, CARD_THUMB)),
                        );
                    }
                    _ => {
                        ui.allocate_exact_size(
                            egui::vec2(CARD_THUMB, CARD_THUMB),
                            egui::Sense::hover(),
                        );
                    }
                }
            }
        }
    });
}

fn thumb(ui: &mut egui::Ui, textures: &mut Textures, media_id: i64, side: f32) {
    match textures.thumbnail(media_id) {
        Some(t) => {
            ui.add(egui::Image::new(&t).fit_to_exact_size(egui::vec2(side, side)));
        }
        None => {
            ui.allocate_exact_size(egui::vec2(side, side), egui::Sense::hover());
        }
    }
}

/// The vote as one bar split into shares, with a legend; the winner first.
fn vote_bar(ui: &mut egui::Ui, vote: &Vote) {
    let Some(winner) = vote.winner() else {
        return;
    };
    ui.horizontal(|ui| {
        ui.strong("Diagnosis vote:");
        ui.label(
            RichText::new(format!("{winner} ({:.0}%)", vote.share(winner) * 100.0))
                .color(pathology_colour(winner))
                .strong(),
        );
    });
    let width = ui.available_width().min(600.0);
    let (rect, _) = ui.allocate_exact_size(egui::vec2(width, 18.0), egui::Sense::hover());
    let mut x = rect.left();
    for (label, share) in &vote.shares {
        let w = rect.width() * *share as f32;
        let r = egui::Rect::from_min_size(egui::pos2(x, rect.top()), egui::vec2(w, rect.height()));
        ui.painter().rect_filled(r, 0.0, pathology_colour(label));
        x += w;
    }
    ui.horizontal_wrapped(|ui| {
        for (label, share) in &vote.shares {
            let (r, _) = ui.allocate_exact_size(egui::vec2(10.0, 10.0), egui::Sense::hover());
            ui.painter().rect_filled(r, 1.0, pathology_colour(label));
            ui.label(format!("{label} {:.0}%", share * 100.0));
        }
    });
}

#[allow(clippy::too_many_arguments)]
fn card(
    ui: &mut egui::Ui,
    textures: &mut Textures,
    rank: usize,
    twin: &crate::twins::Twin,
    bits: usize,
    pinned: Option<i64>,
    out: &mut Vec<Command>,
) {
    let p = &twin.polyp;
    let histology = p.histology.clone().unwrap_or_else(|| "unknown".into());
    egui::Frame::group(ui.style())
        .stroke(egui::Stroke::new(2.0, pathology_colour(&histology)))
        .show(ui, |ui| {
            ui.set_width(CARD_THUMB * 2.0 + 12.0);
            ui.vertical(|ui| {
                ui.horizontal(|ui| {
                    for id in twin.views.iter().take(2) {
                        thumb(ui, textures, *id, CARD_THUMB);
                    }
                });
                ui.label(RichText::new(format!("#{} {}", rank + 1, p.code)).strong());
                ui.label(
                    RichText::new(match p.vienna_class {
                        Some(v) => format!("{histology} (Vienna {v})"),
                        None => histology.clone(),
                    })
                    .color(pathology_colour(&histology)),
                );
                ui.label(format!(
                    "{} mm, {}",
                    p.size_mm.map_or("?".into(), |s| format!("{s:.0}")),
                    p.location.as_deref().unwrap_or("location unknown")
                ));
                ui.label(format!(
                    "similarity {:.3} · Hamming {}/{bits}",
                    twin.similarity, twin.hamming
                ));
                ui.horizontal(|ui| {
                    if ui.button("Open case").clicked() {
                        out.push(Command::Select(Selection::Polyp(p.id)));
                        out.push(Command::ShowTab(super::super::state::Tab::VIEWER));
                    }
                    let is_pinned = pinned == Some(p.id);
                    if ui.selectable_label(is_pinned, "Pin").clicked() {
                        out.push(Command::PinTwin(if is_pinned { None } else { Some(p.id) }));
                    }
                });
            });
        });
}

fn side_by_side(
    ui: &mut egui::Ui,
    textures: &mut Textures,
    query: &TwinQuery,
    pinned: Option<&(String, Vec<i64>)>,
    out: &mut Vec<Command>,
) {
    let side = 180.0;
    ui.horizontal(|ui| {
        ui.strong("Side by side");
        if ui.button("Unpin").clicked() {
            out.push(Command::PinTwin(None));
        }
    });
    ui.columns(2, |cols| {
        cols[0].label("Query");
        cols[0].horizontal_wrapped(|ui| match query {
            TwinQuery::Media { ids, .. } => {
                for id in ids {
                    thumb(ui, textures, *id, side);
                }
            }
            TwinQuery::Files { paths, .. } => {
                for p in paths {
                    ui.label(p.display().to_string());
                }
            }
        });
        let (code, views) = pinned.map_or(("", &[][..]), |(c, v)| (c.as_str(), &v[..]));
        cols[1].label(format!("Twin {code}"));
        cols[1].horizontal_wrapped(|ui| {
            for id in views {
                thumb(ui, textures, *id, side);
            }
        });
    });
}
