//! Hostile round 16 (issue 43): each finding through the path a user takes, refused or said
//! by name, with nothing changed where something was refused.

use crate::common::{et, png};
use crate::hostile::library_with_cases;
use crate::store_safety::run_within;

/// N1: a $ENDOTWIN_MODELS folder holding no model card: `tracklets` fell back to colour
/// histograms without a word.
#[test]
fn a_models_variable_naming_a_folder_without_cards_is_refused() {
    let (lib, _src) = library_with_cases();
    let empty = tempfile::tempdir().unwrap();
    let mut c = et(lib.path(), &["tracklets"]);
    c.env("ENDOTWIN_MODELS", empty.path());
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("a folder that holds no model card"),
        "{}",
        r.text()
    );
}

/// R5: the k note named the wrong k when folds vote among different numbers of polyps.
#[test]
fn eval_twins_notes_a_k_past_the_largest_fold_only() {
    let (lib, _src) = library_with_cases();
    for (k, note) in [
        ("10", None),
        (
            "11",
            Some("the 9 to 10 polyps each fold votes among: all of them vote, as with --k 10"),
        ),
    ] {
        let r = run_within(
            et(lib.path(), &["eval", "twins", "--polyps", "12", "--k", k]),
            600,
        );
        assert!(r.ok(), "{}", r.text());
        match note {
            Some(n) => assert!(r.says(n), "{}", r.text()),
            None => assert!(!r.says("each fold votes among"), "{}", r.text()),
        }
    }
}

/// N10, N11: generated splits too small to score panicked or blamed the held-out library.
#[test]
fn generated_splits_too_small_to_score_are_refused_in_words() {
    let (lib, _src) = library_with_cases();
    for (args, says) in [
        (
            &["eval", "prompts", "--polyps", "0"][..],
            "needs at least 12 polyps",
        ),
        (&["eval", "prompts", "--frames", "0"][..], "--frames 0"),
        (&["eval", "prompts", "--size", "0"][..], "takes at least 16"),
        (
            &["eval", "captions", "--train-frames", "0"][..],
            "--train-frames",
        ),
    ] {
        let r = run_within(et(lib.path(), args), 120);
        assert!(
            !r.ok() && r.says(says) && !r.says("panicked"),
            "{args:?}: {}",
            r.text()
        );
    }
}

/// N8: a query whose models the library is not indexed with was told to run `endotwin index`,
/// which re-checked the default models.
#[test]
fn the_stale_index_advice_names_the_models_folder() {
    let lib = crate::round15::sample_copy();
    let models = tempfile::tempdir().unwrap();
    crate::gui::copy_dir(&endotwin::default_models_dir(), models.path());
    endotwin::model::weights::update_card(&models.path().join("twin-image.json"), |c| {
        c.version.push_str("-other")
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    png(&dir.path().join("v.png"), 32, 32, 5);
    let r = run_within(
        et(
            lib.path(),
            &[
                "twins",
                dir.path().join("v.png").to_str().unwrap(),
                "--models",
                models.path().to_str().unwrap(),
            ],
        ),
        180,
    );
    assert!(!r.ok() && r.says("--models FOLDER"), "{}", r.text());
}

/// N13: `prompts search` on a read-only library already encoded with the model was refused
/// ("changes are disabled") though it had nothing to write.
#[test]
fn prompts_search_answers_a_read_only_library_already_encoded() {
    use std::os::unix::fs::PermissionsExt;
    let lib = crate::round15::sample_copy();
    let set_mode = |mode: u32| {
        for p in [lib.path().join("library.sqlite"), lib.path().to_path_buf()] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
    };
    set_mode(0o555);
    let before = std::fs::read(lib.path().join("library.sqlite")).unwrap();
    let r = run_within(
        et(lib.path(), &["prompts", "search", "polyp", "--top", "2"]),
        180,
    );
    set_mode(0o755);
    assert!(r.ok() && !r.says("read-only"), "{}", r.text());
    assert_eq!(
        std::fs::read(lib.path().join("library.sqlite")).unwrap(),
        before
    );
}

/// N17: a run killed at epoch 8 of 30, resumed with `--epochs 2`, saved its 8-epoch model as
/// a finished 2-epoch run without a word.
#[test]
fn a_resume_with_fewer_epochs_than_the_run_reached_is_refused() {
    let (lib, _src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    let checkpoints = out.path().join("c.checkpoints");
    std::fs::create_dir_all(checkpoints.join("epoch-008")).unwrap();
    std::fs::write(
        checkpoints.join("state.json"),
        r#"{"epoch": 8, "config": {"epochs": 30}}"#,
    )
    .unwrap();
    let before = crate::store_safety::files(out.path());
    let r = run_within(
        et(
            lib.path(),
            &[
                "train",
                "captions",
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
        !r.ok() && r.says("the run reached epoch 8 before it stopped"),
        "{}",
        r.text()
    );
    assert_eq!(crate::store_safety::files(out.path()), before);
}

/// N4: a labels line whose histology and Vienna class contradict each other (carcinoma,
/// Vienna 1), or a histology alone that contradicts the stored class, was applied.
#[test]
fn a_histology_and_a_vienna_class_that_contradict_each_other_are_refused() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let import = |text: &str| {
        let csv = dir.path().join("labels.csv");
        std::fs::write(&csv, text).unwrap();
        let mut c = et(
            lib.path(),
            &["labels", "import", "--apply", "--who", "dr. test"],
        );
        c.arg(&csv);
        run_within(c, 60)
    };
    // base-A is an adenoma of Vienna class 3.
    let before = crate::common::state(lib.path());
    for (text, says) in [
        (
            "polyp,histology,vienna_class\nbase-A,carcinoma,1\n",
            "histology 'carcinoma' and vienna_class 1 contradict each other (Vienna 4 or 5 fits carcinoma",
        ),
        (
            "polyp,histology\nbase-A,hyperplastic\n",
            "histology 'hyperplastic' and the stored vienna_class 3 contradict each other",
        ),
        (
            "polyp,vienna_class\nbase-A,5\n",
            "the stored histology 'adenoma' and vienna_class 5 contradict each other",
        ),
    ] {
        let r = import(text);
        assert!(!r.ok() && r.says(says), "{text}\n{}", r.text());
        assert_eq!(crate::common::state(lib.path()), before, "{text}");
    }
    // Given together and in agreement, the two are one revision.
    let r = import("polyp,histology,vienna_class\nbase-A,carcinoma,5\n");
    assert!(r.ok() && r.says("2 changes"), "{}", r.text());
}

/// N20: `--backend gpu` on a machine whose only adapter is a software one printed nothing for
/// minutes before the first answer: the command says first what it waits for.
#[test]
fn a_forced_software_adapter_is_said_before_the_wait() {
    let (lib, _src) = library_with_cases();
    let r = run_within(et(lib.path(), &["--backend", "gpu", "info"]), 300);
    if !r.ok() && r.says("no wgpu adapter") {
        eprintln!("skipped: no wgpu adapter here ({})", r.text());
        return;
    }
    assert!(r.ok(), "{}", r.text());
    let software = r.says(", Cpu)");
    assert_eq!(
        r.says("is a software adapter, used because the gpu backend was asked for"),
        software,
        "{}",
        r.text()
    );
}
