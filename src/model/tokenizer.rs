//! The small word-level tokenizer of our own default text encoder. Reports and captions use a
//! clinical vocabulary of a few hundred words, so whole words (lower-cased; numbers kept as
//! words: "8 mm") train faster on a CPU than CLIP's 49k BPE pieces and are readable in the
//! model card. Ids: 0 padding, 1 unknown word, then the vocabulary, then start- and
//! end-of-text, so end-of-text is the highest id as the text encoder's pooling expects.

use burn::tensor::{Device, Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const PAD: i64 = 0;
pub const UNKNOWN: i64 = 1;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct WordTokenizer {
    /// The vocabulary, id = 2 + index.
    pub words: Vec<String>,
}

impl WordTokenizer {
    /// Every word seen at least `min_count` times in `texts`, most frequent first (ties in
    /// alphabetical order, so the same corpus always gives the same ids).
    pub fn from_corpus<'a>(texts: impl IntoIterator<Item = &'a str>, min_count: usize) -> Self {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for text in texts {
            for word in words(text) {
                *counts.entry(word).or_default() += 1;
            }
        }
        let mut ranked: Vec<(String, usize)> = counts
            .into_iter()
            .filter(|(_, n)| *n >= min_count)
            .collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        WordTokenizer {
            words: ranked.into_iter().map(|(w, _)| w).collect(),
        }
    }

    /// Size of the id space: padding, unknown, words, start, end.
    pub fn vocab_size(&self) -> usize {
        self.words.len() + 4
    }

    pub fn start_of_text(&self) -> i64 {
        self.words.len() as i64 + 2
    }

    pub fn end_of_text(&self) -> i64 {
        self.words.len() as i64 + 3
    }

    /// Start, the words (cut to fit), end, then padding to `context`.
    pub fn encode(&self, text: &str, context: usize) -> Vec<i64> {
        let mut ids = Vec::with_capacity(context);
        ids.push(self.start_of_text());
        ids.extend(words(text).take(context.saturating_sub(2)).map(|w| {
            // A few hundred words: a linear scan costs less than keeping an index in sync.
            self.words
                .iter()
                .position(|v| *v == w)
                .map_or(UNKNOWN, |i| i as i64 + 2)
        }));
        ids.push(self.end_of_text());
        ids.resize(context, PAD);
        ids
    }

    /// The words of `text` this tokenizer does not know (each read as "unknown word").
    pub fn unknown_words(&self, text: &str) -> Vec<String> {
        words(text)
            .filter(|w| !self.words.iter().any(|v| v == w))
            .map(|w| w.to_string())
            .collect()
    }

    /// How many words `text` takes (start and end of text not counted).
    pub fn pieces(&self, text: &str) -> usize {
        words(text).count()
    }

    /// `texts` -> [batch, context] token ids on `device`.
    pub fn batch(&self, texts: &[&str], context: usize, device: &Device) -> Tensor<2, Int> {
        let ids: Vec<i64> = texts.iter().flat_map(|t| self.encode(t, context)).collect();
        Tensor::from_data(TensorData::new(ids, [texts.len(), context]), device)
    }
}

/// Lower-cased runs of letters or of digits ("8mm" -> "8", "mm").
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut digits = false;
    for c in text.chars() {
        let is_word = c.is_alphabetic() || c.is_ascii_digit();
        let boundary = !is_word || c.is_ascii_digit() != digits;
        if boundary && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        if is_word {
            digits = c.is_ascii_digit();
            current.extend(c.to_lowercase());
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out.into_iter()
}
