//! A contact sheet of a library: one PNG to judge at a glance what its images look like.

use crate::store::{Store, StoreError};
use image::RgbImage;

/// A contact sheet: the first views of several polyps, background frames and video frames in
/// one PNG, for a reader to judge at a glance whether this looks like colonoscopy.
pub fn contact_sheet(store: &Store, columns: u32, tile: u32) -> Result<RgbImage, StoreError> {
    let mut media = Vec::new();
    for p in store.polyps()?.iter().take(8) {
        media.extend(store.polyp_views(p.id)?.into_iter().take(2));
    }
    for e in store.examinations()?.iter().take(6) {
        media.extend(store.loose_frames(e.id)?.into_iter().take(1));
    }
    for v in store.videos()?.iter().take(2) {
        let frames = store.video_frames(v.id)?;
        let step = (frames.len() / 4).max(1);
        media.extend(frames.into_iter().step_by(step).take(4).map(|(_, m)| m));
    }
    let rows = (media.len() as u32).div_ceil(columns).max(1);
    let mut sheet = RgbImage::from_pixel(columns * tile, rows * tile, image::Rgb([20, 20, 20]));
    for (i, m) in media.iter().enumerate() {
        let Ok(d) = crate::data::images::decode_media(store, m) else {
            continue;
        };
        let img = d
            .image
            .resize_exact(tile - 4, tile - 4, image::imageops::FilterType::Triangle)
            .to_rgb8();
        let (x, y) = (
            (i as u32 % columns) * tile + 2,
            (i as u32 / columns) * tile + 2,
        );
        image::imageops::replace(&mut sheet, &img, x as i64, y as i64);
    }
    Ok(sheet)
}
