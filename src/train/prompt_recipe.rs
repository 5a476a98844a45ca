//! The `prompts` recipe: `endotwin train prompts --stage 1|2|3|all|plain` (and the training
//! panel). Each stage is its own recorded run with its own checkpoints and card, named after
//! `--name` (default `prompts`):
//! stage 1 writes `<name>-round1` and `<name>-detect` (the last cleansing round: the detector;
//! with `--rounds N` above 2 the rounds between are `<name>-round2` .. `<name>-round<N-1>`), stage 2
//! `<name>-stage2`, stage 3 `<name>` (benign vs neoplastic, text search). Stage 2 continues
//! from `<name>-detect`, stage 3 from `<name>-stage2`; both train on the frames `<name>-detect`
//! keeps. `plain` trains the plain-CLIP comparison as `<name>` from scratch.
//! With `--resume`, stages whose card exists are taken as done and the first unfinished one
//! continues from its last checkpoint.

use super::prompts::{
    PromptStage, PromptTrainingConfig, Stage2Targets, Stage3Pool, keep_frames, train,
};
use super::recipe::{
    OptionKind, Recipe, RecipeContext, RecipeError, RecipeOption, Recorded, Settings, Trained,
    checkpoint_dir, recorded, resume_from,
};
use crate::model::weights::{self, ModelCard, ModelKind, Training};
use crate::plumbing::Progress;
use crate::prompts::model::{self as pm, PromptModel, PromptModelConfig};
use crate::prompts::records::Records;
use crate::store::{OpenMode, Store};
use burn::module::Module;
use burn::tensor::Device;
use std::path::{Path, PathBuf};

/// `endotwin train prompts`.
pub struct PromptRecipe;

impl Recipe for PromptRecipe {
    fn name(&self) -> &'static str {
        "prompts"
    }

    fn description(&self) -> &'static str {
        "The text-prompt model (Endo-CLIP: cleansing in two rounds, attunement, unification) \
         on the library's examination records (frames + report sentences, no frame labels)"
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
            RecipeOption::new("name", Text, Some("prompts"), "Name of the stage-3 model"),
            RecipeOption::new(
                "from",
                Text,
                None,
                "Start stages 2 and 3 from another run's earlier stages (its --name; default: this --name), e.g. for an ablation",
            ),
            RecipeOption::new(
                "stage",
                Text,
                Some("all"),
                "1, 2, 3, all (1 then 2 then 3), plain (the plain-CLIP comparison), or supervised (the ceiling: frames paired by their ground truth; reads frame labels, never shipped)",
            ),
            RecipeOption::new(
                "rounds",
                Count,
                Some("2"),
                "Cleansing rounds in stage 1 (2 = the paper); each round after the first starts from the one before and keeps the frames it ranks highest",
            ),
            RecipeOption::new(
                "epochs",
                Count,
                Some("20"),
                "Epochs of each stage (and round)",
            ),
            RecipeOption::new(
                "batch",
                Count,
                Some("32"),
                "Pairs per step in stages 1 and 2",
            ),
            RecipeOption::new("lr", Number, Some("3e-4"), "Peak learning rate"),
            RecipeOption::new(
                "size",
                Count,
                Some("64"),
                "Image tower input in px (a new run only; later stages keep their start's)",
            ),
            RecipeOption::new(
                "patch",
                Count,
                Some("8"),
                "Image tower patch in px (divides --size)",
            ),
            RecipeOption::new(
                "prevalence",
                Number,
                Some("0.25"),
                "Known polyp share among a positive examination's frames (one global prior)",
            ),
            RecipeOption::new(
                "targets",
                Text,
                Some("attributes"),
                "Stage 2 targets: attributes (soft, METHODS §1) or onehot (the ablation)",
            ),
            RecipeOption::new(
                "pool",
                Text,
                Some("attention"),
                "Stage 3 pooling: attention (the unifier) or mean (the ablation)",
            ),
            RecipeOption::new("seed", Count, Some("17"), "Seed of every random draw"),
            RecipeOption::new(
                "resume",
                Flag,
                None,
                "Skip stages whose card exists; continue the next from its checkpoints",
            ),
            super::memory::memory_option(),
        ]
    }

    /// Each stage's card is checked in `run` (a stage writes `<name>-<stage>`, not `<name>`).
    fn writes_over_its_card(&self) -> bool {
        false
    }

    fn run(
        &self,
        settings: &Settings,
        ctx: &mut RecipeContext<'_>,
    ) -> Result<Trained, RecipeError> {
        let o = self.options();
        let name = settings.text(&o, "name")?;
        weights::check_name(&name)?;
        let out = settings
            .path(&o, "out")
            .unwrap_or_else(|| ctx.models.clone());
        let rounds = settings.count(&o, "rounds")?;
        if rounds < 2 {
            return Err(RecipeError::Setting(format!(
                "--rounds {rounds}: stage 1 needs at least 2 rounds (round 2 makes the detector)"
            )));
        }
        let cleansing = (1..=rounds).map(Step::round);
        let stages: Vec<Step> = match settings.text(&o, "stage")?.as_str() {
            "1" => cleansing.collect(),
            "2" => vec![Step::of(PromptStage::Attune)],
            "3" => vec![Step::of(PromptStage::Unify)],
            "all" => cleansing
                .chain([Step::of(PromptStage::Attune), Step::of(PromptStage::Unify)])
                .collect(),
            "plain" => vec![Step::of(PromptStage::PlainClip)],
            "supervised" => vec![Step::of(PromptStage::Supervised)],
            other => {
                return Err(RecipeError::Setting(format!(
                    "--stage: `{other}` is not 1, 2, 3, all, plain or supervised"
                )));
            }
        };
        let targets = match settings.text(&o, "targets")?.as_str() {
            "attributes" => Stage2Targets::Attributes,
            "onehot" => Stage2Targets::OneHot,
            other => {
                return Err(RecipeError::Setting(format!(
                    "--targets: `{other}` is not attributes or onehot"
                )));
            }
        };
        let pool = match settings.text(&o, "pool")?.as_str() {
            "attention" => Stage3Pool::CrossAttention,
            "mean" => Stage3Pool::Mean,
            other => {
                return Err(RecipeError::Setting(format!(
                    "--pool: `{other}` is not attention or mean"
                )));
            }
        };
        let prevalence = settings.number(&o, "prevalence")?;
        if !(0.0..=1.0).contains(&prevalence) || prevalence == 0.0 {
            return Err(RecipeError::Setting(format!(
                "--prevalence: {prevalence} is not in (0, 1]"
            )));
        }
        let from = match settings.text(&o, "from") {
            Ok(f) => {
                weights::check_name(&f)?;
                f
            }
            Err(_) => name.clone(),
        };
        let run = StageRun {
            out: out.clone(),
            name: name.clone(),
            from,
            rounds,
            epochs: settings.count(&o, "epochs")?,
            batch: settings.count(&o, "batch")?.max(2),
            lr: settings.number(&o, "lr")?,
            prevalence,
            targets,
            pool,
            seed: settings.count(&o, "seed")? as u64,
            resume: settings.flag(&o, "resume"),
        };
        if !run.resume {
            for step in &stages {
                super::recipe::refuse_existing(&out, &run.card_name(*step), ctx)?;
            }
        } else {
            // A card a resumed run would take as a finished stage must be one: a caption
            // model under the stage's name was "taken as done" as stage 3 (round 14 N7).
            for step in &stages {
                let card_path = out.join(format!("{}.json", run.card_name(*step)));
                if std::fs::symlink_metadata(&card_path).is_err() {
                    continue;
                }
                let card = crate::model::weights::read_card(&card_path).map_err(|e| {
                    RecipeError::Setting(format!("--resume: {e}; nothing was trained"))
                })?;
                if card.kind != ModelKind::PromptModel {
                    return Err(RecipeError::Setting(format!(
                        "--resume: {} is a {} model, not {} of a `train prompts` run; nothing \
                         was trained (choose another --name or --out)",
                        card_path.display(),
                        card.kind,
                        step.name()
                    )));
                }
            }
        }
        let size = settings.count(&o, "size")?;
        let patch = settings.count(&o, "patch")?;
        if size < 16 || patch == 0 || !size.is_multiple_of(patch) {
            return Err(RecipeError::Setting(format!(
                "--size {size} --patch {patch}: the size must be at least 16 px and a multiple of the patch"
            )));
        }
        let mut store = Store::open(&ctx.library, OpenMode::Existing)?;
        ctx.observer.message("reading the examination records...");
        let mut records = Records::load(&store, size as u32, &Progress::new())
            .map_err(|e| RecipeError::Setting(e.to_string()))?;
        left_out(ctx, &records);
        let positives = records.exams.iter().filter(|e| e.positive).count();
        ctx.observer.message(&format!(
            "{} examinations ({positives} with a polyp in the report), {} frames",
            records.exams.len(),
            records.frame_count()
        ));
        // Stages 1 and 2 take `batch` (frame, sentence) pairs a step, stage 3 a quarter as many
        // examinations of up to `max_images` frames and as many sentences.
        let small = PromptModelConfig::small(records.corpus()).with_image(size, patch);
        let stage3 = run.config(Step::of(PromptStage::Unify), small.clone());
        let per_pair = super::memory::dual(&small.clip);
        let per_batch_item = per_pair * (stage3.max_images as f64 / 4.0).max(1.0);
        super::memory::check(
            "prompts",
            "batch",
            run.batch,
            per_batch_item,
            super::memory::budget(settings, &o, ctx.memory)?,
        )?;
        let device = ctx.device.clone().autodiff();
        let mut last = None;
        for step in stages {
            let stage = step.stage;
            let card_name = run.card_name(step);
            let card_path = out.join(format!("{card_name}.json"));
            if run.resume && card_path.exists() {
                ctx.observer.message(&format!(
                    "{}: {card_name} exists, taken as done",
                    step.name()
                ));
                continue;
            }
            let previous = run.previous(step);
            let (config_model, start_model) = match &previous {
                Some(prev) => {
                    let loaded = pm::load(&out.join(format!("{prev}.json")), &device)?;
                    (loaded.config, Some(loaded.model))
                }
                None => (
                    PromptModelConfig::small(records.corpus()).with_image(size, patch),
                    None,
                ),
            };
            if config_model.image_size() != records.size {
                records = Records::load(&store, config_model.image_size(), &Progress::new())
                    .map_err(|e| RecipeError::Setting(e.to_string()))?;
                left_out(ctx, &records);
            }
            let kept = match stage {
                PromptStage::Round1 | PromptStage::PlainClip => None,
                PromptStage::Supervised => {
                    ctx.observer
                        .message("reading which frames show a polyp (the supervised ceiling)");
                    Some(truth_frames(&store, &records)?)
                }
                _ => {
                    let detector = match stage {
                        PromptStage::Round2 => previous.clone().unwrap_or_default(),
                        _ => run.detector(),
                    };
                    let d = pm::load(&out.join(format!("{detector}.json")), &ctx.device)?;
                    ctx.observer.message(&format!(
                        "keeping the top {:.0} % frames of positive examinations by {detector}'s polyp probability",
                        run.prevalence * 100.0
                    ));
                    Some(keep_frames(
                        &d.model,
                        &d.config,
                        &records,
                        run.prevalence,
                        &ctx.device,
                    ))
                }
            };
            let config = run.config(step, config_model);
            let trained = run.train_stage(
                step,
                &config,
                &records,
                kept.as_deref(),
                start_model,
                &device,
                &mut store,
                ctx,
            )?;
            last = Some(trained);
        }
        last.ok_or_else(|| {
            RecipeError::Setting(format!(
                "every stage asked for already has its card in {}; nothing to do",
                out.display()
            ))
        })
    }
}

/// The settings shared by the stages of one `train prompts`.
struct StageRun {
    out: PathBuf,
    name: String,
    /// The run whose earlier stages this one starts from.
    from: String,
    /// Cleansing rounds in stage 1 (the paper's 2).
    rounds: usize,
    epochs: usize,
    batch: usize,
    lr: f64,
    prevalence: f64,
    targets: Stage2Targets,
    pool: Stage3Pool,
    seed: u64,
    resume: bool,
}

impl StageRun {
    /// The card a step writes: the last cleansing round is `<name>-detect`, the rounds
    /// between the first and the last `<name>-round<k>`.
    fn card_name(&self, step: Step) -> String {
        self.card_of(&self.name, step)
    }

    fn card_of(&self, name: &str, step: Step) -> String {
        match step.stage {
            PromptStage::Round2 if step.round < self.rounds => {
                format!("{name}-round{}", step.round)
            }
            stage => card_of(name, stage),
        }
    }

    /// The card a step starts from: the step before it, this run's or `from`'s.
    fn previous(&self, step: Step) -> Option<String> {
        let before = match step.stage {
            PromptStage::Round1 | PromptStage::PlainClip | PromptStage::Supervised => {
                return None;
            }
            PromptStage::Round2 => Step::round(step.round - 1),
            PromptStage::Attune => Step::round(self.rounds),
            PromptStage::Unify => Step::of(PromptStage::Attune),
        };
        Some(self.own_or_from(before))
    }

    /// The detector whose kept frames stages 2 and 3 train on: the last cleansing round.
    fn detector(&self) -> String {
        self.own_or_from(Step::round(self.rounds))
    }

    /// `step`'s card of this run when it trains that step too (or has its card), else `from`'s.
    fn own_or_from(&self, step: Step) -> String {
        let own = self.card_of(&self.name, step);
        if self.name == self.from || self.out.join(format!("{own}.json")).exists() {
            own
        } else {
            self.card_of(&self.from, step)
        }
    }

    fn config(&self, step: Step, model: PromptModelConfig) -> PromptTrainingConfig {
        PromptTrainingConfig::new(model, step.stage)
            .with_epochs(self.epochs)
            .with_batch(self.batch)
            // The paper's 32 pairs in stages 1 and 2, 8 examinations in stage 3.
            .with_unify_batch((self.batch / 4).max(2))
            .with_lr(self.lr)
            .with_prevalence(self.prevalence)
            .with_targets(self.targets)
            .with_pool(self.pool)
            .with_seed(self.seed)
    }

    #[allow(clippy::too_many_arguments)]
    fn train_stage(
        &self,
        step: Step,
        config: &PromptTrainingConfig,
        records: &Records,
        kept: Option<&[Vec<usize>]>,
        start_model: Option<PromptModel>,
        device: &Device,
        store: &mut Store,
        ctx: &mut RecipeContext<'_>,
    ) -> Result<Trained, RecipeError> {
        let stage = step.stage;
        let card_name = self.card_name(step);
        ctx.observer
            .message(&format!("{}: training {card_name}", step.name()));
        let checkpoints = checkpoint_dir(&self.out, &card_name)?;
        let resume = self.resume && checkpoints.join("state.json").exists();
        let start = resume_from(
            resume,
            &checkpoints,
            config,
            config.model.init(device),
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
            "prompts",
            config,
            config.epochs,
            checkpoints,
            &mut *ctx.observer,
            |events| {
                train(
                    config,
                    records,
                    kept,
                    device,
                    start,
                    |d| start_model.unwrap_or_else(|| config.model.init(d)),
                    events,
                )
            },
        )?;
        let mut card = ModelCard::new(
            &card_name,
            ModelKind::PromptModel,
            &super::recipe::version_of(run_id),
            &describe(step, config, self.previous(step).as_deref()),
            &config.model,
        );
        let positives = records.exams.iter().filter(|e| e.positive).count();
        card.training = Some(Training {
            command: ctx.command_line.clone(),
            seed: config.seed,
            data: format!(
                "{} examination records of {} ({positives} positive reports, {} frames; {})",
                records.exams.len(),
                ctx.library.display(),
                records.frame_count(),
                match stage {
                    PromptStage::Supervised => "frame labels read: a ceiling, not Endo-CLIP",
                    _ => "no frame labels",
                },
            ),
            epochs: config.epochs,
            wall: format!("{seconds:.0} s on {}", crate::plumbing::machine()),
            metrics: last,
        });
        let card = super::recipe::save_run_model(store, run_id, &model.valid(), &card, &self.out)?;
        Ok(Trained {
            card,
            seconds,
            run_id,
        })
    }
}

fn describe(step: Step, config: &PromptTrainingConfig, from: Option<&str>) -> String {
    let what = match step.stage {
        PromptStage::Round1 => "the polyp-vs-background detector after round 1".to_string(),
        PromptStage::Round2 => format!(
            "the polyp-vs-background detector after round {} (positive examinations' frames from the top {:.0} % by round {})",
            step.round,
            config.prevalence * 100.0,
            step.round - 1
        ),
        PromptStage::Attune => format!(
            "attuned on single-polyp examinations with {} targets",
            match config.targets {
                Stage2Targets::Attributes => "soft attribute",
                Stage2Targets::OneHot => "one-hot (ablation)",
            }
        ),
        PromptStage::Unify => format!(
            "unified on multi-polyp examinations with {}",
            match config.pool {
                Stage3Pool::CrossAttention => "cross-attention",
                Stage3Pool::Mean => "plain means (ablation)",
            }
        ),
        PromptStage::PlainClip => {
            "the plain-CLIP comparison: a random frame and the whole report, symmetric InfoNCE"
                .to_string()
        }
        PromptStage::Supervised => {
            "the supervised ceiling: a random frame with the sentence its ground truth says, \
             symmetric InfoNCE (reads frame labels; a reference, never shipped)"
                .to_string()
        }
    };
    let from = from.map_or(String::new(), |f| format!(", continued from `{f}`"));
    format!(
        "Text-prompt model (Endo-CLIP, METHODS §1), {}: a {s} px ViT and a word-level text encoder \
         in one 128-d space, {what}{from}.",
        step.name(),
        s = config.model.image_size()
    )
}

/// One step of a run: a stage, and for a cleansing round after the first its number.
#[derive(Debug, Clone, Copy)]
struct Step {
    stage: PromptStage,
    /// The cleansing round (1, 2, ...); 0 outside stage 1.
    round: usize,
}

impl Step {
    fn of(stage: PromptStage) -> Self {
        Step { stage, round: 0 }
    }

    /// Cleansing round `round` (1 is round 1; every later one is prevalence-guided).
    fn round(round: usize) -> Self {
        let stage = if round <= 1 {
            PromptStage::Round1
        } else {
            PromptStage::Round2
        };
        Step { stage, round }
    }

    fn name(self) -> String {
        match self.stage {
            PromptStage::Round2 if self.round != 2 => {
                format!("stage 1, round {} (prevalence-guided)", self.round)
            }
            stage => stage.name().to_string(),
        }
    }
}

/// The card name stage `stage` of run `name` writes (with the paper's two cleansing rounds).
pub fn card_of(name: &str, stage: PromptStage) -> String {
    match stage {
        PromptStage::Round1 => format!("{name}-round1"),
        PromptStage::Round2 => format!("{name}-detect"),
        PromptStage::Attune => format!("{name}-stage2"),
        PromptStage::Unify | PromptStage::PlainClip => name.to_string(),
        PromptStage::Supervised => format!("{name}-supervised"),
    }
}

/// Per examination, the frames that show a polyp by the library's ground truth (the polyp
/// views among its frames): only the supervised ceiling reads them.
fn truth_frames(store: &Store, records: &Records) -> Result<Vec<Vec<usize>>, RecipeError> {
    let truth = crate::prompts::records::frame_truth(store)?;
    Ok(records
        .exams
        .iter()
        .map(|exam| {
            (0..exam.frames.len())
                .filter(|&f| truth.contains_key(&exam.frames[f].media_id))
                .collect()
        })
        .collect())
}

/// The model card of stage `stage` of `name` in `out`.
pub fn stage_card(out: &Path, name: &str, stage: PromptStage) -> PathBuf {
    out.join(format!("{}.json", card_of(name, stage)))
}

/// Says which frames the records left out (unreadable, or changed on disk since import):
/// they were dropped from training without a word (round 7 N71).
fn left_out(ctx: &mut super::recipe::RecipeContext<'_>, records: &Records) {
    if let Some(first) = records.skipped.first() {
        ctx.observer.message(&format!(
            "left out {} frame(s) that cannot be read (`library check` names them), first: {first}",
            records.skipped.len()
        ));
    }
}
