//! The browser's view of the library: every examination with its polyps and videos, read
//! once ([`super::Store::case_listing`]), and the filter a search applies to it in memory.

use super::cases::{ExaminationRow, PolypRow};
use super::videos::VideoRow;
use super::{Result, Store};

impl Store {
    /// The browser's tree: examinations with their polyps and videos, after the filter.
    /// With a polyp filter active, examinations without a matching polyp are left out.
    pub fn case_tree(&self, filter: &CaseFilter) -> Result<Vec<ExamNode>> {
        Ok(self.case_listing()?.tree(filter))
    }

    /// Every examination with all its polyps and videos, read in one go (a few queries, not
    /// one per examination): what the browser filters in memory as the user types.
    pub fn case_listing(&self) -> Result<CaseListing> {
        use std::collections::HashMap;
        let mut polyps: HashMap<i64, Vec<std::sync::Arc<PolypRow>>> = HashMap::new();
        for p in self.polyps()? {
            polyps
                .entry(p.examination_id)
                .or_default()
                .push(std::sync::Arc::new(p));
        }
        let mut videos: HashMap<i64, Vec<VideoRow>> = HashMap::new();
        for v in self.videos()? {
            videos.entry(v.examination_id).or_default().push(v);
        }
        let mut loose: HashMap<i64, i64> = HashMap::new();
        {
            let mut stmt = self.conn().prepare(
                "SELECT examination_id, count(*) FROM media m WHERE examination_id IS NOT NULL
                   AND kind IN ('frame','capsule')
                   AND m.id NOT IN (SELECT media_id FROM polyp_views)
                 GROUP BY examination_id",
            )?;
            for row in stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))? {
                let (k, v) = row?;
                loose.insert(k, v);
            }
        }
        let exams = self
            .examinations()?
            .into_iter()
            .map(|exam| ExamNode {
                polyps: polyps.remove(&exam.id).unwrap_or_default(),
                videos: videos.remove(&exam.id).unwrap_or_default(),
                loose_frame_count: loose.get(&exam.id).copied().unwrap_or(0),
                exam,
            })
            .collect::<Vec<ExamNode>>();
        Ok(CaseListing::new(exams))
    }
}

/// One examination with what the browser lists under it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExamNode {
    pub exam: ExaminationRow,
    /// Shared with the unfiltered listing: filtering a 100k-polyp library copies pointers.
    pub polyps: Vec<std::sync::Arc<PolypRow>>,
    pub videos: Vec<VideoRow>,
    pub loose_frame_count: i64,
}

/// The whole library as the browser lists it, unfiltered ([`Store::case_listing`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CaseListing {
    pub exams: Vec<ExamNode>,
    /// The lower-cased text a search looks in, per examination and per polyp (parallel to
    /// `exams` and their polyps), made once so typing does not lower-case the library.
    exam_text: Vec<String>,
    polyp_text: Vec<Vec<String>>,
}

impl CaseListing {
    pub fn new(exams: Vec<ExamNode>) -> CaseListing {
        let exam_text = exams.iter().map(|n| exam_search_text(&n.exam)).collect();
        let polyp_text = exams
            .iter()
            .map(|n| n.polyps.iter().map(|p| search_text(&n.exam, p)).collect())
            .collect();
        CaseListing {
            exams,
            exam_text,
            polyp_text,
        }
    }

    /// The examinations the filter keeps, with the polyps it keeps (all of them when only the
    /// examination's own text matches); no store access, linear in the library's size.
    pub fn tree(&self, filter: &CaseFilter) -> Vec<ExamNode> {
        let needle = filter.text.trim().to_lowercase();
        let mut out = Vec::new();
        for (e, node) in self.exams.iter().enumerate() {
            let exam = &node.exam;
            let exam_text_match = needle.is_empty() || self.exam_text[e].contains(&needle);
            let matching: Vec<std::sync::Arc<PolypRow>> = node
                .polyps
                .iter()
                .zip(&self.polyp_text[e])
                .filter(|(p, text)| {
                    filter.matches_polyp_fields(p) && (needle.is_empty() || text.contains(&needle))
                })
                .map(|(p, _)| p.clone())
                .collect();
            let keep = if filter.is_polyp_filter() {
                !matching.is_empty()
            } else {
                exam_text_match || !matching.is_empty()
            };
            if !keep {
                continue;
            }
            let polyps = if exam_text_match && !filter.is_polyp_filter() {
                node.polyps.clone()
            } else {
                matching
            };
            out.push(ExamNode {
                exam: exam.clone(),
                polyps,
                videos: node.videos.clone(),
                loose_frame_count: node.loose_frame_count,
            });
        }
        out
    }
}

/// Browser filters. Empty fields match everything; the text matches codes, location,
/// histology and Paris class, case-insensitively.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CaseFilter {
    pub text: String,
    pub histology: Option<String>,
    pub location: Option<String>,
    pub min_size_mm: Option<f64>,
    pub max_size_mm: Option<f64>,
}

impl CaseFilter {
    fn is_polyp_filter(&self) -> bool {
        self.histology.is_some()
            || self.location.is_some()
            || self.min_size_mm.is_some()
            || self.max_size_mm.is_some()
    }

    pub fn matches_polyp(&self, exam: &ExaminationRow, p: &PolypRow) -> bool {
        if !self.matches_polyp_fields(p) {
            return false;
        }
        let text = self.text.trim().to_lowercase();
        text.is_empty() || search_text(exam, p).contains(&text)
    }

    /// The pathology, location and size filters (not the text).
    fn matches_polyp_fields(&self, p: &PolypRow) -> bool {
        if let Some(h) = &self.histology
            && p.histology.as_deref() != Some(h.as_str())
        {
            return false;
        }
        if let Some(l) = &self.location
            && p.location.as_deref() != Some(l.as_str())
        {
            return false;
        }
        let size = p.size_mm.unwrap_or(f64::NAN);
        if self.min_size_mm.is_some_and(|m| size.is_nan() || size < m) {
            return false;
        }
        if self.max_size_mm.is_some_and(|m| size.is_nan() || size > m) {
            return false;
        }
        true
    }
}

/// What a search matches a polyp in, lower-cased, fields apart: the examination's code and
/// patient, the polyp's code, location, histology and Paris class.
fn search_text(exam: &ExaminationRow, p: &PolypRow) -> String {
    [
        Some(exam.code.as_str()),
        exam.patient.as_deref(),
        Some(p.code.as_str()),
        p.location.as_deref(),
        p.histology.as_deref(),
        p.paris.as_deref(),
    ]
    .iter()
    .flatten()
    .map(|f| f.to_lowercase())
    .collect::<Vec<_>>()
    .join("\u{1}")
}

/// What a search matches an examination itself in: its code and patient.
fn exam_search_text(exam: &ExaminationRow) -> String {
    let mut t = exam.code.to_lowercase();
    if let Some(p) = &exam.patient {
        t.push('\u{1}');
        t.push_str(&p.to_lowercase());
    }
    t
}
