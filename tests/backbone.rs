//! The ImageNet-pretrained MobileNetV2 in burn: its outputs held to PyTorch's on real frames,
//! wgpu to the CPU, and the loader refusing files that are not its weights, by name.

use crate::common::{pretrained, realdata};
use endotwin::compute::{self, BackendPref};
use endotwin::model::mobilenet::{MobileNetV2Config, load_mobilenet_v2};
use endotwin::model::preprocess::imagenet_tensor;
use std::path::Path;

const WEIGHTS: &str = "mobilenetv2_imagenet_features.safetensors";

#[derive(serde::Deserialize)]
struct Reference {
    frames: Vec<u32>,
    window: [u32; 3],
    taps: Vec<usize>,
    pooled: Vec<Vec<f32>>,
}

fn reference() -> Reference {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mobilenet_reference.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The reference windows of the real frames, decoded by EndoTwin (the TIFF quirk included).
fn windows(cvc: &Path, r: &Reference) -> Vec<image::RgbImage> {
    let [x, y, side] = r.window;
    r.frames
        .iter()
        .map(|n| {
            let d = endotwin::data::images::decode_file(&cvc.join(format!("Original/{n}.tif")))
                .unwrap();
            d.image.crop_imm(x, y, side, side).to_rgb8()
        })
        .collect()
}

#[test]
fn mobilenet_v2_in_burn_matches_pytorch_on_real_frames() {
    let (Some(weights), Some(cvc)) = (pretrained(WEIGHTS), realdata("cvc-clinicdb-21-29")) else {
        return;
    };
    let r = reference();
    let cpu = compute::select(BackendPref::Cpu).unwrap();
    let config = MobileNetV2Config::new().with_taps(r.taps.clone());
    let model = load_mobilenet_v2(&weights, &config, &cpu.device).unwrap();
    let x = imagenet_tensor(&windows(&cvc, &r), &cpu.device);
    let ours = model
        .forward_pooled(x)
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    let dim = config.pooled_dim();
    assert_eq!(ours.len(), r.frames.len() * dim);
    let mut worst = 0.0f32;
    for (i, theirs) in r.pooled.iter().enumerate() {
        assert_eq!(theirs.len(), dim);
        for (a, b) in ours[i * dim..(i + 1) * dim].iter().zip(theirs) {
            worst = worst.max((a - b).abs());
        }
    }
    assert!(worst <= 1e-4, "largest difference to PyTorch {worst}");
    // Not all zeros or constant: the features tell the frames apart.
    let spread: f32 = ours[..dim]
        .iter()
        .zip(&ours[dim..2 * dim])
        .map(|(a, b)| (a - b).abs())
        .sum();
    assert!(spread > 1.0, "frames give the same features ({spread})");
}

#[test]
fn mobilenet_v2_on_wgpu_equals_the_cpu() {
    let Some(weights) = pretrained(WEIGHTS) else {
        return;
    };
    let gpu = match compute::select(BackendPref::Gpu) {
        Ok(c) => c,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipping: {e}");
            return;
        }
        Err(e) => panic!("CI must have a wgpu adapter (mesa-vulkan-drivers): {e}"),
    };
    let cpu = compute::select(BackendPref::Cpu).unwrap();
    // A small input and the first three blocks keep lavapipe's kernel compiles short; every
    // kind of layer still runs (stem, expansion, depthwise at strides 1 and 2, projection,
    // residual).
    let img = image::RgbImage::from_fn(64, 64, |x, y| {
        image::Rgb([(x * 4) as u8, (y * 4) as u8, ((x + y) * 2) as u8])
    });
    let config = MobileNetV2Config::new().with_taps(vec![1, 3]);
    let run = |device| {
        let m = load_mobilenet_v2(&weights, &config, device).unwrap();
        m.forward_pooled(imagenet_tensor(std::slice::from_ref(&img), device))
            .into_data()
            .try_to_vec::<f32>()
            .unwrap()
    };
    let (a, b) = (run(&gpu.device), run(&cpu.device));
    let worst = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max);
    assert!(worst <= 1e-4, "wgpu and CPU differ by {worst}");
}

/// Writes a safetensors file with the given (name, shape) F32 tensors of zeros.
fn safetensors(path: &Path, tensors: &[(String, Vec<usize>)]) {
    let data: Vec<Vec<u8>> = tensors
        .iter()
        .map(|(_, s)| vec![0u8; 4 * s.iter().product::<usize>()])
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .zip(&data)
        .map(|((n, s), d)| {
            (
                n.clone(),
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), d)
                    .unwrap(),
            )
        })
        .collect();
    safetensors::serialize_to_file(views, None, path).unwrap();
}

#[test]
fn the_backbone_loader_names_the_tensor_that_does_not_fit() {
    let dir = tempfile::tempdir().unwrap();
    let cpu = compute::select(BackendPref::Cpu).unwrap();
    let config = MobileNetV2Config::new();
    // The stem with the wrong shape (a 5x5 kernel).
    let path = dir.path().join("wrong-shape.safetensors");
    safetensors(&path, &[("features.0.0.weight".into(), vec![32, 3, 5, 5])]);
    let err = load_mobilenet_v2(&path, &config, &cpu.device)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("features.0.0.weight")
            && err.contains("[32, 3, 5, 5]")
            && err.contains("[32, 3, 3, 3]"),
        "{err}"
    );
    // Today's torchvision nesting (features.1.conv.0.0) instead of the flat layout.
    let path = dir.path().join("nested.safetensors");
    let mut tensors = vec![("features.0.0.weight".to_string(), vec![32, 3, 3, 3])];
    for p in ["weight", "bias", "running_mean", "running_var"] {
        tensors.push((format!("features.0.1.{p}"), vec![32]));
    }
    tensors.push(("features.1.conv.0.0.weight".into(), vec![32, 1, 3, 3]));
    safetensors(&path, &tensors);
    let err = load_mobilenet_v2(&path, &config, &cpu.device)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no tensor `features.1.conv.0.weight`"),
        "{err}"
    );
    // Not a safetensors file at all.
    let path = dir.path().join("text.safetensors");
    std::fs::write(&path, "not weights").unwrap();
    let err = load_mobilenet_v2(&path, &config, &cpu.device)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("text.safetensors") && err.contains("not a readable safetensors"),
        "{err}"
    );
}

/// Mean share of red, green and blue over the whole image.
fn chromaticity(image: &image::RgbImage) -> [f64; 3] {
    let mut sum = [0f64; 3];
    for p in image.pixels() {
        for c in 0..3 {
            sum[c] += p.0[c] as f64;
        }
    }
    let total: f64 = sum.iter().sum::<f64>().max(1.0);
    sum.map(|s| s / total)
}

#[test]
fn the_twin_backbones_augmentation_keeps_a_polyps_colour_within_its_bounds() {
    use endotwin::plumbing::Rng;
    use endotwin::train::augment::Augment;
    use endotwin::train::twin_backbone::mild_colour;
    // A reddish polyp-coloured patch with some texture.
    let polyp = image::RgbImage::from_fn(96, 96, |x, y| {
        let t = ((x * 7 + y * 3) % 16) as u8;
        image::Rgb([190 + t, 90 + t / 2, 80 + t / 2])
    });
    let before = chromaticity(&polyp);
    let mut rng = Rng::new(5);
    let mild = mild_colour(64, 0.1);
    let mut worst = 0.0f64;
    for _ in 0..200 {
        let (copy, _) = mild.apply(&polyp, None, &mut rng);
        let after = chromaticity(&copy);
        for c in 0..3 {
            worst = worst.max((after[c] - before[c]).abs());
        }
        // Red stays the strongest channel, blue the weakest: the hue is kept.
        assert!(
            after[0] > after[1] && after[1] >= after[2] - 0.01,
            "{after:?}"
        );
    }
    assert!(worst <= 0.05, "a copy's colour moved by {worst}");
    // The SSCD preset (grey-scale, strong jitter) does move it: the bound means something.
    let strong = Augment::sscd(64);
    let moved = (0..200)
        .map(|_| chromaticity(&strong.apply(&polyp, None, &mut rng).0))
        .any(|after| (0..3).any(|c| (after[c] - before[c]).abs() > 0.05));
    assert!(moved, "the strong augmentation never left the bounds");
}
