//! `endotwin train twin-backbone`: the digital-twin image encoder on an ImageNet-pretrained
//! MobileNetV2 ([`BackboneTwin`]). The backbone is frozen (its BatchNorm folded, so its
//! statistics never move at small batches) and a projection of its pooled tapped layers is
//! learned from the library's polyps: every view of a polyp, and mildly augmented copies of
//! each view (SSCD style: geometry changes freely, colour only a little, since a polyp's
//! colour is part of what identifies it), are positives; every other polyp is a negative.
//! Multi-view polyps (CVC-ClinicDB sequences, the phantom's views) teach viewpoint; single
//! frames (Kvasir-SEG) teach what changes between two photographs of one polyp.
//!
//! The frozen backbone runs once per copy before training ("encoding ..."), so an epoch costs
//! only the projection's steps.

use super::augment::Augment;
use super::fit::{At, Plan, StepLoss, Steps, fit};
use super::losses::{contrastive, entropy};
use super::recipe::{
    OptionKind, Recipe, RecipeContext, RecipeError, RecipeOption, Recorded, Settings, Trained,
    checkpoint_dir, recorded, resume_from,
};
use super::{Checkpoint, TrainError, TrainEvents};
use crate::model::block::l2_normalize;
use crate::model::mobilenet::{MobileNetV2Config, load_mobilenet_v2};
use crate::model::preprocess::{TwinInput, imagenet_tensor};
use crate::model::twin_encoder::{BackboneTwin, BackboneTwinConfig};
use crate::model::weights::{ModelCard, ModelKind, Training};
use crate::plumbing::Rng;
use crate::store::{OpenMode, Store};
use burn::config::Config;
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor, TensorData};

#[derive(Config, Debug)]
pub struct TwinBackboneTrainingConfig {
    /// The encoder (its projection width set).
    pub twin: BackboneTwinConfig,
    /// The crop around the polyp: its mask box enlarged this many times.
    #[config(default = 2.5)]
    pub context: f32,
    /// Quarter turns each crop is encoded at when indexing and querying (1: the
    /// off-the-shelf features lost 0.04 uAP on the validation sequences with 4).
    #[config(default = 1)]
    pub turns: u32,
    /// Augmented copies of each view encoded before training.
    #[config(default = 4)]
    pub copies: usize,
    /// Largest brightness/contrast/saturation change of a copy (fraction).
    #[config(default = 0.1)]
    pub jitter: f32,
    #[config(default = 30)]
    pub epochs: usize,
    /// Polyps per step (two rows each).
    #[config(default = 64)]
    pub batch: usize,
    #[config(default = 1e-3)]
    pub lr: f64,
    #[config(default = 0.05)]
    pub tau: f64,
    /// Weight of the entropy regulariser (KoLeo).
    #[config(default = 0.5)]
    pub entropy: f64,
    #[config(default = 1e-4)]
    pub weight_decay: f64,
    #[config(default = 17)]
    pub seed: u64,
}

impl TwinBackboneTrainingConfig {
    pub fn input(&self) -> TwinInput {
        TwinInput {
            context: self.context,
            turns: self.turns,
            ..TwinInput::new(self.twin.image_size as u32)
        }
    }

    /// The augmentation of the copies: free geometry, mild photometry, never grey.
    pub fn augment(&self) -> Augment {
        mild_colour(self.twin.image_size as u32, self.jitter)
    }

    /// The projection to learn.
    pub fn projection(&self, device: &Device) -> Linear {
        LinearConfig::new(
            self.twin.backbone.pooled_dim(),
            self.twin.projection.unwrap_or(256),
        )
        .init(device)
    }
}

/// SSCD's geometry (resized crops, flips, quarter turns, blur, JPEG) with colour kept: at
/// most `jitter` of brightness, contrast and saturation, never grey-scale.
pub fn mild_colour(size: u32, jitter: f32) -> Augment {
    Augment {
        size,
        crop_scale: (0.4, 1.0),
        flip: 0.5,
        rotate: 0.5,
        jitter,
        grey: 0.0,
        blur: 0.3,
        jpeg: 0.3,
    }
}

/// The frozen backbone's balanced pooled features of every copy: `rows[i]` is one copy of
/// view `view_of[i]` of polyp `polyp_of[i]` (a dense index).
pub struct Features {
    pub rows: Vec<Vec<f32>>,
    pub polyp_of: Vec<usize>,
    pub view_of: Vec<usize>,
    /// Per polyp: per view, its rows.
    pub by_polyp: Vec<Vec<Vec<usize>>>,
}

/// Encodes `copies` augmented copies of each sample (cut crops) with the frozen `twin`.
pub fn encode_copies(
    twin: &BackboneTwin,
    samples: &[super::data::Sample],
    polyps: &[i64],
    config: &TwinBackboneTrainingConfig,
    device: &Device,
    mut progress: impl FnMut(usize, usize),
) -> Features {
    let mut rng = Rng::new(config.seed).fork(0xc0_91e5);
    let augment = config.augment();
    let mut ids: Vec<i64> = polyps.to_vec();
    ids.sort();
    ids.dedup();
    let dense = |p: i64| ids.binary_search(&p).expect("known polyp");
    let mut by_polyp: Vec<Vec<Vec<usize>>> = vec![Vec::new(); ids.len()];
    let mut jobs = Vec::new();
    for (i, s) in samples.iter().enumerate() {
        let p = dense(polyps[i]);
        let view = by_polyp[p].len();
        by_polyp[p].push(Vec::new());
        for c in 0..config.copies.max(1) {
            // The first copy is the crop itself.
            let image = if c == 0 {
                s.image.clone()
            } else {
                augment.apply(&s.image, None, &mut rng).0
            };
            jobs.push((p, view, image));
        }
    }
    let mut rows = Vec::with_capacity(jobs.len());
    let (mut polyp_of, mut view_of) = (Vec::new(), Vec::new());
    let total = jobs.len();
    for chunk in jobs.chunks(16) {
        let images: Vec<_> = chunk.iter().map(|(_, _, im)| im.clone()).collect();
        let f = twin.features(imagenet_tensor(&images, device));
        let [_, dim] = f.dims();
        let values = f.into_data().try_to_vec::<f32>().expect("f32 features");
        for ((p, v, _), row) in chunk.iter().zip(values.chunks_exact(dim)) {
            by_polyp[*p][*v].push(rows.len());
            rows.push(row.to_vec());
            polyp_of.push(*p);
            view_of.push(*v);
        }
        progress(rows.len(), total);
    }
    Features {
        rows,
        polyp_of,
        view_of,
        by_polyp,
    }
}

struct ProjectionSteps<'a> {
    config: &'a TwinBackboneTrainingConfig,
    features: &'a Features,
    device: &'a Device,
    batch: usize,
    order: Vec<usize>,
}

impl Steps<Linear> for ProjectionSteps<'_> {
    fn begin_epoch(&mut self, _epoch: usize, rng: &mut Rng) {
        self.order = (0..self.features.by_polyp.len()).collect();
        rng.shuffle(&mut self.order);
    }

    fn step(&mut self, model: &Linear, at: At, rng: &mut Rng) -> StepLoss {
        let f = self.features;
        let picked = &self.order[at.step * self.batch..(at.step + 1) * self.batch];
        let mut flat = Vec::new();
        let mut groups = Vec::new();
        for (slot, &p) in picked.iter().enumerate() {
            let views = &f.by_polyp[p];
            // Two different views when the polyp has them, else two copies of its one view.
            let (va, vb) = if views.len() >= 2 {
                let a = rng.below(views.len());
                let b = (a + 1 + rng.below(views.len() - 1)) % views.len();
                (a, b)
            } else {
                (0, 0)
            };
            let a = views[va][rng.below(views[va].len())];
            let mut b = views[vb][rng.below(views[vb].len())];
            if va == vb && views[va].len() > 1 {
                while b == a {
                    b = views[vb][rng.below(views[vb].len())];
                }
            }
            for row in [a, b] {
                flat.extend_from_slice(&f.rows[row]);
                groups.push(slot);
            }
        }
        let dim = f.rows[0].len();
        let x = Tensor::<2>::from_data(TensorData::new(flat, [groups.len(), dim]), self.device);
        let z = l2_normalize(model.forward(x));
        let c = contrastive(z.clone(), &groups, self.config.tau);
        let e = entropy(z, &groups);
        let loss = c.clone() + e.clone() * self.config.entropy;
        StepLoss::new(loss)
            .term("contrastive", c)
            .term("entropy", e)
    }
}

/// Trains the projection over `features` (the `device` must have autodiff).
pub fn train(
    config: &TwinBackboneTrainingConfig,
    features: &Features,
    device: &Device,
    start: Option<Checkpoint<Linear>>,
    events: &mut dyn TrainEvents<Linear>,
) -> Result<Linear, TrainError> {
    let polyps = features.by_polyp.len();
    if polyps < 4 {
        return Err(TrainError::NotEnoughData(format!(
            "the projection learns from at least 4 polyps, the library has {polyps}"
        )));
    }
    let batch = config.batch.clamp(2, polyps);
    let start = Checkpoint::resume_or_fresh(start, device, config.seed, config.weight_decay, |d| {
        config.projection(d)
    });
    let plan = Plan {
        epochs: config.epochs,
        steps_per_epoch: polyps / batch,
        lr: config.lr,
        seed: config.seed,
    };
    let mut steps = ProjectionSteps {
        config,
        features,
        device,
        batch,
        order: Vec::new(),
    };
    fit(&plan, start, &mut steps, events)
}

/// The `backbone` option of the recipes on the ImageNet backbone.
pub fn backbone_option() -> RecipeOption {
    RecipeOption::new(
        "backbone",
        OptionKind::Path,
        None,
        "torchvision's ImageNet MobileNetV2 feature layers as safetensors \
         (mobilenetv2_imagenet_features.safetensors)",
    )
}

/// The `--backbone` path, which these recipes require.
pub fn backbone_path(
    settings: &Settings,
    options: &[RecipeOption],
) -> Result<std::path::PathBuf, RecipeError> {
    settings.path(options, "backbone").ok_or_else(|| {
        RecipeError::Setting(
            "--backbone is required: torchvision's ImageNet MobileNetV2 feature layers as \
             safetensors (mobilenetv2_imagenet_features.safetensors)"
                .into(),
        )
    })
}

/// The backbone of `twin` loaded from `path`, frozen and without a projection.
pub fn frozen_backbone(
    path: &std::path::Path,
    twin: &BackboneTwinConfig,
    device: &Device,
) -> Result<BackboneTwin, RecipeError> {
    let backbone = load_mobilenet_v2(path, &twin.backbone, device)
        .map_err(|e| RecipeError::Setting(format!("--backbone: {e}")))?;
    Ok(BackboneTwin {
        backbone,
        projection: None,
        taps: twin.backbone.taps.len(),
    })
}

/// `endotwin train twin-backbone`.
pub struct TwinBackboneRecipe;

impl Recipe for TwinBackboneRecipe {
    fn name(&self) -> &'static str {
        "twin-backbone"
    }

    fn description(&self) -> &'static str {
        "The twin image encoder on ImageNet's MobileNetV2 (frozen): a projection of its pooled \
         layers learned from the library's polyp views and their mildly augmented copies"
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
            RecipeOption::new("name", Text, Some("twin-image"), "Name of the model"),
            RecipeOption::new("epochs", Count, Some("25"), "Passes over the polyps"),
            RecipeOption::new(
                "batch",
                Count,
                Some("64"),
                "Polyps per step (two rows each)",
            ),
            RecipeOption::new("lr", Number, Some("3e-4"), "Peak learning rate"),
            RecipeOption::new("seed", Count, Some("17"), "Seed of every random draw"),
            RecipeOption::new("dim", Count, Some("256"), "Embedding width"),
            RecipeOption::new(
                "copies",
                Count,
                Some("4"),
                "Copies of each view encoded (the first is the crop itself)",
            ),
            RecipeOption::new(
                "jitter",
                Number,
                Some("0.1"),
                "Largest brightness/contrast/saturation change of a copy",
            ),
            RecipeOption::new("tau", Number, Some("0.05"), "Contrastive temperature"),
            RecipeOption::new("entropy", Number, Some("1"), "Weight of the entropy term"),
            RecipeOption::new(
                "context",
                Number,
                Some("2.5"),
                "Crop: the mask box enlarged",
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
        // A projection step holds two rows a polyp (features, embedding, and their gradients);
        // the frozen encoding runs 16 crops at a time outside the steps.
        let dim = settings.count(&o, "dim")?.max(1);
        super::memory::check(
            "twin-backbone",
            "batch",
            // Polyps a step, two rows each: counted per polyp, so the refusal names the
            // --batch given and advises one that passes (round 10 N2).
            settings.count(&o, "batch")?.max(1),
            2.0 * (MobileNetV2Config::new().pooled_dim() + 2 * dim) as f64,
            super::memory::budget(settings, &o, ctx.memory)?,
        )?;
        let backbone_path = backbone_path(settings, &o)?;
        let context = settings.number(&o, "context")? as f32;
        if !TwinInput::valid_context(context) {
            return Err(RecipeError::Setting(format!(
                "--context {context} is not a positive number between 0.5 and 16 (times the polyp box)"
            )));
        }
        let twin = BackboneTwinConfig::new(MobileNetV2Config::new()).with_projection(Some(dim));
        let config = TwinBackboneTrainingConfig::new(twin)
            .with_context(context)
            .with_copies(settings.count(&o, "copies")?.max(1))
            .with_jitter(settings.number(&o, "jitter")? as f32)
            .with_epochs(settings.count(&o, "epochs")?)
            .with_batch(settings.count(&o, "batch")?)
            .with_lr(settings.number(&o, "lr")?)
            .with_tau(settings.number(&o, "tau")?)
            .with_entropy(settings.number(&o, "entropy")?)
            .with_seed(seed);
        let plain = ctx.device.clone();
        let mut frozen = frozen_backbone(&backbone_path, &config.twin, &plain)?;
        let mut store = Store::open(&ctx.library, OpenMode::Existing)?;
        // Everything that can refuse the run is asked before the minutes of encoding: the
        // library's integrity (its run row is written at the end of them) and the checkpoint
        // a resume starts from (hostile round 6, N30 and N66).
        if let Some(problem) = store.integrity_problems(None)?.first() {
            return Err(crate::store::StoreError::Damaged {
                path: store.db_path().to_path_buf(),
                problem: problem.clone(),
            }
            .into());
        }
        let device = ctx.device.clone().autodiff();
        let checkpoints = checkpoint_dir(&out, &name)?;
        let start = resume_from(
            super::recipe::Start::of(settings, &o)?,
            &checkpoints,
            &config,
            config.projection(&device),
            config.weight_decay,
            &mut *ctx.observer,
        )?;
        let (samples, polyps) = super::data::polyp_view_samples(&store, &config.input())?;
        ctx.observer.message(&format!(
            "{} polyp views from {}; encoding {} copies of each with the frozen backbone",
            samples.len(),
            ctx.library.display(),
            config.copies
        ));
        let started = std::time::Instant::now();
        let features = {
            let observer = &mut *ctx.observer;
            let mut said = 0;
            encode_copies(
                &frozen,
                &samples,
                &polyps,
                &config,
                &plain,
                |done, total| {
                    if done * 10 / total.max(1) > said {
                        said = done * 10 / total.max(1);
                        observer.message(&format!("encoded {done} of {total} copies"));
                    }
                },
            )
        };
        let encode_seconds = started.elapsed().as_secs_f64();
        let distinct = features.by_polyp.len();
        let Recorded {
            model,
            run_id,
            last,
            seconds,
        } = recorded(
            &mut store,
            "twin-backbone",
            &config,
            config.epochs,
            checkpoints,
            &mut *ctx.observer,
            |events| train(&config, &features, &device, start, events),
        )?;
        frozen.projection = Some(model.valid());
        let mut card = ModelCard::new(
            &name,
            ModelKind::ImageEncoder,
            &super::recipe::version_of(run_id),
            "Twin image encoder on torchvision's ImageNet MobileNetV2 (frozen, BatchNorm \
             folded): layers 6, 10, 13, 16 and 18 pooled over the crop, each scaled to unit \
             length / sqrt(5), then a learned linear projection. Input: the polyp crop, RGB, \
             ImageNet-normalised. Output: L2-normalise it; its signs are the binary code.",
            &config.twin,
        );
        card.input = Some(config.input());
        card.training = Some(Training {
            command: ctx.command_line.clone(),
            seed,
            data: format!(
                "{} polyp views of {distinct} polyps in {} x {} copies (the backbone: ImageNet, \
                 {})",
                samples.len(),
                ctx.library.display(),
                config.copies,
                backbone_path.display()
            ),
            epochs: config.epochs,
            wall: format!(
                "{:.0} s ({encode_seconds:.0} s encoding the copies) on {}",
                seconds + encode_seconds,
                crate::plumbing::machine()
            ),
            metrics: last,
        });
        let card = super::recipe::save_run_model(&mut store, run_id, &frozen, &card, &out)?;
        Ok(Trained {
            card,
            seconds: seconds + encode_seconds,
            run_id,
        })
    }
}
