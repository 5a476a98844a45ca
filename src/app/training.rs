//! The Training tab's logic: the form over a recipe of the registry (the same options, with
//! the same defaults, that `endotwin train <recipe>` takes), and the run it starts on the
//! engine's device (`engine::training`). The panel draws [`TrainingPanel`] and the run's log.

use super::App;
use super::state::{RecordedRun, ToastLevel};
use crate::engine::training::TrainingRun;
use crate::engine::{Job, JobOutput};
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
    /// Make this run's model the library's active one for its capability.
    Promote {
        run: i64,
    },
    /// Put back the model `name` had before its last promotion.
    Demote {
        name: String,
    },
    /// Make (again) the evaluation report of this run's model, on held-out data.
    Report {
        run: i64,
    },
    /// Show this run's saved report (`None` closes it).
    OpenReport {
        run: Option<i64>,
    },
    /// The held-out library reports run on (empty: the phantom's validation split).
    ReportHeldOut(String),
}

/// `base`, or `base-2`, `base-3`, ... : the first name with no model card or record in `dir`.
fn free_name(dir: &std::path::Path, base: &str) -> String {
    let taken =
        |n: &str| dir.join(format!("{n}.json")).exists() || dir.join(format!("{n}.bpk")).exists();
    let mut name = base.to_string();
    let mut k = 2;
    while taken(&name) {
        name = format!("{base}-{k}");
        k += 1;
    }
    name
}

/// Where the Training tab's runs write their models by default: `runs/` beside the library.
pub fn runs_dir(library: &std::path::Path) -> std::path::PathBuf {
    crate::engine::promote::library_folder(library).join("runs")
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
            TrainingCommand::Promote { run } => {
                let card = panel
                    .runs
                    .iter()
                    .find(|r| r.row.id == run)
                    .and_then(|r| r.card.clone());
                match card {
                    Some(card) => self.submit_promotion(
                        format!("promote run #{run}"),
                        Job::Promote {
                            card: card.into(),
                            run: Some(run),
                        },
                    ),
                    None => self.state.toast(
                        ToastLevel::Error,
                        format!("run #{run} saved no model of its own to promote (a stage of a longer run, or a run that did not finish)"),
                    ),
                }
            }
            TrainingCommand::Demote { name } => {
                self.submit_promotion(format!("demote {name}"), Job::Demote { name })
            }
            TrainingCommand::Report { run } => self.submit_report(run),
            TrainingCommand::OpenReport { run } => panel.open_report = run,
            TrainingCommand::ReportHeldOut(path) => panel.report_held_out = path,
        }
    }

    /// Makes a run's report on the engine: beside the library's active model, on the held-out
    /// library the panel names or the phantom's validation split, never on this library (the
    /// run's training data).
    fn submit_report(&mut self, run: i64) {
        let Some(lib) = &self.state.library else {
            return self.state.toast(ToastLevel::Error, "open a library first");
        };
        let panel = &self.state.training;
        if panel.reporting.is_some() {
            return self
                .state
                .toast(ToastLevel::Error, "a report is already being made");
        }
        let Some(card) = panel
            .runs
            .iter()
            .find(|r| r.row.id == run)
            .and_then(|r| r.card.clone())
        else {
            return self.state.toast(
                ToastLevel::Error,
                format!("run #{run} saved no model; only finished runs have a report"),
            );
        };
        let held = panel.report_held_out.trim();
        let data = crate::eval::report::ReportData {
            held_out: (!held.is_empty()).then(|| held.into()),
            trained_on: Some(lib.path.clone()),
            ..Default::default()
        };
        let db = lib.store.db_path().to_path_buf();
        let job = Job::Report {
            card: card.into(),
            data,
        };
        match self.engine.submit(format!("report of run #{run}"), db, job) {
            Ok(handle) => self.state.training.reporting = Some((handle.id, run)),
            Err(e) => self.state.toast(ToastLevel::Error, e.to_string()),
        }
    }

    /// Takes a report's result; `false` when `id` was not the report job.
    pub(super) fn report_finished(&mut self, id: u64, output: &Result<JobOutput, String>) -> bool {
        let panel = &mut self.state.training;
        let Some((job, run)) = panel.reporting else {
            return false;
        };
        if job != id {
            return false;
        }
        panel.reporting = None;
        match output {
            Ok(JobOutput::Report { report, json, .. }) => {
                if let Some(r) = panel.runs.iter_mut().find(|r| r.row.id == run) {
                    r.report = Some(report.clone());
                }
                panel.open_report = Some(run);
                self.state.toast(
                    ToastLevel::Info,
                    format!("report of run #{run} saved as {}", json.display()),
                );
            }
            Ok(_) => {}
            Err(e) => self.state.toast(ToastLevel::Error, e.clone()),
        }
        true
    }

    fn submit_promotion(&mut self, what: String, job: Job) {
        let Some(lib) = &self.state.library else {
            return self.state.toast(ToastLevel::Error, "open a library first");
        };
        if lib.read_only {
            return self.state.toast(
                ToastLevel::Error,
                format!(
                    "{} is open read-only: its models cannot change",
                    lib.path.display()
                ),
            );
        }
        if self.state.training.promoting.is_some() {
            return self
                .state
                .toast(ToastLevel::Error, "a promotion is already running");
        }
        let db = lib.store.db_path().to_path_buf();
        match self.engine.submit(&what, db, job) {
            Ok(handle) => self.state.training.promoting = Some(handle.id),
            Err(e) => self.state.toast(ToastLevel::Error, e.to_string()),
        }
    }

    /// Points every panel at `dir` for its models (the library's own once it promoted one).
    pub(super) fn use_models_dir(&mut self, dir: std::path::PathBuf) {
        let s = &mut self.state;
        s.twins.models_dir = dir.clone();
        s.tracklets.models_dir = dir.clone();
        s.captions.models_dir = dir.clone();
        s.prompts.models = crate::engine::prompt_jobs::available(&dir);
        s.prompts.models_dir = dir;
        self.load_active_models();
    }

    /// Reads the library's promoted models (cards in its own models folder that carry
    /// `promoted_from`) into the Training tab.
    pub(super) fn load_active_models(&mut self) {
        let Some(lib) = &self.state.library else {
            self.state.training.active.clear();
            return;
        };
        let dir = crate::engine::promote::active_dir(&lib.path);
        let mut active = Vec::new();
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let Ok(card) = crate::model::weights::read_card(&path) else {
                continue;
            };
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            let can_demote = crate::engine::promote::can_demote(&lib.path, &name);
            if card.promoted_from.is_some() || can_demote {
                active.push(super::state::ActiveModel {
                    name,
                    version: card.version,
                    promoted_from: card.promoted_from,
                    can_demote,
                });
            }
        }
        active.sort_by(|a, b| a.name.cmp(&b.name));
        self.state.training.active = active;
    }

    /// Takes a promotion's or demotion's result; `false` when `output` was not one.
    pub(super) fn promotion_finished(
        &mut self,
        id: u64,
        output: &Result<JobOutput, String>,
    ) -> bool {
        if self.state.training.promoting != Some(id) {
            return false;
        }
        self.state.training.promoting = None;
        match output {
            Ok(JobOutput::Promoted {
                name,
                promoted,
                dir,
                reindexed,
            }) => {
                self.use_models_dir(dir.clone());
                let mut text = match promoted {
                    Some(p) => format!(
                        "{name} is now the run's model{}",
                        if p.kept_previous {
                            "; the one before is kept (Demote)"
                        } else {
                            ""
                        }
                    ),
                    None => format!("{name}: the model before the last promotion is back"),
                };
                if let Some((stats, version)) = reindexed {
                    text += &format!(
                        "; twin index rebuilt with {version}: {} views encoded, {} polyps updated",
                        stats.views_encoded, stats.polyps_updated
                    );
                }
                self.state.toast(ToastLevel::Info, text);
                self.state.twins.problem = None;
            }
            Ok(_) => {}
            Err(e) => self.state.toast(ToastLevel::Error, e.clone()),
        }
        true
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
                    let card = lib.store.run_card(row.id)?;
                    let report = card.as_ref().and_then(|c| {
                        let json = crate::eval::report::json_path(std::path::Path::new(c));
                        crate::eval::report::Report::load(&json).ok().map(Box::new)
                    });
                    Ok(RecordedRun {
                        card,
                        report,
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
            let runs = runs_dir(&library);
            settings.set("out", runs.display().to_string());
            // Another run of the same recipe there keeps its model: a run whose name was not
            // typed takes the first free one (`twin-image-2`, ...); runs never write over
            // each other's models (a typed name that exists is refused, unless resumed).
            let default_name = recipe
                .options()
                .into_iter()
                .find(|o| o.name == "name")
                .and_then(|o| o.default);
            let resume = panel
                .values
                .get("resume")
                .is_some_and(|v| v.trim() == "true");
            if let (Some(base), false, false) =
                (default_name, panel.values.contains_key("name"), resume)
            {
                settings.set("name", free_name(&runs, base));
            }
        }
        let compute = self.engine.compute();
        match TrainingRun::start(
            recipe.name(),
            settings,
            library,
            self.state.twins.models_dir.clone(),
            compute,
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
