//! The pre-norm transformer block every encoder here is made of, and its config.

use burn::config::Config;
use burn::module::Module;
use burn::nn::attention::{MhaInput, MultiHeadAttention, MultiHeadAttentionConfig};
use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::activation::{gelu, sigmoid};
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Bool, Device, Tensor};

/// How the MLP of a block bends: CLIP was trained with QuickGELU.
#[derive(Config, Debug, Copy, PartialEq, Eq)]
pub enum Activation {
    Gelu,
    /// `x * sigmoid(1.702 x)`.
    QuickGelu,
}

#[derive(Config, Debug)]
pub struct BlockConfig {
    pub width: usize,
    pub heads: usize,
    /// Width of the MLP's hidden layer.
    pub hidden: usize,
    #[config(default = 0.0)]
    pub dropout: f64,
    #[config(default = "Activation::Gelu")]
    pub activation: Activation,
    #[config(default = 1e-5)]
    pub layer_norm_eps: f64,
}

impl BlockConfig {
    /// `depth` blocks of this config, as the encoders stack them.
    pub fn init_stack(&self, depth: usize, device: &Device) -> Vec<Block> {
        (0..depth).map(|_| self.init(device)).collect()
    }

    pub fn init(&self, device: &Device) -> Block {
        let ln = || {
            LayerNormConfig::new(self.width)
                .with_epsilon(self.layer_norm_eps)
                .init(device)
        };
        Block {
            norm1: ln(),
            attn: MultiHeadAttentionConfig::new(self.width, self.heads)
                .with_dropout(self.dropout)
                .init(device),
            norm2: ln(),
            fc1: LinearConfig::new(self.width, self.hidden).init(device),
            fc2: LinearConfig::new(self.hidden, self.width).init(device),
            quick_gelu: self.activation == Activation::QuickGelu,
        }
    }
}

/// One pre-norm transformer block: `x + attn(ln(x))`, then `x + mlp(ln(x))`.
#[derive(Module, Debug)]
pub struct Block {
    pub norm1: LayerNorm,
    pub attn: MultiHeadAttention,
    pub norm2: LayerNorm,
    pub fc1: Linear,
    pub fc2: Linear,
    pub quick_gelu: bool,
}

impl Block {
    /// `x`: [batch, tokens, width] -> [batch, tokens, width]; `mask`: [batch, tokens, tokens],
    /// true where attention is forbidden (the text encoder's causal mask).
    pub fn forward(&self, x: Tensor<3>, mask: Option<Tensor<3, Bool>>) -> Tensor<3> {
        let x = x.clone() + self.attend(self.norm1.forward(x), mask);
        let h = self.fc1.forward(self.norm2.forward(x.clone()));
        let h = if self.quick_gelu {
            h.clone() * sigmoid(h * 1.702)
        } else {
            gelu(h)
        };
        x + self.fc2.forward(h)
    }
}

impl Block {
    /// Self-attention of `x` ([batch, tokens, width] -> the same) through burn's fused
    /// attention op (one kernel for scores, softmax and the weighted sum on burn-flex and
    /// burn-wgpu; built from differentiable ops under autodiff, so training gets the same
    /// gradients). burn-nn's module, which computes the same thing in separate passes, is used
    /// only where attention dropout must be applied (a training step with dropout > 0).
    pub fn attend(&self, x: Tensor<3>, mask: Option<Tensor<3, Bool>>) -> Tensor<3> {
        if self.attn.dropout.prob > 0.0 && x.device().is_autodiff() {
            return self.attention_unfused(x, mask);
        }
        let [batch, tokens, width] = x.dims();
        let heads = self.attn.n_heads;
        let split = |t: Tensor<3>| {
            t.reshape([batch, tokens, heads, width / heads])
                .swap_dims(1, 2) // [B, H, T, D]
        };
        let q = split(self.attn.query.forward(x.clone()));
        let k = split(self.attn.key.forward(x.clone()));
        let v = split(self.attn.value.forward(x));
        let mask = mask.map(|m| {
            m.unsqueeze_dim::<4>(1)
                .expand([batch, heads, tokens, tokens])
        });
        let context = attention(q, k, v, mask, None, AttentionModuleOptions::default()); // [B, H, T, D]
        let context = context.swap_dims(1, 2).reshape([batch, tokens, width]);
        self.attn.output.forward(context)
    }

    /// The same attention through burn-nn's module (separate matmul, softmax and reshape
    /// passes; dropout on the weights): the reference the fused path is tested against.
    pub fn attention_unfused(&self, x: Tensor<3>, mask: Option<Tensor<3, Bool>>) -> Tensor<3> {
        let mut input = MhaInput::self_attn(x);
        if let Some(m) = mask {
            input = input.mask_attn(m);
        }
        self.attn.forward(input).context
    }
}

/// Rows scaled to unit length: [n, d] -> [n, d].
pub fn l2_normalize(x: Tensor<2>) -> Tensor<2> {
    let norm = x
        .clone()
        .powf_scalar(2.0)
        .sum_dim(1)
        .sqrt()
        .clamp_min(1e-12);
    x / norm
}
