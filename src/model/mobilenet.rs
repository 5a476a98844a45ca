//! MobileNetV2 (width 1.0, torchvision's layout) as a burn module, loaded from the ImageNet
//! weights torchvision ships (`mobilenetv2_imagenet_features.safetensors` in
//! `../shared/pretrained/`, the feature layers without the classifier).
//!
//! BatchNorm is folded into the convolution before it at load time: every `conv + BN` pair
//! becomes one convolution with a bias (`w' = w * g / sqrt(v + eps)`,
//! `b' = beta - m * g / sqrt(v + eps)`). Inference pays for no normalisation, and training
//! over the folded convolutions is training with the BatchNorm statistics frozen, which is
//! what small batches need. One graph serves both.

use burn::config::Config;
use burn::module::{Module, Param};
use burn::nn::PaddingConfig2d;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::tensor::{Device, Tensor, TensorData};
use safetensors::{Dtype, SafeTensors};
use std::path::{Path, PathBuf};

/// BatchNorm's epsilon in torchvision's MobileNetV2.
const BN_EPS: f32 = 1e-5;

/// torchvision's inverted residual settings: expansion t, channels c, repeats n, stride s.
const SETTINGS: [(usize, usize, usize, usize); 7] = [
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
];

/// The number of feature layers: the stem (0), 17 inverted residual blocks (1-17), the last
/// 1x1 convolution to 1280 channels (18).
pub const LAYERS: usize = 19;

#[derive(Debug, thiserror::Error)]
pub enum BackboneError {
    #[error("cannot read {path}: {}", crate::plumbing::input::plain_io(.io))]
    Read { path: PathBuf, io: std::io::Error },
    #[error("{path} is not a readable safetensors file: {reason}")]
    Format { path: PathBuf, reason: String },
    #[error("{path} has no tensor `{name}`: not torchvision's MobileNetV2 feature layers")]
    Missing { path: PathBuf, name: String },
    #[error("{path}: tensor `{name}` is {found:?} ({dtype}), MobileNetV2 needs {expected:?} (F32)")]
    Shape {
        path: PathBuf,
        name: String,
        expected: Vec<usize>,
        found: Vec<usize>,
        dtype: String,
    },
}

#[derive(Config, Debug, PartialEq)]
pub struct MobileNetV2Config {
    /// Feature layers (0-18) whose outputs are pooled and returned by
    /// [`MobileNetV2::forward_pooled`], in order.
    #[config(default = "vec![6, 10, 13, 16, 18]")]
    pub taps: Vec<usize>,
}

/// One layer's channels out, for every feature layer 0-18.
pub fn layer_channels() -> Vec<usize> {
    let mut out = vec![32];
    for (_, c, n, _) in SETTINGS {
        out.extend(std::iter::repeat_n(c, n));
    }
    out.push(1280);
    out
}

impl MobileNetV2Config {
    /// The width of [`MobileNetV2::forward_pooled`]'s output: the tapped layers' channels.
    pub fn pooled_dim(&self) -> usize {
        let channels = layer_channels();
        self.taps.iter().map(|&t| channels[t]).sum()
    }

    /// Random weights (the "untrained" architecture); [`load_mobilenet_v2`] for ImageNet's.
    pub fn init(&self, device: &Device) -> MobileNetV2 {
        let conv = |from: usize, to: usize, k: usize, stride: usize, groups: usize| {
            Conv2dConfig::new([from, to], [k, k])
                .with_stride([stride, stride])
                .with_groups(groups)
                .with_padding(PaddingConfig2d::Explicit(k / 2, k / 2, k / 2, k / 2))
                .with_bias(true)
                .init(device)
        };
        let mut blocks = Vec::new();
        let mut from = 32;
        for (t, c, n, s) in SETTINGS {
            for i in 0..n {
                let stride = if i == 0 { s } else { 1 };
                let hidden = from * t;
                blocks.push(InvertedResidual {
                    expand: (t != 1).then(|| conv(from, hidden, 1, 1, 1)),
                    depthwise: conv(hidden, hidden, 3, stride, hidden),
                    project: conv(hidden, c, 1, 1, 1),
                    residual: stride == 1 && from == c,
                });
                from = c;
            }
        }
        MobileNetV2 {
            stem: conv(3, 32, 3, 2, 1),
            blocks,
            last: conv(320, 1280, 1, 1, 1),
            taps: self.taps.clone(),
        }
    }
}

impl crate::model::weights::CheckConfig for MobileNetV2Config {
    fn check(&self) -> Result<(), String> {
        if self.taps.is_empty() {
            return Err("a MobileNetV2 needs at least one tapped layer".into());
        }
        if let Some(t) = self.taps.iter().find(|&&t| t >= LAYERS) {
            return Err(format!("tapped layer {t} does not exist (0-18)"));
        }
        if !self.taps.is_sorted() || self.taps.windows(2).any(|w| w[0] == w[1]) {
            return Err("tapped layers must be distinct and in order".into());
        }
        Ok(())
    }
}

/// torchvision's `InvertedResidual`, its BatchNorms folded into the convolutions.
#[derive(Module, Debug)]
pub struct InvertedResidual {
    /// 1x1 expansion + ReLU6 (absent when the expansion factor is 1).
    pub expand: Option<Conv2d>,
    /// 3x3 depthwise + ReLU6.
    pub depthwise: Conv2d,
    /// 1x1 linear projection.
    pub project: Conv2d,
    /// Adds the input back (stride 1, same channels).
    pub residual: bool,
}

impl InvertedResidual {
    /// [batch, in, h, w] -> [batch, out, h / stride, w / stride].
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let mut y = x.clone();
        if let Some(expand) = &self.expand {
            y = relu6(expand.forward(y));
        }
        y = relu6(self.depthwise.forward(y));
        y = self.project.forward(y);
        if self.residual { y + x } else { y }
    }
}

#[derive(Module, Debug)]
pub struct MobileNetV2 {
    pub stem: Conv2d,
    pub blocks: Vec<InvertedResidual>,
    pub last: Conv2d,
    pub taps: Vec<usize>,
}

fn relu6(x: Tensor<4>) -> Tensor<4> {
    x.clamp(0.0, 6.0)
}

impl MobileNetV2 {
    /// ImageNet-normalised images [batch, 3, h, w] -> the output of every tapped layer, in
    /// [`MobileNetV2Config::taps`] order, each [batch, channels, h', w']. Stops after the
    /// last tap.
    pub fn forward_taps(&self, images: Tensor<4>) -> Vec<Tensor<4>> {
        let deepest = *self.taps.last().expect("at least one tap");
        let mut out = Vec::with_capacity(self.taps.len());
        let mut x = relu6(self.stem.forward(images));
        if self.taps.contains(&0) {
            out.push(x.clone());
        }
        for (i, block) in self.blocks.iter().enumerate() {
            if i + 1 > deepest {
                return out;
            }
            x = block.forward(x);
            if self.taps.contains(&(i + 1)) {
                out.push(x.clone());
            }
        }
        if deepest == LAYERS - 1 {
            out.push(relu6(self.last.forward(x)));
        }
        out
    }

    /// [batch, 3, h, w] -> every tapped layer's global average, concatenated:
    /// [batch, pooled_dim].
    pub fn forward_pooled(&self, images: Tensor<4>) -> Tensor<2> {
        let pooled: Vec<Tensor<2>> = self
            .forward_taps(images)
            .into_iter()
            .map(|t| {
                let [b, c, h, w] = t.dims();
                t.reshape([b, c, h * w]).mean_dim(2).reshape([b, c])
            })
            .collect();
        Tensor::cat(pooled, 1)
    }
}

/// Reads torchvision's MobileNetV2 feature layers from a safetensors file (names
/// `features.N...`, the flat block layout: see `../shared/pretrained/README.md`), folds every
/// BatchNorm into its convolution and returns the module with `config`'s taps. Every tensor
/// must be present, F32 and of its shape; the error names the first that is not.
pub fn load_mobilenet_v2(
    path: &Path,
    config: &MobileNetV2Config,
    device: &Device,
) -> Result<MobileNetV2, BackboneError> {
    let meta = std::fs::metadata(path).map_err(|io| BackboneError::Read {
        path: path.into(),
        io,
    })?;
    if !meta.is_file() || meta.len() > 256 << 20 {
        return Err(BackboneError::Format {
            path: path.into(),
            reason: "not a regular file of at most 256 MB".into(),
        });
    }
    let bytes = std::fs::read(path).map_err(|io| BackboneError::Read {
        path: path.into(),
        io,
    })?;
    let file = SafeTensors::deserialize(&bytes).map_err(|e| BackboneError::Format {
        path: path.into(),
        reason: e.to_string(),
    })?;
    let reader = Reader { file: &file, path };
    let mut model = config.init(device);
    reader.conv_bn(&mut model.stem, "features.0.0", "features.0.1", device)?;
    for (i, block) in model.blocks.iter_mut().enumerate() {
        let p = format!("features.{}.conv", i + 1);
        // Flat layout: [expand 0, bn 1, relu 2,] depthwise, bn, relu, project, bn.
        let first = match block.expand.as_mut() {
            Some(expand) => {
                reader.conv_bn(expand, &format!("{p}.0"), &format!("{p}.1"), device)?;
                3
            }
            None => 0,
        };
        reader.conv_bn(
            &mut block.depthwise,
            &format!("{p}.{first}"),
            &format!("{p}.{}", first + 1),
            device,
        )?;
        reader.conv_bn(
            &mut block.project,
            &format!("{p}.{}", first + 3),
            &format!("{p}.{}", first + 4),
            device,
        )?;
    }
    reader.conv_bn(&mut model.last, "features.18.0", "features.18.1", device)?;
    Ok(model)
}

struct Reader<'a> {
    file: &'a SafeTensors<'a>,
    path: &'a Path,
}

impl Reader<'_> {
    /// The F32 values of `name`, which must have `shape`.
    fn tensor(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, BackboneError> {
        let view = self.file.tensor(name).map_err(|_| BackboneError::Missing {
            path: self.path.into(),
            name: name.into(),
        })?;
        if view.shape() != shape || view.dtype() != Dtype::F32 {
            return Err(BackboneError::Shape {
                path: self.path.into(),
                name: name.into(),
                expected: shape.to_vec(),
                found: view.shape().to_vec(),
                dtype: format!("{:?}", view.dtype()),
            });
        }
        Ok(view
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }

    /// Sets `conv` to the convolution `conv_name` with the BatchNorm `bn_name` folded in.
    fn conv_bn(
        &self,
        conv: &mut Conv2d,
        conv_name: &str,
        bn_name: &str,
        device: &Device,
    ) -> Result<(), BackboneError> {
        let shape = conv.weight.dims();
        let out = shape[0];
        let mut w = self.tensor(&format!("{conv_name}.weight"), &shape)?;
        let gamma = self.tensor(&format!("{bn_name}.weight"), &[out])?;
        let beta = self.tensor(&format!("{bn_name}.bias"), &[out])?;
        let mean = self.tensor(&format!("{bn_name}.running_mean"), &[out])?;
        let var = self.tensor(&format!("{bn_name}.running_var"), &[out])?;
        let per_out = w.len() / out;
        let mut bias = vec![0.0f32; out];
        for o in 0..out {
            let scale = gamma[o] / (var[o] + BN_EPS).sqrt();
            w[o * per_out..(o + 1) * per_out]
                .iter_mut()
                .for_each(|x| *x *= scale);
            bias[o] = beta[o] - mean[o] * scale;
        }
        conv.weight = Param::from_tensor(Tensor::from_data(TensorData::new(w, shape), device));
        conv.bias = Some(Param::from_tensor(Tensor::from_data(
            TensorData::new(bias, [out]),
            device,
        )));
        Ok(())
    }
}
