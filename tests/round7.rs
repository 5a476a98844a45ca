//! Hostile round 7 (issue 43): each finding through the command line (or the engine API a
//! panel uses), refused by name with nothing changed on disk, or said as it is.

use crate::common;
use crate::hostile::{library_with_cases, mkfifo};
use crate::store_safety::{files, run_within};

use std::path::Path;

/// `endotwin --library LIB ARGS...` on the CPU.
use crate::common::et;

/// A finished run #N of `lib` whose output is a copy of the shipped caption model under
/// version `version` (in `dir`): what `model promote N` promotes.
pub(crate) fn caption_run(lib: &Path, dir: &Path, version: &str) -> i64 {
    let card = crate::hostile::copy_shipped_captions(&dir.join(version));
    endotwin::model::weights::update_card(&card, |c| c.version = version.to_string()).unwrap();
    let mut store = endotwin::store::Store::open(lib, endotwin::store::OpenMode::Existing).unwrap();
    let card_text = card.display().to_string();
    store
        .write(|tx| {
            let run = endotwin::store::start_run(tx, None, "captions", "{}")?;
            endotwin::store::link_run_model(
                tx,
                run,
                ("captions", version, "caption_model"),
                "{}",
                &card_text,
            )?;
            endotwin::store::finish_run(tx, run, "finished")?;
            Ok::<_, endotwin::store::StoreError>(run)
        })
        .unwrap()
}

/// N1 and N29: a database with a second name (a hard link) and a media/ that is a link to
/// another library's: an import wrote its rows into one library and its images into another.
#[test]
fn a_database_or_media_folder_shared_with_another_library_is_refused() {
    let (lib, src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let before = files(lib.path());
    let hard = dir.path().join("hard");
    std::fs::create_dir(&hard).unwrap();
    std::fs::hard_link(
        lib.path().join("library.sqlite"),
        hard.join("library.sqlite"),
    )
    .unwrap();
    let mut c = et(&hard, &["import", "images"]);
    c.arg(src.path().join("base/A"));
    let r = run_within(c, 60);
    assert!(!r.ok() && r.says("hard links"), "{}", r.text());
    std::fs::remove_file(hard.join("library.sqlite")).unwrap();
    assert!(!hard.join("media").exists());

    let linked = dir.path().join("linked");
    std::fs::create_dir(&linked).unwrap();
    std::os::unix::fs::symlink(lib.path().join("media"), linked.join("media")).unwrap();
    let images = src.path().join("new");
    common::png(&images.join("n.png"), 20, 12, 91);
    let mut c = et(&linked, &["import", "images"]);
    c.arg(&images);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("media/ is a link to another library's images"),
        "{}",
        r.text()
    );
    assert_eq!(files(lib.path()), before);
}

/// N75 and N68: promote pushed a damaged active card into previous/ (in place of the model
/// demote goes back to), and a promote cut short by a full disk left no active model.
#[test]
fn promote_keeps_the_active_and_previous_models_whole_when_it_cannot_finish() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let first = caption_run(lib.path(), dir.path(), "test-a");
    let r = run_within(
        et(lib.path(), &["model", "promote", &first.to_string()]),
        120,
    );
    assert!(r.ok(), "{}", r.text());
    let models = lib.path().join("models");
    let second = caption_run(lib.path(), dir.path(), "test-b");

    // A full disk (files limited to 1 MiB; the record is 2.5 MB): nothing changes.
    let before = files(&models);
    let mut c = std::process::Command::new("sh");
    c.arg("-c")
        .arg("trap '' XFSZ; ulimit -f 1024; exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_endotwin"))
        .arg("--backend")
        .arg("cpu")
        .arg("--library")
        .arg(lib.path())
        .args(["model", "promote", &second.to_string()]);
    let r = run_within(c, 120);
    assert!(!r.ok() && r.says("captions"), "{}", r.text());
    assert_eq!(files(&models), before, "{}", r.text());

    // The active card damaged: refused, previous/ (the shipped model) kept.
    std::fs::write(models.join("captions.json"), "{}").unwrap();
    let before = files(lib.path());
    let r = run_within(
        et(lib.path(), &["model", "promote", &second.to_string()]),
        120,
    );
    assert!(
        !r.ok()
            && r.says("the library's active captions is damaged")
            && r.says("nothing was changed"),
        "{}",
        r.text()
    );
    assert_eq!(files(lib.path()), before);
    let r = run_within(et(lib.path(), &["library", "check"]), 120);
    assert!(!r.ok() && r.says("captions.json"), "{}", r.text());
}

/// N81, N82, N62, N63: two runs into one --out/--name, two demos into one folder; a FIFO
/// where promote keeps its lock, or under an image's temporary name.
#[test]
fn concurrent_writers_of_one_output_are_refused_and_fifos_in_their_way_never_block() {
    let (lib, src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    // Another run holds --out/--name.
    let out = dir.path().join("runs");
    std::fs::create_dir(&out).unwrap();
    let held = std::fs::File::create(out.join(".c1.lock")).unwrap();
    held.lock().unwrap();
    let mut c = et(
        lib.path(),
        &[
            "train", "captions", "--epochs", "1", "--name", "c1", "--out",
        ],
    );
    c.arg(&out);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("another run is writing") && r.says("nothing was trained"),
        "{}",
        r.text()
    );
    assert!(!out.join("c1.json").exists());
    drop(held);

    // Another demo holds the folder.
    let demo = dir.path().join("demo");
    std::fs::create_dir(&demo).unwrap();
    let held = std::fs::File::open(&demo).unwrap();
    held.lock().unwrap();
    let mut c = et(lib.path(), &["demo", "--polyps", "2", "--out"]);
    c.arg(&demo);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("another `demo` is writing into this folder"),
        "{}",
        r.text()
    );
    assert_eq!(std::fs::read_dir(&demo).unwrap().count(), 0);
    drop(held);

    // A FIFO where promote and demote keep their lock.
    mkfifo(&lib.path().join(".models.lock"));
    let r = run_within(et(lib.path(), &["model", "demote", "captions"]), 30);
    assert!(!r.ok() && r.says("not a regular file"), "{}", r.text());
    std::fs::remove_file(lib.path().join(".models.lock")).unwrap();

    // A FIFO under an image's temporary name: removed, the image imported.
    let images = src.path().join("fifo-partial");
    common::png(&images.join("p.png"), 20, 12, 93);
    let bytes = std::fs::read(images.join("p.png")).unwrap();
    let hash = endotwin::store::content_hash(&bytes);
    let sub = lib.path().join("media").join(&hash[..2]);
    std::fs::create_dir_all(&sub).unwrap();
    mkfifo(&sub.join(format!("{hash}.partial")));
    let mut c = et(lib.path(), &["import", "images"]);
    c.arg(&images);
    let r = run_within(c, 60);
    assert!(r.ok() && r.says("1 media added"), "{}", r.text());
}

/// N61: `captions describe` answered with the shipped caption model after `model promote`
/// said the run's was the library's. N31, N8, N2: `--json -` wrote a file named `-`; `--json`
/// and `--confusion` naming one file replaced the report; a URL's `password=` was shown.
#[test]
fn describe_reads_the_librarys_model_and_outputs_are_named_once() {
    let (lib, src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let run = caption_run(lib.path(), dir.path(), "test-a");
    let r = run_within(et(lib.path(), &["model", "promote", &run.to_string()]), 120);
    assert!(r.ok(), "{}", r.text());
    // The library's caption record damaged: describe must be reading it to say so.
    let record = lib.path().join("models/captions.bpk");
    let mut bytes = std::fs::read(&record).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&record, bytes).unwrap();
    let mut c = et(lib.path(), &["captions", "describe"]);
    c.arg(src.path().join("base/A/1.png"));
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says(&lib.path().join("models").display().to_string()),
        "{}",
        r.text()
    );

    let here = tempfile::tempdir().unwrap();
    let mut c = et(lib.path(), &["twins", "--json", "-"]);
    c.arg(src.path().join("base/A/1.png"))
        .current_dir(here.path());
    let r = run_within(c, 60);
    assert!(!r.ok() && r.says("give a file name"), "{}", r.text());
    assert!(!here.path().join("-").exists());
    let same = here.path().join("same.out");
    let mut c = et(lib.path(), &["eval", "captions", "--frames", "8", "--json"]);
    c.arg(&same).arg("--confusion").arg(&same);
    let r = run_within(c, 60);
    assert!(!r.ok() && r.says("both name"), "{}", r.text());
    assert!(!same.exists());
    assert_eq!(
        endotwin::store::library_name(Path::new(
            "postgres://u@h/db?password=s3cret&sslmode=require"
        )),
        "postgres://u@h/db?password=***&sslmode=require"
    );
}

/// R8 (round 6 N74): every query view was kept at full size (five 133-megapixel views took
/// 6.1 GB); a view over 16 megapixels is reduced, its box with it, before the next is read.
#[test]
fn a_huge_query_view_is_reduced_with_its_box() {
    use endotwin::model::preprocess::{Focus, MAX_QUERY_PIXELS, bounded};
    let big = image::DynamicImage::ImageRgba16(image::ImageBuffer::new(6000, 4000));
    let (small, focus) = bounded(big, Focus::Box([600.0, 400.0, 3000.0, 2000.0]));
    let pixels = small.width() as u64 * small.height() as u64;
    assert!(
        pixels <= MAX_QUERY_PIXELS && pixels > MAX_QUERY_PIXELS * 9 / 10,
        "{pixels}"
    );
    let s = small.width() as f32 / 6000.0;
    let Focus::Box(b) = focus else { panic!() };
    assert!(
        (b[0] - 600.0 * s).abs() < 1.0 && (b[2] - 3000.0 * s).abs() < 1.0,
        "{b:?}"
    );
    let frame = image::DynamicImage::ImageRgb8(image::RgbImage::new(1920, 1080));
    let (same, _) = bounded(frame, Focus::FieldOfView);
    assert_eq!((same.width(), same.height()), (1920, 1080));
}

/// R24 (round 6 N50): read commands on a damaged database said only "database disk image is
/// malformed: Error code 11".
#[test]
fn a_damaged_database_is_said_in_words_by_every_command() {
    let (lib, src) = library_with_cases();
    let db = lib.path().join("library.sqlite");
    // One table's root page zeroed (a torn write): the library opens, its reads fail.
    let root: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT rootpage FROM sqlite_master WHERE name = 'polyps'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let mut bytes = std::fs::read(&db).unwrap();
    let page = u16::from_be_bytes([bytes[16], bytes[17]]) as usize;
    let at = (root as usize - 1) * page;
    bytes[at..at + page].fill(0);
    std::fs::write(&db, &bytes).unwrap();
    let image = src.path().join("base/A/1.png");
    for args in [
        vec!["labels", "export", "--out", "-"],
        vec!["twins", image.to_str().unwrap()],
    ] {
        let r = run_within(et(lib.path(), &args), 60);
        assert!(
            !r.ok() && r.says("damaged") && r.says("nothing was changed"),
            "{args:?}: {}",
            r.text()
        );
    }
}

/// N39, N87, N16: an evaluation of polyps on a held-out library without any printed tables of
/// 0.000; `--compare-by head` with the head's twin encoder missing was answered by colour
/// histograms with exit 0; `--box NaN,...` was told to give "a positive width".
#[test]
fn empty_held_out_libraries_missing_encoders_and_nan_boxes_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    let images = dir.path().join("imgs");
    common::png(&images.join("a.png"), 20, 12, 95);
    let r = common::import(&empty, "images", &images, &[]);
    assert!(r.ok(), "{}", r.text());
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let mut c = et(&empty, &["eval", "twins", "--polyps", "12", "--models"]);
    c.arg(&models).arg("--held-out").arg(&empty);
    let r = run_within(c, 120);
    assert!(!r.ok() && r.says("has no polyps"), "{}", r.text());

    let lib = dir.path().join("videos");
    common::video_library(&lib, 2);
    let head_only = dir.path().join("head-only");
    std::fs::create_dir(&head_only).unwrap();
    for ext in ["json", "bpk"] {
        std::fs::copy(
            models.join(format!("tracklet-head.{ext}")),
            head_only.join(format!("tracklet-head.{ext}")),
        )
        .unwrap();
    }
    let mut c = et(&lib, &["tracklets", "--compare-by", "head", "--models"]);
    c.arg(&head_only);
    let r = run_within(c, 120);
    assert!(
        !r.ok() && r.says("reads the digital-twin frame encoder"),
        "{}",
        r.text()
    );

    let mut c = et(&lib, &["twins", "--box=NaN,1,10,10"]);
    c.arg(images.join("a.png"));
    let r = run_within(c, 60);
    assert!(!r.ok() && r.says("finite"), "{}", r.text());
}

/// N57: two copies at once into one new PostgreSQL library: the second failed with a raw
/// "duplicate key". It is told another copy filled the library while it waited (on SQLite,
/// `library copy` also holds the folder: tests/round6b.rs).
#[test]
fn two_copies_into_one_new_server_library_leave_one_and_tell_the_other() {
    use crate::library_engines::{Engine, Place};
    let Some(target) = Place::fresh(Engine::Postgres) else {
        return;
    };
    let (lib, _src) = library_with_cases();
    let results: Vec<Result<(), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (from, to) = (lib.path(), &target);
                s.spawn(move || {
                    let source = endotwin::store::Store::open_read_only(from).unwrap();
                    let mut into = to
                        .open(endotwin::store::OpenMode::CreateIfMissing)
                        .map_err(|e| e.to_string())?;
                    endotwin::store::copy_library(&source, &mut into, &|_, _| {})
                        .map(drop)
                        .map_err(|e| e.to_string())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    let refused = results.iter().find_map(|r| r.clone().err()).unwrap();
    assert!(
        refused.contains("another copy filled this library")
            || refused.contains("already holds a library"),
        "{refused}"
    );
}

/// N58: `model report --card` scored a run's model on the library the run trained on (the
/// help says "never"); only `--run N` was checked.
#[test]
fn a_report_by_card_refuses_the_library_its_run_trained_on() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    caption_run(lib.path(), dir.path(), "test-a");
    let card = dir.path().join("test-a/captions.json");
    let mut c = et(lib.path(), &["model", "report", "--card"]);
    c.arg(&card).arg("--held-out").arg(lib.path());
    let r = run_within(c, 120);
    assert!(!r.ok() && r.says("trained"), "{}", r.text());
    assert!(!dir.path().join("test-a/captions.report.json").exists());
}

/// N33: WebP and GIF files in an image folder were passed over uncounted.
#[test]
fn images_of_a_kind_endotwin_does_not_read_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let images = dir.path().join("odd");
    common::png(&images.join("a.png"), 20, 12, 97);
    std::fs::write(images.join("b.webp"), b"RIFF\0\0\0\0WEBPVP8 ").unwrap();
    std::fs::write(images.join("c.gif"), b"GIF89a").unwrap();
    let lib = dir.path().join("lib");
    let r = common::import(&lib, "images", &images, &[]);
    assert!(
        r.ok() && r.says("1 media added") && r.says("2 skipped"),
        "{}",
        r.text()
    );
    assert!(
        r.says("b.webp: a WebP image") && r.says("c.gif: a GIF image"),
        "{}",
        r.text()
    );
}

/// N5: a pathology.csv column `import multiview` does not read was ignored without a word.
#[test]
fn a_pathology_column_multiview_does_not_read_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let mv = dir.path().join("mv");
    common::png(&mv.join("p1/a.png"), 20, 12, 99);
    std::fs::write(
        mv.join("pathology.csv"),
        "polyp,histology,colour\np1,adenoma,red\n",
    )
    .unwrap();
    let r = common::import(&dir.path().join("lib"), "multiview", &mv, &[]);
    assert!(
        r.ok() && r.says("the column `colour` is not read") && r.says("1 polyps"),
        "{}",
        r.text()
    );
}
