//! `train tracklets` (METHODS §3): the tracklet model learns from time alone. Each step takes
//! [`TrackletTrainingConfig::anchors`] anchor fragments, draws each a bag of fragments near it
//! in time (exponential ranks, the cosine temperature curriculum), and applies the noise-aware
//! loss at the tracklet level, the frame level, or both. Polyp identities are never used for
//! training; when the library has them, the share of bag members showing the anchor's polyp
//! (bag purity) is logged per epoch.

use super::fit::{At, Figure, Plan, StepLoss, Steps, fit};
use super::tracklet_losses::{KnownNegatives, noise_aware_frames_with, noise_aware_with};
use super::{Checkpoint, TrainError, TrainEvents};
use crate::model::clip::l2_normalize;
use crate::model::tracklet::{TrackletEncoder, TrackletModel, TrackletModelConfig};
use crate::plumbing::Rng;
use crate::tracklets::bags::{self, BAG_SIZE, Curriculum, RankSampling};
use crate::tracklets::dataset::TrackletSet;
use burn::config::Config;
use burn::module::Module;
use burn::tensor::{Device, Tensor, TensorData};

/// Which levels the loss is applied at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Levels {
    Tracklet,
    Frame,
    Both,
}

#[derive(Config, Debug)]
pub struct TrackletTrainingConfig {
    pub model: TrackletModelConfig,
    #[config(default = 20)]
    pub epochs: usize,
    /// Anchors per step; each brings a bag of [`BAG_SIZE`] (12 x 5 = 60 fragments).
    #[config(default = 12)]
    pub anchors: usize,
    #[config(default = 0.07)]
    pub tau: f64,
    #[config(default = 3e-4)]
    pub lr: f64,
    #[config(default = 1e-4)]
    pub weight_decay: f64,
    #[config(default = "RankSampling::Exponential")]
    pub sampling: RankSampling,
    #[config(default = "Curriculum::Cosine")]
    pub curriculum: Curriculum,
    #[config(default = "Levels::Both")]
    pub levels: Levels,
    /// Anchors of a step come from videos in runs of this many (fragments of different
    /// tracklets first), so some negatives share the anchor's colon and the loss cannot be
    /// met by telling videos apart; 1: anchors drawn at random over all videos (the paper).
    #[config(default = 1)]
    pub anchors_per_video: usize,
    /// Bags never hold fragments of a tracklet on screen in the same frame as the anchor's
    /// (another polyp for certain; beyond the paper, which draws from every rank).
    #[config(default = false)]
    pub clean_bags: bool,
    /// Up to this many fragments on screen together with the anchor's tracklet join its
    /// loss as known negatives (0: none, as in the paper).
    #[config(default = 0)]
    pub co_visible_negatives: usize,
    #[config(default = 17)]
    pub seed: u64,
}

/// What the training loop needs of a tracklet network: fragments in, (tracklet embedding
/// [n, dim], frame tokens [n, frames, dim]) out, and the temporal encoder whose projector the
/// loss reads.
pub trait FragmentEncoder: Module {
    fn encode(
        &self,
        set: &TrackletSet,
        fragments: &[usize],
        flip: &[bool],
        device: &Device,
    ) -> (Tensor<2>, Tensor<3>);
    fn head(&self) -> &TrackletEncoder;
}

/// The whole model on pixel crops.
impl FragmentEncoder for TrackletModel {
    fn encode(
        &self,
        set: &TrackletSet,
        fragments: &[usize],
        flip: &[bool],
        device: &Device,
    ) -> (Tensor<2>, Tensor<3>) {
        self.forward(set.batch(fragments, flip, device)) // [n, F, 3, s, s] in
    }
    fn head(&self) -> &TrackletEncoder {
        &self.encoder
    }
}

/// The temporal encoder alone, on per-frame features of a frozen backbone (the twin image
/// encoder) attached to the set; flips do not apply to features.
impl FragmentEncoder for TrackletEncoder {
    fn encode(
        &self,
        set: &TrackletSet,
        fragments: &[usize],
        _flip: &[bool],
        device: &Device,
    ) -> (Tensor<2>, Tensor<3>) {
        self.forward(set.feature_batch(fragments, device)) // [n, F, d] in
    }
    fn head(&self) -> &TrackletEncoder {
        self
    }
}

/// Trains the pixel model on `set`; `start` continues a checkpoint.
pub fn train(
    config: &TrackletTrainingConfig,
    set: &TrackletSet,
    device: &Device,
    start: Option<Checkpoint<TrackletModel>>,
    events: &mut dyn TrainEvents<TrackletModel>,
) -> Result<TrackletModel, TrainError> {
    train_encoder(config, set, device, start, |d| config.model.init(d), events)
}

impl TrackletTrainingConfig {
    /// Values one anchor's step makes ([`super::memory`]): the anchor, its bag and its known
    /// negatives, each a fragment of frames through the frame CNN (`cnn`; off: frozen
    /// features) and the tracklet encoder.
    pub fn step_values(&self, cnn: bool) -> f64 {
        use crate::tracklets::fragments::FRAGMENT_FRAMES;
        let rows = (1 + BAG_SIZE + self.co_visible_negatives) as f64;
        let e = &self.model.encoder;
        let frames = if cnn {
            let b = &self.model.backbone;
            FRAGMENT_FRAMES as f64 * super::memory::cnn(b.image_size, &b.channels)
        } else {
            0.0
        };
        let ff = e.feed_forward as f64 / e.dim.max(1) as f64;
        let encoder = super::memory::transformer(FRAGMENT_FRAMES + 1, e.dim, e.layers, e.heads, ff);
        rows * (frames + encoder)
    }
}

/// The fragments that can be anchors (they have another fragment in their video), or why
/// `set` cannot train with `config` (checked before anything is written).
pub fn usable_anchors(
    config: &TrackletTrainingConfig,
    set: &TrackletSet,
) -> Result<Vec<usize>, TrainError> {
    let usable: Vec<usize> = (0..set.fragments.len())
        .filter(|&a| {
            bags::ranked_neighbours(a, &set.fragments)
                .into_iter()
                .any(|b| !(config.clean_bags && set.fragments[a].co_visible(&set.fragments[b])))
        })
        .collect();
    let anchors = config.anchors.max(2);
    if usable.len() < anchors {
        return Err(TrainError::NotEnoughData(format!(
            "tracklet training needs at least {anchors} fragments with a neighbour in their \
             video; the library has {} (tracklets of 30 frames or more make fragments)",
            usable.len()
        )));
    }
    Ok(usable)
}

/// Trains any [`FragmentEncoder`] on `set` (a fresh one from `init`, or `start`).
pub fn train_encoder<M: FragmentEncoder>(
    config: &TrackletTrainingConfig,
    set: &TrackletSet,
    device: &Device,
    start: Option<Checkpoint<M>>,
    init: impl FnOnce(&Device) -> M,
    events: &mut dyn TrainEvents<M>,
) -> Result<M, TrainError> {
    let usable = usable_anchors(config, set)?;
    let anchors = config.anchors.max(2);
    let start = Checkpoint::resume_or_fresh(start, device, config.seed, config.weight_decay, init);
    let plan = Plan {
        epochs: config.epochs,
        steps_per_epoch: usable.len() / anchors,
        lr: config.lr,
        seed: config.seed,
    };
    let mut steps = TrackletSteps {
        config,
        set,
        device,
        plan,
        usable,
        order: Vec::new(),
    };
    fit(&plan, start, &mut steps, events)
}

/// One step of tracklet training: anchors with their bags (and known negatives), the
/// noise-aware loss at the tracklet and the frame level.
struct TrackletSteps<'a> {
    config: &'a TrackletTrainingConfig,
    set: &'a TrackletSet,
    device: &'a Device,
    plan: Plan,
    /// Fragments that can be anchors.
    usable: Vec<usize>,
    /// This epoch's anchor order.
    order: Vec<usize>,
}

impl<M: FragmentEncoder> Steps<M> for TrackletSteps<'_> {
    fn begin_epoch(&mut self, _epoch: usize, rng: &mut Rng) {
        self.order = anchor_order(&self.usable, self.set, self.config.anchors_per_video, rng);
    }

    fn step(&mut self, model: &M, at: At, rng: &mut Rng) -> StepLoss {
        let (config, set, device) = (self.config, self.set, self.device);
        let anchors = config.anchors.max(2);
        let (mut purity, mut purity_n) = (0.0, 0.0);
        let t = config
            .curriculum
            .temperature(at.global as f64 / at.total.max(1) as f64);
        let chosen = &self.order[at.step * anchors..(at.step + 1) * anchors];
        let mut members = Vec::with_capacity(anchors * BAG_SIZE);
        let m = config.co_visible_negatives;
        let (mut negatives, mut mask) = (Vec::with_capacity(anchors * m), Vec::new());
        for &a in chosen {
            let mut known = bags::co_visible(a, &set.fragments);
            super::augment::shuffle(&mut known, rng);
            for slot in 0..m {
                // Padding repeats the anchor, masked out of the loss.
                negatives.push(known.get(slot).copied().unwrap_or(a));
                mask.push(if slot < known.len() { 1.0f32 } else { 0.0 });
            }
            let mut bag = if config.clean_bags {
                bags::bag_without_co_visible(rng, a, &set.fragments, t, config.sampling)
            } else {
                bags::bag(rng, a, &set.fragments, t, config.sampling)
            };
            if let Some(p) = bags::purity(a, &bag, &set.fragments) {
                purity += p;
                purity_n += 1.0;
            }
            // A video with fewer than K other fragments: its members repeat.
            let drawn = bag.len();
            while bag.len() < BAG_SIZE {
                bag.push(bag[bag.len() % drawn]);
            }
            members.extend(bag);
        }
        let all: Vec<usize> = chosen
            .iter()
            .copied()
            .chain(members)
            .chain(negatives)
            .collect();
        let flip: Vec<bool> = all.iter().map(|_| rng.chance(0.5)).collect();
        let (tracklet, tokens) = model.encode(set, &all, &flip, device); // n(1+K+m) rows
        let [rows, n_frames, dim] = tokens.dims();
        let z = l2_normalize(model.head().project(tracklet)); // [rows, p]
        let p = z.dims()[1];
        let zt = l2_normalize(model.head().project(tokens.reshape([rows * n_frames, dim])))
            .reshape([rows, n_frames, p]);
        let a = anchors;
        let bagged = a * (1 + BAG_SIZE);
        // Known negatives (m per anchor), at the tracklet and the frame level.
        let (known_tracklet, known_frame) = if m > 0 {
            let mask = Tensor::<2>::from_data(TensorData::new(mask, [a, m]), device);
            let rows_t = z.clone().slice([bagged..rows, 0..p]).reshape([a, m, 1, p]);
            let rows_f = zt
                .clone()
                .slice([bagged..rows, 0..n_frames, 0..p])
                .reshape([a, m, n_frames, p]);
            (
                Some(KnownNegatives {
                    rows: rows_t,
                    mask: mask.clone(),
                }),
                Some(KnownNegatives { rows: rows_f, mask }),
            )
        } else {
            (None, None)
        };
        let l_tracklet = noise_aware_with(
            z.clone().slice([0..a, 0..p]),
            z.slice([a..bagged, 0..p]).reshape([a, BAG_SIZE, p]),
            known_tracklet,
            config.tau,
        );
        let l_frame = noise_aware_frames_with(
            zt.clone().slice([0..a, 0..n_frames, 0..p]),
            zt.slice([a..bagged, 0..n_frames, 0..p])
                .reshape([a, BAG_SIZE, n_frames, p]),
            known_frame,
            config.tau,
        );
        let loss: Tensor<1> = match config.levels {
            Levels::Tracklet => l_tracklet.clone(),
            Levels::Frame => l_frame.clone(),
            Levels::Both => l_tracklet.clone() + l_frame.clone(),
        };
        StepLoss::new(loss)
            .term("tracklet level", l_tracklet)
            .term("frame level", l_frame)
            .with(Figure::Share {
                name: "bag purity",
                count: purity,
                of: purity_n,
            })
    }

    fn epoch_figures(&mut self, _model: &M, epoch: usize) -> Vec<(String, f64)> {
        let done = ((epoch + 1) * self.plan.steps_per_epoch) as f64;
        let c = done / self.plan.total_steps().max(1) as f64;
        vec![("temperature".into(), self.config.curriculum.temperature(c))]
    }
}

/// The epoch's anchor order: a shuffle of `usable`, or with `per_video` > 1, runs of
/// `per_video` fragments of one video (taking its tracklets in turn) in shuffled order.
fn anchor_order(
    usable: &[usize],
    set: &TrackletSet,
    per_video: usize,
    rng: &mut Rng,
) -> Vec<usize> {
    let mut order = usable.to_vec();
    super::augment::shuffle(&mut order, rng);
    if per_video <= 1 {
        return order;
    }
    let mut runs: Vec<Vec<usize>> = Vec::new();
    for v in 0..set.videos.len() {
        // This video's fragments, one tracklet after another in turn.
        let mut by_tracklet: Vec<Vec<usize>> = Vec::new();
        for &f in order.iter().filter(|&&f| set.fragments[f].video == v) {
            let t = set.fragment_tracklet[f];
            match by_tracklet
                .iter_mut()
                .find(|l| set.fragment_tracklet[l[0]] == t)
            {
                Some(l) => l.push(f),
                None => by_tracklet.push(vec![f]),
            }
        }
        let mut interleaved = Vec::new();
        let longest = by_tracklet.iter().map(Vec::len).max().unwrap_or(0);
        for i in 0..longest {
            interleaved.extend(by_tracklet.iter().filter_map(|l| l.get(i)));
        }
        runs.extend(interleaved.chunks(per_video).map(<[usize]>::to_vec));
    }
    super::augment::shuffle(&mut runs, rng);
    runs.concat()
}
