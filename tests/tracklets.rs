//! Tracklet self-supervision (METHODS §3): fragments and crops, the temporal bag sampler, and
//! the noise-aware loss against values worked out by hand.

use burn::tensor::{Device, Tensor, TensorData};
use endotwin::model::preprocess::tracklet_crop_rect as crop_square;
use endotwin::plumbing::Rng;
use endotwin::tracklets::bags::{
    self, Curriculum, FragmentTime, RankSampling, T_MAX, T_MIN, draw_ranks, rank_probabilities,
};
use endotwin::tracklets::fragments::fragments;
use endotwin::train::tracklet_losses::{
    KnownNegatives, noise_aware, noise_aware_frames, noise_aware_with,
};

#[test]
fn short_tracklets_are_dropped_and_fragments_take_every_fourth_frame() {
    assert!(
        fragments(29).is_empty(),
        "29 frames is below the 30-frame minimum"
    );
    let one = fragments(30);
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].positions, vec![0, 4, 8, 12, 16, 20, 24, 28]);
    let two = fragments(64);
    assert_eq!(two.len(), 2);
    assert_eq!(two[1].positions, vec![32, 36, 40, 44, 48, 52, 56, 60]);
    assert_eq!(two[1].centre(), 46.0);
    // Fragments of one tracklet never share a frame.
    let many = fragments(500);
    let mut seen = std::collections::HashSet::new();
    assert!(
        many.iter()
            .flat_map(|f| f.positions.clone())
            .all(|p| seen.insert(p))
    );
    assert!(many.iter().all(|f| *f.positions.last().unwrap() < 500));
}

#[test]
fn the_crop_is_five_box_diagonals_about_the_box_and_stays_inside_the_image() {
    // A 6 x 8 box (diagonal 10) in the middle of a 640 x 480 frame: a 50 px square about it.
    let c = crop_square([317.0, 236.0, 6.0, 8.0], 640, 480);
    assert_eq!(c, [295.0, 215.0, 50.0, 50.0]);
    // Near the corner the square moves inside the image rather than being cut.
    let c = crop_square([0.0, 0.0, 6.0, 8.0], 640, 480);
    assert_eq!(c, [0.0, 0.0, 50.0, 50.0]);
    let c = crop_square([630.0, 470.0, 6.0, 8.0], 640, 480);
    assert_eq!(c, [590.0, 430.0, 50.0, 50.0]);
    // A box too large for five diagonals: the crop is the image's shorter side.
    let c = crop_square([200.0, 100.0, 200.0, 200.0], 640, 480);
    assert_eq!(c[2], 480.0);
    assert_eq!(c[1], 0.0);
}

#[test]
fn the_temperature_follows_the_cosine_curriculum() {
    let t = |c| Curriculum::Cosine.temperature(c);
    assert!((t(0.0) - T_MIN).abs() < 1e-12);
    assert!((t(1.0) - T_MAX).abs() < 1e-12);
    assert!((t(0.5) - (T_MIN + T_MAX) / 2.0).abs() < 1e-12);
    assert!(t(0.25) < t(0.5) && t(0.5) < t(0.75));
    assert_eq!(Curriculum::Fixed(2.0).temperature(0.9), 2.0);
}

/// Exact probability that each rank is among the k drawn without replacement, by enumerating
/// every ordered sequence of picks.
fn inclusion(p: &[f64], k: usize) -> Vec<f64> {
    fn walk(p: &[f64], k: usize, chosen: &mut Vec<usize>, prob: f64, out: &mut [f64]) {
        if chosen.len() == k {
            chosen.iter().for_each(|&c| out[c] += prob);
            return;
        }
        let left: f64 = (0..p.len())
            .filter(|i| !chosen.contains(i))
            .map(|i| p[i])
            .sum();
        for i in 0..p.len() {
            if !chosen.contains(&i) {
                chosen.push(i);
                walk(p, k, chosen, prob * p[i] / left, out);
                chosen.pop();
            }
        }
    }
    let mut out = vec![0.0; p.len()];
    walk(p, k, &mut Vec::new(), 1.0, &mut out);
    out
}

#[test]
fn drawn_ranks_follow_the_exponential_distribution() {
    let (n, k, t, draws) = (7, 4, 2.0, 200_000);
    let p = rank_probabilities(n, t, RankSampling::Exponential);
    for r in 1..n {
        let ratio = p[r] / p[r - 1];
        assert!(
            (ratio - (-1.0f64 / t).exp()).abs() < 1e-12,
            "P(r) ∝ exp(-r/T)"
        );
    }
    let want = inclusion(&p, k);
    let mut first = vec![0usize; n];
    let mut included = vec![0usize; n];
    let mut rng = Rng::new(3);
    for _ in 0..draws {
        let ranks = draw_ranks(&mut rng, n, k, t, RankSampling::Exponential);
        assert_eq!(ranks.len(), k);
        let mut distinct = ranks.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            k,
            "ranks are drawn without replacement: {ranks:?}"
        );
        first[ranks[0] - 1] += 1;
        ranks.iter().for_each(|r| included[r - 1] += 1);
    }
    for r in 0..n {
        let f = first[r] as f64 / draws as f64;
        let i = included[r] as f64 / draws as f64;
        assert!(
            (f - p[r]).abs() < 0.005,
            "rank {}: first pick {f} vs P {}",
            r + 1,
            p[r]
        );
        assert!(
            (i - want[r]).abs() < 0.005,
            "rank {}: in bag {i} vs {}",
            r + 1,
            want[r]
        );
    }
    // Uniform sampling: every rank equally often in a bag (k / n).
    let mut included = vec![0usize; n];
    for _ in 0..draws {
        for r in draw_ranks(&mut rng, n, k, t, RankSampling::Uniform) {
            included[r - 1] += 1;
        }
    }
    for c in included {
        let i = c as f64 / draws as f64;
        assert!(
            (i - k as f64 / n as f64).abs() < 0.005,
            "uniform inclusion {i}"
        );
    }
}

fn timeline() -> Vec<FragmentTime> {
    // Video 0: polyp 1 at frames 16..144, polyp 2 at 300..; video 1 holds one fragment.
    let at = |video, centre, identity| FragmentTime {
        video,
        centre,
        on_screen: (identity as i64 * 1000, identity as i64 * 1000 + 10),
        identity: Some(identity),
    };
    vec![
        at(0, 16.0, 1),
        at(0, 48.0, 1),
        at(0, 80.0, 1),
        at(0, 112.0, 1),
        at(0, 144.0, 1),
        at(0, 316.0, 2),
        at(0, 348.0, 2),
        at(1, 20.0, 3),
    ]
}

#[test]
fn bags_come_from_the_anchors_video_and_early_bags_are_its_nearest_fragments() {
    let frags = timeline();
    assert_eq!(bags::ranked_neighbours(2, &frags), vec![1, 3, 0, 4, 5, 6]);
    let mut rng = Rng::new(5);
    let mut pure = 0;
    for _ in 0..200 {
        let bag = bags::bag(&mut rng, 2, &frags, T_MIN, RankSampling::Exponential);
        assert_eq!(bag.len(), 4);
        assert!(
            !bag.contains(&2) && !bag.contains(&7),
            "never the anchor, never another video"
        );
        if bags::purity(2, &bag, &frags) == Some(1.0) {
            pure += 1;
        }
    }
    assert!(
        pure > 190,
        "at T_min bags are near-duplicates: {pure}/200 pure"
    );
    // At T_max the far fragments (another polyp) come in: some bags are impure.
    let impure = (0..200)
        .filter(|_| {
            let bag = bags::bag(&mut rng, 2, &frags, T_MAX, RankSampling::Exponential);
            bags::purity(2, &bag, &frags).unwrap() < 1.0
        })
        .count();
    assert!(impure > 50, "late bags are diverse: {impure}/200 impure");
    // A fragment alone in its video has no bag.
    assert!(bags::bag(&mut rng, 7, &frags, T_MAX, RankSampling::Exponential).is_empty());
    assert_eq!(bags::purity(0, &[1, 5], &frags), Some(0.5));
}

fn t2(v: &[f32], device: &Device) -> Tensor<2> {
    Tensor::from_data(TensorData::new(v.to_vec(), [v.len() / 2, 2]), device)
}

fn t3(v: &[f32], k: usize, device: &Device) -> Tensor<3> {
    Tensor::from_data(
        TensorData::new(v.to_vec(), [v.len() / (2 * k), k, 2]),
        device,
    )
}

fn scalar(t: Tensor<1>) -> f64 {
    t.into_scalar::<f32>() as f64
}

// Two anchors y0 = (1, 0), y1 = (0, 1), bags of two.
const ANCHORS: [f32; 4] = [1.0, 0.0, 0.0, 1.0];
// Clean bags: z00 = (1, 0), z01 = (0.6, 0.8); z10 = (0, 1), z11 = (0.6, 0.8).
const CLEAN: [f32; 8] = [1.0, 0.0, 0.6, 0.8, 0.0, 1.0, 0.6, 0.8];
// Bag 0 holds one wrong member: a copy of anchor 1's polyp.
const ONE_WRONG: [f32; 8] = [1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0];

fn clean_want() -> f64 {
    let e = f64::exp;
    let l0 = -((e(1.0) + e(0.6)) / (e(1.0) + e(0.6) + e(0.0) + e(0.8))).ln();
    let l1 = -((e(1.0) + e(0.8)) / (e(1.0) + e(0.8) + e(0.0) + e(0.6))).ln();
    (l0 + l1) / 2.0
}

fn one_wrong_want() -> f64 {
    // Bag 0: (e + 1) / (e + 1 + 1 + e) = 1/2; bag 1: 2e / (2e + 2).
    (2f64.ln() + (1.0 + (-1f64).exp()).ln()) / 2.0
}

#[test]
fn the_noise_aware_loss_matches_hand_computed_values() {
    let device = Device::flex();
    let got = scalar(noise_aware(
        t2(&ANCHORS, &device),
        t3(&CLEAN, 2, &device),
        1.0,
    ));
    assert!(
        (got - clean_want()).abs() < 1e-5,
        "{got} vs {}",
        clean_want()
    );
    let got = scalar(noise_aware(
        t2(&ANCHORS, &device),
        t3(&ONE_WRONG, 2, &device),
        1.0,
    ));
    assert!(
        (got - one_wrong_want()).abs() < 1e-5,
        "{got} vs {}",
        one_wrong_want()
    );
}

#[test]
fn a_wrong_bag_member_costs_little_when_another_member_is_right() {
    let device = Device::flex();
    // At tau = 0.07 the wrong member alone would cost about 1/tau = 14 nats under a
    // per-member InfoNCE; here bag 0 costs log 2 (its right member carries it) and bag 1
    // almost nothing.
    let got = scalar(noise_aware(
        t2(&ANCHORS, &device),
        t3(&ONE_WRONG, 2, &device),
        0.07,
    ));
    assert!(got.is_finite());
    assert!((got - 2f64.ln() / 2.0).abs() < 1e-3, "{got}");
}

#[test]
fn the_frame_level_loss_averages_the_loss_of_each_frame_position() {
    let device = Device::flex();
    // Frame 0 of every fragment is the clean case, frame 1 the one-wrong case.
    let anchors: Vec<f32> = (0..2)
        .flat_map(|i| [&ANCHORS[2 * i..2 * i + 2], &ANCHORS[2 * i..2 * i + 2]].concat())
        .collect();
    let bags: Vec<f32> = (0..4)
        .flat_map(|m| [&CLEAN[2 * m..2 * m + 2], &ONE_WRONG[2 * m..2 * m + 2]].concat())
        .collect();
    let anchors = Tensor::<3>::from_data(TensorData::new(anchors, [2, 2, 2]), &device);
    let bags = Tensor::<4>::from_data(TensorData::new(bags, [2, 2, 2, 2]), &device);
    let got = scalar(noise_aware_frames(anchors, bags, 1.0));
    let want = (clean_want() + one_wrong_want()) / 2.0;
    assert!((got - want).abs() < 1e-5, "{got} vs {want}");
}

#[test]
fn a_known_negative_joins_only_its_anchors_denominator_and_padding_costs_nothing() {
    let device = Device::flex();
    let e = f64::exp;
    // Anchor 0 gets one known negative n00 = (0.6, 0.8) (a polyp on screen with it), anchor 1
    // a padding slot (mask 0) holding anything.
    let rows = Tensor::<4>::from_data(
        TensorData::new(vec![0.6f32, 0.8, 1.0, 0.0], [2, 1, 1, 2]),
        &device,
    );
    let mask = Tensor::<2>::from_data(TensorData::new(vec![1.0f32, 0.0], [2, 1]), &device);
    let got = scalar(noise_aware_with(
        t2(&ANCHORS, &device),
        t3(&CLEAN, 2, &device),
        Some(KnownNegatives { rows, mask }),
        1.0,
    ));
    // Bag 0's denominator gains e^{cos(n00, y0)} = e^0.6; bag 1's is unchanged.
    let l0 = -((e(1.0) + e(0.6)) / (e(1.0) + e(0.6) + e(0.0) + e(0.8) + e(0.6))).ln();
    let l1 = -((e(1.0) + e(0.8)) / (e(1.0) + e(0.8) + e(0.0) + e(0.6))).ln();
    let want = (l0 + l1) / 2.0;
    assert!((got - want).abs() < 1e-5, "{got} vs {want}");
    // Every slot padding: exactly the loss without negatives.
    let rows = Tensor::<4>::from_data(TensorData::new(vec![1.0f32; 4], [2, 1, 1, 2]), &device);
    let mask = Tensor::<2>::zeros([2, 1], &device);
    let got = scalar(noise_aware_with(
        t2(&ANCHORS, &device),
        t3(&CLEAN, 2, &device),
        Some(KnownNegatives { rows, mask }),
        1.0,
    ));
    assert!((got - clean_want()).abs() < 1e-5, "{got}");
}

#[test]
fn fragments_of_two_tracklets_on_screen_together_are_known_apart_and_kept_out_of_bags() {
    // Video 0: tracklet A (frames 0..200) has fragments at 16..144; tracklet B (frames 100..180,
    // a second polyp on screen with A) one at 120; tracklet C (frames 400..500, later) one at
    // 416. Without identities, B is known to be another polyp than A; C is not known either way.
    let at = |centre, on_screen| FragmentTime {
        video: 0,
        centre,
        on_screen,
        identity: None,
    };
    let frags = vec![
        at(16.0, (0, 200)),
        at(48.0, (0, 200)),
        at(80.0, (0, 200)),
        at(120.0, (100, 180)),
        at(416.0, (400, 500)),
    ];
    assert_eq!(bags::co_visible(2, &frags), vec![3]);
    assert_eq!(bags::co_visible(3, &frags), vec![2, 1, 0]);
    assert!(bags::co_visible(4, &frags).is_empty());
    let mut rng = Rng::new(9);
    for t in [T_MIN, T_MAX] {
        for _ in 0..100 {
            let bag =
                bags::bag_without_co_visible(&mut rng, 2, &frags, t, RankSampling::Exponential);
            assert!(!bag.contains(&3), "B is never in A's bag: {bag:?}");
            assert_eq!(bag.len(), 3, "the others all are");
        }
    }
    // B's only neighbours besides A are far away: its bag is C alone.
    assert_eq!(
        bags::bag_without_co_visible(&mut rng, 3, &frags, T_MIN, RankSampling::Exponential),
        vec![4]
    );
}
