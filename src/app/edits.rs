//! Undo and redo of the reviewer's edits. Every edit and every undo goes through the store's
//! audited path (a transaction with its audit row), so the audit log shows both.

use super::App;
use super::state::{Edit, ToastLevel};

impl App {
    /// Records an edit just made: it can be undone, and what was undone cannot be redone.
    pub(super) fn record_edit(&mut self, edit: Edit) {
        self.state.undo.push(edit);
        self.state.redo.clear();
    }

    pub(super) fn undo(&mut self) {
        if let Some(edit) = self.state.undo.pop() {
            match self.replay(edit, false) {
                Ok(edit) => self.state.redo.push(edit),
                Err(e) => self.state.toast(ToastLevel::Error, format!("undo: {e}")),
            }
            self.after_edit();
        }
    }

    pub(super) fn redo(&mut self) {
        if let Some(edit) = self.state.redo.pop() {
            match self.replay(edit, true) {
                Ok(edit) => self.state.undo.push(edit),
                Err(e) => self.state.toast(ToastLevel::Error, format!("redo: {e}")),
            }
            self.after_edit();
        }
    }

    /// Applies `edit` forward (redo) or backward (undo); returns it as it now stands (a redone
    /// split has a new id for its second part).
    fn replay(&mut self, edit: Edit, forward: bool) -> Result<Edit, String> {
        let who = self.state.reviewer.clone();
        match edit {
            Edit::PolypLabel {
                polyp_id,
                key,
                old,
                new,
                version,
            } => {
                // Checked against the version this edit left: a later change made elsewhere
                // is not undone silently.
                let value = if forward { &new } else { &old };
                let written = self
                    .set_label(polyp_id, &key, value.clone(), Some(version))
                    .ok_or("the label was not set (said above)")?;
                Ok(Edit::PolypLabel {
                    polyp_id,
                    key,
                    old,
                    new,
                    version: written.version,
                })
            }
            Edit::MediaLabel {
                media_id,
                key,
                old,
                new,
                version,
            } => {
                let value = if forward { &new } else { &old };
                let written = self
                    .set_media_label(media_id, key, value.clone(), Some(version))
                    .ok_or("the image's label was not set (said above)")?;
                Ok(Edit::MediaLabel {
                    media_id,
                    key,
                    old,
                    new,
                    version: written.version,
                })
            }
            Edit::Several(edits) => {
                let mut done = Vec::with_capacity(edits.len());
                if forward {
                    for e in edits {
                        done.push(self.replay(e, true)?);
                    }
                } else {
                    for e in edits.into_iter().rev() {
                        done.push(self.replay(e, false)?);
                    }
                    done.reverse();
                }
                Ok(Edit::Several(done))
            }
            other => {
                let store = &mut self
                    .state
                    .library
                    .as_mut()
                    .ok_or("no library is open")?
                    .store;
                // Each tracklet edit is checked against the versions its last writing left: an
                // undo or redo is refused when another station changed the tracklet since (#46).
                let what = if forward { "the redo" } else { "the undo" };
                let e = |e: crate::store::StoreError| super::tracklets::tracklet_error(e, what);
                let at = |versions: &[(i64, i64)], t: i64| {
                    versions.iter().find(|v| v.0 == t).map(|v| v.1)
                };
                let edit = match other {
                    Edit::TrackletPolyp {
                        tracklet,
                        old,
                        new,
                        versions,
                    } => {
                        let value = if forward { new } else { old };
                        let w = store
                            .assign_tracklet_as_read(&who, tracklet, value, at(&versions, tracklet))
                            .map_err(e)?;
                        Edit::TrackletPolyp {
                            tracklet,
                            old,
                            new,
                            versions: w.versions,
                        }
                    }
                    Edit::Split {
                        tracklet,
                        frame,
                        versions,
                        ..
                    } if forward => {
                        let w = store
                            .split_tracklet_as_read(&who, tracklet, frame, at(&versions, tracklet))
                            .map_err(e)?;
                        Edit::Split {
                            tracklet,
                            frame,
                            part: w.value,
                            versions: w.versions,
                        }
                    }
                    Edit::Split {
                        tracklet,
                        frame,
                        part,
                        versions,
                    } => {
                        let read = [at(&versions, tracklet), at(&versions, part)];
                        let w = store
                            .join_tracklets_as_read(&who, tracklet, part, read)
                            .map_err(e)?;
                        Edit::Split {
                            tracklet,
                            frame,
                            part,
                            versions: w.versions,
                        }
                    }
                    Edit::Link {
                        a,
                        b,
                        old,
                        new,
                        versions,
                    } => {
                        let read = [at(&versions, a), at(&versions, b)];
                        let value = if forward { new } else { old };
                        let w = store
                            .decide_link_as_read(&who, a, b, value, read)
                            .map_err(e)?;
                        Edit::Link {
                            a,
                            b,
                            old,
                            new,
                            versions: w.versions,
                        }
                    }
                    Edit::AddTracklet {
                        video_id,
                        boxes,
                        how,
                        tracklet,
                        versions,
                    } => {
                        let (tracklet, versions) = if forward {
                            let t = store
                                .add_tracklet(&who, video_id, None, &boxes, &how)
                                .map_err(e)?;
                            (t, vec![(t, store.tracklet_version(t).map_err(e)?)])
                        } else {
                            store
                                .remove_tracklet_as_read(&who, tracklet, at(&versions, tracklet))
                                .map_err(e)?;
                            (tracklet, Vec::new())
                        };
                        Edit::AddTracklet {
                            video_id,
                            boxes,
                            how,
                            tracklet,
                            versions,
                        }
                    }
                    Edit::PolypLabel { .. } | Edit::MediaLabel { .. } | Edit::Several(_) => {
                        unreachable!("handled above")
                    }
                };
                if let Edit::TrackletPolyp { versions, .. }
                | Edit::Split { versions, .. }
                | Edit::Link { versions, .. }
                | Edit::AddTracklet { versions, .. } = &edit
                {
                    let versions = versions.clone();
                    self.note_own_versions(&versions);
                }
                Ok(edit)
            }
        }
    }

    /// What every edit changes on screen: the browser, the details, the timeline.
    pub(super) fn after_edit(&mut self) {
        self.refresh_tree();
        self.load_details();
        self.refresh_timeline();
    }
}
