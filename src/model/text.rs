//! The CLIP-compatible text encoder and its tokenizer: token + position embeddings, causal
//! pre-norm blocks, a final norm, pooling at the end-of-text token, and a projection into the
//! joint image-text space. The tokenizer is CLIP's own BPE (49408 tokens, context 77).

use super::block::Activation;
use super::block::{Block, BlockConfig};
use burn::config::Config;
use burn::module::{Module, Param};
use burn::nn::attention::generate_autoregressive_mask;
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::{Device, Distribution, Int, Tensor, TensorData};
use instant_clip_tokenizer::{Token, Tokenizer};

#[derive(Config, Debug)]
pub struct TextEncoderConfig {
    #[config(default = 49408)]
    pub vocab_size: usize,
    #[config(default = 77)]
    pub context: usize,
    pub width: usize,
    pub depth: usize,
    pub heads: usize,
    #[config(default = 4.0)]
    pub mlp_ratio: f64,
    #[config(default = "Activation::QuickGelu")]
    pub activation: Activation,
    #[config(default = "None")]
    pub projection: Option<usize>,
    #[config(default = 1e-5)]
    pub layer_norm_eps: f64,
}

impl TextEncoderConfig {
    /// CLIP ViT-B/32's text tower: width 512, 12 blocks of 8 heads, projection 512.
    pub fn clip_b32() -> TextEncoderConfig {
        TextEncoderConfig::new(512, 12, 8).with_projection(Some(512))
    }

    /// Our default text encoder for a [`super::tokenizer::WordTokenizer`] of `vocab_size`
    /// ids: context 32, width 128, 2 causal blocks of 4 heads, GELU, projection to `dim`.
    pub fn word_small(vocab_size: usize, dim: usize) -> TextEncoderConfig {
        TextEncoderConfig::new(128, 2, 4)
            .with_vocab_size(vocab_size)
            .with_context(32)
            .with_activation(Activation::Gelu)
            .with_projection(Some(dim))
    }

    /// Output dimension of [`TextEncoder::forward`].
    pub fn output_dim(&self) -> usize {
        self.projection.unwrap_or(self.width)
    }

    pub fn init(&self, device: &Device) -> TextEncoder {
        let ln = |d| {
            LayerNormConfig::new(d)
                .with_epsilon(self.layer_norm_eps)
                .init(device)
        };
        let hidden = (self.width as f64 * self.mlp_ratio).round() as usize;
        TextEncoder {
            token_embedding: EmbeddingConfig::new(self.vocab_size, self.width).init(device),
            positions: Param::from_tensor(Tensor::random(
                [self.context, self.width],
                Distribution::Normal(0.0, 0.01),
                device,
            )),
            blocks: BlockConfig::new(self.width, self.heads, hidden)
                .with_activation(self.activation)
                .with_layer_norm_eps(self.layer_norm_eps)
                .init_stack(self.depth, device),
            final_norm: ln(self.width),
            projection: self.projection.map(|d| {
                LinearConfig::new(self.width, d)
                    .with_bias(false)
                    .init(device)
            }),
        }
    }
}

#[derive(Module, Debug)]
pub struct TextEncoder {
    pub token_embedding: Embedding,
    pub positions: Param<Tensor<2>>,
    pub blocks: Vec<Block>,
    pub final_norm: LayerNorm,
    pub projection: Option<Linear>,
}

impl TextEncoder {
    /// `tokens`: [batch, length] (length <= context, each row SOT .. EOT then padding) ->
    /// embeddings [batch, output_dim] taken at each row's end-of-text token (the highest id,
    /// as in CLIP).
    pub fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<2> {
        let [batch, length] = tokens.dims();
        let device = tokens.device();
        let eot = tokens.clone().argmax(1); // [B, 1]
        let x = self.token_embedding.forward(tokens); // [B, L, W]
        let [_, _, width] = x.dims();
        let positions = self
            .positions
            .val()
            .slice([0..length, 0..width])
            .unsqueeze::<3>();
        let mut x = x + positions;
        let mask = generate_autoregressive_mask(batch, length, &device);
        for block in &self.blocks {
            x = block.forward(x, Some(mask.clone()));
        }
        let x = self.final_norm.forward(x);
        let index = eot.reshape([batch, 1, 1]).expand([batch, 1, width]);
        let pooled = x.gather(1, index).reshape([batch, width]);
        match &self.projection {
            Some(p) => p.forward(pooled),
            None => pooled,
        }
    }
}

/// CLIP's BPE tokenizer with its bundled vocabulary.
pub struct ClipTokenizer {
    inner: Tokenizer,
}

impl Default for ClipTokenizer {
    fn default() -> Self {
        ClipTokenizer {
            inner: Tokenizer::new(),
        }
    }
}

impl ClipTokenizer {
    /// One tokenizer for the whole process (building it reads the bundled 49k-piece vocabulary).
    pub fn shared() -> &'static ClipTokenizer {
        static SHARED: std::sync::OnceLock<ClipTokenizer> = std::sync::OnceLock::new();
        SHARED.get_or_init(ClipTokenizer::default)
    }

    /// How many BPE pieces `text` takes (start and end of text not counted).
    pub fn pieces(&self, text: &str) -> usize {
        let mut tokens: Vec<Token> = Vec::new();
        self.inner.encode(text, &mut tokens);
        tokens.len()
    }

    /// SOT, the text's tokens (cut to fit), EOT, then zeros to `context`.
    pub fn encode(&self, text: &str, context: usize) -> Vec<i64> {
        let mut tokens: Vec<Token> = Vec::new();
        self.inner.encode(text, &mut tokens);
        tokens.truncate(context.saturating_sub(2));
        let mut ids = Vec::with_capacity(context);
        ids.push(self.inner.start_of_text().to_u16() as i64);
        ids.extend(tokens.into_iter().map(|t| t.to_u16() as i64));
        ids.push(self.inner.end_of_text().to_u16() as i64);
        ids.resize(context, 0);
        ids
    }

    /// `texts` -> [batch, context] token ids on `device`.
    pub fn batch(&self, texts: &[&str], context: usize, device: &Device) -> Tensor<2, Int> {
        let ids: Vec<i64> = texts.iter().flat_map(|t| self.encode(t, context)).collect();
        Tensor::from_data(TensorData::new(ids, [texts.len(), context]), device)
    }
}

impl crate::model::weights::CheckConfig for TextEncoderConfig {
    fn check(&self) -> Result<(), String> {
        use crate::model::weights::{check_heads, check_real, check_size};
        check_size("text vocab_size", self.vocab_size, 1_000_000)?;
        check_size("text context", self.context, 4096)?;
        check_size("text width", self.width, 8192)?;
        check_size("text depth", self.depth, 256)?;
        check_heads("text", self.width, self.heads)?;
        check_real("text mlp_ratio", self.mlp_ratio, 0.0, 64.0)?;
        check_real("text layer_norm_eps", self.layer_norm_eps, 0.0, 1.0)?;
        if let Some(p) = self.projection {
            check_size("text projection", p, 8192)?;
        }
        Ok(())
    }
}
