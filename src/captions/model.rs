//! The caption model: a small CLIP dual encoder (ViT image tower, word-level text tower) whose
//! joint space ranks captions for a capsule frame, plus a category head, one logit per
//! category, on the image tower's embedding (trained with the tower frozen). The word tokenizer
//! travels in the config, so a card alone rebuilds the model.

use super::{CATEGORIES, Refiner};
use crate::model::clip::{Clip, ClipConfig};
use crate::model::preprocess::Preprocess;
use crate::model::text::TextEncoderConfig;
use crate::model::tokenizer::WordTokenizer;
use crate::model::vit::{Positions, VitConfig};
use crate::model::weights::{self, ModelCard, ModelKind, WeightsError};
use burn::config::Config;
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor};
use std::path::Path;

/// The shipped caption model's name in `models/`.
pub const SHIPPED_NAME: &str = "captions";

/// The template every caption is encoded in (METHODS §2).
pub fn prompt(caption: &str) -> String {
    format!("endoscopy image with {caption}")
}

#[derive(Config, Debug)]
pub struct CaptionModelConfig {
    pub clip: ClipConfig,
    pub tokenizer: WordTokenizer,
    /// One logit per entry of [`CATEGORIES`].
    #[config(default = 7)]
    pub categories: usize,
}

impl CaptionModelConfig {
    /// Our default: a 64 px ViT (patch 8, width 128, 4 blocks of 4 heads, sin-cos positions)
    /// and the small word-level text encoder, both projecting to 128; the vocabulary is the
    /// shipped entity list's words and the prompt template's.
    pub fn small() -> CaptionModelConfig {
        let tokenizer = caption_tokenizer(Refiner::shipped());
        let dim = 128;
        let vision = VitConfig::new(64, 8, 128, 4, 4)
            .with_positions(Positions::SinCos)
            .with_activation(crate::model::block::Activation::Gelu)
            .with_norm_before_blocks(false)
            .with_projection(Some(dim));
        let text = TextEncoderConfig::word_small(tokenizer.vocab_size(), dim);
        CaptionModelConfig::new(ClipConfig::new(vision, text), tokenizer)
    }

    pub fn image_size(&self) -> u32 {
        self.clip.vision.image_size as u32
    }

    pub fn init(&self, device: &Device) -> CaptionModel {
        let dim = self.clip.vision.output_dim();
        CaptionModel {
            clip: self.clip.init(device),
            category: LinearConfig::new(dim, self.categories).init(device),
        }
    }
}

/// Words of every entity name and of the prompt template: the closed vocabulary captions use.
pub fn caption_tokenizer(refiner: &Refiner) -> WordTokenizer {
    let mut corpus: Vec<String> = refiner.entity_names().iter().map(|e| prompt(e)).collect();
    corpus.push(prompt(super::NORMAL));
    WordTokenizer::from_corpus(corpus.iter().map(String::as_str), 1)
}

impl weights::CheckConfig for CaptionModelConfig {
    fn check(&self) -> Result<(), String> {
        self.clip.check()?;
        if self.categories != CATEGORIES.len() {
            return Err(format!(
                "categories {} (the head has one logit per category: {})",
                self.categories,
                CATEGORIES.len()
            ));
        }
        if self.tokenizer.vocab_size() != self.clip.text.vocab_size {
            return Err(format!(
                "the tokenizer's {} ids do not match the text tower's vocabulary of {}",
                self.tokenizer.vocab_size(),
                self.clip.text.vocab_size
            ));
        }
        Ok(())
    }
}

#[derive(Module, Debug)]
pub struct CaptionModel {
    pub clip: Clip,
    pub category: Linear,
}

impl CaptionModel {
    /// `images` [n, 3, s, s] (normalised by [`input`]) -> unit embeddings [n, dim].
    pub fn encode_images(&self, images: Tensor<4>) -> Tensor<2> {
        self.clip.encode_images(images)
    }

    /// Category logits of unit image embeddings: [n, dim] -> [n, categories].
    pub fn category_logits(&self, embeddings: Tensor<2>) -> Tensor<2> {
        self.category.forward(embeddings)
    }
}

/// How a capsule frame becomes the image tower's input: resized to a square of the model's
/// side, CLIP's mean and std (one function at training, indexing and query time).
pub fn input(config: &CaptionModelConfig) -> Preprocess {
    Preprocess::clip_squared(config.image_size())
}

/// A loaded caption model with its card.
pub struct LoadedCaptionModel {
    pub model: CaptionModel,
    pub config: CaptionModelConfig,
    pub card: ModelCard,
}

/// Loads the caption model of the card at `path` onto `device`.
pub fn load(path: &Path, device: &Device) -> Result<LoadedCaptionModel, WeightsError> {
    let (model, card) = weights::load(path, ModelKind::CaptionModel, |c: &CaptionModelConfig| {
        c.init(device)
    })?;
    let config: CaptionModelConfig = card.config(path)?;
    Ok(LoadedCaptionModel {
        model,
        config,
        card,
    })
}

/// The shipped caption model in `models`, when it is there.
pub fn shipped_path(models: &Path) -> std::path::PathBuf {
    models.join(format!("{SHIPPED_NAME}.json"))
}
