//! Indexing the library (view embeddings, then one embedding + sign code per polyp, stored
//! per model version; unchanged items are skipped) and searching it.

use super::{Coder, TwinError, TwinModels};
use crate::plumbing::Progress;
use crate::retrieval::{
    Codes, MultiIndex, Vote, cosine_knn, majority, shortlist_cosine, shortlist_len, weighted,
};
use crate::store::{
    self, EmbeddingRow, EmbeddingTarget, PolypRow, Store, ensure_model, put_embedding,
};
use sha2::{Digest, Sha256};
use std::collections::HashMap;

const VIEW_MODEL: &str = "twin-image";
const POLYP_MODEL: &str = "twin-polyp";
/// Each view's familiarity score (a one-value row), made in the same pass as its embedding.
const FAMILIARITY_MODEL: &str = "twin-view-familiarity";

/// What the stored familiarity scores of these models are keyed by: the image encoder's
/// version and its familiarity statistics (refitting them makes the scores stale). None
/// without statistics.
pub fn familiarity_version(models: &TwinModels) -> Option<String> {
    let f = models.image_card.familiarity.as_ref()?;
    let mut h = Sha256::new();
    h.update(serde_json::to_vec(f).unwrap_or_default());
    let digest = format!("{:x}", h.finalize());
    Some(format!(
        "{}+fam-{}",
        models.image_card.version,
        &digest[..12]
    ))
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexStats {
    pub views_encoded: usize,
    pub views_current: usize,
    pub polyps_updated: usize,
    pub polyps_current: usize,
    /// Views that could not be read, with the reason.
    pub problems: Vec<String>,
}

/// Encodes what changed since the last run of these models and stores it.
pub fn index_library(
    store: &mut Store,
    models: &TwinModels,
    progress: &Progress,
) -> Result<IndexStats, TwinError> {
    let image_config = serde_json::to_string(&models.image_card.config).unwrap_or_default();
    let (view_model, polyp_model) = store.write(|tx| {
        Ok::<_, store::StoreError>((
            ensure_model(
                tx,
                VIEW_MODEL,
                &models.image_card.version,
                "image-encoder",
                &image_config,
                "",
            )?,
            ensure_model(
                tx,
                POLYP_MODEL,
                &models.version(),
                "polyp-embedding",
                &image_config,
                "",
            )?,
        ))
    })?;
    let familiarity_model = match familiarity_version(models) {
        Some(version) => Some(store.write(|tx| {
            ensure_model(
                tx,
                FAMILIARITY_MODEL,
                &version,
                "familiarity-score",
                &image_config,
                "",
            )
        })?),
        None => None,
    };
    let scored: HashMap<i64, String> = match familiarity_model {
        Some(id) => store
            .embeddings(id, EmbeddingTarget::Media)?
            .into_iter()
            .map(|r| (r.target_id, r.source_hash))
            .collect(),
        None => HashMap::new(),
    };
    let mut stats = IndexStats::default();
    let mut views: HashMap<i64, EmbeddingRow> = store
        .embeddings(view_model, EmbeddingTarget::Media)?
        .into_iter()
        .map(|r| (r.target_id, r))
        .collect();
    let view_width = models.dim();
    let polyps = store.polyps()?;
    let drawn = store.view_boxes()?;
    let source = |m: &store::MediaRow| super::view_source(m, drawn.get(&m.id));
    let mut per_polyp = Vec::new();
    let mut stale = Vec::new();
    for p in &polyps {
        let media = store.polyp_views(p.id)?;
        for m in &media {
            let embedded = views
                .get(&m.id)
                .is_some_and(|r| r.source_hash == source(m) && r.vector.len() == view_width);
            let judged =
                familiarity_model.is_none() || scored.get(&m.id).is_some_and(|h| *h == source(m));
            if embedded && judged {
                stats.views_current += 1;
            } else {
                stale.push(m.clone());
            }
        }
        per_polyp.push((p.id, media));
    }
    progress.stage("encoding polyp views", stale.len() as u64);
    for chunk in stale.chunks(32) {
        if progress.is_cancelled() {
            return Err(TwinError::Cancelled);
        }
        let mut images = Vec::new();
        let mut ok = Vec::new();
        for m in chunk {
            match super::load_view(store, m) {
                Ok(view) => {
                    images.push(view);
                    ok.push(m);
                }
                Err(e) => stats.problems.push(e.to_string()),
            }
        }
        let (embeddings, scores) = models.encode_views_judged(&images);
        let score_rows: Vec<EmbeddingRow> = ok
            .iter()
            .zip(scores.unwrap_or_default())
            .map(|(m, score)| EmbeddingRow {
                target_id: m.id,
                source_hash: source(m),
                code: None,
                vector: vec![score],
            })
            .collect();
        let rows: Vec<EmbeddingRow> = ok
            .iter()
            .zip(embeddings)
            .map(|(m, v)| EmbeddingRow {
                target_id: m.id,
                source_hash: source(m),
                code: Some(models.coder.code(&v)),
                vector: v,
            })
            .collect();
        store.write(|tx| {
            for r in &rows {
                put_embedding(tx, view_model, EmbeddingTarget::Media, r)?;
            }
            if let Some(id) = familiarity_model {
                for r in &score_rows {
                    put_embedding(tx, id, EmbeddingTarget::Media, r)?;
                }
            }
            Ok::<_, store::StoreError>(())
        })?;
        stats.views_encoded += rows.len();
        for r in rows {
            views.insert(r.target_id, r);
        }
        for _ in chunk {
            progress.inc();
        }
    }
    progress.stage("combining views per polyp", per_polyp.len() as u64);
    // A row of another width than the rest is damaged, never current (round 15 N7).
    let polyp_rows = store.embeddings(polyp_model, EmbeddingTarget::Polyp)?;
    let width = usual_width(&polyp_rows);
    let words = models.coder.bits(width).div_ceil(64);
    let current: HashMap<i64, String> = polyp_rows
        .into_iter()
        .filter(|r| r.vector.len() == width && r.code.as_ref().is_none_or(|c| c.len() == words))
        .map(|r| (r.target_id, r.source_hash))
        .collect();
    let mut rows = Vec::new();
    for (polyp_id, media) in &per_polyp {
        progress.inc();
        // Only the views that were encoded count, and they name the polyp's embedding: a view
        // that failed to decode is left out now and, once it decodes, changes the hash so the
        // polyp is combined again.
        let encoded: Vec<&EmbeddingRow> = media
            .iter()
            .filter_map(|m| views.get(&m.id).filter(|r| r.source_hash == source(m)))
            .collect();
        if encoded.is_empty() {
            continue;
        }
        let vectors: Vec<Vec<f32>> = encoded.iter().map(|r| r.vector.clone()).collect();
        let mut h = Sha256::new();
        for r in &encoded {
            h.update(r.source_hash.as_bytes());
        }
        let hash = format!("{:x}", h.finalize());
        if current.get(polyp_id) == Some(&hash) {
            stats.polyps_current += 1;
            continue;
        }
        let v = models.combine(&vectors);
        rows.push(EmbeddingRow {
            target_id: *polyp_id,
            source_hash: hash,
            code: Some(models.coder.code(&v)),
            vector: v,
        });
    }
    store.write(|tx| {
        for r in &rows {
            put_embedding(tx, polyp_model, EmbeddingTarget::Polyp, r)?;
        }
        Ok::<_, store::StoreError>(())
    })?;
    stats.polyps_updated = rows.len();
    Ok(stats)
}

/// The embedding indexing stored for library view `m` with these models, when it is still
/// current (same file, same drawn box): a query on a library polyp needs no encoding.
pub fn stored_view_embedding(
    store: &Store,
    models: &TwinModels,
    m: &store::MediaRow,
) -> Result<Option<Vec<f32>>, TwinError> {
    let Some(model) = store.model(VIEW_MODEL, &models.image_card.version)? else {
        return Ok(None);
    };
    let drawn = store.view_box(m.id)?;
    let source = super::view_source(m, drawn.as_ref());
    Ok(store
        .embedding(model.id, EmbeddingTarget::Media, m.id)?
        .filter(|r| r.source_hash == source)
        .map(|r| r.vector))
}

/// The familiarity score indexing stored for library view `m` with these models, when it is
/// still current (None also when the card has no familiarity statistics).
pub fn stored_view_score(
    store: &Store,
    models: &TwinModels,
    m: &store::MediaRow,
) -> Result<Option<f32>, TwinError> {
    let Some(version) = familiarity_version(models) else {
        return Ok(None);
    };
    let Some(model) = store.model(FAMILIARITY_MODEL, &version)? else {
        return Ok(None);
    };
    let drawn = store.view_box(m.id)?;
    let source = super::view_source(m, drawn.as_ref());
    Ok(store
        .embedding(model.id, EmbeddingTarget::Media, m.id)?
        .filter(|r| r.source_hash == source)
        .and_then(|r| r.vector.first().copied()))
}

/// One retrieved twin.
#[derive(Debug, Clone, PartialEq)]
pub struct Twin {
    pub polyp: PolypRow,
    /// Its views (media ids), for the panel to draw without asking the library.
    pub views: Vec<i64>,
    /// Cosine similarity of the embeddings.
    pub similarity: f32,
    /// Hamming distance of the sign codes.
    pub hamming: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TwinResult {
    pub twins: Vec<Twin>,
    pub vote: Vote,
    pub weighted_vote: Vote,
    pub bits: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Search {
    /// The nearest codes by Hamming distance (a shortlist of [`crate::retrieval::SHORTLIST`]),
    /// re-ranked by exact cosine over their float embeddings: the cosine answer wherever the
    /// true neighbours are in the shortlist, at about the Hamming scan's cost. The default.
    #[default]
    Shortlist,
    /// Exact cosine over the float embeddings.
    Cosine,
    /// Exact Hamming over the sign codes (multi-index hashing).
    Hamming,
    /// The float query against the library's codes ([`super::Coder::asymmetric`]): the
    /// library keeps only its codes, the query its embedding.
    Asymmetric,
}

/// The indexed polyps of one model version, in memory.
pub struct TwinIndex {
    polyps: Vec<PolypRow>,
    /// The views (media ids) of each polyp, in index order.
    views: Vec<Vec<i64>>,
    vectors: Vec<f32>,
    dim: usize,
    codes: MultiIndex,
    coder: Coder,
    pub version: String,
}

impl TwinIndex {
    pub fn load(store: &Store, models: &TwinModels) -> Result<TwinIndex, TwinError> {
        let version = models.version();
        // Indexing a library without polyps leaves it as empty as before: "index it first"
        // would send the user round in a circle.
        let empty = || match store.polyps() {
            Ok(p) if p.is_empty() => TwinError::NoPolyps,
            Ok(_) => TwinError::EmptyIndex(version.clone()),
            Err(e) => e.into(),
        };
        let Some(model) = store.model(POLYP_MODEL, &version)? else {
            return Err(match store.indexed_versions(POLYP_MODEL)?.first() {
                Some(v) => TwinError::StaleIndex {
                    indexed: v.clone(),
                    loaded: version,
                },
                None => empty(),
            });
        };
        let rows = store.embeddings(model.id, EmbeddingTarget::Polyp)?;
        if rows.is_empty() {
            return Err(empty());
        }
        let mut by_id: HashMap<i64, PolypRow> =
            store.polyps()?.into_iter().map(|p| (p.id, p)).collect();
        let mut view_ids = store.all_polyp_view_ids()?;
        let dim = usual_width(&rows);
        let words = models.coder.bits(dim).div_ceil(64);
        // A row of another width or code length is damaged (round 15 N7: one truncated by
        // hand made `twins` panic): named, and `index` encodes it again.
        if let Some(r) = rows
            .iter()
            .find(|r| r.vector.len() != dim || r.code.as_ref().is_some_and(|c| c.len() != words))
        {
            let code = by_id
                .get(&r.target_id)
                .map_or_else(|| format!("#{}", r.target_id), |p| p.code.clone());
            return Err(TwinError::Image(format!(
                "the twin index row of polyp {code} holds {} values where the others hold {dim}: \
                 it is damaged; run `endotwin index` to encode it again (`endotwin library \
                 check` names every such row)",
                r.vector.len()
            )));
        }
        let mut polyps = Vec::new();
        let mut views = Vec::new();
        let mut vectors = Vec::new();
        let mut codes = Codes::new(words);
        for r in rows {
            let Some(p) = by_id.remove(&r.target_id) else {
                continue;
            };
            views.push(view_ids.remove(&p.id).unwrap_or_default());
            polyps.push(p);
            vectors.extend_from_slice(&r.vector);
            codes.push(&r.code.unwrap_or_else(|| models.coder.code(&r.vector)));
        }
        Ok(TwinIndex {
            polyps,
            views,
            vectors,
            dim,
            codes: MultiIndex::build(codes),
            coder: models.coder.clone(),
            version,
        })
    }

    pub fn len(&self) -> usize {
        self.polyps.len()
    }

    pub fn polyps(&self) -> &[PolypRow] {
        &self.polyps
    }

    /// The unit embedding of the `i`-th indexed polyp.
    pub fn vector(&self, i: usize) -> &[f32] {
        &self.vectors[i * self.dim..(i + 1) * self.dim]
    }

    /// The 2-D PCA map of every indexed polyp, in index order, and the fitted projection.
    pub fn map(&self) -> (super::map::Pca, Vec<[f32; 2]>) {
        let pca = super::map::Pca::fit(&self.vectors, self.dim);
        let points = self
            .vectors
            .chunks_exact(self.dim)
            .map(|v| pca.project(v))
            .collect();
        (pca, points)
    }

    pub fn is_empty(&self) -> bool {
        self.polyps.is_empty()
    }

    /// The `k` nearest polyps to `embedding` (unit), leaving out `exclude` (the query's own
    /// polyp when it comes from the library), and their votes.
    pub fn query(
        &self,
        embedding: &[f32],
        k: usize,
        search: Search,
        exclude: &[i64],
    ) -> TwinResult {
        let extra = exclude.len();
        let code = self.coder.code(embedding);
        let order: Vec<u32> = match search {
            Search::Shortlist => shortlist_cosine(
                self.codes.codes(),
                &self.vectors,
                self.dim,
                &code,
                embedding,
                k + extra,
                shortlist_len(k + extra),
            )
            .into_iter()
            .map(|h| h.index)
            .collect(),
            Search::Cosine => cosine_knn(&self.vectors, self.dim, embedding, k + extra)
                .into_iter()
                .map(|h| h.index)
                .collect(),
            Search::Hamming => self
                .codes
                .knn(&code, k + extra)
                .into_iter()
                .map(|h| h.index)
                .collect(),
            Search::Asymmetric => {
                let query = self.coder.query(embedding);
                let mut scored: Vec<(f32, u32)> = (0..self.polyps.len())
                    .map(|i| {
                        let code = self.codes.codes().get(i);
                        (query.score(code), i as u32)
                    })
                    .collect();
                scored.sort_by(|a, b| b.0.total_cmp(&a.0));
                scored.into_iter().take(k + extra).map(|s| s.1).collect()
            }
        };
        let twins: Vec<Twin> = order
            .into_iter()
            .map(|i| i as usize)
            .filter(|&i| !exclude.contains(&self.polyps[i].id))
            .take(k)
            .map(|i| Twin {
                polyp: self.polyps[i].clone(),
                views: self.views[i].clone(),
                similarity: crate::retrieval::exact::dot(
                    &self.vectors[i * self.dim..(i + 1) * self.dim],
                    embedding,
                ),
                hamming: crate::model::hash::hamming(self.codes.codes().get(i), &code),
            })
            .collect();
        let label = |t: &Twin| {
            t.polyp
                .histology
                .clone()
                .unwrap_or_else(|| "unknown".into())
        };
        let labels: Vec<String> = twins.iter().map(label).collect();
        let vote = majority(labels.iter().map(|s| s.as_str()));
        let weighted_vote = weighted(
            labels
                .iter()
                .zip(&twins)
                .map(|(l, t)| (l.as_str(), t.similarity.max(0.0) as f64)),
        );
        TwinResult {
            twins,
            vote,
            weighted_vote,
            bits: self.codes.codes().bits(),
        }
    }
}

/// The vector width most of `rows` have (0 for none): a model's width, whatever one damaged
/// row holds.
fn usual_width(rows: &[EmbeddingRow]) -> usize {
    let mut counts: HashMap<usize, usize> = HashMap::new();
    for r in rows {
        *counts.entry(r.vector.len()).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|&(width, n)| (n, width))
        .map_or(0, |(width, _)| width)
}
