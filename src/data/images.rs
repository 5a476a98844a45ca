//! Decoding user images with messages a person can act on, and thumbnails.

use image::{DynamicImage, ImageFormat, RgbImage};
use std::path::Path;

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ImageError {
    #[error(
        "not an image EndoTwin reads (its content is none of PNG, JPEG, BMP, TIFF; GIF, WebP and others: convert to PNG)"
    )]
    NotAnImage,
    #[error("{format} image is truncated or corrupt: {detail}")]
    Corrupt { format: String, detail: String },
    #[error("image has zero width or height")]
    Empty,
    #[error(
        "image too large: {width}x{height} pixels ({megapixels} megapixels); EndoTwin opens images up to {max}x{max} pixels and {} MiB decoded: {} megapixels of 8-bit RGB, {} of 16-bit RGBA",
        MAX_DECODED_BYTES >> 20,
        MAX_DECODED_BYTES / 3 / 1_000_000,
        MAX_DECODED_BYTES / 8 / 1_000_000
    )]
    TooLarge {
        width: u32,
        height: u32,
        megapixels: u64,
        max: u32,
    },
    #[error("file too large: {bytes} bytes; an image file may be at most {max_mib} MiB")]
    FileTooLarge { bytes: u64, max_mib: u64 },
    #[error("could not read file: {0}")]
    Read(String),
    #[error(
        "unsupported JPEG coding ({0}); EndoTwin reads baseline and progressive Huffman JPEGs: convert it to PNG"
    )]
    UnsupportedJpeg(String),
    #[error("{0}")]
    NotARegularFile(String),
    #[error(
        "a {format} image of a kind EndoTwin does not read (its colour type or coding, e.g. YCbCr or 16-bit CMYK); convert it to PNG"
    )]
    UnsupportedKind { format: String },
    #[error(
        "a TIFF of {pages} pages (a stack or series); EndoTwin reads one image a file: save each page as its own file"
    )]
    MultiPage { pages: usize },
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
    if format == ImageFormat::Jpeg {
        let scan = jpeg_scan(&bytes);
        if let Some(coding) = scan.unsupported {
            return Err(ImageError::UnsupportedJpeg(coding.into()));
        }
        // The JPEG decoder fills in a truncated file rather than failing: check the end marker.
        if !scan.has_end {
            return Err(ImageError::Corrupt {
                format: "JPEG".into(),
                detail: "file ends before the end-of-image marker".into(),
            });
        }
    }
    // A stack of pages would be read as its first page alone without a word (round 7 N33).
    if format == ImageFormat::Tiff {
        let pages = tiff_pages(&bytes);
        if pages > 1 {
            return Err(ImageError::MultiPage { pages });
        }
    }
    // CVC-ClinicDB's frames say "grey" (BlackIsZero) but hold three samples a pixel: RGB.
    let patched = match format {
        ImageFormat::Tiff => tiff_three_sample_grey_as_rgb(&bytes),
        ImageFormat::Png => png_without_compressed_metadata(&bytes),
        _ => None,
    };
    let pixels: &[u8] = patched.as_deref().unwrap_or(&bytes);
    let corrupt = |e: image::ImageError| match e {
        // A coding the decoder does not have is not damage (round 8 N9: a YCbCr TIFF was
        // "truncated or corrupt ... color type `Unknown(24)`").
        image::ImageError::Unsupported(_) => ImageError::UnsupportedKind {
            format: format!("{format:?}").to_uppercase(),
        },
        e => ImageError::Corrupt {
            format: format!("{format:?}").to_uppercase(),
            detail: e.to_string(),
        },
    };
    let reader = || image::ImageReader::with_format(std::io::Cursor::new(pixels), format);
    let (width, height) = reader().into_dimensions().map_err(corrupt)?;
    // One statement of the limit whatever the image (round 8 N3: it was stated at this
    // image's bytes a pixel, 1073 megapixels for one file and 357 for the next).
    let too_large = ImageError::TooLarge {
        width,
        height,
        megapixels: (width as u64 * height as u64).div_ceil(1_000_000),
        max: MAX_SIDE,
    };
    // At least a byte a pixel whatever the colour type; the decoder's own size comes next.
    if width > MAX_SIDE || height > MAX_SIDE || width as u64 * height as u64 > MAX_DECODED_BYTES {
        return Err(too_large.clone());
    }
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_DECODED_BYTES);
    let mut reader = reader();
    reader.limits(limits);
    let limit_or_corrupt = |e: image::ImageError| match e {
        image::ImageError::Limits(_) => too_large.clone(),
        e => corrupt(e),
    };
    let mut decoder = reader.into_decoder().map_err(limit_or_corrupt)?;
    let decoded = image::ImageDecoder::total_bytes(&decoder);
    if decoded > MAX_DECODED_BYTES {
        return Err(too_large.clone());
    }
    // A camera's EXIF orientation (3: upside down, 6 and 8: sideways) is how the frame is
    // meant to be seen; the stored bytes stay as they came, every decode turns them.
    let orientation = image::ImageDecoder::orientation(&mut decoder)
        .unwrap_or(image::metadata::Orientation::NoTransforms);
    let mut image = DynamicImage::from_decoder(decoder).map_err(limit_or_corrupt)?;
    image.apply_orientation(orientation);
    if image.width() == 0 || image.height() == 0 {
        return Err(ImageError::Empty);
    }
    Ok(Decoded {
        image,
        format,
        bytes,
    })
}

/// What a walk over a JPEG's markers finds.
struct JpegScan {
    /// The end-of-image marker comes after the image data (trailing bytes after it are
    /// allowed: some writers pad).
    has_end: bool,
    /// A coding the decoder does not read (arithmetic, lossless, hierarchical).
    unsupported: Option<&'static str>,
}

/// Walks the JPEG's segments to its scans and through their entropy-coded data (where a
/// 0xFF byte is always followed by 0x00 or a restart marker) to the end-of-image marker,
/// so an EXIF thumbnail's own end marker is not taken for the image's.
fn jpeg_scan(bytes: &[u8]) -> JpegScan {
    let mut scan = JpegScan {
        has_end: false,
        unsupported: None,
    };
    let mut i = 2; // after SOI
    while i + 2 <= bytes.len() {
        if bytes[i] != 0xFF {
            return scan;
        }
        let marker = bytes[i + 1];
        match marker {
            0xFF => {
                i += 1;
                continue;
            }
            0xD9 => {
                scan.has_end = true;
                return scan;
            }
            0x01 | 0xD0..=0xD8 => {
                i += 2;
                continue;
            }
            0xC3 | 0xC7 | 0xCB | 0xCF => scan.unsupported = Some("lossless"),
            0xC5 | 0xC6 | 0xCD | 0xCE => scan.unsupported = Some("hierarchical"),
            0xC9 | 0xCA => scan.unsupported = Some("arithmetic"),
            _ => {}
        }
        if scan.unsupported.is_some() || i + 4 > bytes.len() {
            return scan;
        }
        let len = u16::from_be_bytes([bytes[i + 2], bytes[i + 3]]) as usize;
        i += 2 + len;
        if marker == 0xDA {
            // Entropy-coded data up to the next marker that is no restart marker.
            while i + 1 < bytes.len() {
                if bytes[i] == 0xFF
                    && bytes[i + 1] != 0x00
                    && !(0xD0..=0xD7).contains(&bytes[i + 1])
                {
                    break;
                }
                i += 1;
            }
        }
    }
    scan
}

/// A copy of a TIFF whose first image says BlackIsZero or WhiteIsZero (grey) but has three
/// samples a pixel and no extra samples, with its photometric interpretation set to RGB;
/// `None` for every other file.
/// A classic TIFF's byte order, for reading its header and directories.
struct Tiff<'a> {
    bytes: &'a [u8],
    little: bool,
}

impl<'a> Tiff<'a> {
    fn of(bytes: &'a [u8]) -> Option<Tiff<'a>> {
        let little = match bytes.get(..4)? {
            [b'I', b'I', 42, 0] => true,
            [b'M', b'M', 0, 42] => false,
            _ => return None,
        };
        Some(Tiff { bytes, little })
    }

    fn u16_at(&self, at: usize) -> Option<u16> {
        let b: [u8; 2] = self.bytes.get(at..at.checked_add(2)?)?.try_into().ok()?;
        Some(match self.little {
            true => u16::from_le_bytes(b),
            false => u16::from_be_bytes(b),
        })
    }

    fn u32_at(&self, at: usize) -> Option<u32> {
        let b: [u8; 4] = self.bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(match self.little {
            true => u32::from_le_bytes(b),
            false => u32::from_be_bytes(b),
        })
    }

    /// How many images (directories) the file chains, counted up to 1000 (a loop in the
    /// chain ends the count).
    fn pages(&self) -> usize {
        let mut seen = std::collections::HashSet::new();
        let mut next = self.u32_at(4).unwrap_or(0) as usize;
        while next != 0 && seen.len() < 1000 && seen.insert(next) {
            let Some(entries) = self.u16_at(next) else {
                break;
            };
            next = self.u32_at(next + 2 + 12 * entries as usize).unwrap_or(0) as usize;
        }
        seen.len()
    }
}

/// How many pages a TIFF file holds (1 for any other file).
pub fn tiff_pages(bytes: &[u8]) -> usize {
    Tiff::of(bytes).map_or(1, |t| t.pages().max(1))
}

/// `bytes` (a PNG) without its compressed metadata chunks (a colour profile, compressed or
/// international text), which EndoTwin does not use: the decoder inflates them whole, and a
/// 4 MB profile chunk of a 160x120 image inflated to 4 GB (round 9 N11). `None` when the
/// file has none (or its chunks do not parse: the decoder then says what is wrong).
fn png_without_compressed_metadata(bytes: &[u8]) -> Option<Vec<u8>> {
    const DROPPED: [&[u8; 4]; 3] = [b"iCCP", b"zTXt", b"iTXt"];
    let mut out = bytes.get(..8)?.to_vec();
    let mut at = 8;
    let mut dropped = false;
    while at < bytes.len() {
        let len = u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?) as usize;
        let end = at.checked_add(12)?.checked_add(len)?;
        let chunk = bytes.get(at..end)?;
        if DROPPED.iter().any(|t| &chunk[4..8] == *t) {
            dropped = true;
        } else {
            out.extend_from_slice(chunk);
        }
        at = end;
    }
    dropped.then_some(out)
}

fn tiff_three_sample_grey_as_rgb(bytes: &[u8]) -> Option<Vec<u8>> {
    let tiff = Tiff::of(bytes)?;
    let little = tiff.little;
    let u16_at = |at: usize| tiff.u16_at(at);
    let u32_at = |at: usize| tiff.u32_at(at);
    let ifd = u32_at(4)? as usize;
    let entries = u16_at(ifd)? as usize;
    let (mut photometric_at, mut samples, mut extra) = (None, 1u16, false);
    for e in 0..entries {
        let at = ifd + 2 + 12 * e;
        let (tag, kind) = (u16_at(at)?, u16_at(at + 2)?);
        match (tag, kind) {
            (262, 3) if matches!(u16_at(at + 8)?, 0 | 1) => photometric_at = Some(at + 8),
            (277, 3) => samples = u16_at(at + 8)?,
            (338, _) => extra = true,
            _ => {}
        }
    }
    let at = photometric_at.filter(|_| samples == 3 && !extra)?;
    let mut out = bytes.to_vec();
    let rgb: [u8; 2] = if little {
        2u16.to_le_bytes()
    } else {
        2u16.to_be_bytes()
    };
    out[at..at + 2].copy_from_slice(&rgb);
    Some(out)
}

/// The longest image side EndoTwin decodes (pixels).
pub const MAX_SIDE: u32 = 32_768;
/// The most memory one decoded image may take, at its own bytes a pixel (1 for 8-bit grey,
/// 3 for RGB, 8 for 16-bit RGBA): 1 GiB. At 2 GiB counted as 16-bit RGBA, three
/// 268-megapixel 16-bit views of one twin query took 8 GB (hostile round 6, N74).
pub const MAX_DECODED_BYTES: u64 = 1 << 30;
/// The largest image file EndoTwin reads.
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// Decodes a media row's file, refused when its bytes no longer hash to the row's (a file
/// swapped or damaged on disk).
pub fn decode_media(
    store: &crate::store::Store,
    media: &crate::store::MediaRow,
) -> Result<Decoded, ImageError> {
    let bytes = store
        .read_media(media)
        .map_err(|e| ImageError::Read(e.to_string()))?;
    decode_bytes(bytes)
}

/// Decodes an image file: a regular file (not a FIFO or a device, which could block or never
/// end) of at most [`MAX_FILE_BYTES`].
pub fn decode_file(path: &Path) -> Result<Decoded, ImageError> {
    // `-` is no file: images are read from files, never standard input (round 12 N11).
    if path.as_os_str() == "-" {
        return Err(ImageError::Read(
            "`-`: an image is read from a file, not standard input; name the file".into(),
        ));
    }
    let meta = std::fs::metadata(path)
        .map_err(|e| ImageError::Read(crate::plumbing::input::plain_io(&e)))?;
    if !meta.is_file() {
        return Err(ImageError::NotARegularFile(format!(
            "{}: not a regular file (a folder, FIFO or device); EndoTwin reads images from files",
            path.display()
        )));
    }
    let len = meta.len();
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

    /// MINOR 1: the refusal of a 20000 x 20000 image states the limit it breaks.
    #[test]
    fn a_too_large_image_is_refused_with_the_limit_it_breaks() {
        let e = ImageError::TooLarge {
            width: 20000,
            height: 20000,
            megapixels: 400,
            max: MAX_SIDE,
        }
        .to_string();
        assert!(
            e.contains("400 megapixels")
                && e.contains("357 megapixels of 8-bit RGB, 134 of 16-bit RGBA"),
            "{e}"
        );
    }

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
