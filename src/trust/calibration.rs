//! Calibrated confidence: a number shown as "confidence" should be right that often. Softmax
//! heads (the caption category, the detector's two sentences) are calibrated by one
//! temperature fitted on validation (negative log-likelihood); the twins' vote shares, which
//! are counts over k neighbours, by isotonic regression (pool-adjacent-violators) of "this
//! label is the truth" on its share. Both are checked by the expected calibration error over
//! equal-width bins of the top confidence.

use serde::{Deserialize, Serialize};

/// Bins of the expected calibration error and the reliability diagram.
pub const BINS: usize = 15;

/// A fitted map from raw to calibrated confidence, with what it was fitted on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub map: CalibrationMap,
    pub fitted_on: String,
    /// Answers it was fitted on.
    pub answers: usize,
    /// Expected calibration error of the top confidence on the fitting data, raw and
    /// calibrated (an optimistic figure: `eval trust` reports it on held-out data).
    pub ece_raw: f64,
    pub ece_fitted: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum CalibrationMap {
    /// Softmax of logits / temperature.
    Temperature { temperature: f64 },
    /// Piecewise-linear through the points (raw, calibrated), raw ascending; flat outside.
    Isotonic { raw: Vec<f64>, calibrated: Vec<f64> },
}

impl Calibration {
    /// Calibrated class probabilities from logits (a temperature map; an isotonic map maps
    /// each value on its own).
    pub fn probabilities(&self, logits: &[f64]) -> Vec<f64> {
        match &self.map {
            CalibrationMap::Temperature { temperature } => softmax(logits, *temperature),
            CalibrationMap::Isotonic { .. } => logits.iter().map(|v| self.confidence(*v)).collect(),
        }
    }

    /// The calibrated confidence of an answer whose raw confidence is `raw` (an isotonic map;
    /// a temperature map returns `raw`, which it cannot rescale alone).
    pub fn confidence(&self, raw: f64) -> f64 {
        match &self.map {
            CalibrationMap::Isotonic {
                raw: xs,
                calibrated,
            } => interpolate(xs, calibrated, raw),
            CalibrationMap::Temperature { .. } => raw,
        }
    }

    /// Whether the stored map can be used.
    pub fn check(&self) -> Result<(), String> {
        match &self.map {
            CalibrationMap::Temperature { temperature } => (temperature.is_finite()
                && *temperature > 0.0)
                .then_some(())
                .ok_or_else(|| format!("temperature {temperature} is not a positive number")),
            CalibrationMap::Isotonic { raw, calibrated } => {
                let ok = !raw.is_empty()
                    && raw.len() == calibrated.len()
                    && raw.windows(2).all(|w| w[0] <= w[1])
                    && calibrated.iter().all(|v| (0.0..=1.0).contains(v));
                ok.then_some(())
                    .ok_or_else(|| "isotonic map is not ascending within [0, 1]".to_string())
            }
        }
    }
}

/// Softmax of `logits / temperature`.
pub fn softmax(logits: &[f64], temperature: f64) -> Vec<f64> {
    let t = temperature.max(1e-6);
    let top = logits.iter().copied().fold(f64::MIN, f64::max);
    let e: Vec<f64> = logits.iter().map(|z| ((z - top) / t).exp()).collect();
    let total: f64 = e.iter().sum();
    e.iter().map(|v| v / total).collect()
}

/// The temperature minimising the negative log-likelihood of `truth` under
/// softmax(`logits` / T), searched on log T in [1/20, 20] (golden section).
pub fn fit_temperature(logits: &[Vec<f64>], truth: &[usize]) -> f64 {
    let nll = |log_t: f64| -> f64 {
        let t = log_t.exp();
        logits
            .iter()
            .zip(truth)
            .map(|(z, &y)| -softmax(z, t)[y].max(1e-12).ln())
            .sum()
    };
    let (mut lo, mut hi) = ((1.0f64 / 20.0).ln(), 20f64.ln());
    let g = (5f64.sqrt() - 1.0) / 2.0;
    let (mut a, mut b) = (hi - g * (hi - lo), lo + g * (hi - lo));
    let (mut fa, mut fb) = (nll(a), nll(b));
    for _ in 0..80 {
        if fa < fb {
            hi = b;
            b = a;
            fb = fa;
            a = hi - g * (hi - lo);
            fa = nll(a);
        } else {
            lo = a;
            a = b;
            fa = fb;
            b = lo + g * (hi - lo);
            fb = nll(b);
        }
    }
    ((lo + hi) / 2.0).exp()
}

/// Isotonic regression of `hits` (1 or 0) on `scores`: the non-decreasing step function
/// closest in squared error, as (raw, calibrated) points at each block's mean score.
pub fn fit_isotonic(scores: &[f64], hits: &[bool]) -> (Vec<f64>, Vec<f64>) {
    let mut pairs: Vec<(f64, f64)> = scores
        .iter()
        .zip(hits)
        .map(|(s, h)| (*s, if *h { 1.0 } else { 0.0 }))
        .collect();
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Blocks of (sum of scores, sum of hits, count); equal scores start in one block.
    let mut blocks: Vec<(f64, f64, f64)> = Vec::new();
    for (s, h) in pairs {
        match blocks.last_mut() {
            Some(last) if last.0 / last.2 == s => {
                last.0 += s;
                last.1 += h;
                last.2 += 1.0;
            }
            _ => blocks.push((s, h, 1.0)),
        }
        while blocks.len() > 1 {
            let n = blocks.len();
            let (a, b) = (blocks[n - 2], blocks[n - 1]);
            if a.1 / a.2 <= b.1 / b.2 {
                break;
            }
            blocks.pop();
            blocks[n - 2] = (a.0 + b.0, a.1 + b.1, a.2 + b.2);
        }
    }
    blocks.iter().map(|b| (b.0 / b.2, b.1 / b.2)).unzip()
}

fn interpolate(xs: &[f64], ys: &[f64], x: f64) -> f64 {
    if xs.is_empty() {
        return x;
    }
    if x <= xs[0] {
        return ys[0];
    }
    for i in 1..xs.len() {
        if x <= xs[i] {
            let span = xs[i] - xs[i - 1];
            let w = if span > 0.0 {
                (x - xs[i - 1]) / span
            } else {
                1.0
            };
            return ys[i - 1] + w * (ys[i] - ys[i - 1]);
        }
    }
    ys[ys.len() - 1]
}

/// One bin of a reliability diagram.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bin {
    pub low: f64,
    pub high: f64,
    pub answers: usize,
    pub mean_confidence: f64,
    pub accuracy: f64,
}

/// Equal-width bins of the confidence (the last includes 1.0), each with its answers' mean
/// confidence and share right.
pub fn reliability(confidence: &[f64], correct: &[bool], bins: usize) -> Vec<Bin> {
    let mut out: Vec<Bin> = (0..bins)
        .map(|b| Bin {
            low: b as f64 / bins as f64,
            high: (b + 1) as f64 / bins as f64,
            answers: 0,
            mean_confidence: 0.0,
            accuracy: 0.0,
        })
        .collect();
    for (c, ok) in confidence.iter().zip(correct) {
        let b = ((c * bins as f64).floor() as usize).min(bins - 1);
        out[b].answers += 1;
        out[b].mean_confidence += c;
        out[b].accuracy += if *ok { 1.0 } else { 0.0 };
    }
    for b in &mut out {
        if b.answers > 0 {
            b.mean_confidence /= b.answers as f64;
            b.accuracy /= b.answers as f64;
        }
    }
    out
}

/// Expected calibration error: the answers' share-weighted mean gap between confidence and
/// accuracy over `bins` equal-width bins. 0 for no answers.
pub fn ece(confidence: &[f64], correct: &[bool], bins: usize) -> f64 {
    let n = confidence.len();
    if n == 0 {
        return 0.0;
    }
    reliability(confidence, correct, bins)
        .iter()
        .map(|b| b.answers as f64 / n as f64 * (b.mean_confidence - b.accuracy).abs())
        .sum()
}

/// Fits a temperature on validation logits and their true classes.
pub fn temperature(logits: &[Vec<f64>], truth: &[usize], fitted_on: &str) -> Calibration {
    let t = fit_temperature(logits, truth);
    let top = |probs: &[Vec<f64>]| -> (Vec<f64>, Vec<bool>) {
        probs
            .iter()
            .zip(truth)
            .map(|(p, &y)| {
                let best = argmax(p);
                (p[best], best == y)
            })
            .unzip()
    };
    let (raw_c, raw_ok) = top(&logits.iter().map(|z| softmax(z, 1.0)).collect::<Vec<_>>());
    let (c, ok) = top(&logits.iter().map(|z| softmax(z, t)).collect::<Vec<_>>());
    Calibration {
        map: CalibrationMap::Temperature { temperature: t },
        fitted_on: fitted_on.into(),
        answers: truth.len(),
        ece_raw: ece(&raw_c, &raw_ok, BINS),
        ece_fitted: ece(&c, &ok, BINS),
    }
}

/// Fits an isotonic map of "the answer is right" on its raw confidence (the vote winner's
/// share), on validation answers.
pub fn isotonic(raw: &[f64], right: &[bool], fitted_on: &str) -> Calibration {
    let (points, calibrated) = fit_isotonic(raw, right);
    let mut out = Calibration {
        map: CalibrationMap::Isotonic {
            raw: points,
            calibrated,
        },
        fitted_on: fitted_on.into(),
        answers: raw.len(),
        ece_raw: ece(raw, right, BINS),
        ece_fitted: 0.0,
    };
    let mapped: Vec<f64> = raw.iter().map(|r| out.confidence(*r)).collect();
    out.ece_fitted = ece(&mapped, right, BINS);
    out
}

/// Position of the largest value (the first of equals).
pub fn argmax(values: &[f64]) -> usize {
    let mut best = 0;
    for (i, v) in values.iter().enumerate() {
        if *v > values[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_expected_calibration_error_matches_hand_values() {
        // Two bins of 0.5: [0.2, 0.4] right 1 of 2 (gap |0.3 - 0.5| = 0.2), [0.9, 0.7] right
        // 2 of 2 (gap |0.8 - 1| = 0.2): ECE = 0.5 * 0.2 + 0.5 * 0.2 = 0.2.
        let conf = [0.2, 0.4, 0.9, 0.7];
        let ok = [true, false, true, true];
        assert!((ece(&conf, &ok, 2) - 0.2).abs() < 1e-12);
        // 15 bins: 0.95 right, 0.95 wrong, 0.05 wrong: (2/3)*|0.95-0.5| + (1/3)*0.05.
        let e = ece(&[0.95, 0.95, 0.05], &[true, false, false], BINS);
        assert!((e - (2.0 / 3.0 * 0.45 + 0.05 / 3.0)).abs() < 1e-12, "{e}");
        // Confidence 1.0 falls in the last bin; nothing gives 0.
        assert_eq!(reliability(&[1.0], &[true], 15)[14].answers, 1);
        assert_eq!(ece(&[], &[], BINS), 0.0);
    }

    #[test]
    fn a_temperature_undoes_overconfidence() {
        // Logits scaled by 4: the true temperature is 4.
        let mut rng = crate::plumbing::Rng::new(3);
        let mut logits = Vec::new();
        let mut truth = Vec::new();
        for _ in 0..3000 {
            let z: Vec<f64> = (0..3).map(|_| rng.normal() as f64).collect();
            let p = softmax(&z, 1.0);
            let u = rng.f32() as f64;
            let y = if u < p[0] {
                0
            } else if u < p[0] + p[1] {
                1
            } else {
                2
            };
            logits.push(z.iter().map(|v| v * 4.0).collect());
            truth.push(y);
        }
        let c = temperature(&logits, &truth, "synthetic");
        let CalibrationMap::Temperature { temperature: t } = c.map else {
            panic!()
        };
        assert!((t - 4.0).abs() < 0.5, "{t}");
        assert!(c.ece_fitted < 0.03 && c.ece_raw > 0.1, "{c:?}");
    }

    #[test]
    fn isotonic_pools_violators_and_stays_monotone() {
        let (x, y) = fit_isotonic(&[0.1, 0.2, 0.3, 0.4], &[false, true, false, true]);
        assert_eq!(x.len(), 3);
        assert_eq!(y, vec![0.0, 0.5, 1.0]);
        assert!((x[1] - 0.25).abs() < 1e-12);
        // A unanimous vote right half the time is worth 0.5, not 1.
        let c = isotonic(&[1.0, 1.0, 0.5, 0.5], &[true, false, true, false], "t");
        c.check().unwrap();
        assert!((c.confidence(1.0) - 0.5).abs() < 1e-12);
        assert!(c.ece_raw > 0.2 && c.ece_fitted < 1e-12, "{c:?}");
    }
}
