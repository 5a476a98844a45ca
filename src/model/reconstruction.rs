//! The generative branch of EndoFinder (METHODS §4): a light masked-autoencoder decoder that
//! predicts the pixels of masked patches. Its visible tokens first attend by cross-attention
//! to a conditioning embedding (the scene embedding when the scene encoder trains; absent when
//! the image encoder trains alone), then mask tokens fill the hidden positions and two
//! pre-norm blocks predict every patch. The loss counts masked patches only.

use super::block::{Block, BlockConfig};
use super::vit::sincos_2d;
use burn::config::Config;
use burn::module::{Module, Param};
use burn::nn::attention::{MhaInput, MultiHeadAttention, MultiHeadAttentionConfig};
use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::{Device, Distribution, Int, Tensor};

#[derive(Config, Debug)]
pub struct ReconstructionDecoderConfig {
    /// Width of the encoder tokens it reads.
    pub encoder_width: usize,
    /// Dimension of the conditioning (scene) embedding.
    pub condition_dim: usize,
    /// Patches per side of the image grid.
    pub grid: usize,
    pub patch_size: usize,
    #[config(default = 128)]
    pub width: usize,
    #[config(default = 2)]
    pub depth: usize,
    #[config(default = 4)]
    pub heads: usize,
}

impl ReconstructionDecoderConfig {
    pub fn init(&self, device: &Device) -> ReconstructionDecoder {
        let pixels = 3 * self.patch_size * self.patch_size;
        ReconstructionDecoder {
            embed: LinearConfig::new(self.encoder_width, self.width).init(device),
            condition: LinearConfig::new(self.condition_dim, self.width).init(device),
            cross_norm: LayerNormConfig::new(self.width).init(device),
            cross: MultiHeadAttentionConfig::new(self.width, self.heads).init(device),
            mask_token: Param::from_tensor(Tensor::random(
                [self.width],
                Distribution::Normal(0.0, 0.02),
                device,
            )),
            positions: Param::from_tensor(sincos_2d(self.grid, self.width, device))
                .set_require_grad(false),
            blocks: BlockConfig::new(self.width, self.heads, 4 * self.width)
                .init_stack(self.depth, device),
            norm: LayerNormConfig::new(self.width).init(device),
            head: LinearConfig::new(self.width, pixels).init(device),
        }
    }
}

#[derive(Module, Debug)]
pub struct ReconstructionDecoder {
    pub embed: Linear,
    pub condition: Linear,
    pub cross_norm: LayerNorm,
    pub cross: MultiHeadAttention,
    pub mask_token: Param<Tensor<1>>,
    /// Fixed sin-cos positions, [1 + patches, width] (row 0 for the encoder's CLS).
    pub positions: Param<Tensor<2>>,
    pub blocks: Vec<Block>,
    pub norm: LayerNorm,
    pub head: Linear,
}

impl ReconstructionDecoder {
    /// `visible`: encoder tokens [batch, 1 + visible, encoder_width] (CLS first, as from
    /// `Vit::forward_visible`); `keep`: their patch indices [batch, visible]; `condition`:
    /// [batch, condition_dim] or `None` -> predicted pixels of every patch
    /// [batch, patches, 3 * patch²].
    pub fn forward(
        &self,
        visible: Tensor<3>,
        keep: Tensor<2, Int>,
        condition: Option<Tensor<2>>,
    ) -> Tensor<3> {
        let x = self.embed.forward(visible); // [B, 1 + V, Wd]
        let [batch, seen, width] = x.dims();
        let x = match condition {
            Some(c) => {
                let c = self.condition.forward(c).unsqueeze_dim::<3>(1); // [B, 1, Wd]
                let q = self.cross_norm.forward(x.clone());
                x + self.cross.forward(MhaInput::new(q, c.clone(), c)).context
            }
            None => x,
        };
        // Scatter the visible tokens back to their patch positions over a field of mask tokens.
        let [tokens, _] = self.positions.dims();
        let patches = tokens - 1;
        let cls = x.clone().slice([0..batch, 0..1, 0..width]);
        let shown = x.slice([0..batch, 1..seen, 0..width]);
        let field = self
            .mask_token
            .val()
            .reshape([1, 1, width])
            .expand([batch, patches, width]);
        let index = keep.unsqueeze_dim::<3>(2).expand([batch, seen - 1, width]);
        let field = field.scatter(1, index, shown, burn::tensor::IndexingUpdateOp::Assign);
        let mut x = Tensor::cat(vec![cls, field], 1) + self.positions.val().unsqueeze::<3>();
        for block in &self.blocks {
            x = block.forward(x, None);
        }
        let x = self.norm.forward(x.slice([0..batch, 1..tokens, 0..width]));
        self.head.forward(x)
    }
}

/// Images as rows of patch pixels, in the ViT's patch order (row-major):
/// [batch, 3, size, size] -> [batch, patches, 3 * patch²], channel-last within a patch.
pub fn patchify(images: Tensor<4>, patch: usize) -> Tensor<3> {
    let [batch, channels, h, w] = images.dims();
    let (gh, gw) = (h / patch, w / patch);
    images
        .reshape([batch, channels, gh, patch, gw, patch])
        .permute([0, 2, 4, 3, 5, 1]) // [B, gh, gw, p, p, C]
        .reshape([batch, gh * gw, patch * patch * channels])
}

/// Mean squared error over the masked patches only. `predicted`, `target`: [batch, patches,
/// pixels]; `masked`: [batch, patches], 1.0 where the patch was hidden -> a scalar [1].
pub fn masked_mse(predicted: Tensor<3>, target: Tensor<3>, masked: Tensor<2>) -> Tensor<1> {
    let per_patch = (predicted - target)
        .powf_scalar(2.0)
        .mean_dim(2)
        .squeeze_dim::<2>(2); // [B, N]
    let hidden = masked.clone().sum().clamp_min(1.0);
    (per_patch * masked).sum() / hidden
}

impl crate::model::weights::CheckConfig for ReconstructionDecoderConfig {
    fn check(&self) -> Result<(), String> {
        use crate::model::weights::{check_heads, check_size};
        check_size("encoder_width", self.encoder_width, 8192)?;
        check_size("condition_dim", self.condition_dim, 8192)?;
        check_size("grid", self.grid, 256)?;
        check_size("patch_size", self.patch_size, 256)?;
        check_size("width", self.width, 8192)?;
        check_size("depth", self.depth, 64)?;
        check_heads("decoder", self.width, self.heads)
    }
}
