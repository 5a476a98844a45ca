//! A small per-frame CNN for the tracklet encoder (METHODS §3 allows any burn backbone; the
//! paper's ResNet-50 is out of reach on two CPU cores): stages of a 3x3 stride-2 convolution
//! and a 3x3 convolution, each followed by ReLU, then the spatial mean.

use burn::config::Config;
use burn::module::Module;
use burn::nn::PaddingConfig2d;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Initializer, Relu};
use burn::tensor::{Device, Tensor};

#[derive(Config, Debug)]
pub struct FrameCnnConfig {
    /// Side of the square input crops, pixels.
    #[config(default = 64)]
    pub image_size: usize,
    /// Output channels of each stage; the last is the feature width.
    #[config(default = "vec![16, 32, 64, 128]")]
    pub channels: Vec<usize>,
}

impl FrameCnnConfig {
    pub fn init(&self, device: &Device) -> FrameCnn {
        let mut convs = Vec::new();
        let mut inputs = 3;
        for &c in &self.channels {
            for (from, stride) in [(inputs, 2), (c, 1)] {
                convs.push(
                    Conv2dConfig::new([from, c], [3, 3])
                        .with_stride([stride, stride])
                        .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                        .with_initializer(Initializer::KaimingNormal {
                            gain: 2f64.sqrt(),
                            fan_out_only: false,
                        })
                        .init(device),
                );
            }
            inputs = c;
        }
        FrameCnn {
            convs,
            relu: Relu::new(),
        }
    }

    pub fn output_dim(&self) -> usize {
        *self.channels.last().unwrap_or(&3)
    }
}

#[derive(Module, Debug)]
pub struct FrameCnn {
    pub convs: Vec<Conv2d>,
    pub relu: Relu,
}

impl FrameCnn {
    /// `images`: [batch, 3, size, size] -> features [batch, channels.last()].
    pub fn forward(&self, images: Tensor<4>) -> Tensor<2> {
        let mut x = images;
        for conv in &self.convs {
            x = self.relu.forward(conv.forward(x));
        }
        let [b, c, h, w] = x.dims();
        x.reshape([b, c, h * w]).mean_dim(2).reshape([b, c])
    }
}
