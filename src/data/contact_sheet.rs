//! A contact sheet of a library: one PNG to judge at a glance what its images look like.

use crate::store::{Store, StoreError};
use image::RgbImage;

/// A contact sheet and the tiles it could not fill.
pub struct ContactSheet {
    pub image: RgbImage,
    /// One line per tile whose file could not be read or decoded (changed, missing, not an
    /// image), naming the item and its file; its tile is crossed out in red.
    pub unreadable: Vec<String>,
    /// Tiles on the sheet (a sample: see [`contact_sheet`]).
    pub tiles: usize,
}

/// A contact sheet: the first views of several polyps, background frames and video frames in
/// one PNG, for a reader to judge at a glance whether this looks like colonoscopy. A file that
/// fails the hash check or does not decode is named in [`ContactSheet::unreadable`], never
/// left as a silent blank.
pub fn contact_sheet(store: &Store, columns: u32, tile: u32) -> Result<ContactSheet, StoreError> {
    // At least one column of tiles with room for their 2-pixel frame.
    let (columns, tile) = (columns.max(1), tile.max(8));
    let mut media = Vec::new();
    for p in store.polyps()?.iter().take(8) {
        for (i, m) in store.polyp_views(p.id)?.into_iter().take(2).enumerate() {
            media.push((format!("polyp {} view {}", p.code, i + 1), m));
        }
    }
    for e in store.examinations()?.iter().take(6) {
        for m in store.loose_frames(e.id)?.into_iter().take(1) {
            media.push((format!("examination {} frame", e.code), m));
        }
    }
    for v in store.videos()?.iter().take(2) {
        let frames = store.video_frames(v.id)?;
        let step = (frames.len() / 4).max(1);
        for (n, m) in frames.into_iter().step_by(step).take(4) {
            media.push((format!("video {} frame {n}", v.code), m));
        }
    }
    let rows = (media.len() as u32).div_ceil(columns).max(1);
    let mut sheet = RgbImage::from_pixel(columns * tile, rows * tile, image::Rgb([20, 20, 20]));
    let mut unreadable = Vec::new();
    for (i, (what, m)) in media.iter().enumerate() {
        let (x, y) = (
            (i as u32 % columns) * tile + 2,
            (i as u32 / columns) * tile + 2,
        );
        match crate::data::images::decode_media(store, m) {
            Ok(d) => {
                let img = d
                    .image
                    .resize_exact(tile - 4, tile - 4, image::imageops::FilterType::Triangle)
                    .to_rgb8();
                image::imageops::replace(&mut sheet, &img, x as i64, y as i64);
            }
            Err(e) => {
                cross_out(&mut sheet, x, y, tile - 4);
                unreadable.push(format!("{what} (media {}, {}): {e}", m.id, m.rel_path));
            }
        }
    }
    Ok(ContactSheet {
        image: sheet,
        unreadable,
        tiles: media.len(),
    })
}

/// A red cross over the `side`-pixel tile at (`x`, `y`): a tile that could not be filled.
fn cross_out(sheet: &mut RgbImage, x: u32, y: u32, side: u32) {
    let red = image::Rgb([220, 30, 30]);
    for d in 0..side {
        for w in 0..3u32 {
            for (px, py) in [(x + d, y + d), (x + side - 1 - d, y + d)] {
                let px = (px + w).min(x + side - 1);
                if px < sheet.width() && py < sheet.height() {
                    sheet.put_pixel(px, py, red);
                }
            }
        }
    }
}
