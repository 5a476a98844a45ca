//! The recipe registry: every way to train a model, with its options and their defaults, run
//! the same way from the CLI (`endotwin train <recipe>`, `endotwin train --list`) and from the
//! training panel. A recipe owns its whole run: data from the library, checkpoints every epoch,
//! `resume`, the run and its metrics in the library, the model card with its training record.
//! Adding a recipe: implement [`Recipe`] and add it to [`super::recipes`].

use super::{Checkpoint, EpochReport, TrainError, TrainEvents};
use crate::model::weights::WeightsError;
use crate::store::{self, Store, StoreError};
use burn::module::Module;
use burn::store::ModuleSnapshot;
use burn::tensor::Device;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub trait Recipe: Sync {
    /// What the user types: `endotwin train <name>`.
    fn name(&self) -> &'static str;
    /// One line: what it trains, on what.
    fn description(&self) -> &'static str;
    /// Its settings with their defaults (a form in the panel, flags on the CLI).
    fn options(&self) -> Vec<RecipeOption>;
    fn run(&self, settings: &Settings, ctx: &mut RecipeContext<'_>)
    -> Result<Trained, RecipeError>;
    /// Whether a run writes over an existing `<out>/<name>.json`: then it is refused unless
    /// the run may replace it ([`RecipeContext::replace`], `--resume`). A recipe that takes an
    /// existing card as done (never writes over it) says false.
    fn writes_over_its_card(&self) -> bool {
        true
    }
}

/// One setting of a recipe.
#[derive(Debug, Clone, PartialEq)]
pub struct RecipeOption {
    /// Flag name without dashes (`epochs` is `--epochs`).
    pub name: &'static str,
    pub help: &'static str,
    pub kind: OptionKind,
    /// The default as text; `None`: unset unless given (a path chosen at run time).
    pub default: Option<&'static str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionKind {
    /// A whole number >= 0.
    Count,
    /// A real number.
    Number,
    /// On or off (off by default).
    Flag,
    Text,
    Path,
}

impl RecipeOption {
    pub fn new(
        name: &'static str,
        kind: OptionKind,
        default: Option<&'static str>,
        help: &'static str,
    ) -> RecipeOption {
        RecipeOption {
            name,
            help,
            kind,
            default,
        }
    }
}

/// The narrowest and widest embedding (`--dim`) a recipe takes.
const MIN_DIM: usize = 8;
const MAX_DIM: usize = 4096;
/// The most augmented copies of each view a recipe encodes before training.
const MAX_COPIES: usize = 64;

/// Chosen values by option name, as text (what the CLI parsed or the panel's form holds);
/// options not given take their defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    values: BTreeMap<String, String>,
}

impl Settings {
    pub fn set(&mut self, name: &str, value: impl Into<String>) {
        self.values.insert(name.to_string(), value.into());
    }

    /// The given value of `option`, else its default.
    fn raw(&self, options: &[RecipeOption], name: &str) -> Option<String> {
        self.values.get(name).cloned().or_else(|| {
            options
                .iter()
                .find(|o| o.name == name)
                .and_then(|o| o.default.map(str::to_string))
        })
    }

    fn parsed<T: std::str::FromStr>(
        &self,
        options: &[RecipeOption],
        name: &str,
    ) -> Result<T, RecipeError> {
        let raw = self
            .raw(options, name)
            .ok_or_else(|| RecipeError::Setting(format!("--{name} is required")))?;
        raw.parse()
            .map_err(|_| RecipeError::Setting(format!("--{name}: `{raw}` is not valid")))
    }

    pub fn count(&self, options: &[RecipeOption], name: &str) -> Result<usize, RecipeError> {
        let value: usize = self.parsed(options, name)?;
        // An embedding of a few numbers makes every twin alike, a huge one fills the memory
        // and the disk (round 9 N23, N25): the same bounds in every recipe.
        if name == "dim" && !(MIN_DIM..=MAX_DIM).contains(&value) {
            return Err(RecipeError::Setting(format!(
                "--dim {value}: an embedding width from {MIN_DIM} to {MAX_DIM}"
            )));
        }
        // Every copy of every view is encoded and kept before training (round 10 N1: a
        // million copies grew without bound).
        if name == "copies" && !(1..=MAX_COPIES).contains(&value) {
            return Err(RecipeError::Setting(format!(
                "--copies {value}: from 1 (the crop itself) to {MAX_COPIES} copies of each view"
            )));
        }
        // Whole frames are copied and kept the same way (round 17 N6: 2^64-1 grew for ever).
        if name == "whole-frames" && value > MAX_COPIES {
            return Err(RecipeError::Setting(format!(
                "--whole-frames {value}: from 0 (crops only) to {MAX_COPIES} copies of each frame"
            )));
        }
        // Counts that size a loop or a list (round 11 N15: `--epochs 2^64-1` overflowed a
        // product, `--rounds 2^64-1` a list's capacity), bounded far above any real run.
        let most = match name {
            "epochs" => Some(100_000),
            "rounds" => Some(1_000),
            "shots" => Some(1_000_000),
            _ => None,
        };
        if let Some(most) = most
            && value > most
        {
            return Err(RecipeError::Setting(format!(
                "--{name} {value}: at most {most}; nothing was trained"
            )));
        }
        Ok(value)
    }

    /// A number option's value: finite always, and within what the option means, checked
    /// before any data is read (round 9 N24, N25: `--lr inf` saved a model of NaN weights,
    /// `--tau 0` failed after the data was encoded with the wrong advice).
    pub fn number(&self, options: &[RecipeOption], name: &str) -> Result<f64, RecipeError> {
        let value: f64 = self.parsed(options, name)?;
        let (low, high, low_open, meaning) = match name {
            "lr" => (0.0, 1.0, true, "a learning rate above 0, at most 1"),
            "tau" => (0.0, 10.0, true, "a temperature above 0, at most 10"),
            "jitter" | "prevalence" => (0.0, 1.0, false, "a fraction from 0 to 1"),
            "entropy" | "weight-decay" | "quantization" => {
                (0.0, 1000.0, false, "a weight from 0 to 1000")
            }
            _ => (f64::MIN, f64::MAX, false, "a finite number"),
        };
        let inside = value.is_finite()
            && (if low_open { value > low } else { value >= low })
            && value <= high;
        if inside {
            Ok(value)
        } else {
            Err(RecipeError::Setting(format!(
                "--{name} {value}: not {meaning}"
            )))
        }
    }

    pub fn flag(&self, options: &[RecipeOption], name: &str) -> bool {
        self.raw(options, name).is_some_and(|v| v == "true")
    }

    pub fn text(&self, options: &[RecipeOption], name: &str) -> Result<String, RecipeError> {
        self.parsed(options, name)
    }

    pub fn path(&self, options: &[RecipeOption], name: &str) -> Option<PathBuf> {
        self.raw(options, name).map(PathBuf::from)
    }
}

/// What a run is given: where the data is, where tensors run, and who watches.
pub struct RecipeContext<'a> {
    pub library: PathBuf,
    /// The models folder used when a recipe's own path option is not set.
    pub models: PathBuf,
    pub device: Device,
    /// Recorded in the model card (the exact command that made the model).
    pub command_line: String,
    /// Bytes one training step may take (`--memory-gb` overrides it); `None`: not checked.
    pub memory: Option<u64>,
    /// Whether the run may write over an existing model of its `--out`/`--name` (`--force`);
    /// without it such a run is refused before it trains.
    pub replace: bool,
    pub observer: &'a mut dyn TrainObserver,
}

/// What the CLI's progress bar or the training panel sees of a run.
pub trait TrainObserver {
    /// A line for the user ("encoding 640 views...", "resuming after epoch 3").
    fn message(&mut self, line: &str);
    /// After each optimizer step.
    fn step(&mut self, epoch: usize, epochs: usize, step: usize, steps: usize, loss: f64);
    /// After each epoch, once its checkpoint is written.
    fn epoch(&mut self, report: &EpochReport, epochs: usize);
    /// Polled between steps; true stops the run after the current step.
    fn cancelled(&self) -> bool {
        false
    }
}

/// A finished run.
#[derive(Debug, Clone)]
pub struct Trained {
    /// The saved model card.
    pub card: PathBuf,
    pub seconds: f64,
    pub run_id: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum RecipeError {
    #[error("{0}")]
    Setting(String),
    #[error(transparent)]
    Train(#[from] TrainError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Weights(#[from] WeightsError),
    #[error(transparent)]
    Data(#[from] super::data::DataError),
    #[error("{path}: {}", crate::plumbing::input::plain_io(.io))]
    Io { path: String, io: std::io::Error },
}

/// The checkpoint folder of model `name` in `dir`, created.
pub(crate) fn checkpoint_dir(dir: &Path, name: &str) -> Result<PathBuf, RecipeError> {
    let path = dir.join(format!("{name}.checkpoints"));
    std::fs::create_dir_all(&path).map_err(|io| RecipeError::Io {
        path: format!("cannot create {}", path.display()),
        io,
    })?;
    Ok(path)
}

/// The bridge from a training loop to a recipe's run: checkpoints each epoch, records its
/// metrics in the library, and passes progress on to the observer.
pub(crate) struct RunEvents<'a, C> {
    pub checkpoints: PathBuf,
    /// The training config, saved with each checkpoint.
    pub config: &'a C,
    pub epochs: usize,
    pub store: &'a mut Store,
    pub run_id: i64,
    pub observer: &'a mut dyn TrainObserver,
}

impl<M, C> TrainEvents<M> for RunEvents<'_, C>
where
    M: Module + ModuleSnapshot,
    C: serde::Serialize,
{
    fn step(&mut self, epoch: usize, step: usize, steps: usize, loss: f64) {
        self.observer.step(epoch, self.epochs, step, steps, loss);
    }

    fn epoch(
        &mut self,
        report: &EpochReport,
        checkpoint: &Checkpoint<M>,
    ) -> Result<(), TrainError> {
        checkpoint.save(&self.checkpoints, self.config)?;
        self.observer.epoch(report, self.epochs);
        let run = self.run_id;
        self.store
            .write(|tx| {
                for (name, value) in &report.metrics {
                    store::log_metric(tx, run, report.epoch, 0, name, *value)?;
                }
                store::log_metric(tx, run, report.epoch, 0, "seconds", report.seconds)
            })
            .map_err(|e| TrainError::Checkpoint(format!("cannot record metrics: {e}")))
    }

    fn cancelled(&self) -> bool {
        self.observer.cancelled()
    }
}

/// Runs `recipe` and records in the library which card the run saved, so that the run can be
/// promoted later. The one way the CLI and the Training tab run a recipe.
pub fn run_recipe(
    recipe: &dyn Recipe,
    settings: &Settings,
    ctx: &mut RecipeContext<'_>,
) -> Result<Trained, RecipeError> {
    let _only_run = check_target(recipe, settings, ctx)?;
    let trained = recipe.run(settings, ctx)?;
    let card = crate::model::weights::read_card(&trained.card)?;
    let path = std::fs::canonicalize(&trained.card).unwrap_or_else(|_| trained.card.clone());
    let mut store = Store::open(&ctx.library, store::OpenMode::Existing)?;
    store.write(|tx| {
        store::link_run_model(
            tx,
            trained.run_id,
            (&card.name, &card.version, &card.kind.to_string()),
            &card.config.to_string(),
            &path.display().to_string(),
        )
    })?;
    Ok(trained)
}

/// Held while a run writes `<out>/<name>`: the OS lock on `<out>/.<name>.lock`, removed when
/// the run ends.
pub struct RunLock {
    path: PathBuf,
    /// `<out>/<name>.checkpoints`: removed when the run ends with it empty (a run refused or
    /// failed before its first epoch leaves nothing behind).
    checkpoints: PathBuf,
    /// `--out` when this run made it: removed when the run ends with it empty.
    made_out: Option<PathBuf>,
    _file: std::fs::File,
}

impl RunLock {
    fn take(out: &Path, name: &str) -> Result<RunLock, RecipeError> {
        let path = out.join(format!(".{name}.lock"));
        let setting = |why: String| RecipeError::Setting(why);
        let made_out = (!out.exists()).then(|| out.to_path_buf());
        std::fs::create_dir_all(out)
            .map_err(|e| setting(format!("--out {}: {e}; nothing was trained", out.display())))?;
        // A FIFO or device there is refused, not opened (opening a FIFO blocks).
        if std::fs::symlink_metadata(&path).is_ok_and(|m| !m.is_file()) {
            return Err(setting(format!(
                "{}: not a regular file (a FIFO, device or link) where a run keeps its lock; \
                 remove it; nothing was trained",
                path.display()
            )));
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| setting(format!("{}: {e}; nothing was trained", path.display())))?;
        // A run killed a moment ago holds its lock until the system has torn the process
        // down (round 11 N7: "another run is writing" right after a SIGKILL): a few seconds'
        // grace before a live run is named.
        let mut tried = file.try_lock();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(3);
        while matches!(tried, Err(std::fs::TryLockError::WouldBlock))
            && std::time::Instant::now() < until
        {
            std::thread::sleep(std::time::Duration::from_millis(100));
            tried = file.try_lock();
        }
        match tried {
            Ok(()) => Ok(RunLock {
                path,
                checkpoints: out.join(format!("{name}.checkpoints")),
                made_out,
                _file: file,
            }),
            Err(std::fs::TryLockError::WouldBlock) => Err(setting(format!(
                "another run is writing --out {} --name {name} right now; nothing was trained \
                 (wait for it, or choose another --name)",
                out.display()
            ))),
            Err(std::fs::TryLockError::Error(e)) => Err(setting(format!(
                "{}: {e}; nothing was trained",
                path.display()
            ))),
        }
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Only an empty folder is removed; a checkpoint in it stays for --resume.
        let _ = std::fs::remove_dir(&self.checkpoints);
        let _ = std::fs::remove_file(&self.path);
        if let Some(out) = &self.made_out {
            let _ = std::fs::remove_dir(out);
        }
    }
}

/// Checks, before a step is trained, where the run will save its model: `--name` must be a
/// plain model name, and an existing `<out>/<name>.json` or `.bpk` (the shipped models, an
/// earlier run's) is not written over unless the run may replace it ([`RecipeContext::replace`],
/// `--force`) or continues that model's own run (`--resume`). Never a library's own files.
fn check_target(
    recipe: &dyn Recipe,
    settings: &Settings,
    ctx: &RecipeContext<'_>,
) -> Result<Option<RunLock>, RecipeError> {
    let o = recipe.options();
    let has = |name: &str| o.iter().any(|x| x.name == name);
    if has("epochs") && settings.count(&o, "epochs")? == 0 {
        let starts_from_a_model = settings.path(&o, "init").is_some()
            || settings.path(&o, "fork").is_some()
            || settings.flag(&o, "resume");
        if !starts_from_a_model {
            return Err(RecipeError::Setting(
                "--epochs 0: a run of no epoch would save an untrained model; give at least 1 \
                 (0 only with --init, --fork or --resume); nothing was trained"
                    .into(),
            ));
        }
    }
    if has("batch") && settings.count(&o, "batch")? == 0 {
        return Err(RecipeError::Setting(
            "--batch 0: a step takes at least 1 item; nothing was trained".into(),
        ));
    }
    if !has("name") {
        return Ok(None);
    }
    let name = settings.text(&o, "name")?;
    crate::model::weights::check_name(&name)
        .map_err(|e| RecipeError::Setting(format!("--name: {e}; nothing was trained")))?;
    let out = settings
        .path(&o, "out")
        .or_else(|| settings.path(&o, "models"))
        .unwrap_or_else(|| ctx.models.clone());
    // One run at a time writes --out/--name (round 7 N81: two identical runs at once both
    // "finished", the second over the first's model without --force).
    let lock = RunLock::take(&out, &name)?;
    if recipe.writes_over_its_card() && !settings.flag(&o, "resume") {
        refuse_existing(&out, &name, ctx)?;
    }
    // A checkpoint that cannot be resumed from is said before the run reads its data (the
    // recipes' own checks, settings included, come after it: minutes of reading first).
    let checkpoints = out.join(format!("{name}.checkpoints"));
    if settings.flag(&o, "resume") && !(has("fork") && settings.path(&o, "fork").is_some()) {
        // Nothing to continue is said as such (round 10 N29: a raw "No such file or
        // directory", and an empty checkpoint folder left behind).
        if !checkpoints.exists() {
            return Err(RecipeError::Setting(format!(
                "--resume: there is no run of --out {} --name {name} to continue ({} is not \
                 there); drop --resume to train afresh; nothing was trained",
                out.display(),
                checkpoints.display()
            )));
        }
        super::checkpoint::check_state(&checkpoints)?;
    }
    if has("fork")
        && let Some(from) = settings.path(&o, "fork")
    {
        check_fork_source(&from)?;
    }
    // An unfinished run's checkpoints are what --resume continues: a new run of the same
    // --out/--name would write over them without a word (round 8 N16: an interrupted run's
    // ten epochs were gone). Its finished model is guarded by `refuse_existing`.
    let fork = has("fork") && settings.path(&o, "fork").is_some();
    if !settings.flag(&o, "resume")
        && !fork
        && !ctx.replace
        && !out.join(format!("{name}.json")).exists()
        && super::checkpoint::holds_epochs(&checkpoints)
    {
        // Its state unreadable or gone, the epochs are still the run's (round 9 N1).
        let reached = super::checkpoint::epochs_done(&checkpoints)
            .map_or("its state file unreadable".to_string(), |done| {
                format!("epoch {done}")
            });
        return Err(RecipeError::Setting(format!(
            "{} holds the checkpoints of an unfinished run of --out {} --name {name} \
             ({reached}): --resume continues it, --force starts afresh and discards them, or \
             choose another --name; nothing was trained",
            checkpoints.display(),
            out.display()
        )));
    }
    // Resuming a run whose model is saved and whose checkpoint has every epoch would train
    // nothing and write its model again under a new version: said, nothing done.
    if settings.flag(&o, "resume")
        && has("epochs")
        && out.join(format!("{name}.json")).is_file()
        && let Some(done) = super::checkpoint::epochs_done(&out.join(format!("{name}.checkpoints")))
        && done >= settings.count(&o, "epochs")?
    {
        return Err(RecipeError::Setting(format!(
            "--resume: the run of {} finished its {done} epochs and saved its model; nothing to \
             resume (give a higher --epochs with --resume to train on, or --fork it); nothing was \
             trained or written",
            out.join(format!("{name}.json")).display()
        )));
    }
    // An unfinished run resumed with fewer epochs than it reached would save its last
    // checkpoint as a finished run of that many epochs (round 16 N17: killed at epoch 8 of
    // 30, `--resume --epochs 2` saved the 8-epoch model as a 2-epoch run, without a word).
    if settings.flag(&o, "resume")
        && has("epochs")
        && !out.join(format!("{name}.json")).is_file()
        && let Some(done) = super::checkpoint::epochs_done(&out.join(format!("{name}.checkpoints")))
        && done > settings.count(&o, "epochs")?
    {
        return Err(RecipeError::Setting(format!(
            "--resume --epochs {}: the run reached epoch {done} before it stopped; give --epochs \
             {done} or more to continue it (or --fork it); nothing was trained or written",
            settings.count(&o, "epochs")?
        )));
    }
    Ok(Some(lock))
}

/// The checkpoint folder a `--fork` names: a card's run's (`NAME.json` -> `NAME.checkpoints`),
/// or the folder itself.
fn fork_dir(from: &Path) -> PathBuf {
    if from.extension().is_some_and(|e| e == "json") {
        from.with_extension("checkpoints")
    } else {
        from.to_path_buf()
    }
}

/// Refuses a `--fork` that names nothing to start from, in words, before anything is read or
/// made (round 10 N29: raw OS errors for a missing card or an image named).
fn check_fork_source(from: &Path) -> Result<(), RecipeError> {
    let dir = fork_dir(from);
    let refuse = |why: String| {
        Err(RecipeError::Setting(format!(
            "--fork {}: {why}; nothing was trained",
            from.display()
        )))
    };
    if from.extension().is_some_and(|e| e == "json") {
        if std::fs::symlink_metadata(from).is_err() && std::fs::symlink_metadata(&dir).is_err() {
            return refuse(format!(
                "no such model card, and no run's checkpoints at {}",
                dir.display()
            ));
        }
        if !dir.is_dir() {
            return refuse(format!(
                "{} is not there: the run that made this model kept no checkpoints (a shipped, \
                 imported or promoted copy cannot be forked; fork the run's own card)",
                dir.display()
            ));
        }
    } else if !from.is_dir() || !from.join("state.json").exists() {
        return refuse(
            "not a model card (NAME.json) nor a run's checkpoint folder (NAME.checkpoints)".into(),
        );
    }
    super::checkpoint::check_state(&dir)?;
    Ok(())
}

/// Refuses to write model `name` into `out` when it would land on a library's own files, or
/// when `<out>/<name>.json` or `.bpk` exists and the run may not replace it
/// ([`RecipeContext::replace`]): nothing is trained.
pub(crate) fn refuse_existing(
    out: &Path,
    name: &str,
    ctx: &RecipeContext<'_>,
) -> Result<(), RecipeError> {
    let card = out.join(format!("{name}.json"));
    for file in [card.clone(), crate::model::weights::record_path(&card)] {
        crate::plumbing::output::check_output(&file, Some(&ctx.library), true)
            .map_err(|e| RecipeError::Setting(format!("--out/--name: {e}; nothing was trained")))?;
        if std::fs::symlink_metadata(&file).is_ok() && !ctx.replace {
            return Err(RecipeError::Setting(format!(
                "{}: a model of --out {} --name {name} exists; nothing was trained or written \
                 (add --force to replace it, --resume to continue its run if it is one of this \
                 recipe, or choose another --name or --out)",
                file.display(),
                out.display()
            )));
        }
    }
    Ok(())
}

/// Saves a recorded run's model (card and record into `out`); a run whose model cannot be
/// saved is marked failed, not left finished without a model.
pub(crate) fn save_run_model(
    store: &mut Store,
    run_id: i64,
    module: &impl ModuleSnapshot,
    card: &crate::model::weights::ModelCard,
    out: &Path,
) -> Result<PathBuf, RecipeError> {
    let saved = keep_replaced(out, &card.name)
        .and_then(|()| crate::model::weights::save(module, card, out).map_err(Into::into));
    if saved.is_err() {
        let _ = store.write(|tx| store::finish_run(tx, run_id, "failed"));
    }
    saved
}

/// A model this run replaces (`--force`) is moved into `<out>/replaced/` first, under a free
/// name, as `model demote` keeps a demoted one (round 9 N32: a forced run over the shipped
/// folder's model kept no copy of it).
fn keep_replaced(out: &Path, name: &str) -> Result<(), RecipeError> {
    use crate::model::weights::record_path;
    let card = out.join(format!("{name}.json"));
    if !card.is_file() || !record_path(&card).is_file() {
        return Ok(());
    }
    let kept = out.join("replaced");
    let io = |p: &Path, e: std::io::Error| {
        RecipeError::Setting(format!(
            "{}: {e}; the model it would replace was left in place, nothing was saved",
            p.display()
        ))
    };
    std::fs::create_dir_all(&kept).map_err(|e| io(&kept, e))?;
    let to = crate::model::weights::free_card_path(&kept, name);
    std::fs::rename(record_path(&card), record_path(&to)).map_err(|e| io(&card, e))?;
    std::fs::rename(&card, &to).map_err(|e| io(&card, e))?;
    Ok(())
}

/// Marks the run finished, cancelled or failed, and returns the last epoch's metrics.
pub(crate) fn finish_run<T>(
    store: &mut Store,
    run_id: i64,
    epochs: usize,
    result: &Result<T, TrainError>,
) -> Result<Vec<(String, f64)>, RecipeError> {
    let status = match result {
        Ok(_) => "finished",
        Err(TrainError::Cancelled { .. }) => "cancelled",
        Err(_) => "failed",
    };
    store.write(|tx| store::finish_run(tx, run_id, status))?;
    Ok(store
        .run_metrics(run_id)?
        .into_iter()
        .filter(|(e, _, _)| *e == epochs)
        .map(|(_, n, v)| (n, v))
        .collect())
}

/// A model version no other run shares: the library's run id (unique in one library) and the
/// time it finished (runs of different libraries share ids). Embeddings are keyed by it, so a
/// library indexed with another model is never taken for current.
pub(crate) fn version_of(run_id: i64) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("run-{run_id}-{secs}")
}

/// How a run begins: from scratch, from its own last checkpoint (`--resume`: the same
/// settings, only `--epochs` may grow, so a finished run can be extended), or from another
/// run's last checkpoint with new settings (`--fork`: its weights, a fresh optimizer, epoch 1).
#[derive(Debug, Clone, PartialEq)]
pub enum Start {
    Fresh,
    Resume,
    /// A run's card (`NAME.json`) or its checkpoint folder (`NAME.checkpoints`).
    Fork(PathBuf),
}

impl From<bool> for Start {
    fn from(resume: bool) -> Start {
        if resume { Start::Resume } else { Start::Fresh }
    }
}

impl Start {
    /// From a recipe's `resume` flag and `fork` path.
    pub fn of(settings: &Settings, options: &[RecipeOption]) -> Result<Start, RecipeError> {
        let resume = settings.flag(options, "resume");
        match (resume, settings.path(options, "fork")) {
            (true, Some(_)) => Err(RecipeError::Setting(
                "--resume continues this run, --fork starts from another: one or the other".into(),
            )),
            (_, Some(from)) => Ok(Start::Fork(from)),
            (resume, None) => Ok(resume.into()),
        }
    }
}

/// The `fork` option every recipe with checkpoints offers.
pub fn fork_option() -> RecipeOption {
    RecipeOption::new(
        "fork",
        OptionKind::Path,
        None,
        "Start from another run's last checkpoint (its card or its .checkpoints folder) with \
         these settings: its weights, a fresh optimizer, epoch 1",
    )
}

/// The checkpoint to start from: this run's own when resuming (said to the observer), the
/// weights of another run's when forking, else `None`. `fresh` is a new model of the run's
/// configuration.
pub(crate) fn resume_from<M: Module + ModuleSnapshot>(
    start: impl Into<Start>,
    dir: &Path,
    config: &impl serde::Serialize,
    fresh: M,
    weight_decay: f64,
    observer: &mut dyn TrainObserver,
) -> Result<Option<Checkpoint<M>>, RecipeError> {
    let optimizer = burn::optim::AdamWConfig::new()
        .with_weight_decay(weight_decay as f32)
        .init();
    match start.into() {
        Start::Fresh => Ok(None),
        Start::Resume => {
            let c = Checkpoint::load(dir, config, fresh, optimizer)?;
            observer.message(&format!("resuming after epoch {}", c.epoch));
            Ok(Some(c))
        }
        Start::Fork(from) => {
            let from = fork_dir(&from);
            let (model, epoch) = super::checkpoint::load_weights(&from, fresh)?;
            observer.message(&format!(
                "forked from {} (its epoch {epoch}); this run starts at epoch 1",
                from.display()
            ));
            Ok(Some(Checkpoint {
                model,
                optimizer,
                epoch: 0,
            }))
        }
    }
}

/// What one recorded run gives back.
pub(crate) struct Recorded<M> {
    pub model: M,
    pub run_id: i64,
    /// The last epoch's metrics.
    pub last: Vec<(String, f64)>,
    pub seconds: f64,
}

/// Runs `train` as a run of `kind` recorded in the library: the run row with its config,
/// checkpoints and metrics every epoch, its final status whatever happens.
pub(crate) fn recorded<M, C: serde::Serialize>(
    store: &mut Store,
    kind: &str,
    config: &C,
    epochs: usize,
    checkpoints: PathBuf,
    observer: &mut dyn TrainObserver,
    train: impl FnOnce(&mut RunEvents<'_, C>) -> Result<M, TrainError>,
) -> Result<Recorded<M>, RecipeError> {
    let config_json = serde_json::to_string(config).expect("configs serialise");
    let run_id = store.write(|tx| store::start_run(tx, None, kind, &config_json))?;
    let started = std::time::Instant::now();
    let mut events = RunEvents {
        checkpoints,
        config,
        epochs,
        store: &mut *store,
        run_id,
        observer,
    };
    let result = train(&mut events);
    let last = finish_run(store, run_id, epochs, &result)?;
    Ok(Recorded {
        model: result?,
        run_id,
        last,
        seconds: started.elapsed().as_secs_f64(),
    })
}
