//! The status bar: backend and adapter, library size, reviewer, running jobs with progress.

use super::super::Command;
use super::super::state::AppState;
use crate::engine::JobHandle;

pub fn draw(ui: &mut egui::Ui, state: &AppState, jobs: &[JobHandle], out: &mut Vec<Command>) {
    ui.horizontal(|ui| {
        ui.label(format!("Compute: {}", state.backend_summary));
        ui.separator();
        match &state.library {
            Some(lib) => {
                ui.label(format!(
                    "{} examinations · {} polyps · {} videos · {} media ({:.1} MB){}",
                    lib.stats.examinations,
                    lib.stats.polyps,
                    lib.stats.videos,
                    lib.stats.media,
                    lib.stats.media_bytes as f64 / 1e6,
                    if lib.read_only { " · read-only" } else { "" }
                ));
            }
            None => {
                ui.label("no library");
            }
        }
        ui.separator();
        let label = ui.label("Reviewer:").id;
        let mut reviewer = state.reviewer.clone();
        if ui
            .add(egui::TextEdit::singleline(&mut reviewer).desired_width(90.0))
            .labelled_by(label)
            .changed()
        {
            out.push(Command::SetReviewer(reviewer));
        }
        ui.separator();
        if jobs.is_empty() {
            ui.label("idle");
        }
        for job in jobs {
            let p = &job.progress;
            let stage = p.stage_name();
            let text = if p.total() > 0 {
                format!("{} — {stage} {}/{}", job.name, p.done(), p.total())
            } else {
                format!(
                    "{} — {}",
                    job.name,
                    if stage.is_empty() { "queued" } else { &stage }
                )
            };
            ui.add(
                egui::ProgressBar::new(p.fraction().unwrap_or(0.0))
                    .desired_width(200.0)
                    .text(text),
            );
            if ui.small_button("Cancel").on_hover_text("cancel").clicked() {
                out.push(Command::CancelJob(job.id));
            }
            // Progress is read from shared atomics: keep repainting while jobs run.
            ui.ctx()
                .request_repaint_after(std::time::Duration::from_millis(100));
        }
    });
}
