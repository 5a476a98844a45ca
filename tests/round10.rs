//! Hostile round 10 (issue 43): each finding through the path a user takes, refused or said
//! by name, with nothing changed where something was refused.

use crate::common;
use crate::hostile::library_with_cases;
use crate::library_engines::{Engine, Place, on_both_engines};
use crate::store_safety::run_within;
use endotwin::store::OpenMode;

on_both_engines!(a_snapshot_read_does_not_see_a_write_made_meanwhile);

fn twin_backbone(lib: &std::path::Path, out: &str, backbone: &str, extra: &[&str]) -> common::Ran {
    let mut c = common::endotwin(lib);
    c.args([
        "train",
        "twin-backbone",
        "--out",
        out,
        "--name",
        "x",
        "--epochs",
        "1",
    ])
    .args(["--backbone", backbone])
    .args(extra);
    run_within(c, 60)
}

/// N1: `--copies 1000000` was taken and grew without bound (every copy of every view is
/// encoded and kept before training).
#[test]
fn copies_are_bounded_before_anything_is_encoded() {
    let (lib, _src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    let backbone = tempfile::NamedTempFile::new().unwrap();
    let (out_s, backbone_s) = (
        out.path().to_str().unwrap(),
        backbone.path().to_str().unwrap(),
    );
    for copies in ["0", "1000000", "18446744073709551615"] {
        let r = twin_backbone(lib.path(), out_s, backbone_s, &["--copies", copies]);
        assert!(
            !r.ok() && r.says(&format!("--copies {copies}: from 1")),
            "{copies}: {}",
            r.text()
        );
    }
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
}

/// N2: the memory refusal named twice the --batch given and advised one that was refused
/// again.
#[test]
fn a_batch_too_large_is_named_as_given_and_the_advice_passes() {
    let (lib, _src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    let backbone = tempfile::NamedTempFile::new().unwrap();
    let (out_s, backbone_s) = (
        out.path().to_str().unwrap(),
        backbone.path().to_str().unwrap(),
    );
    // A fixed budget: the default follows the memory free at the moment.
    let budget = ["--memory-gb", "8"];
    let r = twin_backbone(
        lib.path(),
        out_s,
        backbone_s,
        &["--batch", "954370", budget[0], budget[1]],
    );
    assert!(
        !r.ok() && r.says("--batch 954370: one step of twin-backbone needs"),
        "{}",
        r.text()
    );
    let advised = r
        .stderr
        .split("lower --batch to ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_string();
    let r = twin_backbone(
        lib.path(),
        out_s,
        backbone_s,
        &["--batch", &advised, budget[0], budget[1]],
    );
    assert!(!r.says("one step of twin-backbone needs"), "{}", r.text());
}

/// N13: `library copy` while another station imported into the source compared the copy with
/// a source that had moved on ("differs from its source", a raw dump). The copy reads one
/// snapshot: a write made meanwhile is not seen by it.
fn a_snapshot_read_does_not_see_a_write_made_meanwhile(engine: Engine) {
    let Some(place) = Place::fresh(engine) else {
        return;
    };
    let (reader, _polyp) = crate::library_engines::library_with_polyp(&place);
    let mut writer = place.open(OpenMode::Existing).unwrap();
    let before = reader.examinations().unwrap().len();
    let seen = reader
        .in_snapshot(|| {
            let first = reader.examinations()?.len();
            writer.write(|tx| {
                endotwin::store::upsert_examination(
                    tx,
                    &endotwin::store::NewExamination {
                        code: "EX-NEW".into(),
                        ..Default::default()
                    },
                )
            })?;
            Ok((first, reader.examinations()?.len()))
        })
        .unwrap();
    assert_eq!(seen, (before, before));
    assert_eq!(reader.examinations().unwrap().len(), before + 1);
}

/// N24, N25: a sub-pixel `--box` was answered ("carcinoma 49%"); `labels export --out x.json`
/// wrote CSV without a word.
#[test]
fn a_box_too_small_and_an_export_named_for_another_format_are_refused() {
    let (lib, src) = library_with_cases();
    let image = src.path().join("base/A/1.png");
    let mut c = common::endotwin(lib.path());
    c.args(["twins", "--box", "0,0,1e-30,1e-30"]).arg(&image);
    let r = run_within(c, 60);
    assert!(!r.ok() && r.says("at least 4 pixels"), "{}", r.text());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("x.json");
    let mut c = common::endotwin(lib.path());
    c.args(["labels", "export", "--out"]).arg(&json);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("a .json file for the csv format") && !json.exists(),
        "{}",
        r.text()
    );
    // Named for its format, each is written.
    for (format, name) in [("csv", "x.csv"), ("jsonl", "x.jsonl"), ("coco", "x.json")] {
        let mut c = common::endotwin(lib.path());
        c.args(["labels", "export", "--format", format, "--out"])
            .arg(dir.path().join(format!("{format}-{name}")));
        let r = run_within(c, 60);
        assert!(r.ok(), "{format}: {}", r.text());
    }
}

use crate::common::et;

/// N3: the source tree's library, read as a last resort and called read only, was opened
/// read-write (SQLite made and removed a -wal and -shm beside it). A library kept read-only
/// opens with nothing written beside it, and a write is refused.
#[test]
fn a_library_kept_read_only_is_opened_without_a_file_made_beside_it() {
    let (lib, _src) = library_with_cases();
    let before = crate::store_safety::files(lib.path());
    endotwin::store::keep_read_only(lib.path());
    let mut store = endotwin::store::Store::open(lib.path(), OpenMode::Existing).unwrap();
    assert!(!store.examinations().unwrap().is_empty());
    let wrote = store.write(|tx| {
        endotwin::store::upsert_examination(
            tx,
            &endotwin::store::NewExamination {
                code: "EX-NEW".into(),
                ..Default::default()
            },
        )
    });
    assert!(
        matches!(wrote, Err(endotwin::store::StoreError::ReadOnly { .. })),
        "{wrote:?}"
    );
    let names: Vec<String> = std::fs::read_dir(lib.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n.ends_with("-wal") || n.ends_with("-shm")),
        "{names:?}"
    );
    drop(store);
    assert_eq!(crate::store_safety::files(lib.path()), before);
}

/// N17: ENDOTWIN_MODELS was ignored without a word once a model had been promoted in the
/// library (its own models/ is loaded).
#[test]
fn a_models_folder_in_the_environment_that_is_not_used_is_said() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let shipped = endotwin::default_models_dir();
    let info = |extra: &[&str]| {
        let mut c = et(lib.path(), &["info"]);
        c.args(extra).env("ENDOTWIN_MODELS", &shipped);
        run_within(c, 60)
    };
    // Nothing promoted: the variable is what is loaded, nothing said.
    let r = info(&[]);
    assert!(
        r.ok() && !r.says("is not used for this library"),
        "{}",
        r.text()
    );
    let run = crate::round7::caption_run(lib.path(), dir.path(), "test-n17");
    let r = run_within(et(lib.path(), &["model", "promote", &run.to_string()]), 120);
    assert!(r.ok(), "{}", r.text());
    let r = info(&[]);
    assert!(
        r.ok()
            && r.says(&format!(
                "$ENDOTWIN_MODELS ({}) is not used for this library",
                shipped.display()
            ))
            && r.says("a model was promoted in it")
            // `info` takes no --models: none advised (round 11 N1).
            && !r.says("--models ")
            && !r.stderr.contains("  "),
        "{}",
        r.text()
    );
    // A command given its own --models loads what it names: nothing to say.
    let image = dir.path().join("q.png");
    common::png(&image, 64, 64, 77);
    let mut c = et(lib.path(), &["twins", "--models"]);
    c.arg(&shipped).arg(&image).env("ENDOTWIN_MODELS", &shipped);
    let r = run_within(c, 120);
    assert!(!r.says("is not used for this library"), "{}", r.text());
}

/// N26: a prompt with an escape sequence was echoed raw (clearing or recolouring the
/// terminal); a file that is not UTF-8 got a byte offset only.
#[test]
fn prompts_with_control_characters_and_files_not_utf8_are_refused_by_line() {
    let (lib, src) = library_with_cases();
    let image = src.path().join("base/A/1.png");
    let dir = tempfile::tempdir().unwrap();
    let esc = dir.path().join("esc.txt");
    std::fs::write(&esc, "normal mucosa\na polyp \x1b[2J\x1b[31mred\n").unwrap();
    let latin = dir.path().join("latin.txt");
    std::fs::write(&latin, b"a polyp\nc\xe6cum\n").unwrap();
    let score = |prompts: &std::path::Path| {
        let mut c = et(lib.path(), &["prompts", "score", "--image"]);
        c.arg(&image).arg("--prompts").arg(prompts);
        run_within(c, 120)
    };
    let r = score(&esc);
    assert!(
        !r.ok() && r.says("line 2 holds the character U+001B") && !r.text().contains('\x1b'),
        "{}",
        r.text()
    );
    let r = score(&latin);
    assert!(
        !r.ok() && r.says("line 2 is not UTF-8") && r.says("save the file as UTF-8"),
        "{}",
        r.text()
    );
    let r = run_within(et(lib.path(), &["prompts", "search", "polyp \x1b[2J"]), 120);
    assert!(
        !r.ok() && r.says("holds the character U+001B") && !r.text().contains('\x1b'),
        "{}",
        r.text()
    );
}

/// N27: a copy into `<lib>/models/x` was made when the library had no models/ yet, and then
/// blocked the library's first promotion.
#[test]
fn a_copy_into_a_librarys_models_folder_to_be_is_refused() {
    let (lib, _src) = library_with_cases();
    let before = crate::store_safety::files(lib.path());
    let into = lib.path().join("models/x");
    let mut c = et(lib.path(), &["library", "copy"]);
    c.arg(lib.path()).arg(&into);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("lies inside the media/ or models/ folder of the library"),
        "{}",
        r.text()
    );
    assert!(!lib.path().join("models").exists());
    // Through a folder not there yet and back (round 11 N2: the folders were made first).
    let mut c = et(lib.path(), &["library", "copy"]);
    c.arg(lib.path()).arg(lib.path().join("zz/../models/y"));
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("lies inside the media/ or models/ folder of the library"),
        "{}",
        r.text()
    );
    assert!(!lib.path().join("models").exists() && !lib.path().join("zz").exists());
    assert_eq!(crate::store_safety::files(lib.path()), before);
}

/// Round 11 N4, N5: a report's generated split had no bound: 10^8 videos grew without end,
/// 2^64 capsule frames panicked ("capacity overflow").
#[test]
fn a_reports_generated_split_too_large_is_refused_before_generating() {
    let (lib, _src) = library_with_cases();
    let models = endotwin::default_models_dir();
    for (card, option, value) in [
        ("captions.json", "--capsule-frames", "18446744073709551615"),
        ("tracklet-head.json", "--videos", "100000000"),
        ("tracklet-head.json", "--videos", "18446744073709551615"),
        ("twin-image.json", "--polyps", "100000000"),
    ] {
        let mut c = et(lib.path(), &["model", "report", "--card"]);
        c.arg(models.join(card)).args([option, value]);
        let r = run_within(c, 60);
        assert!(
            !r.ok() && r.says("a generated phantom takes at most") && !r.says("panicked"),
            "{card} {option} {value}: {}",
            r.text()
        );
    }
    // The evaluations' generated test splits alike (round 11 N6).
    for args in [
        ["tracklets", "--videos", "18446744073709551615"],
        ["tracklets", "--frames-per-video", "18446744073709551615"],
        ["captions", "--frames", "18446744073709551615"],
        ["prompts", "--polyps", "100000000"],
    ] {
        let mut c = et(lib.path(), &["eval"]);
        c.args(args);
        let r = run_within(c, 60);
        assert!(
            !r.ok() && r.says("a generated phantom takes at most") && !r.says("panicked"),
            "{args:?}: {}",
            r.text()
        );
    }
}

/// N29: `--fork` and `--resume` with nothing to continue gave raw OS errors and left an
/// empty checkpoint folder behind.
#[test]
fn a_fork_or_resume_with_nothing_to_continue_is_said_and_leaves_nothing() {
    let (lib, src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    let image = src.path().join("base/A/1.png");
    let train = |extra: &[&std::ffi::OsStr]| {
        let mut c = et(
            lib.path(),
            &["train", "captions", "--name", "f", "--epochs", "1"],
        );
        c.arg("--out").arg(out.path()).args(extra);
        run_within(c, 120)
    };
    let nosuch = out.path().join("nosuch.json");
    let r = train(&["--fork".as_ref(), nosuch.as_os_str()]);
    assert!(
        !r.ok() && r.says("no such model card") && !r.says("os error"),
        "{}",
        r.text()
    );
    let r = train(&["--fork".as_ref(), image.as_os_str()]);
    assert!(
        !r.ok() && r.says("not a model card (NAME.json) nor a run's checkpoint folder"),
        "{}",
        r.text()
    );
    // A folder that is no run's checkpoints (round 11 R10: "a run saves its checkpoint
    // after its first epoch").
    let r = train(&["--fork".as_ref(), src.path().as_os_str()]);
    assert!(
        !r.ok() && r.says("not a model card (NAME.json) nor a run's checkpoint folder"),
        "{}",
        r.text()
    );
    let r = train(&["--resume".as_ref()]);
    assert!(
        !r.ok() && r.says("there is no run of --out") && !r.says("os error"),
        "{}",
        r.text()
    );
    let left: Vec<_> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// N32: raw operating-system words, and an index run again said "encoded 0 frames".
#[test]
fn missing_folders_are_said_in_words() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let nodir = dir.path().join("nodir/x.csv");
    let mut c = et(lib.path(), &["labels", "export", "--out"]);
    c.arg(&nodir);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("nodir is not there (make it first)") && !r.says("os error"),
        "{}",
        r.text()
    );
    let nonexist = dir.path().join("nonexist");
    let mut c = et(lib.path(), &["library", "prune", "--models"]);
    c.arg(&nonexist);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("no such file or folder; --models names a folder of model cards"),
        "{}",
        r.text()
    );
    // A FIFO named as a query image: its name said once.
    let fifo = dir.path().join("fifo.png");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        let mut c = et(lib.path(), &["twins"]);
        c.arg(&fifo);
        let r = run_within(c, 60);
        let twice = format!("{0}: {0}: ", fifo.display());
        assert!(
            !r.ok() && r.says("not a regular file") && !r.says(&twice),
            "{}",
            r.text()
        );
    }
    let mut c = et(lib.path(), &["eval", "real", "--data"]);
    c.arg(&nonexist);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("no such file or folder; --data names a folder") && !r.says("os error"),
        "{}",
        r.text()
    );
}

/// Round 9 N40: ffprobe named as ENDOTWIN_FFMPEG failed on every video, and the video was
/// blamed.
#[test]
fn ffprobe_in_ffmpegs_place_is_named() {
    let (lib, src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let ffprobe = dir.path().join("ffprobe");
    std::fs::write(&ffprobe, "#!/bin/sh\nexit 1\n").unwrap();
    let video = src.path().join("v.mp4");
    std::fs::write(&video, b"\0\0\0\x18ftypmp42 not really").unwrap();
    let mut c = et(lib.path(), &["import", "video"]);
    c.arg(&video).env("ENDOTWIN_FFMPEG", &ffprobe);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("the ffprobe program; it names ffmpeg itself"),
        "{}",
        r.text()
    );
}

/// Round 11 N3: a program in ffmpeg's place that decodes nothing (`/bin/true`) blamed the
/// video ("the video holds no frames").
#[test]
fn a_decoder_that_gives_nothing_is_named_not_the_video() {
    let Some(ffmpeg) = crate::video::ffmpeg() else {
        return;
    };
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let video = crate::video::recording(&ffmpeg, dir.path(), "v.mp4", true);
    let fake = crate::video::fake_ffmpeg(&ffmpeg, dir.path(), 0);
    let before = common::state(lib.path());
    let mut c = et(lib.path(), &["import", "video"]);
    c.arg(&video).env("ENDOTWIN_FFMPEG", &fake);
    let r = run_within(c, 120);
    assert!(
        !r.ok() && r.says("gave no frame and no error") && r.says("is it ffmpeg?"),
        "{}",
        r.text()
    );
    assert_eq!(common::state(lib.path()), before);
}

/// N22: `bench library` rewrote the labels of the library it was given (its help said so,
/// nothing asked): without --changes-this-library it is refused and nothing is changed.
#[test]
fn bench_library_asks_before_it_changes_the_library_given() {
    let (lib, _src) = library_with_cases();
    let before = common::state(lib.path());
    let r = run_within(
        et(
            lib.path(),
            &["bench", "library", "--clients", "1", "--seconds", "0.2"],
        ),
        60,
    );
    assert!(
        !r.ok() && r.says("--changes-this-library") && r.says("nothing was changed"),
        "{}",
        r.text()
    );
    assert_eq!(common::state(lib.path()), before);
}
