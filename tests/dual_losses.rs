//! The dual-encoder losses against values worked out by hand on 2-D unit embeddings:
//! images v0 = (1, 0), v1 = (0, 1); texts t0 = (1, 0), t1 = (0.6, 0.8). With scale 1 the
//! similarities are S = [[1, 0.6], [0, 0.8]] (row: image, column: text).

use burn::tensor::{Device, Tensor, TensorData};
use endotwin::train::dual_losses::{
    attribute_targets, info_nce, kl_multi_positive, soft_target_clip,
};

fn m2(v: &[f32], device: &Device) -> Tensor<2> {
    let n = v.len() / 2;
    Tensor::from_data(TensorData::new(v.to_vec(), [n, 2]), device)
}

fn scale(s: f32, device: &Device) -> Tensor<1> {
    Tensor::from_data(TensorData::new(vec![s], [1]), device)
}

fn scalar(t: Tensor<1>) -> f64 {
    t.into_scalar::<f32>() as f64
}

/// log of e^a / (e^a + e^b).
fn log_p(a: f64, b: f64) -> f64 {
    a - (a.exp() + b.exp()).ln()
}

#[test]
fn info_nce_is_the_mean_of_both_directions_cross_entropies() {
    let _rng = crate::common::device_rng();
    let d = Device::flex();
    let (v, t) = (m2(&[1.0, 0.0, 0.0, 1.0], &d), m2(&[1.0, 0.0, 0.6, 0.8], &d));
    // Image rows: [1, 0.6] target 0; [0, 0.8] target 1. Text rows (columns of S): [1, 0]
    // target 0; [0.6, 0.8] target 1.
    let images = -(log_p(1.0, 0.6) + log_p(0.8, 0.0)) / 2.0;
    let texts = -(log_p(1.0, 0.0) + log_p(0.8, 0.6)) / 2.0;
    let want = (images + texts) / 2.0;
    let got = scalar(info_nce(v.clone(), t.clone(), scale(1.0, &d)));
    assert!((got - want).abs() < 1e-5, "{got} vs {want}");
    // tau = 0.1: every similarity times 10.
    let images = -(log_p(10.0, 6.0) + log_p(8.0, 0.0)) / 2.0;
    let texts = -(log_p(10.0, 0.0) + log_p(8.0, 6.0)) / 2.0;
    let got = scalar(info_nce(v, t, scale(10.0, &d)));
    assert!((got - (images + texts) / 2.0).abs() < 1e-4, "{got}");
}

#[test]
fn soft_targets_spread_each_rows_target_after_normalising_both_directions() {
    let _rng = crate::common::device_rng();
    let d = Device::flex();
    let (v, t) = (m2(&[1.0, 0.0, 0.0, 1.0], &d), m2(&[1.0, 0.0, 0.6, 0.8], &d));
    // M = [[1, 0.5], [0, 1]]: image 0 also half-matches text 1; image 1 matches text 1 only.
    // Image side rows normalised: [2/3, 1/3], [0, 1]. Text side (M^T = [[1, 0], [0.5, 1]]):
    // [1, 0], [1/3, 2/3].
    let m = Tensor::<2>::from_data(TensorData::new(vec![1.0f32, 0.5, 0.0, 1.0], [2, 2]), &d);
    let images =
        -((2.0 / 3.0) * log_p(1.0, 0.6) + (1.0 / 3.0) * log_p(0.6, 1.0) + log_p(0.8, 0.0)) / 2.0;
    let texts =
        -(log_p(1.0, 0.0) + (1.0 / 3.0) * log_p(0.6, 0.8) + (2.0 / 3.0) * log_p(0.8, 0.6)) / 2.0;
    let want = (images + texts) / 2.0;
    let got = scalar(soft_target_clip(v, t, m, scale(1.0, &d)));
    assert!((got - want).abs() < 1e-5, "{got} vs {want}");
}

#[test]
fn the_kl_loss_with_several_positives_per_row_matches_a_hand_computation() {
    let _rng = crate::common::device_rng();
    let d = Device::flex();
    // Four rows, captions [a, a, b, b]: every row has two positives (itself and its twin).
    let images = m2(&[1.0, 0.0, 0.8, 0.6, 0.0, 1.0, 0.6, 0.8], &d);
    let texts = m2(&[1.0, 0.0, 0.0, 1.0, 0.6, 0.8, 0.8, 0.6], &d);
    let iv = [[1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [0.6, 0.8]];
    let tv = [[1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [0.8, 0.6]];
    let caps = [0usize, 0, 1, 1];
    let kl = |a: &[[f64; 2]; 4], b: &[[f64; 2]; 4]| {
        let mut total = 0.0;
        for i in 0..4 {
            let s: Vec<f64> = (0..4)
                .map(|j| a[i][0] * b[j][0] + a[i][1] * b[j][1])
                .collect();
            let z: f64 = s.iter().map(|x| x.exp()).sum();
            for j in 0..4 {
                if caps[i] == caps[j] {
                    let p = s[j].exp() / z;
                    total += 0.5 * (0.5f64 / p).ln();
                }
            }
        }
        total / 4.0
    };
    let want = (kl(&iv, &tv) + kl(&tv, &iv)) / 2.0;
    let got = scalar(kl_multi_positive(
        images.clone(),
        texts.clone(),
        &caps,
        scale(1.0, &d),
    ));
    assert!((got - want).abs() < 1e-5, "{got} vs {want}");
    // With all captions distinct it is InfoNCE (KL against a one-hot row is its CE).
    let distinct = scalar(kl_multi_positive(
        images.clone(),
        texts.clone(),
        &[0, 1, 2, 3],
        scale(1.0, &d),
    ));
    let nce = scalar(info_nce(images, texts, scale(1.0, &d)));
    assert!((distinct - nce).abs() < 1e-5, "{distinct} vs {nce}");
}

#[test]
fn attribute_targets_are_cosines_and_empty_vectors_match_each_other_only() {
    let _rng = crate::common::device_rng();
    let a = vec![vec![1.0, 1.0, 0.0], vec![0.0, 0.0, 0.0]];
    let b = vec![
        vec![1.0, 0.0, 0.0],
        vec![0.0, 0.0, 0.0],
        vec![1.0, 1.0, 0.0],
    ];
    let m = attribute_targets(&a, &b).try_to_vec::<f32>().unwrap();
    let c = 1.0 / 2f32.sqrt();
    let want = [c, 0.0, 1.0, 0.0, 1.0, 0.0];
    for (g, w) in m.iter().zip(want) {
        assert!((g - w).abs() < 1e-6, "{m:?}");
    }
}

#[test]
fn a_learnable_temperature_gets_a_gradient() {
    let _rng = crate::common::device_rng();
    let d = Device::flex().autodiff();
    let v = m2(&[1.0, 0.0, 0.0, 1.0], &d);
    let t = m2(&[1.0, 0.0, 0.6, 0.8], &d);
    let s = scale(1.0, &d).require_grad();
    let loss = info_nce(v, t, s.clone());
    let grads = loss.backward();
    let g = s
        .grad(&grads)
        .expect("scale has a gradient")
        .into_scalar::<f32>();
    // Raising the scale sharpens correct matches here: the loss falls.
    assert!(g < 0.0, "{g}");
}
