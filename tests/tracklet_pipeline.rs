//! Tracklets end to end on a small phantom: a withdrawal that goes back to a polyp gives it a
//! second tracklet; the fragments are cropped; a few training steps run and the evaluation
//! scores the model beside its baselines; the frozen twin encoder, and a tracklet head trained
//! a few steps over it, link a revisited polyp's two tracklets above any other polyp's.

use burn::tensor::Device;
use endotwin::data::phantom::{self, PhantomConfig};
use endotwin::eval::tracklets::{
    Candidate, Method, Methods, evaluate, weighted_ap, weighted_auroc,
};
use endotwin::model::tracklet::{TrackletEncoderConfig, TrackletModelConfig};
use endotwin::plumbing::Progress;
use endotwin::store::{OpenMode, Store};
use endotwin::tracklets::dataset::TrackletSet;
use endotwin::tracklets::grouping::agglomerate;
use endotwin::tracklets::twin::{Pooling, twin_embeddings};
use endotwin::train::tracklets::{TrackletTrainingConfig, train, train_encoder};
use endotwin::train::{Checkpoint, EpochReport, TrainError, TrainEvents};

struct Reports(Vec<EpochReport>);

impl<M> TrainEvents<M> for Reports {
    fn step(&mut self, _: usize, _: usize, _: usize, _: f64) {}

    fn epoch(&mut self, r: &EpochReport, _: &Checkpoint<M>) -> Result<(), TrainError> {
        self.0.push(r.clone());
        Ok(())
    }
}

#[test]
fn a_revisited_polyp_has_two_tracklets_and_a_short_training_run_is_scored() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path(), OpenMode::CreateIfMissing).unwrap();
    let cfg = PhantomConfig {
        seed: 5,
        polyps: 4,
        views_per_polyp: 4,
        videos: 2,
        frames_per_video: 600,
        background_frames: 0,
        capsule_images: 0,
        image_size: 64,
        video_size: 96,
        ..PhantomConfig::default()
    };
    phantom::generate(&mut store, &cfg, &Progress::new()).unwrap();
    let mut set = TrackletSet::load(&store, &[], 24, &Progress::new()).unwrap();
    assert!(!set.videos.is_empty());
    // The withdrawal goes back to a polyp once it is lost: two usable tracklets of one polyp
    // in one video, apart in time.
    let revisited = set.tracklets.iter().enumerate().any(|(i, a)| {
        set.tracklets[i + 1..].iter().any(|b| {
            a.identity.is_some()
                && a.identity == b.identity
                && a.video == b.video
                && b.first_frame > a.first_frame + a.frames as i64
        })
    });
    assert!(revisited, "{:?}", set.tracklets);
    // Glimpses shorter than a fragment are left out, and said so.
    assert!(set.short_tracklets > 0);
    assert!(
        set.left_out().contains("shorter than 30 frames"),
        "{}",
        set.left_out()
    );
    for t in &set.tracklets {
        assert!(t.frames >= 30, "short tracklets are dropped");
        assert!(!t.fragments.is_empty());
    }

    let device = Device::flex();
    let config = TrackletTrainingConfig::new(TrackletModelConfig::with_image_size(24))
        .with_epochs(1)
        .with_anchors(4);
    let mut reports = Reports(Vec::new());
    let model = train(
        &config,
        &set,
        &device.clone().autodiff(),
        None,
        &mut reports,
    )
    .unwrap();
    let report = &reports.0[0];
    assert!(report.get("loss").unwrap().is_finite());
    // The curriculum's first epoch draws bags from one polyp's fragments: pure, or nearly.
    let purity = report.get("bag purity").unwrap();
    assert!(purity > 0.5 && purity <= 1.0, "bag purity {purity}");

    let model = burn::module::Module::valid(&model);
    let twins = endotwin::twins::TwinModels::load_frames(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models"),
        &device,
    )
    .unwrap();
    let e = endotwin::eval::tracklets::run(
        &store,
        None,
        Methods {
            candidates: &[Candidate {
                label: "trained".into(),
                model: &model,
            }],
            heads: &[],
            untrained: &config.model,
            twins: Some(&twins),
        },
        3,
        0.5,
        &device,
    )
    .unwrap();
    let methods: Vec<&str> = e.retrieval.iter().map(|r| r.method.as_str()).collect();
    // The trained model, the shipped twin encoders frozen (with the scene encoder: what the
    // Tracklets tab compares by; then the mean over frames), both architectures untrained, the
    // histogram.
    assert_eq!(methods.len(), 6, "{methods:?}");
    assert!(methods[1].contains("scene encoder") && methods[1].contains("frozen"));
    assert!(methods[2].contains("twin image encoder") && methods[2].contains("mean over frames"));
    assert!(methods[3].contains("untrained") && methods[4].contains("untrained"));
    assert!(methods[5].contains("colour histogram"));
    assert!(
        e.reid
            .iter()
            .any(|r| r.scope == "within_video" && r.positives > 0)
    );
    assert!(
        e.retrieval
            .iter()
            .all(|r| r.queries > 0 && (0.0..=1.0).contains(&r.map))
    );
    // The shipped twin encoders, frozen (what the Tracklets tab compares by), find every
    // revisited polyp's other tracklet first on these videos (measured: mAP 1.0 on 4 queries;
    // the untrained twin architecture scores 0.42 on the same queries).
    let shipped = &e.retrieval[1];
    assert!(
        shipped.map >= 0.99,
        "{}: mAP {}",
        shipped.method,
        shipped.map
    );
    assert!(
        e.retrieval[4].map < shipped.map,
        "the untrained architecture does as well"
    );

    // Each revisited polyp's two tracklets are linked above any other polyp's tracklet.
    let links_revisits = |e: &[Vec<f32>], what: &str| {
        let cos = |a: usize, b: usize| endotwin::tracklets::grouping::cosine(&e[a], &e[b]);
        let (mut revisits, mut compared) = (0, 0);
        for (a, ta) in set.tracklets.iter().enumerate() {
            for (b, tb) in set.tracklets.iter().enumerate().skip(a + 1) {
                if ta.video != tb.video || ta.identity != tb.identity {
                    continue;
                }
                revisits += 1;
                for (c, tc) in set.tracklets.iter().enumerate() {
                    if tc.identity == ta.identity {
                        continue;
                    }
                    compared += 1;
                    assert!(
                        cos(a, b) > cos(a, c).max(cos(b, c)),
                        "{what}: revisit {a}-{b}: {:.3}; other polyp {c}: {:.3} / {:.3}",
                        cos(a, b),
                        cos(a, c),
                        cos(b, c)
                    );
                }
            }
        }
        assert!(
            revisits > 0 && compared > 0,
            "{what}: {revisits} revisits, {compared} comparisons"
        );
    };
    // The shipped twin image encoder, frozen (the mean over frames, and each fragment's frames
    // combined by the scene encoder: what the timeline compares by), and the shipped tracklet
    // head over it all do.
    let e = twin_embeddings(&store, &set, &twins, Pooling::Mean, &Progress::new()).unwrap();
    links_revisits(&e, "frozen twin encoder");
    let e = twin_embeddings(&store, &set, &twins, Pooling::Scene, &Progress::new()).unwrap();
    links_revisits(&e, "frozen twin encoder with its scene encoder");
    let models = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let (shipped, _) = endotwin::tracklets::shipped_head(&models, &twins)
        .unwrap()
        .expect("models/ ships a tracklet head");
    // A head beside another twin image encoder than the one it learned over is refused by
    // name (a promoted fine-tune would otherwise feed it features it never saw).
    let other = tempfile::tempdir().unwrap();
    for f in ["twin-image.json", "twin-image.bpk", "tracklet-head.bpk"] {
        std::fs::copy(models.join(f), other.path().join(f)).unwrap();
    }
    let mut card: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(models.join("tracklet-head.json")).unwrap())
            .unwrap();
    card["reads"]["sha256"] = serde_json::json!("0".repeat(64));
    std::fs::write(
        other.path().join("tracklet-head.json"),
        serde_json::to_string(&card).unwrap(),
    )
    .unwrap();
    let refused = endotwin::tracklets::shipped_head(other.path(), &twins)
        .expect_err("a head over other weights is refused");
    assert!(
        refused.contains("trained over the twin image encoder") && refused.contains("000000000000"),
        "{refused}"
    );
    let by_timeline = endotwin::tracklets::twin::head_embeddings_cached(
        &store,
        &set,
        &twins,
        &shipped,
        &Progress::new(),
        &mut Default::default(),
    )
    .unwrap();
    links_revisits(&by_timeline, "shipped tracklet head");

    // The specified method over those frozen features (`train tracklets --backbone twin`):
    // a short run trains the temporal encoder alone, and it embeds every tracklet.
    let (dim, features) =
        endotwin::tracklets::twin::fragment_features(&store, &set, &twins, &Progress::new())
            .unwrap();
    set.attach_features(dim, features);
    // The evaluation's path (features attached to the set) gives the timeline's embeddings.
    let by_eval = endotwin::tracklets::embed_head(&shipped, &set, 8, &device);
    for (a, b) in by_eval.iter().zip(&by_timeline) {
        let gap = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max);
        assert!(gap < 1e-4, "eval and timeline embeddings differ by {gap}");
    }
    let head_config = TrackletEncoderConfig::new(dim);
    let mut reports = Reports(Vec::new());
    let head = train_encoder(
        &config,
        &set,
        &device.clone().autodiff(),
        None,
        |d| head_config.init(d),
        &mut reports,
    )
    .unwrap();
    assert!(reports.0[0].get("loss").unwrap().is_finite());
    let head = burn::module::Module::valid(&head);
    let e = endotwin::tracklets::embed_head(&head, &set, 8, &device);
    assert_eq!(e.len(), set.tracklets.len());
    assert!(
        e.iter()
            .all(|v| (v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-3)
    );
    // After those few steps, each revisited polyp's two tracklets are still linked above any
    // other polyp's tracklet.
    let cos = |a: usize, b: usize| endotwin::tracklets::grouping::cosine(&e[a], &e[b]);
    for (a, ta) in set.tracklets.iter().enumerate() {
        for (b, tb) in set.tracklets.iter().enumerate().skip(a + 1) {
            if ta.video != tb.video || ta.identity != tb.identity {
                continue;
            }
            for (c, tc) in set.tracklets.iter().enumerate() {
                if tc.identity != ta.identity {
                    assert!(
                        cos(a, b) > cos(a, c).max(cos(b, c)),
                        "trained head, revisit {a}-{b}: {:.3}; other polyp {c}: {:.3} / {:.3}",
                        cos(a, b),
                        cos(a, c),
                        cos(b, c)
                    );
                }
            }
        }
    }

    // A residual head (`--residual`) starts exactly at the plain mean of the frozen frame
    // features: untrained, each fragment's embedding is the mean of its 8 frames.
    let residual = TrackletEncoderConfig::new(dim)
        .with_residual(true)
        .init(&device);
    let fragments: Vec<usize> = (0..set.fragments.len()).collect();
    let (embedded, _) = residual.forward(set.feature_batch(&fragments, &device));
    let means = set.feature_batch(&fragments, &device).mean_dim(1);
    let gap = (embedded - means.reshape([fragments.len(), dim]))
        .abs()
        .max()
        .into_scalar::<f32>();
    assert!(
        gap < 1e-5,
        "the untrained residual head differs from the mean by {gap}"
    );

    // An embedding that is the polyp's identity separates every pair: the metrics say so.
    let ids: Vec<i64> = set.tracklets.iter().map(|t| t.identity.unwrap()).collect();
    let one_hot = ids
        .iter()
        .map(|&i| (0..8).map(|k| (k == i as usize % 8) as u8 as f32).collect())
        .collect();
    let perfect = evaluate(
        &set,
        &[Method {
            label: "identity".into(),
            embeddings: one_hot,
        }],
        3,
        &[0.5],
    );
    assert_eq!(perfect.retrieval[0].map, 1.0);
    assert_eq!(perfect.retrieval[0].hr1, 1.0);
    // (Within one video AUROC is undefined when every pair there shows one polyp.)
    assert!(
        perfect
            .reid
            .iter()
            .all(|r| (r.auroc == 1.0 || r.auroc.is_nan()) && r.aupr == 1.0),
        "{:?}",
        perfect.reid
    );
    assert_eq!(perfect.reid[0].auroc, 1.0, "over all pairs");
    assert_eq!(perfect.count.exact_share, 1.0);
}

#[test]
fn grouping_merges_tracklets_that_are_alike_and_keeps_others_apart() {
    let _rng = crate::common::device_rng();
    // Tracklets 0 and 2 show one polyp, 1 another, 3 a third.
    let s = [
        [1.0, 0.1, 0.9, 0.2],
        [0.1, 1.0, 0.2, 0.3],
        [0.9, 0.2, 1.0, 0.1],
        [0.2, 0.3, 0.1, 1.0],
    ];
    let groups = agglomerate(4, |i, j| s[i][j], 0.5);
    assert_eq!(groups, vec![vec![0, 2], vec![1], vec![3]]);
    // Average linkage: 1 joins {0, 2} only when its mean similarity to both is high enough.
    assert_eq!(agglomerate(4, |i, j| s[i][j], 0.05).len(), 1);
    assert_eq!(agglomerate(4, |i, j| s[i][j], 0.95).len(), 4);
}

#[test]
fn weighted_pair_metrics_match_the_plain_ones_and_weights_act_as_copies() {
    let _rng = crate::common::device_rng();
    let items = [
        (0.9, true, 1.0),
        (0.8, false, 1.0),
        (0.7, true, 1.0),
        (0.3, false, 1.0),
        (0.3, true, 1.0),
    ];
    let scores: Vec<f64> = items.iter().map(|x| x.0).collect();
    let truth: Vec<bool> = items.iter().map(|x| x.1).collect();
    let plain = endotwin::eval::metrics::auroc(&scores, &truth);
    assert!((weighted_auroc(&items) - plain).abs() < 1e-12);
    // Ranked: + - + then the tie (negative first): - +. AP = (1 + 2/3 + 3/5) / 3.
    assert!((weighted_ap(&items) - (1.0 + 2.0 / 3.0 + 0.6) / 3.0).abs() < 1e-12);
    // Weight 2 on an item is the same as the item twice.
    let mut doubled = items.to_vec();
    doubled[1].2 = 2.0;
    let mut copied = items.to_vec();
    copied.push(items[1]);
    assert!((weighted_auroc(&doubled) - weighted_auroc(&copied)).abs() < 1e-12);
    assert!((weighted_ap(&doubled) - weighted_ap(&copied)).abs() < 1e-12);
}
