//! Capsule captions (METHODS §2): annotation refinement (re-exported from
//! [`crate::data::refine`], where every caption writer reaches it), the caption model (a CLIP
//! dual encoder fine-tuned with the multi-positive KL loss, plus a category head on its image
//! tower), the library's capsule frames as training and evaluation data, and queries: a
//! frame's top captions and categories, frames for a caption.

pub mod data;
pub mod model;
pub mod query;
pub mod trust;

pub use crate::data::refine::{CATEGORIES, ENTITIES_TOML, NORMAL, Refined, Refiner};
