//! The re-check of hostile round 5 (issue 43): its last five wrong-without-a-word findings,
//! each through the path a user takes, now said by name.

use crate::common;
use crate::hostile::{library_with_cases, mkfifo};
use crate::store_safety::run_within;

use std::path::Path;

/// `endotwin --library LIB ARGS...` on the CPU.
use crate::common::et;

/// A 48 px frame and its mask: a 12 px polyp in the top-left corner (a polyp-free window of
/// its size exists elsewhere).
fn frame_and_mask(frame: &Path, mask: &Path, seed: u8) {
    common::png(frame, 48, 48, seed);
    let mut m = image::GrayImage::new(48, 48);
    for y in 4..16 {
        for x in 4..16 {
            m.put_pixel(x, y, image::Luma([255]));
        }
    }
    std::fs::create_dir_all(mask.parent().unwrap()).unwrap();
    m.save(mask).unwrap();
}

/// N36: capsule frames whose files changed were dropped without a word when a caption model's
/// trust was fitted ("familiarity needs at least 8 embeddings to fit, got 0").
#[test]
fn model_trust_names_the_capsule_frames_whose_files_could_not_be_read() {
    let (lib, _src) = library_with_cases();
    let mut media = Vec::new();
    common::walk(&lib.path().join("media"), &mut media);
    for f in &media {
        let mut bytes = std::fs::read(f).unwrap();
        bytes.rotate_left(7);
        std::fs::write(f, bytes).unwrap();
    }
    let cards = tempfile::tempdir().unwrap();
    crate::hostile::copy_shipped_captions(cards.path());
    let card = cards.path().join("captions.json");
    let before = std::fs::read(&card).unwrap();
    let mut c = et(lib.path(), &["model", "trust"]);
    c.arg(&card).arg("--fit").arg(lib.path());
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("left out 1 capsule frames whose file could not be read"),
        "{}",
        r.text()
    );
    assert_eq!(std::fs::read(&card).unwrap(), before);
}

/// N20 and N29: `eval real` named neither the CVC-ClinicDB frame that is a FIFO (it counted as
/// a missing frame) nor a models folder with no detector (the baseline stood alone).
#[test]
fn eval_real_names_frames_that_are_no_files_and_a_models_folder_without_a_detector() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cvc = data.join("cvc-clinicdb-mini");
    let mut csv = String::from("frame,sequence\n");
    for n in 1..=8u8 {
        frame_and_mask(
            &cvc.join(format!("Original/{n}.png")),
            &cvc.join(format!("Ground Truth/{n}.png")),
            n,
        );
        csv.push_str(&format!("{n},{}\n", 1 + (n - 1) / 4));
    }
    std::fs::write(cvc.join("sequences.csv"), csv).unwrap();
    let fifo = cvc.join("Original/3.png");
    std::fs::remove_file(&fifo).unwrap();
    mkfifo(&fifo);
    let kvasir = data.join("kvasir-seg-mini");
    frame_and_mask(&kvasir.join("images/a.png"), &kvasir.join("masks/a.png"), 9);
    let captions_only = dir.path().join("mcap");
    std::fs::create_dir(&captions_only).unwrap();
    crate::hostile::copy_shipped_captions(&captions_only);
    let json = dir.path().join("real.json");
    let mut c = et(&dir.path().join("unused"), &["eval", "real", "--data"]);
    c.arg(&data)
        .arg("--models")
        .arg(&captions_only)
        .arg("--json")
        .arg(&json);
    let r = run_within(c, 120);
    assert!(r.ok(), "{}", r.text());
    let e: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let notes = e["notes"].to_string();
    assert!(
        notes.contains("Original/3.png: not a regular file"),
        "{notes}"
    );
    assert!(
        notes.contains("mcap holds no detector or prompt model"),
        "{notes}"
    );
}

/// N16: a README row whose range is written with an en dash was passed over; its frames were
/// then "in no sequence of the table".
#[test]
fn a_cvc_readme_row_written_with_a_dash_is_named_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cvc");
    std::fs::create_dir_all(root.join("Original")).unwrap();
    std::fs::create_dir_all(root.join("Ground Truth")).unwrap();
    std::fs::write(
        root.join("README.txt"),
        "CVC-ClinicDB\n| Frames | Sequence |\n| 1 to 4 | 1 |\n| 5 \u{2013} 8 | 2 |\n",
    )
    .unwrap();
    let lib = dir.path().join("lib");
    let mut c = et(&lib, &["import", "cvc-clinicdb"]);
    c.arg(&root);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("line 4") && r.says("a range written with `\u{2013}`"),
        "{}",
        r.text()
    );
    assert!(!lib.join("library.sqlite").exists());
}

/// N28: promote adopted a `models/` folder the user keeps beside the library (an unrelated
/// `prompts.json` in it then broke prompt search).
#[test]
fn promote_does_not_adopt_a_models_folder_of_the_users() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    let mine = lib.join("models");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("prompts.json"), "{\"mine\":1}").unwrap();
    let run_dir = dir.path().join("run");
    std::fs::create_dir(&run_dir).unwrap();
    crate::hostile::copy_shipped_captions(&run_dir);
    let err = endotwin::engine::promote::promote(&lib, &run_dir.join("captions.json"), Some(1))
        .unwrap_err();
    assert!(
        err.to_string().contains("not this library's models folder")
            && err.to_string().contains("nothing was changed"),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(&mine).unwrap().flatten().collect();
    assert_eq!(left.len(), 1, "the user's folder gained files");
}
