//! The window on a PostgreSQL library (issue #46): it opens with its cases, and the file the
//! image loader reads for a view holds the database's bytes, checked against their hash.

use crate::common::{endotwin, run};
use crate::gui::{harness, settle, shows_part};
use crate::library_engines::{Engine, Place};
use endotwin::store::{OpenMode, Store};

#[test]
fn a_postgresql_library_opens_in_the_window_with_its_cases() {
    let Some(server) = Place::fresh(Engine::Postgres) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("lib");
    let made = run({
        let mut c = endotwin(&local);
        c.args(["demo", "--out"]).arg(&local).args([
            "--polyps",
            "3",
            "--views",
            "4",
            "--videos",
            "0",
            "--capsule",
            "0",
            "--size",
            "64",
        ]);
        c
    });
    assert!(made.ok(), "{}", made.text());
    let copied = run({
        let mut c = endotwin(&local);
        c.args(["library", "copy"])
            .arg(&local)
            .arg(&server.location);
        c
    });
    assert!(copied.ok(), "{}", copied.text());

    let mut h = harness(&server.location);
    settle(&mut h);
    let store = Store::open(&server.location, OpenMode::Existing).unwrap();
    let first = &store.examinations().unwrap()[0];
    shows_part(&h, &format!("{}  ·", first.code));
    shows_part(&h, "examinations ·");
    // A view's bytes, read from the database through their hash check.
    let polyp = &store.polyps().unwrap()[0];
    let view = &store.polyp_views(polyp.id).unwrap()[0];
    let bytes = store.read_media(view).unwrap();
    assert_eq!(std::fs::read(store.media_path(view)).unwrap(), bytes);
}
