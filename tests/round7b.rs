//! Hostile round 7, the findings left after tests/round7.rs (issue 43): each through the
//! command line (or the engine API a command uses), refused or said by name, with nothing
//! changed where something was refused.

use crate::common::{self, import, png};
use crate::hostile::library_with_cases;
use crate::store_safety::{files, run_within};

use endotwin::store::{OpenMode, Store};
use std::path::Path;

use crate::common::et;

/// A white square of `side` px at (`x`, `y`) on black, `w` x `h`: a polyp's mask.
fn mask(path: &Path, (w, h): (u32, u32), (x, y, side): (u32, u32, u32)) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    image::GrayImage::from_fn(w, h, |px, py| {
        let inside = (x..x + side).contains(&px) && (y..y + side).contains(&py);
        image::Luma([if inside { 255 } else { 0 }])
    })
    .save(path)
    .unwrap();
}

/// N11: a library whose schema version number was set back (a v3 database saying 1) failed
/// in raw SQL ("duplicate column name: pid") on every command.
#[test]
fn a_database_whose_version_number_was_set_back_is_said_in_words_and_left_alone() {
    let (lib, _src) = library_with_cases();
    let db = lib.path().join("library.sqlite");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("PRAGMA user_version = 1").unwrap();
    drop(conn);
    let before = files(lib.path());
    for args in [&["info"][..], &["labels", "export", "--out", "-"]] {
        let r = run_within(et(lib.path(), args), 60);
        assert!(
            !r.ok()
                && r.says("says schema version 1")
                && r.says("restore library.sqlite from a backup")
                && !r.says("duplicate column"),
            "{}",
            r.text()
        );
    }
    let after = files(lib.path());
    let db_entry = |f: &[(std::path::PathBuf, String)]| {
        f.iter()
            .find(|(p, _)| p == Path::new("library.sqlite"))
            .cloned()
    };
    assert_eq!(db_entry(&before), db_entry(&after), "the database changed");
}

/// N13: a write stopped by a file-size limit said only `File too large (os error 27)`.
#[test]
fn a_write_stopped_by_a_file_size_limit_says_what_to_do() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    // A noisy image: its PNG is far over the 64 KiB limit set below.
    let big = dir.path().join("in/big.png");
    std::fs::create_dir_all(big.parent().unwrap()).unwrap();
    let mut seed = 1u32;
    image::RgbImage::from_fn(400, 400, |_, _| {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        image::Rgb([(seed >> 8) as u8, (seed >> 16) as u8, (seed >> 24) as u8])
    })
    .save(&big)
    .unwrap();
    assert!(std::fs::metadata(&big).unwrap().len() > 200_000);
    let before = common::state(lib.path());
    let mut c = std::process::Command::new("bash");
    c.arg("-c")
        .arg(r#"ulimit -f 64; trap '' XFSZ; exec "$@""#)
        .arg("bash")
        .arg(env!("CARGO_BIN_EXE_endotwin"))
        .args(["--library"])
        .arg(lib.path())
        .args(["import", "images"])
        .arg(dir.path().join("in"))
        .env("ENDOTWIN_BACKEND", "cpu")
        .env("USER", "tester");
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("file-size limit") && r.says("ulimit -f"),
        "{}",
        r.text()
    );
    assert_eq!(common::state(lib.path()), before, "the library changed");
}

/// N32: a REAL-Colon `paris` column was dropped without a word, and lesion rows no box
/// refers to were passed over.
#[test]
fn real_colon_reads_the_paris_class_and_names_what_it_does_not_read() {
    let lib = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    png(&root.join("001-001_frames/001-001_1.png"), 32, 32, 1);
    std::fs::create_dir_all(root.join("001-001_annotations")).unwrap();
    std::fs::write(
        root.join("001-001_annotations/001-001_1.xml"),
        "<annotation><object><name>lesion</name><unique_id>001-001_1</unique_id>\
         <bndbox><xmin>2</xmin><ymin>2</ymin><xmax>20</xmax><ymax>20</ymax></bndbox></object></annotation>",
    )
    .unwrap();
    std::fs::write(
        root.join("video_info.csv"),
        "unique_video_name,fps\n001-001,30\n",
    )
    .unwrap();
    std::fs::write(
        root.join("lesion_info.csv"),
        "unique_object_id,size [mm],histology,paris,surgeon\n\
         001-001_1,4,AD,Is,A\n001-001_9,6,HP,IIa,B\n",
    )
    .unwrap();
    let r = import(lib.path(), "real-colon", root, &[]);
    assert!(r.ok(), "{}", r.text());
    assert!(
        r.says("the column `surgeon` is not read") && !r.says("the column `paris`"),
        "{}",
        r.text()
    );
    assert!(
        r.says("1 lesion(s) with no box in any imported frame, first 001-001_9"),
        "{}",
        r.text()
    );
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let polyps = store.polyps().unwrap();
    assert_eq!(polyps.len(), 1);
    assert_eq!(polyps[0].paris.as_deref(), Some("0-Is"));
}

/// N33: an image file without an extension was passed over uncounted, and a multi-page
/// TIFF was imported as its first page without a word.
#[test]
fn an_extensionless_image_and_a_tiff_stack_are_named_not_passed_over() {
    let lib = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let dir = src.path().join("in");
    png(&dir.join("ok.png"), 24, 24, 3);
    let jpeg = image::RgbImage::from_fn(24, 24, |x, y| image::Rgb([x as u8 * 9, y as u8, 90]));
    jpeg.save_with_format(dir.join("scan0001"), image::ImageFormat::Jpeg)
        .unwrap();
    // Two pages: the same one-page TIFF, its first directory's next-pointer set to a
    // second directory (a copy of the first).
    let mut one = Vec::new();
    image::DynamicImage::ImageRgb8(jpeg.clone())
        .write_to(
            &mut std::io::Cursor::new(&mut one),
            image::ImageFormat::Tiff,
        )
        .unwrap();
    assert_eq!(&one[..4], b"II*\0");
    let ifd = u32::from_le_bytes(one[4..8].try_into().unwrap()) as usize;
    let entries = u16::from_le_bytes(one[ifd..ifd + 2].try_into().unwrap()) as usize;
    let next_at = ifd + 2 + 12 * entries;
    let ifd_len = 2 + 12 * entries + 4;
    let second = one.len() + one.len() % 2;
    let mut two = one.clone();
    two.resize(second, 0);
    two.extend_from_slice(&one[ifd..ifd + ifd_len]);
    let last = two.len() - 4;
    two[last..].copy_from_slice(&0u32.to_le_bytes());
    two[next_at..next_at + 4].copy_from_slice(&(second as u32).to_le_bytes());
    std::fs::write(dir.join("stack.tif"), &two).unwrap();
    assert_eq!(endotwin::data::images::tiff_pages(&two), 2);
    assert_eq!(endotwin::data::images::tiff_pages(&one), 1);
    let r = import(lib.path(), "images", &dir, &[]);
    assert!(r.ok(), "{}", r.text());
    let line = |name: &str| {
        r.stderr
            .lines()
            .chain(r.stdout.lines())
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("{name} not named:\n{}", r.text()))
            .to_string()
    };
    assert!(
        line("scan0001").contains("without an extension") && line("scan0001").contains("JPEG"),
        "{}",
        r.text()
    );
    assert!(
        line("stack.tif").contains("a TIFF of 2 pages"),
        "{}",
        r.text()
    );
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    assert_eq!(store.media_count().unwrap(), 1, "only ok.png is imported");
}

/// N37: the same recording imported under a second file name became a second video of the
/// same frames.
#[test]
fn the_same_recording_under_another_name_is_refused_before_decoding() {
    let Some(ffmpeg) = crate::video::ffmpeg() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let first = crate::video::recording(&ffmpeg, dir.path(), "colon.mp4", false);
    let copy = dir.path().join("colon-copy.mp4");
    std::fs::copy(&first, &copy).unwrap();
    let lib = tempfile::tempdir().unwrap();
    let r = import(lib.path(), "video", &first, &[]);
    assert!(r.ok(), "{}", r.text());
    let before = common::state(lib.path());
    let r = import(lib.path(), "video", &copy, &[]);
    assert!(
        !r.ok() && r.says("already holds this recording as video colon-"),
        "{}",
        r.text()
    );
    assert_eq!(common::state(lib.path()), before);
    // The same file again is still the no-op it was.
    let r = import(lib.path(), "video", &first, &[]);
    assert!(r.ok(), "{}", r.text());
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    assert_eq!(store.videos().unwrap().len(), 1);
}

/// N40: `eval tracklets --held-out` on a library without a usable tracklet generated its
/// validation split (minutes) before finding nothing to score.
#[test]
fn eval_tracklets_refuses_a_held_out_library_without_tracklets_before_generating() {
    let (lib, _src) = library_with_cases();
    let started = std::time::Instant::now();
    let mut c = et(lib.path(), &["eval", "tracklets", "--held-out"]);
    c.arg(lib.path());
    let r = run_within(c, 120);
    assert!(
        !r.ok() && r.says("holds no tracklet of 30 or more frames"),
        "{}",
        r.text()
    );
    assert!(!r.says("generating the validation split"), "{}", r.text());
    eprintln!("refused in {:.1} s", started.elapsed().as_secs_f64());
}

/// N50: an all-black or all-white mask was imported as a polyp's outline by Kvasir-SEG and
/// CVC-ClinicDB (crops made from it are of the wrong pixels).
#[test]
fn all_black_and_all_white_masks_keep_their_views_out_by_name() {
    let src = tempfile::tempdir().unwrap();
    let kv = src.path().join("kv");
    for (n, square) in [(1, (8, 8, 10)), (2, (0, 0, 0)), (3, (0, 0, 32))] {
        png(&kv.join(format!("images/{n}.png")), 32, 32, n as u8);
        mask(&kv.join(format!("masks/{n}.png")), (32, 32), square);
    }
    let lib = tempfile::tempdir().unwrap();
    let r = import(lib.path(), "kvasir-seg", &kv, &[]);
    assert!(r.ok(), "{}", r.text());
    assert!(
        r.says("masks/2.png") && r.says("the mask is all black"),
        "{}",
        r.text()
    );
    assert!(
        r.says("masks/3.png") && r.says("the mask is all white"),
        "{}",
        r.text()
    );
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    assert_eq!(store.polyps().unwrap().len(), 1, "only image 1 is imported");
}

/// N25: `eval real` printed an AUROC of one image like any other figure.
#[test]
fn eval_real_warns_when_a_set_gives_too_few_frames_to_score() {
    let data = tempfile::tempdir().unwrap();
    let kv = data.path().join("kvasir-seg");
    png(&kv.join("images/1.png"), 96, 96, 5);
    mask(&kv.join("masks/1.png"), (96, 96), (8, 8, 20));
    let lib = tempfile::tempdir().unwrap();
    let mut c = et(lib.path(), &["eval", "real", "--data"]);
    c.arg(data.path());
    let r = run_within(c, 300);
    assert!(r.ok(), "{}", r.text());
    assert!(
        r.says("gave only 1 scorable frame(s)") && r.says("not a result to report"),
        "{}",
        r.text()
    );
}

/// N49: an EndoFinder line listing one view twice (or the same image under two names, or
/// both ways of listing views) gave the polyp wrong view and role counts.
#[test]
fn endofinder_lines_that_list_a_view_twice_are_refused_by_line() {
    let d = tempfile::tempdir().unwrap();
    png(&d.path().join("x/1.png"), 16, 16, 6);
    png(&d.path().join("x/2.png"), 16, 16, 7);
    png(&d.path().join("x/3.png"), 16, 16, 8);
    std::fs::copy(d.path().join("x/3.png"), d.path().join("x/3-copy.png")).unwrap();
    std::fs::write(
        d.path().join("ef.jsonl"),
        "{\"id\": \"a\", \"query_paths\": [\"x/1.png\"], \"ref_paths\": [\"x/1.png\", \"x/2.png\"]}\n\
         {\"id\": \"b\", \"img_paths\": [\"x/3.png\", \"x/3-copy.png\"]}\n\
         {\"id\": \"c\", \"img_paths\": [\"x/2.png\"], \"query_paths\": [\"x/1.png\"], \"ref_paths\": [\"x/3.png\"]}\n\
         {\"id\": \"d\", \"query_paths\": [\"x/2.png\"], \"ref_paths\": [\"x/1.png\"]}\n",
    )
    .unwrap();
    let lib = tempfile::tempdir().unwrap();
    let r = import(lib.path(), "endofinder", &d.path().join("ef.jsonl"), &[]);
    assert!(r.ok(), "{}", r.text());
    assert!(r.says("line 1: lists 'x/1.png' twice"), "{}", r.text());
    assert!(
        r.says("line 2: ") && r.says("are the same image"),
        "{}",
        r.text()
    );
    assert!(
        r.says("line 3: gives img_paths and query_paths/ref_paths"),
        "{}",
        r.text()
    );
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let polyps = store.polyps().unwrap();
    assert_eq!(polyps.len(), 1, "only polyp d is imported");
    assert_eq!(store.polyp_views(polyps[0].id).unwrap().len(), 2);
}

/// N71: `eval prompts` left a held-out frame changed on disk out of its figures without a
/// word.
#[test]
fn eval_prompts_refuses_a_held_out_frame_changed_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = endotwin::data::phantom::PhantomConfig {
        seed: 3,
        polyps: 4,
        views_per_polyp: 4,
        videos: 0,
        capsule_images: 0,
        background_frames: 2,
        frames_per_exam: 4,
        image_size: 48,
        ..Default::default()
    };
    common::phantom_library(dir.path(), &cfg);
    let store = Store::open(dir.path(), OpenMode::Existing).unwrap();
    assert!(endotwin::eval::prompts::HeldOutItems::load(&store, 32, 1).is_ok());
    // One frame's file changed on disk (a restore from an older copy, an editor's save).
    let view = store.polyp_views(store.polyps().unwrap()[0].id).unwrap()[0].clone();
    let path = store.media_path(&view);
    png(&path, view.width as u32, view.height as u32, 99);
    let e = endotwin::eval::prompts::HeldOutItems::load(&store, 32, 1)
        .err()
        .expect("refused");
    assert!(
        e.contains("1 held-out frame(s) cannot be read") && e.contains("nothing was evaluated"),
        "{e}"
    );
}
