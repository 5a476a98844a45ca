//! `endotwin bench retrieve`: twin search at library sizes no phantom reaches. Two parts:
//! codes alone (exact Hamming scan, multi-index hashing), and embeddings with their sign codes,
//! where every method is also scored by how many of the exact cosine top-k it returns.

use crate::plumbing::Rng;
use crate::retrieval::synthetic::{self, Layout};
use crate::retrieval::{
    Codes, MultiIndex, SHORTLIST, cosine_knn, hamming_knn, hamming_knn_batch, shortlist_cosine,
};
use std::time::{Duration, Instant};

/// One row of `bench retrieve`.
#[derive(Debug, Clone)]
pub struct RetrieveRow {
    pub entries: usize,
    pub bits: usize,
    /// What the library looks like: `uniform` codes or vectors, `twins` (groups of 8).
    pub data: &'static str,
    pub method: String,
    pub batch: usize,
    /// Wall time per query (batch 1) or per query within a batch.
    pub ms: f64,
    pub queries_per_s: f64,
    /// Share of the exact cosine top-k the method returned (embedding rows only).
    pub recall: Option<f64>,
}

pub struct RetrieveOptions {
    pub sizes: Vec<usize>,
    pub bits: Vec<usize>,
    pub k: usize,
    pub queries: usize,
    pub batch: usize,
    /// Dimension of the synthetic embeddings (their sign codes have as many bits).
    pub dim: usize,
}

/// Rows of codes alone, then of embeddings; `report` runs after each row.
pub fn retrieve(options: &RetrieveOptions, mut report: impl FnMut(&RetrieveRow)) {
    for &bits in &options.bits {
        for &n in &options.sizes {
            codes_only(options, n, bits, &mut report);
        }
    }
    for &n in &options.sizes {
        embeddings(options, n, &mut report);
    }
}

fn timed<T>(queries: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let start = Instant::now();
    let out = f();
    (ms_per(start.elapsed(), queries), out)
}

fn ms_per(total: Duration, queries: usize) -> f64 {
    total.as_secs_f64() * 1000.0 / queries.max(1) as f64
}

/// Exact Hamming scan (batch 1 and batched) and multi-index hashing, on uniform codes (the
/// index's worst case) and on twin groups (where it is meant to be used).
fn codes_only(o: &RetrieveOptions, n: usize, bits: usize, report: &mut impl FnMut(&RetrieveRow)) {
    let words = bits / 64;
    let mut rng = Rng::new(n as u64 ^ bits as u64);
    let mut row = |data, method: &str, batch, ms: f64| {
        report(&RetrieveRow {
            entries: n,
            bits,
            data,
            method: method.into(),
            batch,
            ms,
            queries_per_s: 1000.0 / ms,
            recall: None,
        })
    };
    let twins = Layout::Twins {
        size: 8,
        flip: 0.03,
    };
    for (data, layout) in [("uniform", Layout::Uniform), ("twins", twins)] {
        let codes = Codes {
            words,
            data: synthetic::codes(n, words, layout, 7),
        };
        let queries: Vec<Vec<u64>> = (0..o.queries)
            .map(|_| synthetic::query_near(&codes.data, words, rng.below(n), 0.02, &mut rng))
            .collect();
        if layout == Layout::Uniform {
            let (ms, _) = timed(queries.len(), || {
                for q in &queries {
                    std::hint::black_box(hamming_knn(&codes, q, o.k));
                }
            });
            row(data, "hamming exact", 1, ms);
            let (ms, _) = timed(queries.len(), || {
                for chunk in queries.chunks(o.batch) {
                    std::hint::black_box(hamming_knn_batch(&codes, chunk, o.k));
                }
            });
            row(data, "hamming exact", o.batch, ms);
        }
        let index = MultiIndex::build(codes);
        let mut scratch = Default::default();
        let (ms, _) = timed(queries.len(), || {
            for q in &queries {
                std::hint::black_box(index.knn_with(q, o.k, &mut scratch));
            }
        });
        row(data, "multi-index", 1, ms);
    }
}

/// Unit embeddings of `o.dim` values with their sign codes: exact cosine (the truth), exact
/// Hamming, and the Hamming shortlist re-ranked by cosine, each with its recall of the cosine
/// top-k. `twins`: groups of 8 near embeddings (about 0.8 cosine apart), queries near one
/// member; `uniform`: no structure at all, every neighbour about as far as the next.
fn embeddings(o: &RetrieveOptions, n: usize, report: &mut impl FnMut(&RetrieveRow)) {
    let dim = o.dim;
    let mut rng = Rng::new(n as u64 ^ 0xe5);
    for data in ["twins", "uniform"] {
        let vectors = match data {
            "twins" => synthetic::twin_vectors(n, dim, 8, 0.5, 11),
            _ => synthetic::unit_vectors(n, dim, 11),
        };
        let codes = Codes {
            words: dim / 64,
            data: synthetic::sign_codes(&vectors, dim),
        };
        let queries: Vec<(Vec<f32>, Vec<u64>)> = (0..o.queries)
            .map(|_| {
                let q = synthetic::vector_near(&vectors, dim, rng.below(n), 0.3, &mut rng);
                let code = synthetic::sign_codes(&q, dim);
                (q, code)
            })
            .collect();
        let (cosine_ms, truth) = timed(queries.len(), || {
            queries
                .iter()
                .map(|(q, _)| {
                    let hits = cosine_knn(&vectors, dim, q, o.k);
                    hits.iter().map(|h| h.index).collect::<Vec<u32>>()
                })
                .collect::<Vec<_>>()
        });
        let recall = |found: &[Vec<u32>]| {
            let hit: usize = found
                .iter()
                .zip(&truth)
                .map(|(f, t)| f.iter().filter(|i| t.contains(i)).count())
                .sum();
            hit as f64 / truth.iter().map(Vec::len).sum::<usize>().max(1) as f64
        };
        let mut row = |method: String, ms: f64, found: &[Vec<u32>]| {
            report(&RetrieveRow {
                entries: n,
                bits: dim,
                data,
                method,
                batch: 1,
                ms,
                queries_per_s: 1000.0 / ms,
                recall: Some(recall(found)),
            })
        };
        row("cosine exact (f32)".into(), cosine_ms, &truth);
        let (ms, found) = timed(queries.len(), || {
            queries
                .iter()
                .map(|(_, c)| {
                    hamming_knn(&codes, c, o.k)
                        .iter()
                        .map(|h| h.index)
                        .collect()
                })
                .collect::<Vec<_>>()
        });
        row("hamming exact".into(), ms, &found);
        let (ms, found) = timed(queries.len(), || {
            queries
                .iter()
                .map(|(q, c)| {
                    shortlist_cosine(&codes, &vectors, dim, c, q, o.k, SHORTLIST)
                        .iter()
                        .map(|h| h.index)
                        .collect()
                })
                .collect::<Vec<_>>()
        });
        row(
            format!("hamming shortlist {SHORTLIST} + cosine re-rank"),
            ms,
            &found,
        );
    }
}
