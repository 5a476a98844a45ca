//! Importers: each turns a public data layout into library rows.
//!
//! Every importer works in three steps so that the library is never half-written:
//! 1. read and check every item (decode images, parse manifests) without touching the library,
//!    collecting a per-item problem list;
//! 2. stop there when the user asked for `--strict` and something was wrong, or when cancelled;
//! 3. write the media files by content hash, then all rows in one transaction.

pub mod folder;

use crate::data::images::{self, Decoded, ImageError};
use crate::engine::Progress;
use crate::store::{self, MediaKind, NewMedia, Store, StoreError};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// Abort the whole import on the first bad item instead of skipping it.
    pub strict: bool,
}

/// One item that could not be imported, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemProblem {
    pub path: PathBuf,
    pub reason: String,
}

impl std::fmt::Display for ItemProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

/// What an import did, for the end-of-import summary.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportReport {
    pub examinations: usize,
    pub polyps: usize,
    pub media_added: usize,
    /// Items whose content was already in the library (same hash).
    pub duplicates: usize,
    pub skipped: Vec<ItemProblem>,
}

impl ImportReport {
    pub fn summary(&self) -> String {
        format!(
            "{} media added, {} duplicates, {} skipped; {} examinations, {} polyps",
            self.media_added,
            self.duplicates,
            self.skipped.len(),
            self.examinations,
            self.polyps
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{path}: {reason}")]
    Source { path: PathBuf, reason: String },
    #[error("import aborted (--strict), nothing was written: {first}{more}")]
    Strict {
        first: ItemProblem,
        more: String,
        problems: Vec<ItemProblem>,
    },
    #[error("import cancelled, nothing was written")]
    Cancelled,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ImportError {
    pub fn source_error(path: &Path, reason: impl Into<String>) -> ImportError {
        ImportError::Source {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }
}

/// Applies the strict/skip policy to the problems found while reading.
pub fn check_problems(problems: &[ItemProblem], options: ImportOptions) -> Result<(), ImportError> {
    if options.strict && !problems.is_empty() {
        let more = if problems.len() > 1 {
            format!(" (and {} more)", problems.len() - 1)
        } else {
            String::new()
        };
        return Err(ImportError::Strict {
            first: problems[0].clone(),
            more,
            problems: problems.to_vec(),
        });
    }
    Ok(())
}

/// An image read and checked, ready to be written.
pub struct PreparedImage {
    pub source: PathBuf,
    pub decoded: Decoded,
    pub thumbnail: Vec<u8>,
}

/// Longer side of the thumbnails stored with each media item.
pub const THUMBNAIL_SIDE: u32 = 128;

/// Reads, decodes and thumbnails one image file.
pub fn prepare_image(path: &Path) -> Result<PreparedImage, ImageError> {
    let decoded = images::decode_file(path)?;
    let thumbnail = images::thumbnail_jpeg(&decoded.image, THUMBNAIL_SIDE);
    Ok(PreparedImage {
        source: path.to_path_buf(),
        decoded,
        thumbnail,
    })
}

impl PreparedImage {
    /// Writes the file into the library's media folder and returns what the row needs.
    pub fn stage(
        &self,
        store: &Store,
        kind: MediaKind,
        examination_id: Option<i64>,
    ) -> Result<StagedMedia, StoreError> {
        let (hash, rel_path) = store.put_media_file(&self.decoded.bytes, self.decoded.extension())?;
        Ok(StagedMedia {
            hash,
            rel_path,
            media: NewMedia {
                kind,
                byte_len: self.decoded.bytes.len() as u64,
                source_path: self.source.display().to_string(),
                width: self.decoded.image.width(),
                height: self.decoded.image.height(),
                examination_id,
                thumbnail: Some(self.thumbnail.clone()),
                captured_at: None,
            },
        })
    }
}

/// A media file already in the media folder, waiting for its row.
pub struct StagedMedia {
    pub hash: String,
    pub rel_path: String,
    pub media: NewMedia,
}

impl StagedMedia {
    /// Inserts the row (or finds the same content already there) inside the transaction.
    pub fn insert(
        &self,
        tx: &rusqlite::Transaction<'_>,
        examination_id: Option<i64>,
    ) -> Result<(i64, bool), StoreError> {
        let mut media = self.media.clone();
        media.examination_id = examination_id.or(media.examination_id);
        store::insert_media(tx, &self.hash, &self.rel_path, &media)
    }
}

/// Walks `root` for image files, sorted by path so imports are deterministic.
pub fn image_files(root: &Path) -> Result<Vec<PathBuf>, ImportError> {
    let mut out = Vec::new();
    walk(root, &mut out).map_err(|e| ImportError::source_error(root, e.to_string()))?;
    out.sort();
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else if images::has_image_extension(&path) {
            out.push(path);
        }
    }
    Ok(())
}

/// Reads all images in order, reporting progress; bad ones become problems.
pub fn prepare_all(
    paths: &[PathBuf],
    progress: &Progress,
    problems: &mut Vec<ItemProblem>,
) -> Result<Vec<PreparedImage>, ImportError> {
    progress.stage("reading images", paths.len() as u64);
    let mut out = Vec::with_capacity(paths.len());
    for path in paths {
        if progress.is_cancelled() {
            return Err(ImportError::Cancelled);
        }
        match prepare_image(path) {
            Ok(p) => out.push(p),
            Err(e) => problems.push(ItemProblem {
                path: path.clone(),
                reason: e.to_string(),
            }),
        }
        progress.inc();
    }
    Ok(out)
}

/// The data layouts `endotwin import` understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImportLayout {
    /// Any folder of images: each image a frame, each folder an examination.
    Images,
}

/// Runs the importer for `layout`.
pub fn run(
    layout: ImportLayout,
    store: &mut Store,
    path: &Path,
    options: ImportOptions,
    progress: &Progress,
) -> Result<ImportReport, ImportError> {
    match layout {
        ImportLayout::Images => folder::import_folder(store, path, options, progress),
    }
}
