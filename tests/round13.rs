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

/// N18: a labels line whose size class contradicts its size (`small` beside 25 mm) was
/// stored without a word. It is refused by line, nothing changed; a class that fits is
/// stored, and a line that changes neither is not questioned.
#[test]
fn a_size_class_that_contradicts_the_size_on_its_line_is_refused() {
    let (lib, _src) = library_with_cases();
    let code = crate::common::first_polyp_code(lib.path());
    let dir = tempfile::tempdir().unwrap();
    let before = files(lib.path());
    for (n, line, says) in [
        // The class against the line's own size, and against the stored 8 mm (named as
        // stored, round 17 R9).
        (
            1,
            format!("polyp,size class,size_mm\n{code},small,25\n"),
            "size class 'small' contradicts size_mm 25",
        ),
        (
            2,
            format!("polyp,size class\n{code},giant\n"),
            "size class 'giant' contradicts the stored size_mm 8",
        ),
    ] {
        let file = dir.path().join(format!("c{n}.csv"));
        std::fs::write(&file, line).unwrap();
        let r = run_within(
            et(
                lib.path(),
                &["labels", "import", file.to_str().unwrap(), "--apply"],
            ),
            60,
        );
        assert!(
            r.says("line 2") && r.says(says) && r.says("is not used"),
            "{}",
            r.text()
        );
        assert_eq!(files(lib.path()), before, "{}", r.text());
    }
    let fits = dir.path().join("fits.csv");
    std::fs::write(
        &fits,
        format!("polyp,size class,size_mm\n{code},large,12\n"),
    )
    .unwrap();
    let r = run_within(
        et(
            lib.path(),
            &["labels", "import", fits.to_str().unwrap(), "--apply"],
        ),
        60,
    );
    assert!(r.ok() && !r.says("contradicts"), "{}", r.text());
    let store =
        endotwin::store::Store::open(lib.path(), endotwin::store::OpenMode::Existing).unwrap();
    let id = store.polyps().unwrap()[0].id;
    let label = |key| {
        store
            .current_label(endotwin::store::TargetKind::Polyp, id, key)
            .unwrap()
    };
    assert_eq!(label("size class").as_deref(), Some("large"));
    assert_eq!(label("size_mm").as_deref(), Some("12.0"));
}

/// N16: a patient's CSV copied under another patient's name (`P003.csv` holding P002's rows)
/// vanished without a word: its rows are refused by name and counted; the same frame named
/// for two patients is refused, both rows named; one row given twice is imported once, said.
#[test]
fn a_captiv8_file_repeating_another_patients_rows_is_named() {
    let lib = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    for i in 1..=3u8 {
        crate::common::png(&src.path().join(format!("img/{i}.png")), 8, 8, i);
    }
    let p002 = "Patient ID,name,capture_time,image_path,video_path,image_label\n\
                P002,a,00:00:01,img/1.png,v.mp4,ulcer\n\
                P002,b,00:00:02,img/2.png,v.mp4,polyp\n";
    std::fs::write(src.path().join("P002.csv"), p002).unwrap();
    std::fs::write(src.path().join("P003.csv"), p002).unwrap();
    std::fs::write(
        src.path().join("P004.csv"),
        "Patient ID,name,capture_time,image_path,video_path,image_label\n\
         P004,c,00:00:03,img/3.png,v.mp4,polyp\n\
         P004,c,00:00:03,img/3.png,v.mp4,polyp\n\
         P004,d,00:00:04,img/2.png,v.mp4,polyp\n",
    )
    .unwrap();
    let r = crate::common::import(lib.path(), "captiv8", src.path(), &[]);
    assert!(
        r.says("patient P002 in the file of patient P003"),
        "{}",
        r.text()
    );
    assert!(
        r.says("P004.csv: row 3: repeats") && r.says("imported once"),
        "{}",
        r.text()
    );
    assert!(
        r.says("named for different patients") && r.says("img/2.png"),
        "{}",
        r.text()
    );
    let store =
        endotwin::store::Store::open(lib.path(), endotwin::store::OpenMode::Existing).unwrap();
    // img/1.png (P002) and img/3.png (P004, once); img/2.png is claimed by P002 and P004.
    assert_eq!(store.stats().unwrap().media, 2, "{}", r.text());
}

/// N2: EndoFinder lines of one picture under two file names with two truths became two
/// polyps, and a copy of a mask the library holds became their view, without a word.
#[test]
fn endofinder_lines_are_compared_by_content_and_a_mask_is_never_a_view() {
    let lib = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    crate::common::png(&src.path().join("kv/images/k1.png"), 16, 16, 7);
    crate::common::mask_png(&src.path().join("kv/masks/k1.png"), 16, 16);
    let r = crate::common::import(lib.path(), "kvasir-seg", &src.path().join("kv"), &[]);
    assert!(r.ok(), "{}", r.text());
    let ef = src.path().join("ef");
    crate::common::png(&ef.join("img/a.png"), 16, 16, 21);
    std::fs::create_dir_all(ef.join("img")).unwrap();
    std::fs::copy(ef.join("img/a.png"), ef.join("img/a-copy.png")).unwrap();
    std::fs::copy(src.path().join("kv/masks/k1.png"), ef.join("img/m.png")).unwrap();
    std::fs::write(
        ef.join("list.jsonl"),
        "{\"img_paths\":[\"img/a.png\"],\"ground_truth\":\"adenoma\"}\n\
         {\"img_paths\":[\"img/a-copy.png\"],\"ground_truth\":\"hyperplastic\"}\n\
         {\"img_paths\":[\"img/m.png\"],\"ground_truth\":\"adenoma\"}\n",
    )
    .unwrap();
    let before = crate::common::state(lib.path());
    let r = crate::common::import(lib.path(), "endofinder", &ef.join("list.jsonl"), &[]);
    assert!(
        r.says("lines 1, 2 list the same images with different ground truth"),
        "{}",
        r.text()
    );
    assert!(
        r.says("the same image is already in the library as a mask"),
        "{}",
        r.text()
    );
    assert_eq!(crate::common::state(lib.path()), before, "{}", r.text());
}
