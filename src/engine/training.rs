//! A training run started from the GUI: one recipe of the registry on its own thread, on the
//! engine's device, writing what it does into a shared [`TrainingLog`] that the training panel
//! reads every frame. Each event asks for a repaint (the way rerun treats background work), so
//! curves grow while the UI stays responsive; Stop lets the current step finish and keeps the
//! last epoch's checkpoint (`resume` continues from it).

use crate::train::recipe::{RecipeContext, Settings, TrainObserver};
use crate::train::{EpochReport, recipe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// Everything the panel shows of one run.
#[derive(Debug, Clone)]
pub struct TrainingLog {
    pub recipe: String,
    pub device: String,
    pub started: Instant,
    /// Lines the recipe wrote ("encoding every fragment frame...").
    pub messages: Vec<String>,
    /// (step over the whole run, 1-based; loss) after every optimizer step.
    pub losses: Vec<[f64; 2]>,
    /// Each finished epoch's mean metrics (its checkpoint is written).
    pub epochs: Vec<EpochReport>,
    /// (epoch 0-based, epochs, step 0-based, steps) of the last step.
    pub position: Option<(usize, usize, usize, usize)>,
    /// Set when the run ends: the saved model card, or why it stopped.
    pub outcome: Option<Result<String, String>>,
}

impl TrainingLog {
    /// The share of all steps done, 0..1.
    pub fn done_fraction(&self) -> f64 {
        match self.position {
            Some((e, es, s, ss)) if es * ss > 0 => {
                ((e * ss + s + 1) as f64 / (es * ss) as f64).min(1.0)
            }
            _ => 0.0,
        }
    }

    /// Seconds left at the pace so far (None before the first step).
    pub fn eta_seconds(&self) -> Option<f64> {
        let f = self.done_fraction();
        (f > 0.0 && self.outcome.is_none())
            .then(|| self.started.elapsed().as_secs_f64() * (1.0 - f) / f)
    }
}

type Notify = Arc<dyn Fn() + Send + Sync>;

/// A run in progress or finished; cheap to clone (the panel's state holds one).
#[derive(Clone)]
pub struct TrainingRun {
    log: Arc<Mutex<TrainingLog>>,
    stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for TrainingRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrainingRun").finish_non_exhaustive()
    }
}

impl TrainingRun {
    /// Starts recipe `name` with `settings` on `library` (models default to `models`).
    pub fn start(
        name: &str,
        settings: Settings,
        library: PathBuf,
        models: PathBuf,
        compute: &crate::compute::Compute,
        notify: Option<Notify>,
    ) -> Result<TrainingRun, String> {
        let (device, memory) = (compute.device.clone(), compute.training_memory());
        let chosen = recipe(name).ok_or_else(|| format!("no training recipe called `{name}`"))?;
        let run = TrainingRun {
            log: Arc::new(Mutex::new(TrainingLog {
                recipe: name.to_string(),
                device: compute.summary(),
                started: Instant::now(),
                messages: Vec::new(),
                losses: Vec::new(),
                epochs: Vec::new(),
                position: None,
                outcome: None,
            })),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let mut observer = PanelObserver {
            run: run.clone(),
            notify: notify.clone(),
        };
        let finished = run.clone();
        let command_line = format!("GUI training panel: recipe {name}, {settings:?}");
        std::thread::Builder::new()
            .name(format!("endotwin-train-{name}"))
            .spawn(move || {
                let mut ctx = RecipeContext {
                    library,
                    models,
                    device,
                    command_line,
                    memory,
                    replace: false,
                    observer: &mut observer,
                };
                let result = crate::train::recipe::run_recipe(chosen, &settings, &mut ctx);
                // A model trained here gets its familiarity and calibration from the library
                // it learned from (every fifth item held out to set the threshold on); a kind
                // without them, or a library too small, keeps the model and says why.
                if let Ok(t) = &result {
                    let mut libraries = crate::engine::trust::Libraries::of(&ctx.library);
                    // A tracklet head's frame encoder may be in the run's models folder.
                    libraries.models.push(ctx.models.clone());
                    let progress = crate::plumbing::Progress::new();
                    let lines = match crate::engine::trust::refit(
                        &t.card,
                        &libraries,
                        &ctx.device,
                        &progress,
                    ) {
                        Ok(r) => r.lines,
                        Err(e) => vec![format!("trust not fitted: {e}")],
                    };
                    let mut log = finished.log();
                    log.messages.extend(lines);
                }
                finished.log().outcome = Some(match result {
                    Ok(t) => Ok(format!("saved {} ({:.0} s)", t.card.display(), t.seconds)),
                    Err(e) => Err(e.to_string()),
                });
                if let Some(n) = &notify {
                    n();
                }
            })
            .map_err(|e| format!("could not start the training thread: {e}"))?;
        Ok(run)
    }

    /// The log, locked for reading (hold it only while drawing).
    pub fn log(&self) -> MutexGuard<'_, TrainingLog> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Asks the run to stop after its current step.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub fn finished(&self) -> bool {
        self.log().outcome.is_some()
    }
}

struct PanelObserver {
    run: TrainingRun,
    notify: Option<Notify>,
}

impl PanelObserver {
    fn changed(&self) {
        if let Some(n) = &self.notify {
            n();
        }
    }
}

impl TrainObserver for PanelObserver {
    fn message(&mut self, line: &str) {
        self.run.log().messages.push(line.to_string());
        self.changed();
    }

    fn step(&mut self, epoch: usize, epochs: usize, step: usize, steps: usize, loss: f64) {
        {
            let mut log = self.run.log();
            let x = (epoch * steps + step + 1) as f64;
            log.losses.push([x, loss]);
            log.position = Some((epoch, epochs, step, steps));
        }
        self.changed();
    }

    fn epoch(&mut self, report: &EpochReport, _epochs: usize) {
        self.run.log().epochs.push(report.clone());
        self.changed();
    }

    fn cancelled(&self) -> bool {
        self.run.stopping()
    }
}
