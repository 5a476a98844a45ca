//! The caption model: a small CLIP dual encoder (ViT image tower, word-level text tower) whose
//! joint space ranks captions for a capsule frame, plus a category head, one logit per
//! category, on the image tower's embedding (trained with the tower frozen). The word tokenizer
//! travels in the config, so a card alone rebuilds the model.

use super::{CATEGORIES, Refiner};
use crate::model::clip::{Clip, ClipConfig};
use crate::model::preprocess::Preprocess;
use crate::model::text::TextEncoderConfig;
use crate::model::tokenizer::{PAD, UNKNOWN, WordTokenizer};
use crate::model::vit::{Positions, VitConfig};
use crate::model::weights::{self, ModelCard, ModelKind, WeightsError};
use burn::config::Config;
use burn::module::{Module, Param};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor, TensorData};
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
        CaptionModelConfig::new(ClipConfig::new(vision.into(), text), tokenizer)
    }

    pub fn image_size(&self) -> u32 {
        self.clip.vision.image_size() as u32
    }

    pub fn init(&self, device: &Device) -> CaptionModel {
        let dim = self.clip.vision.output_dim();
        CaptionModel {
            clip: self.clip.init(device),
            category: LinearConfig::new(dim, self.categories).init(device),
        }
    }

    /// A caption model whose towers start from another word-level dual encoder's (the text
    /// prompt model, Endo-CLIP: the capsule fine-tune then starts from a model pretrained on
    /// examination records, as METHODS §2 starts from CLIP). The image tower and the logit
    /// scale are copied whole; the text tower's blocks, final norm, projection and the first
    /// positions are copied, and so is the embedding of every word both vocabularies know (and
    /// of padding, unknown, start and end of text); the other words and the category head start
    /// as [`Self::init`] makes them (seed the device first). Returns the model and how many of
    /// this vocabulary's words were copied; an error names what does not fit.
    pub fn init_from(
        &self,
        source: &Clip,
        source_config: &ClipConfig,
        source_words: &WordTokenizer,
        device: &Device,
    ) -> Result<(CaptionModel, usize), String> {
        if json(&self.clip.vision) != json(&source_config.vision) {
            return Err(format!(
                "its image tower is not this model's (theirs: {}; ours: {})",
                json(&source_config.vision),
                json(&self.clip.vision)
            ));
        }
        let (ours, theirs) = (&self.clip.text, &source_config.text);
        let layers = |t: &TextEncoderConfig| {
            (
                t.width,
                t.depth,
                t.heads,
                t.mlp_ratio.to_bits(),
                t.activation,
                t.projection,
                t.layer_norm_eps.to_bits(),
            )
        };
        if layers(ours) != layers(theirs) {
            return Err(format!(
                "its text tower's layers are not this model's (theirs: width {}, {} blocks of {} \
                 heads, projection {:?}; ours: width {}, {} blocks of {} heads, projection {:?})",
                theirs.width,
                theirs.depth,
                theirs.heads,
                theirs.projection,
                ours.width,
                ours.depth,
                ours.heads,
                ours.projection
            ));
        }
        let mut model = self.init(device);
        model.clip.vision = source.vision.clone();
        model.clip.logit_scale = source.logit_scale.clone();
        let text = &mut model.clip.text;
        text.blocks = source.text.blocks.clone();
        text.final_norm = source.text.final_norm.clone();
        text.projection = source.text.projection.clone();
        let width = ours.width;
        // Positions: theirs where they have one, ours (fresh) beyond.
        let shared = ours.context.min(theirs.context);
        let mut positions = rows(text.positions.val());
        let source_positions = rows(source.text.positions.val());
        positions[..shared * width].copy_from_slice(&source_positions[..shared * width]);
        text.positions = Param::from_tensor(Tensor::from_data(
            TensorData::new(positions, [ours.context, width]),
            device,
        ));
        // Token embeddings by word.
        let mut table = rows(text.token_embedding.weight.val());
        let source_table = rows(source.text.token_embedding.weight.val());
        let mut copy = |to: usize, from: i64| {
            let from = from as usize;
            table[to * width..(to + 1) * width]
                .copy_from_slice(&source_table[from * width..(from + 1) * width]);
        };
        copy(PAD as usize, PAD);
        copy(UNKNOWN as usize, UNKNOWN);
        copy(
            self.tokenizer.start_of_text() as usize,
            source_words.start_of_text(),
        );
        copy(
            self.tokenizer.end_of_text() as usize,
            source_words.end_of_text(),
        );
        let mut words = 0;
        for (i, word) in self.tokenizer.words.iter().enumerate() {
            if let Some(j) = source_words.words.iter().position(|w| w == word) {
                copy(i + 2, j as i64 + 2);
                words += 1;
            }
        }
        text.token_embedding.weight = Param::from_tensor(Tensor::from_data(
            TensorData::new(table, [ours.vocab_size, width]),
            device,
        ));
        Ok((model, words))
    }
}

/// A 2-D tensor's values, row after row.
fn rows(t: Tensor<2>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .try_to_vec::<f32>()
        .expect("f32 values")
}

/// A config as JSON, to compare two (burn's `Config` derives no `PartialEq`).
fn json(config: &impl serde::Serialize) -> String {
    serde_json::to_string(config).unwrap_or_default()
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
/// side, CLIP's mean and std for a ViT, ImageNet's for a backbone (one function at training,
/// indexing and query time).
pub fn input(config: &CaptionModelConfig) -> Preprocess {
    match &config.clip.vision {
        crate::model::twin_encoder::TwinEncoderConfig::Vit(_) => {
            Preprocess::clip_squared(config.image_size())
        }
        crate::model::twin_encoder::TwinEncoderConfig::Backbone(_) => {
            Preprocess::imagenet(config.image_size())
        }
    }
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
