//! `train scene-encoder` (METHODS §4): with the image encoder frozen, each view of a polyp in
//! turn is the target and the other views form its scene. The scenes of one polyp are
//! positives of each other (scene-level contrastive + entropy), and the target view is
//! reconstructed from its visible patches by cross-attention to its scene embedding.
//!
//! The frozen encoder's outputs for a few augmented copies of every view are computed once
//! up front ([`ViewFeatures`]); training then touches only the small scene model.

use super::augment::{Augment, polyp_aware_mask, polyp_patches};
use super::fit::{At, Plan, StepLoss, Steps, fit};
use super::image_encoder::{Sample, to_tensor};
use super::losses::{contrastive, entropy};
use super::recipe::{
    OptionKind, Recipe, RecipeContext, RecipeError, RecipeOption, Recorded, Settings, Trained,
    checkpoint_dir, recorded, resume_from,
};
use super::{Checkpoint, TrainError, TrainEvents};
use crate::model::preprocess::TwinInput;
use crate::model::reconstruction::{
    ReconstructionDecoder, ReconstructionDecoderConfig, masked_mse, patchify,
};
use crate::model::scene::{SceneEncoder, SceneEncoderConfig};
use crate::model::vit::{Vit, VitConfig};
use crate::model::weights::{self, ModelCard, ModelKind, Training};
use crate::plumbing::Rng;
use crate::store::{OpenMode, Store};
use burn::config::Config;
use burn::module::Module;
use burn::tensor::{Bool, Device, Int, Tensor, TensorData};

#[derive(Config, Debug)]
pub struct SceneEncoderTrainingConfig {
    pub scene: SceneEncoderConfig,
    /// The frozen image encoder's geometry (for the reconstruction decoder).
    pub image: VitConfig,
    #[config(default = 30)]
    pub epochs: usize,
    /// Polyps per step.
    #[config(default = 32)]
    pub batch: usize,
    #[config(default = 1e-3)]
    pub lr: f64,
    #[config(default = 0.05)]
    pub weight_decay: f64,
    #[config(default = 0.05)]
    pub tau: f64,
    #[config(default = 5.0)]
    pub entropy_weight: f64,
    #[config(default = 0.5)]
    pub gamma: f64,
    #[config(default = 0.5)]
    pub mask_ratio: f32,
    /// Augmented copies of each view encoded up front.
    #[config(default = 4)]
    pub copies: usize,
    /// Views per polyp used for training (each in turn the target).
    #[config(default = 4)]
    pub views: usize,
    #[config(default = 128)]
    pub decoder_width: usize,
    #[config(default = 13)]
    pub seed: u64,
    /// Train on what retrieval scores: per polyp, two disjoint random subsets of 1-2 views
    /// (a query and a reference scene) are positives. Off: the paper's leave-one-out scenes
    /// (each view in turn is the target, the others the scene).
    #[config(default = true)]
    pub subsets: bool,
    /// Quarter turns each copy is encoded at, as the frozen encoder's card says (its
    /// `input.turns`): the scene encoder learns over the embeddings it will combine.
    #[config(default = 1)]
    pub turns: u32,
}

impl SceneEncoderTrainingConfig {
    pub fn decoder(&self) -> ReconstructionDecoderConfig {
        let e = &self.image;
        ReconstructionDecoderConfig::new(
            e.width,
            self.scene.dim,
            e.image_size / e.patch_size,
            e.patch_size,
        )
        .with_width(self.decoder_width)
    }

    /// Values one polyp's step makes ([`super::memory`]): its scenes (two view subsets, or
    /// one per view) through the scene encoder, each reconstructing a view with the decoder.
    pub fn step_values(&self) -> f64 {
        use super::memory::transformer;
        let e = &self.image;
        let scenes = if self.subsets { 2 } else { self.views.max(2) };
        let d = self.decoder();
        let scene = transformer(self.views.max(2), self.scene.dim, 1, self.scene.heads, 4.0)
            + transformer(e.patches() + 1, d.width, d.depth, d.heads, 4.0);
        scenes as f64 * scene
    }

    pub fn init(&self, device: &Device) -> SceneTrainingModel {
        SceneTrainingModel {
            scene: self.scene.init(device),
            decoder: self.decoder().init(device),
        }
    }
}

#[derive(Module, Debug)]
pub struct SceneTrainingModel {
    pub scene: SceneEncoder,
    pub decoder: ReconstructionDecoder,
}

/// The frozen encoder's view of one augmented copy of a view.
struct Copy {
    embedding: Vec<f32>,
    /// Visible tokens, [1 + visible, width] flattened.
    tokens: Vec<f32>,
    keep: Vec<i64>,
    hidden: Vec<f32>,
    /// Patch pixels, [patches, 3 p²] flattened.
    target: Vec<f32>,
}

/// Every polyp's views, each as `copies` augmented encodings.
pub struct ViewFeatures {
    polyps: Vec<Vec<Vec<Copy>>>,
    dim: usize,
    width: usize,
    visible: usize,
    patches: usize,
    pixels: usize,
}

impl ViewFeatures {
    /// `samples` grouped by `polyp_of` (consecutive equal ids are one polyp); polyps with
    /// fewer than 2 views are left out (no scene without another view).
    pub fn compute(
        encoder: &Vit,
        image: &VitConfig,
        samples: &[Sample],
        polyp_of: &[i64],
        config: &SceneEncoderTrainingConfig,
        device: &Device,
    ) -> ViewFeatures {
        let augment = Augment::sscd(image.image_size as u32);
        let mut rng = Rng::new(config.seed).fork(0xfeed);
        let patch = image.patch_size;
        let patches = image.patches();
        let mut polyps: Vec<Vec<Vec<Copy>>> = Vec::new();
        let mut start = 0;
        let (mut width, mut visible, mut dim) = (image.width, 0, image.output_dim());
        while start < samples.len() {
            let mut end = start;
            while end < samples.len() && polyp_of[end] == polyp_of[start] {
                end += 1;
            }
            let views = &samples[start..(end).min(start + config.views)];
            start = end;
            if views.len() < 2 {
                continue;
            }
            let mut per_view = Vec::new();
            for s in views {
                let mut images = Vec::new();
                let mut keeps = Vec::new();
                let mut hiddens = Vec::new();
                for c in 0..config.copies {
                    // Copy 0 is the plain view; the others are augmented.
                    let (img, mask) = if c == 0 {
                        let img = image::imageops::resize(
                            &s.image,
                            image.image_size as u32,
                            image.image_size as u32,
                            image::imageops::FilterType::Triangle,
                        );
                        let mask = s.mask.as_ref().map(|m| {
                            image::imageops::resize(
                                m,
                                image.image_size as u32,
                                image.image_size as u32,
                                image::imageops::FilterType::Nearest,
                            )
                        });
                        (img, mask)
                    } else {
                        augment.apply(&s.image, s.mask.as_ref(), &mut rng)
                    };
                    let polyp = match &mask {
                        Some(m) => polyp_patches(m, patch as u32, 0.25),
                        None => vec![false; patches],
                    };
                    let (k, h) = polyp_aware_mask(&polyp, config.mask_ratio, &mut rng);
                    keeps.extend(k.into_iter().map(|i| i as i64));
                    hiddens.push(h.into_iter().map(|h| h as u8 as f32).collect::<Vec<_>>());
                    images.push(img);
                }
                let n = images.len();
                let x = to_tensor(&images, device);
                visible = keeps.len() / n;
                let keep = Tensor::<2, Int>::from_data(
                    TensorData::new(keeps.clone(), [n, visible]),
                    device,
                );
                let emb = encoder.forward_turned(x.clone(), config.turns);
                dim = emb.dims()[1];
                let tokens = encoder.forward_visible(x.clone(), keep);
                width = tokens.dims()[2];
                let target = patchify(x, patch);
                let emb = emb.into_data().try_to_vec::<f32>().expect("f32");
                let tokens = tokens.into_data().try_to_vec::<f32>().expect("f32");
                let target = target.into_data().try_to_vec::<f32>().expect("f32");
                let pixels = target.len() / (n * patches);
                let copies = (0..n)
                    .map(|c| Copy {
                        embedding: emb[c * dim..(c + 1) * dim].to_vec(),
                        tokens: tokens[c * (1 + visible) * width..(c + 1) * (1 + visible) * width]
                            .to_vec(),
                        keep: keeps[c * visible..(c + 1) * visible].to_vec(),
                        hidden: hiddens[c].clone(),
                        target: target[c * patches * pixels..(c + 1) * patches * pixels].to_vec(),
                    })
                    .collect();
                per_view.push(copies);
            }
            polyps.push(per_view);
        }
        let pixels = 3 * patch * patch;
        ViewFeatures {
            polyps,
            dim,
            width,
            visible,
            patches,
            pixels,
        }
    }

    pub fn polyps(&self) -> usize {
        self.polyps.len()
    }
}

pub fn train(
    config: &SceneEncoderTrainingConfig,
    features: &ViewFeatures,
    device: &Device,
    start: Option<Checkpoint<SceneTrainingModel>>,
    events: &mut dyn TrainEvents<SceneTrainingModel>,
) -> Result<SceneTrainingModel, TrainError> {
    if features.polyps() < 2 {
        return Err(TrainError::NotEnoughData(format!(
            "scene training needs at least 2 polyps with 2 or more views, the library has {}",
            features.polyps()
        )));
    }
    let batch = config.batch.clamp(2, features.polyps());
    let start = Checkpoint::resume_or_fresh(start, device, config.seed, config.weight_decay, |d| {
        config.init(d)
    });
    let max_views = features.polyps.iter().map(|p| p.len()).max().unwrap_or(2);
    let plan = Plan {
        epochs: config.epochs,
        steps_per_epoch: features.polyps() / batch,
        lr: config.lr,
        seed: config.seed,
    };
    let mut steps = SceneSteps {
        config,
        features,
        device,
        batch,
        slots: max_views - 1,
        order: Vec::new(),
    };
    fit(&plan, start, &mut steps, events)
}

/// One step of the scene encoder: scenes of view subsets of a batch of polyps, contrasted by
/// polyp, each reconstructing a view it does not contain.
struct SceneSteps<'a> {
    config: &'a SceneEncoderTrainingConfig,
    features: &'a ViewFeatures,
    device: &'a Device,
    batch: usize,
    /// Views a scene can hold (the most views of a polyp, less the target).
    slots: usize,
    /// This epoch's polyp order.
    order: Vec<usize>,
}

impl Steps<SceneTrainingModel> for SceneSteps<'_> {
    fn begin_epoch(&mut self, _epoch: usize, rng: &mut Rng) {
        self.order = (0..self.features.polyps()).collect();
        super::augment::shuffle(&mut self.order, rng);
    }

    fn step(&mut self, model: &SceneTrainingModel, at: At, rng: &mut Rng) -> StepLoss {
        let (config, features, device, batch) =
            (self.config, self.features, self.device, self.batch);
        let (d, w, v, n_p, px) = (
            features.dim,
            features.width,
            features.visible,
            features.patches,
            features.pixels,
        );
        let slots = self.slots;
        // One scene per (polyp, target view): the other views, padded to `slots`.
        let (mut scene_in, mut missing, mut groups) = (Vec::new(), Vec::new(), Vec::new());
        let (mut tokens, mut keep, mut hidden, mut target) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (g, &p) in self.order[at.step * batch..(at.step + 1) * batch]
            .iter()
            .enumerate()
        {
            let views = &features.polyps[p];
            let pick: Vec<&Copy> = views
                .iter()
                .map(|copies| &copies[rng.below(copies.len())])
                .collect();
            // (scene views, target view) pairs of this polyp.
            let mut scenes_of: Vec<(Vec<usize>, usize)> = Vec::new();
            if config.subsets {
                let mut ids: Vec<usize> = (0..views.len()).collect();
                super::augment::shuffle(&mut ids, rng);
                let q = if views.len() >= 3 {
                    1 + rng.below(2)
                } else {
                    1
                };
                let r = (1 + rng.below(2)).min(views.len() - q);
                let (query, rest) = ids.split_at(q);
                let reference = &rest[..r];
                // Each scene reconstructs a view of the other (one it does not contain).
                scenes_of.push((query.to_vec(), reference[0]));
                scenes_of.push((reference.to_vec(), query[0]));
            } else {
                for t in 0..views.len() {
                    scenes_of.push(((0..views.len()).filter(|&i| i != t).collect(), t));
                }
            }
            for (members, t) in scenes_of {
                for &i in &members {
                    scene_in.extend_from_slice(&pick[i].embedding);
                    missing.push(false);
                }
                let pad = slots - members.len();
                scene_in.extend(std::iter::repeat_n(0.0, d * pad));
                missing.extend(std::iter::repeat_n(true, pad));
                groups.push(g);
                tokens.extend_from_slice(&pick[t].tokens);
                keep.extend_from_slice(&pick[t].keep);
                hidden.extend_from_slice(&pick[t].hidden);
                target.extend_from_slice(&pick[t].target);
            }
        }
        let n = groups.len();
        let scene_in = Tensor::<3>::from_data(TensorData::new(scene_in, [n, slots, d]), device);
        let missing = Tensor::<2, Bool>::from_data(TensorData::new(missing, [n, slots]), device);
        let tokens = Tensor::<3>::from_data(TensorData::new(tokens, [n, 1 + v, w]), device);
        let keep = Tensor::<2, Int>::from_data(TensorData::new(keep, [n, v]), device);
        let hidden = Tensor::<2>::from_data(TensorData::new(hidden, [n, n_p]), device);
        let target = Tensor::<3>::from_data(TensorData::new(target, [n, n_p, px]), device);

        let scenes = model.scene.forward(scene_in, Some(missing)); // [n, d], unit
        let l_con = contrastive(scenes.clone(), &groups, config.tau);
        let l_ent = entropy(scenes.clone(), &groups) * config.entropy_weight;
        let predicted = model.decoder.forward(tokens, keep, Some(scenes));
        let l_rec = masked_mse(predicted, target, hidden) * config.gamma;
        let loss = l_con.clone() + l_ent.clone() + l_rec.clone();
        StepLoss::new(loss)
            .term("contrastive", l_con)
            .term("entropy", l_ent)
            .term("reconstruction", l_rec)
    }
}

/// `endotwin train scene-encoder`.
pub struct SceneEncoderRecipe;

impl Recipe for SceneEncoderRecipe {
    fn name(&self) -> &'static str {
        "scene-encoder"
    }

    fn description(&self) -> &'static str {
        "The scene encoder on the library's multi-view polyps, with the image encoder in --models frozen"
    }

    fn options(&self) -> Vec<RecipeOption> {
        use OptionKind::*;
        vec![
            RecipeOption::new(
                "models",
                Path,
                None,
                "Folder of the frozen image encoder, where the scene encoder goes too \
                 (default: the shipped models folder)",
            ),
            RecipeOption::new(
                "out",
                Path,
                None,
                "Where the scene encoder and its checkpoints go (default: --models)",
            ),
            RecipeOption::new(
                "image-model",
                Text,
                Some("twin-image"),
                "Name of the frozen image encoder's card in --models",
            ),
            RecipeOption::new("name", Text, Some("twin-scene"), "Name of the model"),
            RecipeOption::new("epochs", Count, Some("30"), "Passes over the data"),
            RecipeOption::new("batch", Count, Some("32"), "Polyps per step"),
            RecipeOption::new("seed", Count, Some("13"), "Seed of every random draw"),
            RecipeOption::new("lr", Number, Some("1e-4"), "Peak learning rate"),
            RecipeOption::new(
                "paper",
                Flag,
                None,
                "The paper-faithful variant: the [Scene] token output (no residual on the \
                 mean) and leave-one-out scenes",
            ),
            RecipeOption::new(
                "resume",
                Flag,
                None,
                "Continue from the last checkpoint in `<models>/<name>.checkpoints/`",
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
        let models = settings
            .path(&o, "models")
            .unwrap_or_else(|| ctx.models.clone());
        let out = settings.path(&o, "out").unwrap_or_else(|| models.clone());
        let plain = ctx.device.clone();
        let image_path = models.join(format!("{}.json", settings.text(&o, "image-model")?));
        if let Ok(card) = weights::read_card(&image_path)
            && matches!(
                card.config::<crate::model::twin_encoder::TwinEncoderConfig>(&image_path),
                Ok(crate::model::twin_encoder::TwinEncoderConfig::Backbone(_))
            )
        {
            return Err(RecipeError::Setting(format!(
                "{}: a backbone image encoder; the scene encoder trains over a ViT image encoder \
                 (its reconstruction reads the ViT's patches): pass --image-model \
                 tracklet-frames, or a ViT card",
                image_path.display()
            )));
        }
        let (encoder, image_card) =
            weights::load(&image_path, ModelKind::ImageEncoder, |c: &VitConfig| {
                c.init(&plain)
            })
            .map_err(|e| {
                RecipeError::Setting(format!(
                    "the scene encoder trains on a frozen image encoder: train that first: {e}"
                ))
            })?;
        let image: VitConfig = image_card.config(&image_path)?;
        let paper = settings.flag(&o, "paper");
        let config = SceneEncoderTrainingConfig::new(
            SceneEncoderConfig::new(image.output_dim()).with_residual(!paper),
            image.clone(),
        )
        .with_subsets(!paper)
        .with_lr(settings.number(&o, "lr")?)
        .with_epochs(settings.count(&o, "epochs")?)
        .with_batch(settings.count(&o, "batch")?)
        .with_seed(seed);
        let mut store = Store::open(&ctx.library, OpenMode::Existing)?;
        let input = image_card
            .input
            .unwrap_or_else(|| TwinInput::whole_frame(image.image_size as u32));
        let config = config.with_turns(input.turns);
        let (samples, polyps) = super::data::polyp_view_samples(&store, &input)?;
        let distinct = polyps
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        super::memory::check(
            "scene-encoder",
            "batch",
            config.batch.min(distinct).max(2),
            config.step_values(),
            super::memory::budget(settings, &o, ctx.memory)?,
        )?;
        ctx.observer.message(&format!(
            "encoding {} views x {} copies with the frozen image encoder ({})...",
            samples.len(),
            config.copies,
            image_card.version
        ));
        let features = ViewFeatures::compute(&encoder, &image, &samples, &polyps, &config, &plain);
        ctx.observer.message(&format!(
            "{} polyps with 2 or more views",
            features.polyps()
        ));
        let device = ctx.device.clone().autodiff();
        let checkpoints = checkpoint_dir(&out, &name)?;
        let start = resume_from(
            super::recipe::Start::of(settings, &o)?,
            &checkpoints,
            &config,
            config.init(&device),
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
            "scene-encoder",
            &config,
            config.epochs,
            checkpoints,
            &mut *ctx.observer,
            |events| train(&config, &features, &device, start, events),
        )?;
        let mut card = ModelCard::new(
            &name,
            ModelKind::SceneEncoder,
            &super::recipe::version_of(run_id),
            &format!(
                "Scene encoder (EndoFinder): fuses the unit view embeddings of {} {} into one unit \
                 polyp embedding; trained with scene contrastive + entropy + cross-attention \
                 reconstruction.",
                image_card.name, image_card.version
            ),
            &config.scene,
        );
        // The image encoder it combines the views of: another one's embeddings mean nothing.
        card.reads = Some(crate::model::weights::Reads {
            name: image_card.name.clone(),
            version: image_card.version.clone(),
            sha256: image_card.sha256.clone(),
        });
        card.training = Some(Training {
            command: ctx.command_line.clone(),
            seed,
            data: format!(
                "{} polyps ({} views) in {}",
                features.polyps(),
                samples.len(),
                ctx.library.display()
            ),
            epochs: config.epochs,
            wall: format!("{seconds:.0} s on {}", crate::plumbing::machine()),
            metrics: last,
        });
        let card =
            super::recipe::save_run_model(&mut store, run_id, &model.scene.valid(), &card, &out)?;
        Ok(Trained {
            card,
            seconds,
            run_id,
        })
    }
}
