//! The video polyp strip on held-out videos: does the detector's per-frame polyp probability
//! (what the Tracklets tab's strip shades) pick the frames where a polyp is in view? Truth:
//! a frame shows a polyp when the video has a polyp box on it. Figures: AUROC over every frame
//! of every video, the mean of each video's own AUROC (the strip is read within one video),
//! and the share of frames the detector calls a polyp (p > 0.5) among frames with and
//! without one. Intervals resample whole videos; redness (the red share of a frame's pixels)
//! is the no-learning baseline.

use super::metrics::{auroc, interval};
use crate::data::images;
use crate::plumbing::{Progress, Rng};
use crate::prompts::model::LoadedPromptModel;
use crate::prompts::query::{image_embeddings, polyp_probabilities};
use crate::store::Store;
use burn::tensor::Device;
use serde::Serialize;
use std::collections::HashSet;

pub const BOOTSTRAP: usize = 1000;

/// One video's frames: each method's score and whether a polyp is in view.
pub struct VideoFrames {
    pub code: String,
    pub polyp: Vec<bool>,
    /// Per method, one score a frame.
    pub scores: Vec<Vec<f64>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StripRow {
    pub method: String,
    /// AUROC over every frame of every video.
    pub auroc: f64,
    pub auroc_ci: [f64; 2],
    /// Mean over videos with frames of both kinds of the video's own AUROC.
    pub within_video: f64,
    pub within_video_ci: [f64; 2],
    /// Share of frames with a polyp scored above 0.5, and of frames without one (only for
    /// probabilities; NaN for a baseline that is not one).
    pub called_on_polyp: f64,
    pub called_on_background: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct StripEval {
    pub rows: Vec<StripRow>,
    pub videos: usize,
    pub frames: usize,
    pub polyp_frames: usize,
    pub seed: u64,
    pub bootstrap: usize,
}

/// Every video of `store` with `detector`'s polyp probability (exactly the strip's number: the
/// same encoding and the same two sentences) and redness for each frame. Reads only.
pub fn score_videos(
    store: &Store,
    detector: &LoadedPromptModel,
    device: &Device,
    progress: &Progress,
) -> Result<Vec<VideoFrames>, String> {
    let videos = store.videos().map_err(|e| e.to_string())?;
    let total: usize = videos
        .iter()
        .map(|v| store.video_frames(v.id).map(|f| f.len()).unwrap_or(0))
        .sum();
    progress.stage("reading video frames with the detector", total as u64);
    let mut out = Vec::new();
    for v in &videos {
        let frames = store.video_frames(v.id).map_err(|e| e.to_string())?;
        let boxed: HashSet<i64> = store
            .video_boxes(v.id)
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|b| b.frame_index)
            .collect();
        let mut probability = Vec::new();
        let mut redness = Vec::new();
        let mut polyp = Vec::new();
        for chunk in frames.chunks(64) {
            let mut decoded = Vec::new();
            for (index, media) in chunk {
                let d = images::decode_media(store, media)
                    .map_err(|e| format!("video {} frame {index}: {e}", v.code))?;
                redness.push(super::real::redness(&d.image));
                polyp.push(boxed.contains(index));
                decoded.push(d.image);
                progress.inc();
            }
            let emb = image_embeddings(detector, &decoded, device);
            let d = emb.dims()[1];
            let flat: Vec<f32> = emb
                .into_data()
                .try_to_vec::<f32>()
                .map_err(|e| format!("{e:?}"))?;
            let rows: Vec<Vec<f32>> = flat.chunks(d).map(|r| r.to_vec()).collect();
            probability.extend(
                polyp_probabilities(detector, &rows, device)
                    .into_iter()
                    .map(f64::from),
            );
        }
        out.push(VideoFrames {
            code: v.code.clone(),
            polyp,
            scores: vec![probability, redness],
        });
    }
    Ok(out)
}

/// The figures of each method (`labels[i]` scores `videos[_].scores[i]`; `probabilities[i]`
/// when its scores are probabilities, so that "called" shares mean something).
pub fn evaluate(
    videos: &[VideoFrames],
    labels: &[&str],
    probabilities: &[bool],
    seed: u64,
) -> StripEval {
    let mut rng = Rng::new(seed ^ 0x57_12_1F);
    let draws: Vec<Vec<usize>> = (0..BOOTSTRAP)
        .map(|_| (0..videos.len()).map(|_| rng.below(videos.len())).collect())
        .collect();
    let all: Vec<usize> = (0..videos.len()).collect();
    let rows = labels
        .iter()
        .enumerate()
        .map(|(m, label)| {
            let pooled = |pick: &[usize]| {
                let (mut s, mut p) = (Vec::new(), Vec::new());
                for &i in pick {
                    s.extend_from_slice(&videos[i].scores[m]);
                    p.extend_from_slice(&videos[i].polyp);
                }
                auroc(&s, &p)
            };
            let within = |pick: &[usize]| {
                let per: Vec<f64> = pick
                    .iter()
                    .map(|&i| auroc(&videos[i].scores[m], &videos[i].polyp))
                    .filter(|a| a.is_finite())
                    .collect();
                per.iter().sum::<f64>() / per.len().max(1) as f64
            };
            let called = |want: bool| {
                if !probabilities[m] {
                    return f64::NAN;
                }
                let (mut hit, mut n) = (0usize, 0usize);
                for v in videos {
                    for (s, &p) in v.scores[m].iter().zip(&v.polyp) {
                        if p == want {
                            n += 1;
                            hit += (*s > 0.5) as usize;
                        }
                    }
                }
                hit as f64 / n.max(1) as f64
            };
            StripRow {
                method: label.to_string(),
                auroc: pooled(&all),
                auroc_ci: interval(draws.iter().map(|d| pooled(d)).collect()),
                within_video: within(&all),
                within_video_ci: interval(draws.iter().map(|d| within(d)).collect()),
                called_on_polyp: called(true),
                called_on_background: called(false),
            }
        })
        .collect();
    StripEval {
        rows,
        videos: videos.len(),
        frames: videos.iter().map(|v| v.polyp.len()).sum(),
        polyp_frames: videos
            .iter()
            .map(|v| v.polyp.iter().filter(|&&p| p).count())
            .sum(),
        seed,
        bootstrap: BOOTSTRAP,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_perfect_strip_scores_one_and_a_reversed_one_zero() {
        let video = |code: &str| VideoFrames {
            code: code.into(),
            polyp: vec![false, true, true, false],
            scores: vec![vec![0.1, 0.9, 0.8, 0.2], vec![0.9, 0.1, 0.2, 0.8]],
        };
        let e = evaluate(
            &[video("a"), video("b")],
            &["good", "bad"],
            &[true, false],
            3,
        );
        assert_eq!(e.rows[0].auroc, 1.0);
        assert_eq!(e.rows[0].within_video, 1.0);
        assert_eq!(e.rows[0].called_on_polyp, 1.0);
        assert_eq!(e.rows[0].called_on_background, 0.0);
        assert_eq!(e.rows[1].auroc, 0.0);
        assert!(e.rows[1].called_on_polyp.is_nan());
        assert_eq!((e.videos, e.frames, e.polyp_frames), (2, 8, 4));
    }
}
