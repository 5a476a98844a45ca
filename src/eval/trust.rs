//! How well the trust marks work, per capability: the share of answers marked unfamiliar,
//! the accuracy among the unmarked ones (beside the accuracy of all), the share of wrong
//! answers that were marked, each with a bootstrap interval, and the expected calibration
//! error of the shown confidence before and after calibration (with its reliability bins);
//! and whether clearly foreign inputs (a flat grey card, random noise, a page of text) are
//! marked by every model.

use super::metrics::interval;
use crate::plumbing::Rng;
use crate::trust::calibration::{BINS, Bin, ece, reliability};
use image::{DynamicImage, Rgb, RgbImage};
use serde::Serialize;

/// One answer as the evaluation sees it.
#[derive(Debug, Clone, Copy)]
pub struct Item {
    /// Its input was beyond the model's familiarity threshold.
    pub marked: bool,
    /// The answer was right.
    pub right: bool,
    /// The confidence shown without calibration (the vote share, the head's output).
    pub raw: f64,
    /// The calibrated confidence, when the model has a calibration.
    pub calibrated: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Value {
    pub value: f64,
    pub ci: [f64; 2],
}

/// One capability on one data set.
#[derive(Debug, Clone, Serialize)]
pub struct TrustRow {
    pub capability: String,
    pub data: String,
    pub answers: usize,
    pub marked: Value,
    pub accuracy_all: Value,
    pub accuracy_unmarked: Value,
    /// Of the wrong answers, the share marked.
    pub wrong_marked: Value,
    pub ece_raw: Value,
    pub ece_calibrated: Option<Value>,
    pub bins_raw: Vec<Bin>,
    pub bins_calibrated: Option<Vec<Bin>>,
}

/// Bootstrap resamples of every interval.
pub const RESAMPLES: usize = 500;

/// The figures of `items`, intervals from `RESAMPLES` bootstrap resamples of the answers.
pub fn row(capability: &str, data: &str, items: &[Item], seed: u64) -> TrustRow {
    let n = items.len();
    let mut rng = Rng::new(seed).fork(0x7_2057);
    let draws: Vec<Vec<usize>> = (0..RESAMPLES)
        .map(|_| (0..n).map(|_| rng.below(n.max(1))).collect())
        .collect();
    let figure = |f: &dyn Fn(&[&Item]) -> f64| -> Value {
        let all: Vec<&Item> = items.iter().collect();
        Value {
            value: f(&all),
            ci: interval(
                draws
                    .iter()
                    .map(|d| f(&d.iter().filter_map(|&i| items.get(i)).collect::<Vec<_>>()))
                    .collect(),
            ),
        }
    };
    let share = |xs: &[&Item], keep: &dyn Fn(&Item) -> bool, hit: &dyn Fn(&Item) -> bool| {
        let kept: Vec<&&Item> = xs.iter().filter(|i| keep(i)).collect();
        if kept.is_empty() {
            f64::NAN
        } else {
            kept.iter().filter(|i| hit(i)).count() as f64 / kept.len() as f64
        }
    };
    let calibration = |xs: &[&Item], calibrated: bool| -> f64 {
        let (c, ok): (Vec<f64>, Vec<bool>) = xs
            .iter()
            .map(|i| {
                let c = if calibrated {
                    i.calibrated.unwrap_or(i.raw)
                } else {
                    i.raw
                };
                (c, i.right)
            })
            .unzip();
        ece(&c, &ok, BINS)
    };
    let has_calibration = items.iter().any(|i| i.calibrated.is_some());
    let conf = |calibrated: bool| -> (Vec<f64>, Vec<bool>) {
        items
            .iter()
            .map(|i| {
                (
                    if calibrated {
                        i.calibrated.unwrap_or(i.raw)
                    } else {
                        i.raw
                    },
                    i.right,
                )
            })
            .unzip()
    };
    let (rc, rok) = conf(false);
    TrustRow {
        capability: capability.to_string(),
        data: data.to_string(),
        answers: n,
        marked: figure(&|xs| share(xs, &|_| true, &|i| i.marked)),
        accuracy_all: figure(&|xs| share(xs, &|_| true, &|i| i.right)),
        accuracy_unmarked: figure(&|xs| share(xs, &|i| !i.marked, &|i| i.right)),
        wrong_marked: figure(&|xs| share(xs, &|i| !i.right, &|i| i.marked)),
        ece_raw: figure(&|xs| calibration(xs, false)),
        ece_calibrated: has_calibration.then(|| figure(&|xs| calibration(xs, true))),
        bins_raw: reliability(&rc, &rok, BINS),
        bins_calibrated: has_calibration.then(|| {
            let (c, ok) = conf(true);
            reliability(&c, &ok, BINS)
        }),
    }
}

/// The foreign inputs every model must mark: a flat grey card, random noise and a page of
/// dark text on paper, `size` pixels square.
pub fn foreign_inputs(size: u32) -> Vec<(String, DynamicImage)> {
    let grey = RgbImage::from_pixel(size, size, Rgb([128, 128, 128]));
    let mut rng = Rng::new(0xF0E1);
    let noise = RgbImage::from_fn(size, size, |_, _| {
        Rgb([
            rng.below(256) as u8,
            rng.below(256) as u8,
            rng.below(256) as u8,
        ])
    });
    let mut page = RgbImage::from_pixel(size, size, Rgb([236, 232, 220]));
    let lines = [
        "THE PATIENT WAS PREPARED WITH",
        "POLYETHYLENE GLYCOL. THE SCOPE",
        "WAS ADVANCED TO THE CAECUM.",
        "A 6 MM SESSILE POLYP WAS FOUND",
        "IN THE SIGMOID AND REMOVED BY",
        "COLD SNARE. HISTOLOGY PENDING.",
        "SURVEILLANCE IN THREE YEARS.",
    ];
    let step = (size / 12).max(20);
    for (k, line) in lines
        .iter()
        .cycle()
        .take(((size - 10) / step) as usize)
        .enumerate()
    {
        super::report::draw::text(&mut page, line, 8, 8 + k as u32 * step, Rgb([25, 25, 35]));
    }
    vec![
        ("a flat grey card".into(), DynamicImage::ImageRgb8(grey)),
        ("random noise".into(), DynamicImage::ImageRgb8(noise)),
        ("a page of text".into(), DynamicImage::ImageRgb8(page)),
    ]
}

/// Twins on a held-out library: every polyp with a pathology votes among the library's
/// polyps of other examinations; marked when its views' mean familiarity score is beyond the
/// threshold.
pub fn twin_items(
    models: &crate::twins::TwinModels,
    store: &crate::store::Store,
    progress: &crate::plumbing::Progress,
) -> Result<Vec<Item>, crate::twins::TwinError> {
    use crate::twins::trust;
    let g = trust::gather(store, models, "", progress)?;
    let familiarity = models.image_card.familiarity.as_ref();
    let calibration = models.image_card.calibration.get(crate::trust::VOTE);
    let pool: Vec<&trust::GatheredPolyp> = g.polyps.iter().collect();
    let mut items = Vec::new();
    let mut at = 0;
    for (p, &n) in g.polyps.iter().zip(&g.view_counts) {
        let views = &g.views[at..at + n];
        at += n;
        let Some((share, right)) = trust::vote(p, &pool, trust::VOTE_K) else {
            continue;
        };
        let marked = familiarity.is_some_and(|f| {
            let refs: Vec<&[f32]> = views.iter().map(Vec::as_slice).collect();
            f.judge("", &refs).unfamiliar
        });
        items.push(Item {
            marked,
            right,
            raw: share,
            calibrated: calibration.map(|c| c.confidence(share)),
        });
    }
    Ok(items)
}

/// Whether each polyp of a library (with or without a pathology) is marked unfamiliar to
/// the twin image encoder.
pub fn twin_marks(
    models: &crate::twins::TwinModels,
    store: &crate::store::Store,
    progress: &crate::plumbing::Progress,
) -> Result<Vec<bool>, crate::twins::TwinError> {
    let g = crate::twins::trust::gather(store, models, "", progress)?;
    let Some(f) = models.image_card.familiarity.as_ref() else {
        return Ok(vec![false; g.polyps.len()]);
    };
    let mut at = 0;
    Ok(g.view_counts
        .iter()
        .map(|&n| {
            let refs: Vec<&[f32]> = g.views[at..at + n].iter().map(Vec::as_slice).collect();
            at += n;
            f.judge("", &refs).unfamiliar
        })
        .collect())
}

/// Caption categories on a library's captioned capsule frames: right when the top category
/// is the finding's; the raw confidence is the head's sigmoid at it.
pub fn caption_items(
    loaded: &crate::captions::model::LoadedCaptionModel,
    store: &crate::store::Store,
    device: &burn::tensor::Device,
    progress: &crate::plumbing::Progress,
) -> Result<Vec<Item>, crate::captions::query::CaptionQueryError> {
    use crate::captions::{CATEGORIES, trust};
    let g = trust::gather(store, loaded, "", device, progress)?;
    Ok(g.embeddings
        .iter()
        .zip(&g.logits)
        .zip(&g.truth)
        .map(|((e, l), &t)| {
            let top = trust::top_category(l);
            let k = CATEGORIES.iter().position(|c| *c == top).unwrap_or(0);
            Item {
                marked: trust::judge(&loaded.card, e).is_some_and(|j| j.unfamiliar),
                right: k == t,
                raw: 1.0 / (1.0 + (-(l[k] as f64)).exp()),
                calibrated: trust::confidence(&loaded.card, l, &top).map(f64::from),
            }
        })
        .collect())
}

/// The detector on a library's stills: right when its polyp probability is on the side of
/// one half the frame is on; the confidence is that side's probability.
pub fn detector_items(
    loaded: &crate::prompts::model::LoadedPromptModel,
    store: &crate::store::Store,
    frames: usize,
    device: &burn::tensor::Device,
    progress: &crate::plumbing::Progress,
) -> Result<Vec<Item>, crate::prompts::query::PromptError> {
    use crate::prompts::trust;
    let g = trust::gather(
        store,
        loaded,
        "",
        frames,
        trust::Crops::No,
        device,
        progress,
    )?;
    Ok(g.features
        .iter()
        .zip(&g.probability)
        .zip(&g.truth)
        .map(|((f, &p), &t)| detector_item(&loaded.card, f, p, t))
        .collect())
}

/// The detector's answer on one frame (polyp when its probability `p` is at least one half):
/// right when that is the `truth`, its confidence the probability of the side it is on, marked
/// when the frame's familiarity `features` are beyond the card's threshold.
pub fn detector_item(
    card: &crate::model::weights::ModelCard,
    features: &[f32],
    p: f32,
    truth: bool,
) -> Item {
    use crate::prompts::trust;
    let side = |p: f64| (if p >= 0.5 { p } else { 1.0 - p }, (p >= 0.5) == truth);
    let (raw, right) = side(p as f64);
    Item {
        marked: trust::judge(card, &[features.to_vec()]).is_some_and(|j| j.unfamiliar),
        right,
        raw,
        calibrated: trust::calibrated(card, p).map(|c| side(c as f64).0),
    }
}

/// Whether each model marks each foreign input: (model, input, score, threshold, marked).
pub fn foreign_marks(
    twins: Option<&crate::twins::TwinModels>,
    captions: Option<&crate::captions::model::LoadedCaptionModel>,
    prompts: &[&crate::prompts::model::LoadedPromptModel],
    device: &burn::tensor::Device,
) -> Vec<crate::trust::Judgement> {
    let inputs = foreign_inputs(256);
    let mut out = Vec::new();
    let named = |mut j: crate::trust::Judgement, input: &str| {
        j.model = format!("{} on {input}", j.model);
        j
    };
    for (name, image) in &inputs {
        if let Some(m) = twins {
            let views = [(image.clone(), crate::model::preprocess::Focus::FieldOfView)];
            let (_, scores) = m.encode_views_judged(&views);
            if let Some(j) = crate::twins::trust::judge(m, scores.as_deref()) {
                out.push(named(j, name));
            }
        }
        if let Some(c) = captions {
            let v = crate::captions::query::image_embeddings(
                &c.model,
                &c.config,
                std::slice::from_ref(image),
                device,
            );
            let rows = crate::captions::query::rows(v);
            if let Some(j) = crate::captions::trust::judge(&c.card, &rows[0]) {
                out.push(named(j, name));
            }
        }
        for p in prompts {
            let e = crate::prompts::query::encode(p, std::slice::from_ref(image), device);
            if let Some(j) = crate::prompts::trust::judge(&p.card, &e.features) {
                out.push(named(j, name));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trust_figures_count_what_they_say() {
        let item = |marked, right| Item {
            marked,
            right,
            raw: 0.9,
            calibrated: Some(if right { 1.0 } else { 0.0 }),
        };
        // 4 answers: 2 wrong (1 marked), 1 right marked, 1 right unmarked.
        let items = [
            item(true, false),
            item(false, false),
            item(true, true),
            item(false, true),
        ];
        let r = row("t", "d", &items, 1);
        assert_eq!(r.answers, 4);
        assert!((r.marked.value - 0.5).abs() < 1e-12);
        assert!((r.accuracy_all.value - 0.5).abs() < 1e-12);
        assert!((r.accuracy_unmarked.value - 0.5).abs() < 1e-12);
        assert!((r.wrong_marked.value - 0.5).abs() < 1e-12);
        // Raw 0.9 for a half-right set: ECE 0.4; calibrated 1 / 0 exactly: 0.
        assert!((r.ece_raw.value - 0.4).abs() < 1e-12);
        assert!(r.ece_calibrated.unwrap().value.abs() < 1e-12);
    }
}
