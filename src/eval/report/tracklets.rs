//! The tracklet re-identification report: a tracklet model (a frame-CNN encoder or a head over
//! the frozen twin encoder) beside the library's active one, on held-out videos. Metrics as
//! `eval tracklets` has them (intervals resample videos); curves over every pair of tracklets
//! (same polyp or not); the confusion of the links the Tracklets tab would draw at its
//! threshold.

use super::{Confusion, Curves, Report, ReportData, ReportError, ReportMetric};
use crate::data::phantom::Split;
use crate::eval::held_out::HeldOut;
use crate::eval::tracklets::{self as eval, Method};
use crate::model::tracklet::{TrackletEncoder, TrackletModel, TrackletModelConfig};
use crate::model::weights::{self, ModelKind};
use crate::plumbing::Progress;
use crate::tracklets::dataset::TrackletSet;
use crate::tracklets::timeline::{HEAD_THRESHOLD, MODEL_THRESHOLD};
use crate::twins::TwinModels;
use burn::tensor::Device;
use std::path::Path;

enum Loaded {
    Cnn(TrackletModel, TrackletModelConfig),
    Head(TrackletEncoder),
}

struct Candidate {
    label: String,
    loaded: Loaded,
}

impl Candidate {
    fn load(card: &Path, device: &Device) -> Result<Candidate, ReportError> {
        let read = weights::read_card(card)?;
        let label = format!("{} {}", read.name, read.version);
        let loaded = match read.kind {
            ModelKind::TrackletEncoder => {
                let (model, card_read) = weights::load(
                    card,
                    ModelKind::TrackletEncoder,
                    |c: &TrackletModelConfig| c.init(device),
                )?;
                Loaded::Cnn(model, card_read.config(card)?)
            }
            _ => Loaded::Head(crate::tracklets::load_head(card, device)?.0),
        };
        Ok(Candidate { label, loaded })
    }

    /// The similarity at which the Tracklets tab links two tracklets of this kind of model.
    fn threshold(&self) -> f32 {
        match self.loaded {
            Loaded::Cnn(..) => MODEL_THRESHOLD,
            Loaded::Head(_) => HEAD_THRESHOLD,
        }
    }

    fn embed(
        &self,
        store: &crate::store::Store,
        set: &TrackletSet,
        twins: Option<&TwinModels>,
        device: &Device,
        progress: &Progress,
    ) -> Result<Vec<Vec<f32>>, ReportError> {
        Ok(match &self.loaded {
            Loaded::Cnn(model, _) => crate::tracklets::embed(model, set, 16, device),
            Loaded::Head(head) => {
                let twins = twins.ok_or_else(|| {
                    ReportError::Data("a tracklet head needs the twin image encoder".into())
                })?;
                crate::tracklets::twin::head_embeddings_cached(
                    store,
                    set,
                    twins,
                    head,
                    progress,
                    &mut Default::default(),
                )
                .map_err(|e| ReportError::Data(e.to_string()))?
            }
        })
    }
}

pub fn report(
    card: &Path,
    active_models: Option<&Path>,
    data: &ReportData,
    device: &Device,
    progress: &Progress,
) -> Result<Report, ReportError> {
    let models = super::models_folder(active_models);
    let model = Candidate::load(card, device)?;
    // The head when there is one (what the Tracklets tab uses), else a frame-CNN encoder.
    let names = [crate::tracklets::HEAD_NAME, crate::tracklets::MODEL_NAME];
    let active = match super::active_card(card, &models, &names) {
        Some(path) => Some((Candidate::load(&path, device)?, path)),
        None => None,
    };
    let needs_twins = std::iter::once(&model)
        .chain(active.as_ref().map(|a| &a.0))
        .any(|c| matches!(c.loaded, Loaded::Head(_)));
    let twins = if needs_twins {
        Some(
            TwinModels::load_frames(&models, device)
                .map_err(|e| ReportError::Data(format!("the twin image encoder: {e}")))?,
        )
    } else {
        None
    };
    progress.stage("held-out videos", 0);
    let held = HeldOut::open_videos(
        data.held_out.as_deref(),
        data.seed,
        Split::Validation,
        data.videos,
        data.frames,
    )
    .map_err(|e| ReportError::Data(format!("the held-out videos: {e}")))?;
    let size = match &model.loaded {
        Loaded::Cnn(_, config) => config.backbone.image_size,
        Loaded::Head(_) => 64,
    };
    let set = TrackletSet::load(&held.store, &[], size, progress)
        .map_err(|e| ReportError::Data(e.to_string()))?;
    let with_identity = set
        .tracklets
        .iter()
        .filter(|t| t.identity.is_some())
        .count();
    if with_identity < 2 {
        return Err(ReportError::Data(format!(
            "{}: {with_identity} tracklets with a known polyp; a report needs held-out videos \
             with at least two",
            held.described
        )));
    }
    let mut candidates = vec![&model];
    candidates.extend(active.as_ref().map(|a| &a.0));
    let mut methods = Vec::new();
    for c in &candidates {
        progress.stage(&format!("encoding tracklets with {}", c.label), 0);
        methods.push(Method {
            label: c.label.clone(),
            embeddings: c.embed(&held.store, &set, twins.as_ref(), device, progress)?,
        });
    }
    let thresholds: Vec<f32> = candidates.iter().map(|c| c.threshold()).collect();
    let e = eval::evaluate(&set, &methods, data.seed, &thresholds);
    let curves: Vec<(Curves, Vec<(f64, bool)>)> = methods
        .iter()
        .map(|m| {
            let pairs: Vec<(f64, bool)> = eval::pairs(&set, &m.embeddings)
                .iter()
                .map(|p| (p.2, p.3))
                .collect();
            let scores: Vec<f64> = pairs.iter().map(|p| p.0).collect();
            let positive: Vec<bool> = pairs.iter().map(|p| p.1).collect();
            (Curves::of(&m.label, &scores, &positive), pairs)
        })
        .collect();
    let threshold = thresholds[0] as f64;
    let mut counts = vec![vec![0usize; 2]; 2];
    for &(score, same) in &curves[0].1 {
        counts[usize::from(!same)][usize::from(score < threshold)] += 1;
    }
    Ok(Report {
        capability: "tracklet re-identification".into(),
        model: card.display().to_string(),
        active: active.map(|a| a.1.display().to_string()),
        held_out: format!(
            "{}: {} tracklets in {} videos ({with_identity} with a known polyp)",
            held.described,
            set.tracklets.len(),
            set.videos.len()
        ),
        seed: data.seed,
        bootstrap: e.bootstrap,
        metrics: metrics(&e, methods.len() > 1),
        curves_of: "pairs of tracklets: same polyp or not (cosine)".into(),
        curves: curves.into_iter().map(|c| c.0).collect(),
        confusion: Some(Confusion {
            of: format!("pairs linked at cosine >= {threshold:.2}"),
            classes: vec!["same polyp".into(), "two polyps".into()],
            counts,
        }),
        calibration: Some(super::ReportCalibration::NotStored(
            super::calibration::NOT_STORED.into(),
        )),
        made_at: crate::store::now_utc(),
    })
}

/// The model's figures (first method) with the active model's beside them (second).
fn metrics(e: &eval::TrackletEval, with_active: bool) -> Vec<ReportMetric> {
    let row = |name: &str, get: &dyn Fn(usize) -> Option<(f64, Option<[f64; 2]>)>| {
        let (model, model_ci) = get(0).unwrap_or((f64::NAN, None));
        let (active, active_ci) = match get(1).filter(|_| with_active) {
            Some((v, ci)) => (Some(v), ci),
            None => (None, None),
        };
        ReportMetric {
            name: name.to_string(),
            model,
            model_ci,
            active,
            active_ci,
        }
    };
    let plain: Vec<&eval::ReidRow> = e
        .reid
        .iter()
        .filter(|r| !r.method.ends_with(eval::TIMELINE_RULE))
        .collect();
    let reid = |scope: &str, m: usize| plain.iter().filter(|r| r.scope == scope).nth(m);
    vec![
        row("retrieval mAP", &|m| {
            e.retrieval.get(m).map(|r| (r.map, Some(r.map_ci)))
        }),
        row("hit rate @1", &|m| {
            e.retrieval.get(m).map(|r| (r.hr1, Some(r.hr1_ci)))
        }),
        row("hit rate @5", &|m| {
            e.retrieval.get(m).map(|r| (r.hr5, Some(r.hr5_ci)))
        }),
        row("re-ID AUROC, all pairs", &|m| {
            reid("all", m).map(|r| (r.auroc, Some(r.auroc_ci)))
        }),
        row("re-ID AUPR, all pairs", &|m| {
            reid("all", m).map(|r| (r.aupr, Some(r.aupr_ci)))
        }),
        row("re-ID AUROC, within a video", &|m| {
            reid("within_video", m).map(|r| (r.auroc, Some(r.auroc_ci)))
        }),
        row("polyp count exact (share of videos)", &|m| {
            e.counts.get(m).map(|c| (c.exact_share, None))
        }),
        row("polyp count within one", &|m| {
            e.counts.get(m).map(|c| (c.within_one_share, None))
        }),
    ]
}
