//! `train captions` (METHODS §2): CLIP fine-tuned on captioned capsule frames with the
//! multi-positive KL loss (frames that share a refined caption are all positives of each
//! other's captions) or, for comparison, the plain symmetric CLIP loss; then a category head on
//! the frozen image tower, class-weighted binary cross-entropy per category.

use super::dual_losses::{info_nce, kl_multi_positive};
use super::fit::{At, Figure, Plan, StepLoss, Steps, fit};
use super::{Checkpoint, TrainError, TrainEvents};
use crate::captions::data::CaptionSet;
use crate::captions::model::{CaptionModel, CaptionModelConfig, prompt};
use crate::plumbing::Rng;
use burn::config::Config;
use burn::nn::{Linear, LinearConfig};
use burn::optim::{AdamWConfig, GradientsParams};
use burn::tensor::{Device, Tensor, TensorData};

/// Which contrastive loss fine-tunes the towers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CaptionLoss {
    /// METHODS §2: KL to row-normalised same-caption targets, both directions.
    Kl,
    /// The plain symmetric CLIP loss: only the frame's own caption is a positive.
    Clip,
}

impl CaptionLoss {
    pub fn name(&self) -> &'static str {
        match self {
            CaptionLoss::Kl => "kl",
            CaptionLoss::Clip => "clip",
        }
    }
}

#[derive(Config, Debug)]
pub struct CaptionTrainingConfig {
    pub model: CaptionModelConfig,
    #[config(default = "CaptionLoss::Kl")]
    pub loss: CaptionLoss,
    #[config(default = 20)]
    pub epochs: usize,
    /// Frames per step (the paper's 8).
    #[config(default = 8)]
    pub batch: usize,
    #[config(default = 3e-4)]
    pub lr: f64,
    #[config(default = 0.05)]
    pub weight_decay: f64,
    /// 0: every training frame; k: at most k frames per distinct caption (k-shot).
    #[config(default = 0)]
    pub shots: usize,
    /// Full-batch steps of the category head on the frozen image embeddings.
    #[config(default = 300)]
    pub head_steps: usize,
    #[config(default = 17)]
    pub seed: u64,
    /// The text-prompt model card the towers started from (`--init`); none: random.
    #[config(default = "None")]
    pub init: Option<String>,
}

/// Fine-tunes the towers on `set` (already cut to the shots), then fits the category head.
pub fn train(
    config: &CaptionTrainingConfig,
    set: &CaptionSet,
    device: &Device,
    start: Option<Checkpoint<CaptionModel>>,
    events: &mut dyn TrainEvents<CaptionModel>,
) -> Result<CaptionModel, TrainError> {
    let batch = config.batch.max(2);
    if set.frames.len() < batch {
        return Err(TrainError::NotEnoughData(format!(
            "caption training needs at least {batch} captioned frames; the set has {}",
            set.frames.len()
        )));
    }
    let start = Checkpoint::resume_or_fresh(start, device, config.seed, config.weight_decay, |d| {
        config.model.init(d)
    });
    let plan = Plan {
        epochs: config.epochs,
        steps_per_epoch: set.frames.len() / batch,
        lr: config.lr,
        seed: config.seed,
    };
    let mut steps = CaptionSteps {
        config,
        set,
        device,
        batch,
        order: Vec::new(),
    };
    let mut model = fit(&plan, start, &mut steps, events)?;
    let features = frozen_embeddings(&model, set, device);
    model.category = fit_multilabel(
        features,
        &set.category_targets(),
        config.head_steps,
        config.seed,
        device,
    );
    Ok(model)
}

/// One step of caption training: a batch of frames against their captions.
struct CaptionSteps<'a> {
    config: &'a CaptionTrainingConfig,
    set: &'a CaptionSet,
    device: &'a Device,
    batch: usize,
    /// This epoch's frame order.
    order: Vec<usize>,
}

impl Steps<CaptionModel> for CaptionSteps<'_> {
    fn begin_epoch(&mut self, _epoch: usize, rng: &mut Rng) {
        self.order = (0..self.set.frames.len()).collect();
        rng.shuffle(&mut self.order);
    }

    fn step(&mut self, model: &CaptionModel, at: At, rng: &mut Rng) -> StepLoss {
        let (set, batch, device) = (self.set, self.batch, self.device);
        let idx = &self.order[at.step * batch..(at.step + 1) * batch];
        let flips: Vec<(bool, bool)> = idx
            .iter()
            .map(|_| (rng.chance(0.5), rng.chance(0.5)))
            .collect();
        let captions: Vec<usize> = idx.iter().map(|&i| set.frames[i].caption).collect();
        let shared = captions
            .iter()
            .enumerate()
            .filter(|(k, c)| captions[..*k].contains(c) || captions[k + 1..].contains(c))
            .count();
        let prompts: Vec<String> = captions.iter().map(|&c| prompt(&set.captions[c])).collect();
        let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
        let context = self.config.model.clip.text.context;
        let tokens = self.config.model.tokenizer.batch(&refs, context, device);
        let v = model.clip.encode_images(set.batch(idx, &flips, device)); // [b, d]
        let t = model.clip.encode_texts(tokens); // [b, d]
        let scale = model.clip.scale();
        let loss = match self.config.loss {
            CaptionLoss::Kl => kl_multi_positive(v, t, &captions, scale),
            CaptionLoss::Clip => info_nce(v, t, scale),
        };
        StepLoss::new(loss).with(Figure::Share {
            name: "frames sharing a caption in a batch",
            count: shared as f64,
            of: batch as f64,
        })
    }

    fn epoch_figures(&mut self, model: &CaptionModel, _epoch: usize) -> Vec<(String, f64)> {
        let scale = model.clip.scale().into_scalar::<f32>() as f64;
        vec![("temperature".into(), 1.0 / scale)]
    }
}

/// Unit image embeddings of every frame of `set`, detached: [n, dim].
fn frozen_embeddings(model: &CaptionModel, set: &CaptionSet, device: &Device) -> Tensor<2> {
    let all: Vec<usize> = (0..set.frames.len()).collect();
    let chunks: Vec<Tensor<2>> = all
        .chunks(64)
        .map(|idx| model.encode_images(set.batch(idx, &[], device)).detach())
        .collect();
    Tensor::cat(chunks, 0)
}

/// A linear multi-label classifier, one logit per category, fitted by full-batch AdamW on
/// `features` [n, d] with binary cross-entropy per category, each category's positives
/// weighted by its negatives-to-positives ratio (at most 50) so rare categories count.
pub fn fit_multilabel(
    features: Tensor<2>,
    targets: &[[bool; 7]],
    steps: usize,
    seed: u64,
    device: &Device,
) -> Linear {
    let [n, d] = features.dims();
    device.seed(seed ^ 0xCA7E);
    let mut head = LinearConfig::new(d, 7).init(device);
    let y: Vec<f32> = targets.iter().flat_map(|t| t.map(f32::from)).collect();
    let weights: Vec<f32> = (0..7)
        .map(|c| {
            let pos = targets.iter().filter(|t| t[c]).count() as f32;
            ((n as f32 - pos) / pos.max(1.0)).clamp(1.0, 50.0)
        })
        .collect();
    let y = Tensor::<2>::from_data(TensorData::new(y, [n, 7]), device);
    let w = Tensor::<2>::from_data(TensorData::new(weights, [1, 7]), device);
    let x = features.detach();
    let mut optimizer = AdamWConfig::new().with_weight_decay(1e-4).init();
    for _ in 0..steps {
        let logits = head.forward(x.clone()); // [n, 7]
        // BCE with logits, stable: softplus(-z) for positives, softplus(z) for negatives.
        let pos = softplus(logits.clone().neg()) * y.clone() * w.clone();
        let neg = softplus(logits) * (y.clone().neg() + 1.0);
        let loss = (pos + neg).mean();
        let grads = GradientsParams::from_grads(loss.backward(), &head);
        head = optimizer.step(1e-2, head, grads);
    }
    head
}

/// `log(1 + e^x)` without overflow: `max(x, 0) + log(1 + e^-|x|)`.
fn softplus(x: Tensor<2>) -> Tensor<2> {
    x.clone().clamp_min(0.0) + (x.abs().neg().exp() + 1.0).log()
}
