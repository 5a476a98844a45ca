//! Generic image folders: every image becomes a frame; each folder that holds images becomes
//! one examination named after its path.

use super::{
    ImportError, ImportOptions, ImportReport, ItemProblem, check_problems, image_files,
    prepare_all,
};
use crate::engine::Progress;
use crate::store::{MediaKind, NewExamination, Store, upsert_examination};
use std::collections::BTreeMap;
use std::path::Path;

pub fn import_folder(
    store: &mut Store,
    root: &Path,
    options: ImportOptions,
    progress: &Progress,
) -> Result<ImportReport, ImportError> {
    if !root.is_dir() {
        return Err(ImportError::source_error(root, "not a folder"));
    }
    let files = image_files(root)?;
    if files.is_empty() {
        return Err(ImportError::source_error(
            root,
            "no image files (png, jpg, bmp, tif) found",
        ));
    }
    import_files(store, root, &files, options, progress)
}

/// Imports the given image files; `root` names the examinations (one per folder below it).
pub fn import_files(
    store: &mut Store,
    root: &Path,
    files: &[std::path::PathBuf],
    options: ImportOptions,
    progress: &Progress,
) -> Result<ImportReport, ImportError> {
    let mut problems: Vec<ItemProblem> = Vec::new();
    let prepared = prepare_all(files, progress, &mut problems)?;
    check_problems(&problems, options)?;
    if progress.is_cancelled() {
        return Err(ImportError::Cancelled);
    }

    let root_name = root
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "import".into());
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, p) in prepared.iter().enumerate() {
        let rel_dir = p
            .source
            .parent()
            .and_then(|d| d.strip_prefix(root).ok())
            .map(|d| d.to_string_lossy().replace('\\', "/"))
            .unwrap_or_default();
        let code = if rel_dir.is_empty() {
            root_name.clone()
        } else {
            format!("{root_name}/{rel_dir}")
        };
        groups.entry(code).or_default().push(i);
    }

    progress.stage("storing media", prepared.len() as u64);
    let mut staged = Vec::with_capacity(prepared.len());
    for p in &prepared {
        if progress.is_cancelled() {
            return Err(ImportError::Cancelled);
        }
        staged.push(p.stage(store, MediaKind::Frame, None)?);
        progress.inc();
    }

    let source = root.display().to_string();
    let mut report = ImportReport {
        skipped: problems,
        ..Default::default()
    };
    store.write(|tx| -> Result<(), ImportError> {
        for (code, items) in &groups {
            let exam = upsert_examination(
                tx,
                &NewExamination {
                    code: code.clone(),
                    kind: "colonoscopy".into(),
                    source: source.clone(),
                    ..Default::default()
                },
            )?;
            report.examinations += 1;
            for &i in items {
                let (_, new) = staged[i].insert(tx, Some(exam))?;
                if new {
                    report.media_added += 1;
                } else {
                    report.duplicates += 1;
                }
            }
        }
        if progress.is_cancelled() {
            return Err(ImportError::Cancelled);
        }
        Ok(())
    })?;
    Ok(report)
}
