//! Baselines that need no learning, to show how hard the phantom is: re-identifying a polyp's
//! other views by nearest neighbour on downsampled raw pixels and on colour histograms, and
//! predicting pathology from colour histograms by k-NN vote with 5-fold cross-validation.

use super::metrics;
use crate::data::images;
use crate::store::{Store, StoreError};

/// Side of the raw-pixel thumbnail (RGB, so 3·S² values).
const RAW_SIDE: u32 = 16;
/// Colour histogram bins per channel.
const BINS: usize = 8;

#[derive(Debug, Clone, PartialEq)]
pub struct ReidResult {
    pub feature: &'static str,
    pub accuracy_at_1: f64,
    pub map: f64,
    pub queries: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PathologyResult {
    pub feature: &'static str,
    pub accuracy: f64,
    pub macro_f1: f64,
    pub majority_class_accuracy: f64,
    pub polyps: usize,
    pub classes: usize,
}

struct View {
    polyp: usize,
    raw: Vec<f32>,
    hist: Vec<f32>,
}

fn l2_normalise(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= n);
}

pub fn features(img: &image::DynamicImage) -> (Vec<f32>, Vec<f32>) {
    let small = img
        .resize_exact(RAW_SIDE, RAW_SIDE, image::imageops::FilterType::Triangle)
        .to_rgb8();
    let mut raw: Vec<f32> = small.as_raw().iter().map(|&v| v as f32 / 255.0).collect();
    let mean = raw.iter().sum::<f32>() / raw.len() as f32;
    raw.iter_mut().for_each(|x| *x -= mean);
    l2_normalise(&mut raw);
    // Histogram of the field only: black border and on-screen text are the same everywhere.
    let rgb = img.to_rgb8();
    let mut hist = vec![0.0f32; BINS * BINS * BINS];
    for p in rgb.pixels() {
        let [r, g, b] = p.0;
        if r as u32 + g as u32 + b as u32 <= 30 {
            continue;
        }
        let q = |v: u8| v as usize * BINS / 256;
        hist[(q(r) * BINS + q(g)) * BINS + q(b)] += 1.0;
    }
    // Square roots (Hellinger) so a few dominant bins do not decide everything.
    hist.iter_mut().for_each(|x| *x = x.sqrt());
    l2_normalise(&mut hist);
    (raw, hist)
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

struct Loaded {
    views: Vec<View>,
    /// Pathology class index per polyp, and class names.
    classes: Vec<usize>,
    names: Vec<String>,
}

fn load(store: &Store) -> Result<Loaded, StoreError> {
    let mut views = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut classes = Vec::new();
    for (pi, p) in store.polyps()?.iter().enumerate() {
        let h = p.histology.clone().unwrap_or_else(|| "unknown".into());
        let c = match names.iter().position(|n| *n == h) {
            Some(c) => c,
            None => {
                names.push(h);
                names.len() - 1
            }
        };
        classes.push(c);
        for m in store.polyp_views(p.id)? {
            // A view whose file changed is refused by name (as `eval twins` refuses it), not
            // dropped: figures over fewer views than the library holds would not say so.
            let bytes = store.read_media(&m)?;
            let Ok(d) = images::decode_bytes(bytes) else {
                continue;
            };
            let (raw, hist) = features(&d.image);
            views.push(View {
                polyp: pi,
                raw,
                hist,
            });
        }
    }
    Ok(Loaded {
        views,
        classes,
        names,
    })
}

fn reid(views: &[View], feature: &'static str, pick: impl Fn(&View) -> &[f32]) -> ReidResult {
    let mut acc = 0.0;
    let mut aps = 0.0;
    let mut queries = 0;
    for (i, q) in views.iter().enumerate() {
        let positives = views
            .iter()
            .enumerate()
            .filter(|(j, v)| *j != i && v.polyp == q.polyp)
            .count();
        if positives == 0 {
            continue;
        }
        let mut ranked: Vec<(f32, bool)> = views
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, v)| (cosine(pick(q), pick(v)), v.polyp == q.polyp))
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
        let rel: Vec<bool> = ranked.iter().map(|r| r.1).collect();
        acc += rel[0] as u8 as f64;
        aps += metrics::average_precision(&rel, positives);
        queries += 1;
    }
    let n = queries.max(1) as f64;
    ReidResult {
        feature,
        accuracy_at_1: acc / n,
        map: aps / n,
        queries,
    }
}

/// k-NN vote over polyps (mean histogram of their views), 5 folds by polyp index.
fn pathology(l: &Loaded, k: usize) -> PathologyResult {
    let n = l.classes.len();
    let dim = BINS * BINS * BINS;
    let mut per_polyp = vec![vec![0.0f32; dim]; n];
    for v in &l.views {
        for (a, b) in per_polyp[v.polyp].iter_mut().zip(&v.hist) {
            *a += b;
        }
    }
    per_polyp.iter_mut().for_each(|f| l2_normalise(f));
    let mut predicted = vec![0usize; n];
    for fold in 0..5 {
        for q in (0..n).filter(|i| i % 5 == fold) {
            let mut nn: Vec<(f32, usize)> = (0..n)
                .filter(|i| i % 5 != fold)
                .map(|i| (cosine(&per_polyp[q], &per_polyp[i]), l.classes[i]))
                .collect();
            nn.sort_by(|a, b| b.0.total_cmp(&a.0));
            let mut votes = vec![0usize; l.names.len()];
            for (_, c) in nn.iter().take(k) {
                votes[*c] += 1;
            }
            let best = *votes.iter().max().unwrap_or(&0);
            // Ties go to the class of the nearest neighbour among the tied ones.
            predicted[q] = nn
                .iter()
                .take(k)
                .find(|(_, c)| votes[*c] == best)
                .map(|(_, c)| *c)
                .unwrap_or(0);
        }
    }
    let mut counts = vec![0usize; l.names.len()];
    l.classes.iter().for_each(|&c| counts[c] += 1);
    PathologyResult {
        feature: "colour histogram, 6-NN vote",
        accuracy: metrics::accuracy(&l.classes, &predicted),
        macro_f1: metrics::macro_f1(&l.classes, &predicted, l.names.len()),
        majority_class_accuracy: *counts.iter().max().unwrap_or(&0) as f64 / n.max(1) as f64,
        polyps: n,
        classes: l.names.len(),
    }
}

/// Runs every baseline on the library's polyps.
pub fn run(store: &Store) -> Result<(Vec<ReidResult>, PathologyResult), StoreError> {
    let l = load(store)?;
    let reids = vec![
        reid(&l.views, "raw pixels 16x16", |v| &v.raw),
        reid(&l.views, "colour histogram 8x8x8", |v| &v.hist),
    ];
    Ok((reids, pathology(&l, 6)))
}
