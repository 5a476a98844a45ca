//! Kvasir-SEG: `images/` and `masks/` with matching file names. Each image is one polyp seen
//! once; its mask (often JPEG) is thresholded at 127 and must have the image's size.

use super::plan::{Plan, PlanExam, PlanImage, PlanPolyp};
use super::{
    ImportError, Problems, SourceRoot, check_cancel, folder_name, prepare_mask, try_prepare,
};
use crate::plumbing::Progress;
use crate::store::MediaKind;
use std::path::Path;

pub fn read(
    root: &Path,
    links: super::Links,
    progress: &Progress,
    problems: &mut Problems,
) -> Result<Plan, ImportError> {
    let (images_dir, masks_dir) = (root.join("images"), root.join("masks"));
    if !images_dir.is_dir() || !masks_dir.is_dir() {
        return Err(ImportError::source_error(
            root,
            "not a Kvasir-SEG folder: expected images/ and masks/ inside",
        ));
    }
    let source = SourceRoot::with_links(root, links)?;
    let files = source.images_in(&images_dir, problems)?;
    let mut exam = PlanExam::new(folder_name(root), "colonoscopy", root);
    progress.stage("reading images", files.len() as u64);
    for path in files {
        check_cancel(progress)?;
        progress.inc();
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(mask_path) = ["jpg", "png", "jpeg", "tif"]
            .iter()
            .map(|ext| masks_dir.join(format!("{stem}.{ext}")))
            .find(|p| p.is_file())
        else {
            problems.push(&path, "no mask with this name in masks/");
            continue;
        };
        if let Err(reason) = source.check(&mask_path) {
            problems.push(&mask_path, reason);
            continue;
        }
        let Some(image) = try_prepare(&path, problems) else {
            continue;
        };
        let mask = match prepare_mask(&mask_path, image.width, image.height) {
            Ok(m) => m,
            Err(reason) => {
                problems.push(&mask_path, reason);
                continue;
            }
        };
        let mut view = PlanImage::new(image, MediaKind::View);
        view.mask = Some(mask);
        exam.polyps.push(PlanPolyp {
            code: stem,
            views: vec![view],
            ..Default::default()
        });
    }
    Ok(Plan { exams: vec![exam] })
}
