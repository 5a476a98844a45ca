//! The window on a PostgreSQL library (issue #46): it opens with its cases, and the file the
//! image loader reads for a view holds the database's bytes, checked against their hash. On a
//! copy of the sample library (issue #43), a view whose file was swapped is named by every
//! GUI path that reads it (the large view, Captions, Text prompts), never shown or answered.

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

/// The sample library's polyp S7-E004-P1 with its first view's file now holding another
/// polyp's picture (a real image of the library, not the view): opened large, captioned and
/// scored by the shipped models as a person does it, each refuses with an error naming the
/// media item, and nothing is captioned or scored.
#[test]
fn a_swapped_view_of_the_sample_library_is_named_by_the_viewer_captions_and_text_prompts() {
    use crate::gui::wait_until;
    use crate::gui_input::{click_line, click_tab, open_view, search};
    use endotwin::app::ToastLevel;
    let _rng = crate::common::device_rng();
    let (dir, store, polyp) = crate::gui::sample_copy_with_polyp("S7-E004-P1");
    let view = store.polyp_views(polyp.id).unwrap().remove(0);
    let other = store
        .polyps()
        .unwrap()
        .into_iter()
        .find(|p| p.id != polyp.id)
        .unwrap();
    let other_view = store.polyp_views(other.id).unwrap().remove(0);
    let bytes = std::fs::read(store.media_path(&other_view)).unwrap();
    assert_ne!(bytes, std::fs::read(store.media_path(&view)).unwrap());
    std::fs::write(store.media_path(&view), bytes).unwrap();
    drop(store);

    let mut h = harness(dir.path());
    h.set_size(egui::vec2(1400.0, 1100.0));
    settle(&mut h);
    search(&mut h, &polyp.code);
    click_line(&mut h, &format!("{}  ", polyp.code));
    let named =
        |text: &str| text.contains(&format!("media {}", view.id)) && text.contains("changed");
    let toasted = |a: &endotwin::app::App, start: &str| {
        a.state
            .toasts
            .iter()
            .any(|t| t.level == ToastLevel::Error && t.text.starts_with(start) && named(&t.text))
    };
    // The view opened large: read through the store's hash check, refused by name.
    open_view(&mut h, 0);
    wait_until(&mut h, "the large view's refusal", |a| {
        toasted(a, "cannot show image")
    });

    click_tab(&mut h, "Captions");
    wait_until(&mut h, "the Captions answer", |a| {
        a.state.captions.running.is_none() && a.state.captions.problem.is_some()
    });
    let panel = &h.state().state.captions;
    let problem = panel.problem.clone().unwrap();
    assert!(named(&problem), "{problem}");
    assert!(panel.frames.is_empty(), "the swapped view was captioned");
    assert!(
        toasted(h.state(), "Captions:"),
        "no error toast: {:?}",
        h.state().state.toasts
    );
    shows_part(&h, &format!("media {}", view.id));

    click_tab(&mut h, "Text prompts");
    wait_until(&mut h, "the Text prompts answer", |a| {
        a.state.prompts.running.is_none() && a.state.prompts.problem.is_some()
    });
    let panel = &h.state().state.prompts;
    let problem = panel.problem.clone().unwrap();
    assert!(named(&problem), "{problem}");
    assert!(panel.scores.is_none(), "the swapped view was scored");
    assert!(
        toasted(h.state(), "Text prompts:"),
        "no error toast: {:?}",
        h.state().state.toasts
    );
    shows_part(&h, &format!("media {}", view.id));
}
