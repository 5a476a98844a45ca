//! What the UI asks for. The UI pushes these; [`super::logic`] applies them between frames.

use super::state::{Selection, Tab};
use crate::data::import::ImportLayout;
use crate::store::CaseFilter;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Open a library folder or `.sqlite` file.
    OpenLibrary(PathBuf),
    /// Ask for a library with the file dialog.
    PickLibrary,
    /// Import a folder of images, or a video file, into the open library (background job).
    Import(ImportLayout, PathBuf),
    /// Ask for what to import (a folder of images, a video file) with the file dialog.
    PickImport(ImportLayout),
    /// Ask for image files to view with the file dialog.
    PickImages,
    /// Files or folders dropped on the window.
    Dropped(Vec<PathBuf>),
    /// Import the opened (not yet imported) files.
    ImportOpenedFiles,
    Select(Selection),
    /// Move the selection up (-1) or down (+1) the browser's rows.
    MoveSelection(i32),
    /// Focus view `i` of the selection (or back to the grid with `None`).
    Focus(Option<usize>),
    /// Step the focused view forward/backward.
    StepView(i32),
    SetFilter(CaseFilter),
    ShowTab(Tab),
    /// Open the user guide at a bundled page (`None` closes it).
    Guide(Option<usize>),
    /// Set a polyp's label (`None` clears it).
    SetPolypLabel {
        polyp_id: i64,
        key: String,
        value: Option<String>,
    },
    /// The name written into the audit log for label changes.
    SetReviewer(String),
    Undo,
    Redo,
    CancelJob(u64),
    /// Retrieve the twins of the current selection (a polyp's views or the opened images).
    RetrieveTwins,
    /// Index the library with the twin models (only what changed is encoded).
    IndexTwins,
    SetTwinK(usize),
    SetTwinSearch(crate::twins::Search),
    SetTwinWeighted(bool),
    SetTwinAuto(bool),
    /// Include or leave out one view (media id) of the selected polyp in the twin query.
    ToggleTwinView(i64),
    /// Pin a twin (by polyp id) for side-by-side comparison, or unpin.
    PinTwin(Option<i64>),
    DismissToast(usize),
    /// Labelling: the field the number keys set.
    SetLabelField(super::state::LabelField),
    /// Labelling: the next (+1) or previous (-1) polyp of the library.
    StepPolyp(i32),
    /// Labelling: the next polyp without a value in the focused field.
    NextUnlabelled,
    /// Pick these polyps for a group action (a lasso on the map), replacing the picked ones.
    SetPicked(Vec<i64>),
    /// Add a polyp to the picked ones, or take it out (Ctrl+click in the browser).
    TogglePicked(i64),
    /// Write the picked polyps' labels as CSV (the `labels export` format) to this file; `None`
    /// asks where with a file dialog.
    ExportPicked(Option<PathBuf>),
    /// Retrieve the twins of the picked polyps together (all their views as one query).
    QueryPicked,
    /// Set one label on every picked polyp: one audited change each, one undo for all.
    LabelPicked {
        key: String,
        value: Option<String>,
    },
    /// Add a tag to (`add`) or remove it from every picked polyp; one undo for all.
    TagPicked {
        tag: String,
        add: bool,
    },
    /// Labelling: a frame's "polyp / no polyp" (`None` clears it), audited and undoable.
    SetFrameLabel {
        media_id: i64,
        value: Option<String>,
    },
    /// Labelling: which of the library's audited changes to list.
    AuditFilter(super::choices::HistoryFilter),
    /// Labelling: order the review queue (on the engine, over the twin index).
    BuildReviewQueue(crate::twins::review::QueueOrder),
    /// Labelling: J / K follow the review queue (true) or the browser's order.
    FollowQueue(bool),
    /// Tracklets panel: links at least this similar are drawn and grouped.
    SetLinkThreshold(f32),
    /// Tracklets panel: compare tracklets this way (the timeline is built again; the link
    /// threshold goes back to the comparison's suggested one).
    SetTrackletComparison(crate::tracklets::timeline::Comparison),
    /// Show a tracklet's details and links, and move the frame slider to its first frame.
    SelectTracklet(i64),
    /// Label a tracklet with a polyp of its examination, or with none.
    AssignTracklet {
        tracklet: i64,
        polyp: Option<i64>,
    },
    /// Label a tracklet with a new polyp of its examination.
    NewPolypForTracklet(i64),
    /// Label `other` with `keep`'s polyp (a new polyp for both when `keep` has none).
    MergeTracklets {
        keep: i64,
        other: i64,
    },
    /// Split a tracklet before `frame`: its later frames become a tracklet of their own.
    SplitTracklet {
        tracklet: i64,
        frame: i64,
    },
    /// Follow a box drawn on a video frame through the neighbouring frames (a background
    /// job); the boxes it finds become a new tracklet.
    TrackBox {
        video_id: i64,
        frame: i64,
        xywh: [f32; 4],
    },
    /// Accept, reject or (with `None`) clear the decision on the link between two tracklets.
    DecideLink {
        a: i64,
        b: i64,
        decision: Option<super::choices::LinkCall>,
    },
    /// The Captions tab: search and open hits.
    Captions(super::captions::CaptionCommand),
    /// The Text prompts tab: prompt sets, scores, search.
    Prompts(super::prompts::PromptCommand),
    /// The Training tab: its form, start and stop.
    Training(super::training::TrainingCommand),
    /// Draw (or clear) the polyp box on an opened image; twin queries crop around it.
    SetPolypBox {
        path: PathBuf,
        xywh: Option<[f32; 4]>,
    },
    /// Draw (or clear) the polyp box on a library image: audited, undoable; the twin encoders
    /// crop around it (over its mask's box) and the library is re-indexed.
    SetViewBox {
        media_id: i64,
        xywh: Option<[f32; 4]>,
    },
}
