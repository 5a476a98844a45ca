//! The dual encoder (CLIP): the image tower and the text tower project into one space; a
//! learnable logit scale (stored as its log, as in CLIP) sharpens their cosine similarities.
//! The image tower is a ViT (CLIP's own, the models trained here from scratch) or an
//! ImageNet MobileNetV2 whose pooled layers are projected ([`BackboneTwin`]); a card's config
//! says which (a backbone tower's has a `backbone` field, older cards read unchanged).

use super::text::{TextEncoder, TextEncoderConfig};
use super::twin_encoder::{BackboneTwin, TwinEncoderConfig};
use super::vit::{Vit, VitConfig};
use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{Device, Int, Tensor, TensorData};

#[derive(Config, Debug)]
pub struct ClipConfig {
    /// The image tower: a ViT or a projected ImageNet backbone.
    pub vision: TwinEncoderConfig,
    pub text: TextEncoderConfig,
    /// Initial log of the logit scale: ln(1 / 0.07), CLIP's starting temperature.
    #[config(default = 2.6592)]
    pub logit_scale_init: f64,
}

impl ClipConfig {
    /// `openai/clip-vit-base-patch32`.
    pub fn clip_b32() -> ClipConfig {
        ClipConfig::new(VitConfig::clip_b32().into(), TextEncoderConfig::clip_b32())
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
        let (vision, backbone) = match &self.vision {
            TwinEncoderConfig::Vit(c) => (Some(c.init(device)), None),
            TwinEncoderConfig::Backbone(c) => (None, Some(c.init(device))),
        };
        Clip {
            vision,
            backbone,
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
    /// The ViT image tower (its record keys are `vision.*`, as before backbones), or None.
    pub vision: Option<Vit>,
    /// The ImageNet backbone image tower (`backbone.*`), or None.
    pub backbone: Option<BackboneTwin>,
    pub text: TextEncoder,
    /// log of the logit scale, [1].
    pub logit_scale: Param<Tensor<1>>,
}

impl Clip {
    /// `images`: [batch, 3, size, size] (CLIP-normalised) -> unit embeddings [batch, dim].
    pub fn encode_images(&self, images: Tensor<4>) -> Tensor<2> {
        match (&self.vision, &self.backbone) {
            (Some(vit), _) => l2_normalize(vit.forward(images)),
            (None, Some(backbone)) => l2_normalize(backbone.forward(images)),
            (None, None) => unreachable!("a Clip is made with one image tower"),
        }
    }

    /// [`Clip::encode_images`] and, from the same pass, what an input's familiarity is measured
    /// on: a backbone tower's balanced pooled features before the projection (a projection
    /// trained on two sentences keeps little of what tells a frame from a grey card), a ViT
    /// tower's embedding itself. -> ([batch, dim], [batch, features]).
    pub fn encode_images_with_features(&self, images: Tensor<4>) -> (Tensor<2>, Tensor<2>) {
        match (&self.vision, &self.backbone) {
            (Some(vit), _) => {
                let e = l2_normalize(vit.forward(images));
                (e.clone(), e)
            }
            (None, Some(backbone)) => {
                let f = backbone.features(images);
                (l2_normalize(backbone.project(f.clone())), f)
            }
            (None, None) => unreachable!("a Clip is made with one image tower"),
        }
    }

    /// The ViT image tower (None for a backbone tower).
    pub fn vit(&self) -> Option<&Vit> {
        self.vision.as_ref()
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
