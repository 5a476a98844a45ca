//! The `captions` recipe: `endotwin train captions` (and the training panel) read their
//! settings here, load the library's captioned capsule frames, and run
//! [`super::captions::train`].

use super::captions::{CaptionLoss, CaptionTrainingConfig, train};
use super::recipe::{
    OptionKind, Recipe, RecipeContext, RecipeError, RecipeOption, Recorded, Settings, Trained,
    checkpoint_dir, recorded, resume_from,
};
use crate::captions::data::CaptionSet;
use crate::captions::model::CaptionModelConfig;
use crate::model::weights::{self, ModelCard, ModelKind, Training};
use crate::plumbing::Progress;
use crate::store::{OpenMode, Store};
use burn::module::Module;

/// `endotwin train captions`.
pub struct CaptionRecipe;

impl Recipe for CaptionRecipe {
    fn name(&self) -> &'static str {
        "captions"
    }

    fn description(&self) -> &'static str {
        "The capsule caption model (CLIP dual encoder + category head) on the library's \
         captioned capsule frames, with the multi-positive KL loss or the plain CLIP loss"
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
            RecipeOption::new("name", Text, Some("captions"), "Name of the model"),
            RecipeOption::new(
                "loss",
                Text,
                Some("kl"),
                "kl (multi-positive KL, METHODS §2) or clip (plain symmetric CLIP loss)",
            ),
            RecipeOption::new("epochs", Count, Some("20"), "Passes over the frames"),
            RecipeOption::new("batch", Count, Some("8"), "Frames per step"),
            RecipeOption::new("lr", Number, Some("3e-4"), "Peak learning rate"),
            RecipeOption::new(
                "shots",
                Count,
                Some("0"),
                "Frames per distinct caption to train on (0: all; 1 and 4 for few-shot)",
            ),
            RecipeOption::new("seed", Count, Some("17"), "Seed of every random draw"),
            RecipeOption::new(
                "init",
                Path,
                None,
                "Start the towers from this text-prompt model (Endo-CLIP card, e.g. \
                 models/prompts.json): its image tower, its text layers and the words both \
                 vocabularies share (default: random initialisation)",
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
        let loss = match settings.text(&o, "loss")?.as_str() {
            "kl" => CaptionLoss::Kl,
            "clip" => CaptionLoss::Clip,
            other => {
                return Err(RecipeError::Setting(format!(
                    "--loss: `{other}` is not kl or clip"
                )));
            }
        };
        let config = CaptionTrainingConfig::new(CaptionModelConfig::small())
            .with_loss(loss)
            .with_epochs(settings.count(&o, "epochs")?)
            .with_batch(settings.count(&o, "batch")?.max(2))
            .with_lr(settings.number(&o, "lr")?)
            .with_shots(settings.count(&o, "shots")?)
            .with_seed(seed)
            .with_init(settings.path(&o, "init").map(|p| p.display().to_string()));
        super::memory::check(
            "captions",
            "batch",
            config.batch,
            super::memory::dual(&config.model.clip),
            super::memory::budget(settings, &o, ctx.memory)?,
        )?;
        let mut store = Store::open(&ctx.library, OpenMode::Existing)?;
        ctx.observer
            .message("reading the captioned capsule frames...");
        let mut set = CaptionSet::load(&store, &config.model, &Progress::new())
            .map_err(|e| RecipeError::Setting(e.to_string()))?;
        if config.shots > 0 {
            set = set.shots(config.shots, seed);
        }
        if set.frames.len() < config.batch {
            return Err(RecipeError::Setting(format!(
                "caption training needs at least {} captioned frames; the library has {}",
                config.batch,
                set.frames.len()
            )));
        }
        ctx.observer.message(&format!(
            "{} frames, {} distinct captions, {} patients",
            set.frames.len(),
            set.captions.len(),
            set.patients()
        ));
        if !set.skipped.is_empty() {
            ctx.observer
                .message(&format!("left out: {}", set.skipped.join("; ")));
        }
        let device = ctx.device.clone().autodiff();
        let checkpoints = checkpoint_dir(&out, &name)?;
        let mut start = resume_from(
            super::recipe::Start::of(settings, &o)?,
            &checkpoints,
            &config,
            config.model.init(&device),
            config.weight_decay,
            &mut *ctx.observer,
        )?;
        let mut initialised = String::new();
        if let (None, Some(card)) = (&start, &config.init) {
            let prompts = crate::prompts::model::load(std::path::Path::new(card), &device)
                .map_err(|e| RecipeError::Setting(format!("--init {card}: {e}")))?;
            device.seed(seed);
            let (model, words) = config
                .model
                .init_from(
                    &prompts.model.clip,
                    &prompts.config.clip,
                    prompts.config.tokenizer.words().ok_or_else(|| {
                        RecipeError::Setting(format!(
                            "--init {card}: it reads text with CLIP's BPE, not words; a caption \
                             model starts only from a text-prompt model trained here"
                        ))
                    })?,
                    &device,
                )
                .map_err(|e| RecipeError::Setting(format!("--init {card}: {e}")))?;
            initialised = format!(
                ", starting from the text-prompt model {} ({} of the {} caption words in its vocabulary)",
                prompts.named(),
                words,
                config.model.tokenizer.words.len()
            );
            ctx.observer.message(initialised.trim_start_matches(", "));
            start = Some(super::Checkpoint {
                model,
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
            "captions",
            &config,
            config.epochs,
            checkpoints,
            &mut *ctx.observer,
            |events| train(&config, &set, &device, start, events),
        )?;
        let shots = match config.shots {
            0 => "every training frame".to_string(),
            k => format!("{k} frame(s) per distinct caption"),
        };
        let mut card = ModelCard::new(
            &name,
            ModelKind::CaptionModel,
            &super::recipe::version_of(run_id),
            &format!(
                "Capsule caption model (METHODS §2): a {s} px ViT and a word-level text \
                 encoder projecting to one space{initialised}, fine-tuned with the {loss} loss on {shots}, \
                 prompt \"endoscopy image with <refined caption>\"; plus a category head (one \
                 logit per category, class-weighted binary cross-entropy) on the frozen image \
                 embedding.",
                s = config.model.image_size(),
                loss = match loss {
                    CaptionLoss::Kl => "multi-positive KL",
                    CaptionLoss::Clip => "plain symmetric CLIP",
                },
            ),
            &config.model,
        );
        card.training = Some(Training {
            command: ctx.command_line.clone(),
            seed,
            data: format!(
                "{} captioned capsule frames ({} distinct captions, {} patients) of {}; loss {}, shots {}",
                set.frames.len(),
                set.captions.len(),
                set.patients(),
                ctx.library.display(),
                loss.name(),
                config.shots
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
