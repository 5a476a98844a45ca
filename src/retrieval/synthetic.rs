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
        let v: Vec<f32> = (0..dim).map(|_| rng.normal()).collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        out.extend(v.iter().map(|x| x / norm));
    }
    out
}
