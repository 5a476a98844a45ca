//! The noise-aware loss of tracklet self-supervision (METHODS §3, the paper's Eq. 1, a MIL-NCE
//! form). Anchor `i` has embedding `y_i` and a bag of K members `z_ik`; with
//! `s = cos / tau`,
//! `L_i = -log( sum_k e^{s(z_ik, y_i)} / sum_k sum_j e^{s(z_ik, y_j)} )`, averaged over i.
//! Only *some* member of a bag has to be near its own anchor, so one wrong member (another
//! polyp that happened to be close in time) costs at most `log` of the bag share, never the
//! full push a per-member InfoNCE would give it.
//!
//! An option beyond the paper ([`KnownNegatives`]): fragments of a tracklet on screen in the
//! same frame as the anchor's show another polyp for certain (one box per polyp per frame), so
//! they join the anchor's denominator, `+ sum_m e^{s(n_im, y_i)}`. Without them a colon's two
//! polyps seen together are exactly what late, diverse bags pull together.

use burn::tensor::{Tensor, TensorData};

/// The tracklet-level loss. `anchors`: [n, d] and `bags`: [n, k, d], unit rows (after the
/// projector) -> scalar [1].
pub fn noise_aware(anchors: Tensor<2>, bags: Tensor<3>, tau: f64) -> Tensor<1> {
    noise_aware_with(anchors, bags, None, tau)
}

/// Fragments known to show another polyp than their anchor's: `rows` [n, m, f, d] (unit rows;
/// f = 1 at the tracklet level) and `mask` [n, m], 1 where slot m of anchor n holds one, 0
/// for padding.
#[derive(Debug, Clone)]
pub struct KnownNegatives {
    pub rows: Tensor<4>,
    pub mask: Tensor<2>,
}

/// [`noise_aware`] with known negatives in each anchor's denominator.
pub fn noise_aware_with(
    anchors: Tensor<2>,
    bags: Tensor<3>,
    negatives: Option<KnownNegatives>,
    tau: f64,
) -> Tensor<1> {
    let [n, d] = anchors.dims();
    let [bn, k, bd] = bags.dims();
    assert_eq!((bn, bd), (n, d), "one bag per anchor, same width");
    noise_aware_frames_with(
        anchors.reshape([n, 1, d]),
        bags.reshape([n, k, 1, d]),
        negatives,
        tau,
    )
}

/// The frame-level loss: frame t of each bag member against frame t of every anchor, the
/// tracklet-level formula per frame position, averaged over positions.
/// `anchors`: [n, f, d] and `bags`: [n, k, f, d], unit rows -> scalar [1].
pub fn noise_aware_frames(anchors: Tensor<3>, bags: Tensor<4>, tau: f64) -> Tensor<1> {
    noise_aware_frames_with(anchors, bags, None, tau)
}

/// [`noise_aware_frames`] with known negatives (frame t of a negative against frame t of its
/// anchor) in each anchor's denominator.
pub fn noise_aware_frames_with(
    anchors: Tensor<3>,
    bags: Tensor<4>,
    negatives: Option<KnownNegatives>,
    tau: f64,
) -> Tensor<1> {
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
    let s = z.matmul(y.clone().swap_dims(1, 2)).reshape([f, n, k * n]) / tau; // [f, n, k*n]: (i, kk, j)
    // 1 where the anchor j is the bag's own anchor i.
    let own: Vec<f32> = (0..n)
        .flat_map(|i| (0..k).flat_map(move |_| (0..n).map(move |j| (i == j) as u8 as f32)))
        .collect();
    let own =
        Tensor::<3>::from_data(TensorData::new(own, [1, n, k * n]), &device).expand([f, n, k * n]);
    // Known negatives: s(n_im, y_i) for frame position t, [f, n, m].
    let negatives = negatives.map(|KnownNegatives { rows, mask }| {
        let [nn, m, nf, nd] = rows.dims();
        assert_eq!(
            (nn, nf, nd),
            (n, f, d),
            "negatives per anchor, same frames and width"
        );
        let rows = rows.permute([2, 0, 1, 3]); // [f, n, m, d]
        let s_neg = (rows * y.clone().unsqueeze_dim::<4>(2))
            .sum_dim(3)
            .reshape([f, n, m])
            / tau;
        let mask = mask.unsqueeze_dim::<3>(0).expand([f, n, m]);
        (s_neg, mask)
    });
    // Subtract each row's largest similarity before exponentiating; it cancels in the ratio.
    let mut top = s.clone().max_dim(2).detach(); // [f, n, 1]
    if let Some((s_neg, _)) = &negatives {
        top = top.max_pair(s_neg.clone().max_dim(2).detach());
    }
    let e = (s - top.clone()).exp();
    let mut all = e.clone().sum_dim(2); // [f, n, 1]
    if let Some((s_neg, mask)) = negatives {
        all = all + ((s_neg - top).exp() * mask).sum_dim(2);
    }
    let mine = (e * own).sum_dim(2).clamp_min(1e-30); // [f, n, 1]
    (all.log() - mine.log()).mean().reshape([1])
}
