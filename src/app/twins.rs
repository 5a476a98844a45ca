//! The twin panel's logic: turning the selection into a query job, indexing, and taking in
//! their answers. Retrieval runs on the engine thread; the UI keeps drawing meanwhile.

use super::App;
use super::state::{Selection, Tab, ToastLevel};
use crate::engine::{Job, JobOutput, TwinQuery};

impl App {
    /// The query the current selection makes: a library polyp's views, or opened files.
    /// A polyp's views (less those clicked off), the frame focused in the viewer, or the
    /// opened images (the focused one alone when one is focused).
    fn twin_query(&self) -> Option<TwinQuery> {
        if let Some(group) = &self.state.twins.group {
            return Some(group.clone());
        }
        let media = &self.state.details.media;
        match self.state.selection {
            Selection::Polyp(id) => {
                let ids: Vec<i64> = media
                    .iter()
                    .map(|m| m.id)
                    .filter(|m| !self.state.twins.left_out.contains(m))
                    .collect();
                (!ids.is_empty()).then_some(TwinQuery::Media {
                    ids,
                    exclude_polyps: vec![id],
                })
            }
            Selection::Examination(_) | Selection::Video(_) => {
                let m = media.get(self.state.focused?)?;
                Some(TwinQuery::Media {
                    ids: vec![m.id],
                    exclude_polyps: Vec::new(),
                })
            }
            Selection::OpenedFiles if !self.state.opened_files.is_empty() => {
                let paths = match self.state.focused {
                    Some(i) if i < self.state.opened_files.len() => {
                        vec![self.state.opened_files[i].clone()]
                    }
                    _ => self.state.opened_files.clone(),
                };
                let boxes = paths
                    .iter()
                    .map(|p| self.state.opened_boxes.get(p).copied())
                    .collect();
                Some(TwinQuery::Files { paths, boxes })
            }
            _ => None,
        }
    }

    /// Retrieves the twins of the picked polyps together: all their views make one query and
    /// none of them comes back as a twin. The next selection ends the group query.
    pub(super) fn query_picked(&mut self) {
        let Some(lib) = &self.state.library else {
            return;
        };
        let mut views = Vec::new();
        for &polyp in &self.state.picked {
            match lib.store.polyp_views(polyp) {
                Ok(v) => views.extend(v.iter().map(|m| m.id)),
                Err(e) => return self.state.toast(ToastLevel::Error, e.to_string()),
            }
        }
        if views.is_empty() {
            return self.state.toast(
                ToastLevel::Error,
                "the picked polyps have no views to query with",
            );
        }
        self.state.twins.group = Some(TwinQuery::Media {
            ids: views,
            exclude_polyps: self.state.picked.iter().copied().collect(),
        });
        self.retrieve_twins();
    }

    pub(super) fn retrieve_twins(&mut self) {
        let Some(lib) = &self.state.library else {
            self.state
                .toast(ToastLevel::Error, "open a library to retrieve twins from");
            return;
        };
        let Some(query) = self.twin_query() else {
            self.state.twins.problem = Some(
                "Select a polyp in the browser, or open images, to retrieve its twins.".into(),
            );
            return;
        };
        if let Some(running) = self.state.twins.running.take() {
            self.engine.cancel(running);
        }
        let db = lib.store.db_path().to_path_buf();
        let job = Job::Twins {
            models: self.state.twins.models_dir.clone(),
            query,
            k: self.state.twins.k,
            search: self.state.twins.search,
        };
        match self.engine.submit("retrieve twins", db, job) {
            Ok(handle) => {
                self.state.twins.running = Some(handle.id);
                self.state.twins.problem = None;
            }
            Err(e) => self.state.toast(ToastLevel::Error, e.to_string()),
        }
    }

    pub(super) fn index_twins(&mut self) {
        let Some(lib) = &self.state.library else {
            self.state
                .toast(ToastLevel::Error, "open a library to index");
            return;
        };
        if lib.store.is_read_only() {
            self.state.toast(
                ToastLevel::Error,
                format!("{}: library is read-only; cannot index", lib.path.display()),
            );
            return;
        }
        let db = lib.store.db_path().to_path_buf();
        let job = Job::IndexTwins {
            models: self.state.twins.models_dir.clone(),
        };
        if let Err(e) = self.engine.submit("index twins", db, job) {
            self.state.toast(ToastLevel::Error, e.to_string());
        }
    }

    /// After the selection changed: retrieve at once when the panel is open and asks to.
    pub(super) fn selection_changed_for_twins(&mut self) {
        self.state.twins.pinned = None;
        self.state.twins.pinned_views = None;
        self.state.twins.left_out.clear();
        if self.state.tab == Tab::TWINS && self.state.twins.auto {
            self.retrieve_twins();
        }
    }

    /// Takes a twin job's result; `false` when `output` was not a twin job's.
    pub(super) fn twin_job_finished(
        &mut self,
        id: u64,
        output: &Result<JobOutput, String>,
    ) -> bool {
        match output {
            Ok(JobOutput::Twins(answer)) => {
                // An answer to a query that a newer one replaced is dropped.
                if self.state.twins.running == Some(id) {
                    self.state.twins.running = None;
                    self.state.twins.answer = Some((**answer).clone());
                }
                true
            }
            Ok(JobOutput::Indexed { stats, version }) => {
                let mut text = format!(
                    "indexed with {version}: {} views encoded, {} polyps updated",
                    stats.views_encoded, stats.polyps_updated
                );
                if !stats.problems.is_empty() {
                    text += &format!(
                        "; {} views unreadable: {}",
                        stats.problems.len(),
                        stats.problems[0]
                    );
                }
                let level = if stats.problems.is_empty() {
                    ToastLevel::Info
                } else {
                    ToastLevel::Warning
                };
                self.state.toast(level, text);
                self.state.twins.problem = None;
                if self.state.tab == Tab::TWINS {
                    self.retrieve_twins();
                }
                true
            }
            Err(e) if self.state.twins.running == Some(id) => {
                self.state.twins.running = None;
                // No model, a stale or empty index: the panel says what to do, with a button.
                self.state.twins.problem = Some(e.clone());
                self.state.twins.answer = None;
                if !e.contains("cancelled") {
                    self.state.toast(ToastLevel::Warning, format!("twins: {e}"));
                }
                true
            }
            _ => false,
        }
    }
}
