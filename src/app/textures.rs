//! GPU textures for thumbnails and full images, cached by key.
//!
//! Thumbnails are small PNGs inside the library: decoding a handful per frame keeps the
//! browser smooth. Full images are decoded by the loader thread; the UI only records which
//! ones it wants and [`super::logic`] asks the loader for them.

use crate::engine::loader::ImageKey;
use crate::store::Store;
use egui::{ColorImage, TextureHandle, TextureOptions};
use std::collections::{HashMap, HashSet};

/// How many thumbnails may be decoded in one frame.
const THUMBS_PER_FRAME: usize = 12;

#[derive(Default)]
pub struct Textures {
    thumbs: HashMap<i64, Option<TextureHandle>>,
    full: HashMap<ImageKey, Result<TextureHandle, String>>,
    /// Full images the UI asked for that are not loaded yet.
    pub wanted: HashSet<ImageKey>,
    /// Requests already sent to the loader.
    pub pending: HashSet<ImageKey>,
    decoded_this_frame: usize,
}

impl Textures {
    pub fn begin_frame(&mut self) {
        self.decoded_this_frame = 0;
    }

    /// Forgets everything (another library was opened).
    pub fn clear(&mut self) {
        *self = Textures::default();
    }

    pub fn thumbnail(
        &mut self,
        ctx: &egui::Context,
        store: &Store,
        media_id: i64,
    ) -> Option<TextureHandle> {
        if let Some(t) = self.thumbs.get(&media_id) {
            return t.clone();
        }
        if self.decoded_this_frame >= THUMBS_PER_FRAME {
            ctx.request_repaint();
            return None;
        }
        self.decoded_this_frame += 1;
        let texture = store
            .thumbnail(media_id)
            .ok()
            .flatten()
            .and_then(|png| image::load_from_memory(&png).ok())
            .map(|img| {
                let rgba = img.to_rgba8();
                let size = [rgba.width() as usize, rgba.height() as usize];
                ctx.load_texture(
                    format!("thumb-{media_id}"),
                    ColorImage::from_rgba_unmultiplied(size, rgba.as_raw()),
                    TextureOptions::LINEAR,
                )
            });
        self.thumbs.insert(media_id, texture.clone());
        texture
    }

    /// The full image, or `None` while it loads (and it is then requested).
    pub fn full(&mut self, key: &ImageKey) -> Option<&Result<TextureHandle, String>> {
        if !self.full.contains_key(key) {
            self.wanted.insert(key.clone());
        }
        self.full.get(key)
    }

    pub fn insert_full(
        &mut self,
        ctx: &egui::Context,
        key: ImageKey,
        image: Result<image::RgbaImage, String>,
    ) {
        self.pending.remove(&key);
        self.wanted.remove(&key);
        let texture = image.map(|rgba| {
            let size = [rgba.width() as usize, rgba.height() as usize];
            ctx.load_texture(
                format!("full-{key:?}"),
                ColorImage::from_rgba_unmultiplied(size, rgba.as_raw()),
                TextureOptions::LINEAR,
            )
        });
        // Keep memory bounded: full images are re-decoded when needed again.
        if self.full.len() > 64 {
            self.full.clear();
        }
        self.full.insert(key, texture);
    }
}
