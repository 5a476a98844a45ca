//! How familiar an input is to a model: the Mahalanobis distance of its embedding under a
//! probabilistic PCA of the embeddings the model learned from (the top principal directions
//! with their own variances, one shared variance for the rest), scaled per dimension so that
//! about 1 is typical. The threshold is the distance that a chosen share (5 %) of in-domain
//! validation inputs exceed. Computed from the embedding an answer already made: no second
//! forward pass.

use serde::{Deserialize, Serialize};

/// Principal directions kept at most (the rest share one variance).
pub const MAX_COMPONENTS: usize = 32;

/// The share of in-domain validation inputs the threshold leaves beyond it.
pub const VALIDATION_MARKED: f64 = 0.05;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FamiliarityError {
    #[error("familiarity needs at least {need} embeddings to fit, got {got}")]
    TooFew { need: usize, got: usize },
    #[error(
        "familiarity needs at least {need} validation embeddings to set its threshold on, got {got} (hold out more of the fit data or add a validation library)"
    )]
    TooFewValidation { need: usize, got: usize },
    #[error("embeddings of {found} values where the model gives {expected}")]
    Width { expected: usize, found: usize },
    #[error("{sources} sources named for {inputs} validation inputs")]
    Sources { inputs: usize, sources: usize },
    #[error("an embedding holds a value that is not a finite number")]
    NotFinite,
}

/// A model's familiarity statistics and threshold (stored in its card).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Familiarity {
    /// "ppca-mahalanobis".
    pub method: String,
    pub mean: Vec<f32>,
    /// Principal directions, `variances.len()` rows of `mean.len()` values (row-major unit
    /// vectors), as hex.
    #[serde(with = "crate::plumbing::f32_hex")]
    pub components: Option<Vec<f32>>,
    /// Variance of the fitted embeddings along each direction.
    pub variances: Vec<f32>,
    /// The variance shared by every other direction.
    pub residual: f32,
    /// Inputs scoring above it are marked unfamiliar.
    pub threshold: f32,
    /// Share of the validation inputs beyond the threshold when it was chosen.
    pub validation_marked: f64,
    /// What the statistics were fitted on, and the threshold chosen on.
    pub fitted_on: String,
    pub validated_on: String,
    pub fitted: usize,
    pub validated: usize,
}

impl Familiarity {
    /// Fits the statistics on `fit`, then sets the threshold so that a share
    /// [`VALIDATION_MARKED`] of `validation` lies beyond it. Both are embeddings of one width.
    pub fn fit(
        fit: &[Vec<f32>],
        validation: &[Vec<f32>],
        fitted_on: &str,
        validated_on: &str,
    ) -> Result<Familiarity, FamiliarityError> {
        const NEED: usize = 8;
        if fit.len() < NEED {
            return Err(FamiliarityError::TooFew {
                need: NEED,
                got: fit.len(),
            });
        }
        if validation.len() < NEED {
            return Err(FamiliarityError::TooFewValidation {
                need: NEED,
                got: validation.len(),
            });
        }
        let d = fit[0].len();
        for x in fit.iter().chain(validation) {
            if x.len() != d {
                return Err(FamiliarityError::Width {
                    expected: d,
                    found: x.len(),
                });
            }
            if !x.iter().all(|v| v.is_finite()) {
                return Err(FamiliarityError::NotFinite);
            }
        }
        let n = fit.len();
        let mut mean = vec![0f64; d];
        for x in fit {
            for (m, v) in mean.iter_mut().zip(x) {
                *m += *v as f64 / n as f64;
            }
        }
        let mut cov = vec![0f64; d * d];
        for x in fit {
            let c: Vec<f64> = x.iter().zip(&mean).map(|(v, m)| *v as f64 - m).collect();
            for i in 0..d {
                let ci = c[i];
                let row = &mut cov[i * d..(i + 1) * d];
                for (r, cj) in row.iter_mut().zip(&c) {
                    *r += ci * cj;
                }
            }
        }
        cov.iter_mut().for_each(|v| *v /= (n - 1) as f64);
        let r = MAX_COMPONENTS.min(n / 4).min(d.saturating_sub(1)).max(1);
        let (vectors, values) = top_eigen(&cov, d, r);
        let trace: f64 = (0..d).map(|i| cov[i * d + i]).sum();
        let kept: f64 = values.iter().sum();
        let floor = (trace / d as f64 * 1e-3).max(1e-12);
        let residual = ((trace - kept) / (d - r).max(1) as f64).max(floor);
        let mut out = Familiarity {
            method: "ppca-mahalanobis".into(),
            mean: mean.iter().map(|v| *v as f32).collect(),
            components: Some(vectors.iter().map(|v| *v as f32).collect()),
            variances: values.iter().map(|v| v.max(residual) as f32).collect(),
            residual: residual as f32,
            threshold: f32::INFINITY,
            validation_marked: 0.0,
            fitted_on: fitted_on.into(),
            validated_on: validated_on.into(),
            fitted: n,
            validated: validation.len(),
        };
        let mut scores: Vec<f32> = validation.iter().map(|x| out.score(x)).collect();
        scores.sort_by(f32::total_cmp);
        let at = ((1.0 - VALIDATION_MARKED) * scores.len() as f64).ceil() as usize;
        out.threshold = scores[at.clamp(1, scores.len()) - 1];
        out.validation_marked =
            scores.iter().filter(|s| **s > out.threshold).count() as f64 / scores.len() as f64;
        Ok(out)
    }

    /// [`Familiarity::fit`], the threshold then raised to the highest of the validation
    /// sources' own (`sources[i]` names where `validation[i]` came from: a dataset, a phantom
    /// split): so that no in-domain source has much more than [`VALIDATION_MARKED`] of its
    /// inputs beyond it. Without this a small real dataset among many phantom frames is
    /// marked far more often than 5 % (the ImageNet detector marked 27 % of the Kvasir-SEG
    /// frames it learned from). Sources with fewer than 20 validation inputs set no threshold
    /// of their own.
    pub fn fit_by_source(
        fit: &[Vec<f32>],
        validation: &[Vec<f32>],
        sources: &[String],
        fitted_on: &str,
        validated_on: &str,
    ) -> Result<Familiarity, FamiliarityError> {
        let mut out = Familiarity::fit(fit, validation, fitted_on, validated_on)?;
        if sources.len() != validation.len() {
            return Err(FamiliarityError::Sources {
                inputs: validation.len(),
                sources: sources.len(),
            });
        }
        let plain = out.threshold;
        let mut by: std::collections::BTreeMap<&str, Vec<f32>> = Default::default();
        for (x, source) in validation.iter().zip(sources) {
            by.entry(source.as_str()).or_default().push(out.score(x));
        }
        let mut own = Vec::new();
        for (source, mut scores) in by {
            if scores.len() < 20 {
                continue;
            }
            scores.sort_by(f32::total_cmp);
            let at = ((1.0 - VALIDATION_MARKED) * scores.len() as f64).ceil() as usize;
            let t = scores[at.clamp(1, scores.len()) - 1];
            own.push(format!("{source}: {t:.3} ({} inputs)", scores.len()));
            out.threshold = out.threshold.max(t);
        }
        if out.threshold > plain {
            let beyond = validation
                .iter()
                .filter(|x| out.score(x) > out.threshold)
                .count();
            out.validation_marked = beyond as f64 / validation.len() as f64;
            out.validated_on = format!(
                "{validated_on}; threshold: the highest of its sources' own ({})",
                own.join(", ")
            );
        }
        Ok(out)
    }

    /// The embedding width these statistics were fitted on.
    pub fn dim(&self) -> usize {
        self.mean.len()
    }

    /// These statistics when they were fitted on rows of width `width`, else None: a card
    /// fitted on another representation (a detector card fitted on its 128-d embedding before
    /// the backbone features were measured) says nothing rather than marking every input.
    pub fn fitted_for(&self, width: usize) -> Option<&Familiarity> {
        (self.dim() == width).then_some(self)
    }

    /// Whether the stored statistics are usable for embeddings of width `dim`.
    pub fn check(&self, dim: usize) -> Result<(), String> {
        let r = self.variances.len();
        let comps = self.components.as_ref().map_or(0, Vec::len);
        if self.mean.len() != dim {
            return Err(format!(
                "familiarity fitted on {} values, the model gives {dim}",
                self.mean.len()
            ));
        }
        if comps != r * dim {
            return Err(format!(
                "familiarity has {comps} component values for {r} directions of {dim}"
            ));
        }
        let finite = self.mean.iter().all(|v| v.is_finite())
            && self.variances.iter().all(|v| v.is_finite() && *v > 0.0)
            && self.residual.is_finite()
            && self.residual > 0.0
            && !self.threshold.is_nan();
        if !finite {
            return Err("familiarity holds a variance that is not a positive number".into());
        }
        // A score is a distance: a hand-edited negative threshold marked every input
        // unfamiliar without a word (round 14 N3).
        if !(self.threshold.is_finite() && self.threshold >= 0.0) {
            return Err(format!(
                "its familiarity threshold {} is not a distance (finite, 0 or more)",
                self.threshold
            ));
        }
        Ok(())
    }

    /// The input's distance from the fitted embeddings (about 1 for a typical one). An
    /// embedding of another width scores infinity.
    pub fn score(&self, x: &[f32]) -> f32 {
        let d = self.dim();
        if x.len() != d || !x.iter().all(|v| v.is_finite()) {
            return f32::INFINITY;
        }
        let c: Vec<f64> = x
            .iter()
            .zip(&self.mean)
            .map(|(v, m)| (*v - *m) as f64)
            .collect();
        let total: f64 = c.iter().map(|v| v * v).sum();
        let comps = self.components.as_deref().unwrap_or(&[]);
        let mut inside = 0.0;
        let mut projected = 0.0;
        for (k, var) in self.variances.iter().enumerate() {
            let u = &comps[k * d..(k + 1) * d];
            let p: f64 = u.iter().zip(&c).map(|(a, b)| *a as f64 * b).sum();
            inside += p * p / *var as f64;
            projected += p * p;
        }
        let rest = (total - projected).max(0.0) / self.residual as f64;
        ((inside + rest) / d as f64).sqrt() as f32
    }

    /// The mean score of `embeddings` (the views of one answer) and whether it is beyond the
    /// threshold, for the model named `model`.
    pub fn judge(&self, model: &str, embeddings: &[&[f32]]) -> Judgement {
        let scores: Vec<f32> = embeddings.iter().map(|e| self.score(e)).collect();
        self.judge_scores(model, &scores)
    }

    /// [`Familiarity::judge`] from scores already computed (stored at indexing, say).
    pub fn judge_scores(&self, model: &str, scores: &[f32]) -> Judgement {
        let score = if scores.is_empty() {
            f32::INFINITY
        } else {
            scores.iter().sum::<f32>() / scores.len() as f32
        };
        Judgement {
            model: model.to_string(),
            score,
            threshold: self.threshold,
            unfamiliar: score.is_nan() || score > self.threshold,
        }
    }
}

/// One answer's familiarity: what the CLI's `unfamiliar:` line and the GUI badge show.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judgement {
    pub model: String,
    pub score: f32,
    pub threshold: f32,
    pub unfamiliar: bool,
}

impl Judgement {
    /// The CLI's line for a marked answer: `unfamiliar: <model> scores <s> (threshold <t>): ...`.
    pub fn line(&self) -> String {
        format!(
            "unfamiliar: {} scores {:.2} against its threshold {:.2}: {}",
            self.model,
            self.score,
            self.threshold,
            super::UNFAMILIAR_HINT
        )
    }
}

/// The top `r` eigenvectors (rows, unit length) and eigenvalues of the symmetric `d x d`
/// matrix `m`, by subspace iteration and a Rayleigh-Ritz step (Jacobi on the `r x r`
/// projection).
fn top_eigen(m: &[f64], d: usize, r: usize) -> (Vec<f64>, Vec<f64>) {
    let mut rng = crate::plumbing::Rng::new(0x5eed);
    // Columns of q as rows of `basis` (r x d).
    let mut basis: Vec<f64> = (0..r * d).map(|_| rng.normal() as f64).collect();
    orthonormalise(&mut basis, d);
    for _ in 0..80 {
        basis = (0..r)
            .flat_map(|k| multiply(m, d, &basis[k * d..(k + 1) * d]))
            .collect();
        orthonormalise(&mut basis, d);
    }
    // B = Q^T M Q (r x r), then its eigenvectors turn the basis into M's.
    let mq: Vec<Vec<f64>> = (0..r)
        .map(|k| multiply(m, d, &basis[k * d..(k + 1) * d]))
        .collect();
    let mut b = vec![0f64; r * r];
    for i in 0..r {
        for j in 0..r {
            b[i * r + j] = dot(&basis[i * d..(i + 1) * d], &mq[j]);
        }
    }
    let (values, vectors) = jacobi(&mut b, r);
    let mut order: Vec<usize> = (0..r).collect();
    order.sort_by(|a, c| values[*c].total_cmp(&values[*a]));
    let mut rows = Vec::with_capacity(r * d);
    for &k in &order {
        // Column k of `vectors` combines the basis rows.
        let mut v = vec![0f64; d];
        for i in 0..r {
            let w = vectors[i * r + k];
            v.iter_mut()
                .zip(&basis[i * d..(i + 1) * d])
                .for_each(|(a, b)| *a += w * b);
        }
        let norm = dot(&v, &v).sqrt().max(1e-300);
        rows.extend(v.iter().map(|x| x / norm));
    }
    (rows, order.iter().map(|&k| values[k].max(0.0)).collect())
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn multiply(m: &[f64], d: usize, v: &[f64]) -> Vec<f64> {
    (0..d).map(|i| dot(&m[i * d..(i + 1) * d], v)).collect()
}

/// Modified Gram-Schmidt on the rows of `rows` (each `d` long); a row that vanishes is
/// replaced by a unit axis not yet spanned.
fn orthonormalise(rows: &mut [f64], d: usize) {
    let r = rows.len() / d;
    for k in 0..r {
        for j in 0..k {
            let (done, rest) = rows.split_at_mut(k * d);
            let u = &done[j * d..(j + 1) * d];
            let v = &mut rest[..d];
            let p = dot(u, v);
            v.iter_mut().zip(u).for_each(|(a, b)| *a -= p * b);
        }
        let v = &mut rows[k * d..(k + 1) * d];
        let norm = dot(v, v).sqrt();
        if norm > 1e-12 {
            v.iter_mut().for_each(|a| *a /= norm);
        } else {
            v.iter_mut().for_each(|a| *a = 0.0);
            v[k % d] = 1.0;
        }
    }
}

/// Eigenvalues and eigenvectors (columns of the returned row-major matrix) of the symmetric
/// `n x n` matrix `a` (overwritten), by cyclic Jacobi rotations.
fn jacobi(a: &mut [f64], n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut v = vec![0f64; n * n];
    (0..n).for_each(|i| v[i * n + i] = 1.0);
    for _ in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |j| *j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i * n + j] * a[i * n + j])
            .sum();
        if off < 1e-22 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[p * n + q];
                if apq.abs() < 1e-300 {
                    continue;
                }
                let theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let akp = a[k * n + p];
                    let akq = a[k * n + q];
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for k in 0..n {
                    let apk = a[p * n + k];
                    let aqk = a[q * n + k];
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                for k in 0..n {
                    let vkp = v[k * n + p];
                    let vkq = v[k * n + q];
                    v[k * n + p] = c * vkp - s * vkq;
                    v[k * n + q] = s * vkp + c * vkq;
                }
            }
        }
    }
    ((0..n).map(|i| a[i * n + i]).collect(), v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cloud(n: usize, seed: u64, scale: [f32; 4], shift: f32) -> Vec<Vec<f32>> {
        let mut rng = crate::plumbing::Rng::new(seed);
        (0..n)
            .map(|_| {
                (0..4)
                    .map(|k| rng.normal() * scale[k] + shift)
                    .collect::<Vec<f32>>()
            })
            .collect()
    }

    #[test]
    fn a_small_source_among_many_keeps_about_one_in_twenty_marked_when_fitted_by_source() {
        // 900 tight "phantom" inputs and 100 broader "real" ones, fitted and validated alike.
        let mut fit = cloud(900, 1, [1.0, 1.0, 1.0, 1.0], 0.0);
        fit.extend(cloud(100, 2, [3.0, 3.0, 3.0, 3.0], 0.0));
        let mut val = cloud(900, 3, [1.0, 1.0, 1.0, 1.0], 0.0);
        val.extend(cloud(100, 4, [3.0, 3.0, 3.0, 3.0], 0.0));
        let sources: Vec<String> = (0..1000)
            .map(|i| if i < 900 { "phantom" } else { "real" }.to_string())
            .collect();
        let real_marked = |f: &Familiarity| {
            val[900..]
                .iter()
                .filter(|x| f.score(x) > f.threshold)
                .count() as f64
                / 100.0
        };
        let plain = Familiarity::fit(&fit, &val, "fit", "val").unwrap();
        let by = Familiarity::fit_by_source(&fit, &val, &sources, "fit", "val").unwrap();
        assert!(real_marked(&plain) > 0.2, "{}", real_marked(&plain));
        assert!(real_marked(&by) <= 0.06, "{}", real_marked(&by));
        assert!(by.threshold > plain.threshold);
        assert!(by.validated_on.contains("real: "), "{}", by.validated_on);
        // A far input is still marked.
        assert!(by.score(&[40.0, -40.0, 40.0, -40.0]) > by.threshold);
        // Statistics of another width say nothing rather than mark everything.
        assert!(by.fitted_for(4).is_some() && by.fitted_for(1632).is_none());
        // Sources must name every validation input.
        assert!(Familiarity::fit_by_source(&fit, &val, &sources[..10], "fit", "val").is_err());
    }

    #[test]
    fn the_threshold_marks_about_one_in_twenty_validation_inputs_and_far_inputs_score_high() {
        let fit = cloud(400, 1, [3.0, 1.0, 0.3, 0.1], 0.0);
        let val = cloud(200, 2, [3.0, 1.0, 0.3, 0.1], 0.0);
        let f = Familiarity::fit(&fit, &val, "fit", "val").unwrap();
        assert!(
            (f.validation_marked - 0.05).abs() <= 0.01,
            "{}",
            f.validation_marked
        );
        // Its directions are the axes of the cloud, largest first.
        let u0 = &f.components.as_ref().unwrap()[..4];
        assert!(u0[0].abs() > 0.99, "{u0:?}");
        assert!(
            f.variances[0] > 8.0 && f.variances[0] < 10.0,
            "{:?}",
            f.variances
        );
        // Along the thin direction a small step is far; along the wide one it is not.
        assert!(f.judge("m", &[&[0.0, 0.0, 0.0, 1.0]]).unfamiliar);
        assert!(!f.judge("m", &[&[1.0, 0.0, 0.0, 0.0]]).unfamiliar);
        let shifted = cloud(100, 3, [3.0, 1.0, 0.3, 0.1], 2.0);
        let marked = shifted.iter().filter(|x| f.score(x) > f.threshold).count();
        assert!(marked > 90, "{marked} of 100 shifted inputs marked");
        // Wrong width and non-finite inputs are unfamiliar, never familiar.
        assert!(f.judge("m", &[&[0.0, 0.0]]).unfamiliar);
        assert!(f.judge("m", &[&[f32::NAN, 0.0, 0.0, 0.0]]).unfamiliar);
        assert!(f.judge("m", &[]).unfamiliar);
        f.check(4).unwrap();
        assert!(f.check(5).is_err());
    }

    #[test]
    fn the_statistics_survive_the_card_and_refuse_too_little_data() {
        let fit = cloud(50, 4, [1.0, 1.0, 1.0, 1.0], 0.0);
        let f = Familiarity::fit(&fit, &fit[..20], "a", "b").unwrap();
        let text = serde_json::to_string(&f).unwrap();
        let back: Familiarity = serde_json::from_str(&text).unwrap();
        assert_eq!(back, f);
        assert_eq!(
            Familiarity::fit(&fit[..3], &fit, "a", "b"),
            Err(FamiliarityError::TooFew { need: 8, got: 3 })
        );
    }

    #[test]
    fn jacobi_finds_the_eigenvalues_of_a_small_matrix() {
        let mut a = vec![2.0, 1.0, 1.0, 2.0];
        let (mut values, _) = jacobi(&mut a, 2);
        values.sort_by(f64::total_cmp);
        assert!((values[0] - 1.0).abs() < 1e-9 && (values[1] - 3.0).abs() < 1e-9);
    }
}
