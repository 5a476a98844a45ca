//! Weights on disk: every module saves with its config and loads back to identical outputs;
//! a changed record, the wrong kind of model, or a config that does not fit is refused with a
//! clear message. Plus the behaviour of the dual encoder, the reconstruction decoder and the
//! word tokenizer. CPU (burn-flex), fixed seeds.

use burn::tensor::{Device, Distribution, Int, Tensor, TensorData};
use endotwin::model::clip::ClipConfig;
use endotwin::model::reconstruction::{ReconstructionDecoderConfig, masked_mse, patchify};
use endotwin::model::scene::SceneEncoderConfig;
use endotwin::model::text::TextEncoderConfig;
use endotwin::model::tokenizer::WordTokenizer;
use endotwin::model::tracklet::TrackletEncoderConfig;
use endotwin::model::unifier::UnifierConfig;
use endotwin::model::vit::{Positions, VitConfig};
use endotwin::model::weights::{self, ModelCard, ModelKind, WeightsError};

fn vec(t: Tensor<2>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().unwrap()
}

fn tiny_vit() -> VitConfig {
    VitConfig::new(16, 8, 16, 1, 2).with_projection(Some(8))
}

fn tiny_clip() -> ClipConfig {
    ClipConfig::new(
        tiny_vit().into(),
        TextEncoderConfig::new(16, 1, 2)
            .with_vocab_size(20)
            .with_context(6)
            .with_projection(Some(8)),
    )
}

fn tokens(device: &Device) -> Tensor<2, Int> {
    Tensor::from_data(
        TensorData::new(vec![18i64, 3, 4, 19, 0, 0, 18, 5, 19, 0, 0, 0], [2, 6]),
        device,
    )
}

/// Saves with one seed, loads into a model initialised with another, compares outputs.
fn round_trip<C, M>(
    kind: ModelKind,
    config: &C,
    init: impl Fn(&C, &Device) -> M,
    run: impl Fn(&M) -> Vec<f32>,
) where
    C: serde::Serialize + serde::de::DeserializeOwned + weights::CheckConfig,
    M: burn::module::Module + burn::store::ModuleSnapshot,
{
    let device = Device::flex();
    device.seed(1);
    let model = init(config, &device);
    let expected = run(&model);
    let dir = tempfile::tempdir().unwrap();
    let card = ModelCard::new("m", kind, "1", "test", config);
    let path = weights::save(&model, &card, dir.path()).unwrap();

    device.seed(2);
    assert_ne!(
        run(&init(config, &device)),
        expected,
        "{kind}: seeds differ"
    );
    let (loaded, card) = weights::load(&path, kind, |c: &C| init(c, &device)).unwrap();
    assert_eq!(card.sha256.len(), 64);
    let got = run(&loaded);
    for (a, b) in got.iter().zip(&expected) {
        assert!((a - b).abs() < 1e-6, "{kind}: {a} vs {b}");
    }
}

#[test]
fn every_module_round_trips_through_its_card_and_record() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    device.seed(0);
    let images = Tensor::<4>::random([2, 3, 16, 16], Distribution::Normal(0.0, 1.0), &device);
    let views = Tensor::<3>::random([2, 3, 8], Distribution::Normal(0.0, 1.0), &device);
    let frames = Tensor::<3>::random([2, 4, 12], Distribution::Normal(0.0, 1.0), &device);

    round_trip(
        ModelKind::ImageEncoder,
        &tiny_vit().with_positions(Positions::SinCos),
        |c, d| c.init(d),
        |m| vec(m.forward(images.clone())),
    );
    round_trip(
        ModelKind::Clip,
        &tiny_clip(),
        |c, d| c.init(d),
        |m| {
            let i = m.encode_images(images.clone());
            let t = m.encode_texts(tokens(&images.device()));
            vec(m.logits(i, t))
        },
    );
    round_trip(
        ModelKind::SceneEncoder,
        &SceneEncoderConfig::new(8).with_heads(2),
        |c, d| c.init(d),
        |m| vec(m.forward(views.clone(), None)),
    );
    round_trip(
        ModelKind::TrackletEncoder,
        &TrackletEncoderConfig::new(12)
            .with_dim(16)
            .with_layers(1)
            .with_heads(2)
            .with_feed_forward(32)
            .with_projection(8),
        |c, d| c.init(d),
        |m| vec(m.forward(frames.clone()).0),
    );
    round_trip(
        ModelKind::Unifier,
        &UnifierConfig::new(8),
        |c, d| c.init(d),
        |m| {
            let (a, b) = m.forward(
                views.clone().slice([0..1, 0..3, 0..8]).reshape([3, 8]),
                views.clone().slice([1..2, 0..2, 0..8]).reshape([2, 8]),
            );
            [a, b]
                .into_iter()
                .flat_map(|t| t.into_data().try_to_vec::<f32>().unwrap())
                .collect()
        },
    );
    let decoder = ReconstructionDecoderConfig::new(16, 8, 2, 8)
        .with_width(16)
        .with_heads(2);
    round_trip(
        ModelKind::ReconstructionDecoder,
        &decoder,
        |c, d| c.init(d),
        |m| {
            let d = images.device();
            let keep =
                Tensor::<2, Int>::from_data(TensorData::new(vec![0i64, 3, 1, 2], [2, 2]), &d);
            let visible = Tensor::<3>::ones([2, 3, 16], &d);
            let out = m.forward(visible, keep, Some(Tensor::ones([2, 8], &d)));
            out.into_data().try_to_vec::<f32>().unwrap()
        },
    );
}

#[test]
fn a_record_changed_after_its_card_was_written_is_refused() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    let dir = tempfile::tempdir().unwrap();
    let config = tiny_vit();
    let card = ModelCard::new("twin", ModelKind::ImageEncoder, "1", "test", &config);
    let path = weights::save(&config.init(&device), &card, dir.path()).unwrap();
    let record = weights::record_path(&path);
    let mut bytes = std::fs::read(&record).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&record, &bytes).unwrap();

    let err = weights::load(&path, ModelKind::ImageEncoder, |c: &VitConfig| {
        c.init(&device)
    })
    .unwrap_err();
    assert!(matches!(err, WeightsError::Checksum { .. }), "{err}");
    assert!(
        err.to_string().contains("does not match its model card"),
        "{err}"
    );
}

#[test]
fn the_wrong_kind_or_a_config_that_does_not_fit_is_named() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    let dir = tempfile::tempdir().unwrap();
    let config = tiny_vit();
    let card = ModelCard::new("twin", ModelKind::ImageEncoder, "1", "test", &config);
    let path = weights::save(&config.init(&device), &card, dir.path()).unwrap();

    let err = weights::load(&path, ModelKind::SceneEncoder, |c: &SceneEncoderConfig| {
        c.init(&device)
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{} is a model of kind image-encoder, not scene-encoder",
            path.display()
        )
    );

    // The record was saved for width 16; a caller that builds width 32 is told which tensor.
    let err = weights::load(&path, ModelKind::ImageEncoder, |c: &VitConfig| {
        VitConfig::new(c.image_size, c.patch_size, 32, c.depth, c.heads).init(&device)
    })
    .unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, WeightsError::Mismatch { .. }), "{message}");
    assert!(message.contains("patch_embed.weight"), "{message}");
}

#[test]
fn clip_logits_are_the_scaled_cosines_of_each_image_with_each_text() {
    let _rng = crate::common::device_rng();
    // Images and texts differ (each text is its image's embedding plus noise), so a
    // transposed, unscaled or unnormalised logit matrix fails; the scale starts at 1/0.07.
    let device = Device::flex();
    let clip = tiny_clip().init(&device);
    let scale = clip.scale().into_data().try_to_vec::<f32>().unwrap()[0];
    assert!((scale - 1.0 / 0.07).abs() < 1e-2, "{scale}");
    let rows = |seed: u64| {
        let mut rng = endotwin::plumbing::Rng::new(seed);
        (0..32).map(|_| rng.normal()).collect::<Vec<f32>>()
    };
    let unit = |v: &[f32]| -> Vec<f32> {
        v.chunks(8)
            .flat_map(|r| {
                let n = r.iter().map(|x| x * x).sum::<f32>().sqrt();
                r.iter().map(move |x| x / n)
            })
            .collect()
    };
    let image_raw = rows(1);
    let noise = rows(2);
    let text_raw: Vec<f32> = image_raw
        .iter()
        .zip(&noise)
        .map(|(a, n)| a + 0.4 * n)
        .collect();
    let (image, text) = (unit(&image_raw), unit(&text_raw));
    let tensor = |v: &[f32]| Tensor::<2>::from_data(TensorData::new(v.to_vec(), [4, 8]), &device);
    let logits = vec(clip.logits(tensor(&image), tensor(&text)));
    for i in 0..4 {
        for j in 0..4 {
            let cos: f32 = (0..8).map(|k| image[i * 8 + k] * text[j * 8 + k]).sum();
            assert!(
                (logits[i * 4 + j] - scale * cos).abs() < 1e-3,
                "logit ({i}, {j}) {} against {}",
                logits[i * 4 + j],
                scale * cos
            );
        }
    }
    // And the matching text ranks first for every image here (its cosine is the largest).
    for i in 0..4 {
        let best = (0..4)
            .max_by(|&a, &b| logits[i * 4 + a].total_cmp(&logits[i * 4 + b]))
            .unwrap();
        assert_eq!(best, i);
    }
}

#[test]
fn the_decoder_predicts_every_patch_and_the_loss_counts_masked_ones_only() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    device.seed(4);
    let vit = VitConfig::new(16, 8, 16, 1, 2)
        .with_positions(Positions::SinCos)
        .init(&device);
    let images = Tensor::<4>::random([2, 3, 16, 16], Distribution::Normal(0.0, 1.0), &device);
    let keep = Tensor::<2, Int>::from_data(TensorData::new(vec![0i64, 3, 2, 1], [2, 2]), &device);

    // All patches kept in order == the plain forward.
    let all = Tensor::<2, Int>::from_data(
        TensorData::new(vec![0i64, 1, 2, 3, 0, 1, 2, 3], [2, 4]),
        &device,
    );
    let a = vit
        .forward_tokens(images.clone())
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    let b = vit
        .forward_visible(images.clone(), all)
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-5));

    let visible = vit.forward_visible(images.clone(), keep.clone()); // [2, 1 + 2, 16]
    assert_eq!(visible.dims(), [2, 3, 16]);
    let decoder = ReconstructionDecoderConfig::new(16, 8, 2, 8)
        .with_width(16)
        .with_heads(2)
        .init(&device);
    let predicted = decoder.forward(visible, keep, Some(Tensor::ones([2, 8], &device)));
    assert_eq!(predicted.dims(), [2, 4, 3 * 8 * 8]);

    // patchify: patch 1 of image 0 is the top-right 8x8 block, channel-last.
    let target = patchify(images.clone(), 8);
    assert_eq!(target.dims(), [2, 4, 192]);
    let pixel = images
        .clone()
        .slice([0..1, 2..3, 1..2, 9..10])
        .into_scalar::<f32>();
    let patched = target
        .clone()
        .slice([0..1, 1..2, 29..30])
        .into_scalar::<f32>();
    // row 1, column 1 within the patch, channel 2: (1 * 8 + 1) * 3 + 2 = 29
    assert_eq!(pixel, patched);

    // Hand-computed masked MSE: errors of 1 on masked patches, 10 on visible ones.
    let pred = Tensor::<3>::zeros([1, 2, 2], &device);
    let tgt = Tensor::<3>::from_data(
        TensorData::new(vec![1.0f32, 1.0, 10.0, 10.0], [1, 2, 2]),
        &device,
    );
    let masked = Tensor::<2>::from_data(TensorData::new(vec![1.0f32, 0.0], [1, 2]), &device);
    let loss = masked_mse(pred, tgt, masked).into_scalar::<f32>();
    assert!((loss - 1.0).abs() < 1e-6, "{loss}");
}

#[test]
fn the_word_tokenizer_is_deterministic_and_ends_on_its_highest_id() {
    let _rng = crate::common::device_rng();
    let corpus = [
        "A 8mm sessile polyp in the sigmoid colon.",
        "A pedunculated polyp in the rectum.",
        "Normal mucosa.",
    ];
    let tok = WordTokenizer::from_corpus(corpus.iter().copied(), 1);
    assert_eq!(tok, WordTokenizer::from_corpus(corpus.iter().copied(), 1));
    assert_eq!(&tok.words[..3], ["a", "in", "polyp"]);
    let ids = tok.encode("Sessile polyp, 8 mm, in the caecum", 10);
    assert_eq!(ids.len(), 10);
    assert_eq!(ids[0], tok.start_of_text());
    let end = ids.iter().position(|&i| i == tok.end_of_text()).unwrap();
    assert_eq!(end, 8, "7 words between start and end: {ids:?}");
    assert_eq!(ids[7], 1, "caecum is not in the corpus: unknown");
    assert_eq!(*ids.iter().max().unwrap(), tok.end_of_text());
    assert_eq!(tok.vocab_size() as i64, tok.end_of_text() + 1);
    // Too long: cut, still ends on end-of-text.
    let ids = tok.encode(&"polyp ".repeat(50), 6);
    assert_eq!(ids[5], tok.end_of_text());
}
