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
        for (s, v) in sum.iter_mut().zip(p.0) {
            *s += v as f64;
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
        for (a, b) in after.iter().zip(&before) {
            worst = worst.max((a - b).abs());
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

/// The twin rows of `endotwin eval real` on the CVC-ClinicDB sequences alone, with the models
/// in `models`: method -> mean uAP of 1v1 and 2v2.
#[cfg(unix)]
fn real_twins(cvc: &Path, models: &Path, seed: u64) -> Vec<(String, f64)> {
    let data = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(cvc, data.path().join("cvc-clinicdb-21-29")).unwrap();
    let cpu = compute::select(BackendPref::Cpu).unwrap();
    let rows = endotwin::eval::real::TwinRows {
        draws: 1,
        ..Default::default()
    };
    let e = endotwin::eval::real::run(data.path(), models, &rows, seed, &cpu.device).unwrap();
    assert_eq!(e.twin_polyps, 9);
    e.twins
        .iter()
        .map(|t| (t.method.clone(), t.uap_mean))
        .collect()
}

fn row(rows: &[(String, f64)], method: &str) -> f64 {
    rows.iter()
        .find(|(m, _)| m == method)
        .unwrap_or_else(|| panic!("no row `{method}` in {rows:?}"))
        .1
}

/// Mean uAP (1v1, 2v2) over four draws that the shipped twin encoder must reach on the real
/// sequences: measured 0.880 (seeds 1-4: 0.876, 0.819, 0.944, 0.882) against the colour
/// histogram's 0.686 (0.803, 0.681, 0.556, 0.704).
const FLOOR: f64 = 0.78;

/// The shipped twin encoder re-identifies real polyps (CVC-ClinicDB sequences 21-29, the
/// frames it was chosen on, never trained on) above the floor, ahead of the colour histogram;
/// the same architecture untrained, saved with the shipped card's config, falls below it.
#[cfg(unix)]
#[test]
fn the_shipped_twin_encoder_re_identifies_real_polyps_and_its_untrained_form_does_not() {
    let Some(cvc) = realdata("cvc-clinicdb-21-29") else {
        return;
    };
    let _lock = crate::common::device_rng();
    let shipped = endotwin::default_models_dir();
    // One draw of 4 frames a sequence moves every figure by 0.1-0.2 (9 polyps): the floor
    // holds the mean of four draws.
    let (mut learned, mut hist) = (Vec::new(), Vec::new());
    for seed in 1..=4 {
        let rows = real_twins(&cvc, &shipped, seed);
        learned.push(row(&rows, "mean of views, float"));
        hist.push(row(&rows, "colour histogram 8x8x8 (baseline)"));
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    assert!(
        mean(&learned) >= FLOOR && mean(&learned) >= mean(&hist) + 0.05,
        "shipped twin encoder: uAP {learned:?}, colour histogram {hist:?}, floor {FLOOR}"
    );
    // The same architecture with random weights.
    let cpu = compute::select(BackendPref::Cpu).unwrap();
    let models = endotwin::twins::TwinModels::load(&shipped, &cpu.device).unwrap();
    let untrained = models.untrained(3);
    let dir = tempfile::tempdir().unwrap();
    let endotwin::model::twin_encoder::TwinEncoder::Backbone(b) = &untrained.image else {
        panic!("the shipped twin encoder is not the backbone encoder");
    };
    let mut card = untrained.image_card.clone();
    card.name = "twin-image".into();
    endotwin::model::weights::save(b, &card, dir.path()).unwrap();
    let theirs: Vec<f64> = (1..=4)
        .map(|seed| row(&real_twins(&cvc, dir.path(), seed), "mean of views, float"))
        .collect();
    eprintln!("untrained: {theirs:?}");
    assert!(
        mean(&theirs) < FLOOR,
        "the untrained encoder reaches {theirs:?}, the floor is {FLOOR}"
    );
}
