//! What the README promises a person at the window, pressed and typed as they would: the
//! browser's search and filters, Left/Right through a polyp's views, Ctrl+1..9 for the tabs,
//! labelling disabled on a read-only library; and the library format itself (WAL, foreign
//! keys enforced, media named by their content hash).

use crate::gui::{harness, settle, shows_part, tiny_library};
use egui::accesskit::Role;
use egui_kittest::kittest::{NodeT, Queryable};
use endotwin::app::{Selection, Tab, panels};
use endotwin::store::{OpenMode, Store};

/// The browser's "N examinations, M polyps shown" line.
fn shown(h: &egui_kittest::Harness<'static, endotwin::app::App>) -> String {
    h.query_all_by_label_contains("polyps shown")
        .next()
        .and_then(|n| {
            let node = n.accesskit_node();
            node.label().or_else(|| node.value())
        })
        .unwrap_or_default()
}

#[test]
fn the_browsers_search_and_pathology_filter_show_only_the_matching_polyps() {
    let dir = tempfile::tempdir().unwrap();
    tiny_library(dir.path());
    let store = Store::open(dir.path(), OpenMode::Existing).unwrap();
    let polyps = store.polyps().unwrap();
    assert_eq!(polyps.len(), 3);
    let mut h = harness(dir.path());
    settle(&mut h);
    assert!(shown(&h).ends_with("3 polyps shown"), "{}", shown(&h));

    // Typing a polyp's code leaves that polyp alone.
    let target = &polyps[1];
    h.get_by_label("Search").focus();
    h.run();
    h.get_by_label("Search").type_text(&target.code);
    settle(&mut h);
    assert!(shown(&h).ends_with("1 polyps shown"), "{}", shown(&h));
    shows_part(&h, &format!("{}  ", target.code));
    for other in polyps.iter().filter(|p| p.id != target.id) {
        assert!(
            h.query_all_by_label_contains(&format!("{}  ", other.code))
                .next()
                .is_none(),
            "{} still listed",
            other.code
        );
    }
    // Cleared, then the pathology filter: exactly the polyps of that histology.
    h.get_by_label("Search").focus();
    h.run();
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    h.key_press(egui::Key::Backspace);
    settle(&mut h);
    assert!(shown(&h).ends_with("3 polyps shown"), "{}", shown(&h));
    let histology = target.histology.clone().unwrap();
    let expected = polyps
        .iter()
        .filter(|p| p.histology.as_deref() == Some(histology.as_str()))
        .count();
    h.get_by_role_and_label(Role::ComboBox, "Pathology").click();
    h.run();
    h.get_all_by_label(&histology).last().unwrap().click();
    settle(&mut h);
    assert!(
        shown(&h).ends_with(&format!("{expected} polyps shown")),
        "{histology}: {}",
        shown(&h)
    );
}

#[test]
fn left_and_right_step_through_views_and_ctrl_digits_switch_tabs() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    tiny_library(dir.path());
    let store = Store::open(dir.path(), OpenMode::Existing).unwrap();
    let polyp = store.polyps().unwrap().remove(0);
    let mut h = harness(dir.path());
    settle(&mut h);
    h.get_by_label_contains(&format!("{}  ", polyp.code))
        .click();
    settle(&mut h);
    assert_eq!(h.state().state.selection, Selection::Polyp(polyp.id));
    // Right opens the views one at a time, Left goes back; Esc returns to the grid.
    h.key_press(egui::Key::ArrowRight);
    settle(&mut h);
    let first = h.state().state.focused;
    h.key_press(egui::Key::ArrowRight);
    settle(&mut h);
    let second = h.state().state.focused;
    assert!(
        first.is_some() && second.is_some() && first != second,
        "{first:?} {second:?}"
    );
    h.key_press(egui::Key::ArrowLeft);
    settle(&mut h);
    assert_eq!(h.state().state.focused, first);
    h.key_press(egui::Key::Escape);
    settle(&mut h);
    assert_eq!(h.state().state.focused, None);
    // Ctrl+N is the N-th registered tab, for every tab.
    for (i, p) in panels().iter().enumerate() {
        let key = [
            egui::Key::Num1,
            egui::Key::Num2,
            egui::Key::Num3,
            egui::Key::Num4,
            egui::Key::Num5,
            egui::Key::Num6,
            egui::Key::Num7,
        ][i];
        h.key_press_modifiers(egui::Modifiers::COMMAND, key);
        settle(&mut h);
        assert_eq!(h.state().state.tab, p.tab, "Ctrl+{}", i + 1);
    }
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Num1);
    settle(&mut h);
    assert_eq!(h.state().state.tab, Tab::VIEWER);
}

#[cfg(unix)]
#[test]
fn a_read_only_library_opens_with_labelling_disabled_and_nothing_changes() {
    let _rng = crate::common::device_rng();
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    tiny_library(dir.path());
    let db = dir.path().join("library.sqlite");
    let before = crate::common::state(dir.path());
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    let polyp = {
        let store = Store::open(dir.path(), OpenMode::Existing).unwrap();
        assert!(store.is_read_only());
        store.polyps().unwrap().remove(0)
    };
    let mut h = harness(dir.path());
    settle(&mut h);
    h.get_by_label_contains(&format!("{}  ", polyp.code))
        .click();
    settle(&mut h);
    // The pathology list in Details is greyed out: clicking it opens nothing.
    let combo = h.get_by_role_and_label(Role::ComboBox, "Pathology label");
    assert!(
        combo.accesskit_node().is_disabled(),
        "the pathology list is enabled"
    );
    combo.click();
    settle(&mut h);
    // The Labelling tab says why, and its keys change nothing.
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Num7);
    settle(&mut h);
    assert_eq!(h.state().state.tab, Tab("labelling"));
    shows_part(&h, "read-only library: labels cannot change");
    for key in [egui::Key::H, egui::Key::Num1, egui::Key::J] {
        h.key_press(key);
        settle(&mut h);
    }
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(
        crate::common::state(dir.path()),
        before,
        "the library changed"
    );
}

#[test]
fn the_library_is_wal_sqlite_with_foreign_keys_enforced_and_media_named_by_their_hash() {
    let dir = tempfile::tempdir().unwrap();
    tiny_library(dir.path());
    let conn = rusqlite::Connection::open(dir.path().join("library.sqlite")).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    drop(conn);
    let mut store = Store::open(dir.path(), OpenMode::Existing).unwrap();
    // A view of a polyp and an image that do not exist is refused by the database itself.
    let orphan = store.write(|tx| -> Result<usize, endotwin::store::StoreError> {
        tx.execute(
            "INSERT INTO polyp_views(polyp_id, media_id, view_index) VALUES (987654, 987654, 0)",
            [],
        )
    });
    let err = orphan
        .expect_err("a row naming nothing was stored")
        .to_string();
    assert!(err.contains("FOREIGN KEY"), "{err}");
    // Every media file sits at media/<first two hex digits>/<SHA-256 of its bytes>.<ext>.
    let exams = store.examinations().unwrap();
    let mut checked = 0;
    for p in store.polyps().unwrap() {
        for m in store.polyp_views(p.id).unwrap() {
            let bytes = std::fs::read(store.media_path(&m)).unwrap();
            let hash = endotwin::store::content_hash(&bytes);
            assert_eq!(m.hash, hash);
            assert!(
                m.rel_path
                    .starts_with(&format!("media/{}/{}.", &hash[..2], hash)),
                "{}",
                m.rel_path
            );
            checked += 1;
        }
    }
    assert!(checked >= 12 && !exams.is_empty());
}
