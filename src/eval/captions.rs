//! `eval captions` (METHODS §2 "Evaluation"): caption retrieval on held-out capsule frames
//! (each frame ranks every distinct caption of the held-out set; top-1 and top-5), per model
//! with its loss and shots, against a majority-caption baseline; categories as a set per
//! frame (multi-label macro-F1, one vs rest) and the top category under the entity list's
//! precedence (accuracy, confusion matrix), against a colour histogram with the same linear
//! classifier. Intervals resample patients (a cluster bootstrap: frames of one capsule
//! study are not independent).

use crate::captions::CATEGORIES;
use crate::captions::data::CaptionSet;
use crate::captions::model::{CaptionModel, CaptionModelConfig};
use crate::captions::query::{caption_embeddings, predicted_categories};
use crate::plumbing::Rng;
use burn::tensor::{Device, Tensor, TensorData, activation};
use serde::Serialize;

pub const BOOTSTRAP: usize = 1000;

/// A model to evaluate, with what it was trained with.
pub struct Candidate<'a> {
    pub label: String,
    pub model: &'a CaptionModel,
    pub config: &'a CaptionModelConfig,
    /// "kl" or "clip".
    pub loss: String,
    /// "0", "1", "4" or "full".
    pub shots: String,
    /// A baseline (the untrained encoder): its row goes under `baselines`, out of the per-loss
    /// summary, the pairing and the category rows.
    pub baseline: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct RetrievalRow {
    pub method: String,
    pub loss: String,
    pub shots: String,
    pub top1: f64,
    pub top1_ci: [f64; 2],
    pub top5: f64,
    pub top5_ci: [f64; 2],
}

/// Rows of one (loss, shots) over several models (seeds): mean and sample standard deviation.
#[derive(Debug, Clone, Serialize)]
pub struct RetrievalSummary {
    pub loss: String,
    pub shots: String,
    pub models: usize,
    pub top1_mean: f64,
    pub top1_sd: f64,
    pub top5_mean: f64,
    pub top5_sd: f64,
}

/// The KL models' mean hit rate minus the CLIP models' on the same frames, with a paired
/// bootstrap over patients (the same resamples for both).
#[derive(Debug, Clone, Serialize)]
pub struct PairedRow {
    pub shots: String,
    pub kl_models: usize,
    pub clip_models: usize,
    pub top1_diff: f64,
    pub top1_diff_ci: [f64; 2],
    /// Share of resamples in which KL's top-1 is higher.
    pub top1_kl_ahead: f64,
    pub top5_diff: f64,
    pub top5_diff_ci: [f64; 2],
}

#[derive(Debug, Clone, Serialize)]
pub struct CategoryRow {
    pub method: String,
    /// Top category under precedence vs the refined ground truth's.
    pub accuracy: f64,
    pub accuracy_ci: [f64; 2],
    /// Multi-label macro-F1 over the categories present in the held-out frames.
    pub macro_f1: f64,
    pub macro_f1_ci: [f64; 2],
    /// F1 per category (NaN where a category has no held-out frame and no prediction).
    pub f1: Vec<(String, f64)>,
    /// Rows: true top category; columns: predicted; [`CATEGORIES`] order.
    pub confusion: Vec<Vec<usize>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CategorySummary {
    pub accuracy: f64,
    pub macro_f1: f64,
    pub baseline_accuracy: f64,
    pub baseline_macro_f1: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CaptionEval {
    pub retrieval: Vec<RetrievalRow>,
    /// KL minus CLIP at each shot count where both were evaluated (fine-tuned models only).
    pub paired: Vec<PairedRow>,
    pub retrieval_summary: Vec<RetrievalSummary>,
    /// The majority-caption baseline (captions ranked by their training-split frequency).
    pub baselines: Vec<RetrievalRow>,
    /// The first model's category head against the colour-histogram baseline.
    pub category: CategorySummary,
    pub categories: Vec<CategoryRow>,
    pub frames: usize,
    pub patients: usize,
    /// Distinct captions every frame is ranked against.
    pub candidates: usize,
    pub seed: u64,
    pub bootstrap: usize,
}

/// Evaluates `candidates` on `test`; `train` (never the test frames) gives the majority
/// caption and fits the colour-histogram classifier. `train_device` must support autodiff.
pub fn run(
    test: &CaptionSet,
    train: &CaptionSet,
    candidates: &[Candidate<'_>],
    seed: u64,
    device: &Device,
    train_device: &Device,
) -> CaptionEval {
    let patients = patient_index(test);
    let weights = resamples(patients.1, seed);
    let cluster = |hits: &[f64]| -> (f64, [f64; 2]) {
        let point = mean_weighted(hits, &patients.0, &weights[0]);
        let all: Vec<f64> = weights
            .iter()
            .map(|w| mean_weighted(hits, &patients.0, w))
            .collect();
        (point, super::metrics::interval(all))
    };
    let mut retrieval = Vec::new();
    let mut categories = Vec::new();
    let truth: Vec<[bool; 7]> = test.category_targets();
    let mut per_frame: Vec<(String, String, Vec<f64>, Vec<f64>)> = Vec::new();
    let mut baselines = Vec::new();
    for c in candidates {
        let (ranks, probs, from_caption) = score(c.model, c.config, test, device);
        let (top1, top1_ci) = cluster(&hits(&ranks, 1));
        let (top5, top5_ci) = cluster(&hits(&ranks, 5));
        let row = RetrievalRow {
            method: c.label.clone(),
            loss: c.loss.clone(),
            shots: c.shots.clone(),
            top1,
            top1_ci,
            top5,
            top5_ci,
        };
        if c.baseline {
            baselines.push(row);
            continue;
        }
        per_frame.push((
            c.loss.clone(),
            c.shots.clone(),
            hits(&ranks, 1),
            hits(&ranks, 5),
        ));
        retrieval.push(row);
        if !categories.iter().any(|r: &CategoryRow| r.method == c.label) {
            categories.push(category_row(
                &c.label, &probs, &truth, test, &patients, &weights,
            ));
            if categories.len() == 1 {
                let label = format!("{}: the categories of its top caption (no head)", c.label);
                categories.push(category_row(
                    &label,
                    &from_caption,
                    &truth,
                    test,
                    &patients,
                    &weights,
                ));
            }
        }
    }
    // Majority caption: the training split's most frequent captions, in order.
    let ranks: Vec<usize> = test
        .frames
        .iter()
        .map(|f| {
            train
                .captions
                .iter()
                .position(|c| *c == f.refined.caption)
                .unwrap_or(usize::MAX)
        })
        .collect();
    let (top1, top1_ci) = cluster(&hits(&ranks, 1));
    let (top5, top5_ci) = cluster(&hits(&ranks, 5));
    baselines.push(RetrievalRow {
        method: "majority caption (training-split frequencies)".into(),
        loss: "none".into(),
        shots: "full".into(),
        top1,
        top1_ci,
        top5,
        top5_ci,
    });
    // Colour histogram + the same linear multi-label classifier, fitted on `train`.
    let histograms = |set: &CaptionSet, d: &Device| -> Tensor<2> {
        let rows: Vec<f32> = set
            .frames
            .iter()
            .flat_map(|f| {
                super::baselines::features(&image::DynamicImage::ImageRgb8(f.image.clone())).1
            })
            .collect();
        let n = set.frames.len();
        let dim = rows.len() / n.max(1);
        Tensor::from_data(TensorData::new(rows, [n, dim]), d)
    };
    let head = crate::train::captions::fit_multilabel(
        histograms(train, train_device),
        &train.category_targets(),
        300,
        seed,
        train_device,
    );
    let probs = probabilities(head.forward(histograms(test, train_device)).detach());
    let baseline = category_row(
        "colour histogram + logistic regression",
        &probs,
        &truth,
        test,
        &patients,
        &weights,
    );
    let category = CategorySummary {
        accuracy: categories.first().map_or(f64::NAN, |r| r.accuracy),
        macro_f1: categories.first().map_or(f64::NAN, |r| r.macro_f1),
        baseline_accuracy: baseline.accuracy,
        baseline_macro_f1: baseline.macro_f1,
    };
    categories.push(baseline);
    let paired = paired_kl_clip(&per_frame, &patients.0, &weights);
    CaptionEval {
        paired,
        retrieval_summary: summarise(&retrieval),
        retrieval,
        baselines,
        category,
        categories,
        frames: test.frames.len(),
        patients: patients.1,
        candidates: test.captions.len(),
        seed,
        bootstrap: BOOTSTRAP,
    }
}

/// Each frame's rank (0 = first) of its own caption among the set's distinct captions, and
/// its category probabilities.
/// The category head's probabilities of every frame of `set`, in [`CATEGORIES`] order.
pub fn category_probabilities(
    model: &CaptionModel,
    config: &CaptionModelConfig,
    set: &CaptionSet,
    device: &Device,
) -> Vec<Vec<f32>> {
    score(model, config, set, device).1
}

fn score(
    model: &CaptionModel,
    config: &CaptionModelConfig,
    set: &CaptionSet,
    device: &Device,
) -> (Vec<usize>, Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let t = caption_embeddings(model, config, &set.captions, device);
    let all: Vec<usize> = (0..set.frames.len()).collect();
    let mut ranks = Vec::with_capacity(all.len());
    let mut probs = Vec::with_capacity(all.len());
    // The categories of each frame's top caption, as 0/1 "probabilities".
    let caption_categories: Vec<Vec<f32>> = set
        .captions
        .iter()
        .map(|c| {
            let cats = crate::captions::Refiner::shipped().refine(c).categories;
            CATEGORIES
                .iter()
                .map(|k| f32::from(u8::from(cats.iter().any(|c| c == k))))
                .collect()
        })
        .collect();
    let mut from_caption = Vec::with_capacity(all.len());
    for idx in all.chunks(64) {
        let v = model.encode_images(set.batch_for(idx, config, device));
        let s: Vec<f32> = v
            .clone()
            .matmul(t.clone().transpose())
            .into_data()
            .try_to_vec::<f32>()
            .expect("f32 scores");
        let m = set.captions.len();
        for (k, &i) in idx.iter().enumerate() {
            let row = &s[k * m..(k + 1) * m];
            let best = (0..m)
                .max_by(|&a, &b| row[a].total_cmp(&row[b]))
                .unwrap_or(0);
            from_caption.push(caption_categories[best].clone());
            let own = row[set.frames[i].caption];
            // Ties count against the frame (pessimistic).
            ranks.push(
                row.iter()
                    .enumerate()
                    .filter(|(j, x)| *j != set.frames[i].caption && **x >= own)
                    .count(),
            );
        }
        probs.extend(probabilities(model.category_logits(v)));
    }
    (ranks, probs, from_caption)
}

fn paired_kl_clip(
    per_frame: &[(String, String, Vec<f64>, Vec<f64>)],
    patient: &[usize],
    weights: &[Vec<f64>],
) -> Vec<PairedRow> {
    let mut shots: Vec<&String> = per_frame.iter().map(|r| &r.1).collect();
    shots.sort();
    shots.dedup();
    let mut out = Vec::new();
    for s in shots.into_iter().filter(|s| s.as_str() != "0") {
        let of = |loss: &str| -> Vec<&(String, String, Vec<f64>, Vec<f64>)> {
            per_frame
                .iter()
                .filter(|r| r.0 == loss && r.1 == *s)
                .collect()
        };
        let (kl, clip) = (of("kl"), of("clip"));
        if kl.is_empty() || clip.is_empty() {
            continue;
        }
        // Per-frame mean over the models of each loss, then the difference.
        let mean_of = |rows: &[&(String, String, Vec<f64>, Vec<f64>)], top5: bool| -> Vec<f64> {
            let n = rows[0].2.len();
            (0..n)
                .map(|i| {
                    rows.iter()
                        .map(|r| if top5 { r.3[i] } else { r.2[i] })
                        .sum::<f64>()
                        / rows.len() as f64
                })
                .collect()
        };
        let diff = |top5: bool| -> Vec<f64> {
            mean_of(&kl, top5)
                .iter()
                .zip(mean_of(&clip, top5))
                .map(|(a, b)| a - b)
                .collect()
        };
        let (d1, d5) = (diff(false), diff(true));
        let all1: Vec<f64> = weights
            .iter()
            .map(|w| mean_weighted(&d1, patient, w))
            .collect();
        let all5: Vec<f64> = weights
            .iter()
            .map(|w| mean_weighted(&d5, patient, w))
            .collect();
        out.push(PairedRow {
            shots: s.clone(),
            kl_models: kl.len(),
            clip_models: clip.len(),
            top1_diff: all1[0],
            top1_kl_ahead: all1.iter().filter(|d| **d > 0.0).count() as f64 / all1.len() as f64,
            top1_diff_ci: super::metrics::interval(all1),
            top5_diff: all5[0],
            top5_diff_ci: super::metrics::interval(all5),
        });
    }
    out
}

fn probabilities(logits: Tensor<2>) -> Vec<Vec<f32>> {
    let [n, c] = logits.dims();
    let p: Vec<f32> = activation::sigmoid(logits)
        .into_data()
        .try_to_vec::<f32>()
        .expect("f32 probabilities");
    (0..n).map(|i| p[i * c..(i + 1) * c].to_vec()).collect()
}

fn hits(ranks: &[usize], k: usize) -> Vec<f64> {
    ranks.iter().map(|&r| f64::from(u8::from(r < k))).collect()
}

fn category_row(
    method: &str,
    probs: &[Vec<f32>],
    truth: &[[bool; 7]],
    test: &CaptionSet,
    patients: &(Vec<usize>, usize),
    weights: &[Vec<f64>],
) -> CategoryRow {
    let predicted: Vec<([bool; 7], String)> =
        probs.iter().map(|p| predicted_categories(p)).collect();
    let index = |c: &str| CATEGORIES.iter().position(|k| *k == c).unwrap_or(6);
    let correct: Vec<f64> = test
        .frames
        .iter()
        .zip(&predicted)
        .map(|(f, (_, top))| f64::from(u8::from(f.refined.category == *top)))
        .collect();
    let mut confusion = vec![vec![0usize; 7]; 7];
    for (f, (_, top)) in test.frames.iter().zip(&predicted) {
        confusion[index(&f.refined.category)][index(top)] += 1;
    }
    let sets: Vec<[bool; 7]> = predicted.iter().map(|(s, _)| *s).collect();
    let f1 = |w: &[f64]| -> (f64, Vec<f64>) { multilabel_f1(truth, &sets, &patients.0, w) };
    let (macro_f1, per) = f1(&weights[0]);
    let (accuracy, accuracy_ci) = {
        let point = mean_weighted(&correct, &patients.0, &weights[0]);
        let all = weights
            .iter()
            .map(|w| mean_weighted(&correct, &patients.0, w))
            .collect();
        (point, super::metrics::interval(all))
    };
    CategoryRow {
        method: method.to_string(),
        accuracy,
        accuracy_ci,
        macro_f1,
        macro_f1_ci: super::metrics::interval(weights.iter().map(|w| f1(w).0).collect()),
        f1: CATEGORIES.iter().map(|c| c.to_string()).zip(per).collect(),
        confusion,
    }
}

/// One-vs-rest F1 per category with frames weighted by their patient's weight, and their mean
/// over categories with a held-out frame or a prediction.
fn multilabel_f1(
    truth: &[[bool; 7]],
    predicted: &[[bool; 7]],
    patient: &[usize],
    w: &[f64],
) -> (f64, Vec<f64>) {
    let per: Vec<f64> = (0..7)
        .map(|c| {
            let (mut tp, mut fp, mut fn_) = (0.0, 0.0, 0.0);
            for ((t, p), &pt) in truth.iter().zip(predicted).zip(patient) {
                match (t[c], p[c]) {
                    (true, true) => tp += w[pt],
                    (false, true) => fp += w[pt],
                    (true, false) => fn_ += w[pt],
                    _ => {}
                }
            }
            if tp + fp + fn_ == 0.0 {
                f64::NAN
            } else {
                2.0 * tp / (2.0 * tp + fp + fn_)
            }
        })
        .collect();
    let present: Vec<f64> = per.iter().copied().filter(|x| x.is_finite()).collect();
    (
        present.iter().sum::<f64>() / present.len().max(1) as f64,
        per,
    )
}

/// Each frame's patient as 0..n, and n.
fn patient_index(set: &CaptionSet) -> (Vec<usize>, usize) {
    let mut ids: Vec<i64> = set.frames.iter().map(|f| f.examination).collect();
    ids.sort_unstable();
    ids.dedup();
    let of = set
        .frames
        .iter()
        .map(|f| ids.binary_search(&f.examination).expect("listed"))
        .collect();
    (of, ids.len())
}

/// Patient weights of each bootstrap resample (multiplicities), the first all ones.
fn resamples(patients: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = Rng::new(seed).fork(0xCA9710);
    let mut out = vec![vec![1.0; patients]];
    for _ in 1..BOOTSTRAP {
        let mut w = vec![0.0; patients];
        for _ in 0..patients {
            w[rng.below(patients)] += 1.0;
        }
        out.push(w);
    }
    out
}

fn mean_weighted(values: &[f64], patient: &[usize], w: &[f64]) -> f64 {
    let (mut sum, mut total) = (0.0, 0.0);
    for (v, &p) in values.iter().zip(patient) {
        sum += v * w[p];
        total += w[p];
    }
    if total == 0.0 { f64::NAN } else { sum / total }
}

fn summarise(rows: &[RetrievalRow]) -> Vec<RetrievalSummary> {
    let mut groups: Vec<(String, String)> = Vec::new();
    for r in rows {
        let key = (r.loss.clone(), r.shots.clone());
        if !groups.contains(&key) {
            groups.push(key);
        }
    }
    groups
        .into_iter()
        .map(|(loss, shots)| {
            let members: Vec<&RetrievalRow> = rows
                .iter()
                .filter(|r| r.loss == loss && r.shots == shots)
                .collect();
            let stats = |f: fn(&RetrievalRow) -> f64| -> (f64, f64) {
                let v: Vec<f64> = members.iter().map(|r| f(r)).collect();
                let mean = v.iter().sum::<f64>() / v.len() as f64;
                let var = if v.len() > 1 {
                    v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64
                } else {
                    0.0
                };
                (mean, var.sqrt())
            };
            let (top1_mean, top1_sd) = stats(|r| r.top1);
            let (top5_mean, top5_sd) = stats(|r| r.top5);
            RetrievalSummary {
                loss,
                shots,
                models: members.len(),
                top1_mean,
                top1_sd,
                top5_mean,
                top5_sd,
            }
        })
        .collect()
}
