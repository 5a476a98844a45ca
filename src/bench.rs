//! `endotwin bench backends`: the CPU backends (and wgpu when there is an adapter) on a
//! ViT-style transformer block, the op mix our encoders are made of. Figures, not tests.

use crate::compute::{self, BackendPref};
use burn::module::Module;
use burn::nn::attention::{MhaInput, MultiHeadAttention, MultiHeadAttentionConfig};
use burn::nn::{Gelu, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::{Device, Distribution, Tensor};
use std::time::Instant;

/// One pre-norm transformer encoder block (ViT-S/16 widths by default).
#[derive(Module, Debug)]
struct Block {
    norm1: LayerNorm,
    attn: MultiHeadAttention,
    norm2: LayerNorm,
    fc1: Linear,
    fc2: Linear,
    act: Gelu,
}

impl Block {
    fn new(d: usize, heads: usize, device: &Device) -> Block {
        Block {
            norm1: LayerNormConfig::new(d).init(device),
            attn: MultiHeadAttentionConfig::new(d, heads).init(device),
            norm2: LayerNormConfig::new(d).init(device),
            fc1: LinearConfig::new(d, 4 * d).init(device),
            fc2: LinearConfig::new(4 * d, d).init(device),
            act: Gelu::new(),
        }
    }

    /// `x`: [batch, tokens, d] -> [batch, tokens, d].
    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let h = self
            .attn
            .forward(MhaInput::self_attn(self.norm1.forward(x.clone())))
            .context;
        let x = x + h;
        let h = self.fc2.forward(
            self.act
                .forward(self.fc1.forward(self.norm2.forward(x.clone()))),
        );
        x + h
    }
}

#[derive(Debug, Clone)]
pub struct BenchRow {
    pub backend: String,
    pub batch: usize,
    pub ms_per_block: f64,
    pub images_per_s_12_blocks: f64,
}

fn time_block(
    name: &str,
    device: &Device,
    batch: usize,
    tokens: usize,
    d: usize,
    iters: usize,
) -> BenchRow {
    let block = Block::new(d, d / 64, device);
    let x = Tensor::<3>::random([batch, tokens, d], Distribution::Normal(0.0, 1.0), device);
    // Warm-up: first use compiles kernels (wgpu) and allocates.
    let _ = block.forward(x.clone()).into_data();
    let start = Instant::now();
    for _ in 0..iters {
        let _ = block.forward(x.clone()).into_data();
    }
    let ms = start.elapsed().as_secs_f64() * 1000.0 / iters as f64;
    BenchRow {
        backend: name.to_string(),
        batch,
        ms_per_block: ms,
        // A ViT of 12 such blocks, ignoring the patch embedding.
        images_per_s_12_blocks: batch as f64 / (12.0 * ms / 1000.0),
    }
}

/// Times a ViT-S block (197 tokens, width 384, 6 heads) at batch 1 and 8 on each backend.
pub fn backends(iters: usize, with_gpu: bool) -> Vec<BenchRow> {
    let (tokens, d) = (197, 384);
    let mut devices: Vec<(String, Device)> = vec![("burn-flex".into(), Device::flex())];
    #[cfg(feature = "bench-ndarray")]
    #[allow(deprecated)]
    devices.push(("burn-ndarray".into(), Device::ndarray()));
    if with_gpu && let Ok(c) = compute::select(BackendPref::Gpu) {
        devices.push((format!("burn-wgpu ({})", c.adapter), c.device));
    }
    let mut rows = Vec::new();
    for (name, device) in &devices {
        for batch in [1, 8] {
            rows.push(time_block(name, device, batch, tokens, d, iters));
        }
    }
    rows
}
