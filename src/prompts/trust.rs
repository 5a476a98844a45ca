//! How far a text-prompt answer can be trusted: the frame's familiarity to the prompt
//! model (its image embedding against the statistics in the card) and, for the detector,
//! the polyp probability calibrated by one temperature on the two sentences' logit
//! difference, fitted on validation frames and stored in the card.

use super::model::LoadedPromptModel;
use super::records::frame_truth;
use crate::model::weights::ModelCard;
use crate::plumbing::Progress;
use crate::store::{MediaKind, MediaRow, Store};
use crate::trust::{Calibration, Familiarity, Judgement, calibration, familiarity};
use burn::tensor::Device;

/// A library's colonoscopy stills as a prompt model sees them.
pub struct Gathered {
    pub name: String,
    /// What familiarity is measured on ([`super::query::Encoded::features`]).
    pub features: Vec<Vec<f32>>,
    /// Where each frame came from (its examination's source: a dataset folder, a phantom
    /// split): the familiarity threshold is set per source.
    pub sources: Vec<String>,
    /// The detector's polyp probability of each frame.
    pub probability: Vec<f32>,
    /// Whether each frame shows a polyp (it is a polyp's view, or the square around its
    /// polyp).
    pub truth: Vec<bool>,
    /// Whether each item is a crop of a masked view (its polyp square or a polyp-free window
    /// of the same side) rather than a whole frame.
    pub crop: Vec<bool>,
    /// Frames whose file could not be read (named, with why): left out, and said so.
    pub left_out: Vec<String>,
}

impl crate::trust::Gathered for Gathered {
    fn split(self, every: usize) -> (Gathered, Gathered) {
        use crate::trust::split_every;
        let (features, held_features) = split_every(self.features, every);
        let (sources, held_sources) = split_every(self.sources, every);
        let (probability, held_probability) = split_every(self.probability, every);
        let (truth, held_truth) = split_every(self.truth, every);
        let (crop, held_crop) = split_every(self.crop, every);
        let every = every.max(2);
        (
            Gathered {
                name: format!("{} (all but every {every}th frame)", self.name),
                features,
                sources,
                probability,
                truth,
                crop,
                left_out: self.left_out,
            },
            Gathered {
                name: format!("{} (every {every}th frame)", self.name),
                features: held_features,
                sources: held_sources,
                probability: held_probability,
                truth: held_truth,
                crop: held_crop,
                left_out: Vec::new(),
            },
        )
    }

    fn join(mut self, other: Gathered) -> Gathered {
        self.name = format!("{} + {}", self.name, other.name);
        self.features.extend(other.features);
        self.sources.extend(other.sources);
        self.probability.extend(other.probability);
        self.truth.extend(other.truth);
        self.crop.extend(other.crop);
        self.left_out.extend(other.left_out);
        self
    }
}

/// What [`gather`] encodes besides whole frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crops {
    /// Whole frames only (what the app shows a prompt model).
    No,
    /// Also, for every masked polyp view, the square around its polyp and a polyp-free window
    /// of the same side (what the detector learned from and `eval real` scores), each with
    /// the source "<source> crops", so a familiarity thresholded by source gives crops a
    /// threshold of their own.
    Masked,
}

/// Every colonoscopy still of `store` (polyp views and loose frames of non-capsule
/// examinations; at most `limit`, spread evenly), encoded by `loaded`; a still shows a polyp
/// when it is a polyp's view. With [`Crops::Masked`], the crops of each kept masked view too.
/// Stills that fail to decode are left out, named in [`Gathered::left_out`].
pub fn gather(
    store: &Store,
    loaded: &LoadedPromptModel,
    name: &str,
    limit: usize,
    crops: Crops,
    device: &Device,
    progress: &Progress,
) -> Result<Gathered, super::query::PromptError> {
    let truth = frame_truth(store)?;
    let sources = store.examination_sources()?;
    let mut stills: Vec<MediaRow> = Vec::new();
    for p in store.polyps()? {
        stills.extend(store.polyp_views(p.id)?);
    }
    for e in store.examinations()? {
        if e.kind == "capsule" {
            continue;
        }
        stills.extend(
            store
                .loose_frames(e.id)?
                .into_iter()
                .filter(|m| m.kind == MediaKind::Frame),
        );
    }
    stills.sort_by_key(|m| m.id);
    stills.dedup_by_key(|m| m.id);
    let step = stills.len().div_ceil(limit.max(1)).max(1);
    let stills: Vec<MediaRow> = stills.into_iter().step_by(step).collect();
    progress.stage("encoding the library's frames", stills.len() as u64);
    let mut out = Gathered {
        name: name.to_string(),
        features: Vec::new(),
        sources: Vec::new(),
        probability: Vec::new(),
        truth: Vec::new(),
        crop: Vec::new(),
        left_out: Vec::new(),
    };
    // The windows' positions are drawn as `eval real` draws them: the same library gives the
    // same crops on every fit.
    let mut rng = crate::plumbing::Rng::new(0xC4095);
    for chunk in stills.chunks(128) {
        let mut images = Vec::new();
        for m in chunk {
            progress.inc();
            let image = match crate::data::images::decode_media(store, m) {
                Ok(d) => d.image,
                Err(e) => {
                    out.left_out.push(format!("{}: {e}", m.source_path));
                    continue;
                }
            };
            let source = m.examination_id.and_then(|e| sources.get(&e).cloned());
            let source = source.unwrap_or_default();
            if crops == Crops::Masked
                && let Some((polyp, window)) = masked_crops(store, m, &image, &mut rng, &mut out)
            {
                for (crop, shows_polyp) in [(polyp, true), (window, false)] {
                    images.push(crop);
                    out.truth.push(shows_polyp);
                    out.crop.push(true);
                    out.sources.push(format!("{source} crops"));
                }
            }
            images.push(image);
            out.truth.push(truth.contains_key(&m.id));
            out.crop.push(false);
            out.sources.push(source);
        }
        if images.is_empty() {
            continue;
        }
        let encoded = super::query::encode(loaded, &images, device);
        let rows = crate::captions::query::rows(encoded.embeddings);
        out.probability
            .extend(super::query::polyp_probabilities(loaded, &rows, device));
        out.features.extend(encoded.features);
    }
    Ok(out)
}

/// The polyp square and a same-side polyp-free window of view `m` when it has a mask of its
/// own size that leaves room for a window (None otherwise; a mask that cannot be read is
/// named in `out.left_out`).
fn masked_crops(
    store: &Store,
    m: &MediaRow,
    image: &image::DynamicImage,
    rng: &mut crate::plumbing::Rng,
    out: &mut Gathered,
) -> Option<(image::DynamicImage, image::DynamicImage)> {
    let mask_row = match store.media(m.mask_media_id?) {
        Ok(row) => row?,
        Err(e) => {
            out.left_out
                .push(format!("{} (its mask): {e}", m.source_path));
            return None;
        }
    };
    let mask = match crate::data::images::decode_media(store, &mask_row) {
        Ok(d) => d.image.to_luma8(),
        Err(e) => {
            out.left_out.push(format!("{}: {e}", mask_row.source_path));
            return None;
        }
    };
    if mask.dimensions() != (image.width(), image.height()) {
        return None;
    }
    crate::data::crops::polyp_and_free_window(image, &mask, rng)
}

/// Fits the familiarity on `fit`'s embeddings (threshold on `validation`'s, per source) and
/// the detector's temperature on `validation`'s whole frames (None for a set with one class
/// only): crops shape the mark only, the confidence is calibrated on what the app shows.
pub fn fit(
    fit: &Gathered,
    validation: &Gathered,
) -> Result<(Familiarity, Option<Calibration>), familiarity::FamiliarityError> {
    let familiarity = Familiarity::fit_by_source(
        &fit.features,
        &validation.features,
        &validation.sources,
        &fit.name,
        &validation.name,
    )?;
    let frames: Vec<(f32, bool)> = (validation.probability.iter())
        .zip(&validation.truth)
        .zip(&validation.crop)
        .filter(|(_, crop)| !**crop)
        .map(|((p, t), _)| (*p, *t))
        .collect();
    let both = frames.iter().any(|(_, t)| *t) && frames.iter().any(|(_, t)| !*t);
    let detector = both.then(|| {
        let logits: Vec<Vec<f64>> = frames.iter().map(|(p, _)| logits(*p)).collect();
        let truth: Vec<usize> = frames.iter().map(|(_, t)| usize::from(!*t)).collect();
        calibration::temperature(
            &logits,
            &truth,
            &format!("{}: polyp vs background", validation.name),
        )
    });
    Ok((familiarity, detector))
}

/// [polyp, background] logits whose softmax is `p` (the difference is what matters).
fn logits(p: f32) -> Vec<f64> {
    let p = (p as f64).clamp(1e-7, 1.0 - 1e-7);
    vec![(p / (1.0 - p)).ln(), 0.0]
}

/// The detector's calibrated polyp probability for a raw one (None without a stored
/// calibration).
pub fn calibrated(card: &ModelCard, p: f32) -> Option<f32> {
    let c = card.calibration.get(crate::trust::DETECTOR)?;
    c.probabilities(&logits(p)).first().map(|v| *v as f32)
}

/// The detector's polyp probabilities as the app shows them: calibrated by the card's
/// `detector` calibration when it stores one (a confidence), else the raw softmax of the two
/// sentences, said to be not calibrated.
#[derive(Debug, Clone, PartialEq)]
pub struct PolypReading {
    /// The model's polyp probability of each frame, before any calibration.
    pub raw: Vec<f32>,
    /// What is shown: `raw` calibrated when `calibrated`, else `raw`.
    pub shown: Vec<f32>,
    pub calibrated: bool,
}

impl PolypReading {
    /// The reading of `raw` probabilities by the model of `card`.
    pub fn of(card: &ModelCard, raw: Vec<f32>) -> PolypReading {
        let shown = raw
            .iter()
            .map(|p| calibrated(card, *p).unwrap_or(*p))
            .collect();
        PolypReading {
            raw,
            shown,
            calibrated: card.calibration.contains_key(crate::trust::DETECTOR),
        }
    }

    /// How the app labels the shown number of frame `i`: "confidence" only when calibrated.
    pub fn label(&self, i: usize) -> Option<String> {
        let p = self.shown.get(i)?;
        Some(match self.calibrated {
            true => format!("polyp: confidence {p:.3} (calibrated)"),
            false => format!("polyp probability {p:.3}: not calibrated"),
        })
    }
}

/// Whether `loaded` answers polyp vs background as a detector (the library's detector, one
/// trained on the two sentences only, or a model whose card calibrates its detection).
pub fn is_detector(loaded: &LoadedPromptModel) -> bool {
    loaded.card.name == super::model::SHIPPED_DETECTOR
        || super::model::is_detector_only(&loaded.config)
        || loaded.card.calibration.contains_key(crate::trust::DETECTOR)
}

/// A frame's (or a set of views') familiarity from their familiarity features
/// ([`super::query::Encoded::features`]; None without statistics).
pub fn judge(card: &ModelCard, features: &[Vec<f32>]) -> Option<Judgement> {
    let refs: Vec<&[f32]> = features.iter().map(Vec::as_slice).collect();
    let f = card.familiarity.as_ref()?.fitted_for(refs.first()?.len())?;
    Some(f.judge(&card.name, &refs))
}
