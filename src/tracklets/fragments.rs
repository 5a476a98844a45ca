//! Fragments and crops (METHODS §3). A tracklet shorter than [`MIN_TRACKLET_FRAMES`] is
//! dropped. A fragment is [`FRAGMENT_FRAMES`] frames taken every [`FRAGMENT_STRIDE`]th frame,
//! so one fragment spans 29 frames; a tracklet's fragments start every 32 frames (each takes
//! every 4th frame of its own 32-frame window), so fragments of one tracklet never share a
//! frame. Each frame is cropped by `model::preprocess::tracklet_crop` (5 box diagonals).

/// Tracklets with fewer detections are not used.
pub const MIN_TRACKLET_FRAMES: usize = 30;
/// Frames per fragment.
pub const FRAGMENT_FRAMES: usize = 8;
/// A fragment takes every this many-th frame.
pub const FRAGMENT_STRIDE: usize = 4;
/// Frames between the starts of two fragments of one tracklet.
pub const FRAGMENT_WINDOW: usize = FRAGMENT_FRAMES * FRAGMENT_STRIDE;

/// One fragment of a tracklet: positions (0-based, within the tracklet's detections) of its
/// [`FRAGMENT_FRAMES`] frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fragment {
    pub positions: Vec<usize>,
}

impl Fragment {
    /// The middle of the fragment, in positions within its tracklet (for temporal distances).
    pub fn centre(&self) -> f32 {
        let first = *self.positions.first().expect("a fragment has frames") as f32;
        let last = *self.positions.last().expect("a fragment has frames") as f32;
        (first + last) / 2.0
    }
}

/// The fragments of a tracklet of `len` consecutive detections; none when the tracklet is
/// shorter than [`MIN_TRACKLET_FRAMES`].
pub fn fragments(len: usize) -> Vec<Fragment> {
    if len < MIN_TRACKLET_FRAMES {
        return Vec::new();
    }
    let span = (FRAGMENT_FRAMES - 1) * FRAGMENT_STRIDE + 1;
    (0..)
        .map(|i| i * FRAGMENT_WINDOW)
        .take_while(|start| start + span <= len)
        .map(|start| Fragment {
            positions: (0..FRAGMENT_FRAMES)
                .map(|f| start + f * FRAGMENT_STRIDE)
                .collect(),
        })
        .collect()
}
