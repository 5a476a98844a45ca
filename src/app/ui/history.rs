//! The library's audit history in the Labelling tab: every label change (who, when, which
//! case, from what to what), newest first, filtered by reviewer and by date. It follows every
//! edit and every undo.

use super::super::Command;
use super::super::choices::HistoryFilter;
use super::super::state::AppState;
use egui::RichText;

pub fn draw(ui: &mut egui::Ui, state: &AppState, out: &mut Vec<Command>) {
    let panel = &state.labelling;
    ui.separator();
    let filter = &panel.audit_filter;
    ui.horizontal_wrapped(|ui| {
        ui.label(RichText::new("Library history").strong());
        let field = |ui: &mut egui::Ui, label: &str, value: &Option<String>, hint: &str| {
            let mut text = value.clone().unwrap_or_default();
            let name = ui.label(label);
            let changed = ui
                .add(
                    egui::TextEdit::singleline(&mut text)
                        .desired_width(110.0)
                        .hint_text(hint),
                )
                .labelled_by(name.id)
                .changed();
            changed.then(|| Some(text.trim().to_string()).filter(|t| !t.is_empty()))
        };
        let mut next: HistoryFilter = filter.clone();
        let mut changed = false;
        if let Some(v) = field(ui, "changed by", &filter.who, "anyone") {
            next.who = v;
            changed = true;
        }
        if let Some(v) = field(ui, "since", &filter.since, "YYYY-MM-DD") {
            next.since = v;
            changed = true;
        }
        if let Some(v) = field(ui, "until", &filter.until, "YYYY-MM-DD") {
            next.until = v;
            changed = true;
        }
        if changed {
            out.push(Command::AuditFilter(next));
        }
    });
    if panel.audit.is_empty() {
        ui.label(RichText::new("no label changes match").weak());
        return;
    }
    egui::ScrollArea::vertical()
        .id_salt("library-history")
        .max_height(180.0)
        .show(ui, |ui| {
            egui::Grid::new("library-history-grid")
                .striped(true)
                .show(ui, |ui| {
                    for h in ["when (UTC)", "who", "case", "label", "from", "to"] {
                        ui.label(RichText::new(h).strong());
                    }
                    ui.end_row();
                    for row in &panel.audit {
                        let e = &row.entry;
                        ui.label(e.at.replace('T', " "));
                        ui.label(&e.who);
                        ui.label(&row.target_name);
                        ui.label(&e.key);
                        ui.label(e.old_value.as_deref().unwrap_or("—"));
                        ui.label(e.new_value.as_deref().unwrap_or("—"));
                        ui.end_row();
                    }
                });
        });
}
