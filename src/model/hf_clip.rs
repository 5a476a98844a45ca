//! Import of Hugging Face CLIP checkpoints (`CLIPModel` safetensors, the
//! `openai/clip-vit-base-patch32` key layout) into [`Clip`].
//!
//! The file's header is checked against the tensors the config implies *before* anything is
//! loaded, so a file that does not fit fails with the first missing or mis-shaped tensor under
//! its name in the file, and nothing is half-loaded. burn-store then does the loading: key
//! remapping to our module paths, PyTorch -> burn layout (Linear transposed, LayerNorm
//! weight/bias -> gamma/beta) and a cast of half-precision files to f32.

use super::block::Activation;
use super::clip::{Clip, ClipConfig};
use super::text::TextEncoderConfig;
use super::vit::VitConfig;
use burn::store::SafetensorsStore;
use burn::store::{FloatCastAdapter, ModuleAdapter, ModuleSnapshot, PyTorchToBurnAdapter};
use burn::tensor::{DType, Device, Tensor, TensorData};
use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum HfClipError {
    #[error("cannot read {path}: {}", crate::plumbing::input::plain_io(.io))]
    Io { path: PathBuf, io: std::io::Error },
    #[error("{path} is not a readable safetensors file (truncated or corrupt?): {reason}")]
    NotSafetensors { path: PathBuf, reason: String },
    #[error(
        "{path} is not a Hugging Face CLIP checkpoint: it has no `{expected}`; its tensors look like `{example}`"
    )]
    NotClip {
        path: PathBuf,
        expected: &'static str,
        example: String,
    },
    #[error("{path} lacks tensor `{tensor}` that this CLIP configuration needs")]
    Missing { path: PathBuf, tensor: String },
    #[error(
        "{path}: tensor `{tensor}` has shape {found:?}, this CLIP configuration expects {expected:?}"
    )]
    Shape {
        path: PathBuf,
        tensor: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
    #[error("{path}: tensor `{tensor}` is stored as {dtype}; only F32, F16 and BF16 are read")]
    DType {
        path: PathBuf,
        tensor: String,
        dtype: String,
    },
    #[error("{path}: {reason}")]
    Config { path: PathBuf, reason: String },
    #[error("loading {path} failed: {reason}")]
    Load { path: PathBuf, reason: String },
    #[error("cannot create {path}: {}", crate::plumbing::input::plain_io(.io))]
    Create { path: PathBuf, io: std::io::Error },
    #[error(transparent)]
    Save(#[from] super::weights::WeightsError),
}

/// Imports `weights` (on the CPU) and saves it as `<out>/<name>.json` + `.bpk`, a CLIP model
/// card and burn record. Returns the card's path and the geometry read.
pub fn import_to_card(
    weights: &Path,
    out: &Path,
    name: &str,
) -> Result<(PathBuf, ClipConfig), HfClipError> {
    use super::weights::{self as w, ModelCard, ModelKind};
    w::check_name(name)?;
    let device = Device::flex();
    let (clip, config) = load_hf_clip(weights, None, &device)?;
    std::fs::create_dir_all(out).map_err(|io| HfClipError::Create {
        path: out.to_path_buf(),
        io,
    })?;
    let card = ModelCard::new(
        name,
        ModelKind::Clip,
        "1",
        &format!("CLIP dual encoder imported from {}", weights.display()),
        &config,
    );
    let path = w::save(&clip, &card, out)?;
    Ok((path, config))
}

/// Where the config came from when none was given: `config.json` beside the weights (the
/// Hugging Face layout), otherwise read off the tensor shapes with CLIP's rule of 64 channels
/// per attention head.
pub fn load_hf_clip(
    weights: &Path,
    config: Option<ClipConfig>,
    device: &Device,
) -> Result<(Clip, ClipConfig), HfClipError> {
    let bytes = std::fs::read(weights).map_err(|io| HfClipError::Io {
        path: weights.to_path_buf(),
        io,
    })?;
    let file = SafeTensors::deserialize(&bytes).map_err(|e| HfClipError::NotSafetensors {
        path: weights.to_path_buf(),
        reason: e.to_string(),
    })?;
    let header = Header::of(&file);
    header.require_clip(weights)?;
    let config = match config {
        Some(c) => c,
        None => {
            let beside = weights.with_file_name("config.json");
            if beside.is_file() {
                read_hf_config(&beside)?
            } else {
                infer_config(&header, weights)?
            }
        }
    };
    {
        use super::weights::CheckConfig;
        config.check().map_err(|reason| HfClipError::Config {
            path: weights.to_path_buf(),
            reason: format!("the model it describes cannot be built: {reason}"),
        })?;
    }
    header.check(&expected_tensors(&config), weights)?;
    let logit_scale = header.scalar(&file, "logit_scale", weights)?;
    drop(file);

    let mut model = config.init(device);
    let mut store = SafetensorsStore::from_bytes(Some(bytes))
        .with_from_adapter(PyTorchToBurnAdapter.chain(FloatCastAdapter::to(DType::F32)))
        .allow_partial(true);
    for (from, to) in KEY_MAP {
        store = store.with_key_remapping(from, *to);
    }
    let result = model.load_from(&mut store).map_err(|e| HfClipError::Load {
        path: weights.to_path_buf(),
        reason: e.to_string(),
    })?;
    if let Some(e) = result.errors.first() {
        return Err(HfClipError::Load {
            path: weights.to_path_buf(),
            reason: e.to_string(),
        });
    }
    // The logit scale is a 0-d tensor in PyTorch; it is set by hand below.
    if let Some((missing, _)) = result.missing.iter().find(|(p, _)| p != "logit_scale") {
        return Err(HfClipError::Missing {
            path: weights.to_path_buf(),
            tensor: missing.clone(),
        });
    }
    model.logit_scale = model
        .logit_scale
        .map(|_| Tensor::from_data(TensorData::new(vec![logit_scale], [1]), device));
    Ok((model, config))
}

/// Hugging Face names -> our module paths, applied in order to every key.
const KEY_MAP: &[(&str, &str)] = &[
    (
        r"^vision_model\.embeddings\.class_embedding$",
        "vision.class_token",
    ),
    (
        r"^vision_model\.embeddings\.patch_embedding\.",
        "vision.patch_embed.",
    ),
    (
        r"^vision_model\.embeddings\.position_embedding\.weight$",
        "vision.positions",
    ),
    (r"^vision_model\.pre_layrnorm\.", "vision.norm_pre."),
    (r"^vision_model\.post_layernorm\.", "vision.norm_post."),
    (r"^vision_model\.encoder\.layers\.", "vision.blocks."),
    (r"^visual_projection\.", "vision.projection."),
    (
        r"^text_model\.embeddings\.token_embedding\.",
        "text.token_embedding.",
    ),
    (
        r"^text_model\.embeddings\.position_embedding\.weight$",
        "text.positions",
    ),
    (r"^text_model\.final_layer_norm\.", "text.final_norm."),
    (r"^text_model\.encoder\.layers\.", "text.blocks."),
    (r"^text_projection\.", "text.projection."),
    (r"\.self_attn\.q_proj\.", ".attn.query."),
    (r"\.self_attn\.k_proj\.", ".attn.key."),
    (r"\.self_attn\.v_proj\.", ".attn.value."),
    (r"\.self_attn\.out_proj\.", ".attn.output."),
    (r"\.layer_norm1\.", ".norm1."),
    (r"\.layer_norm2\.", ".norm2."),
    (r"\.mlp\.fc1\.", ".fc1."),
    (r"\.mlp\.fc2\.", ".fc2."),
    // Keep the 0-d logit scale away from our [1]-shaped parameter.
    (r"^logit_scale$", "hf.logit_scale"),
];

/// Every tensor `config` needs, by its Hugging Face name, with its PyTorch shape, in the
/// order a reader would look for them.
pub fn expected_tensors(config: &ClipConfig) -> Vec<(String, Vec<usize>)> {
    let v = config
        .vision
        .vit()
        .expect("a Hugging Face CLIP's image tower is a ViT");
    let t = &config.text;
    let mut out = vec![
        (
            "vision_model.embeddings.patch_embedding.weight".to_string(),
            vec![v.width, 3, v.patch_size, v.patch_size],
        ),
        (
            "vision_model.embeddings.class_embedding".into(),
            vec![v.width],
        ),
        (
            "vision_model.embeddings.position_embedding.weight".into(),
            vec![v.patches() + 1, v.width],
        ),
    ];
    if v.norm_before_blocks {
        layer_norm(&mut out, "vision_model.pre_layrnorm", v.width);
    }
    let v_hidden = (v.width as f64 * v.mlp_ratio).round() as usize;
    for i in 0..v.depth {
        block(
            &mut out,
            &format!("vision_model.encoder.layers.{i}"),
            v.width,
            v_hidden,
        );
    }
    layer_norm(&mut out, "vision_model.post_layernorm", v.width);
    if let Some(d) = v.projection {
        out.push(("visual_projection.weight".into(), vec![d, v.width]));
    }
    out.push((
        "text_model.embeddings.token_embedding.weight".into(),
        vec![t.vocab_size, t.width],
    ));
    out.push((
        "text_model.embeddings.position_embedding.weight".into(),
        vec![t.context, t.width],
    ));
    let t_hidden = (t.width as f64 * t.mlp_ratio).round() as usize;
    for i in 0..t.depth {
        block(
            &mut out,
            &format!("text_model.encoder.layers.{i}"),
            t.width,
            t_hidden,
        );
    }
    layer_norm(&mut out, "text_model.final_layer_norm", t.width);
    if let Some(d) = t.projection {
        out.push(("text_projection.weight".into(), vec![d, t.width]));
    }
    out.push(("logit_scale".into(), vec![]));
    out
}

fn layer_norm(out: &mut Vec<(String, Vec<usize>)>, prefix: &str, width: usize) {
    out.push((format!("{prefix}.weight"), vec![width]));
    out.push((format!("{prefix}.bias"), vec![width]));
}

fn block(out: &mut Vec<(String, Vec<usize>)>, prefix: &str, width: usize, hidden: usize) {
    layer_norm(out, &format!("{prefix}.layer_norm1"), width);
    for proj in ["q_proj", "k_proj", "v_proj", "out_proj"] {
        out.push((
            format!("{prefix}.self_attn.{proj}.weight"),
            vec![width, width],
        ));
        out.push((format!("{prefix}.self_attn.{proj}.bias"), vec![width]));
    }
    layer_norm(out, &format!("{prefix}.layer_norm2"), width);
    out.push((format!("{prefix}.mlp.fc1.weight"), vec![hidden, width]));
    out.push((format!("{prefix}.mlp.fc1.bias"), vec![hidden]));
    out.push((format!("{prefix}.mlp.fc2.weight"), vec![width, hidden]));
    out.push((format!("{prefix}.mlp.fc2.bias"), vec![width]));
}

/// Names, shapes and dtypes of a safetensors file, sorted by name.
struct Header {
    tensors: Vec<(String, Vec<usize>, Dtype)>,
}

impl Header {
    fn of(file: &SafeTensors<'_>) -> Header {
        let mut tensors: Vec<_> = file
            .tensors()
            .into_iter()
            .map(|(name, view)| (name, view.shape().to_vec(), view.dtype()))
            .collect();
        tensors.sort_by(|a, b| a.0.cmp(&b.0));
        Header { tensors }
    }

    fn get(&self, name: &str) -> Option<(&[usize], Dtype)> {
        self.tensors
            .binary_search_by(|t| t.0.as_str().cmp(name))
            .ok()
            .map(|i| (self.tensors[i].1.as_slice(), self.tensors[i].2))
    }

    fn count(&self, prefix: &str) -> usize {
        let mut layers: Vec<&str> = self
            .tensors
            .iter()
            .filter_map(|(n, _, _)| n.strip_prefix(prefix)?.split('.').next())
            .collect();
        layers.dedup();
        layers.len()
    }

    fn shape(&self, name: &str, path: &Path) -> Result<&[usize], HfClipError> {
        self.get(name)
            .map(|(s, _)| s)
            .ok_or_else(|| HfClipError::Missing {
                path: path.to_path_buf(),
                tensor: name.to_string(),
            })
    }

    fn require_clip(&self, path: &Path) -> Result<(), HfClipError> {
        const KEY: &str = "vision_model.embeddings.patch_embedding.weight";
        if self.get(KEY).is_some() {
            return Ok(());
        }
        Err(HfClipError::NotClip {
            path: path.to_path_buf(),
            expected: KEY,
            example: self
                .tensors
                .first()
                .map(|t| t.0.clone())
                .unwrap_or_else(|| "(no tensors at all)".into()),
        })
    }

    fn check(&self, expected: &[(String, Vec<usize>)], path: &Path) -> Result<(), HfClipError> {
        for (name, shape) in expected {
            let (found, dtype) = self.get(name).ok_or_else(|| HfClipError::Missing {
                path: path.to_path_buf(),
                tensor: name.clone(),
            })?;
            if found != shape.as_slice() {
                return Err(HfClipError::Shape {
                    path: path.to_path_buf(),
                    tensor: name.clone(),
                    expected: shape.clone(),
                    found: found.to_vec(),
                });
            }
            if !matches!(dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16) {
                return Err(HfClipError::DType {
                    path: path.to_path_buf(),
                    tensor: name.clone(),
                    dtype: format!("{dtype:?}"),
                });
            }
        }
        Ok(())
    }

    /// A one-element float tensor as f32.
    fn scalar(&self, file: &SafeTensors<'_>, name: &str, path: &Path) -> Result<f32, HfClipError> {
        let view = file.tensor(name).map_err(|_| HfClipError::Missing {
            path: path.to_path_buf(),
            tensor: name.to_string(),
        })?;
        let b = view.data();
        let value = match (view.dtype(), b.len()) {
            (Dtype::F32, 4) => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            (Dtype::BF16, 2) => f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16),
            (Dtype::F16, 2) => f16_to_f32(u16::from_le_bytes([b[0], b[1]])),
            (dtype, _) => {
                return Err(HfClipError::DType {
                    path: path.to_path_buf(),
                    tensor: name.to_string(),
                    dtype: format!("{dtype:?} with {} bytes", b.len()),
                });
            }
        };
        Ok(value)
    }
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as i32;
    let frac = (h & 0x3ff) as u32;
    let bits = match exp {
        0 if frac == 0 => sign,
        0 => {
            return f32::from_bits(sign)
                + (if sign != 0 { -1.0 } else { 1.0 }) * frac as f32 * 2f32.powi(-24);
        }
        31 => sign | 0x7f80_0000 | (frac << 13),
        _ => sign | (((exp - 15 + 127) as u32) << 23) | (frac << 13),
    };
    f32::from_bits(bits)
}

/// A config read off the tensor shapes, for a checkpoint without its `config.json`.
fn infer_config(header: &Header, path: &Path) -> Result<ClipConfig, HfClipError> {
    let patch = header.shape("vision_model.embeddings.patch_embedding.weight", path)?;
    let (v_width, patch_size) = (patch[0], patch[2]);
    let positions = header.shape("vision_model.embeddings.position_embedding.weight", path)?[0];
    let grid = ((positions.saturating_sub(1)) as f64).sqrt().round() as usize;
    let v_depth = header.count("vision_model.encoder.layers.");
    let v_hidden = header.shape("vision_model.encoder.layers.0.mlp.fc1.weight", path)?[0];
    let token = header.shape("text_model.embeddings.token_embedding.weight", path)?;
    let (vocab, t_width) = (token[0], token[1]);
    let context = header.shape("text_model.embeddings.position_embedding.weight", path)?[0];
    let t_depth = header.count("text_model.encoder.layers.");
    let t_hidden = header.shape("text_model.encoder.layers.0.mlp.fc1.weight", path)?[0];
    let projection = |name| header.get(name).map(|(s, _)| s[0]);
    let vision = VitConfig::new(
        grid * patch_size,
        patch_size,
        v_width,
        v_depth,
        heads(v_width),
    )
    .with_mlp_ratio(v_hidden as f64 / v_width as f64)
    .with_norm_before_blocks(header.get("vision_model.pre_layrnorm.weight").is_some())
    .with_projection(projection("visual_projection.weight"));
    let text = TextEncoderConfig::new(t_width, t_depth, heads(t_width))
        .with_vocab_size(vocab)
        .with_context(context)
        .with_mlp_ratio(t_hidden as f64 / t_width as f64)
        .with_projection(projection("text_projection.weight"));
    Ok(ClipConfig::new(vision.into(), text))
}

/// CLIP's own rule: one attention head per 64 channels.
fn heads(width: usize) -> usize {
    (width / 64).max(1)
}

#[derive(Deserialize)]
struct HfConfig {
    text_config: HfTower,
    vision_config: HfTower,
    projection_dim: Option<usize>,
    logit_scale_init_value: Option<f64>,
}

#[derive(Deserialize)]
struct HfTower {
    hidden_size: usize,
    intermediate_size: usize,
    num_attention_heads: usize,
    num_hidden_layers: usize,
    #[serde(default)]
    hidden_act: Option<String>,
    #[serde(default)]
    layer_norm_eps: Option<f64>,
    // vision
    image_size: Option<usize>,
    patch_size: Option<usize>,
    // text
    vocab_size: Option<usize>,
    max_position_embeddings: Option<usize>,
}

/// A Hugging Face `CLIPConfig` (`config.json`) as our [`ClipConfig`].
pub fn read_hf_config(path: &Path) -> Result<ClipConfig, HfClipError> {
    let bad = |reason: String| HfClipError::Config {
        path: path.to_path_buf(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|io| HfClipError::Io {
        path: path.to_path_buf(),
        io,
    })?;
    let hf: HfConfig =
        serde_json::from_str(&text).map_err(|e| bad(format!("not a CLIP config.json: {e}")))?;
    let activation = |act: &Option<String>| match act.as_deref() {
        None | Some("quick_gelu") => Ok(Activation::QuickGelu),
        Some("gelu") => Ok(Activation::Gelu),
        Some(other) => Err(bad(format!("unsupported activation `{other}`"))),
    };
    let projection = hf.projection_dim.unwrap_or(512);
    let v = &hf.vision_config;
    let vision = VitConfig::new(
        v.image_size.unwrap_or(224),
        v.patch_size.unwrap_or(32),
        v.hidden_size,
        v.num_hidden_layers,
        v.num_attention_heads,
    )
    .with_mlp_ratio(v.intermediate_size as f64 / v.hidden_size as f64)
    .with_activation(activation(&v.hidden_act)?)
    .with_layer_norm_eps(v.layer_norm_eps.unwrap_or(1e-5))
    .with_projection(Some(projection));
    let t = &hf.text_config;
    let text = TextEncoderConfig::new(t.hidden_size, t.num_hidden_layers, t.num_attention_heads)
        .with_vocab_size(t.vocab_size.unwrap_or(49408))
        .with_context(t.max_position_embeddings.unwrap_or(77))
        .with_mlp_ratio(t.intermediate_size as f64 / t.hidden_size as f64)
        .with_activation(activation(&t.hidden_act)?)
        .with_layer_norm_eps(t.layer_norm_eps.unwrap_or(1e-5))
        .with_projection(Some(projection));
    for (tower, width, heads) in [
        ("vision", v.hidden_size, v.num_attention_heads),
        ("text", t.hidden_size, t.num_attention_heads),
    ] {
        if heads == 0 || !width.is_multiple_of(heads) {
            return Err(bad(format!(
                "{tower} width {width} does not split into {heads} heads"
            )));
        }
    }
    Ok(ClipConfig::new(vision.into(), text)
        .with_logit_scale_init(hf.logit_scale_init_value.unwrap_or(2.6592)))
}
