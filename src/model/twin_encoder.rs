//! The digital-twin image encoders, one type for the rest of the program: the phantom-trained
//! ViT (the first shipped encoders) or an ImageNet-pretrained MobileNetV2 whose tapped layers
//! are pooled and projected ([`BackboneTwin`]). A card's config says which: a backbone
//! encoder's config has a `backbone` field, a ViT's does not (older cards read unchanged).

use super::block::l2_normalize;
use super::mobilenet::{MobileNetV2, MobileNetV2Config};
use super::vit::{Vit, VitConfig};
use burn::config::Config;
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor};
use serde::{Deserialize, Serialize};

#[derive(Config, Debug, PartialEq)]
pub struct BackboneTwinConfig {
    pub backbone: MobileNetV2Config,
    /// Side of the square input crop, pixels.
    #[config(default = 224)]
    pub image_size: usize,
    /// Width of the learned projection; `None`: the pooled features themselves (the backbone
    /// off the shelf, without any training).
    pub projection: Option<usize>,
}

impl BackboneTwinConfig {
    pub fn output_dim(&self) -> usize {
        self.projection
            .unwrap_or_else(|| self.backbone.pooled_dim())
    }

    /// Random weights throughout (the untrained architecture).
    pub fn init(&self, device: &Device) -> BackboneTwin {
        BackboneTwin {
            backbone: self.backbone.init(device),
            projection: self
                .projection
                .map(|d| LinearConfig::new(self.backbone.pooled_dim(), d).init(device)),
            taps: self.backbone.taps.len(),
        }
    }
}

impl crate::model::weights::CheckConfig for BackboneTwinConfig {
    fn check(&self) -> Result<(), String> {
        self.backbone.check()?;
        crate::model::weights::check_size("image size", self.image_size, 1024)?;
        if self.image_size < 32 {
            return Err(format!(
                "image size {} is below MobileNetV2's 32 px",
                self.image_size
            ));
        }
        if let Some(d) = self.projection {
            crate::model::weights::check_size("projection", d, 8192)?;
        }
        Ok(())
    }
}

/// A pretrained backbone's tapped layers, each pooled over the image and scaled to unit
/// length divided by the square root of the number of taps (so that every layer weighs the
/// same whatever its channel count and the concatenation has unit length), then projected.
#[derive(Module, Debug)]
pub struct BackboneTwin {
    pub backbone: MobileNetV2,
    pub projection: Option<Linear>,
    pub taps: usize,
}

impl BackboneTwin {
    /// [batch, 3, size, size] -> the balanced pooled features [batch, pooled_dim] (each
    /// tapped layer a unit vector / sqrt(taps)).
    pub fn features(&self, images: Tensor<4>) -> Tensor<2> {
        let scale = 1.0 / (self.taps as f32).sqrt();
        let parts: Vec<Tensor<2>> = self
            .backbone
            .forward_taps(images)
            .into_iter()
            .map(|t| {
                let [b, c, h, w] = t.dims();
                l2_normalize(t.reshape([b, c, h * w]).mean_dim(2).reshape([b, c])) * scale
            })
            .collect();
        Tensor::cat(parts, 1)
    }

    /// Balanced pooled features [batch, pooled_dim] -> embeddings [batch, output_dim] (not
    /// normalised): the projection, or the features themselves.
    pub fn project(&self, features: Tensor<2>) -> Tensor<2> {
        match &self.projection {
            Some(p) => p.forward(features),
            None => features,
        }
    }

    /// [batch, 3, size, size] -> embeddings [batch, output_dim] (not normalised).
    pub fn forward(&self, images: Tensor<4>) -> Tensor<2> {
        self.project(self.features(images))
    }
}

/// Which encoder a twin image card holds; also a dual encoder's image tower
/// ([`super::clip::ClipConfig::vision`]).
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(untagged)]
pub enum TwinEncoderConfig {
    Backbone(BackboneTwinConfig),
    Vit(VitConfig),
}

impl From<VitConfig> for TwinEncoderConfig {
    fn from(c: VitConfig) -> Self {
        TwinEncoderConfig::Vit(c)
    }
}

impl From<BackboneTwinConfig> for TwinEncoderConfig {
    fn from(c: BackboneTwinConfig) -> Self {
        TwinEncoderConfig::Backbone(c)
    }
}

impl TwinEncoderConfig {
    pub fn init(&self, device: &Device) -> TwinEncoder {
        match self {
            TwinEncoderConfig::Backbone(c) => TwinEncoder::Backbone(c.init(device)),
            TwinEncoderConfig::Vit(c) => TwinEncoder::Vit(c.init(device)),
        }
    }

    pub fn output_dim(&self) -> usize {
        match self {
            TwinEncoderConfig::Backbone(c) => c.output_dim(),
            TwinEncoderConfig::Vit(c) => c.output_dim(),
        }
    }

    pub fn image_size(&self) -> usize {
        match self {
            TwinEncoderConfig::Backbone(c) => c.image_size,
            TwinEncoderConfig::Vit(c) => c.image_size,
        }
    }

    /// The ViT's config, for what only a ViT encoder has (masked reconstruction in training).
    pub fn vit(&self) -> Option<&VitConfig> {
        match self {
            TwinEncoderConfig::Vit(c) => Some(c),
            TwinEncoderConfig::Backbone(_) => None,
        }
    }
}

impl crate::model::weights::CheckConfig for TwinEncoderConfig {
    fn check(&self) -> Result<(), String> {
        match self {
            TwinEncoderConfig::Backbone(c) => c.check(),
            TwinEncoderConfig::Vit(c) => c.check(),
        }
    }
}

/// A loaded twin image encoder (one per loaded model set: the variants' sizes differ and
/// that costs nothing here).
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum TwinEncoder {
    Vit(Vit),
    Backbone(BackboneTwin),
}

impl TwinEncoder {
    /// [batch, 3, size, size] -> embeddings [batch, output_dim] (not normalised).
    pub fn forward(&self, images: Tensor<4>) -> Tensor<2> {
        match self {
            TwinEncoder::Vit(v) => v.forward(images),
            TwinEncoder::Backbone(b) => b.forward(images),
        }
    }

    /// `images` [batch, 3, size, size] -> unit embeddings [batch, output_dim], each the
    /// normalised mean of the unit embeddings of the image turned by 0, 1/turns, 2/turns ...
    /// of a full turn (`turns` 1, 2 or 4), all turns in one forward.
    pub fn forward_turned(&self, images: Tensor<4>, turns: u32) -> Tensor<2> {
        turned(images, turns, |x| self.forward(x))
    }
}

/// The normalised mean over `turns` quarter turns (1, 2 or 4) of `encode`'s unit embeddings,
/// every turn in one call of `encode`: [batch, 3, s, s] -> [batch, dim].
pub fn turned(images: Tensor<4>, turns: u32, encode: impl Fn(Tensor<4>) -> Tensor<2>) -> Tensor<2> {
    let [batch, _, _, _] = images.dims();
    let (all, count) = turn_batch(images, turns);
    l2_normalize(mean_over_turns(l2_normalize(encode(all)), count, batch))
}

/// `images` and its turns stacked turn after turn: ([turns * batch, 3, s, s], turns).
fn turn_batch(images: Tensor<4>, turns: u32) -> (Tensor<4>, usize) {
    let turned: Vec<Tensor<4>> = match turns {
        2 => vec![images.clone(), images.flip([2, 3])],
        4 => {
            let mut all = vec![images.clone()];
            let mut turned = images;
            for _ in 0..3 {
                // A quarter turn: transpose the pixel grid, then mirror its columns.
                turned = turned.swap_dims(2, 3).flip([3]);
                all.push(turned.clone());
            }
            all
        }
        _ => return (images, 1),
    };
    let count = turned.len();
    (Tensor::cat(turned, 0), count)
}

/// [count * batch, dim] stacked turn after turn -> the mean over turns [batch, dim].
fn mean_over_turns(all: Tensor<2>, count: usize, batch: usize) -> Tensor<2> {
    if count == 1 {
        return all;
    }
    let [_, dim] = all.dims();
    all.reshape([count, batch, dim])
        .sum_dim(0)
        .reshape([batch, dim])
        / count as f32
}

impl TwinEncoder {
    /// [`TwinEncoder::forward_turned`] and, from the same pass, what the input's familiarity
    /// is judged on [batch, f]: a backbone encoder's balanced pooled features (before the
    /// projection, which is trained to ignore much of what tells a polyp from a grey card),
    /// averaged over the turns; the ViT's unit embedding itself.
    pub fn forward_turned_features(&self, images: Tensor<4>, turns: u32) -> (Tensor<2>, Tensor<2>) {
        match self {
            TwinEncoder::Vit(_) => {
                let z = self.forward_turned(images, turns);
                (z.clone(), z)
            }
            TwinEncoder::Backbone(b) => {
                let [batch, _, _, _] = images.dims();
                let (all, count) = turn_batch(images, turns);
                let features = b.features(all);
                let z = l2_normalize(b.project(features.clone()));
                (
                    l2_normalize(mean_over_turns(z, count, batch)),
                    mean_over_turns(features, count, batch),
                )
            }
        }
    }
}

/// Loads a twin image encoder card (either kind of encoder) and its record.
pub fn load(
    path: &std::path::Path,
    device: &Device,
) -> Result<(TwinEncoder, TwinEncoderConfig, super::weights::ModelCard), super::weights::WeightsError>
{
    use super::weights::{self, ModelKind};
    let card = weights::read_card(path)?;
    // The kind first: another model's card is named as such, not as a config that does not
    // parse (round 11 N16: "untagged enum TwinEncoderConfig").
    if card.kind != ModelKind::ImageEncoder {
        return Err(weights::WeightsError::Kind {
            path: path.to_path_buf(),
            expected: ModelKind::ImageEncoder,
            found: card.kind,
        });
    }
    let config: TwinEncoderConfig = card.config(path)?;
    let (encoder, card) = match &config {
        TwinEncoderConfig::Vit(_) => {
            let (m, card) = weights::load(path, ModelKind::ImageEncoder, |c: &VitConfig| {
                c.init(device)
            })?;
            (TwinEncoder::Vit(m), card)
        }
        TwinEncoderConfig::Backbone(_) => {
            let (m, card) =
                weights::load(path, ModelKind::ImageEncoder, |c: &BackboneTwinConfig| {
                    c.init(device)
                })?;
            (TwinEncoder::Backbone(m), card)
        }
    };
    Ok((encoder, config, card))
}
