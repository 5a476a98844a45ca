//! Promote and demote: which model a library uses for each capability. A library starts on the
//! shipped models (`models/`). Promoting a run's model gives the library its own models folder,
//! `models/` beside the library (seeded once with copies of the shipped cards), in which the
//! run's model takes the capability's name (`twin-image`, `tracklet-head`, `captions`,
//! `prompts`, ...); the model it replaces moves to `models/previous/`, one click from coming
//! back (demote). The active card records where it came from (`promoted_from`). Every panel
//! reads the library's folder once it exists ([`models_dir_for`]).

use crate::model::weights::{self, ModelKind, Promotion};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum PromoteError {
    #[error(transparent)]
    Weights(#[from] weights::WeightsError),
    #[error("{path}: {}", crate::plumbing::input::plain_io(.io))]
    Io { path: String, io: std::io::Error },
    #[error("{card}: a {kind} is not a model any panel uses; nothing was promoted")]
    NotPromotable { card: String, kind: ModelKind },
    #[error("{0}: no earlier model to go back to (nothing was changed)")]
    NothingToDemote(String),
    #[error(
        "{0}: the library has no promoted model of that name (it has: {1}); nothing was changed"
    )]
    NotACapability(String, String),
    #[error(
        "{0} already exists and is not this library's models folder (it has no ACTIVE marker; its files are someone else's): move it away, then promote again; nothing was changed"
    )]
    ForeignModelsFolder(String),
    #[error(
        "{0} is a link to {1}: a library's models folder is its own (another library's active models would change); remove the link, then promote or demote again; nothing was changed"
    )]
    LinkedModelsFolder(String, String),
    #[error(
        "{0}: a library on a server keeps no models of its own yet (they would land in a folder of this workstation, named after the server, shared by every database on it): give the model to each workstation with --models or ENDOTWIN_MODELS; nothing was changed"
    )]
    ServerLibrary(String),
    #[error(
        "{0}: the library database is damaged ({1}); its models were not changed (`endotwin library check` names every problem)"
    )]
    Damaged(String, String),
    #[error(
        "{card} holds model {found}, but run #{run} saved {saved}: the run's output was replaced since; nothing was promoted"
    )]
    NotTheRunsModel {
        card: String,
        run: i64,
        saved: String,
        found: String,
    },
    #[error(
        "{0}: another promote or demote is changing this library's models right now; nothing was changed (try again when it is done)"
    )]
    Busy(String),
    #[error("{0}; nothing was changed (`endotwin library check` names every problem)")]
    Marker(String),
    #[error(
        "the library's active {name} is damaged ({reason}); promoting over it would push it into previous/ in place of the model kept for demote: `endotwin model demote {name}` goes back to that one (or remove the damaged card and its record); nothing was changed"
    )]
    ActiveDamaged { name: String, reason: String },
    #[error("{card}: it is already the library's {name} (version {version}); nothing was changed")]
    AlreadyActive {
        card: String,
        name: String,
        version: String,
    },
}

/// The folder that holds a library's own models: `models/` beside its database.
pub fn active_dir(library: &Path) -> PathBuf {
    library_folder(library).join("models")
}

/// The folder a library's panels load models from: its own when a model was ever promoted
/// in it, else the shipped one. A server library has none of its own (see
/// [`PromoteError::ServerLibrary`]).
pub fn models_dir_for(library: &Path) -> PathBuf {
    let own = active_dir(library);
    // A promote or demote killed midway is finished before its models are read (when no
    // other one holds the lock: it finishes its own).
    if own.join(super::model_moves::JOURNAL).exists() {
        let _ = lock_models(library);
    }
    if crate::store::library_url(library).is_none() && is_library_models(&own) {
        own
    } else {
        crate::default_models_dir()
    }
}

pub use crate::plumbing::output::{is_library_models, models_marker_problem};

/// The name a model of `kind` has among the active models, if a panel uses that kind.
pub fn active_name(kind: ModelKind) -> Option<&'static str> {
    Some(match kind {
        ModelKind::ImageEncoder => crate::twins::IMAGE_MODEL,
        ModelKind::SceneEncoder => crate::twins::SCENE_MODEL,
        ModelKind::TrackletHead => crate::tracklets::HEAD_NAME,
        ModelKind::TrackletEncoder => crate::tracklets::MODEL_NAME,
        ModelKind::CaptionModel => crate::captions::model::SHIPPED_NAME,
        ModelKind::PromptModel => crate::prompts::model::SHIPPED_NAME,
        _ => return None,
    })
}

/// The capability name the model of `card` (read from `path`) would hold: as
/// [`active_name`], but a prompt model that reads only the two stage-1 sentences is the
/// library's detector (`prompts-detect`), not its prompt model.
pub fn active_name_of(card: &weights::ModelCard, path: &Path) -> Option<&'static str> {
    if card.kind == ModelKind::PromptModel
        && card
            .config::<crate::prompts::model::PromptModelConfig>(path)
            .is_ok_and(|c| crate::prompts::model::is_detector_only(&c))
    {
        return Some(crate::prompts::model::SHIPPED_DETECTOR);
    }
    active_name(card.kind)
}

/// What a promotion did.
#[derive(Debug, Clone, PartialEq)]
pub struct Promoted {
    /// The capability's model name it now holds.
    pub name: String,
    pub kind: ModelKind,
    /// The library's models folder.
    pub dir: PathBuf,
    /// Whether an earlier model was kept for demote.
    pub kept_previous: bool,
    /// The polyp detector (`prompts-detect`) a prompt model's run made, promoted with it
    /// (round 14 N5: it was replaced without a word).
    pub detector: Option<String>,
}

/// Makes the model of `card` (a run's) the library's active one for its capability.
pub fn promote(library: &Path, card: &Path, run: Option<i64>) -> Result<Promoted, PromoteError> {
    refuse_server(library)?;
    let saved = check_library(library, run)?;
    let _lock = lock_models(library)?;
    let read = weights::read_card(card)?;
    // The card must still be the model the run saved (or one made of it: `model half` and
    // the code settings add to its version): a card replaced after the run (another model
    // copied over it) would be promoted under the run's name.
    if let (Some(run), Some(saved)) = (run, saved)
        && !read.version.starts_with(&saved)
    {
        return Err(PromoteError::NotTheRunsModel {
            card: card.display().to_string(),
            run,
            saved,
            found: read.version,
        });
    }
    let Some(name) = active_name_of(&read, card) else {
        return Err(PromoteError::NotPromotable {
            card: card.display().to_string(),
            kind: read.kind,
        });
    };
    // The record must be there and match before anything moves.
    let record = weights::record_path(card);
    if !record.is_file() {
        return Err(PromoteError::Io {
            path: record.display().to_string(),
            io: std::io::Error::new(std::io::ErrorKind::NotFound, "weights missing"),
        });
    }
    weights::verify_pair(card)?;
    // Promoting the active model again would push it over the one demote goes back to.
    let current = active_dir(library).join(format!("{name}.json"));
    if is_library_models(&active_dir(library))
        && let Ok(active) = weights::read_card(&current)
        && active.version == read.version
    {
        return Err(PromoteError::AlreadyActive {
            card: card.display().to_string(),
            name: name.to_string(),
            version: read.version,
        });
    }
    // The active model must be whole before it is kept for demote: a damaged one pushed
    // into previous/ would replace the model demote goes back to (round 7 N75). Before the
    // first promotion the active one is the shipped folder's, which seeding copies (round 8
    // N2: a damaged shipped record went into previous/ without a word).
    let current = match is_library_models(&active_dir(library)) {
        true => current,
        false => crate::default_models_dir().join(format!("{name}.json")),
    };
    if std::fs::symlink_metadata(&current).is_ok()
        && let Err(e) = weights::verify_pair(&current)
    {
        return Err(PromoteError::ActiveDamaged {
            name: name.to_string(),
            reason: e.to_string(),
        });
    }
    // The active model is this run's own under another version (its card halved, say):
    // it is set aside in demoted/, and previous/ keeps the model before the run (round 11
    // N9: the run's first version took its place and the library's original was lost to
    // demote).
    let same_run = run.is_some()
        && is_library_models(&active_dir(library))
        && weights::read_card(&active_dir(library).join(format!("{name}.json")))
            .is_ok_and(|a| a.promoted_from.as_ref().is_some_and(|p| p.run == run));
    let dir = seeded(library)?;
    let previous = dir.join("previous");
    mkdir(&previous)?;
    let target = dir.join(format!("{name}.json"));
    let displaced = if same_run {
        let demoted = dir.join("demoted");
        mkdir(&demoted)?;
        Some(weights::free_card_path(&demoted, name))
    } else {
        target
            .is_file()
            .then(|| previous.join(format!("{name}.json")))
    };
    let kept_previous = previous.join(format!("{name}.json")).is_file() || displaced.is_some();
    let promotion = Promotion {
        card: card.display().to_string(),
        run,
        at: crate::store::now_utc(),
    };
    // A prompt model brings its polyp detector (stage 1) when its run made one: checked
    // before either moves, installed as the model is (journaled, the one before kept for
    // demote), and marked with the same promotion so `demote prompts` puts both back.
    let detector_source = card.with_file_name(format!(
        "{}-detect.json",
        card.file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
    ));
    let with_detector = read.kind == ModelKind::PromptModel
        && name != crate::prompts::model::SHIPPED_DETECTOR
        && detector_source.is_file();
    if with_detector {
        weights::verify_pair(&detector_source)?;
    }
    install(card, &target, displaced, {
        let promotion = promotion.clone();
        |c| {
            c.name = name.to_string();
            c.promoted_from = Some(promotion);
        }
    })?;
    let mut detector = None;
    if with_detector {
        let det = crate::prompts::model::SHIPPED_DETECTOR;
        let target = dir.join(format!("{det}.json"));
        let displaced = target
            .is_file()
            .then(|| previous.join(format!("{det}.json")));
        install(&detector_source, &target, displaced, |c| {
            c.name = det.to_string();
            c.promoted_from = Some(promotion);
        })?;
        detector = Some(det.to_string());
    }
    Ok(Promoted {
        name: name.to_string(),
        kind: read.kind,
        dir,
        kept_previous,
        detector,
    })
}

/// Whether the library keeps an earlier model of `name` to go back to.
pub fn can_demote(library: &Path, name: &str) -> bool {
    active_dir(library)
        .join("previous")
        .join(format!("{name}.json"))
        .is_file()
}

/// Puts back the model `name` had before the last promotion. The demoted one leaves the
/// active models for `demoted/` (kept, never deleted: promote its run again to use it), so a
/// second demote finds nothing earlier and says so instead of swapping back.
/// What a demotion did: where the demoted model is kept, and the detector put back with a
/// prompt model when one was promoted with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Demoted {
    pub kept_as: PathBuf,
    pub detector: Option<String>,
}

pub fn demote(library: &Path, name: &str) -> Result<Demoted, PromoteError> {
    refuse_server(library)?;
    check_library(library, None)?;
    // A capability's name, never a path (round 9 N12: `demote ../captions` moved the active
    // model out of models/, and `../../x/y` moved files outside the library).
    weights::check_name(name).map_err(|_| {
        PromoteError::NotACapability(name.to_string(), active_names(&active_dir(library)))
    })?;
    let _lock = lock_models(library)?;
    let dir = active_dir(library);
    let previous = dir.join("previous").join(format!("{name}.json"));
    if !previous.is_file() {
        if !dir.join(format!("{name}.json")).is_file() {
            return Err(PromoteError::NotACapability(
                name.to_string(),
                active_names(&dir),
            ));
        }
        return Err(PromoteError::NothingToDemote(name.to_string()));
    }
    // The model to go back to must load: a damaged one is named, nothing is moved.
    weights::verify_pair(&previous)?;
    let active = dir.join(format!("{name}.json"));
    let demoted_dir = dir.join("demoted");
    mkdir(&demoted_dir)?;
    let demoted = weights::free_card_path(&demoted_dir, name);
    // One journaled step: killed midway, the next promote, demote or load finishes it.
    let mut moves = Vec::new();
    if active.is_file() {
        moves.extend(super::model_moves::model_moves(&active, &demoted));
    }
    moves.extend(super::model_moves::model_moves(&previous, &active));
    // The detector promoted with this prompt model goes back with it (round 14 N5: it stayed,
    // a pairing never trained together).
    let mut detector = None;
    if name == crate::prompts::model::SHIPPED_NAME {
        let det = crate::prompts::model::SHIPPED_DETECTOR;
        let det_active = dir.join(format!("{det}.json"));
        let det_previous = dir.join("previous").join(format!("{det}.json"));
        let promotion = |p: &Path| weights::read_card(p).ok().and_then(|c| c.promoted_from);
        if det_previous.is_file()
            && promotion(&active).is_some()
            && promotion(&active) == promotion(&det_active)
        {
            weights::verify_pair(&det_previous)?;
            let det_demoted = weights::free_card_path(&demoted_dir, det);
            moves.extend(super::model_moves::model_moves(&det_active, &det_demoted));
            moves.extend(super::model_moves::model_moves(&det_previous, &det_active));
            detector = Some(det.to_string());
        }
    }
    super::model_moves::journaled(&dir, &moves).map_err(|e| io(&dir, e))?;
    Ok(Demoted {
        kept_as: demoted,
        detector,
    })
}

/// The names of the models promoted into the library's models folder `dir`, for a message:
/// those a promotion put there or that have a model to go back to, not the shipped copies the
/// first promotion made beside them (round 10 N32).
fn active_names(dir: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_suffix(".json").map(str::to_string)
        })
        .filter(|n| weights::check_name(n).is_ok())
        .filter(|n| {
            dir.join("previous").join(format!("{n}.json")).is_file()
                || weights::read_card(&dir.join(format!("{n}.json")))
                    .is_ok_and(|c| c.promoted_from.is_some())
        })
        .collect();
    names.sort();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// After a promotion or demotion of `name`: the twin index rebuilt with the library's twin
/// models when `name` is one of them ((stats, the encoder's version)); other capabilities key
/// their caches by model version and re-encode on next use, so `None`.
pub fn reindex_after(
    library: &Path,
    name: &str,
    device: &burn::tensor::Device,
    progress: &crate::plumbing::Progress,
) -> Result<Option<(crate::twins::IndexStats, String)>, String> {
    if name != crate::twins::IMAGE_MODEL && name != crate::twins::SCENE_MODEL {
        return Ok(None);
    }
    progress.stage("rebuilding the twin index with the new model", 0);
    let mut store = crate::store::Store::open(library, crate::store::OpenMode::Existing)
        .map_err(|e| e.to_string())?;
    let models = crate::twins::TwinModels::load(&models_dir_for(library), device)
        .map_err(|e| e.to_string())?;
    let stats =
        crate::twins::index_library(&mut store, &models, progress).map_err(|e| e.to_string())?;
    Ok(Some((stats, models.version())))
}

/// A PostgreSQL library: its "folder" is a URL, so promote and demote are refused.
fn refuse_server(library: &Path) -> Result<(), PromoteError> {
    match crate::store::library_url(library) {
        Some(url) => Err(PromoteError::ServerLibrary(url.to_string())),
        None => Ok(()),
    }
}

/// Opens the library's database, when it has one, once: refused when it fails its integrity
/// check (its models are not changed either: the index rebuild after a promotion would be
/// refused, leaving the two apart); else the model version run `run` saved, if any.
fn check_library(library: &Path, run: Option<i64>) -> Result<Option<String>, PromoteError> {
    // models/ that is a link: promote and demote would change the active models of whatever
    // it leads to (round 12 N18: another library's).
    let dir = active_dir(library);
    if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
        let target = std::fs::canonicalize(&dir)
            .map(|t| t.display().to_string())
            .unwrap_or_else(|_| "nothing".into());
        return Err(PromoteError::LinkedModelsFolder(
            dir.display().to_string(),
            target,
        ));
    }
    if let Some(problem) = models_marker_problem(&active_dir(library)) {
        return Err(PromoteError::Marker(problem));
    }
    let db = crate::store::resolve_db_path(library);
    if !db.is_file() {
        return Ok(None);
    }
    let damaged =
        |e: &dyn std::fmt::Display| PromoteError::Damaged(db.display().to_string(), e.to_string());
    let store = crate::store::Store::open_read_only(library).map_err(|e| damaged(&e))?;
    if let Some(first) = store
        .integrity_problems(None)
        .map_err(|e| damaged(&e))?
        .first()
    {
        return Err(damaged(first));
    }
    match run {
        Some(run) => store.run_model_version(run).map_err(|e| damaged(&e)),
        None => Ok(None),
    }
}

/// Held while a promote or demote changes a library's models folder: a second one at the
/// same time is refused (two demotes at once left a library with no twin encoder). The
/// lock is the operating system's on `.models.lock` beside the database, so a killed
/// process never leaves it held.
fn lock_models(library: &Path) -> Result<ModelsLock, PromoteError> {
    let folder = library_folder(library);
    mkdir(&folder)?;
    let path = folder.join(".models.lock");
    // A FIFO or device there is refused, not opened (opening a FIFO blocks: round 7 N62).
    if std::fs::symlink_metadata(&path).is_ok_and(|m| !m.is_file()) {
        return Err(io(
            &path,
            std::io::Error::other(
                "not a regular file (a FIFO, device or link) where promote and demote keep their lock; remove it; nothing was changed",
            ),
        ));
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| io(&path, e))?;
    match file.try_lock() {
        Ok(()) => {
            let lock = ModelsLock { path, _file: file };
            // A promote or demote killed midway is finished before anything else.
            let dir = active_dir(library);
            super::model_moves::finish_interrupted(&dir).map_err(|e| io(&dir, e))?;
            Ok(lock)
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(PromoteError::Busy(folder.display().to_string()))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(io(&path, e)),
    }
}

/// [`lock_models`]'s lock: its file goes when the promote or demote is done (round 7 N7: a
/// refused promote left `.models.lock` behind).
struct ModelsLock {
    path: PathBuf,
    _file: std::fs::File,
}

impl Drop for ModelsLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Says that a library's models folder is in use (written once it is seeded).
const MARKER: &str = crate::plumbing::output::MODELS_MARKER;

/// The library's models folder, created and seeded with copies of the shipped models (cards
/// and records) on first use.
fn seeded(library: &Path) -> Result<PathBuf, PromoteError> {
    let dir = active_dir(library);
    if dir.join(MARKER).is_file() {
        return Ok(dir);
    }
    // A `models/` folder the user keeps beside the library is theirs: adopting it would mix
    // their files with the library's models (an unrelated `prompts.json` became the
    // library's prompt model).
    let holds_files = std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some());
    if holds_files || (dir.exists() && !dir.is_dir()) {
        return Err(PromoteError::ForeignModelsFolder(dir.display().to_string()));
    }
    mkdir(&dir)?;
    let seed = || -> Result<(), PromoteError> {
        let shipped = crate::default_models_dir();
        if let Ok(entries) = std::fs::read_dir(&shipped) {
            for entry in entries.flatten() {
                let path = entry.path();
                let is_card = path.extension().is_some_and(|e| e == "json");
                if is_card && weights::record_path(&path).is_file() {
                    let to = dir.join(entry.file_name());
                    if !to.exists() {
                        copy_model(&path, &to)?;
                    }
                }
            }
        }
        std::fs::write(
            dir.join(MARKER),
            "This library's active models; `previous/` holds the ones promotions replaced.\n",
        )
        .map_err(|source| io(&dir, source))
    };
    // Seeding cut short (a full disk) takes its folder with it: a half-seeded models/
    // without its marker would be taken for a folder of the user's from then on.
    if let Err(e) = seed() {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    Ok(dir)
}

/// Copies library `from`'s own models folder (its promoted models, `previous/` and
/// `demoted/`) beside library `to`, each file read back and compared; `None` when `from` has
/// none (it reads the shipped models). Refused, with nothing copied, when `to` already has a
/// models folder.
pub fn copy_active_models(
    from: &Path,
    to: &Path,
) -> Result<Option<(PathBuf, usize)>, PromoteError> {
    let source = active_dir(from);
    if !is_library_models(&source) {
        return Ok(None);
    }
    let target = active_dir(to);
    if target.exists() {
        return Err(io(
            &target,
            std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "the copy already has a models folder (its promoted models were not copied)",
            ),
        ));
    }
    verify_models_folder(&source)?;
    let mut copied = 0;
    let mut folders = vec![(source, target.clone())];
    while let Some((from_dir, to_dir)) = folders.pop() {
        mkdir(&to_dir)?;
        let entries = std::fs::read_dir(&from_dir).map_err(|e| io(&from_dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io(&from_dir, e))?;
            let (path, to_path) = (entry.path(), to_dir.join(entry.file_name()));
            let kind = entry.file_type().map_err(|e| io(&path, e))?;
            if kind.is_dir() {
                folders.push((path, to_path));
            } else if kind.is_file() {
                std::fs::copy(&path, &to_path).map_err(|e| io(&path, e))?;
                let same = std::fs::read(&path).map_err(|e| io(&path, e))?
                    == std::fs::read(&to_path).map_err(|e| io(&to_path, e))?;
                if !same {
                    return Err(io(
                        &to_path,
                        std::io::Error::other("read back differs from the original"),
                    ));
                }
                copied += 1;
            }
        }
    }
    Ok(Some((target, copied)))
}

/// Every model in a library's own models folder (its `previous/` and `demoted/` too) read
/// and checked against its card; a FIFO, device or link there is refused. `library copy`
/// runs it before anything is copied: a broken model is refused as changed media are.
pub fn verify_models_folder(source: &Path) -> Result<(), PromoteError> {
    if let Some(problem) = models_marker_problem(source) {
        return Err(PromoteError::Marker(problem));
    }
    let mut pending = vec![source.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| io(&dir, e))? {
            let entry = entry.map_err(|e| io(&dir, e))?;
            let path = entry.path();
            let kind = entry.file_type().map_err(|e| io(&path, e))?;
            if kind.is_dir() {
                pending.push(path);
            } else if !kind.is_file() {
                return Err(io(
                    &path,
                    std::io::Error::other(
                        "not a regular file (a FIFO, device or link) among the library's models; nothing was copied",
                    ),
                ));
            } else if path.extension().is_some_and(|e| e == "json")
                && weights::record_path(&path).is_file()
            {
                weights::verify_pair(&path)?;
            }
        }
    }
    Ok(())
}

/// The folder a library lives in (the library path itself when it is a folder).
pub fn library_folder(library: &Path) -> PathBuf {
    let library = std::fs::canonicalize(library).unwrap_or_else(|_| library.to_path_buf());
    if library.is_dir() {
        library
    } else {
        library.parent().map(Path::to_path_buf).unwrap_or_default()
    }
}

/// Why run `run` of `recipe`, now `status`, has no model to promote, in words: a finished
/// run without one is a stage a recipe of several records on its own (round 14 N21: "only
/// finished runs can be promoted" about a run `info` lists as finished).
pub fn no_model_to_promote(run: i64, recipe: &str, status: &str) -> String {
    if status == "finished" {
        format!(
            "run #{run} ({recipe}) finished without a model of its own to promote: it is a stage \
             of a longer run (as `train prompts` records its cleansing and attunement stages), \
             whose last run saved the model; `endotwin info` lists the runs"
        )
    } else {
        format!(
            "run #{run} ({recipe}) is {status} and saved no model; only a finished run's model can be promoted"
        )
    }
}

fn io(path: &Path, io: std::io::Error) -> PromoteError {
    PromoteError::Io {
        path: path.display().to_string(),
        io,
    }
}

fn mkdir(path: &Path) -> Result<(), PromoteError> {
    std::fs::create_dir_all(path).map_err(|e| io(path, e))
}

/// Copies a card and its record (record first, so a card never points at nothing).
/// Puts the model of `card` at `target` with its card rewritten by `update`, the model there
/// before moved to `previous` (when given). The new model is copied and checked under a
/// staging name beside `target` first, so a failed copy (a full disk, round 7 N68) changes
/// nothing; what follows are renames within the library's models folder.
fn install(
    card: &Path,
    target: &Path,
    previous: Option<std::path::PathBuf>,
    update: impl FnOnce(&mut weights::ModelCard),
) -> Result<(), PromoteError> {
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    let staged = target.with_file_name(format!(".incoming-{name}"));
    let remove_staged = || {
        let _ = std::fs::remove_file(&staged);
        let _ = std::fs::remove_file(weights::record_path(&staged));
    };
    remove_staged();
    let ready = copy_model(card, &staged)
        .and_then(|()| weights::update_card(&staged, update).map_err(PromoteError::from))
        .and_then(|()| {
            weights::verify_pair(&staged)
                .map(drop)
                .map_err(PromoteError::from)
        });
    if let Err(e) = ready {
        remove_staged();
        return Err(e);
    }
    // The active model out and the staged one in as one journaled step (round 12 N21: a kill
    // between the renames left a card without its record).
    let mut moves = Vec::new();
    if let Some(previous) = &previous {
        moves.extend(super::model_moves::model_moves(target, previous));
    }
    moves.extend(super::model_moves::model_moves(&staged, target));
    let dir = target.parent().unwrap_or(Path::new("."));
    super::model_moves::journaled(dir, &moves).map_err(|e| io(dir, e))
}

fn copy_model(card: &Path, to: &Path) -> Result<(), PromoteError> {
    let (from_r, to_r) = (weights::record_path(card), weights::record_path(to));
    std::fs::copy(&from_r, &to_r).map_err(|e| io(&from_r, e))?;
    std::fs::copy(card, to).map_err(|e| io(card, e))?;
    Ok(())
}
