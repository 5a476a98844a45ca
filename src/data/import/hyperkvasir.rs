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
    refuse_images_of_two_classes(&mut exam, problems);
    if exam.frames.is_empty() && problems.0.is_empty() {
        return Err(ImportError::source_error(
            root,
            "no labelled images found in class folders",
        ));
    }
    Ok(Plan {
        exams: vec![exam],
        ..Default::default()
    })
}

/// One image (the same bytes) under two class folders: the source gives it two classes, and
/// neither is imported (round 9 N28: the class read first was kept, and the second reported
/// as a conflict "with the library" that `--update-labels` would only flip).
fn refuse_images_of_two_classes(exam: &mut PlanExam, problems: &mut Problems) {
    use sha2::{Digest, Sha256};
    use std::collections::BTreeMap;
    let class = |f: &PlanImage| {
        f.labels
            .iter()
            .find(|(k, _)| k == "class_path")
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let mut by_content: BTreeMap<Vec<u8>, Vec<usize>> = BTreeMap::new();
    for (i, f) in exam.frames.iter().enumerate() {
        by_content
            .entry(Sha256::digest(&f.image.bytes).to_vec())
            .or_default()
            .push(i);
    }
    let mut refused = vec![false; exam.frames.len()];
    for same in by_content.values() {
        let mut classes: Vec<String> = same.iter().map(|&i| class(&exam.frames[i])).collect();
        classes.sort();
        classes.dedup();
        if classes.len() < 2 {
            continue;
        }
        for &i in same {
            refused[i] = true;
            let others: Vec<String> = same
                .iter()
                .filter(|&&j| j != i)
                .map(|&j| exam.frames[j].image.source.display().to_string())
                .collect();
            problems.push(
                &exam.frames[i].image.source,
                format!(
                    "the same image as {} (the same bytes): this source gives it two classes \
                     ({}); the image is not imported (remove it from the folders it is not)",
                    others.join(" and "),
                    classes.join(", ")
                ),
            );
        }
    }
    let mut keep = refused.iter().map(|r| !r);
    exam.frames.retain(|_| keep.next().unwrap_or(true));
}
