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
    /// CLIP's mean and std on a frame resized to a `size` square (no crop): the dual encoders'
    /// input (captions, text prompts) at training, indexing and query time.
    pub fn clip_squared(size: u32) -> Preprocess {
        Preprocess {
            centre_crop: false,
            ..Preprocess::clip(size)
        }
    }

    /// Normalised pixels of one already resized frame, channel-major [3 * s * s].
    pub fn pixels(&self, image: &RgbImage) -> Vec<f32> {
        let mut data = Vec::with_capacity(image.len());
        for c in 0..3 {
            data.extend(
                image
                    .pixels()
                    .map(|p| (p.0[c] as f32 / 255.0 - self.mean[c]) / self.std[c]),
            );
        }
        data
    }

    /// Already resized frames as a batch [n, 3, size, size]; `flips` (horizontal, vertical)
    /// per frame augment training batches (missing entries: no flip).
    pub fn flipped_batch(
        &self,
        images: &[&RgbImage],
        flips: &[(bool, bool)],
        device: &Device,
    ) -> Tensor<4> {
        let s = self.size as usize;
        let mut data = Vec::with_capacity(images.len() * 3 * s * s);
        for (k, img) in images.iter().enumerate() {
            match flips.get(k).copied().unwrap_or((false, false)) {
                (false, false) => data.extend(self.pixels(img)),
                (h, v) => {
                    let mut img = (*img).clone();
                    if h {
                        image::imageops::flip_horizontal_in_place(&mut img);
                    }
                    if v {
                        image::imageops::flip_vertical_in_place(&mut img);
                    }
                    data.extend(self.pixels(&img));
                }
            }
        }
        Tensor::from_data(TensorData::new(data, [images.len(), 3, s, s]), device)
    }

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
        // A very large image is first reduced in its own pixel type, so that its RGB copy is
        // never made (round 8 N34).
        let rgb = if image.width() as u64 * image.height() as u64 > MAX_QUERY_PIXELS {
            DynamicImage::ImageRgb8(image.thumbnail(4000, 4000).to_rgb8())
        } else {
            DynamicImage::ImageRgb8(image.to_rgb8())
        };
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

/// The side of a tracklet frame's crop, in box diagonals (METHODS §3).
pub const TRACKLET_CROP_DIAGONALS: f32 = 5.0;

/// The square crop `[x, y, side, side]` around `bbox` (`[x, y, w, h]`, pixels) in an image of
/// `width` x `height`: [`TRACKLET_CROP_DIAGONALS`] box diagonals about the box centre, moved
/// (not cut) to stay inside the image, and no larger than the image's shorter side.
pub fn tracklet_crop_rect(bbox: [f32; 4], width: u32, height: u32) -> [f32; 4] {
    let (w, h) = (width as f32, height as f32);
    let diagonal = (bbox[2] * bbox[2] + bbox[3] * bbox[3]).sqrt();
    let side = (TRACKLET_CROP_DIAGONALS * diagonal).clamp(1.0, w.min(h));
    let (cx, cy) = (bbox[0] + bbox[2] / 2.0, bbox[1] + bbox[3] / 2.0);
    let x = (cx - side / 2.0).clamp(0.0, w - side);
    let y = (cy - side / 2.0).clamp(0.0, h - side);
    [x, y, side, side]
}

/// The pixels of [`tracklet_crop_rect`] (a square, whole pixels, inside the image).
pub fn tracklet_crop(image: &DynamicImage, bbox: [f32; 4]) -> DynamicImage {
    let (w, h) = (image.width(), image.height());
    let [x, y, side, _] = tracklet_crop_rect(bbox, w, h);
    let side = (side.round() as u32).clamp(1, w.min(h).max(1));
    let x0 = (x.round() as u32).min(w.saturating_sub(side));
    let y0 = (y.round() as u32).min(h.saturating_sub(side));
    image.crop_imm(x0, y0, side, side)
}

/// The twin encoders' input, one function for training, indexing and queries: black out the
/// on-screen display outside the field stop, crop a square around the polyp (its box enlarged
/// `context` times) from the full-size original, and resize it to `size`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TwinInput {
    pub size: u32,
    /// Crop around the polyp; off: the centred field of view whatever the focus (ablation).
    pub crop: bool,
    /// The crop's side over the polyp box's longer side.
    pub context: f32,
    /// The smallest crop, as a fraction of the image's short side (a tiny polyp still shows
    /// its surroundings and is not blown up past its detail).
    pub min_fraction: f32,
    /// Black out the on-screen display outside the field stop (off: ablation).
    pub blackout: bool,
    /// Quarter turns the crop is encoded at (1, 2 or 4), their unit embeddings averaged: a
    /// view's roll around the optical axis is arbitrary, so its twins should not depend on it.
    /// Cards written before the field read 1.
    #[serde(default = "one_turn", skip_serializing_if = "is_one_turn")]
    pub turns: u32,
}

fn one_turn() -> u32 {
    1
}

fn is_one_turn(turns: &u32) -> bool {
    *turns == 1
}

/// Where the polyp is in an image, which decides the crop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Focus {
    /// A polyp box (x, y, w, h in pixels): from its mask, or drawn by the user.
    Box([f32; 4]),
    /// No box: the centred field of view.
    FieldOfView,
}

/// The most pixels a query view keeps once decoded: a larger one is reduced (its box with
/// it) before the next view is read, so a query's memory stays bounded whatever the number
/// of views (round 7 R8: five 133-megapixel views took 6.1 GB). The encoders see 224-pixel
/// crops; frames of endoscopes (at most a few megapixels) are never reduced.
pub const MAX_QUERY_PIXELS: u64 = 16_000_000;

/// `image` reduced to at most [`MAX_QUERY_PIXELS`] (8-bit RGB), `focus` scaled with it;
/// unchanged when it is not larger.
pub fn bounded(image: image::DynamicImage, focus: Focus) -> (image::DynamicImage, Focus) {
    let pixels = image.width() as u64 * image.height() as u64;
    if pixels <= MAX_QUERY_PIXELS {
        return (image, focus);
    }
    let scale = (MAX_QUERY_PIXELS as f64 / pixels as f64).sqrt();
    let w = ((image.width() as f64 * scale).floor() as u32).max(1);
    let h = ((image.height() as f64 * scale).floor() as u32).max(1);
    // Area averaging in the image's own pixel type: the output is the only allocation (round 8
    // N34: a filtered resize of a 900-megapixel grey image allocated 1.9 GB of RGBA floats).
    let reduced = image.thumbnail_exact(w, h);
    drop(image);
    let reduced = image::DynamicImage::ImageRgb8(reduced.to_rgb8());
    let focus = match focus {
        Focus::Box(b) => Focus::Box(b.map(|v| (v as f64 * scale) as f32)),
        Focus::FieldOfView => Focus::FieldOfView,
    };
    (reduced, focus)
}

impl Focus {
    /// The box of a mask's foreground (pixels > 127), or the field of view when it has none.
    pub fn of_mask(mask: Option<&image::GrayImage>) -> Focus {
        mask.and_then(mask_box)
            .map_or(Focus::FieldOfView, Focus::Box)
    }
}

/// The bounding box of a mask's foreground (> 127), `None` when empty.
pub fn mask_box(mask: &image::GrayImage) -> Option<[f32; 4]> {
    let (mut x0, mut y0, mut x1, mut y1) = (u32::MAX, u32::MAX, 0, 0);
    for (x, y, p) in mask.enumerate_pixels() {
        if p.0[0] > 127 {
            x0 = x0.min(x);
            y0 = y0.min(y);
            x1 = x1.max(x);
            y1 = y1.max(y);
        }
    }
    (x0 <= x1).then(|| {
        [
            x0 as f32,
            y0 as f32,
            (x1 - x0 + 1) as f32,
            (y1 - y0 + 1) as f32,
        ]
    })
}

impl TwinInput {
    /// Whether `context` can enlarge a polyp's box: a positive, finite number of times (the
    /// one rule for the card, the training recipe and `model crop-context`).
    pub fn valid_context(context: f32) -> bool {
        (Self::MIN_CONTEXT..=Self::MAX_CONTEXT).contains(&context)
    }

    /// The crop's enlargement of the polyp box: at least half the box (a tighter cut loses
    /// the polyp's edge), at most 16 times it (a wider one is the whole frame anyway).
    pub const MIN_CONTEXT: f32 = 0.5;
    pub const MAX_CONTEXT: f32 = 16.0;

    /// Whether a crop can be encoded at `turns` quarter turns: 1 (as it is), 2 (and upside
    /// down) or 4 (every quarter turn).
    pub fn valid_turns(turns: u32) -> bool {
        matches!(turns, 1 | 2 | 4)
    }

    pub fn new(size: u32) -> TwinInput {
        TwinInput {
            size,
            crop: true,
            context: 2.5,
            min_fraction: 0.3,
            blackout: true,
            turns: 1,
        }
    }

    /// The whole frame (centred square) with nothing blacked out: the input of cards older
    /// than polyp-centred crops.
    pub fn whole_frame(size: u32) -> TwinInput {
        TwinInput {
            crop: false,
            blackout: false,
            ..TwinInput::new(size)
        }
    }

    /// The square crop (x, y, side) for `focus` in a `w` x `h` image.
    pub fn crop_rect(&self, w: u32, h: u32, focus: Focus) -> (u32, u32, u32) {
        let short = w.min(h).max(1);
        let focus = if self.crop { focus } else { Focus::FieldOfView };
        match focus {
            Focus::FieldOfView => ((w - short) / 2, (h - short) / 2, short),
            Focus::Box([bx, by, bw, bh]) => {
                let wanted = bw.max(bh) * self.context;
                let side =
                    (wanted.max(self.min_fraction * short as f32).round() as u32).clamp(1, short);
                let (cx, cy) = (bx + bw / 2.0, by + bh / 2.0);
                let place = |c: f32, len: u32| {
                    let start = (c - side as f32 / 2.0).round();
                    start.clamp(0.0, (len - side) as f32) as u32
                };
                (place(cx, w), place(cy, h), side)
            }
        }
    }

    /// The encoder's RGB input for `image` with its polyp at `focus`.
    pub fn apply(&self, image: &DynamicImage, focus: Focus) -> RgbImage {
        let mut rgb = image.to_rgb8();
        if self.blackout {
            blackout_outside_field_stop(&mut rgb);
        }
        let (x, y, side) = self.crop_rect(rgb.width(), rgb.height(), focus);
        let crop = image::imageops::crop_imm(&rgb, x, y, side, side).to_image();
        image::imageops::resize(&crop, self.size, self.size, FilterType::Triangle)
    }

    /// The mask cut and resized like [`TwinInput::apply`] cuts its image.
    pub fn apply_mask(&self, mask: &image::GrayImage, focus: Focus) -> image::GrayImage {
        let (x, y, side) = self.crop_rect(mask.width(), mask.height(), focus);
        let crop = image::imageops::crop_imm(mask, x, y, side, side).to_image();
        image::imageops::resize(&crop, self.size, self.size, FilterType::Triangle)
    }

    /// [`TwinInput::apply`] for a batch -> [batch, 3, size, size], ImageNet-normalised.
    pub fn batch(&self, images: &[(DynamicImage, Focus)], device: &Device) -> Tensor<4> {
        let rgb: Vec<RgbImage> = images.iter().map(|(i, f)| self.apply(i, *f)).collect();
        imagenet_tensor(&rgb, device)
    }
}

/// ImageNet-normalised [n, 3, s, s] from RGB images of one size (training and inference).
pub fn imagenet_tensor(images: &[RgbImage], device: &Device) -> Tensor<4> {
    let pre = Preprocess::imagenet(0);
    let (w, h) = images[0].dimensions();
    let mut data = Vec::with_capacity(images.len() * 3 * (w * h) as usize);
    for img in images {
        for c in 0..3 {
            data.extend(
                img.pixels()
                    .map(|p| (p.0[c] as f32 / 255.0 - pre.mean[c]) / pre.std[c]),
            );
        }
    }
    Tensor::from_data(
        TensorData::new(data, [images.len(), 3, h as usize, w as usize]),
        device,
    )
}

/// Blacks out what lies outside an endoscope's octagonal field stop (centred, 0.94 of each
/// half-side, corners cut at |x| + |y| = 1.33 in half-side units): the corners where the
/// on-screen display prints date, time and patient number. Two shots of one polyp must not
/// be matched by that text.
pub fn blackout_outside_field_stop(image: &mut RgbImage) {
    let (w, h) = image.dimensions();
    let (hw, hh) = (w as f32 / 2.0, h as f32 / 2.0);
    for (x, y, p) in image.enumerate_pixels_mut() {
        let px = ((x as f32 + 0.5 - hw) / hw).abs();
        let py = ((y as f32 + 0.5 - hh) / hh).abs();
        if px > 0.95 || py > 0.95 || px + py > 1.33 {
            *p = image::Rgb([0, 0, 0]);
        }
    }
}
