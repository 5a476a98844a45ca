//! Hostile round 13 (issue 43): each finding through the path a user takes, refused or said
//! by name, with nothing changed where something was refused.

use crate::hostile::library_with_cases;
use crate::store_safety::{files, run_within};

use crate::common::et;

/// N8: `labels history --limit 2^64-1` panicked ("attempt to add with overflow").
#[test]
fn the_history_limit_at_its_largest_lists_everything() {
    let (lib, _src) = library_with_cases();
    let r = run_within(
        et(
            lib.path(),
            &["labels", "history", "--limit", "18446744073709551615"],
        ),
        60,
    );
    assert!(r.ok() && !r.says("panicked"), "{}", r.text());
}

/// R4: a prompt given twice in a TOML set was scored twice, its share split.
#[test]
fn a_prompt_given_twice_in_a_toml_set_is_refused() {
    let (lib, src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let sets = dir.path().join("sets.toml");
    std::fs::write(
        &sets,
        "[[set]]\nname = \"twice\"\nprompts = [\"a polyp\", \"A polyp \", \"normal mucosa\"]\n",
    )
    .unwrap();
    let mut c = et(lib.path(), &["prompts", "score", "--image"]);
    c.arg(src.path().join("base/A/1.png"))
        .arg("--prompts")
        .arg(&sets);
    let r = run_within(c, 120);
    assert!(
        !r.ok() && r.says("(set 'twice')") && r.says("is given twice (prompts 1 and 2"),
        "{}",
        r.text()
    );
}

/// N12: a mistyped `--model` card gave the OS's words and advised training one.
#[test]
fn a_model_card_not_there_is_said_in_words() {
    let (lib, _src) = library_with_cases();
    let c = et(
        lib.path(),
        &["prompts", "search", "--model", "nosuch.json", "polyp"],
    );
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("nosuch.json: no such model card") && !r.says("os error"),
        "{}",
        r.text()
    );
}

/// N6: `--library A library copy B C` ignored --library without a word.
#[test]
fn a_library_beside_a_copys_own_from_is_refused() {
    let (lib, _src) = library_with_cases();
    let (other, _src2) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("copy");
    let mut c = et(other.path(), &["library", "copy"]);
    c.arg(lib.path()).arg(&to);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("drop --library") && !to.exists(),
        "{}",
        r.text()
    );
}

/// N7: a labels CSV with Windows line ends named its bad rows one line too low.
#[test]
fn a_windows_labels_csv_names_the_lines_an_editor_shows() {
    let (lib, _src) = library_with_cases();
    let before = files(lib.path());
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("crlf.csv");
    std::fs::write(&csv, "polyp,size_mm\r\nNOPE-1,3\r\nNOPE-2,4\r\n").unwrap();
    let r = run_within(
        et(lib.path(), &["labels", "import", csv.to_str().unwrap()]),
        60,
    );
    assert!(
        r.says("line 2") && r.says("line 3") && !r.says("line 4"),
        "{}",
        r.text()
    );
    assert_eq!(files(lib.path()), before);
}

/// N1: `eval trust` on splits too small to answer printed a calibration error of 0.000 with
/// a zero-width interval, and `--records 0` still scored 24 frames.
#[test]
fn eval_trust_refuses_splits_too_small_to_answer() {
    let (lib, _src) = library_with_cases();
    for (flag, value) in [
        ("--records", "0"),
        ("--polyps", "1"),
        ("--capsule-frames", "1"),
    ] {
        let r = run_within(et(lib.path(), &["eval", "trust", flag, value]), 60);
        assert!(
            !r.ok() && r.says(&format!("{flag} {value}: at least")),
            "{flag}: {}",
            r.text()
        );
    }
}
