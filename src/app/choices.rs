//! What a reviewer chooses in a panel, in the app's own words (panels never name the store's
//! types): the history filter as typed, and a call on a link between two tracklets. The
//! logic turns them into the store's.

/// The history panel's filter: whose changes, since and until when (as typed). The logic
/// turns it into the store's query; panels never see the store's types.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistoryFilter {
    pub who: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
}

/// A reviewer's call on a link between two tracklets, as the panels show and send it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkCall {
    /// The same polyp.
    Accepted,
    /// Different polyps.
    Rejected,
}

impl From<crate::store::LinkDecision> for LinkCall {
    fn from(d: crate::store::LinkDecision) -> LinkCall {
        match d {
            crate::store::LinkDecision::Accepted => LinkCall::Accepted,
            crate::store::LinkDecision::Rejected => LinkCall::Rejected,
        }
    }
}

impl From<LinkCall> for crate::store::LinkDecision {
    fn from(c: LinkCall) -> crate::store::LinkDecision {
        match c {
            LinkCall::Accepted => crate::store::LinkDecision::Accepted,
            LinkCall::Rejected => crate::store::LinkDecision::Rejected,
        }
    }
}

/// A polyp label the Labelling panel sets with the keyboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LabelField {
    #[default]
    Histology,
    Paris,
    Surface,
    Location,
    Size,
}

impl LabelField {
    pub const ALL: [LabelField; 5] = [
        LabelField::Histology,
        LabelField::Paris,
        LabelField::Surface,
        LabelField::Location,
        LabelField::Size,
    ];

    /// The label key it writes.
    pub fn key(self) -> &'static str {
        match self {
            LabelField::Histology => "histology",
            LabelField::Paris => "paris",
            LabelField::Surface => "surface",
            LabelField::Location => "location",
            LabelField::Size => "size_mm",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            LabelField::Histology => "Histology",
            LabelField::Paris => "Paris class",
            LabelField::Surface => "Surface pattern",
            LabelField::Location => "Location",
            LabelField::Size => "Size (mm)",
        }
    }

    /// The key that focuses it.
    pub fn shortcut(self) -> egui::Key {
        match self {
            LabelField::Histology => egui::Key::H,
            LabelField::Paris => egui::Key::P,
            LabelField::Surface => egui::Key::S,
            LabelField::Location => egui::Key::L,
            LabelField::Size => egui::Key::Z,
        }
    }
}
