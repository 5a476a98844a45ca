//! HyperKvasir labelled images: nested class folders (e.g.
//! `lower-gi-tract/pathological-findings/polyps/*.jpg`). Each image is a frame labelled with
//! its leaf folder (`class`) and the whole path (`class_path`).

use super::plan::{Plan, PlanExam, PlanImage};
use super::{ImportError, Problems, SourceRoot, check_cancel, folder_name, try_prepare};
use crate::plumbing::Progress;
use crate::store::MediaKind;
use std::path::Path;

pub fn read(
    root: &Path,
    links: super::Links,
    progress: &Progress,
    problems: &mut Problems,
) -> Result<Plan, ImportError> {
    if !root.is_dir() {
        return Err(ImportError::source_error(root, "not a folder"));
    }
    let files = SourceRoot::with_links(root, links)?.image_files(root, problems)?;
    let mut exam = PlanExam::new(folder_name(root), "colonoscopy", root);
    progress.stage("reading images", files.len() as u64);
    for path in files {
        check_cancel(progress)?;
        progress.inc();
        let rel = path
            .parent()
            .and_then(|d| d.strip_prefix(root).ok())
            .map(|d| d.to_string_lossy().replace('\\', "/"))
            .unwrap_or_default();
        if rel.is_empty() {
            problems.push(&path, "image is not inside a class folder");
            continue;
        }
        let Some(image) = try_prepare(&path, problems) else {
            continue;
        };
        let mut frame = PlanImage::new(image, MediaKind::Frame);
        let class = rel.rsplit('/').next().unwrap_or(&rel).to_string();
        frame.labels = vec![("class".into(), class), ("class_path".into(), rel)];
        exam.frames.push(frame);
    }
    if exam.frames.is_empty() && problems.0.is_empty() {
        return Err(ImportError::source_error(
            root,
            "no labelled images found in class folders",
        ));
    }
    Ok(Plan { exams: vec![exam] })
}
