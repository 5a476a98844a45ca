//! Hostile round 15 (issue 43): each finding through the path a user takes, refused or said
//! by name, with nothing changed where something was refused.

use crate::common::{self, et, png};
use crate::hostile::library_with_cases;
use crate::store_safety::{files, run_within};
use endotwin::model::weights;
use std::path::Path;

/// A copy of the sample library (indexed with the shipped models).
pub(crate) fn sample_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    crate::gui::copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("sample_db"),
        dir.path(),
    );
    dir
}

/// N1: $ENDOTWIN_MODELS naming no folder: `tracklets` fell back to colour histograms without a
/// word, `captions` advised training a model.
#[test]
fn commands_refuse_a_models_variable_naming_no_folder() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    png(&dir.path().join("v.png"), 16, 16, 5);
    let v = dir.path().join("v.png");
    for args in [
        &["tracklets"][..],
        &["captions", "describe", v.to_str().unwrap()][..],
        &["prompts", "search", "a polyp"][..],
    ] {
        let mut c = et(lib.path(), args);
        c.env("ENDOTWIN_MODELS", dir.path().join("nowhere"));
        let r = run_within(c, 60);
        assert!(
            !r.ok() && r.says("$ENDOTWIN_MODELS names") && r.says("which is not there"),
            "{args:?}: {}",
            r.text()
        );
    }
}

/// N2: a size alone that contradicts the polyp's size class was applied (a 3 mm polyp left
/// "large"); refused as the class alone is.
#[test]
fn a_size_that_contradicts_the_stored_size_class_is_refused() {
    let (lib, _src) = library_with_cases();
    let code = crate::common::first_polyp_code(lib.path());
    let dir = tempfile::tempdir().unwrap();
    let import = |name: &str, text: String| {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        run_within(
            et(
                lib.path(),
                &["labels", "import", file.to_str().unwrap(), "--apply"],
            ),
            60,
        )
    };
    // The polyp is 8 mm: small fits.
    let r = import("class.csv", format!("polyp,size class\n{code},small\n"));
    assert!(r.ok() && !r.says("contradicts"), "{}", r.text());
    let before = files(lib.path());
    let r = import("size.csv", format!("polyp,size_mm\n{code},25\n"));
    assert!(
        r.says("size class 'small' contradicts size_mm 25") && r.says("give the two together"),
        "{}",
        r.text()
    );
    assert_eq!(files(lib.path()), before);
}

/// N5: promoting a prompt model also replaced the detector without a word, and demoting it
/// left the run's detector beside the earlier prompt model.
#[test]
fn a_prompt_model_and_its_detector_are_promoted_and_demoted_together() {
    let lib = tempfile::tempdir().unwrap();
    crate::common::two_polyp_library(lib.path());
    // A run's prompt model and its stage-1 detector (the shipped ones under a run's version).
    let shipped = endotwin::default_models_dir();
    let runs = tempfile::tempdir().unwrap();
    for (from, to) in [("prompts", "p"), ("prompts-detect", "p-detect")] {
        for ext in ["json", "bpk"] {
            std::fs::copy(
                shipped.join(format!("{from}.{ext}")),
                runs.path().join(format!("{to}.{ext}")),
            )
            .unwrap();
        }
        weights::update_card(&runs.path().join(format!("{to}.json")), |c| {
            c.version = format!("run-77-{to}")
        })
        .unwrap();
    }
    let promoted =
        endotwin::engine::promote::promote(lib.path(), &runs.path().join("p.json"), None).unwrap();
    assert_eq!(promoted.detector.as_deref(), Some("prompts-detect"));
    let version = |name: &str| {
        weights::read_card(&promoted.dir.join(format!("{name}.json")))
            .unwrap()
            .version
    };
    assert_eq!(version("prompts-detect"), "run-77-p-detect");
    let r = run_within(et(lib.path(), &["model", "demote", "prompts"]), 60);
    assert!(
        r.ok() && r.says("and prompts-detect with it"),
        "{}",
        r.text()
    );
    let shipped_version = |name: &str| {
        weights::read_card(&shipped.join(format!("{name}.json")))
            .unwrap()
            .version
    };
    assert_eq!(version("prompts"), shipped_version("prompts"));
    assert_eq!(version("prompts-detect"), shipped_version("prompts-detect"));
}

/// N7: one damaged twin index row made `twins` panic while `library check` called the
/// library whole and `index` called the row current.
#[test]
fn a_damaged_index_row_is_named_and_encoded_again() {
    let lib = sample_copy();
    let conn = rusqlite::Connection::open(lib.path().join("library.sqlite")).unwrap();
    conn.execute(
        "UPDATE embeddings SET vector = substr(vector, 1, 8) WHERE rowid =
           (SELECT e.rowid FROM embeddings e JOIN models m ON m.id = e.model_id
            WHERE e.target_kind = 'polyp' AND m.name = 'twin-polyp' LIMIT 1)",
        [],
    )
    .unwrap();
    drop(conn);
    let dir = tempfile::tempdir().unwrap();
    png(&dir.path().join("v.png"), 32, 32, 5);
    let query = || {
        run_within(
            et(
                lib.path(),
                &["twins", dir.path().join("v.png").to_str().unwrap()],
            ),
            180,
        )
    };
    let r = query();
    assert!(
        !r.ok() && r.says("is damaged") && !r.says("panicked"),
        "{}",
        r.text()
    );
    let r = run_within(et(lib.path(), &["library", "check"]), 180);
    assert!(
        !r.ok() && r.says("twin-polyp index row of polyp") && r.says("damaged"),
        "{}",
        r.text()
    );
    let r = run_within(et(lib.path(), &["index"]), 300);
    assert!(r.ok() && r.says("1 polyps updated"), "{}", r.text());
    let r = query();
    assert!(r.ok(), "{}", r.text());
}

/// N8: `eval twins --k 3` printed "6-NN vote"; a k past the polyps a fold votes among was
/// taken without a word, and the JSON held no k.
#[test]
fn eval_twins_says_the_k_it_voted_with() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("t.json");
    let r = run_within(
        et(
            lib.path(),
            &[
                "eval",
                "twins",
                "--polyps",
                "12",
                "--k",
                "50",
                "--json",
                json.to_str().unwrap(),
            ],
        ),
        600,
    );
    assert!(
        r.ok() && r.says("by 50-NN vote") && r.says("--k 50 is more than the"),
        "{}",
        r.text()
    );
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(written["k"], 50, "{written}");
}

/// N14: a 2x2 box was refused, a 2x2 image answered with a calibrated confidence.
#[test]
fn a_view_smaller_than_a_box_may_be_is_refused() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    png(&dir.path().join("tiny.png"), 2, 2, 5);
    let r = run_within(
        et(
            lib.path(),
            &["twins", dir.path().join("tiny.png").to_str().unwrap()],
        ),
        60,
    );
    assert!(
        !r.ok() && r.says("2 x 2 pixels holds no polyp to compare"),
        "{}",
        r.text()
    );
}

/// N18: `--json L/models` wrote a file where a promotion makes the library's models folder.
#[test]
fn an_output_named_as_a_library_folder_is_refused() {
    let (lib, _src) = library_with_cases();
    let before = files(lib.path());
    let dir = tempfile::tempdir().unwrap();
    png(&dir.path().join("v.png"), 16, 16, 5);
    for name in ["models", "media"] {
        let out = lib.path().join(name);
        let r = run_within(
            et(
                lib.path(),
                &[
                    "twins",
                    dir.path().join("v.png").to_str().unwrap(),
                    "--json",
                    out.to_str().unwrap(),
                ],
            ),
            60,
        );
        assert!(!r.ok() && r.says("library"), "{name}: {}", r.text());
    }
    assert_eq!(files(lib.path()), before);
    let _ = common::state(lib.path());
}
