//! Hostile round 5 (issue 43): each finding through the command line, refused by name with
//! nothing changed on disk, or said as it is.

use crate::common;
use crate::hostile::library_with_cases;
use crate::store_safety::{files, run_within};

use common::run;
use std::path::Path;
use std::process::Command;

/// `endotwin --library LIB ARGS...` on the CPU.
use crate::common::et;

/// The endotwin binary run from an empty folder with no library named anywhere: its
/// library falls back on the source tree's `sample_db/`.
fn bare(args: &[&str]) -> common::Ran {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_endotwin"));
    c.current_dir(dir.path())
        .env_remove("ENDOTWIN_LIBRARY")
        .env("ENDOTWIN_BACKEND", "cpu")
        .args(args);
    run_within(c, 120)
}

/// A folder holding a copy of the shipped caption model (card and record), to change freely.
fn shipped_captions_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    crate::hostile::copy_shipped_captions(dir.path());
    dir
}

#[test]
fn bench_library_never_edits_the_source_trees_sample_library() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample_db");
    let before = files(&sample);
    let r = bare(&["bench", "library", "--clients", "1", "--seconds", "0.2"]);
    assert!(
        !r.ok() && r.says("--library") && r.says("nothing was changed"),
        "{}",
        r.text()
    );
    assert_eq!(
        files(&sample),
        before,
        "the source tree's sample_db changed"
    );
}

#[test]
fn commands_that_write_no_library_do_not_ask_for_one() {
    // Scoring one image with prompts reads no library: it runs without --library.
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("frame.png");
    common::png(&image, 32, 32, 9);
    let prompts = dir.path().join("p.txt");
    std::fs::write(&prompts, "a polyp\nnormal mucosa\n").unwrap();
    let r = bare(&[
        "prompts",
        "score",
        "--image",
        image.to_str().unwrap(),
        "--prompts",
        prompts.to_str().unwrap(),
    ]);
    assert!(r.ok() && !r.says("pass --library"), "{}", r.text());
}

#[test]
fn a_report_json_named_as_its_own_picture_is_refused() {
    let (lib, _src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    let png = out.path().join("z.png");
    let card = endotwin::default_models_dir().join("captions.json");
    let mut c = et(lib.path(), &["model", "report", "--card"]);
    c.arg(&card).arg("--json").arg(&png);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("z.png") && r.says("nothing was written"),
        "{}",
        r.text()
    );
    assert!(!png.exists());
}

#[test]
fn eval_trust_diagrams_that_cannot_be_written_are_refused_before_the_evaluation() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("unused");
    // A file where the folder should be.
    let file = dir.path().join("existing.txt");
    std::fs::write(&file, b"keep me").unwrap();
    let mut c = et(&lib, &["--force", "eval", "trust", "--diagrams"]);
    c.arg(&file);
    let r = run_within(c, 30);
    assert!(
        !r.ok() && r.says("existing.txt") && r.says("not a folder"),
        "{}",
        r.text()
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
    // An earlier diagram, without --force.
    let diagrams = dir.path().join("diagrams");
    std::fs::create_dir(&diagrams).unwrap();
    std::fs::write(diagrams.join("reliability-0.png"), b"earlier").unwrap();
    let mut c = et(&lib, &["eval", "trust", "--diagrams"]);
    c.arg(&diagrams);
    let r = run_within(c, 30);
    assert!(
        !r.ok() && r.says("reliability-0.png") && r.says("--force"),
        "{}",
        r.text()
    );
    assert_eq!(
        std::fs::read(diagrams.join("reliability-0.png")).unwrap(),
        b"earlier"
    );
}

#[test]
fn a_damaged_library_is_not_copied() {
    let (lib, _src) = library_with_cases();
    let db = lib.path().join("library.sqlite");
    crate::hostile::damage_an_index(&db);
    let before = files(lib.path());
    let out = tempfile::tempdir().unwrap();
    let copy = out.path().join("copy");
    let mut c = et(lib.path(), &["library", "copy"]);
    c.arg(lib.path()).arg(&copy);
    let r = run(c);
    assert!(
        !r.ok() && r.says("damaged") && r.says("nothing was written"),
        "{}",
        r.text()
    );
    assert!(!copy.join("library.sqlite").exists());
    assert_eq!(files(lib.path()), before);
}

#[test]
fn a_model_promoted_again_is_refused_so_demote_still_reaches_the_one_before() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    std::fs::create_dir(&lib).unwrap();
    let run_dir = dir.path().join("run");
    std::fs::create_dir(&run_dir).unwrap();
    crate::hostile::copy_shipped_captions(&run_dir);
    use endotwin::engine::promote;
    let card = run_dir.join("captions.json");
    promote::promote(&lib, &card, Some(1)).unwrap();
    let previous = promote::active_dir(&lib).join("previous/captions.json");
    let kept = std::fs::read(&previous).unwrap();
    let err = promote::promote(&lib, &card, Some(1)).unwrap_err();
    assert!(
        err.to_string().contains("already the library's captions")
            && err.to_string().contains("nothing was changed"),
        "{err}"
    );
    assert_eq!(std::fs::read(&previous).unwrap(), kept);
}

#[test]
fn model_trust_refuses_a_validation_library_that_is_its_fit_library() {
    let (lib, _src) = library_with_cases();
    let cards = shipped_captions_copy();
    let card = cards.path().join("captions.json");
    let before = std::fs::read(&card).unwrap();
    let db = lib.path().join("library.sqlite");
    for validation in [lib.path(), db.as_path()] {
        let mut c = et(lib.path(), &["model", "trust"]);
        c.arg(&card)
            .arg("--fit")
            .arg(lib.path())
            .arg("--validation")
            .arg(validation)
            .args(["--hold-out-every", "0"]);
        let r = run_within(c, 60);
        assert!(
            !r.ok()
                && r.says("both a fit and a validation library")
                && r.says("nothing was changed"),
            "{}",
            r.text()
        );
    }
    assert_eq!(std::fs::read(&card).unwrap(), before);
}

#[test]
fn a_report_on_a_copy_of_the_training_library_is_refused() {
    let (lib, _src) = library_with_cases();
    let copy = tempfile::tempdir().unwrap();
    let mut c = Command::new("cp");
    c.arg("-r")
        .arg(lib.path().join("library.sqlite"))
        .arg(lib.path().join("media"))
        .arg(copy.path());
    assert!(c.status().unwrap().success());
    let data = endotwin::eval::report::ReportData {
        held_out: Some(copy.path().to_path_buf()),
        trained_on: Some(lib.path().to_path_buf()),
        ..Default::default()
    };
    let card = endotwin::default_models_dir().join("captions.json");
    let device = burn::tensor::Device::flex();
    let Err(err) = endotwin::eval::report::build(
        &card,
        None,
        &data,
        &device,
        &endotwin::plumbing::Progress::new(),
    ) else {
        panic!("a report on a copy of the training library was made");
    };
    assert!(
        err.to_string().contains("the library the run trained on")
            && err.to_string().contains(" of its "),
        "{err}"
    );
}

#[test]
fn eval_real_names_a_data_path_that_is_no_folder_and_leaves_out_an_empty_capsule_folder() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("unused");
    let missing = dir.path().join("nonexistent");
    let file = dir.path().join("file.txt");
    std::fs::write(&file, b"x").unwrap();
    for (data, says) in [
        (&missing, "no such file or folder"),
        (&file, "not a folder"),
    ] {
        let mut c = et(&lib, &["eval", "real", "--data"]);
        c.arg(data);
        let r = run_within(c, 60);
        assert!(!r.ok() && r.says(says), "{}", r.text());
    }
    // An empty captiv8*/ folder is left out with a note, as an empty cvc-clinicdb*/ is (it
    // aborted everything); with nothing else there, nothing is scored, which is no result
    // (round 9 N31: it exited 0).
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("captiv8-empty")).unwrap();
    let json = dir.path().join("real.json");
    let mut c = et(&lib, &["eval", "real", "--data"]);
    c.arg(&data).arg("--json").arg(&json);
    let r = run_within(c, 120);
    assert!(
        !r.ok()
            && r.says("captiv8-empty left out")
            && r.says("no CSV files")
            && r.says("nothing could be scored"),
        "{}",
        r.text()
    );
    assert!(!json.exists());
}

#[test]
fn prune_keeps_the_index_of_the_models_promoted_in_the_library() {
    use crate::library_prune::{add_set, sets};
    use endotwin::store::{OpenMode, Store};
    let (lib, _src) = library_with_cases();
    // The library's own twin encoder: a copy of the shipped card under another version.
    let run_dir = shipped_captions_copy();
    let card = run_dir.path().join("captions.json");
    endotwin::model::weights::update_card(&card, |c| c.version = "run-7-own".into()).unwrap();
    endotwin::engine::promote::promote(lib.path(), &card, Some(7)).unwrap();
    {
        let mut store = Store::open(lib.path(), OpenMode::Existing).unwrap();
        let media: Vec<i64> = store
            .all_polyp_view_ids()
            .unwrap()
            .into_values()
            .flatten()
            .collect();
        add_set(&mut store, "captions", "run-7-own", &media);
        add_set(&mut store, "captions", "run-0-old", &media);
    }
    // Pruning against the shipped models only: the library's own version stays.
    let r = run(et(
        lib.path(),
        &[
            "library",
            "prune",
            "--apply",
            "--include-recent",
            "--models",
            endotwin::default_models_dir().to_str().unwrap(),
        ],
    ));
    assert!(r.ok() && r.says("library's own models"), "{}", r.text());
    let left: Vec<String> = sets(lib.path()).into_iter().map(|s| s.1).collect();
    assert_eq!(left, vec!["run-7-own".to_string()], "{}", r.text());
}

#[test]
fn the_librarys_promoted_models_are_never_written_over_and_a_damaged_one_is_not_demoted_to() {
    let (lib, _src) = library_with_cases();
    let run_dir = shipped_captions_copy();
    let card = run_dir.path().join("captions.json");
    endotwin::model::weights::update_card(&card, |c| c.version = "run-7-own".into()).unwrap();
    use endotwin::engine::promote;
    let p = promote::promote(lib.path(), &card, Some(7)).unwrap();
    let models = p.dir;
    let before = files(&models);
    for (command, target) in [
        (&["labels", "export", "--out"][..], "captions.json"),
        (&["contact-sheet", "--out"][..], "previous/captions.bpk"),
        (&["labels", "export", "--out"][..], "ACTIVE"),
    ] {
        let mut c = et(lib.path(), &["--force"]);
        c.args(command).arg(models.join(target));
        let r = run(c);
        assert!(
            !r.ok() && r.says("library's own file"),
            "{command:?} {target}: {}",
            r.text()
        );
    }
    assert_eq!(files(&models), before, "the library's models changed");
    // A damaged model to go back to: named, nothing moved.
    std::fs::write(models.join("previous/captions.bpk"), b"not weights").unwrap();
    let before = files(&models);
    let r = run(et(lib.path(), &["model", "demote", "captions"]));
    assert!(
        !r.ok() && r.says("previous/captions.bpk") && r.says("does not match"),
        "{}",
        r.text()
    );
    assert_eq!(files(&models), before);
    // `library check` looks at the library's models too; `info` names the folder it answers
    // with.
    let check = run(et(lib.path(), &["library", "check"]));
    assert!(
        !check.ok() && check.says("models: ") && check.says("previous/captions.bpk"),
        "{}",
        check.text()
    );
    let info = run(et(lib.path(), &["info"]));
    assert!(info.says("(the library's own"), "{}", info.text());
}

/// `import video` of a file that is no video, through an ffprobe that prints `probe` (its
/// JSON) and an "ffmpeg" that gives zero bytes for ever; asserts the library unchanged.
#[cfg(unix)]
pub(crate) fn import_with_an_endless_decoder(probe: &str) -> common::Ran {
    let (lib, src) = library_with_cases();
    let before = files(lib.path());
    let tools = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| crate::guards::script(&tools.path().join(name), text);
    write("ffprobe", &format!("#!/bin/sh\necho '{probe}'\n"));
    write("ffmpeg", "#!/bin/sh\nexec cat /dev/zero\n");
    let video = src.path().join("endless.mp4");
    std::fs::write(&video, b"\0\0\0\x18ftypmp42 not really").unwrap();
    let mut c = et(lib.path(), &["import", "video"]);
    c.arg(&video)
        .env("ENDOTWIN_FFMPEG", tools.path().join("ffmpeg"));
    let r = run_within(c, 60);
    assert_eq!(files(lib.path()), before, "{}", r.text());
    r
}

#[cfg(unix)]
#[test]
fn a_decoder_that_never_stops_is_stopped_past_the_frames_the_video_announces() {
    // A 3-frame 16 x 16 clip, announced; the "decoder" gives frames for ever.
    let r = import_with_an_endless_decoder(
        "{\"streams\":[{\"codec_name\":\"h264\",\"width\":16,\"height\":16,\"avg_frame_rate\":\"25/1\",\"nb_frames\":\"3\"}],\"format\":{\"duration\":\"0.12\"}}",
    );
    assert!(
        !r.ok() && r.says("more than 304 frames") && r.says("announces 3 frames"),
        "{}",
        r.text()
    );
}

#[test]
fn prompts_index_names_the_frames_it_leaves_out() {
    let (lib, _src) = library_with_cases();
    // A view's file swapped for another image's bytes: its hash no longer matches.
    let mut media = Vec::new();
    common::walk(&lib.path().join("media"), &mut media);
    media.sort();
    let (a, b) = (&media[0], &media[1]);
    std::fs::copy(b, a).unwrap();
    let swapped = a.file_name().unwrap().to_string_lossy().into_owned();
    let r = run(et(lib.path(), &["prompts", "index"]));
    assert!(
        !r.ok() && r.says("left out") && r.says(&swapped),
        "{}",
        r.text()
    );
}

#[test]
fn asked_for_data_and_models_that_are_not_there_are_named_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("unused");
    let missing = dir.path().join("nonexistent");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let text = dir.path().join("existing.txt");
    std::fs::write(&text, b"hello\n").unwrap();
    let cases: Vec<(Vec<&str>, &Path, &str)> = vec![
        (vec!["eval", "trust", "--real"], &missing, "not a folder"),
        (vec!["eval", "trust", "--real"], &empty, "no cvc-clinicdb*/"),
        (
            vec![
                "eval",
                "real",
                "--data",
                empty.to_str().unwrap(),
                "--models",
            ],
            &missing,
            "not a folder of model cards",
        ),
        (vec!["demo", "--out"], &text, "is not a folder"),
    ];
    for (args, path, says) in cases {
        let mut c = et(&lib, &args);
        c.arg(path);
        let r = run_within(c, 30);
        assert!(
            !r.ok() && r.says(says),
            "{args:?} {}: {}",
            path.display(),
            r.text()
        );
    }
    assert_eq!(std::fs::read(&text).unwrap(), b"hello\n");
}

#[test]
fn resuming_a_run_that_finished_every_epoch_is_refused_not_trained_again() {
    let (lib, _src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    // A finished run's model and its last checkpoint (epoch 2 of 2), as a run leaves them.
    std::fs::write(out.path().join("t.json"), b"{\"keep\": \"me\"}").unwrap();
    std::fs::write(out.path().join("t.bpk"), b"weights").unwrap();
    let checkpoints = out.path().join("t.checkpoints");
    std::fs::create_dir_all(checkpoints.join("epoch-002")).unwrap();
    std::fs::write(
        checkpoints.join("state.json"),
        b"{\"epoch\": 2, \"config\": {}}",
    )
    .unwrap();
    let before = files(out.path());
    let out_s = out.path().to_str().unwrap();
    let r = run(et(
        lib.path(),
        &[
            "train",
            "image-encoder",
            "--out",
            out_s,
            "--name",
            "t",
            "--epochs",
            "2",
            "--resume",
        ],
    ));
    assert!(
        !r.ok() && r.says("finished its 2 epochs") && r.says("nothing was trained"),
        "{}",
        r.text()
    );
    assert_eq!(files(out.path()), before);
}

#[cfg(unix)]
#[test]
fn a_decoder_that_closes_its_output_and_floods_its_error_pipe_is_stopped_in_bounded_memory() {
    let (lib, src) = library_with_cases();
    let before = files(lib.path());
    let tools = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| crate::guards::script(&tools.path().join(name), text);
    write(
        "ffprobe",
        "#!/bin/sh\necho '{\"streams\":[{\"codec_name\":\"h264\",\"width\":16,\"height\":16,\"avg_frame_rate\":\"25/1\",\"nb_frames\":\"3\"}],\"format\":{\"duration\":\"0.12\"}}'\n",
    );
    // No frame ever; an endless stream of decoder errors on stderr.
    write(
        "ffmpeg",
        "#!/bin/sh\nexec yes 'Error while decoding stream #0:0: Invalid data found' >&2\n",
    );
    let video = src.path().join("noisy.mp4");
    std::fs::write(&video, b"\0\0\0\x18ftypmp42 not really").unwrap();
    let mut c = std::process::Command::new("sh");
    // The import under a 2 GB address-space limit: an unbounded error buffer dies here.
    c.arg("-c")
        .arg("ulimit -v 2000000; exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_endotwin"))
        .arg("--backend")
        .arg("cpu")
        .arg("--library")
        .arg(lib.path())
        .args(["import", "video"])
        .arg(&video)
        .env("ENDOTWIN_FFMPEG", tools.path().join("ffmpeg"))
        .env("ENDOTWIN_TOOL_TIMEOUT_S", "3");
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("did not end within 3 s") && !r.says("memory allocation"),
        "{}",
        r.text()
    );
    assert_eq!(files(lib.path()), before);
}

#[test]
fn prune_runs_after_a_promote_and_a_demote_left_previous_empty() {
    let (lib, _src) = library_with_cases();
    let run_dir = shipped_captions_copy();
    let card = run_dir.path().join("captions.json");
    endotwin::model::weights::update_card(&card, |c| c.version = "run-7-own".into()).unwrap();
    use endotwin::engine::promote;
    promote::promote(lib.path(), &card, Some(7)).unwrap();
    promote::demote(lib.path(), "captions").unwrap();
    let r = run(et(
        lib.path(),
        &[
            "library",
            "prune",
            "--models",
            endotwin::default_models_dir().to_str().unwrap(),
        ],
    ));
    assert!(r.ok() && !r.says("holds no model card"), "{}", r.text());
}

#[test]
fn model_trust_refuses_a_fit_library_named_twice_and_a_validation_copy_of_it() {
    let (lib, _src) = library_with_cases();
    let copy = tempfile::tempdir().unwrap();
    let mut c = Command::new("cp");
    c.arg("-r")
        .arg(lib.path().join("library.sqlite"))
        .arg(lib.path().join("media"))
        .arg(copy.path());
    assert!(c.status().unwrap().success());
    let cards = shipped_captions_copy();
    let card = cards.path().join("captions.json");
    let before = std::fs::read(&card).unwrap();
    let twice = {
        let mut c = et(lib.path(), &["model", "trust"]);
        c.arg(&card).arg("--fit").arg(lib.path()).arg(lib.path());
        run_within(c, 60)
    };
    assert!(
        !twice.ok() && twice.says("named twice") && twice.says("nothing was changed"),
        "{}",
        twice.text()
    );
    let copied = {
        let mut c = et(lib.path(), &["model", "trust"]);
        c.arg(&card)
            .arg("--fit")
            .arg(lib.path())
            .arg("--validation")
            .arg(copy.path())
            .args(["--hold-out-every", "0"]);
        run_within(c, 60)
    };
    assert!(
        !copied.ok() && copied.says("of its images are in the fit libraries"),
        "{}",
        copied.text()
    );
    assert_eq!(std::fs::read(&card).unwrap(), before);
}

#[test]
fn another_librarys_database_under_another_name_and_its_media_are_never_written_over() {
    let (lib, _src) = library_with_cases();
    let (other, _src2) = library_with_cases();
    std::fs::rename(
        other.path().join("library.sqlite"),
        other.path().join("cases.sqlite"),
    )
    .unwrap();
    let before = files(other.path());
    for target in ["cases.sqlite", "cases.sqlite-wal", "media/zz.csv"] {
        let mut c = et(lib.path(), &["--force", "labels", "export", "--out"]);
        c.arg(other.path().join(target));
        let r = run(c);
        assert!(
            !r.ok() && r.says("library's own file"),
            "{target}: {}",
            r.text()
        );
    }
    assert_eq!(files(other.path()), before);
}

#[cfg(unix)]
#[test]
fn fifos_where_a_checkpoint_or_a_media_file_should_be_are_named_not_waited_on() {
    let (lib, _src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    std::fs::write(out.path().join("t.json"), b"{}").unwrap();
    std::fs::write(out.path().join("t.bpk"), b"w").unwrap();
    let checkpoints = out.path().join("t.checkpoints");
    std::fs::create_dir(&checkpoints).unwrap();
    let fifo = |p: &Path| assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
    fifo(&checkpoints.join("state.json"));
    let mut c = et(lib.path(), &["train", "image-encoder", "--out"]);
    c.arg(out.path())
        .args(["--name", "t", "--epochs", "2", "--resume"]);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("not a regular file") && r.says("state.json"),
        "{}",
        r.text()
    );
    // A media file replaced by a FIFO: said as such, not as changed bytes.
    let mut media = Vec::new();
    common::walk(&lib.path().join("media"), &mut media);
    media.sort();
    std::fs::remove_file(&media[0]).unwrap();
    fifo(&media[0]);
    let r = run_within(et(lib.path(), &["prompts", "index"]), 60);
    assert!(!r.ok() && r.says("is not a regular file"), "{}", r.text());
}

#[test]
fn model_trust_refuses_a_damaged_library() {
    let (lib, _src) = library_with_cases();
    crate::hostile::damage_an_index(&lib.path().join("library.sqlite"));
    let cards = shipped_captions_copy();
    let card = cards.path().join("captions.json");
    let before = std::fs::read(&card).unwrap();
    let mut c = et(lib.path(), &["model", "trust"]);
    c.arg(&card).arg("--fit").arg(lib.path());
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("damaged") && r.says("nothing was changed"),
        "{}",
        r.text()
    );
    assert_eq!(std::fs::read(&card).unwrap(), before);
}

#[test]
fn no_new_library_is_made_inside_a_librarys_promoted_models_folder() {
    let (lib, _src) = library_with_cases();
    let run_dir = shipped_captions_copy();
    let card = run_dir.path().join("captions.json");
    endotwin::model::weights::update_card(&card, |c| c.version = "run-7-own".into()).unwrap();
    let p = endotwin::engine::promote::promote(lib.path(), &card, Some(7)).unwrap();
    let before = files(&p.dir);
    let inside = p.dir.join("new");
    let mut c = et(&inside, &["demo", "--out"]);
    c.arg(&inside)
        .args(["--polyps", "3", "--videos", "0", "--capsule", "0"]);
    let r = run(c);
    assert!(
        !r.ok() && r.says("models/ folder of the library"),
        "{}",
        r.text()
    );
    assert_eq!(files(&p.dir), before);
}

#[test]
fn tracklets_with_a_models_folder_that_holds_no_card_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (lib, _src) = library_with_cases();
    let r = run(et(
        lib.path(),
        &[
            "tracklets",
            "V1",
            "--models",
            dir.path().join("nonexistent").to_str().unwrap(),
        ],
    ));
    assert!(
        !r.ok() && r.says("not a folder of model cards"),
        "{}",
        r.text()
    );
}

#[test]
fn a_checkpoint_damaged_on_disk_is_refused_at_resume_not_trained_on() {
    use burn::tensor::Device;
    use endotwin::train::Checkpoint;
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    let config = endotwin::model::unifier::UnifierConfig::new(8);
    let dir = tempfile::tempdir().unwrap();
    let fresh = || config.init(&device);
    let optimizer = || burn::optim::AdamWConfig::new().init();
    Checkpoint {
        model: fresh(),
        optimizer: optimizer(),
        epoch: 1,
    }
    .save(dir.path(), &config)
    .unwrap();
    assert!(Checkpoint::load(dir.path(), &config, fresh(), optimizer()).is_ok());
    // Same size, other bytes: the weights of the checkpoint are damaged.
    let model = dir.path().join("epoch-001/model.bpk");
    let mut bytes = std::fs::read(&model).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&model, bytes).unwrap();
    let Err(e) = Checkpoint::load(dir.path(), &config, fresh(), optimizer()) else {
        panic!("a damaged checkpoint was loaded");
    };
    assert!(
        e.to_string().contains("damaged on disk") && e.to_string().contains("model.bpk"),
        "{e}"
    );
}
