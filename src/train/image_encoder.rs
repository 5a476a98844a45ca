//! `train image-encoder` (METHODS §4): the polyp-aware image encoder learns from library
//! images alone. Two augmentations of each image are positives (SSCD contrastive loss +
//! entropy regulariser); one of them also goes through masked reconstruction, where the
//! patches that show the polyp stay visible and half of the background is hidden.

use super::augment::{Augment, polyp_aware_mask, polyp_patches};
pub use super::data::Sample;
use super::fit::{At, Plan, StepLoss, Steps, fit};
use super::losses::{contrastive_in_families, entropy_in_families};
use super::recipe::{
    OptionKind, Recipe, RecipeContext, RecipeError, RecipeOption, Recorded, Settings, Trained,
    checkpoint_dir, recorded, resume_from,
};
use super::{Checkpoint, TrainError, TrainEvents};
use crate::model::clip::l2_normalize;
use crate::model::preprocess::TwinInput;
use crate::model::reconstruction::{
    ReconstructionDecoder, ReconstructionDecoderConfig, masked_mse, patchify,
};
use crate::model::vit::{Vit, VitConfig};
use crate::model::weights::{self, ModelCard, ModelKind, Training};
use crate::plumbing::Rng;
use crate::store::{OpenMode, Store};
use burn::config::Config;
use burn::module::Module;

use burn::tensor::{Device, Int, Tensor, TensorData};

#[derive(Config, Debug)]
pub struct ImageEncoderTrainingConfig {
    pub encoder: VitConfig,
    #[config(default = 20)]
    pub epochs: usize,
    /// Images per step; each contributes two augmented views.
    #[config(default = 32)]
    pub batch: usize,
    #[config(default = 5e-4)]
    pub lr: f64,
    #[config(default = 0.05)]
    pub weight_decay: f64,
    /// Contrastive temperature.
    #[config(default = 0.05)]
    pub tau: f64,
    #[config(default = 5.0)]
    pub entropy_weight: f64,
    /// Weight of masked reconstruction.
    #[config(default = 0.5)]
    pub gamma: f64,
    #[config(default = 0.5)]
    pub mask_ratio: f32,
    #[config(default = 128)]
    pub decoder_width: usize,
    #[config(default = 11)]
    pub seed: u64,
    /// Pair each image with an augmented *other view of its polyp* instead of a second
    /// augmentation of itself, and treat all views of a polyp in a batch as positives. An
    /// extension of SSCD for libraries with multi-view polyps: it asks the encoder for what
    /// re-identification needs (viewpoint invariance), not only augmentation invariance.
    #[config(default = false)]
    pub view_positives: bool,
    /// Sibling views of one polyp in a batch are never negatives (ignored when not positives).
    /// Off: the ablation where every other image is a negative.
    #[config(default = true)]
    pub ignore_siblings: bool,
    /// Both copies' contrastive embeddings come from the polyp-aware masked pass (polyp
    /// patches visible, half the background hidden), as in the reference code. Off: from the
    /// full unmasked image (the ablation).
    #[config(default = true)]
    pub masked_contrastive: bool,
    /// Cut the input around the polyp (its mask box enlarged `context` times).
    #[config(default = true)]
    pub crop: bool,
    #[config(default = 2.5)]
    pub context: f32,
    /// Black out the on-screen display outside the field stop.
    #[config(default = true)]
    pub blackout: bool,
    /// Weight of the quantisation term ([`quantization`]): pulls the unit embedding's
    /// coordinates toward the hypercube's corners, each bit balanced over the batch, so the
    /// binary code (their signs) loses less of the cosine. 0: off (EndoFinder's recipe).
    #[config(default = 0.0)]
    pub quantization_weight: f64,
    /// The image encoder card the encoder started from (`--init`); none: random.
    #[config(default = "None")]
    pub init: Option<String>,
}

impl ImageEncoderTrainingConfig {
    /// How images are cut for this encoder, at training and at inference (saved in the card).
    pub fn input(&self) -> TwinInput {
        TwinInput {
            crop: self.crop,
            context: self.context,
            blackout: self.blackout,
            ..TwinInput::new(self.encoder.image_size as u32)
        }
    }

    pub fn decoder(&self) -> ReconstructionDecoderConfig {
        let e = &self.encoder;
        ReconstructionDecoderConfig::new(
            e.width,
            e.output_dim(),
            e.image_size / e.patch_size,
            e.patch_size,
        )
        .with_width(self.decoder_width)
    }

    /// Values one image's step makes ([`super::memory`]): two augmented copies, each through
    /// the encoder on its visible patches (and on all of them when the contrastive branch is
    /// unmasked) and the decoder over every patch, with its reconstruction target.
    pub fn step_values(&self) -> f64 {
        use super::memory::{transformer, vit};
        let e = &self.encoder;
        let patches = e.patches();
        let visible = ((1.0 - self.mask_ratio as f64) * patches as f64).ceil() as usize + 1;
        let d = self.decoder();
        let mut copy = vit(e, visible)
            + transformer(patches + 1, d.width, d.depth, d.heads, 4.0)
            + 2.0 * (3 * e.image_size * e.image_size) as f64;
        if !self.masked_contrastive {
            copy += vit(e, patches + 1);
        }
        2.0 * copy
    }

    pub fn init(&self, device: &Device) -> TwinImageModel {
        TwinImageModel {
            encoder: self.encoder.init(device),
            decoder: self.decoder().init(device),
        }
    }
}

/// What trains: the encoder and, for the generative branch only, its decoder.
#[derive(Module, Debug)]
pub struct TwinImageModel {
    pub encoder: Vit,
    pub decoder: ReconstructionDecoder,
}

/// ImageNet-normalised [n, 3, s, s] from RGB images of one size.
pub use crate::model::preprocess::imagenet_tensor as to_tensor;

/// Trains from `start` (a fresh model at epoch 0, or a checkpoint) to `config.epochs`.
/// `device` must have autodiff enabled. Returns the model after the last epoch.
pub fn train(
    config: &ImageEncoderTrainingConfig,
    samples: &[Sample],
    device: &Device,
    start: Option<Checkpoint<TwinImageModel>>,
    events: &mut dyn TrainEvents<TwinImageModel>,
) -> Result<TwinImageModel, TrainError> {
    if samples.len() < 2 {
        return Err(TrainError::NotEnoughData(format!(
            "contrastive training needs at least 2 images, the library has {}",
            samples.len()
        )));
    }
    let batch = config.batch.clamp(2, samples.len());
    let start = Checkpoint::resume_or_fresh(start, device, config.seed, config.weight_decay, |d| {
        config.init(d)
    });
    let mut views_of: std::collections::HashMap<i64, Vec<usize>> = Default::default();
    for (i, s) in samples.iter().enumerate() {
        if let Some(p) = s.polyp {
            views_of.entry(p).or_default().push(i);
        }
    }
    let plan = Plan {
        epochs: config.epochs,
        steps_per_epoch: samples.len() / batch,
        lr: config.lr,
        seed: config.seed,
    };
    let mut steps = ImageSteps {
        config,
        samples,
        device,
        batch,
        augment: Augment::sscd(config.encoder.image_size as u32),
        views_of,
        order: Vec::new(),
    };
    fit(&plan, start, &mut steps, events)
}

/// One step of the twin image encoder: two augmented copies of a batch of views, both masked
/// around their polyps, contrasted (siblings ignored or positives) and reconstructed.
struct ImageSteps<'a> {
    config: &'a ImageEncoderTrainingConfig,
    samples: &'a [Sample],
    device: &'a Device,
    batch: usize,
    augment: Augment,
    /// The views of each polyp, by sample index.
    views_of: std::collections::HashMap<i64, Vec<usize>>,
    /// This epoch's sample order.
    order: Vec<usize>,
}

impl Steps<TwinImageModel> for ImageSteps<'_> {
    fn begin_epoch(&mut self, _epoch: usize, rng: &mut Rng) {
        self.order = (0..self.samples.len()).collect();
        super::augment::shuffle(&mut self.order, rng);
    }

    fn step(&mut self, model: &TwinImageModel, at: At, rng: &mut Rng) -> StepLoss {
        let (config, samples, device) = (self.config, self.samples, self.device);
        let batch = self.batch;
        let patch = config.encoder.patch_size;
        let picked = &self.order[at.step * batch..(at.step + 1) * batch];
        let (mut first, mut second, mut masks) = (Vec::new(), Vec::new(), Vec::new());
        let (mut group, mut family) = (Vec::new(), Vec::new());
        for (slot, &i) in picked.iter().enumerate() {
            let s = &samples[i];
            let (a, mask_a) = self.augment.apply(&s.image, s.mask.as_ref(), rng);
            let partner = match (config.view_positives, s.polyp) {
                (true, Some(p)) => {
                    let others: Vec<usize> = self.views_of[&p]
                        .iter()
                        .copied()
                        .filter(|&j| j != i)
                        .collect();
                    if others.is_empty() {
                        i
                    } else {
                        others[rng.below(others.len())]
                    }
                }
                _ => i,
            };
            let o = &samples[partner];
            let (b, mask_b) = self.augment.apply(&o.image, o.mask.as_ref(), rng);
            first.push(a);
            second.push(b);
            masks.push((mask_a, mask_b));
            // Views of one polyp are positives of each other with `view_positives`;
            // otherwise each image is its own group, and its siblings are ignored.
            let own = usize::MAX - slot;
            group.push(match (config.view_positives, s.polyp) {
                (true, Some(p)) => p as usize,
                _ => own,
            });
            family.push(match (config.ignore_siblings, s.polyp) {
                (true, Some(p)) => p as usize,
                _ => *group.last().expect("pushed above"),
            });
        }
        // Polyp-aware masking of both copies: polyp patches stay visible.
        let n = picked.len();
        let patches = config.encoder.patches();
        let mut keep = Vec::new();
        let mut hidden = Vec::new();
        for copy in 0..2 {
            for (a, b) in &masks {
                let mask = if copy == 0 { a } else { b };
                let polyp = match mask {
                    Some(m) => polyp_patches(m, patch as u32, 0.25),
                    None => vec![false; patches],
                };
                let (k, h) = polyp_aware_mask(&polyp, config.mask_ratio, rng);
                keep.extend(k.into_iter().map(|i| i as i64));
                hidden.extend(h.into_iter().map(|h| h as u8 as f32));
            }
        }
        let visible = keep.len() / (2 * n);
        let x = Tensor::cat(
            vec![to_tensor(&first, device), to_tensor(&second, device)],
            0,
        );
        let keep = Tensor::<2, Int>::from_data(TensorData::new(keep, [2 * n, visible]), device);
        let hidden = Tensor::<2>::from_data(TensorData::new(hidden, [2 * n, patches]), device);

        let tokens = model.encoder.forward_visible(x.clone(), keep.clone());
        let z = if config.masked_contrastive {
            model.encoder.pool(tokens.clone())
        } else {
            model.encoder.forward(x.clone())
        };
        let z = l2_normalize(z);
        let z_unit = z.clone();
        let groups: Vec<usize> = group.iter().chain(group.iter()).copied().collect();
        let families: Vec<usize> = family.iter().chain(family.iter()).copied().collect();
        let l_con = contrastive_in_families(z.clone(), &groups, &families, config.tau);
        let l_ent = entropy_in_families(z, &groups, &families) * config.entropy_weight;
        // Both copies are reconstructed from their visible patches.
        let predicted = model.decoder.forward(tokens, keep, None);
        let l_rec = masked_mse(predicted, patchify(x, patch), hidden) * config.gamma;
        let l_q = (config.quantization_weight > 0.0)
            .then(|| quantization(z_unit, config.quantization_weight));
        let mut loss = l_con.clone() + l_ent.clone() + l_rec.clone();
        if let Some(q) = &l_q {
            loss = loss + q.clone();
        }
        let step = StepLoss::new(loss)
            .term("contrastive", l_con)
            .term("entropy", l_ent)
            .term("reconstruction", l_rec);
        match l_q {
            Some(q) => step.term("quantisation", q),
            None => step,
        }
    }
}

/// The quantisation term of unit embeddings `z` [n, d]:
/// `weight * (mean((|z| sqrt(d) - 1)^2) + mean((mean_n(z) sqrt(d))^2))`.
/// The first part is zero exactly when every coordinate is
/// `+-1/sqrt(d)` (the embedding is a scaled corner of the hypercube, so its signs keep all of
/// it); the second keeps each bit balanced over the batch (without it the corners collapse
/// onto one code: measured, see the README).
pub fn quantization(z: Tensor<2>, weight: f64) -> Tensor<1> {
    let [_, d] = z.dims();
    let root = (d as f64).sqrt();
    let corners = (z.clone().abs() * root - 1.0).powi_scalar(2).mean();
    let balance = (z.mean_dim(0) * root).powi_scalar(2).mean();
    (corners + balance) * weight
}

/// The trained encoder without autodiff, for inference and saving.
pub fn encoder_of(model: &TwinImageModel) -> Vit {
    model.encoder.valid()
}

/// `endotwin train image-encoder`.
pub struct ImageEncoderRecipe;

impl Recipe for ImageEncoderRecipe {
    fn name(&self) -> &'static str {
        "image-encoder"
    }

    fn description(&self) -> &'static str {
        "The polyp-aware image encoder (twin-small ViT) on the library's polyp views + masks"
    }

    fn options(&self) -> Vec<RecipeOption> {
        use OptionKind::*;
        vec![
            RecipeOption::new(
                "out",
                Path,
                Some("models"),
                "Where the model card + record go (and `<name>.checkpoints/`)",
            ),
            RecipeOption::new("name", Text, Some("twin-image"), "Name of the model"),
            RecipeOption::new("epochs", Count, Some("20"), "Passes over the data"),
            RecipeOption::new(
                "batch",
                Count,
                Some("32"),
                "Images per step (two augmented views each)",
            ),
            RecipeOption::new("lr", Number, Some("5e-4"), "Peak learning rate"),
            RecipeOption::new("seed", Count, Some("11"), "Seed of every random draw"),
            RecipeOption::new(
                "resume",
                Flag,
                None,
                "Continue from the last checkpoint in `<out>/<name>.checkpoints/`",
            ),
            super::recipe::fork_option(),
            super::memory::memory_option(),
            RecipeOption::new(
                "view-positives",
                Flag,
                None,
                "Pair each view with another view of its polyp (not only with an augmentation \
                 of itself): positives across viewpoints",
            ),
            RecipeOption::new(
                "size",
                Count,
                Some("160"),
                "Input side in pixels (patch 16)",
            ),
            RecipeOption::new(
                "context",
                Number,
                Some("2.5"),
                "The crop around the polyp: its mask box enlarged this many times (the \
                 card keeps it, so indexing and queries cut images the same way)",
            ),
            RecipeOption::new("weight-decay", Number, Some("0.05"), "AdamW weight decay"),
            RecipeOption::new(
                "quantization",
                Number,
                Some("0"),
                "Weight of a term pulling the embedding's coordinates toward +-1/sqrt(d), so \
                 its binary code loses less (0: off, as EndoFinder)",
            ),
            RecipeOption::new(
                "init",
                Path,
                None,
                "Start the encoder from this image encoder card (e.g. models/twin-image.json; \
                 a fresh decoder), to fine-tune it; default: random initialisation",
            ),
            RecipeOption::new(
                "siblings-negative",
                Flag,
                None,
                "Ablation: other views of the same polyp in a batch count as negatives",
            ),
            RecipeOption::new(
                "unmasked-contrastive",
                Flag,
                None,
                "Ablation: contrastive embeddings from the full image, not the polyp-aware \
                 masked pass",
            ),
            RecipeOption::new(
                "no-crop",
                Flag,
                None,
                "Ablation: the whole field of view, not a crop around the polyp",
            ),
            RecipeOption::new(
                "no-blackout",
                Flag,
                None,
                "Ablation: keep the on-screen display outside the field stop",
            ),
        ]
    }

    fn run(
        &self,
        settings: &Settings,
        ctx: &mut RecipeContext<'_>,
    ) -> Result<Trained, RecipeError> {
        let o = self.options();
        let seed = settings.count(&o, "seed")? as u64;
        let name = settings.text(&o, "name")?;
        let out = settings
            .path(&o, "out")
            .unwrap_or_else(|| ctx.models.clone());
        let mut encoder = VitConfig::twin_small();
        encoder.image_size = settings.count(&o, "size")?;
        if encoder.image_size == 0 || !encoder.image_size.is_multiple_of(encoder.patch_size) {
            return Err(RecipeError::Setting(format!(
                "--size {} is not a positive multiple of the patch size {}",
                encoder.image_size, encoder.patch_size
            )));
        }
        let context = settings.number(&o, "context")? as f32;
        if !TwinInput::valid_context(context) {
            return Err(RecipeError::Setting(format!(
                "--context {context} is not a positive number between 0.5 and 16 (times the polyp box)"
            )));
        }
        let config = ImageEncoderTrainingConfig::new(encoder)
            .with_context(context)
            .with_weight_decay(settings.number(&o, "weight-decay")?)
            .with_ignore_siblings(!settings.flag(&o, "siblings-negative"))
            .with_masked_contrastive(!settings.flag(&o, "unmasked-contrastive"))
            .with_crop(!settings.flag(&o, "no-crop"))
            .with_blackout(!settings.flag(&o, "no-blackout"))
            .with_epochs(settings.count(&o, "epochs")?)
            .with_batch(settings.count(&o, "batch")?)
            .with_lr(settings.number(&o, "lr")?)
            .with_seed(seed)
            .with_view_positives(settings.flag(&o, "view-positives"))
            .with_quantization_weight(settings.number(&o, "quantization")?)
            .with_init(settings.path(&o, "init").map(|p| p.display().to_string()));
        let mut store = Store::open(&ctx.library, OpenMode::Existing)?;
        let (samples, polyps) = super::data::polyp_view_samples(&store, &config.input())?;
        let distinct = {
            let mut p = polyps.clone();
            p.dedup();
            p.len()
        };
        ctx.observer.message(&format!(
            "{} polyp views of {distinct} polyps from {}; backend {:?}",
            samples.len(),
            ctx.library.display(),
            ctx.device
        ));
        super::memory::check(
            "image-encoder",
            "batch",
            config.batch.clamp(2, samples.len().max(2)),
            config.step_values(),
            super::memory::budget(settings, &o, ctx.memory)?,
        )?;
        let device = ctx.device.clone().autodiff();
        let checkpoints = checkpoint_dir(&out, &name)?;
        let mut start = resume_from(
            super::recipe::Start::of(settings, &o)?,
            &checkpoints,
            &config,
            config.init(&device),
            config.weight_decay,
            &mut *ctx.observer,
        )?;
        if let (None, Some(card)) = (&start, &config.init) {
            let refuse = |e: String| RecipeError::Setting(format!("--init {card}: {e}"));
            let (encoder, from) = weights::load(
                std::path::Path::new(card),
                ModelKind::ImageEncoder,
                |c: &VitConfig| c.init(&device),
            )
            .map_err(|e| refuse(e.to_string()))?;
            let theirs: VitConfig = from
                .config(std::path::Path::new(card))
                .map_err(|e| refuse(e.to_string()))?;
            let json = |c: &VitConfig| serde_json::to_string(c).unwrap_or_default();
            if json(&theirs) != json(&config.encoder) {
                return Err(refuse(format!(
                    "its encoder ({}) is not this run's ({}); pass --size {}",
                    json(&theirs),
                    json(&config.encoder),
                    theirs.image_size
                )));
            }
            ctx.observer.message(&format!(
                "the encoder starts from {} ({}), with a fresh decoder",
                from.name, from.version
            ));
            device.seed(seed);
            start = Some(super::Checkpoint {
                model: TwinImageModel {
                    encoder,
                    decoder: config.decoder().init(&device),
                },
                optimizer: burn::optim::AdamWConfig::new()
                    .with_weight_decay(config.weight_decay as f32)
                    .init(),
                epoch: 0,
            });
        }
        let Recorded {
            model,
            run_id,
            last,
            seconds,
        } = recorded(
            &mut store,
            "image-encoder",
            &config,
            config.epochs,
            checkpoints,
            &mut *ctx.observer,
            |events| train(&config, &samples, &device, start, events),
        )?;
        let mut card = ModelCard::new(
            &name,
            ModelKind::ImageEncoder,
            &super::recipe::version_of(run_id),
            "Polyp-aware ViT image encoder (EndoFinder): SSCD contrastive + entropy + polyp-aware \
             masked reconstruction. Input: ImageNet-normalised RGB at the config's image size. \
             Output: the projected CLS embedding; L2-normalise it, its signs are the binary code.",
            &config.encoder,
        );
        card.input = Some(config.input());
        card.training = Some(Training {
            command: ctx.command_line.clone(),
            seed,
            data: format!(
                "{} polyp views of {distinct} polyps in {}",
                samples.len(),
                ctx.library.display()
            ),
            epochs: config.epochs,
            wall: format!("{seconds:.0} s on {}", crate::plumbing::machine()),
            metrics: last,
        });
        let card =
            super::recipe::save_run_model(&mut store, run_id, &encoder_of(&model), &card, &out)?;
        Ok(Trained {
            card,
            seconds,
            run_id,
        })
    }
}
