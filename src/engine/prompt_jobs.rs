//! The text-prompt jobs (Endo-CLIP): scores of a prompt set for the selection, text search over
//! the library's polyps (encoding the library first where this model has not), and the polyp
//! probability strip of a video. Models are read from the models folder by card name.

use super::Progress;
use crate::compute::Compute;
use crate::prompts::model::{self, LoadedPromptModel};
use crate::prompts::query::{self, FrameKey, PolypHit, ScoredFrames};
use crate::store::{OpenMode, Store};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq)]
pub enum PromptJob {
    /// The prompts' scores for library media or opened files, by the model `name`.
    Score {
        models: PathBuf,
        name: String,
        keys: Vec<FrameKey>,
        prompts: Vec<String>,
    },
    /// The library's polyps best matching `text`.
    Search {
        models: PathBuf,
        name: String,
        text: String,
        top: usize,
    },
    /// The stage-1 detector's polyp probability for every frame of a video.
    Strip { models: PathBuf, video_id: i64 },
}

#[derive(Debug, Clone, PartialEq)]
pub enum PromptOutput {
    Scores(Box<ScoredFrames>),
    Search {
        text: String,
        hits: Vec<PolypHit>,
        /// Frames encoded first because this model had not seen them.
        encoded: usize,
        /// Frames it could not read, each "file: why" (changed on disk, unreadable).
        skipped: Vec<String>,
        model: String,
    },
    Strip {
        video_id: i64,
        /// Per frame, calibrated where the detector's card stores its calibration.
        probabilities: crate::prompts::trust::PolypReading,
        model: String,
    },
}

pub(super) fn run(
    compute: &Compute,
    library: &Path,
    job: PromptJob,
    progress: &Progress,
) -> Result<PromptOutput, String> {
    let device = &compute.device;
    match job {
        PromptJob::Score {
            models,
            name,
            keys,
            prompts,
        } => {
            let loaded = load(&models, &name, compute)?;
            // Opened files score without a library; a library view is never skipped because
            // its library could not be opened.
            let store = match Store::open(library, OpenMode::Existing) {
                Ok(store) => Some(store),
                Err(e) if keys.iter().any(|k| matches!(k, FrameKey::Media(_))) => {
                    return Err(e.to_string());
                }
                Err(_) => None,
            };
            query::score_frames(store.as_ref(), &loaded, &keys, &prompts, device)
                .map(|s| PromptOutput::Scores(Box::new(s)))
                .map_err(|e| e.to_string())
        }
        PromptJob::Search {
            models,
            name,
            text,
            top,
        } => {
            let loaded = load(&models, &name, compute)?;
            query::check_prompt(&loaded, &text).map_err(|e| e.to_string())?;
            let mut store = Store::open(library, OpenMode::Existing).map_err(|e| e.to_string())?;
            let indexed = query::index_library(&loaded, &mut store, device, progress)
                .map_err(|e| e.to_string())?;
            let hits =
                query::search(&loaded, &store, &text, top, device).map_err(|e| e.to_string())?;
            Ok(PromptOutput::Search {
                text,
                hits,
                encoded: indexed.encoded,
                skipped: indexed.skipped,
                model: loaded.named(),
            })
        }
        PromptJob::Strip { models, video_id } => {
            let loaded = load(&models, model::SHIPPED_DETECTOR, compute)?;
            let mut store = Store::open(library, OpenMode::Existing).map_err(|e| e.to_string())?;
            let raw = query::video_polyp_strip(&loaded, &mut store, video_id, device, progress)
                .map_err(|e| e.to_string())?;
            Ok(PromptOutput::Strip {
                video_id,
                probabilities: crate::prompts::trust::PolypReading::of(&loaded.card, raw),
                model: loaded.named(),
            })
        }
    }
}

fn load(models: &Path, name: &str, compute: &Compute) -> Result<LoadedPromptModel, String> {
    let path = models.join(format!("{name}.json"));
    model::load(&path, &compute.device).map_err(|e| {
        format!(
            "no text-prompt model `{name}`: {e} (train one with `endotwin train prompts` or the Training tab)"
        )
    })
}

/// The prompt models in `models` (card names: those trained here and imported CLIPs), the
/// stage-3 one first.
pub fn available(models: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(models)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            if path.extension().is_none_or(|x| x != "json") {
                return None;
            }
            let card: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).ok()?).ok()?;
            matches!(card.get("kind")?.as_str()?, "prompt-model" | "clip")
                .then(|| Some(path.file_stem()?.to_string_lossy().into_owned()))?
        })
        .collect();
    out.sort();
    if let Some(i) = out.iter().position(|n| n == model::SHIPPED_NAME) {
        let first = out.remove(i);
        out.insert(0, first);
    }
    out
}
