//! The window beside another station on the same library (issue #46), on both engines: it
//! shows another station's change at its next look at the library, and a label edit made on
//! what it read before that change is refused with who changed what, not written over it.
//! The look's interval is set by the test (a day, then none): no clock is waited on.

use crate::gui::{harness, settle, shows, shows_part, tiny_library};
use crate::gui_input::click_line;
use crate::library_engines::{Engine, Place, on_both_engines};
use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use endotwin::app::App;
use endotwin::store::{OpenMode, PolypRow, Store, TargetKind};
use std::time::Duration;

on_both_engines!(
    another_stations_label_change_shows_at_the_windows_next_look,
    an_edit_made_on_what_the_window_read_before_another_stations_change_is_refused,
    undo_does_not_overwrite_a_change_made_on_another_station_since,
);

const HISTOLOGIES: [&str; 5] = [
    "hyperplastic",
    "sessile serrated",
    "tubular adenoma LG",
    "tubular adenoma HG",
    "carcinoma",
];

/// The window on a fresh library of `engine` (looking at it only when a test says), signed
/// "dr. window", showing its first polyp; the other station's store; that polyp; and two
/// histologies other than its own.
struct Scene {
    h: Harness<'static, App>,
    other: Store,
    polyp: PolypRow,
    before: String,
    theirs: &'static str,
    mine: &'static str,
    _place: Place,
}

fn scene(engine: Engine) -> Option<Scene> {
    let place = Place::fresh(engine)?;
    tiny_library(&place.location);
    let mut h = harness(&place.location);
    h.state_mut().state.sync.every = Duration::from_secs(24 * 3600);
    settle(&mut h);
    h.get_by_label("Reviewer:").focus();
    settle(&mut h); // not run(): a background job under load may still repaint
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    h.key_press(egui::Key::Backspace);
    h.get_by_label("Reviewer:").type_text("dr. window");
    settle(&mut h); // not run(): a background job under load may still repaint
    let other = place.open(OpenMode::Existing).unwrap();
    let polyp = other.polyps().unwrap().remove(0);
    click_line(&mut h, &format!("{}  ", polyp.code));
    let before = polyp.histology.clone().unwrap();
    let mut others = HISTOLOGIES.into_iter().filter(|h| *h != before);
    let (theirs, mine) = (others.next().unwrap(), others.next().unwrap());
    shows(&h, &before);
    Some(Scene {
        h,
        other,
        polyp,
        before,
        theirs,
        mine,
        _place: place,
    })
}

/// Picks `value` in the details panel's pathology list, as a reviewer does.
fn pick_histology(h: &mut Harness<'static, App>, value: &str) {
    h.get_by_role_and_label(Role::ComboBox, "Pathology label")
        .click();
    settle(h); // not run(): a background job under load may still repaint
    h.get_by_label(value).click();
    settle(h);
}

fn says_nothing_of(h: &Harness<'static, App>, text: &str) {
    assert!(
        h.query_all_by_label_contains(text).next().is_none(),
        "something shows {text:?} already"
    );
}

fn another_stations_label_change_shows_at_the_windows_next_look(engine: Engine) {
    let Some(mut s) = scene(engine) else {
        return;
    };
    s.other
        .set_label(
            "dr. elsewhere",
            TargetKind::Polyp,
            s.polyp.id,
            "histology",
            Some(s.theirs),
        )
        .unwrap();
    settle(&mut s.h);
    // Before its next look the window shows what it read.
    says_nothing_of(&s.h, "dr. elsewhere");
    shows(&s.h, &s.before);
    // The interval passes: the window looks, and shows the change with who made it.
    s.h.state_mut().state.sync.every = Duration::ZERO;
    settle(&mut s.h);
    shows_part(
        &s.h,
        &format!(
            "Changed on another station: dr. elsewhere set histology of {}: {} -> {}",
            s.polyp.code, s.before, s.theirs
        ),
    );
    shows_part(
        &s.h,
        &format!("dr. elsewhere set histology: {} -> {}", s.before, s.theirs),
    );
    shows(&s.h, s.theirs);
}

fn an_edit_made_on_what_the_window_read_before_another_stations_change_is_refused(engine: Engine) {
    let Some(mut s) = scene(engine) else {
        return;
    };
    s.other
        .set_label(
            "dr. elsewhere",
            TargetKind::Polyp,
            s.polyp.id,
            "histology",
            Some(s.theirs),
        )
        .unwrap();
    // The window still shows the value it read; the reviewer picks another one.
    settle(&mut s.h);
    shows(&s.h, &s.before);
    pick_histology(&mut s.h, s.mine);
    shows_part(
        &s.h,
        &format!(
            "polyp {} histology: changed on another station after you read it, by dr. elsewhere",
            s.polyp.code
        ),
    );
    shows_part(&s.h, &format!("('{}' -> '{}')", s.before, s.theirs));
    shows_part(&s.h, &format!("your '{}' was not written", s.mine));
    // Nothing of the reviewer's was written.
    let label = |st: &Store| {
        st.current_label(TargetKind::Polyp, s.polyp.id, "histology")
            .unwrap()
    };
    assert_eq!(label(&s.other).as_deref(), Some(s.theirs));
    let audit = s
        .other
        .audit_history(TargetKind::Polyp, s.polyp.id)
        .unwrap();
    assert_eq!(audit.len(), 1, "{audit:?}");
    // The window read the label again: it shows the other station's value and change.
    shows(&s.h, s.theirs);
    shows_part(
        &s.h,
        &format!("dr. elsewhere set histology: {} -> {}", s.before, s.theirs),
    );
    // Having seen it, the reviewer sets theirs again: now it lands, over the value seen.
    pick_histology(&mut s.h, s.mine);
    assert_eq!(label(&s.other).as_deref(), Some(s.mine));
    let audit = s
        .other
        .audit_history(TargetKind::Polyp, s.polyp.id)
        .unwrap();
    assert_eq!(audit.len(), 2, "{audit:?}");
    assert_eq!(audit[0].who, "dr. window");
    assert_eq!(audit[0].old_value.as_deref(), Some(s.theirs));
}

fn undo_does_not_overwrite_a_change_made_on_another_station_since(engine: Engine) {
    let Some(mut s) = scene(engine) else {
        return;
    };
    pick_histology(&mut s.h, s.mine);
    shows_part(
        &s.h,
        &format!("dr. window set histology: {} -> {}", s.before, s.mine),
    );
    s.other
        .set_label(
            "dr. elsewhere",
            TargetKind::Polyp,
            s.polyp.id,
            "histology",
            Some(s.theirs),
        )
        .unwrap();
    // Ctrl+Z (no text field focused) would put the value back over dr. elsewhere's.
    click_line(&mut s.h, &format!("{}  ", s.polyp.code));
    s.h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Z);
    settle(&mut s.h);
    shows_part(
        &s.h,
        "changed on another station after you read it, by dr. elsewhere",
    );
    let now = s
        .other
        .current_label(TargetKind::Polyp, s.polyp.id, "histology")
        .unwrap();
    assert_eq!(now.as_deref(), Some(s.theirs));
    assert_eq!(
        s.other
            .audit_history(TargetKind::Polyp, s.polyp.id)
            .unwrap()
            .len(),
        2
    );
    shows(&s.h, s.theirs);
}
