//! Hostile round 8 (issue 43): each finding through the command line, refused or said by
//! name, with nothing changed where something was refused.

use crate::common::{self, import, png};
use crate::hostile::{damage_an_index, library_with_cases};
use crate::store_safety::{files, run_within};

use std::path::Path;

use crate::common::et;

/// R7: read commands answered from a damaged database without a word, or with a raw SQL
/// type error.
#[test]
fn a_read_command_on_a_damaged_database_says_so_first() {
    let (lib, _src) = library_with_cases();
    damage_an_index(&lib.path().join("library.sqlite"));
    let before = files(lib.path());
    let out = tempfile::tempdir().unwrap();
    let mut c = et(lib.path(), &["labels", "export", "--out"]);
    c.arg(out.path().join("l.csv"));
    let r = run_within(c, 60);
    assert!(
        r.stderr.contains("the library database is damaged") && r.says("library check"),
        "{}",
        r.text()
    );
    assert_eq!(files(lib.path()), before);
}

/// N1: `library check` said "whole" of a library every other command refuses (its database
/// with a second name).
#[test]
fn library_check_refuses_a_database_with_a_second_name() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    std::fs::hard_link(
        lib.path().join("library.sqlite"),
        dir.path().join("library.sqlite"),
    )
    .unwrap();
    let r = run_within(et(lib.path(), &["library", "check"]), 60);
    assert!(
        !r.ok() && r.says("hard links") && !r.says("is whole"),
        "{}",
        r.text()
    );
}

/// N4: `eval trust --json X --diagrams X` ran, drew into a folder X, then refused the JSON.
#[test]
fn eval_trust_refuses_one_name_for_its_json_and_its_diagrams_before_running() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x.json");
    let mut c = et(lib.path(), &["eval", "trust", "--json"]);
    c.arg(&x).arg("--diagrams").arg(&x);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("--json and --diagrams both name"),
        "{}",
        r.text()
    );
    assert!(!x.exists());
}

/// N7 and N33: `twins --box X,Y,W,H IMAGE` took the image for a number; more views than a
/// query reads were decoded and held without a bound.
#[test]
fn twins_takes_its_box_before_the_image_and_refuses_too_many_views() {
    let (lib, src) = library_with_cases();
    let image = src.path().join("base/A/1.png");
    let mut c = et(lib.path(), &["twins", "--box", "100,100,20,20"]);
    c.arg(&image);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("is not inside") && !r.says("invalid float"),
        "{}",
        r.text()
    );
    let mut c = et(lib.path(), &["twins"]);
    for _ in 0..17 {
        c.arg(&image);
    }
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("17 views given") && r.says("at most 16"),
        "{}",
        r.text()
    );
}

/// N8: Targa and Netpbm images, a text file and a `.jpg.bak` were left out of `import
/// images` without a word.
#[test]
fn import_images_names_every_file_it_leaves_out() {
    let src = tempfile::tempdir().unwrap();
    let dir = src.path().join("in");
    png(&dir.join("ok.png"), 16, 16, 2);
    for name in ["a.tga", "b.ppm", "notes.txt", "x.jpg.bak"] {
        std::fs::write(dir.join(name), b"not read").unwrap();
    }
    let lib = tempfile::tempdir().unwrap();
    let r = import(lib.path(), "images", &dir, &[]);
    assert!(r.ok(), "{}", r.text());
    assert!(
        r.says("a.tga") && r.says("a Targa image") && r.says("b.ppm") && r.says("Netpbm"),
        "{}",
        r.text()
    );
    assert!(
        r.says("2 file(s) left out") && r.says("notes.txt") && r.says("x.jpg.bak"),
        "{}",
        r.text()
    );
}

/// N10: a library whose version number was set to 0 was called "an empty file or database".
#[test]
fn a_library_whose_version_was_set_to_zero_is_not_called_empty() {
    let (lib, _src) = library_with_cases();
    let conn = rusqlite::Connection::open(lib.path().join("library.sqlite")).unwrap();
    conn.execute_batch("PRAGMA user_version = 0").unwrap();
    drop(conn);
    let r = run_within(et(lib.path(), &["info"]), 60);
    assert!(
        !r.ok() && r.says("says schema version 0 but holds") && !r.says("an empty file"),
        "{}",
        r.text()
    );
}

/// N16: a new run of one --out/--name threw an interrupted run's checkpoints away.
#[test]
fn a_new_run_over_an_unfinished_runs_checkpoints_is_refused() {
    let (lib, _src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    let checkpoints = out.path().join("kt.checkpoints");
    std::fs::create_dir_all(checkpoints.join("epoch-003")).unwrap();
    std::fs::write(
        checkpoints.join("state.json"),
        br#"{"epoch": 3, "config": {"epochs": 10}}"#,
    )
    .unwrap();
    let before = files(out.path());
    let out_s = out.path().to_str().unwrap();
    let r = run_within(
        et(
            lib.path(),
            &[
                "train", "captions", "--out", out_s, "--name", "kt", "--epochs", "10",
            ],
        ),
        60,
    );
    assert!(
        !r.ok()
            && r.says("holds the checkpoints of an unfinished run")
            && r.says("--resume continues it"),
        "{}",
        r.text()
    );
    assert_eq!(files(out.path()), before);
}

/// N19: a label put beside "polyp" in a JSONL line instead of under "labels" was dropped:
/// "no changes".
#[test]
fn a_jsonl_label_outside_labels_is_named_not_dropped() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.jsonl");
    let code = endotwin::store::Store::open(lib.path(), endotwin::store::OpenMode::Existing)
        .unwrap()
        .polyps()
        .unwrap()[0]
        .code
        .clone();
    std::fs::write(
        &file,
        format!("{{\"polyp\": \"{code}\", \"histology\": \"hyperplastic\"}}\n"),
    )
    .unwrap();
    let mut c = et(lib.path(), &["labels", "import"]);
    c.arg(&file);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("the key `histology` is not read") && r.says("goes under \"labels\""),
        "{}",
        r.text()
    );
}

/// N23, N26, N27: a contact sheet under a .jpg name held PNG bytes; `--force` wrote an export
/// over a model card, and over the lock promote and demote hold (which demote then removed).
#[test]
fn outputs_are_never_written_over_models_or_the_models_lock() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let card = crate::hostile::copy_shipped_captions(&dir.path().join("m"));
    let before = files(dir.path());
    let mut c = et(lib.path(), &["--force", "labels", "export", "--out"]);
    c.arg(&card);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("a model (its card and record)"),
        "{}",
        r.text()
    );
    let mut c = et(lib.path(), &["--force", "labels", "export", "--out"]);
    c.arg(card.with_extension("bpk"));
    let r = run_within(c, 60);
    assert!(!r.ok() && r.says("a model"), "{}", r.text());
    assert_eq!(files(dir.path()), before);
    let mut c = et(lib.path(), &["--force", "labels", "export", "--out"]);
    c.arg(lib.path().join(".models.lock"));
    let r = run_within(c, 60);
    assert!(!r.ok() && r.says("library's own file"), "{}", r.text());
    let mut c = et(lib.path(), &["contact-sheet", "--out"]);
    c.arg(dir.path().join("cs.jpg"));
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("a contact sheet is a PNG"),
        "{}",
        r.text()
    );
    assert!(!dir.path().join("cs.jpg").exists());
}

/// N32: `--library` naming an empty file of the user's (`photo.png`) made it a database.
#[test]
fn a_library_is_not_made_in_a_file_named_as_another_kind() {
    let src = tempfile::tempdir().unwrap();
    png(&src.path().join("in/a.png"), 16, 16, 3);
    let dir = tempfile::tempdir().unwrap();
    let photo = dir.path().join("photo.png");
    std::fs::write(&photo, b"").unwrap();
    let r = import(&photo, "images", &src.path().join("in"), &[]);
    assert!(
        !r.ok() && r.says("named as another kind of file"),
        "{}",
        r.text()
    );
    assert_eq!(std::fs::metadata(&photo).unwrap().len(), 0);
    assert!(!dir.path().join("media").exists());
    // A new folder with a dot in its name is a folder.
    let folder = dir.path().join("cases.v2");
    let r = import(&folder, "images", &src.path().join("in"), &[]);
    assert!(r.ok(), "{}", r.text());
    assert!(folder.join("library.sqlite").is_file());
}

/// N36: `eval strip` over videos without a frame printed a table of NaN, exit 0.
#[test]
fn eval_strip_refuses_videos_without_frames() {
    let dir = tempfile::tempdir().unwrap();
    let held = dir.path().join("dz");
    let mut c = et(&held, &["demo", "--out"]);
    c.arg(&held).args([
        "--polyps",
        "4",
        "--videos",
        "2",
        "--frames-per-video",
        "0",
        "--capsule",
        "0",
        "--background",
        "0",
    ]);
    let r = run_within(c, 120);
    assert!(r.ok(), "{}", r.text());
    let mut c = et(&held, &["eval", "strip", "--held-out"]);
    c.arg(&held);
    let r = run_within(c, 120);
    assert!(
        !r.ok() && r.says("0 frame(s)") && !r.says("NaN"),
        "{}",
        r.text()
    );
}

/// N38: EndoTwin's own COCO labels export given to `import coco` was called malformed.
#[test]
fn import_coco_points_a_labels_export_to_labels_import() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("l.coco.json");
    let mut c = et(
        lib.path(),
        &["labels", "export", "--format", "coco", "--out"],
    );
    c.arg(&export);
    let r = run_within(c, 60);
    assert!(r.ok(), "{}", r.text());
    let before = files(lib.path());
    let r = import(lib.path(), "coco", &export, &[]);
    assert!(
        !r.ok() && r.says("an EndoTwin labels export") && r.says("labels import"),
        "{}",
        r.text()
    );
    assert_eq!(files(lib.path()), before);
}

/// N11: the same recording remuxed into another container became a second video of the
/// same frames.
#[test]
fn a_remuxed_recording_is_the_same_video() {
    let Some(ffmpeg) = crate::video::ffmpeg() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mp4 = crate::video::recording(&ffmpeg, dir.path(), "colon.mp4", false);
    let mkv = dir.path().join("colon.mkv");
    let out = std::process::Command::new(&ffmpeg)
        .args(["-v", "error", "-i"])
        .arg(&mp4)
        .args(["-c", "copy", "-map_metadata", "-1"])
        .arg(&mkv)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let lib = tempfile::tempdir().unwrap();
    let r = import(lib.path(), "video", &mp4, &[]);
    assert!(r.ok(), "{}", r.text());
    let before = common::state(lib.path());
    let r = import(lib.path(), "video", &mkv, &[]);
    assert!(
        !r.ok() && r.says("every frame of it is a frame of video colon-"),
        "{}",
        r.text()
    );
    assert_eq!(common::state(lib.path()), before);
}

/// N13: a binary run away from any `sample_db/` and `models/` read the source tree's without a
/// word, and an empty ENDOTWIN_MODELS fell back to them (an empty ENDOTWIN_LIBRARY is refused).
#[test]
fn the_source_trees_folders_are_read_only_as_a_said_last_resort() {
    let cwd = tempfile::tempdir().unwrap();
    let bare = |models: Option<&str>| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_endotwin"));
        c.current_dir(cwd.path())
            .env("ENDOTWIN_BACKEND", "cpu")
            .env_remove("ENDOTWIN_LIBRARY")
            .env_remove("ENDOTWIN_MODELS")
            .arg("info");
        if let Some(m) = models {
            c.env("ENDOTWIN_MODELS", m);
        }
        run_within(c, 120)
    };
    let r = bare(None);
    let tree = endotwin::source_tree_sample_db();
    assert!(
        r.ok()
            && r.stderr.contains("reading the source tree's")
            && r.stderr.contains(&tree.display().to_string())
            && r.stderr.contains("the models are the source tree's"),
        "{}",
        r.text()
    );
    let r = bare(Some(""));
    assert!(
        !r.ok() && r.says("ENDOTWIN_MODELS is set but empty"),
        "{}",
        r.text()
    );
    // Pointed at a library, nothing is said about the library.
    let (lib, _src) = library_with_cases();
    let r = run_within(et(lib.path(), &["info"]), 120);
    assert!(
        r.ok() && !r.stderr.contains("reading the source tree's"),
        "{}",
        r.text()
    );
}

/// N34: an image inside the size limits aborted ("memory allocation of 1920000000 bytes
/// failed") where memory was short: reducing it made a filtered RGBA float copy of it.
#[test]
fn a_huge_grey_image_is_reduced_within_a_tight_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("huge.png");
    image::GrayImage::from_pixel(20_000, 20_000, image::Luma([90]))
        .save(&img)
        .unwrap();
    // 400 megapixels: 400 MB decoded, where its RGB copy alone would take 1.2 GB.
    let r = score_under_memory_limit(&img, 1_400_000);
    assert!(r.ok() && r.says("a polyp"), "{}", r.text());
}

/// `prompts score` of `image` (two prompts) with the address space limited to `kib` KiB.
pub(crate) fn score_under_memory_limit(image: &Path, kib: u64) -> common::Ran {
    let dir = tempfile::tempdir().unwrap();
    let prompts = dir.path().join("p.txt");
    std::fs::write(&prompts, "a polyp\nnormal mucosa\n").unwrap();
    let mut c = std::process::Command::new("sh");
    c.arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_endotwin"))
        .env("ENDOTWIN_BACKEND", "cpu")
        .args(["prompts", "score", "--image"])
        .arg(image)
        .arg("--prompts")
        .arg(&prompts);
    run_within(c, 300)
}
