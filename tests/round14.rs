//! Hostile round 14 (issue 43): each finding through the path a user takes, refused or said
//! by name, with nothing changed where something was refused.

use crate::common::{self, et, mask_png, png};
use crate::hostile::library_with_cases;
use crate::store_safety::{files, run_within};
use std::path::Path;

/// R3: a mistyped card for `model half` said the OS error twice, once as Rust writes it.
#[test]
fn a_card_not_there_is_said_once_in_words() {
    let (lib, _src) = library_with_cases();
    for args in [
        &["model", "half", "nosuch.json"][..],
        &["eval", "strip", "--detector", "nosuch.json"][..],
    ] {
        let r = run_within(et(lib.path(), args), 60);
        assert!(
            !r.ok() && r.says("no such file or folder") && !r.says("os error"),
            "{args:?}: {}",
            r.text()
        );
    }
}

/// A copy of the shipped caption card with `edit` applied, beside no record (the card is
/// read, and refused, before its record).
fn edited_card(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) -> std::path::PathBuf {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/captions.json");
    let mut card: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(shipped).unwrap()).unwrap();
    edit(&mut card);
    let path = dir.join("c.json");
    std::fs::write(&path, serde_json::to_string(&card).unwrap()).unwrap();
    path
}

/// N3: a card with a number too big for its field was "not JSON text"; a negative
/// familiarity threshold marked every input unfamiliar without a word.
#[test]
fn a_hand_edited_card_is_refused_for_what_is_wrong_with_it() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    png(&dir.path().join("x.png"), 16, 16, 3);
    let image = dir.path().join("x.png");
    let describe = |card: &Path| {
        run_within(
            et(
                lib.path(),
                &[
                    "captions",
                    "describe",
                    "--model",
                    card.to_str().unwrap(),
                    image.to_str().unwrap(),
                ],
            ),
            60,
        )
    };
    let card = edited_card(dir.path(), |c| {
        c["familiarity"]["threshold"] = serde_json::json!(-1.0)
    });
    let r = describe(&card);
    assert!(!r.ok() && r.says("is not a distance"), "{}", r.text());
    // 1e39 does not fit an f32: said as the parser says it, not "not JSON text".
    let text = std::fs::read_to_string(&card)
        .unwrap()
        .replace("\"threshold\":-1.0", "\"threshold\":1e39");
    std::fs::write(&card, text).unwrap();
    let r = describe(&card);
    assert!(
        !r.ok() && !r.says("not JSON text") && r.says("number out of range"),
        "{}",
        r.text()
    );
}

/// N6, N11: a folder of pictures the library already holds, and masks, in the summary.
#[test]
fn the_import_summary_says_where_known_pictures_stay_and_counts_masks() {
    let lib = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    png(&src.path().join("a/visit1/1.png"), 12, 10, 1);
    png(&src.path().join("a/visit1/2.png"), 12, 10, 2);
    let r = common::import(lib.path(), "images", &src.path().join("a"), &[]);
    assert!(r.ok(), "{}", r.text());
    std::fs::create_dir_all(src.path().join("b/visit2")).unwrap();
    std::fs::copy(
        src.path().join("a/visit1/1.png"),
        src.path().join("b/visit2/copy.png"),
    )
    .unwrap();
    png(&src.path().join("b/visit2/3.png"), 12, 10, 3);
    let r = common::import(lib.path(), "images", &src.path().join("b"), &[]);
    assert!(
        r.ok() && r.says("1 of the duplicates stay in the examination they were first imported with (1 in a/visit1)"),
        "{}",
        r.text()
    );
    // Kvasir-SEG: an image and its mask are two media items, as `info` counts them.
    png(&src.path().join("kv/images/k1.png"), 16, 16, 7);
    mask_png(&src.path().join("kv/masks/k1.png"), 16, 16);
    let r = common::import(lib.path(), "kvasir-seg", &src.path().join("kv"), &[]);
    assert!(
        r.ok() && r.says("1 media added (and 1 masks)"),
        "{}",
        r.text()
    );
}

/// N7: `train prompts --resume` onto a name holding a caption model took it as stage 3.
#[test]
fn a_resumed_prompts_run_refuses_a_card_that_is_no_stage_of_it() {
    let (lib, _src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    for ext in ["json", "bpk"] {
        std::fs::copy(
            models.join(format!("captions.{ext}")),
            out.path().join(format!("c.{ext}")),
        )
        .unwrap();
    }
    // As `train captions --out O --name c --epochs 1` leaves it: the card, its record, its
    // checkpoint of one epoch.
    let checkpoints = out.path().join("c.checkpoints");
    std::fs::create_dir_all(checkpoints.join("epoch-001")).unwrap();
    std::fs::write(
        checkpoints.join("state.json"),
        r#"{"epoch": 1, "config": {"epochs": 1}}"#,
    )
    .unwrap();
    let before = files(out.path());
    let r = run_within(
        et(
            lib.path(),
            &[
                "train",
                "prompts",
                "--out",
                out.path().to_str().unwrap(),
                "--name",
                "c",
                "--resume",
                "--epochs",
                "2",
            ],
        ),
        120,
    );
    assert!(
        !r.ok() && r.says("is a caption-model model, not stage 3") && r.says("nothing was trained"),
        "{}",
        r.text()
    );
    assert_eq!(files(out.path()), before);
}

/// N13: $ENDOTWIN_MODELS naming no folder: `info` printed it as fine and `twins` blamed a
/// --models never given.
#[test]
fn a_models_variable_naming_no_folder_is_said_as_the_variable() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let nowhere = dir.path().join("nowhere");
    let mut c = et(lib.path(), &["info"]);
    c.env("ENDOTWIN_MODELS", &nowhere);
    let r = run_within(c, 60);
    assert!(
        r.says("(no such folder: $ENDOTWIN_MODELS names it)"),
        "{}",
        r.text()
    );
    png(&dir.path().join("v.png"), 16, 16, 5);
    let mut c = et(
        lib.path(),
        &["twins", dir.path().join("v.png").to_str().unwrap()],
    );
    c.env("ENDOTWIN_MODELS", &nowhere);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("$ENDOTWIN_MODELS names") && !r.says("--models names"),
        "{}",
        r.text()
    );
}

/// N16: views edited in a JSONL export were ignored as "no changes".
#[test]
fn edited_views_in_a_jsonl_file_are_said_not_read() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("l.jsonl");
    let r = run_within(
        et(
            lib.path(),
            &[
                "labels",
                "export",
                "--format",
                "jsonl",
                "--out",
                file.to_str().unwrap(),
            ],
        ),
        60,
    );
    assert!(r.ok(), "{}", r.text());
    let text = std::fs::read_to_string(&file).unwrap();
    let mut line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    line["views"].as_array_mut().unwrap().pop();
    std::fs::write(&file, format!("{line}\n")).unwrap();
    let before = files(lib.path());
    let r = run_within(
        et(
            lib.path(),
            &["labels", "import", file.to_str().unwrap(), "--apply"],
        ),
        60,
    );
    assert!(
        r.says("\"views\" differs from the library's (1 listed, 2 held)")
            && r.says("never changes a polyp's views"),
        "{}",
        r.text()
    );
    assert_eq!(files(lib.path()), before);
}

/// N16: a COCO track whose boxes name two polyps gave one line per box, each saying "the
/// first is used"; now one line, with how many boxes name each, and the track unchanged.
#[test]
fn a_coco_track_naming_two_polyps_is_said_once() {
    let lib = tempfile::tempdir().unwrap();
    common::video_library(lib.path(), 4);
    let file = lib.path().join("labels.coco.json");
    let arg = file.to_str().unwrap();
    let r = run_within(
        et(
            lib.path(),
            &["labels", "export", "--format", "coco", "--out", arg],
        ),
        120,
    );
    assert!(r.ok(), "{}", r.text());
    let mut coco: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let annotations = coco["annotations"].as_array_mut().unwrap();
    let track = annotations
        .iter()
        .find_map(|a| a["track_id"].as_i64())
        .unwrap();
    let boxes = annotations
        .iter()
        .filter(|a| a["track_id"].as_i64() == Some(track))
        .count();
    assert!(boxes >= 3, "a tracklet of {boxes} boxes");
    let a = annotations
        .iter_mut()
        .find(|a| a["track_id"].as_i64() == Some(track))
        .unwrap();
    a["polyp"] = "ELSEWHERE".into();
    std::fs::write(&file, serde_json::to_string(&coco).unwrap()).unwrap();
    let r = run_within(et(lib.path(), &["labels", "import", arg]), 120);
    let lines = r
        .stderr
        .lines()
        .filter(|l| l.contains(&format!("track {track}:")))
        .count();
    assert_eq!(lines, 1, "{}", r.text());
    assert!(
        r.says("ELSEWHERE on 1") && r.says("its polyp is not changed"),
        "{}",
        r.text()
    );
}

/// N21: `#7`, the form the Training tab and `info` show, is a run number.
#[test]
fn a_run_number_may_be_written_as_info_shows_it() {
    let (lib, _src) = library_with_cases();
    let r = run_within(et(lib.path(), &["model", "promote", "#99"]), 60);
    assert!(
        !r.ok() && r.says("the library has no run #99"),
        "{}",
        r.text()
    );
    let r = run_within(et(lib.path(), &["model", "promote", "x"]), 60);
    assert!(!r.ok() && r.says("is not a run number"), "{}", r.text());
}

/// N23: the same picture under another name counted as a second view of a twin query.
#[test]
fn a_copy_of_a_view_is_one_view() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    png(&dir.path().join("v.png"), 16, 16, 9);
    std::fs::copy(dir.path().join("v.png"), dir.path().join("copy.png")).unwrap();
    let r = run_within(
        et(
            lib.path(),
            &[
                "twins",
                dir.path().join("v.png").to_str().unwrap(),
                dir.path().join("copy.png").to_str().unwrap(),
            ],
        ),
        60,
    );
    assert!(
        !r.ok() && r.says("are one image (the same pixels)"),
        "{}",
        r.text()
    );
}
