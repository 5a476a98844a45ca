//! `endotwin train caption-backbone`: the capsule caption model (#44 item 4) on an
//! ImageNet-pretrained MobileNetV2. The backbone is frozen (BatchNorm folded); what learns is
//! the projection of its pooled tapped layers into the joint space, the word-level text tower
//! and the logit scale, with METHODS §2's multi-positive KL loss (frames that share a refined
//! caption are all positives of each other's captions); then the category head, as `train
//! captions` fits it, on the frozen embeddings of the unaugmented frames.
//!
//! Each captioned capsule frame is encoded once in `copies` copies before training (the frame
//! itself, then copies with mild geometry and at most `jitter` brightness/contrast/saturation
//! change: a lesion keeps its colour); an epoch costs only the head's steps.

use super::captions::fit_multilabel;
use super::detector_backbone::BackboneClipHead;
use super::fit::{At, Figure, Plan, StepLoss, Steps, fit};
use super::recipe::{
    OptionKind, Recipe, RecipeContext, RecipeError, RecipeOption, Recorded, Settings, Trained,
    checkpoint_dir, recorded, resume_from,
};
use super::twin_backbone::{backbone_option, backbone_path, frozen_backbone, mild_colour};
use super::{Checkpoint, TrainError, TrainEvents};
use crate::captions::Refiner;
use crate::captions::data::{CaptionSet, category_set};
use crate::captions::model::{CaptionModel, CaptionModelConfig, caption_tokenizer, prompt};
use crate::model::block::l2_normalize;
use crate::model::clip::{Clip, ClipConfig};
use crate::model::mobilenet::MobileNetV2Config;
use crate::model::preprocess::imagenet_tensor;
use crate::model::text::TextEncoderConfig;
use crate::model::twin_encoder::{BackboneTwin, BackboneTwinConfig, TwinEncoderConfig};
use crate::model::weights::{self, ModelCard, ModelKind, Training};
use crate::plumbing::{Progress, Rng};
use crate::store::{OpenMode, Store};
use burn::config::Config;
use burn::module::Module;
use burn::tensor::{Device, Int, Tensor, TensorData};
use image::RgbImage;

/// The caption model's architecture on the backbone: MobileNetV2 (its tapped layers pooled)
/// projected to `dim`, the caption vocabulary's word-level text tower, the category head.
pub fn caption_backbone_config(dim: usize) -> CaptionModelConfig {
    let tokenizer = caption_tokenizer(Refiner::shipped());
    let vision = BackboneTwinConfig::new(MobileNetV2Config::new()).with_projection(Some(dim));
    let text = TextEncoderConfig::word_small(tokenizer.vocab_size(), dim);
    CaptionModelConfig::new(ClipConfig::new(vision.into(), text), tokenizer)
}

#[derive(Config, Debug)]
pub struct CaptionBackboneTrainingConfig {
    /// The caption model (a backbone image tower).
    pub model: CaptionModelConfig,
    /// Copies of each frame: the first as the model reads a frame, the others augmented.
    #[config(default = 4)]
    pub copies: usize,
    /// Largest brightness/contrast/saturation change of an augmented copy (fraction).
    #[config(default = 0.1)]
    pub jitter: f32,
    #[config(default = 20)]
    pub epochs: usize,
    /// Frames per step.
    #[config(default = 32)]
    pub batch: usize,
    #[config(default = 1e-3)]
    pub lr: f64,
    #[config(default = 1e-4)]
    pub weight_decay: f64,
    /// Full-batch steps of the category head on the frozen embeddings.
    #[config(default = 300)]
    pub head_steps: usize,
    #[config(default = 17)]
    pub seed: u64,
}

impl CaptionBackboneTrainingConfig {
    fn vision(&self) -> &BackboneTwinConfig {
        match &self.model.clip.vision {
            TwinEncoderConfig::Backbone(b) => b,
            TwinEncoderConfig::Vit(_) => unreachable!("caption_backbone_config makes a backbone"),
        }
    }

    /// A fresh head (seed the device first).
    pub fn head(&self, device: &Device) -> BackboneClipHead {
        BackboneClipHead::init(self.vision(), &self.model.clip, device)
    }
}

/// The frozen backbone's pooled features of every copy of every frame.
pub struct FrameFeatures {
    pub rows: Vec<Vec<f32>>,
    /// Each row's refined caption (an index into `captions`).
    pub caption: Vec<usize>,
    /// Each row's categories.
    pub categories: Vec<[bool; 7]>,
    /// Whether the row is a frame's first, unaugmented copy (the category head's rows).
    pub first: Vec<bool>,
    pub captions: Vec<String>,
}

/// Encodes `copies` copies of every frame of `set` with the frozen backbone.
pub fn encode_frames(
    set: &CaptionSet,
    frozen: &BackboneTwin,
    config: &CaptionBackboneTrainingConfig,
    device: &Device,
    mut progress: impl FnMut(usize),
) -> FrameFeatures {
    let size = config.vision().image_size as u32;
    // A capsule finding can sit anywhere in the frame: crops keep at least 70 % of its side.
    let augment = super::augment::Augment {
        crop_scale: (0.7, 1.0),
        ..mild_colour(size, config.jitter)
    };
    let mut rng = Rng::new(config.seed).fork(0x00ca_9710);
    let mut out = FrameFeatures {
        rows: Vec::new(),
        caption: Vec::new(),
        categories: Vec::new(),
        first: Vec::new(),
        captions: set.captions.clone(),
    };
    for chunk in set.frames.chunks(8) {
        let mut images: Vec<RgbImage> = Vec::new();
        for f in chunk {
            for c in 0..config.copies.max(1) {
                images.push(match c {
                    0 => f.image.clone(),
                    _ => {
                        let source = lower_resolution(&f.image, &mut rng);
                        augment.apply(&source, None, &mut rng).0
                    }
                });
                out.caption.push(f.caption);
                out.categories.push(category_set(&f.refined.categories));
                out.first.push(c == 0);
            }
        }
        let features = frozen.features(imagenet_tensor(&images, device));
        let [_, dim] = features.dims();
        let values = features
            .into_data()
            .try_to_vec::<f32>()
            .expect("f32 features");
        out.rows
            .extend(values.chunks_exact(dim).map(<[f32]>::to_vec));
        progress(out.rows.len());
    }
    out
}

/// Half the augmented copies: the frame as a capsule camera of lower resolution would give it
/// (its side reduced to 64-160 px, then back), so frames of the phantom's 96 px and of 192 px
/// both lie inside what the model learned.
fn lower_resolution(image: &RgbImage, rng: &mut Rng) -> RgbImage {
    use image::imageops::{FilterType, resize};
    if !rng.chance(0.5) {
        return image.clone();
    }
    let (w, h) = image.dimensions();
    let side = rng.range(64.0, 160.0).round() as u32;
    if side >= w.min(h) {
        return image.clone();
    }
    let small = resize(image, side, side, FilterType::Triangle);
    resize(&small, w, h, FilterType::Triangle)
}

struct HeadSteps<'a> {
    features: &'a FrameFeatures,
    /// Every distinct caption's prompt, tokenized: [captions, context].
    tokens: Tensor<2, Int>,
    device: &'a Device,
    batch: usize,
    order: Vec<usize>,
}

impl Steps<BackboneClipHead> for HeadSteps<'_> {
    fn begin_epoch(&mut self, _epoch: usize, rng: &mut Rng) {
        self.order = (0..self.features.rows.len()).collect();
        rng.shuffle(&mut self.order);
    }

    fn step(&mut self, model: &BackboneClipHead, at: At, _rng: &mut Rng) -> StepLoss {
        let f = self.features;
        let picked = &self.order[at.step * self.batch..(at.step + 1) * self.batch];
        let rows: Vec<&[f32]> = picked.iter().map(|&i| f.rows[i].as_slice()).collect();
        let captions: Vec<usize> = picked.iter().map(|&i| f.caption[i]).collect();
        let shared = captions
            .iter()
            .enumerate()
            .filter(|(k, c)| captions[..*k].contains(c) || captions[k + 1..].contains(c))
            .count();
        let loss = model.kl_loss(&rows, &captions, self.tokens.clone(), self.device);
        StepLoss::new(loss).with(Figure::Share {
            name: "frames sharing a caption in a batch",
            count: shared as f64,
            of: self.batch as f64,
        })
    }
}

/// Trains the head over `features` (the `device` must have autodiff).
pub fn train(
    config: &CaptionBackboneTrainingConfig,
    features: &FrameFeatures,
    device: &Device,
    start: Option<Checkpoint<BackboneClipHead>>,
    events: &mut dyn TrainEvents<BackboneClipHead>,
) -> Result<BackboneClipHead, TrainError> {
    let rows = features.rows.len();
    let batch = config.batch.max(2);
    if rows < batch || features.captions.len() < 2 {
        return Err(TrainError::NotEnoughData(format!(
            "the caption model learns from at least {batch} frame copies and 2 distinct \
             captions; the library gave {rows} copies of {} caption(s)",
            features.captions.len()
        )));
    }
    let start = Checkpoint::resume_or_fresh(start, device, config.seed, config.weight_decay, |d| {
        config.head(d)
    });
    let plan = Plan {
        epochs: config.epochs,
        steps_per_epoch: rows / batch,
        lr: config.lr,
        seed: config.seed,
    };
    let prompts: Vec<String> = features.captions.iter().map(|c| prompt(c)).collect();
    let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
    let tokens = config
        .model
        .tokenizer
        .batch(&refs, config.model.clip.text.context, device);
    let mut steps = HeadSteps {
        features,
        tokens,
        device,
        batch,
        order: Vec::new(),
    };
    fit(&plan, start, &mut steps, events)
}

/// The caption model: the frozen backbone with the learned projection, the learned text
/// tower and scale, and a category head fitted on the unaugmented frames' embeddings.
pub fn assemble(
    config: &CaptionBackboneTrainingConfig,
    mut frozen: BackboneTwin,
    head: BackboneClipHead,
    features: &FrameFeatures,
    device: &Device,
) -> CaptionModel {
    let first: Vec<usize> = (0..features.rows.len())
        .filter(|&i| features.first[i])
        .collect();
    let dim = features.rows[0].len();
    let flat: Vec<f32> = first
        .iter()
        .flat_map(|&i| features.rows[i].clone())
        .collect();
    let x = Tensor::<2>::from_data(TensorData::new(flat, [first.len(), dim]), device);
    let embeddings = l2_normalize(head.projection.forward(x));
    let [n, d] = embeddings.dims();
    let values = embeddings.into_data();
    let learning = device.clone().autodiff();
    let embeddings = Tensor::<2>::from_data(values, &learning);
    debug_assert_eq!(embeddings.dims(), [n, d]);
    let targets: Vec<[bool; 7]> = first.iter().map(|&i| features.categories[i]).collect();
    let category = fit_multilabel(
        embeddings,
        &targets,
        config.head_steps,
        config.seed,
        &learning,
    );
    frozen.projection = Some(head.projection);
    CaptionModel {
        clip: Clip {
            vision: None,
            backbone: Some(frozen),
            text: head.text,
            logit_scale: head.logit_scale,
        },
        category: category.valid(),
    }
}

/// `endotwin train caption-backbone`.
pub struct CaptionBackboneRecipe;

impl Recipe for CaptionBackboneRecipe {
    fn name(&self) -> &'static str {
        "caption-backbone"
    }

    fn description(&self) -> &'static str {
        "The capsule caption model on ImageNet's MobileNetV2 (frozen): a projection and the \
         caption text tower learned with the multi-positive KL loss on the library's captioned \
         capsule frames, then the category head"
    }

    fn options(&self) -> Vec<RecipeOption> {
        use OptionKind::*;
        vec![
            backbone_option(),
            RecipeOption::new(
                "out",
                Path,
                Some("models"),
                "Where the model card + record go (and `<name>.checkpoints/`)",
            ),
            RecipeOption::new("name", Text, Some("captions"), "Name of the model"),
            RecipeOption::new("epochs", Count, Some("20"), "Passes over the frame copies"),
            RecipeOption::new("batch", Count, Some("32"), "Frame copies per step"),
            RecipeOption::new("lr", Number, Some("1e-3"), "Peak learning rate"),
            RecipeOption::new("seed", Count, Some("17"), "Seed of every random draw"),
            RecipeOption::new("dim", Count, Some("128"), "Joint space width"),
            RecipeOption::new(
                "copies",
                Count,
                Some("4"),
                "Copies of each frame (the first unaugmented)",
            ),
            RecipeOption::new(
                "jitter",
                Number,
                Some("0.1"),
                "Largest brightness/contrast/saturation change of a copy",
            ),
            RecipeOption::new(
                "also",
                Path,
                None,
                "Another library whose captioned capsule frames join the training frames (the \
                 phantom at another frame size)",
            ),
            RecipeOption::new(
                "resume",
                Flag,
                None,
                "Continue from the last checkpoint in `<out>/<name>.checkpoints/`",
            ),
            super::recipe::fork_option(),
            super::memory::memory_option(),
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
        weights::check_name(&name)?;
        let out = settings
            .path(&o, "out")
            .unwrap_or_else(|| ctx.models.clone());
        let dim = settings.count(&o, "dim")?.max(1);
        super::memory::check(
            "caption-backbone",
            "batch",
            settings.count(&o, "batch")?.max(1),
            (MobileNetV2Config::new().pooled_dim() + 2 * dim) as f64,
            super::memory::budget(settings, &o, ctx.memory)?,
        )?;
        let backbone_path = backbone_path(settings, &o)?;
        let config = CaptionBackboneTrainingConfig::new(caption_backbone_config(dim))
            .with_copies(settings.count(&o, "copies")?.max(1))
            .with_jitter(settings.number(&o, "jitter")? as f32)
            .with_epochs(settings.count(&o, "epochs")?)
            .with_batch(settings.count(&o, "batch")?.max(2))
            .with_lr(settings.number(&o, "lr")?)
            .with_seed(seed);
        let plain = ctx.device.clone();
        let frozen = frozen_backbone(&backbone_path, config.vision(), &plain)?;
        let mut store = Store::open(&ctx.library, OpenMode::Existing)?;
        ctx.observer
            .message("reading the captioned capsule frames...");
        let mut set = CaptionSet::load(&store, &config.model, &Progress::new())
            .map_err(|e| RecipeError::Setting(e.to_string()))?;
        let also = settings.path(&o, "also");
        if let Some(path) = &also {
            let other = Store::open(path, OpenMode::Existing)
                .map_err(|e| RecipeError::Setting(format!("--also: {e}")))?;
            let more = CaptionSet::load(&other, &config.model, &Progress::new())
                .map_err(|e| RecipeError::Setting(format!("--also {}: {e}", path.display())))?;
            set = set.join(more);
        }
        let from = match &also {
            Some(path) => format!("{} and {}", ctx.library.display(), path.display()),
            None => ctx.library.display().to_string(),
        };
        ctx.observer.message(&format!(
            "{} frames, {} distinct captions, {} patients; encoding {} copies of each with the \
             frozen backbone",
            set.frames.len(),
            set.captions.len(),
            set.patients(),
            config.copies
        ));
        if !set.skipped.is_empty() {
            ctx.observer
                .message(&format!("left out: {}", set.skipped.join("; ")));
        }
        let started = std::time::Instant::now();
        let features = {
            let observer = &mut *ctx.observer;
            let mut said = 0;
            encode_frames(&set, &frozen, &config, &plain, |done| {
                if done / 2000 > said {
                    said = done / 2000;
                    observer.message(&format!("encoded {done} frame copies"));
                }
            })
        };
        let encode_seconds = started.elapsed().as_secs_f64();
        let device = ctx.device.clone().autodiff();
        let checkpoints = checkpoint_dir(&out, &name)?;
        let start = resume_from(
            super::recipe::Start::of(settings, &o)?,
            &checkpoints,
            &config,
            config.head(&device),
            config.weight_decay,
            &mut *ctx.observer,
        )?;
        let Recorded {
            model,
            run_id,
            last,
            seconds,
        } = recorded(
            &mut store,
            "caption-backbone",
            &config,
            config.epochs,
            checkpoints,
            &mut *ctx.observer,
            |events| train(&config, &features, &device, start, events),
        )?;
        let captions = assemble(&config, frozen, model.valid(), &features, &plain);
        let mut card = ModelCard::new(
            &name,
            ModelKind::CaptionModel,
            &super::recipe::version_of(run_id),
            "Capsule caption model: torchvision's ImageNet MobileNetV2 (frozen, BatchNorm \
             folded), layers 6, 10, 13, 16 and 18 pooled and projected into a joint space with \
             a word-level text tower over the caption vocabulary (\"endoscopy image with \
             <caption>\"), and a category head (7 logits) on the image embedding. Input: a \
             capsule frame resized to 224 px, RGB, ImageNet-normalised.",
            &config.model,
        );
        card.training = Some(Training {
            command: ctx.command_line.clone(),
            seed,
            data: format!(
                "{} captioned capsule frames ({} distinct captions, {} patients) of {} x {} \
                 copies (the first unaugmented; then crops of 70-100 %, flips, quarter turns, \
                 blur, JPEG, at most {} brightness/contrast/saturation, half of them at 64-160 px and back); loss kl \
                 (multi-positive), shots 0 (every frame); the backbone: ImageNet, {}",
                set.frames.len(),
                set.captions.len(),
                set.patients(),
                from,
                config.copies,
                config.jitter,
                backbone_path.display()
            ),
            epochs: config.epochs,
            wall: format!(
                "{:.0} s ({encode_seconds:.0} s encoding the frames) on {}",
                seconds + encode_seconds,
                crate::plumbing::machine()
            ),
            metrics: last,
        });
        let card = super::recipe::save_run_model(&mut store, run_id, &captions, &card, &out)?;
        Ok(Trained {
            card,
            seconds: seconds + encode_seconds,
            run_id,
        })
    }
}
