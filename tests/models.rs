//! The burn modules on the CPU (and one on wgpu): shapes, behaviour, record round trips.

use burn::module::Module;
use burn::store::{BurnpackStore, ModuleSnapshot};
use burn::tensor::{Device, Distribution, Tensor, TensorData};
use endotwin::model::vit::{Positions, VitConfig};

fn small() -> VitConfig {
    VitConfig::new(32, 8, 32, 2, 4).with_projection(Some(16))
}

fn images(device: &Device) -> Tensor<4> {
    Tensor::random([2, 3, 32, 32], Distribution::Normal(0.0, 1.0), device)
}

#[test]
fn the_encoder_maps_images_to_one_embedding_each() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    device.seed(1);
    let vit = small().init(&device);
    let x = images(&device);
    assert_eq!(vit.forward_tokens(x.clone()).dims(), [2, 17, 32]);
    let out = vit.forward(x);
    assert_eq!(out.dims(), [2, 16]);
    let values = out.into_data().try_to_vec::<f32>().unwrap();
    assert!(values.iter().all(|v| v.is_finite()));
    // Different images give different embeddings.
    assert!((0..16).any(|i| (values[i] - values[16 + i]).abs() > 1e-4));
}

#[test]
fn clip_b32_has_the_reference_geometry() {
    let _rng = crate::common::device_rng();
    let cfg = VitConfig::clip_b32();
    assert_eq!((cfg.patches(), cfg.output_dim()), (49, 512));
}

#[test]
fn sincos_positions_are_fixed_and_distinct_per_patch() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    let vit = small().with_positions(Positions::SinCos).init(&device);
    let pos = vit.positions.val().into_data().try_to_vec::<f32>().unwrap();
    assert!(pos[..32].iter().all(|v| *v == 0.0), "CLS row is zero");
    assert_ne!(pos[32..64], pos[64..96], "neighbouring patches differ");
    assert_eq!(vit.forward(images(&device)).dims(), [2, 16]);
}

#[test]
fn a_saved_record_loads_into_a_fresh_model_with_the_same_outputs() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    device.seed(3);
    let vit = small().init(&device);
    let x = images(&device);
    let expected = vit
        .forward(x.clone())
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();

    let mut store = BurnpackStore::from_bytes(None);
    vit.save_into(&mut store).unwrap();
    let bytes = store.get_bytes().unwrap();

    device.seed(99);
    let mut fresh = small().init(&device);
    let before = fresh
        .forward(x.clone())
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    assert_ne!(before, expected, "a fresh init differs");
    let result = fresh
        .load_from(&mut BurnpackStore::from_bytes(Some(bytes)))
        .unwrap();
    assert!(
        result.missing.is_empty() && result.errors.is_empty(),
        "{result:?}"
    );
    let got = fresh.forward(x).into_data().try_to_vec::<f32>().unwrap();
    for (a, b) in got.iter().zip(&expected) {
        assert!((a - b).abs() < 1e-6);
    }
}

#[test]
fn any_image_becomes_a_normalised_batch_and_sign_codes_pack() {
    let _rng = crate::common::device_rng();
    use endotwin::model::hash::{hamming, pack_signs, sign_codes};
    use endotwin::model::preprocess::{Preprocess, tracklet_crop};
    let device = Device::flex();
    let grey16 = image::DynamicImage::ImageLuma16(image::ImageBuffer::from_pixel(
        50,
        30,
        image::Luma([65535u16]),
    ));
    let rgba = image::DynamicImage::ImageRgba8(image::RgbaImage::from_pixel(
        20,
        40,
        image::Rgba([0, 0, 0, 0]),
    ));
    let batch = Preprocess::clip(32).batch(&[grey16, rgba], &device);
    assert_eq!(batch.dims(), [2, 3, 32, 32]);
    let v = batch.into_data().try_to_vec::<f32>().unwrap();
    // White through CLIP's normalisation: (1 - 0.4815) / 0.2686 on the red channel.
    assert!((v[0] - (1.0 - 0.481_454_66) / 0.268_629_54).abs() < 1e-4);
    // Black on the second image.
    assert!((v[3 * 32 * 32] - (0.0 - 0.481_454_66) / 0.268_629_54).abs() < 1e-4);
    let frame = image::DynamicImage::ImageRgb8(image::RgbImage::new(100, 80));
    // Five diagonals of an 8 x 8 box near the corner: a 57 px square moved inside the frame.
    let crop = tracklet_crop(&frame, [90.0, 10.0, 8.0, 8.0]);
    assert_eq!(
        (crop.width(), crop.height()),
        (57, 57),
        "kept inside the frame"
    );

    let codes = sign_codes(Tensor::from_floats(
        [[0.5f32, -1.0, 0.0], [-0.1, 2.0, -3.0]],
        &device,
    ));
    assert_eq!(codes, vec![vec![0b101], vec![0b010]]);
    assert_eq!(hamming(&codes[0], &codes[1]), 3);
    assert_eq!(pack_signs(&vec![1.0; 130]).len(), 3);
}

#[test]
fn a_scene_embedding_is_unit_length_independent_of_view_order_and_ignores_padding() {
    let _rng = crate::common::device_rng();
    use burn::tensor::{Bool, TensorData};
    use endotwin::model::scene::SceneEncoderConfig;
    let device = Device::flex();
    device.seed(5);
    let enc = SceneEncoderConfig::new(16).with_heads(4).init(&device);
    let views = Tensor::<3>::random([1, 3, 16], Distribution::Normal(0.0, 1.0), &device);
    let a = enc
        .forward(views.clone(), None)
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    let norm: f32 = a.iter().map(|v| v * v).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4);
    let reversed = views.clone().flip([1]);
    let b = enc
        .forward(reversed, None)
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() < 1e-5, "order changed the scene");
    }
    // A fourth, padded view changes nothing.
    let padded = Tensor::cat(
        vec![
            views,
            Tensor::<3>::random([1, 1, 16], Distribution::Normal(0.0, 9.0), &device),
        ],
        1,
    );
    let missing = Tensor::<2, Bool>::from_data(
        TensorData::new(vec![false, false, false, true], [1, 4]),
        &device,
    );
    let c = enc
        .forward(padded, Some(missing))
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    for (x, y) in a.iter().zip(&c) {
        assert!((x - y).abs() < 1e-5, "padding leaked into the scene");
    }
}

#[test]
fn a_tracklet_of_frames_gives_one_embedding_and_frame_tokens() {
    let _rng = crate::common::device_rng();
    use endotwin::model::tracklet::TrackletEncoderConfig;
    let device = Device::flex();
    device.seed(8);
    let enc = TrackletEncoderConfig::new(64).init(&device);
    let frames = Tensor::<3>::random([2, 8, 64], Distribution::Normal(0.0, 1.0), &device);
    let (tracklet, tokens) = enc.forward(frames);
    assert_eq!(tracklet.dims(), [2, 256]);
    assert_eq!(tokens.dims(), [2, 8, 256]);
    assert_eq!(enc.project(tracklet).dims(), [2, 128]);
    assert_eq!(enc.project(tokens).dims(), [2, 8, 128]);
}

/// The wgpu device; `None` (skip, said on stderr) off CI when there is no adapter. CI installs
/// lavapipe, so there one must exist.
fn wgpu_device() -> Option<Device> {
    use endotwin::compute::{self, BackendPref};
    match compute::select(BackendPref::Gpu) {
        Ok(c) => Some(c.device),
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipping: {e}");
            None
        }
        Err(e) => panic!("CI must have a wgpu adapter (mesa-vulkan-drivers): {e}"),
    }
}

#[test]
fn the_encoder_gives_the_same_embedding_on_wgpu_and_the_cpu() {
    let _rng = crate::common::device_rng();
    let Some(gpu) = wgpu_device() else { return };
    let cpu = Device::flex();
    cpu.seed(11);
    let vit = VitConfig::new(16, 8, 16, 1, 2)
        .with_projection(Some(8))
        .init(&cpu);
    let x = Tensor::<4>::random([1, 3, 16, 16], Distribution::Normal(0.0, 1.0), &cpu);
    let expected = vit
        .forward(x.clone())
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    let on_gpu = vit.to_device(&gpu);
    let got = on_gpu
        .forward(x.to_device(&gpu))
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    for (a, b) in got.iter().zip(&expected) {
        assert!((a - b).abs() < 1e-4, "{got:?} vs {expected:?}");
    }
}

#[test]
fn the_tracklet_model_gives_the_same_embedding_on_wgpu_and_the_cpu() {
    let _rng = crate::common::device_rng();
    use endotwin::model::frame_cnn::FrameCnnConfig;
    use endotwin::model::tracklet::{TrackletEncoderConfig, TrackletModelConfig};
    let Some(gpu) = wgpu_device() else { return };
    let cpu = Device::flex();
    cpu.seed(12);
    // The shipped geometry, smaller: a two-stage CNN on 16 px crops, one 32-d layer.
    let config = TrackletModelConfig::new(
        FrameCnnConfig::new()
            .with_image_size(16)
            .with_channels(vec![4, 8]),
        TrackletEncoderConfig::new(8)
            .with_dim(32)
            .with_layers(1)
            .with_heads(4)
            .with_feed_forward(64),
    );
    let model = config.init(&cpu);
    let x = Tensor::<5>::random([2, 8, 3, 16, 16], Distribution::Normal(0.0, 1.0), &cpu);
    let (expected, _) = model.forward(x.clone());
    let expected = expected.into_data().try_to_vec::<f32>().unwrap();
    let (got, _) = model.to_device(&gpu).forward(x.to_device(&gpu));
    let got = got.into_data().try_to_vec::<f32>().unwrap();
    assert_eq!(got.len(), 2 * 32);
    for (a, b) in got.iter().zip(&expected) {
        assert!((a - b).abs() < 1e-4, "{got:?} vs {expected:?}");
    }
}

#[test]
fn clip_tokenizer_matches_the_reference_ids_and_fits_the_context() {
    let _rng = crate::common::device_rng();
    use endotwin::model::text::ClipTokenizer;
    let tok = ClipTokenizer::default();
    // The reference tokenization from the tokenizer crate's documentation.
    assert_eq!(
        tok.encode("Hi there", 6),
        vec![49406, 1883, 997, 49407, 0, 0]
    );
    let long = tok.encode(&"polyp ".repeat(200), 77);
    assert_eq!(long.len(), 77);
    assert_eq!((long[0], long[76]), (49406, 49407));
}

#[test]
fn the_text_embedding_is_taken_at_end_of_text_and_ignores_padding() {
    let _rng = crate::common::device_rng();
    use endotwin::model::text::{ClipTokenizer, TextEncoderConfig};
    let device = Device::flex();
    device.seed(21);
    let enc = TextEncoderConfig::new(32, 2, 4)
        .with_context(24)
        .with_projection(Some(16))
        .init(&device);
    let tok = ClipTokenizer::default();
    let texts = ["a sessile polyp in the caecum", "normal mucosa"];
    let short = enc.forward(tok.batch(&texts, 16, &device));
    assert_eq!(short.dims(), [2, 16]);
    let long = enc.forward(tok.batch(&texts, 24, &device));
    let (a, b) = (
        short.into_data().try_to_vec::<f32>().unwrap(),
        long.into_data().try_to_vec::<f32>().unwrap(),
    );
    for (x, y) in a.iter().zip(&b) {
        assert!(
            (x - y).abs() < 1e-5,
            "padding after end-of-text changed the embedding"
        );
    }
    assert!(
        (0..16).any(|i| (a[i] - a[16 + i]).abs() > 1e-4),
        "texts differ"
    );
}

#[test]
fn the_text_encoder_record_round_trips() {
    let _rng = crate::common::device_rng();
    use endotwin::model::text::{ClipTokenizer, TextEncoderConfig};
    let device = Device::flex();
    let cfg = TextEncoderConfig::new(32, 1, 4).with_context(8);
    device.seed(1);
    let enc = cfg.init(&device);
    let ids = ClipTokenizer::default().batch(&["polyp"], 8, &device);
    let expected = enc
        .forward(ids.clone())
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    let mut store = BurnpackStore::from_bytes(None);
    enc.save_into(&mut store).unwrap();
    device.seed(2);
    let mut fresh = cfg.init(&device);
    let result = fresh
        .load_from(&mut BurnpackStore::from_bytes(Some(
            store.get_bytes().unwrap(),
        )))
        .unwrap();
    assert!(
        result.missing.is_empty() && result.errors.is_empty(),
        "{result:?}"
    );
    assert_eq!(
        fresh.forward(ids).into_data().try_to_vec::<f32>().unwrap(),
        expected
    );
}

#[test]
fn the_unifier_summarises_any_number_of_polyps_and_sentences_order_free() {
    let _rng = crate::common::device_rng();
    use endotwin::model::unifier::UnifierConfig;
    let device = Device::flex();
    device.seed(4);
    let u = UnifierConfig::new(8).init(&device);
    let images = Tensor::<2>::random([3, 8], Distribution::Normal(0.0, 1.0), &device);
    let sentences = Tensor::<2>::random([5, 8], Distribution::Normal(0.0, 1.0), &device);
    let (img, txt) = u.forward(images.clone(), sentences.clone());
    assert_eq!((img.dims(), txt.dims()), ([8], [8]));
    // The examination vector does not depend on the order of polyps or sentences.
    let (img2, txt2) = u.forward(images.flip([0]), sentences.flip([0]));
    let close = |a: Tensor<1>, b: Tensor<1>| {
        let (a, b) = (
            a.into_data().try_to_vec::<f32>().unwrap(),
            b.into_data().try_to_vec::<f32>().unwrap(),
        );
        a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-5)
    };
    assert!(close(img, img2) && close(txt, txt2));
}

#[test]
fn the_residual_scene_encoder_starts_as_the_normalised_mean_of_views() {
    let _rng = crate::common::device_rng();
    use endotwin::model::scene::SceneEncoderConfig;
    let device = Device::flex();
    device.seed(4);
    let scene = SceneEncoderConfig::new(8)
        .with_heads(2)
        .with_residual(true)
        .init(&device);
    // Two scenes: three views, and two views plus one padding slot.
    let views: Vec<f32> = (0..2 * 3 * 8)
        .map(|i| ((i * 37 % 11) as f32 - 5.0) / 7.0)
        .collect();
    let x = Tensor::<3>::from_data(TensorData::new(views.clone(), [2, 3, 8]), &device);
    let missing = Tensor::<2, burn::tensor::Bool>::from_data(
        TensorData::new(vec![false, false, false, false, false, true], [2, 3]),
        &device,
    );
    let got = scene
        .forward(x, Some(missing))
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    for (b, used) in [(0usize, 3usize), (1, 2)] {
        let mut mean = [0.0f32; 8];
        for v in 0..used {
            for d in 0..8 {
                mean[d] += views[(b * 3 + v) * 8 + d] / used as f32;
            }
        }
        let norm = mean.iter().map(|x| x * x).sum::<f32>().sqrt();
        for d in 0..8 {
            let want = mean[d] / norm;
            assert!(
                (got[b * 8 + d] - want).abs() < 1e-5,
                "scene {b} dim {d}: {} vs {want}",
                got[b * 8 + d]
            );
        }
    }
}

/// The block's fused attention (burn's attention op) gives what burn-nn's separate passes
/// give, with and without the text encoder's causal mask, and under autodiff the same
/// gradients for every weight: training on the fused block learns what the unfused one did.
#[test]
fn fused_attention_matches_the_unfused_module_forward_and_backward() {
    use endotwin::model::block::BlockConfig;
    let _rng = crate::common::device_rng();
    let close = |a: Tensor<3>, b: Tensor<3>, what: &str| {
        let (a, b) = (
            a.into_data().try_to_vec::<f32>().unwrap(),
            b.into_data().try_to_vec::<f32>().unwrap(),
        );
        let worst = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max);
        assert!(worst < 1e-4, "{what}: differs by {worst}");
    };
    let device = Device::flex().autodiff();
    device.seed(3);
    let block = BlockConfig::new(32, 4, 64).init(&device);
    let x = Tensor::<3>::random([2, 7, 32], Distribution::Normal(0.0, 1.0), &device).require_grad();
    let causal = Tensor::<2, burn::tensor::Bool>::tril_mask([7, 7], 0, &device)
        .unsqueeze::<3>()
        .expand([2, 7, 7]);
    for mask in [None, Some(causal)] {
        let fused = block.attend(x.clone(), mask.clone());
        let unfused = block.attention_unfused(x.clone(), mask.clone());
        close(fused.clone(), unfused.clone(), "forward");
        let g_fused = fused.powf_scalar(2.0).sum().backward();
        let g_unfused = unfused.powf_scalar(2.0).sum().backward();
        for (name, w) in [
            ("query", &block.attn.query.weight),
            ("value", &block.attn.value.weight),
            ("output", &block.attn.output.weight),
        ] {
            let a = w.grad(&g_fused).unwrap();
            let b = w.grad(&g_unfused).unwrap();
            close(a.unsqueeze(), b.unsqueeze(), name);
        }
        let (a, b) = (x.grad(&g_fused).unwrap(), x.grad(&g_unfused).unwrap());
        close(a, b, "input");
    }
    // Inference (no autodiff) takes the fused path too and agrees.
    let plain = block.valid();
    let x = x.inner();
    close(
        plain.attend(x.clone(), None),
        plain.attention_unfused(x, None),
        "inference",
    );
}
