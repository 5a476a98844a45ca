//! Tracklet re-identification (METHODS §3): a polyp seen in consecutive frames is a
//! tracklet; fragments of a tracklet are encoded by the tracklet encoder
//! (`model::tracklet`) and trained with time as the only supervision: fragments close in
//! time form a bag, and the noise-aware loss (`train::tracklet_losses`) asks that some bag
//! member be nearer its anchor than the bag is to any other anchor.
//!
//! - [`fragments`]: tracklets long enough to use, their 8-frame fragments, the crop around a
//!   box.
//! - [`bags`]: the temporal bag sampler with its exponential rank distribution and cosine
//!   temperature curriculum, and bag purity (from ground truth, for the log only).
//! - [`grouping`]: tracklets into polyps (agglomerative on similarity), the polyp count.
//! - [`dataset`]: a library's usable tracklets with their fragment crops in memory.
//! - [`timeline`]: one video's tracklets, their similarities and groups, for the GUI.
//! - [`twin`]: similarity from the frozen digital-twin image encoder.
//! - [`tracker`]: a drawn box followed through the neighbouring frames.

pub mod bags;
pub mod dataset;
pub mod fragments;
pub mod grouping;
pub mod timeline;
pub mod tracker;
pub mod trust;
pub mod twin;

use crate::model::tracklet::{TrackletEncoder, TrackletModel};
use burn::tensor::Device;
use dataset::TrackletSet;

/// One unit embedding per tracklet: the mean of its fragments' CLS embeddings, normalised.
/// Fragments go through `model` `batch` at a time.
pub fn embed(
    model: &TrackletModel,
    set: &TrackletSet,
    batch: usize,
    device: &Device,
) -> Vec<Vec<f32>> {
    embed_with(set, batch, |chunk| {
        model.forward(set.batch(chunk, &[], device)).0
    })
}

/// [`embed`] for a tracklet head over the frozen features attached to `set`.
pub fn embed_head(
    head: &TrackletEncoder,
    set: &TrackletSet,
    batch: usize,
    device: &Device,
) -> Vec<Vec<f32>> {
    embed_with(set, batch, |chunk| {
        head.forward(set.feature_batch(chunk, device)).0
    })
}

fn embed_with(
    set: &TrackletSet,
    batch: usize,
    forward: impl Fn(&[usize]) -> burn::tensor::Tensor<2>,
) -> Vec<Vec<f32>> {
    let n = set.fragments.len();
    let mut per_fragment: Vec<Vec<f32>> = Vec::with_capacity(n);
    let ids: Vec<usize> = (0..n).collect();
    for chunk in ids.chunks(batch.max(1)) {
        let cls = forward(chunk);
        let d = cls.dims()[1];
        let v = cls.into_data().try_to_vec::<f32>().expect("f32 embeddings");
        per_fragment.extend(v.chunks_exact(d).map(<[f32]>::to_vec));
    }
    set.tracklets
        .iter()
        .map(|t| {
            let mut mean = vec![0.0f32; per_fragment.first().map_or(0, Vec::len)];
            for f in t.fragments.clone() {
                let mut e = per_fragment[f].clone();
                normalise(&mut e);
                mean.iter_mut().zip(&e).for_each(|(m, x)| *m += x);
            }
            normalise(&mut mean);
            mean
        })
        .collect()
}

/// A tracklet head (`train tracklets --backbone twin`) from its card file.
pub fn load_head(
    path: &std::path::Path,
    device: &Device,
) -> Result<(TrackletEncoder, crate::model::weights::ModelCard), crate::model::weights::WeightsError>
{
    use crate::model::tracklet::TrackletEncoderConfig;
    use crate::model::weights::{self, ModelKind};
    weights::load(
        path,
        ModelKind::TrackletHead,
        |c: &TrackletEncoderConfig| c.init(device),
    )
}

/// The shipped tracklet head's name in a models folder (`<dir>/tracklet-head.json`).
pub const HEAD_NAME: &str = "tracklet-head";

/// The tracklet head in `dir` when there is one, checked against the twin encoder it reads.
pub fn shipped_head(
    dir: &std::path::Path,
    twins: &crate::twins::TwinModels,
) -> Result<Option<(TrackletEncoder, crate::model::weights::ModelCard)>, String> {
    let path = dir.join(format!("{HEAD_NAME}.json"));
    if !path.is_file() {
        return Ok(None);
    }
    let (head, card) = load_head(&path, &twins.device).map_err(|e| e.to_string())?;
    if let Some(reads) = &card.reads
        && reads.sha256 != twins.image_card.sha256
    {
        return Err(format!(
            "{}: the head was trained over the twin image encoder {} (weights {}), but the \
             one beside it is {} (weights {}); its features mean nothing to the head: train \
             the head again over it (`endotwin train tracklets --backbone twin --residual`) \
             or put back that encoder",
            path.display(),
            reads.version,
            short(&reads.sha256),
            twins.image_card.version,
            short(&twins.image_card.sha256)
        ));
    }
    let wants = head.input.weight.val().dims()[0];
    if wants != twins.dim() {
        return Err(format!(
            "{}: the head reads {wants}-d features, the twin encoder gives {}",
            path.display(),
            twins.dim()
        ));
    }
    Ok(Some((head, card)))
}

/// The first 12 hex digits of a checksum, for messages.
fn short(sha256: &str) -> &str {
    sha256.get(..12).unwrap_or(sha256)
}

/// Scales `v` to unit length (left as is when it is zero).
pub fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// The colour-histogram baseline: 8x8x8 RGB histogram over every crop of a tracklet's
/// fragments (near-black pixels left out), unit length.
pub fn colour_histograms(set: &TrackletSet) -> Vec<Vec<f32>> {
    const BINS: usize = 8;
    let plane = set.size * set.size;
    set.tracklets
        .iter()
        .map(|t| {
            let mut h = vec![0.0f32; BINS * BINS * BINS];
            for f in t.fragments.clone() {
                let rgb = set.fragment_rgb(f);
                for frame in 0..fragments::FRAGMENT_FRAMES {
                    let base = frame * 3 * plane;
                    for p in 0..plane {
                        let c = |k: usize| rgb[base + k * plane + p].clamp(0.0, 0.999);
                        let (r, g, b) = (c(0), c(1), c(2));
                        if r + g + b < 30.0 / 255.0 {
                            continue;
                        }
                        let q = |v: f32| (v * BINS as f32) as usize;
                        h[(q(r) * BINS + q(g)) * BINS + q(b)] += 1.0;
                    }
                }
            }
            h.iter_mut().for_each(|x| *x = x.sqrt());
            crate::tracklets::normalise(&mut h);
            h
        })
        .collect()
}

/// The card name of the shipped tracklet encoder.
pub const MODEL_NAME: &str = "tracklets";

/// A tracklet encoder loaded from a models folder, with its card and config.
pub struct LoadedTracklets {
    pub model: TrackletModel,
    pub card: crate::model::weights::ModelCard,
    pub config: crate::model::tracklet::TrackletModelConfig,
}

/// Loads `<dir>/tracklets.json` and its weights.
pub fn load_model(
    dir: &std::path::Path,
    device: &Device,
) -> Result<LoadedTracklets, crate::model::weights::WeightsError> {
    use crate::model::tracklet::TrackletModelConfig;
    use crate::model::weights::{self, ModelKind};
    let path = dir.join(format!("{MODEL_NAME}.json"));
    let (model, card) = weights::load(
        &path,
        ModelKind::TrackletEncoder,
        |c: &TrackletModelConfig| c.init(device),
    )?;
    let config = card.config(&path)?;
    Ok(LoadedTracklets {
        model,
        card,
        config,
    })
}
