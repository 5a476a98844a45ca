//! `endotwin bench train`: one optimizer step of an image encoder (forward, backward, AdamW
//! update) at a batch, on each backend; the PyTorch reference script does the same step with
//! the same architecture, loss and optimizer. Figures, not tests.

use super::{devices, model_config, peak_rss_mib, reset_peak_rss};
use burn::optim::{AdamWConfig, GradientsParams};
use burn::tensor::{Distribution, Tensor};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct TrainRow {
    pub backend: String,
    pub model: &'static str,
    pub batch: usize,
    pub runs: usize,
    /// Wall time of one whole step: forward, loss, backward, optimizer update, loss read back.
    pub ms: f64,
    pub images_per_s: f64,
    pub peak_rss_mib: Option<f64>,
}

pub struct TrainOptions {
    pub batches: Vec<usize>,
    pub models: Vec<&'static str>,
    pub min_runs: usize,
    pub min_time: Duration,
    pub gpu: bool,
}

/// The step timed: `loss = mean((encoder(x) - target)^2)` on random images and targets, then
/// `loss.backward()` and one AdamW update (lr 1e-4, weight decay 0.05) of every parameter.
/// The loss is deliberately trivial so the figure is the encoder's forward and backward.
pub fn train(options: &TrainOptions, mut report: impl FnMut(&TrainRow)) -> Vec<TrainRow> {
    let mut rows = Vec::new();
    for (backend, device) in devices(options.gpu) {
        let device = device.autodiff();
        for &model in &options.models {
            let Some(config) = model_config(model) else {
                continue;
            };
            for &batch in &options.batches {
                reset_peak_rss();
                device.seed(0);
                let mut encoder = config.init(&device);
                let mut optimizer = AdamWConfig::new().with_weight_decay(0.05).init();
                let size = config.image_size;
                let x = Tensor::<4>::random(
                    [batch, 3, size, size],
                    Distribution::Normal(0.0, 1.0),
                    &device,
                );
                let target = Tensor::<2>::random(
                    [batch, config.output_dim()],
                    Distribution::Normal(0.0, 1.0),
                    &device,
                );
                let mut step = || {
                    let loss = (encoder.forward(x.clone()) - target.clone())
                        .powf_scalar(2.0)
                        .mean();
                    let grads = GradientsParams::from_grads(loss.backward(), &encoder);
                    encoder = optimizer.step(1e-4, encoder.clone(), grads);
                    // Reading the loss back waits for the device: the figure is end to end.
                    let _ = loss.into_scalar::<f32>();
                };
                step(); // warm-up: buffers, optimizer state, kernels
                let start = Instant::now();
                let mut runs = 0;
                while runs < options.min_runs || start.elapsed() < options.min_time {
                    step();
                    runs += 1;
                }
                let ms = start.elapsed().as_secs_f64() * 1000.0 / runs as f64;
                let row = TrainRow {
                    backend: backend.clone(),
                    model,
                    batch,
                    runs,
                    ms,
                    images_per_s: batch as f64 * 1000.0 / ms,
                    peak_rss_mib: peak_rss_mib(),
                };
                report(&row);
                rows.push(row);
            }
        }
    }
    rows
}
