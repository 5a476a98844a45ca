//! An evaluation report in the Training tab: the model's figures beside the active model's
//! (with their intervals), ROC and precision-recall curves (egui_plot), and the confusion
//! matrix. The report was saved beside the model's card as JSON + PNG when it was made.

use super::super::{Command, TrainingCommand};
use crate::eval::report::{Confusion, Report};
use egui::{Color32, RichText};

const MODEL: Color32 = Color32::from_rgb(240, 150, 40);
const ACTIVE: Color32 = Color32::from_rgb(80, 160, 240);

pub fn draw(ui: &mut egui::Ui, run: i64, report: &Report, out: &mut Vec<Command>) {
    ui.horizontal(|ui| {
        ui.label(
            RichText::new(format!(
                "Evaluation report of run #{run}: {}",
                report.capability
            ))
            .strong(),
        );
        if ui.button("Close report").clicked() {
            out.push(Command::Training(TrainingCommand::OpenReport { run: None }));
        }
    });
    ui.label(format!("model: {}", report.model));
    match &report.active {
        Some(a) => ui.label(format!("beside the active model: {a}")),
        None => ui.label("no other active model of this capability to compare with"),
    };
    ui.label(
        RichText::new(format!(
            "held out: {}; seed {}, intervals from {} bootstrap resamples; made {}",
            report.held_out,
            report.seed,
            report.bootstrap,
            report.made_at.replace('T', " ")
        ))
        .weak(),
    );
    let ci = |c: &Option<[f64; 2]>| match c {
        Some([lo, hi]) => format!(" [{lo:.3}, {hi:.3}]"),
        None => String::new(),
    };
    egui::Grid::new("report-metrics")
        .striped(true)
        .show(ui, |ui| {
            ui.label(RichText::new("metric").strong());
            ui.label(RichText::new("this model").strong().color(MODEL));
            ui.label(RichText::new("active model").strong().color(ACTIVE));
            ui.end_row();
            for m in &report.metrics {
                ui.label(&m.name);
                ui.label(format!("{:.3}{}", m.model, ci(&m.model_ci)));
                ui.label(
                    m.active
                        .map_or("—".into(), |a| format!("{a:.3}{}", ci(&m.active_ci))),
                );
                ui.end_row();
            }
        });
    ui.label(RichText::new(&report.curves_of).small());
    ui.horizontal(|ui| {
        curves(
            ui,
            report,
            "ROC (false-positive rate, true-positive rate)",
            true,
        );
        curves(ui, report, "precision-recall (recall, precision)", false);
    });
    if let Some(c) = &report.confusion {
        confusion(ui, c);
    }
    // The calibration of the confidence the model shows (its reliability diagram is saved
    // beside the report's picture).
    if let Some(c) = &report.calibration {
        for line in c.text().lines() {
            ui.label(RichText::new(line.trim()).small());
        }
    }
    let json = report_json(report);
    ui.label(
        RichText::new(format!(
            "saved as {json} and its .png (ROC, PR and the confusion matrix in one picture)"
        ))
        .small(),
    );
}

fn report_json(report: &Report) -> String {
    crate::eval::report::json_path(std::path::Path::new(&report.model))
        .display()
        .to_string()
}

fn curves(ui: &mut egui::Ui, report: &Report, title: &str, roc: bool) {
    use egui_plot::{Legend, Line, Plot, PlotPoints};
    ui.vertical(|ui| {
        ui.label(RichText::new(title).small());
        Plot::new(if roc { "report-roc" } else { "report-pr" })
            .width(300.0)
            .height(260.0)
            .include_x(0.0)
            .include_x(1.0)
            .include_y(0.0)
            .include_y(1.0)
            .legend(Legend::default())
            .allow_drag(false)
            .allow_scroll(false)
            .show(ui, |plot| {
                for (i, c) in report.curves.iter().take(2).enumerate() {
                    let points: Vec<[f64; 2]> = if roc { c.roc.clone() } else { steps(&c.pr) };
                    let name = format!(
                        "{} {} {}",
                        if i == 0 { "model" } else { "active" },
                        if roc { "AUROC" } else { "AP" },
                        crate::eval::report::shown(if roc { c.auroc } else { c.ap })
                    );
                    let colour = if i == 0 { MODEL } else { ACTIVE };
                    // No bands: a ROC curve's vertical steps are its shape, not noise.
                    plot.line(
                        Line::new(name, PlotPoints::from(points))
                            .color(colour)
                            .allow_band(false),
                    );
                }
                if roc {
                    plot.line(
                        Line::new("chance", PlotPoints::from(vec![[0.0, 0.0], [1.0, 1.0]]))
                            .color(Color32::GRAY),
                    );
                }
            });
    });
}

fn confusion(ui: &mut egui::Ui, c: &Confusion) {
    ui.label(RichText::new(format!("confusion matrix: {} (rows: truth)", c.of)).strong());
    egui::Grid::new("report-confusion").show(ui, |ui| {
        ui.label("");
        for name in &c.classes {
            ui.label(RichText::new(format!("predicted {name}")).small());
        }
        ui.end_row();
        for (i, row) in c.counts.iter().enumerate() {
            ui.label(format!("true {}", c.classes[i]));
            for (j, &n) in row.iter().enumerate() {
                let [r, g, b] = c.shade(i, j);
                let fill = Color32::from_rgb(r, g, b);
                egui::Frame::new()
                    .fill(fill)
                    .inner_margin(6.0)
                    .show(ui, |ui| {
                        ui.label(RichText::new(n.to_string()).color(Color32::WHITE))
                    });
            }
            ui.end_row();
        }
    });
}

/// A precision-recall curve as the step function it is: recall moves at the last precision,
/// then the precision changes (what the PNG draws too).
fn steps(pr: &[[f64; 2]]) -> Vec<[f64; 2]> {
    let mut prev = pr.first().map_or(1.0, |p| p[1]);
    let mut out = vec![[0.0, prev]];
    for p in pr {
        out.push([p[0], prev]);
        out.push(*p);
        prev = p[1];
    }
    out
}
