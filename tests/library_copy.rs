//! `endotwin library copy FROM TO` (issue #46): a library moved from SQLite to PostgreSQL and
//! back keeps every label, audit row and image, as its exports and checks show.

use crate::common::{endotwin, run};
use crate::library_engines::{Engine, Place};
use endotwin::store::{OpenMode, Store, TargetKind};
use std::path::Path;

fn export(library: &Path, format: &str) -> String {
    let ran = run({
        let mut c = endotwin(library);
        c.args(["labels", "export", "--format", format, "--out", "-"]);
        c
    });
    assert!(ran.ok(), "{}", ran.text());
    ran.stdout
}

fn copy(from: &Path, to: &Path) -> crate::common::Ran {
    run({
        let mut c = endotwin(from);
        c.args(["library", "copy"]).arg(from).arg(to);
        c
    })
}

#[test]
fn a_library_copied_to_postgresql_and_back_exports_the_same_labels() {
    let Some(server) = Place::fresh(Engine::Postgres) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sqlite = dir.path().join("lib");
    let made = run({
        let mut c = endotwin(&sqlite);
        c.args(["demo", "--out"]).arg(&sqlite).args([
            "--polyps",
            "5",
            "--views",
            "4",
            "--videos",
            "1",
            "--frames-per-video",
            "6",
            "--capsule",
            "3",
            "--size",
            "64",
        ]);
        c
    });
    assert!(made.ok(), "{}", made.text());
    // A reviewer's corrections travel with their audit rows.
    {
        let mut store = Store::open(&sqlite, OpenMode::Existing).unwrap();
        let polyp = store.polyps().unwrap()[0].id;
        store
            .set_label(
                "dr. a",
                TargetKind::Polyp,
                polyp,
                "histology",
                Some("carcinoma"),
            )
            .unwrap();
        store
            .set_label("dr. b", TargetKind::Polyp, polyp, "size_mm", Some("7.5"))
            .unwrap();
    }

    let there = copy(&sqlite, &server.location);
    assert!(there.ok(), "{}", there.text());
    assert!(there.says("every row compared"), "{}", there.text());
    let back = dir.path().join("back");
    let home = copy(&server.location, &back);
    assert!(home.ok(), "{}", home.text());

    for format in ["csv", "jsonl", "coco"] {
        let original = export(&sqlite, format);
        assert!(original.lines().count() > 1, "{format}: {original}");
        assert_eq!(
            export(&server.location, format),
            original,
            "{format} on PostgreSQL"
        );
        assert_eq!(export(&back, format), original, "{format} copied back");
    }
    let history = |lib: &Path| {
        let ran = run({
            let mut c = endotwin(lib);
            c.args(["labels", "history"]);
            c
        });
        assert!(ran.ok(), "{}", ran.text());
        ran.stdout
    };
    assert!(history(&sqlite).contains("dr. b"));
    assert_eq!(history(&server.location), history(&sqlite));
    assert_eq!(history(&back), history(&sqlite));
    for lib in [&server.location, &back] {
        let checked = run({
            let mut c = endotwin(lib);
            c.args(["library", "check"]);
            c
        });
        assert!(checked.ok(), "{}", checked.text());
    }

    // A library is never copied over another: refused, and the target keeps what it held.
    let before = export(&back, "csv");
    let again = copy(&sqlite, &back);
    assert!(
        !again.ok() && again.says("already holds a library"),
        "{}",
        again.text()
    );
    assert_eq!(export(&back, "csv"), before);
}

#[test]
fn a_copy_takes_the_models_promoted_in_the_library_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    let made = run({
        let mut c = endotwin(&lib);
        c.args(["demo", "--out"]).arg(&lib).args([
            "--polyps",
            "3",
            "--views",
            "4",
            "--videos",
            "0",
            "--capsule",
            "0",
            "--size",
            "48",
        ]);
        c
    });
    assert!(made.ok(), "{}", made.text());
    // A caption model promoted in the library (as the Training tab does with a run's).
    let run_dir = dir.path().join("run");
    std::fs::create_dir(&run_dir).unwrap();
    for file in ["captions.json", "captions.bpk"] {
        std::fs::copy(
            endotwin::default_models_dir().join(file),
            run_dir.join(file),
        )
        .unwrap();
    }
    use endotwin::engine::promote;
    let p = promote::promote(&lib, &run_dir.join("captions.json"), Some(7)).unwrap();
    let own = std::fs::read(p.dir.join("captions.json")).unwrap();

    let copied = dir.path().join("copy");
    let r = copy(&lib, &copied);
    assert!(r.ok() && r.says("own models"), "{}", r.text());
    // The copy answers with the same models as the library: its own folder, the promoted
    // card byte for byte (without it, the copy would fall back on the shipped models).
    assert_eq!(promote::models_dir_for(&copied), copied.join("models"));
    assert_eq!(
        std::fs::read(copied.join("models/captions.json")).unwrap(),
        own
    );
    assert!(promote::can_demote(&copied, "captions"));

    // A target that already has a models folder is refused before anything is copied.
    let crowded = dir.path().join("crowded");
    std::fs::create_dir_all(crowded.join("models")).unwrap();
    let r = copy(&lib, &crowded);
    assert!(
        !r.ok() && r.says("nothing was copied") && r.says("models"),
        "{}",
        r.text()
    );
    assert!(!crowded.join("library.sqlite").exists());
}
