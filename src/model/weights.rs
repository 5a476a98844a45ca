//! Weights on disk: a burn record (Burnpack, `<name>.bpk`) always beside its model card
//! (`<name>.json`), which holds the module's config, what it is for, how it was trained, and
//! the SHA-256 of the record. A record is never loaded without the config that built it, and a
//! record that changed since its card was written is refused.

use burn::module::Module;
use burn::store::{BurnpackStore, FloatCastAdapter, ModuleSnapshot};
use burn::tensor::{Bytes, DType};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum WeightsError {
    // The OS error is said in words and is not a `source`: a chain printed by the CLI would
    // repeat it as Rust writes it (round 14 R3).
    #[error("cannot read {path}: {}", crate::plumbing::input::plain_io(.io))]
    Read { path: PathBuf, io: std::io::Error },
    #[error("cannot write {path}: {}", crate::plumbing::input::plain_io(.io))]
    Write { path: PathBuf, io: std::io::Error },
    #[error("{path} is not a model card: {reason}")]
    Card { path: PathBuf, reason: String },
    #[error("{path} is a model of kind {found}, not {expected}")]
    Kind {
        path: PathBuf,
        expected: ModelKind,
        found: ModelKind,
    },
    #[error("{path} does not match its model card (SHA-256 {found}, card says {expected})")]
    Checksum {
        path: PathBuf,
        expected: String,
        found: String,
    },
    #[error("{path} does not fit the config in its card: {reason}")]
    Mismatch { path: PathBuf, reason: String },
    #[error(
        "'{name}' cannot name a model: use letters, digits, '-', '_' and '.' only (no folders)"
    )]
    BadName { name: String },
    #[error("{path} is already stored in half precision (f16): nothing was changed")]
    AlreadyHalf { path: PathBuf },
    #[error(
        "{path}: {readers} read its weights (their card's `reads`) and would be refused beside \
         half ones; nothing was changed. Pass --force to halve it and re-point them at the half \
         weights"
    )]
    Readers { path: PathBuf, readers: String },
    #[error(
        "{path} has no weight to store in f16 (each has fewer than 16384 values or a value \
         beyond 16): it stays f32, nothing was changed"
    )]
    NothingToHalve { path: PathBuf },
}

/// How a record's float tensors are stored on disk. Modules always compute in f32: a half
/// record is widened to f32 as it loads ([`load`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// f32, what training runs and checkpoints write.
    Full,
    /// f16 weights (vectors stay f32), half the bytes: the shipped models (`endotwin model
    /// half`).
    Half,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    ImageEncoder,
    SceneEncoder,
    Clip,
    TextEncoder,
    TrackletEncoder,
    /// The tracklet encoder's temporal part alone, over a frozen twin image encoder's
    /// per-frame features.
    TrackletHead,
    /// A capsule caption model: a CLIP dual encoder with a word tokenizer and a category head.
    CaptionModel,
    /// A text-prompt model (Endo-CLIP): a CLIP dual encoder with a word tokenizer and the
    /// stage-3 unifier.
    PromptModel,
    Unifier,
    ReconstructionDecoder,
}

impl std::fmt::Display for ModelKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = serde_json::to_value(self).ok();
        write!(
            f,
            "{}",
            name.as_ref().and_then(|v| v.as_str()).unwrap_or("?")
        )
    }
}

/// How a shipped model came to be: enough to train it again.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Training {
    /// The exact command line.
    pub command: String,
    pub seed: u64,
    /// What it learned from (e.g. "phantom seed 11, train split, 120 polyps x 4 views").
    pub data: String,
    pub epochs: usize,
    /// Wall time and the machine it ran on.
    pub wall: String,
    /// Final figures, name -> value.
    #[serde(default)]
    pub metrics: Vec<(String, f64)>,
}

/// How a model scored on held-out data, and the command that measured it.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Evaluation {
    pub command: String,
    /// What it was evaluated on.
    pub data: String,
    /// name -> value, e.g. "2v2 scene encoder, float: uAP" -> 0.81.
    pub metrics: Vec<(String, f64)>,
}

/// Where an active model came from when a user promoted it (the Training tab's Promote).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Promotion {
    /// The card it was copied from.
    pub card: String,
    /// The library's training run that made it, when known.
    pub run: Option<i64>,
    /// When (UTC).
    pub at: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ModelCard {
    pub name: String,
    pub kind: ModelKind,
    /// Bumped whenever the weights change; embeddings in the store are keyed by it.
    pub version: String,
    pub description: String,
    /// The module's burn `Config`, as JSON.
    pub config: serde_json::Value,
    #[serde(default)]
    pub training: Option<Training>,
    #[serde(default)]
    pub evaluation: Option<Evaluation>,
    /// How an image encoder's input is cut (polyp-centred crop, field-stop blackout); absent
    /// in older cards, which resize the whole frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<super::preprocess::TwinInput>,
    /// Filled in by [`save`].
    #[serde(default)]
    pub sha256: String,
    /// SHA-256 of the card's kind, config and input recipe, filled in by [`save`]: the
    /// record's checksum cannot see an edited config, this one can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_sha256: Option<String>,
    /// Set on a library's active copy of a promoted model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promoted_from: Option<Promotion>,
    /// An image encoder's mean embedding on its training data, subtracted before the signs
    /// are taken for the binary code (centred sign hashing): without it, dimensions that lean
    /// one way on every image waste their bit. Absent: plain signs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_center: Option<Vec<f32>>,
    /// An image encoder's code rotation (d x d, row-major), applied to the centred embedding
    /// before the signs: iterative quantisation on its training data. Absent: no rotation.
    /// Written as one hex string (8 digits per little-endian f32): 65536 values as a JSON
    /// array would be a 1.6 MB card.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::plumbing::f32_hex"
    )]
    pub code_rotation: Option<Vec<f32>>,
    /// Longer binary codes: `bits` (a multiple of the embedding's d) instead of d, the first
    /// d bits as without it, the others the signs of the same embedding turned by seeded
    /// random rotations (one per further d bits). Absent: d bits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_bits: Option<CodeBits>,
    /// The frozen model whose outputs this one was trained on (a tracklet head's twin image
    /// encoder), by its weights' checksum: another model's features mean nothing to it.
    /// Absent in older cards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<Reads>,
    /// How far an input's embedding lies from what the model learned from, with the
    /// threshold beyond which its answers are marked unfamiliar (`endotwin model trust`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub familiarity: Option<crate::trust::Familiarity>,
    /// Calibrations of the confidences the model's answers show, by name (`vote`,
    /// `category`, `detector`), fitted on validation.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub calibration: std::collections::BTreeMap<String, crate::trust::Calibration>,
}

/// The frozen model a card was trained over ([`ModelCard::reads`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reads {
    pub name: String,
    pub version: String,
    /// Its weights' SHA-256 (the card's `sha256`): unchanged by a new crop or code length,
    /// which leave the weights alone.
    pub sha256: String,
}

/// How many bits an image encoder's binary codes have beyond its embedding's d, and the seed
/// of the random rotations that make them ([`ModelCard::code_bits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeBits {
    pub bits: usize,
    pub seed: u64,
}

impl ModelCard {
    pub fn new(
        name: &str,
        kind: ModelKind,
        version: &str,
        description: &str,
        config: &impl Serialize,
    ) -> ModelCard {
        ModelCard {
            name: name.into(),
            kind,
            version: version.into(),
            description: description.into(),
            config: serde_json::to_value(config).expect("burn configs serialise"),
            training: None,
            evaluation: None,
            input: None,
            code_center: None,
            code_rotation: None,
            code_bits: None,
            reads: None,
            familiarity: None,
            calibration: Default::default(),
            sha256: String::new(),
            config_sha256: None,
            promoted_from: None,
        }
    }

    /// The checksum [`ModelCard::config_sha256`] holds for this card's kind, config and input
    /// (and code centre, when it has one).
    pub fn config_checksum(&self) -> String {
        let json = match (&self.code_center, &self.code_rotation) {
            (None, None) => serde_json::to_vec(&(self.kind, &self.config, &self.input)),
            (Some(c), None) => serde_json::to_vec(&(self.kind, &self.config, &self.input, c)),
            (c, Some(r)) => serde_json::to_vec(&(self.kind, &self.config, &self.input, c, r)),
        }
        .map(|mut json| {
            // Cards without longer codes keep the checksum they were saved with.
            if let Some(b) = &self.code_bits {
                json.extend(serde_json::to_vec(b).expect("cards serialise"));
            }
            json
        })
        .expect("cards serialise");
        hex(&Sha256::digest(&json))
    }

    /// The config this card was saved with, as `C`.
    pub fn config<C: serde::de::DeserializeOwned>(&self, path: &Path) -> Result<C, WeightsError> {
        serde_json::from_value(self.config.clone()).map_err(|e| WeightsError::Card {
            path: path.to_path_buf(),
            reason: format!(
                "its config is not one this {} reads ({})",
                self.kind,
                e.to_string().replace(
                    "data did not match any variant of untagged enum ",
                    "no known "
                )
            ),
        })
    }
}

/// Whether the card's config or input recipe was edited after its model was saved (its
/// config checksum no longer holds). Cards saved before checksums existed are not edited.
pub fn config_edited(card: &ModelCard) -> bool {
    card.config_sha256
        .as_ref()
        .is_some_and(|sum| *sum != card.config_checksum())
}

/// The record beside a card: `dir/name.json` -> `dir/name.bpk`.
pub fn record_path(card: &Path) -> PathBuf {
    card.with_extension("bpk")
}

/// Writes `dir/<card.name>.bpk` and `dir/<card.name>.json` (each through a temporary file,
/// so a crash leaves the old pair or the new one), the record in f32. Returns the card's path.
pub fn save(
    module: &impl ModuleSnapshot,
    card: &ModelCard,
    dir: &Path,
) -> Result<PathBuf, WeightsError> {
    save_as(module, card, dir, Precision::Full)
}

/// [`save`] with the record's weights stored in `precision` (`Half`: see
/// [`super::half::halve_record`]; the card's checksum is of the bytes written).
pub fn save_as(
    module: &impl ModuleSnapshot,
    card: &ModelCard,
    dir: &Path,
    precision: Precision,
) -> Result<PathBuf, WeightsError> {
    check_name(&card.name)?;
    let mut store = BurnpackStore::from_bytes(None);
    module
        .save_into(&mut store)
        .map_err(|e| WeightsError::Mismatch {
            path: dir.to_path_buf(),
            reason: e.to_string(),
        })?;
    let mut bytes = store.get_bytes().map_err(|e| WeightsError::Mismatch {
        path: dir.to_path_buf(),
        reason: e.to_string(),
    })?;
    if precision == Precision::Half {
        let half = super::half::halve_record(&bytes).map_err(|reason| WeightsError::Mismatch {
            path: dir.to_path_buf(),
            reason,
        })?;
        bytes = Bytes::from_bytes_vec(half.bytes);
    }
    let card_path = dir.join(format!("{}.json", card.name));
    let mut card = card.clone();
    card.sha256 = hex(&Sha256::digest(&bytes[..]));
    card.config_sha256 = Some(card.config_checksum());
    write_atomic(&record_path(&card_path), &bytes)?;
    let json = serde_json::to_vec_pretty(&card).expect("cards serialise");
    write_atomic(&card_path, &json)?;
    Ok(card_path)
}

/// The largest model card EndoTwin reads (cards are a few kilobytes).
const MAX_CARD_BYTES: u64 = 16 << 20;
/// The largest weights record EndoTwin reads (ViT-B/32 in f32 is about 350 MB).
pub(crate) const MAX_RECORD_BYTES: u64 = 4 << 30;

/// The size of model file `path`, once it is known to be a regular file (a FIFO, a device or
/// a link to one would block or never end) of at most `max` bytes.
fn model_file_len(path: &Path, max: u64) -> Result<u64, WeightsError> {
    let read_error = |io| WeightsError::Read {
        path: path.to_path_buf(),
        io,
    };
    let meta = std::fs::metadata(path).map_err(read_error)?;
    if !meta.is_file() {
        return Err(read_error(std::io::Error::other(
            "not a regular file (a folder, FIFO or device)",
        )));
    }
    if meta.len() > max {
        return Err(read_error(std::io::Error::other(format!(
            "{} bytes, more than a model file of EndoTwin's can be ({max})",
            meta.len()
        ))));
    }
    Ok(meta.len())
}

/// The bytes of a model file: a regular file (a FIFO, a device or a link to one would block
/// or never end) of at most `max` bytes, checked before a byte is read.
pub(crate) fn read_model_file(path: &Path, max: u64) -> Result<Vec<u8>, WeightsError> {
    let read_error = |io| WeightsError::Read {
        path: path.to_path_buf(),
        io,
    };
    let len = model_file_len(path, max)?;
    let mut bytes = Vec::with_capacity(len as usize);
    use std::io::Read;
    std::fs::File::open(path)
        .and_then(|f| f.take(max + 1).read_to_end(&mut bytes))
        .map_err(read_error)?;
    if bytes.len() as u64 > max {
        return Err(read_error(std::io::Error::other("grew while being read")));
    }
    Ok(bytes)
}

/// Records above this size are hashed from the disk before they are read into memory, so a
/// wrong multi-gigabyte file is refused in constant memory (round 6 N78: a 4 GB sparse file
/// beside a card took 4.2 GB before its hash was compared).
const HASH_FIRST_ABOVE: u64 = 256 << 20;

/// The bytes of the weights record `record`, once they hash to `expected` (the card's
/// SHA-256): a regular file of at most [`MAX_RECORD_BYTES`].
pub(crate) fn read_record(record: &Path, expected: &str) -> Result<Vec<u8>, WeightsError> {
    let mismatch = |found: String| WeightsError::Checksum {
        path: record.to_path_buf(),
        expected: expected.to_string(),
        found,
    };
    if model_file_len(record, MAX_RECORD_BYTES)? > HASH_FIRST_ABOVE {
        let read_error = |io| WeightsError::Read {
            path: record.to_path_buf(),
            io,
        };
        let mut hasher = Sha256::new();
        let file = std::fs::File::open(record).map_err(read_error)?;
        use std::io::Read;
        std::io::copy(&mut file.take(MAX_RECORD_BYTES + 1), &mut hasher).map_err(read_error)?;
        let found = hex(&hasher.finalize());
        if found != expected {
            return Err(mismatch(found));
        }
    }
    let bytes = read_model_file(record, MAX_RECORD_BYTES)?;
    let found = hex(&Sha256::digest(&bytes));
    if found != expected {
        return Err(mismatch(found));
    }
    Ok(bytes)
}

/// The card at `path`, once its record beside it is read and hashes to the card's SHA-256:
/// a pair that would load (short of building the model), checked before it is moved into use.
pub fn verify_pair(path: &Path) -> Result<ModelCard, WeightsError> {
    let card = read_card(path)?;
    read_record(&record_path(path), &card.sha256)?;
    Ok(card)
}

pub fn read_card(path: &Path) -> Result<ModelCard, WeightsError> {
    let text = read_model_file(path, MAX_CARD_BYTES)?;
    let refuse = |reason: String| WeightsError::Card {
        path: path.to_path_buf(),
        reason,
    };
    let card: ModelCard = serde_json::from_slice(&text).map_err(|e| {
        refuse(match e.classify() {
            // Not JSON at all (an image, a record): said so, not as a parser's position. JSON
            // with a number too big for its field (round 14 N3) is JSON: the parser's words.
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof
                if serde_json::from_slice::<serde::de::IgnoredAny>(&text).is_err() =>
            {
                "not JSON text (a model card is the .json file beside its .bpk record)".into()
            }
            _ => e.to_string(),
        })
    })?;
    if let Some(f) = &card.familiarity {
        f.check(f.mean.len()).map_err(refuse)?;
    }
    Ok(card)
}

/// Loads the model of the card at `path`: `init` builds the module from the card's config,
/// then the record's tensors replace its initial ones. Every tensor must be present and of
/// the right shape. Float tensors load as f32 whatever the record stores (f32 or f16).
pub fn load<C, M>(
    path: &Path,
    kind: ModelKind,
    init: impl FnOnce(&C) -> M,
) -> Result<(M, ModelCard), WeightsError>
where
    C: serde::de::DeserializeOwned + CheckConfig,
    M: Module + ModuleSnapshot,
{
    let card = read_card(path)?;
    if card.kind != kind {
        return Err(WeightsError::Kind {
            path: path.to_path_buf(),
            expected: kind,
            found: card.kind,
        });
    }
    let refuse = |reason: String| WeightsError::Card {
        path: path.to_path_buf(),
        reason,
    };
    if config_edited(&card) {
        return Err(refuse(
                "its config or input recipe was edited after the model was saved (config checksum differs); restore the card or train again".into(),
            ));
    }
    let config: C = card.config(path)?;
    config
        .check()
        .map_err(|reason| refuse(format!("its config cannot build a model: {reason}")))?;
    let record = record_path(path);
    let bytes = read_record(&record, &card.sha256)?;
    let mut module = init(&config);
    let mismatch = |reason: String| WeightsError::Mismatch {
        path: record.clone(),
        reason,
    };
    // A loaded tensor keeps the dtype its record names unless told otherwise: f16 weights
    // would stay f16 in an f32 module.
    let mut store = BurnpackStore::from_bytes(Some(Bytes::from_bytes_vec(bytes)))
        .with_from_adapter(FloatCastAdapter::to(DType::F32));
    let result = module
        .load_from(&mut store)
        .map_err(|e| mismatch(e.to_string()))?;
    if let Some(e) = result.errors.first() {
        return Err(mismatch(e.to_string()));
    }
    if let Some((tensor, _)) = result.missing.first() {
        return Err(mismatch(format!("no tensor `{tensor}`")));
    }
    Ok((module, card))
}

/// Rewrites the card at `path` (the record is untouched, so its checksum still holds). The
/// config checksum is kept as it was, so an edited config stays refused; a card written
/// before cards had one gets it now.
pub fn update_card(path: &Path, change: impl FnOnce(&mut ModelCard)) -> Result<(), WeightsError> {
    let mut card = read_card(path)?;
    let sum = card.config_sha256.clone();
    change(&mut card);
    card.config_sha256 = Some(sum.unwrap_or_else(|| card.config_checksum()));
    let json = serde_json::to_vec_pretty(&card).expect("cards serialise");
    write_atomic(path, &json)
}

/// Gives the image encoder card at `path` a code centre and a new version (codes made before
/// differ, so libraries indexed with the old version are re-indexed). Its config checksum is
/// checked first and then made anew: a card edited by hand stays refused.
pub fn set_code_center(
    path: &Path,
    center: Vec<f32>,
    rotation: Option<Vec<f32>>,
    version: &str,
) -> Result<(), WeightsError> {
    change_codes(path, |card| {
        card.code_center = Some(center);
        card.code_rotation = rotation;
        card.version = version.to_string();
    })
}

/// Gives the image encoder card at `path` longer codes ([`ModelCard::code_bits`]; `None`: d
/// bits again) and a new version, checked and re-summed as [`set_code_center`] does.
pub fn set_code_bits(
    path: &Path,
    bits: Option<CodeBits>,
    version: &str,
) -> Result<(), WeightsError> {
    change_codes(path, |card| {
        card.code_bits = bits;
        card.version = version.to_string();
    })
}

/// Changes the twin image encoder card at `path`'s input recipe (its crop context, its quarter
/// turns) with `change` under a new `version` (embeddings change, so libraries indexed before
/// are re-indexed), checked and re-summed as [`set_code_center`] does. A card without an input
/// recipe (a whole-frame encoder) is refused: there is nothing `what` ("crop", "turn") applies to.
pub fn set_input(
    path: &Path,
    what: &str,
    change: impl FnOnce(&mut crate::model::preprocess::TwinInput),
    version: &str,
) -> Result<(), WeightsError> {
    let card = read_card(path)?;
    if card.input.is_none() {
        return Err(WeightsError::Mismatch {
            path: path.to_path_buf(),
            reason: format!("it has no input recipe (a whole-frame encoder): nothing to {what}"),
        });
    }
    change_codes(path, |card| {
        if let Some(input) = card.input.as_mut() {
            change(input);
        }
        card.version = version.to_string();
    })
}

/// Rewrites the card at `path` after `change`, its config checksum checked before and made
/// anew after (a card edited by hand stays refused).
fn change_codes(path: &Path, change: impl FnOnce(&mut ModelCard)) -> Result<(), WeightsError> {
    let mut card = read_card(path)?;
    if config_edited(&card) {
        return Err(WeightsError::Mismatch {
            path: path.to_path_buf(),
            reason: "its config or input recipe was edited after the model was saved; restore \
                     the card first"
                .into(),
        });
    }
    change(&mut card);
    card.config_sha256 = Some(card.config_checksum());
    let json = serde_json::to_vec_pretty(&card).expect("cards serialise");
    write_atomic(path, &json)
}

pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WeightsError> {
    let tmp = path.with_extension("partial");
    // Whatever is under the temporary name goes first (a FIFO there would block), and a
    // write cut short takes its half file with it (round 7 N69: a full disk left one).
    let _ = std::fs::remove_file(&tmp);
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|io| {
            let _ = std::fs::remove_file(&tmp);
            WeightsError::Write {
                path: path.to_path_buf(),
                io,
            }
        })
}

/// A model name becomes `<dir>/<name>.json`: one plain file name, never a path.
/// `<dir>/<name>.json`, else `<dir>/<name>.1.json`, `.2`, ...: the first card name in `dir`
/// taken by neither a card nor a record (where a demoted or replaced model is kept).
pub fn free_card_path(dir: &Path, name: &str) -> PathBuf {
    (0..)
        .map(|n| match n {
            0 => dir.join(format!("{name}.json")),
            n => dir.join(format!("{name}.{n}.json")),
        })
        .find(|p| !p.exists() && !record_path(p).exists())
        .expect("a free name")
}

pub fn check_name(name: &str) -> Result<(), WeightsError> {
    let plain = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if plain {
        Ok(())
    } else {
        Err(WeightsError::BadName {
            name: name.to_string(),
        })
    }
}

/// A config that says whether it can build a module, before any tensor is made: every size
/// positive and within reason, widths divisible by head counts, and so on. A card is never
/// loaded with a config that fails it (a `heads: 0` would otherwise panic deep in burn).
pub trait CheckConfig {
    fn check(&self) -> Result<(), String>;
}

/// `name` lies in `1..=max`.
pub fn check_size(name: &str, value: usize, max: usize) -> Result<(), String> {
    if (1..=max).contains(&value) {
        Ok(())
    } else {
        Err(format!("{name} is {value}; it must be between 1 and {max}"))
    }
}

/// `width` splits evenly over `heads` (both already checked positive).
pub fn check_heads(what: &str, width: usize, heads: usize) -> Result<(), String> {
    check_size(&format!("{what} heads"), heads, width)?;
    if !width.is_multiple_of(heads) {
        return Err(format!(
            "{what} width {width} does not split over {heads} heads"
        ));
    }
    Ok(())
}

/// A real-valued setting lies in `(low, high]` and is finite.
pub fn check_real(name: &str, value: f64, low: f64, high: f64) -> Result<(), String> {
    if value.is_finite() && value > low && value <= high {
        Ok(())
    } else {
        Err(format!(
            "{name} is {value}; it must be above {low} and at most {high}"
        ))
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
