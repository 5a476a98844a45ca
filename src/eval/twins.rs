//! `eval twins` (METHODS §4, ISC2021-style): on held-out polyps with at least four views,
//! views 1-2 are queries and views 3-4 references. Each query (1 or 2 views) predicts the
//! top-1 reference polyp (1 or 2 views); uAP, accuracy@1 and recall at 90 % precision are
//! pooled over queries. Learned embeddings (scene encoder, mean of views, and their sign codes)
//! sit beside the raw-pixel and colour-histogram baselines. Pathology: k-NN vote over polyps
//! (all four views), 5-fold cross-validation: accuracy, macro-F1, macro one-vs-rest AUC.

use super::baselines::features;
use super::metrics;
use crate::model::hash::hamming;
use crate::retrieval::majority;
use crate::store::Store;
use crate::twins::{TwinError, TwinModels, code_of, combine};

#[derive(Debug, Clone, PartialEq)]
pub struct ReidRow {
    pub method: String,
    /// "1v1", "1v2", "2v1", "2v2": query views v reference views.
    pub views: String,
    pub uap: f64,
    pub accuracy_at_1: f64,
    pub recall_at_p90: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PathologyRow {
    pub method: String,
    pub accuracy: f64,
    pub macro_f1: f64,
    pub auc: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TwinEval {
    pub polyps: usize,
    pub reid: Vec<ReidRow>,
    pub pathology: Vec<PathologyRow>,
    pub majority_class_accuracy: f64,
}

/// Per polyp: its class and its first four views as each feature.
struct Polyp {
    class: usize,
    learned: Vec<Vec<f32>>,
    raw: Vec<Vec<f32>>,
    hist: Vec<Vec<f32>>,
}

const SETTINGS: [(usize, usize); 4] = [(1, 1), (1, 2), (2, 1), (2, 2)];

pub fn run(store: &Store, models: &TwinModels, k: usize) -> Result<TwinEval, TwinError> {
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
        polyps.push(Polyp {
            class,
            learned: models.encode_views(&images),
            raw,
            hist,
        });
    }
    let device = &models.device;
    let scene = models.scene.as_ref().map(|(s, _)| s);
    let mean = |views: &[Vec<f32>]| combine(None, views, device);
    let by_scene = |views: &[Vec<f32>]| combine(scene, views, device);

    type Pick = fn(&Polyp) -> &Vec<Vec<f32>>;
    let learned: Pick = |p| &p.learned;
    let raw: Pick = |p| &p.raw;
    let hist: Pick = |p| &p.hist;
    let mut reid = Vec::new();
    for (q, r) in SETTINGS {
        let views = format!("{q}v{r}");
        let mut add =
            |method: &str, agg: &dyn Fn(&[Vec<f32>]) -> Vec<f32>, pick: Pick, hash: bool| {
                let queries: Vec<Vec<f32>> = polyps.iter().map(|p| agg(&pick(p)[0..q])).collect();
                let refs: Vec<Vec<f32>> = polyps.iter().map(|p| agg(&pick(p)[2..2 + r])).collect();
                let (uap, accuracy_at_1, recall_at_p90) = top1_metrics(&queries, &refs, hash);
                reid.push(ReidRow {
                    method: method.to_string(),
                    views: views.clone(),
                    uap,
                    accuracy_at_1,
                    recall_at_p90,
                });
            };
        if scene.is_some() {
            add("scene encoder, float", &by_scene, learned, false);
            add("scene encoder, hash", &by_scene, learned, true);
        }
        add("mean of views, float", &mean, learned, false);
        add("mean of views, hash", &mean, learned, true);
        add("raw pixels (baseline)", &mean, raw, false);
        add("colour histogram (baseline)", &mean, hist, false);
    }

    let classes: Vec<usize> = polyps.iter().map(|p| p.class).collect();
    let mut pathology = Vec::new();
    let mut add = |method: &str, vectors: Vec<Vec<f32>>| {
        let (accuracy, macro_f1, auc) = knn_vote_cv(&vectors, &classes, names.len(), k);
        pathology.push(PathologyRow {
            method: method.to_string(),
            accuracy,
            macro_f1,
            auc,
        });
    };
    if scene.is_some() {
        add(
            "scene encoder",
            polyps.iter().map(|p| by_scene(&p.learned)).collect(),
        );
    }
    add(
        "mean of views",
        polyps.iter().map(|p| mean(&p.learned)).collect(),
    );
    add(
        "colour histogram (baseline)",
        polyps.iter().map(|p| mean(&p.hist)).collect(),
    );
    let mut counts = vec![0usize; names.len()];
    classes.iter().for_each(|&c| counts[c] += 1);
    Ok(TwinEval {
        polyps: polyps.len(),
        reid,
        pathology,
        majority_class_accuracy: *counts.iter().max().unwrap_or(&0) as f64
            / classes.len().max(1) as f64,
    })
}

/// Top-1 reference per query by cosine (or by Hamming distance of the sign codes); query i's
/// true reference is reference i.
fn top1_metrics(queries: &[Vec<f32>], refs: &[Vec<f32>], hash: bool) -> (f64, f64, f64) {
    let codes: Vec<Vec<u64>> = refs.iter().map(|r| code_of(r)).collect();
    let mut predictions = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        let qc = code_of(q);
        let (best, score) = (0..refs.len())
            .map(|j| {
                let s = if hash {
                    -(hamming(&qc, &codes[j]) as f64)
                } else {
                    crate::retrieval::exact::dot(q, &refs[j]) as f64
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
    let n = queries.len();
    let correct = predictions.iter().filter(|p| p.1).count();
    (
        metrics::micro_ap(&predictions, n),
        correct as f64 / n.max(1) as f64,
        metrics::recall_at_precision(&predictions, n, 0.9),
    )
}

/// k-NN majority vote, 5 folds by polyp index: accuracy, macro-F1, and the macro average of
/// one-vs-rest AUCs with the vote shares as scores.
fn knn_vote_cv(
    vectors: &[Vec<f32>],
    classes: &[usize],
    n_classes: usize,
    k: usize,
) -> (f64, f64, f64) {
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
    (
        metrics::accuracy(classes, &predicted),
        metrics::macro_f1(classes, &predicted, n_classes),
        aucs.iter().sum::<f64>() / aucs.len().max(1) as f64,
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
        metrics.push((format!("{name}: accuracy@1"), r.accuracy_at_1));
        metrics.push((format!("{name}: recall@P90"), r.recall_at_p90));
    }
    for r in &e.pathology {
        metrics.push((format!("pathology {}: accuracy", r.method), r.accuracy));
        metrics.push((format!("pathology {}: macro-F1", r.method), r.macro_f1));
        metrics.push((format!("pathology {}: AUC", r.method), r.auc));
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
