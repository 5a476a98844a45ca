//! Twin retrieval: exact Hamming and cosine search return what sorting every entry returns;
//! the multi-index returns exactly the same neighbours as the exact scan; the vote.

use endotwin::model::hash::hamming;
use endotwin::plumbing::Rng;
use endotwin::retrieval::synthetic::{self, Layout};
use endotwin::retrieval::{
    Codes, Hit, MultiIndex, cosine_knn, hamming_knn, hamming_knn_batch, majority, weighted,
};

/// Sort every entry by (distance, index): the definition the searches must meet.
fn brute(codes: &Codes, query: &[u64], k: usize) -> Vec<Hit> {
    let mut all: Vec<Hit> = (0..codes.len())
        .map(|i| Hit {
            index: i as u32,
            distance: hamming(codes.get(i), query),
        })
        .collect();
    all.sort_by_key(|h| (h.distance, h.index));
    all.truncate(k);
    all
}

fn library(n: usize, words: usize, layout: Layout, seed: u64) -> Codes {
    Codes {
        words,
        data: synthetic::codes(n, words, layout, seed),
    }
}

#[test]
fn exact_and_multi_index_search_return_the_sorted_neighbours_ties_included() {
    let mut rng = Rng::new(5);
    for (words, layout) in [
        (
            4,
            Layout::Twins {
                size: 4,
                flip: 0.08,
            },
        ),
        (4, Layout::Uniform),
        (
            16,
            Layout::Twins {
                size: 3,
                flip: 0.15,
            },
        ),
        // 4096 bits: past the tables' limit, scanned (the shipped twin codes' length).
        (
            64,
            Layout::Twins {
                size: 8,
                flip: 0.15,
            },
        ),
        // Only 2 distinct centres per 500: masses of ties at equal distance.
        (
            4,
            Layout::Twins {
                size: 250,
                flip: 0.0,
            },
        ),
    ] {
        let codes = library(2000, words, layout, 11);
        let index = MultiIndex::build(codes.clone());
        for q in 0..25 {
            let query =
                synthetic::query_near(&codes.data, words, rng.below(codes.len()), 0.05, &mut rng);
            let query = if q % 5 == 4 {
                (0..words).map(|_| rng.next_u64()).collect()
            } else {
                query
            };
            for k in [1, 6, 40] {
                let want = brute(&codes, &query, k);
                assert_eq!(hamming_knn(&codes, &query, k), want, "{layout:?} k={k}");
                assert_eq!(index.knn(&query, k), want, "multi-index {layout:?} k={k}");
            }
        }
    }
}

#[test]
fn batched_queries_give_the_single_query_answers() {
    let codes = library(10_000, 4, Layout::Twins { size: 4, flip: 0.1 }, 3);
    let mut rng = Rng::new(9);
    let queries: Vec<Vec<u64>> = (0..17)
        .map(|_| synthetic::query_near(&codes.data, 4, rng.below(10_000), 0.05, &mut rng))
        .collect();
    let batch = hamming_knn_batch(&codes, &queries, 6);
    for (q, hits) in queries.iter().zip(batch) {
        assert_eq!(hits, hamming_knn(&codes, q, 6));
    }
}

#[test]
fn a_query_finds_its_own_twins_first() {
    // Groups of 4 near-copies: the other three members of the query's group rank first.
    let codes = library(
        4000,
        4,
        Layout::Twins {
            size: 4,
            flip: 0.05,
        },
        21,
    );
    let index = MultiIndex::build(codes.clone());
    let hits = index.knn(codes.get(1001), 4);
    let mut found: Vec<u32> = hits.iter().map(|h| h.index).collect();
    found.sort();
    assert_eq!(found, vec![1000, 1001, 1002, 1003]);
    assert_eq!(
        hits[0],
        Hit {
            index: 1001,
            distance: 0
        }
    );
}

#[test]
fn k_beyond_the_library_and_an_empty_library_are_not_errors() {
    let codes = library(5, 4, Layout::Uniform, 1);
    let q = codes.get(2).to_vec();
    assert_eq!(hamming_knn(&codes, &q, 50).len(), 5);
    assert_eq!(MultiIndex::build(codes.clone()).knn(&q, 50).len(), 5);
    let empty = Codes::new(4);
    assert!(hamming_knn(&empty, &q, 6).is_empty());
    assert!(MultiIndex::build(empty).knn(&q, 6).is_empty());
    assert!(cosine_knn(&[], 8, &[0.0; 8], 6).is_empty());
}

#[test]
fn cosine_search_ranks_by_dot_product() {
    let dim = 37;
    let vectors = synthetic::unit_vectors(3000, dim, 4);
    let query = &vectors[dim * 17..dim * 18];
    let hits = cosine_knn(&vectors, dim, query, 10);
    assert_eq!(hits[0].index, 17);
    assert!((hits[0].score - 1.0).abs() < 1e-5);
    let mut all: Vec<(f32, u32)> = vectors
        .chunks_exact(dim)
        .enumerate()
        .map(|(i, v)| (v.iter().zip(query).map(|(a, b)| a * b).sum(), i as u32))
        .collect();
    all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for (h, (s, i)) in hits.iter().zip(&all) {
        assert_eq!(h.index, *i);
        assert!((h.score - s).abs() < 1e-5);
    }
}

#[test]
fn the_vote_counts_shares_and_breaks_ties_by_the_nearest_twin() {
    let v = majority(["SSL", "TA-LG", "TA-LG", "SSL", "HP", "TA-LG"]);
    assert_eq!(v.winner(), Some("TA-LG"));
    assert!((v.share("TA-LG") - 0.5).abs() < 1e-12);
    assert!((v.share("SSL") - 1.0 / 3.0).abs() < 1e-12);
    assert_eq!(v.share("carcinoma"), 0.0);

    // 2 vs 2: the label of the nearest twin wins.
    assert_eq!(
        majority(["HP", "TA-LG", "TA-LG", "HP"]).winner(),
        Some("HP")
    );

    // Weighted: one very close twin outweighs two distant ones.
    let w = weighted([("carcinoma", 0.95), ("HP", 0.3), ("HP", 0.3)]);
    assert_eq!(w.winner(), Some("carcinoma"));
    assert!((w.share("carcinoma") - 0.95 / 1.55).abs() < 1e-12);
    assert_eq!(majority(std::iter::empty()).winner(), None);
}

/// The default twin search: the 100 nearest codes, re-ranked by cosine. On libraries shaped as
/// twins are (groups of near views) it returns the exact cosine top-6 in its order; with a
/// shortlist as long as the library it is exact cosine whatever the data.
#[test]
fn a_hamming_shortlist_re_ranked_by_cosine_returns_the_cosine_neighbours() {
    use endotwin::retrieval::{SHORTLIST, shortlist_cosine};
    let (n, dim) = (20_000, 128);
    let vectors = synthetic::twin_vectors(n, dim, 8, 0.5, 3);
    let codes = Codes {
        words: dim / 64,
        data: synthetic::sign_codes(&vectors, dim),
    };
    let mut rng = Rng::new(9);
    for _ in 0..50 {
        let q = synthetic::vector_near(&vectors, dim, rng.below(n), 0.3, &mut rng);
        let code = synthetic::sign_codes(&q, dim);
        let exact: Vec<u32> = cosine_knn(&vectors, dim, &q, 6)
            .iter()
            .map(|s| s.index)
            .collect();
        let fast = shortlist_cosine(&codes, &vectors, dim, &code, &q, 6, SHORTLIST);
        assert_eq!(fast.iter().map(|s| s.index).collect::<Vec<_>>(), exact);
        // Each score is the exact cosine, not an estimate from the codes.
        let s = fast[0];
        let v = &vectors[s.index as usize * dim..(s.index as usize + 1) * dim];
        assert!((s.score - endotwin::retrieval::exact::dot(v, &q)).abs() < 1e-6);
    }
    // Uniform vectors: nothing is near, yet a shortlist of the whole library is exact cosine.
    let (n, dim) = (500, 64);
    let vectors = synthetic::unit_vectors(n, dim, 4);
    let codes = Codes {
        words: 1,
        data: synthetic::sign_codes(&vectors, dim),
    };
    for _ in 0..20 {
        let q = synthetic::vector_near(&vectors, dim, rng.below(n), 1.0, &mut rng);
        let code = synthetic::sign_codes(&q, dim);
        let exact = cosine_knn(&vectors, dim, &q, 10);
        let full = shortlist_cosine(&codes, &vectors, dim, &code, &q, 10, n);
        assert_eq!(full, exact);
    }
}
