//! `endotwin eval prompts` (METHODS §1): on held-out examination records, zero-shot polyp
//! detection per frame (the stage-1 models, fixed prompts), zero-shot benign (Vienna 1) vs
//! neoplastic (Vienna 3-5) per polyp (the stage-3 model), few-shot linear probes on frozen
//! image embeddings, a colour-histogram + logistic-regression baseline (cross-fitted over
//! examinations), the untrained model, plain CLIP and the ablations, each with a 95 %
//! bootstrap interval over examinations. Nothing here trains a tower.

use super::baselines::features;
use super::metrics::{auroc, average_precision, interval};
use super::probes::Logistic;
use crate::plumbing::Rng;
use crate::prompts::model::{LoadedPromptModel, PromptModel, PromptModelConfig};
use crate::prompts::records::{Records, frame_truth};
use crate::prompts::{PromptSet, default_set};
use crate::store::{Store, StoreError};
use burn::tensor::activation::softmax;
use burn::tensor::{Device, Tensor, TensorData};
use std::collections::HashMap;

/// Area under the ROC and precision-recall curves with their 95 % intervals.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Curves {
    pub auroc: f64,
    pub auroc_ci: [f64; 2],
    pub aupr: f64,
    pub aupr_ci: [f64; 2],
    /// Items scored (frames or polyps) and positives among them.
    pub n: usize,
    pub positives: usize,
}

/// A model to evaluate: its label in the report and the loaded model.
pub struct Named<'a> {
    pub label: String,
    pub model: &'a PromptModel,
    pub config: &'a PromptModelConfig,
}

impl<'a> Named<'a> {
    pub fn of(label: &str, m: &'a LoadedPromptModel) -> Named<'a> {
        Named {
            label: label.to_string(),
            model: &m.model,
            config: &m.config,
        }
    }
}

/// Per polyp: its examination index, its frames (exam, frame), neoplastic (Vienna >= 3).
type HeldOutPolyp = (usize, Vec<(usize, usize)>, bool);

/// Scored items of one held-out library: frames (detection) and polyps (pathology).
pub struct HeldOutItems {
    records: Records,
    /// Per frame (exam, frame): whether it shows a polyp.
    frames: Vec<(usize, usize, bool)>,
    polyps: Vec<HeldOutPolyp>,
    resamples: Vec<Vec<f64>>,
}

impl HeldOutItems {
    pub fn load(store: &Store, size: u32, seed: u64) -> Result<HeldOutItems, String> {
        let records = Records::load(store, size, &crate::plumbing::Progress::new())
            .map_err(|e| e.to_string())?;
        // A held-out frame that cannot be read (changed on disk since import) would leave the
        // figures over fewer frames without a word (round 7 N71); as `eval phantom` does, the
        // evaluation is refused.
        if let Some(first) = records.skipped.first() {
            return Err(format!(
                "{} held-out frame(s) cannot be read, first: {first}; figures without them \
                 would not be the held-out set's: restore them (`library check` names every \
                 one); nothing was evaluated",
                records.skipped.len()
            ));
        }
        let truth = frame_truth(store).map_err(|e: StoreError| e.to_string())?;
        let vienna: HashMap<i64, Option<i64>> = store
            .polyps()
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|p| (p.id, p.vienna_class))
            .collect();
        let mut frames = Vec::new();
        let mut by_polyp: HashMap<i64, (usize, Vec<(usize, usize)>)> = HashMap::new();
        for (e, exam) in records.exams.iter().enumerate() {
            for (f, frame) in exam.frames.iter().enumerate() {
                let polyp = truth.get(&frame.media_id);
                frames.push((e, f, polyp.is_some()));
                if let Some(p) = polyp {
                    by_polyp.entry(*p).or_insert((e, Vec::new())).1.push((e, f));
                }
            }
        }
        let mut ids: Vec<i64> = by_polyp.keys().copied().collect();
        ids.sort_unstable();
        let polyps = ids
            .into_iter()
            .filter_map(|id| {
                let v = vienna.get(&id).copied().flatten()?;
                let (e, f) = by_polyp.remove(&id)?;
                Some((e, f, v >= 3))
            })
            .collect();
        let exams = records.exams.len();
        let mut rng = Rng::new(seed).fork(0xB007);
        let resamples = (0..200)
            .map(|_| {
                let mut w = vec![0.0; exams];
                for _ in 0..exams {
                    w[rng.below(exams)] += 1.0;
                }
                w
            })
            .collect();
        Ok(HeldOutItems {
            records,
            frames,
            polyps,
            resamples,
        })
    }

    pub fn examinations(&self) -> usize {
        self.records.exams.len()
    }

    pub fn frame_count(&self) -> (usize, usize) {
        let pos = self.frames.iter().filter(|f| f.2).count();
        (self.frames.len(), pos)
    }

    pub fn polyp_count(&self) -> (usize, usize) {
        let benign = self.polyps.iter().filter(|p| !p.2).count();
        (self.polyps.len(), benign)
    }

    /// Unit image embeddings of every frame, by (exam, frame).
    fn embeddings(&self, m: &Named, device: &Device) -> HashMap<(usize, usize), Vec<f32>> {
        let keys: Vec<(usize, usize)> = self.frames.iter().map(|&(e, f, _)| (e, f)).collect();
        let mut out = HashMap::new();
        for chunk in keys.chunks(128) {
            let v = m
                .model
                .encode_images(self.records.batch_for(chunk, &m.config.input(), device));
            let d = v.dims()[1];
            let flat: Vec<f32> = v.into_data().try_to_vec().expect("f32 embeddings");
            for (k, key) in chunk.iter().enumerate() {
                out.insert(*key, flat[k * d..(k + 1) * d].to_vec());
            }
        }
        out
    }

    /// Zero-shot detection: the polyp sentence's probability for every frame.
    pub fn detection(&self, m: &Named, device: &Device) -> Curves {
        self.curves(&self.detection_items(m, device))
    }

    /// [`Self::detection`]'s items: (score, shows a polyp, examination) per frame.
    pub fn detection_items(&self, m: &Named, device: &Device) -> Vec<(f64, bool, usize)> {
        let emb = self.embeddings(m, device);
        let set = default_set("polyp vs background");
        let rows: Vec<Vec<f32>> = self
            .frames
            .iter()
            .map(|&(e, f, _)| emb[&(e, f)].clone())
            .collect();
        let scores = class_scores(m, &rows, &set, "polyp", device);
        let items: Vec<(f64, bool, usize)> = self
            .frames
            .iter()
            .zip(scores)
            .map(|(&(e, _, y), s)| (s, y, e))
            .collect();
        items
    }

    /// Zero-shot pathology: the neoplastic prompts' summed probability for every polyp (its
    /// views' mean embedding).
    pub fn pathology(&self, m: &Named, device: &Device) -> Curves {
        self.curves(&self.pathology_items(m, device))
    }

    /// [`Self::pathology`]'s items: (neoplastic score, neoplastic, examination) per polyp.
    pub fn pathology_items(&self, m: &Named, device: &Device) -> Vec<(f64, bool, usize)> {
        let rows = self.polyp_rows(m, device);
        let set = default_set("benign vs neoplastic");
        let scores = class_scores(m, &rows, &set, "neoplastic", device);
        let items: Vec<(f64, bool, usize)> = self
            .polyps
            .iter()
            .zip(scores)
            .map(|((e, _, y), s)| (s, *y, *e))
            .collect();
        items
    }

    fn polyp_rows(&self, m: &Named, device: &Device) -> Vec<Vec<f32>> {
        let emb = self.embeddings(m, device);
        self.polyps
            .iter()
            .map(|(_, frames, _)| mean_unit(frames.iter().map(|k| &emb[k])))
            .collect()
    }

    /// Few-shot probe on frozen embeddings: a logistic regression on the labelled frames (or
    /// polyps) of `share` of the examinations (drawn with the seed), scored on the rest.
    pub fn few_shot(
        &self,
        m: &Named,
        detection: bool,
        share: f64,
        seed: u64,
        device: &Device,
    ) -> Curves {
        let (rows, labels, exams) = if detection {
            let emb = self.embeddings(m, device);
            let rows: Vec<Vec<f32>> = self
                .frames
                .iter()
                .map(|&(e, f, _)| emb[&(e, f)].clone())
                .collect();
            let labels: Vec<bool> = self.frames.iter().map(|f| f.2).collect();
            let exams: Vec<usize> = self.frames.iter().map(|f| f.0).collect();
            (rows, labels, exams)
        } else {
            let rows = self.polyp_rows(m, device);
            let labels: Vec<bool> = self.polyps.iter().map(|p| p.2).collect();
            let exams: Vec<usize> = self.polyps.iter().map(|p| p.0).collect();
            (rows, labels, exams)
        };
        let mut order: Vec<usize> = (0..self.records.exams.len()).collect();
        Rng::new(seed).fork(0xFE57).shuffle(&mut order);
        let take = ((share * order.len() as f64).round() as usize).max(2);
        let train: std::collections::HashSet<usize> = order[..take].iter().copied().collect();
        self.probe(&rows, &labels, &exams, |e| train.contains(&e))
    }

    /// The colour-histogram + logistic-regression baseline, cross-fitted over 5 folds of
    /// examinations (each item scored by a model that never saw its examination).
    pub fn histogram(&self, detection: bool, seed: u64) -> Curves {
        let hist = |e: usize, f: usize| {
            let img = image::DynamicImage::ImageRgb8(self.records.exams[e].frames[f].image.clone());
            features(&img).1
        };
        let (rows, labels, exams): (Vec<Vec<f32>>, Vec<bool>, Vec<usize>) = if detection {
            (
                self.frames.iter().map(|&(e, f, _)| hist(e, f)).collect(),
                self.frames.iter().map(|f| f.2).collect(),
                self.frames.iter().map(|f| f.0).collect(),
            )
        } else {
            (
                self.polyps
                    .iter()
                    .map(|(_, frames, _)| {
                        let h: Vec<Vec<f32>> = frames.iter().map(|&(e, f)| hist(e, f)).collect();
                        mean_unit(h.iter())
                    })
                    .collect(),
                self.polyps.iter().map(|p| p.2).collect(),
                self.polyps.iter().map(|p| p.0).collect(),
            )
        };
        let mut fold: Vec<usize> = (0..self.records.exams.len()).map(|e| e % 5).collect();
        Rng::new(seed).fork(0xF01D).shuffle(&mut fold);
        let mut scores = vec![0.0; rows.len()];
        for k in 0..5 {
            let train: Vec<usize> = (0..rows.len()).filter(|&i| fold[exams[i]] != k).collect();
            let x: Vec<&Vec<f32>> = train.iter().map(|&i| &rows[i]).collect();
            let y: Vec<bool> = train.iter().map(|&i| labels[i]).collect();
            let model = Logistic::fit(&x, &y);
            for i in (0..rows.len()).filter(|&i| fold[exams[i]] == k) {
                scores[i] = model.p(&rows[i]);
            }
        }
        let items: Vec<(f64, bool, usize)> = (0..rows.len())
            .map(|i| (scores[i], labels[i], exams[i]))
            .collect();
        self.curves(&items)
    }

    fn probe(
        &self,
        rows: &[Vec<f32>],
        labels: &[bool],
        exams: &[usize],
        in_train: impl Fn(usize) -> bool,
    ) -> Curves {
        let train: Vec<usize> = (0..rows.len()).filter(|&i| in_train(exams[i])).collect();
        let x: Vec<&Vec<f32>> = train.iter().map(|&i| &rows[i]).collect();
        let y: Vec<bool> = train.iter().map(|&i| labels[i]).collect();
        let model = Logistic::fit(&x, &y);
        let items: Vec<(f64, bool, usize)> = (0..rows.len())
            .filter(|&i| !in_train(exams[i]))
            .map(|i| (model.p(&rows[i]), labels[i], exams[i]))
            .collect();
        self.curves(&items)
    }

    /// AUROC and AUPR of (score, positive, examination) items, with bootstrap intervals over
    /// examinations.
    pub fn curves(&self, items: &[(f64, bool, usize)]) -> Curves {
        let compute = |w: Option<&Vec<f64>>| {
            let mut s = Vec::new();
            let mut y = Vec::new();
            for &(score, label, e) in items {
                let times = w.map_or(1, |w| w[e] as usize);
                for _ in 0..times {
                    s.push(score);
                    y.push(label);
                }
            }
            (auroc(&s, &y), aupr(&s, &y))
        };
        let (a, p) = compute(None);
        let boot: Vec<(f64, f64)> = self.resamples.iter().map(|w| compute(Some(w))).collect();
        Curves {
            auroc: a,
            auroc_ci: interval(boot.iter().map(|b| b.0).collect()),
            aupr: p,
            aupr_ci: interval(boot.iter().map(|b| b.1).collect()),
            n: items.len(),
            positives: items.iter().filter(|i| i.1).count(),
        }
    }
}

/// A trained model's pathology AUROC beside its architecture's at several random
/// initialisations on the same polyps: a random model's ranking can be strong (and of random
/// sign), so one untrained row says little; the draws say how often chance alone gets there.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct UntrainedDraws {
    /// The trained model's zero-shot AUROC.
    pub trained: f64,
    /// Each draw's initialisation seed and AUROC, in draw order.
    pub seeds: Vec<u64>,
    pub aurocs: Vec<f64>,
    pub mean: f64,
    /// Standard deviation over the draws.
    pub sd: f64,
    /// Lower quartile, median and upper quartile of the draws.
    pub quartiles: [f64; 3],
    pub max: f64,
    /// How many draws reach the trained model's AUROC (>=).
    pub reaching_trained: usize,
}

impl UntrainedDraws {
    pub fn of(trained: f64, seeds: Vec<u64>, aurocs: Vec<f64>) -> UntrainedDraws {
        let n = aurocs.len().max(1) as f64;
        let mean = aurocs.iter().sum::<f64>() / n;
        let sd = (aurocs.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / n).sqrt();
        let mut sorted = aurocs.clone();
        sorted.sort_by(f64::total_cmp);
        // Linear interpolation between order statistics.
        let at = |q: f64| {
            if sorted.is_empty() {
                return f64::NAN;
            }
            let x = (sorted.len() - 1) as f64 * q;
            let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
            sorted[lo] + (sorted[hi] - sorted[lo]) * (x - lo as f64)
        };
        UntrainedDraws {
            trained,
            mean,
            sd,
            quartiles: [at(0.25), at(0.5), at(0.75)],
            max: sorted.last().copied().unwrap_or(f64::NAN),
            reaching_trained: aurocs.iter().filter(|&&a| a >= trained).count(),
            seeds,
            aurocs,
        }
    }
}

/// The initialisation seeds of `n` untrained draws for the evaluation seed `seed`: draw `i`
/// (from 1) is seeded `seed * 1000 + i`, so a draw can be rebuilt on its own.
pub fn draw_seeds(seed: u64, n: usize) -> Vec<u64> {
    (1..=n as u64)
        .map(|i| seed.wrapping_mul(1000).wrapping_add(i))
        .collect()
}

impl HeldOutItems {
    /// [`UntrainedDraws`] of the architecture `config` (each draw initialised on `device`
    /// seeded with its seed), beside the trained model's pathology AUROC `trained`.
    pub fn untrained_pathology_draws(
        &self,
        config: &PromptModelConfig,
        trained: f64,
        seeds: &[u64],
        device: &Device,
    ) -> UntrainedDraws {
        let aurocs = seeds
            .iter()
            .map(|&s| {
                device.seed(s);
                let model = config.init(device);
                let named = Named {
                    label: format!("untrained, seed {s}"),
                    model: &model,
                    config,
                };
                let items = self.pathology_items(&named, device);
                let scores: Vec<f64> = items.iter().map(|i| i.0).collect();
                let truth: Vec<bool> = items.iter().map(|i| i.1).collect();
                auroc(&scores, &truth)
            })
            .collect();
        UntrainedDraws::of(trained, seeds.to_vec(), aurocs)
    }
}

/// Area under the precision-recall curve (average precision) of `scores` ranked high first.
pub fn aupr(scores: &[f64], positive: &[bool]) -> f64 {
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| {
        scores[b]
            .total_cmp(&scores[a])
            .then(positive[a].cmp(&positive[b]))
    });
    let relevant: Vec<bool> = idx.iter().map(|&i| positive[i]).collect();
    let total = positive.iter().filter(|&&p| p).count();
    average_precision(&relevant, total)
}

/// The summed softmax probability of `class`'s prompts of `set`, per embedding row.
fn class_scores(
    m: &Named,
    rows: &[Vec<f32>],
    set: &PromptSet,
    class: &str,
    device: &Device,
) -> Vec<f64> {
    let refs: Vec<&str> = set.prompts.iter().map(String::as_str).collect();
    let t = m.model.encode_texts(m.config.tokens(&refs, device));
    let d = rows.first().map_or(0, Vec::len);
    let flat: Vec<f32> = rows.iter().flatten().copied().collect();
    let v = Tensor::<2>::from_data(TensorData::new(flat, [rows.len(), d]), device);
    let p = softmax(m.model.clip.logits(v, t), 1);
    let m_prompts = set.prompts.len();
    let p: Vec<f32> = p.into_data().try_to_vec().expect("f32 probabilities");
    let members = set.class(class);
    (0..rows.len())
        .map(|i| members.iter().map(|&j| p[i * m_prompts + j] as f64).sum())
        .collect()
}

fn mean_unit<'a>(rows: impl Iterator<Item = &'a Vec<f32>>) -> Vec<f32> {
    let mut out: Vec<f32> = Vec::new();
    for r in rows {
        if out.is_empty() {
            out = vec![0.0; r.len()];
        }
        out.iter_mut().zip(r).for_each(|(o, x)| *o += x);
    }
    let n = out.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    out.iter_mut().for_each(|x| *x /= n);
    out
}
