//! Generic image folders: every image becomes a frame; each folder that holds images becomes
//! one examination named after its path.

use super::plan::{Plan, PlanExam, PlanImage};
use super::{ImportError, Problems, SourceRoot, check_cancel, folder_name, try_prepare};
use crate::plumbing::Progress;
use crate::store::MediaKind;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub fn read(
    root: &Path,
    links: super::Links,
    progress: &Progress,
    problems: &mut Problems,
) -> Result<Plan, ImportError> {
    if !root.is_dir() {
        return Err(ImportError::source_error(root, "not a folder"));
    }
    let source = SourceRoot::with_links(root, links)?;
    let files = source.image_files(root, problems)?;
    // Whatever else the folder holds is counted and its first files named (round 8 N8: a
    // Targa, a Netpbm file, a video and a `.jpg.bak` were left out without a word).
    let others = source.other_files(root, &files, problems)?;
    if files.is_empty() && problems.0.is_empty() {
        return Err(ImportError::source_error(
            root,
            format!(
                "no image files (png, jpg, bmp, tif) found ({} other file(s))",
                others.len()
            ),
        ));
    }
    if let Some(first) = others.first() {
        let shown: Vec<String> = others
            .iter()
            .take(3)
            .map(|f| crate::plumbing::input::shown_path(f.strip_prefix(root).unwrap_or(f)))
            .collect();
        let more = match others.len() {
            n if n > 3 => format!(" and {} more", n - 3),
            _ => String::new(),
        };
        problems.push(
            first.parent().unwrap_or(root),
            format!(
                "{} file(s) left out, not images EndoTwin reads (PNG, JPEG, BMP, TIFF): {}{more}",
                others.len(),
                shown.join(", ")
            ),
        );
    }
    read_files(root, &files, progress, problems)
}

/// Reads the given image files; `root` names the examinations (one per folder below it).
pub fn read_files(
    root: &Path,
    files: &[PathBuf],
    progress: &Progress,
    problems: &mut Problems,
) -> Result<Plan, ImportError> {
    let root_name = folder_name(root);
    let mut exams: BTreeMap<String, PlanExam> = BTreeMap::new();
    progress.stage("reading images", files.len() as u64);
    for path in files {
        check_cancel(progress)?;
        progress.inc();
        let rel_dir = path.parent().and_then(|d| d.strip_prefix(root).ok());
        // A folder name that is not UTF-8 would be decoded lossily, and two such folders
        // would become one examination: skipped by name instead.
        let Some(rel_dir) = rel_dir.map_or(Some(""), |d| d.to_str()) else {
            problems.push(
                path,
                "its folder's name is not valid UTF-8 (its examination code would not tell it \
                 from another folder's); rename the folder",
            );
            continue;
        };
        let rel_dir = rel_dir.replace('\\', "/");
        let Some(image) = try_prepare(path, problems) else {
            continue;
        };
        let code = if rel_dir.is_empty() {
            root_name.clone()
        } else {
            format!("{root_name}/{rel_dir}")
        };
        exams
            .entry(code.clone())
            .or_insert_with(|| PlanExam::new(code, "colonoscopy", root))
            .frames
            .push(PlanImage::new(image, MediaKind::Frame));
    }
    Ok(Plan {
        exams: exams.into_values().collect(),
        ..Default::default()
    })
}
