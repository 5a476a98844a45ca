//! The Training panel: pick a recipe of the registry, set its options (the form is built from
//! the recipe's own option list, the same one `endotwin train <recipe> --help` prints, with the
//! same defaults), start it on the engine's device and watch it: the loss of every step as a
//! curve, each epoch's metrics, progress with the time left, the recipe's messages. Stop lets
//! the current step finish; the checkpoint of the last finished epoch stays, and ticking
//! `resume` then starting again continues from it.

use super::super::state::AppState;
use super::super::textures::Textures;
use super::super::{Command, TrainingCommand};
use super::tracklets::PALETTE;
use crate::engine::training::TrainingLog;
use crate::train::recipe::OptionKind;
use egui::{Align2, Color32, FontId, RichText, Sense, Stroke, pos2, vec2};

pub fn draw(ui: &mut egui::Ui, state: &AppState, _: &mut Textures, out: &mut Vec<Command>) {
    egui::ScrollArea::vertical()
        .id_salt("training-panel")
        .auto_shrink([false, false])
        .show(ui, |ui| panel(ui, state, out));
}

fn panel(ui: &mut egui::Ui, state: &AppState, out: &mut Vec<Command>) {
    let panel = &state.training;
    let running = panel.running();
    let send = |out: &mut Vec<Command>, c: TrainingCommand| out.push(Command::Training(c));
    ui.horizontal(|ui| {
        ui.heading("Training");
        ui.label(format!("on {}", state.backend_summary));
    });
    let recipes = crate::train::recipes();
    ui.horizontal_wrapped(|ui| {
        ui.label("Recipe:");
        for r in &recipes {
            let chosen = r.name() == panel.recipe;
            if ui
                .add_enabled(!running, egui::Button::selectable(chosen, r.name()))
                .on_hover_text(r.description())
                .clicked()
            {
                send(out, TrainingCommand::Recipe(r.name().to_string()));
            }
        }
    });
    let Some(recipe) = recipes.iter().find(|r| r.name() == panel.recipe) else {
        return;
    };
    ui.label(RichText::new(recipe.description()).italics());
    egui::CollapsingHeader::new("Options")
        .default_open(true)
        .open(Some(!running))
        .show(ui, |ui| {
            egui::Grid::new("recipe-options")
                .num_columns(2)
                .striped(true)
                .show(ui, |ui| {
                    for o in recipe.options() {
                        let name = ui.label(o.name).on_hover_text(o.help);
                        ui.add_enabled_ui(!running, |ui| {
                            if o.kind == OptionKind::Flag {
                                let mut on = panel.value(o.name, None) == "true";
                                let response = ui
                                    .checkbox(&mut on, "")
                                    .labelled_by(name.id)
                                    .on_hover_text(o.help);
                                if response.changed() {
                                    send(
                                        out,
                                        TrainingCommand::SetOption {
                                            name: o.name.into(),
                                            value: Some(on.to_string()),
                                        },
                                    );
                                }
                            } else {
                                // Empty shows the default greyed; typing overrides it.
                                let mut text = panel.value(o.name, None);
                                let hint = match (o.name, o.default) {
                                    ("out", _) => "runs/ in the library's folder".to_string(),
                                    (_, Some(d)) => d.to_string(),
                                    (_, None) => "(unset)".to_string(),
                                };
                                let edit = egui::TextEdit::singleline(&mut text)
                                    .hint_text(hint)
                                    .desired_width(260.0);
                                let response =
                                    ui.add(edit).labelled_by(name.id).on_hover_text(o.help);
                                if response.changed() {
                                    let value = (!text.trim().is_empty()).then_some(text);
                                    send(
                                        out,
                                        TrainingCommand::SetOption {
                                            name: o.name.into(),
                                            value,
                                        },
                                    );
                                }
                            }
                        });
                        ui.end_row();
                    }
                });
        });
    ui.horizontal(|ui| {
        let writable = state.library.as_ref().is_some_and(|l| !l.read_only);
        if ui
            .add_enabled(!running && writable, egui::Button::new("Start training"))
            .on_disabled_hover_text("a run is going, or the library is read-only")
            .clicked()
        {
            send(out, TrainingCommand::Start);
        }
        let stopping = panel.run.as_ref().is_some_and(|r| r.stopping());
        if ui
            .add_enabled(running && !stopping, egui::Button::new("Stop"))
            .on_hover_text("Stop after the current step; the last epoch's checkpoint stays (tick resume to continue)")
            .clicked()
        {
            send(out, TrainingCommand::Stop);
        }
        if stopping && running {
            ui.label("stopping after this step…");
        }
    });
    ui.separator();
    match &panel.run {
        Some(run) => {
            let log = run.log().clone();
            status(ui, &log);
            curve(ui, &log);
            epochs(ui, &log);
        }
        None => {
            ui.label("No run started in this session yet.");
        }
    }
    ui.separator();
    runs(ui, panel, out);
}

/// The library's promoted models: where each came from, and Demote.
fn active(ui: &mut egui::Ui, panel: &super::super::state::TrainingPanel, out: &mut Vec<Command>) {
    if panel.promoting.is_some() {
        ui.horizontal(|ui| {
            ui.spinner();
            ui.label("changing the active model and rebuilding what depends on it...");
        });
    }
    if panel.active.is_empty() {
        ui.label(
            RichText::new("Active models: the shipped ones (promote a finished run to change one)")
                .weak(),
        );
        return;
    }
    ui.label(RichText::new("Active models of this library").strong());
    for m in &panel.active {
        ui.horizontal(|ui| {
            let from = m
                .promoted_from
                .as_ref()
                .map_or("as shipped".to_string(), |p| {
                    format!(
                        "from {}{} ({})",
                        p.run.map_or(String::new(), |r| format!("run #{r}, ")),
                        p.card,
                        p.at.replace('T', " ")
                    )
                });
            // The button first: the line can be wider than the panel.
            if m.can_demote
                && ui
                    .add_enabled(
                        panel.promoting.is_none(),
                        egui::Button::new(format!("Demote {}", m.name)),
                    )
                    .on_hover_text("put back the model it had before the last promotion")
                    .clicked()
            {
                out.push(Command::Training(TrainingCommand::Demote {
                    name: m.name.clone(),
                }));
            }
            ui.label(format!("{}: {} {from}", m.name, m.version));
        });
    }
}

/// The library's recorded runs (settings on hover), and the epoch losses of the ticked ones
/// drawn over each other.
fn runs(ui: &mut egui::Ui, panel: &super::super::state::TrainingPanel, out: &mut Vec<Command>) {
    active(ui, panel, out);
    ui.label(
        RichText::new(format!(
            "Runs recorded in this library: {}",
            panel.runs.len()
        ))
        .strong(),
    );
    if panel.runs.is_empty() {
        return;
    }
    egui::Grid::new("training-runs-grid")
        .striped(true)
        .show(ui, |ui| {
            for h in [
                "overlay",
                "run",
                "recipe",
                "status",
                "started (UTC)",
                "epochs",
                "last loss",
                "wall",
                "model",
            ] {
                ui.label(RichText::new(h).strong());
            }
            ui.end_row();
            for r in &panel.runs {
                let mut on = panel.overlay.contains(&r.row.id);
                let tick = ui.checkbox(&mut on, "");
                let name = ui.label(format!("#{}", r.row.id));
                if tick.labelled_by(name.id).changed() {
                    out.push(Command::Training(TrainingCommand::Overlay {
                        run: r.row.id,
                        on,
                    }));
                }
                ui.label(&r.row.recipe).on_hover_text(&r.row.config_json);
                ui.label(&r.row.status);
                ui.label(r.row.started_at.replace('T', " "));
                ui.label(r.losses.len().to_string());
                ui.label(
                    r.losses
                        .last()
                        .map_or("—".into(), |l| format!("{:.4}", l.1)),
                );
                ui.label(clock(r.seconds));
                match &r.card {
                    Some(card) => {
                        ui.horizontal(|ui| {
                            let promote = ui
                                .add_enabled(
                                    panel.promoting.is_none(),
                                    egui::Button::new(format!("Promote #{}", r.row.id)),
                                )
                                .on_hover_text(format!(
                                    "make {card} the library's model for its capability; what \
                                     depends on it is rebuilt in the background"
                                ));
                            if promote.clicked() {
                                out.push(Command::Training(TrainingCommand::Promote {
                                    run: r.row.id,
                                }));
                            }
                        });
                    }
                    None => {
                        ui.label("—");
                    }
                }
                ui.end_row();
            }
        });
    reports(ui, panel, out);
    if let Some(run) = panel.open_report
        && let Some(report) = panel
            .runs
            .iter()
            .find(|r| r.row.id == run)
            .and_then(|r| r.report.as_deref())
    {
        ui.separator();
        super::report::draw(ui, run, report, out);
        ui.separator();
    }
    let chosen: Vec<&super::super::state::RecordedRun> = panel
        .runs
        .iter()
        .filter(|r| panel.overlay.contains(&r.row.id) && !r.losses.is_empty())
        .collect();
    if chosen.is_empty() {
        ui.label(RichText::new("tick runs to draw their epoch losses over each other").weak());
        return;
    }
    let size = vec2(ui.available_width().min(900.0), 180.0);
    let (rect, _) = ui.allocate_exact_size(size, Sense::hover());
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 4.0, Color32::from_gray(24));
    let all = chosen.iter().flat_map(|r| r.losses.iter());
    let (lo, hi, last) = all.fold((f64::MAX, f64::MIN, 1usize), |(lo, hi, e), l| {
        (lo.min(l.1), hi.max(l.1), e.max(l.0))
    });
    let span = (hi - lo).max(1e-9);
    let inner = rect.shrink2(vec2(48.0, 14.0));
    let at = |x: usize, y: f64| {
        pos2(
            inner.left() + (x as f32 - 1.0) / (last.max(2) as f32 - 1.0) * inner.width(),
            inner.bottom() - ((y - lo) / span) as f32 * inner.height(),
        )
    };
    for (i, r) in chosen.iter().enumerate() {
        let colour = PALETTE[i % (PALETTE.len() - 1)];
        let points: Vec<egui::Pos2> = r.losses.iter().map(|l| at(l.0, l.1)).collect();
        for p in &points {
            painter.circle_filled(*p, 2.5, colour);
        }
        painter.add(egui::Shape::line(points, Stroke::new(1.5, colour)));
        painter.text(
            inner.right_top() + vec2(0.0, 14.0 * i as f32),
            Align2::RIGHT_TOP,
            format!("#{} {}", r.row.id, r.row.recipe),
            FontId::proportional(12.0),
            colour,
        );
    }
    axes(&painter, inner, (lo, hi), format!("epoch {last}"));
    ui.label(RichText::new("mean loss per epoch of the ticked runs").small());
}

fn status(ui: &mut egui::Ui, log: &TrainingLog) {
    ui.horizontal_wrapped(|ui| {
        ui.label(RichText::new(format!("{} on {}", log.recipe, log.device)).strong());
        if let Some((e, es, s, ss)) = log.position {
            ui.label(format!("epoch {}/{es}, step {}/{ss}", e + 1, s + 1));
        }
        let elapsed = log.started.elapsed().as_secs_f64();
        match log.eta_seconds() {
            Some(eta) => ui.label(format!(
                "{} elapsed, about {} left",
                clock(elapsed),
                clock(eta)
            )),
            None => ui.label(format!("{} elapsed", clock(elapsed))),
        };
    });
    match &log.outcome {
        None => {
            ui.add(egui::ProgressBar::new(log.done_fraction() as f32).show_percentage());
        }
        Some(Ok(saved)) => {
            ui.colored_label(Color32::LIGHT_GREEN, format!("finished: {saved}"));
        }
        Some(Err(why)) => {
            ui.colored_label(Color32::from_rgb(255, 190, 90), format!("stopped: {why}"));
        }
    }
    if let Some(last) = log.messages.last() {
        ui.label(RichText::new(last).weak());
    }
}

fn clock(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// The loss of every step (thin) and each epoch's mean loss (dots), on one axis.
fn curve(ui: &mut egui::Ui, log: &TrainingLog) {
    let size = vec2(ui.available_width().min(900.0), 220.0);
    let (rect, _) = ui.allocate_exact_size(size, Sense::hover());
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 4.0, Color32::from_gray(24));
    let text = Color32::from_gray(170);
    if log.losses.is_empty() {
        painter.text(
            rect.center(),
            Align2::CENTER_CENTER,
            "the loss curve appears with the first step",
            FontId::proportional(13.0),
            text,
        );
        return;
    }
    let (lo, hi) = log
        .losses
        .iter()
        .map(|p| p[1])
        .filter(|v| v.is_finite())
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let span = (hi - lo).max(1e-9);
    let total = log.position.map_or(1, |(_, es, _, ss)| (es * ss).max(1)) as f64;
    let inner = rect.shrink2(vec2(48.0, 14.0));
    let at = |x: f64, y: f64| {
        pos2(
            inner.left() + (x / total) as f32 * inner.width(),
            inner.bottom() - ((y - lo) / span) as f32 * inner.height(),
        )
    };
    let points: Vec<egui::Pos2> = log.losses.iter().map(|p| at(p[0], p[1])).collect();
    painter.add(egui::Shape::line(
        points,
        Stroke::new(1.2, Color32::from_rgb(86, 180, 233)),
    ));
    if let Some((_, _, _, steps)) = log.position {
        for e in &log.epochs {
            if let Some(loss) = e.get("loss") {
                let p = at((e.epoch * steps) as f64, loss);
                painter.circle_filled(p, 3.5, Color32::from_rgb(230, 159, 0));
            }
        }
    }
    axes(&painter, inner, (lo, hi), format!("step {}", total as u64));
    ui.label(
        RichText::new(format!(
            "loss per step (blue), epoch means (orange); {} steps so far, last {:.4}",
            log.losses.len(),
            log.losses.last().map_or(f64::NAN, |p| p[1])
        ))
        .small(),
    );
}

fn epochs(ui: &mut egui::Ui, log: &TrainingLog) {
    if log.epochs.is_empty() {
        return;
    }
    egui::ScrollArea::vertical()
        .id_salt("training-epochs")
        .max_height(160.0)
        .show(ui, |ui| {
            egui::Grid::new("training-epochs-grid")
                .striped(true)
                .show(ui, |ui| {
                    ui.label(RichText::new("epoch").strong());
                    for (name, _) in &log.epochs[0].metrics {
                        ui.label(RichText::new(name).strong());
                    }
                    ui.label(RichText::new("seconds").strong());
                    ui.end_row();
                    for e in &log.epochs {
                        ui.label(e.epoch.to_string());
                        for (_, v) in &e.metrics {
                            ui.label(format!("{v:.4}"));
                        }
                        ui.label(format!("{:.0}", e.seconds));
                        ui.end_row();
                    }
                });
        });
}

/// The y range at the left of a plot's inner rectangle and `x_label` under its right end.
fn axes(painter: &egui::Painter, inner: egui::Rect, (lo, hi): (f64, f64), x_label: String) {
    let font = FontId::monospace(11.0);
    let text = Color32::from_gray(170);
    let left = vec2(44.0, 0.0);
    painter.text(
        inner.left_top() - left,
        Align2::LEFT_TOP,
        format!("{hi:.3}"),
        font.clone(),
        text,
    );
    painter.text(
        inner.left_bottom() - left,
        Align2::LEFT_BOTTOM,
        format!("{lo:.3}"),
        font.clone(),
        text,
    );
    painter.text(
        inner.right_bottom() + vec2(0.0, 12.0),
        Align2::RIGHT_BOTTOM,
        x_label,
        font,
        text,
    );
}

/// Where reports run, and each finished run's report: make it, or open the saved one.
fn reports(ui: &mut egui::Ui, panel: &super::super::state::TrainingPanel, out: &mut Vec<Command>) {
    if panel.runs.iter().all(|r| r.card.is_none()) {
        return;
    }
    ui.horizontal(|ui| {
        let mut held = panel.report_held_out.clone();
        let label = ui.label("Reports run on the held-out library");
        let edit = ui
            .add(egui::TextEdit::singleline(&mut held).desired_width(520.0).hint_text(
                "empty: the phantom's validation split of seed 29 (200 polyps, or 12 videos x 800 frames), generated",
            ))
            .labelled_by(label.id);
        if edit.changed() {
            out.push(Command::Training(TrainingCommand::ReportHeldOut(held)));
        }
    });
    ui.horizontal_wrapped(|ui| {
        ui.label("Evaluation reports:");
        for r in panel.runs.iter().filter(|r| r.card.is_some()) {
            report_buttons(ui, panel, r, out);
        }
    });
}

/// A run's report: make it (on held-out data, in the background), or open the saved one.
fn report_buttons(
    ui: &mut egui::Ui,
    panel: &super::super::state::TrainingPanel,
    r: &super::super::state::RecordedRun,
    out: &mut Vec<Command>,
) {
    let id = r.row.id;
    if panel.reporting.is_some_and(|(_, run)| run == id) {
        ui.spinner();
        ui.label("making the report…");
        return;
    }
    let label = if r.report.is_some() {
        format!("Report again #{id}")
    } else {
        format!("Report #{id}")
    };
    let make = ui
        .add_enabled(panel.reporting.is_none(), egui::Button::new(label))
        .on_hover_text(
            "evaluate this run's model beside the active one on held-out data (the \
                 library named above, else the phantom's validation split; never this \
                 library, which it trained on); saved beside its card as JSON + PNG",
        );
    if make.clicked() {
        out.push(Command::Training(TrainingCommand::Report { run: id }));
    }
    if r.report.is_some()
        && panel.open_report != Some(id)
        && ui.button(format!("Open report #{id}")).clicked()
    {
        out.push(Command::Training(TrainingCommand::OpenReport {
            run: Some(id),
        }));
    }
}
