//! Hostile round 4 (issue 43): each finding through the command line. A data case is refused
//! by name with nothing changed on disk; a panic case exits quietly or with a message; a
//! runaway option is refused with its allowed range; a silently wrong one is refused.

use crate::common;
use crate::hostile::library_with_cases;
use crate::store_safety::files;

use common::run;
use std::path::Path;
use std::process::Command;

/// `endotwin --library LIB ARGS...` on the CPU.
use crate::common::et;

/// Every file below `dir` with its bytes (empty when there is no such folder).
fn tree(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut all = Vec::new();
    common::walk(dir, &mut all);
    all.sort();
    all.into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

// ---------------------------------------------------------------- D1, W1, W2: training

#[test]
fn d1_train_refuses_to_write_over_an_existing_model_without_force() {
    let (lib, _src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    let out_s = out.path().to_str().unwrap();
    // A model already there under the default name (as in the shipped models/).
    std::fs::write(out.path().join("twin-image.json"), b"{\"keep\": \"me\"}").unwrap();
    std::fs::write(out.path().join("twin-image.bpk"), b"weights").unwrap();
    let before_lib = common::state(lib.path());
    let before_out = tree(out.path());
    let r = run(et(
        lib.path(),
        &["train", "image-encoder", "--out", out_s, "--epochs", "1"],
    ));
    assert!(!r.ok(), "{}", r.text());
    assert!(
        r.says("twin-image.json") && r.says("exists") && r.says("--force"),
        "{}",
        r.text()
    );
    assert!(r.says("nothing was trained"), "{}", r.text());
    assert_eq!(tree(out.path()), before_out, "the model files were touched");
    assert_eq!(common::state(lib.path()), before_lib, "a run was recorded");
    // The record alone counts too.
    std::fs::remove_file(out.path().join("twin-image.json")).unwrap();
    let r = run(et(
        lib.path(),
        &["train", "image-encoder", "--out", out_s, "--epochs", "1"],
    ));
    assert!(!r.ok() && r.says("twin-image.bpk"), "{}", r.text());
    // Another recipe's default name over the shipped-style folder: the same refusal.
    std::fs::write(out.path().join("captions.json"), b"{}").unwrap();
    let r = run(et(
        lib.path(),
        &["train", "captions", "--out", out_s, "--epochs", "1"],
    ));
    assert!(
        !r.ok() && r.says("captions.json") && r.says("--force"),
        "{}",
        r.text()
    );
    assert_eq!(common::state(lib.path()), before_lib);
}

#[test]
fn d1_train_with_force_gets_past_the_model_check() {
    // An empty library: --force passes the check, and the run stops at the data instead.
    let lib = tempfile::tempdir().unwrap();
    drop(
        endotwin::store::Store::open(lib.path(), endotwin::store::OpenMode::CreateIfMissing)
            .unwrap(),
    );
    let out = tempfile::tempdir().unwrap();
    std::fs::write(out.path().join("twin-image.json"), b"{}").unwrap();
    let out_s = out.path().to_str().unwrap();
    for args in [
        vec!["train", "image-encoder", "--force", "--out", out_s],
        vec!["--force", "train", "image-encoder", "--out", out_s],
    ] {
        let r = run(et(lib.path(), &args));
        assert!(!r.ok(), "{}", r.text());
        assert!(
            !r.says("exists"),
            "--force did not get past the check: {}",
            r.text()
        );
    }
    assert_eq!(
        std::fs::read(out.path().join("twin-image.json")).unwrap(),
        b"{}"
    );
}

#[test]
fn w1_w2_train_refuses_no_epoch_a_zero_batch_and_a_bad_name_before_it_starts() {
    let (lib, _src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    let out_s = out.path().to_str().unwrap();
    let before = common::state(lib.path());
    for (args, names) in [
        (vec!["--epochs", "0"], "--epochs 0"),
        (vec!["--batch", "0"], "--batch 0"),
        (vec!["--name", "../../evil"], "../../evil"),
        (vec!["--name", ""], "--name"),
    ] {
        let mut all = vec!["train", "image-encoder", "--out", out_s, "--size", "32"];
        all.extend(args);
        let r = run(et(lib.path(), &all));
        assert!(!r.ok(), "{all:?}: {}", r.text());
        assert!(r.says(names), "{all:?}: {}", r.text());
        assert!(r.says("nothing was trained"), "{all:?}: {}", r.text());
        assert_eq!(common::state(lib.path()), before, "{all:?} recorded a run");
    }
    assert!(tree(out.path()).is_empty(), "{:?}", tree(out.path()));
}

#[test]
fn w2_a_run_whose_model_cannot_be_saved_is_marked_failed() {
    let (lib, _src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    // The record's temporary file is a folder: the save fails after the epoch.
    std::fs::create_dir_all(out.path().join("m.partial/x")).unwrap();
    let r = run(et(
        lib.path(),
        &[
            "train",
            "image-encoder",
            "--out",
            out.path().to_str().unwrap(),
            "--name",
            "m",
            "--epochs",
            "1",
            "--batch",
            "2",
            "--size",
            "32",
        ],
    ));
    assert!(!r.ok(), "{}", r.text());
    let store =
        endotwin::store::Store::open(lib.path(), endotwin::store::OpenMode::Existing).unwrap();
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].2, "failed", "{runs:?}\n{}", r.text());
}

// ---------------------------------------------------------------- D2: nested libraries

#[test]
fn d2_no_library_is_made_inside_another_librarys_media() {
    let (lib, src) = library_with_cases();
    let before = files(lib.path());
    let media = lib.path().join("media");
    let sub = std::fs::read_dir(&media)
        .unwrap()
        .flatten()
        .find(|e| e.path().is_dir())
        .unwrap()
        .path();
    let imgs = src.path().join("imgs/exam");
    common::png(&imgs.join("a.png"), 16, 16, 77);
    for target in [media.clone(), sub.clone(), media.join("new/deeper")] {
        let r = common::import(&target, "images", &src.path().join("imgs"), &[]);
        assert!(!r.ok(), "{}: {}", target.display(), r.text());
        assert!(
            r.says("inside the media/ or models/ folder"),
            "{}",
            r.text()
        );
        let out = target.to_str().unwrap().to_string();
        let r = run(et(
            lib.path(),
            &[
                "demo",
                "--out",
                &out,
                "--polyps",
                "1",
                "--videos",
                "0",
                "--capsule",
                "0",
            ],
        ));
        assert!(!r.ok(), "{}: {}", target.display(), r.text());
        assert!(
            r.says("inside the media/ or models/ folder"),
            "{}",
            r.text()
        );
    }
    assert_eq!(files(lib.path()), before, "the library's folder changed");
}

// ---------------------------------------------------------------- D7: a failed demo

#[test]
fn d7_a_failed_demo_leaves_no_library_and_a_rerun_works() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("d");
    let out_s = out.to_str().unwrap();
    let small = [
        "--polyps",
        "2",
        "--videos",
        "0",
        "--capsule",
        "0",
        "--size",
        "64",
    ];
    // --scale with models that are not there: refused before a frame is drawn.
    let mut args = vec!["demo", "--out", out_s, "--scale", "4", "--models"];
    let missing = dir.path().join("no-models");
    args.push(missing.to_str().unwrap());
    args.extend(small);
    let r = run(et(dir.path(), &args));
    assert!(!r.ok(), "{}", r.text());
    assert!(!out.exists(), "a failed demo left {}", out.display());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "junk left"
    );
    // An interrupted run's half-made library beside --out: removed by the next run, and
    // --out itself was never touched.
    let partial = dir.path().join(".d.demo-partial");
    std::fs::create_dir_all(partial.join("media/00")).unwrap();
    std::fs::write(partial.join("library.sqlite"), b"half").unwrap();
    let mut args = vec!["demo", "--out", out_s];
    args.extend(small);
    let r = run(et(dir.path(), &args));
    assert!(r.ok(), "{}", r.text());
    assert!(r.says("interrupted"), "{}", r.text());
    assert!(!partial.exists());
    let check = run(et(&out, &["library", "check"]));
    assert!(check.ok(), "{}", check.text());
    // Into an existing folder with other files: they stay, the library joins them.
    let kept = dir.path().join("kept");
    std::fs::create_dir_all(&kept).unwrap();
    std::fs::write(kept.join("notes.txt"), b"mine").unwrap();
    let kept_s = kept.to_str().unwrap();
    let mut args = vec!["demo", "--out", kept_s];
    args.extend(small);
    let r = run(et(dir.path(), &args));
    assert!(r.ok(), "{}", r.text());
    assert_eq!(std::fs::read(kept.join("notes.txt")).unwrap(), b"mine");
    assert!(run(et(&kept, &["library", "check"])).ok());
    assert!(!dir.path().join(".kept.demo-partial").exists());
}

// ---------------------------------------------------------------- D8: the default library

#[test]
fn d8_without_library_a_write_never_falls_back_to_the_source_trees_sample_db() {
    let cwd = tempfile::tempdir().unwrap();
    let imgs = cwd.path().join("scans/exam");
    common::png(&imgs.join("a.png"), 16, 16, 9);
    let sample = endotwin::source_tree_sample_db();
    let before = files(&sample);
    let bare = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_endotwin"));
        c.current_dir(cwd.path())
            .env("ENDOTWIN_BACKEND", "cpu")
            .env_remove("ENDOTWIN_LIBRARY")
            .env_remove("ENDOTWIN_MODELS")
            .args(args);
        run(c)
    };
    for args in [
        vec!["import", "images", "scans"],
        vec!["labels", "import", "x.csv", "--apply"],
        vec!["index"],
        vec!["model", "demote", "twin-image"],
        vec!["train", "image-encoder", "--epochs", "1"],
        vec!["library", "prune", "--models", "models", "--apply"],
    ] {
        let r = bare(&args);
        assert!(!r.ok(), "{args:?}: {}", r.text());
        assert!(
            r.says("--library") && r.says("nothing was changed"),
            "{args:?}: {}",
            r.text()
        );
    }
    assert_eq!(
        files(&sample),
        before,
        "the source tree's sample_db changed"
    );
    // Reading it stays possible.
    let r = bare(&["train", "--list"]);
    assert!(r.ok(), "{}", r.text());
    // A recipe whose models go to the models folder by default does not write into the
    // source tree's models/ either.
    let r = bare(&["--library", "lib", "train", "captions", "--epochs", "1"]);
    assert!(!r.ok() && r.says("--out"), "{}", r.text());
    // Nor do recorded evaluation figures go into the source tree's cards.
    let models = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let cards = files(&models);
    let r = bare(&["eval", "twins", "--polyps", "12", "--record"]);
    assert!(!r.ok() && r.says("--models"), "{}", r.text());
    assert_eq!(files(&models), cards, "the source tree's models/ changed");
}

// ---------------------------------------------------------------- P1: a closed pipe

#[test]
fn p1_a_reader_that_stops_early_gets_no_panic() {
    let (lib, _src) = library_with_cases();
    // `true` reads nothing and exits at once: every print after it meets a closed pipe.
    for args in ["train --list", "labels history", "library check"] {
        let line = format!(
            "'{}' --library '{}' {args} | true; echo \"rc=${{PIPESTATUS[0]}}\" >&2",
            env!("CARGO_BIN_EXE_endotwin"),
            lib.path().display()
        );
        let mut c = Command::new("bash");
        c.args(["-c", &line]).env("ENDOTWIN_BACKEND", "cpu");
        let r = run(c);
        assert!(!r.stderr.contains("Broken pipe"), "{args}: {}", r.text());
        assert!(!r.stderr.contains("rc=101"), "{args}: {}", r.text());
    }
    // Enough lines to fill the pipe while the reader has long gone.
    let line = format!(
        "for i in $(seq 1 200); do '{}' train --list; done | head -c 1 >/dev/null; echo rc=$? >&2",
        env!("CARGO_BIN_EXE_endotwin")
    );
    let r = run({
        let mut c = Command::new("bash");
        c.args(["-c", &line]);
        c
    });
    assert!(!r.stderr.contains("panicked"), "{}", r.text());
}

// ---------------------------------------------------------------- P2, P3, P4, H2, H3, W7, W17

/// Refused with the option named, its range shown, nothing written and no panic.
fn refused(lib: &Path, args: &[&str], names: &str) {
    let before = files(lib);
    let r = crate::store_safety::run_within(et(lib, args), 20);
    assert!(!r.ok(), "{args:?}: {}", r.text());
    assert!(
        r.says(names),
        "{args:?} does not name {names}: {}",
        r.text()
    );
    assert_eq!(files(lib), before, "{args:?} changed the library");
}

#[test]
fn p2_h2_contact_sheet_sizes_are_bounded() {
    let (lib, _src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    let sheet = out.path().join("s.png");
    let sheet = sheet.to_str().unwrap();
    for (opt, value) in [
        ("--columns", "0"),
        ("--columns", "100000"),
        ("--tile", "0"),
        ("--tile", "3"),
        ("--tile", "100000"),
    ] {
        refused(
            lib.path(),
            &["contact-sheet", "--out", sheet, opt, value],
            opt,
        );
    }
    assert!(!Path::new(sheet).exists());
    let r = run(et(
        lib.path(),
        &[
            "contact-sheet",
            "--out",
            sheet,
            "--columns",
            "1",
            "--tile",
            "8",
        ],
    ));
    assert!(r.ok(), "{}", r.text());
}

#[test]
fn p3_w7_eval_phantom_and_twins_refuse_sizes_that_measure_nothing() {
    let lib = tempfile::tempdir().unwrap();
    let tmp_before: Vec<_> = heldout_folders();
    for (args, names) in [
        (vec!["eval", "phantom", "--size", "0"], "--size"),
        (vec!["eval", "phantom", "--polyps", "0"], "--polyps"),
        (vec!["eval", "phantom", "--polyps", "1"], "--polyps"),
        (vec!["eval", "phantom", "--views", "0"], "--views"),
        (vec!["eval", "twins", "--polyps", "0"], "--polyps"),
        (
            vec!["eval", "real", "--data", "x", "--draws", "0"],
            "--draws",
        ),
    ] {
        refused(lib.path(), &args, names);
    }
    // No new folder (another evaluation may sweep a stale one away meanwhile).
    let after = heldout_folders();
    assert!(
        after.iter().all(|n| tmp_before.contains(n)),
        "a held-out folder was left: {after:?}"
    );
}

/// The held-out folders of this process's children in the temporary folder.
fn heldout_folders() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("endotwin-heldout-"))
        .collect();
    names.sort();
    names
}

#[test]
fn p4_h3_w17_bench_parameters_are_bounded() {
    let lib = tempfile::tempdir().unwrap();
    for (args, names) in [
        (vec!["bench", "retrieve", "--sizes", "0"], "--sizes"),
        (
            vec!["bench", "retrieve", "--sizes", "100000000000"],
            "--sizes",
        ),
        (
            vec![
                "bench",
                "retrieve",
                "--sizes",
                "1000",
                "--bits",
                "1000000000",
            ],
            "--bits",
        ),
        (
            vec!["bench", "retrieve", "--sizes", "1000", "--bits", "100"],
            "--bits",
        ),
        (vec!["bench", "retrieve", "--dim", "0"], "--dim"),
        (vec!["bench", "frames", "--seconds", "0"], "--seconds"),
        (vec!["bench", "frames", "--seconds", "NaN"], "--seconds"),
        (vec!["bench", "frames", "--seconds", "1e30"], "--seconds"),
        (vec!["bench", "encode", "--batches", "100000"], "--batches"),
        (vec!["bench", "encode", "--runs", "0"], "--runs"),
        (vec!["bench", "encode", "--seconds", "inf"], "--seconds"),
    ] {
        refused(lib.path(), &args, names);
    }
}

// ---------------------------------------------------------------- H1: a huge prompt file

#[test]
fn h1_a_prompt_file_of_too_many_prompts_is_refused_before_any_is_scored() {
    let dir = tempfile::tempdir().unwrap();
    let many = dir.path().join("many.txt");
    let text: String = (0..20_000)
        .map(|i| format!("prompt number {i}\n"))
        .collect();
    std::fs::write(&many, text).unwrap();
    let image = dir.path().join("q.png");
    common::png(&image, 32, 32, 5);
    let (lib, _src) = library_with_cases();
    let r = crate::store_safety::run_within(
        et(
            lib.path(),
            &[
                "prompts",
                "score",
                "--image",
                image.to_str().unwrap(),
                "--prompts",
                many.to_str().unwrap(),
            ],
        ),
        20,
    );
    assert!(!r.ok(), "{}", r.text());
    assert!(
        r.says("20000 prompts") && r.says("at most 1000") && r.says("many.txt"),
        "{}",
        r.text()
    );
}

// ---------------------------------------------------------------- D3, D4, D5, D6: imports

#[test]
fn d3_an_import_of_only_duplicates_leaves_no_empty_examination() {
    let (lib, src) = library_with_cases();
    let dup = src.path().join("dupsample/exam");
    std::fs::create_dir_all(&dup).unwrap();
    let mut media = Vec::new();
    common::walk(&lib.path().join("media"), &mut media);
    for (i, m) in media
        .iter()
        .filter(|m| m.extension().is_some_and(|e| e == "png"))
        .enumerate()
    {
        std::fs::copy(m, dup.join(format!("{i}.png"))).unwrap();
    }
    let before = common::state(lib.path());
    let r = common::import(lib.path(), "images", &src.path().join("dupsample"), &[]);
    assert!(r.says("0 media added"), "{}", r.text());
    assert!(r.says("0 examinations"), "{}", r.text());
    assert_eq!(common::state(lib.path()), before, "the library changed");
    let check = run(et(lib.path(), &["library", "check"]));
    assert!(check.ok(), "{}", check.text());
}

#[test]
fn d4_an_import_into_an_examination_already_there_says_so() {
    let (lib, src) = library_with_cases();
    let store =
        endotwin::store::Store::open(lib.path(), endotwin::store::OpenMode::Existing).unwrap();
    let code = store.examinations().unwrap()[0].code.clone();
    drop(store);
    // A folder of the same name as an examination: its frames join that examination.
    let folder = src.path().join("same").join(&code);
    common::png(&folder.join("new.png"), 16, 16, 99);
    let r = common::import(lib.path(), "images", &folder, &[]);
    assert!(r.ok(), "{}", r.text());
    assert!(
        r.says("already in the library") && r.says(&code),
        "{}",
        r.text()
    );
    // A re-import of the same folder adds nothing and names nothing.
    let r = common::import(lib.path(), "images", &folder, &[]);
    assert!(!r.says("already in the library:"), "{}", r.text());
}

#[cfg(unix)]
#[test]
fn d5_folder_names_that_are_not_utf8_are_skipped_by_name_not_merged() {
    use std::os::unix::ffi::OsStrExt;
    let lib = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let root = src.path().join("collide");
    for (i, name) in [&b"exam\xff"[..], b"exam\xfe"].iter().enumerate() {
        let d = root.join(std::ffi::OsStr::from_bytes(name));
        common::png(&d.join("f.png"), 16, 16, 10 + i as u8);
    }
    common::png(&root.join("fine/f.png"), 16, 16, 30);
    let r = common::import(lib.path(), "images", &root, &[]);
    assert!(r.says("UTF-8"), "{}", r.text());
    assert!(r.says("1 media added"), "{}", r.text());
    let store =
        endotwin::store::Store::open(lib.path(), endotwin::store::OpenMode::Existing).unwrap();
    let codes: Vec<String> = store
        .examinations()
        .unwrap()
        .into_iter()
        .map(|e| e.code)
        .collect();
    assert_eq!(codes, vec!["collide/fine".to_string()]);
}

#[test]
fn d6_a_polyp_none_of_whose_boxes_came_in_is_not_made() {
    let lib = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut images = Vec::new();
    let mut anns = Vec::new();
    for f in 0..4 {
        common::png(
            &dir.path().join(format!("frames/s1_{f}.png")),
            16,
            16,
            f as u8,
        );
        images.push(format!(
            r#"{{"id": {f}, "file_name": "frames/s1_{f}.png", "frame_id": {f}, "sequence_id": "s1"}}"#
        ));
        anns.push(format!(
            r#"{{"image_id": {f}, "bbox": [2, 2, 6, 6], "identity_id": "s1_1"}}"#
        ));
    }
    // Polyp 2's only box lies outside the image: refused, so polyp 2 has nothing.
    anns.push(r#"{"image_id": 0, "bbox": [200, 200, 6, 6], "identity_id": "s1_2"}"#.into());
    let json = dir.path().join("c.json");
    std::fs::write(
        &json,
        format!(
            r#"{{"images": [{}], "annotations": [{}]}}"#,
            images.join(","),
            anns.join(",")
        ),
    )
    .unwrap();
    let r = common::import(lib.path(), "coco", &json, &[]);
    let store =
        endotwin::store::Store::open(lib.path(), endotwin::store::OpenMode::Existing).unwrap();
    let polyps = store.polyps().unwrap();
    assert_eq!(
        polyps.len(),
        1,
        "{:?}\n{}",
        polyps.iter().map(|p| &p.code).collect::<Vec<_>>(),
        r.text()
    );
    let check = run(et(lib.path(), &["library", "check"]));
    assert!(check.ok(), "{}", check.text());
}

// ------------------------------------------------ W4, W9, W12: what importers store as labels

/// A polyp as these tests read it: code, histology, Vienna class, size in mm.
type PolypLabels = (String, Option<String>, Option<i64>, Option<f64>);

/// The polyps of `lib`, ordered by code.
fn polyps_by_code(lib: &Path) -> Vec<PolypLabels> {
    let store = endotwin::store::Store::open(lib, endotwin::store::OpenMode::Existing).unwrap();
    let mut all: Vec<_> = store
        .polyps()
        .unwrap()
        .into_iter()
        .map(|p| (p.code, p.histology, p.vienna_class, p.size_mm))
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

#[test]
fn w4_w9_importers_keep_histologies_to_the_vocabulary_and_codes_to_printable_text() {
    let lib = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let set = src.path().join("set");
    for (folder, seed) in [
        ("pA", 1),
        ("pB", 3),
        ("pC", 5),
        ("p\u{202E}rtl", 7),
        ("new\nline", 9),
    ] {
        common::png(&set.join(folder).join("1.png"), 24, 16, seed);
        common::png(&set.join(folder).join("2.png"), 24, 16, seed + 1);
    }
    std::fs::write(
        set.join("pathology.csv"),
        "polyp,histology\npA,made-up-thing\npB,TUBULAR ADENOMA HG\npC,hyperplastic\n",
    )
    .unwrap();
    let r = common::import(lib.path(), "multiview", &set, &[]);
    assert!(r.ok(), "{}", r.text());
    // The unknown term is named with the vocabulary, and not stored.
    assert!(
        r.says("'made-up-thing' is not a histology EndoTwin knows"),
        "{}",
        r.text()
    );
    // Folder names with a right-to-left override or a line break are refused by name.
    assert!(r.says("U+202E") && r.says("U+000A"), "{}", r.text());
    let polyps = polyps_by_code(lib.path());
    let codes: Vec<&str> = polyps.iter().map(|p| p.0.as_str()).collect();
    assert_eq!(codes, ["set-pA", "set-pB", "set-pC"], "{polyps:?}");
    let histology: Vec<Option<&str>> = polyps.iter().map(|p| p.1.as_deref()).collect();
    // A known term in another case is stored in the vocabulary's spelling.
    assert_eq!(
        histology,
        [None, Some("tubular adenoma HG"), Some("hyperplastic")]
    );

    // EndoFinder's manifest: the same rule for its ground truth.
    let jsonl = src.path().join("ef");
    common::png(&jsonl.join("a1.png"), 24, 16, 20);
    common::png(&jsonl.join("a2.png"), 24, 16, 21);
    std::fs::write(
        jsonl.join("polyps.jsonl"),
        "{\"id\":\"q1\",\"img_paths\":[\"a1.png\",\"a2.png\"],\"ground_truth\":\"garbage histology\"}\n",
    )
    .unwrap();
    let r = common::import(lib.path(), "endofinder", &jsonl.join("polyps.jsonl"), &[]);
    assert!(r.ok(), "{}", r.text());
    assert!(
        r.says("'garbage histology' is not a histology EndoTwin knows"),
        "{}",
        r.text()
    );
    assert!(
        polyps_by_code(lib.path())
            .iter()
            .all(|p| p.1.as_deref() != Some("garbage histology"))
    );
}

#[test]
fn w12_a_blank_histology_cell_keeps_the_reviewed_label_under_update_labels() {
    let (lib, src) = library_with_cases();
    let base = src.path().join("base");
    std::fs::write(
        base.join("pathology.csv"),
        "polyp,histology,vienna_class,size_mm\nA,,,\n",
    )
    .unwrap();
    let r = common::import(lib.path(), "multiview", &base, &["--update-labels"]);
    assert!(r.ok(), "{}", r.text());
    // Blank cells give nothing: adenoma, Vienna 3 and 8 mm all stay.
    assert_eq!(
        polyps_by_code(lib.path()),
        [(
            "base-A".to_string(),
            Some("adenoma".to_string()),
            Some(3),
            Some(8.0)
        )]
    );
}

// ------------------------------------------------ W10, W13-W17: the rest of the wrong answers

#[test]
fn w10_a_prompt_of_words_the_model_never_saw_is_refused_not_scored() {
    let _rng = crate::common::device_rng();
    let card = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/prompts.json");
    let model = endotwin::prompts::model::load(&card, &burn::tensor::Device::flex()).unwrap();
    use endotwin::prompts::query::{PromptError, check_prompt};
    for nonsense in ["qwertyuiop", "asdfghjkl qwertyuiop", "!!!"] {
        let e = check_prompt(&model, nonsense).unwrap_err();
        assert!(
            matches!(e, PromptError::NoKnownWord { .. }),
            "{nonsense}: {e}"
        );
        assert!(e.to_string().contains("knows none of the words"), "{e}");
    }
    // One known word is enough to mean something.
    check_prompt(&model, "a large red polyp").unwrap();
    check_prompt(&model, "qwertyuiop polyp").unwrap();
}

#[test]
fn w13_an_endofinder_path_that_is_not_text_refuses_the_polyp_by_line() {
    let lib = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    common::png(&src.path().join("v1.png"), 24, 16, 1);
    common::png(&src.path().join("v2.png"), 24, 16, 2);
    common::png(&src.path().join("w1.png"), 24, 16, 3);
    let manifest = src.path().join("m.jsonl");
    std::fs::write(
        &manifest,
        "{\"id\":\"a\",\"img_paths\":[1,\"v2.png\",null]}\n{\"id\":\"b\",\"img_paths\":[\"w1.png\",\"v1.png\"]}\n",
    )
    .unwrap();
    let r = common::import(lib.path(), "endofinder", &manifest, &[]);
    assert!(r.ok(), "{}", r.text());
    assert!(
        r.says("line 1") && r.says("img_paths holds 1, not a path"),
        "{}",
        r.text()
    );
    let codes: Vec<String> = polyps_by_code(lib.path())
        .into_iter()
        .map(|p| p.0)
        .collect();
    assert_eq!(codes.len(), 1, "{codes:?}");
    assert!(codes[0].ends_with('b'), "{codes:?}");
}

#[test]
fn w15_a_captiv8_row_refused_for_no_patient_does_not_veto_the_images_good_row() {
    let lib = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    common::png(&src.path().join("img/t1.png"), 16, 16, 4);
    let header = "Patient ID,name,capture_time,image_path,video_path,image_label\n";
    std::fs::write(
        src.path().join("P001.csv"),
        format!("{header},a,00:00:01,img/t1.png,v.mp4,ulcer\n"),
    )
    .unwrap();
    std::fs::write(
        src.path().join("P002.csv"),
        format!("{header}2,b,00:00:02,img/t1.png,v.mp4,bleeding\n"),
    )
    .unwrap();
    let r = common::import(lib.path(), "captiv8", src.path(), &[]);
    assert!(r.ok(), "{}", r.text());
    assert!(r.says("no Patient ID"), "{}", r.text());
    assert!(!r.says("different captions"), "{}", r.text());
    let store =
        endotwin::store::Store::open(lib.path(), endotwin::store::OpenMode::Existing).unwrap();
    let captions: Vec<String> = store.all_captions().unwrap().into_values().collect();
    assert_eq!(captions, ["bleeding"]);
}

#[test]
fn w16_w17_impossible_dates_an_empty_window_and_top_zero_are_refused() {
    let (lib, _src) = library_with_cases();
    let before = common::state(lib.path());
    for (args, says) in [
        (
            vec!["labels", "history", "--since", "2026-02-30"],
            "2026-02-30",
        ),
        (
            vec!["labels", "history", "--until", "2025-02-29"],
            "2025-02-29",
        ),
        (
            vec![
                "labels",
                "history",
                "--since",
                "2030-01-01",
                "--until",
                "2020-01-01",
            ],
            "is after --until",
        ),
        (vec!["prompts", "search", "polyp", "--top", "0"], "--top"),
        // MINOR 14: a scale of 0 polyps used to scale the videos anyway.
        (
            vec!["demo", "--out", "never-made", "--scale", "0"],
            "--scale",
        ),
    ] {
        let r = run(et(lib.path(), &args));
        assert!(!r.ok() && r.says(says), "{args:?}:\n{}", r.text());
    }
    // A leap day and a one-day window are dates like any other.
    for args in [
        vec!["labels", "history", "--since", "2028-02-29"],
        vec![
            "labels",
            "history",
            "--since",
            "2026-11-25",
            "--until",
            "2026-11-25",
        ],
    ] {
        let r = run(et(lib.path(), &args));
        assert!(r.ok(), "{args:?}:\n{}", r.text());
    }
    assert_eq!(common::state(lib.path()), before);
}

#[test]
fn minor17_prompts_take_a_model_by_its_card_name_as_prompt_sets_do() {
    let (lib, src) = library_with_cases();
    let image = src.path().join("base/A/1.png");
    let r = run(et(
        lib.path(),
        &[
            "prompts",
            "score",
            "--image",
            image.to_str().unwrap(),
            "--prompts",
            concat!(env!("CARGO_MANIFEST_DIR"), "/assets/prompt_sets.toml"),
            "--model",
            "prompts-plain",
        ],
    ));
    assert!(r.ok() && r.says("model prompts-plain ("), "{}", r.text());
}

#[test]
fn minor6_a_polyp_on_two_lines_of_a_labels_file_gets_neither() {
    let (lib, src) = library_with_cases();
    let csv = src.path().join("twice.csv");
    std::fs::write(
        &csv,
        "polyp,histology,vienna_class\nbase-A,hyperplastic,1\nbase-A,carcinoma,5\n",
    )
    .unwrap();
    let before = common::state(lib.path());
    let r = run(et(
        lib.path(),
        &["labels", "import", csv.to_str().unwrap(), "--apply"],
    ));
    assert!(
        r.says("lines 2, 3") && r.says("none of them is used"),
        "{}",
        r.text()
    );
    assert_eq!(common::state(lib.path()), before, "a label changed");
}
