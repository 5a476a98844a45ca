//! A report as one PNG: the ROC and precision-recall curves (the model in orange, the active
//! model in blue, chance in grey) and the confusion matrix, labelled in the on-screen
//! display's 5x7 font at twice its size.

use super::{Confusion, Report};
use crate::trust::calibration::Bin;
use image::{Rgb, RgbImage};

const PLOT: u32 = 300;
const MARGIN: u32 = 40;
/// Gap between a plot's box and its unit square.
const INSET: u32 = 6;
const COLOURS: [Rgb<u8>; 2] = [Rgb([240, 150, 40]), Rgb([80, 160, 240])];
const GREY: Rgb<u8> = Rgb([90, 90, 90]);
const WHITE: Rgb<u8> = Rgb([230, 230, 230]);

/// The report's picture: title, the two curve plots side by side, the confusion matrix below.
pub fn picture(report: &Report) -> RgbImage {
    let matrix = report.confusion.as_ref().map(confusion);
    let width = (2 * (PLOT + 2 * MARGIN)).max(matrix.as_ref().map_or(0, |m| m.width() + 20));
    let top = 80;
    let plots_h = PLOT + 2 * MARGIN;
    let height = top + plots_h + matrix.as_ref().map_or(0, |m| m.height() + 20);
    let mut img = RgbImage::from_pixel(width, height, Rgb([0, 0, 0]));
    text(&mut img, &report.capability, 8, 6, WHITE);
    text(&mut img, &report.curves_of, 8, 28, WHITE);
    for (i, c) in report.curves.iter().take(2).enumerate() {
        let label = format!(
            "{} AUROC {} AP {}",
            if i == 0 { "MODEL" } else { "ACTIVE" },
            area(c.auroc),
            area(c.ap)
        );
        text(&mut img, &label, 8 + i as u32 * 330, 50, COLOURS[i]);
    }
    let roc = (MARGIN, top + MARGIN);
    let pr = (PLOT + 3 * MARGIN, top + MARGIN);
    frame(&mut img, roc, "ROC: FPR / TPR");
    frame(&mut img, pr, "PR: RECALL / PRECISION");
    line(&mut img, roc, [0.0, 0.0], [1.0, 1.0], GREY);
    for (i, c) in report.curves.iter().take(2).enumerate().rev() {
        for w in c.roc.windows(2) {
            line(&mut img, roc, w[0], w[1], COLOURS[i]);
        }
        let mut at = [0.0, c.pr.first().map_or(1.0, |p| p[1])];
        for p in &c.pr {
            // Step curve: recall moves at the current precision, then precision changes.
            line(&mut img, pr, at, [p[0], at[1]], COLOURS[i]);
            line(&mut img, pr, [p[0], at[1]], *p, COLOURS[i]);
            at = *p;
        }
    }
    if let Some(m) = matrix {
        image::imageops::overlay(&mut img, &m, 10, (top + plots_h + 10) as i64);
    }
    img
}

/// A confusion matrix: one cell per (true, predicted) class shaded by the row's share (green
/// on the diagonal, red off it), with its count; rows named, columns numbered.
pub fn confusion(c: &Confusion) -> RgbImage {
    let cell = 56u32;
    let longest = c.classes.iter().map(|s| s.len()).max().unwrap_or(4) as u32;
    let margin = (longest + 3) * 12 + 8;
    let n = c.classes.len() as u32;
    let title = "TRUE ROWS / PREDICTED COLUMNS";
    let widest = title.len().max(c.of.len()) as u32 * 12 + 12;
    let (w, h) = ((margin + cell * n + 10).max(widest), 60 + cell * n + 10);
    let mut img = RgbImage::from_pixel(w, h, Rgb([0, 0, 0]));
    for (i, row) in c.counts.iter().enumerate() {
        for (j, &count) in row.iter().enumerate() {
            let colour = Rgb(c.shade(i, j));
            let (x0, y0) = (margin + j as u32 * cell, 60 + i as u32 * cell);
            for y in y0 + 1..y0 + cell - 1 {
                for x in x0 + 1..x0 + cell - 1 {
                    img.put_pixel(x, y, colour);
                }
            }
            text(
                &mut img,
                &count.to_string(),
                x0 + 6,
                y0 + cell / 2 - 7,
                WHITE,
            );
        }
        let label = format!("{} {}", i + 1, c.classes[i]);
        text(
            &mut img,
            &label,
            4,
            60 + i as u32 * cell + cell / 2 - 7,
            WHITE,
        );
        text(
            &mut img,
            &(i + 1).to_string(),
            margin + i as u32 * cell + cell / 2 - 5,
            40,
            WHITE,
        );
    }
    text(&mut img, title, 4, 0, WHITE);
    text(&mut img, &c.of, 4, 19, GREY);
    img
}

/// The plot's box (a little outside the unit square, so that curves along an edge show) and
/// axis title at `origin` (top-left of the unit square).
fn frame(img: &mut RgbImage, origin: (u32, u32), title: &str) {
    let (x0, y0) = (origin.0 - INSET, origin.1 - INSET);
    let (x1, y1) = (origin.0 + PLOT + INSET, origin.1 + PLOT + INSET);
    for x in x0..=x1 {
        img.put_pixel(x, y0, GREY);
        img.put_pixel(x, y1, GREY);
    }
    for y in y0..=y1 {
        img.put_pixel(x0, y, GREY);
        img.put_pixel(x1, y, GREY);
    }
    text(img, title, origin.0, origin.1 + PLOT + 12, WHITE);
}

/// A straight line between two points of the unit square plotted at `origin`.
fn line(img: &mut RgbImage, origin: (u32, u32), a: [f64; 2], b: [f64; 2], colour: Rgb<u8>) {
    let px = |p: [f64; 2]| {
        (
            origin.0 as f64 + p[0].clamp(0.0, 1.0) * PLOT as f64,
            origin.1 as f64 + (1.0 - p[1].clamp(0.0, 1.0)) * PLOT as f64,
        )
    };
    let (a, b) = (px(a), px(b));
    let steps = ((b.0 - a.0).abs().max((b.1 - a.1).abs()).ceil() as usize).max(1);
    for s in 0..=steps {
        let t = s as f64 / steps as f64;
        let (x, y) = (a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t);
        for (dx, dy) in [(0, 0), (1, 0), (0, 1)] {
            let (x, y) = (x as u32 + dx, y as u32 + dy);
            if x < img.width() && y < img.height() {
                img.put_pixel(x, y, colour);
            }
        }
    }
}

/// `s` (upper-cased) in the on-screen display's font at twice its size, top-left at (x, y).
/// A curve's area for the picture, whose font has no brackets: "-" for none.
fn area(a: Option<f64>) -> String {
    a.map_or("-".into(), |a| format!("{a:.3}"))
}

pub fn text(img: &mut RgbImage, s: &str, x: u32, y: u32, colour: Rgb<u8>) {
    let s = s.to_uppercase();
    let mut tile = RgbImage::new(6 * s.len() as u32 + 4, 9);
    crate::data::phantom::osd::draw(&mut tile, &[s]);
    let big = image::imageops::resize(
        &tile,
        tile.width() * 2,
        tile.height() * 2,
        image::imageops::FilterType::Nearest,
    );
    for (dx, dy, p) in big.enumerate_pixels() {
        if p.0 != [0, 0, 0] && x + dx < img.width() && y + dy < img.height() {
            img.put_pixel(x + dx, y + dy, colour);
        }
    }
}

/// A reliability diagram: per confidence bin, the share right (bars: grey before
/// calibration, orange after) against the diagonal of perfect calibration, with the
/// expected calibration errors in the title.
pub fn reliability(row: &crate::eval::trust::TrustRow) -> RgbImage {
    diagram(
        &row.capability,
        row.answers,
        (row.ece_raw.value, &row.bins_raw),
        row.ece_calibrated
            .as_ref()
            .map(|c| c.value)
            .zip(row.bins_calibrated.as_ref()),
    )
}

/// The reliability diagram of a model report's calibration, drawn as [`reliability`] draws
/// `eval trust`'s rows.
pub fn calibration(c: &super::CalibrationFigures) -> RgbImage {
    diagram(
        &format!("{} calibration", c.name),
        c.answers,
        (c.ece_raw, &c.bins_raw),
        Some((c.ece_calibrated, &c.bins_calibrated)),
    )
}

/// A reliability diagram titled `title`: (expected calibration error, bins) raw, then
/// calibrated when there is a calibration.
fn diagram(
    title: &str,
    answers: usize,
    raw: (f64, &Vec<Bin>),
    calibrated: Option<(f64, &Vec<Bin>)>,
) -> RgbImage {
    let top = 80;
    let width = PLOT + 2 * MARGIN;
    let mut img = RgbImage::from_pixel(width, top + PLOT + 2 * MARGIN, Rgb([0, 0, 0]));
    text(&mut img, title, 8, 6, WHITE);
    let mut ece = format!("ECE RAW {:.3}", raw.0);
    if let Some((c, _)) = calibrated {
        ece.push_str(&format!(" CALIBRATED {c:.3}"));
    }
    text(&mut img, &ece, 8, 28, COLOURS[0]);
    text(&mut img, &format!("{answers} ANSWERS"), 8, 50, GREY);
    let at = (MARGIN, top + MARGIN);
    frame(&mut img, at, "CONFIDENCE / ACCURACY");
    line(&mut img, at, [0.0, 0.0], [1.0, 1.0], GREY);
    let sets: Vec<(&Vec<Bin>, Rgb<u8>)> = std::iter::once((raw.1, GREY))
        .chain(calibrated.map(|(_, b)| (b, COLOURS[0])))
        .collect();
    for (k, (bins, colour)) in sets.iter().enumerate() {
        for b in bins.iter().filter(|b| b.answers > 0) {
            // Half a bin's width per set, side by side.
            let x0 = b.low + (b.high - b.low) * 0.5 * k as f64;
            let x1 = x0 + (b.high - b.low) * 0.45;
            let steps = 12;
            for s in 0..=steps {
                let x = x0 + (x1 - x0) * s as f64 / steps as f64;
                line(&mut img, at, [x, 0.0], [x, b.accuracy], *colour);
            }
        }
    }
    img
}
