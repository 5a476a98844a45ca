//! Tracklets of a library's videos as the tracklet model sees them: each usable tracklet
//! (METHODS §3: at least 30 frames) cut into fragments, every fragment frame cropped around its
//! box (5 diagonals, from the full frame with the on-screen display blacked out, since the
//! display shows the frame number, a shortcut to "near in time"), resized and normalised.

use super::bags::FragmentTime;
use super::fragments::{FRAGMENT_FRAMES, fragments};
use crate::model::preprocess::{Preprocess, blackout_outside_field_stop, tracklet_crop};
use crate::plumbing::Progress;
use crate::store::{BoxRow, Store, StoreError};
use burn::tensor::{Device, Tensor, TensorData};
use std::collections::BTreeMap;

#[derive(Debug, thiserror::Error)]
pub enum TrackletDataError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "video {video}, frame {frame}: {reason} ({path}); `endotwin library check` lists every missing or changed file"
    )]
    Image {
        video: String,
        frame: i64,
        path: String,
        reason: String,
    },
    #[error("video {video}: frame {frame} has a box but no image")]
    MissingFrame { video: String, frame: i64 },
    #[error("cancelled")]
    Cancelled,
}

/// Frame `index` of a video (`frames`: its frames by index), decoded; the error names the
/// video and frame, or the file.
pub fn frame_image(
    store: &Store,
    frames: &BTreeMap<i64, crate::store::MediaRow>,
    video: &str,
    index: i64,
) -> Result<image::DynamicImage, TrackletDataError> {
    let media = frames
        .get(&index)
        .ok_or_else(|| TrackletDataError::MissingFrame {
            video: video.to_string(),
            frame: index,
        })?;
    let path = store.media_path(media);
    crate::data::images::decode_media(store, media)
        .map(|d| d.image)
        .map_err(|e| TrackletDataError::Image {
            video: video.to_string(),
            frame: index,
            reason: match std::fs::symlink_metadata(&path) {
                // Said once, in words (round 12 N15: the path twice and the OS's words).
                Err(_) => "its media file is missing".into(),
                Ok(_) => e.to_string().replace(&format!("{}: ", path.display()), ""),
            },
            path: path.display().to_string(),
        })
}

/// One usable tracklet.
#[derive(Debug, Clone, PartialEq)]
pub struct TrackletInfo {
    /// Index into [`TrackletSet::videos`].
    pub video: usize,
    pub tracklet_id: i64,
    /// The polyp it shows, when ground truth exists (evaluation and the purity log only).
    pub identity: Option<i64>,
    pub first_frame: i64,
    pub frames: usize,
    /// Its fragments: indices into [`TrackletSet::fragments`].
    pub fragments: std::ops::Range<usize>,
}

/// Every usable tracklet of a library, with the crops of its fragments in memory.
pub struct TrackletSet {
    pub size: usize,
    /// Video codes.
    pub videos: Vec<String>,
    pub tracklets: Vec<TrackletInfo>,
    /// Per fragment: its video, centre frame and identity (what the bag sampler needs).
    pub fragments: Vec<FragmentTime>,
    /// Per fragment: its tracklet.
    pub fragment_tracklet: Vec<usize>,
    /// Tracklets left out for being shorter than 30 frames (said, never dropped silently).
    pub short_tracklets: usize,
    /// Boxes that belong to no tracklet (left out).
    pub unassigned_boxes: usize,
    /// Boxes with no area (left out of their tracklet's frames would break it: counted).
    pub empty_boxes: usize,
    /// [fragments, FRAGMENT_FRAMES, 3, size, size], normalised.
    pixels: Vec<f32>,
    /// Per-frame features from a frozen encoder when attached ([`TrackletSet::attach_features`]):
    /// (dim, [fragments, FRAGMENT_FRAMES, dim]).
    features: Option<(usize, Vec<f32>)>,
}

type Plan = BTreeMap<i64, Vec<BoxRow>>;

/// The videos of `videos` (codes; all when empty) and, for each, the boxes of each tracklet
/// long enough to use, before any frame is decoded; what is left out is counted into `set`.
fn plan(
    store: &Store,
    videos: &[String],
    set: &mut TrackletSet,
) -> Result<(Vec<crate::store::VideoRow>, Vec<Plan>), TrackletDataError> {
    let rows: Vec<_> = store
        .videos()?
        .into_iter()
        .filter(|v| videos.is_empty() || videos.contains(&v.code))
        .collect();
    let mut plans = Vec::new();
    for v in &rows {
        let mut by_tracklet: Plan = BTreeMap::new();
        for b in store.video_boxes(v.id)? {
            if b.w <= 0.0 || b.h <= 0.0 {
                set.empty_boxes += 1;
            }
            match b.tracklet_id {
                Some(t) => by_tracklet.entry(t).or_default().push(b),
                None => set.unassigned_boxes += 1,
            }
        }
        let before = by_tracklet.len();
        by_tracklet.retain(|_, boxes| !fragments(boxes.len()).is_empty());
        set.short_tracklets += before - by_tracklet.len();
        plans.push(by_tracklet);
    }
    Ok((rows, plans))
}

impl TrackletSet {
    /// How many tracklets of the library are long enough to use (30+ frames), read from its
    /// boxes without decoding a frame: an evaluation looks before it prepares anything else.
    pub fn usable_tracklets(store: &Store) -> Result<usize, TrackletDataError> {
        let mut set = TrackletSet::empty(0);
        let (_, plans) = plan(store, &[], &mut set)?;
        Ok(plans.iter().map(|p| p.len()).sum())
    }

    fn empty(size: usize) -> TrackletSet {
        TrackletSet {
            size,
            videos: Vec::new(),
            tracklets: Vec::new(),
            fragments: Vec::new(),
            fragment_tracklet: Vec::new(),
            short_tracklets: 0,
            unassigned_boxes: 0,
            empty_boxes: 0,
            pixels: Vec::new(),
            features: None,
        }
    }

    /// Loads the tracklets of `videos` (codes; all videos when empty) at `size` px crops.
    pub fn load(
        store: &Store,
        videos: &[String],
        size: usize,
        progress: &Progress,
    ) -> Result<TrackletSet, TrackletDataError> {
        let preprocess = Preprocess {
            size: size as u32,
            ..Preprocess::tracklet()
        };
        let mut set = TrackletSet::empty(size);
        let (rows, plans) = plan(store, videos, &mut set)?;
        let total = plans
            .iter()
            .flat_map(|p| p.values())
            .map(|b| fragments(b.len()).len() * FRAGMENT_FRAMES)
            .sum::<usize>();
        progress.stage("cropping tracklet frames", total as u64);
        for (v, by_tracklet) in rows.iter().zip(plans) {
            if by_tracklet.is_empty() {
                continue;
            }
            let video = set.videos.len();
            set.videos.push(v.code.clone());
            let frames: BTreeMap<i64, _> = store.video_frames(v.id)?.into_iter().collect();
            for (tracklet_id, boxes) in by_tracklet {
                let start = set.fragments.len();
                let tracklet = set.tracklets.len();
                let identity = boxes[0].polyp_id;
                let on_screen = (boxes[0].frame_index, boxes[boxes.len() - 1].frame_index);
                for fragment in fragments(boxes.len()) {
                    for &p in &fragment.positions {
                        if progress.is_cancelled() {
                            return Err(TrackletDataError::Cancelled);
                        }
                        let b = &boxes[p];
                        let image = frame_image(store, &frames, &v.code, b.frame_index)?;
                        let mut rgb = image.to_rgb8();
                        blackout_outside_field_stop(&mut rgb);
                        let bbox = [b.x as f32, b.y as f32, b.w as f32, b.h as f32];
                        let crop = tracklet_crop(&image::DynamicImage::ImageRgb8(rgb), bbox);
                        let rgb = preprocess.resize(&crop);
                        for c in 0..3 {
                            set.pixels.extend(rgb.pixels().map(|px| {
                                (px.0[c] as f32 / 255.0 - preprocess.mean[c]) / preprocess.std[c]
                            }));
                        }
                        progress.inc();
                    }
                    set.fragments.push(FragmentTime {
                        video,
                        centre: boxes[0].frame_index as f32 + fragment.centre(),
                        on_screen,
                        identity: identity.map(|i| i as usize),
                    });
                    set.fragment_tracklet.push(tracklet);
                }
                set.tracklets.push(TrackletInfo {
                    video,
                    tracklet_id,
                    identity,
                    first_frame: boxes[0].frame_index,
                    frames: boxes.len(),
                    fragments: start..set.fragments.len(),
                });
            }
        }
        Ok(set)
    }

    /// The crops of fragment `f` back in [0, 1] RGB, [FRAGMENT_FRAMES, 3, size, size].
    pub fn fragment_rgb(&self, f: usize) -> Vec<f32> {
        let len = self.fragment_len();
        let p = Preprocess::tracklet();
        self.pixels[f * len..(f + 1) * len]
            .iter()
            .map(|v| v * p.std[0] + p.mean[0])
            .collect()
    }

    /// Attaches per-frame features of every fragment ([fragments, FRAGMENT_FRAMES, dim], in
    /// fragment order), for a model that reads features instead of pixels.
    pub fn attach_features(&mut self, dim: usize, features: Vec<f32>) {
        assert_eq!(
            features.len(),
            self.fragments.len() * FRAGMENT_FRAMES * dim,
            "one feature vector per fragment frame"
        );
        self.features = Some((dim, features));
    }

    /// The width of the attached features, if any.
    pub fn feature_dim(&self) -> Option<usize> {
        self.features.as_ref().map(|f| f.0)
    }

    /// The attached feature of frame `k` (0..FRAGMENT_FRAMES) of fragment `fragment`, if any.
    pub fn feature(&self, fragment: usize, k: usize) -> Option<&[f32]> {
        let (dim, all) = self.features.as_ref()?;
        let at = (fragment * super::fragments::FRAGMENT_FRAMES + k) * dim;
        all.get(at..at + dim)
    }

    /// The attached features of `fragments`: [fragments.len(), FRAGMENT_FRAMES, dim]. Panics
    /// when none are attached.
    pub fn feature_batch(&self, fragments: &[usize], device: &Device) -> Tensor<3> {
        let (dim, all) = self.features.as_ref().expect("features attached");
        let len = FRAGMENT_FRAMES * dim;
        let mut data = Vec::with_capacity(fragments.len() * len);
        for &f in fragments {
            data.extend_from_slice(&all[f * len..(f + 1) * len]);
        }
        Tensor::from_data(
            TensorData::new(data, [fragments.len(), FRAGMENT_FRAMES, *dim]),
            device,
        )
    }

    /// What was left out, in words ("" when nothing was).
    pub fn left_out(&self) -> String {
        let mut parts = Vec::new();
        if self.short_tracklets > 0 {
            parts.push(format!(
                "{} tracklets shorter than {} frames",
                self.short_tracklets,
                super::fragments::MIN_TRACKLET_FRAMES
            ));
        }
        if self.unassigned_boxes > 0 {
            parts.push(format!("{} boxes in no tracklet", self.unassigned_boxes));
        }
        if self.empty_boxes > 0 {
            parts.push(format!(
                "{} boxes of zero area (cropped as 1 px)",
                self.empty_boxes
            ));
        }
        parts.join(", ")
    }

    fn fragment_len(&self) -> usize {
        FRAGMENT_FRAMES * 3 * self.size * self.size
    }

    /// The crops of `fragments`, each mirrored left-right where `flip` says so:
    /// [fragments.len(), FRAGMENT_FRAMES, 3, size, size].
    pub fn batch(&self, fragments: &[usize], flip: &[bool], device: &Device) -> Tensor<5> {
        let s = self.size;
        let len = self.fragment_len();
        let mut data = Vec::with_capacity(fragments.len() * len);
        for (i, &f) in fragments.iter().enumerate() {
            let pixels = &self.pixels[f * len..(f + 1) * len];
            if flip.get(i).copied().unwrap_or(false) {
                for row in pixels.chunks_exact(s) {
                    data.extend(row.iter().rev());
                }
            } else {
                data.extend_from_slice(pixels);
            }
        }
        Tensor::from_data(
            TensorData::new(data, [fragments.len(), FRAGMENT_FRAMES, 3, s, s]),
            device,
        )
    }
}
