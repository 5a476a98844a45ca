//! The Tracklets panel's logic: building the selected video's timeline on the engine, and the
//! reviewer's tracklet edits (identity, merge, split, link decisions), each audited and
//! undoable.

use super::App;
use super::state::{Edit, Selection, ToastLevel};
use crate::engine::{Job, JobOutput};
use crate::store::{LinkDecision, StoreError};
use std::collections::HashMap;

/// The Tracklets tab's id.
pub const TAB: super::Tab = super::Tab("tracklets");

impl App {
    /// Builds the selected video's timeline when the panel is open and does not show it yet.
    pub(super) fn ensure_timeline(&mut self) {
        let Selection::Video(video) = self.state.selection else {
            return;
        };
        let shown = self.state.tracklets.timeline.as_ref().map(|t| t.video_id);
        if self.state.tab == TAB && shown != Some(video) && self.state.tracklets.running.is_none() {
            self.request_timeline(video);
        }
    }

    /// Rebuilds the timeline of the video it shows (after an edit), keeping it on screen
    /// meanwhile.
    pub(super) fn refresh_timeline(&mut self) {
        if let Some(video) = self.state.tracklets.timeline.as_ref().map(|t| t.video_id) {
            self.request_timeline(video);
        }
    }

    fn request_timeline(&mut self, video_id: i64) {
        let Some(lib) = &self.state.library else {
            return;
        };
        if let Some(running) = self.state.tracklets.running.take() {
            self.engine.cancel(running);
        }
        let db = lib.store.db_path().to_path_buf();
        let job = Job::TrackletTimeline {
            video_id,
            models: self.state.tracklets.models_dir.clone(),
            comparison: self.state.tracklets.comparison,
        };
        match self.engine.submit("tracklet timeline", db, job) {
            Ok(handle) => self.state.tracklets.running = Some(handle.id),
            Err(e) => self.state.toast(ToastLevel::Error, e.to_string()),
        }
    }

    /// Takes a timeline job's result; `false` when it was not one.
    pub(super) fn timeline_job_finished(
        &mut self,
        id: u64,
        output: &Result<JobOutput, String>,
    ) -> bool {
        if self.state.tracklets.running != Some(id) {
            return matches!(output, Ok(JobOutput::Timeline(_)));
        }
        self.state.tracklets.running = None;
        match output {
            Ok(JobOutput::Timeline(timeline)) => {
                let panel = &mut self.state.tracklets;
                let new_video =
                    panel.timeline.as_ref().map(|t| t.video_id) != Some(timeline.video_id);
                if panel
                    .selected
                    .is_some_and(|t| timeline.index_of(t).is_none())
                {
                    panel.selected = None;
                }
                panel.timeline = Some((**timeline).clone());
                panel.problem = None;
                // A video just opened shows its first tracklet that can be compared.
                let first = (0..timeline.tracklets.len())
                    .find(|&i| timeline.similarity(i, i).is_some())
                    .map(|i| timeline.tracklets[i].id);
                if new_video
                    && self.state.tracklets.selected.is_none()
                    && let Some(first) = first
                {
                    self.select_tracklet(first);
                }
            }
            Ok(_) => return false,
            Err(e) => {
                self.state.tracklets.problem = Some(e.clone());
                if !e.contains("cancelled") {
                    self.state
                        .toast(ToastLevel::Warning, format!("tracklet timeline: {e}"));
                }
            }
        }
        // The selection may have moved on while this one was built.
        self.ensure_timeline();
        true
    }

    /// Starts following a box drawn on a video frame.
    pub(super) fn track_box(&mut self, video_id: i64, frame: i64, xywh: [f32; 4]) {
        let Some(lib) = &self.state.library else {
            return;
        };
        if lib.store.is_read_only() {
            self.state.toast(
                ToastLevel::Error,
                "the library is read-only; cannot add boxes",
            );
            return;
        }
        let db = lib.store.db_path().to_path_buf();
        let job = Job::TrackBox {
            video_id,
            frame,
            xywh,
        };
        match self.engine.submit("follow the box", db, job) {
            Ok(handle) => self.state.tracklets.following = Some(handle.id),
            Err(e) => self.state.toast(ToastLevel::Error, e.to_string()),
        }
    }

    /// Takes a box-following job's result: its boxes become a new tracklet (an audited,
    /// undoable edit). `false` when it was not that job.
    pub(super) fn track_job_finished(
        &mut self,
        id: u64,
        output: &Result<JobOutput, String>,
    ) -> bool {
        if self.state.tracklets.following != Some(id) {
            return matches!(output, Ok(JobOutput::Tracked { .. }));
        }
        self.state.tracklets.following = None;
        let (video_id, tracked) = match output {
            Ok(JobOutput::Tracked { video_id, boxes }) => (*video_id, boxes),
            Ok(_) => return false,
            Err(e) => {
                self.state
                    .toast(ToastLevel::Error, format!("following the box: {e}"));
                return true;
            }
        };
        let drawn = tracked
            .iter()
            .find(|t| t.score >= 1.0)
            .map_or(0, |t| t.frame);
        let (first, last) = (
            tracked.first().map_or(drawn, |t| t.frame),
            tracked.last().map_or(drawn, |t| t.frame),
        );
        let how =
            format!("drawn on frame {drawn}, followed by the tracker to frames {first}..={last}");
        let boxes: Vec<(i64, [f64; 4])> = tracked
            .iter()
            .map(|t| (t.frame, t.xywh.map(f64::from)))
            .collect();
        let who = self.state.reviewer.clone();
        let Some(lib) = self.state.library.as_mut() else {
            return true;
        };
        let added = lib
            .store
            .add_tracklet(&who, video_id, None, &boxes, &how)
            .and_then(|t| Ok((t, lib.store.tracklet_version(t)?)));
        match added {
            Ok((tracklet, version)) => {
                self.record_edit(Edit::AddTracklet {
                    video_id,
                    boxes,
                    how,
                    tracklet,
                    versions: vec![(tracklet, version)],
                });
                self.state.toast(
                    ToastLevel::Info,
                    format!(
                        "new tracklet T{tracklet}: frames {first}–{last} ({} boxes); the polyp \
                         was lost after that. Give it a polyp in the Tracklets tab.",
                        tracked.len()
                    ),
                );
                self.after_edit();
                self.state.tracklets.selected = Some(tracklet);
            }
            Err(e) => self.state.toast(ToastLevel::Error, e.to_string()),
        }
        true
    }

    /// Shows a tracklet's details and puts the frame slider on its first frame.
    pub(super) fn select_tracklet(&mut self, tracklet: i64) {
        self.state.tracklets.selected = Some(tracklet);
        let first = self
            .state
            .tracklets
            .timeline
            .as_ref()
            .and_then(|t| t.index_of(tracklet).map(|i| t.tracklets[i].first_frame));
        if let Some(frame) = first {
            let indices = &self.state.details.frame_indices;
            let at = indices.partition_point(|&f| f < frame);
            if at < indices.len() {
                self.state.focused = Some(at);
            }
        }
    }

    /// The reviewer's tracklet commands; each edit is recorded for undo.
    pub(super) fn tracklet_edit(&mut self, command: super::Command) {
        use super::Command as C;
        let who = self.state.reviewer.clone();
        let video = self.state.tracklets.timeline.as_ref().map(|t| t.video_id);
        let polyp_of = |app: &App, t: i64| {
            app.state
                .tracklets
                .timeline
                .as_ref()
                .and_then(|tl| tl.index_of(t).and_then(|i| tl.tracklets[i].polyp_id))
        };
        let (kept_polyp, other_polyp) = match &command {
            C::MergeTracklets { keep, other } => (polyp_of(self, *keep), polyp_of(self, *other)),
            _ => (None, None),
        };
        // The version of each tracklet as the timeline showed it: an edit made on it is
        // refused when another station changed the tracklet since (#46).
        let shown: HashMap<i64, i64> = self
            .state
            .tracklets
            .timeline
            .as_ref()
            .map(|tl| tl.tracklets.iter().map(|t| (t.id, t.version)).collect())
            .unwrap_or_default();
        let read = |t: i64| shown.get(&t).copied();
        let Some(lib) = self.state.library.as_mut() else {
            return;
        };
        let store = &mut lib.store;
        // Versions of the tracklets this station's own edits wrote.
        let mut mine: Vec<(i64, i64)> = Vec::new();
        let mut assign = |store: &mut crate::store::Store, t: i64, polyp: Option<i64>| {
            store
                .assign_tracklet_as_read(&who, t, polyp, read(t))
                .map(|w| {
                    mine.extend(&w.versions);
                    (w.value, w.versions)
                })
        };
        let result: Result<Edit, StoreError> = match command {
            C::AssignTracklet { tracklet, polyp } => {
                assign(store, tracklet, polyp).map(|(old, versions)| Edit::TrackletPolyp {
                    tracklet,
                    old,
                    new: polyp,
                    versions,
                })
            }
            C::NewPolypForTracklet(tracklet) => (|| {
                let video = video.ok_or_else(|| StoreError::Invalid("no video shown".into()))?;
                let polyp = store.new_review_polyp(&who, video)?;
                let (old, versions) = assign(store, tracklet, Some(polyp))?;
                Ok(Edit::TrackletPolyp {
                    tracklet,
                    old,
                    new: Some(polyp),
                    versions,
                })
            })(),
            C::MergeTracklets { keep, other } => (|| {
                let mut edits = Vec::new();
                let polyp = match kept_polyp {
                    Some(p) => p,
                    None => {
                        let video =
                            video.ok_or_else(|| StoreError::Invalid("no video shown".into()))?;
                        let p = store.new_review_polyp(&who, video)?;
                        let (old, versions) = assign(store, keep, Some(p))?;
                        edits.push(Edit::TrackletPolyp {
                            tracklet: keep,
                            old,
                            new: Some(p),
                            versions,
                        });
                        p
                    }
                };
                if other_polyp != Some(polyp) {
                    let (old, versions) = assign(store, other, Some(polyp))?;
                    edits.push(Edit::TrackletPolyp {
                        tracklet: other,
                        old,
                        new: Some(polyp),
                        versions,
                    });
                }
                Ok(Edit::Several(edits))
            })(),
            C::SplitTracklet { tracklet, frame } => store
                .split_tracklet_as_read(&who, tracklet, frame, read(tracklet))
                .map(|w| {
                    mine.extend(&w.versions);
                    Edit::Split {
                        tracklet,
                        frame,
                        part: w.value,
                        versions: w.versions,
                    }
                }),
            C::DecideLink { a, b, decision } => {
                let decision = decision.map(LinkDecision::from);
                store
                    .decide_link_as_read(&who, a, b, decision, [read(a), read(b)])
                    .map(|w| {
                        mine.extend(&w.versions);
                        Edit::Link {
                            a,
                            b,
                            old: w.value,
                            new: decision,
                            versions: w.versions,
                        }
                    })
            }
            other => unreachable!("not a tracklet edit: {other:?}"),
        };
        self.note_own_versions(&mine);
        match result {
            Ok(Edit::Several(edits)) if edits.is_empty() => {
                self.state
                    .toast(ToastLevel::Info, "the two tracklets already show one polyp");
            }
            Ok(edit) => self.record_edit(edit),
            Err(e) => self
                .state
                .toast(ToastLevel::Error, tracklet_error(e, "your edit")),
        }
        self.after_edit();
    }

    /// The timeline shown until its next build holds this station's own versions: a second
    /// edit (or an undo) right after the first is made on what the reviewer sees, not refused.
    pub(super) fn note_own_versions(&mut self, versions: &[(i64, i64)]) {
        if let Some(tl) = self.state.tracklets.timeline.as_mut() {
            for &(t, version) in versions {
                if let Some(row) = tl.tracklets.iter_mut().find(|r| r.id == t) {
                    row.version = version;
                }
            }
        }
    }
}

/// A refused tracklet edit in words: another station's change since it was read is named
/// (who, what, when), and `what` (your edit, the undo, the redo) was not made.
pub fn tracklet_error(e: StoreError, what: &str) -> String {
    match e {
        StoreError::Conflict {
            target, changes, ..
        } => format!(
            "{target}: changed on another station after you read it, by {changes}; {what} was \
             not made. The timeline now shows the library's tracklets: make it again if it \
             still holds."
        ),
        e => e.to_string(),
    }
}

/// A decision's name for the panel.
pub fn decision_text(d: Option<super::choices::LinkCall>) -> &'static str {
    use super::choices::LinkCall;
    match d {
        Some(LinkCall::Accepted) => "accepted",
        Some(LinkCall::Rejected) => "rejected",
        None => "undecided",
    }
}
