//! Examination records, what Endo-CLIP learns from (METHODS §1): per colonoscopy
//! examination, its still frames (unlabelled: which of them show a polyp is never read here)
//! and its report's sentences with their attribute vectors.
//!
//! What a record knows comes from the report text alone: whether it describes a polyp (any
//! stated term beyond a location), and how many polyps it describes (sentences that give a
//! size or a Paris class). Ground truth per frame lives in [`frame_truth`], for evaluation.

use super::Vocabulary;
use super::model::input;
use crate::data::images;
use crate::model::preprocess::Preprocess;
use crate::plumbing::{Progress, Rng};
use crate::store::{MediaKind, Store, StoreError};
use burn::tensor::{Device, Tensor};
use image::RgbImage;
use std::collections::HashMap;

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "the library has no colonoscopy examinations with frames and a report (run `endotwin demo --frames-per-exam 24` or import records)"
    )]
    Empty,
}

/// One still frame of an examination, resized for the image tower.
#[derive(Debug, Clone)]
pub struct RecordFrame {
    pub media_id: i64,
    pub image: RgbImage,
}

/// One examination: frames in a seeded shuffled order, report sentences and their attributes.
#[derive(Debug, Clone)]
pub struct ExamRecord {
    pub examination: i64,
    pub code: String,
    pub frames: Vec<RecordFrame>,
    pub sentences: Vec<String>,
    /// The attribute vector of each sentence.
    pub attributes: Vec<Vec<f32>>,
    /// The report describes at least one polyp.
    pub positive: bool,
    /// How many polyps the report describes (sentences giving a size or a Paris class).
    pub described_polyps: usize,
}

impl ExamRecord {
    /// Indices of the sentences that state at least one attribute.
    pub fn finding_sentences(&self) -> Vec<usize> {
        (0..self.sentences.len())
            .filter(|&i| self.attributes[i].iter().any(|&a| a > 0.0))
            .collect()
    }

    /// The union of every sentence's attributes: the examination's multi-hot label.
    pub fn union(&self) -> Vec<f32> {
        let n = self.attributes.first().map_or(0, Vec::len);
        let mut out = vec![0.0f32; n];
        for a in &self.attributes {
            for (o, v) in out.iter_mut().zip(a) {
                *o = o.max(*v);
            }
        }
        out
    }

    /// The report as one text (plain CLIP's caption).
    pub fn report(&self) -> String {
        self.sentences.join(" ")
    }
}

/// Every colonoscopy examination of `store` with at least one frame and one report sentence.
#[derive(Debug, Clone)]
pub struct Records {
    pub exams: Vec<ExamRecord>,
    pub size: u32,
    /// Frames that could not be read, with why.
    pub skipped: Vec<String>,
}

impl Records {
    pub fn load(store: &Store, size: u32, progress: &Progress) -> Result<Records, RecordError> {
        let vocabulary = Vocabulary::default();
        let pre = input(size);
        let polyps = store.polyps()?;
        let exams: Vec<_> = store
            .examinations()?
            .into_iter()
            .filter(|e| e.kind != "capsule")
            .collect();
        let mut out = Vec::new();
        let mut skipped = Vec::new();
        progress.stage("reading examination records", exams.len() as u64);
        for exam in exams {
            progress.inc();
            let sentences: Vec<String> = store
                .report_sentences(exam.id)?
                .into_iter()
                .map(|s| s.text)
                .collect();
            // Every still of the examination: loose frames and polyp views alike (which is
            // which is ground truth and is not kept).
            let mut media: Vec<_> = store
                .loose_frames(exam.id)?
                .into_iter()
                .filter(|m| m.kind == MediaKind::Frame)
                .collect();
            for p in polyps.iter().filter(|p| p.examination_id == exam.id) {
                media.extend(store.polyp_views(p.id)?);
            }
            if sentences.is_empty() || media.is_empty() {
                continue;
            }
            Rng::new(exam.id as u64).fork(0xF4A3).shuffle(&mut media);
            let mut frames = Vec::new();
            for m in media {
                match images::decode_media(store, &m) {
                    Ok(d) => frames.push(RecordFrame {
                        media_id: m.id,
                        image: pre.resize(&d.image),
                    }),
                    Err(e) => skipped.push(format!("{}: {e}", m.source_path)),
                }
            }
            if frames.is_empty() {
                continue;
            }
            let attributes: Vec<Vec<f32>> =
                sentences.iter().map(|s| vocabulary.extract(s)).collect();
            let (positive, described_polyps) = describes(&vocabulary, &attributes);
            out.push(ExamRecord {
                examination: exam.id,
                code: exam.code,
                frames,
                sentences,
                attributes,
                positive,
                described_polyps,
            });
        }
        if out.is_empty() {
            return Err(RecordError::Empty);
        }
        Ok(Records {
            exams: out,
            size,
            skipped,
        })
    }

    pub fn frame_count(&self) -> usize {
        self.exams.iter().map(|e| e.frames.len()).sum()
    }

    /// Every sentence of every report (the tokenizer's corpus).
    pub fn corpus(&self) -> impl Iterator<Item = &str> {
        self.exams
            .iter()
            .flat_map(|e| e.sentences.iter().map(String::as_str))
    }

    /// Frames `(exam, frame)` as the image tower's input [n, 3, s, s]; `flips` per frame
    /// (horizontal, vertical) augment training batches.
    pub fn batch(
        &self,
        which: &[(usize, usize)],
        flips: &[(bool, bool)],
        device: &Device,
    ) -> Tensor<4> {
        let images: Vec<&RgbImage> = which
            .iter()
            .map(|&(e, f)| &self.exams[e].frames[f].image)
            .collect();
        pixels_batch(&images, self.size, flips, device)
    }

    /// [`Self::batch`] for an image tower with another input `pre` (size or normalisation;
    /// no flips): each frame is resized from the size it was read at, so one read serves
    /// models of several inputs.
    pub fn batch_for(
        &self,
        which: &[(usize, usize)],
        pre: &Preprocess,
        device: &Device,
    ) -> Tensor<4> {
        if *pre == input(self.size) {
            return self.batch(which, &[], device);
        }
        let resized: Vec<RgbImage> = which
            .iter()
            .map(|&(e, f)| {
                pre.resize(&image::DynamicImage::ImageRgb8(
                    self.exams[e].frames[f].image.clone(),
                ))
            })
            .collect();
        let refs: Vec<&RgbImage> = resized.iter().collect();
        pre.flipped_batch(&refs, &[], device)
    }
}

/// Resized frames as the image tower's input [n, 3, s, s], flipped where `flips` says.
pub fn pixels_batch(
    images: &[&RgbImage],
    size: u32,
    flips: &[(bool, bool)],
    device: &Device,
) -> Tensor<4> {
    input(size).flipped_batch(images, flips, device)
}

/// Whether the sentences' attributes describe a polyp, and how many polyps.
fn describes(vocabulary: &Vocabulary, attributes: &[Vec<f32>]) -> (bool, usize) {
    let terms = vocabulary.terms();
    let states = |a: &Vec<f32>, pred: &dyn Fn(&str) -> bool| {
        a.iter()
            .zip(terms)
            .any(|(&v, t)| v > 0.0 && pred(&t.aspect))
    };
    let positive = attributes.iter().any(|a| states(a, &|x| x != "location"));
    let polyps = attributes
        .iter()
        .filter(|a| states(a, &|x| x == "size class" || x == "Paris morphology"))
        .count();
    (positive, polyps)
}

/// Evaluation only, never training: for every still that is a polyp view, its polyp.
pub fn frame_truth(store: &Store) -> Result<HashMap<i64, i64>, StoreError> {
    let mut out = HashMap::new();
    for p in store.polyps()? {
        for m in store.polyp_views(p.id)? {
            out.insert(m.id, p.id);
        }
    }
    Ok(out)
}
