//! `endotwin train detector-backbone`: the zero-shot polyp detector (a text-prompt model read
//! with Endo-CLIP's two stage-1 sentences) on an ImageNet-pretrained MobileNetV2. The backbone
//! is frozen (BatchNorm folded); what learns is the projection of its pooled tapped layers
//! into the joint space, the word-level text tower and the logit scale.
//!
//! What it learns from is weak supervision by masks, not Endo-CLIP's reports: every polyp
//! view of the library that has a mask gives the square around its polyp (the box's side
//! times 1 to `context`) paired with "This is a colon with polyps.", and a window of the same
//! side with no polyp pixel paired with "This is a normal background."; the copies after the
//! first are mildly augmented (geometry freely, colour a little). The loss is the
//! multi-positive KL of METHODS §2 (every row with the same sentence is a positive), so the
//! two repeated sentences are not each other's negatives. The frozen backbone runs once per
//! crop before training; an epoch costs only the head's steps.

use super::augment::Augment;
use super::dual_losses::kl_multi_positive;
use super::fit::{At, Plan, StepLoss, Steps, fit};
use super::recipe::{
    OptionKind, Recipe, RecipeContext, RecipeError, RecipeOption, Recorded, Settings, Trained,
    checkpoint_dir, recorded, resume_from,
};
use super::twin_backbone::{backbone_option, backbone_path, frozen_backbone, mild_colour};
use super::{Checkpoint, TrainError, TrainEvents};
use crate::data::crops::{free_window, polyp_square};
use crate::model::block::l2_normalize;
use crate::model::clip::{Clip, ClipConfig};
use crate::model::mobilenet::MobileNetV2Config;
use crate::model::preprocess::{Preprocess, imagenet_tensor};
use crate::model::text::{TextEncoder, TextEncoderConfig};
use crate::model::tokenizer::WordTokenizer;
use crate::model::twin_encoder::{BackboneTwin, BackboneTwinConfig};
use crate::model::unifier::UnifierConfig;
use crate::model::weights::{ModelCard, ModelKind, Training};
use crate::plumbing::Rng;
use crate::prompts::model::{
    BACKGROUND_SENTENCE, POLYP_SENTENCE, PromptModel, PromptModelConfig, PromptTokenizer,
};
use crate::store::{OpenMode, Store};
use burn::config::Config;
use burn::module::{Module, Param};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Int, Tensor, TensorData};
use image::RgbImage;

/// The detector's architecture: MobileNetV2 (layers 6, 10, 13, 16, 18 pooled) projected to
/// `dim`, and a word-level text tower that knows the two stage-1 sentences' words only (any
/// other prompt reads as unknown words, and is refused as such).
pub fn detector_config(dim: usize) -> PromptModelConfig {
    let tokenizer = WordTokenizer::from_corpus([POLYP_SENTENCE, BACKGROUND_SENTENCE], 1);
    let vision = BackboneTwinConfig::new(MobileNetV2Config::new()).with_projection(Some(dim));
    let text = TextEncoderConfig::word_small(tokenizer.vocab_size(), dim).with_context(16);
    PromptModelConfig::new(
        ClipConfig::new(vision.into(), text),
        PromptTokenizer::Words(tokenizer),
        UnifierConfig::new(dim),
    )
}

#[derive(Config, Debug)]
pub struct DetectorBackboneTrainingConfig {
    /// The detector (a backbone image tower).
    pub model: PromptModelConfig,
    /// Crops of each view (polyp square and free window each): the first at the polyp box's
    /// own side, the others at 1 to `context` times it, augmented.
    #[config(default = 4)]
    pub copies: usize,
    /// Largest side of a crop, in polyp box sides.
    #[config(default = 3.0)]
    pub context: f32,
    /// Largest brightness/contrast/saturation change of an augmented copy (fraction).
    #[config(default = 0.1)]
    pub jitter: f32,
    /// Copies of each whole frame of an examination that also has frames without a polyp
    /// (its polyp views with the polyp sentence, its other frames with the background
    /// sentence, repeated to balance the two); 0: crops only.
    #[config(default = 2)]
    pub whole_frames: usize,
    #[config(default = 20)]
    pub epochs: usize,
    /// Crops per step.
    #[config(default = 64)]
    pub batch: usize,
    #[config(default = 1e-3)]
    pub lr: f64,
    #[config(default = 1e-4)]
    pub weight_decay: f64,
    #[config(default = 17)]
    pub seed: u64,
}

/// What learns on a frozen backbone (the detector, the caption model): the projection of the
/// pooled backbone features, the text tower and the logit scale (stored as its log).
#[derive(Module, Debug)]
pub struct BackboneClipHead {
    pub projection: Linear,
    pub text: TextEncoder,
    pub logit_scale: Param<Tensor<1>>,
}

impl BackboneClipHead {
    /// A fresh head for `clip`'s backbone tower (seed the device first).
    pub fn init(vision: &BackboneTwinConfig, clip: &ClipConfig, device: &Device) -> Self {
        BackboneClipHead {
            projection: LinearConfig::new(vision.backbone.pooled_dim(), vision.output_dim())
                .init(device),
            text: clip.text.init(device),
            logit_scale: Param::from_tensor(Tensor::from_data(
                TensorData::new(vec![clip.logit_scale_init as f32], [1]),
                device,
            )),
        }
    }

    /// The multi-positive KL loss of pooled feature rows `rows` against their sentences:
    /// row i's is sentence `labels[i]` of `tokens` [sentences, context] (rows with one label
    /// are each other's positives).
    pub fn kl_loss(
        &self,
        rows: &[&[f32]],
        labels: &[usize],
        tokens: Tensor<2, Int>,
        device: &Device,
    ) -> Tensor<1> {
        let dim = rows[0].len();
        let flat: Vec<f32> = rows.iter().flat_map(|r| r.iter().copied()).collect();
        let x = Tensor::<2>::from_data(TensorData::new(flat, [rows.len(), dim]), device);
        let v = l2_normalize(self.projection.forward(x)); // [batch, d]
        let sentences = l2_normalize(self.text.forward(tokens)); // [sentences, d]
        let which = Tensor::<1, Int>::from_data(
            TensorData::new(
                labels.iter().map(|&l| l as i64).collect::<Vec<_>>(),
                [labels.len()],
            ),
            device,
        );
        let t = sentences.select(0, which); // [batch, d]
        let scale = self.logit_scale.val().exp().clamp_max(100.0);
        kl_multi_positive(v, t, labels, scale)
    }
}

impl DetectorBackboneTrainingConfig {
    fn vision(&self) -> &BackboneTwinConfig {
        match &self.model.clip.vision {
            crate::model::twin_encoder::TwinEncoderConfig::Backbone(b) => b,
            crate::model::twin_encoder::TwinEncoderConfig::Vit(_) => {
                unreachable!("detector_config makes a backbone tower")
            }
        }
    }

    /// A fresh head (seed the device first).
    pub fn head(&self, device: &Device) -> BackboneClipHead {
        BackboneClipHead::init(self.vision(), &self.model.clip, device)
    }
}

/// The frozen backbone's balanced pooled features of every crop, and whether it shows a polyp.
pub struct CropFeatures {
    pub rows: Vec<Vec<f32>>,
    pub polyp: Vec<bool>,
    /// Views with a mask, and how many of them had no polyp-free window of any copy's side.
    pub views: usize,
    /// Whole frames learned from (`whole_frames` > 0): with a polyp, and without.
    pub whole_polyp: usize,
    pub whole_background: usize,
    pub without_window: usize,
    /// The folders the views were imported from (their files' folders), for the card.
    pub sources: std::collections::BTreeSet<String>,
}

/// Cuts and encodes the crops of every masked polyp view of `store` (see the module docs).
pub fn encode_crops(
    store: &Store,
    frozen: &BackboneTwin,
    config: &DetectorBackboneTrainingConfig,
    device: &Device,
    mut progress: impl FnMut(usize),
) -> Result<CropFeatures, RecipeError> {
    let size = config.vision().image_size as u32;
    let resize = Preprocess::imagenet(size);
    let augment = mild_colour(size, config.jitter);
    let mut rng = Rng::new(config.seed).fork(0x00de_7ec7);
    let mut out = CropFeatures {
        rows: Vec::new(),
        polyp: Vec::new(),
        views: 0,
        without_window: 0,
        whole_polyp: 0,
        whole_background: 0,
        sources: Default::default(),
    };
    // Whole frames come only from examinations that also hold frames without a polyp, so a
    // whole frame is learned against whole frames of its own kind (the phantom's withdrawal
    // frames; a real frame library without normal frames gives none).
    let whole = whole_frames(store, config.whole_frames)?;
    let whole_augment = Augment {
        crop_scale: (1.0, 1.0),
        ..augment.clone()
    };
    let mut pending: Vec<(RgbImage, bool)> = Vec::new();
    let flush = |pending: &mut Vec<(RgbImage, bool)>, out: &mut CropFeatures| {
        if pending.is_empty() {
            return;
        }
        let images: Vec<RgbImage> = pending.iter().map(|(im, _)| im.clone()).collect();
        let f = frozen.features(imagenet_tensor(&images, device));
        let [_, dim] = f.dims();
        let values = f.into_data().try_to_vec::<f32>().expect("f32 features");
        for ((_, label), row) in pending.iter().zip(values.chunks_exact(dim)) {
            out.rows.push(row.to_vec());
            out.polyp.push(*label);
        }
        pending.clear();
    };
    for polyp in store.polyps()? {
        for view in store.polyp_views(polyp.id)? {
            let Some(mask_row) = view
                .mask_media_id
                .and_then(|id| store.media(id).transpose())
                .transpose()?
            else {
                continue;
            };
            let decode = |m: &crate::store::MediaRow| {
                crate::data::images::decode_media(store, m).map_err(|e| {
                    RecipeError::Setting(format!("{}: {e}", store.media_path(m).display()))
                })
            };
            let image = decode(&view)?.image;
            let mask = decode(&mask_row)?.image.to_luma8();
            if mask.dimensions() != (image.width(), image.height()) {
                continue;
            }
            out.views += 1;
            out.sources.insert(source_folder(&view.source_path));
            let mut windows = 0;
            for c in 0..config.copies.max(1) {
                let scale = if c == 0 {
                    1.0
                } else {
                    rng.range(1.0, config.context.max(1.0))
                };
                let Some((px, py, side)) = polyp_square(&mask, scale) else {
                    break;
                };
                let mut crops = vec![(image.crop_imm(px, py, side, side), true)];
                if let Some((bx, by)) = free_window(&mask, side, &mut rng) {
                    crops.push((image.crop_imm(bx, by, side, side), false));
                    windows += 1;
                }
                for (crop, label) in crops {
                    let rgb = if c == 0 {
                        resize.resize(&crop)
                    } else {
                        augment.apply(&crop.to_rgb8(), None, &mut rng).0
                    };
                    pending.push((rgb, label));
                }
            }
            if windows == 0 {
                out.without_window += 1;
            }
            if whole.examinations.contains(&polyp.examination_id) {
                out.whole_polyp += 1;
                for c in 0..config.whole_frames {
                    pending.push((
                        whole_copy(&image, c, &resize, &whole_augment, &mut rng),
                        true,
                    ));
                }
            }
            if pending.len() >= 16 {
                flush(&mut pending, &mut out);
                progress(out.rows.len());
            }
        }
    }
    let copies = if whole.frames.is_empty() {
        0
    } else {
        // About as many background rows as polyp ones, 1 to 4 times `whole_frames` copies.
        let ratio = out.whole_polyp as f64 / whole.frames.len() as f64;
        ((config.whole_frames as f64 * ratio).round() as usize).clamp(1, 4 * config.whole_frames)
    };
    for m in &whole.frames {
        let image = crate::data::images::decode_media(store, m)
            .map_err(|e| RecipeError::Setting(format!("{}: {e}", store.media_path(m).display())))?
            .image;
        out.whole_background += 1;
        for c in 0..copies {
            pending.push((
                whole_copy(&image, c, &resize, &whole_augment, &mut rng),
                false,
            ));
        }
        if pending.len() >= 16 {
            flush(&mut pending, &mut out);
            progress(out.rows.len());
        }
    }
    flush(&mut pending, &mut out);
    progress(out.rows.len());
    Ok(out)
}

/// The whole frames without a polyp of every examination that has some (capsule ones aside),
/// and those examinations; nothing when `copies` is 0.
struct WholeFrames {
    examinations: std::collections::HashSet<i64>,
    frames: Vec<crate::store::MediaRow>,
}

fn whole_frames(store: &Store, copies: usize) -> Result<WholeFrames, RecipeError> {
    let mut out = WholeFrames {
        examinations: Default::default(),
        frames: Vec::new(),
    };
    if copies == 0 {
        return Ok(out);
    }
    for exam in store.examinations()? {
        if exam.kind == "capsule" {
            continue;
        }
        let loose: Vec<_> = store
            .loose_frames(exam.id)?
            .into_iter()
            .filter(|m| m.kind == crate::store::MediaKind::Frame)
            .collect();
        if !loose.is_empty() {
            out.examinations.insert(exam.id);
            out.frames.extend(loose);
        }
    }
    Ok(out)
}

/// Copy `c` of a whole frame: the first as the prompt models read a frame (squashed to the
/// square), the others augmented without cropping (so a polyp near the edge stays in).
fn whole_copy(
    image: &image::DynamicImage,
    c: usize,
    resize: &Preprocess,
    augment: &Augment,
    rng: &mut Rng,
) -> RgbImage {
    let square = resize.resize(image);
    if c == 0 {
        square
    } else {
        augment.apply(&square, None, rng).0
    }
}

struct HeadSteps<'a> {
    features: &'a CropFeatures,
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
        // Sentence 0 is the polyp's, 1 the background's.
        let labels: Vec<usize> = picked.iter().map(|&i| usize::from(!f.polyp[i])).collect();
        StepLoss::new(model.kl_loss(&rows, &labels, self.tokens.clone(), self.device))
    }
}

/// Trains the head over `features` (the `device` must have autodiff).
pub fn train(
    config: &DetectorBackboneTrainingConfig,
    features: &CropFeatures,
    device: &Device,
    start: Option<Checkpoint<BackboneClipHead>>,
    events: &mut dyn TrainEvents<BackboneClipHead>,
) -> Result<BackboneClipHead, TrainError> {
    let (polyps, windows) = (
        features.polyp.iter().filter(|&&p| p).count(),
        features.polyp.iter().filter(|&&p| !p).count(),
    );
    if polyps < 4 || windows < 4 {
        return Err(TrainError::NotEnoughData(format!(
            "the detector learns from at least 4 polyp crops and 4 polyp-free windows; the \
             library's masked views gave {polyps} and {windows}"
        )));
    }
    let rows = features.rows.len();
    let batch = config.batch.clamp(2, rows);
    let start = Checkpoint::resume_or_fresh(start, device, config.seed, config.weight_decay, |d| {
        config.head(d)
    });
    let plan = Plan {
        epochs: config.epochs,
        steps_per_epoch: rows / batch,
        lr: config.lr,
        seed: config.seed,
    };
    let tokens = config
        .model
        .tokens(&[POLYP_SENTENCE, BACKGROUND_SENTENCE], device);
    let mut steps = HeadSteps {
        features,
        tokens,
        device,
        batch,
        order: Vec::new(),
    };
    fit(&plan, start, &mut steps, events)
}

/// The detector as a prompt model: the frozen backbone with the learned projection, the
/// learned text tower and scale, and a fresh unifier (stage 3 never trains a detector).
pub fn assemble(
    config: &PromptModelConfig,
    mut frozen: BackboneTwin,
    head: BackboneClipHead,
    device: &Device,
) -> PromptModel {
    frozen.projection = Some(head.projection);
    PromptModel {
        clip: Clip {
            vision: None,
            backbone: Some(frozen),
            text: head.text,
            logit_scale: head.logit_scale,
        },
        unifier: config.unifier.init(device),
    }
}

/// Where a view came from: its file's folder, or the generator (`phantom`) for a view a
/// generator made (`phantom:S11-E001-P1/view1`).
fn source_folder(source: &str) -> String {
    match source.split_once(':') {
        Some((scheme, _)) if !scheme.contains('/') && scheme.len() > 1 => scheme.to_string(),
        _ => std::path::Path::new(source)
            .parent()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
    }
}

/// The first 8 source folders, and how many more.
fn folders(sources: &std::collections::BTreeSet<String>) -> String {
    let named: Vec<&str> = sources
        .iter()
        .map(String::as_str)
        .filter(|s| !s.is_empty())
        .collect();
    match named.len() {
        0 => "no folder recorded".into(),
        n if n > 8 => format!("{} and {} more", named[..8].join(", "), n - 8),
        _ => named.join(", "),
    }
}

/// `endotwin train detector-backbone`.
pub struct DetectorBackboneRecipe;

impl Recipe for DetectorBackboneRecipe {
    fn name(&self) -> &'static str {
        "detector-backbone"
    }

    fn description(&self) -> &'static str {
        "The zero-shot polyp detector on ImageNet's MobileNetV2 (frozen): the polyp square of \
         every masked view against a polyp-free window of the same frame, each with its \
         stage-1 sentence"
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
            RecipeOption::new("name", Text, Some("prompts-detect"), "Name of the model"),
            RecipeOption::new("epochs", Count, Some("20"), "Passes over the crops"),
            RecipeOption::new("batch", Count, Some("64"), "Crops per step"),
            RecipeOption::new("lr", Number, Some("1e-3"), "Peak learning rate"),
            RecipeOption::new("seed", Count, Some("17"), "Seed of every random draw"),
            RecipeOption::new("dim", Count, Some("128"), "Joint space width"),
            RecipeOption::new(
                "copies",
                Count,
                Some("4"),
                "Crops of each view (the first at the polyp box's side, unaugmented)",
            ),
            RecipeOption::new(
                "context",
                Number,
                Some("3"),
                "Largest crop side, in polyp box sides",
            ),
            RecipeOption::new(
                "jitter",
                Number,
                Some("0.1"),
                "Largest brightness/contrast/saturation change of a copy",
            ),
            RecipeOption::new(
                "whole-frames",
                Count,
                Some("2"),
                "Copies of each whole frame of an examination that also has frames without a \
                 polyp (0: crops only)",
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
        let out = settings
            .path(&o, "out")
            .unwrap_or_else(|| ctx.models.clone());
        let dim = settings.count(&o, "dim")?.max(1);
        super::memory::check(
            "detector-backbone",
            "batch",
            settings.count(&o, "batch")?.max(1),
            (MobileNetV2Config::new().pooled_dim() + 2 * dim) as f64,
            super::memory::budget(settings, &o, ctx.memory)?,
        )?;
        let backbone_path = backbone_path(settings, &o)?;
        let context = settings.number(&o, "context")? as f32;
        if !(1.0..=16.0).contains(&context) {
            return Err(RecipeError::Setting(format!(
                "--context {context} is not between 1 and 16 (polyp box sides)"
            )));
        }
        let config = DetectorBackboneTrainingConfig::new(detector_config(dim))
            .with_copies(settings.count(&o, "copies")?.max(1))
            .with_context(context)
            .with_jitter(settings.number(&o, "jitter")? as f32)
            .with_whole_frames(settings.count(&o, "whole-frames")?)
            .with_epochs(settings.count(&o, "epochs")?)
            .with_batch(settings.count(&o, "batch")?)
            .with_lr(settings.number(&o, "lr")?)
            .with_seed(seed);
        let plain = ctx.device.clone();
        let vision = config.vision().clone();
        let frozen = frozen_backbone(&backbone_path, &vision, &plain)?;
        let mut store = Store::open(&ctx.library, OpenMode::Existing)?;
        ctx.observer.message(&format!(
            "cutting {} crops of each masked polyp view of {} (polyp square and free window) \
             and encoding them with the frozen backbone",
            config.copies,
            ctx.library.display()
        ));
        let started = std::time::Instant::now();
        let features = {
            let observer = &mut *ctx.observer;
            let mut said = 0;
            encode_crops(&store, &frozen, &config, &plain, |done| {
                if done / 2000 > said {
                    said = done / 2000;
                    observer.message(&format!("encoded {done} crops"));
                }
            })?
        };
        let encode_seconds = started.elapsed().as_secs_f64();
        let polyp_rows = features.polyp.iter().filter(|&&p| p).count();
        ctx.observer.message(&format!(
            "{} masked views: {polyp_rows} polyp crops, {} polyp-free windows ({} views had no \
             free window of any side)",
            features.views,
            features.rows.len() - polyp_rows,
            features.without_window
        ));
        if config.whole_frames > 0 {
            ctx.observer.message(&format!(
                "whole frames: {} with a polyp, {} without (examinations that hold both)",
                features.whole_polyp, features.whole_background
            ));
        }
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
            "detector-backbone",
            &config,
            config.epochs,
            checkpoints,
            &mut *ctx.observer,
            |events| train(&config, &features, &device, start, events),
        )?;
        let detector = assemble(&config.model, frozen, model.valid(), &plain);
        let mut card = ModelCard::new(
            &name,
            ModelKind::PromptModel,
            &super::recipe::version_of(run_id),
            "Zero-shot polyp detector: torchvision's ImageNet MobileNetV2 (frozen, BatchNorm \
             folded), layers 6, 10, 13, 16 and 18 pooled and projected into a joint space with \
             a word-level text tower that knows the two stage-1 sentences. Input: a frame or \
             crop resized to 224 px, RGB, ImageNet-normalised. Read it with \"This is a colon \
             with polyps.\" against \"This is a normal background.\"; other prompts are not \
             what it learned. Weakly supervised by masks: a crop around a masked polyp is \
             \"polyp\", a polyp-free window of the same frame \"background\", and with \
             --whole-frames a whole frame showing a polyp \"polyp\" and one without \
             \"background\" (not Endo-CLIP's report-only stage 1).",
            &config.model,
        );
        card.training = Some(Training {
            command: ctx.command_line.clone(),
            seed,
            data: format!(
                "{} masked polyp views of {} x {} crops, and {} copies of whole frames ({} \
                 with a polyp, {} without, from examinations that hold both): {polyp_rows} \
                 polyp rows, {} background rows; views imported from: {} (the backbone: \
                 ImageNet, {})",
                features.views,
                ctx.library.display(),
                config.copies,
                config.whole_frames,
                features.whole_polyp,
                features.whole_background,
                features.rows.len() - polyp_rows,
                folders(&features.sources),
                backbone_path.display()
            ),
            epochs: config.epochs,
            wall: format!(
                "{:.0} s ({encode_seconds:.0} s encoding the crops) on {}",
                seconds + encode_seconds,
                crate::plumbing::machine()
            ),
            metrics: last,
        });
        let card = super::recipe::save_run_model(&mut store, run_id, &detector, &card, &out)?;
        Ok(Trained {
            card,
            seconds: seconds + encode_seconds,
            run_id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_names_the_folders_its_views_came_from() {
        assert_eq!(source_folder("phantom:S11-E001-P1/view1"), "phantom");
        assert_eq!(
            source_folder("/data/kvasir-seg-700/images/a.jpg"),
            "/data/kvasir-seg-700/images"
        );
        assert_eq!(source_folder(""), "");
        let sources: std::collections::BTreeSet<String> = (0..10)
            .map(|i| format!("/d/{i}"))
            .chain([String::new()])
            .collect();
        assert!(
            folders(&sources).ends_with("and 2 more"),
            "{}",
            folders(&sources)
        );
        assert_eq!(folders(&Default::default()), "no folder recorded");
    }
}
