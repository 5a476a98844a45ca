//! What the caption model says: a frame's top captions (softmax over candidate captions) and
//! its categories, and the frames that best match a caption.

use super::model::{CaptionModel, CaptionModelConfig, input, prompt};
use super::{CATEGORIES, NORMAL, Refiner};
use crate::model::clip::l2_normalize;
use burn::tensor::{Device, Tensor, TensorData, activation};
use image::DynamicImage;

/// The candidate captions a frame is ranked against when nothing else is given: every
/// caption `seen` (a library's refined captions), every single entity and "normal", once each.
pub fn candidates(seen: &[String]) -> Vec<String> {
    let mut out: Vec<String> = seen.to_vec();
    for e in Refiner::shipped()
        .entity_names()
        .into_iter()
        .chain([NORMAL.to_string()])
    {
        if !out.contains(&e) {
            out.push(e);
        }
    }
    out
}

/// Unit text embeddings of `captions` (encoded as prompts) -> [m, dim].
pub fn caption_embeddings(
    model: &CaptionModel,
    config: &CaptionModelConfig,
    captions: &[String],
    device: &Device,
) -> Tensor<2> {
    let prompts: Vec<String> = captions.iter().map(|c| prompt(c)).collect();
    let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
    let tokens = config
        .tokenizer
        .batch(&refs, config.clip.text.context, device);
    model.clip.encode_texts(tokens)
}

/// Unit image embeddings of `images` (any size) -> [n, dim], in chunks of 64.
pub fn image_embeddings(
    model: &CaptionModel,
    config: &CaptionModelConfig,
    images: &[DynamicImage],
    device: &Device,
) -> Tensor<2> {
    let pre = input(config);
    let s = config.image_size() as usize;
    let chunks: Vec<Tensor<2>> = images
        .chunks(64)
        .map(|chunk| {
            let data: Vec<f32> = chunk
                .iter()
                .flat_map(|img| pre.pixels(&pre.resize(img)))
                .collect();
            let x = Tensor::<4>::from_data(TensorData::new(data, [chunk.len(), 3, s, s]), device);
            model.encode_images(x)
        })
        .collect();
    Tensor::cat(chunks, 0)
}

/// One frame as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameCaptions {
    /// Candidate captions with their softmax share, best first (at most `top`).
    pub captions: Vec<(String, f32)>,
    /// Each category's probability (sigmoid of its logit), in [`CATEGORIES`] order.
    pub category_probabilities: Vec<(String, f32)>,
    /// The predicted category under the entity list's precedence.
    pub category: String,
    /// The calibrated probability of `category` (None: the card has no category calibration;
    /// `category_probabilities` are then the head's raw sigmoids, not confidences).
    pub confidence: Option<f32>,
    /// The frame's familiarity to the model (None: the card has no familiarity statistics).
    pub familiarity: Option<crate::trust::Judgement>,
}

/// Captions and categories of each of `images` against `candidates`, `top` captions each,
/// with the category's calibrated confidence and the frame's familiarity when the card has
/// them (from the same embeddings: no second pass).
pub fn describe(
    loaded: &super::model::LoadedCaptionModel,
    images: &[DynamicImage],
    candidates: &[String],
    top: usize,
    device: &Device,
) -> Vec<FrameCaptions> {
    let (model, config) = (&loaded.model, &loaded.config);
    if images.is_empty() || candidates.is_empty() {
        return Vec::new();
    }
    let v = image_embeddings(model, config, images, device); // [n, d]
    let t = caption_embeddings(model, config, candidates, device); // [m, d]
    let shares = activation::softmax(model.clip.logits(v.clone(), t), 1); // [n, m]
    let logits = model.category_logits(v.clone()); // [n, 7]
    let probs = activation::sigmoid(logits.clone());
    let embeddings = rows(v);
    let logits = rows(logits);
    let m = candidates.len();
    let shares: Vec<f32> = shares.into_data().try_to_vec::<f32>().expect("f32 shares");
    let probs: Vec<f32> = probs
        .into_data()
        .try_to_vec::<f32>()
        .expect("f32 probabilities");
    (0..images.len())
        .map(|i| {
            let mut ranked: Vec<(String, f32)> = candidates
                .iter()
                .cloned()
                .zip(shares[i * m..(i + 1) * m].iter().copied())
                .collect();
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
            ranked.truncate(top);
            let p = &probs[i * CATEGORIES.len()..(i + 1) * CATEGORIES.len()];
            let category = top_category(p);
            FrameCaptions {
                captions: ranked,
                category_probabilities: CATEGORIES
                    .iter()
                    .map(|c| c.to_string())
                    .zip(p.iter().copied())
                    .collect(),
                confidence: super::trust::confidence(&loaded.card, &logits[i], &category),
                familiarity: super::trust::judge(&loaded.card, &embeddings[i]),
                category,
            }
        })
        .collect()
}

/// The predicted categories and the top category. A category is predicted when its
/// probability is above one half, "normal" only when it is the most probable category of all
/// (it then stands alone), and the most probable category always. The top category is the
/// most probable one, ties broken by the entity list's precedence. (Taking the first predicted
/// category by precedence instead was tried on the validation split and lost, 0.780 against
/// 0.862 top-category accuracy: the class-weighted head over-predicts the rare categories that
/// the precedence puts first.)
pub fn predicted_categories(probabilities: &[f32]) -> ([bool; 7], String) {
    let normal = CATEGORIES.len() - 1;
    let p = |k: usize| probabilities.get(k).copied().unwrap_or(0.0);
    let highest = (0..CATEGORIES.len()).map(p).fold(f32::MIN, f32::max);
    let top = Refiner::shipped()
        .precedence()
        .into_iter()
        .find(|c| {
            CATEGORIES
                .iter()
                .position(|k| k == c)
                .is_some_and(|i| p(i) == highest)
        })
        .unwrap_or_else(|| NORMAL.to_string());
    let best = CATEGORIES.iter().position(|k| *k == top).unwrap_or(normal);
    let mut set = [false; 7];
    if best == normal {
        set[normal] = true;
    } else {
        for (k, flag) in set.iter_mut().enumerate().take(normal) {
            *flag = p(k) > 0.5;
        }
        set[best] = true;
    }
    (set, top)
}

fn top_category(probabilities: &[f32]) -> String {
    predicted_categories(probabilities).1
}

/// The rows of a [n, w] tensor.
pub fn rows(t: Tensor<2>) -> Vec<Vec<f32>> {
    let [_, w] = t.dims();
    let values: Vec<f32> = t.into_data().try_to_vec::<f32>().expect("f32 values");
    values.chunks_exact(w.max(1)).map(|c| c.to_vec()).collect()
}

/// Cosines of unit rows `a` [n, d] against unit rows `b` [m, d] -> [n][m].
pub fn cosines(a: Tensor<2>, b: Tensor<2>) -> Vec<Vec<f32>> {
    let [n, _] = a.dims();
    let [m, _] = b.dims();
    let s: Vec<f32> = l2_normalize(a)
        .matmul(l2_normalize(b).transpose())
        .into_data()
        .try_to_vec::<f32>()
        .expect("f32 cosines");
    (0..n).map(|i| s[i * m..(i + 1) * m].to_vec()).collect()
}

#[derive(Debug, thiserror::Error)]
pub enum CaptionQueryError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("no caption model: {0} (train one with `endotwin train captions` or the Training tab)")]
    Model(#[from] crate::model::weights::WeightsError),
    #[error("{0}")]
    Image(String),
}

/// What a caption answer is about: a library media item or an image file opened from disk.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CaptionKey {
    Media(i64),
    File(std::path::PathBuf),
}

/// Captions and categories of library media or image files (capsule frames or any image),
/// ranked against the library's refined captions and every entity.
pub fn describe_media(
    store: &crate::store::Store,
    loaded: &super::model::LoadedCaptionModel,
    keys: &[CaptionKey],
    top: usize,
    device: &Device,
) -> Result<Vec<(CaptionKey, FrameCaptions)>, CaptionQueryError> {
    let mut images = Vec::new();
    let mut kept = Vec::new();
    for key in keys {
        // A library view is read through the hash check: a file swapped on disk is refused by
        // name, never described as if it were the view.
        let (decoded, name) = match key {
            CaptionKey::Media(id) => {
                let Some(m) = store.media(*id)? else { continue };
                (
                    crate::data::images::decode_media(store, &m),
                    m.source_path.clone(),
                )
            }
            CaptionKey::File(p) => (crate::data::images::decode_file(p), p.display().to_string()),
        };
        let d = decoded.map_err(|e| CaptionQueryError::Image(format!("{name}: {e}")))?;
        images.push(d.image);
        kept.push(key.clone());
    }
    let candidates = candidates(&library_captions(store)?);
    let out = describe(loaded, &images, &candidates, top, device);
    Ok(kept.into_iter().zip(out).collect())
}

/// The distinct refined captions of the library's captioned frames, most frequent first.
pub fn library_captions(store: &crate::store::Store) -> Result<Vec<String>, CaptionQueryError> {
    let rows = super::data::capsule_frames(store)?;
    let ids: Vec<i64> = rows.iter().map(|(_, m)| m.id).collect();
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for raw in store.captions_of(&ids)?.values() {
        *counts
            .entry(Refiner::shipped().refine(raw).caption)
            .or_default() += 1;
    }
    let mut ranked: Vec<(String, usize)> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(ranked.into_iter().map(|(c, _)| c).collect())
}

/// One frame found by a caption search.
#[derive(Debug, Clone, PartialEq)]
pub struct CaptionHit {
    pub media_id: i64,
    pub examination: i64,
    /// Cosine to the query caption, or the category's probability.
    pub score: f32,
    /// The frame's predicted category.
    pub category: String,
}

/// The library's capsule frames that best match a caption or a category.
#[derive(Debug, Clone, PartialEq)]
pub struct CaptionSearch {
    pub query: String,
    /// How the query was read ("caption \"ulcer, fibrin\"", "category polyp").
    pub read_as: String,
    pub hits: Vec<CaptionHit>,
    /// Capsule frames searched.
    pub searched: usize,
}

/// Searches the library's capsule frames: a category name ranks frames by that category's
/// probability; any other text is refined (its entities in canonical order, or the text
/// itself when it names none) and ranks frames by the cosine of their image embedding to
/// the caption's prompt.
pub fn search(
    store: &crate::store::Store,
    loaded: &super::model::LoadedCaptionModel,
    query: &str,
    top: usize,
    device: &Device,
) -> Result<CaptionSearch, CaptionQueryError> {
    let rows = super::data::capsule_frames(store)?;
    let mut images = Vec::new();
    let mut kept = Vec::new();
    for (exam, m) in &rows {
        if let Ok(d) = crate::data::images::decode_media(store, m) {
            images.push(d.image);
            kept.push((m.id, *exam));
        }
    }
    let wanted = query.trim().to_lowercase();
    let category = CATEGORIES.iter().position(|c| *c == wanted);
    let refined = Refiner::shipped().refine(query);
    let text = if refined.entities.is_empty() && wanted != NORMAL {
        wanted.clone()
    } else {
        refined.caption.clone()
    };
    let read_as = match category {
        Some(c) => format!("category {}", CATEGORIES[c]),
        None => format!("caption \"{text}\""),
    };
    if images.is_empty() {
        return Ok(CaptionSearch {
            query: query.to_string(),
            read_as,
            hits: Vec::new(),
            searched: 0,
        });
    }
    let (model, config) = (&loaded.model, &loaded.config);
    let v = image_embeddings(model, config, &images, device);
    let probs: Vec<f32> = activation::sigmoid(model.category_logits(v.clone()))
        .into_data()
        .try_to_vec::<f32>()
        .expect("f32 probabilities");
    let k = CATEGORIES.len();
    let scores: Vec<f32> = match category {
        Some(c) => (0..kept.len()).map(|i| probs[i * k + c]).collect(),
        None => {
            let t = caption_embeddings(model, config, &[text], device);
            cosines(v, t).into_iter().map(|row| row[0]).collect()
        }
    };
    let mut hits: Vec<CaptionHit> = kept
        .iter()
        .enumerate()
        .map(|(i, (media_id, examination))| CaptionHit {
            media_id: *media_id,
            examination: *examination,
            score: scores[i],
            category: top_category(&probs[i * k..(i + 1) * k]),
        })
        .collect();
    hits.sort_by(|a, b| b.score.total_cmp(&a.score));
    hits.truncate(top);
    Ok(CaptionSearch {
        query: query.to_string(),
        read_as,
        hits,
        searched: kept.len(),
    })
}
