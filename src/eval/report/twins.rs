//! The digital-twin report: a twin image encoder (a run's card) beside the library's active
//! one, on held-out polyps with four views. Metrics as `eval twins` has them (mean of views;
//! intervals resample queries); curves over the 2v2 top-1 predictions (is the retrieved twin
//! the same polyp, by its similarity: the trade-off behind uAP); the confusion matrix of the
//! pathology vote (k-NN, 5-fold cross-validation over the held-out polyps).

use super::{Confusion, Curves, Report, ReportCalibration, ReportData, ReportError, ReportMetric};
use crate::data::phantom::Split;
use crate::eval::held_out::HeldOut;
use crate::eval::twins::{self as eval, Candidate, TwinEval};
use crate::model::weights::{self, ModelKind};
use crate::plumbing::Progress;
use crate::twins::TwinModels;
use burn::tensor::Device;
use std::path::Path;

/// Neighbours in the pathology vote (the twin panel's default).
const K: usize = 6;
const MODEL: &str = "this model";
const ACTIVE: &str = "active model";

pub fn report(
    card: &Path,
    active_models: Option<&Path>,
    data: &ReportData,
    device: &Device,
    progress: &Progress,
) -> Result<Report, ReportError> {
    let twin_error = |what: &str| {
        let what = what.to_string();
        move |e: crate::twins::TwinError| ReportError::Data(format!("{what}: {e}"))
    };
    let dir = super::models_folder(active_models);
    let scene = weights::read_card(card)?.kind == ModelKind::SceneEncoder;
    // A scene encoder is scored over the active image encoder, against that encoder's plain
    // mean of views (what the app uses without it); an image encoder beside the active one.
    // The image encoder a scene encoder learned over (its card's `reads`), among the folder's
    // twin and frame encoders; cards without `reads` take the twin encoder.
    let reads = weights::read_card(card)?.reads;
    let over = [crate::twins::IMAGE_MODEL, crate::twins::FRAME_IMAGE_MODEL]
        .into_iter()
        .find(|name| {
            let path = dir.join(format!("{name}.json"));
            reads
                .as_ref()
                .is_some_and(|r| weights::read_card(&path).is_ok_and(|c| c.sha256 == r.sha256))
        })
        .unwrap_or(crate::twins::IMAGE_MODEL);
    let image_card = match scene {
        true => Some(dir.join(format!("{over}.json")))
            .filter(|p| p.is_file())
            .ok_or_else(|| {
                ReportError::Data(format!(
                    "a scene encoder needs an image encoder: no {}.json in {}",
                    crate::twins::IMAGE_MODEL,
                    dir.display()
                ))
            })?,
        false => card.to_path_buf(),
    };
    let model = TwinModels::load_cards(&image_card, scene.then_some(card), device)
        .map_err(twin_error("the model"))?;
    let active_card = match scene {
        true => Some(image_card.clone()),
        false => super::active_card(card, &dir, &[crate::twins::IMAGE_MODEL]),
    };
    let active = match (&active_card, scene) {
        (Some(path), false) => Some(
            TwinModels::load_cards(path, None, device).map_err(twin_error("the active model"))?,
        ),
        _ => None,
    };
    let (mine, theirs) = match scene {
        true => (
            Side(MODEL, "scene encoder"),
            Some(Side(MODEL, "mean of views")),
        ),
        false => (
            Side(MODEL, "mean of views"),
            active.as_ref().map(|_| Side(ACTIVE, "mean of views")),
        ),
    };
    progress.stage("held-out polyps", 0);
    let held = HeldOut::open_split(
        data.held_out.as_deref(),
        data.seed,
        Split::Validation,
        data.polyps,
        4,
        256,
    )
    .map_err(|e| ReportError::Data(format!("the held-out polyps: {e}")))?;
    let mut candidates = vec![Candidate {
        label: MODEL.into(),
        models: &model,
    }];
    if let Some(active) = &active {
        candidates.push(Candidate {
            label: ACTIVE.into(),
            models: active,
        });
    }
    progress.stage("encoding held-out views", 0);
    let e = eval::run(&held.store, &candidates, K, data.seed)
        .map_err(|e| ReportError::Data(e.to_string()))?;
    if e.polyps < 2 * K {
        return Err(ReportError::Data(format!(
            "{}: {} polyps with four views; a report needs at least {}",
            held.described,
            e.polyps,
            2 * K
        )));
    }
    let curves = std::iter::once((&mine, card.to_path_buf()))
        .chain(theirs.as_ref().zip(active_card.clone()))
        .filter_map(|(side, path)| {
            let method = side.reid();
            e.details
                .predictions
                .iter()
                .find(|(m, v, _)| *m == method && v == "2v2")
                .map(|(_, _, p)| {
                    let scores: Vec<f64> = p.iter().map(|x| x.0).collect();
                    let right: Vec<bool> = p.iter().map(|x| x.1).collect();
                    let label = match scene && side.1 == "mean of views" {
                        true => format!("{}: mean of views", path.display()),
                        false => path.display().to_string(),
                    };
                    Curves::of(&label, &scores, &right)
                })
        })
        .collect();
    // The vote's calibration is the image encoder's (a scene encoder's card is asked for its
    // own, which it does not store).
    progress.stage("the vote's calibration", 0);
    let calibration = ReportCalibration::measure(
        &weights::read_card(card)?,
        crate::trust::VOTE,
        &format!("the {}-NN vote winner's share", crate::twins::trust::VOTE_K),
        data.seed,
        || {
            crate::eval::trust::twin_items(&model, &held.store, progress)
                .map_err(|e| ReportError::Data(format!("the vote's calibration: {e}")))
        },
    )?;
    let d = &e.details;
    let confusion = d
        .votes
        .iter()
        .find(|v| v.0 == mine.vote())
        .map(|(_, predicted, _)| {
            let n = d.class_names.len();
            let mut counts = vec![vec![0usize; n]; n];
            for (&t, &p) in d.classes.iter().zip(predicted) {
                counts[t][p] += 1;
            }
            Confusion {
                of: format!("pathology by the {K}-NN twin vote, 5-fold cross-validation"),
                classes: d.class_names.clone(),
                counts,
            }
        });
    Ok(Report {
        capability: "digital twins".into(),
        model: card.display().to_string(),
        active: active_card.as_ref().map(|p| match scene {
            true => format!("{}, mean of views (no scene encoder)", p.display()),
            false => p.display().to_string(),
        }),
        held_out: format!("{}: {} polyps with four views", held.described, e.polyps),
        seed: data.seed,
        bootstrap: e.bootstrap,
        metrics: metrics(&e, &mine, theirs.as_ref(), scene),
        curves_of: "2v2 twins: is the top-1 twin the same polyp (similarity)".into(),
        curves,
        confusion,
        calibration: Some(calibration),
        made_at: crate::store::now_utc(),
    })
}

/// Whose rows, and how their views were combined: (candidate label, method).
struct Side(&'static str, &'static str);

impl Side {
    /// Its float re-identification rows' method.
    fn reid(&self) -> String {
        format!("{}: {}, float", self.0, self.1)
    }

    /// Its pathology vote's method.
    fn vote(&self) -> String {
        format!("{}: {}", self.0, self.1)
    }
}

/// The report's figures of `mine` beside `theirs`: accuracy@1 and uAP at the view counts that
/// matter (1v1 and 2v2 for an image encoder; 1v2, 2v1 and 2v2 for a scene encoder, whose
/// claim is about combining views), then the pathology vote.
fn metrics(e: &TwinEval, mine: &Side, theirs: Option<&Side>, scene: bool) -> Vec<ReportMetric> {
    let reid = |side: &Side, views: &str| {
        let method = side.reid();
        e.reid
            .iter()
            .find(|r| r.method == method && r.views == views)
    };
    let pathology = |side: &Side| e.pathology.iter().find(|r| r.method == side.vote());
    let view_counts: &[&str] = if scene {
        &["1v2", "2v1", "2v2"]
    } else {
        &["1v1", "2v2"]
    };
    let mut out = Vec::new();
    for &views in view_counts {
        type Pick = fn(&eval::ReidRow) -> (f64, [f64; 2]);
        let picks: [(&str, Pick); 2] = [
            ("accuracy@1", |r| (r.accuracy_at_1, r.accuracy_at_1_ci)),
            ("uAP", |r| (r.uap, r.uap_ci)),
        ];
        for (name, pick) in picks {
            let m = reid(mine, views).map(pick);
            let a = theirs.and_then(|t| reid(t, views)).map(pick);
            out.push(ReportMetric {
                name: format!("{views} {name}"),
                model: m.map_or(f64::NAN, |x| x.0),
                model_ci: m.map(|x| x.1),
                active: a.map(|x| x.0),
                active_ci: a.map(|x| x.1),
            });
        }
    }
    type PathologyPick = fn(&eval::PathologyRow) -> f64;
    let picks: [(&str, PathologyPick); 4] = [
        ("pathology AUC (6-NN vote)", |r| r.auc),
        ("neoplastic AUC (Vienna >= 3)", |r| r.neoplastic_auc),
        ("pathology accuracy", |r| r.accuracy),
        ("pathology macro-F1", |r| r.macro_f1),
    ];
    for (name, pick) in picks {
        out.push(ReportMetric {
            name: name.into(),
            model: pathology(mine).map_or(f64::NAN, pick),
            model_ci: None,
            active: theirs.and_then(&pathology).map(pick),
            active_ci: None,
        });
    }
    out
}
