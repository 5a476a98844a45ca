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
                let e = |e: crate::store::StoreError| e.to_string();
                match other {
                    Edit::TrackletPolyp { tracklet, old, new } => {
                        store
                            .assign_tracklet(&who, tracklet, if forward { new } else { old })
                            .map_err(e)?;
                        Ok(Edit::TrackletPolyp { tracklet, old, new })
                    }
                    Edit::Split {
                        tracklet, frame, ..
                    } if forward => {
                        let part = store.split_tracklet(&who, tracklet, frame).map_err(e)?;
                        Ok(Edit::Split {
                            tracklet,
                            frame,
                            part,
                        })
                    }
                    Edit::Split {
                        tracklet,
                        frame,
                        part,
                    } => {
                        store.join_tracklets(&who, tracklet, part).map_err(e)?;
                        Ok(Edit::Split {
                            tracklet,
                            frame,
                            part,
                        })
                    }
                    Edit::Link { a, b, old, new } => {
                        store
                            .decide_link(&who, a, b, if forward { new } else { old })
                            .map_err(e)?;
                        Ok(Edit::Link { a, b, old, new })
                    }
                    Edit::AddTracklet {
                        video_id,
                        boxes,
                        how,
                        tracklet,
                    } => {
                        let tracklet = if forward {
                            store
                                .add_tracklet(&who, video_id, None, &boxes, &how)
                                .map_err(e)?
                        } else {
                            store.remove_tracklet(&who, tracklet).map_err(e)?;
                            tracklet
                        };
                        Ok(Edit::AddTracklet {
                            video_id,
                            boxes,
                            how,
                            tracklet,
                        })
                    }
                    Edit::PolypLabel { .. } | Edit::MediaLabel { .. } | Edit::Several(_) => {
                        unreachable!("handled above")
                    }
                }
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
