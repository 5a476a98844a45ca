//! The text-prompt report: a prompt model (Endo-CLIP, a run's card) beside the library's
//! active one, on held-out examination records. Zero-shot polyp detection per frame and
//! benign vs neoplastic per polyp, as `eval prompts` scores them (intervals resample
//! examinations); curves of the detection; the confusion of the pathology call (neoplastic
//! when its prompts' summed probability passes one half).

use super::{Confusion, Curves, Report, ReportCalibration, ReportData, ReportError, ReportMetric};
use crate::data::phantom::Split;
use crate::eval::held_out::HeldOut;
use crate::eval::prompts::{HeldOutItems, Named};
use crate::plumbing::Progress;
use crate::prompts::model;
use burn::tensor::Device;
use std::path::Path;

/// Frames per examination of a generated split (as `eval prompts` makes them).
const FRAMES: usize = 24;

pub fn report(
    card: &Path,
    active_models: Option<&Path>,
    data: &ReportData,
    device: &Device,
    progress: &Progress,
) -> Result<Report, ReportError> {
    let loaded = model::load(card, device)?;
    let dir = super::models_folder(active_models);
    let (active_card, active) = super::load_active(card, &dir, &[model::SHIPPED_NAME], |p| {
        Ok(model::load(p, device)?)
    })?
    .unzip();
    progress.stage("held-out examination records", 0);
    let held = HeldOut::open_records_of(
        data.held_out.as_deref(),
        data.seed,
        Split::Validation,
        data.polyps,
        FRAMES,
        96,
    )
    .map_err(|e| ReportError::Data(format!("the held-out examinations: {e}")))?;
    // Read at the larger input of the two models; each is fed its own size.
    let size = active
        .as_ref()
        .map_or(0, |a| a.config.image_size())
        .max(loaded.config.image_size());
    let items = HeldOutItems::load(&held.store, size, data.seed).map_err(ReportError::Data)?;
    let (frames, with_polyp) = items.frame_count();
    let (polyps, benign) = items.polyp_count();
    if with_polyp == 0 || with_polyp == frames || polyps == 0 {
        return Err(ReportError::Data(format!(
            "{}: {frames} frames ({with_polyp} with a polyp) and {polyps} polyps with a \
             Vienna class: a report needs frames with and without polyps",
            held.described
        )));
    }
    progress.stage("scoring the held-out frames", 0);
    let mut models = vec![Named::of(&loaded.named(), &loaded)];
    models.extend(active.as_ref().map(|a| Named::of(&a.named(), a)));
    let scored: Vec<_> = models
        .iter()
        .map(|m| {
            (
                items.detection_items(m, device),
                items.pathology_items(m, device),
            )
        })
        .collect();
    let figures = |i: usize| {
        scored
            .get(i)
            .map(|(d, p)| (items.curves(d), items.curves(p)))
    };
    let (model_fig, active_fig) = (figures(0).expect("the model's"), figures(1));
    type Pick = fn(&crate::eval::prompts::Curves) -> (f64, [f64; 2]);
    let rows: [(&str, bool, Pick); 4] = [
        ("polyp detection AUROC (frames)", true, |c| {
            (c.auroc, c.auroc_ci)
        }),
        ("polyp detection AUPR (frames)", true, |c| {
            (c.aupr, c.aupr_ci)
        }),
        ("neoplastic AUROC (polyps)", false, |c| {
            (c.auroc, c.auroc_ci)
        }),
        ("neoplastic AUPR (polyps)", false, |c| (c.aupr, c.aupr_ci)),
    ];
    let metrics = rows
        .iter()
        .map(|(name, detection, pick)| {
            let of = |f: &(crate::eval::prompts::Curves, crate::eval::prompts::Curves)| {
                pick(if *detection { &f.0 } else { &f.1 })
            };
            let (m, m_ci) = of(&model_fig);
            let a = active_fig.as_ref().map(of);
            ReportMetric {
                name: name.to_string(),
                model: m,
                model_ci: Some(m_ci),
                active: a.map(|x| x.0),
                active_ci: a.map(|x| x.1),
            }
        })
        .collect();
    let curves = scored
        .iter()
        .zip(&models)
        .map(|((d, _), m)| {
            let scores: Vec<f64> = d.iter().map(|x| x.0).collect();
            let positive: Vec<bool> = d.iter().map(|x| x.1).collect();
            Curves::of(&m.label, &scores, &positive)
        })
        .collect();
    progress.stage("the detector's calibration", 0);
    let calibration = ReportCalibration::measure(
        &loaded.card,
        crate::trust::DETECTOR,
        "the polyp probability of the side it is on (p or 1 - p)",
        data.seed,
        || {
            crate::eval::trust::detector_items(&loaded, &held.store, frames, device, progress)
                .map_err(|e| ReportError::Data(format!("the detector's calibration: {e}")))
        },
    )?;
    let mut counts = vec![vec![0usize; 2]; 2];
    for &(score, neoplastic, _) in &scored[0].1 {
        counts[usize::from(neoplastic)][usize::from(score >= 0.5)] += 1;
    }
    Ok(Report {
        capability: "text prompts (Endo-CLIP)".into(),
        model: card.display().to_string(),
        active: active_card.map(|p| p.display().to_string()),
        held_out: format!(
            "{}: {} examinations, {frames} frames ({with_polyp} with a polyp), {polyps} polyps \
             ({benign} benign)",
            held.described,
            items.examinations()
        ),
        seed: data.seed,
        bootstrap: 200,
        metrics,
        curves_of: "frames: does the polyp prompt win (zero-shot detection)".into(),
        curves,
        confusion: Some(Confusion {
            of: "polyps: neoplastic prompts' probability >= 0.5".into(),
            classes: vec!["benign".into(), "neoplastic".into()],
            counts,
        }),
        calibration: Some(calibration),
        made_at: crate::store::now_utc(),
    })
}
