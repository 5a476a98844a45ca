//! The text-prompt model (Endo-CLIP, METHODS §1): a small CLIP dual encoder (ViT image tower,
//! word-level text tower) and stage 3's cross-attention unifier. The word tokenizer travels in
//! the config, so a card alone rebuilds the model; words it never saw read as "unknown".
//! A CLIP imported from Hugging Face (`endotwin import clip`) loads as a prompt model too: it
//! reads text with CLIP's own byte-pair encoding, and has no unifier of its own (it is never
//! trained by stage 3 here), so the panel, `prompts score|search` and `eval` take either.

use super::Vocabulary;
use crate::model::clip::{Clip, ClipConfig};
use crate::model::preprocess::Preprocess;
use crate::model::text::ClipTokenizer;
use crate::model::text::TextEncoderConfig;
use crate::model::tokenizer::WordTokenizer;
use crate::model::twin_encoder::TwinEncoderConfig;
use crate::model::unifier::{Unifier, UnifierConfig};
use crate::model::vit::{Positions, VitConfig};
use crate::model::weights::{self, ModelCard, ModelKind, WeightsError};
use burn::config::Config;
use burn::module::Module;
use burn::tensor::activation::softmax;
use burn::tensor::{Device, Tensor};
use std::path::{Path, PathBuf};

/// The shipped stage-3 model (benign vs neoplastic, text search) in `models/`.
pub const SHIPPED_NAME: &str = "prompts";
/// The shipped stage-1 model (polyp vs background: detection, the video strip).
pub const SHIPPED_DETECTOR: &str = "prompts-detect";

/// Stage 1's fixed sentences (METHODS §1), also the zero-shot detection prompts.
pub const POLYP_SENTENCE: &str = "This is a colon with polyps.";
pub const BACKGROUND_SENTENCE: &str = "This is a normal background.";

#[derive(Config, Debug)]
pub struct PromptModelConfig {
    pub clip: ClipConfig,
    pub tokenizer: PromptTokenizer,
    pub unifier: UnifierConfig,
}

/// How a prompt model reads text.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
#[serde(untagged)]
pub enum PromptTokenizer {
    /// Our word-level tokenizer, its vocabulary in the card (the models trained here).
    Words(WordTokenizer),
    /// A tokenizer known by name (the card says `"clip-bpe"`).
    Named(NamedTokenizer),
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq)]
pub enum NamedTokenizer {
    /// CLIP's byte-pair encoding, 49408 ids (an imported Hugging Face CLIP).
    #[serde(rename = "clip-bpe")]
    ClipBpe,
}

/// CLIP's BPE id space: 49406 pieces, start and end of text.
pub const CLIP_BPE_IDS: usize = 49408;

impl PromptTokenizer {
    /// Size of the id space the text tower's embedding must have.
    pub fn vocab_size(&self) -> usize {
        match self {
            PromptTokenizer::Words(w) => w.vocab_size(),
            PromptTokenizer::Named(NamedTokenizer::ClipBpe) => CLIP_BPE_IDS,
        }
    }

    /// Start, the text's tokens (cut to fit), end, padding to `context`.
    pub fn encode(&self, text: &str, context: usize) -> Vec<i64> {
        match self {
            PromptTokenizer::Words(w) => w.encode(text, context),
            PromptTokenizer::Named(NamedTokenizer::ClipBpe) => {
                ClipTokenizer::shared().encode(text, context)
            }
        }
    }

    /// How many tokens `text` takes, start and end of text not counted.
    pub fn pieces(&self, text: &str) -> usize {
        match self {
            PromptTokenizer::Words(w) => w.pieces(text),
            PromptTokenizer::Named(NamedTokenizer::ClipBpe) => ClipTokenizer::shared().pieces(text),
        }
    }

    /// `texts` -> [n, context] token ids on `device`.
    pub fn batch(
        &self,
        texts: &[&str],
        context: usize,
        device: &Device,
    ) -> Tensor<2, burn::tensor::Int> {
        let ids: Vec<i64> = texts.iter().flat_map(|t| self.encode(t, context)).collect();
        Tensor::from_data(
            burn::tensor::TensorData::new(ids, [texts.len(), context]),
            device,
        )
    }

    /// The word vocabulary, for a model trained here.
    pub fn words(&self) -> Option<&WordTokenizer> {
        match self {
            PromptTokenizer::Words(w) => Some(w),
            PromptTokenizer::Named(_) => None,
        }
    }
}

impl PromptModelConfig {
    /// Our default: a 64 px ViT (patch 8, width 128, 4 blocks of 4 heads) and the small
    /// word-level text encoder (context 48), both projecting to 128; the tokenizer knows
    /// `corpus`'s words (the training reports), the vocabulary's phrases and the stage-1
    /// sentences.
    pub fn small<'a>(corpus: impl IntoIterator<Item = &'a str>) -> PromptModelConfig {
        let tokenizer = prompt_tokenizer(corpus);
        let dim = 128;
        let vision = VitConfig::new(64, 8, 128, 4, 4)
            .with_positions(Positions::SinCos)
            .with_activation(crate::model::block::Activation::Gelu)
            .with_norm_before_blocks(false)
            .with_projection(Some(dim));
        let text = TextEncoderConfig::word_small(tokenizer.vocab_size(), dim).with_context(48);
        PromptModelConfig::new(
            ClipConfig::new(vision.into(), text),
            PromptTokenizer::Words(tokenizer),
            UnifierConfig::new(dim),
        )
    }

    /// The same model with another image input: `size` px cut into `patch` px patches.
    /// (A ViT tower; a backbone tower is left as it is.)
    pub fn with_image(mut self, size: usize, patch: usize) -> PromptModelConfig {
        if let TwinEncoderConfig::Vit(v) = &mut self.clip.vision {
            v.image_size = size;
            v.patch_size = patch;
        }
        self
    }

    pub fn image_size(&self) -> u32 {
        self.clip.vision.image_size() as u32
    }

    /// How a frame becomes this model's image input: resized to a square, normalised as its
    /// tower learned (CLIP's statistics for a ViT, ImageNet's for a backbone).
    pub fn input(&self) -> Preprocess {
        match &self.clip.vision {
            TwinEncoderConfig::Vit(v) => input(v.image_size as u32),
            TwinEncoderConfig::Backbone(b) => Preprocess::imagenet(b.image_size as u32),
        }
    }

    pub fn init(&self, device: &Device) -> PromptModel {
        PromptModel {
            clip: self.clip.init(device),
            unifier: self.unifier.init(device),
        }
    }

    /// `texts` as token ids for the text tower: [n, context].
    pub fn tokens(&self, texts: &[&str], device: &Device) -> Tensor<2, burn::tensor::Int> {
        self.tokenizer.batch(texts, self.clip.text.context, device)
    }
}

/// Whether `config` reads only the two stage-1 sentences (a detector made by `train
/// detector-backbone`): it is the library's detector, never its prompt model.
pub fn is_detector_only(config: &PromptModelConfig) -> bool {
    let fixed = WordTokenizer::from_corpus([POLYP_SENTENCE, BACKGROUND_SENTENCE], 1);
    config
        .tokenizer
        .words()
        .is_some_and(|w| w.words.iter().all(|word| fixed.words.contains(word)))
}

/// Words of `corpus`, of every vocabulary phrase and of the fixed sentences.
pub fn prompt_tokenizer<'a>(corpus: impl IntoIterator<Item = &'a str>) -> WordTokenizer {
    let vocabulary = Vocabulary::default();
    let phrases = vocabulary.phrases();
    let fixed = [POLYP_SENTENCE, BACKGROUND_SENTENCE];
    let mut texts: Vec<String> = corpus.into_iter().map(str::to_string).collect();
    texts.extend(phrases);
    texts.extend(fixed.iter().map(|s| s.to_string()));
    WordTokenizer::from_corpus(texts.iter().map(String::as_str), 1)
}

impl weights::CheckConfig for PromptModelConfig {
    fn check(&self) -> Result<(), String> {
        self.clip.check()?;
        self.unifier.check()?;
        if self.tokenizer.vocab_size() != self.clip.text.vocab_size {
            return Err(format!(
                "the tokenizer's {} ids do not match the text tower's vocabulary of {}",
                self.tokenizer.vocab_size(),
                self.clip.text.vocab_size
            ));
        }
        if Some(self.unifier.dim) != self.clip.embed_dim() {
            return Err(format!(
                "the unifier's width {} is not the joint space's",
                self.unifier.dim
            ));
        }
        Ok(())
    }
}

#[derive(Module, Debug)]
pub struct PromptModel {
    pub clip: Clip,
    pub unifier: Unifier,
}

impl PromptModel {
    /// `images` [n, 3, s, s] (normalised by [`input`]) -> unit embeddings [n, dim].
    pub fn encode_images(&self, images: Tensor<4>) -> Tensor<2> {
        self.clip.encode_images(images)
    }

    /// [`PromptModel::encode_images`] and the familiarity features of the same pass
    /// ([`crate::model::clip::Clip::encode_images_with_features`]).
    pub fn encode_images_with_features(&self, images: Tensor<4>) -> (Tensor<2>, Tensor<2>) {
        self.clip.encode_images_with_features(images)
    }

    /// Token ids [n, context] -> unit embeddings [n, dim].
    pub fn encode_texts(&self, tokens: Tensor<2, burn::tensor::Int>) -> Tensor<2> {
        self.clip.encode_texts(tokens)
    }
}

/// The two fixed sentences' unit embeddings [2, d]: polyp first.
pub fn detection_texts(
    model: &PromptModel,
    config: &PromptModelConfig,
    device: &Device,
) -> Tensor<2> {
    model.encode_texts(config.tokens(&[POLYP_SENTENCE, BACKGROUND_SENTENCE], device))
}

/// Softmax probability of the polyp sentence for each image row of `v` [n, d].
pub fn polyp_probability(model: &PromptModel, v: Tensor<2>, texts: Tensor<2>) -> Vec<f32> {
    let p = softmax(model.clip.logits(v, texts), 1); // [n, 2]
    let [n, _] = p.dims();
    p.slice([0..n, 0..1])
        .into_data()
        .try_to_vec::<f32>()
        .expect("f32 probabilities")
}

/// How a frame becomes the image tower's input: resized to a square of `size`, CLIP's mean
/// and std (one function at training, indexing and query time).
pub fn input(size: u32) -> Preprocess {
    Preprocess::clip_squared(size)
}

/// A loaded prompt model with its card.
pub struct LoadedPromptModel {
    pub model: PromptModel,
    pub config: PromptModelConfig,
    pub card: ModelCard,
}

impl LoadedPromptModel {
    /// "name (version)", how the panel and the CLI name the model.
    pub fn named(&self) -> String {
        format!("{} ({})", self.card.name, self.card.version)
    }
}

/// Loads the prompt model of the card at `path` onto `device`: a prompt model trained here, or
/// a CLIP imported from Hugging Face (CLIP's BPE; its text tower must have CLIP's 49408 ids,
/// else it is refused by name).
pub fn load(path: &Path, device: &Device) -> Result<LoadedPromptModel, WeightsError> {
    let card = weights::read_card(path)?;
    if card.kind == ModelKind::Clip {
        let (clip, card) = weights::load(path, ModelKind::Clip, |c: &ClipConfig| c.init(device))?;
        let clip_config: ClipConfig = card.config(path)?;
        let refuse = |reason: String| WeightsError::Card {
            path: path.to_path_buf(),
            reason,
        };
        if clip_config.text.vocab_size != CLIP_BPE_IDS {
            return Err(refuse(format!(
                "its text tower reads {} token ids, not CLIP's {CLIP_BPE_IDS}, so it cannot read \
                 prompts with CLIP's tokenizer",
                clip_config.text.vocab_size
            )));
        }
        let dim = clip_config.embed_dim().ok_or_else(|| {
            refuse("its image and text towers do not project to one space".into())
        })?;
        let config = PromptModelConfig::new(
            clip_config,
            PromptTokenizer::Named(NamedTokenizer::ClipBpe),
            UnifierConfig::new(dim),
        );
        // Unused outside stage 3, which never trains an imported CLIP: a fresh one fills the slot.
        let unifier = config.unifier.init(device);
        return Ok(LoadedPromptModel {
            model: PromptModel { clip, unifier },
            config,
            card,
        });
    }
    let (model, card) = weights::load(path, ModelKind::PromptModel, |c: &PromptModelConfig| {
        c.init(device)
    })?;
    let config: PromptModelConfig = card.config(path)?;
    Ok(LoadedPromptModel {
        model,
        config,
        card,
    })
}

/// The shipped stage-3 model's card in `models`.
pub fn shipped_path(models: &Path) -> PathBuf {
    models.join(format!("{SHIPPED_NAME}.json"))
}

/// The shipped stage-1 (detection) model's card in `models`.
pub fn detector_path(models: &Path) -> PathBuf {
    models.join(format!("{SHIPPED_DETECTOR}.json"))
}
