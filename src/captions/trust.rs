//! How far a caption answer can be trusted: the frame's familiarity to the caption model
//! (its image embedding against the statistics in the card) and the top category's
//! calibrated confidence (one temperature over the category head's logits, fitted on
//! validation frames, stored in the card).

use super::model::LoadedCaptionModel;
use super::query::{CaptionQueryError, image_embeddings, predicted_categories, rows};
use super::{CATEGORIES, Refiner};
use crate::model::weights::ModelCard;
use crate::plumbing::Progress;
use crate::store::Store;
use crate::trust::{Calibration, Familiarity, Judgement, calibration, familiarity};
use burn::tensor::Device;

/// A library's captioned capsule frames as the caption model sees them.
pub struct Gathered {
    pub name: String,
    pub embeddings: Vec<Vec<f32>>,
    pub logits: Vec<Vec<f32>>,
    /// The true top category (index in [`CATEGORIES`]) of each frame's refined finding.
    pub truth: Vec<usize>,
    /// Frames whose file could not be read (named, with why): left out, and said so.
    pub left_out: Vec<String>,
}

impl crate::trust::Gathered for Gathered {
    fn split(self, every: usize) -> (Gathered, Gathered) {
        use crate::trust::split_every;
        let (embeddings, held_embeddings) = split_every(self.embeddings, every);
        let (logits, held_logits) = split_every(self.logits, every);
        let (truth, held_truth) = split_every(self.truth, every);
        let every = every.max(2);
        (
            Gathered {
                name: format!("{} (all but every {every}th frame)", self.name),
                embeddings,
                logits,
                truth,
                left_out: self.left_out,
            },
            Gathered {
                name: format!("{} (every {every}th frame)", self.name),
                embeddings: held_embeddings,
                logits: held_logits,
                truth: held_truth,
                left_out: Vec::new(),
            },
        )
    }

    fn join(mut self, other: Gathered) -> Gathered {
        self.name = format!("{} + {}", self.name, other.name);
        self.embeddings.extend(other.embeddings);
        self.logits.extend(other.logits);
        self.truth.extend(other.truth);
        self.left_out.extend(other.left_out);
        self
    }
}

/// Every captioned capsule frame of `store` (frames that fail to decode are left out, named in
/// [`Gathered::left_out`]).
pub fn gather(
    store: &Store,
    loaded: &LoadedCaptionModel,
    name: &str,
    device: &Device,
    progress: &Progress,
) -> Result<Gathered, CaptionQueryError> {
    let frames = super::data::capsule_frames(store)?;
    let ids: Vec<i64> = frames.iter().map(|(_, m)| m.id).collect();
    let captions = store.captions_of(&ids)?;
    progress.stage("encoding the library's capsule frames", frames.len() as u64);
    let mut out = Gathered {
        name: name.to_string(),
        embeddings: Vec::new(),
        logits: Vec::new(),
        truth: Vec::new(),
        left_out: Vec::new(),
    };
    for chunk in frames.chunks(64) {
        let mut images = Vec::new();
        for (_, m) in chunk {
            progress.inc();
            let Some(raw) = captions.get(&m.id) else {
                continue;
            };
            let d = match crate::data::images::decode_media(store, m) {
                Ok(d) => d,
                Err(e) => {
                    out.left_out.push(format!("{}: {e}", m.source_path));
                    continue;
                }
            };
            let category = Refiner::shipped().refine(raw).category;
            let Some(t) = CATEGORIES.iter().position(|c| *c == category) else {
                continue;
            };
            images.push(d.image);
            out.truth.push(t);
        }
        if images.is_empty() {
            continue;
        }
        let v = image_embeddings(&loaded.model, &loaded.config, &images, device);
        out.logits
            .extend(rows(loaded.model.category_logits(v.clone())));
        out.embeddings.extend(rows(v));
    }
    Ok(out)
}

/// Fits the familiarity on `fit`'s embeddings (threshold on `validation`'s) and the category
/// head's temperature on `validation`'s frames.
pub fn fit(
    fit: &Gathered,
    validation: &Gathered,
) -> Result<(Familiarity, Calibration), familiarity::FamiliarityError> {
    let familiarity = Familiarity::fit(
        &fit.embeddings,
        &validation.embeddings,
        &fit.name,
        &validation.name,
    )?;
    let logits: Vec<Vec<f64>> = validation
        .logits
        .iter()
        .map(|l| l.iter().map(|v| *v as f64).collect())
        .collect();
    let category = calibration::temperature(
        &logits,
        &validation.truth,
        &format!("{}: top category", validation.name),
    );
    Ok((familiarity, category))
}

/// The top category's calibrated probability: the softmax of the head's logits over the
/// stored temperature, at `category` (None without a stored calibration).
pub fn confidence(card: &ModelCard, logits: &[f32], category: &str) -> Option<f32> {
    let c = card.calibration.get(crate::trust::CATEGORY)?;
    let k = CATEGORIES.iter().position(|x| *x == category)?;
    let z: Vec<f64> = logits.iter().map(|v| *v as f64).collect();
    c.probabilities(&z).get(k).map(|p| *p as f32)
}

/// The frame's familiarity from its image embedding (None without statistics).
pub fn judge(card: &ModelCard, embedding: &[f32]) -> Option<Judgement> {
    let f = card.familiarity.as_ref()?.fitted_for(embedding.len())?;
    Some(f.judge(&card.name, &[embedding]))
}

/// The predicted top category of a row of head logits (the shipped precedence rule on the
/// sigmoids).
pub fn top_category(logits: &[f32]) -> String {
    let p: Vec<f32> = logits.iter().map(|z| 1.0 / (1.0 + (-z).exp())).collect();
    predicted_categories(&p).1
}
