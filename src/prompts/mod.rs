//! Text prompts (Endo-CLIP, METHODS §1). So far: the clinical attribute vocabulary
//! (`assets/vocabulary.toml`, read by [`crate::data::vocabulary::Vocabulary`]), which stage 2
//! (attunement) and stage 3 (unification) take their soft targets from, and the losses in
//! `train::dual_losses`. Training, zero-shot scores and the prompt panel are still to come
//! (issue #12).

pub use crate::data::vocabulary::{Term, Vocabulary, VocabularyError};
