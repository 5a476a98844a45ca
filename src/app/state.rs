//! Everything the UI draws from. The UI reads it and emits [`Command`](super::Command)s; only
//! [`logic`](super::logic) changes it.

use crate::store::{LinkDecision, Store, TargetKind};
// The library's rows as logic loaded them: what the panels draw (they never query the store).
pub use crate::store::{
    AuditEntry, BoxRow, CaseFilter, ExamNode, LibraryStats, MediaRow, PolypRow, SentenceRow,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

/// What the user is looking at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Selection {
    #[default]
    Nothing,
    Examination(i64),
    Polyp(i64),
    Video(i64),
    /// Images opened from disk or dropped in, not (yet) in the library.
    OpenedFiles,
}

/// A tab of the central area: the id of a panel in the registry (`ui::panels`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tab(pub &'static str);

impl Tab {
    pub const VIEWER: Tab = Tab("viewer");
    pub const TWINS: Tab = Tab("twins");
}

impl Default for Tab {
    fn default() -> Tab {
        Tab::VIEWER
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToastLevel {
    Info,
    Warning,
    Error,
}

#[derive(Debug, Clone)]
pub struct Toast {
    pub level: ToastLevel,
    pub text: String,
    pub created: Instant,
}

impl Toast {
    /// Errors stay until dismissed; the rest fade after a few seconds.
    pub fn expired(&self, now: Instant) -> bool {
        let secs = match self.level {
            ToastLevel::Info => 5.0,
            ToastLevel::Warning => 10.0,
            ToastLevel::Error => return false,
        };
        now.duration_since(self.created).as_secs_f32() > secs
    }
}

/// The open library and what the browser shows of it.
pub struct Library {
    pub store: Store,
    pub path: PathBuf,
    /// Opened read-only: labelling and imports are disabled.
    pub read_only: bool,
    /// Every examination, unfiltered, as read from the library.
    pub listing: crate::store::CaseListing,
    /// What the filter leaves of it, and its lines in display order.
    pub tree: Vec<ExamNode>,
    pub rows: Vec<super::listing::BrowserRow>,
    pub stats: LibraryStats,
    pub histologies: Vec<String>,
    pub locations: Vec<String>,
}

/// Details of the current selection, loaded once when it changes.
#[derive(Debug, Clone, Default)]
pub struct Details {
    pub title: String,
    pub fields: Vec<(String, String)>,
    pub attributes: Vec<(String, String)>,
    pub sentences: Vec<SentenceRow>,
    pub audit: Vec<AuditEntry>,
    pub polyp: Option<PolypRow>,
    /// Media shown in the viewer, in order.
    pub media: Vec<MediaRow>,
    /// For videos: frame index of each media item.
    pub frame_indices: Vec<i64>,
    pub boxes: Vec<BoxRow>,
    /// For each still image (not video frames), the polyp box a reviewer drew on it.
    pub view_boxes: Vec<Option<[f32; 4]>>,
    /// For each media item, its raw caption (finding) and that caption refined, when it has one.
    pub captions: Vec<Option<(String, crate::captions::Refined)>>,
    /// The versions of the shown labels, read before their values: a label edit is checked
    /// against them, so a change made elsewhere since is never overwritten silently.
    pub versions: HashMap<(TargetKind, i64), HashMap<String, i64>>,
}

impl Details {
    /// The version of label `key` of a shown target as it was read (`None`: not shown).
    pub fn read_version(&self, target: TargetKind, id: i64, key: &str) -> Option<i64> {
        let labels = self.versions.get(&(target, id))?;
        Some(labels.get(key).copied().unwrap_or(0))
    }
}

/// A reviewer's change that can be undone and redone: each one went through the store's
/// audited path, and so does its undo.
#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    /// A polyp label (pathology, location, ...).
    PolypLabel {
        polyp_id: i64,
        key: String,
        old: Option<String>,
        new: Option<String>,
        /// The label's version once this edit (or its undo or redo) was written.
        version: i64,
    },
    /// Which polyp a tracklet shows.
    TrackletPolyp {
        tracklet: i64,
        old: Option<i64>,
        new: Option<i64>,
        /// (tracklet, version) once this edit (or its undo or redo) was written: the undo or
        /// redo is refused when another station changed the tracklet since (#46).
        versions: Vec<(i64, i64)>,
    },
    /// A tracklet split at `frame`; `part` is the tracklet its later frames became.
    Split {
        tracklet: i64,
        frame: i64,
        part: i64,
        versions: Vec<(i64, i64)>,
    },
    /// A decision on the link between two tracklets.
    Link {
        a: i64,
        b: i64,
        old: Option<LinkDecision>,
        new: Option<LinkDecision>,
        versions: Vec<(i64, i64)>,
    },
    /// A tracklet added from drawn or followed boxes.
    AddTracklet {
        video_id: i64,
        boxes: Vec<(i64, [f64; 4])>,
        how: String,
        tracklet: i64,
        versions: Vec<(i64, i64)>,
    },
    /// A label of one image: a frame's "polyp / no polyp" ([`FRAME_KEY`]), or the polyp box
    /// drawn on a library view ([`crate::store::VIEW_BOX_KEY`]).
    MediaLabel {
        media_id: i64,
        key: &'static str,
        old: Option<String>,
        new: Option<String>,
        version: i64,
    },
    /// Several edits made by one action (undone last first).
    Several(Vec<Edit>),
}

/// The label key of a frame's "polyp / no polyp" (as labels files carry it).
pub const FRAME_KEY: &str = crate::labels::coco::FRAME_KEY;
/// The values a frame can take, in the order the number keys pick them.
pub const FRAME_VALUES: [&str; 2] = crate::labels::coco::FRAME_VALUES;

pub use super::choices::LabelField;

/// The Labelling panel: which field the number keys set, the choices of each field, and the
/// selected polyp's current values (filled by the logic from the library).
#[derive(Debug, Clone, Default)]
pub struct LabellingPanel {
    pub field: LabelField,
    /// Choices per field (the number keys pick them), in [`LabelField::ALL`] order.
    pub options: Vec<Vec<String>>,
    /// The selected polyp's value per field, in [`LabelField::ALL`] order.
    pub current: Vec<Option<String>>,
    /// Position of the selected polyp among the library's polyps, and their number.
    pub position: Option<(usize, usize)>,
    /// The review queue (empty until built) and the twin models' version that ordered it.
    pub queue: Vec<crate::twins::review::QueueItem>,
    pub queue_version: String,
    pub queue_order: crate::twins::review::QueueOrder,
    /// The queue job running now, if any.
    pub queue_job: Option<u64>,
    /// J / K follow the queue instead of the browser's order.
    pub follow_queue: bool,
    /// For an examination's or video's frames (the viewer's media, in order): each one's
    /// "polyp / no polyp" label.
    pub frame_labels: Vec<Option<String>>,
    /// The library's audit history as filtered (newest first).
    pub audit_filter: super::choices::HistoryFilter,
    pub audit: Vec<crate::store::LibraryAudit>,
}

/// The Tracklets panel: the selected video's timeline and the link threshold.
pub struct TrackletPanel {
    pub models_dir: PathBuf,
    /// How tracklets are compared (the models folder may not allow it: the timeline says
    /// which comparison stood in).
    pub comparison: crate::tracklets::timeline::Comparison,
    /// Links at least this similar are drawn and the grouping merges at this level; `None`
    /// until the reviewer moves the slider: the method's suggested threshold.
    pub threshold: Option<f32>,
    pub timeline: Option<crate::tracklets::timeline::Timeline>,
    /// The tracklet (id) whose details and links are shown.
    pub selected: Option<i64>,
    /// The timeline job running now, if any.
    pub running: Option<u64>,
    /// Why the last timeline could not be built.
    pub problem: Option<String>,
    /// The box-following job running now, if any.
    pub following: Option<u64>,
}

impl TrackletPanel {
    /// The link threshold in use for `timeline`.
    pub fn threshold_for(&self, timeline: &crate::tracklets::timeline::Timeline) -> f32 {
        self.threshold.unwrap_or(timeline.suggested_threshold)
    }
}

impl Default for TrackletPanel {
    fn default() -> Self {
        TrackletPanel {
            models_dir: crate::default_models_dir(),
            comparison: Default::default(),
            threshold: None,
            timeline: None,
            selected: None,
            running: None,
            problem: None,
            following: None,
        }
    }
}

/// What the Captions panel shows.
pub struct CaptionPanel {
    pub models_dir: PathBuf,
    /// Captions and categories of the shown frames.
    pub frames: HashMap<crate::captions::query::CaptionKey, crate::captions::query::FrameCaptions>,
    /// The caption model that made them (name and version).
    pub model: Option<String>,
    pub running: Option<u64>,
    /// Why the last answer could not be made (no model...).
    pub problem: Option<String>,
    pub search: Option<crate::captions::query::CaptionSearch>,
    pub searching: Option<u64>,
}

impl Default for CaptionPanel {
    fn default() -> Self {
        CaptionPanel {
            models_dir: crate::default_models_dir(),
            frames: HashMap::new(),
            model: None,
            running: None,
            problem: None,
            search: None,
            searching: None,
        }
    }
}

/// One text search's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptSearch {
    pub text: String,
    pub hits: Vec<crate::prompts::query::PolypHit>,
    /// Frames the search encoded first (the library was not encoded with this model).
    pub encoded: usize,
    pub model: String,
}

/// A video's polyp strip: the detector's reading of each of its frames.
#[derive(Debug, Clone, PartialEq)]
pub struct PolypStrip {
    pub video: i64,
    pub reading: crate::prompts::trust::PolypReading,
    /// The detector's name and version.
    pub model: String,
}

/// What the Text prompts panel shows.
pub struct PromptPanel {
    pub models_dir: PathBuf,
    /// The model searching, and scoring a set when chosen over the set's own (overridden).
    pub model: String,
    pub set_model_overridden: bool,
    /// The prompt models found in `models_dir`.
    pub models: Vec<String>,
    /// The prompt sets (the library's saved ones, else the shipped ones) and the shown one.
    pub sets: Vec<crate::prompts::PromptSet>,
    pub set: usize,
    pub scores: Option<crate::prompts::query::ScoredFrames>,
    pub running: Option<u64>,
    /// Why the last answer could not be made (no model, a bad prompt...).
    pub problem: Option<String>,
    pub search: Option<PromptSearch>,
    pub searching: Option<u64>,
    /// The selected video's polyp probability per frame (calibrated where the detector's
    /// card stores its calibration).
    pub strip: Option<PolypStrip>,
    /// (video, job) of the strip being computed; the video whose strip failed (not retried).
    pub strip_running: Option<(i64, u64)>,
    pub strip_failed: Option<i64>,
}

impl Default for PromptPanel {
    fn default() -> Self {
        let models_dir = crate::default_models_dir();
        PromptPanel {
            models: crate::engine::prompt_jobs::available(&models_dir),
            models_dir,
            model: crate::prompts::model::SHIPPED_NAME.into(),
            set_model_overridden: false,
            sets: crate::prompts::default_prompt_sets(),
            set: 0,
            scores: None,
            running: None,
            problem: None,
            search: None,
            searching: None,
            strip: None,
            strip_running: None,
            strip_failed: None,
        }
    }
}

/// The Training tab's state.
pub struct TrainingPanel {
    /// The chosen recipe's name.
    pub recipe: String,
    /// Values the user changed, by option name (the rest take the recipe's defaults).
    pub values: std::collections::BTreeMap<String, String>,
    /// The run started last (running or finished).
    pub run: Option<crate::engine::training::TrainingRun>,
    /// Whether the run's end was already announced with a toast.
    pub(super) announced: bool,
    /// The library's recorded runs, newest first, each with its per-epoch losses.
    pub runs: Vec<RecordedRun>,
    /// Runs (ids) whose epoch losses are drawn over each other.
    pub overlay: std::collections::BTreeSet<i64>,
    /// The library's promoted models (empty while it uses the shipped ones).
    pub active: Vec<ActiveModel>,
    /// A promotion or demotion running on the engine.
    pub promoting: Option<u64>,
    /// A report being made on the engine: (job id, run).
    pub reporting: Option<(u64, i64)>,
    /// The run whose evaluation report is shown.
    pub open_report: Option<i64>,
    /// A held-out library for reports (empty: the phantom's validation split, generated).
    pub report_held_out: String,
}

/// A model the library promoted, for the Training tab's "Active models".
#[derive(Debug, Clone, PartialEq)]
pub struct ActiveModel {
    /// Its capability name (`twin-image`, `tracklet-head`, ...).
    pub name: String,
    pub version: String,
    pub promoted_from: Option<crate::model::weights::Promotion>,
    /// An earlier model is kept: Demote puts it back.
    pub can_demote: bool,
}

/// A run from the library's records, for the runs list.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRun {
    pub row: crate::store::RunRow,
    /// The model card it saved, when it finished.
    pub card: Option<String>,
    /// (epoch, mean loss) of every finished epoch.
    pub losses: Vec<(usize, f64)>,
    /// Wall seconds of its epochs, summed.
    pub seconds: f64,
    /// Its evaluation report, when one was made (saved beside the card).
    pub report: Option<Box<crate::eval::report::Report>>,
}

impl Default for TrainingPanel {
    fn default() -> Self {
        TrainingPanel {
            recipe: crate::train::recipes()
                .first()
                .map_or(String::new(), |r| r.name().to_string()),
            values: Default::default(),
            run: None,
            announced: false,
            runs: Vec::new(),
            overlay: Default::default(),
            active: Vec::new(),
            promoting: None,
            reporting: None,
            open_report: None,
            report_held_out: String::new(),
        }
    }
}

impl TrainingPanel {
    /// The form's value of `name`, else the recipe's default.
    pub fn value(&self, name: &str, default: Option<&str>) -> String {
        self.values
            .get(name)
            .cloned()
            .or(default.map(str::to_string))
            .unwrap_or_default()
    }

    pub fn running(&self) -> bool {
        self.run.as_ref().is_some_and(|r| !r.finished())
    }
}

/// The digital-twin panel: its settings and the last answer.
pub struct TwinPanel {
    pub models_dir: PathBuf,
    pub k: usize,
    pub search: crate::twins::Search,
    /// Show the similarity-weighted vote instead of one vote per twin.
    pub weighted: bool,
    /// Retrieve whenever the selection changes while the panel is open.
    pub auto: bool,
    pub answer: Option<crate::engine::TwinAnswer>,
    /// A twin shown side by side with the query.
    pub pinned: Option<i64>,
    /// The pinned twin's code and views (media ids), kept from the answer it was pinned in.
    pub pinned_views: Option<(String, Vec<i64>)>,
    /// Views of the selected polyp left out of the query (clicked off in the panel).
    pub left_out: std::collections::HashSet<i64>,
    /// The job running now, if any.
    pub running: Option<u64>,
    /// Why the last retrieval could not run (no model, stale or empty index...).
    pub problem: Option<String>,
    /// A query made of several picked polyps' views, until the selection changes.
    pub group: Option<crate::engine::TwinQuery>,
}

impl TwinPanel {
    pub fn new() -> TwinPanel {
        TwinPanel {
            models_dir: crate::default_models_dir(),
            k: 6,
            search: crate::twins::Search::Shortlist,
            weighted: false,
            auto: true,
            answer: None,
            pinned: None,
            pinned_views: None,
            left_out: Default::default(),
            running: None,
            problem: None,
            group: None,
        }
    }
}

impl Default for TwinPanel {
    fn default() -> Self {
        TwinPanel::new()
    }
}

pub struct AppState {
    pub library: Option<Library>,
    pub filter: CaseFilter,
    pub selection: Selection,
    pub details: Details,
    pub tab: Tab,
    /// Index into `details.media` of the image shown large; `None` shows the grid.
    pub focused: Option<usize>,
    pub toasts: Vec<Toast>,
    pub reviewer: String,
    pub undo: Vec<Edit>,
    pub redo: Vec<Edit>,
    /// Polyps picked for a group action (a lasso on the twin map, Ctrl+click in the browser).
    pub picked: std::collections::BTreeSet<i64>,
    /// Paths of images opened from disk or dropped in.
    pub opened_files: Vec<PathBuf>,
    /// Decoded opened files by index, for the viewer (small, kept in memory).
    pub opened_errors: HashMap<PathBuf, String>,
    /// Polyp boxes drawn on opened images (x, y, w, h in pixels): twin queries crop there.
    pub opened_boxes: HashMap<PathBuf, [f32; 4]>,
    pub backend_summary: String,
    pub twins: TwinPanel,
    pub tracklets: TrackletPanel,
    pub labelling: LabellingPanel,
    pub training: TrainingPanel,
    pub captions: CaptionPanel,
    pub prompts: PromptPanel,
    /// The user guide's page on screen (an index into the bundled pages), if it is open.
    pub guide: Option<usize>,
    /// Watching the library for other stations' changes.
    pub sync: super::sync::LibrarySync,
}

impl AppState {
    pub fn new(backend_summary: String) -> AppState {
        AppState {
            library: None,
            filter: CaseFilter::default(),
            selection: Selection::Nothing,
            details: Details::default(),
            tab: Tab::VIEWER,
            focused: None,
            toasts: Vec::new(),
            reviewer: std::env::var("USER").unwrap_or_else(|_| "reviewer".into()),
            undo: Vec::new(),
            picked: Default::default(),
            redo: Vec::new(),
            opened_files: Vec::new(),
            opened_errors: HashMap::new(),
            opened_boxes: HashMap::new(),
            backend_summary,
            twins: TwinPanel::new(),
            tracklets: TrackletPanel::default(),
            labelling: LabellingPanel::default(),
            training: Default::default(),
            captions: Default::default(),
            prompts: Default::default(),
            guide: None,
            sync: Default::default(),
        }
    }

    pub fn toast(&mut self, level: ToastLevel, text: impl Into<String>) {
        let text = text.into();
        if level != ToastLevel::Info {
            eprintln!("{level:?}: {text}");
        }
        self.toasts.push(Toast {
            level,
            text,
            created: Instant::now(),
        });
    }

    /// The images the selection shows, at most `max`: opened files, or the selection's media
    /// in the viewer's order (what the Captions and Text prompts panels answer for).
    pub fn shown_frames(&self, max: usize) -> Vec<crate::captions::query::CaptionKey> {
        use crate::captions::query::CaptionKey;
        match self.selection {
            Selection::OpenedFiles => self
                .opened_files
                .iter()
                .take(max)
                .cloned()
                .map(CaptionKey::File)
                .collect(),
            Selection::Nothing => Vec::new(),
            _ => self
                .details
                .media
                .iter()
                .take(max)
                .map(|m| CaptionKey::Media(m.id))
                .collect(),
        }
    }

    /// The browser's rows in display order, for arrow-key navigation.
    pub fn visible_rows(&self) -> Vec<Selection> {
        let Some(lib) = &self.library else {
            return Vec::new();
        };
        lib.rows.iter().map(|r| lib.row_selection(*r)).collect()
    }
}
