//! The library's polyps on their 2-D PCA map, coloured by pathology; the query and its twins
//! drawn larger. A click opens a case; a drag draws a lasso whose polyps are picked (ringed),
//! and the picked polyps take a label together (one audited change each, one undo for all).

use super::super::Command;
use super::super::state::{AppState, Selection};
use crate::engine::TwinAnswer;
use egui::{Color32, RichText};

const PICKED: Color32 = Color32::from_rgb(255, 220, 60);

/// A colour per pathology, the same everywhere in the panel.
pub fn pathology_colour(histology: &str) -> Color32 {
    let h = histology.to_ascii_lowercase();
    if h.contains("hyperplastic") {
        Color32::from_rgb(80, 170, 90)
    } else if h.contains("serrated") {
        Color32::from_rgb(230, 170, 40)
    } else if h.contains("lg") || h.contains("low") {
        Color32::from_rgb(70, 130, 220)
    } else if h.contains("hg") || h.contains("high") {
        Color32::from_rgb(150, 90, 210)
    } else if h.contains("carcinoma") {
        Color32::from_rgb(210, 60, 60)
    } else {
        Color32::GRAY
    }
}

pub fn draw(ui: &mut egui::Ui, state: &AppState, answer: &TwinAnswer, out: &mut Vec<Command>) {
    use egui_plot::{Legend, Plot, PlotPoint, PlotPoints, Points};
    ui.horizontal(|ui| {
        ui.strong("Library map (PCA of polyp embeddings)");
        if answer.map.drawn < answer.map.points.len() {
            ui.label(format!(
                "{} of {} polyps drawn (an even sample); the twins, picked polyps and clicks use all",
                answer.map.drawn,
                answer.map.points.len()
            ));
        }
        ui.label(
            RichText::new("click: open a case · drag: lasso polyps to act on them together")
                .small()
                .weak(),
        );
    });
    let lasso_id = egui::Id::unique("twin-map-lasso");
    let mut lasso: Vec<[f64; 2]> = ui.data(|d| d.get_temp(lasso_id)).unwrap_or_default();
    let twins: Vec<i64> = answer.result.twins.iter().map(|t| t.polyp.id).collect();
    let at = |m: &(i64, String, [f32; 2])| [m.2[0] as f64, m.2[1] as f64];
    let response = Plot::new("twin-map")
        .height(260.0)
        .width(ui.available_width().min(700.0))
        .data_aspect(1.0)
        .legend(Legend::default())
        .allow_drag(false)
        .allow_boxed_zoom(false)
        .show(ui, |plot| {
            for (name, pts) in &answer.map.layers {
                let label = if name.is_empty() {
                    "unknown"
                } else {
                    name.as_str()
                };
                plot.points(
                    Points::new(label, PlotPoints::from(pts.clone()))
                        .radius(3.0)
                        .color(pathology_colour(name)),
                );
            }
            let ringed = |ids: &dyn Fn(i64) -> bool| -> Vec<[f64; 2]> {
                answer
                    .map
                    .points
                    .iter()
                    .filter(|m| ids(m.0))
                    .map(at)
                    .collect()
            };
            plot.points(
                Points::new("twins", PlotPoints::from(ringed(&|id| twins.contains(&id))))
                    .radius(6.0)
                    .filled(false)
                    .color(Color32::WHITE),
            );
            if !state.picked.is_empty() {
                plot.points(
                    Points::new(
                        "picked",
                        PlotPoints::from(ringed(&|id| state.picked.contains(&id))),
                    )
                    .radius(5.0)
                    .filled(false)
                    .color(PICKED),
                );
            }
            plot.points(
                Points::new(
                    "query",
                    PlotPoints::from(vec![[
                        answer.query_point[0] as f64,
                        answer.query_point[1] as f64,
                    ]]),
                )
                .radius(7.0)
                .shape(egui_plot::MarkerShape::Diamond)
                .color(Color32::from_rgb(255, 80, 200)),
            );
            // The map never pans (a drag is a lasso), so the pointer maps through the
            // transform as it is.
            let pointer = plot.ctx().input(|i| i.pointer.latest_pos());
            pointer.map(|p| plot.plot_from_screen(p))
        });
    let r = &response.response;
    // The lasso is drawn over the plot, not in it: it never moves the map's bounds.
    if lasso.len() > 1 {
        let mut screen: Vec<egui::Pos2> = lasso
            .iter()
            .map(|p| {
                response
                    .transform
                    .position_from_point(&PlotPoint::new(p[0], p[1]))
            })
            .collect();
        screen.push(screen[0]);
        ui.painter_at(r.rect)
            .add(egui::Shape::line(screen, egui::Stroke::new(1.5, PICKED)));
    }
    if r.drag_started() {
        lasso.clear();
    }
    if (r.drag_started() || r.dragged())
        && let Some(p) = response.inner
    {
        lasso.push([p.x, p.y]);
    }
    if r.drag_stopped() {
        let picked: Vec<i64> = answer
            .map
            .points
            .iter()
            .filter(|m| crate::twins::map::inside(&lasso, at(m)))
            .map(|m| m.0)
            .collect();
        out.push(Command::SetPicked(picked));
        lasso.clear();
    }
    ui.data_mut(|d| d.insert_temp(lasso_id, lasso));
    if r.clicked()
        && let Some(p) = response.inner
    {
        let nearest = answer.map.points.iter().min_by(|a, b| {
            let d = |m: &(i64, String, [f32; 2])| {
                (m.2[0] as f64 - p.x).powi(2) + (m.2[1] as f64 - p.y).powi(2)
            };
            d(a).total_cmp(&d(b))
        });
        if let Some(n) = nearest {
            out.push(Command::Select(Selection::Polyp(n.0)));
        }
    }
    picked_bar(ui, state, out);
}

/// What the picked polyps can do together: take a histology, or be let go.
pub fn picked_bar(ui: &mut egui::Ui, state: &AppState, out: &mut Vec<Command>) {
    if state.picked.is_empty() {
        return;
    }
    let writable = state.library.as_ref().is_some_and(|l| !l.read_only);
    ui.horizontal_wrapped(|ui| {
        ui.label(
            RichText::new(format!("{} polyps picked", state.picked.len()))
                .strong()
                .color(PICKED),
        );
        ui.label("set histology:");
        let histologies = state.labelling.options.first().cloned().unwrap_or_default();
        for h in histologies {
            let button = egui::Button::new(format!("all {h}"));
            if ui.add_enabled(writable, button).clicked() {
                out.push(Command::LabelPicked {
                    key: "histology".into(),
                    value: Some(h),
                });
            }
        }
        let tag_id = ui.scope_id().with("picked tag");
        let mut tag: String = ui.data(|d| d.get_temp(tag_id)).unwrap_or_default();
        let label = ui.label("tag:").id;
        ui.add(
            egui::TextEdit::singleline(&mut tag)
                .desired_width(110.0)
                .hint_text("teaching set"),
        )
        .labelled_by(label);
        ui.data_mut(|d| d.insert_temp(tag_id, tag.clone()));
        for (text, add) in [("Tag the picked", true), ("Untag", false)] {
            if ui
                .add_enabled(writable && !tag.trim().is_empty(), egui::Button::new(text))
                .clicked()
            {
                out.push(Command::TagPicked {
                    tag: tag.clone(),
                    add,
                });
            }
        }
        if ui
            .button("Find twins of the picked")
            .on_hover_text("all their views as one query; none of them comes back as a twin")
            .clicked()
        {
            out.push(Command::QueryPicked);
        }
        if ui
            .button("Export their labels…")
            .on_hover_text("a CSV of the picked polyps' labels, as `endotwin labels export` writes")
            .clicked()
        {
            out.push(Command::ExportPicked(None));
        }
        if ui.button("Clear picked").clicked() {
            out.push(Command::SetPicked(Vec::new()));
        }
    });
}
