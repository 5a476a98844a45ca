//! How far a tracklet link can be trusted: each tracklet's familiarity to the model that
//! compared it, from the pass that embedded it. Compared by the frame encoder (with its scene
//! encoder, or the mean over frames), a tracklet's score is the mean over the frames it was
//! embedded from of their embeddings' scores (as for a twin's views); compared by a tracklet
//! head, the mean over its fragments of the head's embeddings' scores (on the phantom they set
//! a grey and a noise clip further beyond the threshold than the head's input features did:
//! docs/trust.md). A link is judged on both ends (the worse one); a video's answer counts its
//! unfamiliar tracklets and links. The statistics are fitted on the tracklets of the library
//! the model learned from (every fifth tracklet held out for the threshold), cut as the
//! tracklet comparisons cut them.

use super::dataset::{TrackletDataError, TrackletSet};
use crate::model::tracklet::TrackletEncoder;
use crate::plumbing::Progress;
use crate::store::Store;
use crate::trust::{Familiarity, Judgement, familiarity};
use crate::twins::TwinModels;
use serde::Serialize;

/// Crop side the tracklet set is read at (its pixels are not used: the frame encoder reads
/// the frames itself).
const CROP: usize = 32;

/// A library's tracklets as the tracklet models see them: per tracklet, the familiarity
/// features of every frame of its fragments and the head's embedding of each fragment (empty
/// without a head).
pub struct Gathered {
    pub name: String,
    pub frames: Vec<Vec<Vec<f32>>>,
    pub fragments: Vec<Vec<Vec<f32>>>,
}

impl crate::trust::Gathered for Gathered {
    fn split(self, every: usize) -> (Gathered, Gathered) {
        use crate::trust::split_every;
        let (frames, held_frames) = split_every(self.frames, every);
        let (fragments, held_fragments) = split_every(self.fragments, every);
        let every = every.max(2);
        (
            Gathered {
                name: format!("{} (all but every {every}th tracklet)", self.name),
                frames,
                fragments,
            },
            Gathered {
                name: format!("{} (every {every}th tracklet)", self.name),
                frames: held_frames,
                fragments: held_fragments,
            },
        )
    }

    fn join(mut self, other: Gathered) -> Gathered {
        self.name = format!("{} + {}", self.name, other.name);
        self.frames.extend(other.frames);
        self.fragments.extend(other.fragments);
        self
    }
}

impl Gathered {
    /// Every frame's features, tracklet after tracklet.
    pub fn all_frames(&self) -> Vec<Vec<f32>> {
        self.frames.iter().flatten().cloned().collect()
    }

    /// Every fragment's head embedding, tracklet after tracklet.
    pub fn all_fragments(&self) -> Vec<Vec<f32>> {
        self.fragments.iter().flatten().cloned().collect()
    }
}

/// Every usable tracklet of `store` through the frame encoder `twins` (and `head`).
pub fn gather(
    store: &Store,
    twins: &TwinModels,
    head: Option<&TrackletEncoder>,
    name: &str,
    progress: &Progress,
) -> Result<Gathered, TrackletDataError> {
    let set = TrackletSet::load(store, &[], CROP, progress)?;
    let per = super::twin::tracklet_features(store, &set, twins, head, progress)?;
    let (frames, fragments) = per.into_iter().unzip();
    Ok(Gathered {
        name: name.to_string(),
        frames,
        fragments,
    })
}

/// Fits the familiarity on `fit`'s frame embeddings, or with `head` its fragments' head
/// embeddings (threshold on `validation`'s).
pub fn fit(
    fit: &Gathered,
    validation: &Gathered,
    head: bool,
) -> Result<Familiarity, familiarity::FamiliarityError> {
    let items = match head {
        true => "tracklet fragments (head embeddings)",
        false => "tracklet frames",
    };
    let pick = |g: &Gathered| match head {
        true => g.all_fragments(),
        false => g.all_frames(),
    };
    Familiarity::fit(
        &pick(fit),
        &pick(validation),
        &format!("{}: {items}", fit.name),
        &format!("{}: {items}", validation.name),
    )
}

/// A link's judgement from its two ends' (the worse end's: the higher score). None when
/// either end has none.
pub fn link(a: Option<&Judgement>, b: Option<&Judgement>) -> Option<Judgement> {
    let (a, b) = (a?, b?);
    Some(if b.score > a.score || b.score.is_nan() {
        b.clone()
    } else {
        a.clone()
    })
}

/// What a video's tracklet answer says of its familiarity: how many tracklets and links are
/// marked, and the worst tracklet's judgement (what the badge shows).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VideoFamiliarity {
    pub model: String,
    pub tracklets: usize,
    pub unfamiliar_tracklets: usize,
    pub links: usize,
    pub unfamiliar_links: usize,
    pub worst: Judgement,
}

impl VideoFamiliarity {
    /// Whether anything in the answer is marked.
    pub fn unfamiliar(&self) -> bool {
        self.unfamiliar_tracklets > 0 || self.unfamiliar_links > 0
    }

    /// The count in words: "2 of 3 tracklets and 1 of 2 links unfamiliar to <model>".
    pub fn summary(&self) -> String {
        format!(
            "{} of {} tracklets and {} of {} links unfamiliar to {}",
            self.unfamiliar_tracklets,
            self.tracklets,
            self.unfamiliar_links,
            self.links,
            self.model
        )
    }
}

/// The video's count from its tracklets' judgements and its links' (None when no tracklet
/// was judged).
pub fn video(
    tracklets: &[Option<Judgement>],
    links: &[Option<Judgement>],
) -> Option<VideoFamiliarity> {
    let judged: Vec<&Judgement> = tracklets.iter().flatten().collect();
    let worst = judged
        .iter()
        .copied()
        .max_by(|a, b| a.score.total_cmp(&b.score))?
        .clone();
    Some(VideoFamiliarity {
        model: worst.model.clone(),
        tracklets: judged.len(),
        unfamiliar_tracklets: judged.iter().filter(|j| j.unfamiliar).count(),
        links: links.iter().flatten().count(),
        unfamiliar_links: links.iter().flatten().filter(|j| j.unfamiliar).count(),
        worst,
    })
}
