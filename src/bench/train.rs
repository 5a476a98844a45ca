//! `endotwin bench train`: one optimizer step of an image encoder (forward, backward, AdamW
//! update) at a batch, on each backend; the PyTorch reference script does the same step with
//! the same architecture, loss and optimizer. Every parameter is trained (the shipped twin
//! encoder's recipe freezes its backbone; the figure here is the full fine-tuning step).
//! Figures, not tests.

use super::{EncoderOptions, EncoderRow, devices, model_config, peak_rss_mib, reset_peak_rss};
use crate::model::twin_encoder::TwinEncoderConfig;
use burn::module::Module;
use burn::optim::{AdamWConfig, GradientsParams};
use burn::tensor::{Device, Distribution, Tensor};

/// The step timed: `loss = mean((encoder(x) - target)^2)` on random images and targets, then
/// `loss.backward()` and one AdamW update (lr 1e-4, weight decay 0.05) of every parameter.
/// The loss is deliberately trivial so the figure is the encoder's forward and backward.
pub fn train(options: &EncoderOptions, mut report: impl FnMut(&EncoderRow)) -> Vec<EncoderRow> {
    let mut rows = Vec::new();
    for (backend, device) in devices(options.cpu, options.gpu) {
        let device = device.autodiff();
        for &model in &options.models {
            let Some(config) = model_config(model) else {
                continue;
            };
            for &batch in &options.batches {
                reset_peak_rss();
                device.seed(0);
                let (runs, ms) = match &config {
                    TwinEncoderConfig::Vit(c) => {
                        step_time(options, &config, batch, &device, c.init(&device), |m, x| {
                            m.forward(x)
                        })
                    }
                    TwinEncoderConfig::Backbone(c) => {
                        step_time(options, &config, batch, &device, c.init(&device), |m, x| {
                            m.forward(x)
                        })
                    }
                };
                let row = EncoderRow {
                    backend: backend.clone(),
                    model: model.to_string(),
                    batch,
                    runs,
                    ms,
                    peak_rss_mib: peak_rss_mib(),
                };
                report(&row);
                rows.push(row);
            }
        }
    }
    rows
}

/// Times the step on `encoder`: (runs, ms per step).
fn step_time<M: Module + Clone>(
    options: &EncoderOptions,
    config: &TwinEncoderConfig,
    batch: usize,
    device: &Device,
    mut encoder: M,
    forward: impl Fn(&M, Tensor<4>) -> Tensor<2>,
) -> (usize, f64) {
    let mut optimizer = AdamWConfig::new().with_weight_decay(0.05).init();
    let size = config.image_size();
    let x = Tensor::<4>::random(
        [batch, 3, size, size],
        Distribution::Normal(0.0, 1.0),
        device,
    );
    let target = Tensor::<2>::random(
        [batch, config.output_dim()],
        Distribution::Normal(0.0, 1.0),
        device,
    );
    let step = || {
        let loss = (forward(&encoder, x.clone()) - target.clone())
            .powf_scalar(2.0)
            .mean();
        let grads = GradientsParams::from_grads(loss.backward(), &encoder);
        encoder = optimizer.step(1e-4, encoder.clone(), grads);
        // Reading the loss back waits for the device: the figure is end to end.
        let _ = loss.into_scalar::<f32>();
    };
    options.time(step)
}
