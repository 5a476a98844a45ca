//! Synthetic libraries of codes for benchmarks and tests at sizes no phantom reaches.
//! `Uniform` codes are the worst case for any sublinear index (every code is ~bits/2 away);
//! `Twins` codes come in small groups of near-duplicates, like the views of one polyp, so a
//! query has a few close neighbours and the rest far away.

use crate::plumbing::Rng;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Layout {
    Uniform,
    /// Groups of `size` codes, each a copy of a random centre with every bit flipped with
    /// probability `flip`.
    Twins {
        size: usize,
        flip: f32,
    },
}

pub fn codes(n: usize, words: usize, layout: Layout, seed: u64) -> Vec<u64> {
    let mut rng = Rng::new(seed);
    let mut data = Vec::with_capacity(n * words);
    match layout {
        Layout::Uniform => data.extend((0..n * words).map(|_| rng.next_u64())),
        Layout::Twins { size, flip } => {
            let mut centre = vec![0u64; words];
            for i in 0..n {
                if i % size.max(1) == 0 {
                    centre.iter_mut().for_each(|w| *w = rng.next_u64());
                }
                data.extend(centre.iter().map(|&w| w ^ noise(&mut rng, flip)));
            }
        }
    }
    data
}

/// A query near entry `i` of `data`: its code with every bit flipped with probability `flip`.
pub fn query_near(data: &[u64], words: usize, i: usize, flip: f32, rng: &mut Rng) -> Vec<u64> {
    data[i * words..(i + 1) * words]
        .iter()
        .map(|&w| w ^ noise(rng, flip))
        .collect()
}

fn noise(rng: &mut Rng, flip: f32) -> u64 {
    let mut w = 0u64;
    for b in 0..64 {
        if rng.chance(flip) {
            w |= 1 << b;
        }
    }
    w
}

/// Unit float vectors, `n` of `dim`.
pub fn unit_vectors(n: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(n * dim);
    for _ in 0..n {
        out.extend(unit((0..dim).map(|_| rng.normal()).collect()));
    }
    out
}

/// Unit embeddings in groups of `group` (a polyp's views and lookalikes): each a random
/// centre plus Gaussian noise of `spread` per dimension relative to the centre's, normalised.
/// `spread` 0.5 puts group members ~0.8 cosine apart; unrelated entries are ~0 apart.
pub fn twin_vectors(n: usize, dim: usize, group: usize, spread: f32, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(n * dim);
    let mut centre = vec![0.0f32; dim];
    for i in 0..n {
        if i % group.max(1) == 0 {
            centre.iter_mut().for_each(|c| *c = rng.normal());
        }
        let v: Vec<f32> = centre.iter().map(|c| c + spread * rng.normal()).collect();
        out.extend(unit(v));
    }
    out
}

/// A query near entry `i`: its vector plus noise of `spread`, normalised.
pub fn vector_near(vectors: &[f32], dim: usize, i: usize, spread: f32, rng: &mut Rng) -> Vec<f32> {
    let v: Vec<f32> = vectors[i * dim..(i + 1) * dim]
        .iter()
        .map(|x| x + spread * rng.normal() / (dim as f32).sqrt())
        .collect();
    unit(v)
}

fn unit(v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.into_iter().map(|x| x / norm).collect()
}

/// The sign code of each vector ([`crate::model::hash::pack_signs`]), `dim / 64` words each
/// (`dim` a multiple of 64), back to back: for isotropic vectors, as good as any random
/// rotation's.
pub fn sign_codes(vectors: &[f32], dim: usize) -> Vec<u64> {
    assert!(
        dim.is_multiple_of(64),
        "dimension {dim} is not a multiple of 64"
    );
    vectors
        .chunks_exact(dim)
        .flat_map(crate::model::hash::pack_signs)
        .collect()
}
