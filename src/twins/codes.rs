//! Binary codes of twin embeddings: the signs of the embedding, less a code centre when the
//! image encoder's card has one (its mean embedding on its training data: centred sign
//! hashing; learned embeddings lean one way, on the shipped encoder the mean of the unit view
//! embeddings has norm 0.24). And an asymmetric score: a float query against a code.

use super::{TwinError, encode, load_view};
use crate::model::hash::pack_signs;
use crate::model::preprocess::TwinInput;
use crate::model::vit::Vit;
use crate::plumbing::Progress;
use crate::store::Store;
use burn::tensor::Device;

/// How an embedding becomes its binary code: the signs of the embedding less the image
/// encoder's code centre (its card's `code_center`; none: the plain signs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Coder {
    center: Option<Vec<f32>>,
}

impl Coder {
    pub fn new(center: Option<Vec<f32>>) -> Coder {
        Coder { center }
    }

    /// The embedding less the centre.
    fn centred(&self, embedding: &[f32]) -> Vec<f32> {
        match &self.center {
            Some(c) => embedding.iter().zip(c).map(|(x, m)| x - m).collect(),
            None => embedding.to_vec(),
        }
    }

    /// An asymmetric score: the float `query`, centred and made unit, against a library
    /// polyp's code read as +-1 per bit over sqrt(bits): the cosine between the query and
    /// the code's corner of the hypercube. The library keeps 256 bits a polyp; the query
    /// loses nothing to its own signs, and scores are not tied integers.
    pub fn asymmetric(&self, query: &[f32], code: &[u64]) -> f32 {
        let q = self.centred(query);
        let norm = q.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        let dot: f32 = q
            .iter()
            .enumerate()
            .map(|(k, x)| {
                if code[k / 64] >> (k % 64) & 1 == 1 {
                    *x
                } else {
                    -*x
                }
            })
            .sum();
        dot / (norm * (q.len() as f32).sqrt())
    }

    /// The code of a unit embedding.
    pub fn code(&self, embedding: &[f32]) -> Vec<u64> {
        match &self.center {
            Some(c) => {
                let centred: Vec<f32> = embedding.iter().zip(c).map(|(x, m)| x - m).collect();
                pack_signs(&centred)
            }
            None => pack_signs(embedding),
        }
    }
}

/// The code centre of `encoder` on the polyp views of the library in `store` (its training
/// data): the mean of their unit embeddings, and how many views it averaged. Views that do
/// not decode are left out.
pub fn code_center(
    store: &Store,
    encoder: &Vit,
    input: TwinInput,
    device: &Device,
    progress: &Progress,
) -> Result<(Vec<f32>, usize), TwinError> {
    let mut views = Vec::new();
    for p in store.polyps()? {
        views.extend(store.polyp_views(p.id)?);
    }
    progress.stage(
        "encoding the training views for the code centre",
        views.len() as u64,
    );
    let mut sum: Vec<f64> = Vec::new();
    let mut n = 0usize;
    for chunk in views.chunks(64) {
        if progress.is_cancelled() {
            return Err(TwinError::Cancelled);
        }
        let images: Vec<_> = chunk
            .iter()
            .filter_map(|m| load_view(store, m).ok())
            .collect();
        for e in encode(encoder, input, device, &images) {
            if sum.is_empty() {
                sum = vec![0.0; e.len()];
            }
            sum.iter_mut().zip(&e).for_each(|(s, x)| *s += *x as f64);
            n += 1;
        }
        progress.add(chunk.len() as u64);
    }
    if n == 0 {
        return Err(TwinError::Image(
            "no polyp view of the library could be encoded for the code centre".into(),
        ));
    }
    Ok((sum.iter().map(|s| (s / n as f64) as f32).collect(), n))
}

/// The version of an encoder given `center`: its version without an earlier centre's mark,
/// then `-c` and the centre's first 8 hex digits of SHA-256 (a new centre, a new version).
pub fn centred_version(version: &str, center: &[f32]) -> String {
    use sha2::{Digest, Sha256};
    let base = match version.rsplit_once("-c") {
        Some((base, mark)) if mark.len() == 8 && mark.chars().all(|c| c.is_ascii_hexdigit()) => {
            base
        }
        _ => version,
    };
    let bytes: Vec<u8> = center.iter().flat_map(|x| x.to_le_bytes()).collect();
    let digest = Sha256::digest(&bytes);
    let mark: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("{base}-c{mark}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_centre_is_taken_off_before_the_signs() {
        let e = [0.5f32, 0.1, -0.2, 0.3];
        assert_eq!(Coder::default().code(&e), pack_signs(&e));
        let centred = Coder::new(Some(vec![0.4, 0.2, -0.3, 0.0]));
        assert_eq!(centred.code(&e), pack_signs(&[0.1, -0.1, 0.1, 0.3]));
    }

    #[test]
    fn a_new_centre_is_a_new_version_and_refitting_does_not_stack_marks() {
        let a = centred_version("run-1-17", &[0.1, 0.2]);
        let b = centred_version(&a, &[0.1, 0.3]);
        assert!(
            a.starts_with("run-1-17-c") && b.starts_with("run-1-17-c"),
            "{a} {b}"
        );
        assert_ne!(a, b);
        assert_eq!(centred_version(&a, &[0.1, 0.2]), a);
    }
}
