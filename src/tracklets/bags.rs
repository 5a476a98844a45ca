//! The temporal bag sampler (METHODS §3). For an anchor fragment, the other fragments of its
//! video are ordered by temporal distance (rank 1 = nearest); K distinct ranks are drawn
//! without replacement with `P(r) ∝ exp(-r / T)`, where the temperature follows a cosine
//! curriculum from [`T_MIN`] (bags of near-duplicates) to [`T_MAX`] (diverse bags that may hold
//! another polyp). Uniform rank sampling and a fixed temperature are the paper's ablations.

use crate::plumbing::Rng;

/// Bag members per anchor.
pub const BAG_SIZE: usize = 4;
/// Temperature at the start of training.
pub const T_MIN: f64 = 0.3;
/// Temperature at the end of training.
pub const T_MAX: f64 = 12.0;

/// How ranks are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RankSampling {
    /// `P(r) ∝ exp(-r / T)` (the method).
    Exponential,
    /// Every rank alike (the paper's ablation).
    Uniform,
}

/// How the temperature moves over training.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Curriculum {
    /// `T(c) = T_min + (1 - cos(pi c)) / 2 (T_max - T_min)` (the method).
    Cosine,
    /// One temperature throughout (the paper's ablation).
    Fixed(f64),
}

impl Curriculum {
    /// The temperature at training progress `c` in [0, 1].
    pub fn temperature(self, c: f64) -> f64 {
        match self {
            Curriculum::Cosine => {
                let c = c.clamp(0.0, 1.0);
                T_MIN + (1.0 - (std::f64::consts::PI * c).cos()) / 2.0 * (T_MAX - T_MIN)
            }
            Curriculum::Fixed(t) => t,
        }
    }
}

/// `P(r)` for ranks 1..=n at temperature `t` (normalised); uniform for [`RankSampling::Uniform`].
pub fn rank_probabilities(n: usize, t: f64, sampling: RankSampling) -> Vec<f64> {
    let weights: Vec<f64> = (1..=n)
        .map(|r| match sampling {
            // Relative to rank 1, so that a small T cannot underflow every weight.
            RankSampling::Exponential => (-((r - 1) as f64) / t).exp(),
            RankSampling::Uniform => 1.0,
        })
        .collect();
    let total: f64 = weights.iter().sum();
    weights.into_iter().map(|w| w / total).collect()
}

/// `k` distinct ranks (1-based) out of 1..=n, drawn one after another without replacement from
/// [`rank_probabilities`] (the same law as Gumbel top-k); all of them when `n <= k`.
pub fn draw_ranks(rng: &mut Rng, n: usize, k: usize, t: f64, sampling: RankSampling) -> Vec<usize> {
    let mut left = rank_probabilities(n, t, sampling);
    let mut out = Vec::with_capacity(k.min(n));
    while out.len() < k.min(n) {
        let total: f64 = left.iter().sum();
        let mut x = rng.f32() as f64 * total;
        let mut pick = None;
        for (i, p) in left.iter().enumerate() {
            if *p > 0.0 {
                pick = Some(i);
                if x < *p {
                    break;
                }
                x -= p;
            }
        }
        let i = pick.expect("some rank is left");
        left[i] = 0.0;
        out.push(i + 1);
    }
    out
}

/// What the sampler knows of a fragment: its video, where it sits in time (frame number of its
/// centre), the frames its tracklet is on screen (first and last), and, for the purity log
/// only, the polyp it shows when ground truth exists.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FragmentTime {
    pub video: usize,
    pub centre: f32,
    /// First and last frame of the fragment's tracklet.
    pub on_screen: (i64, i64),
    pub identity: Option<usize>,
}

impl FragmentTime {
    /// Whether `self` and `other` come from two tracklets of one video that are on screen in
    /// the same frame: two different polyps, whatever they look like (a polyp has one box per
    /// frame), known from the boxes alone, without identities.
    pub fn co_visible(&self, other: &FragmentTime) -> bool {
        self.video == other.video
            && self.on_screen != other.on_screen
            && self.on_screen.0 <= other.on_screen.1
            && other.on_screen.0 <= self.on_screen.1
    }
}

/// The fragments of tracklets on screen together with the anchor's (see
/// [`FragmentTime::co_visible`]), nearest in time first.
pub fn co_visible(anchor: usize, fragments: &[FragmentTime]) -> Vec<usize> {
    ranked_neighbours(anchor, fragments)
        .into_iter()
        .filter(|&i| fragments[anchor].co_visible(&fragments[i]))
        .collect()
}

/// The other fragments of the anchor's video, nearest in time first (ties by index).
pub fn ranked_neighbours(anchor: usize, fragments: &[FragmentTime]) -> Vec<usize> {
    let a = fragments[anchor];
    let mut others: Vec<usize> = (0..fragments.len())
        .filter(|&i| i != anchor && fragments[i].video == a.video)
        .collect();
    others.sort_by(|&i, &j| {
        let di = (fragments[i].centre - a.centre).abs();
        let dj = (fragments[j].centre - a.centre).abs();
        di.total_cmp(&dj).then(i.cmp(&j))
    });
    others
}

/// The bag of `anchor`: [`BAG_SIZE`] fragments of its video drawn by rank at temperature `t`
/// (fewer when the video has fewer others); empty when the anchor is alone in its video.
pub fn bag(
    rng: &mut Rng,
    anchor: usize,
    fragments: &[FragmentTime],
    t: f64,
    sampling: RankSampling,
) -> Vec<usize> {
    bag_of(rng, ranked_neighbours(anchor, fragments), t, sampling)
}

/// [`bag`] drawn from the ranks left once fragments [`co_visible`] with the anchor are taken
/// out (they show another polyp for sure, so a bag never needs them).
pub fn bag_without_co_visible(
    rng: &mut Rng,
    anchor: usize,
    fragments: &[FragmentTime],
    t: f64,
    sampling: RankSampling,
) -> Vec<usize> {
    let ranked = ranked_neighbours(anchor, fragments)
        .into_iter()
        .filter(|&i| !fragments[anchor].co_visible(&fragments[i]))
        .collect();
    bag_of(rng, ranked, t, sampling)
}

fn bag_of(rng: &mut Rng, ranked: Vec<usize>, t: f64, sampling: RankSampling) -> Vec<usize> {
    draw_ranks(rng, ranked.len(), BAG_SIZE, t, sampling)
        .into_iter()
        .map(|r| ranked[r - 1])
        .collect()
}

/// The share of bag members that show the anchor's polyp; `None` without ground truth.
pub fn purity(anchor: usize, bag: &[usize], fragments: &[FragmentTime]) -> Option<f64> {
    let id = fragments[anchor].identity?;
    let known: Vec<usize> = bag.iter().filter_map(|&b| fragments[b].identity).collect();
    if known.is_empty() || known.len() != bag.len() {
        return None;
    }
    Some(known.iter().filter(|&&b| b == id).count() as f64 / known.len() as f64)
}
