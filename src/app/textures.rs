//! GPU textures for thumbnails and full images, cached by key.
//!
//! The UI only records which images it wants; [`super::logic`] asks the loader thread for
//! them (thumbnails from the library, full images from their files) and uploads what comes
//! back. Nothing here reads the library or a file.

use crate::engine::loader::ImageKey;
use egui::{ColorImage, TextureHandle, TextureOptions};
use std::collections::{HashMap, HashSet};

#[derive(Default)]
pub struct Textures {
    thumbs: HashMap<i64, Option<TextureHandle>>,
    full: HashMap<ImageKey, Result<TextureHandle, String>>,
    /// Full images the UI asked for that are not loaded yet.
    pub wanted: HashSet<ImageKey>,
    /// Requests already sent to the loader.
    pub pending: HashSet<ImageKey>,
}

impl Textures {
    /// Forgets everything (another library was opened).
    pub fn clear(&mut self) {
        *self = Textures::default();
    }

    /// The thumbnail of a media item, or `None` while it loads or when it has none.
    pub fn thumbnail(&mut self, media_id: i64) -> Option<TextureHandle> {
        match self.thumbs.get(&media_id) {
            Some(t) => t.clone(),
            None => {
                self.wanted.insert(ImageKey::Thumbnail(media_id));
                None
            }
        }
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
        if let ImageKey::Thumbnail(id) = key {
            let texture = image.ok().map(|rgba| {
                let size = [rgba.width() as usize, rgba.height() as usize];
                ctx.load_texture(
                    format!("thumb-{id}"),
                    ColorImage::from_rgba_unmultiplied(size, rgba.as_raw()),
                    TextureOptions::LINEAR,
                )
            });
            self.thumbs.insert(id, texture);
            return;
        }
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
