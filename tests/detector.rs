//! The polyp detector on the ImageNet backbone (`train detector-backbone`): it saves and
//! loads as a text-prompt model with a backbone image tower, reads its input as ImageNet
//! does, is promoted into the detector's slot, and (on real frames) is far ahead of the same
//! architecture untrained.

use burn::tensor::Device;
use endotwin::model::twin_encoder::TwinEncoderConfig;
use endotwin::model::weights::{self, ModelCard, ModelKind};
use endotwin::prompts::model::{self as pm, BACKGROUND_SENTENCE, POLYP_SENTENCE};
use endotwin::train::detector_backbone::{
    DetectorBackboneTrainingConfig, assemble, detector_config, encode_crops,
};

/// The detector's architecture at 64 px (the tests' speed; the shipped one reads 224 px).
fn small_config() -> pm::PromptModelConfig {
    let mut config = detector_config(16);
    if let TwinEncoderConfig::Backbone(b) = &mut config.clip.vision {
        b.image_size = 64;
    }
    config
}

/// The detector of `config` at random init (seed the device first).
fn untrained_detector(config: &pm::PromptModelConfig, device: &Device) -> pm::PromptModel {
    let TwinEncoderConfig::Backbone(vision) = &config.clip.vision else {
        panic!("a backbone tower")
    };
    assemble(
        config,
        vision.init(device),
        DetectorBackboneTrainingConfig::new(config.clone()).head(device),
        device,
    )
}

fn frames() -> Vec<image::DynamicImage> {
    (0..3u8)
        .map(|k| {
            image::DynamicImage::ImageRgb8(image::RgbImage::from_fn(90, 70, |x, y| {
                image::Rgb([
                    (x as u8).wrapping_mul(3).wrapping_add(40 * k),
                    (y as u8).wrapping_mul(2),
                    120 + k * 30,
                ])
            }))
        })
        .collect()
}

#[test]
fn a_backbone_detector_saves_and_loads_as_a_prompt_model_giving_the_same_answers() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    device.seed(3);
    let config = small_config();
    assert!(pm::is_detector_only(&config));
    assert!(
        !pm::is_detector_only(&pm::PromptModelConfig::small(["a sessile polyp"])),
        "a prompt model that knows more words is not a detector"
    );
    let training = DetectorBackboneTrainingConfig::new(config.clone());
    let TwinEncoderConfig::Backbone(vision) = &config.clip.vision else {
        panic!("a backbone tower")
    };
    let mut frozen = vision.init(&device);
    frozen.projection = None;
    let model = assemble(&config, frozen, training.head(&device), &device);
    let dir = tempfile::tempdir().unwrap();
    let card = ModelCard::new(
        "prompts-detect",
        ModelKind::PromptModel,
        "test",
        "a detector",
        &config,
    );
    let path = weights::save(&model, &card, dir.path()).unwrap();
    let loaded = pm::load(&path, &device).unwrap();
    assert!(loaded.model.clip.vit().is_none() && loaded.model.clip.backbone.is_some());
    // ImageNet's statistics at the tower's size, not CLIP's.
    let input = loaded.config.input();
    assert_eq!((input.size, input.mean), (64, [0.485, 0.456, 0.406]));

    let frames = frames();
    let probabilities = |m: &pm::PromptModel| {
        let x = endotwin::prompts::query::image_embeddings(
            &pm::LoadedPromptModel {
                model: m.clone(),
                config: config.clone(),
                card: card.clone(),
            },
            &frames,
            &device,
        );
        let texts = pm::detection_texts(m, &config, &device);
        pm::polyp_probability(m, x, texts)
    };
    let before = probabilities(&model);
    let after = probabilities(&loaded.model);
    assert_eq!(before.len(), 3);
    for (a, b) in before.iter().zip(&after) {
        assert!((a - b).abs() < 1e-6, "{before:?} against {after:?}");
    }
    // Any prompt beyond the two sentences is made of words it does not know.
    let words = config.tokenizer.words().unwrap();
    assert!(words.unknown_words(POLYP_SENTENCE).is_empty());
    assert!(words.unknown_words(BACKGROUND_SENTENCE).is_empty());
    assert_eq!(
        words.unknown_words("a pedunculated adenoma"),
        ["pedunculated", "adenoma"]
    );
}

#[test]
fn a_promoted_backbone_detector_takes_the_detectors_place_not_the_prompt_models() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    device.seed(4);
    let config = small_config();
    let model = untrained_detector(&config, &device);
    let runs = tempfile::tempdir().unwrap();
    let card = ModelCard::new(
        "my-detector",
        ModelKind::PromptModel,
        "run-1",
        "a detector",
        &config,
    );
    let path = weights::save(&model, &card, runs.path()).unwrap();
    let lib = tempfile::tempdir().unwrap();
    crate::common::two_polyp_library(lib.path());
    let promoted = endotwin::engine::promote::promote(lib.path(), &path, None).unwrap();
    assert_eq!(promoted.name, pm::SHIPPED_DETECTOR);
    let detector = weights::read_card(&promoted.dir.join("prompts-detect.json")).unwrap();
    assert_eq!(detector.version, "run-1");
    // The library's prompt model (when it has one) is not the detector.
    let prompts = promoted.dir.join("prompts.json");
    if prompts.is_file() {
        assert_ne!(weights::read_card(&prompts).unwrap().version, "run-1");
    }
}

/// The shipped ImageNet detector on real crops (the polyp square of CVC-ClinicDB frames, which it never
/// learned from, against a polyp-free window of the same frame) beside the same architecture
/// untrained: the floor is one the untrained detector fails.
#[test]
fn the_shipped_detector_tells_real_polyps_from_background_where_its_untrained_self_cannot() {
    let Some(cvc) = crate::common::realdata("cvc-clinicdb-21-29") else {
        return;
    };
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    // The default detector since #44: ImageNet's MobileNetV2, learned from masked crops and
    // whole phantom frames (docs/models.md).
    let card = endotwin::default_models_dir().join("prompts-detect.json");
    let shipped = pm::load(&card, &device).unwrap();
    assert!(
        shipped.model.clip.backbone.is_some(),
        "the ImageNet detector"
    );
    // Every 6th frame of the folder (about 30), each a polyp square and a free window.
    let mut frames: Vec<std::path::PathBuf> = std::fs::read_dir(cvc.join("Original"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    frames.sort();
    let mut rng = endotwin::plumbing::Rng::new(7);
    let mut images = Vec::new();
    for f in frames.iter().step_by(6) {
        let mask = cvc.join("Ground Truth").join(f.file_name().unwrap());
        let (Ok(image), Ok(mask)) = (
            endotwin::data::images::decode_file(f),
            endotwin::data::images::decode_file(&mask),
        ) else {
            continue;
        };
        if let Some((p, b)) = endotwin::data::crops::polyp_and_free_window(
            &image.image,
            &mask.image.to_luma8(),
            &mut rng,
        ) {
            images.extend([p, b]);
        }
    }
    assert!(images.len() >= 40, "{} crops", images.len());
    let positive: Vec<bool> = (0..images.len()).map(|i| i % 2 == 0).collect();
    let auroc = |loaded: &pm::LoadedPromptModel| {
        let x = endotwin::prompts::query::image_embeddings(loaded, &images, &device);
        let texts = pm::detection_texts(&loaded.model, &loaded.config, &device);
        let p: Vec<f64> = pm::polyp_probability(&loaded.model, x, texts)
            .into_iter()
            .map(f64::from)
            .collect();
        endotwin::eval::metrics::auroc(&p, &positive)
    };
    device.seed(11);
    let untrained = pm::LoadedPromptModel {
        model: shipped.config.init(&device),
        config: shipped.config.clone(),
        card: shipped.card.clone(),
    };
    let (trained, random) = (auroc(&shipped), auroc(&untrained));
    eprintln!("CVC-ClinicDB crops: shipped detector AUROC {trained:.3}, untrained {random:.3}");
    // Measured: see docs/real.md (shipped) and about 0.5 for random weights.
    assert!(
        trained >= 0.85 && random < 0.75,
        "shipped {trained:.3}, untrained {random:.3}"
    );
}

/// `--whole-frames`: the whole frames of an examination that also holds frames without a
/// polyp are learned (its polyp views as "polyp", its other frames as "background", about as
/// many rows of each), and a library without such frames adds none.
#[test]
fn the_detector_learns_whole_frames_only_where_an_examination_holds_both_kinds() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    device.seed(5);
    let config = small_config();
    let TwinEncoderConfig::Backbone(vision) = &config.clip.vision else {
        panic!("a backbone tower")
    };
    let frozen = vision.init(&device);
    let training = DetectorBackboneTrainingConfig::new(config.clone())
        .with_copies(1)
        .with_whole_frames(2);
    let counts = |background_frames: usize| {
        let lib = tempfile::tempdir().unwrap();
        crate::common::phantom_library(
            lib.path(),
            &endotwin::data::phantom::PhantomConfig {
                polyps: 3,
                videos: 0,
                capsule_images: 0,
                background_frames,
                image_size: 64,
                ..Default::default()
            },
        );
        let store =
            endotwin::store::Store::open(lib.path(), endotwin::store::OpenMode::Existing).unwrap();
        let exams = store.examinations().unwrap().len();
        let f = encode_crops(&store, &frozen, &training, &device, |_| {}).unwrap();
        let polyp_rows = f.polyp.iter().filter(|&&p| p).count();
        (f, exams, polyp_rows)
    };
    let (with, exams, polyp_rows) = counts(2);
    assert_eq!(
        with.whole_polyp, with.views,
        "every masked view's whole frame"
    );
    assert_eq!(
        with.whole_background,
        2 * exams,
        "every frame without a polyp"
    );
    // One polyp square a view, and its whole frame twice.
    assert_eq!(polyp_rows, 3 * with.views);
    let background_rows = with.rows.len() - polyp_rows;
    let windows = with.views - with.without_window;
    let whole_background_rows = background_rows - windows;
    assert!(
        whole_background_rows >= with.whole_background
            && whole_background_rows.abs_diff(2 * with.whole_polyp) <= with.whole_background,
        "{whole_background_rows} background rows of whole frames against {} polyp ones",
        2 * with.whole_polyp
    );
    let (without, _, polyp_rows) = counts(0);
    assert_eq!((without.whole_polyp, without.whole_background), (0, 0));
    assert_eq!(polyp_rows, without.views, "crops only");
}

/// The detector learned its two sentences alone: another sentence made of their words would
/// get a number that means nothing, so it is refused by name, and the two are scored.
#[test]
fn a_detector_refuses_a_prompt_that_is_not_one_of_its_two_sentences() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    device.seed(6);
    let config = small_config();
    let model = untrained_detector(&config, &device);
    let loaded = pm::LoadedPromptModel {
        model,
        config: config.clone(),
        card: ModelCard::new("d", ModelKind::PromptModel, "t", "a detector", &config),
    };
    let err = endotwin::prompts::query::check_prompt(&loaded, "This is a polyp.").unwrap_err();
    assert!(
        err.to_string()
            .contains("not one of the detector's two sentences"),
        "{err}"
    );
    for ok in [POLYP_SENTENCE, "this is a normal background"] {
        endotwin::prompts::query::check_prompt(&loaded, ok).unwrap();
    }
}
