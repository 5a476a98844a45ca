//! The capsule-caption report: a caption model (a run's card) beside the library's active
//! one, on held-out capsule frames. Caption retrieval (top-1 and top-5 among every distinct
//! caption of the held-out frames) and the category head (top-category accuracy,
//! multi-label macro-F1), as `eval captions` scores them (intervals resample patients);
//! curves of the category head over every (frame, category) pair; the confusion of the top
//! category.

use super::{Confusion, Curves, Report, ReportCalibration, ReportData, ReportError, ReportMetric};
use crate::captions::CATEGORIES;
use crate::captions::data::CaptionSet;
use crate::captions::model::{self, LoadedCaptionModel};
use crate::data::phantom::Split;
use crate::eval::captions::{self as eval, Candidate, CaptionEval};
use crate::eval::held_out::HeldOut;
use crate::plumbing::Progress;
use burn::tensor::Device;
use std::path::Path;

/// One model's figures on the held-out frames.
struct Scored {
    eval: CaptionEval,
    /// (head probability, true) for every (frame, category) pair.
    pairs: Vec<(f64, bool)>,
    /// "; left out: ..." when held-out frames could not be read, else empty.
    left_out: String,
}

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
    progress.stage("held-out capsule frames", 0);
    let data_error = |what: &str| {
        let what = what.to_string();
        move |e: crate::data::phantom::PhantomError| ReportError::Data(format!("{what}: {e}"))
    };
    let held = HeldOut::open_capsule(
        data.held_out.as_deref(),
        data.seed,
        Split::Validation,
        data.capsule_frames,
    )
    .map_err(data_error("the held-out capsule frames"))?;
    // The baselines of `eval captions` (majority caption, colour histogram) need training
    // frames; the phantom's train split of the same seed gives them (never the held-out ones).
    let train = HeldOut::open_capsule(None, data.seed, Split::Train, data.capsule_frames)
        .map_err(data_error("the training frames for the baselines"))?;
    progress.stage("scoring the held-out frames", 0);
    let score = |m: &LoadedCaptionModel| -> Result<Scored, ReportError> {
        let load = |store| {
            CaptionSet::load(store, &m.config, &Progress::new())
                .map_err(|e| ReportError::Data(format!("{}: {e}", held.described)))
        };
        let (test, train_set) = (load(&held.store)?, load(&train.store)?);
        if test.frames.is_empty() {
            return Err(ReportError::Data(format!(
                "{}: no captioned capsule frames to report on",
                held.described
            )));
        }
        let candidate = Candidate {
            label: m.card.name.clone(),
            model: &m.model,
            config: &m.config,
            loss: String::new(),
            shots: String::new(),
            baseline: false,
        };
        let autodiff = device.clone().autodiff();
        let eval = eval::run(
            &test,
            &train_set,
            &[candidate],
            data.seed,
            device,
            &autodiff,
        );
        let probs = eval::category_probabilities(&m.model, &m.config, &test, device);
        let pairs = probs
            .iter()
            .zip(test.category_targets())
            .flat_map(|(p, t)| {
                p.iter()
                    .zip(t)
                    .map(|(&p, t)| (p as f64, t))
                    .collect::<Vec<_>>()
            })
            .collect();
        let left_out = match test.skipped.len() {
            0 => String::new(),
            n => format!(
                "; left out {n} whose file could not be read: {}{}",
                test.skipped[0],
                if n > 1 {
                    format!(" (and {} more)", n - 1)
                } else {
                    String::new()
                }
            ),
        };
        Ok(Scored {
            eval,
            pairs,
            left_out,
        })
    };
    let mine = score(&loaded)?;
    let theirs = active.as_ref().map(score).transpose()?;
    type Pick = fn(&CaptionEval) -> (f64, [f64; 2]);
    let rows: [(&str, Pick); 4] = [
        ("caption top-1 (frames)", |e| {
            (e.retrieval[0].top1, e.retrieval[0].top1_ci)
        }),
        ("caption top-5 (frames)", |e| {
            (e.retrieval[0].top5, e.retrieval[0].top5_ci)
        }),
        ("top category accuracy", |e| {
            (e.categories[0].accuracy, e.categories[0].accuracy_ci)
        }),
        ("category macro-F1", |e| {
            (e.categories[0].macro_f1, e.categories[0].macro_f1_ci)
        }),
    ];
    let metrics = rows
        .iter()
        .map(|(name, pick)| {
            let (m, m_ci) = pick(&mine.eval);
            let a = theirs.as_ref().map(|t| pick(&t.eval));
            ReportMetric {
                name: name.to_string(),
                model: m,
                model_ci: Some(m_ci),
                active: a.map(|x| x.0),
                active_ci: a.map(|x| x.1),
            }
        })
        .collect();
    let curve = |label: &str, s: &Scored| {
        let scores: Vec<f64> = s.pairs.iter().map(|p| p.0).collect();
        let positive: Vec<bool> = s.pairs.iter().map(|p| p.1).collect();
        Curves::of(label, &scores, &positive)
    };
    progress.stage("the category's calibration", 0);
    let calibration = ReportCalibration::measure(
        &loaded.card,
        crate::trust::CATEGORY,
        "the top category's probability",
        data.seed,
        || {
            crate::eval::trust::caption_items(&loaded, &held.store, device, progress)
                .map_err(|e| ReportError::Data(format!("the category's calibration: {e}")))
        },
    )?;
    let mut curves = vec![curve(&loaded.card.name, &mine)];
    if let (Some(t), Some(a)) = (&theirs, &active) {
        curves.push(curve(&format!("active: {}", a.card.name), t));
    }
    Ok(Report {
        capability: "capsule captions".into(),
        model: card.display().to_string(),
        active: active_card.map(|p| p.display().to_string()),
        held_out: format!(
            "{}: {} frames of {} patients, {} distinct captions{}",
            held.described,
            mine.eval.frames,
            mine.eval.patients,
            mine.eval.candidates,
            mine.left_out
        ),
        seed: data.seed,
        bootstrap: mine.eval.bootstrap,
        metrics,
        curves_of: "(frame, category) pairs: the category head's probability".into(),
        curves,
        confusion: Some(Confusion {
            of: "frames: top category (entity precedence), true vs predicted".into(),
            classes: CATEGORIES.iter().map(|c| c.to_string()).collect(),
            counts: mine.eval.categories[0].confusion.clone(),
        }),
        calibration: Some(calibration),
        made_at: crate::store::now_utc(),
    })
}

/// The category confusion of an `eval captions` row as a PNG: rows the true top category,
/// columns the predicted one.
pub fn confusion_png(row: &eval::CategoryRow) -> image::RgbImage {
    super::draw::confusion(&Confusion {
        of: format!("top category, {}", row.method),
        classes: CATEGORIES.iter().map(|c| c.replace(' ', "-")).collect(),
        counts: row.confusion.clone(),
    })
}
