//! The browser's lines, worked out once whenever the library or the filter changes, so a frame
//! draws only the lines on screen (a 100k-polyp library is 125k lines; a frame must not touch
//! them all).

use crate::store::ExamNode;

/// One line of the browser, by position in the filtered tree (`Library::tree`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrowserRow {
    Exam(usize),
    Polyp(usize, usize),
    Video(usize, usize),
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
