//! The ViT image encoder: patch embedding, [CLS] token, positions (learned or fixed 2-D
//! sin-cos), pre-norm transformer blocks, CLS pooling and an optional projection. One config
//! covers CLIP's ViT-B/32 (`VitConfig::clip_b32`) and the small variants that train on a CPU.

use super::block::{Activation, Block, BlockConfig};
use burn::config::Config;
use burn::module::{Module, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::{Device, Distribution, Int, Tensor, TensorData};

#[derive(Config, Debug, Copy, PartialEq, Eq)]
pub enum Positions {
    /// Learned position embeddings (CLIP).
    Learned,
    /// Fixed 2-D sine-cosine embeddings (MAE), never trained.
    SinCos,
}

#[derive(Config, Debug)]
pub struct VitConfig {
    pub image_size: usize,
    pub patch_size: usize,
    pub width: usize,
    pub depth: usize,
    pub heads: usize,
    #[config(default = 4.0)]
    pub mlp_ratio: f64,
    #[config(default = "Positions::Learned")]
    pub positions: Positions,
    #[config(default = "Activation::QuickGelu")]
    pub activation: Activation,
    /// CLIP normalises the embedded tokens before the blocks (`pre_layrnorm`).
    #[config(default = true)]
    pub norm_before_blocks: bool,
    /// Output dimension of a bias-free projection of the pooled CLS token; `None` keeps width.
    #[config(default = "None")]
    pub projection: Option<usize>,
    #[config(default = 1e-5)]
    pub layer_norm_eps: f64,
}

impl VitConfig {
    /// CLIP ViT-B/32: 224 px, patch 32, width 768, 12 blocks of 12 heads, projection 512.
    pub fn clip_b32() -> VitConfig {
        VitConfig::new(224, 32, 768, 12, 12).with_projection(Some(512))
    }

    /// Our default (digital-twin) image encoder: 112 px, patch 16 (7 x 7 patches), width 192,
    /// 6 blocks of 3 heads, GELU, fixed sin-cos positions as in MAE (masked patches keep
    /// their place without learning it), projection to 256 (256-bit sign codes). Small enough
    /// to train on two CPU cores.
    pub fn twin_small() -> VitConfig {
        VitConfig::new(112, 16, 192, 6, 3)
            .with_positions(Positions::SinCos)
            .with_activation(Activation::Gelu)
            .with_norm_before_blocks(false)
            .with_projection(Some(256))
    }

    pub fn patches(&self) -> usize {
        (self.image_size / self.patch_size).pow(2)
    }

    /// Output dimension of [`Vit::forward`].
    pub fn output_dim(&self) -> usize {
        self.projection.unwrap_or(self.width)
    }

    pub fn init(&self, device: &Device) -> Vit {
        assert!(
            self.image_size.is_multiple_of(self.patch_size),
            "image size {} is not a multiple of the patch size {}",
            self.image_size,
            self.patch_size
        );
        let tokens = self.patches() + 1;
        let positions = match self.positions {
            Positions::Learned => Param::from_tensor(Tensor::random(
                [tokens, self.width],
                Distribution::Normal(0.0, 0.02),
                device,
            )),
            Positions::SinCos => Param::from_tensor(sincos_2d(
                self.image_size / self.patch_size,
                self.width,
                device,
            ))
            .set_require_grad(false),
        };
        let ln = |d| {
            LayerNormConfig::new(d)
                .with_epsilon(self.layer_norm_eps)
                .init(device)
        };
        let hidden = (self.width as f64 * self.mlp_ratio).round() as usize;
        Vit {
            patch_embed: Conv2dConfig::new([3, self.width], [self.patch_size, self.patch_size])
                .with_stride([self.patch_size, self.patch_size])
                .with_bias(false)
                .init(device),
            class_token: Param::from_tensor(Tensor::random(
                [self.width],
                Distribution::Normal(0.0, 0.02),
                device,
            )),
            positions,
            norm_pre: self.norm_before_blocks.then(|| ln(self.width)),
            blocks: BlockConfig::new(self.width, self.heads, hidden)
                .with_activation(self.activation)
                .with_layer_norm_eps(self.layer_norm_eps)
                .init_stack(self.depth, device),
            norm_post: ln(self.width),
            projection: self.projection.map(|d| {
                LinearConfig::new(self.width, d)
                    .with_bias(false)
                    .init(device)
            }),
        }
    }
}

#[derive(Module, Debug)]
pub struct Vit {
    pub patch_embed: Conv2d,
    pub class_token: Param<Tensor<1>>,
    pub positions: Param<Tensor<2>>,
    pub norm_pre: Option<LayerNorm>,
    pub blocks: Vec<Block>,
    pub norm_post: LayerNorm,
    pub projection: Option<Linear>,
}

impl Vit {
    /// Patch embedding, [CLS] and positions: [batch, 3, size, size] -> [batch, 1 + patches, width].
    fn embed(&self, images: Tensor<4>) -> Tensor<3> {
        let [batch, _, _, _] = images.dims();
        let patches = self.patch_embed.forward(images); // [B, W, h, w]
        let [_, width, h, w] = patches.dims();
        let patches = patches.reshape([batch, width, h * w]).swap_dims(1, 2); // [B, N, W]
        let cls = self
            .class_token
            .val()
            .reshape([1, 1, width])
            .expand([batch, 1, width]);
        Tensor::cat(vec![cls, patches], 1) + self.positions.val().unsqueeze::<3>()
    }

    fn blocks(&self, x: Tensor<3>) -> Tensor<3> {
        let mut x = match &self.norm_pre {
            Some(ln) => ln.forward(x),
            None => x,
        };
        for block in &self.blocks {
            x = block.forward(x, None);
        }
        x
    }

    /// Embeds patches and runs the blocks. `images`: [batch, 3, size, size] (normalised) ->
    /// tokens [batch, 1 + patches, width], CLS first.
    pub fn forward_tokens(&self, images: Tensor<4>) -> Tensor<3> {
        self.blocks(self.embed(images))
    }

    /// The masked-autoencoder pass: only the patches in `keep` ([batch, visible], patch
    /// indices) enter the blocks, each with its own position. -> [batch, 1 + visible, width],
    /// CLS first.
    pub fn forward_visible(&self, images: Tensor<4>, keep: Tensor<2, Int>) -> Tensor<3> {
        let x = self.embed(images);
        let [batch, tokens, width] = x.dims();
        let [_, visible] = keep.dims();
        let cls = x.clone().slice([0..batch, 0..1, 0..width]);
        let patches = x.slice([0..batch, 1..tokens, 0..width]);
        let index = keep.unsqueeze_dim::<3>(2).expand([batch, visible, width]);
        self.blocks(Tensor::cat(vec![cls, patches.gather(1, index)], 1))
    }

    /// `images`: [batch, 3, size, size] -> embeddings [batch, output_dim] (not normalised).
    pub fn forward(&self, images: Tensor<4>) -> Tensor<2> {
        self.pool(self.forward_tokens(images))
    }

    /// `images` [batch, 3, size, size] -> unit embeddings [batch, output_dim], each the
    /// normalised mean of the unit embeddings of the image turned by 0, 1/turns, 2/turns ...
    /// of a full turn (`turns` 1, 2 or 4): the same for an image and its quarter turn when
    /// `turns` is 4.
    pub fn forward_turned(&self, images: Tensor<4>, turns: u32) -> Tensor<2> {
        super::twin_encoder::turned(images, turns, |x| self.forward(x))
    }

    /// The embedding of tokens [batch, tokens, width] (CLS first): the normalised CLS,
    /// projected -> [batch, output_dim] (not normalised).
    pub fn pool(&self, tokens: Tensor<3>) -> Tensor<2> {
        let [batch, _, width] = tokens.dims();
        let cls = self
            .norm_post
            .forward(tokens.slice([0..batch, 0..1, 0..width]))
            .reshape([batch, width]);
        match &self.projection {
            Some(p) => p.forward(cls),
            None => cls,
        }
    }
}

/// Fixed 2-D sine-cosine position embeddings (MAE), with a zero row for the CLS token:
/// [1 + grid², width]. Half the channels encode the row, half the column.
pub fn sincos_2d(grid: usize, width: usize, device: &Device) -> Tensor<2> {
    assert!(
        width.is_multiple_of(4),
        "sin-cos positions need a width divisible by 4"
    );
    let quarter = width / 4;
    let mut data = vec![0.0f32; (grid * grid + 1) * width];
    for r in 0..grid {
        for c in 0..grid {
            let row = &mut data[(1 + r * grid + c) * width..(2 + r * grid + c) * width];
            for (axis, pos) in [(0, c as f32), (1, r as f32)] {
                for i in 0..quarter {
                    let omega = 1.0 / 10_000f32.powf(i as f32 / quarter as f32);
                    row[axis * 2 * quarter + i] = (pos * omega).sin();
                    row[axis * 2 * quarter + quarter + i] = (pos * omega).cos();
                }
            }
        }
    }
    Tensor::from_data(TensorData::new(data, [grid * grid + 1, width]), device)
}

impl crate::model::weights::CheckConfig for VitConfig {
    fn check(&self) -> Result<(), String> {
        use crate::model::weights::{check_heads, check_real, check_size};
        check_size("image_size", self.image_size, 4096)?;
        check_size("patch_size", self.patch_size, self.image_size)?;
        if !self.image_size.is_multiple_of(self.patch_size) {
            return Err(format!(
                "image_size {} is not a whole number of {} px patches",
                self.image_size, self.patch_size
            ));
        }
        check_size("width", self.width, 8192)?;
        check_size("depth", self.depth, 256)?;
        check_heads("block", self.width, self.heads)?;
        check_real("mlp_ratio", self.mlp_ratio, 0.0, 64.0)?;
        check_real("layer_norm_eps", self.layer_norm_eps, 0.0, 1.0)?;
        if let Some(p) = self.projection {
            check_size("projection", p, 8192)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::Distribution;

    fn cosines(a: Tensor<2>, b: Tensor<2>) -> Vec<f32> {
        (a * b).sum_dim(1).into_data().try_to_vec::<f32>().unwrap()
    }

    #[test]
    fn a_turned_embedding_does_not_depend_on_the_images_roll() {
        let device = Device::flex();
        device.seed(5);
        let vit = VitConfig::new(16, 4, 32, 1, 2)
            .with_projection(Some(24))
            .init(&device);
        let x = Tensor::<4>::random([3, 3, 16, 16], Distribution::Normal(0.0, 1.0), &device);
        let quarter = x.clone().swap_dims(2, 3).flip([3]);
        let half = x.clone().flip([2, 3]);
        // As it is, a turned image is another embedding (the encoder is not invariant)...
        let plain = cosines(
            vit.forward_turned(x.clone(), 1),
            vit.forward_turned(quarter.clone(), 1),
        );
        assert!(plain.iter().all(|&c| c < 0.9995), "{plain:?}");
        // ...averaged over every quarter turn it is the same one, and over half turns the
        // same for an image upside down.
        let four = cosines(
            vit.forward_turned(x.clone(), 4),
            vit.forward_turned(quarter, 4),
        );
        assert!(four.iter().all(|&c| c > 0.99999), "{four:?}");
        let two = cosines(
            vit.forward_turned(x.clone(), 2),
            vit.forward_turned(half, 2),
        );
        assert!(two.iter().all(|&c| c > 0.99999), "{two:?}");
        // Unit length, as every twin embedding.
        let norms = cosines(vit.forward_turned(x.clone(), 4), vit.forward_turned(x, 4));
        assert!(norms.iter().all(|&n| (n - 1.0).abs() < 1e-5), "{norms:?}");
    }
}
