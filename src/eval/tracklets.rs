//! Tracklet re-identification on held-out videos (METHODS §3, "Evaluation"), one embedding per
//! tracklet: retrieval (each tracklet queries all others; mAP, HR@1, HR@5, the query
//! excluded), re-identification over every pair and over pairs within one video (AUROC, AUPR),
//! and the polyp count per video from grouping. Intervals resample videos (a cluster
//! bootstrap: tracklets of one video are not independent).

use crate::plumbing::{Progress, Rng};
use crate::tracklets::dataset::TrackletSet;
use crate::tracklets::grouping::{agglomerate, cosine};
use crate::tracklets::twin::{Pooling, twin_embeddings};
use serde::Serialize;

pub const BOOTSTRAP: usize = 1000;

#[derive(Debug, Clone, Serialize)]
pub struct RetrievalRow {
    pub method: String,
    pub map: f64,
    pub map_ci: [f64; 2],
    pub hr1: f64,
    pub hr1_ci: [f64; 2],
    pub hr5: f64,
    pub hr5_ci: [f64; 2],
    /// Tracklets with at least one other tracklet of their polyp.
    pub queries: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReidRow {
    pub method: String,
    /// "all" or "within_video".
    pub scope: String,
    pub auroc: f64,
    pub auroc_ci: [f64; 2],
    pub aupr: f64,
    pub aupr_ci: [f64; 2],
    pub pairs: usize,
    pub positives: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct CountRow {
    pub method: String,
    pub threshold: f32,
    pub exact_share: f64,
    pub within_one_share: f64,
    pub videos: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct TrackletEval {
    pub retrieval: Vec<RetrievalRow>,
    pub reid: Vec<ReidRow>,
    /// The first method's count (the shipped model's).
    pub count: CountRow,
    pub counts: Vec<CountRow>,
    /// Whether each method's grouping threshold was chosen on a validation library.
    pub thresholds_from_validation: bool,
    pub videos: usize,
    pub tracklets: usize,
    /// What the held-out set left out (short tracklets, boxes in no tracklet).
    pub left_out: String,
    pub seed: u64,
    pub bootstrap: usize,
    /// Size and histology probes, fitted on the validation library (empty without one).
    pub probes: Vec<super::probes::ProbeRow>,
}

/// A method: its label and one unit embedding per tracklet of the set.
pub struct Method {
    pub label: String,
    pub embeddings: Vec<Vec<f32>>,
}

pub use crate::tracklets::colour_histograms;

/// Per query: (video, AP, hit@1, hit@5).
fn retrieval(set: &TrackletSet, e: &[Vec<f32>]) -> Vec<(usize, f64, f64, f64)> {
    let n = set.tracklets.len();
    let mut out = Vec::new();
    for q in 0..n {
        let Some(id) = set.tracklets[q].identity else {
            continue;
        };
        let mut others: Vec<(f32, bool)> = (0..n)
            .filter(|&j| j != q && set.tracklets[j].identity.is_some())
            .map(|j| (cosine(&e[q], &e[j]), set.tracklets[j].identity == Some(id)))
            .collect();
        let relevant = others.iter().filter(|o| o.1).count();
        if relevant == 0 {
            continue;
        }
        // Highest first; ties: wrong ones first (pessimistic).
        others.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let ranked: Vec<bool> = others.iter().map(|o| o.1).collect();
        let ap = super::metrics::average_precision(&ranked, relevant);
        let hit = |k: usize| ranked.iter().take(k).any(|&r| r) as u8 as f64;
        out.push((set.tracklets[q].video, ap, hit(1), hit(5)));
    }
    out
}

/// Every unordered pair with known identities: (video of i, video of j, score, same polyp).
pub(crate) fn pairs(set: &TrackletSet, e: &[Vec<f32>]) -> Vec<(usize, usize, f64, bool)> {
    let t = &set.tracklets;
    let mut out = Vec::new();
    for i in 0..t.len() {
        for j in i + 1..t.len() {
            if let (Some(a), Some(b)) = (t[i].identity, t[j].identity) {
                out.push((t[i].video, t[j].video, cosine(&e[i], &e[j]) as f64, a == b));
            }
        }
    }
    out
}

/// Appended to a method's label in the re-identification rows scored with [`timeline_rule`].
pub const TIMELINE_RULE: &str = " + timeline rule (tracklets on screen together: two polyps)";

/// `pairs` with the pairs of tracklets on screen in the same frame scored -1 (the lowest
/// cosine): the timeline never links or groups them.
fn timeline_rule(
    set: &TrackletSet,
    pairs: &[(usize, usize, f64, bool)],
) -> Vec<(usize, usize, f64, bool)> {
    let t = &set.tracklets;
    let on_screen = |i: usize| set.fragments[t[i].fragments.start];
    let mut out = pairs.to_vec();
    let mut k = 0;
    for i in 0..t.len() {
        for j in i + 1..t.len() {
            if let (Some(_), Some(_)) = (t[i].identity, t[j].identity) {
                if on_screen(i).co_visible(&on_screen(j)) {
                    out[k].2 = -1.0;
                }
                k += 1;
            }
        }
    }
    out
}

/// Weighted AUROC: the weight of (positive, negative) pairs ranked right, ties half.
pub fn weighted_auroc(items: &[(f64, bool, f64)]) -> f64 {
    let mut sorted: Vec<&(f64, bool, f64)> = items.iter().filter(|x| x.2 > 0.0).collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut neg_below, mut total_pos, mut total_neg, mut right) = (0.0, 0.0, 0.0, 0.0);
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        let (mut pos_tie, mut neg_tie) = (0.0, 0.0);
        while j < sorted.len() && sorted[j].0 == sorted[i].0 {
            if sorted[j].1 {
                pos_tie += sorted[j].2;
            } else {
                neg_tie += sorted[j].2;
            }
            j += 1;
        }
        right += pos_tie * (neg_below + 0.5 * neg_tie);
        neg_below += neg_tie;
        total_pos += pos_tie;
        total_neg += neg_tie;
        i = j;
    }
    if total_pos == 0.0 || total_neg == 0.0 {
        return f64::NAN;
    }
    right / (total_pos * total_neg)
}

/// Weighted average precision (highest score first, ties pessimistic).
pub fn weighted_ap(items: &[(f64, bool, f64)]) -> f64 {
    let mut sorted: Vec<&(f64, bool, f64)> = items.iter().filter(|x| x.2 > 0.0).collect();
    sorted.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let total_pos: f64 = sorted.iter().filter(|x| x.1).map(|x| x.2).sum();
    if total_pos == 0.0 {
        return f64::NAN;
    }
    let (mut seen, mut seen_pos, mut sum) = (0.0, 0.0, 0.0);
    for x in sorted {
        seen += x.2;
        if x.1 {
            seen_pos += x.2;
            sum += x.2 * seen_pos / seen;
        }
    }
    sum / total_pos
}

pub(crate) use super::metrics::interval;

/// Video weights of each bootstrap resample (multiplicities), the first all ones.
fn resamples(videos: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = Rng::new(seed).fork(0x7ac1e7);
    (0..BOOTSTRAP)
        .map(|_| {
            let mut w = vec![0.0; videos];
            for _ in 0..videos {
                w[rng.below(videos)] += 1.0;
            }
            w
        })
        .collect()
}

/// The polyp count of each video (groups at `threshold`) against its true count.
fn count(set: &TrackletSet, e: &[Vec<f32>], label: &str, threshold: f32) -> CountRow {
    let (mut exact, mut within, mut videos) = (0, 0, 0);
    for v in 0..set.videos.len() {
        let members: Vec<usize> = (0..set.tracklets.len())
            .filter(|&t| set.tracklets[t].video == v)
            .collect();
        let mut truth: Vec<i64> = members
            .iter()
            .filter_map(|&t| set.tracklets[t].identity)
            .collect();
        if truth.len() != members.len() || members.is_empty() {
            continue;
        }
        truth.sort_unstable();
        truth.dedup();
        // As the timeline groups: two tracklets on screen in one frame are never one polyp.
        let on_screen = |i: usize| set.fragments[set.tracklets[members[i]].fragments.start];
        let groups = agglomerate(
            members.len(),
            |i, j| {
                if i != j && on_screen(i).co_visible(&on_screen(j)) {
                    -1.0
                } else {
                    cosine(&e[members[i]], &e[members[j]])
                }
            },
            threshold,
        );
        let diff = groups.len().abs_diff(truth.len());
        videos += 1;
        exact += (diff == 0) as usize;
        within += (diff <= 1) as usize;
    }
    let share = |k: usize| k as f64 / videos.max(1) as f64;
    CountRow {
        method: label.to_string(),
        threshold,
        exact_share: share(exact),
        within_one_share: share(within),
        videos,
    }
}

/// The grouping threshold, out of 0.05, 0.10 .. 0.95, whose polyp counts on `set` are most
/// often exact (then most often within one); where several tie, the median of them (the
/// middle of a plateau is the choice least likely to fall off it on other videos).
pub fn choose_threshold(set: &TrackletSet, embeddings: &[Vec<f32>]) -> f32 {
    let scored: Vec<(f32, (f64, f64))> = (1..20)
        .map(|k| {
            let t = k as f32 * 0.05;
            let c = count(set, embeddings, "", t);
            (t, (c.exact_share, c.within_one_share))
        })
        .collect();
    let best = scored
        .iter()
        .map(|s| s.1)
        .fold((-1.0, -1.0), |a, b| if b > a { b } else { a });
    let tied: Vec<f32> = scored.iter().filter(|s| s.1 == best).map(|s| s.0).collect();
    let n = tied.len();
    (tied[(n - 1) / 2] + tied[n / 2]) / 2.0
}

/// Scores every method on `set`; `thresholds[m]` groups tracklets for method m's polyp
/// count (the last one for methods past its end).
pub fn evaluate(
    set: &TrackletSet,
    methods: &[Method],
    seed: u64,
    thresholds: &[f32],
) -> TrackletEval {
    let threshold = thresholds.first().copied().unwrap_or(0.5);
    let weights = resamples(set.videos.len(), seed);
    let ones = vec![1.0; set.videos.len()];
    let mut out = TrackletEval {
        retrieval: Vec::new(),
        reid: Vec::new(),
        count: CountRow {
            method: String::new(),
            threshold,
            exact_share: f64::NAN,
            within_one_share: f64::NAN,
            videos: 0,
        },
        counts: Vec::new(),
        thresholds_from_validation: false,
        videos: set.videos.len(),
        tracklets: set.tracklets.len(),
        left_out: set.left_out(),
        seed,
        bootstrap: BOOTSTRAP,
        probes: Vec::new(),
    };
    for (mi, m) in methods.iter().enumerate() {
        let q = retrieval(set, &m.embeddings);
        let mean = |w: &[f64], k: usize| {
            let (mut s, mut n) = (0.0, 0.0);
            for r in &q {
                let v = [r.1, r.2, r.3][k];
                s += w[r.0] * v;
                n += w[r.0];
            }
            if n > 0.0 { s / n } else { f64::NAN }
        };
        let ci = |k: usize| interval(weights.iter().map(|w| mean(w, k)).collect());
        out.retrieval.push(RetrievalRow {
            method: m.label.clone(),
            map: mean(&ones, 0),
            map_ci: ci(0),
            hr1: mean(&ones, 1),
            hr1_ci: ci(1),
            hr5: mean(&ones, 2),
            hr5_ci: ci(2),
            queries: q.len(),
        });
        let p = pairs(set, &m.embeddings);
        // Also the scores the timeline acts on: two tracklets on screen in one frame are
        // never one polyp (known from the boxes, not from identities).
        let ruled = timeline_rule(set, &p);
        let scopes = [
            ("all", "", &p),
            ("within_video", "", &p),
            ("within_video", TIMELINE_RULE, &ruled),
        ];
        for (scope, suffix, p) in scopes {
            let chosen: Vec<&(usize, usize, f64, bool)> =
                p.iter().filter(|x| scope == "all" || x.0 == x.1).collect();
            let items = |w: &[f64]| -> Vec<(f64, bool, f64)> {
                chosen
                    .iter()
                    .map(|x| {
                        let weight = if x.0 == x.1 { w[x.0] } else { w[x.0] * w[x.1] };
                        (x.2, x.3, weight)
                    })
                    .collect()
            };
            let all = items(&ones);
            out.reid.push(ReidRow {
                method: format!("{}{suffix}", m.label),
                scope: scope.to_string(),
                auroc: weighted_auroc(&all),
                auroc_ci: interval(weights.iter().map(|w| weighted_auroc(&items(w))).collect()),
                aupr: weighted_ap(&all),
                aupr_ci: interval(weights.iter().map(|w| weighted_ap(&items(w))).collect()),
                pairs: chosen.len(),
                positives: chosen.iter().filter(|x| x.3).count(),
            });
        }
        let t = thresholds
            .get(mi)
            .or(thresholds.last())
            .copied()
            .unwrap_or(threshold);
        out.counts.push(count(set, &m.embeddings, &m.label, t));
    }
    if let Some(first) = out.counts.first() {
        out.count = first.clone();
    }
    out
}

/// A trained tracklet encoder to score.
pub struct Candidate<'a> {
    pub label: String,
    pub model: &'a crate::model::tracklet::TrackletModel,
}

/// What [`run`] compares: trained tracklet encoders, the untrained architecture (the
/// baseline), and optionally the frozen twin image encoder (then also its architecture at
/// random initialisation, its baseline). After the candidates comes what the Tracklets tab
/// uses: the twin encoder with its scene encoder when `twins` has one, else the heads, else
/// the twin encoder's mean; the JSON's `count` is the first method's.
pub struct Methods<'a> {
    pub candidates: &'a [Candidate<'a>],
    /// Tracklet heads over the twin encoder's frozen features (need `twins`): label, head.
    pub heads: &'a [(String, &'a crate::model::tracklet::TrackletEncoder)],
    pub untrained: &'a crate::model::tracklet::TrackletModelConfig,
    pub twins: Option<&'a crate::twins::TwinModels>,
}

/// Loads the held-out tracklets at `size` px, embeds them with every candidate, the same
/// architecture at random initialisation (seeded) and the colour histogram, and scores all.
/// With a `validation` library each method's grouping threshold is chosen there; else
/// `threshold` serves every method.
pub fn run(
    store: &crate::store::Store,
    validation: Option<&crate::store::Store>,
    methods: Methods<'_>,
    seed: u64,
    threshold: f32,
    device: &burn::tensor::Device,
) -> Result<TrackletEval, crate::tracklets::dataset::TrackletDataError> {
    let Methods {
        candidates,
        heads,
        untrained,
        twins,
    } = methods;
    // Heads read the twin encoder's features of every fragment frame.
    let attach = |store: &crate::store::Store,
                  set: &mut TrackletSet|
     -> Result<(), crate::tracklets::dataset::TrackletDataError> {
        if let (false, Some(twins)) = (heads.is_empty(), twins) {
            let (dim, features) =
                crate::tracklets::twin::fragment_features(store, set, twins, &Progress::new())?;
            set.attach_features(dim, features);
        }
        Ok(())
    };
    let progress = crate::plumbing::Progress::new();
    let size = untrained.backbone.image_size;
    device.seed(seed);
    let random = untrained.init(device);
    let random_twins = twins.map(|t| t.untrained(seed));
    // From the features the heads read when attached (the same frames, encoded once).
    let pooled = |store: &crate::store::Store,
                  set: &TrackletSet,
                  twins: &crate::twins::TwinModels,
                  pooling: Pooling| {
        match crate::tracklets::twin::twin_embeddings_from_features(set, twins, pooling) {
            Some(e) => Ok(e),
            None => twin_embeddings(store, set, twins, pooling, &progress),
        }
    };
    let methods_on = |store: &crate::store::Store,
                      set: &TrackletSet|
     -> Result<Vec<Method>, crate::tracklets::dataset::TrackletDataError> {
        let mut methods: Vec<Method> = candidates
            .iter()
            .map(|c| Method {
                label: c.label.clone(),
                embeddings: crate::tracklets::embed(c.model, set, 16, device),
            })
            .collect();
        // What the Tracklets tab compares by when the models allow it (README: the validation
        // videos' choice), so the JSON's `count` is its.
        if let Some(twins) = twins.filter(|t| t.scene.is_some()) {
            methods.push(Method {
                label: format!(
                    "twin image + scene encoder {}, frozen: scene over each fragment's frames",
                    twins.version()
                ),
                embeddings: pooled(store, set, twins, Pooling::Scene)?,
            });
        }
        if set.feature_dim().is_some() {
            methods.extend(heads.iter().map(|(label, head)| Method {
                label: label.clone(),
                embeddings: crate::tracklets::embed_head(head, set, 16, device),
            }));
        }
        if let Some(twins) = twins {
            methods.push(Method {
                label: format!(
                    "twin image encoder {}, frozen (mean over frames)",
                    twins.version()
                ),
                embeddings: pooled(store, set, twins, Pooling::Mean)?,
            });
        }
        methods.push(Method {
            label: "untrained tracklet encoder, frame CNN (baseline)".into(),
            embeddings: crate::tracklets::embed(&random, set, 16, device),
        });
        if let Some(random_twins) = &random_twins {
            methods.push(Method {
                label: "twin image encoder architecture, untrained (baseline)".into(),
                embeddings: twin_embeddings(store, set, random_twins, Pooling::Mean, &progress)?,
            });
        }
        methods.push(Method {
            label: "colour histogram 8x8x8 of the crops (baseline)".into(),
            embeddings: colour_histograms(set),
        });
        Ok(methods)
    };
    // With a validation library: each method's grouping threshold, and its probes' training
    // data, come from there.
    let (thresholds, train) = match validation {
        Some(v) => {
            let mut vset = TrackletSet::load(v, &[], size, &progress)?;
            attach(v, &mut vset)?;
            let on_v = methods_on(v, &vset)?;
            let thresholds = on_v
                .iter()
                .map(|m| choose_threshold(&vset, &m.embeddings))
                .collect();
            let labels = super::probes::labels(v, &vset)?;
            (thresholds, Some((on_v, labels)))
        }
        None => (vec![threshold], None),
    };
    let mut set = TrackletSet::load(store, &[], size, &progress)?;
    attach(store, &mut set)?;
    let methods = methods_on(store, &set)?;
    let mut e = evaluate(&set, &methods, seed, &thresholds);
    if let Some((on_v, v_labels)) = &train {
        let labels = super::probes::labels(store, &set)?;
        let weights = resamples(set.videos.len(), seed);
        e.probes = methods
            .iter()
            .zip(on_v)
            .map(|(m, v)| {
                super::probes::probe(
                    &m.label,
                    (&v.embeddings, v_labels),
                    (&m.embeddings, &labels, &set),
                    &weights,
                )
            })
            .collect();
    }
    e.thresholds_from_validation = validation.is_some();
    Ok(e)
}
