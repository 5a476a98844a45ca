//! What the state shows, read from the library in one go: a library opened for the window,
//! and the viewer's and details panel's contents for a selection. Called by the logic only.

use super::listing::{BrowserRow, browser_rows};
use super::state::{Details, Library, Selection};
use crate::store::{self, Store, TargetKind};
use std::path::Path;

pub(super) fn load_library(store: Store, path: &Path) -> store::Result<Library> {
    Ok(Library {
        stats: store.stats()?,
        histologies: store.histologies()?,
        locations: store.locations()?,
        listing: store.case_listing()?,
        tree: Vec::new(),
        rows: Vec::new(),
        path: path.to_path_buf(),
        read_only: store.is_read_only(),
        store,
    })
}

/// Everything the viewer and details panel show for a selection, read in one go.
pub(super) fn details_for(store: &Store, selection: Selection) -> store::Result<Details> {
    let mut d = Details::default();
    // Versions before values: a change landing in between makes an edit a conflict to look
    // at again, never a silent overwrite.
    if let Selection::Polyp(id) = selection {
        let mut versions = store.label_versions(TargetKind::Polyp, &[id])?;
        let labels = versions.remove(&id).unwrap_or_default();
        d.versions.insert((TargetKind::Polyp, id), labels);
    }
    match selection {
        Selection::Examination(id) => {
            let Some(exam) = store.examination(id)? else {
                return Ok(d);
            };
            d.title = format!("Examination {}", exam.code);
            d.fields = vec![
                (
                    "Patient".into(),
                    exam.patient.clone().unwrap_or_else(|| "—".into()),
                ),
                ("Kind".into(), exam.kind.clone()),
                (
                    "Date".into(),
                    exam.date.clone().unwrap_or_else(|| "—".into()),
                ),
                ("Source".into(), exam.source.clone()),
            ];
            d.sentences = store.report_sentences(id)?;
            d.media = store.loose_frames(id)?;
        }
        Selection::Polyp(id) => {
            let Some(p) = store.polyp(id)? else {
                return Ok(d);
            };
            d.title = format!("Polyp {}", p.code);
            let exam = store.examination(p.examination_id)?;
            d.fields = vec![
                (
                    "Examination".into(),
                    exam.map(|e| e.code).unwrap_or_default(),
                ),
                (
                    "Location".into(),
                    p.location.clone().unwrap_or_else(|| "—".into()),
                ),
                (
                    "Size".into(),
                    p.size_mm
                        .map(|s| format!("{s:.0} mm"))
                        .unwrap_or_else(|| "—".into()),
                ),
                (
                    "Paris class".into(),
                    p.paris.clone().unwrap_or_else(|| "—".into()),
                ),
                (
                    "Histology".into(),
                    p.histology.clone().unwrap_or_else(|| "unknown".into()),
                ),
                (
                    "Vienna class".into(),
                    p.vienna_class
                        .map(|v| v.to_string())
                        .unwrap_or_else(|| "—".into()),
                ),
                ("Views".into(), p.view_count.to_string()),
            ];
            if let Some(tags) =
                store.current_label(TargetKind::Polyp, id, crate::labels::tags::KEY)?
            {
                d.fields.push(("Tags".into(), tags));
            }
            d.attributes = store.attributes(id)?;
            d.sentences = store
                .report_sentences(p.examination_id)?
                .into_iter()
                .filter(|s| s.polyp_id.is_none_or(|pid| pid == id))
                .collect();
            d.audit = store.audit_history(TargetKind::Polyp, id)?;
            d.media = store.polyp_views(id)?;
            d.polyp = Some(p);
        }
        Selection::Video(id) => {
            let Some(v) = store.videos()?.into_iter().find(|v| v.id == id) else {
                return Ok(d);
            };
            d.title = format!("Video {}", v.code);
            d.fields = vec![
                ("Frames".into(), v.frame_count.to_string()),
                ("FPS".into(), format!("{:.0}", v.fps)),
                ("Tracklets".into(), v.tracklet_count.to_string()),
            ];
            let frames = store.video_frames(id)?;
            d.frame_indices = frames.iter().map(|(i, _)| *i).collect();
            d.media = frames.into_iter().map(|(_, m)| m).collect();
            d.boxes = store.video_boxes(id)?;
        }
        Selection::Nothing | Selection::OpenedFiles => {}
    }
    let ids: Vec<i64> = d.media.iter().map(|m| m.id).collect();
    let mut versions = store.label_versions(TargetKind::Media, &ids)?;
    for &id in &ids {
        let labels = versions.remove(&id).unwrap_or_default();
        d.versions.insert((TargetKind::Media, id), labels);
    }
    if !matches!(selection, Selection::Video(_)) {
        d.view_boxes = ids
            .iter()
            .map(|&id| store.view_box(id))
            .collect::<Result<_, _>>()?;
    }
    let mut captions = store.captions_of(&ids)?;
    let refiner = crate::captions::Refiner::shipped();
    d.captions = ids
        .iter()
        .map(|id| captions.remove(id).map(|raw| (refiner.refine(&raw), raw)))
        .map(|c| c.map(|(refined, raw)| (raw, refined)))
        .collect();
    Ok(d)
}

impl Library {
    /// The tree and lines the filter leaves of the listing, without reading the library.
    pub fn apply_filter(&mut self, filter: &store::CaseFilter) {
        self.tree = self.listing.tree(filter);
        self.rows = browser_rows(&self.tree);
    }

    /// What selecting browser line `row` selects.
    pub fn row_selection(&self, row: BrowserRow) -> Selection {
        let tree = &self.tree;
        match row {
            BrowserRow::Exam(e) => Selection::Examination(tree[e].exam.id),
            BrowserRow::Polyp(e, p) => Selection::Polyp(tree[e].polyps[p].id),
            BrowserRow::Video(e, v) => Selection::Video(tree[e].videos[v].id),
        }
    }
}
