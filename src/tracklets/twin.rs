//! Tracklet similarity from the digital-twin image encoder, frozen: each tracklet is the
//! normalised mean of the twin embeddings of its frames, every frame cut around its box the
//! way the twin recipe cuts a view (the box enlarged [`TRACKLET_CONTEXT`] times, on-screen
//! display blacked out). No tracklet training: the twin encoder already learned to tell polyps apart across
//! viewpoints, which is what re-identification asks. Compared in `eval tracklets` beside the
//! tracklet encoder and the baselines.

use super::dataset::{TrackletDataError, TrackletInfo, TrackletSet, frame_image};
use super::fragments::{FRAGMENT_FRAMES, fragments};
use crate::model::preprocess::Focus;
use crate::plumbing::Progress;
use crate::store::{BoxRow, MediaRow, Store};
use crate::trust::Familiarity;
use crate::twins::TwinModels;
use image::DynamicImage;
use std::collections::BTreeMap;

/// How much of a frame around a tracklet's box the twin encoder sees: the box enlarged 2.5
/// times, whatever the twin card's own context. The tracklet head was trained on, and every
/// tracklet figure measured with, these crops; the card's tighter crop was chosen on polyp
/// views, and on tracklets less context did not help (README, "Tracklet re-identification").
pub const TRACKLET_CONTEXT: f32 = 2.5;

/// Quarter turns a tracklet frame is encoded at: 1 (as it is), whatever the twin card's own
/// `turns`. The tracklet head learned over these features.
pub const TRACKLET_TURNS: u32 = 1;

/// Frames per fragment used (the fragment's first, middle and last of its 8).
const FRAMES_PER_FRAGMENT: [usize; 3] = [0, 4, 7];

/// The boxes of each tracklet of a set, read video by video, and its frames as twin views.
struct TrackletFrames<'a> {
    store: &'a Store,
    videos: BTreeMap<String, i64>,
    /// The video read last: id, boxes, frames by index.
    loaded: Option<(i64, Vec<BoxRow>, BTreeMap<i64, MediaRow>)>,
}

impl<'a> TrackletFrames<'a> {
    fn new(store: &'a Store) -> Result<TrackletFrames<'a>, TrackletDataError> {
        let videos = store
            .videos()?
            .into_iter()
            .map(|v| (v.code, v.id))
            .collect();
        Ok(TrackletFrames {
            store,
            videos,
            loaded: None,
        })
    }

    /// The boxes of tracklet `t` of `set`, in frame order.
    fn boxes(
        &mut self,
        set: &TrackletSet,
        t: &TrackletInfo,
    ) -> Result<Vec<BoxRow>, TrackletDataError> {
        let video = self.videos[&set.videos[t.video]];
        if self.loaded.as_ref().is_none_or(|c| c.0 != video) {
            let frames = self.store.video_frames(video)?.into_iter().collect();
            self.loaded = Some((video, self.store.video_boxes(video)?, frames));
        }
        let (_, boxes, _) = self.loaded.as_ref().expect("filled above");
        Ok(boxes
            .iter()
            .filter(|b| b.tracklet_id == Some(t.tracklet_id))
            .cloned()
            .collect())
    }

    /// The frame of box `b` (of the video [`TrackletFrames::boxes`] read last), with the box
    /// as the twin encoder's focus.
    fn view(&self, video: &str, b: &BoxRow) -> Result<(DynamicImage, Focus), TrackletDataError> {
        let (_, _, frames) = self.loaded.as_ref().expect("boxes read first");
        let image = frame_image(self.store, frames, video, b.frame_index)?;
        Ok((
            image,
            Focus::Box([b.x as f32, b.y as f32, b.w as f32, b.h as f32]),
        ))
    }
}

/// Every frame of every fragment of `set` through the twin encoder, in fragment order:
/// (dim, [fragments, FRAGMENT_FRAMES, dim]) for [`TrackletSet::attach_features`].
pub fn fragment_features(
    store: &Store,
    set: &TrackletSet,
    twins: &TwinModels,
    progress: &Progress,
) -> Result<(usize, Vec<f32>), TrackletDataError> {
    let mut reader = TrackletFrames::new(store)?;
    progress.stage(
        "twin features of every fragment frame",
        set.fragments.len() as u64,
    );
    let (mut out, mut dim) = (Vec::new(), 0);
    for t in &set.tracklets {
        if progress.is_cancelled() {
            return Err(TrackletDataError::Cancelled);
        }
        let mine = reader.boxes(set, t)?;
        for fragment in fragments(mine.len()) {
            let images = fragment
                .positions
                .iter()
                .map(|&p| reader.view(&set.videos[t.video], &mine[p]))
                .collect::<Result<Vec<_>, _>>()?;
            for e in twins.encode_views_at(TRACKLET_CONTEXT, TRACKLET_TURNS, &images) {
                dim = e.len();
                out.extend(e);
            }
            progress.inc();
        }
    }
    Ok((dim, out))
}

/// Embeddings already computed, with the tracklet's familiarity score when one was asked for,
/// by (tracklet id, first frame, frames, a checksum of its box coordinates and of the
/// familiarity statistics): a tracklet that did not change is not encoded again (the timeline
/// rebuilds after every edit). Valid for one library and one twin model; the caller keeps one
/// per pair.
pub type TwinCache = std::collections::HashMap<(i64, i64, usize, i64), (Vec<f32>, Option<f32>)>;

/// One embedding per tracklet and, where familiarity statistics were given, its familiarity
/// score (the mean over the frames or fragments it was judged on).
pub type Judged = (Vec<Vec<f32>>, Vec<Option<f32>>);

/// Two lists of rows: (embeddings, familiarity features) of frames, or per tracklet (frame
/// features, head embeddings of its fragments).
pub type Rows2 = (Vec<Vec<f32>>, Vec<Vec<f32>>);

/// A cache key's tag for familiarity statistics (0 without: scores differ when they change).
fn familiarity_tag(f: Option<&Familiarity>) -> i64 {
    f.map_or(0, |f| {
        (f.threshold.to_bits() as i64) << 20 ^ f.fitted as i64 ^ (f.residual.to_bits() as i64) << 3
    })
}

/// The mean of `scores` (None when there are none).
fn mean_score(scores: &[f32]) -> Option<f32> {
    (!scores.is_empty()).then(|| scores.iter().sum::<f32>() / scores.len() as f32)
}

/// A cache key's checksum of a tracklet's box coordinates.
fn checksum(boxes: &[BoxRow]) -> i64 {
    boxes
        .iter()
        .map(|b| (b.x * 31.0 + b.y * 17.0 + b.w * 7.0 + b.h).round() as i64)
        .fold(0i64, |a, v| a.wrapping_mul(1_000_003).wrapping_add(v))
}

/// Keys of head embeddings differ from those of plain means of the same tracklet.
const HEAD_KEY: i64 = 0x5eed_4eadi64;

/// The normalised sum of `rows` each scaled to unit length (zero when there are none).
fn unit_mean<'a>(rows: impl Iterator<Item = &'a [f32]>) -> Vec<f32> {
    let mut mean: Vec<f32> = Vec::new();
    for row in rows {
        let mut e = row.to_vec();
        super::normalise(&mut e);
        mean.resize(e.len(), 0.0);
        mean.iter_mut().zip(&e).for_each(|(m, x)| *m += x);
    }
    super::normalise(&mut mean);
    mean
}

/// What a tracklet's embedding function returns: its embedding and familiarity score.
type Embedded = Result<(Vec<f32>, Option<f32>), TrackletDataError>;

/// One embedding (and score) per tracklet of `set` from `embed` (given the frame reader, the
/// tracklet's video and its boxes), taking what `cache` holds (keys tagged with `tag`) and
/// adding what it computes.
fn per_tracklet_cached(
    store: &Store,
    set: &TrackletSet,
    progress: &Progress,
    cache: &mut TwinCache,
    (stage, tag): (&str, i64),
    mut embed: impl FnMut(&TrackletFrames<'_>, &str, &[BoxRow]) -> Embedded,
) -> Result<Judged, TrackletDataError> {
    let mut reader = TrackletFrames::new(store)?;
    progress.stage(stage, set.tracklets.len() as u64);
    let mut out = (
        Vec::with_capacity(set.tracklets.len()),
        Vec::with_capacity(set.tracklets.len()),
    );
    for t in &set.tracklets {
        if progress.is_cancelled() {
            return Err(TrackletDataError::Cancelled);
        }
        let mine = reader.boxes(set, t)?;
        let key = (
            t.tracklet_id,
            t.first_frame,
            t.frames,
            checksum(&mine) ^ tag,
        );
        let (e, score) = match cache.get(&key) {
            Some(e) => e.clone(),
            None => {
                let e = embed(&reader, &set.videos[t.video], &mine)?;
                cache.insert(key, e.clone());
                e
            }
        };
        out.0.push(e);
        out.1.push(score);
        progress.inc();
    }
    Ok(out)
}

/// One unit embedding per tracklet of `set` from a tracklet head (`train tracklets --backbone
/// twin`) over the frozen twin features of every frame of its fragments: the head embeds each
/// fragment, the tracklet is the normalised mean of its fragments' unit embeddings (as
/// [`super::embed_head`] does). Tracklets in `cache` are not encoded again.
pub fn head_embeddings_cached(
    store: &Store,
    set: &TrackletSet,
    twins: &TwinModels,
    head: &crate::model::tracklet::TrackletEncoder,
    progress: &Progress,
    cache: &mut TwinCache,
) -> Result<Vec<Vec<f32>>, TrackletDataError> {
    head_embeddings_judged(store, set, (twins, head, None), progress, cache).map(|(e, _)| e)
}

/// [`head_embeddings_cached`] and, with the head's familiarity statistics, each tracklet's
/// score: the mean over its fragments of their head embeddings' scores (see
/// [`super::trust`]).
pub fn head_embeddings_judged(
    store: &Store,
    set: &TrackletSet,
    (twins, head, familiarity): (
        &TwinModels,
        &crate::model::tracklet::TrackletEncoder,
        Option<&Familiarity>,
    ),
    progress: &Progress,
    cache: &mut TwinCache,
) -> Result<Judged, TrackletDataError> {
    let stage = "encoding tracklet frames (twin encoder + tracklet head)";
    let tag = HEAD_KEY ^ familiarity_tag(familiarity);
    per_tracklet_cached(
        store,
        set,
        progress,
        cache,
        (stage, tag),
        |reader, video, mine| {
            let fragments = fragments(mine.len());
            let mut images = Vec::with_capacity(fragments.len() * FRAGMENT_FRAMES);
            for fragment in &fragments {
                for &p in &fragment.positions {
                    images.push(reader.view(video, &mine[p])?);
                }
            }
            let embeddings = twins.encode_views_at(TRACKLET_CONTEXT, TRACKLET_TURNS, &images);
            let Some(out) = head_forward(head, &embeddings, twins) else {
                return Ok((Vec::new(), None));
            };
            let score = familiarity
                .and_then(|f| mean_score(&out.iter().map(|x| f.score(x)).collect::<Vec<_>>()));
            Ok((unit_mean(out.iter().map(Vec::as_slice)), score))
        },
    )
}

/// The head's embedding of each fragment whose [`FRAGMENT_FRAMES`] frame embeddings follow
/// one another in `frames` (None when there is none).
pub fn head_forward(
    head: &crate::model::tracklet::TrackletEncoder,
    frames: &[Vec<f32>],
    twins: &TwinModels,
) -> Option<Vec<Vec<f32>>> {
    use burn::tensor::{Tensor, TensorData};
    let dim = frames.first().map_or(0, Vec::len);
    let n = frames.len() / FRAGMENT_FRAMES;
    if n == 0 || dim == 0 {
        return None;
    }
    let x = Tensor::<3>::from_data(
        TensorData::new(
            frames[..n * FRAGMENT_FRAMES].concat(),
            [n, FRAGMENT_FRAMES, dim],
        ),
        &twins.device,
    );
    let (embedded, _) = head.forward(x); // [fragments, D]
    let d = embedded.dims()[1];
    let values = embedded
        .into_data()
        .try_to_vec::<f32>()
        .expect("f32 embeddings");
    Some(values.chunks_exact(d).map(<[f32]>::to_vec).collect())
}

/// The twin embeddings of the [`FRAMES_PER_FRAGMENT`] frames of each fragment of a tracklet
/// (its boxes `mine` in `video`), fragment by fragment, and with `features` their familiarity
/// features from the same pass (empty without).
fn fragment_frame_embeddings(
    reader: &TrackletFrames<'_>,
    video: &str,
    mine: &[BoxRow],
    twins: &TwinModels,
    features: bool,
) -> Result<Rows2, TrackletDataError> {
    let mut images = Vec::new();
    for fragment in fragments(mine.len()) {
        for &k in &FRAMES_PER_FRAGMENT {
            images.push(reader.view(video, &mine[fragment.positions[k]])?);
        }
    }
    Ok(if features {
        twins.encode_views_at_features(TRACKLET_CONTEXT, TRACKLET_TURNS, &images)
    } else {
        (
            twins.encode_views_at(TRACKLET_CONTEXT, TRACKLET_TURNS, &images),
            Vec::new(),
        )
    })
}

/// For every tracklet of `set`: the familiarity features of every frame of its fragments
/// (the twin encoder's, [`TRACKLET_CONTEXT`] crops) and, with `head`, the head's embedding of
/// each fragment: what a tracklet's familiarity is fitted on ([`super::trust`]).
pub fn tracklet_features(
    store: &Store,
    set: &TrackletSet,
    twins: &TwinModels,
    head: Option<&crate::model::tracklet::TrackletEncoder>,
    progress: &Progress,
) -> Result<Vec<Rows2>, TrackletDataError> {
    let mut reader = TrackletFrames::new(store)?;
    progress.stage(
        "tracklet frames through the frame encoder",
        set.tracklets.len() as u64,
    );
    let mut out = Vec::with_capacity(set.tracklets.len());
    for t in &set.tracklets {
        if progress.is_cancelled() {
            return Err(TrackletDataError::Cancelled);
        }
        let mine = reader.boxes(set, t)?;
        let mut images = Vec::new();
        for fragment in fragments(mine.len()) {
            for &p in &fragment.positions {
                images.push(reader.view(&set.videos[t.video], &mine[p])?);
            }
        }
        let (embeddings, features) =
            twins.encode_views_at_features(TRACKLET_CONTEXT, TRACKLET_TURNS, &images);
        let heads = head
            .and_then(|h| head_forward(h, &embeddings, twins))
            .unwrap_or_default();
        out.push((features, heads));
        progress.inc();
    }
    Ok(out)
}

/// How a tracklet's frame embeddings become one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// The normalised mean of its frames' embeddings.
    Mean,
    /// Each fragment's frames combined by the scene encoder as views of one polyp (it was
    /// trained on 1-3 views; without a scene encoder, their normalised mean), then the
    /// normalised mean of the fragments' combinations.
    Scene,
}

/// Keys of scene-encoder embeddings differ from those of means and heads.
const SCENE_KEY: i64 = 0x5ce4_e5ce_i64;

/// One unit embedding per tracklet of `set` (read from `store`, the library `set` came from):
/// the first, middle and last frame of each fragment through the twin encoder, pooled.
pub fn twin_embeddings(
    store: &Store,
    set: &TrackletSet,
    twins: &TwinModels,
    pooling: Pooling,
    progress: &Progress,
) -> Result<Vec<Vec<f32>>, TrackletDataError> {
    twin_embeddings_cached(store, set, twins, pooling, progress, &mut TwinCache::new())
}

/// [`twin_embeddings`], taking what `cache` holds and adding what it computes.
pub fn twin_embeddings_cached(
    store: &Store,
    set: &TrackletSet,
    twins: &TwinModels,
    pooling: Pooling,
    progress: &Progress,
    cache: &mut TwinCache,
) -> Result<Vec<Vec<f32>>, TrackletDataError> {
    twin_embeddings_judged(store, set, (twins, None), pooling, progress, cache).map(|(e, _)| e)
}

/// [`twin_embeddings_cached`] and, with the frame encoder's familiarity statistics, each
/// tracklet's score: the mean over the frames it embeds of their familiarity features' scores
/// (from the same pass).
pub fn twin_embeddings_judged(
    store: &Store,
    set: &TrackletSet,
    (twins, familiarity): (&TwinModels, Option<&Familiarity>),
    pooling: Pooling,
    progress: &Progress,
    cache: &mut TwinCache,
) -> Result<Judged, TrackletDataError> {
    let (stage, tag) = match pooling {
        Pooling::Mean => ("encoding tracklet frames (twin encoder)", 0),
        Pooling::Scene => (
            "encoding tracklet frames (twin encoder + scene encoder)",
            SCENE_KEY,
        ),
    };
    let tag = tag ^ familiarity_tag(familiarity);
    per_tracklet_cached(
        store,
        set,
        progress,
        cache,
        (stage, tag),
        |reader, video, mine| {
            let (frames, features) =
                fragment_frame_embeddings(reader, video, mine, twins, familiarity.is_some())?;
            let score = familiarity
                .and_then(|f| mean_score(&features.iter().map(|x| f.score(x)).collect::<Vec<_>>()));
            Ok((pool(&frames, twins, pooling), score))
        },
    )
}

/// A tracklet's frame embeddings ([`FRAMES_PER_FRAGMENT`] per fragment, fragment by
/// fragment) pooled into one.
fn pool(frames: &[Vec<f32>], twins: &TwinModels, pooling: Pooling) -> Vec<f32> {
    match pooling {
        Pooling::Mean => unit_mean(frames.iter().map(Vec::as_slice)),
        Pooling::Scene => {
            let combined: Vec<Vec<f32>> = frames
                .chunks(FRAMES_PER_FRAGMENT.len())
                .map(|fragment| twins.combine(fragment))
                .collect();
            unit_mean(combined.iter().map(Vec::as_slice))
        }
    }
}

/// [`twin_embeddings`] from the twin features already attached to `set`
/// ([`fragment_features`] by `twins`: every frame of every fragment), without encoding a frame
/// again; `None` when `set` has none.
pub fn twin_embeddings_from_features(
    set: &TrackletSet,
    twins: &TwinModels,
    pooling: Pooling,
) -> Option<Vec<Vec<f32>>> {
    set.feature_dim()?;
    set.tracklets
        .iter()
        .map(|t| {
            let frames = t
                .fragments
                .clone()
                .flat_map(|f| FRAMES_PER_FRAGMENT.iter().map(move |&k| (f, k)))
                .map(|(f, k)| set.feature(f, k).map(<[f32]>::to_vec))
                .collect::<Option<Vec<_>>>()?;
            Some(pool(&frames, twins, pooling))
        })
        .collect()
}
