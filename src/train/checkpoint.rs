//! Checkpoints for `--resume`: after each epoch, the model and the optimizer state go to
//! `<dir>/epoch-NNN/`, then `<dir>/state.json` (written last, atomically) names the epoch.
//! A crash mid-write leaves the previous checkpoint in force.

use super::TrainError;
use burn::module::Module;
use burn::optim::ModuleOptimizer;
use burn::store::{BurnpackStore, ModuleSnapshot};
use burn::tensor::Bytes;
use serde::{Deserialize, Serialize};
use std::path::Path;

pub struct Checkpoint<M> {
    pub model: M,
    pub optimizer: ModuleOptimizer,
    /// Epochs finished.
    pub epoch: usize,
}

impl<M> Checkpoint<M> {
    /// Where a training loop starts: `start` when it resumes, else epoch 0 with a fresh model
    /// from `init` (the device seeded with `seed` first, so a run is reproducible) and a fresh
    /// AdamW with `weight_decay`.
    pub fn resume_or_fresh(
        start: Option<Checkpoint<M>>,
        device: &burn::tensor::Device,
        seed: u64,
        weight_decay: f64,
        init: impl FnOnce(&burn::tensor::Device) -> M,
    ) -> Checkpoint<M> {
        start.unwrap_or_else(|| {
            device.seed(seed);
            Checkpoint {
                model: init(device),
                optimizer: burn::optim::AdamWConfig::new()
                    .with_weight_decay(weight_decay as f32)
                    .init(),
                epoch: 0,
            }
        })
    }
}

#[derive(Serialize, Deserialize)]
struct State {
    epoch: usize,
    /// The training config, so a resume with different settings is caught.
    config: serde_json::Value,
    /// SHA-256 of the checkpoint's model.bpk and optimizer.bpk: a file damaged on disk is
    /// refused by name at resume, not trained on (absent in checkpoints of older versions).
    #[serde(default)]
    model_sha256: Option<String>,
    #[serde(default)]
    optimizer_sha256: Option<String>,
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    crate::model::weights::hex(&Sha256::digest(bytes))
}

/// Refuses `bytes` of `path` when they do not hash to what the checkpoint recorded.
fn check_sha(path: &Path, bytes: &[u8], expected: Option<&str>) -> Result<(), TrainError> {
    match expected {
        Some(want) if sha256(bytes) != want => Err(err(
            "damaged on disk (its SHA-256 is not the one the checkpoint recorded):",
            path,
            "nothing was trained; --fork an earlier run or train afresh",
        )),
        _ => Ok(()),
    }
}

fn err(what: &str, path: &Path, e: impl std::fmt::Display) -> TrainError {
    TrainError::Checkpoint(format!("{what} {}: {e}", path.display()))
}

/// A checkpoint file's bytes, never opened unless a regular file (a FIFO would block the open
/// for ever, a device never end).
fn read_regular(path: &Path, what: &str) -> Result<Vec<u8>, TrainError> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_file()) {
        return Err(err(
            "not a regular file (a FIFO, device or link), not read:",
            path,
            "nothing was trained",
        ));
    }
    std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory => TrainError::Checkpoint(
            format!(
                "{what} {}: the file is not there (a run saves its checkpoint after its first epoch); nothing was trained",
                path.display()
            ),
        ),
        _ => err(what, path, e),
    })
}

/// The epochs the checkpoint in `dir` has finished, when there is one.
pub(crate) fn epochs_done(dir: &Path) -> Option<usize> {
    read_state(dir).ok().map(|s| s.epoch)
}

/// Whether `dir` holds any epoch's checkpoint (`epoch-NNN`), whatever its state file says.
pub(crate) fn holds_epochs(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("epoch-"))
    })
}

/// The epochs of the checkpoint in `dir`, or why it cannot be resumed from (missing, not a
/// regular file, unreadable, changed by hand): asked before a run reads its data.
pub(crate) fn check_state(dir: &Path) -> Result<usize, TrainError> {
    read_state(dir).map(|s| s.epoch)
}

fn read_state(dir: &Path) -> Result<State, TrainError> {
    let state_path = dir.join("state.json");
    let text = read_regular(&state_path, "no checkpoint at")?;
    let state: State =
        serde_json::from_slice(&text).map_err(|e| err("unreadable", &state_path, e))?;
    // An epoch the run could not have reached, or whose folder is not there, is a state
    // changed by hand: refused in words before anything is read or trained (round 7 N19).
    let planned = state.config.get("epochs").and_then(|e| e.as_u64());
    let folder = dir.join(format!("epoch-{:03}", state.epoch));
    if state.epoch == 0 || planned.is_some_and(|p| state.epoch as u64 > p) {
        return Err(TrainError::Checkpoint(format!(
            "{} names epoch {} of a run planned for {} epochs: it was changed by hand; nothing \
             was trained: --fork an earlier run or train afresh",
            state_path.display(),
            state.epoch,
            planned.map_or("an unknown number of".into(), |p| p.to_string())
        )));
    }
    if !folder.is_dir() {
        return Err(TrainError::Checkpoint(format!(
            "{} names epoch {}, whose checkpoint folder {} is not there; nothing was trained: \
             --fork an earlier run or train afresh",
            state_path.display(),
            state.epoch,
            folder.display()
        )));
    }
    Ok(state)
}

/// `model` with the weights of checkpoint `folder` (an `epoch-NNN/`).
fn load_model<M: Module + ModuleSnapshot>(
    folder: &Path,
    mut model: M,
    sha: Option<&str>,
) -> Result<M, TrainError> {
    let model_path = folder.join("model.bpk");
    let bytes = read_regular(&model_path, "cannot read")?;
    check_sha(&model_path, &bytes, sha)?;
    let result = model
        .load_from(&mut BurnpackStore::from_bytes(Some(Bytes::from_bytes_vec(
            bytes,
        ))))
        .map_err(|e| another_model(&model_path, e))?;
    if let Some(e) = result.errors.first() {
        return Err(another_model(&model_path, e));
    }
    Ok(model)
}

/// A checkpoint whose tensors are not this run's model's, said in a line (round 10 N29: every
/// missing tensor's name, some 15,000 characters), with the kind of model its card names.
fn another_model(model_path: &Path, e: impl std::fmt::Display) -> TrainError {
    // Burn lists every tensor it missed: counted, not listed (round 11 R10); a shape that
    // differs is said in its own words, cut short.
    let detail = e.to_string();
    let detail = if detail.contains("Missing tensors") || detail.contains("Unused tensors") {
        format!(
            " [{} of this run's tensors are not in it]",
            detail.matches("(\"").count().max(1)
        )
    } else {
        match detail.char_indices().nth(160) {
            Some((cut, _)) => format!(" [{}...]", &detail[..cut]),
            None => format!(" [{detail}]"),
        }
    };
    // <run>.checkpoints/epoch-NNN/model.bpk -> <run>.json
    let card = model_path
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.with_extension("json"))
        .and_then(|card| crate::model::weights::read_card(&card).ok());
    let what = card.map_or(String::new(), |c| {
        let by = c
            .training
            .as_ref()
            .and_then(|t| {
                let words: Vec<&str> = t.command.split_whitespace().collect();
                words
                    .iter()
                    .position(|w| *w == "train")
                    .and_then(|i| words.get(i + 1))
                    .map(|r| format!(", trained by `train {r}`"))
            })
            .unwrap_or_default();
        format!(" (its card: {} `{}`{by})", c.kind, c.name)
    });
    TrainError::Checkpoint(format!(
        "{}: holds another model than this run trains{what}; --fork or --resume a run of the \
         same recipe and architecture; nothing was trained{detail}",
        model_path.display()
    ))
}

/// The weights of the last checkpoint in `dir` put into `model` (of the same architecture,
/// whatever the training settings were), with the epochs that checkpoint had finished: where
/// a forked run starts.
pub fn load_weights<M: Module + ModuleSnapshot>(
    dir: &Path,
    model: M,
) -> Result<(M, usize), TrainError> {
    let state = read_state(dir)?;
    let folder = dir.join(format!("epoch-{:03}", state.epoch));
    Ok((
        load_model(&folder, model, state.model_sha256.as_deref())?,
        state.epoch,
    ))
}

impl<M: Module + ModuleSnapshot> Checkpoint<M> {
    pub fn save(&self, dir: &Path, config: &impl Serialize) -> Result<(), TrainError> {
        let folder = dir.join(format!("epoch-{:03}", self.epoch));
        std::fs::create_dir_all(&folder).map_err(|e| err("cannot create", &folder, e))?;
        let mut store = BurnpackStore::from_bytes(None);
        self.model
            .save_into(&mut store)
            .map_err(|e| err("cannot save the model to", &folder, e))?;
        let bytes = store
            .get_bytes()
            .map_err(|e| err("cannot save the model to", &folder, e))?;
        let model_path = folder.join("model.bpk");
        std::fs::write(&model_path, &bytes[..]).map_err(|e| err("cannot write", &model_path, e))?;
        let optimizer = self
            .optimizer
            .into_bytes()
            .map_err(|e| err("cannot save the optimizer to", &folder, e))?;
        let optimizer_path = folder.join("optimizer.bpk");
        std::fs::write(&optimizer_path, &optimizer[..])
            .map_err(|e| err("cannot write", &optimizer_path, e))?;
        let state = State {
            epoch: self.epoch,
            config: serde_json::to_value(config).map_err(|e| err("cannot describe", dir, e))?,
            model_sha256: Some(sha256(&bytes[..])),
            optimizer_sha256: Some(sha256(&optimizer[..])),
        };
        let tmp = dir.join("state.json.partial");
        let json = serde_json::to_vec_pretty(&state).expect("state serialises");
        std::fs::write(&tmp, json)
            .and_then(|()| std::fs::rename(&tmp, dir.join("state.json")))
            .map_err(|e| err("cannot write", &dir.join("state.json"), e))?;
        // Keep this checkpoint and the one before it.
        if self.epoch >= 2 {
            let old = dir.join(format!("epoch-{:03}", self.epoch - 2));
            let _ = std::fs::remove_dir_all(old);
        }
        Ok(())
    }

    /// The checkpoint in `dir`, loaded into `model` and `optimizer` (fresh ones of the same
    /// configuration). Refused when `config` differs from the one it was saved with.
    pub fn load(
        dir: &Path,
        config: &impl Serialize,
        model: M,
        optimizer: ModuleOptimizer,
    ) -> Result<Checkpoint<M>, TrainError> {
        let state = read_state(dir)?;
        let wanted = serde_json::to_value(config).map_err(|e| err("cannot describe", dir, e))?;
        if without_epochs(&state.config) != without_epochs(&wanted) {
            return Err(TrainError::Checkpoint(format!(
                "{} was saved with other settings; resume with the same ones (only --epochs may change)",
                dir.join("state.json").display()
            )));
        }
        let folder = dir.join(format!("epoch-{:03}", state.epoch));
        let model = load_model(&folder, model, state.model_sha256.as_deref())?;
        let optimizer_path = folder.join("optimizer.bpk");
        let bytes = read_regular(&optimizer_path, "cannot read")?;
        check_sha(&optimizer_path, &bytes, state.optimizer_sha256.as_deref())?;
        let optimizer = optimizer
            .from_bytes(Bytes::from_bytes_vec(bytes))
            .map_err(|e| err("cannot load", &optimizer_path, e))?;
        Ok(Checkpoint {
            model,
            optimizer,
            epoch: state.epoch,
        })
    }
}

fn without_epochs(config: &serde_json::Value) -> serde_json::Value {
    let mut c = config.clone();
    if let Some(map) = c.as_object_mut() {
        map.remove("epochs");
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state_of(dir: &Path, epoch: usize, planned: usize) {
        let state = serde_json::json!({
            "epoch": epoch,
            "config": { "epochs": planned, "lr": 0.001 },
        });
        std::fs::write(dir.join("state.json"), state.to_string()).unwrap();
    }

    /// Round 7 N19: a state.json naming an epoch the run could not have reached, or whose
    /// folder is gone, is refused in words before anything is read.
    #[test]
    fn a_checkpoint_state_changed_by_hand_is_refused_in_words() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("epoch-002")).unwrap();
        state_of(dir.path(), 2, 10);
        assert_eq!(epochs_done(dir.path()), Some(2));
        state_of(dir.path(), 999_999, 10);
        let e = read_state(dir.path()).err().unwrap().to_string();
        assert!(
            e.contains("names epoch 999999 of a run planned for 10 epochs")
                && e.contains("changed by hand"),
            "{e}"
        );
        assert_eq!(epochs_done(dir.path()), None);
        state_of(dir.path(), 3, 10);
        let e = read_state(dir.path()).err().unwrap().to_string();
        assert!(
            e.contains("names epoch 3") && e.contains("epoch-003 is not there"),
            "{e}"
        );
    }
}
