//! The CVC-ClinicDB importer's paths on a release in miniature that the test writes itself
//! (a clone without `../shared` covers them): the layout (folder names in any case, the
//! README's frame-to-sequence table, a frame in no sequence), the TIFF quirk (frames that say
//! grey but hold RGB), masks (stored with their view; a missing or misfit one named) and a
//! link leading out of the folder (refused, followed only with `--follow-links`). The
//! release's own frames are read by tests/importers.rs when `../shared` is there.

use crate::common::{self, Ran, endotwin, run, state};
use endotwin::store::{OpenMode, Store};
use std::path::Path;

/// Frame `n`'s pixels: distinct per frame, with all three channels different (a grey reading
/// of them could not give them back).
fn frame(n: u32) -> image::RgbImage {
    image::RgbImage::from_fn(24, 16, |x, y| {
        image::Rgb([(100 + n * 20) as u8, (x * 9) as u8, (y * 13 + n) as u8])
    })
}

/// Frame `n`'s mask: a box of 255 on 0 (TIFF, 8-bit grey, as released).
fn mask(w: u32, h: u32) -> image::GrayImage {
    image::GrayImage::from_fn(w, h, |x, y| {
        image::Luma([if (6..18).contains(&x) && (4..12).contains(&y) {
            255
        } else {
            0
        }])
    })
}

/// Writes `image` as an uncompressed RGB TIFF whose PhotometricInterpretation says
/// BlackIsZero (grey), as CVC-ClinicDB's frames do.
fn tiff_saying_grey(path: &Path, image: &image::RgbImage) {
    let mut bytes = std::io::Cursor::new(Vec::new());
    image
        .write_to(&mut bytes, image::ImageFormat::Tiff)
        .unwrap();
    let mut bytes = bytes.into_inner();
    assert_eq!(
        &bytes[..4],
        b"II*\0",
        "the encoder writes little-endian TIFF"
    );
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
    let ifd = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
    let entries = u16_at(&bytes, ifd) as usize;
    let photometric = (0..entries)
        .map(|e| ifd + 2 + 12 * e)
        .find(|&at| u16_at(&bytes, at) == 262)
        .expect("a PhotometricInterpretation entry");
    assert_eq!(u16_at(&bytes, photometric + 8), 2, "written as RGB");
    bytes[photometric + 8..photometric + 10].copy_from_slice(&1u16.to_le_bytes());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// The release in miniature at `root`, and one frame outside it that `original/2.tif` links
/// to (in `outside`):
/// - `original/` and `GROUND TRUTH/` (the release's names in other cases), README.txt with
///   its table (`1 to 3 | 3`, `4 to 6 | 5`, and `7 to 8 | 7`, frames this copy does not
///   hold) and a Latin-1 byte, no sequences.csv;
/// - frames 1-6 and 9, TIFFs that say grey; frame 9 is in no sequence;
/// - masks for 1-5; frame 5's is the wrong size, frame 6 has none.
fn miniature(root: &Path, outside: &Path) {
    for n in [1, 3, 4, 5, 6, 9] {
        tiff_saying_grey(&root.join(format!("original/{n}.tif")), &frame(n));
    }
    tiff_saying_grey(&outside.join("2.tif"), &frame(2));
    std::os::unix::fs::symlink(outside.join("2.tif"), root.join("original/2.tif")).unwrap();
    std::fs::create_dir_all(root.join("GROUND TRUTH")).unwrap();
    for n in 1..=4 {
        mask(24, 16)
            .save(root.join(format!("GROUND TRUTH/{n}.tif")))
            .unwrap();
    }
    mask(12, 8).save(root.join("GROUND TRUTH/5.tif")).unwrap();
    let mut readme = b"CVC-ClinicDB (miniature)\n| Frames | Sequence |\n".to_vec();
    readme.extend(
        b"|  1 to 3  |  3  |\n|  4 to 6  |  5  |\n|  7 to 8  |  7  |\nAuthor: Jorge Bernal, Universitat Aut\xf2noma\n",
    );
    std::fs::write(root.join("README.txt"), readme).unwrap();
}

fn import(lib: &Path, src: &Path, extra: &[&str]) -> Ran {
    let mut c = endotwin(lib);
    c.args(["import", "cvc-clinicdb"]).args(extra).arg(src);
    run(c)
}

/// Sequence `seq`'s views in frame order, each as (source file name, RGB pixels, mask).
fn views_of(lib: &Path, seq: &str) -> Vec<(String, image::RgbImage, image::GrayImage)> {
    let store = Store::open(lib, OpenMode::Existing).unwrap();
    let polyp = store
        .polyps()
        .unwrap()
        .into_iter()
        .find(|p| p.code.ends_with(seq))
        .unwrap_or_else(|| panic!("no polyp {seq}"));
    store
        .polyp_views(polyp.id)
        .unwrap()
        .iter()
        .map(|v| {
            let name = Path::new(&v.source_path)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let rgb = endotwin::data::images::decode_media(&store, v)
                .unwrap()
                .image
                .to_rgb8();
            let m = store
                .media(v.mask_media_id.expect("every view has its mask"))
                .unwrap()
                .unwrap();
            let m = endotwin::data::images::decode_media(&store, &m)
                .unwrap()
                .image
                .to_luma8();
            (name, rgb, m)
        })
        .collect()
}

#[test]
fn a_small_cvc_clinicdb_release_imports_by_its_readme_with_colours_masks_and_links_as_asked() {
    let dir = tempfile::tempdir().unwrap();
    let (src, outside) = (dir.path().join("cvc"), dir.path().join("elsewhere"));
    miniature(&src, &outside);
    // The quirk is there: read as the file says, frame 1 is not its RGB pixels.
    let bytes = std::fs::read(src.join("original/1.tif")).unwrap();
    let as_said = image::load_from_memory(&bytes).map(|i| i.to_rgb8());
    assert!(
        !matches!(as_said, Ok(ref rgb) if *rgb == frame(1)),
        "the written TIFF does not say grey"
    );

    let lib = dir.path().join("lib");
    let r = import(&lib, &src, &[]);
    assert!(r.ok(), "{}", r.text());
    // Sequence 3: frames 1 and 3 (2 leads outside); sequence 5: frame 4 (5's mask does not
    // fit, 6 has none); frame 9 is in no sequence; the table's frames 7 and 8 are not in
    // this copy (said once, not as skipped items). Each is named.
    for said in [
        "4 skipped",
        "note: the sequence table names 2 frames not in Original/ (7, 8); sequence 7 has no frame here",
        "2 examinations, 2 polyps, 3 views (all with masks)",
        "frame 9 is in no sequence",
        "no mask 6 in Ground Truth/",
        "mask is 12x8 but its image is 24x16",
        "leads outside the import folder",
        "--follow-links",
    ] {
        assert!(r.says(said), "says {said}:\n{}", r.text());
    }
    let seq3 = views_of(&lib, "seq03");
    let names: Vec<&str> = seq3.iter().map(|v| v.0.as_str()).collect();
    assert_eq!(names, ["1.tif", "3.tif"], "frames in frame order");
    let seq5 = views_of(&lib, "seq05");
    assert_eq!(seq5.len(), 1);
    // Colours right (the TIFF's RGB, not a grey reading) and each mask the one written.
    for ((_, rgb, m), n) in seq3.iter().chain(&seq5).zip([1, 3, 4]) {
        assert!(*rgb == frame(n), "frame {n}'s colours changed");
        assert!(*m == mask(24, 16), "frame {n}'s mask changed");
    }
    // The same folder again changes nothing.
    let before = state(&lib);
    let r = import(&lib, &src, &[]);
    assert!(r.says("the library did not change"), "{}", r.text());
    assert_eq!(state(&lib), before);

    // With --follow-links the frame beyond the link is read too, as any other.
    let followed = dir.path().join("followed");
    let r = import(&followed, &src, &["--follow-links"]);
    assert!(r.ok(), "{}", r.text());
    assert!(!r.says("leads outside"), "{}", r.text());
    let seq3 = views_of(&followed, "seq03");
    let names: Vec<&str> = seq3.iter().map(|v| v.0.as_str()).collect();
    assert_eq!(names, ["1.tif", "2.tif", "3.tif"]);
    assert!(seq3[1].1 == frame(2) && seq3[1].2 == mask(24, 16));

    // Without its table, or without Ground Truth/, it is no CVC-ClinicDB folder: said, and
    // nothing written.
    std::fs::remove_file(src.join("README.txt")).unwrap();
    let none = dir.path().join("none");
    let r = import(&none, &src, &[]);
    assert!(
        !r.ok() && r.says("not a CVC-ClinicDB folder") && r.says("README.txt"),
        "{}",
        r.text()
    );
    std::fs::write(src.join("sequences.csv"), "frame,sequence\n1,3\n").unwrap();
    std::fs::rename(src.join("GROUND TRUTH"), src.join("masks")).unwrap();
    let r = import(&none, &src, &[]);
    assert!(!r.ok() && r.says("no Ground Truth/"), "{}", r.text());
    assert!(
        !none.join(endotwin::store::DB_FILE).exists(),
        "a refused import left a library behind"
    );
    assert!(common::invalid_rows(&lib).is_empty());
}
