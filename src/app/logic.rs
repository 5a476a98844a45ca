//! Applies commands to the state and drains the engine and loader channels.

use super::state::{Details, Edit, Selection, Tab, ToastLevel};
use super::{App, Command};
use crate::data::import::ImportLayout;
use crate::data::import::video::VIDEO_EXTENSIONS;
use crate::engine::loader::{ImageKey, Source};
use crate::engine::{Job, JobDone, JobOutput};
use crate::store::{OpenMode, Store, TargetKind};
use std::path::{Path, PathBuf};

impl App {
    pub(super) fn poll(&mut self, ctx: &egui::Context) {
        for done in self.engine.poll() {
            self.job_finished(done);
        }
        for loaded in self.loader.poll() {
            if let (ImageKey::Media(_) | ImageKey::File(_), Err(e)) = (&loaded.key, &loaded.result)
            {
                self.state
                    .toast(ToastLevel::Error, format!("cannot show image: {e}"));
            }
            self.textures.insert_full(ctx, loaded.key, loaded.result);
        }
        let wanted: Vec<ImageKey> = self
            .textures
            .wanted
            .iter()
            .filter(|k| !self.textures.pending.contains(*k))
            .cloned()
            .collect();
        for key in wanted {
            let source = match &key {
                ImageKey::Media(id) => self.state.library.as_ref().map(|lib| Source::Media {
                    library: lib.store.db_path().to_path_buf(),
                    id: *id,
                }),
                ImageKey::Thumbnail(id) => {
                    self.state.library.as_ref().map(|lib| Source::Thumbnail {
                        library: lib.store.db_path().to_path_buf(),
                        id: *id,
                    })
                }
                ImageKey::File(p) => Some(Source::File(p.clone())),
            };
            match source {
                Some(source) => {
                    if !self.loader.request(key.clone(), source) {
                        break;
                    }
                    self.textures.pending.insert(key);
                }
                None => self
                    .textures
                    .insert_full(ctx, key, Err("not in the library".into())),
            }
        }
        self.poll_training();
        self.poll_library(ctx);
        let now = std::time::Instant::now();
        self.state.toasts.retain(|t| !t.expired(now));
    }

    pub(super) fn apply(&mut self, command: Command) {
        match command {
            Command::OpenLibrary(path) => self.open_library(&path),
            Command::PickLibrary => {
                if let Some(path) = rfd::FileDialog::new()
                    .set_title("Open an EndoTwin library (folder or library.sqlite)")
                    .pick_folder()
                {
                    self.open_library(&path);
                }
            }
            Command::Import(layout, path) => self.import(layout, path),
            Command::PickImport(layout) => {
                let dialog = rfd::FileDialog::new();
                let picked = if layout == ImportLayout::Video {
                    dialog
                        .set_title("Import a video file")
                        .add_filter("videos", VIDEO_EXTENSIONS)
                        .pick_file()
                } else {
                    dialog.set_title("Import a folder of images").pick_folder()
                };
                if let Some(path) = picked {
                    self.import(layout, path);
                }
            }
            Command::PickImages => {
                if let Some(paths) = rfd::FileDialog::new()
                    .set_title("Open images")
                    .add_filter("images", &["png", "jpg", "jpeg", "bmp", "tif", "tiff"])
                    .pick_files()
                {
                    self.apply(Command::Dropped(paths));
                }
            }
            Command::Dropped(paths) => self.dropped(paths),
            Command::ImportOpenedFiles => self.import_opened_files(),
            Command::Select(selection) => self.select(selection),
            Command::MoveSelection(delta) => {
                let rows = self.state.visible_rows();
                if rows.is_empty() {
                    return;
                }
                let current = rows.iter().position(|r| *r == self.state.selection);
                let next = match current {
                    Some(i) => (i as i64 + delta as i64).clamp(0, rows.len() as i64 - 1) as usize,
                    None => 0,
                };
                self.select(rows[next]);
            }
            Command::Focus(index) => {
                self.state.focused = index.filter(|i| *i < self.media_len());
            }
            Command::StepView(delta) => {
                let n = self.media_len();
                if n > 0 {
                    let i = self.state.focused.unwrap_or(0) as i64 + delta as i64;
                    self.state.focused = Some(i.rem_euclid(n as i64) as usize);
                }
            }
            Command::SetFilter(filter) => {
                self.state.filter = filter;
                if let Some(lib) = &mut self.state.library {
                    lib.apply_filter(&self.state.filter);
                }
            }
            Command::Guide(page) => self.state.guide = page,
            Command::ShowTab(tab) => {
                let opened = tab == Tab::TWINS && self.state.tab != Tab::TWINS;
                let opened_captions = tab == super::captions::TAB && self.state.tab != tab;
                let opened_prompts = tab == super::prompts::TAB && self.state.tab != tab;
                self.state.tab = tab;
                if opened && self.state.twins.auto {
                    self.retrieve_twins();
                }
                self.ensure_timeline();
                if opened_captions {
                    self.describe_captions();
                }
                if opened_prompts {
                    self.score_prompts();
                }
            }
            Command::RetrieveTwins => self.retrieve_twins(),
            Command::IndexTwins => self.index_twins(),
            Command::SetTwinK(k) => {
                self.state.twins.k = k.clamp(1, 50);
                self.retrieve_twins();
            }
            Command::SetTwinSearch(search) => {
                self.state.twins.search = search;
                self.retrieve_twins();
            }
            Command::SetTwinWeighted(w) => self.state.twins.weighted = w,
            Command::SetTwinAuto(a) => self.state.twins.auto = a,
            Command::SetPolypBox { path, xywh } => {
                match xywh {
                    Some(b) => self.state.opened_boxes.insert(path, b),
                    None => self.state.opened_boxes.remove(&path),
                };
                self.selection_changed_for_twins();
            }
            Command::PinTwin(id) => {
                let twins = &mut self.state.twins;
                twins.pinned = id;
                twins.pinned_views = id.and_then(|id| {
                    let answer = twins.answer.as_ref()?;
                    let t = answer.result.twins.iter().find(|t| t.polyp.id == id)?;
                    Some((t.polyp.code.clone(), t.views.clone()))
                });
            }
            Command::ToggleTwinView(media) => {
                let left_out = &mut self.state.twins.left_out;
                if !left_out.remove(&media) {
                    left_out.insert(media);
                }
                self.retrieve_twins();
            }
            Command::SetPolypLabel {
                polyp_id,
                key,
                value,
            } => {
                // Checked against the version the window read with the value it showed.
                let read = self
                    .state
                    .details
                    .read_version(TargetKind::Polyp, polyp_id, &key);
                if let Some(written) = self.set_label(polyp_id, &key, value.clone(), read) {
                    self.record_edit(Edit::PolypLabel {
                        polyp_id,
                        key,
                        old: written.old,
                        new: value,
                        version: written.version,
                    });
                }
            }
            Command::SetReviewer(name) => self.state.reviewer = name,
            Command::Training(c) => self.training(c),
            Command::Captions(c) => self.captions(c),
            Command::Prompts(c) => self.prompts(c),
            Command::Undo => self.undo(),
            Command::Redo => self.redo(),
            Command::SetLinkThreshold(t) => {
                self.state.tracklets.threshold = Some(t.clamp(-1.0, 1.0))
            }
            Command::SetTrackletComparison(c) => {
                self.state.tracklets.comparison = c;
                self.state.tracklets.threshold = None;
                self.refresh_timeline();
            }
            Command::SelectTracklet(t) => self.select_tracklet(t),
            Command::SetLabelField(field) => self.state.labelling.field = field,
            Command::StepPolyp(delta) => self.step_polyp(delta),
            Command::NextUnlabelled => self.next_unlabelled(),
            c @ (Command::BuildReviewQueue(_)
            | Command::FollowQueue(_)
            | Command::SetFrameLabel { .. }
            | Command::SetViewBox { .. }
            | Command::AuditFilter(_)
            | Command::SetPicked(_)
            | Command::TogglePicked(_)
            | Command::LabelPicked { .. }
            | Command::TagPicked { .. }
            | Command::QueryPicked
            | Command::ExportPicked(_)) => self.review_command(c),
            Command::TrackBox {
                video_id,
                frame,
                xywh,
            } => self.track_box(video_id, frame, xywh),
            c @ (Command::AssignTracklet { .. }
            | Command::NewPolypForTracklet(_)
            | Command::MergeTracklets { .. }
            | Command::SplitTracklet { .. }
            | Command::DecideLink { .. }) => self.tracklet_edit(c),
            Command::CancelJob(id) => {
                if let Some(job) = self.engine.active().iter().find(|j| j.id == id) {
                    job.progress.cancel();
                }
            }
            Command::DismissToast(i) => {
                if i < self.state.toasts.len() {
                    self.state.toasts.remove(i);
                }
            }
        }
    }

    fn media_len(&self) -> usize {
        match self.state.selection {
            Selection::OpenedFiles => self.state.opened_files.len(),
            _ => self.state.details.media.len(),
        }
    }

    pub(super) fn open_library(&mut self, path: &Path) {
        // Where the library stands is read before what it holds: a change in between is
        // read again at the next look.
        let opened = Store::open(path, OpenMode::Existing).and_then(|store| {
            let mark = store.change_mark()?;
            super::loading::load_library(store, path).map(|lib| (lib, mark))
        });
        match opened {
            Ok((mut lib, mark)) => {
                self.state.sync.opened(mark);
                lib.apply_filter(&self.state.filter);
                if lib.store.is_read_only() {
                    self.state.toast(
                        ToastLevel::Warning,
                        format!(
                            "{}: library is read-only; labelling is disabled",
                            path.display()
                        ),
                    );
                }
                let needs_thumbs = !lib.store.is_read_only()
                    && lib
                        .store
                        .media_without_thumbnail()
                        .map(|m| !m.is_empty())
                        .unwrap_or(false);
                let db = lib.store.db_path().to_path_buf();
                self.state.library = Some(lib);
                self.textures.clear();
                self.state.undo.clear();
                self.state.redo.clear();
                self.state.tracklets = Default::default();
                let library_path = self.state.library.as_ref().map(|l| l.path.clone());
                if let Some(path) = library_path {
                    // The library's own models when it promoted some; back to the shipped
                    // ones when the previous library's own were in use; else as they were.
                    use crate::engine::promote::{active_dir, is_library_models};
                    let own = active_dir(&path);
                    if is_library_models(&own) {
                        self.use_models_dir(own);
                    } else if is_library_models(&self.state.twins.models_dir) {
                        self.use_models_dir(crate::default_models_dir());
                    } else {
                        self.load_active_models();
                    }
                }
                let dir = db.parent().map(Path::to_path_buf).unwrap_or_default();
                let (sets, problem) = super::prompts::load_sets(&dir);
                self.state.prompts.sets = sets;
                self.state.prompts.set = 0;
                self.state.prompts.strip = None;
                self.state.prompts.search = None;
                if let Some(problem) = problem {
                    self.state.toast(ToastLevel::Warning, problem);
                }
                self.load_runs();
                // Open on the first polyp so the viewer shows a case straight away.
                let first = self
                    .state
                    .visible_rows()
                    .into_iter()
                    .find(|r| matches!(r, Selection::Polyp(_)));
                self.select(first.unwrap_or(Selection::Nothing));
                if needs_thumbs {
                    self.submit("thumbnails", db, Job::Thumbnails);
                }
            }
            Err(e) => self.state.toast(ToastLevel::Error, e.to_string()),
        }
    }

    pub(super) fn submit(&mut self, name: &str, library: PathBuf, job: Job) {
        if let Err(e) = self.engine.submit(name, library, job) {
            self.state.toast(ToastLevel::Error, e.to_string());
        }
    }

    /// Sets a polyp label through the store (one transaction plus an audit row), checked
    /// against version `read` ([`App::write_label`]). Returns the previous value and the
    /// label's version now, or `None` when nothing was written (a toast says why).
    pub(super) fn set_label(
        &mut self,
        polyp_id: i64,
        key: &str,
        value: Option<String>,
        read: Option<i64>,
    ) -> Option<crate::store::LabelWritten> {
        let written = self.write_label(TargetKind::Polyp, polyp_id, key, value, read)?;
        self.refresh_tree();
        self.load_details();
        Some(written)
    }

    pub(super) fn select(&mut self, selection: Selection) {
        let changed = self.state.selection != selection;
        self.state.selection = selection;
        if changed {
            // A group query lasts until the reviewer selects something else.
            self.state.twins.group = None;
        }
        self.state.focused = None;
        self.load_details();
        if changed {
            self.selection_changed_for_twins();
            self.state.tracklets.selected = None;
            self.ensure_timeline();
            self.describe_captions();
            self.score_prompts();
            self.ensure_polyp_strip();
        }
    }

    pub(super) fn refresh_tree(&mut self) {
        let Some(lib) = &mut self.state.library else {
            return;
        };
        let listing = lib.store.case_listing();
        if let Ok(stats) = lib.store.stats() {
            lib.stats = stats;
        }
        match listing {
            Ok(listing) => {
                lib.listing = listing;
                lib.apply_filter(&self.state.filter);
            }
            Err(e) => self.state.toast(ToastLevel::Error, e.to_string()),
        }
    }

    pub(super) fn load_details(&mut self) {
        let selection = self.state.selection;
        let details = match (&self.state.library, selection) {
            (_, Selection::Nothing) => Ok(Details::default()),
            (_, Selection::OpenedFiles) => Ok(Details {
                title: format!("{} opened images", self.state.opened_files.len()),
                fields: vec![(
                    "Note".into(),
                    "Not in the library yet: Import adds them.".into(),
                )],
                ..Default::default()
            }),
            (Some(lib), sel) => super::loading::details_for(&lib.store, sel),
            (None, _) => Ok(Details::default()),
        };
        match details {
            Ok(d) => self.state.details = d,
            Err(e) => self.state.toast(ToastLevel::Error, e.to_string()),
        }
        self.refresh_labelling();
    }

    fn job_finished(&mut self, done: JobDone) {
        if self.twin_job_finished(done.id, &done.result)
            || self.timeline_job_finished(done.id, &done.result)
            || self.track_job_finished(done.id, &done.result)
            || self.caption_job_finished(done.id, &done.result)
            || self.prompt_job_finished(done.id, &done.result)
            || self.promotion_finished(done.id, &done.result)
            || self.report_finished(done.id, &done.result)
            || self.queue_finished(done.id, &done.result)
        {
            return;
        }
        match done.result {
            Ok(JobOutput::Imported(report)) => {
                self.state.toast(
                    if report.skipped.is_empty() && report.label_changes.is_empty() {
                        ToastLevel::Info
                    } else {
                        ToastLevel::Warning
                    },
                    format!("{}: {}", done.name, report.summary()),
                );
                for p in report.skipped.iter().take(5) {
                    self.state
                        .toast(ToastLevel::Warning, format!("skipped {p}"));
                }
                for c in report.label_changes.iter().take(5) {
                    self.state.toast(ToastLevel::Warning, c.to_string());
                }
                self.refresh_tree();
                self.refresh_histology_options();
            }
            Ok(JobOutput::Thumbnails { made, failed }) => {
                if !failed.is_empty() {
                    self.state.toast(
                        ToastLevel::Warning,
                        format!(
                            "{made} thumbnails made; {} media could not be read: {}",
                            failed.len(),
                            failed[0]
                        ),
                    );
                }
                self.textures.clear();
            }
            Ok(JobOutput::DeviceCheck { values }) => self
                .state
                .toast(ToastLevel::Info, format!("device check: {values:?}")),
            Ok(
                JobOutput::Indexed { .. }
                | JobOutput::Twins(_)
                | JobOutput::Captions { .. }
                | JobOutput::CaptionSearch(_)
                | JobOutput::Prompts(_)
                | JobOutput::Timeline(_)
                | JobOutput::Promoted { .. }
                | JobOutput::Report { .. }
                | JobOutput::ReviewQueue { .. }
                | JobOutput::Tracked { .. },
            ) => {}
            Err(e) => self
                .state
                .toast(ToastLevel::Error, format!("{} failed: {e}", done.name)),
        }
    }

    pub(super) fn refresh_histology_options(&mut self) {
        if let Some(lib) = &mut self.state.library {
            lib.histologies = lib.store.histologies().unwrap_or_default();
            lib.locations = lib.store.locations().unwrap_or_default();
        }
    }
}
