//! The EndoFinder losses against values worked out by hand on three 2-D embeddings:
//! z0 = (1, 0), z1 = (0.6, 0.8) in group 0 and z2 = (0, 1) in group 1.

use burn::tensor::{Device, Tensor, TensorData};
use endotwin::model::reconstruction::masked_mse;
use endotwin::train::losses::{contrastive, contrastive_in_families, entropy, entropy_in_families};

fn z(device: &Device) -> Tensor<2> {
    Tensor::from_data(
        TensorData::new(vec![1.0f32, 0.0, 0.6, 0.8, 0.0, 1.0], [3, 2]),
        device,
    )
}

fn scalar(t: Tensor<1>) -> f64 {
    t.into_scalar::<f32>() as f64
}

#[test]
fn contrastive_loss_averages_the_two_ordered_positive_pairs() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    // Pair (0, 1): cos 0.6 against the negative z2 at cos 0   -> log(1 + e^{-0.6}).
    // Pair (1, 0): cos 0.6 against the negative z2 at cos 0.8 -> log(1 + e^{0.2}).
    let want = ((1.0 + (-0.6f64).exp()).ln() + (1.0 + 0.2f64.exp()).ln()) / 2.0;
    let got = scalar(contrastive(z(&device), &[0, 0, 1], 1.0));
    assert!((got - want).abs() < 1e-5, "{got} vs {want}");

    // tau = 0.05 scales every similarity by 20 (and stays finite).
    let want = ((1.0 + (-12.0f64).exp()).ln() + (1.0 + 4.0f64.exp()).ln()) / 2.0;
    let got = scalar(contrastive(z(&device), &[0, 0, 1], 0.05));
    assert!((got - want).abs() < 1e-4, "{got} vs {want}");
}

#[test]
fn entropy_regulariser_uses_each_rows_nearest_non_matching_neighbour() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    // Nearest non-matching distances: row 0 -> z2 at sqrt(2); row 1 -> z2 at sqrt(0.4);
    // row 2 -> z1 at sqrt(0.4).
    let want = -(0.5 * 2f64.ln() + 0.4f64.ln()) / 3.0;
    let got = scalar(entropy(z(&device), &[0, 0, 1]));
    assert!((got - want).abs() < 1e-5, "{got} vs {want}");
}

#[test]
fn masked_reconstruction_counts_hidden_patches_only() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    // Two patches of two pixels: the hidden one is off by (1, 3), the visible one by 100.
    let predicted = Tensor::<3>::from_data(
        TensorData::new(vec![0.0f32, 0.0, 0.0, 0.0], [1, 2, 2]),
        &device,
    );
    let target = Tensor::<3>::from_data(
        TensorData::new(vec![1.0f32, 3.0, 100.0, 100.0], [1, 2, 2]),
        &device,
    );
    let hidden = Tensor::<2>::from_data(TensorData::new(vec![1.0f32, 0.0], [1, 2]), &device);
    let got = scalar(masked_mse(predicted, target, hidden));
    assert!((got - 5.0).abs() < 1e-6, "mean of 1 and 9 is 5, got {got}");
}

#[test]
fn the_losses_have_gradients_that_pull_positives_together() {
    let _rng = crate::common::device_rng();
    // One gradient step on the embeddings themselves lowers the contrastive loss.
    let device = Device::flex().autodiff();
    let z0 = z(&device).require_grad();
    let loss = contrastive(z0.clone(), &[0, 0, 1], 0.5) + entropy(z0.clone(), &[0, 0, 1]);
    let before = loss.clone().into_scalar::<f32>();
    let grads = loss.backward();
    let g = z0.grad(&grads).expect("gradient");
    let stepped = (z0.inner() - g * 0.1).autodiff();
    let after = (contrastive(stepped.clone(), &[0, 0, 1], 0.5) + entropy(stepped, &[0, 0, 1]))
        .into_scalar::<f32>();
    assert!(after < before, "{after} !< {before}");
}

/// Four rows: z0, z1 two augmentations of one image of polyp A (group 0); z2 another view of
/// polyp A (its own group 1); z3 a view of polyp B (group 2).
fn siblings(device: &Device) -> Tensor<2> {
    Tensor::from_data(
        TensorData::new(vec![1.0f32, 0.0, 0.6, 0.8, 0.8, 0.6, 0.0, 1.0], [4, 2]),
        device,
    )
}

#[test]
fn a_sibling_view_of_the_same_polyp_is_never_a_negative() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    let groups = [0, 0, 1, 2];
    let polyps = [7, 7, 7, 9];
    // Only z3 (polyp B) is a negative of z0 and z1:
    // pair (0, 1): cos 0.6 vs z3 at 0   -> log(1 + e^{-0.6});
    // pair (1, 0): cos 0.6 vs z3 at 0.8 -> log(1 + e^{0.2}).
    let want = ((1.0 + (-0.6f64).exp()).ln() + (1.0 + 0.2f64.exp()).ln()) / 2.0;
    let got = scalar(contrastive_in_families(
        siblings(&device),
        &groups,
        &polyps,
        1.0,
    ));
    assert!((got - want).abs() < 1e-5, "{got} vs {want}");
    // With one group per image and no families, the sibling z2 is pushed away and the loss
    // is larger: the difference is exactly the sibling's share of the denominators.
    let plain = scalar(contrastive(siblings(&device), &groups, 1.0));
    assert!(plain > got + 0.1, "{plain} vs {got}");

    // Entropy: the nearest non-matching row of z0, z1 and z2 is z3, never a sibling.
    // ||z0 - z3||^2 = 2, ||z1 - z3||^2 = 0.4, ||z2 - z3||^2 = 0.8; z3's nearest is z1 (0.4).
    let want = -(0.5 * (2f64.ln() + 0.4f64.ln() + 0.8f64.ln() + 0.4f64.ln())) / 4.0;
    let got = scalar(entropy_in_families(siblings(&device), &groups, &polyps));
    assert!((got - want).abs() < 1e-5, "{got} vs {want}");
}

#[test]
fn the_quantisation_term_is_zero_at_balanced_corners_and_hand_computed_elsewhere() {
    let _rng = crate::common::device_rng();
    use endotwin::train::image_encoder::quantization;
    let device = Device::flex();
    let t = |v: Vec<f32>| Tensor::<2>::from_data(TensorData::new(v, [2, 4]), &device);
    // d = 4, sqrt(d) = 2. Two opposite corners: every |z| sqrt(d) = 1 and every bit's batch
    // mean is 0.
    let balanced = quantization(t(vec![0.5, -0.5, 0.5, -0.5, -0.5, 0.5, -0.5, 0.5]), 3.0);
    assert!(balanced.into_scalar::<f32>().abs() < 1e-6);
    // A corner and an axis: corners part (0 x 4 + [1, 1, 1, 1]) / 8 = 0.5; batch means
    // [0.75, -0.25, 0.25, -0.25] x 2, squared [2.25, 0.25, 0.25, 0.25], mean 0.75; times 3.
    let mixed = quantization(t(vec![0.5, -0.5, 0.5, -0.5, 1.0, 0.0, 0.0, 0.0]), 3.0);
    let v = mixed.into_scalar::<f32>();
    assert!((v - 3.75).abs() < 1e-5, "{v}");
}
