//! The noise-aware loss of tracklet self-supervision (METHODS §3, the paper's Eq. 1, a MIL-NCE
//! form). Anchor `i` has embedding `y_i` and a bag of K members `z_ik`; with
//! `s = cos / tau`,
//! `L_i = -log( sum_k e^{s(z_ik, y_i)} / sum_k sum_j e^{s(z_ik, y_j)} )`, averaged over i.
//! Only *some* member of a bag has to be near its own anchor, so one wrong member (another
//! polyp that happened to be close in time) costs at most `log` of the bag share, never the
//! full push a per-member InfoNCE would give it.

use burn::tensor::{Tensor, TensorData};

/// The tracklet-level loss. `anchors`: [n, d] and `bags`: [n, k, d], unit rows (after the
/// projector) -> scalar [1].
pub fn noise_aware(anchors: Tensor<2>, bags: Tensor<3>, tau: f64) -> Tensor<1> {
    let [n, d] = anchors.dims();
    let [bn, k, bd] = bags.dims();
    assert_eq!((bn, bd), (n, d), "one bag per anchor, same width");
    noise_aware_frames(anchors.reshape([n, 1, d]), bags.reshape([n, k, 1, d]), tau)
}

/// The frame-level loss: frame t of each bag member against frame t of every anchor, the
/// tracklet-level formula per frame position, averaged over positions.
/// `anchors`: [n, f, d] and `bags`: [n, k, f, d], unit rows -> scalar [1].
pub fn noise_aware_frames(anchors: Tensor<3>, bags: Tensor<4>, tau: f64) -> Tensor<1> {
    let [n, f, d] = anchors.dims();
    let [bn, k, bf, bd] = bags.dims();
    assert_eq!(
        (bn, bf, bd),
        (n, f, d),
        "one bag per anchor, same frames and width"
    );
    let device = anchors.device();
    let y = anchors.swap_dims(0, 1); // [f, n, d]
    let z = bags.permute([2, 0, 1, 3]).reshape([f, n * k, d]); // [f, n*k, d]
    let s = z.matmul(y.swap_dims(1, 2)).reshape([f, n, k * n]) / tau; // [f, n, k*n]: (i, kk, j)
    // 1 where the anchor j is the bag's own anchor i.
    let own: Vec<f32> = (0..n)
        .flat_map(|i| (0..k).flat_map(move |_| (0..n).map(move |j| (i == j) as u8 as f32)))
        .collect();
    let own =
        Tensor::<3>::from_data(TensorData::new(own, [1, n, k * n]), &device).expand([f, n, k * n]);
    // Subtract each row's largest similarity before exponentiating; it cancels in the ratio.
    let top = s.clone().max_dim(2).detach(); // [f, n, 1]
    let e = (s - top).exp();
    let all = e.clone().sum_dim(2); // [f, n, 1]
    let mine = (e * own).sum_dim(2).clamp_min(1e-30); // [f, n, 1]
    (all.log() - mine.log()).mean().reshape([1])
}
