//! Binary codes: bit k is 1 where embedding component k is >= 0, packed into u64 words
//! (METHODS §4), for Hamming search.

use burn::tensor::Tensor;

/// `embeddings`: [batch, dim] -> one packed code per row, `dim.div_ceil(64)` words each.
pub fn sign_codes(embeddings: Tensor<2>) -> Vec<Vec<u64>> {
    let [batch, dim] = embeddings.dims();
    let values = embeddings
        .into_data()
        .try_to_vec::<f32>()
        .expect("f32 embeddings");
    (0..batch)
        .map(|b| pack_signs(&values[b * dim..(b + 1) * dim]))
        .collect()
}

pub fn pack_signs(row: &[f32]) -> Vec<u64> {
    let mut words = vec![0u64; row.len().div_ceil(64)];
    for (k, v) in row.iter().enumerate() {
        if *v >= 0.0 {
            words[k / 64] |= 1 << (k % 64);
        }
    }
    words
}

pub fn hamming(a: &[u64], b: &[u64]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}
