//! Text prompts (Endo-CLIP, METHODS §1). So far: the clinical attribute vocabulary and its
//! extractor, which stage 2 (attunement) and stage 3 (unification) take their soft targets
//! from. Training, zero-shot scores and the prompt panel are still to come (issue #12).

pub mod vocabulary;

pub use vocabulary::{Term, Vocabulary, VocabularyError};
