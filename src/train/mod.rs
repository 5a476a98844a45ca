//! Training: the losses and steps that fine-tune the very graphs inference uses. Every recipe
//! runs on one loop, [`fit::fit`], which reports each step and each epoch to [`TrainEvents`]
//! (a progress bar on the CLI, the Training tab's live curves in the GUI), which also
//! checkpoints, records the run and can stop it.

pub mod augment;
pub mod caption_backbone;
pub mod caption_recipe;
pub mod captions;
pub mod checkpoint;
pub mod data;
pub mod detector_backbone;
pub mod dual_losses;
pub mod fit;
pub mod image_encoder;
pub mod losses;
pub mod memory;
pub mod prompt_recipe;
pub mod prompts;
pub mod recipe;
pub mod scene_encoder;
pub mod tracklet_losses;
pub mod tracklet_recipe;
pub mod tracklets;
pub mod twin_backbone;

pub use checkpoint::Checkpoint;
pub use recipe::{Recipe, RecipeContext, RecipeError, Settings, TrainObserver, Trained};

/// The recipe registry, in the order `endotwin train --list` prints it and the training panel
/// offers it. A new recipe is one line here.
pub fn recipes() -> Vec<&'static dyn Recipe> {
    vec![
        &image_encoder::ImageEncoderRecipe,
        &scene_encoder::SceneEncoderRecipe,
        &tracklet_recipe::TrackletRecipe,
        &caption_recipe::CaptionRecipe,
        &prompt_recipe::PromptRecipe,
        &twin_backbone::TwinBackboneRecipe,
        &detector_backbone::DetectorBackboneRecipe,
        &caption_backbone::CaptionBackboneRecipe,
    ]
}

/// The recipe called `name`.
pub fn recipe(name: &str) -> Option<&'static dyn Recipe> {
    recipes().into_iter().find(|r| r.name() == name)
}

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error("not enough training data: {0}")]
    NotEnoughData(String),
    #[error("cancelled during epoch {}", epoch + 1)]
    Cancelled { epoch: usize },
    #[error("the loss became NaN or infinite at epoch {}, step {step}; lower the learning rate", epoch + 1)]
    Diverged { epoch: usize, step: usize },
    #[error("checkpoint: {0}")]
    Checkpoint(String),
}

/// Mean figures of one finished epoch.
#[derive(Debug, Clone)]
pub struct EpochReport {
    /// 1-based.
    pub epoch: usize,
    pub seconds: f64,
    pub metrics: Vec<(String, f64)>,
}

impl EpochReport {
    pub fn get(&self, name: &str) -> Option<f64> {
        self.metrics
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }
}

pub trait TrainEvents<M> {
    fn step(&mut self, epoch: usize, step: usize, steps: usize, loss: f64);
    /// After each epoch, with what a checkpoint needs; an error stops training.
    fn epoch(&mut self, report: &EpochReport, checkpoint: &Checkpoint<M>)
    -> Result<(), TrainError>;
    fn cancelled(&self) -> bool {
        false
    }
}

/// Linear warm-up over the first 5 % of steps, then cosine decay to a tenth of `lr`.
pub fn lr_at(lr: f64, step: usize, total: usize) -> f64 {
    let warmup = (total / 20).max(1);
    if step < warmup {
        return lr * (step + 1) as f64 / warmup as f64;
    }
    let t = (step - warmup) as f64 / (total - warmup).max(1) as f64;
    lr * (0.1 + 0.9 * 0.5 * (1.0 + (std::f64::consts::PI * t).cos()))
}
