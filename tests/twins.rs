//! Digital twins end to end: a phantom mini-library whose polyps each keep two views in the
//! library and two held out; a few training steps; indexing; then each polyp's held-out views
//! query the library and its own polyp must rank first. Plus re-indexing that touches only
//! what changed and a stale index that is named as such.

use burn::tensor::Device;
use endotwin::data::phantom::{self, PhantomConfig, Split};
use endotwin::engine::Progress;
use endotwin::model::preprocess::{Focus, TwinInput};
use endotwin::model::vit::{Vit, VitConfig};
use endotwin::model::weights::{self, ModelCard, ModelKind};
use endotwin::store::{self, OpenMode, Store};
use endotwin::train::image_encoder::{self, ImageEncoderTrainingConfig, TwinImageModel};
use endotwin::train::{Checkpoint, EpochReport, TrainError, TrainEvents, data};
use endotwin::twins::{Search, TwinError, TwinIndex, TwinModels, index_library};
use std::path::{Path, PathBuf};

const POLYPS: usize = 8;

/// The mini-library, and per polyp (id, held-out view files with where the polyp is in each:
/// what a user gives with `--box`).
fn mini_library(dir: &Path, queries: &Path) -> Vec<(i64, Vec<(PathBuf, Focus)>)> {
    let mut store = Store::open(dir, OpenMode::CreateIfMissing).unwrap();
    let cfg = PhantomConfig {
        seed: 21,
        split: Split::Test,
        polyps: POLYPS,
        views_per_polyp: 4,
        videos: 0,
        frames_per_video: 0,
        background_frames: 0,
        frames_per_exam: 0,
        capsule_images: 0,
        image_size: 160,
        video_size: 64,
    };
    phantom::generate(&mut store, &cfg, &Progress::new()).unwrap();
    let mut held_out = Vec::new();
    for p in store.polyps().unwrap() {
        let views = store.polyp_views(p.id).unwrap();
        let mut files = Vec::new();
        for m in &views[..2] {
            let to = queries.join(format!("{}-{}.{}", p.code, m.id, "jpg"));
            std::fs::copy(store.media_path(m), &to).unwrap();
            let (_, focus) = endotwin::twins::load_view(&store, m).unwrap();
            files.push((to, focus));
        }
        store
            .write(|tx| {
                for m in &views[..2] {
                    store::remove_polyp_view(tx, p.id, m.id)?;
                }
                Ok::<_, store::StoreError>(())
            })
            .unwrap();
        held_out.push((p.id, files));
    }
    held_out
}

struct Quiet;

impl TrainEvents<TwinImageModel> for Quiet {
    fn step(&mut self, _: usize, _: usize, _: usize, _: f64) {}
    fn epoch(&mut self, _: &EpochReport, _: &Checkpoint<TwinImageModel>) -> Result<(), TrainError> {
        Ok(())
    }
}

/// A few fine-tuning steps on the library's views, from the shipped ViT encoder (the tracklet
/// comparisons' frame encoder, the first shipped twin encoder).
fn train_a_few_steps(library: &Path, out: &Path) {
    let shipped = endotwin::default_models_dir().join("tracklet-frames.json");
    let device = Device::flex().autodiff();
    let (encoder, card) = weights::load(&shipped, ModelKind::ImageEncoder, |c: &VitConfig| {
        c.init(&device)
    })
    .expect("the shipped ViT image encoder loads");
    let encoder_config: VitConfig = card.config(&shipped).unwrap();
    let config = ImageEncoderTrainingConfig::new(encoder_config.clone())
        .with_epochs(1)
        .with_batch(8)
        .with_lr(1e-5);
    let store = Store::open(library, OpenMode::Existing).unwrap();
    // Train on the pixels the card's encoder sees at inference.
    let input = card
        .input
        .unwrap_or_else(|| TwinInput::whole_frame(encoder_config.image_size as u32));
    let (samples, _) = data::polyp_view_samples(&store, &input).unwrap();
    let start = Checkpoint {
        model: TwinImageModel {
            encoder,
            decoder: config.decoder().init(&device),
        },
        optimizer: burn::optim::AdamWConfig::new().init(),
        epoch: 0,
    };
    let model = image_encoder::train(&config, &samples, &device, Some(start), &mut Quiet).unwrap();
    let trained: Vit = image_encoder::encoder_of(&model);
    let mut card = ModelCard::new(
        "twin-image",
        ModelKind::ImageEncoder,
        "e2e",
        "test",
        &encoder_config,
    );
    card.input = Some(input);
    weights::save(&trained, &card, out).unwrap();
}

#[test]
fn held_out_views_of_a_polyp_retrieve_that_polyp_first() {
    let _rng = crate::common::device_rng();
    let library = tempfile::tempdir().unwrap();
    let queries = tempfile::tempdir().unwrap();
    let models_dir = tempfile::tempdir().unwrap();
    let held_out = mini_library(library.path(), queries.path());
    train_a_few_steps(library.path(), models_dir.path());

    let device = Device::flex();
    let models = TwinModels::load(models_dir.path(), &device).unwrap();
    let mut store = Store::open(library.path(), OpenMode::Existing).unwrap();
    let stats = index_library(&mut store, &models, &Progress::new()).unwrap();
    assert_eq!(
        (stats.views_encoded, stats.polyps_updated),
        (2 * POLYPS, POLYPS)
    );
    let index = TwinIndex::load(&store, &models).unwrap();

    let mut first = 0;
    let mut ranks = Vec::new();
    let mut first_asymmetric = 0;
    for (polyp, files) in &held_out {
        let images: Vec<_> = files
            .iter()
            .map(|(f, focus)| {
                (
                    endotwin::data::images::decode_file(f).unwrap().image,
                    *focus,
                )
            })
            .collect();
        let embedding = models.combine(&models.encode_views(&images));
        let ids = |r: &endotwin::twins::TwinResult| -> Vec<i64> {
            r.twins.iter().map(|t| t.polyp.id).collect()
        };
        // The default search (a Hamming shortlist re-ranked by cosine) gives cosine's answer.
        assert_eq!(
            ids(&index.query(&embedding, POLYPS, Search::Shortlist, &[])),
            ids(&index.query(&embedding, POLYPS, Search::Cosine, &[])),
            "shortlist + re-rank orders the polyps as exact cosine does"
        );
        for search in [Search::Cosine, Search::Hamming, Search::Asymmetric] {
            let result = index.query(&embedding, POLYPS, search, &[]);
            assert_eq!(result.twins.len(), POLYPS, "{search:?} ranks every polyp");
            let rank = result
                .twins
                .iter()
                .position(|t| t.polyp.id == *polyp)
                .unwrap();
            match search {
                Search::Cosine => {
                    ranks.push(rank + 1);
                    first += (rank == 0) as usize;
                }
                Search::Asymmetric => first_asymmetric += (rank == 0) as usize,
                Search::Hamming | Search::Shortlist => {}
            }
        }
    }
    eprintln!("ranks of the true polyp: {ranks:?}");
    // The first polyp, and most of the others, rank first; chance would be 1 in 8.
    assert_eq!(ranks[0], 1, "ranks {ranks:?}");
    assert!(
        first * 4 >= POLYPS * 3,
        "only {first} of {POLYPS} ranked first: {ranks:?}"
    );
    // The library's codes against the float query still find most of them.
    assert!(
        first_asymmetric * 2 >= POLYPS,
        "codes with a float query: {first_asymmetric} of {POLYPS} first"
    );
}

#[test]
fn re_indexing_touches_only_what_changed_and_a_new_model_needs_a_re_index() {
    let _rng = crate::common::device_rng();
    let library = tempfile::tempdir().unwrap();
    let queries = tempfile::tempdir().unwrap();
    mini_library(library.path(), queries.path());
    let device = Device::flex();
    let save = |version: &str, dir: &Path| {
        device.seed(5);
        let config = VitConfig::new(32, 16, 32, 1, 2).with_projection(Some(64));
        let card = ModelCard::new(
            "twin-image",
            ModelKind::ImageEncoder,
            version,
            "test",
            &config,
        );
        weights::save(&config.init(&device), &card, dir).unwrap();
    };
    let models_dir = tempfile::tempdir().unwrap();
    save("v1", models_dir.path());
    let models = TwinModels::load(models_dir.path(), &device).unwrap();
    let mut store = Store::open(library.path(), OpenMode::Existing).unwrap();
    assert!(matches!(
        TwinIndex::load(&store, &models),
        Err(TwinError::EmptyIndex(_))
    ));
    let first = index_library(&mut store, &models, &Progress::new()).unwrap();
    assert_eq!(first.views_encoded, 2 * POLYPS);
    let again = index_library(&mut store, &models, &Progress::new()).unwrap();
    assert_eq!((again.views_encoded, again.views_current), (0, 2 * POLYPS));
    assert_eq!((again.polyps_updated, again.polyps_current), (0, POLYPS));

    // Another model version: the old index is named, not silently used.
    save("v2", models_dir.path());
    let v2 = TwinModels::load(models_dir.path(), &device).unwrap();
    let err = TwinIndex::load(&store, &v2).err().unwrap();
    assert!(matches!(err, TwinError::StaleIndex { .. }), "{err}");
    assert!(err.to_string().contains("re-index"), "{err}");
    index_library(&mut store, &v2, &Progress::new()).unwrap();
    let index = TwinIndex::load(&store, &v2).unwrap();
    assert_eq!(index.len(), POLYPS);
    // k beyond the library returns every other polyp, not an error.
    let some = index.query(&vec![0.1; 64], 50, Search::Hamming, &[]);
    assert_eq!(some.twins.len(), POLYPS);
}

/// The CLI answers with the models the app answers with: a twin encoder promoted in the
/// library (its own models folder) indexes and queries without --models (#43: `index` and
/// `twins` read the shipped folder and ignored it).
#[test]
fn index_and_twins_use_the_model_promoted_in_the_library() {
    let library = tempfile::tempdir().unwrap();
    let queries = tempfile::tempdir().unwrap();
    let held = mini_library(library.path(), queries.path());
    let run_dir = tempfile::tempdir().unwrap();
    {
        let _rng = crate::common::device_rng();
        let device = Device::flex();
        device.seed(5);
        let config = VitConfig::new(32, 16, 32, 1, 2).with_projection(Some(64));
        let card = ModelCard::new(
            "twin-image",
            ModelKind::ImageEncoder,
            "promoted-here",
            "test",
            &config,
        );
        weights::save(&config.init(&device), &card, run_dir.path()).unwrap();
    }
    let card = run_dir.path().join("twin-image.json");
    endotwin::engine::promote::promote(library.path(), &card, None).unwrap();
    let index = crate::common::run({
        let mut c = crate::common::endotwin(library.path());
        c.arg("index");
        c
    });
    assert!(
        index.ok() && index.says("indexed with promoted-here"),
        "{}",
        index.text()
    );
    let (_, views) = &held[0];
    let twins = crate::common::run({
        let mut c = crate::common::endotwin(library.path());
        c.arg("twins").arg(&views[0].0);
        c
    });
    assert!(twins.ok(), "{}", twins.text());
}

#[test]
fn a_view_that_fails_to_decode_is_named_and_retried_once_it_decodes() {
    let _rng = crate::common::device_rng();
    let library = tempfile::tempdir().unwrap();
    let queries = tempfile::tempdir().unwrap();
    mini_library(library.path(), queries.path());
    let device = Device::flex();
    device.seed(5);
    let config = VitConfig::new(32, 16, 32, 1, 2).with_projection(Some(64));
    let card = ModelCard::new("twin-image", ModelKind::ImageEncoder, "v1", "t", &config);
    let models_dir = tempfile::tempdir().unwrap();
    weights::save(&config.init(&device), &card, models_dir.path()).unwrap();
    let models = TwinModels::load(models_dir.path(), &device).unwrap();
    let mut store = Store::open(library.path(), OpenMode::Existing).unwrap();

    // One view's file is truncated (say, a copy still in progress).
    let polyp = store.polyps().unwrap()[0].clone();
    let view = store.polyp_views(polyp.id).unwrap()[0].clone();
    let path = store.media_path(&view);
    let good = std::fs::read(&path).unwrap();
    std::fs::write(&path, &good[..good.len() / 3]).unwrap();
    let first = index_library(&mut store, &models, &Progress::new()).unwrap();
    assert_eq!(first.problems.len(), 1, "{:?}", first.problems);
    assert!(
        first.problems[0].contains(&view.source_path),
        "the failed view is named: {:?}",
        first.problems
    );
    assert_eq!(
        first.polyps_updated, POLYPS,
        "its polyp is indexed from the other view"
    );

    // Once it decodes, the next run encodes it and combines its polyp again.
    std::fs::write(&path, &good).unwrap();
    let again = index_library(&mut store, &models, &Progress::new()).unwrap();
    assert!(again.problems.is_empty(), "{:?}", again.problems);
    assert_eq!((again.views_encoded, again.polyps_updated), (1, 1));
}

#[test]
fn the_twin_evaluation_brackets_every_figure_and_writes_the_json_shape() {
    let _rng = crate::common::device_rng();
    use endotwin::eval::twins::{Candidate, run};
    let library = tempfile::tempdir().unwrap();
    let mut store = Store::open(library.path(), OpenMode::CreateIfMissing).unwrap();
    let cfg = PhantomConfig {
        seed: 2,
        split: Split::Validation,
        polyps: 10,
        views_per_polyp: 4,
        videos: 0,
        frames_per_video: 0,
        background_frames: 0,
        frames_per_exam: 0,
        capsule_images: 0,
        image_size: 96,
        video_size: 64,
    };
    phantom::generate(&mut store, &cfg, &Progress::new()).unwrap();
    let device = Device::flex();
    device.seed(5);
    let config = VitConfig::new(32, 16, 32, 1, 2).with_projection(Some(64));
    let models_dir = tempfile::tempdir().unwrap();
    let card = ModelCard::new("twin-image", ModelKind::ImageEncoder, "v1", "t", &config);
    weights::save(&config.init(&device), &card, models_dir.path()).unwrap();
    let models = TwinModels::load(models_dir.path(), &device).unwrap();
    let candidates = [
        Candidate {
            label: String::new(),
            models: &models,
        },
        Candidate {
            label: "again".into(),
            models: &models,
        },
    ];
    let eval = run(&store, &candidates, 6, 3).unwrap();
    assert_eq!(eval.polyps, 10);
    for r in &eval.reid {
        assert!(
            r.uap_ci[0] <= r.uap + 1e-9 && r.uap <= r.uap_ci[1] + 1e-9,
            "{r:?}"
        );
        assert!(
            r.accuracy_at_1_ci[0] <= r.accuracy_at_1 && r.accuracy_at_1 <= r.accuracy_at_1_ci[1],
            "{r:?}"
        );
    }
    // The same encoder under two names scores the same.
    let a = eval
        .reid
        .iter()
        .find(|r| r.method == "mean of views, float")
        .unwrap();
    let b = eval
        .reid
        .iter()
        .find(|r| r.method == "again: mean of views, float" && r.views == a.views)
        .unwrap();
    assert_eq!((a.uap, a.accuracy_at_1), (b.uap, b.accuracy_at_1));
    assert!(
        eval.reid
            .iter()
            .any(|r| r.method.contains("colour histogram"))
    );
    assert!(eval.reid.iter().any(|r| r.method.contains("raw pixels")));
    let json: serde_json::Value = serde_json::to_value(&eval).unwrap();
    for key in [
        "method", "views", "uap", "uap_ci", "acc1", "acc1_ci", "r_at_p90",
    ] {
        assert!(json["reid"][0].get(key).is_some(), "reid rows carry {key}");
    }
    for key in ["method", "auc", "neoplastic_auc", "accuracy", "macro_f1"] {
        assert!(
            json["pathology"][0].get(key).is_some(),
            "pathology rows carry {key}"
        );
    }
    // The same seed gives the same intervals.
    let again = run(&store, &candidates[..1], 6, 3).unwrap();
    assert_eq!(again.reid[0].uap_ci, eval.reid[0].uap_ci);
}

#[test]
fn a_card_whose_input_does_not_fit_its_encoder_is_refused_by_name() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    let config = VitConfig::new(32, 16, 32, 1, 2).with_projection(Some(64));
    let dir = tempfile::tempdir().unwrap();
    let mut card = ModelCard::new("twin-image", ModelKind::ImageEncoder, "v1", "t", &config);
    card.input = Some(TwinInput::new(48));
    weights::save(&config.init(&device), &card, dir.path()).unwrap();
    let err = TwinModels::load(dir.path(), &device).err().unwrap();
    let text = err.to_string();
    assert!(
        text.contains("twin-image.json") && text.contains("size 48"),
        "{text}"
    );
}

#[test]
fn eval_twins_on_a_library_without_pathology_prints_no_pathology_figures() {
    let _rng = crate::common::device_rng();
    // Three polyps of four views each, imported with no pathology.csv: no histology at all.
    let src = tempfile::tempdir().unwrap();
    for p in 0..3u8 {
        for v in 0..4u8 {
            crate::common::png(
                &src.path().join(format!("P{p}/{v}.png")),
                40,
                32,
                p * 40 + v * 7 + 1,
            );
        }
    }
    let lib = tempfile::tempdir().unwrap();
    let r = crate::common::import(lib.path(), "multiview", src.path(), &[]);
    assert!(r.ok(), "{}", r.text());
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("t.json");
    let mut c = crate::common::endotwin(lib.path());
    c.args(["eval", "twins", "--seed", "3", "--k", "2", "--held-out"])
        .arg(lib.path())
        .arg("--json")
        .arg(&json);
    let r = crate::common::run(c);
    assert!(r.ok(), "{}", r.text());
    assert!(r.says("pathology not scored"), "{}", r.text());
    assert!(
        !r.says("macro-F1"),
        "a pathology table was printed:\n{}",
        r.text()
    );
    let e: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(e["pathology"].as_array().unwrap().len(), 0, "{e}");
    assert!(
        e["pathology_not_scored"]
            .as_str()
            .unwrap()
            .contains("0 known histology")
    );
}
