//! Hugging Face CLIP import: numerical parity with PyTorch/transformers on a committed tiny
//! random-weight checkpoint (see tests/fixtures/clip_parity/make_fixture.py), and clear
//! refusals of files that do not fit.

use burn::tensor::{Device, Int, Tensor, TensorData};
use endotwin::model::clip::ClipConfig;
use endotwin::model::hf_clip::{HfClipError, load_hf_clip, read_hf_config};
use safetensors::SafeTensors;
use std::path::{Path, PathBuf};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/clip_parity")
}

fn floats(file: &SafeTensors<'_>, name: &str) -> (Vec<f32>, Vec<usize>) {
    let view = file.tensor(name).unwrap();
    let data = view
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    (data, view.shape().to_vec())
}

fn max_abs_diff(ours: Tensor<2>, reference: &[f32]) -> f32 {
    let ours = ours.into_data().try_to_vec::<f32>().unwrap();
    assert_eq!(ours.len(), reference.len());
    ours.iter()
        .zip(reference)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max)
}

#[test]
fn imported_clip_matches_pytorch_within_1e_4() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    let (model, config) =
        load_hf_clip(&fixture().join("model.safetensors"), None, &device).unwrap();
    // config.json beside the weights was read: 4 heads, not the 64-channel rule's 1.
    assert_eq!(config.vision.vit().expect("a ViT tower").heads, 4);
    assert_eq!(config.text.vocab_size, 99);

    let bytes = std::fs::read(fixture().join("reference.safetensors")).unwrap();
    let reference = SafeTensors::deserialize(&bytes).unwrap();
    let (pixels, shape) = floats(&reference, "pixel_values");
    let images: Tensor<4> = Tensor::from_data(
        TensorData::new(pixels, [shape[0], shape[1], shape[2], shape[3]]),
        &device,
    );
    let ids_view = reference.tensor("input_ids").unwrap();
    let ids: Vec<i64> = ids_view
        .data()
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let ids_shape = ids_view.shape().to_vec();
    let tokens: Tensor<2, Int> =
        Tensor::from_data(TensorData::new(ids, [ids_shape[0], ids_shape[1]]), &device);

    let image_features = model.vit().expect("a ViT tower").forward(images.clone());
    let text_features = model.text.forward(tokens.clone());
    let logits = model.logits(model.encode_images(images), model.encode_texts(tokens));

    for (name, ours) in [
        ("image_features", image_features),
        ("text_features", text_features),
        ("logits_per_image", logits),
    ] {
        let (want, _) = floats(&reference, name);
        let diff = max_abs_diff(ours, &want);
        eprintln!("{name}: max abs difference to PyTorch {diff:e}");
        assert!(diff <= 1e-4, "{name}: max abs difference {diff} > 1e-4");
    }
}

fn copy_fixture(dir: &Path) -> PathBuf {
    for name in ["model.safetensors", "config.json"] {
        std::fs::copy(fixture().join(name), dir.join(name)).unwrap();
    }
    dir.join("model.safetensors")
}

#[test]
fn a_truncated_file_is_refused_without_panic() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let weights = copy_fixture(dir.path());
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    let err = load_hf_clip(&weights, None, &Device::flex()).unwrap_err();
    assert!(matches!(err, HfClipError::NotSafetensors { .. }), "{err}");
    assert!(err.to_string().contains("truncated"), "{err}");
}

#[test]
fn another_architecture_is_named_as_such() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let weights = dir.path().join("bert.safetensors");
    let data = vec![0u8; 4 * 8];
    let view =
        safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![2, 4], &data).unwrap();
    safetensors::serialize_to_file(
        [("encoder.layer.0.attention.self.query.weight", view)],
        None,
        &weights,
    )
    .unwrap();
    let err = load_hf_clip(&weights, None, &Device::flex()).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, HfClipError::NotClip { .. }), "{message}");
    assert!(message.contains("encoder.layer.0.attention"), "{message}");
}

#[test]
fn a_config_that_does_not_fit_names_the_first_tensor_and_both_shapes() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let weights = copy_fixture(dir.path());
    let config_path = dir.path().join("config.json");

    // Wider vision tower than the file holds.
    let text = std::fs::read_to_string(&config_path).unwrap();
    let wider = text.replacen(
        "\"hidden_size\": 32,\n    \"image_size\"",
        "\"hidden_size\": 64,\n    \"image_size\"",
        1,
    );
    assert_ne!(wider, text, "the fixture's config.json changed layout");
    std::fs::write(&config_path, wider).unwrap();
    let err = load_hf_clip(&weights, None, &Device::flex()).unwrap_err();
    match &err {
        HfClipError::Shape {
            tensor,
            expected,
            found,
            ..
        } => {
            assert_eq!(tensor, "vision_model.embeddings.patch_embedding.weight");
            assert_eq!(expected, &vec![64, 3, 8, 8]);
            assert_eq!(found, &vec![32, 3, 8, 8]);
        }
        other => panic!("expected a shape error, got {other}"),
    }
    assert!(err.to_string().contains("[32, 3, 8, 8]"), "{err}");

    // Deeper text tower than the file holds.
    let mut config: ClipConfig = read_hf_config(&fixture().join("config.json")).unwrap();
    config.text.depth = 3;
    let err = load_hf_clip(&weights, Some(config), &Device::flex()).unwrap_err();
    match &err {
        HfClipError::Missing { tensor, .. } => {
            assert_eq!(tensor, "text_model.encoder.layers.2.layer_norm1.weight")
        }
        other => panic!("expected a missing-tensor error, got {other}"),
    }
}

#[test]
fn without_config_json_the_shapes_give_the_geometry() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let weights = dir.path().join("model.safetensors");
    std::fs::copy(fixture().join("model.safetensors"), &weights).unwrap();
    let (model, config) = load_hf_clip(&weights, None, &Device::flex()).unwrap();
    let vision = config.vision.vit().expect("a ViT tower");
    assert_eq!(
        (vision.image_size, vision.patch_size, vision.depth),
        (32, 8, 2)
    );
    assert_eq!((config.text.context, config.text.output_dim()), (16, 24));
    let scale = model.scale().into_data().try_to_vec::<f32>().unwrap()[0];
    assert!((scale - 2.3f32.exp()).abs() < 1e-4, "logit scale {scale}");
}
