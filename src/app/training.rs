//! The Training tab's logic: the form over a recipe of the registry (the same options, with
//! the same defaults, that `endotwin train <recipe>` takes), and the run it starts on the
//! engine's device (`engine::training`). The panel draws [`TrainingPanel`] and the run's log.

use super::App;
use super::state::{RecordedRun, ToastLevel};
use crate::engine::training::TrainingRun;
use crate::train::recipe::Settings;

/// What the Training tab asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum TrainingCommand {
    /// Show the form of this recipe (by its CLI name).
    Recipe(String),
    /// Set one option of the form; `None` returns it to its default.
    SetOption {
        name: String,
        value: Option<String>,
    },
    Start,
    /// Stop after the current step; the last finished epoch's checkpoint stays.
    Stop,
    /// Draw (or stop drawing) a recorded run's epoch losses in the overlay.
    Overlay {
        run: i64,
        on: bool,
    },
}

/// Where the Training tab's runs write their models by default: `runs/` beside the library.
pub fn runs_dir(library: &std::path::Path) -> std::path::PathBuf {
    let folder = if library.is_dir() {
        library.to_path_buf()
    } else {
        library
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_default()
    };
    folder.join("runs")
}

impl App {
    pub(super) fn training(&mut self, command: TrainingCommand) {
        let panel = &mut self.state.training;
        match command {
            TrainingCommand::Recipe(name) => {
                if panel.recipe != name {
                    panel.recipe = name;
                    panel.values.clear();
                }
            }
            TrainingCommand::SetOption { name, value } => match value {
                Some(v) => {
                    panel.values.insert(name, v);
                }
                None => {
                    panel.values.remove(&name);
                }
            },
            TrainingCommand::Stop => {
                if let Some(run) = &panel.run {
                    run.stop();
                }
            }
            TrainingCommand::Start => self.start_training(),
            TrainingCommand::Overlay { run, on } => {
                if on {
                    panel.overlay.insert(run);
                } else {
                    panel.overlay.remove(&run);
                }
            }
        }
    }

    /// Reads the library's recorded runs into the panel (on opening it and after each run).
    pub(super) fn load_runs(&mut self) {
        let Some(lib) = &self.state.library else {
            self.state.training.runs.clear();
            return;
        };
        let loaded = lib.store.run_list().and_then(|rows| {
            rows.into_iter()
                .map(|row| {
                    let metrics = lib.store.run_metrics(row.id)?;
                    let pick = |name: &str| {
                        metrics
                            .iter()
                            .filter(|m| m.1 == name)
                            .map(|m| (m.0, m.2))
                            .collect::<Vec<_>>()
                    };
                    Ok(RecordedRun {
                        losses: pick("loss"),
                        seconds: pick("seconds").iter().map(|s| s.1).sum(),
                        row,
                    })
                })
                .collect::<crate::store::Result<Vec<_>>>()
        });
        match loaded {
            Ok(runs) => self.state.training.runs = runs,
            Err(e) => self.state.toast(
                ToastLevel::Warning,
                format!("cannot read the training runs: {e}"),
            ),
        }
    }

    fn start_training(&mut self) {
        let refuse = |app: &mut App, why: String| app.state.toast(ToastLevel::Error, why);
        if self.state.training.running() {
            return refuse(
                self,
                "a training run is already running; stop it first".into(),
            );
        }
        let Some(lib) = &self.state.library else {
            return refuse(self, "open a library to train on".into());
        };
        if lib.read_only {
            return refuse(
                self,
                format!(
                    "{} is open read-only: a run records itself in the library; reopen it writable",
                    lib.path.display()
                ),
            );
        }
        let library = lib.path.clone();
        let panel = &self.state.training;
        let Some(recipe) = crate::train::recipe(&panel.recipe) else {
            return refuse(self, format!("no training recipe `{}`", panel.recipe));
        };
        let mut settings = Settings::default();
        for (name, value) in &panel.values {
            if !recipe.options().iter().any(|o| o.name == name) {
                continue;
            }
            settings.set(name, value.trim());
        }
        // A run writes into the library's `runs/` folder unless told otherwise, never over
        // the shipped models by accident.
        if recipe.options().iter().any(|o| o.name == "out") && !panel.values.contains_key("out") {
            settings.set("out", runs_dir(&library).display().to_string());
        }
        let compute = self.engine.compute();
        match TrainingRun::start(
            recipe.name(),
            settings,
            library,
            self.state.twins.models_dir.clone(),
            compute.device.clone(),
            compute.summary(),
            Some(self.notify.clone()),
        ) {
            Ok(run) => {
                self.state.training.run = Some(run);
                self.state.training.announced = false;
            }
            Err(e) => refuse(self, e),
        }
    }

    /// Announces a run's end once (a toast: where the model went, or why it stopped).
    pub(super) fn poll_training(&mut self) {
        let panel = &mut self.state.training;
        let Some(run) = &panel.run else { return };
        if panel.announced {
            return;
        }
        let (outcome, recipe) = {
            let log = run.log();
            (log.outcome.clone(), log.recipe.clone())
        };
        if let Some(outcome) = outcome {
            panel.announced = true;
            self.load_runs();
            match outcome {
                Ok(saved) => self
                    .state
                    .toast(ToastLevel::Info, format!("training {recipe}: {saved}")),
                Err(why) => self
                    .state
                    .toast(ToastLevel::Warning, format!("training {recipe}: {why}")),
            }
        }
    }
}
