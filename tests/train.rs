//! Training loops: a resumed run ends where an uninterrupted one does; bad data and
//! cancellation are reported, not panicked on. Tiny configs on burn-flex.

use burn::tensor::Device;
use endotwin::model::vit::{Positions, VitConfig};
use endotwin::plumbing::Rng;
use endotwin::train::image_encoder::{
    ImageEncoderTrainingConfig, Sample, TwinImageModel, encoder_of, to_tensor, train,
};
use endotwin::train::{Checkpoint, EpochReport, TrainError, TrainEvents};
use image::{GrayImage, Luma, Rgb, RgbImage};
use std::path::PathBuf;

fn config(epochs: usize) -> ImageEncoderTrainingConfig {
    let encoder = VitConfig::new(32, 8, 32, 1, 2)
        .with_positions(Positions::SinCos)
        .with_projection(Some(16));
    ImageEncoderTrainingConfig::new(encoder)
        .with_epochs(epochs)
        .with_batch(4)
        .with_decoder_width(32)
        .with_seed(3)
}

/// Blobs of different colours on a textured background, the blob as the "polyp" mask.
fn samples(n: usize) -> Vec<Sample> {
    let mut rng = Rng::new(42);
    (0..n)
        .map(|_| {
            let colour = [
                rng.below(255) as u8,
                rng.below(255) as u8,
                rng.below(255) as u8,
            ];
            let (cx, cy, r) = (
                rng.range(10.0, 30.0),
                rng.range(10.0, 30.0),
                rng.range(4.0, 10.0),
            );
            let mut image = RgbImage::new(40, 40);
            let mut mask = GrayImage::new(40, 40);
            for (x, y, p) in image.enumerate_pixels_mut() {
                let inside = ((x as f32 - cx).powi(2) + (y as f32 - cy).powi(2)).sqrt() < r;
                *p = if inside {
                    mask.put_pixel(x, y, Luma([255]));
                    Rgb(colour)
                } else {
                    let v = 120 + ((x * 7 + y * 13) % 40) as u8;
                    Rgb([v, v / 2, v / 3])
                };
            }
            Sample {
                image,
                mask: Some(mask),
                polyp: None,
            }
        })
        .collect()
}

/// Checkpoints every epoch into `dir`; stops (as a crash would) after `stop_after` epochs.
struct Recorder {
    dir: PathBuf,
    config: ImageEncoderTrainingConfig,
    reports: Vec<EpochReport>,
    stop_after: Option<usize>,
}

impl TrainEvents<TwinImageModel> for Recorder {
    fn step(&mut self, _: usize, _: usize, _: usize, _: f64) {}

    fn epoch(
        &mut self,
        report: &EpochReport,
        checkpoint: &Checkpoint<TwinImageModel>,
    ) -> Result<(), TrainError> {
        checkpoint.save(&self.dir, &self.config)?;
        self.reports.push(report.clone());
        if Some(report.epoch) == self.stop_after {
            return Err(TrainError::Cancelled {
                epoch: report.epoch,
            });
        }
        Ok(())
    }
}

fn embeddings(model: &TwinImageModel, data: &[Sample]) -> Vec<f32> {
    let device = Device::flex();
    let images: Vec<RgbImage> = data
        .iter()
        .map(|s| image::imageops::resize(&s.image, 32, 32, image::imageops::FilterType::Triangle))
        .collect();
    let encoder = encoder_of(model).to_device(&device);
    encoder
        .forward(to_tensor(&images, &device))
        .into_data()
        .try_to_vec::<f32>()
        .unwrap()
}

use burn::module::Module;

#[test]
fn a_resumed_run_ends_where_an_uninterrupted_one_does() {
    let _rng = crate::common::device_rng();
    let data = samples(8);
    let device = Device::flex().autodiff();
    device.seed(3);
    let initial = config(2).init(&device);

    let straight_dir = tempfile::tempdir().unwrap();
    let mut straight = Recorder {
        dir: straight_dir.path().into(),
        config: config(2),
        reports: vec![],
        stop_after: None,
    };
    // Both runs start from one model: a fresh init seeds the device's random source, which
    // other tests of this binary draw from too, so two inits need not agree; what is tested
    // here is the resume, not the seeding.
    let start = || {
        let cfg = config(2);
        Some(Checkpoint {
            model: initial.clone(),
            optimizer: burn::optim::AdamWConfig::new()
                .with_weight_decay(cfg.weight_decay as f32)
                .init(),
            epoch: 0,
        })
    };
    let full = train(&config(2), &data, &device, start(), &mut straight).unwrap();
    assert_eq!(straight.reports.len(), 2);
    for r in &straight.reports {
        for name in ["loss", "contrastive", "entropy", "reconstruction"] {
            assert!(r.get(name).unwrap().is_finite(), "{name} in {r:?}");
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let mut first = Recorder {
        dir: dir.path().into(),
        config: config(2),
        reports: vec![],
        stop_after: Some(1),
    };
    let err = train(&config(2), &data, &device, start(), &mut first)
        .err()
        .unwrap();
    assert!(matches!(err, TrainError::Cancelled { .. }));

    let cfg = config(2);
    let resumed_from = Checkpoint::load(
        dir.path(),
        &cfg,
        cfg.init(&device),
        burn::optim::AdamWConfig::new()
            .with_weight_decay(cfg.weight_decay as f32)
            .init(),
    )
    .unwrap();
    assert_eq!(resumed_from.epoch, 1);
    let mut second = Recorder {
        dir: dir.path().into(),
        config: config(2),
        reports: vec![],
        stop_after: None,
    };
    let resumed = train(&cfg, &data, &device, Some(resumed_from), &mut second).unwrap();
    assert_eq!(second.reports.len(), 1, "only the missing epoch runs");

    let a = embeddings(&full, &data);
    let b = embeddings(&resumed, &data);
    let diff = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max);
    assert!(diff < 1e-4, "resumed run differs by {diff}");
}

#[test]
fn resuming_with_other_settings_is_refused() {
    let _rng = crate::common::device_rng();
    let data = samples(4);
    let device = Device::flex().autodiff();
    let dir = tempfile::tempdir().unwrap();
    let mut rec = Recorder {
        dir: dir.path().into(),
        config: config(1),
        reports: vec![],
        stop_after: None,
    };
    train(&config(1), &data, &device, None, &mut rec).unwrap();
    let other = config(1).with_lr(1e-2);
    let err = Checkpoint::load(
        dir.path(),
        &other,
        other.init(&device),
        burn::optim::AdamWConfig::new().init(),
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("other settings"), "{err}");
}

#[test]
fn one_image_is_not_enough_to_train() {
    let _rng = crate::common::device_rng();
    let device = Device::flex().autodiff();
    let dir = tempfile::tempdir().unwrap();
    let mut rec = Recorder {
        dir: dir.path().into(),
        config: config(1),
        reports: vec![],
        stop_after: None,
    };
    let err = train(&config(1), &samples(1), &device, None, &mut rec)
        .err()
        .unwrap();
    assert!(err.to_string().contains("at least 2 images"), "{err}");
}

#[test]
fn views_of_one_polyp_can_be_each_others_positives() {
    let _rng = crate::common::device_rng();
    // Four "polyps" of two views each.
    let mut data = samples(8);
    for (i, s) in data.iter_mut().enumerate() {
        s.polyp = Some((i / 2) as i64);
    }
    let device = Device::flex().autodiff();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(1).with_view_positives(true);
    let mut rec = Recorder {
        dir: dir.path().into(),
        config: cfg.clone(),
        reports: vec![],
        stop_after: None,
    };
    train(&cfg, &data, &device, None, &mut rec).unwrap();
    let loss = rec.reports[0].get("contrastive").unwrap();
    assert!(loss.is_finite() && loss > 0.0, "{loss}");
}

#[test]
fn the_residual_scene_encoders_projection_gets_a_gradient_and_learns() {
    let _rng = crate::common::device_rng();
    use burn::optim::{AdamWConfig, GradientsParams};
    use burn::tensor::{Tensor, TensorData};
    use endotwin::model::scene::SceneEncoderConfig;
    // The device's random source is shared: no other training test runs meanwhile.
    let device = Device::flex().autodiff();
    device.seed(5);
    let mut scene = SceneEncoderConfig::new(8)
        .with_heads(2)
        .with_residual(true)
        .init(&device);
    let views: Vec<f32> = (0..2 * 3 * 8)
        .map(|i| ((i * 37 % 11) as f32 - 5.0) / 7.0)
        .collect();
    let target: Vec<f32> = (0..2 * 8)
        .map(|i| ((i * 13 % 7) as f32 - 3.0) / 3.0)
        .collect();
    let x = Tensor::<3>::from_data(TensorData::new(views, [2, 3, 8]), &device);
    let t = Tensor::<2>::from_data(TensorData::new(target, [2, 8]), &device);
    let before = scene
        .forward(x.clone(), None)
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    let mut optimizer = AdamWConfig::new().init();
    for _ in 0..5 {
        let loss = (scene.forward(x.clone(), None) * t.clone()).sum().neg();
        let grads = GradientsParams::from_grads(loss.backward(), &scene);
        scene = optimizer.step(1e-2, scene, grads);
    }
    let after = scene
        .forward(x, None)
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    let moved = before
        .iter()
        .zip(&after)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    assert!(
        moved > 1e-3,
        "the scene output did not move from the mean: {moved}"
    );
}
