//! The scene encoder (METHODS §4): a learnable [Scene] token prepended to the per-view
//! embeddings of one polyp, one pre-norm transformer layer, the L2-normalised [Scene] output.
//! No positions: a scene does not depend on the order of its views.

use super::block::{Block, BlockConfig};
use burn::config::Config;
use burn::module::{Module, Param};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Bool, Device, Distribution, Tensor, TensorData};

#[derive(Config, Debug)]
pub struct SceneEncoderConfig {
    pub dim: usize,
    #[config(default = 8)]
    pub heads: usize,
    #[config(default = 4.0)]
    pub mlp_ratio: f64,
    /// Output `normalise(mean(views) + W [Scene])` with `W` zero at initialisation: the
    /// encoder starts as the plain mean of views and can only learn to improve on it.
    /// Off: the paper's [Scene] token output alone.
    #[config(default = false)]
    pub residual: bool,
}

impl SceneEncoderConfig {
    pub fn init(&self, device: &Device) -> SceneEncoder {
        let hidden = (self.dim as f64 * self.mlp_ratio).round() as usize;
        SceneEncoder {
            scene_token: Param::from_tensor(Tensor::random(
                [self.dim],
                Distribution::Normal(0.0, 0.02),
                device,
            )),
            block: BlockConfig::new(self.dim, self.heads, hidden).init(device),
            // Zeros through the initializer: a weight replaced after init (`Param::map`) loses
            // its gradient tracking, and the encoder then never moves off the mean.
            residual: self.residual.then(|| {
                LinearConfig::new(self.dim, self.dim)
                    .with_bias(false)
                    .with_initializer(burn::nn::Initializer::Zeros)
                    .init(device)
            }),
        }
    }
}

#[derive(Module, Debug)]
pub struct SceneEncoder {
    pub scene_token: Param<Tensor<1>>,
    pub block: Block,
    /// The zero-initialised output projection of the residual form.
    pub residual: Option<Linear>,
}

impl SceneEncoder {
    /// `views`: [batch, n_views, dim]; `missing`: [batch, n_views], true for padding slots of
    /// scenes with fewer views -> scene embeddings [batch, dim], unit length.
    pub fn forward(&self, views: Tensor<3>, missing: Option<Tensor<2, Bool>>) -> Tensor<2> {
        let [batch, n, dim] = views.dims();
        // The mean of the views that are present: [B, D] (used by the residual form).
        let mean = self.residual.as_ref().map(|_| {
            let present = match &missing {
                Some(m) => m.clone().bool_not().float(),
                None => Tensor::ones([batch, n], &views.device()),
            }
            .unsqueeze_dim::<3>(2); // [B, n, 1]
            let count = present.clone().sum_dim(1).clamp_min(1.0); // [B, 1, 1]
            ((views.clone() * present).sum_dim(1) / count).reshape([batch, dim])
        });
        let token = self
            .scene_token
            .val()
            .reshape([1, 1, dim])
            .expand([batch, 1, dim]);
        let x = Tensor::cat(vec![token, views], 1); // [B, 1 + n, D]
        let mask = missing.map(|m| {
            // The scene token is never padding; every query may not look at padded keys.
            let token_slot = Tensor::<2, Bool>::from_data(
                TensorData::new(vec![false; batch], [batch, 1]),
                &m.device(),
            );
            let keys = Tensor::cat(vec![token_slot, m], 1); // [B, 1 + n]
            keys.unsqueeze_dim::<3>(1).expand([batch, n + 1, n + 1])
        });
        let out = self.block.forward(x, mask);
        let token = out.slice([0..batch, 0..1, 0..dim]).reshape([batch, dim]);
        let scene = match (&self.residual, mean) {
            (Some(w), Some(mean)) => mean + w.forward(token),
            _ => token,
        };
        let norm = scene
            .clone()
            .powf_scalar(2.0)
            .sum_dim(1)
            .sqrt()
            .clamp_min(1e-12);
        scene / norm
    }
}

impl crate::model::weights::CheckConfig for SceneEncoderConfig {
    fn check(&self) -> Result<(), String> {
        use crate::model::weights::{check_heads, check_real, check_size};
        check_size("dim", self.dim, 8192)?;
        check_heads("scene", self.dim, self.heads)?;
        check_real("mlp_ratio", self.mlp_ratio, 0.0, 64.0)
    }
}
