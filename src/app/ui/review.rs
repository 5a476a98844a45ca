//! The review queue in the Labelling tab: the library's polyps in the order worth labelling
//! (the twin vote's uncertainty, the embedding's diversity, or both), each with its own label,
//! the vote, and how far it is from the cases above it. Clicking a case opens it; with "J / K
//! follow the queue" ticked the labelling keys walk the queue.

use super::super::Command;
use super::super::state::{AppState, Selection};
use crate::twins::review::QueueOrder;
use egui::{Color32, RichText};

pub fn draw(ui: &mut egui::Ui, state: &AppState, out: &mut Vec<Command>) {
    let panel = &state.labelling;
    ui.separator();
    ui.horizontal_wrapped(|ui| {
        ui.label(RichText::new("Review queue").strong());
        for order in QueueOrder::ALL {
            let chosen = panel.queue_order == order && !panel.queue.is_empty();
            if ui
                .add_enabled(
                    panel.queue_job.is_none(),
                    egui::Button::selectable(chosen, order.title()),
                )
                .on_hover_text("order the library's indexed polyps this way (twin vote of 6, and the active prompt model's benign-vs-neoplastic entropy when there is one)")
                .clicked()
            {
                out.push(Command::BuildReviewQueue(order));
            }
        }
        if panel.queue_job.is_some() {
            ui.spinner();
        }
        if !panel.queue.is_empty() {
            let mut follow = panel.follow_queue;
            if ui.checkbox(&mut follow, "J / K follow the queue").changed() {
                out.push(Command::FollowQueue(follow));
            }
        }
    });
    if panel.queue.is_empty() {
        ui.label(
            RichText::new(
                "Order the queue to label first what the models are least sure of (the twin \
                 vote's split) and what is least like the cases already queued.",
            )
            .small()
            .weak(),
        );
        return;
    }
    let selected = match state.selection {
        Selection::Polyp(id) => Some(id),
        _ => None,
    };
    ui.label(
        RichText::new(format!(
            "{} cases, {}, by the twin index of {}",
            panel.queue.len(),
            panel.queue_order.title(),
            panel.queue_version
        ))
        .small()
        .weak(),
    );
    egui::ScrollArea::vertical()
        .id_salt("review-queue")
        .max_height(220.0)
        .show(ui, |ui| {
            egui::Grid::new("review-queue-grid")
                .striped(true)
                .show(ui, |ui| {
                    for h in [
                        "#",
                        "polyp",
                        "label",
                        "twin vote",
                        "entropy",
                        "doubt",
                        "distance",
                    ] {
                        ui.label(RichText::new(h).strong());
                    }
                    ui.end_row();
                    for (rank, item) in panel.queue.iter().enumerate() {
                        ui.label((rank + 1).to_string());
                        let open = ui.selectable_label(selected == Some(item.polyp), &item.code);
                        if open.clicked() {
                            out.push(Command::Select(Selection::Polyp(item.polyp)));
                        }
                        let label = item.label.as_deref().unwrap_or("— unlabelled");
                        if item.disagrees() {
                            ui.colored_label(Color32::from_rgb(255, 170, 80), label)
                                .on_hover_text("the twin vote disagrees with this label");
                        } else {
                            ui.label(label);
                        }
                        ui.label(match &item.vote {
                            Some((winner, share)) => format!("{winner} {:.0} %", share * 100.0),
                            None => "no labelled neighbour".into(),
                        });
                        ui.label(
                            item.prompt_entropy
                                .map_or("—".into(), |h| format!("{h:.2}")),
                        );
                        ui.label(format!("{:.2}", item.uncertainty));
                        ui.label(format!("{:.3}", item.distance));
                        ui.end_row();
                    }
                });
        });
}
