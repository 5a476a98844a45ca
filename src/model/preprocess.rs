//! From `image` buffers to normalised, batched burn tensors, one recipe per model family.
//! Any input (grey, RGBA, 16-bit, any size) is converted, never rejected.

use burn::tensor::{Device, Tensor, TensorData};
use image::imageops::FilterType;
use image::{DynamicImage, RgbImage};

/// How a model wants its pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Preprocess {
    pub size: u32,
    pub mean: [f32; 3],
    pub std: [f32; 3],
    /// Resize the short side to `size` and centre-crop (CLIP); otherwise resize to a square.
    pub centre_crop: bool,
}

impl Preprocess {
    /// CLIP: bicubic resize of the short side, centre crop, CLIP's mean and std.
    pub fn clip(size: u32) -> Preprocess {
        Preprocess {
            size,
            mean: [0.481_454_66, 0.457_827_5, 0.408_210_73],
            std: [0.268_629_54, 0.261_302_6, 0.275_777_1],
            centre_crop: true,
        }
    }

    /// ImageNet statistics (EndoFinder's ViT).
    pub fn imagenet(size: u32) -> Preprocess {
        Preprocess {
            size,
            mean: [0.485, 0.456, 0.406],
            std: [0.229, 0.224, 0.225],
            centre_crop: false,
        }
    }

    /// Tracklet frames: 232 px crops, 0.45 / 0.225 on every channel (METHODS §3).
    pub fn tracklet() -> Preprocess {
        Preprocess {
            size: 232,
            mean: [0.45; 3],
            std: [0.225; 3],
            centre_crop: false,
        }
    }

    /// The image resized (and cropped) to `size` x `size` RGB.
    pub fn resize(&self, image: &DynamicImage) -> RgbImage {
        let rgb = DynamicImage::ImageRgb8(image.to_rgb8());
        if self.centre_crop {
            let (w, h) = (rgb.width(), rgb.height());
            let scale = self.size as f32 / w.min(h) as f32;
            let (nw, nh) = (
                ((w as f32 * scale).round() as u32).max(self.size),
                ((h as f32 * scale).round() as u32).max(self.size),
            );
            let resized = rgb.resize_exact(nw, nh, FilterType::CatmullRom);
            resized
                .crop_imm(
                    (nw - self.size) / 2,
                    (nh - self.size) / 2,
                    self.size,
                    self.size,
                )
                .to_rgb8()
        } else {
            rgb.resize_exact(self.size, self.size, FilterType::CatmullRom)
                .to_rgb8()
        }
    }

    /// `images` -> [batch, 3, size, size], normalised per channel.
    pub fn batch(&self, images: &[DynamicImage], device: &Device) -> Tensor<4> {
        let s = self.size as usize;
        let mut data = Vec::with_capacity(images.len() * 3 * s * s);
        for img in images {
            let rgb = self.resize(img);
            for c in 0..3 {
                data.extend(
                    rgb.pixels()
                        .map(|p| (p.0[c] as f32 / 255.0 - self.mean[c]) / self.std[c]),
                );
            }
        }
        Tensor::from_data(TensorData::new(data, [images.len(), 3, s, s]), device)
    }
}

/// Crop around a box enlarged `factor` times about its centre, clamped to the image
/// (METHODS §3 uses 5x). `xywh` in pixels.
pub fn enlarged_crop(image: &DynamicImage, xywh: [f32; 4], factor: f32) -> DynamicImage {
    let [x, y, w, h] = xywh;
    let (cx, cy) = (x + w / 2.0, y + h / 2.0);
    let (hw, hh) = (w * factor / 2.0, h * factor / 2.0);
    let x0 = (cx - hw).max(0.0) as u32;
    let y0 = (cy - hh).max(0.0) as u32;
    let x1 = ((cx + hw) as u32).min(image.width()).max(x0 + 1);
    let y1 = ((cy + hh) as u32).min(image.height()).max(y0 + 1);
    image.crop_imm(x0, y0, x1 - x0, y1 - y0)
}
