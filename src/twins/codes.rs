//! Binary codes of twin embeddings: the signs of the embedding, less a code centre when the
//! image encoder's card has one (its mean embedding on its training data: centred sign
//! hashing; learned embeddings lean one way, on the shipped encoder the mean of the unit view
//! embeddings has norm 0.24), turned by the card's code rotation when it has one (iterative
//! quantisation, ITQ: Gong and Lazebnik 2011, the rotation that brings the training
//! embeddings closest to the corners of the hypercube, so the signs lose less). And an
//! asymmetric score: a float query against a code.

use super::{TwinError, encode, load_view};
use crate::model::hash::pack_signs;
use crate::model::preprocess::TwinInput;
use crate::model::twin_encoder::TwinEncoder;
use crate::plumbing::Progress;
use crate::store::Store;
use burn::tensor::Device;

/// How an embedding becomes its binary code: the signs of the embedding less the image
/// encoder's code centre (its card's `code_center`; none: the plain signs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Coder {
    center: Option<Vec<f32>>,
    /// d x d, row-major: the code of `x` is the signs of `(x - center) R`.
    rotation: Option<Vec<f32>>,
}

impl Coder {
    pub fn new(center: Option<Vec<f32>>) -> Coder {
        Coder {
            center,
            rotation: None,
        }
    }

    /// A coder that also turns the centred embedding by `rotation` (d x d, row-major).
    pub fn rotated(center: Option<Vec<f32>>, rotation: Option<Vec<f32>>) -> Coder {
        Coder { center, rotation }
    }

    /// The coder an image encoder card describes for its `dim`-d embeddings: its centre and
    /// rotation, and with `bits` the longer code: the columns of the (rotation or identity)
    /// followed by those of `bits / dim - 1` seeded random rotations, `dim x bits` in all.
    /// The first `dim` bits are the code without `bits`; each further block sees the
    /// embedding from other directions, so the float-query score against the code comes
    /// nearer the cosine (the sign code of a random projection is an unbiased estimate of it).
    pub fn for_encoder(
        dim: usize,
        center: Option<Vec<f32>>,
        rotation: Option<Vec<f32>>,
        bits: Option<crate::model::weights::CodeBits>,
    ) -> Coder {
        let Some(bits) = bits.filter(|b| b.bits > dim && b.bits.is_multiple_of(dim)) else {
            return Coder { center, rotation };
        };
        let first = rotation.unwrap_or_else(|| {
            (0..dim * dim)
                .map(|k| if k / dim == k % dim { 1.0 } else { 0.0 })
                .collect()
        });
        let blocks: Vec<Vec<f32>> = std::iter::once(first)
            .chain((1..bits.bits / dim).map(|k| cached_rotation(dim, bits.seed + k as u64)))
            .collect();
        let mut projection = Vec::with_capacity(dim * bits.bits);
        for i in 0..dim {
            for block in &blocks {
                projection.extend_from_slice(&block[i * dim..(i + 1) * dim]);
            }
        }
        Coder {
            center,
            rotation: Some(projection),
        }
    }

    /// Bits of the codes of `dim`-d embeddings.
    pub fn bits(&self, dim: usize) -> usize {
        self.rotation.as_ref().map_or(dim, |r| r.len() / dim.max(1))
    }

    /// The embedding less the centre, turned by the rotation: what the signs are taken of.
    fn centred(&self, embedding: &[f32]) -> Vec<f32> {
        let x: Vec<f32> = match &self.center {
            Some(c) => embedding.iter().zip(c).map(|(x, m)| x - m).collect(),
            None => embedding.to_vec(),
        };
        match &self.rotation {
            Some(r) => rotate(&x, r),
            None => x,
        }
    }

    /// An asymmetric score: the float `query`, centred (and projected) and made unit, against
    /// a library polyp's code read as +-1 per bit over sqrt(bits): the cosine between the
    /// query and the code's corner of the hypercube. The library keeps only codes; the query
    /// loses nothing to its own signs, and scores are not tied integers. One query against
    /// many codes: [`Coder::query`] once, then [`AsymmetricQuery::score`].
    pub fn asymmetric(&self, query: &[f32], code: &[u64]) -> f32 {
        self.query(query).score(code)
    }

    /// The float `query` made ready for [`AsymmetricQuery::score`] against codes.
    pub fn query(&self, query: &[f32]) -> AsymmetricQuery {
        let mut q = self.centred(query);
        let norm = q.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        let scale = 1.0 / (norm * (q.len() as f32).sqrt());
        q.iter_mut().for_each(|x| *x *= scale);
        AsymmetricQuery { q }
    }

    /// The code of a unit embedding.
    pub fn code(&self, embedding: &[f32]) -> Vec<u64> {
        pack_signs(&self.centred(embedding))
    }
}

/// A float query centred, projected and scaled for scoring against codes
/// ([`Coder::asymmetric`]).
pub struct AsymmetricQuery {
    q: Vec<f32>,
}

impl AsymmetricQuery {
    /// The query's score against one code of as many bits as the query has values.
    pub fn score(&self, code: &[u64]) -> f32 {
        let mut dot = 0.0f32;
        for (chunk, word) in self.q.chunks(64).zip(code) {
            for (k, x) in chunk.iter().enumerate() {
                dot += if word >> k & 1 == 1 { *x } else { -*x };
            }
        }
        dot
    }
}

/// [`random_rotation`], made once per process (models are loaded again on every timeline
/// rebuild and CLI call).
fn cached_rotation(d: usize, seed: u64) -> Vec<f32> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    type Made = HashMap<(usize, u64), Vec<f32>>;
    static MADE: OnceLock<Mutex<Made>> = OnceLock::new();
    let made = MADE.get_or_init(Default::default);
    if let Some(r) = made.lock().expect("rotation cache").get(&(d, seed)) {
        return r.clone();
    }
    let r = random_rotation(d, seed);
    made.lock()
        .expect("rotation cache")
        .insert((d, seed), r.clone());
    r
}

/// A seeded random rotation (d x d, row-major): Gram-Schmidt on Gaussian columns, in f64 on
/// the CPU (the same values on every backend).
pub fn random_rotation(d: usize, seed: u64) -> Vec<f32> {
    let mut rng = crate::plumbing::Rng::new(seed).fork(0xb175);
    let mut cols: Vec<Vec<f64>> = Vec::with_capacity(d);
    while cols.len() < d {
        let mut v: Vec<f64> = (0..d).map(|_| rng.normal() as f64).collect();
        for _ in 0..2 {
            for c in &cols {
                let dot: f64 = v.iter().zip(c).map(|(a, b)| a * b).sum();
                v.iter_mut().zip(c).for_each(|(a, b)| *a -= dot * b);
            }
        }
        let norm = v.iter().map(|a| a * a).sum::<f64>().sqrt();
        if norm > 1e-6 {
            v.iter_mut().for_each(|a| *a /= norm);
            cols.push(v);
        }
    }
    let mut r = vec![0.0f32; d * d];
    for (j, c) in cols.iter().enumerate() {
        for (i, x) in c.iter().enumerate() {
            r[i * d + j] = *x as f32;
        }
    }
    r
}

/// `x` [d] times `r` [d x b, row-major]: `y_j = sum_i x_i r_ij`.
fn rotate(x: &[f32], r: &[f32]) -> Vec<f32> {
    let d = x.len();
    let b = r.len() / d;
    let mut y = vec![0.0f32; b];
    for (i, xi) in x.iter().enumerate() {
        for (yj, rij) in y.iter_mut().zip(&r[i * b..(i + 1) * b]) {
            *yj += xi * rij;
        }
    }
    y
}

/// Iterative quantisation (ITQ): the rotation `R` (d x d, row-major) that brings the centred
/// `embeddings` (n rows of d) closest to their signs, `min ||sign(V R) - V R||`, alternating
/// the signs with the orthogonal Procrustes step (`R` = the polar factor of `V' B`, by
/// Newton-Schulz iterations) for `iterations` rounds from a seeded random rotation. Returns
/// `R` and the mean squared quantisation error per value before and after.
pub fn itq_rotation(
    embeddings: &[Vec<f32>],
    center: Option<&[f32]>,
    iterations: usize,
    seed: u64,
    device: &Device,
) -> (Vec<f32>, f64, f64) {
    use burn::tensor::{Tensor, TensorData};
    let n = embeddings.len();
    let d = embeddings[0].len();
    let flat: Vec<f32> = embeddings
        .iter()
        .flat_map(|e| match center {
            Some(c) => e.iter().zip(c).map(|(x, m)| x - m).collect::<Vec<f32>>(),
            None => e.clone(),
        })
        .collect();
    let v = Tensor::<2>::from_data(TensorData::new(flat, [n, d]), device);
    // The codes' scale: a bit is +-1 against values of unit rows, so compare with the signs
    // scaled to each row's typical magnitude (the mean absolute value), as ITQ's objective
    // is invariant to one global scale.
    let scale = v.clone().abs().mean().into_scalar::<f32>();
    let error = |r: &Tensor<2>| -> f64 {
        let projected = v.clone().matmul(r.clone());
        let b = projected.clone().sign() * scale;
        ((b - projected).powi_scalar(2).mean().into_scalar::<f32>() / (scale * scale)) as f64
    };
    let mut rng = crate::plumbing::Rng::new(seed);
    let gaussian: Vec<f32> = (0..d * d).map(|_| rng.normal()).collect();
    let mut r = polar(
        Tensor::<2>::from_data(TensorData::new(gaussian, [d, d]), device),
        d,
    );
    let before = error(&r);
    for _ in 0..iterations {
        let b = v.clone().matmul(r.clone()).sign();
        r = polar(v.clone().transpose().matmul(b), d);
    }
    let values = orthonormal_columns(
        &r.into_data().try_to_vec::<f32>().expect("f32 rotation"),
        d,
        seed,
    );
    let r = Tensor::<2>::from_data(TensorData::new(values.clone(), [d, d]), device);
    let after = error(&r);
    (values, before, after)
}

/// `m` (d x d, row-major) with its columns made orthonormal by Gram-Schmidt in f64: the polar
/// step leaves the directions the training embeddings do not span (fewer views than d, or
/// nearly so) short of unit length; those are completed by seeded random directions, so the
/// rotation stays a rotation.
fn orthonormal_columns(m: &[f32], d: usize, seed: u64) -> Vec<f32> {
    let mut rng = crate::plumbing::Rng::new(seed).fork(0x0b7e);
    let mut cols: Vec<Vec<f64>> = Vec::with_capacity(d);
    for j in 0..d {
        let mut v: Vec<f64> = (0..d).map(|i| m[i * d + j] as f64).collect();
        loop {
            for _ in 0..2 {
                for c in &cols {
                    let dot: f64 = v.iter().zip(c).map(|(a, b)| a * b).sum();
                    v.iter_mut().zip(c).for_each(|(a, b)| *a -= dot * b);
                }
            }
            let norm = v.iter().map(|a| a * a).sum::<f64>().sqrt();
            if norm > 0.5 {
                v.iter_mut().for_each(|a| *a /= norm);
                break;
            }
            v = (0..d).map(|_| rng.normal() as f64).collect();
        }
        cols.push(v);
    }
    let mut r = vec![0.0f32; d * d];
    for (j, c) in cols.iter().enumerate() {
        for (i, x) in c.iter().enumerate() {
            r[i * d + j] = *x as f32;
        }
    }
    r
}

/// The orthogonal polar factor of the square matrix `m` (the `U W'` of its SVD `U S W'`):
/// Newton-Schulz iterations `X <- X (3 I - X' X) / 2` from `m` scaled to unit Frobenius norm.
fn polar(m: burn::tensor::Tensor<2>, d: usize) -> burn::tensor::Tensor<2> {
    use burn::tensor::Tensor;
    let norm = m.clone().powi_scalar(2).sum().sqrt().into_scalar::<f32>();
    let mut x = m / norm.max(1e-12);
    let eye = Tensor::<2>::eye(d, &x.device());
    for _ in 0..60 {
        let xtx = x.clone().transpose().matmul(x.clone());
        x = x.matmul(eye.clone() * 3.0 - xtx) * 0.5;
    }
    x
}

/// The unit embeddings by `encoder` of the polyp views of the library in `store` (its
/// training data), for the code centre and rotation. Views that do not decode are left out.
pub fn training_embeddings(
    store: &Store,
    encoder: &TwinEncoder,
    input: TwinInput,
    device: &Device,
    progress: &Progress,
) -> Result<Vec<Vec<f32>>, TwinError> {
    let mut views = Vec::new();
    for p in store.polyps()? {
        views.extend(store.polyp_views(p.id)?);
    }
    progress.stage(
        "encoding the training views for the binary codes",
        views.len() as u64,
    );
    let mut out = Vec::new();
    for chunk in views.chunks(64) {
        if progress.is_cancelled() {
            return Err(TwinError::Cancelled);
        }
        let images: Vec<_> = chunk
            .iter()
            .filter_map(|m| load_view(store, m).ok())
            .collect();
        out.extend(encode(encoder, input, device, &images));
        progress.add(chunk.len() as u64);
    }
    if out.is_empty() {
        return Err(TwinError::Image(
            "no polyp view of the library could be encoded for the binary codes".into(),
        ));
    }
    Ok(out)
}

/// The code centre: the mean of `embeddings`.
pub fn code_center(embeddings: &[Vec<f32>]) -> Vec<f32> {
    let mut sum = vec![0.0f64; embeddings[0].len()];
    for e in embeddings {
        sum.iter_mut().zip(e).for_each(|(s, x)| *s += *x as f64);
    }
    sum.iter()
        .map(|s| (s / embeddings.len() as f64) as f32)
        .collect()
}

/// The version of an encoder card whose codes are as `card` now says (centre, rotation,
/// code bits): its version without an earlier code mark, then, when the codes are not the
/// plain signs, `-c` and 8 hex digits that change with any of them (new codes, a new
/// version, so libraries indexed before are re-indexed).
pub fn code_version(card: &crate::model::weights::ModelCard) -> String {
    let mut marked: Vec<f32> = card
        .code_center
        .iter()
        .chain(card.code_rotation.iter())
        .flatten()
        .copied()
        .collect();
    if let Some(b) = card.code_bits {
        // Written apart from the floats so that no centre could give the same mark.
        marked.extend([f32::NAN, b.bits as f32, b.seed as f32]);
    }
    if marked.is_empty() {
        return unmarked(&card.version).to_string();
    }
    centred_version(&card.version, &marked)
}

/// The version of an encoder card once its crop context is `context`: `-ctx<context>` after
/// its version without an earlier context's or code's mark (a turns' mark stays after it),
/// then its code mark again (see [`code_version`]).
pub fn context_version(card: &crate::model::weights::ModelCard, context: f32) -> String {
    let (base, turns) = without_turns(unmarked(&card.version));
    let base = base.rsplit_once("-ctx").map_or(base, |(b, _)| b);
    let mut after = card.clone();
    after.version = format!("{base}-ctx{context}{turns}");
    code_version(&after)
}

/// The version of an encoder card once its crops are encoded at `turns` quarter turns:
/// `-rot<turns>` (none for 1) after its version without an earlier turns' or code's mark,
/// then its code mark again (see [`code_version`]).
pub fn turns_version(card: &crate::model::weights::ModelCard, turns: u32) -> String {
    let (base, _) = without_turns(unmarked(&card.version));
    let mut after = card.clone();
    after.version = match turns {
        1 => base.to_string(),
        t => format!("{base}-rot{t}"),
    };
    code_version(&after)
}

/// The version of a card once its weights are stored in half precision (`model half`):
/// `-f16` after its version without its crop, turns and code marks, which follow it again
/// (a version without marks just gains `-f16`; one that has it is returned as it is).
pub fn half_version(version: &str) -> String {
    let base = unmarked(version);
    let code = &version[base.len()..];
    let (base, turns) = without_turns(base);
    let (base, context) = match base.rsplit_once("-ctx") {
        Some((b, _)) => base.split_at(b.len()),
        None => (base, ""),
    };
    if base.ends_with("-f16") {
        return version.to_string();
    }
    format!("{base}-f16{context}{turns}{code}")
}

/// `version` split before its turns' mark (`-rot` and digits at its end), and that mark.
fn without_turns(version: &str) -> (&str, &str) {
    match version.rfind("-rot") {
        Some(at)
            if version.len() > at + 4 && version[at + 4..].chars().all(|c| c.is_ascii_digit()) =>
        {
            version.split_at(at)
        }
        _ => (version, ""),
    }
}

/// `version` without its code mark.
fn unmarked(version: &str) -> &str {
    match version.rsplit_once("-c") {
        Some((base, mark)) if mark.len() == 8 && mark.chars().all(|c| c.is_ascii_hexdigit()) => {
            base
        }
        _ => version,
    }
}

/// The version of an encoder given `center` (and the rotation's values after it, when there
/// is one): its version without an earlier centre's mark, then `-c` and the first 8 hex
/// digits of their SHA-256 (a new centre or rotation, a new version).
pub fn centred_version(version: &str, center: &[f32]) -> String {
    use sha2::{Digest, Sha256};
    let base = unmarked(version);
    let bytes: Vec<u8> = center.iter().flat_map(|x| x.to_le_bytes()).collect();
    let digest = Sha256::digest(&bytes);
    let mark: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("{base}-c{mark}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_half_mark_goes_before_the_crop_turns_and_code_marks() {
        let v = "run-2-1795654534-ctx1-rot4-c8c1984cb";
        assert_eq!(half_version(v), "run-2-1795654534-f16-ctx1-rot4-c8c1984cb");
        assert_eq!(half_version(&half_version(v)), half_version(v));
        assert_eq!(half_version("run-17-1795676569"), "run-17-1795676569-f16");
    }

    #[test]
    fn the_centre_is_taken_off_before_the_signs() {
        let e = [0.5f32, 0.1, -0.2, 0.3];
        assert_eq!(Coder::default().code(&e), pack_signs(&e));
        let centred = Coder::new(Some(vec![0.4, 0.2, -0.3, 0.0]));
        assert_eq!(centred.code(&e), pack_signs(&[0.1, -0.1, 0.1, 0.3]));
        // A rotation turns the centred embedding before the signs: here a swap of the first
        // two axes and a flip of the last.
        let r = vec![
            0.0, 1.0, 0.0, 0.0, //
            1.0, 0.0, 0.0, 0.0, //
            0.0, 0.0, 1.0, 0.0, //
            0.0, 0.0, 0.0, -1.0,
        ];
        let turned = Coder::rotated(Some(vec![0.4, 0.2, -0.3, 0.0]), Some(r));
        assert_eq!(turned.code(&e), pack_signs(&[-0.1, 0.1, 0.1, -0.3]));
    }

    #[test]
    fn itq_finds_an_orthogonal_rotation_that_loses_less_to_the_signs() {
        let device = Device::flex();
        // Points near the corners of a square turned by 30 degrees, in 2-D: the plain signs
        // cut through them, the rotation found turns them back onto the corners.
        let mut rng = crate::plumbing::Rng::new(5);
        let (c, s) = (30f32.to_radians().cos(), 30f32.to_radians().sin());
        let points: Vec<Vec<f32>> = (0..200)
            .map(|_| {
                let a = if rng.f32() < 0.5 { 1.0 } else { -1.0 };
                let b = if rng.f32() < 0.5 { 1.0 } else { -1.0 };
                let (a, b) = (a + 0.1 * rng.normal(), b + 0.1 * rng.normal());
                vec![c * a - s * b, s * a + c * b]
            })
            .collect();
        let (r, before, after) = itq_rotation(&points, None, 30, 1, &device);
        // Orthogonal: R'R = I.
        let rtr = [
            r[0] * r[0] + r[2] * r[2],
            r[0] * r[1] + r[2] * r[3],
            r[1] * r[1] + r[3] * r[3],
        ];
        assert!((rtr[0] - 1.0).abs() < 1e-3 && rtr[1].abs() < 1e-3 && (rtr[2] - 1.0).abs() < 1e-3);
        assert!(
            after < 0.05 && after < before / 2.0,
            "quantisation error {before} at the start, {after} after ITQ"
        );
        // Every point's code is its corner's.
        let coder = Coder::rotated(None, Some(r));
        let codes: std::collections::BTreeSet<Vec<u64>> =
            points.iter().map(|p| coder.code(p)).collect();
        assert_eq!(codes.len(), 4);
    }

    #[test]
    fn longer_codes_score_a_float_query_nearer_its_cosine() {
        let dim = 64;
        let mut rng = crate::plumbing::Rng::new(9);
        let unit = |rng: &mut crate::plumbing::Rng| {
            let mut v: Vec<f32> = (0..dim).map(|_| rng.normal()).collect();
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter_mut().for_each(|x| *x /= n);
            v
        };
        // Pairs of every closeness, from near twins to strangers.
        let pairs: Vec<(Vec<f32>, Vec<f32>)> = (0..300)
            .map(|k| {
                let a = unit(&mut rng);
                let noise = unit(&mut rng);
                let w = k as f32 / 300.0;
                let mut b: Vec<f32> = a
                    .iter()
                    .zip(&noise)
                    .map(|(x, n)| (1.0 - w) * x + w * n)
                    .collect();
                let n = b.iter().map(|x| x * x).sum::<f32>().sqrt();
                b.iter_mut().for_each(|x| *x /= n);
                (a, b)
            })
            .collect();
        // How well the scores order the pairs as their cosines do (Spearman-like: share of
        // pairs of pairs ordered alike).
        let agreement = |coder: &Coder| -> f64 {
            let truth: Vec<f32> = pairs
                .iter()
                .map(|(a, b)| crate::tracklets::grouping::cosine(a, b))
                .collect();
            let score: Vec<f32> = pairs
                .iter()
                .map(|(a, b)| coder.asymmetric(a, &coder.code(b)))
                .collect();
            let (mut same, mut all) = (0usize, 0usize);
            for i in 0..pairs.len() {
                for j in i + 1..pairs.len() {
                    all += 1;
                    same += ((truth[i] > truth[j]) == (score[i] > score[j])) as usize;
                }
            }
            same as f64 / all as f64
        };
        let bits = |b: usize| crate::model::weights::CodeBits { bits: b, seed: 1 };
        let plain = agreement(&Coder::default());
        let four = agreement(&Coder::for_encoder(dim, None, None, Some(bits(256))));
        let sixteen = agreement(&Coder::for_encoder(dim, None, None, Some(bits(1024))));
        assert!(
            plain < four && four < sixteen,
            "64 bits {plain}, 256 {four}, 1024 {sixteen}"
        );
        // The first 64 bits of a longer code are the plain signs.
        let coder = Coder::for_encoder(dim, None, None, Some(bits(256)));
        assert_eq!(coder.bits(dim), 256);
        assert_eq!(coder.code(&pairs[0].0)[0], pack_signs(&pairs[0].0)[0]);
        // The further blocks are rotations: the projection keeps lengths.
        let turned = coder.centred(&pairs[0].0);
        let norm: f32 = turned.iter().map(|x| x * x).sum();
        assert!(
            (norm - 4.0).abs() < 1e-3,
            "four unit-length blocks, squared norm {norm}"
        );
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
