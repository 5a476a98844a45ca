//! `endotwin bench encode`: the image encoders (CLIP ViT-B/32, the shipped twin encoder on
//! its ImageNet MobileNetV2 backbone, the earlier ViT `twin-small`) forward on each backend at
//! batch 1 and 32: images/s and the process's peak resident memory. `bench train` (one
//! optimizer step), `bench parity` (the shipped models on the GPU against the CPU) and `bench
//! retrieve` (twin search) live beside it. Figures, not tests.

pub mod library;
pub mod parity;
pub mod retrieve;
pub mod train;

pub use parity::{ParityRow, parity};
pub use retrieve::{RetrieveOptions, RetrieveRow, retrieve};
pub use train::train;

use crate::compute::{self, BackendPref};
use crate::model::mobilenet::MobileNetV2Config;
use crate::model::twin_encoder::{BackboneTwinConfig, TwinEncoderConfig};
use crate::model::vit::VitConfig;
use burn::tensor::{Device, Distribution, Tensor};
use std::time::{Duration, Instant};

/// One row of `bench encode` (`ms`: one forward of the batch) or `bench train` (`ms`: one
/// optimizer step), or of the PyTorch reference's output.
#[derive(Debug, Clone)]
pub struct EncoderRow {
    pub backend: String,
    pub model: String,
    pub batch: usize,
    pub runs: usize,
    pub ms: f64,
    /// Peak resident set of the process while this row ran (Linux), MiB.
    pub peak_rss_mib: Option<f64>,
}

impl EncoderRow {
    pub fn images_per_s(&self) -> f64 {
        self.batch as f64 * 1000.0 / self.ms
    }
}

pub struct EncoderOptions {
    pub batches: Vec<usize>,
    /// Each row runs at least this many timed forwards (or steps)...
    pub min_runs: usize,
    /// ...and at least this long.
    pub min_time: Duration,
    /// Time burn-wgpu too, on any adapter (software ones included).
    pub gpu: bool,
    /// Time burn-flex (off for GPU-only runs on a many-core machine).
    pub cpu: bool,
    pub models: Vec<&'static str>,
}

impl EncoderOptions {
    /// Runs `f` once to warm up (kernels compile, buffers and optimizer state are made), then
    /// at least `min_runs` times and `min_time` long: (runs, ms per run).
    pub(crate) fn time(&self, mut f: impl FnMut()) -> (usize, f64) {
        f();
        let start = Instant::now();
        let mut runs = 0;
        while runs < self.min_runs || start.elapsed() < self.min_time {
            f();
            runs += 1;
        }
        (runs, start.elapsed().as_secs_f64() * 1000.0 / runs as f64)
    }
}

/// `twin-backbone` is the shipped twin encoder's architecture (`models/twin-image.json`):
/// MobileNetV2 with every BatchNorm folded, five tapped layers pooled, a linear projection to
/// 256-d, 224 px.
pub const MODELS: [&str; 3] = ["vit-b32", "twin-backbone", "twin-small"];

pub fn model_config(name: &str) -> Option<TwinEncoderConfig> {
    match name {
        "vit-b32" => Some(TwinEncoderConfig::Vit(VitConfig::clip_b32())),
        "twin-small" => Some(TwinEncoderConfig::Vit(VitConfig::twin_small())),
        "twin-backbone" => Some(TwinEncoderConfig::Backbone(
            BackboneTwinConfig::new(MobileNetV2Config::new()).with_projection(Some(256)),
        )),
        _ => None,
    }
}

/// The backends this build and machine offer, named for the table.
pub fn devices(cpu: bool, gpu: bool) -> Vec<(String, Device)> {
    let mut devices: Vec<(String, Device)> = Vec::new();
    if cpu {
        devices.push(("burn-flex".into(), Device::flex()));
        #[cfg(feature = "bench-ndarray")]
        #[allow(deprecated)]
        devices.push(("burn-ndarray".into(), Device::ndarray()));
    }
    if gpu && let Ok(c) = compute::select(BackendPref::Gpu) {
        devices.push((format!("burn-wgpu ({})", c.adapter), c.device));
    }
    devices
}

/// Runs `report` after each row so a long run shows progress.
pub fn encode(options: &EncoderOptions, mut report: impl FnMut(&EncoderRow)) -> Vec<EncoderRow> {
    let mut rows = Vec::new();
    for (backend, device) in devices(options.cpu, options.gpu) {
        for &model in &options.models {
            let Some(config) = model_config(model) else {
                continue;
            };
            device.seed(0);
            let encoder = config.init(&device);
            for &batch in &options.batches {
                reset_peak_rss();
                let size = config.image_size();
                let x = Tensor::<4>::random(
                    [batch, 3, size, size],
                    Distribution::Normal(0.0, 1.0),
                    &device,
                );
                // Reading the result back waits for the device: the figure is end to end.
                let (runs, ms) = options.time(|| drop(encoder.forward(x.clone()).into_data()));
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

/// Linux resets the "high water mark" of resident memory when 5 is written to clear_refs.
pub(crate) fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

pub(crate) fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Where a ViT-B/32 forward spends its time on one backend: each op of one block at batch
/// `batch` (50 tokens, width 768), in ms, and the share a 12-block forward gives it.
pub fn encode_breakdown(device: &Device, batch: usize, runs: usize) -> Vec<(String, f64)> {
    use crate::model::block::Activation;
    use crate::model::block::BlockConfig;
    use burn::nn::attention::{MhaInput, MultiHeadAttentionConfig};
    use burn::nn::{LayerNormConfig, LinearConfig};
    let time = |f: &mut dyn FnMut()| {
        f();
        let start = Instant::now();
        for _ in 0..runs {
            f();
        }
        start.elapsed().as_secs_f64() * 1000.0 / runs as f64
    };
    device.seed(0);
    let (t, w) = (50, 768);
    let x = Tensor::<3>::random([batch, t, w], Distribution::Normal(0.0, 1.0), device);
    let h = Tensor::<3>::random([batch, t, 4 * w], Distribution::Normal(0.0, 1.0), device);
    let fc1 = LinearConfig::new(w, 4 * w).init(device);
    let ln = LayerNormConfig::new(w).init(device);
    let mha = MultiHeadAttentionConfig::new(w, 12).init(device);
    let block = BlockConfig::new(w, 12, 4 * w)
        .with_activation(Activation::QuickGelu)
        .init(device);
    let vit = VitConfig::clip_b32().init(device);
    let images = Tensor::<4>::random([batch, 3, 224, 224], Distribution::Normal(0.0, 1.0), device);
    let folded = x.clone().reshape([batch * t, w]);
    vec![
        (
            "whole block".into(),
            time(&mut || drop(block.forward(x.clone(), None).into_data())),
        ),
        (
            "attention (q, k, v, out projections + softmax)".into(),
            time(&mut || {
                drop(
                    mha.forward(MhaInput::self_attn(x.clone()))
                        .context
                        .into_data(),
                )
            }),
        ),
        (
            "linear 768 -> 3072 on [B, 50, 768]".into(),
            time(&mut || drop(fc1.forward(x.clone()).into_data())),
        ),
        (
            "the same linear on [B*50, 768]".into(),
            time(&mut || drop(fc1.forward(folded.clone()).into_data())),
        ),
        (
            "QuickGELU on [B, 50, 3072]".into(),
            time(&mut || {
                drop((h.clone() * burn::tensor::activation::sigmoid(h.clone() * 1.702)).into_data())
            }),
        ),
        (
            "LayerNorm on [B, 50, 768]".into(),
            time(&mut || drop(ln.forward(x.clone()).into_data())),
        ),
        (
            "patch embedding (conv 32x32, stride 32)".into(),
            time(&mut || drop(vit.patch_embed.forward(images.clone()).into_data())),
        ),
    ]
}
