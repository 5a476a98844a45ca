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

/// A few fine-tuning steps on the library's views, from the shipped encoder.
fn train_a_few_steps(library: &Path, out: &Path) {
    let shipped = endotwin::default_models_dir().join("twin-image.json");
    let device = Device::flex().autodiff();
    let (encoder, card) = weights::load(&shipped, ModelKind::ImageEncoder, |c: &VitConfig| {
        c.init(&device)
    })
    .expect("the shipped twin-image model loads");
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
                Search::Hamming => {}
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
        Err(TwinError::EmptyIndex)
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

#[test]
fn a_view_that_fails_to_decode_is_named_and_retried_once_it_decodes() {
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

/// A tiny library and, in its own folder, a seeded tiny twin image encoder (32 px, 64-d,
/// version "v1") saved as `twin-image`: the library, the models folder and the card's path.
fn tiny_library_and_encoder(
    device: &Device,
) -> (tempfile::TempDir, tempfile::TempDir, std::path::PathBuf) {
    let lib = tempfile::tempdir().unwrap();
    crate::gui::tiny_library(lib.path());
    let models = tempfile::tempdir().unwrap();
    let config = VitConfig::new(32, 16, 32, 1, 2).with_projection(Some(64));
    let mut card = ModelCard::new("twin-image", ModelKind::ImageEncoder, "v1", "t", &config);
    card.input = Some(TwinInput::new(32));
    device.seed(3);
    let path = weights::save(&config.init(device), &card, models.path()).unwrap();
    (lib, models, path)
}

/// The card at `path` with `key` set by hand to what `edit` makes of it: loading the models
/// folder is refused, naming the card.
fn hand_edit_is_refused(
    models: &std::path::Path,
    path: &std::path::Path,
    key: &str,
    edit: impl FnOnce(&serde_json::Value) -> serde_json::Value,
) {
    let mut text: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    text[key] = edit(&text[key]);
    std::fs::write(path, text.to_string()).unwrap();
    let err = TwinModels::load(models, &Device::flex())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("twin-image.json"), "{err}");
}

/// [`tiny_library_and_encoder`] with the library indexed by the encoder as saved: (library,
/// models folder, card, the models loaded).
fn indexed_tiny_library(
    device: &Device,
) -> (
    tempfile::TempDir,
    tempfile::TempDir,
    std::path::PathBuf,
    TwinModels,
) {
    let (lib, models, path) = tiny_library_and_encoder(device);
    let before = TwinModels::load(models.path(), device).unwrap();
    let mut store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    index_library(&mut store, &before, &Progress::new()).unwrap();
    (lib, models, path, before)
}

/// The library in `store`, indexed before the card's codes changed, is stale for `after`; it
/// is indexed again: (the library, its index).
fn stale_then_reindexed(
    store: Store,
    lib: &std::path::Path,
    after: &TwinModels,
) -> (Store, TwinIndex) {
    assert!(matches!(
        TwinIndex::load(&store, after),
        Err(TwinError::StaleIndex { .. })
    ));
    drop(store);
    let mut store = Store::open(lib, OpenMode::Existing).unwrap();
    index_library(&mut store, after, &Progress::new()).unwrap();
    let index = TwinIndex::load(&store, after).unwrap();
    (store, index)
}

#[test]
fn a_code_centre_from_training_views_gives_the_card_a_new_version_and_the_index_follows() {
    let device = Device::flex();
    let (lib, models, path, _) = indexed_tiny_library(&device);
    let mut c = crate::common::endotwin(lib.path());
    c.args(["model", "code-center"]).arg(&path);
    let ran = crate::common::run(c);
    assert!(ran.ok(), "{}", ran.text());
    assert!(ran.says("code centre of 12 views"), "{}", ran.text());
    let after = TwinModels::load(models.path(), &device).unwrap();
    let center = after.image_card.code_center.clone().unwrap();
    assert_eq!(center.len(), 64);
    assert!(after.image_card.version.starts_with("v1-c"));
    // The centre is the views' mean embedding: centred codes split them about evenly.
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let views: Vec<_> = store
        .polyps()
        .unwrap()
        .iter()
        .flat_map(|p| store.polyp_views(p.id).unwrap())
        .map(|m| endotwin::twins::load_view(&store, &m).unwrap())
        .collect();
    let embeddings = after.encode_views(&views);
    for d in 0..64 {
        let mean = embeddings.iter().map(|e| e[d]).sum::<f32>() / embeddings.len() as f32;
        assert!((mean - center[d]).abs() < 1e-5);
    }
    let (_store, index) = stale_then_reindexed(store, lib.path(), &after);
    let result = index.query(index.vector(0), 2, Search::Hamming, &[]);
    assert_eq!(
        result.twins[0].hamming, 0,
        "a polyp's own code is at distance 0"
    );
    // A centre of the wrong length (a hand edit) is refused by name.
    hand_edit_is_refused(models.path(), &path, "code_center", |_| {
        serde_json::json!([0.0, 1.0])
    });
}

#[test]
fn an_itq_rotation_rides_in_the_card_turns_the_codes_and_a_bad_one_is_refused() {
    let device = Device::flex();
    let (lib, models, path) = tiny_library_and_encoder(&device);
    let mut c = crate::common::endotwin(lib.path());
    c.args(["model", "code-center", "--itq", "--itq-iterations", "20"])
        .arg(&path);
    let ran = crate::common::run(c);
    assert!(ran.ok(), "{}", ran.text());
    assert!(ran.says("and an ITQ rotation"), "{}", ran.text());
    let models_after = TwinModels::load(models.path(), &device).unwrap();
    let card = &models_after.image_card;
    let (center, rotation) = (
        card.code_center.clone().unwrap(),
        card.code_rotation.clone().unwrap(),
    );
    assert_eq!(rotation.len(), 64 * 64);
    // Orthogonal: its rows are unit and orthogonal to each other.
    for (i, j) in [(0, 0), (0, 1), (5, 9), (63, 63)] {
        let dot: f32 = (0..64)
            .map(|k| rotation[i * 64 + k] * rotation[j * 64 + k])
            .sum();
        let want = if i == j { 1.0 } else { 0.0 };
        assert!((dot - want).abs() < 1e-3, "row {i} . row {j} = {dot}");
    }
    // A view's code is the signs of its centred embedding turned by the rotation.
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let polyp = store.polyps().unwrap()[0].id;
    let view = store.polyp_views(polyp).unwrap().remove(0);
    let e = models_after.encode_views(&[endotwin::twins::load_view(&store, &view).unwrap()]);
    let centred: Vec<f32> = e[0].iter().zip(&center).map(|(x, m)| x - m).collect();
    let turned: Vec<f32> = (0..64)
        .map(|j| (0..64).map(|i| centred[i] * rotation[i * 64 + j]).sum())
        .collect();
    assert_eq!(
        models_after.coder.code(&e[0]),
        endotwin::model::hash::pack_signs(&turned)
    );
    drop(store);
    // A rotation cut short (a hand edit) is refused by name.
    hand_edit_is_refused(models.path(), &path, "code_rotation", |hex| {
        let hex = hex.as_str().unwrap();
        serde_json::json!(hex[..hex.len() - 8].to_string())
    });
}

#[test]
fn longer_codes_ride_in_the_card_keep_a_polyps_own_code_and_a_bad_length_is_refused() {
    let device = Device::flex();
    let (lib, models, path, before) = indexed_tiny_library(&device);
    // Not a multiple of the encoder's 64 dimensions: refused, the card untouched.
    let card_before = std::fs::read(&path).unwrap();
    let mut c = crate::common::endotwin(lib.path());
    c.args(["model", "code-bits", "--bits", "100"]).arg(&path);
    let ran = crate::common::run(c);
    assert!(!ran.ok());
    assert!(ran.says("multiple of its 64 dimensions"), "{}", ran.text());
    assert_eq!(std::fs::read(&path).unwrap(), card_before);

    let mut c = crate::common::endotwin(lib.path());
    c.args(["model", "code-bits", "--bits", "256"]).arg(&path);
    let ran = crate::common::run(c);
    assert!(ran.ok(), "{}", ran.text());
    assert!(
        ran.says("256-bit codes (32 bytes a polyp)"),
        "{}",
        ran.text()
    );
    let after = TwinModels::load(models.path(), &device).unwrap();
    assert_eq!(after.code_bits(), 256);
    assert_ne!(after.image_card.version, before.image_card.version);
    // The first 64 bits are the plain signs: the codes grow, the old ones stay their prefix.
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let polyp = store.polyps().unwrap()[0].id;
    let view = store.polyp_views(polyp).unwrap().remove(0);
    let e = after.encode_views(&[endotwin::twins::load_view(&store, &view).unwrap()]);
    let (long, short) = (after.coder.code(&e[0]), before.coder.code(&e[0]));
    assert_eq!(long.len(), 4);
    assert_eq!(long[0], short[0]);
    // Re-indexed, every search mode finds each polyp itself first, over 256-bit codes.
    let (store, index) = stale_then_reindexed(store, lib.path(), &after);
    for search in [Search::Hamming, Search::Asymmetric, Search::Cosine] {
        for i in 0..index.len() {
            let result = index.query(index.vector(i), 1, search, &[]);
            assert_eq!(result.bits, 256);
            assert_eq!(
                result.twins[0].polyp.id,
                index.polyps()[i].id,
                "{search:?}: polyp {i} is its own nearest twin"
            );
        }
    }
    // Back to 64 bits: the card's version is the one before.
    drop(store);
    let mut c = crate::common::endotwin(lib.path());
    c.args(["model", "code-bits", "--bits", "64"]).arg(&path);
    assert!(crate::common::run(c).ok());
    let again = TwinModels::load(models.path(), &device).unwrap();
    assert_eq!(again.image_card.version, before.image_card.version);
    assert_eq!(again.code_bits(), 64);
    // A length edited by hand is refused by name.
    hand_edit_is_refused(
        models.path(),
        &path,
        "code_bits",
        |_| serde_json::json!({"bits": 96, "seed": 1}),
    );
}

#[test]
fn a_tighter_crop_rides_in_the_card_as_a_new_version_and_the_index_follows() {
    let device = Device::flex();
    let (lib, models, path, before) = indexed_tiny_library(&device);
    // Not a positive number of times: refused, the card untouched.
    let card_before = std::fs::read(&path).unwrap();
    let mut c = crate::common::endotwin(lib.path());
    c.args(["model", "crop-context", "--context", "0"])
        .arg(&path);
    let ran = crate::common::run(c);
    assert!(!ran.ok());
    assert!(ran.says("positive number"), "{}", ran.text());
    assert_eq!(std::fs::read(&path).unwrap(), card_before);

    let mut c = crate::common::endotwin(lib.path());
    c.args(["model", "crop-context", "--context", "1.25"])
        .arg(&path);
    let ran = crate::common::run(c);
    assert!(ran.ok(), "{}", ran.text());
    assert!(ran.says("polyp crops of 1.25 x the box"), "{}", ran.text());
    let after = TwinModels::load(models.path(), &device).unwrap();
    assert_eq!(after.input().context, 1.25);
    assert_eq!(after.image_card.version, "v1-ctx1.25");
    // The same view, cut tighter, is another embedding; the tracklet crops keep theirs.
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let polyp = store.polyps().unwrap()[0].id;
    let view = store.polyp_views(polyp).unwrap().remove(0);
    let image = [endotwin::twins::load_view(&store, &view).unwrap()];
    assert_ne!(after.encode_views(&image), before.encode_views(&image));
    assert_eq!(
        after.encode_views_at(before.input().context, &image),
        before.encode_views(&image)
    );
    // Indexed with the old crops: stale, then re-indexed; each polyp finds itself first.
    let (_store, index) = stale_then_reindexed(store, lib.path(), &after);
    for i in 0..index.len() {
        let result = index.query(index.vector(i), 1, Search::Cosine, &[]);
        assert_eq!(result.twins[0].polyp.id, index.polyps()[i].id);
    }
    // Twice in a row: one context mark, not two.
    let mut c = crate::common::endotwin(lib.path());
    c.args(["model", "crop-context", "--context", "2"])
        .arg(&path);
    assert!(crate::common::run(c).ok());
    let again = TwinModels::load(models.path(), &device).unwrap();
    assert_eq!(again.image_card.version, "v1-ctx2");
}
