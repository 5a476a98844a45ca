//! How far a twin answer can be trusted: the image encoder's familiarity with the views
//! (their embeddings against the statistics stored in its card) and the calibrated
//! confidence of the vote's winner (isotonic on validation votes, stored in the card).

use super::{TwinError, TwinModels, load_view};
use crate::plumbing::Progress;
use crate::retrieval::{Vote, majority};
use crate::store::Store;
use crate::trust::{Calibration, Familiarity, Judgement, calibration, familiarity};

/// Views per polyp that are encoded (the twin queries use up to four).
const VIEWS: usize = 4;

/// Neighbours of the vote whose calibration is fitted (the app and CLI default).
pub const VOTE_K: usize = 6;

/// A library as the twin encoder sees it: every view's familiarity features, and per polyp
/// its combined embedding, examination and pathology.
pub struct Gathered {
    pub name: String,
    pub views: Vec<Vec<f32>>,
    /// Where each view came from (its examination's source: a dataset folder, a phantom
    /// split): the familiarity threshold is set per source, as the detector's is.
    pub sources: Vec<String>,
    /// Views of each polyp, in `polyps` order (they follow each other in `views`).
    pub view_counts: Vec<usize>,
    pub polyps: Vec<GatheredPolyp>,
    /// Views whose file could not be read (named, with why): left out, and said so.
    pub left_out: Vec<String>,
}

pub struct GatheredPolyp {
    pub examination: i64,
    pub histology: Option<String>,
    pub embedding: Vec<f32>,
}

/// Encodes the first four views of every polyp of `store` (views that fail to decode are
/// left out, named in [`Gathered::left_out`]; a polyp without views is left out).
pub fn gather(
    store: &Store,
    models: &TwinModels,
    name: &str,
    progress: &Progress,
) -> Result<Gathered, TwinError> {
    let polyps = store.polyps()?;
    let sources = store.examination_sources()?;
    progress.stage("encoding the library's polyps", polyps.len() as u64);
    let mut out = Gathered {
        name: name.to_string(),
        views: Vec::new(),
        sources: Vec::new(),
        view_counts: Vec::new(),
        polyps: Vec::new(),
        left_out: Vec::new(),
    };
    for p in polyps {
        if progress.is_cancelled() {
            return Err(TwinError::Cancelled);
        }
        let mut images = Vec::new();
        for m in store.polyp_views(p.id)?.iter().take(VIEWS) {
            match load_view(store, m) {
                Ok(image) => images.push(image),
                Err(e) => out.left_out.push(format!("{}: {e}", m.source_path)),
            }
        }
        progress.inc();
        if images.is_empty() {
            continue;
        }
        let (views, features) =
            super::encode_with_features(&models.image, models.input(), &models.device, &images);
        out.polyps.push(GatheredPolyp {
            examination: p.examination_id,
            histology: p.histology.clone(),
            embedding: models.combine(&views),
        });
        out.view_counts.push(features.len());
        let source = sources.get(&p.examination_id).cloned().unwrap_or_default();
        out.sources
            .extend(std::iter::repeat_n(source, features.len()));
        out.views.extend(features);
    }
    Ok(out)
}

impl crate::trust::Gathered for Gathered {
    fn split(self, every: usize) -> (Gathered, Gathered) {
        let every = every.max(2);
        let mut kept = Gathered {
            name: format!("{} (all but every {every}th polyp)", self.name),
            views: Vec::new(),
            sources: Vec::new(),
            view_counts: Vec::new(),
            polyps: Vec::new(),
            left_out: self.left_out,
        };
        let mut held = Gathered {
            name: format!("{} (every {every}th polyp)", self.name),
            views: Vec::new(),
            sources: Vec::new(),
            view_counts: Vec::new(),
            polyps: Vec::new(),
            left_out: Vec::new(),
        };
        let mut views = self.views.into_iter();
        let mut sources = self.sources.into_iter();
        for (i, (p, n)) in self.polyps.into_iter().zip(self.view_counts).enumerate() {
            let into = if i % every == every - 1 {
                &mut held
            } else {
                &mut kept
            };
            into.views.extend(views.by_ref().take(n));
            into.sources.extend(sources.by_ref().take(n));
            into.view_counts.push(n);
            into.polyps.push(p);
        }
        (kept, held)
    }

    fn join(mut self, other: Gathered) -> Gathered {
        self.name = format!("{} + {}", self.name, other.name);
        self.views.extend(other.views);
        self.sources.extend(other.sources);
        self.view_counts.extend(other.view_counts);
        self.polyps.extend(other.polyps);
        self.left_out.extend(other.left_out);
        self
    }
}

/// Each polyp of `queries` with a pathology votes with its `k` nearest polyps with a
/// pathology in `pool` from other examinations (cosine of the combined embeddings): the
/// winner's share and whether it is the truth.
pub fn votes(queries: &[GatheredPolyp], pool: &[&GatheredPolyp], k: usize) -> Vec<(f64, bool)> {
    queries.iter().filter_map(|q| vote(q, pool, k)).collect()
}

/// [`votes`] for one polyp (None without a pathology or a neighbour).
pub fn vote(q: &GatheredPolyp, pool: &[&GatheredPolyp], k: usize) -> Option<(f64, bool)> {
    q.histology.as_ref()?;
    let mut nn: Vec<(f32, &GatheredPolyp)> = pool
        .iter()
        .filter(|p| p.histology.is_some() && p.examination != q.examination)
        .map(|p| (crate::retrieval::exact::dot(&q.embedding, &p.embedding), *p))
        .collect();
    nn.sort_by(|a, b| b.0.total_cmp(&a.0));
    let labels: Vec<&str> = nn
        .iter()
        .take(k)
        .filter_map(|(_, p)| p.histology.as_deref())
        .collect();
    let vote = majority(labels);
    let (winner, share) = vote.shares.first()?.clone();
    Some((share, Some(winner.as_str()) == q.histology.as_deref()))
}

/// Fits the encoder's familiarity on `fit`'s views (its threshold on `validation`'s views:
/// the highest of each source's own 95 % point, so a real dataset validated on, whose frames
/// lie farther out than the phantom's, is not marked whole) and the vote's calibration on
/// `validation`'s polyps voting among each other's of other examinations (none when fewer
/// than 20 validation polyps have a pathology).
pub fn fit(
    fit: &Gathered,
    validation: &Gathered,
) -> Result<(Familiarity, Option<Calibration>), familiarity::FamiliarityError> {
    let familiarity = Familiarity::fit_by_source(
        &fit.views,
        &validation.views,
        &validation.sources,
        &fit.name,
        &validation.name,
    )?;
    // The validation polyps vote among themselves, as a library's polyps do in the app and
    // as a held-out split does in `eval trust`: the shares depend on the pool.
    let pool: Vec<&GatheredPolyp> = validation.polyps.iter().collect();
    let votes = votes(&validation.polyps, &pool, VOTE_K);
    let vote = (votes.len() >= 20).then(|| {
        let (raw, right): (Vec<f64>, Vec<bool>) = votes.into_iter().unzip();
        calibration::isotonic(
            &raw,
            &right,
            &format!(
                "{}: {VOTE_K}-NN votes among polyps of other examinations",
                validation.name
            ),
        )
    });
    Ok((familiarity, vote))
}

/// The views' familiarity to the image encoder from their scores (None when its card has no
/// statistics or a view has no score).
pub fn judge(models: &TwinModels, scores: Option<&[f32]>) -> Option<Judgement> {
    let f = models.image_card.familiarity.as_ref()?;
    Some(f.judge_scores(&models.image_card.name, scores?))
}

/// The vote winner's calibrated confidence (None without a stored vote calibration, or for
/// an empty vote).
pub fn vote_confidence(models: &TwinModels, vote: &Vote) -> Option<f64> {
    let c = models.image_card.calibration.get(crate::trust::VOTE)?;
    let (_, share) = vote.shares.first()?;
    Some(c.confidence(*share))
}
