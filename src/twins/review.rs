//! The review queue: which polyps a researcher should label first. Uncertainty is how split
//! the twin vote is (the k nearest indexed polyps, the polyp itself left out: 1 minus the
//! winning histology's share among those with a histology); diversity is farthest-first on
//! the twin embedding (each next case is the one least like every case already queued), so
//! the queue does not spend a researcher's time on ten near-copies of one doubtful polyp.

use super::index::TwinIndex;
use super::{Search, TwinResult};

/// How the queue is ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueOrder {
    /// Least certain vote first.
    Uncertain,
    /// Farthest-first on the embedding, starting at the least certain case.
    Diverse,
    /// Each next case maximises uncertainty + distance to the cases already queued.
    #[default]
    Both,
}

impl QueueOrder {
    pub const ALL: [QueueOrder; 3] = [QueueOrder::Both, QueueOrder::Uncertain, QueueOrder::Diverse];

    pub fn title(self) -> &'static str {
        match self {
            QueueOrder::Uncertain => "least certain first",
            QueueOrder::Diverse => "most diverse (farthest-first)",
            QueueOrder::Both => "uncertain and diverse",
        }
    }
}

/// One case of the queue.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueItem {
    pub polyp: i64,
    pub code: String,
    /// The polyp's own histology label, if any.
    pub label: Option<String>,
    /// The twin vote's winner and its share among the neighbours with a histology.
    pub vote: Option<(String, f64)>,
    /// How unsure the models are: the twin vote's 1 - winner share (1 when no neighbour has a
    /// histology), averaged with the prompt entropy when there is one.
    pub uncertainty: f64,
    /// The text prompts' normalised entropy over benign vs neoplastic, when a prompt model
    /// scored the polyp.
    pub prompt_entropy: Option<f64>,
    /// Cosine distance / 2 to the nearest case queued before it (1 for the first).
    pub distance: f64,
}

impl QueueItem {
    /// Whether the twin vote disagrees with the polyp's own label (a label worth a second look).
    pub fn disagrees(&self) -> bool {
        matches!((&self.label, &self.vote), (Some(l), Some((w, _))) if l != w)
    }
}

/// The first `limit` cases of the queue over every indexed polyp; `k` neighbours vote;
/// `prompt_entropy` (by polyp id, 0..1) joins the uncertainty where it is known.
pub fn queue(
    index: &TwinIndex,
    k: usize,
    order: QueueOrder,
    limit: usize,
    prompt_entropy: &std::collections::HashMap<i64, f64>,
) -> Vec<QueueItem> {
    let n = index.len();
    let polyps = index.polyps();
    let uncertainty: Vec<(f64, Option<(String, f64)>)> = (0..n)
        .map(|i| {
            let r = index.query(index.vector(i), k, Search::Cosine, &[polyps[i].id]);
            let (u, vote) = vote_uncertainty(&r);
            match prompt_entropy.get(&polyps[i].id) {
                Some(h) => ((u + h) / 2.0, vote),
                None => (u, vote),
            }
        })
        .collect();
    let vectors: Vec<&[f32]> = (0..n).map(|i| index.vector(i)).collect();
    let scores: Vec<f64> = uncertainty.iter().map(|u| u.0).collect();
    ranked(&vectors, &scores, order, limit)
        .into_iter()
        .map(|(i, distance)| QueueItem {
            polyp: polyps[i].id,
            code: polyps[i].code.clone(),
            label: polyps[i].histology.clone(),
            vote: uncertainty[i].1.clone(),
            uncertainty: uncertainty[i].0,
            prompt_entropy: prompt_entropy.get(&polyps[i].id).copied(),
            distance,
        })
        .collect()
}

/// The first `limit` of `vectors` (unit) in queue order, each with its cosine distance / 2 to
/// the nearest one ranked before it (1 for the first).
pub fn ranked(
    vectors: &[&[f32]],
    uncertainty: &[f64],
    order: QueueOrder,
    limit: usize,
) -> Vec<(usize, f64)> {
    let n = vectors.len();
    let mut nearest = vec![1.0f64; n];
    let mut taken = vec![false; n];
    let mut out: Vec<(usize, f64)> = Vec::new();
    while out.len() < limit.min(n) {
        let score = |i: usize| -> f64 {
            let (u, d) = (uncertainty[i], nearest[i]);
            match order {
                QueueOrder::Uncertain => u,
                // The first pick is the least certain case; then distance alone.
                QueueOrder::Diverse if out.is_empty() => u,
                QueueOrder::Diverse => d,
                QueueOrder::Both => u + d,
            }
        };
        // Ties go to the earlier item: the order never depends on anything but the data.
        let Some(best) = (0..n)
            .filter(|&i| !taken[i])
            .max_by(|&a, &b| score(a).total_cmp(&score(b)).then(b.cmp(&a)))
        else {
            break;
        };
        taken[best] = true;
        out.push((best, nearest[best]));
        for (i, d) in nearest.iter_mut().enumerate() {
            let cos = crate::retrieval::exact::dot(vectors[i], vectors[best]) as f64;
            *d = d.min(((1.0 - cos) / 2.0).max(0.0));
        }
    }
    out
}

/// (1 - the winning histology's share, the winner and its share) of a twin result, among the
/// twins with a histology.
fn vote_uncertainty(r: &TwinResult) -> (f64, Option<(String, f64)>) {
    let labels: Vec<&str> = r
        .twins
        .iter()
        .filter_map(|t| t.polyp.histology.as_deref())
        .filter(|h| *h != "unknown")
        .collect();
    if labels.is_empty() {
        return (1.0, None);
    }
    let vote = crate::retrieval::majority(labels.iter().copied());
    match vote.winner() {
        Some(w) => {
            let share = vote.share(w);
            (1.0 - share, Some((w.to_string(), share)))
        }
        None => (1.0, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two tight groups of cases: the doubtful ones all in group A (near [1, 0]), group B
    /// (near [0, 1]) fairly sure.
    fn groups() -> (Vec<Vec<f32>>, Vec<f64>) {
        let unit = |x: f32, y: f32| {
            let n = (x * x + y * y).sqrt();
            vec![x / n, y / n]
        };
        let vectors = vec![
            unit(1.0, 0.0),
            unit(1.0, 0.05),
            unit(1.0, -0.05),
            unit(0.0, 1.0),
            unit(0.05, 1.0),
        ];
        (vectors, vec![0.6, 0.5, 0.5, 0.2, 0.1])
    }

    #[test]
    fn uncertain_first_stays_in_the_doubtful_group_and_diversity_crosses_to_the_other() {
        let (vectors, u) = groups();
        let v: Vec<&[f32]> = vectors.iter().map(Vec::as_slice).collect();
        let order = |o| -> Vec<usize> { ranked(&v, &u, o, 5).iter().map(|r| r.0).collect() };
        // Least certain first: the three of group A, ties to the earlier case.
        assert_eq!(order(QueueOrder::Uncertain), vec![0, 1, 2, 3, 4]);
        // Farthest-first and the mix go to group B second: no ten near-copies in a row.
        assert_eq!(order(QueueOrder::Diverse)[..2], [0, 3]);
        assert_eq!(order(QueueOrder::Both)[..2], [0, 3]);
        // Distances: the first case has none before it; a near-copy is close to its group.
        let ranked = ranked(&v, &u, QueueOrder::Uncertain, 5);
        assert_eq!(ranked[0].1, 1.0);
        assert!(ranked[1].1 < 0.01, "{ranked:?}");
        assert!(ranked[3].1 > 0.3, "{ranked:?}");
    }

    #[test]
    fn the_queue_is_cut_at_its_limit_and_never_repeats_a_case() {
        let (vectors, u) = groups();
        let v: Vec<&[f32]> = vectors.iter().map(Vec::as_slice).collect();
        for order in QueueOrder::ALL {
            let r = ranked(&v, &u, order, 3);
            assert_eq!(r.len(), 3);
            let mut seen: Vec<usize> = r.iter().map(|x| x.0).collect();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), 3);
        }
        assert_eq!(ranked(&v, &u, QueueOrder::Both, 50).len(), 5);
    }
}
