//! The EndoFinder losses (METHODS §4), on embeddings of any batch. Rows that share a group id
//! are positives of each other (two augmentations of one image; the scenes of one polyp);
//! rows of another family (another polyp) are negatives; rows of the same family but another
//! group (sibling views of one polyp) are neither: they are ignored, never pushed apart. Masked reconstruction lives with its decoder
//! (`model::reconstruction::masked_mse`).

use burn::tensor::{Tensor, TensorData};

/// The SSCD-style contrastive loss: with `s_ij = cos(z_i, z_j) / tau`,
/// `l_ij = -log(e^{s_ij} / (e^{s_ij} + sum_{k not matching i} e^{s_ik}))`, averaged over every
/// ordered positive pair. `z`: [n, d] unit rows; `groups`: n ids -> scalar [1].
pub fn contrastive(z: Tensor<2>, groups: &[usize], tau: f64) -> Tensor<1> {
    contrastive_in_families(z, groups, groups, tau)
}

/// [`contrastive`] where pairs of one family but different groups are ignored: neither
/// positives nor negatives. `families`: n ids (e.g. the polyp each row shows).
pub fn contrastive_in_families(
    z: Tensor<2>,
    groups: &[usize],
    families: &[usize],
    tau: f64,
) -> Tensor<1> {
    let [n, _] = z.dims();
    assert_eq!(groups.len(), n, "one group id per row");
    assert_eq!(families.len(), n, "one family id per row");
    let device = z.device();
    let (positive, negative) = pair_masks(groups, families, &device);
    let s = z.clone().matmul(z.transpose()) / tau; // [n, n]
    // Subtract each row's largest similarity before exponentiating; it cancels in the ratio.
    let top = s.clone().max_dim(1).detach(); // [n, 1]
    let shifted = s - top;
    let e = shifted.clone().exp();
    let negatives = (e.clone() * negative).sum_dim(1); // [n, 1]
    let per_pair = (e + negatives).log() - shifted; // [n, n]
    let count = positive.clone().sum().clamp_min(1.0);
    (per_pair * positive).sum() / count
}

/// The entropy regulariser (KoLeo): `-mean_i log(min_{j not matching i} ||z_i - z_j||)`,
/// which spreads embeddings by pushing each away from its nearest non-matching neighbour.
/// `z`: [n, d]; `groups`: n ids -> scalar [1]. Rows without any non-matching row are skipped.
pub fn entropy(z: Tensor<2>, groups: &[usize]) -> Tensor<1> {
    entropy_in_families(z, groups, groups)
}

/// [`entropy`] whose nearest non-matching neighbour is never of the row's own family.
pub fn entropy_in_families(z: Tensor<2>, groups: &[usize], families: &[usize]) -> Tensor<1> {
    assert_eq!(groups.len(), z.dims()[0], "one group id per row");
    assert_eq!(families.len(), z.dims()[0], "one family id per row");
    let device = z.device();
    let (_, negative) = pair_masks(groups, families, &device);
    let sq = z.clone().powf_scalar(2.0).sum_dim(1); // [n, 1]
    let d2 = sq.clone() + sq.transpose() - z.clone().matmul(z.transpose()) * 2.0; // [n, n]
    // Matching pairs (and the diagonal) must never be the minimum: lift them out of reach.
    let far = (negative.clone().neg() + 1.0) * 1e6;
    let nearest = (d2 + far).min_dim(1).clamp_min(1e-12); // [n, 1]
    let has_negative = negative.sum_dim(1).clamp_max(1.0); // [n, 1], 1 where any negative
    let rows = has_negative.clone().sum().clamp_min(1.0);
    // log ||.|| = 0.5 log ||.||^2
    -(nearest.log() * 0.5 * has_negative).sum() / rows
}

/// [n, n] float masks: positives (same group, not the diagonal) and negatives (another
/// family and another group); pairs of one family but different groups are in neither.
fn pair_masks(
    groups: &[usize],
    families: &[usize],
    device: &burn::tensor::Device,
) -> (Tensor<2>, Tensor<2>) {
    let n = groups.len();
    let mut pos = vec![0.0f32; n * n];
    let mut neg = vec![0.0f32; n * n];
    for i in 0..n {
        for j in 0..n {
            if groups[i] == groups[j] {
                if i != j {
                    pos[i * n + j] = 1.0;
                }
            } else if families[i] != families[j] {
                neg[i * n + j] = 1.0;
            }
        }
    }
    (
        Tensor::from_data(TensorData::new(pos, [n, n]), device),
        Tensor::from_data(TensorData::new(neg, [n, n]), device),
    )
}
