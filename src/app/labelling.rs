//! The Labelling panel's logic: the choices of each field, the selected polyp's current
//! values, and moving through the library's polyps. Labels are set through the same audited,
//! undoable path as the details panel (`Command::SetPolypLabel`).

use super::App;
use super::state::{LabelField, Selection, ToastLevel};
use crate::engine::{Job, JobOutput};
use crate::store::TargetKind;
use crate::twins::review::QueueOrder;

impl App {
    /// Fills the panel's choices (vocabulary terms, the library's histologies) and the
    /// selected polyp's values. Called whenever the selection or a label changes.
    pub(super) fn refresh_labelling(&mut self) {
        let vocabulary = crate::prompts::Vocabulary::default();
        let terms = |aspect: &str| -> Vec<String> {
            vocabulary
                .terms()
                .iter()
                .filter(|t| t.aspect == aspect)
                .map(|t| t.name.clone())
                .collect()
        };
        let Some(lib) = &self.state.library else {
            self.state.labelling.current.clear();
            self.state.labelling.audit.clear();
            return;
        };
        let typed = self.state.labelling.audit_filter.clone();
        let mut filter = crate::store::AuditFilter {
            who: typed.who,
            since: typed.since,
            until: typed.until,
            limit: 200,
        };
        // A date still being typed filters nothing yet (the store refuses a partial one).
        for when in [&mut filter.since, &mut filter.until] {
            if when
                .as_deref()
                .is_some_and(|w| crate::store::check_audit_time(w).is_err())
            {
                *when = None;
            }
        }
        let audit = lib.store.audit_log(&filter);
        match audit {
            Ok(rows) => self.state.labelling.audit = rows,
            Err(e) => {
                self.state.labelling.audit.clear();
                self.state.toast(
                    ToastLevel::Warning,
                    format!("cannot read the audit log: {e}"),
                );
            }
        }
        let Some(lib) = &self.state.library else {
            return;
        };
        let mut histologies = lib.histologies.clone();
        for standard in [
            "hyperplastic",
            "sessile serrated",
            "tubular adenoma LG",
            "tubular adenoma HG",
            "carcinoma",
        ] {
            if !histologies.iter().any(|h| h == standard) {
                histologies.push(standard.to_string());
            }
        }
        histologies.retain(|h| h != "unknown");
        let mut locations = terms("location");
        for l in &lib.locations {
            if !locations.contains(l) {
                locations.push(l.clone());
            }
        }
        // Surface patterns as the library already words them, else the vocabulary's terms.
        let mut surfaces = lib.store.attribute_values("surface").unwrap_or_default();
        if surfaces.is_empty() {
            surfaces = terms("surface pattern");
        }
        let panel = &mut self.state.labelling;
        panel.options = vec![
            histologies,
            terms("Paris morphology"),
            surfaces,
            locations,
            Vec::new(),
        ];
        let polyps: Vec<i64> = lib
            .tree
            .iter()
            .flat_map(|n| n.polyps.iter().map(|p| p.id))
            .collect();
        match self.state.selection {
            Selection::Polyp(id) => {
                panel.position = polyps
                    .iter()
                    .position(|&p| p == id)
                    .map(|i| (i, polyps.len()));
                panel.current = LabelField::ALL
                    .iter()
                    .map(|f| {
                        lib.store
                            .current_label(TargetKind::Polyp, id, f.key())
                            .ok()
                            .flatten()
                    })
                    .collect();
                let histology = panel.current.first().cloned().flatten();
                for item in panel.queue.iter_mut().filter(|q| q.polyp == id) {
                    item.label = histology.clone();
                }
            }
            _ => {
                panel.position = None;
                panel.current.clear();
            }
        }
        panel.frame_labels = match self.state.selection {
            Selection::Examination(_) | Selection::Video(_) => self
                .state
                .details
                .media
                .iter()
                .map(|m| {
                    lib.store
                        .current_label(TargetKind::Media, m.id, super::state::FRAME_KEY)
                        .ok()
                        .flatten()
                })
                .collect(),
            _ => Vec::new(),
        };
    }

    /// The order J and K follow: the review queue's when it is followed, else the browser's.
    fn polyp_order(&self) -> Vec<i64> {
        let panel = &self.state.labelling;
        if panel.follow_queue && !panel.queue.is_empty() {
            return panel.queue.iter().map(|q| q.polyp).collect();
        }
        self.state
            .library
            .as_ref()
            .map(|lib| {
                lib.tree
                    .iter()
                    .flat_map(|n| n.polyps.iter().map(|p| p.id))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(super) fn step_polyp(&mut self, delta: i32) {
        let polyps = self.polyp_order();
        if polyps.is_empty() {
            return;
        }
        let next = match self.state.selection {
            Selection::Polyp(id) => match polyps.iter().position(|&p| p == id) {
                Some(i) => (i as i64 + delta as i64).clamp(0, polyps.len() as i64 - 1) as usize,
                None => 0,
            },
            _ => 0,
        };
        self.select(Selection::Polyp(polyps[next]));
    }

    /// The review commands: the queue, frame labels, the history's filter, the picked group.
    pub(super) fn review_command(&mut self, command: super::Command) {
        use super::Command;
        match command {
            Command::BuildReviewQueue(order) => self.build_review_queue(order),
            Command::FollowQueue(on) => self.state.labelling.follow_queue = on,
            Command::SetFrameLabel { media_id, value } => self.label_frame(media_id, value),
            Command::SetViewBox { media_id, xywh } => self.label_media(
                media_id,
                crate::store::VIEW_BOX_KEY,
                xywh.map(crate::store::format_view_box),
            ),
            Command::AuditFilter(filter) => {
                self.state.labelling.audit_filter = filter;
                self.refresh_labelling();
            }
            Command::SetPicked(ids) => self.state.picked = ids.into_iter().collect(),
            Command::TogglePicked(id) => {
                let was_picked = self.state.picked.remove(&id);
                if !was_picked {
                    self.state.picked.insert(id);
                }
            }
            Command::LabelPicked { key, value } => self.label_picked(key, value),
            Command::TagPicked { tag, add } => self.tag_picked(tag, add),
            Command::QueryPicked => self.query_picked(),
            Command::ExportPicked(None) => {
                if let Some(path) = rfd::FileDialog::new()
                    .set_title("Export the picked polyps' labels")
                    .set_file_name("picked-labels.csv")
                    .save_file()
                {
                    self.export_picked(&path);
                }
            }
            Command::ExportPicked(Some(path)) => self.export_picked(&path),
            _ => {}
        }
    }

    /// Sets a frame's "polyp / no polyp" through the audited path, undoable.
    pub(super) fn label_frame(&mut self, media_id: i64, value: Option<String>) {
        self.label_media(media_id, super::state::FRAME_KEY, value);
    }

    /// Sets label `key` of image `media_id` through the audited path, undoable.
    pub(super) fn label_media(&mut self, media_id: i64, key: &'static str, value: Option<String>) {
        let read = self
            .state
            .details
            .read_version(TargetKind::Media, media_id, key);
        if let Some(written) = self.set_media_label(media_id, key, value.clone(), read)
            && written.old != value
        {
            self.record_edit(super::state::Edit::MediaLabel {
                media_id,
                key,
                old: written.old,
                new: value,
                version: written.version,
            });
        }
    }

    /// Writes an image's label, checked against version `read`; returns the previous value and
    /// the version now (`None` when nothing was written, said). A polyp box drawn on a library
    /// view re-indexes the twins (only that view is encoded again).
    pub(super) fn set_media_label(
        &mut self,
        media_id: i64,
        key: &'static str,
        value: Option<String>,
        read: Option<i64>,
    ) -> Option<crate::store::LabelWritten> {
        let written = self.write_label(TargetKind::Media, media_id, key, value.clone(), read)?;
        self.refresh_labelling();
        if key == crate::store::VIEW_BOX_KEY && written.old != value {
            self.load_details();
            self.index_twins();
        }
        Some(written)
    }

    /// Sets `key` to `value` on every picked polyp that does not have it already: one audited
    /// change each, undone together.
    pub(super) fn label_picked(&mut self, key: String, value: Option<String>) {
        let n = self.change_picked(&key, |_| value.clone());
        self.state.toast(
            ToastLevel::Info,
            format!(
                "{key} = {} on {n} picked polyps (one undo for all)",
                value.as_deref().unwrap_or("—")
            ),
        );
    }

    /// Adds tag `tag` to (or removes it from) every picked polyp: one audited change of its
    /// `tags` label each, undone together. A tag that is no tag is refused, nothing changed.
    pub(super) fn tag_picked(&mut self, tag: String, add: bool) {
        use crate::labels::tags;
        let tag = match tags::check(&tag) {
            Ok(t) => t,
            Err(e) => return self.state.toast(ToastLevel::Error, e),
        };
        let n = self.change_picked(tags::KEY, |now| tags::with(now, &tag, add));
        let did = if add { "tagged" } else { "untagged" };
        self.state.toast(
            ToastLevel::Info,
            format!("{did} {n} picked polyps \"{tag}\" (one undo for all)"),
        );
    }

    /// Sets label `key` of each picked polyp to `new(its value now)` where that differs: one
    /// audited change each, one undo for all. Returns how many changed.
    fn change_picked(&mut self, key: &str, new: impl Fn(Option<&str>) -> Option<String>) -> usize {
        let picked: Vec<i64> = self.state.picked.iter().copied().collect();
        let mut edits = Vec::new();
        for polyp_id in picked {
            // The version before the value: the new value is made from this one, and a change
            // made elsewhere in between is a conflict, not lost.
            let read = self.state.library.as_ref().and_then(|lib| {
                let store = &lib.store;
                let version = store.label_version(TargetKind::Polyp, polyp_id, key).ok()?;
                let now = store.current_label(TargetKind::Polyp, polyp_id, key).ok()?;
                Some((version, now))
            });
            let Some((version, now)) = read else {
                continue;
            };
            let value = new(now.as_deref());
            if now == value {
                continue;
            }
            match self.set_label(polyp_id, key, value.clone(), Some(version)) {
                Some(written) => edits.push(super::state::Edit::PolypLabel {
                    polyp_id,
                    key: key.to_string(),
                    old: written.old,
                    new: value,
                    version: written.version,
                }),
                None => break,
            }
        }
        let n = edits.len();
        if n > 0 {
            self.record_edit(super::state::Edit::Several(edits));
        }
        self.refresh_labelling();
        n
    }

    /// Writes the picked polyps' labels as CSV (what `labels import` reads back).
    pub(super) fn export_picked(&mut self, path: &std::path::Path) {
        let Some(lib) = &self.state.library else {
            return;
        };
        let ids: Vec<i64> = self.state.picked.iter().copied().collect();
        // The save dialog has asked before replacing a file; the library's own files never are.
        let written = crate::plumbing::output::check_output(path, Some(lib.store.root()), true)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                crate::labels::export_csv_of(&lib.store, Some(&ids)).map_err(|e| e.to_string())
            })
            .and_then(|text| {
                std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
            });
        match written {
            Ok(()) => self.state.toast(
                ToastLevel::Info,
                format!(
                    "labels of {} picked polyps written to {}",
                    ids.len(),
                    path.display()
                ),
            ),
            Err(e) => self.state.toast(ToastLevel::Error, e),
        }
    }

    /// Orders the review queue on the engine with the twin models the panels use.
    pub(super) fn build_review_queue(&mut self, order: QueueOrder) {
        let Some(lib) = &self.state.library else {
            return self.state.toast(ToastLevel::Error, "open a library first");
        };
        if self.state.labelling.queue_job.is_some() {
            return;
        }
        self.state.labelling.queue_order = order;
        let prompts = crate::prompts::model::shipped_path(&self.state.prompts.models_dir);
        let job = Job::ReviewQueue {
            models: self.state.twins.models_dir.clone(),
            order,
            limit: 200,
            prompts: prompts.is_file().then_some(prompts),
        };
        let db = lib.store.db_path().to_path_buf();
        match self.engine.submit("review queue", db, job) {
            Ok(handle) => self.state.labelling.queue_job = Some(handle.id),
            Err(e) => self.state.toast(ToastLevel::Error, e.to_string()),
        }
    }

    /// Takes the queue job's result; `false` when `id` was not it.
    pub(super) fn queue_finished(&mut self, id: u64, output: &Result<JobOutput, String>) -> bool {
        let panel = &mut self.state.labelling;
        if panel.queue_job != Some(id) {
            return false;
        }
        panel.queue_job = None;
        match output {
            Ok(JobOutput::ReviewQueue {
                items,
                version,
                prompts,
            }) => {
                panel.queue = items.clone();
                panel.queue_version = format!("{version}, {prompts}");
                panel.follow_queue = true;
            }
            Ok(_) => {}
            Err(e) => self.state.toast(
                ToastLevel::Error,
                format!("review queue: {e} (the queue orders the twin index: index the library)"),
            ),
        }
        true
    }

    /// Selects the next polyp (after the selected one, wrapping) without a value in the
    /// focused field.
    pub(super) fn next_unlabelled(&mut self) {
        let polyps = self.polyp_order();
        let key = self.state.labelling.field.key();
        let Some(lib) = &self.state.library else {
            return;
        };
        let start = match self.state.selection {
            Selection::Polyp(id) => polyps.iter().position(|&p| p == id).map_or(0, |i| i + 1),
            _ => 0,
        };
        let found = (0..polyps.len())
            .map(|k| polyps[(start + k) % polyps.len()])
            .find(|&p| {
                lib.store
                    .current_label(TargetKind::Polyp, p, key)
                    .ok()
                    .flatten()
                    .is_none()
            });
        match found {
            Some(p) => self.select(Selection::Polyp(p)),
            None => self.state.toast(
                ToastLevel::Info,
                format!(
                    "every polyp has a {}",
                    self.state.labelling.field.title().to_lowercase()
                ),
            ),
        }
    }
}

/// A drawn polyp box as the library writes it (`x,y,w,h`, whole pixels).
pub fn view_box_text(b: [f32; 4]) -> String {
    crate::store::format_view_box(b)
}
