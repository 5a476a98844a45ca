//! The `tracklets` recipe: `endotwin train tracklets` (and the training panel) read their
//! settings here, build the library's tracklet set, and run [`super::tracklets::train`], or,
//! with `--backbone twin`, train a tracklet head over the frozen twin encoder's features.

use super::recipe::{
    OptionKind, Recipe, RecipeContext, RecipeError, RecipeOption, Recorded, Settings, Trained,
    checkpoint_dir, recorded, resume_from,
};
use super::tracklets::{Levels, TrackletTrainingConfig, train, train_encoder};
use crate::model::tracklet::TrackletModelConfig;
use crate::model::weights::{ModelCard, ModelKind, Training};
use crate::plumbing::Progress;
use crate::store::{OpenMode, Store};
use crate::tracklets::bags::{Curriculum, RankSampling, T_MAX, T_MIN};
use crate::tracklets::dataset::TrackletSet;
use burn::module::Module;

/// `endotwin train tracklets`.
pub struct TrackletRecipe;

impl Recipe for TrackletRecipe {
    fn name(&self) -> &'static str {
        "tracklets"
    }

    fn description(&self) -> &'static str {
        "The tracklet encoder on the library's video tracklets, supervised by time alone \
         (noise-aware loss over temporal bags)"
    }

    fn options(&self) -> Vec<RecipeOption> {
        use OptionKind::*;
        vec![
            RecipeOption::new(
                "out",
                Path,
                None,
                "Models folder (default: the shipped one)",
            ),
            RecipeOption::new("name", Text, Some("tracklets"), "Name of the model"),
            RecipeOption::new(
                "epochs",
                Count,
                Some("20"),
                "Passes over the anchor fragments",
            ),
            RecipeOption::new(
                "anchors",
                Count,
                Some("12"),
                "Anchors per step (each with a bag of 4)",
            ),
            RecipeOption::new("size", Count, Some("64"), "Side of the frame crops, pixels"),
            RecipeOption::new("seed", Count, Some("17"), "Seed of every random draw"),
            RecipeOption::new("lr", Number, Some("3e-4"), "Peak learning rate"),
            RecipeOption::new(
                "uniform-ranks",
                Flag,
                None,
                "Ablation: draw bag ranks uniformly instead of P(r) ∝ exp(-r/T)",
            ),
            RecipeOption::new(
                "no-curriculum",
                Flag,
                None,
                "Ablation: one temperature, (T_min + T_max) / 2, throughout",
            ),
            RecipeOption::new(
                "anchors-per-video",
                Count,
                Some("1"),
                "Anchors of a step come from videos in runs of this many (1: at random)",
            ),
            RecipeOption::new(
                "clean-bags",
                Flag,
                None,
                "Leave out of bags the fragments of tracklets on screen in the same frame as \
                 the anchor's (another polyp for certain; beyond the paper)",
            ),
            RecipeOption::new(
                "co-visible-negatives",
                Count,
                Some("0"),
                "Up to this many fragments on screen with the anchor's tracklet join its \
                 loss as known negatives (0: none, the paper)",
            ),
            RecipeOption::new(
                "level",
                Text,
                Some("both"),
                "Where the loss applies: tracklet, frame or both",
            ),
            RecipeOption::new(
                "backbone",
                Text,
                Some("cnn"),
                "Per-frame backbone: cnn (trained with the rest, from random initialisation) or \
                 twin (the twin image encoder in --twin-models, frozen: only the temporal \
                 encoder trains, saved as a tracklet head)",
            ),
            RecipeOption::new(
                "residual",
                Flag,
                None,
                "With --backbone twin: the head is a residual on the mean of the frozen \
                 features, its output projection zero-initialised (it starts at the plain mean)",
            ),
            RecipeOption::new(
                "twin-models",
                Path,
                None,
                "Folder with the twin image encoder for --backbone twin (default: the models folder)",
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
        let levels = match settings.text(&o, "level")?.as_str() {
            "tracklet" => Levels::Tracklet,
            "frame" => Levels::Frame,
            "both" => Levels::Both,
            other => {
                return Err(RecipeError::Setting(format!(
                    "--level: `{other}` is not tracklet, frame or both"
                )));
            }
        };
        let size = settings.count(&o, "size")?;
        if !(16..=256).contains(&size) {
            return Err(RecipeError::Setting(format!(
                "--size {size}: crops of 16 to 256 px"
            )));
        }
        let config = TrackletTrainingConfig::new(TrackletModelConfig::with_image_size(size))
            .with_epochs(settings.count(&o, "epochs")?)
            .with_anchors(settings.count(&o, "anchors")?)
            .with_lr(settings.number(&o, "lr")?)
            .with_sampling(if settings.flag(&o, "uniform-ranks") {
                RankSampling::Uniform
            } else {
                RankSampling::Exponential
            })
            .with_curriculum(if settings.flag(&o, "no-curriculum") {
                Curriculum::Fixed((T_MIN + T_MAX) / 2.0)
            } else {
                Curriculum::Cosine
            })
            .with_levels(levels)
            .with_anchors_per_video(settings.count(&o, "anchors-per-video")?.max(1))
            .with_clean_bags(settings.flag(&o, "clean-bags"))
            .with_co_visible_negatives(settings.count(&o, "co-visible-negatives")?)
            .with_seed(seed);
        let mut store = Store::open(&ctx.library, OpenMode::Existing)?;
        ctx.observer
            .message("cropping the fragments of every tracklet...");
        let mut set = TrackletSet::load(&store, &[], size, &Progress::new())
            .map_err(|e| RecipeError::Setting(format!("tracklet data: {e}")))?;
        // Not enough data is said before anything is encoded or written.
        let usable = super::tracklets::usable_anchors(&config, &set)
            .map_err(|e| RecipeError::Setting(e.to_string()))?;
        super::memory::check(
            "tracklets",
            "anchors",
            config.anchors.max(2).min(usable.len()),
            config.step_values(settings.text(&o, "backbone")? == "cnn"),
            super::memory::budget(settings, &o, ctx.memory)?,
        )?;
        match settings.text(&o, "backbone")?.as_str() {
            "cnn" if settings.flag(&o, "residual") => {
                return Err(RecipeError::Setting(
                    "--residual needs --backbone twin (it adds a frozen backbone's features)"
                        .into(),
                ));
            }
            "cnn" => {}
            "twin" => {
                let dir = settings
                    .path(&o, "twin-models")
                    .unwrap_or_else(|| ctx.models.clone());
                let twins = crate::twins::TwinModels::load_frames(&dir, &ctx.device)
                    .map_err(|e| RecipeError::Setting(format!("--backbone twin: {e}")))?;
                ctx.observer
                    .message("encoding every fragment frame with the twin image encoder...");
                let (dim, features) = crate::tracklets::twin::fragment_features(
                    &store,
                    &set,
                    &twins,
                    &Progress::new(),
                )
                .map_err(|e| RecipeError::Setting(format!("twin features: {e}")))?;
                set.attach_features(dim, features);
                return train_head(
                    &config,
                    settings.flag(&o, "residual"),
                    &set,
                    &twins,
                    &name,
                    &out,
                    seed,
                    &mut store,
                    ctx,
                    super::recipe::Start::of(settings, &o)?,
                );
            }
            other => {
                return Err(RecipeError::Setting(format!(
                    "--backbone: `{other}` is not cnn or twin"
                )));
            }
        }
        ctx.observer.message(&format!(
            "{} tracklets, {} fragments in {} videos",
            set.tracklets.len(),
            set.fragments.len(),
            set.videos.len()
        ));
        let left_out = set.left_out();
        if !left_out.is_empty() {
            ctx.observer.message(&format!("left out: {left_out}"));
        }
        let device = ctx.device.clone().autodiff();
        let checkpoints = checkpoint_dir(&out, &name)?;
        let start = resume_from(
            super::recipe::Start::of(settings, &o)?,
            &checkpoints,
            &config,
            config.model.init(&device),
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
            "tracklets",
            &config,
            config.epochs,
            checkpoints,
            &mut *ctx.observer,
            |events| train(&config, &set, &device, start, events),
        )?;
        let mut card = ModelCard::new(
            &name,
            ModelKind::TrackletEncoder,
            &super::recipe::version_of(run_id),
            &format!(
                "Tracklet encoder (METHODS §3): a per-frame CNN on {size} px crops (5 box \
                 diagonals, on-screen display blacked out, 0.45 / 0.225) -> Linear 256 -> CLS + \
                 3 transformer layers; input 8 frames every 4th; output the 256-d CLS \
                 embedding (L2-normalise it). Trained from random initialisation with the \
                 noise-aware loss on temporal bags, no identity labels."
            ),
            &config.model,
        );
        card.training = Some(Training {
            command: ctx.command_line.clone(),
            seed,
            data: format!(
                "{} tracklets ({} fragments) in {} videos of {}",
                set.tracklets.len(),
                set.fragments.len(),
                set.videos.len(),
                ctx.library.display()
            ),
            epochs: config.epochs,
            wall: format!("{seconds:.0} s on {}", crate::plumbing::machine()),
            metrics: last,
        });
        let card = super::recipe::save_run_model(&mut store, run_id, &model.valid(), &card, &out)?;
        Ok(Trained {
            card,
            seconds,
            run_id,
        })
    }
}

/// `--backbone twin`: the temporal encoder alone over the frozen twin features attached to
/// `set`, saved as a tracklet head (`<name>.json`, kind tracklet-head) that names its twin
/// model.
#[allow(clippy::too_many_arguments)]
fn train_head(
    config: &TrackletTrainingConfig,
    residual: bool,
    set: &TrackletSet,
    twins: &crate::twins::TwinModels,
    name: &str,
    out: &std::path::Path,
    seed: u64,
    store: &mut Store,
    ctx: &mut RecipeContext<'_>,
    start: super::recipe::Start,
) -> Result<Trained, RecipeError> {
    let twin_version = twins.version();
    let dim = set.feature_dim().expect("features attached");
    let head = crate::model::tracklet::TrackletEncoderConfig::new(dim).with_residual(residual);
    let device = ctx.device.clone().autodiff();
    let checkpoints = checkpoint_dir(out, name)?;
    let start = resume_from(
        start,
        &checkpoints,
        config,
        head.init(&device),
        config.weight_decay,
        &mut *ctx.observer,
    )?;
    let Recorded {
        model,
        run_id,
        last,
        seconds,
    } = recorded(
        store,
        "tracklets",
        config,
        config.epochs,
        checkpoints,
        &mut *ctx.observer,
        |events| train_encoder(config, set, &device, start, |d| head.init(d), events),
    )?;
    let mut card = ModelCard::new(
        name,
        ModelKind::TrackletHead,
        &super::recipe::version_of(run_id),
        &format!(
            "Tracklet head (METHODS §3) over the frozen twin image encoder {twin_version}: each \
             fragment frame cut around its box as a twin view (2.5x the box, display blacked \
             out), encoded by the twin encoder, -> Linear 256 -> CLS + 3 transformer layers; \
             input 8 frames every 4th; output the 256-d CLS embedding (with `residual`: the \
             frames' mean plus a projection of the CLS output; L2-normalise it). \
             Trained with the noise-aware loss on temporal bags, no identity labels. Needs \
             that twin model beside it."
        ),
        &head,
    );
    card.reads = Some(crate::model::weights::Reads {
        name: twins.image_card.name.clone(),
        version: twins.image_card.version.clone(),
        sha256: twins.image_card.sha256.clone(),
    });
    card.training = Some(Training {
        command: ctx.command_line.clone(),
        seed,
        data: format!(
            "{} tracklets ({} fragments) in {} videos of {}; twin encoder {twin_version}",
            set.tracklets.len(),
            set.fragments.len(),
            set.videos.len(),
            ctx.library.display()
        ),
        epochs: config.epochs,
        wall: format!("{seconds:.0} s on {}", crate::plumbing::machine()),
        metrics: last,
    });
    let card = super::recipe::save_run_model(store, run_id, &model.valid(), &card, out)?;
    Ok(Trained {
        card,
        seconds,
        run_id,
    })
}
