//! The shipped models held to their figures: each one, loaded from `models/` as a user gets
//! it, on a small generated held-out split (a seed and split no model saw), must reach a floor
//! well below its README figure and beat a no-learning baseline on the same cases. A model
//! whose weights are broken (shuffled, zeroed, an untrained one) fails these floors.

use burn::tensor::Device;
use endotwin::data::phantom::{self, PhantomConfig, Split};
use endotwin::plumbing::Progress;
use endotwin::prompts::model::{detection_texts, detector_path, load, polyp_probability};
use endotwin::prompts::records::{Records, frame_truth};
use endotwin::store::{OpenMode, Store};

/// 2v2 uAP of the mean of views the shipped twin encoder must reach on 20 held-out phantom
/// polyps.
const PHANTOM_FLOOR: f64 = 0.75;

/// Within each examination, the share of (polyp frame, background frame) pairs in which
/// `score` ranks the polyp frame higher (the within-examination AUROC), and the pairs.
fn within_exam_auroc(
    records: &Records,
    truth: &std::collections::HashMap<i64, i64>,
    score: impl Fn(usize) -> Vec<f32>,
) -> (f64, usize) {
    let (mut above, mut pairs) = (0.0f64, 0usize);
    for (e, exam) in records.exams.iter().enumerate() {
        let p = score(e);
        let is_polyp = |f: usize| truth.contains_key(&exam.frames[f].media_id);
        for i in (0..p.len()).filter(|&i| is_polyp(i)) {
            for j in (0..p.len()).filter(|&j| !is_polyp(j)) {
                pairs += 1;
                above += if p[i] > p[j] {
                    1.0
                } else if p[i] == p[j] {
                    0.5
                } else {
                    0.0
                };
            }
        }
    }
    (above / pairs as f64, pairs)
}

/// Balanced accuracy of "polyp" when `score` > 0.5 (the detector's own decision: the polyp
/// sentence more likely than the background sentence), over every frame.
fn balanced_accuracy(
    records: &Records,
    truth: &std::collections::HashMap<i64, i64>,
    score: impl Fn(usize) -> Vec<f32>,
) -> f64 {
    let (mut tp, mut pos, mut tn, mut neg) = (0, 0, 0, 0);
    for (e, exam) in records.exams.iter().enumerate() {
        for (f, p) in score(e).into_iter().enumerate() {
            if truth.contains_key(&exam.frames[f].media_id) {
                pos += 1;
                tp += usize::from(p > 0.5);
            } else {
                neg += 1;
                tn += usize::from(p <= 0.5);
            }
        }
    }
    0.5 * (tp as f64 / pos as f64 + tn as f64 / neg as f64)
}

#[test]
fn the_shipped_detector_finds_polyp_frames_on_held_out_examinations() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path(), OpenMode::CreateIfMissing).unwrap();
    let cfg = PhantomConfig {
        seed: 211,
        split: Split::Test,
        polyps: 10,
        videos: 0,
        capsule_images: 0,
        background_frames: 2,
        frames_per_exam: 12,
        image_size: 64,
        ..PhantomConfig::default()
    };
    phantom::generate(&mut store, &cfg, &Progress::new()).unwrap();
    let device = Device::flex();
    let detector = load(&detector_path(&endotwin::default_models_dir()), &device).unwrap();
    let size = detector.config.image_size();
    let records = Records::load(&store, size, &Progress::new()).unwrap();
    let truth = frame_truth(&store).unwrap();
    let texts = detection_texts(&detector.model, &detector.config, &device);
    // Baseline: how red the frame is (eval real's redness: the red share of its pixels).
    let (redness, _) = within_exam_auroc(&records, &truth, |e| {
        records.exams[e]
            .frames
            .iter()
            .map(|f| {
                let m = store.media(f.media_id).unwrap().unwrap();
                let image = endotwin::data::images::decode_media(&store, &m)
                    .unwrap()
                    .image;
                endotwin::eval::real::redness(&image) as f32
            })
            .collect()
    });
    let shipped_score = |e: usize| {
        let which: Vec<(usize, usize)> =
            (0..records.exams[e].frames.len()).map(|f| (e, f)).collect();
        let v = detector.model.encode_images(records.batch_for(
            &which,
            &detector.config.input(),
            &device,
        ));
        polyp_probability(&detector.model, v, texts.clone())
    };
    let (model, pairs) = within_exam_auroc(&records, &truth, shipped_score);
    let decided = balanced_accuracy(&records, &truth, shipped_score);
    // The same architecture untrained, what a broken or lost checkpoint would be: a random
    // direction can rank frames well within an examination (measured 0.85, 0.14, 0.68 for
    // seeds 7-9) but decides at chance (0.50, 0.41, 0.50). The shipped detector (the ImageNet
    // one since #44): 0.935 ranked, 0.762 decided.
    device.seed(7);
    let untrained = detector.config.init(&device);
    let untrained_texts = detection_texts(&untrained, &detector.config, &device);
    let untrained_decided = balanced_accuracy(&records, &truth, |e: usize| {
        let which: Vec<(usize, usize)> =
            (0..records.exams[e].frames.len()).map(|f| (e, f)).collect();
        let v =
            untrained.encode_images(records.batch_for(&which, &detector.config.input(), &device));
        polyp_probability(&untrained, v, untrained_texts.clone())
    });
    eprintln!(
        "detector: ranked {model:.3}, decided {decided:.3}; redness {redness:.3}; untrained decided {untrained_decided:.3}; {pairs} pairs"
    );
    assert!(pairs >= 100, "{pairs} pairs");
    assert!(
        untrained_decided < 0.75,
        "the floor cannot tell an untrained detector"
    );
    assert!(
        decided >= 0.75,
        "the shipped detector's own decision (p > 0.5) is right for {decided:.3} of frames, balanced"
    );
    assert!(
        model >= 0.90,
        "the shipped detector ranks a polyp frame above a background frame of its examination in {model:.3} of {pairs} pairs (docs/models.md: 0.945 per frame on validation)"
    );
    assert!(
        model > redness + 0.1,
        "detector {model:.3} against redness {redness:.3}"
    );
}

/// Re-identification of 20 held-out phantom polyps (test split, seed 223) by `models`.
fn phantom_reid(models: &endotwin::twins::TwinModels) -> endotwin::eval::twins::TwinEval {
    use endotwin::eval::twins::{Candidate, run};
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path(), OpenMode::CreateIfMissing).unwrap();
    let cfg = PhantomConfig {
        seed: 223,
        split: Split::Test,
        polyps: 20,
        views_per_polyp: 4,
        videos: 0,
        capsule_images: 0,
        background_frames: 0,
        image_size: 192,
        ..PhantomConfig::default()
    };
    phantom::generate(&mut store, &cfg, &Progress::new()).unwrap();
    run(
        &store,
        &[Candidate {
            label: String::new(),
            models,
        }],
        6,
        223,
    )
    .unwrap()
}

fn reid_row<'a>(
    e: &'a endotwin::eval::twins::TwinEval,
    needle: &str,
    views: &str,
) -> &'a endotwin::eval::twins::ReidRow {
    let r = e
        .reid
        .iter()
        .find(|r| r.method.contains(needle) && r.views == views)
        .unwrap_or_else(|| panic!("no {needle} {views} row in {:?}", e.reid));
    eprintln!(
        "{} {}: acc@1 {:.3}, uAP {:.3}",
        r.method, r.views, r.accuracy_at_1, r.uap
    );
    r
}

/// The shipped twin encoder (ImageNet MobileNetV2 + the projection learned on real and
/// phantom polyps; mean of views, no scene encoder) on held-out phantom polyps.
#[test]
fn the_shipped_twin_encoder_finds_a_held_out_polyps_other_views() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    let models =
        endotwin::twins::TwinModels::load(&endotwin::default_models_dir(), &device).unwrap();
    let e = phantom_reid(&models);
    let mean = reid_row(&e, "mean of views, float", "2v2");
    let hist = reid_row(&e, "colour histogram 8x8x8 (baseline)", "2v2");
    // Measured here: mean of views 2v2 uAP 0.843, colour histogram 0.627 (20 polyps; 0.895
    // and 0.688 before the phantom kept one light per examination, #44 item 5). The
    // floor sits below the model and above the baseline; the same architecture untrained
    // reaches about 0.03 on the real sequences (tests/backbone.rs), far below any floor.
    assert!(
        mean.uap >= PHANTOM_FLOOR,
        "mean of views 2v2 uAP {}",
        mean.uap
    );
    assert!(
        mean.uap > hist.uap + 0.1,
        "mean {} against colour histogram {}",
        mean.uap,
        hist.uap
    );
}

/// The tracklet comparisons' frame encoders (the phantom-trained ViT and its scene encoder,
/// shipped as `tracklet-frames`) keep their floors, and the scene encoder beats the mean of
/// views it is a residual on: untrained (its `W` zero) it *is* that mean, so only a scene
/// figure above the mean's tells a trained one.
#[test]
fn the_shipped_frame_encoders_find_a_held_out_polyps_other_views() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    let models =
        endotwin::twins::TwinModels::load_frames(&endotwin::default_models_dir(), &device).unwrap();
    assert!(models.scene.is_some(), "tracklet-frames-scene is shipped");
    let e = phantom_reid(&models);
    let scene = reid_row(&e, "scene", "2v2");
    let mean = reid_row(&e, "mean of views", "2v2");
    let hist = reid_row(&e, "colour histogram", "2v2");
    // Measured here: scene encoder 2v2 uAP 1.000, mean of views 0.948, colour histogram
    // 0.627 (20 polyps: chance is 1 in 20, so every figure is higher than the README's on 500
    // polyps; before the phantom kept one light per examination: 1.000 / 0.870 / 0.688). The floors sit well below the model and above the
    // baseline; the same architecture untrained, saved with the shipped card, scores 0.133
    // with the mean of views (and has no scene row), so a broken encoder fails here.
    assert!(scene.uap >= 0.75, "scene encoder 2v2 uAP {}", scene.uap);
    assert!(
        scene.uap > hist.uap + 0.15,
        "scene {} against colour histogram {}",
        scene.uap,
        hist.uap
    );
    assert!(mean.uap >= 0.6, "mean of views 2v2 uAP {}", mean.uap);
    assert!(
        mean.uap > hist.uap + 0.1,
        "mean {} against colour histogram {}",
        mean.uap,
        hist.uap
    );
    // The scene encoder is a residual on the mean of views (`W` zero at the start): untrained
    // it gives the mean's figures exactly (tests/models.rs holds that property). Measured
    // here with the shipped card's config initialised (seed 7) in place of the trained
    // weights: scene 0.870, mean 0.870 (on the phantom before it kept one light per
    // examination), so only a scene figure above the mean's tells a trained scene encoder (the
    // shipped one: 1.000 against 0.870 then, 1.000 against 0.948 now: the mean gained most
    // from a polyp keeping its colour, and 20 polyps leave the scene encoder little room).
    assert!(
        scene.uap >= mean.uap + SCENE_OVER_MEAN,
        "scene {} against the mean of views {} it would replace",
        scene.uap,
        mean.uap
    );
}

/// How far the scene encoder's 2v2 uAP must rise above the mean of views' on the 20 held-out
/// polyps.
const SCENE_OVER_MEAN: f64 = 0.05;
