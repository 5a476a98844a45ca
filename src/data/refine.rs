//! Annotation refinement of capsule findings (METHODS §2): the deterministic step from a
//! gastroenterologist's raw finding to a caption label and its categories, over the entity list
//! and category mapping of `assets/capsule_entities.toml`. It lives with the data so that every
//! writer of a caption (importers, the phantom) stores the refinement beside the raw text;
//! `captions` re-exports it.

use crate::data::vocabulary::{Vocabulary, VocabularyError};

/// The entity list shipped in `assets/capsule_entities.toml`.
pub const ENTITIES_TOML: &str = include_str!("../../assets/capsule_entities.toml");

/// The caption and category of a frame with no entity.
pub const NORMAL: &str = "normal";

/// The seven categories, in the order a classifier numbers them (the precedence of
/// [`Refined::category`] is the entity list's order, [`Refiner::precedence`]).
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
    /// The category under the list's precedence (the first category with an entity).
    pub category: String,
    /// Every category an entity of the caption maps to, in precedence order; `["normal"]`
    /// when none (a caption can name several: "polyp, erosion").
    pub categories: Vec<String>,
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

    /// The categories in precedence order (the entity list's), "normal" last.
    pub fn precedence(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .entities
            .aspects()
            .iter()
            .map(|a| a.to_string())
            .collect();
        out.push(NORMAL.to_string());
        out
    }

    /// The list's entity names (canonical), in order.
    pub fn entity_names(&self) -> Vec<String> {
        self.entities
            .terms()
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }

    /// Whether `raw` says anything the list knows: an entity (present or ruled out), or a
    /// plain normal finding. `false` for an empty finding, one in another language or one
    /// of words the list has none of: its refinement "normal" is then a guess, not a reading.
    pub fn recognises(&self, raw: &str) -> bool {
        let lower = raw.to_lowercase();
        !self.entities.describe(raw).is_empty()
            || [
                "normal",
                "no finding",
                "no abnormal",
                "unremarkable",
                "no lesion",
            ]
            .iter()
            .any(|w| lower.contains(w))
    }

    pub fn refine(&self, raw: &str) -> Refined {
        // What a finding rules out ("bleeding: none", "no ulcer") is not in the image.
        let kept = without_negated(raw);
        let found = self.entities.describe(&kept);
        let category = found
            .first()
            .map(|(category, _)| category.clone())
            .unwrap_or_else(|| NORMAL.to_string());
        let mut categories: Vec<String> = Vec::new();
        for (c, _) in &found {
            if !categories.contains(c) {
                categories.push(c.clone());
            }
        }
        if categories.is_empty() {
            categories.push(NORMAL.to_string());
        }
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
            categories,
        }
    }
}

/// `raw` without its negated clauses: a clause (between `,` `;` `.` or a line break) that
/// starts with "no", "not", "without", "negative for", "absence of" or "free of", or ends
/// with "none", "absent", "negative", "not seen", "not present" or "excluded".
pub fn without_negated(raw: &str) -> String {
    // ("absent vascular pattern" is a finding: "absent" only negates after its entity.)
    const BEFORE: [&str; 6] = [
        "no ",
        "not ",
        "without ",
        "negative for ",
        "absence of ",
        "free of ",
    ];
    const AFTER: [&str; 7] = [
        "none",
        "absent",
        "negative",
        "not seen",
        "not present",
        "excluded",
        "no",
    ];
    raw.split([',', ';', '.', '\n'])
        .filter(|clause| {
            let c = clause.trim().to_lowercase();
            let c = c.trim_end_matches([' ', ':', '-']);
            let negated = BEFORE.iter().any(|b| c.starts_with(b))
                || AFTER.iter().any(|a| {
                    c.strip_suffix(a)
                        .is_some_and(|rest| rest.is_empty() || rest.ends_with([' ', ':', '-', '=']))
                });
            !negated
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod negation_tests {
    use super::*;

    #[test]
    fn a_finding_that_rules_something_out_does_not_name_it() {
        let r = Refiner::shipped();
        assert_eq!(r.refine("bleeding: none").category, NORMAL);
        assert_eq!(r.refine("no active bleeding").category, NORMAL);
        assert!(r.recognises("bleeding: none"));
        assert!(!r.recognises(""));
        assert!(!r.recognises("Schleimhaut unauffällig, keine Blutung"));
        assert!(r.recognises("normal mucosa"));
    }
}
