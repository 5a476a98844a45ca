//! Warnings and errors reach the user as toasts in the bottom-right corner. Click to dismiss.

use super::super::Command;
use super::super::state::{AppState, ToastLevel};
use egui::Color32;

pub fn draw(ctx: &egui::Context, state: &AppState, out: &mut Vec<Command>) {
    if state.toasts.is_empty() {
        return;
    }
    egui::Area::new(egui::Id::unique("endotwin-toasts"))
        .anchor(egui::Align2::RIGHT_BOTTOM, egui::vec2(-12.0, -36.0))
        .order(egui::Order::Foreground)
        .show(ctx, |ui| {
            ui.set_max_width(420.0);
            for (i, t) in state.toasts.iter().enumerate() {
                let (icon, colour) = match t.level {
                    ToastLevel::Info => ("Info", Color32::from_rgb(60, 120, 200)),
                    ToastLevel::Warning => ("Warning", Color32::from_rgb(210, 150, 30)),
                    ToastLevel::Error => ("Error", Color32::from_rgb(200, 60, 60)),
                };
                let r = egui::Frame::popup(ui.style())
                    .stroke(egui::Stroke::new(1.5, colour))
                    .show(ui, |ui| {
                        ui.horizontal_wrapped(|ui| {
                            ui.colored_label(colour, icon);
                            ui.label(&t.text);
                        });
                    })
                    .response
                    .interact(egui::Sense::click());
                if r.on_hover_text("click to dismiss").clicked() {
                    out.push(Command::DismissToast(i));
                }
            }
            ctx.request_repaint_after(std::time::Duration::from_millis(500));
        });
}
