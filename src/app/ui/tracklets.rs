//! The Tracklets panel: the selected video's frame on top (the viewer, with its slider), below
//! it the timeline: one lane per polyp the grouping infers, each tracklet a bar in its lane's
//! colour, re-identification links with their scores, the current frame as a line. Below the
//! timeline, the tracklet list and the selected tracklet's tools: its polyp label, split at
//! the current frame, and its links to accept, reject or merge. Every tool emits a command;
//! the edits are audited and undoable (Edit > Undo, Ctrl+Z).

use super::super::Command;
use super::super::choices::LinkCall;
use super::super::state::{AppState, Selection};
use super::super::textures::Textures;
use super::super::tracklets::decision_text;
use super::viewer;
use crate::tracklets::timeline::{Comparison, Timeline};
use egui::{Align2, Color32, FontId, Rect, RichText, Sense, Stroke, StrokeKind, pos2, vec2};

/// Okabe-Ito colours (the last, grey, for things in no group); the training plots use them too.
pub(super) const PALETTE: [Color32; 8] = [
    Color32::from_rgb(230, 159, 0),
    Color32::from_rgb(86, 180, 233),
    Color32::from_rgb(0, 158, 115),
    Color32::from_rgb(240, 228, 66),
    Color32::from_rgb(204, 121, 167),
    Color32::from_rgb(213, 94, 0),
    Color32::from_rgb(0, 114, 178),
    Color32::from_rgb(170, 170, 170),
];

const LANE: f32 = 24.0;
const LABEL_WIDTH: f32 = 96.0;

/// A group's colour; grey for tracklets in no group.
fn colour(group: Option<usize>) -> Color32 {
    group.map_or(Color32::from_gray(110), |g| {
        PALETTE[g % (PALETTE.len() - 1)]
    })
}

fn lane_name(g: usize) -> String {
    let letter = (b'A' + (g % 26) as u8) as char;
    if g < 26 {
        format!("polyp {letter}")
    } else {
        format!("polyp {letter}{}", g / 26)
    }
}

pub fn draw(ui: &mut egui::Ui, state: &AppState, textures: &mut Textures, out: &mut Vec<Command>) {
    let Selection::Video(video) = state.selection else {
        ui.add_space(24.0);
        ui.heading("Tracklet re-identification");
        ui.label(
            "Select a video in the browser: its tracklets appear on a timeline with their \
             re-identification links, the polyp count they add up to, and tools to merge, split \
             and accept or reject links.",
        );
        return;
    };
    let panel = &state.tracklets;
    let height = ui.available_height();
    ui.allocate_ui(
        vec2(ui.available_width(), (height * 0.48).max(160.0)),
        |ui| viewer::draw(ui, state, textures, out),
    );
    ui.separator();
    let Some(tl) = panel.timeline.as_ref().filter(|t| t.video_id == video) else {
        match &panel.problem {
            Some(p) => {
                ui.colored_label(Color32::LIGHT_RED, p);
                comparison_picker(ui, panel.comparison, out);
            }
            None => {
                ui.label("Comparing this video's tracklets…");
            }
        };
        return;
    };
    egui::ScrollArea::vertical()
        .id_salt("timeline")
        .auto_shrink([false, false])
        .show(ui, |ui| {
            header(
                ui,
                tl,
                (panel.threshold_for(tl), panel.comparison),
                panel.running.is_some(),
                out,
            );
            if tl.tracklets.is_empty() {
                return;
            }
            timeline(ui, tl, state, out);
            ui.add_space(6.0);
            tracklet_list(ui, tl, state, out);
            if let Some(i) = panel.selected.and_then(|t| tl.index_of(t)) {
                ui.separator();
                selected(ui, tl, i, state, out);
            }
        });
}

/// The choice of how tracklets are compared; `wanted` is the panel's.
fn comparison_picker(ui: &mut egui::Ui, wanted: Comparison, out: &mut Vec<Command>) {
    egui::ComboBox::from_label("compare by")
        .selected_text(wanted.title())
        .show_ui(ui, |ui| {
            for c in Comparison::ALL {
                if ui.selectable_label(c == wanted, c.title()).clicked() && c != wanted {
                    out.push(Command::SetTrackletComparison(c));
                }
            }
        });
}

fn header(
    ui: &mut egui::Ui,
    tl: &Timeline,
    (threshold, wanted): (f32, Comparison),
    busy: bool,
    out: &mut Vec<Command>,
) {
    ui.horizontal_wrapped(|ui| {
        ui.strong(format!(
            "{} · {} tracklets",
            tl.video_code,
            tl.tracklets.len()
        ));
        let mut t = threshold;
        let slider = egui::Slider::new(&mut t, 0.0..=1.0)
            .step_by(0.01)
            .text("link threshold");
        if ui.add(slider).changed() {
            out.push(Command::SetLinkThreshold(t));
        }
        comparison_picker(ui, wanted, out);
        if busy {
            ui.spinner();
        }
    });
    let inferred = tl.grouping(threshold).groups.len();
    let (labelled, unlabelled) = tl.labelled_count();
    let mut count = format!("Polyps: {inferred} by grouping at {threshold:.2}");
    if labelled > 0 {
        count += &format!(" · {labelled} in the library's labels");
        if unlabelled > 0 {
            count += &format!(" ({unlabelled} tracklets unlabelled)");
        }
    }
    ui.label(RichText::new(count).strong());
    ui.label(
        RichText::new(format!("Similarity: {}", tl.method))
            .small()
            .weak(),
    );
    for note in &tl.notes {
        ui.label(RichText::new(note).small().color(Color32::YELLOW));
    }
    // The answer's familiarity: the badge for its least familiar tracklet, and the count.
    if let Some(model) = &tl.judged_by {
        let familiarity = tl.familiarity_at(threshold);
        ui.horizontal_wrapped(|ui| {
            if familiarity.is_none() && tl.judged_with_statistics {
                ui.label(
                    RichText::new("no tracklet compared: none judged")
                        .small()
                        .weak(),
                );
                return;
            }
            super::trust::badge(ui, familiarity.as_ref().map(|f| &f.worst), model);
            if let Some(f) = &familiarity {
                ui.label(RichText::new(f.summary()).small());
            }
        });
    }
}

/// The lanes, bars, links and current-frame line; a click on a bar selects its tracklet, a
/// click or drag elsewhere moves the frame.
fn timeline(ui: &mut egui::Ui, tl: &Timeline, state: &AppState, out: &mut Vec<Command>) {
    let threshold = state.tracklets.threshold_for(tl);
    let grouping = tl.grouping(threshold);
    let group_of = grouping.group_of(tl.tracklets.len());
    let lanes = grouping.groups.len() + usize::from(!grouping.uncompared.is_empty());
    let lane_of = |i: usize| group_of[i].unwrap_or(grouping.groups.len());
    let width = ui.available_width().max(200.0);
    let (rect, response) = ui.allocate_exact_size(
        vec2(width, LANE * lanes as f32 + 34.0),
        Sense::click_and_drag(),
    );
    let painter = ui.painter_at(rect);
    // 14 px above the lanes for the scores of links in the first lane, 20 below for the axis.
    let track = Rect::from_min_max(
        rect.min + vec2(LABEL_WIDTH, 14.0),
        rect.max - vec2(4.0, 20.0),
    );
    let frames = tl.frame_count.max(1) as f32;
    let x_of = |frame: i64| track.left() + track.width() * (frame as f32 / frames);
    let bar = |i: usize| {
        let t = &tl.tracklets[i];
        let y = track.top() + LANE * lane_of(i) as f32;
        Rect::from_min_max(
            pos2(x_of(t.first_frame), y + 4.0),
            pos2(
                x_of(t.last_frame + 1).max(x_of(t.first_frame) + 3.0),
                y + LANE - 4.0,
            ),
        )
    };
    let text = ui.visuals().text_color();
    for g in 0..lanes {
        let y = track.top() + LANE * g as f32;
        let (name, count) = match grouping.groups.get(g) {
            Some(members) => (lane_name(g), members.len()),
            None => ("too short".to_string(), grouping.uncompared.len()),
        };
        painter.text(
            pos2(rect.left() + 4.0, y + LANE / 2.0),
            Align2::LEFT_CENTER,
            format!("{name} ({count})"),
            FontId::proportional(12.0),
            colour(Some(g).filter(|&g| g < grouping.groups.len())),
        );
        painter.line_segment(
            [pos2(track.left(), y + LANE), pos2(track.right(), y + LANE)],
            Stroke::new(0.5, Color32::from_gray(60)),
        );
    }
    for link in tl.links(threshold) {
        let (a, b) = (bar(link.a), bar(link.b));
        let colour = match link.decision.map(LinkCall::from) {
            Some(LinkCall::Accepted) => Color32::from_rgb(80, 200, 80),
            Some(LinkCall::Rejected) => Color32::from_rgb(220, 70, 70),
            None => Color32::from_gray(200),
        };
        let (from, to) = if a.center().x <= b.center().x {
            (a.right_center(), b.left_center())
        } else {
            (b.right_center(), a.left_center())
        };
        painter.line_segment([from, to], Stroke::new(1.5, colour));
        // A score where there is room for it (chained links in one lane would overprint).
        if let Some(score) = link.score.filter(|_| (to.x - from.x).abs() > 36.0) {
            painter.text(
                from + (to - from) * 0.5 - vec2(0.0, 6.0),
                Align2::CENTER_BOTTOM,
                format!("{score:.2}"),
                FontId::proportional(11.0),
                colour,
            );
        }
    }
    for (i, t) in tl.tracklets.iter().enumerate() {
        let r = bar(i);
        painter.rect_filled(r, 3.0, colour(group_of[i]));
        if state.tracklets.selected == Some(t.id) {
            painter.rect_stroke(r, 3.0, Stroke::new(2.0, text), StrokeKind::Outside);
        }
    }
    let current = state
        .focused
        .and_then(|i| state.details.frame_indices.get(i).copied());
    if let Some(frame) = current {
        let x = x_of(frame);
        painter.line_segment(
            [pos2(x, track.top()), pos2(x, track.bottom())],
            Stroke::new(1.5, Color32::WHITE),
        );
    }
    painter.text(
        pos2(track.left(), track.bottom() + 3.0),
        Align2::LEFT_TOP,
        "frame 0",
        FontId::proportional(11.0),
        Color32::GRAY,
    );
    painter.text(
        pos2(track.right(), track.bottom() + 3.0),
        Align2::RIGHT_TOP,
        format!("frame {}", tl.frame_count.saturating_sub(1)),
        FontId::proportional(11.0),
        Color32::GRAY,
    );
    let Some(pos) = response.interact_pointer_pos() else {
        return;
    };
    let hit = (0..tl.tracklets.len()).find(|&i| bar(i).expand(2.0).contains(pos));
    match hit {
        Some(i) if response.clicked() => out.push(Command::SelectTracklet(tl.tracklets[i].id)),
        _ if response.clicked() || response.dragged() => {
            let frame = ((pos.x - track.left()) / track.width() * frames).floor() as i64;
            let indices = &state.details.frame_indices;
            let at = indices.partition_point(|&f| f < frame.clamp(0, tl.frame_count));
            if !indices.is_empty() {
                out.push(Command::Focus(Some(at.min(indices.len() - 1))));
            }
        }
        _ => {}
    }
}

fn short(tl: &Timeline, i: usize) -> String {
    let t = &tl.tracklets[i];
    format!("T{} · frames {}–{}", t.id, t.first_frame, t.last_frame)
}

fn tracklet_list(ui: &mut egui::Ui, tl: &Timeline, state: &AppState, out: &mut Vec<Command>) {
    let grouping = tl.grouping(state.tracklets.threshold_for(tl));
    let group_of = grouping.group_of(tl.tracklets.len());
    ui.horizontal_wrapped(|ui| {
        ui.label("Tracklets:");
        for (i, t) in tl.tracklets.iter().enumerate() {
            let label = RichText::new(format!(
                "{} · {}",
                short(tl, i),
                t.polyp_code.as_deref().unwrap_or("no polyp")
            ))
            .color(colour(group_of[i]));
            let selected = state.tracklets.selected == Some(t.id);
            if ui.selectable_label(selected, label).clicked() {
                out.push(Command::SelectTracklet(t.id));
            }
        }
    });
}

fn selected(ui: &mut egui::Ui, tl: &Timeline, i: usize, state: &AppState, out: &mut Vec<Command>) {
    let t = &tl.tracklets[i];
    let writable = state.library.as_ref().is_some_and(|l| !l.read_only);
    ui.horizontal_wrapped(|ui| {
        ui.strong(format!("Tracklet {} ({} boxes)", short(tl, i), t.boxes));
        ui.label("polyp:");
        let current = t.polyp_code.clone().unwrap_or_else(|| "none".into());
        ui.add_enabled_ui(writable, |ui| {
            egui::ComboBox::from_id_salt(("tracklet polyp", t.id))
                .selected_text(current)
                .show_ui(ui, |ui| {
                    for (id, code) in &tl.polyps {
                        if ui.selectable_label(t.polyp_id == Some(*id), code).clicked() {
                            out.push(Command::AssignTracklet {
                                tracklet: t.id,
                                polyp: Some(*id),
                            });
                        }
                    }
                    if ui.selectable_label(false, "a new polyp").clicked() {
                        out.push(Command::NewPolypForTracklet(t.id));
                    }
                    if ui.selectable_label(t.polyp_id.is_none(), "none").clicked() {
                        out.push(Command::AssignTracklet {
                            tracklet: t.id,
                            polyp: None,
                        });
                    }
                });
        });
        let frame = state
            .focused
            .and_then(|f| state.details.frame_indices.get(f).copied());
        let inside = frame.filter(|&f| f > t.first_frame && f <= t.last_frame);
        let split = ui
            .add_enabled(
                writable && inside.is_some(),
                egui::Button::new(match inside {
                    Some(f) => format!("Split at frame {f}"),
                    None => "Split at the current frame".into(),
                }),
            )
            .on_disabled_hover_text(
                "Move the frame slider inside this tracklet (after its first frame).",
            );
        if let (true, Some(frame)) = (split.clicked(), inside) {
            out.push(Command::SplitTracklet {
                tracklet: t.id,
                frame,
            });
        }
    });
    // Every other tracklet by similarity; those at the threshold or above are links.
    let mut others: Vec<usize> = (0..tl.tracklets.len()).filter(|&j| j != i).collect();
    others.sort_by(|&a, &b| {
        let s = |j| tl.similarity(i, j).unwrap_or(f32::NEG_INFINITY);
        s(b).total_cmp(&s(a))
    });
    egui::Grid::new(("links", t.id))
        .striped(true)
        .show(ui, |ui| {
            ui.strong("other tracklet");
            ui.strong("similarity");
            ui.strong("decision");
            ui.strong("familiarity");
            ui.strong("");
            ui.end_row();
            for j in others {
                let o = &tl.tracklets[j];
                let score = tl.similarity(i, j);
                let link = score.is_some_and(|s| s >= state.tracklets.threshold_for(tl))
                    && !tl.overlap(i, j);
                ui.label(format!(
                    "{} · {}",
                    short(tl, j),
                    o.polyp_code.as_deref().unwrap_or("no polyp")
                ));
                let score_text = match score {
                    None => "too short".to_string(),
                    Some(s) if tl.overlap(i, j) => format!("{s:.3} · seen together"),
                    Some(s) => format!("{s:.3}"),
                };
                ui.label(if link {
                    RichText::new(format!("{score_text} · link")).strong()
                } else {
                    RichText::new(score_text)
                });
                let decision = tl.decision(i, j).map(LinkCall::from);
                ui.label(decision_text(decision));
                // Judged on both ends, as the link is.
                let judged = crate::tracklets::trust::link(
                    tl.familiarity.get(i).and_then(Option::as_ref),
                    tl.familiarity.get(j).and_then(Option::as_ref),
                );
                match (&tl.judged_by, judged) {
                    (Some(_), Some(j)) => super::trust::badge(ui, Some(&j), &j.model),
                    (Some(model), None) if score.is_some() => super::trust::badge(ui, None, model),
                    _ => {
                        ui.label("");
                    }
                }
                ui.add_enabled_ui(writable, |ui| {
                    ui.horizontal(|ui| {
                        let (a, b) = (t.id, o.id);
                        for (label, d) in [
                            ("Accept", Some(LinkCall::Accepted)),
                            ("Reject", Some(LinkCall::Rejected)),
                        ] {
                            let text = format!("{label} T{a}–T{b}");
                            if decision != d && ui.button(text).clicked() {
                                out.push(Command::DecideLink { a, b, decision: d });
                            }
                        }
                        if decision.is_some() && ui.button(format!("Clear T{a}–T{b}")).clicked() {
                            out.push(Command::DecideLink {
                                a,
                                b,
                                decision: None,
                            });
                        }
                        let same = t.polyp_id.is_some() && t.polyp_id == o.polyp_id;
                        if !same && ui.button(format!("Merge T{b} into T{a}'s polyp")).clicked() {
                            out.push(Command::MergeTracklets { keep: a, other: b });
                        }
                    });
                });
                ui.end_row();
            }
        });
}
