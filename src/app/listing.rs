//! The browser's lines, worked out once whenever the library or the filter changes, so a frame
//! draws only the lines on screen (a 100k-polyp library is 125k lines; a frame must not touch
//! them all).

use super::state::{Library, Selection};
use crate::store::{CaseFilter, ExamNode};

/// One line of the browser, by position in [`Library::tree`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrowserRow {
    Exam(usize),
    Polyp(usize, usize),
    Video(usize, usize),
}

impl BrowserRow {
    pub fn selection(self, tree: &[ExamNode]) -> Selection {
        match self {
            BrowserRow::Exam(e) => Selection::Examination(tree[e].exam.id),
            BrowserRow::Polyp(e, p) => Selection::Polyp(tree[e].polyps[p].id),
            BrowserRow::Video(e, v) => Selection::Video(tree[e].videos[v].id),
        }
    }
}

/// Every line of `tree` in display order: each examination, then its polyps and videos.
pub fn browser_rows(tree: &[ExamNode]) -> Vec<BrowserRow> {
    let mut rows = Vec::new();
    for (e, node) in tree.iter().enumerate() {
        rows.push(BrowserRow::Exam(e));
        rows.extend((0..node.polyps.len()).map(|p| BrowserRow::Polyp(e, p)));
        rows.extend((0..node.videos.len()).map(|v| BrowserRow::Video(e, v)));
    }
    rows
}

impl Library {
    /// The tree and lines the filter leaves of the listing, without reading the library.
    pub fn apply_filter(&mut self, filter: &CaseFilter) {
        self.tree = self.listing.tree(filter);
        self.rows = browser_rows(&self.tree);
    }
}
