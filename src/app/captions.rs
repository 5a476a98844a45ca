//! The Captions panel's logic: describing the selected capsule frames (or opened images) with
//! the caption model, and searching the library by a caption or a category. Both run on the
//! engine thread; the panel draws what they leave in [`CaptionPanel`].

use super::App;
use super::state::{Selection, Tab, ToastLevel};
use crate::engine::{Job, JobOutput};

/// The panel's id in the registry.
pub const TAB: Tab = Tab("captions");

/// At most this many frames of a selection are described at once.
const MAX_DESCRIBED: usize = 240;

/// What the Captions panel asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum CaptionCommand {
    /// Search the library's capsule frames by a caption or a category.
    Search(String),
    /// Open a search hit: select its examination and focus the frame.
    OpenHit { examination: i64, media_id: i64 },
}

impl App {
    /// The frames the selection shows: a capsule examination's frames, any selection's media,
    /// or the opened images.
    /// Describes the selection's frames when the Captions tab is open.
    pub(super) fn describe_captions(&mut self) {
        if self.state.tab != TAB {
            return;
        }
        let Some(lib) = &self.state.library else {
            return;
        };
        let keys = self.state.shown_frames(MAX_DESCRIBED);
        if let Some(running) = self.state.captions.running.take() {
            self.engine.cancel(running);
        }
        self.state.captions.frames.clear();
        if keys.is_empty() {
            return;
        }
        let db = lib.store.db_path().to_path_buf();
        let job = Job::DescribeCaptions {
            models: self.state.captions.models_dir.clone(),
            keys,
        };
        match self.engine.submit("caption frames", db, job) {
            Ok(handle) => self.state.captions.running = Some(handle.id),
            Err(e) => self.state.toast(ToastLevel::Error, e.to_string()),
        }
    }

    pub(super) fn captions(&mut self, command: CaptionCommand) {
        match command {
            CaptionCommand::Search(query) => {
                let Some(lib) = &self.state.library else {
                    return;
                };
                if query.trim().is_empty() {
                    self.state.captions.search = None;
                    return;
                }
                let db = lib.store.db_path().to_path_buf();
                let job = Job::SearchCaptions {
                    models: self.state.captions.models_dir.clone(),
                    query,
                };
                match self.engine.submit("search captions", db, job) {
                    Ok(handle) => self.state.captions.searching = Some(handle.id),
                    Err(e) => self.state.toast(ToastLevel::Error, e.to_string()),
                }
            }
            CaptionCommand::OpenHit {
                examination,
                media_id,
            } => {
                self.select(Selection::Examination(examination));
                let at = self
                    .state
                    .details
                    .media
                    .iter()
                    .position(|m| m.id == media_id);
                self.state.focused = at;
            }
        }
    }

    /// Takes a caption job's result; `false` when `output` was not one.
    pub(super) fn caption_job_finished(
        &mut self,
        id: u64,
        output: &Result<JobOutput, String>,
    ) -> bool {
        let panel = &mut self.state.captions;
        match output {
            Ok(JobOutput::Captions { frames, model }) => {
                if panel.running == Some(id) {
                    panel.running = None;
                    panel.frames = frames.iter().cloned().collect();
                    panel.model = Some(model.clone());
                    panel.problem = None;
                }
                true
            }
            Ok(JobOutput::CaptionSearch(search)) => {
                if panel.searching == Some(id) {
                    panel.searching = None;
                    panel.search = Some((**search).clone());
                    panel.problem = None;
                }
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
                        .toast(ToastLevel::Error, format!("Captions: {e}"));
                }
                true
            }
            _ => false,
        }
    }
}
