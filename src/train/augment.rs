//! SSCD-style augmentations on `image` buffers: random resized crop, flips, quarter turns,
//! colour jitter, grey-scale, blur and JPEG re-encoding. The polyp mask goes through the same
//! geometry, so polyp-aware masking still knows where the polyp is after augmentation.

use crate::plumbing::Rng;
use image::imageops::{self, FilterType};
use image::{DynamicImage, GrayImage, RgbImage};

#[derive(Debug, Clone)]
pub struct Augment {
    pub size: u32,
    /// Fraction of the image area a crop keeps, lowest to highest.
    pub crop_scale: (f32, f32),
    pub flip: f32,
    pub rotate: f32,
    /// Largest brightness/contrast/saturation change (fraction).
    pub jitter: f32,
    pub grey: f32,
    pub blur: f32,
    pub jpeg: f32,
}

impl Augment {
    /// Strong enough that two views of one image differ as two photographs of one polyp do.
    pub fn sscd(size: u32) -> Augment {
        Augment {
            size,
            crop_scale: (0.35, 1.0),
            flip: 0.5,
            rotate: 0.5,
            jitter: 0.4,
            grey: 0.1,
            blur: 0.3,
            jpeg: 0.3,
        }
    }

    /// One augmented copy of `image` (and of its `mask`, same geometry, when given).
    pub fn apply(
        &self,
        image: &RgbImage,
        mask: Option<&GrayImage>,
        rng: &mut Rng,
    ) -> (RgbImage, Option<GrayImage>) {
        let (w, h) = image.dimensions();
        // Random resized crop: area fraction and aspect ratio (3/4 .. 4/3).
        let area = rng.range(self.crop_scale.0, self.crop_scale.1) * (w * h) as f32;
        let aspect = rng.range((0.75f32).ln(), (4.0f32 / 3.0).ln()).exp();
        let cw = ((area * aspect).sqrt().round() as u32).clamp(8.min(w), w);
        let ch = ((area / aspect).sqrt().round() as u32).clamp(8.min(h), h);
        let x = rng.below((w - cw + 1) as usize) as u32;
        let y = rng.below((h - ch + 1) as usize) as u32;
        let flip_h = rng.chance(self.flip);
        let flip_v = rng.chance(self.flip * 0.5);
        let turns = if rng.chance(self.rotate) {
            1 + rng.below(3)
        } else {
            0
        };
        let geometry = |img: &DynamicImage, filter| {
            let mut out = img
                .crop_imm(x, y, cw, ch)
                .resize_exact(self.size, self.size, filter);
            if flip_h {
                out = out.fliph();
            }
            if flip_v {
                out = out.flipv();
            }
            for _ in 0..turns {
                out = out.rotate90();
            }
            out
        };
        let mut out = geometry(
            &DynamicImage::ImageRgb8(image.clone()),
            FilterType::Triangle,
        )
        .to_rgb8();
        let mask = mask.map(|m| {
            geometry(&DynamicImage::ImageLuma8(m.clone()), FilterType::Nearest).to_luma8()
        });

        // Photometric changes: endoscopes differ in exposure, white balance and processing.
        let brightness = 1.0 + rng.range(-self.jitter, self.jitter);
        let contrast = 1.0 + rng.range(-self.jitter, self.jitter);
        let saturation = 1.0 + rng.range(-self.jitter, self.jitter);
        let grey = rng.chance(self.grey);
        let mean = {
            let sum: u64 = out
                .pixels()
                .map(|p| p.0.iter().map(|&c| c as u64).sum::<u64>())
                .sum();
            sum as f32 / (3 * out.width() * out.height()).max(1) as f32
        };
        for p in out.pixels_mut() {
            let [r, g, b] = p.0.map(|c| c as f32);
            let luma = 0.299 * r + 0.587 * g + 0.114 * b;
            let mut c = [r, g, b].map(|v| {
                let v = if grey {
                    luma
                } else {
                    luma + (v - luma) * saturation
                };
                ((v - mean) * contrast + mean) * brightness
            });
            c.iter_mut().for_each(|v| *v = v.clamp(0.0, 255.0));
            p.0 = c.map(|v| v as u8);
        }
        if rng.chance(self.blur) {
            out = imageops::blur(&out, rng.range(0.3, 1.5));
        }
        if rng.chance(self.jpeg) {
            let quality = 30 + rng.below(60) as u8;
            out = jpeg_round_trip(&out, quality).unwrap_or(out);
        }
        (out, mask)
    }
}

fn jpeg_round_trip(image: &RgbImage, quality: u8) -> Option<RgbImage> {
    let mut bytes = Vec::new();
    let encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut bytes, quality);
    image.write_with_encoder(encoder).ok()?;
    Some(image::load_from_memory(&bytes).ok()?.to_rgb8())
}

/// Which patches show polyp: a patch counts when at least `min_fraction` of its pixels are
/// white in `mask` (size x size, patch grid row-major).
pub fn polyp_patches(mask: &GrayImage, patch: u32, min_fraction: f32) -> Vec<bool> {
    let grid = mask.width() / patch;
    let mut out = Vec::with_capacity((grid * grid) as usize);
    for gy in 0..grid {
        for gx in 0..grid {
            let mut on = 0u32;
            for y in gy * patch..(gy + 1) * patch {
                for x in gx * patch..(gx + 1) * patch {
                    on += (mask.get_pixel(x, y).0[0] > 127) as u32;
                }
            }
            out.push(on as f32 >= min_fraction * (patch * patch) as f32);
        }
    }
    out
}

/// Polyp-aware masking (METHODS §4): `ratio` of the patches are hidden, drawn from the
/// background so the polyp stays visible. When the polyp covers more than the visible share,
/// a random part of it is hidden too. Returns the visible patch indices (ascending) and a
/// per-patch flag, true where hidden; every image gets the same number of visible patches.
pub fn polyp_aware_mask(polyp: &[bool], ratio: f32, rng: &mut Rng) -> (Vec<usize>, Vec<bool>) {
    let n = polyp.len();
    let hide = ((n as f32 * ratio).round() as usize).min(n.saturating_sub(1));
    let mut background: Vec<usize> = (0..n).filter(|&i| !polyp[i]).collect();
    let mut lesion: Vec<usize> = (0..n).filter(|&i| polyp[i]).collect();
    shuffle(&mut background, rng);
    shuffle(&mut lesion, rng);
    let mut hidden = vec![false; n];
    for &i in background.iter().chain(lesion.iter()).take(hide) {
        hidden[i] = true;
    }
    let keep = (0..n).filter(|&i| !hidden[i]).collect();
    (keep, hidden)
}

pub(crate) fn shuffle<T>(items: &mut [T], rng: &mut Rng) {
    rng.shuffle(items);
}
