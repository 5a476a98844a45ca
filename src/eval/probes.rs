//! Linear probes on tracklet embeddings, the clinical read-outs of METHODS §3: polyp size
//! (at most 5 mm, or larger; macro-F1) and histology (adenoma or not; accuracy). A
//! class-weighted logistic regression is fitted on one library's tracklets (the validation
//! videos) and scored on another's (the held-out videos), with intervals over held-out videos.

use crate::store::{Store, StoreError};
use crate::tracklets::dataset::TrackletSet;
use serde::Serialize;

/// Per tracklet of a set: its polyp's size class (`true`: at most 5 mm) and histology class
/// (`true`: an adenoma), where the library knows them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeLabels {
    pub small: Vec<Option<bool>>,
    pub adenoma: Vec<Option<bool>>,
}

/// The labels of `set`'s tracklets from `store` (the library it came from).
pub fn labels(store: &Store, set: &TrackletSet) -> Result<ProbeLabels, StoreError> {
    let mut out = ProbeLabels::default();
    for t in &set.tracklets {
        let polyp = match t.identity {
            Some(id) => store.polyp(id)?,
            None => None,
        };
        out.small
            .push(polyp.as_ref().and_then(|p| p.size_mm).map(|mm| mm <= 5.0));
        out.adenoma.push(
            polyp
                .as_ref()
                .and_then(|p| p.histology.as_deref())
                .map(|h| h.to_ascii_lowercase().contains("adenoma")),
        );
    }
    Ok(out)
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProbeRow {
    pub method: String,
    /// Macro-F1 of "at most 5 mm" vs larger on the held-out tracklets.
    pub size_macro_f1: f64,
    pub size_ci: [f64; 2],
    pub size_tracklets: usize,
    /// Accuracy of "adenoma" vs not on the held-out tracklets.
    pub histology_accuracy: f64,
    pub histology_ci: [f64; 2],
    pub histology_tracklets: usize,
}

/// A logistic regression: weights and bias.
pub(crate) struct Logistic {
    w: Vec<f64>,
    b: f64,
}

impl Logistic {
    /// Fits on `x` (rows) and `y`, each class weighted by the inverse of its share, L2 1e-3,
    /// 400 steps of gradient descent (deterministic).
    pub(crate) fn fit(x: &[&Vec<f32>], y: &[bool]) -> Logistic {
        let d = x.first().map_or(0, |r| r.len());
        let n = y.len().max(1) as f64;
        let positives = y.iter().filter(|&&v| v).count().max(1) as f64;
        let negatives = (y.len() as f64 - positives).max(1.0);
        let weight = |v: bool| {
            if v {
                n / (2.0 * positives)
            } else {
                n / (2.0 * negatives)
            }
        };
        let mut m = Logistic {
            w: vec![0.0; d],
            b: 0.0,
        };
        for _ in 0..400 {
            let mut gw = vec![0.0; d];
            let mut gb = 0.0;
            for (row, &label) in x.iter().zip(y) {
                let err = (m.p(row) - label as u8 as f64) * weight(label);
                gw.iter_mut()
                    .zip(row.iter())
                    .for_each(|(g, &v)| *g += err * v as f64);
                gb += err;
            }
            for (w, g) in m.w.iter_mut().zip(&gw) {
                *w -= 2.0 * (g / n + 1e-3 * *w);
            }
            m.b -= 2.0 * gb / n;
        }
        m
    }

    pub(crate) fn p(&self, row: &[f32]) -> f64 {
        let z: f64 = self.b
            + self
                .w
                .iter()
                .zip(row)
                .map(|(w, &v)| w * v as f64)
                .sum::<f64>();
        1.0 / (1.0 + (-z).exp())
    }
}

/// Weighted accuracy of (prediction, truth, weight) items.
fn accuracy(items: &[(bool, bool, f64)]) -> f64 {
    let total: f64 = items.iter().map(|i| i.2).sum();
    let right: f64 = items.iter().filter(|i| i.0 == i.1).map(|i| i.2).sum();
    if total > 0.0 { right / total } else { f64::NAN }
}

/// Weighted macro-F1 over the two classes.
fn macro_f1(items: &[(bool, bool, f64)]) -> f64 {
    let f1 = |class: bool| {
        let tp: f64 = items
            .iter()
            .filter(|i| i.0 == class && i.1 == class)
            .map(|i| i.2)
            .sum();
        let fp: f64 = items
            .iter()
            .filter(|i| i.0 == class && i.1 != class)
            .map(|i| i.2)
            .sum();
        let fn_: f64 = items
            .iter()
            .filter(|i| i.0 != class && i.1 == class)
            .map(|i| i.2)
            .sum();
        if tp + fp + fn_ > 0.0 {
            2.0 * tp / (2.0 * tp + fp + fn_)
        } else {
            0.0
        }
    };
    (f1(true) + f1(false)) / 2.0
}

/// One probe: fit on the training rows that have a label, score the test rows that have one.
/// `resamples[r][video]` weighs each held-out video in bootstrap resample `r`.
#[allow(clippy::type_complexity)]
fn one(
    train: (&[Vec<f32>], &[Option<bool>]),
    test: (&[Vec<f32>], &[Option<bool>], &[usize]),
    resamples: &[Vec<f64>],
    metric: fn(&[(bool, bool, f64)]) -> f64,
) -> (f64, [f64; 2], usize) {
    let (xs, ys): (Vec<&Vec<f32>>, Vec<bool>) = train
        .0
        .iter()
        .zip(train.1)
        .filter_map(|(x, y)| y.map(|y| (x, y)))
        .unzip();
    if ys.iter().all(|&v| v) || ys.iter().all(|&v| !v) {
        return (f64::NAN, [f64::NAN, f64::NAN], 0);
    }
    let model = Logistic::fit(&xs, &ys);
    let scored: Vec<(bool, bool, usize)> = test
        .0
        .iter()
        .zip(test.1)
        .zip(test.2)
        .filter_map(|((x, y), &video)| y.map(|y| (model.p(x) >= 0.5, y, video)))
        .collect();
    let items = |w: Option<&Vec<f64>>| -> Vec<(bool, bool, f64)> {
        scored
            .iter()
            .map(|&(p, y, v)| (p, y, w.map_or(1.0, |w| w[v])))
            .collect()
    };
    let value = metric(&items(None));
    let ci = super::metrics::interval(resamples.iter().map(|w| metric(&items(Some(w)))).collect());
    (value, ci, scored.len())
}

/// The size and histology probes of one method.
pub fn probe(
    method: &str,
    train: (&[Vec<f32>], &ProbeLabels),
    test: (&[Vec<f32>], &ProbeLabels, &TrackletSet),
    resamples: &[Vec<f64>],
) -> ProbeRow {
    let videos: Vec<usize> = test.2.tracklets.iter().map(|t| t.video).collect();
    let (size, size_ci, size_n) = one(
        (train.0, &train.1.small),
        (test.0, &test.1.small, &videos),
        resamples,
        macro_f1,
    );
    let (hist, hist_ci, hist_n) = one(
        (train.0, &train.1.adenoma),
        (test.0, &test.1.adenoma, &videos),
        resamples,
        accuracy,
    );
    ProbeRow {
        method: method.to_string(),
        size_macro_f1: size,
        size_ci,
        size_tracklets: size_n,
        histology_accuracy: hist,
        histology_ci: hist_ci,
        histology_tracklets: hist_n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macro_f1_and_accuracy_by_hand() {
        // predictions, truths: TP 2, FN 1, FP 1, TN 1 for class true.
        let items = [
            (true, true, 1.0),
            (true, true, 1.0),
            (false, true, 1.0),
            (true, false, 1.0),
            (false, false, 1.0),
        ];
        assert!((accuracy(&items) - 0.6).abs() < 1e-12);
        // F1(true) = 4/6; F1(false) = 2/4.
        assert!((macro_f1(&items) - (4.0 / 6.0 + 0.5) / 2.0).abs() < 1e-12);
    }

    #[test]
    fn a_separable_label_is_learned() {
        let x: Vec<Vec<f32>> = (0..40)
            .map(|i| vec![if i % 2 == 0 { 1.0 } else { -1.0 }, (i as f32 * 0.37).sin()])
            .collect();
        let y: Vec<bool> = (0..40).map(|i| i % 2 == 0).collect();
        let refs: Vec<&Vec<f32>> = x.iter().collect();
        let m = Logistic::fit(&refs, &y);
        assert!(x.iter().zip(&y).all(|(r, &t)| (m.p(r) >= 0.5) == t));
    }
}
