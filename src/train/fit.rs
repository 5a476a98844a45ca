//! The one training loop every recipe runs on. A recipe says how one step computes its loss
//! ([`Steps`]); [`fit`] owns everything around it: epochs from where the checkpoint left off,
//! one seeded RNG stream per epoch (so a resumed run draws what an uninterrupted one would
//! have), stopping between steps, the NaN check, the learning-rate schedule, the optimizer
//! step, progress after each step, and each epoch's report and checkpoint. The checkpoint,
//! the library's run record and the observer are behind [`TrainEvents`] (see
//! `recipe::RunEvents`).

use super::{Checkpoint, EpochReport, TrainError, TrainEvents, lr_at};
use crate::plumbing::Rng;
use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::Tensor;
use std::time::Instant;

/// How long a run is and how it learns.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Epochs in all (a resumed run continues to this number).
    pub epochs: usize,
    pub steps_per_epoch: usize,
    /// Peak learning rate ([`lr_at`]: warm-up, then cosine decay).
    pub lr: f64,
    /// Seeds the per-epoch RNG streams.
    pub seed: u64,
}

impl Plan {
    pub fn total_steps(&self) -> usize {
        self.epochs * self.steps_per_epoch
    }
}

/// Where a step is in the run.
#[derive(Debug, Clone, Copy)]
pub struct At {
    /// 0-based.
    pub epoch: usize,
    /// 0-based, within the epoch.
    pub step: usize,
    /// Steps before this one in the whole run.
    pub global: usize,
    /// Steps in the whole run.
    pub total: usize,
}

/// A figure of one step, averaged over the epoch in its report.
pub enum Figure {
    /// A term of the loss (read from its tensor).
    Term(&'static str, Box<Tensor<1>>),
    /// `count` of `of` items (pooled over the epoch: its report shows sum(count) / sum(of),
    /// left out when nothing was counted).
    Share {
        name: &'static str,
        count: f64,
        of: f64,
    },
}

/// What one step gives back.
pub struct StepLoss {
    /// What the optimizer minimises (a scalar).
    pub loss: Tensor<1>,
    /// Reported beside it, in this order, after "loss".
    pub figures: Vec<Figure>,
}

impl StepLoss {
    pub fn new(loss: Tensor<1>) -> StepLoss {
        StepLoss {
            loss,
            figures: Vec::new(),
        }
    }

    pub fn with(mut self, figure: Figure) -> StepLoss {
        self.figures.push(figure);
        self
    }

    /// With a term of the loss, reported by `name`.
    pub fn term(self, name: &'static str, value: Tensor<1>) -> StepLoss {
        self.with(Figure::Term(name, Box::new(value)))
    }
}

/// One recipe's step. Implementations hold their data and settings; [`fit`] calls
/// [`Steps::begin_epoch`] once per epoch, then [`Steps::step`] `plan.steps_per_epoch` times,
/// with the epoch's RNG each time.
pub trait Steps<M> {
    /// Before the epoch's first step: shuffle its order here.
    fn begin_epoch(&mut self, _epoch: usize, _rng: &mut Rng) {}
    /// The loss of one step on `model`.
    fn step(&mut self, model: &M, at: At, rng: &mut Rng) -> StepLoss;
    /// Figures of the model at the end of an epoch (a learned temperature), after the means.
    fn epoch_figures(&mut self, _model: &M, _epoch: usize) -> Vec<(String, f64)> {
        Vec::new()
    }
}

/// Trains from `start` (a fresh model at epoch 0, or a checkpoint) to `plan.epochs`, and
/// returns the model after the last epoch. The model's device must have autodiff enabled.
pub fn fit<M: Module + Clone>(
    plan: &Plan,
    start: Checkpoint<M>,
    steps: &mut dyn Steps<M>,
    events: &mut dyn TrainEvents<M>,
) -> Result<M, TrainError> {
    let Checkpoint {
        mut model,
        mut optimizer,
        epoch: first_epoch,
    } = start;
    let total = plan.total_steps();
    for epoch in first_epoch..plan.epochs {
        let started = Instant::now();
        let mut rng = Rng::new(plan.seed).fork(epoch as u64 + 1);
        steps.begin_epoch(epoch, &mut rng);
        let mut sums = Sums::default();
        for step in 0..plan.steps_per_epoch {
            if events.cancelled() {
                return Err(TrainError::Cancelled { epoch });
            }
            let global = epoch * plan.steps_per_epoch + step;
            let at = At {
                epoch,
                step,
                global,
                total,
            };
            let out = steps.step(&model, at, &mut rng);
            let value = out.loss.clone().into_scalar::<f32>() as f64;
            if !value.is_finite() {
                return Err(TrainError::Diverged { epoch, step });
            }
            sums.add("loss", value, 1.0);
            for figure in out.figures {
                match figure {
                    Figure::Term(name, t) => sums.add(name, t.into_scalar::<f32>() as f64, 1.0),
                    Figure::Share { name, count, of } => sums.add(name, count, of),
                }
            }
            let grads = GradientsParams::from_grads(out.loss.backward(), &model);
            model = optimizer.step(lr_at(plan.lr, global, total), model, grads);
            events.step(epoch, step, plan.steps_per_epoch, value);
        }
        let mut metrics = sums.means();
        metrics.extend(steps.epoch_figures(&model, epoch));
        let report = EpochReport {
            epoch: epoch + 1,
            seconds: started.elapsed().as_secs_f64(),
            metrics,
        };
        events.epoch(
            &report,
            &Checkpoint {
                model: model.clone(),
                optimizer: optimizer.clone(),
                epoch: epoch + 1,
            },
        )?;
    }
    Ok(model)
}

/// Named sums over an epoch, in the order first seen.
#[derive(Default)]
struct Sums {
    figures: Vec<(&'static str, f64, f64)>,
}

impl Sums {
    fn add(&mut self, name: &'static str, value: f64, weight: f64) {
        match self.figures.iter_mut().find(|(n, _, _)| *n == name) {
            Some((_, v, w)) => {
                *v += value;
                *w += weight;
            }
            None => self.figures.push((name, value, weight)),
        }
    }

    fn means(&self) -> Vec<(String, f64)> {
        self.figures
            .iter()
            .filter(|(_, _, w)| *w > 0.0)
            .map(|(n, v, w)| (n.to_string(), v / w))
            .collect()
    }
}
