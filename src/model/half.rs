//! Half-precision records (issue #47): a shipped model's float tensors are stored as f16 on
//! disk, half the bytes of f32, and widened to f32 as they load ([`weights::load`]): the
//! backends compute in f32. Training runs and their checkpoints keep writing f32;
//! `endotwin model half` rewrites a finished model's record ([`halve`]).

use super::weights::{self, ModelCard, Precision, WeightsError};
use burn::store::burn_pack::{Reader, Tensor as PackTensor, Writer};
use burn::tensor::{Bytes, DType, f16};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// How many of a record's float tensors are stored in each width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FloatTensors {
    pub f32: usize,
    pub f16: usize,
    /// Other float widths (f64, bf16, ...): never written by EndoTwin.
    pub other: usize,
}

impl FloatTensors {
    /// `Half` when any float tensor is f16 (a half record keeps its vectors in f32, see
    /// [`halve_record`]), `Full` when its float tensors are f32; `None` without float tensors.
    pub fn precision(&self) -> Option<Precision> {
        if self.f16 > 0 {
            Some(Precision::Half)
        } else if self.f32 > 0 {
            Some(Precision::Full)
        } else {
            None
        }
    }
}

/// Counts the float tensors of a Burnpack record by width (reads the header only).
pub fn float_tensors(record: &[u8]) -> Result<FloatTensors, String> {
    let tensors = Reader::from_bytes(Bytes::from_bytes_vec(record.to_vec()))
        .and_then(Reader::into_tensors)
        .map_err(|e| format!("not a Burnpack record: {e}"))?;
    let mut count = FloatTensors::default();
    for t in tensors.iter().filter(|t| t.dtype.is_float()) {
        match t.dtype {
            DType::F32 => count.f32 += 1,
            DType::F16 => count.f16 += 1,
            _ => count.other += 1,
        }
    }
    Ok(count)
}

/// A weight tensor holding a value beyond this size stays f32 in a half record. Such weights
/// come from a BatchNorm folded over a near-zero variance (the shipped MobileNetV2's first
/// blocks reach 95 and 127): their products cancel against a bias of the same size, so f16's
/// rounding, 2^-11 of each weight, becomes an error of the layer's far smaller output.
pub const HALF_LIMIT: f32 = 16.0;

/// A weight tensor with fewer values than this stays f32 in a half record: such tensors add
/// little to the record, and in a convolutional backbone they are the first layers, whose
/// rounding every later layer amplifies. On the sample library's polyp views the shipped
/// twin encoder's embedding moves at most 3.3e-3 with every weight within [`HALF_LIMIT`] in
/// f16, 5.5e-4 with these kept too (a record 4% larger).
pub const HALF_MIN_VALUES: usize = 1 << 14;

/// A record rewritten in f16 ([`halve_record`]).
#[derive(Debug, Clone)]
pub struct HalfRecord {
    pub bytes: Vec<u8>,
    /// Tensors converted from f32, and their values.
    pub tensors: usize,
    pub values: usize,
    /// Weight tensors kept in f32: smaller than [`HALF_MIN_VALUES`], or with a value beyond
    /// [`HALF_LIMIT`] (or not finite).
    pub kept: usize,
    /// The largest |f16(x) - x| over every value converted, and the largest |f16(x) - x| / |x|
    /// over those in f16's normal range (|x| >= 2^-14; at most 2^-11).
    pub max_change: f32,
    pub max_relative: f32,
}

/// `record` (a Burnpack) with its f32 weights (matrices and higher-rank tensors of at least
/// [`HALF_MIN_VALUES`] values: nearly all of the bytes) stored as f16, each value rounded to
/// the nearest. Kept as they were: vectors (biases, norm scales, tokens, CLIP's log logit
/// scale, whose rounding `exp` would magnify), smaller weights, weights with a value beyond
/// [`HALF_LIMIT`] in size or not finite, every other tensor, the metadata and the scalars.
pub fn halve_record(record: &[u8]) -> Result<HalfRecord, String> {
    let reader = Reader::from_bytes(Bytes::from_bytes_vec(record.to_vec()))
        .map_err(|e| format!("not a Burnpack record: {e}"))?;
    let metadata = reader.metadata().clone();
    let scalars = reader.scalars().clone();
    let tensors = reader
        .into_tensors()
        .map_err(|e| format!("not a Burnpack record: {e}"))?;
    let (mut converted, mut values, mut kept) = (0, 0, 0);
    let (mut max_change, mut max_relative) = (0.0f32, 0.0f32);
    let mut out = Vec::with_capacity(tensors.len());
    for t in tensors {
        if t.dtype != DType::F32 || t.shape.num_dims() < 2 {
            out.push(t);
            continue;
        }
        let bytes = t
            .to_bytes()
            .map_err(|e| format!("cannot read tensor `{}`: {e}", t.name))?;
        let floats: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if floats.len() < HALF_MIN_VALUES
            || !floats
                .iter()
                .all(|x| x.is_finite() && x.abs() <= HALF_LIMIT)
        {
            kept += 1;
            out.push(t);
            continue;
        }
        let mut half = Vec::with_capacity(bytes.len() / 2);
        for x in floats {
            let h = f16::from_f32(x);
            let change = (h.to_f32() - x).abs();
            max_change = max_change.max(change);
            if x.abs() >= f16::MIN_POSITIVE.to_f32() {
                max_relative = max_relative.max(change / x.abs());
            }
            half.extend_from_slice(&h.to_le_bytes());
        }
        converted += 1;
        values += half.len() / 2;
        let bytes = Bytes::from_bytes_vec(half);
        out.push(PackTensor::new(
            t.name,
            DType::F16,
            t.shape,
            t.param_id,
            bytes,
        ));
    }
    let mut writer = Writer::new(out);
    for (key, value) in &metadata {
        writer = writer.with_metadata(key, value);
    }
    for (key, value) in scalars {
        writer = writer.with_scalar(&key, value);
    }
    let bytes = writer
        .into_bytes()
        .map_err(|e| format!("cannot write the record: {e}"))?;
    Ok(HalfRecord {
        bytes: bytes.to_vec(),
        tensors: converted,
        values,
        kept,
        max_change,
        max_relative,
    })
}

/// What [`halve`] did.
#[derive(Debug, Clone)]
pub struct Halved {
    /// The card as written (its new checksum and version).
    pub card: ModelCard,
    /// The version it had before.
    pub was: String,
    /// The record's size before and after.
    pub bytes_before: usize,
    pub bytes_after: usize,
    pub tensors: usize,
    pub values: usize,
    pub kept: usize,
    pub max_change: f32,
    pub max_relative: f32,
    /// Cards beside it that read these weights (their `reads`), now re-pointed at the half
    /// ones.
    pub repointed: Vec<PathBuf>,
}

/// Rewrites the record of the card at `path` in f16 ([`halve_record`]) and the card with the
/// record's new SHA-256 and the version `version` makes of its old one (the weights changed by
/// their rounding: embeddings stored under the old version are made again). Both through the
/// same temporary-file path as [`weights::save`]. The card's config checksum and the record's
/// checksum are checked first; a record already in f16 is refused.
///
/// Cards in the same folder that read these weights (`reads`, by checksum: a tracklet head
/// over its frame encoder) would be refused beside the new ones. With `repoint` their `reads`
/// follows the half weights (checksum and version); without it nothing is changed and they
/// are named.
pub fn halve(
    path: &Path,
    version: impl Fn(&str) -> String,
    repoint: bool,
) -> Result<Halved, WeightsError> {
    let card = weights::read_card(path)?;
    if weights::config_edited(&card) {
        return Err(WeightsError::Card {
            path: path.to_path_buf(),
            reason: "its config or input recipe was edited after the model was saved; restore \
                     the card first (nothing was changed)"
                .into(),
        });
    }
    let record = weights::record_path(path);
    let bytes = weights::read_record(&record, &card.sha256)?;
    let floats = float_tensors(&bytes).map_err(|reason| WeightsError::Mismatch {
        path: record.clone(),
        reason,
    })?;
    if floats.precision() == Some(Precision::Half) {
        return Err(WeightsError::AlreadyHalf { path: record });
    }
    let readers = readers_of(path, &card.sha256);
    if !readers.is_empty() && !repoint {
        let names: Vec<String> = readers.iter().map(|p| p.display().to_string()).collect();
        return Err(WeightsError::Readers {
            path: path.to_path_buf(),
            readers: names.join(", "),
        });
    }
    let half = halve_record(&bytes).map_err(|reason| WeightsError::Mismatch {
        path: record.clone(),
        reason,
    })?;
    if half.tensors == 0 {
        return Err(WeightsError::NothingToHalve { path: record });
    }
    let mut after = card.clone();
    after.sha256 = weights::hex(&Sha256::digest(&half.bytes));
    after.version = version(&card.version);
    after.config_sha256 = Some(card.config_checksum());
    weights::write_atomic(&record, &half.bytes)?;
    let json = serde_json::to_vec_pretty(&after).expect("cards serialise");
    weights::write_atomic(path, &json)?;
    for reader in &readers {
        weights::update_card(reader, |c| {
            if let Some(r) = c.reads.as_mut() {
                r.sha256 = after.sha256.clone();
                r.version = version(&r.version);
            }
        })?;
    }
    Ok(Halved {
        was: card.version,
        card: after,
        bytes_before: bytes.len(),
        bytes_after: half.bytes.len(),
        tensors: half.tensors,
        values: half.values,
        kept: half.kept,
        max_change: half.max_change,
        max_relative: half.max_relative,
        repointed: readers,
    })
}

/// The other cards in `card`'s folder whose `reads` names the weights `sha256`.
fn readers_of(card: &Path, sha256: &str) -> Vec<PathBuf> {
    let dir = card
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json") && p.file_name() != card.file_name())
        .filter(|p| {
            weights::read_card(p)
                .is_ok_and(|c| c.reads.as_ref().is_some_and(|r| r.sha256 == sha256))
        })
        .collect();
    out.sort();
    out
}
