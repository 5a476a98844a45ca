//! Capsule captions (METHODS §2). So far: annotation refinement, the deterministic step from
//! a gastroenterologist's raw finding to a caption label and one of seven categories. The
//! entity list and category mapping are `assets/capsule_entities.toml`. Training, caption
//! retrieval and the classifier are still to come (issue #13).

use crate::data::vocabulary::{Vocabulary, VocabularyError};

/// The entity list shipped in `assets/capsule_entities.toml`.
pub const ENTITIES_TOML: &str = include_str!("../../assets/capsule_entities.toml");

/// The caption and category of a frame with no entity.
pub const NORMAL: &str = "normal";

/// The seven categories, in the order a classifier numbers them.
pub const CATEGORIES: [&str; 7] = [
    "inflammation",
    "polyp",
    "hemorrhoid",
    "biopsy lesion",
    "angioectasia",
    "lipoma",
    NORMAL,
];

/// A raw finding refined: the entities kept, the caption they make, its category.
#[derive(Debug, Clone, PartialEq)]
pub struct Refined {
    pub entities: Vec<String>,
    /// Entities in the list's order joined by ", "; "normal" when none.
    pub caption: String,
    pub category: String,
}

impl Refined {
    /// The text prompt a caption is encoded as.
    pub fn prompt(&self) -> String {
        format!("endoscopy image with {}", self.caption)
    }
}

/// Refines raw findings with an entity list.
#[derive(Debug, Clone)]
pub struct Refiner {
    entities: Vocabulary,
}

impl Default for Refiner {
    fn default() -> Refiner {
        Refiner::from_toml(ENTITIES_TOML).expect("the shipped entity list parses")
    }
}

impl Refiner {
    /// The shipped entity list, parsed once.
    pub fn shipped() -> &'static Refiner {
        static SHIPPED: std::sync::OnceLock<Refiner> = std::sync::OnceLock::new();
        SHIPPED.get_or_init(Refiner::default)
    }

    /// An entity list in the vocabulary format (aspects are categories, terms entities).
    /// Every category must be one of [`CATEGORIES`].
    pub fn from_toml(text: &str) -> Result<Refiner, VocabularyError> {
        let entities = Vocabulary::from_toml(text)?;
        if let Some(bad) = entities.aspects().iter().find(|a| !CATEGORIES.contains(a)) {
            return Err(VocabularyError::Invalid(format!(
                "'{bad}' is not one of the seven categories ({})",
                CATEGORIES.join(", ")
            )));
        }
        Ok(Refiner { entities })
    }

    pub fn refine(&self, raw: &str) -> Refined {
        let found = self.entities.describe(raw);
        let category = found
            .first()
            .map(|(category, _)| category.clone())
            .unwrap_or_else(|| NORMAL.to_string());
        let entities: Vec<String> = found.into_iter().map(|(_, e)| e).collect();
        let caption = if entities.is_empty() {
            NORMAL.to_string()
        } else {
            entities.join(", ")
        };
        Refined {
            entities,
            caption,
            category,
        }
    }
}
