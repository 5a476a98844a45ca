//! Losses of the dual (image-text) encoders: Endo-CLIP's symmetric InfoNCE and soft-target
//! cross-entropy (METHODS §1) and the capsule captions' multi-positive KL loss (METHODS §2).
//! Every function takes unit-norm embeddings and a logit scale (`1 / tau`, a tensor so a
//! learnable temperature gets its gradient).

use burn::tensor::{Tensor, TensorData};

/// `-mean_i sum_j q_ij log softmax_j(logits_i)`: `logits` [n, m], `q` [n, m] with rows that
/// are distributions (or all zero: such a row adds 0) -> scalar [1].
pub fn soft_cross_entropy(logits: Tensor<2>, q: Tensor<2>) -> Tensor<1> {
    let [n, _] = logits.dims();
    let log_p = log_softmax_rows(logits);
    -(log_p * q).sum() / n as f64
}

/// `mean_i KL(q_i || softmax(logits_i))` = soft cross-entropy minus the entropy of `q`
/// (with `0 log 0 = 0`): `logits`, `q` [n, m] -> scalar [1].
pub fn kl_rows(logits: Tensor<2>, q: Tensor<2>) -> Tensor<1> {
    let [n, _] = q.dims();
    let q_log_q = q.clone() * q.clone().clamp_min(1e-30).log();
    soft_cross_entropy(logits, q) + q_log_q.sum() / n as f64
}

/// Rows scaled to sum 1; an all-zero row stays zero. [n, m] -> [n, m].
pub fn normalise_rows(m: Tensor<2>) -> Tensor<2> {
    let sums = m.clone().sum_dim(1).clamp_min(1e-12); // [n, 1]
    m / sums
}

/// Endo-CLIP's soft-target loss: `S = scale * V T^T`,
/// `L = 1/2 [CE(S, rownorm(M)) + CE(S^T, rownorm(M^T))]`. `v` [n, d] image rows, `t` [n, d]
/// text rows (unit norm), `m` [n, n] non-negative targets (row i: image i; column j: text j),
/// `scale` [1] -> scalar [1]. With `M = I` it is the symmetric InfoNCE of stage 1.
pub fn soft_target_clip(v: Tensor<2>, t: Tensor<2>, m: Tensor<2>, scale: Tensor<1>) -> Tensor<1> {
    let s = v.matmul(t.transpose()) * scale.unsqueeze_dim::<2>(1); // [n, n]
    let image_side = soft_cross_entropy(s.clone(), normalise_rows(m.clone()));
    let text_side = soft_cross_entropy(s.transpose(), normalise_rows(m.transpose()));
    (image_side + text_side) / 2.0
}

/// Symmetric InfoNCE with identity targets (image i belongs to text i).
pub fn info_nce(v: Tensor<2>, t: Tensor<2>, scale: Tensor<1>) -> Tensor<1> {
    let [n, _] = v.dims();
    let device = v.device();
    let eye = Tensor::<2>::from_data(identity(n), &device);
    soft_target_clip(v, t, eye, scale)
}

/// The multi-positive KL loss of METHODS §2: `Q_ij = 1` where image i and text j carry the
/// same caption label, rows normalised; `1/2 [mean_i KL(Q_i || P_img_i) + mean_j KL(Q^T_j ||
/// P_txt_j)]` with `P = softmax(scale * cos)`. `captions`: one label id per row.
pub fn kl_multi_positive(
    images: Tensor<2>,
    texts: Tensor<2>,
    captions: &[usize],
    scale: Tensor<1>,
) -> Tensor<1> {
    let n = captions.len();
    assert_eq!(images.dims()[0], n, "one caption label per image row");
    assert_eq!(texts.dims()[0], n, "one caption label per text row");
    let device = images.device();
    let same: Vec<f32> = (0..n * n)
        .map(|k| f32::from(captions[k / n] == captions[k % n]))
        .collect();
    let q = Tensor::<2>::from_data(TensorData::new(same, [n, n]), &device);
    let s = images.matmul(texts.transpose()) * scale.unsqueeze_dim::<2>(1);
    let image_side = kl_rows(s.clone(), normalise_rows(q.clone()));
    let text_side = kl_rows(s.transpose(), normalise_rows(q.transpose()));
    (image_side + text_side) / 2.0
}

/// Stage-2 soft targets `M_ij = cos(a_i, b_j)` between multi-hot attribute vectors (row-major
/// [a.len(), b.len()]). Two vectors without any attribute are alike (1); one empty and one
/// not are unrelated (0).
pub fn attribute_targets(a: &[Vec<f32>], b: &[Vec<f32>]) -> TensorData {
    let norm = |x: &[f32]| x.iter().map(|v| v * v).sum::<f32>().sqrt();
    let mut out = Vec::with_capacity(a.len() * b.len());
    for x in a {
        for y in b {
            let (nx, ny) = (norm(x), norm(y));
            out.push(match (nx > 0.0, ny > 0.0) {
                (false, false) => 1.0,
                (true, true) => x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>() / (nx * ny),
                _ => 0.0,
            });
        }
    }
    TensorData::new(out, [a.len(), b.len()])
}

fn identity(n: usize) -> TensorData {
    let data: Vec<f32> = (0..n * n).map(|k| f32::from(k / n == k % n)).collect();
    TensorData::new(data, [n, n])
}

/// Row-wise log-softmax, shifted by each row's maximum for stability. [n, m] -> [n, m].
fn log_softmax_rows(x: Tensor<2>) -> Tensor<2> {
    let top = x.clone().max_dim(1).detach();
    let shifted = x - top;
    let log_sum = shifted.clone().exp().sum_dim(1).log();
    shifted - log_sum
}
