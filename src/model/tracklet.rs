//! The tracklet encoder (METHODS §3): per-frame features -> Linear to 256 -> a learnable CLS
//! token -> 3 transformer layers (8 heads, feed-forward 1024, no positions). The embedding is
//! the CLS output; a projector 256 -> 256 -> ReLU -> 128 exists only for the loss.

use super::block::{Block, BlockConfig};
use super::frame_cnn::{FrameCnn, FrameCnnConfig};
use burn::config::Config;
use burn::module::{Module, Param};
use burn::nn::{Dropout, DropoutConfig, Initializer, Linear, LinearConfig, Relu};
use burn::tensor::{Device, Distribution, Tensor};

#[derive(Config, Debug)]
pub struct TrackletEncoderConfig {
    /// Width of the per-frame backbone features (2048 for ResNet-50).
    pub frame_dim: usize,
    #[config(default = 256)]
    pub dim: usize,
    #[config(default = 3)]
    pub layers: usize,
    #[config(default = 8)]
    pub heads: usize,
    #[config(default = 1024)]
    pub feed_forward: usize,
    #[config(default = 0.1)]
    pub dropout: f64,
    #[config(default = 128)]
    pub projection: usize,
    /// Residual on the frames' mean: the embedding is `mean(frames) + out(CLS)` (frame tokens
    /// `frame + out(token)`) with `out` zero-initialised, so an untrained encoder gives the
    /// plain mean of its frame features and training can only move away from it by learning.
    /// Needs `frame_dim == dim` (a frozen backbone's unit features).
    #[config(default = false)]
    pub residual: bool,
}

impl TrackletEncoderConfig {
    pub fn init(&self, device: &Device) -> TrackletEncoder {
        TrackletEncoder {
            input: LinearConfig::new(self.frame_dim, self.dim).init(device),
            cls: Param::from_tensor(Tensor::random(
                [self.dim],
                Distribution::Normal(0.0, 0.02),
                device,
            )),
            blocks: BlockConfig::new(self.dim, self.heads, self.feed_forward)
                .with_dropout(self.dropout)
                .init_stack(self.layers, device),
            dropout: DropoutConfig::new(self.dropout).init(),
            proj1: LinearConfig::new(self.dim, self.dim).init(device),
            relu: Relu::new(),
            proj2: LinearConfig::new(self.dim, self.projection).init(device),
            out: self.residual.then(|| {
                LinearConfig::new(self.dim, self.dim)
                    .with_initializer(Initializer::Zeros)
                    .init(device)
            }),
        }
    }
}

#[derive(Module, Debug)]
pub struct TrackletEncoder {
    pub input: Linear,
    pub cls: Param<Tensor<1>>,
    pub blocks: Vec<Block>,
    pub dropout: Dropout,
    pub proj1: Linear,
    pub relu: Relu,
    pub proj2: Linear,
    /// The residual's output projection (see [`TrackletEncoderConfig::residual`]).
    pub out: Option<Linear>,
}

impl TrackletEncoder {
    /// `frames`: [batch, n_frames, frame_dim] -> (tracklet embedding [batch, dim],
    /// frame tokens [batch, n_frames, dim]); both feed the two-level loss.
    pub fn forward(&self, frames: Tensor<3>) -> (Tensor<2>, Tensor<3>) {
        let inputs = self.out.as_ref().map(|_| frames.clone());
        let x = self.dropout.forward(self.input.forward(frames)); // [B, n, D]
        let [batch, n, dim] = x.dims();
        let cls = self.cls.val().reshape([1, 1, dim]).expand([batch, 1, dim]);
        let mut x = Tensor::cat(vec![cls, x], 1); // [B, 1 + n, D]
        for block in &self.blocks {
            x = block.forward(x, None);
        }
        let tracklet = x
            .clone()
            .slice([0..batch, 0..1, 0..dim])
            .reshape([batch, dim]);
        let tokens = x.slice([0..batch, 1..n + 1, 0..dim]);
        match (&self.out, inputs) {
            (Some(out), Some(inputs)) => {
                let mean = inputs.clone().mean_dim(1).reshape([batch, dim]); // [B, D]
                (
                    mean + out.forward(tracklet),
                    inputs + out.forward(tokens), // [B, n, D]
                )
            }
            _ => (tracklet, tokens),
        }
    }

    /// The loss-only projector: [.., dim] -> [.., projection].
    pub fn project<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        self.proj2.forward(self.relu.forward(self.proj1.forward(x)))
    }
}

impl crate::model::weights::CheckConfig for TrackletEncoderConfig {
    fn check(&self) -> Result<(), String> {
        use crate::model::weights::{check_heads, check_size};
        check_size("frame_dim", self.frame_dim, 16384)?;
        check_size("dim", self.dim, 8192)?;
        check_size("layers", self.layers, 64)?;
        check_heads("tracklet", self.dim, self.heads)?;
        check_size("feed_forward", self.feed_forward, 65536)?;
        check_size("projection", self.projection, 8192)?;
        if self.residual && self.frame_dim != self.dim {
            return Err(format!(
                "a residual encoder needs frame_dim == dim ({} vs {})",
                self.frame_dim, self.dim
            ));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(format!("dropout is {}; it must be in [0, 1)", self.dropout));
        }
        Ok(())
    }
}

/// The whole tracklet model: the per-frame CNN on each crop, then the tracklet encoder.
#[derive(Config, Debug)]
pub struct TrackletModelConfig {
    pub backbone: FrameCnnConfig,
    pub encoder: TrackletEncoderConfig,
}

impl TrackletModelConfig {
    /// The shipped geometry: crops of `image_size` px, the default CNN and encoder.
    pub fn with_image_size(image_size: usize) -> TrackletModelConfig {
        let backbone = FrameCnnConfig::new().with_image_size(image_size);
        let encoder = TrackletEncoderConfig::new(backbone.output_dim());
        TrackletModelConfig::new(backbone, encoder)
    }

    pub fn init(&self, device: &Device) -> TrackletModel {
        TrackletModel {
            backbone: self.backbone.init(device),
            encoder: self.encoder.init(device),
        }
    }
}

#[derive(Module, Debug)]
pub struct TrackletModel {
    pub backbone: FrameCnn,
    pub encoder: TrackletEncoder,
}

impl TrackletModel {
    /// `frames`: [batch, n_frames, 3, size, size] normalised crops -> (tracklet embedding
    /// [batch, dim], frame tokens [batch, n_frames, dim]).
    pub fn forward(&self, frames: Tensor<5>) -> (Tensor<2>, Tensor<3>) {
        let [b, n, c, h, w] = frames.dims();
        let features = self.backbone.forward(frames.reshape([b * n, c, h, w])); // [b*n, f]
        let f = features.dims()[1];
        self.encoder.forward(features.reshape([b, n, f]))
    }
}

impl crate::model::weights::CheckConfig for TrackletModelConfig {
    fn check(&self) -> Result<(), String> {
        use crate::model::weights::check_size;
        check_size("image_size", self.backbone.image_size, 1024)?;
        if self.backbone.channels.is_empty() || self.backbone.channels.len() > 8 {
            return Err("the frame CNN needs 1 to 8 stages".into());
        }
        for &c in &self.backbone.channels {
            check_size("channels", c, 4096)?;
        }
        if self.encoder.frame_dim != self.backbone.output_dim() {
            return Err(format!(
                "the encoder takes {}-d frames, the CNN gives {}",
                self.encoder.frame_dim,
                self.backbone.output_dim()
            ));
        }
        self.encoder.check()
    }
}
