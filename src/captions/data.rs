//! The library's captioned capsule frames as training and evaluation data: each frame's raw
//! finding, its refinement, its patient (examination) and its pixels, resized once.

use super::Refined;
use super::Refiner;
use super::model::{CaptionModelConfig, input};
use crate::data::images;
use crate::model::preprocess::Preprocess;
use crate::plumbing::{Progress, Rng};
use crate::store::{MediaKind, Store, StoreError};
use burn::tensor::{Device, Tensor};
use image::RgbImage;

#[derive(Debug, thiserror::Error)]
pub enum CaptionDataError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "the library has no captioned capsule frames (import CAPTIV8 data or run `endotwin demo --capsule N`)"
    )]
    Empty,
    #[error(
        "none of the library's {count} captioned capsule frames could be read: {first}{}",
        if *.count > 1 { format!(" (and {} more)", .count - 1) } else { String::new() }
    )]
    Unreadable { count: usize, first: String },
}

/// One captioned frame.
#[derive(Debug, Clone)]
pub struct CaptionFrame {
    pub media_id: i64,
    /// The examination (one capsule patient).
    pub examination: i64,
    pub raw: String,
    pub refined: Refined,
    /// Index of its refined caption in [`CaptionSet::captions`].
    pub caption: usize,
    /// The frame resized to the model's side.
    pub image: RgbImage,
}

/// Captioned capsule frames, and the distinct refined captions among them.
#[derive(Debug, Clone)]
pub struct CaptionSet {
    pub frames: Vec<CaptionFrame>,
    /// Distinct refined captions, most frequent first (ties alphabetical).
    pub captions: Vec<String>,
    pub size: u32,
    /// Frames that could not be used, with why.
    pub skipped: Vec<String>,
}

impl CaptionSet {
    /// Every capsule frame of `store` that has a caption, resized for `config`'s image tower.
    pub fn load(
        store: &Store,
        config: &CaptionModelConfig,
        progress: &Progress,
    ) -> Result<CaptionSet, CaptionDataError> {
        let pre = input(config);
        let refiner = Refiner::shipped();
        let rows = capsule_frames(store)?;
        let ids: Vec<i64> = rows.iter().map(|(_, m)| m.id).collect();
        let captions = store.captions_of(&ids)?;
        progress.stage("reading capsule frames", rows.len() as u64);
        let mut frames = Vec::new();
        let mut skipped = Vec::new();
        for (exam, m) in rows {
            progress.inc();
            let Some(raw) = captions.get(&m.id) else {
                continue;
            };
            match images::decode_media(store, &m) {
                Ok(d) => frames.push(CaptionFrame {
                    media_id: m.id,
                    examination: exam,
                    raw: raw.clone(),
                    refined: refiner.refine(raw),
                    caption: 0,
                    image: pre.resize(&d.image),
                }),
                Err(e) => skipped.push(format!("{}: {e}", m.source_path)),
            }
        }
        if frames.is_empty() {
            return Err(match skipped.first() {
                Some(first) => CaptionDataError::Unreadable {
                    count: skipped.len(),
                    first: first.clone(),
                },
                None => CaptionDataError::Empty,
            });
        }
        Ok(CaptionSet::from_frames(
            frames,
            config.image_size(),
            skipped,
        ))
    }

    fn from_frames(mut frames: Vec<CaptionFrame>, size: u32, skipped: Vec<String>) -> CaptionSet {
        let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
        for f in &frames {
            *counts.entry(f.refined.caption.clone()).or_default() += 1;
        }
        let mut ranked: Vec<(String, usize)> = counts.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let captions: Vec<String> = ranked.into_iter().map(|(c, _)| c).collect();
        for f in &mut frames {
            f.caption = captions
                .iter()
                .position(|c| *c == f.refined.caption)
                .expect("every caption was counted");
        }
        CaptionSet {
            frames,
            captions,
            size,
            skipped,
        }
    }

    /// This set and `other` (another library's frames, read for the same model) as one: its
    /// examinations are kept apart from this set's, the captions counted again.
    pub fn join(self, other: CaptionSet) -> CaptionSet {
        let offset = self.frames.iter().map(|f| f.examination).max().unwrap_or(0) + 1;
        let mut frames = self.frames;
        frames.extend(other.frames.into_iter().map(|mut f| {
            f.examination += offset;
            f
        }));
        let mut skipped = self.skipped;
        skipped.extend(other.skipped);
        CaptionSet::from_frames(frames, self.size, skipped)
    }

    /// How many examinations (capsule patients) the frames come from.
    pub fn patients(&self) -> usize {
        let mut e: Vec<i64> = self.frames.iter().map(|f| f.examination).collect();
        e.sort_unstable();
        e.dedup();
        e.len()
    }

    /// At most `k` frames per distinct caption (the k-shot training sets), drawn with `seed`.
    pub fn shots(&self, k: usize, seed: u64) -> CaptionSet {
        let mut order: Vec<usize> = (0..self.frames.len()).collect();
        Rng::new(seed).fork(0x5407).shuffle(&mut order);
        let mut taken = vec![0usize; self.captions.len()];
        let mut frames = Vec::new();
        for i in order {
            let f = &self.frames[i];
            if taken[f.caption] < k {
                taken[f.caption] += 1;
                frames.push(f.clone());
            }
        }
        CaptionSet::from_frames(frames, self.size, self.skipped.clone())
    }

    /// The frames `idx` as the image tower's input [n, 3, s, s]; `flips` (horizontal,
    /// vertical) per frame augment training batches.
    pub fn batch(&self, idx: &[usize], flips: &[(bool, bool)], device: &Device) -> Tensor<4> {
        let images: Vec<&RgbImage> = idx.iter().map(|&i| &self.frames[i].image).collect();
        Preprocess::clip_squared(self.size).flipped_batch(&images, flips, device)
    }

    /// The frames `idx` as `config`'s image tower reads them [n, 3, s, s] (its side and its
    /// normalisation: an evaluation scores models of several sizes on one set, loaded at the
    /// largest side; a frame of another side is resized from the set's copy).
    pub fn batch_for(
        &self,
        idx: &[usize],
        config: &CaptionModelConfig,
        device: &Device,
    ) -> Tensor<4> {
        let pre = input(config);
        let s = config.image_size();
        let images: Vec<RgbImage> = idx
            .iter()
            .map(|&i| {
                let image = &self.frames[i].image;
                match image.dimensions() == (s, s) {
                    true => image.clone(),
                    false => pre.resize(&image::DynamicImage::ImageRgb8(image.clone())),
                }
            })
            .collect();
        let refs: Vec<&RgbImage> = images.iter().collect();
        pre.flipped_batch(&refs, &[], device)
    }

    /// Per category (in [`super::CATEGORIES`] order), whether each frame's caption names it.
    pub fn category_targets(&self) -> Vec<[bool; 7]> {
        self.frames
            .iter()
            .map(|f| category_set(&f.refined.categories))
            .collect()
    }
}

/// Every capsule frame of the library with its examination.
pub fn capsule_frames(store: &Store) -> Result<Vec<(i64, crate::store::MediaRow)>, StoreError> {
    let mut rows = Vec::new();
    for exam in store.examinations()? {
        for m in store.loose_frames(exam.id)? {
            if m.kind == MediaKind::Capsule {
                rows.push((exam.id, m));
            }
        }
    }
    Ok(rows)
}

/// A frame's categories as one flag per entry of [`super::CATEGORIES`].
pub fn category_set(categories: &[String]) -> [bool; 7] {
    let mut out = [false; 7];
    for c in categories {
        if let Some(i) = super::CATEGORIES.iter().position(|k| k == c) {
            out[i] = true;
        }
    }
    out
}
