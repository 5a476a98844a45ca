//! Decoding user images with messages a person can act on, and thumbnails.

use image::{DynamicImage, ImageFormat, RgbImage};
use std::path::Path;

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ImageError {
    #[error("not an image (content matches no supported format: PNG, JPEG, BMP, TIFF)")]
    NotAnImage,
    #[error("{format} image is truncated or corrupt: {detail}")]
    Corrupt { format: String, detail: String },
    #[error("image has zero width or height")]
    Empty,
    #[error(
        "image too large: {width}x{height} pixels; EndoTwin opens images up to {max}x{max} pixels and {max_mib} MiB decoded"
    )]
    TooLarge {
        width: u32,
        height: u32,
        max: u32,
        max_mib: u64,
    },
    #[error("file too large: {bytes} bytes; an image file may be at most {max_mib} MiB")]
    FileTooLarge { bytes: u64, max_mib: u64 },
    #[error("could not read file: {0}")]
    Read(String),
}

/// A decoded image together with the exact file bytes it came from.
pub struct Decoded {
    pub image: DynamicImage,
    pub format: ImageFormat,
    pub bytes: Vec<u8>,
}

impl Decoded {
    /// File extension under which these bytes are stored.
    pub fn extension(&self) -> &'static str {
        self.format
            .extensions_str()
            .first()
            .copied()
            .unwrap_or("img")
    }
}

/// Decodes bytes by their content (not the file name's extension).
pub fn decode_bytes(bytes: Vec<u8>) -> Result<Decoded, ImageError> {
    let format = image::guess_format(&bytes).map_err(|_| ImageError::NotAnImage)?;
    if !matches!(
        format,
        ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::Bmp | ImageFormat::Tiff
    ) {
        return Err(ImageError::NotAnImage);
    }
    // The JPEG decoder fills in a truncated file rather than failing: check the end marker.
    if format == ImageFormat::Jpeg && !has_jpeg_end(&bytes) {
        return Err(ImageError::Corrupt {
            format: "JPEG".into(),
            detail: "file ends before the end-of-image marker".into(),
        });
    }
    let corrupt = |e: image::ImageError| ImageError::Corrupt {
        format: format!("{format:?}").to_uppercase(),
        detail: e.to_string(),
    };
    let reader = || image::ImageReader::with_format(std::io::Cursor::new(&bytes[..]), format);
    let (width, height) = reader().into_dimensions().map_err(corrupt)?;
    let too_large = ImageError::TooLarge {
        width,
        height,
        max: MAX_SIDE,
        max_mib: MAX_DECODED_BYTES >> 20,
    };
    // RGBA at 16 bits is the widest a supported decoder produces: 8 bytes a pixel.
    if width > MAX_SIDE || height > MAX_SIDE || width as u64 * height as u64 * 8 > MAX_DECODED_BYTES
    {
        return Err(too_large);
    }
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_DECODED_BYTES);
    let mut decoder = reader();
    decoder.limits(limits);
    let image = decoder.decode().map_err(|e| match e {
        image::ImageError::Limits(_) => too_large,
        e => corrupt(e),
    })?;
    if image.width() == 0 || image.height() == 0 {
        return Err(ImageError::Empty);
    }
    Ok(Decoded {
        image,
        format,
        bytes,
    })
}

/// Whether a JPEG file has its end-of-image marker (FF D9) near the end; some writers pad
/// after it, so a little trailing data is allowed.
fn has_jpeg_end(bytes: &[u8]) -> bool {
    let tail = &bytes[bytes.len().saturating_sub(4096)..];
    tail.windows(2).any(|w| w == [0xFF, 0xD9])
}

/// The longest image side EndoTwin decodes (pixels).
pub const MAX_SIDE: u32 = 32_768;
/// The most memory one decoded image may take.
pub const MAX_DECODED_BYTES: u64 = 2 << 30;
/// The largest image file EndoTwin reads.
pub const MAX_FILE_BYTES: u64 = 1 << 30;

pub fn decode_file(path: &Path) -> Result<Decoded, ImageError> {
    let len = std::fs::metadata(path)
        .map_err(|e| ImageError::Read(e.to_string()))?
        .len();
    if len > MAX_FILE_BYTES {
        return Err(ImageError::FileTooLarge {
            bytes: len,
            max_mib: MAX_FILE_BYTES >> 20,
        });
    }
    let bytes = std::fs::read(path).map_err(|e| ImageError::Read(e.to_string()))?;
    decode_bytes(bytes)
}

/// Any input (grey, RGBA, 16-bit) as 8-bit RGB.
pub fn to_rgb8(image: &DynamicImage) -> RgbImage {
    image.to_rgb8()
}

/// Longer side of the thumbnails stored with each media item.
pub const THUMBNAIL_SIDE: u32 = 128;

/// A JPEG thumbnail whose longer side is `max_side` pixels (JPEG: a tenth of a PNG's size
/// for photographs, which keeps the library small).
pub fn thumbnail_jpeg(image: &DynamicImage, max_side: u32) -> Vec<u8> {
    let thumb = image.thumbnail(max_side, max_side).to_rgb8();
    let mut out = Vec::new();
    let enc = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 80);
    thumb
        .write_with_encoder(enc)
        .expect("JPEG encoding into memory cannot fail");
    out
}

/// Whether a file name looks like an image we can import (the content is checked later).
pub fn has_image_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .map(|e| {
            matches!(
                e.to_ascii_lowercase().as_str(),
                "png" | "jpg" | "jpeg" | "bmp" | "tif" | "tiff"
            )
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png_bytes() -> Vec<u8> {
        let img = DynamicImage::ImageRgb8(RgbImage::from_pixel(8, 6, image::Rgb([200, 30, 40])));
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, ImageFormat::Png).unwrap();
        out.into_inner()
    }

    #[test]
    fn text_with_image_extension_is_not_an_image() {
        assert_eq!(
            decode_bytes(b"hello, I am a text file".to_vec()).err(),
            Some(ImageError::NotAnImage)
        );
    }

    #[test]
    fn truncated_png_is_reported_as_corrupt() {
        let mut bytes = png_bytes();
        bytes.truncate(bytes.len() / 2);
        let err = decode_bytes(bytes).err().unwrap();
        assert!(
            matches!(err, ImageError::Corrupt { ref format, .. } if format == "PNG"),
            "{err}"
        );
    }

    #[test]
    fn truncated_jpeg_is_reported_as_corrupt() {
        let img = DynamicImage::ImageRgb8(RgbImage::from_fn(64, 64, |x, y| {
            image::Rgb([x as u8 * 3, y as u8 * 2, 90])
        }));
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, ImageFormat::Jpeg).unwrap();
        let mut bytes = out.into_inner();
        assert!(decode_bytes(bytes.clone()).is_ok());
        bytes.truncate(bytes.len() * 2 / 3);
        let err = decode_bytes(bytes).err().unwrap();
        assert!(
            err.to_string()
                .contains("JPEG image is truncated or corrupt"),
            "{err}"
        );
    }

    #[test]
    fn sixteen_bit_and_grey_images_convert_to_rgb() {
        let grey16 = DynamicImage::ImageLuma16(image::ImageBuffer::from_pixel(
            4,
            4,
            image::Luma([65535u16]),
        ));
        let rgb = to_rgb8(&grey16);
        assert_eq!(rgb.get_pixel(0, 0).0, [255, 255, 255]);
    }
}
