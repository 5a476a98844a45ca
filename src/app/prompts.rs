//! The Text prompts panel's logic: prompt sets (the shipped ones, or the library's own saved
//! beside it), scores of the chosen set for the selection, text search over the library's
//! polyps, and a video's polyp-probability strip. Scores, search and strip run on the engine;
//! the panel draws what they leave in [`PromptPanel`](super::state::PromptPanel).

use super::App;
use super::state::{Selection, Tab, ToastLevel};
use crate::engine::prompt_jobs::{PromptJob, PromptOutput};
use crate::engine::{Job, JobOutput};
use crate::prompts::{PromptSet, default_prompt_sets, read_prompt_sets, write_prompt_sets};
use std::path::{Path, PathBuf};

/// The panel's id in the registry.
pub const TAB: Tab = Tab("prompts");

/// At most this many frames of a selection are scored at once.
const MAX_SCORED: usize = 240;

/// What the Text prompts panel asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptCommand {
    /// Show set `index` (and score it).
    ChooseSet(usize),
    /// Replace prompt `index` of the shown set.
    EditPrompt {
        index: usize,
        text: String,
    },
    AddPrompt,
    RemovePrompt(usize),
    /// A new set (a copy of the shown one) called `name`.
    NewSet(String),
    /// Score the shown set for the selection again.
    Score,
    /// Use the prompt model `name` (a card in the models folder).
    ChooseModel(String),
    /// Search the library's polyps by a sentence.
    Search(String),
    /// Open a search hit: select its polyp.
    OpenPolyp(i64),
}

/// Where the library's own prompt sets are saved.
pub fn sets_path(library: &Path) -> PathBuf {
    library.join("prompt_sets.toml")
}

/// The library's saved prompt sets, else the shipped ones; a file that does not parse is
/// reported and left untouched.
pub fn load_sets(library: &Path) -> (Vec<PromptSet>, Option<String>) {
    let path = sets_path(library);
    if !path.exists() {
        return (default_prompt_sets(), None);
    }
    match read_prompt_sets(&path) {
        Ok(sets) => (sets, None),
        Err(e) => (
            default_prompt_sets(),
            Some(format!(
                "{e}; showing the shipped prompt sets, the file is left as it is"
            )),
        ),
    }
}

/// The model set `set` of `sets` is for (its `model`), when `models` has it.
pub fn model_for(
    sets: &[crate::prompts::PromptSet],
    set: usize,
    models: &[String],
) -> Option<String> {
    let name = sets.get(set)?.model_name();
    models.iter().any(|m| m == name).then(|| name.to_string())
}

impl super::state::PromptPanel {
    /// The model the shown set is for, when the models folder has it.
    pub fn own_model(&self) -> Option<String> {
        model_for(&self.sets, self.set, &self.models)
    }

    /// The model that scores the shown set: the one the user chose after choosing the set,
    /// else the set's own (the detector for polyp vs background), else the panel's.
    pub fn scoring_model(&self) -> String {
        match self.own_model() {
            Some(own) if !self.set_model_overridden => own,
            _ => self.model.clone(),
        }
    }
}

impl App {
    /// Scores the shown set for the selection when the Text prompts tab is open.
    pub(super) fn score_prompts(&mut self) {
        if self.state.tab != TAB {
            return;
        }
        let keys = self.state.shown_frames(MAX_SCORED);
        let panel = &mut self.state.prompts;
        if let Some(running) = panel.running.take() {
            self.engine.cancel(running);
        }
        panel.scores = None;
        let Some(set) = panel.sets.get(panel.set) else {
            return;
        };
        let prompts: Vec<String> = set
            .prompts
            .iter()
            .filter(|p| !p.trim().is_empty())
            .cloned()
            .collect();
        if keys.is_empty() || prompts.is_empty() {
            return;
        }
        let job = Job::Prompts(PromptJob::Score {
            models: panel.models_dir.clone(),
            name: panel.scoring_model(),
            keys,
            prompts,
        });
        let db = self.library_db();
        match self.engine.submit("score prompts", db, job) {
            Ok(handle) => self.state.prompts.running = Some(handle.id),
            Err(e) => self.state.toast(ToastLevel::Error, e.to_string()),
        }
    }

    fn library_db(&self) -> PathBuf {
        self.state
            .library
            .as_ref()
            .map(|l| l.store.db_path().to_path_buf())
            .unwrap_or_default()
    }

    /// The polyp strip of the selected video, when the viewer shows one and it is not known.
    pub(super) fn ensure_polyp_strip(&mut self) {
        let Selection::Video(video_id) = self.state.selection else {
            return;
        };
        let panel = &self.state.prompts;
        if panel.strip.as_ref().is_some_and(|s| s.video == video_id)
            || panel.strip_running.is_some_and(|(v, _)| v == video_id)
            || panel.strip_failed == Some(video_id)
        {
            return;
        }
        if !crate::prompts::model::detector_path(&panel.models_dir).exists() {
            return;
        }
        let job = Job::Prompts(PromptJob::Strip {
            models: panel.models_dir.clone(),
            video_id,
        });
        let db = self.library_db();
        match self.engine.submit("polyp strip", db, job) {
            Ok(handle) => self.state.prompts.strip_running = Some((video_id, handle.id)),
            Err(e) => self.state.toast(ToastLevel::Error, e.to_string()),
        }
    }

    pub(super) fn prompts(&mut self, command: PromptCommand) {
        let panel = &mut self.state.prompts;
        let mut rescore = false;
        let mut save = false;
        match command {
            PromptCommand::ChooseSet(i) => {
                panel.set = i.min(panel.sets.len().saturating_sub(1));
                // Each set is scored by the model it is for, until the user picks another.
                panel.set_model_overridden = false;
                rescore = true;
            }
            PromptCommand::EditPrompt { index, text } => {
                if let Some(p) = panel
                    .sets
                    .get_mut(panel.set)
                    .and_then(|s| s.prompts.get_mut(index))
                {
                    *p = text;
                    save = true;
                    rescore = true;
                }
            }
            PromptCommand::AddPrompt => {
                if let Some(s) = panel.sets.get_mut(panel.set) {
                    s.prompts.push(String::new());
                    if !s.classes.is_empty() {
                        s.classes.push("other".into());
                    }
                }
            }
            PromptCommand::RemovePrompt(index) => {
                if let Some(s) = panel.sets.get_mut(panel.set)
                    && index < s.prompts.len()
                    && s.prompts.len() > 1
                {
                    s.prompts.remove(index);
                    if index < s.classes.len() {
                        s.classes.remove(index);
                    }
                    save = true;
                    rescore = true;
                }
            }
            PromptCommand::NewSet(name) => {
                let name = name.trim().to_string();
                if name.is_empty() || panel.sets.iter().any(|s| s.name == name) {
                    self.state.toast(
                        ToastLevel::Warning,
                        "a new prompt set needs a name no other set has",
                    );
                    return;
                }
                let mut copy = panel.sets.get(panel.set).cloned().unwrap_or(PromptSet {
                    name: String::new(),
                    prompts: vec![String::new()],
                    classes: Vec::new(),
                    model: None,
                });
                copy.name = name;
                panel.sets.push(copy);
                panel.set = panel.sets.len() - 1;
                save = true;
            }
            PromptCommand::Score => rescore = true,
            PromptCommand::ChooseModel(name) => {
                panel.model = name;
                panel.set_model_overridden = true;
                rescore = true;
            }
            PromptCommand::Search(text) => {
                if text.trim().is_empty() {
                    panel.search = None;
                    panel.problem = Some("type a sentence to search for".into());
                    return;
                }
                let job = Job::Prompts(PromptJob::Search {
                    models: panel.models_dir.clone(),
                    name: panel.model.clone(),
                    text,
                    top: 24,
                });
                let db = self.library_db();
                match self.engine.submit("search by text", db, job) {
                    Ok(handle) => self.state.prompts.searching = Some(handle.id),
                    Err(e) => self.state.toast(ToastLevel::Error, e.to_string()),
                }
            }
            PromptCommand::OpenPolyp(id) => self.select(Selection::Polyp(id)),
        }
        if save {
            self.save_prompt_sets();
        }
        if rescore {
            self.score_prompts();
        }
    }

    fn save_prompt_sets(&mut self) {
        let Some(lib) = &self.state.library else {
            return;
        };
        let Some(dir) = lib.store.db_path().parent() else {
            return;
        };
        if let Err(e) = write_prompt_sets(&sets_path(dir), &self.state.prompts.sets) {
            self.state
                .toast(ToastLevel::Error, format!("prompt sets not saved: {e}"));
        }
    }

    /// Takes a prompt job's result; `false` when `output` was not one.
    pub(super) fn prompt_job_finished(
        &mut self,
        id: u64,
        output: &Result<JobOutput, String>,
    ) -> bool {
        let panel = &mut self.state.prompts;
        match output {
            Ok(JobOutput::Prompts(PromptOutput::Scores(scores))) => {
                if panel.running == Some(id) {
                    panel.running = None;
                    panel.scores = Some((**scores).clone());
                    panel.problem = None;
                }
                true
            }
            Ok(JobOutput::Prompts(PromptOutput::Search {
                text,
                hits,
                encoded,
                skipped,
                model,
            })) => {
                if panel.searching == Some(id) {
                    panel.searching = None;
                    panel.search = Some(super::state::PromptSearch {
                        text: text.clone(),
                        hits: hits.clone(),
                        encoded: *encoded,
                        model: model.clone(),
                    });
                    panel.problem = None;
                }
                // Frames the search could not read are never passed over without a word.
                if let Some(first) = skipped.first() {
                    self.state.toast(
                        ToastLevel::Warning,
                        format!(
                            "text search: {} frames left out ({first}{})",
                            skipped.len(),
                            if skipped.len() > 1 { "; ..." } else { "" }
                        ),
                    );
                }
                true
            }
            Ok(JobOutput::Prompts(PromptOutput::Strip {
                video_id,
                probabilities,
                model,
            })) => {
                if panel.strip_running.is_some_and(|(_, j)| j == id) {
                    panel.strip_running = None;
                    panel.strip = Some(super::state::PolypStrip {
                        video: *video_id,
                        reading: probabilities.clone(),
                        model: model.clone(),
                    });
                }
                true
            }
            Err(e) if panel.strip_running.is_some_and(|(_, j)| j == id) => {
                panel.strip_failed = panel.strip_running.take().map(|(v, _)| v);
                self.state
                    .toast(ToastLevel::Warning, format!("polyp strip: {e}"));
                true
            }
            Err(e) if panel.running == Some(id) || panel.searching == Some(id) => {
                let described = panel.running == Some(id);
                panel.running = panel.running.filter(|r| *r != id);
                panel.searching = panel.searching.filter(|r| *r != id);
                panel.problem = Some(e.clone());
                if described {
                    // No answer for the selection (a view whose file changed on disk, no
                    // model): said where the user looks, whichever panel is open.
                    self.state
                        .toast(ToastLevel::Error, format!("Text prompts: {e}"));
                }
                true
            }
            _ => false,
        }
    }
}
