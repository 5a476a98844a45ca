//! Hostile round 11 (issue 43): each finding through the path a user takes, refused or said
//! by name, with nothing changed where something was refused. (N1-N7 are in round10.rs,
//! beside the round 10 fixes they followed up.)

use crate::common::{self, png};
use crate::hostile::library_with_cases;
use crate::store_safety::{files, run_within};
use std::path::Path;

use crate::common::et;

/// N8: a PNG renamed `.mp4` was imported as a video of one frame.
#[test]
fn a_still_image_named_as_a_video_is_refused() {
    if crate::video::ffmpeg().is_none() {
        return;
    }
    let (lib, src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let still = dir.path().join("still.mp4");
    std::fs::copy(src.path().join("base/A/1.png"), &still).unwrap();
    let before = common::state(lib.path());
    let r = run_within(
        et(lib.path(), &["import", "video", still.to_str().unwrap()]),
        120,
    );
    assert!(
        !r.ok() && r.says("a still image (png), not a recording"),
        "{}",
        r.text()
    );
    assert_eq!(common::state(lib.path()), before);
}

/// N9: a run promoted, its card changed (`model half`), promoted again: the run's first
/// version went into previous/, and the model before the run was lost to demote.
#[test]
fn promoting_a_runs_other_version_keeps_the_model_before_the_run_for_demote() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let shipped =
        endotwin::model::weights::read_card(&endotwin::default_models_dir().join("captions.json"))
            .unwrap()
            .version;
    let run = crate::round7::caption_run(lib.path(), dir.path(), "test-n9");
    let promote = || run_within(et(lib.path(), &["model", "promote", &run.to_string()]), 120);
    let r = promote();
    assert!(r.ok(), "{}", r.text());
    let card = dir.path().join("test-n9/captions.json");
    let card = if card.is_file() {
        card
    } else {
        std::fs::read_dir(dir.path().join("test-n9"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "json"))
            .unwrap()
    };
    endotwin::model::weights::update_card(&card, |c| c.version = "test-n9-again".into()).unwrap();
    let r = promote();
    assert!(r.ok(), "{}", r.text());
    let active = |lib: &Path| {
        endotwin::model::weights::read_card(&lib.join("models/captions.json"))
            .unwrap()
            .version
    };
    assert_eq!(active(lib.path()), "test-n9-again");
    let r = run_within(et(lib.path(), &["model", "demote", "captions"]), 60);
    assert!(r.ok(), "{}", r.text());
    assert_eq!(
        active(lib.path()),
        shipped,
        "demote went back to the model before the run"
    );
}

/// N10, N11: a library made at the name of another library's SQLite side file (which made
/// that library unreadable), or inside its media/ through a folder not there yet.
#[test]
fn no_library_is_made_at_another_librarys_database_files_or_inside_its_media() {
    let (lib, src) = library_with_cases();
    let before = files(lib.path());
    let images = src.path().join("base/A");
    for inside in [
        "library.sqlite-wal",
        "library.sqlite-shm",
        "library.sqlite-journal",
        "zz/../media/newlib",
    ] {
        let target = lib.path().join(inside);
        let r = run_within(
            et(&target, &["import", "images", images.to_str().unwrap()]),
            60,
        );
        assert!(
            !r.ok() && r.says("a new library is not made there"),
            "{inside}: {}",
            r.text()
        );
        assert_eq!(files(lib.path()), before, "{inside}");
        assert!(!lib.path().join("zz").exists());
    }
    let r = run_within(et(lib.path(), &["library", "check"]), 60);
    assert!(r.ok(), "{}", r.text());
}

/// N12: a labels JSONL line with "polyp" given twice changed the polyp named last.
#[test]
fn a_jsonl_line_with_its_polyp_given_twice_is_not_used() {
    let (lib, _src) = library_with_cases();
    let code = crate::common::first_polyp_code(lib.path());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("twice.jsonl");
    std::fs::write(
        &file,
        format!("{{\"polyp\":\"{code}\",\"polyp\":\"{code}\",\"labels\":{{\"size_mm\":5}}}}\n"),
    )
    .unwrap();
    let r = run_within(
        et(lib.path(), &["labels", "import", file.to_str().unwrap()]),
        60,
    );
    assert!(
        r.says("the key `polyp` is given twice; the line is not used"),
        "{}",
        r.text()
    );
}

/// N13: a standard output that cannot be written (a full disk) panicked.
#[test]
fn an_output_that_cannot_be_written_is_said_in_words() {
    let (lib, _src) = library_with_cases();
    if Path::new("/dev/full").exists() {
        for args in [&["info"][..], &["labels", "history"], &["library", "check"]] {
            let mut c = et(lib.path(), args);
            c.stdout(std::fs::File::create("/dev/full").unwrap());
            let out = c.output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.code() == Some(1)
                    && err.contains("cannot write to standard output")
                    && !err.contains("panicked"),
                "{args:?}: {err}"
            );
        }
    }
    // N14 (a closed standard output): Rust's runtime opens /dev/null in its place at start,
    // so it cannot be told from `>/dev/null`; not checked.
}

/// N15: `train captions --epochs 2^64-1` and `train prompts --rounds 2^64-1` panicked.
#[test]
fn counts_that_size_a_run_are_bounded() {
    let (lib, _src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    let runs = out.path().join("runs");
    for (recipe, option) in [("captions", "--epochs"), ("prompts", "--rounds")] {
        let mut c = et(lib.path(), &["train", recipe, "--name", "x", "--out"]);
        c.arg(&runs).args([option, "18446744073709551615"]);
        let r = run_within(c, 60);
        assert!(
            !r.ok() && r.says(&format!("{option} 18446744073709551615: at most")),
            "{recipe}: {}",
            r.text()
        );
        assert!(!r.says("panicked"), "{}", r.text());
    }
    // A refused run leaves no --out it made.
    assert!(!runs.exists());
}

/// N16: `labels import -` gave a raw OS error; a prompt given twice halved its score; a
/// card of another kind named as the twin encoder was said in a parser's words.
#[test]
fn standard_input_repeated_prompts_and_a_wrong_card_are_said_in_words() {
    let (lib, src) = library_with_cases();
    let code = crate::common::first_polyp_code(lib.path());
    let mut c = et(lib.path(), &["labels", "import", "-"]);
    c.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "polyp,size_mm\n{code},7").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && said.contains("size_mm") && said.contains("-> 7"),
        "{said}"
    );

    let dir = tempfile::tempdir().unwrap();
    let prompts = dir.path().join("p.txt");
    std::fs::write(&prompts, "a polyp\nnormal mucosa\na polyp\n").unwrap();
    let mut c = et(lib.path(), &["prompts", "score", "--image"]);
    c.arg(src.path().join("base/A/1.png"))
        .arg("--prompts")
        .arg(&prompts);
    let r = run_within(c, 120);
    assert!(
        !r.ok() && r.says("the prompt 'a polyp' is given twice (prompts 1 and 3"),
        "{}",
        r.text()
    );

    let fake = dir.path().join("fake");
    std::fs::create_dir(&fake).unwrap();
    let models = endotwin::default_models_dir();
    std::fs::copy(
        models.join("tracklet-head.json"),
        fake.join("twin-image.json"),
    )
    .unwrap();
    std::fs::copy(
        models.join("tracklet-head.bpk"),
        fake.join("twin-image.bpk"),
    )
    .unwrap();
    let query = dir.path().join("q.png");
    png(&query, 64, 64, 9);
    let mut c = et(lib.path(), &["twins", "--models"]);
    c.arg(&fake).arg(&query);
    let r = run_within(c, 120);
    assert!(
        !r.ok()
            && r.says("is a model of kind tracklet-head, not image-encoder")
            && !r.says("untagged"),
        "{}",
        r.text()
    );
}
