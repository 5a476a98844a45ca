//! Importers: each turns a public data layout into library rows.
//!
//! Every importer works in three steps so that the library is never half-written:
//! 1. read and check every item (decode images, parse manifests) into a [`Plan`] without
//!    touching the library, collecting a per-item problem list;
//! 2. stop there when the user asked for `--strict` and something was wrong, or when cancelled;
//! 3. [`plan::write`]: the media files by content hash, then all rows in one transaction.

pub mod captiv8;
pub mod coco;
pub mod cvc;
pub mod folder;
pub mod hyperkvasir;
pub mod kinds;
pub mod kvasir;
pub mod multiview;
pub mod paths;
pub mod plan;
pub mod realcolon;
pub mod video;

pub use paths::{Links, SourceRoot};
pub use plan::Plan;

use crate::data::images::{self, ImageError};
use crate::plumbing::Progress;
use crate::store::{LabelChange, LabelPolicy, Store, StoreError};
use image::{GrayImage, ImageFormat};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// Abort the whole import on the first bad item instead of skipping it.
    pub strict: bool,
    /// Apply labels that differ from the library's (one audit row each) instead of keeping
    /// the library's and reporting the difference.
    pub update_labels: bool,
    /// Follow symbolic links that lead outside the source folder (data on another disk)
    /// instead of refusing them; links back to a folder above them are still refused.
    pub follow_links: bool,
}

/// One item that could not be imported, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemProblem {
    pub path: PathBuf,
    pub reason: String,
}

impl std::fmt::Display for ItemProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = crate::plumbing::input::shown_path(&self.path);
        write!(f, "{path}: {}", self.reason)
    }
}

/// What an import did, for the end-of-import summary.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportReport {
    pub examinations: usize,
    pub polyps: usize,
    /// Views of those polyps, and how many came with a mask.
    pub views: usize,
    pub masked_views: usize,
    pub videos: usize,
    /// Frames of those videos (identical frames count once in `media_added`).
    pub video_frames: usize,
    pub boxes: usize,
    pub media_added: usize,
    /// Masks of those items new to the library (a mask is a media item too: `info` counts it).
    pub masks_added: usize,
    /// Items whose content was already in the library (same hash).
    pub duplicates: usize,
    /// Of those, the ones that stay in another examination (by its code): a picture is in
    /// the library once, in the examination it first came in with.
    pub duplicates_elsewhere: std::collections::BTreeMap<String, usize>,
    pub skipped: Vec<ItemProblem>,
    /// Labels this source gives differently from the library: kept (reported) or, with
    /// `update_labels`, applied with an audit row.
    pub label_changes: Vec<LabelChange>,
    /// Whether the library changed at all (false for a re-import of the same source).
    pub changed: bool,
    /// Examinations of the source that were in the library already (by code): their items
    /// were added to those examinations.
    pub existing_examinations: Vec<String>,
    /// Polyps of the source not made because none of their views or boxes came in.
    pub empty_polyps_not_kept: usize,
    /// What the source said that is not an item refused (the importer's notes).
    pub notes: Vec<String>,
}

impl ImportReport {
    pub fn summary(&self) -> String {
        let masks = if self.masks_added > 0 {
            format!(" (and {} masks)", self.masks_added)
        } else {
            String::new()
        };
        let mut s = format!(
            "{} media added{masks}, {} duplicates, {} skipped; {} examinations, {} polyps",
            self.media_added,
            self.duplicates,
            self.skipped.len(),
            self.examinations,
            self.polyps
        );
        if self.views > 0 {
            s.push_str(&format!(", {} views", self.views));
            if self.masked_views > 0 {
                let all = if self.masked_views == self.views {
                    "all".to_string()
                } else {
                    self.masked_views.to_string()
                };
                s.push_str(&format!(" ({all} with masks)"));
            }
        }
        if self.videos > 0 {
            s.push_str(&format!(
                ", {} videos ({} frames), {} boxes",
                self.videos, self.video_frames, self.boxes
            ));
        }
        let applied = self.label_changes.iter().filter(|c| c.applied).count();
        let kept = self.label_changes.len() - applied;
        if kept > 0 {
            s.push_str(&format!("; {kept} label conflicts (library kept)"));
        }
        if applied > 0 {
            s.push_str(&format!("; {applied} labels updated (audited)"));
        }
        if !self.duplicates_elsewhere.is_empty() {
            let n: usize = self.duplicates_elsewhere.values().sum();
            let shown: Vec<String> = self
                .duplicates_elsewhere
                .iter()
                .take(5)
                .map(|(code, k)| format!("{k} in {code}"))
                .collect();
            let more = self.duplicates_elsewhere.len().saturating_sub(5);
            let more = if more > 0 {
                format!(" and {more} more examinations")
            } else {
                String::new()
            };
            s.push_str(&format!(
                "; {n} of the duplicates stay in the examination they were first imported with ({}{more}), not this one",
                shown.join(", ")
            ));
        }
        if self.empty_polyps_not_kept > 0 {
            s.push_str(&format!(
                "; {} polyps not made (none of their views or boxes came in)",
                self.empty_polyps_not_kept
            ));
        }
        if !self.existing_examinations.is_empty() {
            let shown: Vec<&str> = self
                .existing_examinations
                .iter()
                .take(5)
                .map(String::as_str)
                .collect();
            let more = self.existing_examinations.len().saturating_sub(5);
            s.push_str(&format!(
                "; added to {} examinations already in the library: {}{}",
                self.existing_examinations.len(),
                shown.join(", "),
                if more > 0 {
                    format!(" (and {more} more)")
                } else {
                    String::new()
                }
            ));
        }
        if !self.changed {
            s.push_str("; the library did not change");
        }
        for note in &self.notes {
            s.push_str(&format!("; note: {note}"));
        }
        s
    }

    /// Nothing new came in, and something was refused or in conflict: the import failed
    /// in the user's eyes (the CLI exits non-zero).
    pub fn nothing_imported(&self) -> bool {
        !self.changed && (!self.skipped.is_empty() || self.label_changes.iter().any(|c| !c.applied))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{}: {reason}", crate::plumbing::input::shown_path(path))]
    Source { path: PathBuf, reason: String },
    #[error("import aborted (--strict), nothing was written: {first}{more}")]
    Strict {
        first: ItemProblem,
        more: String,
        problems: Vec<ItemProblem>,
    },
    #[error("nothing imported: every item was refused: {}", list(.problems))]
    NothingImported {
        first: ItemProblem,
        more: String,
        problems: Vec<ItemProblem>,
    },
    #[error("nothing imported: the source holds no items of this layout")]
    Empty,
    #[error("import cancelled, nothing was written")]
    Cancelled,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Up to twenty problems, each naming its item, `; `-separated.
fn list(problems: &[ItemProblem]) -> String {
    let mut s: Vec<String> = problems.iter().take(20).map(|p| p.to_string()).collect();
    if problems.len() > 20 {
        s.push(format!("and {} more", problems.len() - 20));
    }
    s.join("; ")
}

impl ImportError {
    pub fn source_error(path: &Path, reason: impl Into<String>) -> ImportError {
        ImportError::Source {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }
}

/// The problems met while reading; each importer pushes to it, the policy decides at the end.
#[derive(Debug, Default)]
pub struct Problems(pub Vec<ItemProblem>);

impl Problems {
    pub fn push(&mut self, path: &Path, reason: impl Into<String>) {
        self.0.push(ItemProblem {
            path: path.to_path_buf(),
            reason: reason.into(),
        });
    }

    /// Applies the strict/skip policy, and refuses an import with nothing left to write.
    pub fn check(&self, options: ImportOptions, plan: &Plan) -> Result<(), ImportError> {
        let problems = &self.0;
        let more = if problems.len() > 1 {
            format!(" (and {} more)", problems.len() - 1)
        } else {
            String::new()
        };
        if options.strict && !problems.is_empty() {
            return Err(ImportError::Strict {
                first: problems[0].clone(),
                more,
                problems: problems.clone(),
            });
        }
        if plan.is_empty() {
            return Err(match problems.first() {
                Some(first) => ImportError::NothingImported {
                    first: first.clone(),
                    more,
                    problems: problems.clone(),
                },
                None => ImportError::Empty,
            });
        }
        Ok(())
    }
}

/// An image read and checked: its exact bytes, size and thumbnail. The decoded pixels are not
/// kept, so large imports do not hold every frame in memory.
#[derive(Debug, Clone)]
pub struct PreparedImage {
    pub source: PathBuf,
    pub bytes: Vec<u8>,
    pub extension: &'static str,
    pub width: u32,
    pub height: u32,
    pub thumbnail: Vec<u8>,
}

pub use super::images::THUMBNAIL_SIDE;

/// Reads, decodes and thumbnails one image file.
pub fn prepare_image(path: &Path) -> Result<PreparedImage, ImageError> {
    let decoded = images::decode_file(path)?;
    Ok(PreparedImage {
        source: path.to_path_buf(),
        thumbnail: images::thumbnail_jpeg(&decoded.image, THUMBNAIL_SIDE),
        extension: decoded.extension(),
        width: decoded.image.width(),
        height: decoded.image.height(),
        bytes: decoded.bytes,
    })
}

/// Reads a segmentation mask, thresholds it at 127 (masks are often JPEG) and checks it has
/// the image's size. Stored as a binary PNG.
pub fn prepare_mask(path: &Path, width: u32, height: u32) -> Result<PreparedImage, String> {
    let decoded = images::decode_file(path).map_err(|e| e.to_string())?;
    let (w, h) = (decoded.image.width(), decoded.image.height());
    if (w, h) != (width, height) {
        return Err(format!("mask is {w}x{h} but its image is {width}x{height}"));
    }
    // A photograph given as the mask (round 12 N5: the frame itself, thresholded, became the
    // polyp's outline): a mask is black and white, with a few grey pixels at its edge.
    let pixels = (w as u64 * h as u64).max(1);
    let rgb = decoded.image.to_rgb8();
    let coloured = rgb
        .pixels()
        .filter(|p| p.0.iter().max().unwrap_or(&0) - p.0.iter().min().unwrap_or(&0) > 64)
        .count() as u64;
    if coloured * 10 > pixels {
        return Err(format!(
            "not a mask: {}% of its pixels are coloured (a photograph?); a mask is black with \
             the polyp white",
            coloured * 100 / pixels
        ));
    }
    let luma = decoded.image.to_luma8();
    let grey = luma
        .pixels()
        .filter(|p| (48..=207).contains(&p.0[0]))
        .count() as u64;
    if grey * 4 > pixels {
        return Err(format!(
            "not a mask: {}% of its pixels are mid-grey (a photograph?); a mask is black with \
             the polyp white",
            grey * 100 / pixels
        ));
    }
    let binary = GrayImage::from_fn(w, h, |x, y| {
        image::Luma([if luma.get_pixel(x, y).0[0] > 127 {
            255
        } else {
            0
        }])
    });
    // A mask without a polyp pixel, or polyp everywhere, outlines nothing: crops and masked
    // figures made from it would be of the wrong pixels (round 7 N50).
    let polyp = binary.pixels().filter(|p| p.0[0] > 0).count() as u64;
    if polyp == 0 {
        return Err("the mask is all black (no polyp pixel after thresholding at 127)".into());
    }
    if polyp == w as u64 * h as u64 {
        return Err("the mask is all white (polyp everywhere after thresholding at 127)".into());
    }
    let mut out = std::io::Cursor::new(Vec::new());
    binary
        .write_to(&mut out, ImageFormat::Png)
        .expect("PNG encoding into memory cannot fail");
    Ok(PreparedImage {
        source: path.to_path_buf(),
        bytes: out.into_inner(),
        extension: "png",
        width: w,
        height: h,
        thumbnail: Vec::new(),
    })
}

/// Prepares one image, recording a problem instead of failing.
pub fn try_prepare(path: &Path, problems: &mut Problems) -> Option<PreparedImage> {
    match prepare_image(path) {
        Ok(p) => Some(p),
        Err(e) => {
            problems.push(path, e.to_string());
            None
        }
    }
}

pub fn check_cancel(progress: &Progress) -> Result<(), ImportError> {
    if progress.is_cancelled() {
        Err(ImportError::Cancelled)
    } else {
        Ok(())
    }
}

/// The last folder name of a path, for examination codes.
pub fn folder_name(path: &Path) -> String {
    path.canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "import".into())
}

/// The data layouts `endotwin import` understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImportLayout {
    /// Any folder of images: each image a frame, each folder an examination.
    Images,
    /// Kvasir-SEG: images/ and masks/ with matching names; each image one polyp.
    KvasirSeg,
    /// HyperKvasir labelled images: nested class folders give each image its label.
    Hyperkvasir,
    /// Multi-view sets: one folder per polyp (optional pathology.csv: polyp,histology,vienna_class,size_mm).
    Multiview,
    /// CVC-ClinicDB as released: Original/ and Ground Truth/ (TIFF or PNG) and the
    /// frame-to-sequence table (sequences.csv, or the README.txt's); each sequence one polyp.
    CvcClinicdb,
    /// EndoFinder JSONL: one polyp a line with img_paths or query_paths/ref_paths, ground_truth.
    Endofinder,
    /// Procedure videos: a COCO JSON (frame_id, sequence_id, bbox, identity_id) beside its frames.
    Coco,
    /// REAL-Colon: per-frame VOC XML with unique_id, video_info.csv, lesion_info.csv.
    RealColon,
    /// CAPTIV8 capsule data: per-patient CSVs (Patient ID, name, capture_time, image_path, video_path, image_label).
    Captiv8,
    /// A video file (MP4/H.264 or anything else ffmpeg reads): its frames at its frame rate.
    /// Needs the ffmpeg program on PATH (or ENDOTWIN_FFMPEG).
    Video,
}

/// Runs the importer for `layout`.
pub fn run(
    layout: ImportLayout,
    store: &mut Store,
    path: &Path,
    options: ImportOptions,
    progress: &Progress,
) -> Result<ImportReport, ImportError> {
    if !path.exists() {
        return Err(ImportError::source_error(path, "no such file or folder"));
    }
    let mut problems = Problems::default();
    let links = if options.follow_links {
        Links::Follow
    } else {
        Links::Inside
    };
    let p = &mut problems;
    let plan = match layout {
        ImportLayout::Images => folder::read(path, links, progress, p)?,
        ImportLayout::KvasirSeg => kvasir::read(path, links, progress, p)?,
        ImportLayout::Hyperkvasir => hyperkvasir::read(path, links, progress, p)?,
        ImportLayout::Multiview => multiview::read_folders(path, links, progress, p)?,
        ImportLayout::CvcClinicdb => cvc::read(path, links, progress, p)?,
        ImportLayout::Endofinder => multiview::read_jsonl(path, links, progress, p)?,
        ImportLayout::Coco => coco::read(path, links, progress, p)?,
        ImportLayout::RealColon => realcolon::read(path, links, progress, p)?,
        ImportLayout::Captiv8 => captiv8::read(path, links, progress, p)?,
        ImportLayout::Video => {
            let (code, tag) = video::code_of(path)?;
            // The same recording under another file name would be a second video of the same
            // frames, its boxes and tracklets apart (round 7 N37): refused before decoding.
            let suffix = format!("-{tag}");
            if let Some(other) = store
                .videos()?
                .into_iter()
                .find(|v| v.code != code && v.code.ends_with(&suffix))
            {
                return Err(ImportError::source_error(
                    path,
                    format!(
                        "the library already holds this recording as video {} (the same \
                         contents under another file name); nothing was imported",
                        other.code
                    ),
                ));
            }
            let plan = video::read(path, code, progress)?;
            // The same recording in another container (remuxed, its frames decoded to the
            // same pixels) is the same video too (round 8 N11: a second video of 30
            // duplicate frames).
            if let Some(other) = same_frames_as(store, &plan)? {
                return Err(ImportError::source_error(
                    path,
                    format!(
                        "every frame of it is a frame of video {other}, in the same order (the \
                         same recording in another file); nothing was imported"
                    ),
                ));
            }
            plan
        }
    };
    write_checked(
        store,
        plan,
        problems,
        &format!("import:{layout:?}").to_lowercase(),
        options,
        progress,
    )
}

/// The code of a video in the library whose frames are, in order, the frames of the one
/// video `plan` holds (by content), if any.
fn same_frames_as(store: &Store, plan: &Plan) -> Result<Option<String>, ImportError> {
    let Some(video) = plan.exams.iter().flat_map(|e| &e.videos).next() else {
        return Ok(None);
    };
    let hashes: Vec<String> = video
        .frames
        .iter()
        .map(|(_, f)| crate::store::content_hash(&f.image.bytes))
        .collect();
    // Only videos of as many frames are read frame by frame.
    let alike = store
        .videos()?
        .into_iter()
        .filter(|v| v.frame_count == hashes.len() as i64 && v.code != video.code);
    for v in alike {
        let frames = store.video_frames(v.id)?;
        if frames.len() == hashes.len()
            && !hashes.is_empty()
            && frames.iter().zip(&hashes).all(|((_, m), h)| &m.hash == h)
        {
            return Ok(Some(v.code));
        }
    }
    Ok(None)
}

/// Lays a COCO sidecar's boxes onto the video `video_code` already in the library (a
/// recording imported with `import video`): its polyps, boxes and tracklets, checked and
/// written like any import.
pub fn boxes_onto_video(
    store: &mut Store,
    path: &Path,
    video_code: &str,
    options: ImportOptions,
    progress: &Progress,
) -> Result<ImportReport, ImportError> {
    if !path.is_file() {
        return Err(ImportError::source_error(path, "no such file"));
    }
    let video = store
        .videos()?
        .into_iter()
        .find(|v| v.code == video_code)
        .ok_or_else(|| {
            ImportError::source_error(path, format!("the library has no video '{video_code}'"))
        })?;
    let exam = store
        .examination(video.examination_id)?
        .ok_or_else(|| ImportError::source_error(path, "the video's examination is missing"))?;
    progress.stage("reading boxes", 0);
    let frames = store
        .video_frames(video.id)?
        .into_iter()
        .map(|(i, m)| (i, (m.width, m.height)))
        .collect();
    let onto = coco::OntoVideo {
        exam_code: exam.code,
        exam_kind: exam.kind,
        exam_source: exam.source,
        video_code: video.code,
        fps: video.fps,
        frames,
    };
    let mut problems = Problems::default();
    let plan = coco::read_onto(path, onto, &mut problems)?;
    write_checked(
        store,
        plan,
        problems,
        "import:coco-sidecar",
        options,
        progress,
    )
}

/// The shared end of every import: the plan's last check, the strict/empty policy, then one
/// write under the lock.
pub fn write_checked(
    store: &mut Store,
    mut plan: Plan,
    mut problems: Problems,
    who: &str,
    options: ImportOptions,
    progress: &Progress,
) -> Result<ImportReport, ImportError> {
    kinds::keep_roles(&mut plan, store, &mut problems)?;
    plan.check(&mut problems);
    problems.check(options, &plan)?;
    check_cancel(progress)?;
    let policy = if options.update_labels {
        LabelPolicy::Update {
            who: format!("{who} --update-labels"),
        }
    } else {
        LabelPolicy::Keep
    };
    plan::write(store, &plan, who, policy, problems.0, progress)
}
