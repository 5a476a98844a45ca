//! Hostile round 6 (issue 43): each finding through the command line, refused by name with
//! nothing changed on disk, or said as it is.

use crate::common;
use crate::hostile::{library_with_cases, mkfifo};
use crate::store_safety::{files, run_within};

use std::path::Path;

/// `endotwin --library LIB ARGS...` on the CPU.
use crate::common::et;

/// N2: a library's database copied away under another name with nothing beside it (a
/// backup) was replaced by an export given --force.
#[test]
fn no_export_replaces_an_sqlite_database_even_with_force() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let backup = dir.path().join("backup.sqlite");
    std::fs::copy(lib.path().join("library.sqlite"), &backup).unwrap();
    let before = std::fs::read(&backup).unwrap();
    for args in [
        &["--force", "labels", "export", "--out"][..],
        &["--force", "contact-sheet", "--out"][..],
    ] {
        let mut c = et(lib.path(), args);
        c.arg(&backup);
        let r = run_within(c, 60);
        assert!(
            !r.ok() && r.says("an SQLite database") && r.says("nothing was written"),
            "{}",
            r.text()
        );
        assert_eq!(std::fs::read(&backup).unwrap(), before);
    }
}

/// N7: a library folder whose database is a link to another library's: an import wrote its
/// rows into the other library and its files beside the link.
#[test]
fn a_library_whose_database_is_a_link_is_refused_before_any_write() {
    let (lib, src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let linked = dir.path().join("linked");
    std::fs::create_dir(&linked).unwrap();
    std::os::unix::fs::symlink(
        lib.path().join("library.sqlite"),
        linked.join("library.sqlite"),
    )
    .unwrap();
    let before = files(lib.path());
    let images = src.path().join("more");
    common::png(&images.join("x.png"), 24, 16, 77);
    let mut c = et(&linked, &["import", "images"]);
    c.arg(&images);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("the database is a link to") && r.says("open that library's own folder"),
        "{}",
        r.text()
    );
    assert_eq!(files(lib.path()), before);
    assert!(!linked.join("media").exists());
}

/// N26: `eval twins --record` wrote its figures into the card of a library's promoted twin
/// encoder, which only promote and demote may change.
#[test]
fn eval_twins_record_never_rewrites_a_librarys_promoted_card() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    std::fs::create_dir(&lib).unwrap();
    let run_dir = dir.path().join("run");
    std::fs::create_dir(&run_dir).unwrap();
    crate::hostile::copy_shipped_captions(&run_dir);
    endotwin::engine::promote::promote(&lib, &run_dir.join("captions.json"), Some(1)).unwrap();
    let models = endotwin::engine::promote::active_dir(&lib);
    let card = models.join("twin-image.json");
    let before = std::fs::read(&card).unwrap();
    let mut c = et(
        &lib,
        &["eval", "twins", "--polyps", "12", "--record", "--models"],
    );
    c.arg(&models);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("twin-image.json") && r.says("the library's own file"),
        "{}",
        r.text()
    );
    assert_eq!(std::fs::read(&card).unwrap(), before);
}

/// N34: `model promote` on a PostgreSQL library made `./postgres:/HOST/models/` in the current
/// folder, shared by every database of that server (another library's active model changed).
#[test]
fn promote_and_demote_on_a_server_library_are_refused_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    std::fs::create_dir(&run_dir).unwrap();
    crate::hostile::copy_shipped_captions(&run_dir);
    use endotwin::engine::promote;
    let url = Path::new("postgres://endotwin@127.0.0.1:1/lt_pg");
    let err = promote::promote(url, &run_dir.join("captions.json"), Some(1)).unwrap_err();
    assert!(
        err.to_string()
            .contains("a library on a server keeps no models of its own")
            && err.to_string().contains("nothing was changed"),
        "{err}"
    );
    let err = promote::demote(url, "captions").unwrap_err();
    assert!(err.to_string().contains("a library on a server"), "{err}");
    // Nothing was made in the current folder; a server library reads the shipped models.
    assert!(!Path::new("postgres:").exists());
    assert_eq!(promote::models_dir_for(url), endotwin::default_models_dir());
}

/// N24 and N25: `eval captions` dropped held-out frames whose files changed without a word,
/// and fitted its baselines on the very frames it scored them on.
#[test]
fn eval_captions_names_unreadable_frames_and_refuses_baselines_fitted_on_the_test_frames() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("caps");
    let mut c = et(
        &lib,
        &[
            "demo",
            "--polyps",
            "1",
            "--videos",
            "0",
            "--capsule",
            "6",
            "--background",
            "0",
        ],
    );
    c.arg("--out").arg(&lib);
    let r = run_within(c, 120);
    assert!(r.ok(), "{}", r.text());
    let mut c = et(&lib, &["eval", "captions", "--held-out"]);
    c.arg(&lib).arg("--baseline-train").arg(&lib);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("the baselines would be scored on frames they were fitted on"),
        "{}",
        r.text()
    );
    // One capsule frame's file changed: evaluated without it, and said so by name.
    let store = endotwin::store::Store::open(&lib, endotwin::store::OpenMode::Existing).unwrap();
    let frames = endotwin::captions::data::capsule_frames(&store).unwrap();
    let changed = store.media_path(&frames[0].1);
    drop(store);
    let mut bytes = std::fs::read(&changed).unwrap();
    bytes.rotate_left(5);
    std::fs::write(&changed, bytes).unwrap();
    let mut c = et(
        &lib,
        &["eval", "captions", "--train-frames", "20", "--held-out"],
    );
    c.arg(&lib);
    let r = run_within(c, 300);
    assert!(
        r.ok() && r.says("left out 1 capsule frame(s) whose file could not be read"),
        "{}",
        r.text()
    );
}

/// N15 and N16: a JSONL line giving one label twice took the last value without a word, and a
/// JSONL file whose first line was broken was called a broken COCO JSON.
#[test]
fn jsonl_labels_name_a_label_given_twice_and_a_broken_line_by_its_number() {
    let (lib, _src) = library_with_cases();
    let c = et(
        lib.path(),
        &["labels", "export", "--format", "jsonl", "--out", "-"],
    );
    let r = run_within(c, 60);
    assert!(r.ok(), "{}", r.text());
    let first: serde_json::Value =
        serde_json::from_str(r.text().lines().find(|l| l.starts_with('{')).unwrap()).unwrap();
    let code = first["polyp"].as_str().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let twice = dir.path().join("twice.jsonl");
    std::fs::write(
        &twice,
        format!(
            "{{\"polyp\":\"{code}\",\"labels\":{{\"histology\":\"adenoma\",\"histology\":\"hyperplastic\"}}}}\n"
        ),
    )
    .unwrap();
    let mut c = et(lib.path(), &["labels", "import"]);
    c.arg(&twice);
    let r = run_within(c, 60);
    assert!(
        r.says("the label `histology` is given twice"),
        "{}",
        r.text()
    );
    assert!(!r.says("-> hyperplastic"), "{}", r.text());
    let broken = dir.path().join("broken.jsonl");
    std::fs::write(
        &broken,
        format!(
            "{{\"polyp\":\"{code}\",\"labels\":{{\"size_mm\":1e400}}}}\n{{\"polyp\":\"{code}\",\"labels\":{{\"size_mm\":1e400}}}}\n"
        ),
    )
    .unwrap();
    let mut c = et(lib.path(), &["labels", "import"]);
    c.arg(&broken);
    let r = run_within(c, 60);
    assert!(
        !r.says("COCO") && r.says("line 1, column") && r.says("JSONL"),
        "{}",
        r.text()
    );
}

/// N37 and N38: a FIFO where SQLite keeps the database's journal hung every command; the
/// library's pending-media journal as a FIFO hung the next write, as a link to /dev/zero it
/// was read until memory ran out (17.8 GB in 30 s).
#[test]
fn fifos_and_devices_where_a_librarys_journals_belong_are_named_not_waited_on() {
    let (lib, src) = library_with_cases();
    let before = files(lib.path());
    let journal = lib.path().join("library.sqlite-journal");
    mkfifo(&journal);
    for args in [&["info"][..], &["labels", "export", "--out", "-"][..]] {
        let r = run_within(et(lib.path(), args), 30);
        assert!(
            !r.ok() && r.says("library.sqlite-journal is not a regular file"),
            "{}",
            r.text()
        );
    }
    std::fs::remove_file(&journal).unwrap();
    let pending = lib.path().join("media-pending.journal");
    let images = src.path().join("more");
    common::png(&images.join("x.png"), 24, 16, 78);
    for make in [(|p: &Path| mkfifo(p)) as fn(&Path), |p: &Path| {
        std::os::unix::fs::symlink("/dev/zero", p).unwrap()
    }] {
        make(&pending);
        let mut c = et(lib.path(), &["import", "images"]);
        c.arg(&images);
        let r = run_within(c, 30);
        assert!(
            !r.ok() && r.says("media-pending.journal") && r.says("not a regular file"),
            "{}",
            r.text()
        );
        let r = run_within(et(lib.path(), &["library", "check"]), 30);
        assert!(
            r.says("media-pending.journal: not a regular file"),
            "{}",
            r.text()
        );
        std::fs::remove_file(&pending).unwrap();
    }
    assert_eq!(files(lib.path()), before);
}

/// A copy of the shipped caption model (card and record) in `dir/run`: a run's output.
fn run_output(dir: &Path) -> std::path::PathBuf {
    crate::hostile::copy_shipped_captions(&dir.join("run"))
}

/// N49: `model promote` on a damaged library changed its models/ and then said "nothing was
/// written" (the index rebuild was refused).
#[test]
fn promote_into_a_damaged_library_changes_nothing() {
    let (lib, _src) = library_with_cases();
    crate::hostile::damage_an_index(&lib.path().join("library.sqlite"));
    let dir = tempfile::tempdir().unwrap();
    let card = run_output(dir.path());
    let err = endotwin::engine::promote::promote(lib.path(), &card, Some(1)).unwrap_err();
    assert!(
        err.to_string().contains("damaged") && err.to_string().contains("were not changed"),
        "{err}"
    );
    assert!(!lib.path().join("models").exists());
}

/// N59: two demotes at once left a library with no twin encoder at all; promote and demote
/// now hold a lock, so a second one at the same time is refused.
#[test]
fn a_promote_or_demote_while_another_holds_the_models_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    std::fs::create_dir(&lib).unwrap();
    let card = run_output(dir.path());
    use endotwin::engine::promote;
    promote::promote(&lib, &card, Some(1)).unwrap();
    // Another process's promote or demote in progress: its lock is held.
    let held = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lib.join(".models.lock"))
        .unwrap();
    held.lock().unwrap();
    let before = files(&lib);
    let err = promote::demote(&lib, "captions").unwrap_err();
    assert!(
        err.to_string().contains("another promote or demote"),
        "{err}"
    );
    assert_eq!(files(&lib), before);
    drop(held);
    promote::demote(&lib, "captions").unwrap();
}

/// N56: a stray file already under an image's content-hash name was trusted: the import said
/// "1 media added" and the library held 8 bytes of garbage for it.
#[test]
fn an_import_replaces_a_stray_file_under_its_images_name() {
    let (lib, src) = library_with_cases();
    let images = src.path().join("new");
    let png = images.join("n.png");
    common::png(&png, 50, 40, 91);
    let hash = endotwin::store::content_hash(&std::fs::read(&png).unwrap());
    let stray = lib
        .path()
        .join("media")
        .join(&hash[..2])
        .join(format!("{hash}.png"));
    std::fs::create_dir_all(stray.parent().unwrap()).unwrap();
    std::fs::write(&stray, b"garbage\n").unwrap();
    let mut c = et(lib.path(), &["import", "images"]);
    c.arg(&images);
    let r = run_within(c, 60);
    assert!(r.ok(), "{}", r.text());
    assert_eq!(std::fs::read(&stray).unwrap(), std::fs::read(&png).unwrap());
    let r = run_within(et(lib.path(), &["library", "check"]), 60);
    assert!(r.ok() && r.says("whole"), "{}", r.text());
}

/// N42 and N50: `eval phantom` dropped views whose files changed and still printed figures;
/// evaluations on a damaged held-out library reported figures without a word.
#[test]
fn evaluations_refuse_a_held_out_library_that_is_damaged_or_whose_views_changed() {
    let (lib, _src) = library_with_cases();
    let mut media = Vec::new();
    common::walk(&lib.path().join("media"), &mut media);
    media.sort();
    let mut bytes = std::fs::read(&media[0]).unwrap();
    bytes.rotate_left(3);
    std::fs::write(&media[0], bytes).unwrap();
    let mut c = et(lib.path(), &["eval", "phantom", "--held-out"]);
    c.arg(lib.path());
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("no longer holds the image"),
        "{}",
        r.text()
    );

    let (damaged, _src2) = library_with_cases();
    crate::hostile::damage_an_index(&damaged.path().join("library.sqlite"));
    for args in [
        &["eval", "phantom"][..],
        &["eval", "captions", "--frames", "4"][..],
    ] {
        let mut c = et(damaged.path(), args);
        c.arg("--held-out").arg(damaged.path());
        let r = run_within(c, 60);
        assert!(!r.ok() && r.says("is damaged"), "{}", r.text());
    }
}

/// N40, N20 and N22: a tracklet evaluation tuned on its own held-out library; two boxes got
/// a wrong reason; a library without polyps was sent to `index` again.
#[test]
fn overlap_boxes_and_an_empty_library_get_the_right_reason() {
    let (lib, src) = library_with_cases();
    let mut c = et(lib.path(), &["eval", "tracklets", "--held-out"]);
    c.arg(lib.path()).arg("--validation").arg(lib.path());
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("thresholds and probes would be chosen on the frames they are scored on"),
        "{}",
        r.text()
    );
    let image = src.path().join("base/A/1.png");
    let mut c = et(lib.path(), &["twins"]);
    c.arg(&image).args(["--box", "1,1,10,10,2,2,10,10"]);
    let r = run_within(c, 60);
    assert!(!r.ok() && r.says("--box takes one box"), "{}", r.text());
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    let mut c = et(
        &empty,
        &[
            "demo",
            "--polyps",
            "0",
            "--videos",
            "0",
            "--capsule",
            "0",
            "--background",
            "0",
        ],
    );
    c.arg("--out").arg(&empty);
    assert!(run_within(c, 60).ok());
    assert!(run_within(et(&empty, &["index"]), 60).ok());
    let mut c = et(&empty, &["twins"]);
    c.arg(&image);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("no polyps with views to retrieve"),
        "{}",
        r.text()
    );
}

/// N10, N62 and N67: `library copy` carried a broken model without a word; a fit library
/// named beside its own copy counted every image twice; two `--compare` rows under one label.
#[test]
fn copies_of_broken_models_and_of_fit_libraries_and_twice_given_labels_are_refused() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let card = run_output(dir.path());
    endotwin::engine::promote::promote(lib.path(), &card, Some(1)).unwrap();
    let record = lib.path().join("models/twin-image.bpk");
    let bytes = std::fs::read(&record).unwrap();
    std::fs::write(&record, &bytes[..bytes.len() / 2]).unwrap();
    let dest = dir.path().join("copy");
    let mut c = et(lib.path(), &["library", "copy"]);
    c.arg(lib.path()).arg(&dest);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("twin-image.bpk") && r.says("nothing was copied"),
        "{}",
        r.text()
    );
    assert!(!dest.exists());
    std::fs::write(&record, &bytes).unwrap();

    let copy = dir.path().join("same");
    std::fs::create_dir(&copy).unwrap();
    let mut c = std::process::Command::new("cp");
    c.arg("-r")
        .arg(lib.path().join("library.sqlite"))
        .arg(lib.path().join("media"))
        .arg(&copy);
    assert!(c.status().unwrap().success());
    let before = std::fs::read(&card).unwrap();
    let mut c = et(lib.path(), &["model", "trust"]);
    c.arg(&card)
        .arg("--fit")
        .arg(lib.path())
        .arg("--fit")
        .arg(&copy);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("are in another fit library"),
        "{}",
        r.text()
    );
    assert_eq!(std::fs::read(&card).unwrap(), before);

    let shipped = endotwin::default_models_dir();
    let mut c = et(lib.path(), &["eval", "twins", "--compare"]);
    c.arg(format!("x={}", shipped.display()))
        .arg("--compare")
        .arg(format!("x={}", shipped.display()));
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("--compare x= is given twice"),
        "{}",
        r.text()
    );
}

/// A PNG of `width` x `height` 16-bit RGBA pixels: its header, the start of its data, its end.
pub(crate) fn png_header_only(width: u32, height: u32) -> Vec<u8> {
    fn crc(bytes: &[u8]) -> u32 {
        let mut c = 0xffff_ffffu32;
        for &b in bytes {
            c ^= b as u32;
            for _ in 0..8 {
                c = if c & 1 == 1 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
        }
        !c
    }
    let chunk = |kind: &[u8], data: &[u8]| {
        let mut out = (data.len() as u32).to_be_bytes().to_vec();
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc(&body).to_be_bytes());
        out
    };
    let mut ihdr = width.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[16, 6, 0, 0, 0]);
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend(chunk(b"IHDR", &ihdr));
    png.extend(chunk(b"IDAT", &[0x78, 0x9c]));
    png.extend(chunk(b"IEND", &[]));
    png
}

/// N74: three 268-megapixel 16-bit views of one twin query took 8 GB; an image that would
/// take more than 1 GiB decoded is refused from its header.
#[test]
fn an_image_that_would_take_more_than_a_gibibyte_decoded_is_refused_from_its_header() {
    let (lib, src) = library_with_cases();
    let big = src.path().join("big.png");
    std::fs::write(&big, png_header_only(12_000, 12_000)).unwrap();
    let mut c = et(lib.path(), &["twins"]);
    c.arg(&big);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("too large: 12000x12000") && r.says("134 of 16-bit RGBA"),
        "{}",
        r.text()
    );
}

/// N65: promote took the run's card on trust: another model copied over the run's output was
/// promoted under the run's name.
#[test]
fn promote_refuses_a_run_whose_card_was_replaced_since() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let card = run_output(dir.path());
    let mut store =
        endotwin::store::Store::open(lib.path(), endotwin::store::OpenMode::Existing).unwrap();
    let card_text = card.display().to_string();
    let run = store
        .write(|tx| {
            let run = endotwin::store::start_run(tx, None, "captions", "{}")?;
            endotwin::store::link_run_model(
                tx,
                run,
                ("captions", "run-1-made-here", "caption_model"),
                "{}",
                &card_text,
            )?;
            endotwin::store::finish_run(tx, run, "finished")?;
            Ok::<_, endotwin::store::StoreError>(run)
        })
        .unwrap();
    drop(store);
    // The shipped card sits where the run's output was: not the model the run saved.
    let err = endotwin::engine::promote::promote(lib.path(), &card, Some(run)).unwrap_err();
    assert!(
        err.to_string()
            .contains("the run's output was replaced since")
            && err.to_string().contains("run-1-made-here"),
        "{err}"
    );
    assert!(!lib.path().join("models").exists());
}

/// N30 and N66: `train twin-backbone` found a bad checkpoint, or a damaged library, only after
/// encoding every view (about 27 s on a small library, minutes on a real one), and left a
/// checkpoint folder behind on the damaged one.
#[test]
fn train_twin_backbone_refuses_a_bad_checkpoint_or_a_damaged_library_before_encoding() {
    let Some(backbone) = common::pretrained("mobilenetv2_imagenet_features.safetensors") else {
        return;
    };
    let (lib, _src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    let checkpoints = out.path().join("t.checkpoints");
    std::fs::create_dir(&checkpoints).unwrap();
    mkfifo(&checkpoints.join("state.json"));
    let mut c = et(lib.path(), &["train", "twin-backbone", "--backbone"]);
    c.arg(&backbone)
        .arg("--out")
        .arg(out.path())
        .args(["--name", "t", "--epochs", "2", "--resume"]);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("state.json") && r.says("not a regular file") && !r.says("encoding"),
        "{}",
        r.text()
    );
    crate::hostile::damage_an_index(&lib.path().join("library.sqlite"));
    let fresh = out.path().join("fresh");
    let mut c = et(lib.path(), &["train", "twin-backbone", "--backbone"]);
    c.arg(&backbone)
        .arg("--out")
        .arg(&fresh)
        .args(["--name", "t", "--epochs", "1"]);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("is damaged") && !r.says("encoding"),
        "{}",
        r.text()
    );
    assert!(!fresh.join("t.checkpoints").exists());
}

/// N69: a library whose `media` is a file: an import failed with a raw "Not a directory".
#[test]
fn an_import_into_a_library_whose_media_is_a_file_says_so_and_writes_nothing() {
    let (lib, src) = library_with_cases();
    let media = lib.path().join("media");
    std::fs::rename(&media, lib.path().join("media.away")).unwrap();
    std::fs::write(&media, b"x").unwrap();
    let db = std::fs::read(lib.path().join("library.sqlite")).unwrap();
    let images = src.path().join("more");
    common::png(&images.join("m.png"), 24, 16, 93);
    let mut c = et(lib.path(), &["import", "images"]);
    c.arg(&images);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("not a folder, where the library keeps its images"),
        "{}",
        r.text()
    );
    assert_eq!(
        std::fs::read(lib.path().join("library.sqlite")).unwrap(),
        db
    );
}
