//! `train prompts` (Endo-CLIP, METHODS §1): the three stages on examination records.
//!
//! - Stage 1, cleansing: round 1 pairs one random frame per examination with a fixed
//!   sentence (polyp / background, from whether the report describes a polyp), symmetric
//!   InfoNCE; round 2 starts from round 1 and draws positive examinations' frames only from
//!   the top `prevalence` share by round 1's polyp probability ([`keep_frames`]).
//! - Stage 2, attunement: single-polyp examinations; a kept frame against a finding sentence,
//!   soft targets `M = cos(a_image, a_sentence)` (or identity, the one-hot ablation).
//! - Stage 3, unification: multi-polyp examinations; the kept frames and the finding sentences
//!   meet in the cross-attention unifier (or plain means, the ablation); soft targets are
//!   cosines of the examinations' attribute unions.
//! - Plain CLIP (the comparison): a random frame against the whole report, InfoNCE.

use super::dual_losses::{attribute_targets, info_nce, soft_target_clip};
use super::fit::{At, Plan, StepLoss, Steps, fit};
use super::{Checkpoint, TrainError, TrainEvents};
use crate::model::clip::l2_normalize;
use crate::plumbing::Rng;
use crate::prompts::model::{BACKGROUND_SENTENCE, POLYP_SENTENCE, PromptModel, PromptModelConfig};
pub use crate::prompts::model::{detection_texts, polyp_probability};
use crate::prompts::records::Records;
use burn::config::Config;
use burn::tensor::{Device, Tensor};

/// Which stage (or round) a run trains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PromptStage {
    Round1,
    Round2,
    Attune,
    Unify,
    /// The comparison: a random frame and the whole report, symmetric InfoNCE.
    PlainClip,
    /// The ceiling, never shipped: a random frame with the sentence its ground truth says
    /// (polyp or background), symmetric InfoNCE. Reads frame labels, which Endo-CLIP never
    /// does; it tells how far the architecture can go on these frames.
    Supervised,
}

impl PromptStage {
    pub fn name(self) -> &'static str {
        match self {
            PromptStage::Round1 => "stage 1, round 1 (cleansing)",
            PromptStage::Round2 => "stage 1, round 2 (prevalence-guided)",
            PromptStage::Attune => "stage 2 (attunement)",
            PromptStage::Unify => "stage 3 (unification)",
            PromptStage::PlainClip => "plain CLIP (random frame + full report)",
            PromptStage::Supervised => "supervised ceiling (frame labels, not shipped)",
        }
    }
}

/// Stage 2's targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Stage2Targets {
    /// `M_ij = cos(a_i, a_j)` over the attribute vocabulary (METHODS §1).
    Attributes,
    /// The ablation: identity targets (plain InfoNCE).
    OneHot,
}

/// How stage 3 pools an examination's images and sentences.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Stage3Pool {
    /// The unifier's cross-attention both ways, then means (METHODS §1).
    CrossAttention,
    /// The ablation: plain means of the image and of the sentence embeddings.
    Mean,
}

#[derive(Config, Debug)]
pub struct PromptTrainingConfig {
    pub model: PromptModelConfig,
    pub stage: PromptStage,
    #[config(default = 30)]
    pub epochs: usize,
    /// Pairs per step in stages 1 and 2 (the paper's 32); stage 3 uses `unify_batch`.
    #[config(default = 32)]
    pub batch: usize,
    /// Examinations per step in stage 3 (the paper's 8).
    #[config(default = 8)]
    pub unify_batch: usize,
    #[config(default = 3e-4)]
    pub lr: f64,
    #[config(default = 0.05)]
    pub weight_decay: f64,
    /// The known polyp prevalence among a positive examination's frames: one global prior.
    #[config(default = 0.25)]
    pub prevalence: f64,
    #[config(default = "Stage2Targets::Attributes")]
    pub targets: Stage2Targets,
    #[config(default = "Stage3Pool::CrossAttention")]
    pub pool: Stage3Pool,
    /// At most this many kept frames of an examination enter stage 3.
    #[config(default = 6)]
    pub max_images: usize,
    #[config(default = 17)]
    pub seed: u64,
}

/// Per examination, the frames kept as polyp-bearing: for a positive report the top
/// `prevalence` share (at least one) by `model`'s polyp probability, best first; for a
/// negative report none.
pub fn keep_frames(
    model: &PromptModel,
    config: &PromptModelConfig,
    records: &Records,
    prevalence: f64,
    device: &Device,
) -> Vec<Vec<usize>> {
    let detect = detection_texts(model, config, device);
    records
        .exams
        .iter()
        .enumerate()
        .map(|(e, exam)| {
            if !exam.positive {
                return Vec::new();
            }
            let frames: Vec<(usize, usize)> = (0..exam.frames.len()).map(|f| (e, f)).collect();
            let mut scored: Vec<(usize, f32)> = frames
                .chunks(64)
                .flat_map(|chunk| {
                    let v = model.encode_images(records.batch(chunk, &[], device));
                    polyp_probability(model, v, detect.clone())
                })
                .enumerate()
                .collect();
            scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            let keep = ((prevalence * exam.frames.len() as f64).ceil() as usize).max(1);
            scored.into_iter().take(keep).map(|(f, _)| f).collect()
        })
        .collect()
}

/// One stage of training on `records`. `kept` (from [`keep_frames`]) is needed by round 2 and
/// stages 2 and 3; `start` is a checkpoint to resume, else `init` gives the starting model
/// (fresh, or the previous stage's).
pub fn train(
    config: &PromptTrainingConfig,
    records: &Records,
    kept: Option<&[Vec<usize>]>,
    device: &Device,
    start: Option<Checkpoint<PromptModel>>,
    init: impl FnOnce(&Device) -> PromptModel,
    events: &mut dyn TrainEvents<PromptModel>,
) -> Result<PromptModel, TrainError> {
    let needs_kept = matches!(
        config.stage,
        PromptStage::Round2 | PromptStage::Attune | PromptStage::Unify | PromptStage::Supervised
    );
    let empty: Vec<Vec<usize>> = Vec::new();
    let kept = match (needs_kept, kept) {
        (true, Some(k)) => k,
        (true, None) => {
            return Err(TrainError::NotEnoughData(format!(
                "{} needs the frames stage 1 kept (the supervised ceiling: the frames that show a polyp)",
                config.stage.name()
            )));
        }
        (false, _) => &empty,
    };
    let units = units(config.stage, records, kept);
    let batch = match config.stage {
        PromptStage::Unify => config.unify_batch,
        _ => config.batch,
    }
    .max(2);
    if units.len() < batch {
        return Err(TrainError::NotEnoughData(format!(
            "{} needs at least {batch} training pairs or examinations; the records give {}",
            config.stage.name(),
            units.len()
        )));
    }
    let start = Checkpoint::resume_or_fresh(start, device, config.seed, config.weight_decay, init);
    let plan = Plan {
        epochs: config.epochs,
        steps_per_epoch: units.len() / batch,
        lr: config.lr,
        seed: config.seed,
    };
    let mut steps = PromptSteps {
        config,
        records,
        kept,
        device,
        batch,
        order: units.clone(),
        units,
    };
    fit(&plan, start, &mut steps, events)
}

/// One step of a prompt stage: a batch of units (frames or examinations) against sentences.
struct PromptSteps<'a> {
    config: &'a PromptTrainingConfig,
    records: &'a Records,
    kept: &'a [Vec<usize>],
    device: &'a Device,
    batch: usize,
    units: Vec<(usize, usize)>,
    /// This epoch's order of `units`.
    order: Vec<(usize, usize)>,
}

impl Steps<PromptModel> for PromptSteps<'_> {
    fn begin_epoch(&mut self, _epoch: usize, rng: &mut Rng) {
        self.order = self.units.clone();
        rng.shuffle(&mut self.order);
    }

    fn step(&mut self, model: &PromptModel, at: At, rng: &mut Rng) -> StepLoss {
        let chunk = &self.order[at.step * self.batch..(at.step + 1) * self.batch];
        StepLoss::new(step_loss(
            self.config,
            model,
            self.records,
            self.kept,
            chunk,
            rng,
            self.device,
        ))
    }

    fn epoch_figures(&mut self, model: &PromptModel, _epoch: usize) -> Vec<(String, f64)> {
        let scale = model.clip.scale().into_scalar::<f32>() as f64;
        vec![("temperature".into(), 1.0 / scale)]
    }
}

/// What one epoch iterates over: (examination, kept-frame slot or `usize::MAX` for "any").
fn units(stage: PromptStage, records: &Records, kept: &[Vec<usize>]) -> Vec<(usize, usize)> {
    let exams = records.exams.iter().enumerate();
    match stage {
        PromptStage::Round1
        | PromptStage::Round2
        | PromptStage::PlainClip
        | PromptStage::Supervised => exams.map(|(e, _)| (e, usize::MAX)).collect(),
        PromptStage::Attune => exams
            .filter(|(_, x)| x.positive && x.described_polyps == 1)
            .filter(|(_, x)| !x.finding_sentences().is_empty())
            .flat_map(|(e, _)| (0..kept[e].len()).map(move |k| (e, k)))
            .collect(),
        PromptStage::Unify => exams
            .filter(|(e, x)| x.described_polyps >= 2 && !kept[*e].is_empty())
            .map(|(e, _)| (e, usize::MAX))
            .collect(),
    }
}

/// The loss of one step over `chunk`.
fn step_loss(
    config: &PromptTrainingConfig,
    model: &PromptModel,
    records: &Records,
    kept: &[Vec<usize>],
    chunk: &[(usize, usize)],
    rng: &mut Rng,
    device: &Device,
) -> Tensor<1> {
    let mcfg = &config.model;
    let flips: Vec<(bool, bool)> = (0..chunk.len() * config.max_images.max(1))
        .map(|_| (rng.chance(0.5), rng.chance(0.5)))
        .collect();
    let scale = model.clip.scale();
    match config.stage {
        PromptStage::Round1
        | PromptStage::Round2
        | PromptStage::PlainClip
        | PromptStage::Supervised => {
            let mut frames = Vec::new();
            let mut texts: Vec<String> = Vec::new();
            for &(e, _) in chunk {
                let exam = &records.exams[e];
                let f = match config.stage {
                    PromptStage::Round2 if exam.positive && !kept[e].is_empty() => {
                        kept[e][rng.below(kept[e].len())]
                    }
                    _ => rng.below(exam.frames.len()),
                };
                frames.push((e, f));
                texts.push(match config.stage {
                    PromptStage::PlainClip => exam.report(),
                    // `kept` holds the frames ground truth says show a polyp.
                    PromptStage::Supervised if kept[e].contains(&f) => POLYP_SENTENCE.into(),
                    PromptStage::Supervised => BACKGROUND_SENTENCE.into(),
                    _ if exam.positive => POLYP_SENTENCE.into(),
                    _ => BACKGROUND_SENTENCE.into(),
                });
            }
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let v = model.encode_images(records.batch(&frames, &flips, device));
            let t = model.encode_texts(mcfg.tokens(&refs, device));
            info_nce(v, t, scale)
        }
        PromptStage::Attune => {
            let mut frames = Vec::new();
            let mut texts = Vec::new();
            let (mut image_attrs, mut text_attrs) = (Vec::new(), Vec::new());
            for &(e, k) in chunk {
                let exam = &records.exams[e];
                let findings = exam.finding_sentences();
                let s = findings[rng.below(findings.len())];
                frames.push((e, kept[e][k]));
                texts.push(exam.sentences[s].as_str());
                image_attrs.push(exam.union());
                text_attrs.push(exam.attributes[s].clone());
            }
            let v = model.encode_images(records.batch(&frames, &flips, device));
            let t = model.encode_texts(mcfg.tokens(&texts, device));
            match config.targets {
                Stage2Targets::Attributes => {
                    let m = Tensor::from_data(attribute_targets(&image_attrs, &text_attrs), device);
                    soft_target_clip(v, t, m, scale)
                }
                Stage2Targets::OneHot => info_nce(v, t, scale),
            }
        }
        PromptStage::Unify => {
            let mut image_rows = Vec::new();
            let mut text_rows = Vec::new();
            let mut unions = Vec::new();
            let mut flip_at = 0;
            for &(e, _) in chunk {
                let exam = &records.exams[e];
                let mut frames: Vec<(usize, usize)> = kept[e].iter().map(|&f| (e, f)).collect();
                frames.truncate(config.max_images.max(1));
                let n = frames.len();
                let v = model.encode_images(records.batch(
                    &frames,
                    &flips[flip_at..flip_at + n],
                    device,
                ));
                flip_at += n;
                let sentences: Vec<&str> = exam
                    .finding_sentences()
                    .into_iter()
                    .map(|s| exam.sentences[s].as_str())
                    .collect();
                let t = model.encode_texts(mcfg.tokens(&sentences, device));
                let (iv, tv) = match config.pool {
                    Stage3Pool::CrossAttention => model.unifier.forward(v, t),
                    Stage3Pool::Mean => {
                        let d = v.dims()[1];
                        (v.mean_dim(0).reshape([d]), t.mean_dim(0).reshape([d]))
                    }
                };
                image_rows.push(iv.unsqueeze::<2>());
                text_rows.push(tv.unsqueeze::<2>());
                unions.push(exam.union());
            }
            let v = l2_normalize(Tensor::cat(image_rows, 0));
            let t = l2_normalize(Tensor::cat(text_rows, 0));
            let m = Tensor::from_data(attribute_targets(&unions, &unions), device);
            soft_target_clip(v, t, m, scale)
        }
    }
}

/// Frames per examination used when nothing is kept yet: every frame (tests, diagnostics).
pub fn all_frames(records: &Records) -> Vec<Vec<usize>> {
    records
        .exams
        .iter()
        .map(|e| (0..e.frames.len()).collect())
        .collect()
}
