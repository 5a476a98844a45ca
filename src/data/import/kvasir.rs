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
    let stem_of = |p: &Path| {
        p.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let stems: std::collections::HashSet<String> = files.iter().map(|p| stem_of(p)).collect();
    for path in files {
        check_cancel(progress)?;
        progress.inc();
        let stem = stem_of(&path);
        // The image first: an empty or broken image is named as such, not as maskless.
        let Some(image) = try_prepare(&path, problems) else {
            continue;
        };
        // Any file under the mask's name counts (a FIFO is refused as a mask by name, round 6
        // N46: it was "no mask with this name").
        let Some(mask_path) = MASK_EXTENSIONS
            .iter()
            .map(|ext| masks_dir.join(format!("{stem}.{ext}")))
            .find(|p| std::fs::symlink_metadata(p).is_ok())
        else {
            problems.push(&path, "no mask with this name in masks/; not imported");
            continue;
        };
        let mask = source
            .check(&mask_path)
            .and_then(|_| prepare_mask(&mask_path, image.width, image.height));
        let mask = match mask {
            Ok(m) => m,
            Err(reason) => {
                problems.push(
                    &mask_path,
                    format!("{reason}; its image {} is not imported", path.display()),
                );
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
    // A mask named for no image is named, as `import multiview` names one.
    let mut strays: Vec<_> = std::fs::read_dir(&masks_dir)
        .map_err(|e| ImportError::source_error(&masks_dir, e.to_string()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| !stems.contains(&stem_of(p)))
        .collect();
    strays.sort();
    for stray in strays {
        problems.push(&stray, "a mask named for no image in images/; not imported");
    }
    Ok(Plan {
        exams: vec![exam],
        ..Default::default()
    })
}

/// The extensions a Kvasir-SEG mask may have, in the order they are looked for.
const MASK_EXTENSIONS: [&str; 4] = ["jpg", "png", "jpeg", "tif"];
