//! The user guide window: the bundled docs pages (a list to switch between them) drawn from
//! their Markdown: headings, paragraphs, lists, tables and code as text, pictures named.

use super::super::Command;
use super::super::guide::PAGES;
use super::super::state::AppState;
use egui::RichText;

pub fn draw(ctx: &egui::Context, state: &AppState, out: &mut Vec<Command>) {
    let Some(index) = state.guide else {
        return;
    };
    let page = &PAGES[index.min(PAGES.len() - 1)];
    let mut open = true;
    egui::Window::new("User guide")
        .open(&mut open)
        .default_size([720.0, 560.0])
        .vscroll(false)
        .show(ctx, |ui| {
            ui.horizontal_wrapped(|ui| {
                for (i, p) in PAGES.iter().enumerate() {
                    if ui.selectable_label(i == index, p.title).clicked() {
                        out.push(Command::Guide(Some(i)));
                    }
                }
            });
            ui.label(RichText::new(format!("docs/{} (bundled with this build)", page.file)).weak());
            ui.separator();
            egui::ScrollArea::vertical()
                .id_salt(page.file)
                .show(ui, |ui| markdown(ui, page.text));
        });
    if !open {
        out.push(Command::Guide(None));
    }
}

/// Markdown as plain egui text: enough to read the docs, no links followed.
fn markdown(ui: &mut egui::Ui, text: &str) {
    let mut paragraph = String::new();
    let mut code: Option<String> = None;
    let mut table: Vec<Vec<String>> = Vec::new();
    let flush = |ui: &mut egui::Ui, p: &mut String| {
        if !p.trim().is_empty() {
            ui.label(p.trim());
        }
        p.clear();
    };
    for (n, line) in text.lines().enumerate() {
        if !line.trim_start().starts_with('|') && !table.is_empty() {
            draw_table(ui, n, &std::mem::take(&mut table));
        }
        if line.trim_start().starts_with("```") {
            flush(ui, &mut paragraph);
            match code.take() {
                Some(block) => {
                    ui.label(RichText::new(block.trim_end()).monospace());
                }
                None => code = Some(String::new()),
            }
            continue;
        }
        if let Some(block) = code.as_mut() {
            block.push_str(line);
            block.push('\n');
            continue;
        }
        let t = line.trim();
        if t.is_empty() {
            flush(ui, &mut paragraph);
        } else if let Some(h) = t.strip_prefix("# ") {
            flush(ui, &mut paragraph);
            ui.heading(h);
        } else if let Some(h) = t.strip_prefix("## ") {
            flush(ui, &mut paragraph);
            ui.add_space(6.0);
            ui.label(RichText::new(h).strong().size(17.0));
        } else if let Some(h) = t.strip_prefix("### ") {
            flush(ui, &mut paragraph);
            ui.label(RichText::new(h).strong());
        } else if t.starts_with('|') {
            flush(ui, &mut paragraph);
            if !t.starts_with("| ---") {
                let cells = t.trim_matches('|').split(" | ");
                table.push(cells.map(|c| c.trim().replace("**", "")).collect());
            }
        } else if t.starts_with("![") {
            flush(ui, &mut paragraph);
            let alt = t.trim_start_matches("![").split(']').next().unwrap_or("");
            ui.label(RichText::new(format!("[picture: {alt}]")).weak());
        } else if t.starts_with("- ")
            || t.starts_with("* ")
            || t.starts_with(|c: char| c.is_ascii_digit())
                && t.contains(". ")
                && paragraph.is_empty()
        {
            flush(ui, &mut paragraph);
            paragraph.push_str(&t.replace("**", ""));
        } else {
            if !paragraph.is_empty() {
                paragraph.push(' ');
            }
            paragraph.push_str(&t.replace("**", ""));
        }
    }
    flush(ui, &mut paragraph);
    if !table.is_empty() {
        draw_table(ui, usize::MAX, &table);
    }
}

/// A Markdown table as a striped grid, its first row the header.
fn draw_table(ui: &mut egui::Ui, id: usize, rows: &[Vec<String>]) {
    egui::Grid::new(("guide table", id))
        .striped(true)
        .max_col_width(260.0)
        .show(ui, |ui| {
            for (r, row) in rows.iter().enumerate() {
                for cell in row {
                    let text = RichText::new(cell).size(12.0);
                    ui.add(egui::Label::new(if r == 0 { text.strong() } else { text }).wrap());
                }
                ui.end_row();
            }
        });
}
