//! Following a box a reviewer drew on one frame through the neighbouring frames, until the
//! polyp is lost: normalised cross-correlation of the box's grey-level template in a window
//! around its last place, on frames scaled so the template is about [`TEMPLATE_SIDE`] px. The
//! template adapts slowly (a running mix with what was found), so a polyp that turns or
//! changes light is kept, and a score under [`TrackerConfig::min_score`] ends the track (the
//! reviewer draws again from there). Box size is kept: a short-range follower, not a detector.

use super::dataset::TrackletDataError;
use crate::plumbing::Progress;
use crate::store::Store;
use image::{GrayImage, imageops};
use std::collections::BTreeMap;

/// Template side after scaling, pixels.
pub const TEMPLATE_SIDE: f32 = 24.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrackerConfig {
    /// Search this far (a fraction of the box's larger side) from the last place, each way.
    pub search: f32,
    /// A match scoring under this ends the track (NCC, -1..1).
    pub min_score: f32,
    /// At most this many frames each way.
    pub max_frames: usize,
    /// Weight of the newly found patch in the template.
    pub adapt: f32,
}

impl Default for TrackerConfig {
    fn default() -> Self {
        TrackerConfig {
            search: 0.5,
            min_score: 0.6,
            max_frames: 2000,
            adapt: 0.15,
        }
    }
}

/// One followed box: frame index, (x, y, w, h) in full-frame pixels, match score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tracked {
    pub frame: i64,
    pub xywh: [f32; 4],
    pub score: f32,
}

/// Follows `start` (drawn on frame `first`) forward (`step` 1) or backward (-1) through the
/// frames `frame(i)` returns (`None` past the video's ends). The drawn box itself is not in
/// the result.
pub fn follow(
    mut frame: impl FnMut(i64) -> Option<GrayImage>,
    first: i64,
    start: [f32; 4],
    step: i64,
    config: &TrackerConfig,
) -> Vec<Tracked> {
    let Some(image) = frame(first) else {
        return Vec::new();
    };
    let scale = (TEMPLATE_SIDE / start[2].max(start[3]).max(1.0)).min(1.0);
    let small = shrink(&image, scale);
    let (tw, th) = (
        ((start[2] * scale).round() as u32).max(3),
        ((start[3] * scale).round() as u32).max(3),
    );
    let mut pos = (
        (start[0] * scale).round() as i64,
        (start[1] * scale).round() as i64,
    );
    let Some(mut template) = patch(&small, pos, tw, th) else {
        return Vec::new();
    };
    let reach = (config.search * tw.max(th) as f32).ceil().max(2.0) as i64;
    let mut out = Vec::new();
    let mut index = first;
    while out.len() < config.max_frames {
        index += step;
        let Some(image) = frame(index) else { break };
        let small = shrink(&image, scale);
        let mut best = (f32::NEG_INFINITY, pos);
        for dy in -reach..=reach {
            for dx in -reach..=reach {
                let at = (pos.0 + dx, pos.1 + dy);
                if let Some(p) = patch(&small, at, tw, th) {
                    let s = ncc(&template, &p);
                    if s > best.0 {
                        best = (s, at);
                    }
                }
            }
        }
        if best.0 < config.min_score {
            break;
        }
        pos = best.1;
        let found = patch(&small, pos, tw, th).expect("scored above");
        for (t, f) in template.iter_mut().zip(&found) {
            *t = (1.0 - config.adapt) * *t + config.adapt * f;
        }
        out.push(Tracked {
            frame: index,
            xywh: [
                pos.0 as f32 / scale,
                pos.1 as f32 / scale,
                start[2],
                start[3],
            ],
            score: best.0,
        });
    }
    out
}

/// Follows a box drawn on frame `first` of a library video both ways until it is lost; the
/// result is in frame order and includes the drawn box (score 1).
pub fn follow_in_video(
    store: &Store,
    video_id: i64,
    first: i64,
    drawn: [f32; 4],
    progress: &Progress,
) -> Result<Vec<Tracked>, TrackletDataError> {
    let frames: BTreeMap<i64, _> = store.video_frames(video_id)?.into_iter().collect();
    if !frames.contains_key(&first) {
        return Err(TrackletDataError::MissingFrame {
            video: video_id.to_string(),
            frame: first,
        });
    }
    progress.stage("following the box", 0);
    let mut failure = None;
    let mut frame = |i: i64| -> Option<GrayImage> {
        if progress.is_cancelled() || failure.is_some() {
            return None;
        }
        let media = frames.get(&i)?;
        let path = store.media_path(media);
        match crate::data::images::decode_media(store, media) {
            Ok(d) => {
                progress.inc();
                Some(d.image.to_luma8())
            }
            Err(e) => {
                failure = Some(TrackletDataError::Image {
                    video: video_id.to_string(),
                    frame: i,
                    reason: e.to_string().replace(&format!("{}: ", path.display()), ""),
                    path: path.display().to_string(),
                });
                None
            }
        }
    };
    let config = TrackerConfig::default();
    let mut back = follow(&mut frame, first, drawn, -1, &config);
    let ahead = follow(&mut frame, first, drawn, 1, &config);
    if let Some(e) = failure {
        return Err(e);
    }
    if progress.is_cancelled() {
        return Err(TrackletDataError::Cancelled);
    }
    back.reverse();
    back.push(Tracked {
        frame: first,
        xywh: drawn,
        score: 1.0,
    });
    back.extend(ahead);
    Ok(back)
}

fn shrink(image: &GrayImage, scale: f32) -> GrayImage {
    if scale >= 1.0 {
        return image.clone();
    }
    let (w, h) = image.dimensions();
    let (nw, nh) = (
        ((w as f32 * scale).round() as u32).max(1),
        ((h as f32 * scale).round() as u32).max(1),
    );
    imageops::resize(image, nw, nh, imageops::FilterType::Triangle)
}

/// The `w` x `h` patch at `at` as floats, `None` when it leaves the image.
fn patch(image: &GrayImage, at: (i64, i64), w: u32, h: u32) -> Option<Vec<f32>> {
    let (iw, ih) = image.dimensions();
    if at.0 < 0 || at.1 < 0 || at.0 + w as i64 > iw as i64 || at.1 + h as i64 > ih as i64 {
        return None;
    }
    let (x0, y0) = (at.0 as u32, at.1 as u32);
    let mut out = Vec::with_capacity((w * h) as usize);
    for y in y0..y0 + h {
        for x in x0..x0 + w {
            out.push(image.get_pixel(x, y).0[0] as f32);
        }
    }
    Some(out)
}

/// Normalised cross-correlation of two equally sized patches; 0 when either is flat.
fn ncc(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len() as f32;
    let (ma, mb) = (a.iter().sum::<f32>() / n, b.iter().sum::<f32>() / n);
    let (mut ab, mut aa, mut bb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        let (dx, dy) = (x - ma, y - mb);
        ab += dx * dy;
        aa += dx * dx;
        bb += dy * dy;
    }
    if aa <= 1e-6 || bb <= 1e-6 {
        return 0.0;
    }
    ab / (aa * bb).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A textured wall with a bright spotted square at `(x, y)`, 96 x 96.
    fn scene(x: u32, y: u32, with_square: bool) -> GrayImage {
        GrayImage::from_fn(96, 96, |px, py| {
            let wall = 70 + ((px * 7 + py * 13) % 23) as u8;
            let inside = with_square && (x..x + 16).contains(&px) && (y..y + 16).contains(&py);
            if inside {
                image::Luma([if (px - x + py - y).is_multiple_of(4) {
                    250
                } else {
                    180
                }])
            } else {
                image::Luma([wall])
            }
        })
    }

    #[test]
    fn a_moving_square_is_followed_until_it_is_gone() {
        // The square moves 2 px right and 1 px down a frame for 20 frames, then disappears.
        let frame = |i: i64| {
            (0..40).contains(&i).then(|| {
                let k = i.min(20) as u32;
                scene(10 + 2 * k, 20 + k, i <= 20)
            })
        };
        let config = TrackerConfig::default();
        let ahead = follow(frame, 0, [10.0, 20.0, 16.0, 16.0], 1, &config);
        assert_eq!(ahead.len(), 20, "{ahead:?}");
        for t in &ahead {
            let k = t.frame as f32;
            assert!((t.xywh[0] - (10.0 + 2.0 * k)).abs() <= 1.0, "{t:?}");
            assert!((t.xywh[1] - (20.0 + k)).abs() <= 1.0, "{t:?}");
            assert!(t.score > 0.6);
        }
        // Backward from frame 10 runs to the first frame.
        let back = follow(frame, 10, [30.0, 30.0, 16.0, 16.0], -1, &config);
        assert_eq!(back.last().map(|t| t.frame), Some(0));
    }
}
