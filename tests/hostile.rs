//! Hostile and odd input against the importers, the library and the model cards, through the
//! command line as a user meets them. For each: the exit status, a message naming the item,
//! and the library (rows and media files) unchanged wherever nothing should have changed.

use crate::common;

use common::{import, invalid_rows, png, run, state};
use endotwin::store::{OpenMode, Store, TargetKind};
use std::path::Path;

/// A library holding one multi-view polyp (`base-A`, adenoma, Vienna 3, 8 mm) and one
/// captioned capsule image: something a bad import could damage.
pub(crate) fn library_with_cases() -> (tempfile::TempDir, tempfile::TempDir) {
    let lib = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let base = src.path().join("base");
    png(&base.join("A/1.png"), 24, 16, 1);
    png(&base.join("A/2.png"), 24, 16, 2);
    std::fs::write(
        base.join("pathology.csv"),
        "polyp,histology,vienna_class,size_mm\nA,adenoma,3,8\n",
    )
    .unwrap();
    let r = import(lib.path(), "multiview", &base, &[]);
    assert!(r.ok(), "{}", r.text());
    let caps = src.path().join("caps");
    png(&caps.join("img/1.png"), 8, 8, 40);
    std::fs::write(
        caps.join("p1.csv"),
        "Patient ID,name,capture_time,image_path,video_path,image_label\n1,a,00:00:01,img/1.png,v.mp4,ulcer\n",
    )
    .unwrap();
    let r = import(lib.path(), "captiv8", &caps, &[]);
    assert!(r.ok(), "{}", r.text());
    (lib, src)
}

/// Damages the database `db` as a torn page or a bad copy would: an index that no longer
/// matches its table (its integrity check then fails).
pub(crate) fn damage_an_index(db: &Path) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch(
        "PRAGMA writable_schema = ON;
         UPDATE sqlite_master SET sql = 'CREATE INDEX media_examination ON media(width)'
          WHERE name = 'media_examination';
         PRAGMA writable_schema = OFF;",
    )
    .unwrap();
}

/// Copies the shipped caption model (card and record) into the folder `dir` (made if need
/// be), as a run's output to change freely; returns the card's path.
pub(crate) fn copy_shipped_captions(dir: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    for file in ["captions.json", "captions.bpk"] {
        std::fs::copy(endotwin::default_models_dir().join(file), dir.join(file)).unwrap();
    }
    dir.join("captions.json")
}

/// Makes a FIFO at `path`.
pub(crate) fn mkfifo(path: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo {}", path.display());
}

/// Runs an import that must refuse: non-zero exit, every `names` in its message, and the
/// library byte-identical.
fn refused(lib: &Path, layout: &str, path: &Path, extra: &[&str], names: &[&str]) {
    let before = state(lib);
    let r = import(lib, layout, path, extra);
    assert!(!r.ok(), "expected a refusal:\n{}", r.text());
    for n in names {
        assert!(r.says(n), "the message does not name '{n}':\n{}", r.text());
    }
    assert_eq!(before, state(lib), "the library changed:\n{}", r.text());
}

#[cfg(unix)]
fn symlink(target: &Path, link: &Path) {
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, link).unwrap();
}

// ---- 1. paths stay inside the folder the user named ----------------------------------------

#[test]
fn real_colon_video_names_cannot_climb_out_or_be_absolute() {
    let (lib, _src) = library_with_cases();
    let outside = tempfile::tempdir().unwrap();
    png(&outside.path().join("secret_frames/x_1.png"), 8, 8, 9);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("rc");
    std::fs::create_dir_all(&root).unwrap();
    let abs = outside.path().join("secret");
    std::fs::write(
        root.join("video_info.csv"),
        format!(
            "unique_video_name,fps\n../{}/secret,25\n{},25\n",
            outside.path().file_name().unwrap().to_string_lossy(),
            abs.display()
        ),
    )
    .unwrap();
    std::fs::write(root.join("lesion_info.csv"), "unique_object_id,size\n").unwrap();
    refused(
        lib.path(),
        "real-colon",
        &root,
        &[],
        &["../", "secret", "plain name"],
    );
}

#[cfg(unix)]
#[test]
fn manifests_and_folders_do_not_follow_links_out_of_the_import_folder() {
    let (lib, _src) = library_with_cases();
    let outside = tempfile::tempdir().unwrap();
    png(&outside.path().join("o.png"), 8, 8, 77);
    png(&outside.path().join("dir/o2.png"), 8, 8, 78);

    // EndoFinder-style JSONL naming a link that leads outside.
    let d = tempfile::tempdir().unwrap();
    symlink(&outside.path().join("o.png"), &d.path().join("v/link.png"));
    std::fs::write(
        d.path().join("ef.jsonl"),
        r#"{"id": "P1", "img_paths": ["v/link.png"], "ground_truth": "adenoma"}"#,
    )
    .unwrap();
    refused(
        lib.path(),
        "endofinder",
        &d.path().join("ef.jsonl"),
        &[],
        &["v/link.png", "outside"],
    );

    // COCO naming the same link.
    std::fs::write(
        d.path().join("t.json"),
        r#"{"images": [{"id": 1, "file_name": "v/link.png", "frame_id": 0, "sequence_id": "s"}], "annotations": []}"#,
    )
    .unwrap();
    refused(
        lib.path(),
        "coco",
        &d.path().join("t.json"),
        &[],
        &["v/link.png", "outside"],
    );

    // CAPTIV8 row naming it.
    let c = tempfile::tempdir().unwrap();
    symlink(&outside.path().join("o.png"), &c.path().join("img/l.png"));
    std::fs::write(
        c.path().join("p.csv"),
        "Patient ID,name,capture_time,image_path,video_path,image_label\n9,a,0,img/l.png,v,polyp\n",
    )
    .unwrap();
    refused(
        lib.path(),
        "captiv8",
        c.path(),
        &[],
        &["img/l.png", "outside"],
    );

    // A polyp folder that is a link to a folder outside.
    let m = tempfile::tempdir().unwrap();
    symlink(&outside.path().join("dir"), &m.path().join("set/P9"));
    refused(
        lib.path(),
        "multiview",
        &m.path().join("set"),
        &[],
        &["P9", "outside"],
    );

    // A plain folder import whose only image is a link outside.
    let f = tempfile::tempdir().unwrap();
    symlink(&outside.path().join("o.png"), &f.path().join("pics/o.png"));
    refused(
        lib.path(),
        "images",
        &f.path().join("pics"),
        &[],
        &["o.png", "outside"],
    );
}

#[cfg(unix)]
#[test]
fn a_symlink_loop_is_reported_once_and_creates_no_empty_examinations() {
    let lib = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("loopy");
    png(&root.join("a/one.png"), 8, 8, 1);
    symlink(&root.join("a"), &root.join("a/again"));
    let r = import(lib.path(), "images", &root, &[]);
    assert!(r.ok(), "{}", r.text());
    assert_eq!(r.stderr.matches("symlink loop").count(), 1, "{}", r.text());
    assert!(r.says("again"), "{}", r.text());
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let stats = store.stats().unwrap();
    assert_eq!((stats.examinations, stats.media), (1, 1));
}

#[test]
fn a_model_name_cannot_write_outside_the_models_folder() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("a/b/models");
    let mut c = common::endotwin(&d.path().join("lib"));
    c.args(["model", "import-hf-clip"])
        .arg(d.path().join("whatever.safetensors"))
        .arg("--out")
        .arg(&out)
        .args(["--name", "../../x"]);
    let r = run(c);
    assert!(
        !r.ok() && r.says("'../../x' cannot name a model"),
        "{}",
        r.text()
    );
    assert!(!d.path().join("a/x.json").exists() && !d.path().join("a/x.bpk").exists());
}

// ---- 2. duplicate ids never overwrite clinical labels ---------------------------------------

#[test]
fn two_pathology_rows_that_disagree_refuse_the_polyp_and_name_both_rows() {
    let (lib, _src) = library_with_cases();
    let d = tempfile::tempdir().unwrap();
    let set = d.path().join("dup");
    png(&set.join("Q/1.png"), 16, 16, 5);
    std::fs::write(
        set.join("pathology.csv"),
        "polyp,histology\nQ,adenoma\nQ,hyperplastic\n",
    )
    .unwrap();
    refused(
        lib.path(),
        "multiview",
        &set,
        &[],
        &["rows 2 and 3", "'Q'", "pathology.csv"],
    );
}

#[test]
fn two_endofinder_lines_with_one_id_refuse_the_polyp() {
    let (lib, _src) = library_with_cases();
    let d = tempfile::tempdir().unwrap();
    png(&d.path().join("x/1.png"), 16, 16, 6);
    png(&d.path().join("x/2.png"), 16, 16, 7);
    std::fs::write(
        d.path().join("ef.jsonl"),
        "{\"id\": \"7\", \"img_paths\": [\"x/1.png\"], \"ground_truth\": \"adenoma\"}\n\
         {\"id\": \"7\", \"img_paths\": [\"x/2.png\"], \"ground_truth\": \"hyperplastic\"}\n",
    )
    .unwrap();
    refused(
        lib.path(),
        "endofinder",
        &d.path().join("ef.jsonl"),
        &[],
        &["lines 1, 2", "'7'"],
    );
}

#[test]
fn real_colon_lesion_rows_that_disagree_import_no_pathology_for_that_lesion() {
    let lib = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("rc");
    png(&root.join("001-001_frames/001-001_1.png"), 32, 32, 1);
    std::fs::create_dir_all(root.join("001-001_annotations")).unwrap();
    std::fs::write(
        root.join("001-001_annotations/001-001_1.xml"),
        "<annotation><object><name>lesion</name><unique_id>001-001_1</unique_id>\
         <bndbox><xmin>2</xmin><ymin>2</ymin><xmax>20</xmax><ymax>20</ymax></bndbox></object></annotation>",
    )
    .unwrap();
    std::fs::write(
        root.join("video_info.csv"),
        "unique_video_name,fps\n001-001,30\n",
    )
    .unwrap();
    std::fs::write(
        root.join("lesion_info.csv"),
        "unique_object_id,size [mm],histology\n001-001_1,4,AD\n001-001_1,4,HP\n",
    )
    .unwrap();
    let r = import(lib.path(), "real-colon", &root, &[]);
    assert!(r.ok(), "{}", r.text());
    assert!(
        r.says("rows 2 and 3 both describe lesion 001-001_1"),
        "{}",
        r.text()
    );
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let p = &store.polyps().unwrap()[0];
    assert_eq!((p.histology.as_deref(), p.size_mm), (None, None));
    assert_eq!(
        store
            .video_boxes(store.videos().unwrap()[0].id)
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn a_label_the_library_holds_is_not_replaced_by_an_import_only_updated_with_the_flag() {
    let (lib, src) = library_with_cases();
    // The same polyp (same folder name) with other pathology; and the capsule image again
    // with another caption.
    let base = src.path().join("base");
    std::fs::write(
        base.join("pathology.csv"),
        "polyp,histology,vienna_class,size_mm\nA,hyperplastic,1,8\n",
    )
    .unwrap();
    refused(
        lib.path(),
        "multiview",
        &base,
        &[],
        &["polyp base-A", "histology is 'adenoma'", "'hyperplastic'"],
    );
    let caps = src.path().join("caps");
    std::fs::write(
        caps.join("p1.csv"),
        "Patient ID,name,capture_time,image_path,video_path,image_label\n1,a,00:00:01,img/1.png,v.mp4,normal\n",
    )
    .unwrap();
    refused(
        lib.path(),
        "captiv8",
        &caps,
        &[],
        &["img/1.png", "caption is 'ulcer'", "'normal'"],
    );

    // Through the explicit flag: applied, one audit row per changed label.
    let r = import(lib.path(), "multiview", &base, &["--update-labels"]);
    assert!(r.ok() && r.says("updated"), "{}", r.text());
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let p = &store.polyps().unwrap()[0];
    assert_eq!(
        (p.histology.as_deref(), p.vienna_class),
        (Some("hyperplastic"), Some(1))
    );
    let audit = store.audit_history(TargetKind::Polyp, p.id).unwrap();
    let changed: Vec<(&str, Option<&str>, Option<&str>)> = audit
        .iter()
        .map(|a| {
            (
                a.key.as_str(),
                a.old_value.as_deref(),
                a.new_value.as_deref(),
            )
        })
        .collect();
    assert!(
        changed.contains(&("histology", Some("adenoma"), Some("hyperplastic"))),
        "{changed:?}"
    );
    assert!(
        changed.contains(&("vienna_class", Some("3"), Some("1"))),
        "{changed:?}"
    );
    assert_eq!(changed.len(), 2, "{changed:?}");
    assert!(audit.iter().all(|a| a.who.contains("--update-labels")));
}

#[test]
fn importing_the_same_source_twice_changes_nothing() {
    let (lib, src) = library_with_cases();
    let d = src.path().join("video");
    for f in 0..3 {
        png(&d.join(format!("f{f}.png")), 16, 16, 90 + f as u8);
    }
    let images: Vec<String> = (0..3)
        .map(|f| {
            format!(
                r#"{{"id": {f}, "file_name": "f{f}.png", "frame_id": {f}, "sequence_id": "s"}}"#
            )
        })
        .collect();
    std::fs::write(
        d.join("t.json"),
        format!(
            r#"{{"images": [{}], "annotations": [{{"image_id": 1, "bbox": [1, 1, 5, 5], "identity_id": "p"}}]}}"#,
            images.join(",")
        ),
    )
    .unwrap();
    let r = import(lib.path(), "coco", &d.join("t.json"), &[]);
    assert!(r.ok(), "{}", r.text());
    for (layout, path) in [
        ("multiview", src.path().join("base")),
        ("captiv8", src.path().join("caps")),
        ("coco", d.join("t.json")),
    ] {
        let before = state(lib.path());
        let r = import(lib.path(), layout, &path, &[]);
        assert!(r.ok() && r.says("did not change"), "{layout}: {}", r.text());
        assert_eq!(
            before,
            state(lib.path()),
            "{layout} re-import changed the library"
        );
    }
    // The same frames brought in again as plain images, from another folder: the examination
    // that import would make holds nothing new, so it is not made, and the database file is
    // not touched at all (it was rewritten, 47 bytes, with the same rows).
    let again = src.path().join("again");
    std::fs::create_dir_all(&again).unwrap();
    for f in 0..3 {
        let name = format!("f{f}.png");
        std::fs::copy(d.join(&name), again.join(&name)).unwrap();
    }
    let before = state(lib.path());
    let db = lib.path().join("library.sqlite");
    let bytes = std::fs::read(&db).unwrap();
    let r = import(lib.path(), "images", &again, &[]);
    assert!(r.ok() && r.says("did not change"), "{}", r.text());
    assert!(
        std::fs::read(&db).unwrap() == bytes,
        "the database file changed"
    );
    assert_eq!(before, state(lib.path()));
}

// ---- 3. boxes that cannot exist are refused ------------------------------------------------

#[test]
fn impossible_coco_boxes_and_duplicate_frames_are_refused_by_name() {
    let lib = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    for f in 0..4 {
        png(&d.path().join(format!("f{f}.png")), 40, 30, f as u8);
    }
    std::fs::write(
        d.path().join("t.json"),
        r#"{"images": [
            {"id": 0, "file_name": "f0.png", "frame_id": 0, "sequence_id": "s"},
            {"id": 1, "file_name": "f1.png", "frame_id": 1, "sequence_id": "s"},
            {"id": 2, "file_name": "f2.png", "frame_id": 2, "sequence_id": "s"},
            {"id": 3, "file_name": "f3.png", "frame_id": 2, "sequence_id": "s"}],
          "annotations": [
            {"image_id": 0, "bbox": [5, 5, -4, 6], "identity_id": "p"},
            {"image_id": 0, "bbox": [5, 5, 6, 0], "identity_id": "p"},
            {"image_id": 1, "bbox": [100, 5, 6, 6], "identity_id": "p"},
            {"image_id": 1, "bbox": [1e39, 5, 6, 6], "identity_id": "p"},
            {"image_id": 1, "bbox": [-1, 2, 10, 10], "identity_id": "p"}]}"#,
    )
    .unwrap();
    let r = import(lib.path(), "coco", &d.path().join("t.json"), &[]);
    assert!(r.ok(), "{}", r.text());
    for reason in [
        "has no area",
        "reaches outside the 40x30 image",
        "frame 2 is given 2 times (",
    ] {
        assert!(r.says(reason), "no '{reason}':\n{}", r.text());
    }
    assert_eq!(r.stderr.matches("has no area").count(), 2, "{}", r.text());
    assert_eq!(
        r.stderr.matches("reaches outside").count(),
        2,
        "{}",
        r.text()
    );
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let v = &store.videos().unwrap()[0];
    assert_eq!(v.frame_count, 2, "both copies of frame 2 refused");
    // The box one pixel past the edge is clipped, not refused.
    let boxes = store.video_boxes(v.id).unwrap();
    assert_eq!(boxes.len(), 1);
    assert_eq!(
        [boxes[0].x, boxes[0].y, boxes[0].w, boxes[0].h],
        [0.0, 2.0, 9.0, 10.0]
    );
    assert!(invalid_rows(lib.path()).is_empty());
}

#[test]
fn a_voc_box_with_xmin_above_xmax_is_refused_naming_its_file() {
    let lib = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("rc");
    png(&root.join("002-001_frames/002-001_1.png"), 32, 32, 3);
    std::fs::create_dir_all(root.join("002-001_annotations")).unwrap();
    std::fs::write(
        root.join("002-001_annotations/002-001_1.xml"),
        "<annotation><object><unique_id>002-001_1</unique_id>\
         <bndbox><xmin>30</xmin><ymin>2</ymin><xmax>10</xmax><ymax>20</ymax></bndbox></object></annotation>",
    )
    .unwrap();
    std::fs::write(root.join("video_info.csv"), "unique_video_name\n002-001\n").unwrap();
    std::fs::write(root.join("lesion_info.csv"), "unique_object_id\n").unwrap();
    let r = import(lib.path(), "real-colon", &root, &[]);
    assert!(
        r.ok() && r.says("002-001_1.xml") && r.says("xmin 30"),
        "{}",
        r.text()
    );
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    assert!(
        store
            .videos()
            .iter()
            .flatten()
            .all(|v| store.video_boxes(v.id).unwrap().is_empty())
    );
}

// ---- 4. model cards never panic --------------------------------------------------------------

/// A shipped image encoder (`tracklet-frames`: the ViT; `twin-image`: the ImageNet backbone)
/// copied as `twin-image` with its card edited.
fn edited_card(from: &str, edit: impl FnOnce(&mut serde_json::Value)) -> tempfile::TempDir {
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(
        models.join(format!("{from}.bpk")),
        d.path().join("twin-image.bpk"),
    )
    .unwrap();
    let mut card: serde_json::Value =
        serde_json::from_slice(&std::fs::read(models.join(format!("{from}.json"))).unwrap())
            .unwrap();
    edit(&mut card);
    std::fs::write(
        d.path().join("twin-image.json"),
        serde_json::to_vec(&card).unwrap(),
    )
    .unwrap();
    d
}

#[test]
fn a_card_with_an_edited_or_impossible_config_is_refused_not_a_panic() {
    let (lib, src) = library_with_cases();
    let view = src.path().join("base/A/1.png");
    let twins = |models: &Path| {
        let mut c = common::endotwin(lib.path());
        c.arg("twins").arg(&view).arg("--models").arg(models);
        run(c)
    };
    // Edited after saving: the config checksum catches it.
    let d = edited_card("tracklet-frames", |c| c["config"]["heads"] = 0.into());
    let r = twins(d.path());
    assert!(
        !r.ok() && r.says("twin-image.json") && r.says("edited"),
        "{}",
        r.text()
    );
    // Without a checksum (an older card), each field is still checked.
    for (field, value, says) in [
        ("heads", 0, "heads is 0"),
        ("patch_size", 0, "patch_size is 0"),
        ("heads", 7, "does not split over 7 heads"),
        ("image_size", 1_000_000, "image_size is 1000000"),
    ] {
        let d = edited_card("tracklet-frames", |c| {
            c["config"][field] = value.into();
            c.as_object_mut().unwrap().remove("config_sha256");
        });
        let r = twins(d.path());
        assert!(
            !r.ok() && r.says("twin-image.json") && r.says(says),
            "{field}: {}",
            r.text()
        );
    }
    // The backbone encoder's config too: a layer MobileNetV2 does not have.
    let d = edited_card("twin-image", |c| {
        c["config"]["backbone"]["taps"] = serde_json::json!([3, 99]);
        c.as_object_mut().unwrap().remove("config_sha256");
    });
    let r = twins(d.path());
    assert!(
        !r.ok() && r.says("twin-image.json") && r.says("tapped layer 99 does not exist"),
        "{}",
        r.text()
    );
}

// ---- 5. no silent success ------------------------------------------------------------------

#[test]
fn an_import_whose_every_item_is_bad_exits_non_zero_and_creates_nothing() {
    let (lib, _src) = library_with_cases();
    let d = tempfile::tempdir().unwrap();
    // Kvasir-SEG whose images all lack masks.
    png(&d.path().join("kv/images/a.png"), 8, 8, 1);
    std::fs::create_dir_all(d.path().join("kv/masks")).unwrap();
    refused(
        lib.path(),
        "kvasir-seg",
        &d.path().join("kv"),
        &[],
        &["a.png", "no mask"],
    );
    // A folder of files that are not images.
    std::fs::create_dir_all(d.path().join("junk")).unwrap();
    std::fs::write(d.path().join("junk/a.jpg"), b"not a jpeg").unwrap();
    std::fs::write(d.path().join("junk/b.png"), b"").unwrap();
    refused(
        lib.path(),
        "images",
        &d.path().join("junk"),
        &[],
        &["a.jpg", "b.png", "nothing imported"],
    );
}

// ---- 6. a locked library waits, and never keeps a file it does not reference -----------------

#[test]
fn an_import_waits_for_a_locked_library_and_a_timed_out_one_leaves_no_file() {
    let (lib, src) = library_with_cases();
    let d = src.path().join("new");
    png(&d.join("n.png"), 8, 8, 123);
    // Holds the write lock until `release` says so (or for `seconds`).
    let hold = |seconds: f64| {
        let path = lib.path().to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let mut store = Store::open(&path, OpenMode::Existing).unwrap();
            store
                .write(|_| -> Result<(), endotwin::store::StoreError> {
                    tx.send(()).unwrap();
                    let _ = released.recv_timeout(std::time::Duration::from_secs_f64(seconds));
                    Ok(())
                })
                .unwrap();
        });
        rx.recv().unwrap();
        (t, release)
    };
    // Held until the import has given up (it waits 5 s), however slow the machine: refused,
    // no row, no file.
    let (t, release) = hold(600.0);
    let before = state(lib.path());
    let r = import(lib.path(), "images", &d, &[]);
    release.send(()).unwrap();
    t.join().unwrap();
    assert!(!r.ok() && r.says("busy"), "{}", r.text());
    assert_eq!(before, state(lib.path()));
    // Held 1.5 s: the import waits and lands.
    let (t, _release) = hold(1.5);
    let r = import(lib.path(), "images", &d, &[]);
    t.join().unwrap();
    assert!(r.ok() && r.says("1 media added"), "{}", r.text());
}

#[test]
fn a_crashed_writes_files_are_swept_and_files_it_did_not_write_are_kept() {
    let (lib, src) = library_with_cases();
    // What a kill -9 between writing a file and committing its row leaves behind: the file,
    // its `.partial` copy, and the pending journal naming it (written before the file).
    let hash = "ff".repeat(32);
    let crashed = format!("media/ff/{hash}.png");
    std::fs::create_dir_all(lib.path().join("media/ff")).unwrap();
    std::fs::write(lib.path().join(&crashed), b"left behind").unwrap();
    std::fs::write(lib.path().join(format!("media/ff/{hash}.partial")), b"half").unwrap();
    std::fs::write(
        lib.path().join(endotwin::store::PENDING_JOURNAL),
        format!("{crashed}\n"),
    )
    .unwrap();
    // A file no row names and no journal names (a restored backup's newer image, a file a
    // person put there): EndoTwin did not write it in an unfinished write, so it stays.
    let foreign = lib.path().join("media/ee/ee00someone-elses.png");
    std::fs::create_dir_all(foreign.parent().unwrap()).unwrap();
    std::fs::write(&foreign, b"not ours to delete").unwrap();
    png(&src.path().join("more/m.png"), 8, 8, 55);
    let r = import(lib.path(), "images", &src.path().join("more"), &[]);
    assert!(r.ok(), "{}", r.text());
    assert!(!lib.path().join(&crashed).exists());
    assert!(!lib.path().join(format!("media/ff/{hash}.partial")).exists());
    assert!(endotwin::store::pending_journals(lib.path()).is_empty());
    assert_eq!(std::fs::read(&foreign).unwrap(), b"not ours to delete");
    assert!(invalid_rows(lib.path()).is_empty());
}

// ---- 7. large valid images are accepted; too large ones say so -------------------------------

#[test]
fn a_valid_14000_pixel_png_imports_and_a_larger_one_is_too_large_not_corrupt() {
    let lib = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    let big = d.path().join("big/huge.png");
    std::fs::create_dir_all(big.parent().unwrap()).unwrap();
    image::GrayImage::from_pixel(14_000, 14_000, image::Luma([90]))
        .save(&big)
        .unwrap();
    let r = import(lib.path(), "images", big.parent().unwrap(), &[]);
    assert!(r.ok() && r.says("1 media added"), "{}", r.text());
    let wide = d.path().join("wide/w.png");
    std::fs::create_dir_all(wide.parent().unwrap()).unwrap();
    image::GrayImage::from_pixel(40_000, 2, image::Luma([1]))
        .save(&wide)
        .unwrap();
    let r = import(lib.path(), "images", wide.parent().unwrap(), &[]);
    assert!(
        !r.ok() && r.says("w.png") && r.says("too large: 40000x2"),
        "{}",
        r.text()
    );
    assert!(!r.says("corrupt"), "{}", r.text());
}

// ---- 8. smaller ones --------------------------------------------------------------------------

#[test]
fn twins_refuses_k_zero_and_names_an_unreadable_query_file() {
    let (lib, src) = library_with_cases();
    let mut c = common::endotwin(lib.path());
    c.args(["twins", "--k", "0"])
        .arg(src.path().join("base/A/1.png"));
    let r = run(c);
    assert!(!r.ok() && r.says("--k 0"), "{}", r.text());
    let bad = src.path().join("broken.png");
    std::fs::write(&bad, b"\x89PNG\r\n\x1a\nnope").unwrap();
    let mut c = common::endotwin(lib.path());
    c.arg("twins").arg(&bad);
    let r = run(c);
    assert!(!r.ok() && r.says("broken.png"), "{}", r.text());
}

// ---- the zoo: odd files of every kind never panic and never damage the library ---------------

#[test]
fn a_zoo_of_odd_inputs_is_refused_or_imported_cleanly() {
    let (lib, _src) = library_with_cases();
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    // Empty manifests and zero-byte images.
    std::fs::write(p.join("empty.json"), b"").unwrap();
    std::fs::write(p.join("empty.jsonl"), b"").unwrap();
    std::fs::create_dir_all(p.join("zero")).unwrap();
    std::fs::write(p.join("zero/z.png"), b"").unwrap();
    // A JSON nested a million deep.
    let deep = format!("{}{}", "[".repeat(1_000_000), "]".repeat(1_000_000));
    std::fs::write(p.join("deep.json"), &deep).unwrap();
    std::fs::write(p.join("deep.jsonl"), &deep).unwrap();
    // A CSV of a million columns.
    std::fs::create_dir_all(p.join("wide")).unwrap();
    std::fs::write(p.join("wide/p.csv"), "a,".repeat(1_000_000)).unwrap();
    // A huge sparse file named .jpg.
    std::fs::create_dir_all(p.join("sparse")).unwrap();
    let f = std::fs::File::create(p.join("sparse/s.jpg")).unwrap();
    f.set_len(8 << 30).unwrap();
    // An XML with an entity expansion ("billion laughs").
    let rc = p.join("rc");
    png(&rc.join("003-001_frames/003-001_1.png"), 16, 16, 3);
    std::fs::create_dir_all(rc.join("003-001_annotations")).unwrap();
    std::fs::write(
        rc.join("003-001_annotations/003-001_1.xml"),
        "<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\"><!ENTITY lol2 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">]>\
         <annotation><object><unique_id>&lol2;</unique_id><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>5</xmax><ymax>5</ymax></bndbox></object></annotation>",
    )
    .unwrap();
    std::fs::write(rc.join("video_info.csv"), "unique_video_name\n003-001\n").unwrap();
    std::fs::write(rc.join("lesion_info.csv"), "unique_object_id\n").unwrap();
    // A non-UTF-8 file name.
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::OsStr::from_bytes(b"bad\xffname.png");
        png(&p.join("latin").join(name), 8, 8, 201);
    }

    let before = state(lib.path());
    for (layout, path, names) in [
        ("coco", p.join("empty.json"), vec!["empty.json"]),
        ("endofinder", p.join("empty.jsonl"), vec!["empty.jsonl"]),
        ("images", p.join("zero"), vec!["z.png"]),
        ("coco", p.join("deep.json"), vec!["deep.json", "recursion"]),
        ("endofinder", p.join("deep.jsonl"), vec!["deep.jsonl"]),
        ("captiv8", p.join("wide"), vec!["p.csv"]),
        ("images", p.join("sparse"), vec!["s.jpg", "too large"]),
    ] {
        let r = import(lib.path(), layout, &path, &[]);
        assert!(
            !r.ok(),
            "{layout} {}: expected a refusal\n{}",
            path.display(),
            r.text()
        );
        for n in names {
            assert!(r.says(n), "{layout}: no '{n}'\n{}", r.text());
        }
        assert_eq!(
            before,
            state(lib.path()),
            "{layout} {} changed the library",
            path.display()
        );
    }
    // The entity is not expanded: the object is refused or kept with the literal text, and
    // the library holds only valid rows.
    let r = import(lib.path(), "real-colon", &rc, &[]);
    assert!(r.code.is_some(), "{}", r.text());
    assert!(!r.says("lollollol"), "{}", r.text());
    #[cfg(unix)]
    {
        let r = import(lib.path(), "images", &p.join("latin"), &[]);
        assert!(r.ok() && r.says("1 media added"), "{}", r.text());
    }
    assert!(
        invalid_rows(lib.path()).is_empty(),
        "{:?}",
        invalid_rows(lib.path())
    );
}

#[test]
fn csvs_with_a_byte_order_mark_and_crlf_lines_read_like_plain_ones() {
    let lib = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    let set = d.path().join("bom");
    png(&set.join("B/1.png"), 16, 16, 9);
    std::fs::write(
        set.join("pathology.csv"),
        "\u{feff}polyp,histology,size_mm\r\nB,sessile serrated,6\r\n",
    )
    .unwrap();
    let r = import(lib.path(), "multiview", &set, &[]);
    assert!(r.ok(), "{}", r.text());
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let p = &store.polyps().unwrap()[0];
    assert_eq!(
        (p.histology.as_deref(), p.size_mm),
        (Some("sessile serrated"), Some(6.0))
    );
}

#[cfg(unix)]
#[test]
fn a_read_only_source_folder_imports_and_a_read_only_library_refuses_by_name() {
    use std::os::unix::fs::PermissionsExt;
    let lib = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    let ro = d.path().join("ro");
    png(&ro.join("a.png"), 8, 8, 4);
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let r = import(lib.path(), "images", &ro, &[]);
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(r.ok(), "{}", r.text());
    let db = lib.path().join("library.sqlite");
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    png(&d.path().join("more/b.png"), 8, 8, 5);
    let before = state(lib.path());
    let r = import(lib.path(), "images", &d.path().join("more"), &[]);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(!r.ok() && r.says("read-only"), "{}", r.text());
    assert_eq!(before, state(lib.path()));

    // `chmod a-w` on the library's folder: read-only even for root (who may write anyway),
    // and reading it leaves no -wal or -shm file behind.
    let folder = |mode| std::fs::set_permissions(lib.path(), std::fs::Permissions::from_mode(mode));
    let names = || {
        let mut n: Vec<String> = std::fs::read_dir(lib.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    };
    let listed = names();
    folder(0o555).unwrap();
    let info = run({
        let mut c = crate::common::endotwin(lib.path());
        c.arg("info");
        c
    });
    let r = import(lib.path(), "images", &d.path().join("more"), &[]);
    let after = names();
    folder(0o755).unwrap();
    assert!(info.ok(), "{}", info.text());
    assert!(!r.ok() && r.says("read-only"), "{}", r.text());
    assert_eq!(after, listed, "files appeared in a read-only library");
    assert_eq!(before, state(lib.path()));
}
