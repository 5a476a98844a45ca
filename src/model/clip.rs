//! The dual encoder (CLIP): the ViT image tower and the text tower project into one space;
//! a learnable logit scale (stored as its log, as in CLIP) sharpens their cosine similarities.

use super::text::{TextEncoder, TextEncoderConfig};
use super::vit::{Vit, VitConfig};
use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{Device, Int, Tensor, TensorData};

#[derive(Config, Debug)]
pub struct ClipConfig {
    pub vision: VitConfig,
    pub text: TextEncoderConfig,
    /// Initial log of the logit scale: ln(1 / 0.07), CLIP's starting temperature.
    #[config(default = 2.6592)]
    pub logit_scale_init: f64,
}

impl ClipConfig {
    /// `openai/clip-vit-base-patch32`.
    pub fn clip_b32() -> ClipConfig {
        ClipConfig::new(VitConfig::clip_b32(), TextEncoderConfig::clip_b32())
    }

    /// Dimension of the joint space; both towers must project to it.
    pub fn embed_dim(&self) -> Option<usize> {
        let image = self.vision.output_dim();
        let text = self.text.output_dim();
        (image == text).then_some(image)
    }

    pub fn init(&self, device: &Device) -> Clip {
        assert!(
            self.embed_dim().is_some(),
            "image ({}) and text ({}) towers must project to one dimension",
            self.vision.output_dim(),
            self.text.output_dim()
        );
        Clip {
            vision: self.vision.init(device),
            text: self.text.init(device),
            logit_scale: Param::from_tensor(Tensor::from_data(
                TensorData::new(vec![self.logit_scale_init as f32], [1]),
                device,
            )),
        }
    }
}

#[derive(Module, Debug)]
pub struct Clip {
    pub vision: Vit,
    pub text: TextEncoder,
    /// log of the logit scale, [1].
    pub logit_scale: Param<Tensor<1>>,
}

impl Clip {
    /// `images`: [batch, 3, size, size] (CLIP-normalised) -> unit embeddings [batch, dim].
    pub fn encode_images(&self, images: Tensor<4>) -> Tensor<2> {
        l2_normalize(self.vision.forward(images))
    }

    /// `tokens`: [batch, length] -> unit embeddings [batch, dim].
    pub fn encode_texts(&self, tokens: Tensor<2, Int>) -> Tensor<2> {
        l2_normalize(self.text.forward(tokens))
    }

    /// The scale CLIP multiplies cosines by, clamped to 100 as in CLIP's training.
    pub fn scale(&self) -> Tensor<1> {
        self.logit_scale.val().exp().clamp_max(100.0)
    }

    /// Unit image [n, dim] and text [m, dim] embeddings -> image-to-text logits [n, m]
    /// (transpose for text-to-image).
    pub fn logits(&self, images: Tensor<2>, texts: Tensor<2>) -> Tensor<2> {
        images.matmul(texts.transpose()) * self.scale().unsqueeze::<2>()
    }
}

/// Rows scaled to unit length (defined with the shared block, below every encoder).
pub use super::block::l2_normalize;

impl crate::model::weights::CheckConfig for ClipConfig {
    fn check(&self) -> Result<(), String> {
        self.vision.check()?;
        self.text.check()?;
        crate::model::weights::check_real("logit_scale_init", self.logit_scale_init, -10.0, 10.0)?;
        if self.embed_dim().is_none() {
            return Err(format!(
                "image ({}) and text ({}) towers must project to one dimension",
                self.vision.output_dim(),
                self.text.output_dim()
            ));
        }
        Ok(())
    }
}
