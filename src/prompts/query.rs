//! What the prompt panel and `endotwin prompts` ask of a prompt model: scores of a prompt set
//! for an image (softmax over the set and the raw cosine), the library's stills encoded once
//! per model version (cached in the store), text-to-polyp search over them, and the polyp
//! probability of video frames.

use super::model::LoadedPromptModel;
use crate::data::images;
use crate::plumbing::Progress;
use crate::store::{self, EmbeddingRow, EmbeddingTarget, MediaKind, MediaRow, Store, StoreError};
use burn::tensor::activation::softmax;
use burn::tensor::{Device, Tensor, TensorData};
use image::DynamicImage;
use std::collections::HashMap;

#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("the prompt is empty; type what the image should show")]
    EmptyPrompt,
    #[error(
        "the prompt {what} (a control character: it shows as nothing or moves the terminal); type the prompt as plain text"
    )]
    ControlCharacter { what: String },
    #[error("the prompt has {words} words; this model reads at most {max} (shorten it)")]
    TooLong { words: usize, max: usize },
    #[error(
        "the model knows none of the words of '{prompt}' (it reads only the words of its training reports); every such prompt scores the same, so none is scored"
    )]
    NoKnownWord { prompt: String },
    #[error(
        "'{prompt}' is not one of the detector's two sentences (\"{}\" and \"{}\"); it learned those alone, so it scores nothing else (choose a prompt model for other prompts)",
        super::model::POLYP_SENTENCE,
        super::model::BACKGROUND_SENTENCE
    )]
    NotADetectorSentence { prompt: String },
    #[error("a prompt set needs at least one prompt")]
    NoPrompts,
    #[error(
        "the library is not encoded with {0} yet; encode it first (the panel offers it, or `endotwin prompts index`)"
    )]
    NotIndexed(String),
    #[error("the library has no polyps with views to search")]
    NothingToSearch,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Image(String),
}

/// One prompt's figures for one image.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptScore {
    pub prompt: String,
    /// Cosine between the image and the prompt in the joint space.
    pub cosine: f32,
    /// Softmax over the set of the model's scaled cosines.
    pub probability: f32,
}

/// Refuses prompts the text tower cannot read whole (empty, or longer than its context).
pub fn check_prompt(model: &LoadedPromptModel, prompt: &str) -> Result<(), PromptError> {
    let words = prompt.split_whitespace().count();
    if words == 0 {
        return Err(PromptError::EmptyPrompt);
    }
    // Echoed back on every answer: an escape sequence would clear or recolour the terminal
    // (round 10 N26).
    if let Some(what) = crate::plumbing::input::control_character(prompt) {
        return Err(PromptError::ControlCharacter { what });
    }
    // Start and end of text take two places; punctuation splits words further, so count
    // the tokenizer's own pieces.
    let max = model.config.clip.text.context - 2;
    let pieces = model.config.tokenizer.pieces(prompt);
    if pieces > max {
        return Err(PromptError::TooLong { words: pieces, max });
    }
    // A detector learned its two sentences alone: another sentence of their words (`a polyp
    // with a normal background`) would get a number that means nothing.
    if super::model::is_detector_only(&model.config) {
        let plain = |t: &str| {
            t.to_lowercase()
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let known = [
            super::model::POLYP_SENTENCE,
            super::model::BACKGROUND_SENTENCE,
        ];
        if !known.iter().any(|k| plain(k) == plain(prompt)) {
            return Err(PromptError::NotADetectorSentence {
                prompt: prompt.to_string(),
            });
        }
    }
    // A word-level model reads a word it never saw as "unknown": a prompt of only such words
    // is the same prompt as any other of them (W10: `qwertyuiop` outscored real sentences).
    if let Some(words) = model.config.tokenizer.words()
        && words.unknown_words(prompt).len() == pieces
    {
        return Err(PromptError::NoKnownWord {
            prompt: prompt.to_string(),
        });
    }
    Ok(())
}

/// The words of `prompt` a word-level model does not know (read as "unknown word"), so a
/// caller can say that the prompt was scored without them (round 9 N15: "a pollyp with
/// blood" was scored as "a ... with" without a word). Empty for a model that reads any text.
pub fn unknown_words(model: &LoadedPromptModel, prompt: &str) -> Vec<String> {
    model
        .config
        .tokenizer
        .words()
        .map(|w| w.unknown_words(prompt))
        .unwrap_or_default()
}

/// Unit embeddings of `texts` -> [n, d] (checked with [`check_prompt`]).
pub fn text_embeddings(
    model: &LoadedPromptModel,
    texts: &[String],
    device: &Device,
) -> Result<Tensor<2>, PromptError> {
    if texts.is_empty() {
        return Err(PromptError::NoPrompts);
    }
    for t in texts {
        check_prompt(model, t)?;
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    Ok(model.model.encode_texts(model.config.tokens(&refs, device)))
}

/// Unit embeddings of `images` (any size) -> [n, d], in chunks of 64.
pub fn image_embeddings(
    model: &LoadedPromptModel,
    images: &[DynamicImage],
    device: &Device,
) -> Tensor<2> {
    let size = model.config.image_size();
    let pre = model.config.input();
    let s = size as usize;
    let chunks: Vec<Tensor<2>> = images
        .chunks(64)
        .map(|chunk| {
            let data: Vec<f32> = chunk
                .iter()
                .flat_map(|img| pre.pixels(&pre.resize(img)))
                .collect();
            let x = Tensor::<4>::from_data(TensorData::new(data, [chunk.len(), 3, s, s]), device);
            model.model.encode_images(x)
        })
        .collect();
    Tensor::cat(chunks, 0)
}

/// Images as a prompt model sees them: the unit embeddings the scores are made from and,
/// from the same pass, the rows the model's familiarity is measured on
/// ([`crate::model::clip::Clip::encode_images_with_features`]).
pub struct Encoded {
    /// [n, d] unit embeddings.
    pub embeddings: Tensor<2>,
    /// n rows of familiarity features.
    pub features: Vec<Vec<f32>>,
}

/// [`Encoded`] `images` (any size), in chunks of 64.
pub fn encode(model: &LoadedPromptModel, images: &[DynamicImage], device: &Device) -> Encoded {
    let size = model.config.image_size();
    let pre = model.config.input();
    let s = size as usize;
    let mut embeddings = Vec::new();
    let mut features = Vec::new();
    for chunk in images.chunks(64) {
        let data: Vec<f32> = chunk
            .iter()
            .flat_map(|img| pre.pixels(&pre.resize(img)))
            .collect();
        let x = Tensor::<4>::from_data(TensorData::new(data, [chunk.len(), 3, s, s]), device);
        let (e, f) = model.model.encode_images_with_features(x);
        embeddings.push(e);
        features.extend(crate::captions::query::rows(f));
    }
    Encoded {
        embeddings: Tensor::cat(embeddings, 0),
        features,
    }
}

/// The prompt set's scores for each image row of `images` [n, d]: per image, one
/// [`PromptScore`] per prompt, in the set's order.
pub fn scores(
    model: &LoadedPromptModel,
    images: Tensor<2>,
    prompts: &[String],
    device: &Device,
) -> Result<Vec<Vec<PromptScore>>, PromptError> {
    let texts = text_embeddings(model, prompts, device)?;
    let cos = images.matmul(texts.transpose()); // [n, m]
    let [n, m] = cos.dims();
    let p = softmax(cos.clone() * model.model.clip.scale().unsqueeze::<2>(), 1);
    let cos: Vec<f32> = cos.into_data().try_to_vec().expect("f32 cosines");
    let p: Vec<f32> = p.into_data().try_to_vec().expect("f32 probabilities");
    Ok((0..n)
        .map(|i| {
            (0..m)
                .map(|j| PromptScore {
                    prompt: prompts[j].clone(),
                    cosine: cos[i * m + j],
                    probability: p[i * m + j],
                })
                .collect()
        })
        .collect())
}

/// What [`index_library`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Indexed {
    /// Frames encoded and cached.
    pub encoded: usize,
    /// Frames whose cached embedding was already this model's, of the file as it is.
    pub current: usize,
    /// Frames left out, each "file: why" (a file changed on disk, unreadable).
    pub skipped: Vec<String>,
}

/// Encodes every colonoscopy still and video frame of the library that `model`'s version has
/// not encoded yet (or whose file changed) and caches the embeddings in the store.
pub fn index_library(
    model: &LoadedPromptModel,
    store: &mut Store,
    device: &Device,
    progress: &Progress,
) -> Result<Indexed, PromptError> {
    let model_id = model_row(model, store)?;
    let cached: HashMap<i64, String> = store
        .embeddings(model_id, EmbeddingTarget::Media)?
        .into_iter()
        .map(|r| (r.target_id, r.source_hash))
        .collect();
    let stills = library_stills(store)?;
    let total = stills.len();
    let todo: Vec<MediaRow> = stills
        .into_iter()
        .filter(|m| cached.get(&m.id) != Some(&m.hash))
        .collect();
    let current = total - todo.len();
    progress.stage("encoding frames for text prompts", todo.len() as u64);
    let refs: Vec<&MediaRow> = todo.iter().collect();
    let mut skipped = Vec::new();
    let fresh = encode_and_cache(
        model,
        store,
        model_id,
        &refs,
        device,
        progress,
        &mut skipped,
    )?;
    Ok(Indexed {
        encoded: fresh.len(),
        current,
        skipped,
    })
}

/// The cached embeddings of `model`'s version, by media id (empty when never indexed).
pub fn cached_embeddings(
    model: &LoadedPromptModel,
    store: &Store,
) -> Result<HashMap<i64, Vec<f32>>, PromptError> {
    let Some(row) = store.model(&model.card.name, &model.card.version)? else {
        return Ok(HashMap::new());
    };
    Ok(store
        .embeddings(row.id, EmbeddingTarget::Media)?
        .into_iter()
        .map(|r| (r.target_id, r.vector))
        .collect())
}

/// Per polyp the model has encoded: how unsure `set` is about it, the entropy of the set's
/// class probabilities (prompts of one class summed) for the mean of its views' embeddings,
/// divided by its largest value (0: certain, 1: every class alike).
pub fn polyp_entropies(
    model: &LoadedPromptModel,
    store: &Store,
    set: &super::PromptSet,
    device: &Device,
) -> Result<HashMap<i64, f64>, PromptError> {
    let cached = cached_embeddings(model, store)?;
    let mut ids = Vec::new();
    let mut rows: Vec<f32> = Vec::new();
    let mut dim = 0;
    for p in store.polyps()? {
        let views = store.polyp_views(p.id)?;
        let embs: Vec<&Vec<f32>> = views.iter().filter_map(|m| cached.get(&m.id)).collect();
        let Some(first) = embs.first() else { continue };
        dim = first.len();
        let mut mean = vec![0.0f32; dim];
        for e in &embs {
            mean.iter_mut().zip(e.iter()).for_each(|(m, x)| *m += x);
        }
        let norm = mean.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        mean.iter_mut().for_each(|x| *x /= norm);
        ids.push(p.id);
        rows.extend(mean);
    }
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let x = Tensor::<2>::from_data(TensorData::new(rows, [ids.len(), dim]), device);
    let scored = scores(model, x, &set.prompts, device)?;
    let class_of = |j: usize| set.classes.get(j).unwrap_or(&set.prompts[j]).clone();
    let mut classes: Vec<String> = (0..set.prompts.len()).map(class_of).collect();
    classes.sort();
    classes.dedup();
    let top = (classes.len() as f64).ln();
    Ok(ids
        .into_iter()
        .zip(scored)
        .map(|(id, s)| {
            let mut p = vec![0.0f64; classes.len()];
            for (j, score) in s.iter().enumerate() {
                let c = classes
                    .binary_search(&class_of(j))
                    .expect("a class of the set");
                p[c] += score.probability as f64;
            }
            let h: f64 = p.iter().filter(|&&q| q > 0.0).map(|q| -q * q.ln()).sum();
            (id, if top > 0.0 { h / top } else { 0.0 })
        })
        .collect())
}

/// How many of the library's stills `model`'s version has not encoded yet.
pub fn missing(model: &LoadedPromptModel, store: &Store) -> Result<usize, PromptError> {
    let cached = cached_embeddings(model, store)?;
    Ok(library_stills(store)?
        .iter()
        .filter(|m| !cached.contains_key(&m.id))
        .count())
}

/// One polyp found by a text search.
#[derive(Debug, Clone, PartialEq)]
pub struct PolypHit {
    pub polyp_id: i64,
    pub code: String,
    pub histology: Option<String>,
    /// Cosine between the text and the polyp (the mean of its views' embeddings, unit length).
    pub score: f32,
    /// Its best-matching view.
    pub media_id: i64,
}

/// The library's polyps ranked by how well they match `text`, best first, at most `top`.
/// Refuses a library with no polyp views to search, before anything is encoded for it.
pub fn check_searchable(store: &Store) -> Result<(), PromptError> {
    if store.polyps()?.iter().all(|p| p.view_count == 0) {
        return Err(PromptError::NothingToSearch);
    }
    Ok(())
}

/// Needs the library encoded with `model` ([`index_library`]).
pub fn search(
    model: &LoadedPromptModel,
    store: &Store,
    text: &str,
    top: usize,
    device: &Device,
) -> Result<Vec<PolypHit>, PromptError> {
    let t = text_embeddings(model, &[text.to_string()], device)?;
    let t: Vec<f32> = t.into_data().try_to_vec().expect("f32 embedding");
    let cached = cached_embeddings(model, store)?;
    let polyps = store.polyps()?;
    check_searchable(store)?;
    if cached.is_empty() {
        return Err(PromptError::NotIndexed(model.named()));
    }
    let dot = |v: &[f32]| v.iter().zip(&t).map(|(a, b)| a * b).sum::<f32>();
    let mut hits = Vec::new();
    for p in polyps {
        let views = store.polyp_views(p.id)?;
        let vectors: Vec<(&Vec<f32>, i64)> = views
            .iter()
            .filter_map(|m| cached.get(&m.id).map(|v| (v, m.id)))
            .collect();
        if vectors.is_empty() {
            continue;
        }
        let d = t.len();
        let mut mean = vec![0.0f32; d];
        for (v, _) in &vectors {
            for (m, x) in mean.iter_mut().zip(v.iter()) {
                *m += x;
            }
        }
        let norm = mean.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        mean.iter_mut().for_each(|x| *x /= norm);
        let best = vectors
            .iter()
            .max_by(|a, b| dot(a.0).total_cmp(&dot(b.0)))
            .map(|(_, id)| *id)
            .expect("at least one view");
        hits.push(PolypHit {
            polyp_id: p.id,
            code: p.code,
            histology: p.histology,
            score: dot(&mean),
            media_id: best,
        });
    }
    if hits.is_empty() {
        return Err(PromptError::NotIndexed(model.named()));
    }
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.polyp_id.cmp(&b.polyp_id))
    });
    hits.truncate(top);
    Ok(hits)
}

/// The detector's polyp probability (softmax of the two fixed sentences) for each embedding
/// in `embeddings` (rows of the detector's space), in order.
pub fn polyp_probabilities(
    detector: &LoadedPromptModel,
    embeddings: &[Vec<f32>],
    device: &Device,
) -> Vec<f32> {
    if embeddings.is_empty() {
        return Vec::new();
    }
    let d = embeddings[0].len();
    let flat: Vec<f32> = embeddings.iter().flatten().copied().collect();
    let v = Tensor::<2>::from_data(TensorData::new(flat, [embeddings.len(), d]), device);
    let texts = super::model::detection_texts(&detector.model, &detector.config, device);
    super::model::polyp_probability(&detector.model, v, texts)
}

/// Every still of the library's colonoscopy examinations (frames, views) and every video
/// frame: what the prompt models encode.
fn library_stills(store: &Store) -> Result<Vec<MediaRow>, StoreError> {
    let mut out = Vec::new();
    for p in store.polyps()? {
        out.extend(store.polyp_views(p.id)?);
    }
    for e in store.examinations()? {
        if e.kind == "capsule" {
            continue;
        }
        out.extend(
            store
                .loose_frames(e.id)?
                .into_iter()
                .filter(|m| m.kind == MediaKind::Frame),
        );
    }
    for v in store.videos()? {
        out.extend(store.video_frames(v.id)?.into_iter().map(|(_, m)| m));
    }
    out.sort_by_key(|m| m.id);
    out.dedup_by_key(|m| m.id);
    Ok(out)
}

fn model_row(model: &LoadedPromptModel, store: &mut Store) -> Result<i64, StoreError> {
    // Read first: a library already encoded with this model is searched without a write
    // (round 16 N13: a read-only library was refused though nothing had to be written).
    if let Some(row) = store.model(&model.card.name, &model.card.version)? {
        return Ok(row.id);
    }
    let config = serde_json::to_string(&model.card.config).unwrap_or_default();
    store.write(|tx| {
        store::ensure_model(
            tx,
            &model.card.name,
            &model.card.version,
            "prompt-model",
            &config,
            "",
        )
    })
}

/// What a prompt answer is about: a library media item or an image file opened from disk.
pub use crate::captions::query::CaptionKey as FrameKey;

/// The prompt set's scores for library media or image files, and for all of them together
/// (their mean embedding: a polyp's views, an opened multi-view set).
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredFrames {
    pub frames: Vec<(FrameKey, Vec<PromptScore>)>,
    pub together: Option<Vec<PromptScore>>,
    /// The model's name and version.
    pub model: String,
    /// The frames' familiarity to the model (None: its card has no statistics).
    pub familiarity: Option<crate::trust::Judgement>,
    /// A detector's polyp probability of each frame, in `frames` order, calibrated where its
    /// card stores the calibration (None: the model is not a detector).
    pub polyp: Option<super::trust::PolypReading>,
}

pub fn score_frames(
    store: Option<&Store>,
    model: &LoadedPromptModel,
    keys: &[FrameKey],
    prompts: &[String],
    device: &Device,
) -> Result<ScoredFrames, PromptError> {
    for p in prompts {
        check_prompt(model, p)?;
    }
    if prompts.is_empty() {
        return Err(PromptError::NoPrompts);
    }
    let mut decoded = Vec::new();
    let mut kept = Vec::new();
    for key in keys {
        // A library view is read through the hash check: a file swapped on disk is refused by
        // name, never scored as if it were the view.
        let (read, name) = match (key, store) {
            (FrameKey::Media(id), Some(store)) => {
                let Some(m) = store.media(*id)? else { continue };
                (images::decode_media(store, &m), m.source_path.clone())
            }
            (FrameKey::Media(_), None) => continue,
            (FrameKey::File(p), _) => (images::decode_file(p), p.display().to_string()),
        };
        let d = read.map_err(|e| PromptError::Image(format!("{name}: {e}")))?;
        decoded.push(d.image);
        kept.push(key.clone());
    }
    if decoded.is_empty() {
        return Ok(ScoredFrames {
            frames: Vec::new(),
            together: None,
            model: model.named(),
            familiarity: None,
            polyp: None,
        });
    }
    let Encoded {
        embeddings: emb,
        features,
    } = encode(model, &decoded, device);
    let familiarity = super::trust::judge(&model.card, &features);
    let polyp = super::trust::is_detector(model).then(|| {
        let rows = crate::captions::query::rows(emb.clone());
        super::trust::PolypReading::of(&model.card, polyp_probabilities(model, &rows, device))
    });
    let per_frame = scores(model, emb.clone(), prompts, device)?;
    let together = if decoded.len() > 1 {
        let mean = crate::model::clip::l2_normalize(emb.mean_dim(0));
        scores(model, mean, prompts, device)?.into_iter().next()
    } else {
        None
    };
    Ok(ScoredFrames {
        frames: kept.into_iter().zip(per_frame).collect(),
        together,
        model: model.named(),
        familiarity,
        polyp,
    })
}

/// The detector's polyp probability for every frame of video `video_id`, in frame order;
/// frames not encoded with the detector yet are encoded (and cached) first.
pub fn video_polyp_strip(
    detector: &LoadedPromptModel,
    store: &mut Store,
    video_id: i64,
    device: &Device,
    progress: &Progress,
) -> Result<Vec<f32>, PromptError> {
    let frames = store.video_frames(video_id)?;
    let model_id = model_row(detector, store)?;
    let cached: HashMap<i64, (String, Vec<f32>)> = store
        .embeddings(model_id, EmbeddingTarget::Media)?
        .into_iter()
        .map(|r| (r.target_id, (r.source_hash, r.vector)))
        .collect();
    let todo: Vec<&MediaRow> = frames
        .iter()
        .map(|(_, m)| m)
        .filter(|m| cached.get(&m.id).is_none_or(|c| c.0 != m.hash))
        .collect();
    progress.stage(
        "encoding video frames for the polyp strip",
        todo.len() as u64,
    );
    let mut skipped = Vec::new();
    let fresh = encode_and_cache(
        detector,
        store,
        model_id,
        &todo,
        device,
        progress,
        &mut skipped,
    )?;
    if progress.is_cancelled() {
        return Err(PromptError::Image("cancelled".into()));
    }
    let d = detector.config.clip.embed_dim().unwrap_or(0);
    let rows: Vec<Vec<f32>> = frames
        .iter()
        .map(|(_, m)| {
            fresh
                .get(&m.id)
                .cloned()
                .or_else(|| cached.get(&m.id).map(|c| c.1.clone()))
                .unwrap_or_else(|| vec![0.0; d])
        })
        .collect();
    Ok(polyp_probabilities(detector, &rows, device))
}

/// Encodes `rows` with `model` in chunks of 64 and caches the embeddings under `model_id`;
/// returns them by media id. Files that cannot be read (or changed on disk) are skipped, each
/// named in `skipped`; a cancel stops between chunks.
fn encode_and_cache(
    model: &LoadedPromptModel,
    store: &mut Store,
    model_id: i64,
    rows: &[&MediaRow],
    device: &Device,
    progress: &Progress,
    skipped: &mut Vec<String>,
) -> Result<HashMap<i64, Vec<f32>>, PromptError> {
    let mut out = HashMap::new();
    for chunk in rows.chunks(64) {
        if progress.is_cancelled() {
            break;
        }
        let mut decoded = Vec::new();
        let mut kept = Vec::new();
        for m in chunk {
            match images::decode_media(store, m) {
                Ok(d) => {
                    decoded.push(d.image);
                    kept.push(*m);
                }
                Err(e) => skipped.push(format!("{}: {e}", m.rel_path)),
            }
            progress.inc();
        }
        if decoded.is_empty() {
            continue;
        }
        let emb = image_embeddings(model, &decoded, device);
        let d = emb.dims()[1];
        let flat: Vec<f32> = emb.into_data().try_to_vec().expect("f32 embeddings");
        store.write(|tx| {
            for (k, m) in kept.iter().enumerate() {
                let vector = flat[k * d..(k + 1) * d].to_vec();
                store::put_embedding(
                    tx,
                    model_id,
                    EmbeddingTarget::Media,
                    &EmbeddingRow {
                        target_id: m.id,
                        source_hash: m.hash.clone(),
                        vector: vector.clone(),
                        code: None,
                    },
                )?;
                out.insert(m.id, vector);
            }
            Ok::<(), StoreError>(())
        })?;
    }
    Ok(out)
}
