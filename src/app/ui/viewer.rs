//! The image viewer: a grid of the selection's views, or one view large with zoom and pan.
//! Zoom and pan are view-local UI state (egui memory), reset by a double-click.

use super::super::Command;
use super::super::state::BoxRow;
use super::super::state::{AppState, Selection};
use super::super::textures::Textures;
use crate::engine::loader::ImageKey;
use egui::{Color32, Rect, RichText, Sense, Stroke, StrokeKind, Vec2, pos2};

#[derive(Clone, Copy, Debug)]
struct ZoomPan {
    zoom: f32,
    pan: Vec2,
}

impl Default for ZoomPan {
    fn default() -> Self {
        ZoomPan {
            zoom: 1.0,
            pan: Vec2::ZERO,
        }
    }
}

pub fn draw(ui: &mut egui::Ui, state: &AppState, textures: &mut Textures, out: &mut Vec<Command>) {
    let keys: Vec<(ImageKey, String)> = match state.selection {
        Selection::OpenedFiles => state
            .opened_files
            .iter()
            .map(|p| {
                (
                    ImageKey::File(p.clone()),
                    p.file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                )
            })
            .collect(),
        _ => state
            .details
            .media
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let label = match state.selection {
                    Selection::Video(_) => format!(
                        "frame {}",
                        state
                            .details
                            .frame_indices
                            .get(i)
                            .copied()
                            .unwrap_or(i as i64)
                    ),
                    Selection::Polyp(_) => format!("view {}", i + 1),
                    _ => m
                        .source_path
                        .rsplit(['/', '\\'])
                        .next()
                        .unwrap_or("")
                        .to_string(),
                };
                (ImageKey::Media(m.id), label)
            })
            .collect(),
    };
    ui.horizontal(|ui| {
        ui.heading(if state.details.title.is_empty() {
            "Nothing selected"
        } else {
            &state.details.title
        });
        if state.selection == Selection::OpenedFiles {
            let writable = state.library.as_ref().is_some_and(|l| !l.read_only);
            if ui
                .add_enabled(writable, egui::Button::new("Import into library"))
                .clicked()
            {
                out.push(Command::ImportOpenedFiles);
            }
        }
    });
    if keys.is_empty() {
        ui.add_space(20.0);
        ui.label(match state.selection {
            Selection::Nothing => {
                "Select a case in the browser (Up/Down), open images (File > Open images…) or drop images, folders or a library here."
            }
            _ => "No images for this selection.",
        });
        return;
    }
    let is_video = matches!(state.selection, Selection::Video(_));
    let focused = state.focused.or(is_video.then_some(0));
    match focused {
        Some(i) if i < keys.len() => {
            ui.horizontal(|ui| {
                if !is_video && ui.button("< all views").clicked() {
                    out.push(Command::Focus(None));
                }
                ui.label(format!("{} ({}/{})", keys[i].1, i + 1, keys.len()));
                if is_video {
                    let mut frame = i;
                    let slider = egui::Slider::new(&mut frame, 0..=keys.len() - 1).text("frame");
                    if ui.add(slider).changed() {
                        out.push(Command::Focus(Some(frame)));
                    }
                }
            });
            if let Selection::Video(video) = state.selection {
                polyp_strip(ui, state, video, i, keys.len(), out);
            }
            let boxes: Vec<&BoxRow> = if is_video {
                let frame_index = state.details.frame_indices.get(i).copied();
                state
                    .details
                    .boxes
                    .iter()
                    .filter(|b| Some(b.frame_index) == frame_index)
                    .collect()
            } else {
                Vec::new()
            };
            let writable = state.library.as_ref().is_some_and(|l| !l.read_only);
            let target = match (&keys[i].0, state.selection) {
                (ImageKey::File(path), _) => Some(BoxTarget::Opened {
                    path,
                    drawn: state.opened_boxes.get(path).copied(),
                }),
                (_, Selection::Video(video)) if writable => state
                    .details
                    .frame_indices
                    .get(i)
                    .map(|&frame| BoxTarget::VideoFrame { video, frame }),
                (_, Selection::Video(_)) => None,
                (_, _) if writable => state.details.media.get(i).map(|m| BoxTarget::LibraryView {
                    media_id: m.id,
                    has_mask: m.mask_media_id.is_some(),
                    drawn: state.details.view_boxes.get(i).copied().flatten(),
                }),
                _ => None,
            };
            focused_image(ui, textures, &keys[i].0, &boxes, state, out, target);
        }
        _ => grid(ui, textures, &keys, out),
    }
}

fn grid(
    ui: &mut egui::Ui,
    textures: &mut Textures,
    keys: &[(ImageKey, String)],
    out: &mut Vec<Command>,
) {
    let avail = ui.available_width();
    let cols = ((avail / 260.0).floor() as usize).clamp(1, 4);
    let cell = (avail / cols as f32) - 12.0;
    egui::ScrollArea::vertical()
        .auto_shrink([false, false])
        .show(ui, |ui| {
            egui::Grid::new("views").spacing([8.0, 8.0]).show(ui, |ui| {
                for (i, (key, label)) in keys.iter().enumerate() {
                    ui.vertical(|ui| {
                        let (rect, resp) =
                            ui.allocate_exact_size(Vec2::splat(cell), Sense::click());
                        resp.widget_info(|| {
                            egui::WidgetInfo::labeled(
                                egui::Role::Button,
                                true,
                                format!("Open {label}"),
                            )
                        });
                        paint_fitted(ui, textures, key, rect, 1.0, Vec2::ZERO, &[]);
                        if resp.hovered() {
                            ui.painter().rect_stroke(
                                rect,
                                2.0,
                                Stroke::new(2.0, Color32::LIGHT_BLUE),
                                StrokeKind::Inside,
                            );
                        }
                        if resp.clicked() {
                            out.push(Command::Focus(Some(i)));
                        }
                        ui.label(label);
                    });
                    if (i + 1) % cols == 0 {
                        ui.end_row();
                    }
                }
            });
        });
}

/// What a box drawn with Shift+drag on the large image becomes.
enum BoxTarget<'a> {
    /// An opened file (no mask): the polyp box twin queries crop around.
    Opened {
        path: &'a std::path::PathBuf,
        drawn: Option<[f32; 4]>,
    },
    /// A library still image: its audited polyp box, which the twin encoders crop around.
    LibraryView {
        media_id: i64,
        has_mask: bool,
        drawn: Option<[f32; 4]>,
    },
    /// A video frame (library writable): a box the tracker follows into a new tracklet.
    VideoFrame { video: i64, frame: i64 },
}

impl BoxTarget<'_> {
    fn drawn(&self) -> Option<[f32; 4]> {
        match self {
            BoxTarget::Opened { drawn, .. } | BoxTarget::LibraryView { drawn, .. } => *drawn,
            BoxTarget::VideoFrame { .. } => None,
        }
    }

    /// The command for a box drawn (`Some`) or cleared (`None`).
    fn command(&self, xywh: Option<[f32; 4]>) -> Option<Command> {
        match *self {
            BoxTarget::Opened { path, .. } => Some(Command::SetPolypBox {
                path: path.clone(),
                xywh,
            }),
            BoxTarget::LibraryView { media_id, .. } => Some(Command::SetViewBox { media_id, xywh }),
            BoxTarget::VideoFrame { video, frame } => xywh.map(|xywh| Command::TrackBox {
                video_id: video,
                frame,
                xywh,
            }),
        }
    }

    /// The line above the image: what a drawn box does, and where the twin crop is now.
    fn hint(&self) -> String {
        match self {
            BoxTarget::Opened { drawn, .. } => match drawn {
                Some(_) => "Twin queries crop around the drawn box (Shift+drag to redraw).".into(),
                None => "Shift+drag a box around the polyp: twin queries crop there (now: the \
                         centred field of view)."
                    .into(),
            },
            BoxTarget::LibraryView {
                has_mask, drawn, ..
            } => match (drawn, has_mask) {
                (Some(_), _) => "Twin crop: the drawn box (Shift+drag to redraw; audited, \
                                 Ctrl+Z undoes)."
                    .into(),
                (None, true) => "Twin crop: the mask's box. Shift+drag a box around the polyp \
                                 to adjust it (audited)."
                    .into(),
                (None, false) => "Twin crop: the centred field of view (no mask). Shift+drag a \
                                  box around the polyp to crop there (audited)."
                    .into(),
            },
            BoxTarget::VideoFrame { .. } => "Shift+drag a box around a polyp: the tracker \
                                             follows it through the neighbouring frames into a \
                                             new tracklet."
                .into(),
        }
    }
}

/// One image large. Shift+drag draws a box (see [`BoxTarget`]); without a target the image
/// only zooms and pans.
fn focused_image(
    ui: &mut egui::Ui,
    textures: &mut Textures,
    key: &ImageKey,
    boxes: &[&BoxRow],
    state: &AppState,
    out: &mut Vec<Command>,
    target: Option<BoxTarget<'_>>,
) {
    if let Some(t) = &target {
        ui.horizontal(|ui| {
            ui.label(RichText::new(t.hint()).small().weak());
            if t.drawn().is_some()
                && ui.button("Clear box").clicked()
                && let Some(c) = t.command(None)
            {
                out.push(c);
            }
        });
    }
    let id = ui.scope_id().with((
        "zoompan",
        format!("{key:?}"),
        format!("{:?}", state.selection),
    ));
    let mut zp: ZoomPan = ui.data(|d| d.get_temp(id)).unwrap_or_default();
    let size = ui.available_size();
    let (rect, resp) = ui.allocate_exact_size(size, Sense::click_and_drag());
    // Named for screen readers and the GUI tests (which drag boxes on it).
    resp.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Image, true, "large image"));
    if resp.hovered() {
        let scroll = ui.input(|i| i.smooth_scroll_delta.y);
        if scroll != 0.0 {
            zp.zoom = (zp.zoom * (1.0 + scroll * 0.002)).clamp(0.2, 20.0);
        }
    }
    let shift = ui.input(|i| i.modifiers.shift);
    let drawing = target.is_some() && shift;
    if resp.dragged() && !drawing {
        zp.pan += resp.drag_delta();
    }
    if resp.double_clicked() {
        zp = ZoomPan::default();
    }
    ui.data_mut(|d| d.insert_temp(id, zp));
    let Some((img_rect, scale)) = paint_fitted(ui, textures, key, rect, zp.zoom, zp.pan, boxes)
    else {
        return;
    };
    let Some(target) = target else {
        return;
    };
    let to_image = |p: egui::Pos2| (p - img_rect.min) / scale;
    let painter = ui.painter_at(rect);
    if let Some(b) = target.drawn() {
        let r = Rect::from_min_size(
            img_rect.min + Vec2::new(b[0], b[1]) * scale,
            Vec2::new(b[2], b[3]) * scale,
        );
        painter.rect_stroke(
            r,
            0.0,
            Stroke::new(2.0, Color32::GREEN),
            StrokeKind::Outside,
        );
    }
    // Where the drag began: egui forgets the press origin on the frame the button is
    // released, which is when the box is made.
    let origin_id = id.with("box origin");
    if let Some(origin) = ui.input(|i| i.pointer.press_origin()) {
        ui.data_mut(|d| d.insert_temp(origin_id, origin));
    }
    let origin: Option<egui::Pos2> = ui.data(|d| d.get_temp(origin_id));
    if drawing && let (Some(now), Some(origin)) = (resp.interact_pointer_pos(), origin) {
        let r = Rect::from_two_pos(origin, now);
        painter.rect_stroke(
            r,
            0.0,
            Stroke::new(1.5, Color32::LIGHT_GREEN),
            StrokeKind::Outside,
        );
        if resp.drag_stopped() {
            let (a, b) = (to_image(r.min), to_image(r.max));
            let size = img_rect.size() / scale;
            let (x0, y0) = (a.x.clamp(0.0, size.x), a.y.clamp(0.0, size.y));
            let (x1, y1) = (b.x.clamp(0.0, size.x), b.y.clamp(0.0, size.y));
            if x1 - x0 >= 4.0
                && y1 - y0 >= 4.0
                && let Some(c) = target.command(Some([x0, y0, x1 - x0, y1 - y0]))
            {
                out.push(c);
            }
        }
    }
}

/// Paints the image fitted into `rect` (aspect kept), zoomed about the centre and panned.
fn paint_fitted(
    ui: &mut egui::Ui,
    textures: &mut Textures,
    key: &ImageKey,
    rect: Rect,
    zoom: f32,
    pan: Vec2,
    boxes: &[&BoxRow],
) -> Option<(Rect, f32)> {
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 2.0, Color32::from_gray(12));
    let tex = match textures.full(key) {
        Some(Ok(t)) => t.clone(),
        Some(Err(e)) => {
            painter.text(
                rect.center(),
                egui::Align2::CENTER_CENTER,
                format!("cannot show image:\n{e}"),
                egui::FontId::proportional(13.0),
                Color32::LIGHT_RED,
            );
            return None;
        }
        None => {
            painter.text(
                rect.center(),
                egui::Align2::CENTER_CENTER,
                "loading…",
                egui::FontId::proportional(13.0),
                Color32::GRAY,
            );
            return None;
        }
    };
    let [w, h] = tex.size();
    let scale = (rect.width() / w as f32).min(rect.height() / h as f32) * zoom;
    let img_size = Vec2::new(w as f32, h as f32) * scale;
    let img_rect = Rect::from_center_size(rect.center() + pan, img_size);
    painter.image(
        tex.id(),
        img_rect,
        Rect::from_min_max(pos2(0.0, 0.0), pos2(1.0, 1.0)),
        Color32::WHITE,
    );
    for b in boxes {
        let min = img_rect.min + Vec2::new(b.x as f32, b.y as f32) * scale;
        let r = Rect::from_min_size(min, Vec2::new(b.w as f32, b.h as f32) * scale);
        painter.rect_stroke(
            r,
            0.0,
            Stroke::new(2.0, Color32::YELLOW),
            StrokeKind::Outside,
        );
        if let Some(t) = b.tracklet_id {
            painter.text(
                r.left_top(),
                egui::Align2::LEFT_BOTTOM,
                format!("T{t}"),
                egui::FontId::proportional(12.0),
                Color32::YELLOW,
            );
        }
    }
    Some((img_rect, scale))
}

/// The stage-1 detector's polyp probability of every frame of the video as a strip under the
/// slider (dark: background, bright: polyp), the shown frame marked; a click jumps there.
fn polyp_strip(
    ui: &mut egui::Ui,
    state: &AppState,
    video: i64,
    at: usize,
    frames: usize,
    out: &mut Vec<Command>,
) {
    let panel = &state.prompts;
    let Some(strip) = panel.strip.as_ref().filter(|s| s.video == video) else {
        if panel.strip_running.is_some_and(|(v, _)| v == video) {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.small("polyp probability per frame: encoding the video...");
            });
        }
        return;
    };
    let probabilities = &strip.reading.shown;
    if probabilities.is_empty() {
        return;
    }
    let width = ui.available_width().max(100.0);
    let (rect, response) = ui.allocate_exact_size(egui::vec2(width, 16.0), egui::Sense::click());
    let painter = ui.painter_at(rect);
    let n = probabilities.len();
    let step = rect.width() / n as f32;
    // Shaded within the video's own range, so its peaks stand out whatever the scale.
    let lo = probabilities.iter().copied().fold(f32::INFINITY, f32::min);
    let hi = probabilities
        .iter()
        .copied()
        .fold(f32::NEG_INFINITY, f32::max);
    let span = (hi - lo).max(1e-6);
    for (k, &p) in probabilities.iter().enumerate() {
        let p = (p - lo) / span;
        let x = rect.left() + k as f32 * step;
        let c = egui::Color32::from_rgb(
            (40.0 + 215.0 * p) as u8,
            (40.0 + 120.0 * p) as u8,
            (60.0 * (1.0 - p)) as u8 + 20,
        );
        painter.rect_filled(
            egui::Rect::from_min_max(
                egui::pos2(x, rect.top()),
                egui::pos2(x + step.max(1.0), rect.bottom()),
            ),
            0.0,
            c,
        );
    }
    let x = rect.left() + (at as f32 + 0.5) * step;
    painter.line_segment(
        [egui::pos2(x, rect.top()), egui::pos2(x, rect.bottom())],
        egui::Stroke::new(2.0, egui::Color32::WHITE),
    );
    if response.clicked()
        && let Some(pos) = response.interact_pointer_pos()
    {
        let k = (((pos.x - rect.left()) / step) as usize).min(frames.saturating_sub(1));
        out.push(Command::Focus(Some(k)));
    }
    let this = strip.reading.label(at).unwrap_or_default();
    let (what, hover) = match strip.reading.calibrated {
        true => (
            "calibrated polyp confidence per frame",
            "How often a frame given this confidence shows a polyp, on validation frames \
             (temperature calibration of the detector, stored with the model).",
        ),
        false => (
            "polyp probability per frame, not calibrated",
            "The detector's card stores no calibration: the number is the softmax of its two \
             sentences, not how often it is right.",
        ),
    };
    ui.small(format!(
        "{what} by {}: this frame {this}; the video {lo:.3} (dark) to {hi:.3} (bright); click to jump",
        strip.model
    ))
    .on_hover_text(hover);
}
