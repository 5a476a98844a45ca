//! The generic image-folder importer on real frames and on bad input.

use endotwin::data::import::{ImportError, ImportLayout, ImportOptions};
use endotwin::engine::Progress;
use endotwin::store::{OpenMode, Store};
use std::path::{Path, PathBuf};

/// The real colonoscopy frames beside the repository (skipped with a message when they are
/// not there, unless ENDOTWIN_REQUIRE_REALDATA is set).
fn real_frames() -> Option<PathBuf> {
    crate::common::realdata("colonoscopy-frames")
}

fn import(
    store: &mut Store,
    path: &Path,
    strict: bool,
) -> Result<endotwin::data::import::ImportReport, ImportError> {
    endotwin::data::import::run(
        ImportLayout::Images,
        store,
        path,
        ImportOptions {
            strict,
            ..Default::default()
        },
        &Progress::new(),
    )
}

/// A folder with two good real frames and every kind of bad file.
fn mixed_folder() -> Option<tempfile::TempDir> {
    let dir = tempfile::tempdir().unwrap();
    let frames: Vec<PathBuf> = std::fs::read_dir(real_frames()?)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    std::fs::copy(&frames[0], dir.path().join("a.jpg")).unwrap();
    std::fs::copy(&frames[1], dir.path().join("b.jpg")).unwrap();
    // The same content twice.
    std::fs::copy(&frames[0], dir.path().join("a-again.jpg")).unwrap();
    let bytes = std::fs::read(&frames[2]).unwrap();
    std::fs::write(dir.path().join("truncated.jpg"), &bytes[..bytes.len() / 3]).unwrap();
    std::fs::write(dir.path().join("notes.png"), b"not an image, just text").unwrap();
    Some(dir)
}

#[test]
fn real_colonoscopy_frames_import_with_thumbnails() {
    let Some(frames) = real_frames() else { return };
    let lib = tempfile::tempdir().unwrap();
    let mut store = Store::open(lib.path(), OpenMode::CreateIfMissing).unwrap();
    let report = import(&mut store, &frames, false).unwrap();
    assert_eq!(report.media_added, 4);
    assert!(report.skipped.is_empty());
    let stats = store.stats().unwrap();
    assert_eq!(stats.media, 4);
    assert_eq!(stats.examinations, 1);
    let exam = &store.examinations().unwrap()[0];
    let frames = store.loose_frames(exam.id).unwrap();
    assert_eq!((frames[0].width, frames[0].height), (720, 576));
    assert!(
        store.media_path(&frames[0]).exists(),
        "media file stored by hash"
    );
    assert!(frames[0].source_path.ends_with(".jpg"), "source path kept");
    assert!(store.thumbnail(frames[0].id).unwrap().is_some());
    assert!(store.media_without_thumbnail().unwrap().is_empty());
}

#[test]
fn bad_files_are_skipped_with_their_reason_and_duplicates_counted() {
    let Some(src) = mixed_folder() else { return };
    let lib = tempfile::tempdir().unwrap();
    let mut store = Store::open(lib.path(), OpenMode::CreateIfMissing).unwrap();
    let report = import(&mut store, src.path(), false).unwrap();
    assert_eq!(report.media_added, 2);
    assert_eq!(report.duplicates, 1);
    assert_eq!(report.skipped.len(), 2);
    let reasons: Vec<String> = report.skipped.iter().map(|p| p.to_string()).collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("truncated.jpg") && r.contains("truncated or corrupt")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("notes.png") && r.contains("not an image")),
        "{reasons:?}"
    );
    // Importing the same folder again adds nothing new.
    let again = import(&mut store, src.path(), false).unwrap();
    assert_eq!(again.media_added, 0);
    assert_eq!(store.stats().unwrap().media, 2);
}

#[test]
fn strict_import_aborts_as_a_whole_and_writes_nothing() {
    let Some(src) = mixed_folder() else { return };
    let lib = tempfile::tempdir().unwrap();
    let mut store = Store::open(lib.path(), OpenMode::CreateIfMissing).unwrap();
    let err = import(&mut store, src.path(), true).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("nothing was written"), "{msg}");
    assert!(
        msg.contains("notes.png") || msg.contains("truncated.jpg"),
        "{msg}"
    );
    assert_eq!(store.stats().unwrap().media, 0);
    assert_eq!(store.stats().unwrap().examinations, 0);
}

#[test]
fn a_cancelled_import_writes_no_rows() {
    let Some(frames) = real_frames() else { return };
    let lib = tempfile::tempdir().unwrap();
    let mut store = Store::open(lib.path(), OpenMode::CreateIfMissing).unwrap();
    let progress = Progress::new();
    progress.cancel();
    let err = endotwin::data::import::run(
        ImportLayout::Images,
        &mut store,
        &frames,
        ImportOptions::default(),
        &progress,
    )
    .unwrap_err();
    assert!(matches!(err, ImportError::Cancelled));
    assert_eq!(store.stats().unwrap().media, 0);
}

#[test]
fn a_cancel_while_the_import_writes_leaves_no_row_and_no_file() {
    let src = tempfile::tempdir().unwrap();
    for i in 0..300u32 {
        crate::common::png(
            &src.path().join(format!("f{i:03}.png")),
            16,
            12,
            (i % 251) as u8,
        );
        // Distinct content: a pixel that encodes the index.
        let p = src.path().join(format!("f{i:03}.png"));
        let mut img = image::open(&p).unwrap().to_rgb8();
        img.put_pixel(0, 0, image::Rgb([(i >> 8) as u8, i as u8, 7]));
        img.save(&p).unwrap();
    }
    let lib = tempfile::tempdir().unwrap();
    let mut store = Store::open(lib.path(), OpenMode::CreateIfMissing).unwrap();
    // Cancelled once the write transaction has stored 5 of the 300 media files: at that
    // step every run (a watcher thread polling the progress raced the import and could see
    // it finish first on busy cores).
    let progress = Progress::new();
    progress.cancel_at("storing media", 5);
    let result = endotwin::data::import::run(
        ImportLayout::Images,
        &mut store,
        src.path(),
        ImportOptions::default(),
        &progress,
    );
    assert!(matches!(result, Err(ImportError::Cancelled)), "{result:?}");
    assert_eq!(
        (progress.stage_name().as_str(), progress.done()),
        ("storing media", 5),
        "cancelled while the media were being stored"
    );
    assert_eq!(store.stats().unwrap().media, 0);
    assert_eq!(store.row_total().unwrap(), 0);
    // The files written before the cancel are gone again, and so is the write's journal.
    let mut left = Vec::new();
    crate::common::walk(&lib.path().join("media"), &mut left);
    assert!(left.is_empty(), "{left:?}");
    assert!(endotwin::store::pending_journals(lib.path()).is_empty());
}

#[test]
fn a_folder_without_images_is_an_error_naming_it() {
    let empty = tempfile::tempdir().unwrap();
    let lib = tempfile::tempdir().unwrap();
    let mut store = Store::open(lib.path(), OpenMode::CreateIfMissing).unwrap();
    let err = import(&mut store, empty.path(), false).unwrap_err();
    assert!(err.to_string().contains("no image files"), "{err}");
    assert!(
        err.to_string()
            .contains(&empty.path().display().to_string())
    );
}

/// A 32 x 16 JPEG of four flat quadrants (red, green / blue, white from the top left) whose
/// EXIF says how to turn it (orientation 1-8).
fn quadrant_jpeg(path: &Path, orientation: u16) {
    let img =
        image::RgbImage::from_fn(32, 16, |x, y| image::Rgb(QUADRANTS[quadrant(x, y, 32, 16)]));
    crate::common::jpeg_with_exif_orientation(path, &img, orientation);
}

const QUADRANTS: [[u8; 3]; 4] = [[220, 30, 30], [30, 200, 30], [30, 30, 220], [240, 240, 240]];

/// Which quadrant of a `w` x `h` picture holds pixel (x, y): 0 top left, 1 top right, 2
/// bottom left, 3 bottom right.
fn quadrant(x: u32, y: u32, w: u32, h: u32) -> usize {
    usize::from(x >= w / 2) + 2 * usize::from(y >= h / 2)
}

/// The stored pixel a picture of `w` x `h` with EXIF `orientation` shows at (x, y) once
/// turned upright (EXIF 2.3: 2 mirrored, 3 upside down, 4 flipped, 5 transposed, 6 turned a
/// quarter clockwise, 7 transversed, 8 a quarter anticlockwise).
fn stored_pixel(orientation: u16, x: u32, y: u32, w: u32, h: u32) -> (u32, u32) {
    match orientation {
        1 => (x, y),
        2 => (w - 1 - x, y),
        3 => (w - 1 - x, h - 1 - y),
        4 => (x, h - 1 - y),
        5 => (y, x),
        6 => (y, h - 1 - x),
        7 => (w - 1 - y, h - 1 - x),
        8 => (w - 1 - y, x),
        _ => unreachable!(),
    }
}

/// `image` (decoded from a 32 x 16 quadrant JPEG with `orientation`) shows each stored
/// quadrant where that orientation puts it: checked at every upright quadrant's middle.
fn assert_upright(image: &image::DynamicImage, orientation: u16, what: &str) {
    let (w, h) = (32, 16);
    let turned = orientation >= 5;
    let (uw, uh) = if turned { (h, w) } else { (w, h) };
    assert_eq!((image.width(), image.height()), (uw, uh), "{what}: size");
    let rgb = image.to_rgb8();
    for (x, y) in [
        (uw / 4, uh / 4),
        (3 * uw / 4, uh / 4),
        (uw / 4, 3 * uh / 4),
        (3 * uw / 4, 3 * uh / 4),
    ] {
        let (sx, sy) = stored_pixel(orientation, x, y, w, h);
        let want = QUADRANTS[quadrant(sx, sy, w, h)];
        let got = rgb.get_pixel(x, y).0;
        assert!(
            got.iter().zip(want).all(|(g, w)| g.abs_diff(w) < 40),
            "{what}: upright ({x}, {y}) shows {got:?}, not {want:?} (stored ({sx}, {sy}))"
        );
    }
}

#[test]
fn every_exif_orientation_is_turned_upright_pixel_for_pixel() {
    let src = tempfile::tempdir().unwrap();
    let lib = tempfile::tempdir().unwrap();
    for o in 1..=8u16 {
        let path = src.path().join(format!("in/orientation-{o}.jpg"));
        quadrant_jpeg(&path, o);
        let d = endotwin::data::images::decode_file(&path).unwrap();
        assert_upright(&d.image, o, &format!("orientation {o}, read from its file"));
    }
    // The same through an import: the library records the upright size, and every read of
    // the view (the hash-checked one) shows it upright.
    let mut store = Store::open(lib.path(), OpenMode::CreateIfMissing).unwrap();
    let report = import(&mut store, &src.path().join("in"), true).unwrap();
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    let exam = store.examinations().unwrap()[0].id;
    let frames = store.loose_frames(exam).unwrap();
    assert_eq!(frames.len(), 8);
    for m in &frames {
        let o: u16 = m
            .source_path
            .rsplit_once('-')
            .and_then(|(_, n)| n.strip_suffix(".jpg"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{}", m.source_path));
        let what = format!("orientation {o}, imported");
        let turned = o >= 5;
        assert_eq!(
            (m.width, m.height),
            if turned { (16, 32) } else { (32, 16) },
            "{what}"
        );
        let d = endotwin::data::images::decode_media(&store, m).unwrap();
        assert_upright(&d.image, o, &what);
    }
}
