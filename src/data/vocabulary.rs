//! A clinical vocabulary and its deterministic extractor: a sentence to a multi-hot vector
//! over terms grouped in aspects. Two vocabularies use it: Endo-CLIP's nine attribute aspects
//! (METHODS §1, `assets/vocabulary.toml`, the [`Vocabulary::default`]) and the capsule
//! findings' entities by category (METHODS §2, `assets/capsule_entities.toml`). The reading
//! rules are documented in `assets/vocabulary.toml`.

use serde::Deserialize;

/// The vocabulary shipped in `assets/vocabulary.toml`.
pub const DEFAULT_TOML: &str = include_str!("../../assets/vocabulary.toml");

#[derive(Debug, thiserror::Error)]
pub enum VocabularyError {
    #[error("vocabulary is not valid TOML: {0}")]
    Toml(String),
    #[error("vocabulary: {0}")]
    Invalid(String),
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    ignore: Vec<String>,
    /// Accept a word one edit (a typo) away from a one-word phrase of 6 letters or more,
    /// when that phrase is the only one so near.
    #[serde(default)]
    typos: bool,
    aspect: Vec<AspectFile>,
}

#[derive(Deserialize)]
struct AspectFile {
    name: String,
    term: Vec<TermFile>,
}

#[derive(Deserialize)]
struct TermFile {
    name: String,
    phrases: Vec<String>,
    #[serde(default)]
    size_mm: Option<[f64; 2]>,
    #[serde(default)]
    implies: Vec<String>,
}

/// One term: its aspect and name, e.g. ("Paris morphology", "0-Is").
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    pub aspect: String,
    pub name: String,
    size_mm: Option<[f64; 2]>,
    implies: Vec<usize>,
}

/// What a phrase means when it matches.
#[derive(Debug, Clone, Copy)]
enum Meaning {
    Term(usize),
    Nothing,
}

#[derive(Debug, Clone)]
pub struct Vocabulary {
    terms: Vec<Term>,
    typos: bool,
    /// Phrases as word lists, longest first.
    phrases: Vec<(Vec<String>, Meaning)>,
}

const NEGATIONS: &[&str] = &[
    "no", "not", "without", "absent", "absence", "negative", "nor",
];
const SCOPE_ENDS: &[&str] = &["but", "however", "although"];

impl Default for Vocabulary {
    fn default() -> Vocabulary {
        Vocabulary::from_toml(DEFAULT_TOML).expect("the shipped vocabulary parses")
    }
}

impl Vocabulary {
    pub fn from_toml(text: &str) -> Result<Vocabulary, VocabularyError> {
        let file: File = toml::from_str(text).map_err(|e| VocabularyError::Toml(e.to_string()))?;
        let mut terms = Vec::new();
        let mut phrases = Vec::new();
        let mut implied: Vec<(usize, String)> = Vec::new();
        for aspect in &file.aspect {
            if aspect.term.is_empty() {
                return Err(VocabularyError::Invalid(format!(
                    "aspect '{}' has no terms",
                    aspect.name
                )));
            }
            for t in &aspect.term {
                let i = terms.len();
                if terms
                    .iter()
                    .any(|x: &Term| x.aspect == aspect.name && x.name == t.name)
                {
                    return Err(VocabularyError::Invalid(format!(
                        "term '{}/{}' is listed twice",
                        aspect.name, t.name
                    )));
                }
                if t.phrases.is_empty() {
                    return Err(VocabularyError::Invalid(format!(
                        "term '{}/{}' has no phrases",
                        aspect.name, t.name
                    )));
                }
                for p in &t.phrases {
                    phrases.push((words(p), Meaning::Term(i)));
                }
                implied.extend(t.implies.iter().map(|n| (i, n.clone())));
                terms.push(Term {
                    aspect: aspect.name.clone(),
                    name: t.name.clone(),
                    size_mm: t.size_mm,
                    implies: Vec::new(),
                });
            }
        }
        for (i, name) in implied {
            let j = terms
                .iter()
                .position(|t| format!("{}/{}", t.aspect, t.name) == name)
                .ok_or_else(|| {
                    VocabularyError::Invalid(format!(
                        "'{}' implies '{name}', which is not a term (write aspect/term)",
                        terms[i].name
                    ))
                })?;
            terms[i].implies.push(j);
        }
        for p in &file.ignore {
            phrases.push((words(p), Meaning::Nothing));
        }
        phrases.retain(|(w, _)| !w.is_empty());
        phrases.sort_by_key(|(w, _)| std::cmp::Reverse(w.len()));
        Ok(Vocabulary {
            terms,
            typos: file.typos,
            phrases,
        })
    }

    /// Every term, in vector order.
    pub fn terms(&self) -> &[Term] {
        &self.terms
    }

    /// Every phrase the vocabulary reads, as text (a tokenizer's corpus).
    pub fn phrases(&self) -> Vec<String> {
        self.phrases.iter().map(|(w, _)| w.join(" ")).collect()
    }

    pub fn len(&self) -> usize {
        self.terms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The distinct aspects, in order.
    pub fn aspects(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for t in &self.terms {
            if !out.contains(&t.aspect.as_str()) {
                out.push(&t.aspect);
            }
        }
        out
    }

    /// The multi-hot attribute vector of a text (a sentence or a whole report): 1 for every
    /// term it states, 0 for terms it does not mention or negates.
    pub fn extract(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0; self.terms.len()];
        for i in self.found(text) {
            v[i] = 1.0;
        }
        v
    }

    /// The terms a text states, as (aspect, term) names, in vector order.
    pub fn describe(&self, text: &str) -> Vec<(String, String)> {
        let mut found = self.found(text);
        found.sort_unstable();
        found
            .into_iter()
            .map(|i| (self.terms[i].aspect.clone(), self.terms[i].name.clone()))
            .collect()
    }

    fn found(&self, text: &str) -> Vec<usize> {
        let mut found: Vec<usize> = Vec::new();
        let add = |i: usize, found: &mut Vec<usize>| {
            let mut stack = vec![i];
            while let Some(i) = stack.pop() {
                if !found.contains(&i) {
                    found.push(i);
                    stack.extend(self.terms[i].implies.iter().copied());
                }
            }
        };
        for clause in clauses(text) {
            let mut negated = false;
            let mut k = 0;
            while k < clause.len() {
                let word = clause[k].as_str();
                let phrase = self.phrase_at(&clause, k);
                let free_of = word == "free" && clause.get(k + 1).is_some_and(|w| w == "of");
                if phrase.is_none() && (NEGATIONS.contains(&word) || free_of) {
                    negated = true;
                    k += 1;
                    continue;
                }
                if SCOPE_ENDS.contains(&word) {
                    negated = false;
                    k += 1;
                    continue;
                }
                if let Some(mm) = size_at(&clause, k) {
                    if !negated {
                        for (i, t) in self.terms.iter().enumerate() {
                            if t.size_mm.is_some_and(|[lo, hi]| mm >= lo && mm < hi) {
                                add(i, &mut found);
                            }
                        }
                    }
                    k += 1;
                    continue;
                }
                match phrase {
                    Some((len, meaning, self_negated)) => {
                        if let (Meaning::Term(i), false) = (meaning, negated || self_negated) {
                            add(i, &mut found);
                        }
                        k += len;
                    }
                    None => {
                        if let (Some(i), false) = (self.typo_of(word), negated) {
                            add(i, &mut found);
                        }
                        k += 1;
                    }
                }
            }
        }
        found
    }
}

impl Vocabulary {
    /// The longest phrase starting at word `k`: its length in words, its meaning, and whether
    /// the first word negated itself (`non-ulcerated` reads `ulcerated`, negated).
    fn phrase_at(&self, clause: &[String], k: usize) -> Option<(usize, Meaning, bool)> {
        let (first, self_negated) = match clause[k].strip_prefix("non-") {
            Some(rest) if !rest.is_empty() => (rest, true),
            _ => (clause[k].as_str(), false),
        };
        let rest = &clause[k + 1..];
        self.phrases
            .iter()
            .find(|(p, _)| {
                p[0] == first && p.len() - 1 <= rest.len() && p[1..] == rest[..p.len() - 1]
            })
            .map(|(p, meaning)| (p.len(), *meaning, self_negated))
    }

    /// The term a misspelt word means: the only one-word phrase (6+ letters) one edit away.
    fn typo_of(&self, word: &str) -> Option<usize> {
        if !self.typos || word.chars().count() < 5 {
            return None;
        }
        let mut hit: Option<usize> = None;
        for (p, meaning) in &self.phrases {
            if p.len() != 1 || p[0].chars().count() < 6 || !one_edit(word, &p[0]) {
                continue;
            }
            match (meaning, hit) {
                (Meaning::Term(i), None) => hit = Some(*i),
                (Meaning::Term(i), Some(h)) if *i == h => {}
                _ => return None,
            }
        }
        hit
    }
}

/// Whether `a` becomes `b` by one insertion, deletion, substitution or swap of neighbours.
fn one_edit(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a == b || a.len().abs_diff(b.len()) > 1 {
        return false;
    }
    let start = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let (ra, rb) = (&a[start..], &b[start..]);
    match ra.len().cmp(&rb.len()) {
        std::cmp::Ordering::Less => ra == &rb[1..],
        std::cmp::Ordering::Greater => &ra[1..] == rb,
        std::cmp::Ordering::Equal => {
            ra[1..] == rb[1..]
                || (ra.len() >= 2 && ra[0] == rb[1] && ra[1] == rb[0] && ra[2..] == rb[2..])
        }
    }
}

/// Lower-cased words of a phrase or clause; `-` and `.` inside a word keep it whole.
fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '.'))
        .map(|w| w.trim_matches(|c| c == '-' || c == '.').to_string())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Clauses of a text (split at `.`, `;`, `:`, `,`, `(`, `)` and line breaks), as words. A
/// decimal point between digits does not split.
fn clauses(text: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let decimal = c == '.'
            && i > 0
            && chars[i - 1].is_ascii_digit()
            && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit());
        if matches!(c, '.' | ';' | ':' | ',' | '(' | ')' | '\n' | '!' | '?') && !decimal {
            out.push(words(&current));
            current.clear();
        } else {
            current.push(c);
        }
    }
    out.push(words(&current));
    out.retain(|c| !c.is_empty());
    out
}

/// A size written at word `k`: "8 mm", "8mm", "1.2 cm", "8-mm"; millimetres.
fn size_at(clause: &[String], k: usize) -> Option<f64> {
    let word = clause[k].as_str();
    let unit_of = |u: &str| match u {
        "mm" => Some(1.0),
        "cm" => Some(10.0),
        _ => None,
    };
    let split = word
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(word.len());
    let (number, unit) = word.split_at(split);
    let value: f64 = number.parse().ok()?;
    let unit = unit.trim_start_matches('-');
    let scale = if unit.is_empty() {
        unit_of(clause.get(k + 1)?.as_str())?
    } else {
        unit_of(unit)?
    };
    Some(value * scale)
}
