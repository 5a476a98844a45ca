//! `eval twins` (METHODS §4, ISC2021-style): on held-out polyps with at least four views,
//! views 1-2 are queries and views 3-4 references. Each query (1 or 2 views) predicts the
//! top-1 reference polyp (1 or 2 views); uAP, accuracy@1 and recall at 90 % precision are
//! pooled over queries. Learned embeddings (scene encoder, mean of views, and their sign codes)
//! sit beside the raw-pixel and colour-histogram baselines. Pathology: k-NN vote over polyps
//! (all four views), 5-fold cross-validation: accuracy, macro-F1, macro one-vs-rest AUC.

use super::baselines::features;
use super::metrics;
use crate::model::hash::hamming;
use crate::plumbing::Rng;
use crate::retrieval::majority;
use crate::store::Store;
use crate::twins::{Coder, TwinError, TwinModels, combine};

/// One re-identification row: point figures and bootstrap 95 % intervals (queries resampled).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ReidRow {
    pub method: String,
    /// "1v1", "1v2", "2v1", "2v2": query views v reference views.
    pub views: String,
    pub uap: f64,
    pub uap_ci: [f64; 2],
    #[serde(rename = "acc1")]
    pub accuracy_at_1: f64,
    #[serde(rename = "acc1_ci")]
    pub accuracy_at_1_ci: [f64; 2],
    #[serde(rename = "r_at_p90")]
    pub recall_at_p90: f64,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PathologyRow {
    pub method: String,
    /// Macro one-vs-rest AUC of the k-NN vote shares.
    pub auc: f64,
    /// Binary AUC for Vienna >= 3 (neoplastic), scored by the neoplastic vote share.
    pub neoplastic_auc: f64,
    pub accuracy: f64,
    pub macro_f1: f64,
}

/// Method `a` minus method `b` on the same queries (paired bootstrap).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PairedRow {
    pub a: String,
    pub b: String,
    pub views: String,
    pub acc1_diff: f64,
    pub acc1_diff_ci: [f64; 2],
    pub uap_diff: f64,
    pub uap_diff_ci: [f64; 2],
    /// Share of bootstrap resamples in which `a` beats `b` on accuracy@1.
    pub acc1_a_wins: f64,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TwinEval {
    pub polyps: usize,
    pub seed: u64,
    /// The neighbours of the pathology vote (`--k`).
    pub k: usize,
    /// Said when `k` is more than the polyps a fold votes among (round 15 N8: such a k gave
    /// the figures of all of them without a word).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub k_note: Option<String>,
    pub bootstrap: usize,
    pub reid: Vec<ReidRow>,
    pub pathology: Vec<PathologyRow>,
    /// Why there are no pathology rows (the held-out polyps lack the labels a vote needs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pathology_not_scored: Option<String>,
    pub paired: Vec<PairedRow>,
    pub majority_class_accuracy: f64,
    /// What the figures were computed from (reports draw curves and matrices from it).
    #[serde(skip)]
    pub details: TwinDetails,
}

/// Each query's top-1 prediction: (similarity, whether it is the right polyp).
pub type TopOne = Vec<(f64, bool)>;

/// Per-query and per-polyp outcomes behind a [`TwinEval`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TwinDetails {
    /// (method, views, each query's top-1 (score, right polyp)).
    pub predictions: Vec<(String, String, TopOne)>,
    /// The histology names; classes below index them.
    pub class_names: Vec<String>,
    /// Each polyp's true class.
    pub classes: Vec<usize>,
    /// Whether each polyp is neoplastic (Vienna >= 3).
    pub neoplastic: Vec<bool>,
    /// (method, each polyp's k-NN vote winner, its neoplastic vote share).
    pub votes: Vec<(String, Vec<usize>, Vec<f64>)>,
}

/// A set of models to evaluate and the name its rows carry ("" for the shipped models).
pub struct Candidate<'a> {
    pub label: String,
    pub models: &'a TwinModels,
}

/// Per polyp: its class, whether it is neoplastic, and its first four views as each feature
/// (one learned set per candidate).
struct Polyp {
    class: usize,
    neoplastic: bool,
    learned: Vec<Vec<Vec<f32>>>,
    raw: Vec<Vec<f32>>,
    hist: Vec<Vec<f32>>,
    /// The colour histogram of the crop the first candidate encodes (not the whole frame).
    crop_hist: Vec<Vec<f32>>,
}

/// Which feature of a polyp's views a row uses.
#[derive(Clone, Copy)]
enum Feature {
    /// The embeddings of candidate `i`.
    Learned(usize),
    Raw,
    Hist,
    CropHist,
}

impl Polyp {
    fn views(&self, which: Feature) -> &[Vec<f32>] {
        match which {
            Feature::Learned(i) => &self.learned[i],
            Feature::Raw => &self.raw,
            Feature::Hist => &self.hist,
            Feature::CropHist => &self.crop_hist,
        }
    }
}

const SETTINGS: [(usize, usize); 4] = [(1, 1), (1, 2), (2, 1), (2, 2)];

/// Bootstrap resamples for every interval.
pub const BOOTSTRAP: usize = 1000;

/// Evaluates `candidates` (the first is the shipped set: scene and hash rows, pathology) on
/// every held-out polyp with four views; `seed` drives the bootstrap.
pub fn run(
    store: &Store,
    candidates: &[Candidate<'_>],
    k: usize,
    seed: u64,
) -> Result<TwinEval, TwinError> {
    let mut names: Vec<String> = Vec::new();
    let mut polyps = Vec::new();
    for p in store.polyps()? {
        let views = store.polyp_views(p.id)?;
        if views.len() < 4 {
            continue;
        }
        let mut images = Vec::new();
        for m in views.iter().take(4) {
            images.push(crate::twins::load_view(store, m)?);
        }
        let h = p.histology.clone().unwrap_or_else(|| "unknown".into());
        let class = match names.iter().position(|n| *n == h) {
            Some(c) => c,
            None => {
                names.push(h);
                names.len() - 1
            }
        };
        let (raw, hist) = images.iter().map(|(image, _)| features(image)).unzip();
        let crop = candidates
            .first()
            .map(|c| c.models.input())
            .unwrap_or_else(|| crate::model::preprocess::TwinInput::new(224));
        let crop_hist = images
            .iter()
            .map(|(image, focus)| {
                features(&image::DynamicImage::ImageRgb8(crop.apply(image, *focus))).1
            })
            .collect();
        polyps.push(Polyp {
            class,
            neoplastic: p.vienna_class.is_some_and(|v| v >= 3),
            learned: candidates
                .iter()
                .map(|c| c.models.encode_views(&images))
                .collect(),
            raw,
            hist,
            crop_hist,
        });
    }
    let Some(first) = candidates.first() else {
        return Err(TwinError::NoModel("no models to evaluate".into()));
    };
    let device = &first.models.device;
    let scene = first.models.scene.as_ref().map(|(s, _)| s);
    let mean = |views: &[Vec<f32>]| combine(None, views, device);
    let by_scene = |views: &[Vec<f32>]| combine(scene, views, device);
    let named = |label: &str, what: &str| {
        if label.is_empty() {
            what.to_string()
        } else {
            format!("{label}: {what}")
        }
    };

    let mut rng = Rng::new(seed).fork(0x626f_6f74);
    let resamples: Vec<Vec<usize>> = (0..BOOTSTRAP)
        .map(|_| (0..polyps.len()).map(|_| rng.below(polyps.len())).collect())
        .collect();
    let mut reid = Vec::new();
    let mut paired = Vec::new();
    let mut details = TwinDetails::default();
    for (q, r) in SETTINGS {
        let views = format!("{q}v{r}");
        let mut outcomes: Vec<(String, Vec<(f64, bool)>)> = Vec::new();
        let mut add = |method: String,
                       agg: &dyn Fn(&[Vec<f32>]) -> Vec<f32>,
                       which: Feature,
                       hash: Scoring| {
            let queries: Vec<Vec<f32>> =
                polyps.iter().map(|p| agg(&p.views(which)[0..q])).collect();
            let refs: Vec<Vec<f32>> = polyps
                .iter()
                .map(|p| agg(&p.views(which)[2..2 + r]))
                .collect();
            let predictions = top1_predictions(&queries, &refs, hash);
            let (uap, accuracy_at_1, recall_at_p90) = figures(&predictions);
            let (uap_ci, accuracy_at_1_ci) = intervals(&predictions, &resamples);
            reid.push(ReidRow {
                method: method.clone(),
                views: views.clone(),
                uap,
                uap_ci,
                accuracy_at_1,
                accuracy_at_1_ci,
                recall_at_p90,
            });
            outcomes.push((method, predictions));
        };
        for (ci, c) in candidates.iter().enumerate() {
            let learned = Feature::Learned(ci);
            if ci == 0 && scene.is_some() {
                add(
                    named(&c.label, "scene encoder, float"),
                    &by_scene,
                    learned,
                    Scoring::Cosine,
                );
                add(
                    named(&c.label, "scene encoder, hash"),
                    &by_scene,
                    learned,
                    Scoring::Hamming(&c.models.coder),
                );
            } else if let Some((own, _)) = c.models.scene.as_ref().filter(|_| ci > 0) {
                // A compared model set with its own scene encoder: its float row.
                let by_own = |views: &[Vec<f32>]| combine(Some(own), views, device);
                add(
                    named(&c.label, "scene encoder, float"),
                    &by_own,
                    learned,
                    Scoring::Cosine,
                );
            }
            add(
                named(&c.label, "mean of views, float"),
                &mean,
                learned,
                Scoring::Cosine,
            );
            if ci == 0 {
                let coder = &c.models.coder;
                add(
                    named(&c.label, "mean of views, hash"),
                    &mean,
                    learned,
                    Scoring::Hamming(coder),
                );
                add(
                    named(&c.label, "mean of views, hash library, float query"),
                    &mean,
                    learned,
                    Scoring::Asymmetric(coder),
                );
                if *coder != Coder::default() {
                    // What the centre buys: the same embeddings' plain signs beside it.
                    add(
                        named(
                            &c.label,
                            "mean of views, hash without its code centre or rotation",
                        ),
                        &mean,
                        learned,
                        Scoring::Hamming(&Coder::default()),
                    );
                }
            }
        }
        add(
            "raw pixels 16x16 (baseline)".into(),
            &mean,
            Feature::Raw,
            Scoring::Cosine,
        );
        add(
            "colour histogram 8x8x8 (baseline)".into(),
            &mean,
            Feature::Hist,
            Scoring::Cosine,
        );
        add(
            "colour histogram 8x8x8 of the crop (baseline)".into(),
            &mean,
            Feature::CropHist,
            Scoring::Cosine,
        );
        // The claims that need a paired test: scene vs mean, model vs colour histogram.
        let find = |m: &str| outcomes.iter().find(|(n, _)| n == m).map(|(_, p)| p);
        let mean_name = named(&first.label, "mean of views, float");
        let mut pairs = vec![(
            mean_name.clone(),
            "colour histogram 8x8x8 (baseline)".to_string(),
        )];
        if scene.is_some() {
            pairs.push((named(&first.label, "scene encoder, float"), mean_name));
        }
        for (a, b) in pairs {
            if let (Some(pa), Some(pb)) = (find(&a), find(&b)) {
                paired.push(paired_row(&a, &b, &views, pa, pb, &resamples));
            }
        }
        details.predictions.extend(
            outcomes
                .into_iter()
                .map(|(method, p)| (method, views.clone(), p)),
        );
    }

    let classes: Vec<usize> = polyps.iter().map(|p| p.class).collect();
    let neoplastic: Vec<bool> = polyps.iter().map(|p| p.neoplastic).collect();
    // A class is neoplastic when most of its polyps are (histology fixes the Vienna class).
    let neoplastic_class: Vec<bool> = (0..names.len())
        .map(|c| {
            let of: Vec<bool> = polyps
                .iter()
                .filter(|p| p.class == c)
                .map(|p| p.neoplastic)
                .collect();
            of.iter().filter(|n| **n).count() * 2 > of.len()
        })
        .collect();
    let mut pathology = Vec::new();
    let mut votes = Vec::new();
    let mut add = |method: String, vectors: Vec<Vec<f32>>| {
        let (accuracy, macro_f1, auc, neoplastic_auc, predicted, share) = knn_vote_cv(
            &vectors,
            &classes,
            names.len(),
            k,
            &neoplastic,
            &neoplastic_class,
        );
        votes.push((method.clone(), predicted, share));
        pathology.push(PathologyRow {
            method,
            auc,
            neoplastic_auc,
            accuracy,
            macro_f1,
        });
    };
    for (ci, c) in candidates.iter().enumerate() {
        if ci == 0 && scene.is_some() {
            add(
                named(&c.label, "scene encoder"),
                polyps.iter().map(|p| by_scene(&p.learned[0])).collect(),
            );
        }
        add(
            named(&c.label, "mean of views"),
            polyps.iter().map(|p| mean(&p.learned[ci])).collect(),
        );
    }
    add(
        "colour histogram 8x8x8 (baseline)".into(),
        polyps.iter().map(|p| mean(&p.hist)).collect(),
    );
    let mut counts = vec![0usize; names.len()];
    classes.iter().for_each(|&c| counts[c] += 1);
    // A vote among one class is always right: figures that mean nothing are not reported.
    let known = names.iter().filter(|n| n.as_str() != "unknown").count();
    let pathology_not_scored = (known < 2).then(|| {
        format!(
            "pathology not scored: the held-out polyps carry {known} known histology class{} (a vote needs at least 2)",
            if known == 1 { "" } else { "es" }
        )
    });
    if pathology_not_scored.is_some() {
        pathology.clear();
        votes.clear();
    }
    details.votes = votes;
    details.class_names = names;
    details.classes = classes.clone();
    details.neoplastic = neoplastic;
    // 5 folds of n/5 polyps (some one more): each fold votes among the others.
    let (fewest, most) = (
        polyps.len() - polyps.len().div_ceil(5),
        polyps.len() - polyps.len() / 5,
    );
    let among = if fewest == most {
        format!("the {most} polyps")
    } else {
        format!("the {fewest} to {most} polyps")
    };
    Ok(TwinEval {
        polyps: polyps.len(),
        seed,
        k,
        k_note: (k > most).then(|| {
            format!(
                "--k {k} is more than {among} each fold votes among: all of them vote, as \
                 with --k {most}"
            )
        }),
        bootstrap: BOOTSTRAP,
        reid,
        pathology,
        pathology_not_scored,
        paired,
        majority_class_accuracy: *counts.iter().max().unwrap_or(&0) as f64
            / classes.len().max(1) as f64,
        details,
    })
}

/// uAP, accuracy@1 and recall at 90 % precision of top-1 predictions (one per query).
fn figures(predictions: &[(f64, bool)]) -> (f64, f64, f64) {
    let n = predictions.len();
    let correct = predictions.iter().filter(|p| p.1).count();
    (
        metrics::micro_ap(predictions, n),
        correct as f64 / n.max(1) as f64,
        metrics::recall_at_precision(predictions, n, 0.9),
    )
}

/// Percentile 95 % intervals of uAP and accuracy@1 over query resamples.
fn intervals(predictions: &[(f64, bool)], resamples: &[Vec<usize>]) -> ([f64; 2], [f64; 2]) {
    let (mut uaps, mut accs) = (Vec::new(), Vec::new());
    for idx in resamples {
        let sample: Vec<(f64, bool)> = idx.iter().map(|&i| predictions[i]).collect();
        let (u, a, _) = figures(&sample);
        uaps.push(u);
        accs.push(a);
    }
    (percentiles(uaps), percentiles(accs))
}

fn paired_row(
    a: &str,
    b: &str,
    views: &str,
    pa: &[(f64, bool)],
    pb: &[(f64, bool)],
    resamples: &[Vec<usize>],
) -> PairedRow {
    let (ua, aa, _) = figures(pa);
    let (ub, ab, _) = figures(pb);
    let (mut d_acc, mut d_uap, mut wins) = (Vec::new(), Vec::new(), 0usize);
    for idx in resamples {
        let sa: Vec<(f64, bool)> = idx.iter().map(|&i| pa[i]).collect();
        let sb: Vec<(f64, bool)> = idx.iter().map(|&i| pb[i]).collect();
        let (u1, a1, _) = figures(&sa);
        let (u2, a2, _) = figures(&sb);
        d_acc.push(a1 - a2);
        d_uap.push(u1 - u2);
        wins += (a1 > a2) as usize;
    }
    PairedRow {
        a: a.into(),
        b: b.into(),
        views: views.into(),
        acc1_diff: aa - ab,
        acc1_diff_ci: percentiles(d_acc),
        uap_diff: ua - ub,
        uap_diff_ci: percentiles(d_uap),
        acc1_a_wins: wins as f64 / resamples.len().max(1) as f64,
    }
}

/// The 2.5th and 97.5th percentiles.
fn percentiles(mut values: Vec<f64>) -> [f64; 2] {
    if values.is_empty() {
        return [f64::NAN; 2];
    }
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    [at(0.025), at(0.975)]
}

/// How a query meets a reference.
#[derive(Clone, Copy)]
enum Scoring<'a> {
    /// Float embeddings, cosine.
    Cosine,
    /// Both as codes, minus their Hamming distance.
    Hamming(&'a Coder),
    /// The float query against the reference's code ([`Coder::asymmetric`]).
    Asymmetric(&'a Coder),
}

/// Top-1 reference per query under `scoring`; query i's true reference is reference i.
/// -> (score, correct) per query.
fn top1_predictions(queries: &[Vec<f32>], refs: &[Vec<f32>], scoring: Scoring) -> Vec<(f64, bool)> {
    let coder = match scoring {
        Scoring::Hamming(c) | Scoring::Asymmetric(c) => c.clone(),
        Scoring::Cosine => Coder::default(),
    };
    let codes: Vec<Vec<u64>> = refs.iter().map(|r| coder.code(r)).collect();
    let mut predictions = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        let qc = coder.code(q);
        let prepared = matches!(scoring, Scoring::Asymmetric(_)).then(|| coder.query(q));
        let (best, score) = (0..refs.len())
            .map(|j| {
                let s = match scoring {
                    Scoring::Hamming(_) => -(hamming(&qc, &codes[j]) as f64),
                    Scoring::Asymmetric(_) => {
                        prepared.as_ref().expect("made above").score(&codes[j]) as f64
                    }
                    Scoring::Cosine => crate::retrieval::exact::dot(q, &refs[j]) as f64,
                };
                (j, s)
            })
            // Pessimistic on ties: a wrong reference with the same score wins.
            .fold((usize::MAX, f64::NEG_INFINITY), |acc, (j, s)| {
                if s > acc.1 || (s == acc.1 && acc.0 == i) {
                    (j, s)
                } else {
                    acc
                }
            });
        predictions.push((score, best == i));
    }
    predictions
}

/// k-NN majority vote, 5 folds by polyp index: accuracy, macro-F1, the macro average of
/// one-vs-rest AUCs with the vote shares as scores, and the neoplastic (Vienna >= 3) AUC with
/// the neoplastic classes' summed share as score; then each polyp's vote winner and
/// neoplastic share.
fn knn_vote_cv(
    vectors: &[Vec<f32>],
    classes: &[usize],
    n_classes: usize,
    k: usize,
    neoplastic: &[bool],
    neoplastic_class: &[bool],
) -> (f64, f64, f64, f64, Vec<usize>, Vec<f64>) {
    let n = vectors.len();
    let mut predicted = vec![0usize; n];
    let mut shares = vec![vec![0.0f64; n_classes]; n];
    let label = |c: usize| c.to_string();
    for fold in 0..5 {
        for q in (0..n).filter(|i| i % 5 == fold) {
            let mut nn: Vec<(f32, usize)> = (0..n)
                .filter(|i| i % 5 != fold)
                .map(|i| (crate::retrieval::exact::dot(&vectors[q], &vectors[i]), i))
                .collect();
            nn.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let labels: Vec<String> = nn.iter().take(k).map(|(_, i)| label(classes[*i])).collect();
            let vote = majority(labels.iter().map(|s| s.as_str()));
            predicted[q] = vote.winner().and_then(|w| w.parse().ok()).unwrap_or(0);
            for (c, s) in shares[q].iter_mut().enumerate() {
                *s = vote.share(&label(c));
            }
        }
    }
    let mut aucs = Vec::new();
    for c in 0..n_classes {
        let scores: Vec<f64> = shares.iter().map(|s| s[c]).collect();
        let positive: Vec<bool> = classes.iter().map(|&t| t == c).collect();
        let auc = metrics::auroc(&scores, &positive);
        if auc.is_finite() {
            aucs.push(auc);
        }
    }
    let neoplastic_share: Vec<f64> = shares
        .iter()
        .map(|s| {
            s.iter()
                .zip(neoplastic_class)
                .filter(|(_, n)| **n)
                .map(|(v, _)| v)
                .sum()
        })
        .collect();
    (
        metrics::accuracy(classes, &predicted),
        metrics::macro_f1(classes, &predicted, n_classes),
        aucs.iter().sum::<f64>() / aucs.len().max(1) as f64,
        metrics::auroc(&neoplastic_share, neoplastic),
        predicted,
        neoplastic_share,
    )
}

/// Writes the figures into the image encoder's model card (`<models>/twin-image.json`, its
/// `evaluation`), with the command and the data that produced them. Returns the card's path.
pub fn record(
    models: &std::path::Path,
    e: &TwinEval,
    command: &str,
    data: &str,
) -> Result<std::path::PathBuf, crate::model::weights::WeightsError> {
    use crate::model::weights::{Evaluation, update_card};
    let mut metrics = Vec::new();
    for r in &e.reid {
        let name = format!("{} {}", r.views, r.method);
        metrics.push((format!("{name}: uAP"), r.uap));
        metrics.push((format!("{name}: uAP 95% low"), r.uap_ci[0]));
        metrics.push((format!("{name}: uAP 95% high"), r.uap_ci[1]));
        metrics.push((format!("{name}: accuracy@1"), r.accuracy_at_1));
        metrics.push((format!("{name}: accuracy@1 95% low"), r.accuracy_at_1_ci[0]));
        metrics.push((
            format!("{name}: accuracy@1 95% high"),
            r.accuracy_at_1_ci[1],
        ));
        metrics.push((format!("{name}: recall@P90"), r.recall_at_p90));
    }
    for r in &e.pathology {
        metrics.push((format!("pathology {}: accuracy", r.method), r.accuracy));
        metrics.push((format!("pathology {}: macro-F1", r.method), r.macro_f1));
        metrics.push((format!("pathology {}: AUC", r.method), r.auc));
        metrics.push((
            format!("pathology {}: neoplastic AUC", r.method),
            r.neoplastic_auc,
        ));
    }
    let card = models.join(format!("{}.json", crate::twins::IMAGE_MODEL));
    update_card(&card, |c| {
        c.evaluation = Some(Evaluation {
            command: command.to_string(),
            data: data.to_string(),
            metrics,
        })
    })?;
    Ok(card)
}
