//! The browser on a large library (`endotwin demo --scale`): only the lines on screen are laid
//! out, the wheel scrolls through the rest, a search still narrows it, and arrow keys bring the
//! selection into view. CI uses 3,000 polyps; the figures at 100,000 are `bench frames`.

use crate::gui::{harness, settle};
use egui_kittest::kittest::{NodeT, Queryable};
use endotwin::app::Selection;
use endotwin::store::{OpenMode, Store};

/// How many browser lines (examination or polyp lines of the scaled library) are laid out.
fn laid_out(h: &egui_kittest::Harness<'static, endotwin::app::App>) -> Vec<String> {
    h.query_all_by_label_contains("S0")
        .filter_map(|n| n.accesskit_node().label())
        .filter(|l| l.starts_with("S0"))
        .collect()
}

#[test]
fn a_three_thousand_polyp_browser_lays_out_only_the_visible_lines_and_scrolls() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("big");
    let mut c = crate::common::endotwin(&lib);
    c.args(["demo", "--out"]).arg(&lib).args([
        "--polyps",
        "6",
        "--views",
        "4",
        "--videos",
        "1",
        "--frames-per-video",
        "4",
        "--capsule",
        "0",
        "--background",
        "0",
        "--size",
        "48",
        "--scale",
        "3000",
        "--scale-videos",
        "5",
    ]);
    let ran = crate::common::run(c);
    assert!(ran.ok(), "{}", ran.text());
    assert!(ran.says("polyps and 4 videos copied"), "{}", ran.text());
    let store = Store::open(&lib, OpenMode::Existing).unwrap();
    assert_eq!(store.polyps().unwrap().len(), 3000);
    drop(store);

    let mut h = harness(&lib);
    settle(&mut h);
    let first = laid_out(&h);
    // 3000 polyps and 750 examinations: a screen holds a few dozen lines, and only those
    // are laid out (an accessible node exists for each widget drawn).
    assert!(
        !first.is_empty() && first.len() < 60,
        "{} lines laid out: {:?}",
        first.len(),
        &first[..first.len().min(5)]
    );
    assert!(first.iter().any(|l| l.starts_with("S000001")), "{first:?}");

    // The wheel over the browser scrolls on: later lines appear, the first ones go.
    for _ in 0..10 {
        h.event(egui::Event::PointerMoved(egui::pos2(150.0, 500.0)));
        h.event(egui::Event::MouseWheel {
            unit: egui::MouseWheelUnit::Point,
            delta: egui::vec2(0.0, -2000.0),
            phase: egui::TouchPhase::Move,
            modifiers: egui::Modifiers::NONE,
            source: egui::MouseWheelSource::Wheel,
        });
        h.step();
    }
    settle(&mut h);
    let later = laid_out(&h);
    assert!(!later.is_empty() && later.len() < 60, "{later:?}");
    assert!(
        !later.iter().any(|l| l.starts_with("S000001")),
        "still at the top after scrolling: {later:?}"
    );

    // A search narrows the 3000 to the polyps of one examination.
    h.get_by_label("Search").focus();
    h.run_steps(2);
    h.get_by_label("Search").type_text("S000700");
    settle(&mut h);
    let found = laid_out(&h);
    assert!(
        found.iter().all(|l| l.starts_with("S000700")) && found.len() == 5,
        "{found:?}"
    );

    // Cleared again, a selection far down the list (made elsewhere, e.g. a twin) is scrolled
    // into view.
    h.get_by_label("Search").focus();
    h.run_steps(2);
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    h.key_press(egui::Key::Backspace);
    settle(&mut h);
    let far = {
        let store = Store::open(&lib, OpenMode::Existing).unwrap();
        store
            .polyps()
            .unwrap()
            .into_iter()
            .find(|p| p.code == "S000612-3")
            .unwrap()
    };
    h.state_mut()
        .send(endotwin::app::Command::Select(Selection::Polyp(far.id)));
    settle(&mut h);
    let shown = laid_out(&h);
    assert!(
        shown.iter().any(|l| l.starts_with("S000612-3")),
        "the selected polyp is not on screen: {shown:?}"
    );
}
