//! Training data from a library: every polyp view, with its mask when it has one, cut around
//! the polyp exactly as inference cuts it.

use crate::model::preprocess::{Focus, TwinInput};
use crate::store::Store;
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

/// The polyp views of `store` as the encoder sees them: each cut by `input` around its
/// polyp (the mask's box; the centred field of view without a mask), with the mask cut the
/// same way, and which polyp each shows. Inference cuts the very same pixels
/// ([`TwinInput::apply`]), so training and indexing agree.
pub fn polyp_view_samples(
    store: &Store,
    input: &TwinInput,
) -> Result<(Vec<Sample>, Vec<i64>), DataError> {
    let mut samples = Vec::new();
    let mut polyps = Vec::new();
    for polyp in store.polyps()? {
        for view in store.polyp_views(polyp.id)? {
            let decode = |m: &crate::store::MediaRow| {
                crate::data::images::decode_media(store, m).map_err(|e| DataError::Image {
                    path: store.media_path(m).display().to_string(),
                    reason: e.to_string(),
                })
            };
            let image = decode(&view)?.image;
            let mask = match view
                .mask_media_id
                .and_then(|id| store.media(id).transpose())
            {
                Some(m) => Some(decode(&m?)?.image.to_luma8()),
                None => None,
            };
            let focus = Focus::of_mask(mask.as_ref());
            samples.push(Sample {
                image: input.apply(&image, focus),
                mask: mask.map(|m| input.apply_mask(&m, focus)),
                polyp: Some(polyp.id),
            });
            polyps.push(polyp.id);
        }
    }
    Ok((samples, polyps))
}
