//! Hostile round 12 (issue 43): each finding through the path a user takes, refused or said
//! by name, with nothing changed where something was refused.

use crate::common::{self, png};
use crate::hostile::library_with_cases;
use crate::store_safety::{files, run_within};
use std::path::Path;

use crate::common::et;

/// R5: `eval trust --records 2^64-1` was refused only after minutes of the other splits.
#[test]
fn eval_trust_checks_every_split_size_before_any_work() {
    let (lib, _src) = library_with_cases();
    let started = std::time::Instant::now();
    let r = run_within(
        et(
            lib.path(),
            &["eval", "trust", "--records", "18446744073709551615"],
        ),
        120,
    );
    assert!(
        !r.ok() && r.says("a generated phantom takes at most") && !r.says("panicked"),
        "{}",
        r.text()
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    // A video split's size is said in videos, as typed.
    let r = run_within(
        et(lib.path(), &["eval", "tracklets", "--videos", "100000000"]),
        60,
    );
    assert!(
        r.says("100000000 videos: a generated phantom"),
        "{}",
        r.text()
    );
}

/// N1: a program in ffmpeg's place that fails without a word (`/bin/false`) blamed the video
/// ("could not decode it ()").
#[test]
fn a_decoder_that_fails_without_a_word_is_named() {
    let Some(ffmpeg) = crate::video::ffmpeg() else {
        return;
    };
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let video = crate::video::recording(&ffmpeg, dir.path(), "v.mp4", true);
    let fake = crate::video::fake_ffmpeg(&ffmpeg, dir.path(), 1);
    let before = common::state(lib.path());
    let mut c = et(lib.path(), &["import", "video"]);
    c.arg(&video).env("ENDOTWIN_FFMPEG", &fake);
    let r = run_within(c, 120);
    assert!(
        !r.ok() && r.says("without a message") && r.says("is it ffmpeg?"),
        "{}",
        r.text()
    );
    assert_eq!(common::state(lib.path()), before);
}

/// N2: help printed where it cannot be written exited 0 with nothing shown.
#[test]
fn help_that_cannot_be_written_is_said() {
    if !Path::new("/dev/full").exists() {
        return;
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_endotwin"))
        .arg("--help")
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(1) && err.contains("cannot write to standard output"),
        "{err}"
    );
}

/// N3: prompts that differ only by case or spacing split one prompt's share silently.
#[test]
fn prompts_read_alike_are_one_prompt_given_twice() {
    let (lib, src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let prompts = dir.path().join("p.txt");
    std::fs::write(&prompts, "a polyp\nnormal mucosa\nA  Polyp\n").unwrap();
    let mut c = et(lib.path(), &["prompts", "score", "--image"]);
    c.arg(src.path().join("base/A/1.png"))
        .arg("--prompts")
        .arg(&prompts);
    let r = run_within(c, 120);
    assert!(
        !r.ok() && r.says("is given twice (prompts 1 and 3"),
        "{}",
        r.text()
    );
}

/// N5: a colour photograph given as a mask became the polyp's outline.
#[test]
fn a_photograph_given_as_a_mask_is_skipped_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let kv = dir.path().join("kv");
    png(&kv.join("images/a.png"), 32, 24, 3);
    png(&kv.join("masks/a.png"), 32, 24, 3);
    png(&kv.join("images/b.png"), 32, 24, 4);
    common::mask_png(&kv.join("masks/b.png"), 32, 24);
    let lib = tempfile::tempdir().unwrap();
    let r = common::import(lib.path(), "kvasir-seg", &kv, &[]);
    assert!(r.says("not a mask") && r.says("1 polyps"), "{}", r.text());
}

/// N6: one COCO annotation given twice onto a video became two boxes and two tracklets.
#[test]
fn an_annotation_given_twice_onto_a_video_is_imported_once() {
    let Some(ffmpeg) = crate::video::ffmpeg() else {
        return;
    };
    let src = tempfile::tempdir().unwrap();
    let lib = tempfile::tempdir().unwrap();
    let clip = crate::video::recording(&ffmpeg, src.path(), "own.mp4", false);
    assert!(common::import(lib.path(), "video", &clip, &[]).ok());
    let store =
        endotwin::store::Store::open(lib.path(), endotwin::store::OpenMode::Existing).unwrap();
    let code = store.videos().unwrap()[0].code.clone();
    drop(store);
    let sidecar = src.path().join("boxes.json");
    let a = serde_json::json!({"image_id": 0, "bbox": [20, 20, 30, 30], "identity_id": "p1"});
    std::fs::write(
        &sidecar,
        serde_json::json!({
            "images": [{"id": 0, "frame_id": 0}],
            "annotations": [a.clone(), a],
        })
        .to_string(),
    )
    .unwrap();
    let r = common::import(lib.path(), "coco", &sidecar, &["--onto-video", &code]);
    assert!(
        r.says("repeats annotation #1") && r.says("1 boxes"),
        "{}",
        r.text()
    );
}

/// N8: a PostgreSQL URL typed in capitals (or with one slash) made a local folder library.
#[test]
fn a_mistyped_server_url_is_no_local_folder() {
    let dir = tempfile::tempdir().unwrap();
    let (_lib, src) = library_with_cases();
    for url in ["POSTGRES://localhost/x", "postgres:/localhost/x"] {
        let mut c = common::endotwin(Path::new(url));
        c.current_dir(dir.path())
            .args(["import", "images"])
            .arg(src.path().join("base/A"));
        let r = run_within(c, 60);
        assert!(
            !r.ok() && r.says("looks like a PostgreSQL URL but is not one"),
            "{url}: {}",
            r.text()
        );
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// N10: `"polyp_present": true` in an edited COCO export refused the whole file in a parser's
/// words.
#[test]
fn a_frame_label_given_as_true_or_false_is_read() {
    let lib = tempfile::tempdir().unwrap();
    common::video_library(lib.path(), 4);
    let store =
        endotwin::store::Store::open(lib.path(), endotwin::store::OpenMode::Existing).unwrap();
    let mut coco: serde_json::Value =
        serde_json::from_str(&endotwin::labels::coco::export(&store).unwrap()).unwrap();
    coco["images"][0]["polyp_present"] = true.into();
    let (changes, problems) =
        endotwin::labels::diff_file(&store, &serde_json::to_string(&coco).unwrap()).unwrap();
    assert!(
        changes.len() == 1 && changes[0].new.as_deref() == Some("polyp"),
        "{changes:?} {problems:?}"
    );
}

/// N11: `-` and a missing file named as an image or a prompt file gave raw OS errors.
#[test]
fn standard_input_and_missing_files_as_inputs_are_said_in_words() {
    let (lib, src) = library_with_cases();
    let before = files(lib.path());
    let r = run_within(et(lib.path(), &["twins", "-"]), 60);
    assert!(
        !r.ok() && r.says("not standard input") && !r.says("os error"),
        "{}",
        r.text()
    );
    let r = run_within(et(lib.path(), &["twins", "nosuch.png"]), 60);
    assert!(
        !r.ok() && r.says("no such file or folder") && !r.says("os error"),
        "{}",
        r.text()
    );
    let mut c = et(
        lib.path(),
        &["prompts", "score", "--prompts", "-", "--image"],
    );
    c.arg(src.path().join("base/A/1.png"));
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("not standard input") && !r.says("os error"),
        "{}",
        r.text()
    );
    assert_eq!(files(lib.path()), before);
}

/// N16: `--library` given before and after the subcommand: the first was dropped without a
/// word (an import went into the second).
#[test]
fn a_global_option_given_twice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (la, lb) = (dir.path().join("la"), dir.path().join("lb"));
    let (_lib, src) = library_with_cases();
    let mut c = common::endotwin(&la);
    c.args(["import", "images"])
        .arg(src.path().join("base/A"))
        .arg("--library")
        .arg(&lb);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("--library is given 2 times with different values"),
        "{}",
        r.text()
    );
    assert!(!la.exists() && !lb.exists());
}

/// N17: a size cleared by `labels import --apply` came back in the twins table from the
/// pathology row's copy.
#[test]
fn a_cleared_size_is_cleared_wherever_it_is_read() {
    let (lib, _src) = library_with_cases();
    let store =
        endotwin::store::Store::open(lib.path(), endotwin::store::OpenMode::Existing).unwrap();
    let polyp = store.polyps().unwrap()[0].clone();
    drop(store);
    let dir = tempfile::tempdir().unwrap();
    for (n, size) in [(1, "7"), (2, "")] {
        let file = dir.path().join(format!("s{n}.csv"));
        std::fs::write(&file, format!("polyp,size_mm\n{},{size}\n", polyp.code)).unwrap();
        let r = run_within(
            et(
                lib.path(),
                &["labels", "import", file.to_str().unwrap(), "--apply"],
            ),
            60,
        );
        assert!(r.ok(), "{}", r.text());
        let store =
            endotwin::store::Store::open(lib.path(), endotwin::store::OpenMode::Existing).unwrap();
        let read = store.polyp(polyp.id).unwrap().unwrap().size_mm;
        let want = size.parse::<f64>().ok();
        assert_eq!(read, want, "size after importing '{size}'");
    }
}

/// N18: a library whose models/ is a link to another library's: promote and demote changed
/// the other library's active models.
#[test]
fn a_models_folder_that_is_a_link_is_never_promoted_into() {
    let (lib, _src) = library_with_cases();
    let (other, _src2) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let run = crate::round7::caption_run(other.path(), dir.path(), "test-other");
    let r = run_within(
        et(other.path(), &["model", "promote", &run.to_string()]),
        120,
    );
    assert!(r.ok(), "{}", r.text());
    std::os::unix::fs::symlink(other.path().join("models"), lib.path().join("models")).unwrap();
    let before = files(other.path());
    let run = crate::round7::caption_run(lib.path(), dir.path(), "test-mine");
    for args in [
        vec!["model".to_string(), "promote".into(), run.to_string()],
        vec!["model".into(), "demote".into(), "captions".into()],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = run_within(et(lib.path(), &args), 120);
        assert!(
            !r.ok() && r.says("is a link to") && r.says("nothing was changed"),
            "{args:?}: {}",
            r.text()
        );
    }
    assert_eq!(files(other.path()), before);
}

/// N19: the same images on two EndoFinder lines with different ground truth became two
/// polyps of one pair of images.
#[test]
fn endofinder_lines_of_the_same_images_with_two_truths_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    png(&dir.path().join("img/e1.png"), 24, 16, 1);
    png(&dir.path().join("img/e2.png"), 24, 16, 2);
    png(&dir.path().join("img/e3.png"), 24, 16, 3);
    png(&dir.path().join("img/e4.png"), 24, 16, 4);
    let list = dir.path().join("list.jsonl");
    std::fs::write(
        &list,
        [
            r#"{"img_paths":["img/e1.png","img/e2.png"],"ground_truth":"adenoma"}"#,
            r#"{"img_paths":["img/e3.png","img/e4.png"],"ground_truth":"adenoma"}"#,
            r#"{"img_paths":["img/e2.png","img/e1.png"],"ground_truth":"hyperplastic"}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    let lib = tempfile::tempdir().unwrap();
    let r = common::import(lib.path(), "endofinder", &list, &[]);
    assert!(
        r.says("lines 1, 3 list the same images with different ground truth") && r.says("1 polyps"),
        "{}",
        r.text()
    );
}

/// N20: `eval tracklets --threshold NaN` was scored as an exact count; a --threshold that the
/// validation split replaces was dropped without a word.
#[test]
fn an_eval_threshold_that_means_nothing_or_is_not_used_is_refused() {
    let (lib, _src) = library_with_cases();
    for args in [
        &[
            "eval",
            "tracklets",
            "--validation-videos",
            "0",
            "--threshold",
            "NaN",
        ][..],
        &["eval", "tracklets", "--threshold", "0.9"],
    ] {
        let r = run_within(et(lib.path(), args), 60);
        assert!(
            !r.ok() && r.says("--threshold") && r.says("nothing was evaluated"),
            "{args:?}: {}",
            r.text()
        );
    }
}

/// N21: a `model demote` killed between its renames left models/ with a card and no record
/// (no caption model, and no command brought it back). The renames are journaled: the next
/// command that reads the library's models finishes them.
#[test]
fn a_demote_killed_between_its_renames_is_finished_by_the_next_command() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let run = crate::round7::caption_run(lib.path(), dir.path(), "test-n21");
    let r = run_within(et(lib.path(), &["model", "promote", &run.to_string()]), 120);
    assert!(r.ok(), "{}", r.text());
    let models = lib.path().join("models");
    let version = |card: &Path| endotwin::model::weights::read_card(card).unwrap().version;
    let shipped = version(&models.join("previous/captions.json"));
    // What `model demote captions` does, killed after its first two renames (the active
    // model's record and card into demoted/) with the journal's count one behind.
    std::fs::create_dir_all(models.join("demoted")).unwrap();
    let pair = |from: &str, to: &str| {
        let (f, t) = (models.join(from), models.join(to));
        [
            (f.with_extension("bpk"), t.with_extension("bpk")),
            (f.clone(), t.clone()),
        ]
    };
    let mut moves = pair("captions.json", "demoted/captions.json").to_vec();
    moves.extend(pair("previous/captions.json", "captions.json"));
    for (from, to) in &moves[..2] {
        std::fs::rename(from, to).unwrap();
    }
    std::fs::write(
        models.join(endotwin::engine::model_moves::JOURNAL),
        serde_json::json!({"moves": moves, "done": 1}).to_string(),
    )
    .unwrap();
    let r = run_within(et(lib.path(), &["info"]), 60);
    assert!(r.ok(), "{}", r.text());
    assert_eq!(version(&models.join("captions.json")), shipped);
    assert!(models.join("captions.bpk").is_file());
    assert_eq!(version(&models.join("demoted/captions.json")), "test-n21");
    assert!(!models.join(endotwin::engine::model_moves::JOURNAL).exists());
    let r = run_within(et(lib.path(), &["library", "check"]), 60);
    assert!(r.ok(), "{}", r.text());
}
