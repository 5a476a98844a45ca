//! Float accuracy at hash speed: a shortlist by Hamming distance over the packed codes, then
//! exact cosine over the float embeddings of the shortlist only. The scan over codes reads
//! 32-512 bytes an entry instead of 1 KiB of floats, and the re-rank touches a hundred
//! vectors, so a query costs about what the Hamming scan costs; whenever the true cosine
//! neighbours are in the shortlist (`bench retrieve` measures how often), the answer is the
//! exact cosine answer, in its order.

use super::exact::{Codes, Scored, dot, hamming_knn};

/// Entries the Hamming scan keeps for re-ranking unless `k` asks for more.
pub const SHORTLIST: usize = 100;

/// How many entries to shortlist for a top-`k` query.
pub fn shortlist_len(k: usize) -> usize {
    SHORTLIST.max(k.saturating_mul(4))
}

/// The `k` entries most similar to `query` by cosine among the `shortlist` nearest to `code`
/// by Hamming distance; best first, ties by the lower index (as [`super::cosine_knn`]).
/// `vectors`: unit embeddings, `dim` floats each, in the order of `codes`.
pub fn shortlist_cosine(
    codes: &Codes,
    vectors: &[f32],
    dim: usize,
    code: &[u64],
    query: &[f32],
    k: usize,
    shortlist: usize,
) -> Vec<Scored> {
    assert_eq!(query.len(), dim, "query dimension");
    assert_eq!(vectors.len(), codes.len() * dim, "one vector per code");
    let mut scored: Vec<Scored> = hamming_knn(codes, code, shortlist.max(k))
        .into_iter()
        .map(|h| {
            let i = h.index as usize;
            Scored {
                index: h.index,
                score: dot(&vectors[i * dim..(i + 1) * dim], query),
            }
        })
        .collect();
    scored.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.index.cmp(&b.index)));
    scored.truncate(k);
    scored
}
