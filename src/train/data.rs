//! Training data from a library: every polyp view, with its mask when it has one, resized to
//! the training resolution.

use crate::data::images::decode_file;
use crate::store::Store;
use image::imageops::{self, FilterType};
use image::{GrayImage, RgbImage};

/// One library image at training resolution (a little above the encoder's, so crops keep
/// detail), with its polyp mask when it has one.
pub struct Sample {
    pub image: RgbImage,
    pub mask: Option<GrayImage>,
    /// The polyp it shows, when known (used by `view_positives`).
    pub polyp: Option<i64>,
}

#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("{path}: {reason}")]
    Image { path: String, reason: String },
}

/// The polyp views of `store` at `size` x `size` (and which polyp each shows).
pub fn polyp_view_samples(store: &Store, size: u32) -> Result<(Vec<Sample>, Vec<i64>), DataError> {
    let mut samples = Vec::new();
    let mut polyps = Vec::new();
    for polyp in store.polyps()? {
        for view in store.polyp_views(polyp.id)? {
            let path = store.media_path(&view);
            let image = decode_file(&path).map_err(|e| DataError::Image {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
            let image = imageops::resize(&image.image.to_rgb8(), size, size, FilterType::Triangle);
            let mask = match view
                .mask_media_id
                .and_then(|id| store.media(id).transpose())
            {
                Some(m) => {
                    let m = m?;
                    let p = store.media_path(&m);
                    let mask = decode_file(&p).map_err(|e| DataError::Image {
                        path: p.display().to_string(),
                        reason: e.to_string(),
                    })?;
                    Some(imageops::resize(
                        &mask.image.to_luma8(),
                        size,
                        size,
                        FilterType::Nearest,
                    ))
                }
                None => None,
            };
            samples.push(Sample {
                image,
                mask,
                polyp: Some(polyp.id),
            });
            polyps.push(polyp.id);
        }
    }
    Ok((samples, polyps))
}
