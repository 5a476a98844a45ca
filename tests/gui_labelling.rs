//! The Labelling tab, with the keyboard only: three polyps labelled (histology, Paris class,
//! location), each change audited, the last one undone.

use crate::gui::{harness, settle, shows_part, tiny_library};
use crate::gui_input::{click_line, click_tab, open_view, shift_drag};
use egui::{Key, Modifiers};
use egui_kittest::kittest::Queryable;
use endotwin::app::{Command, Selection};
use endotwin::store::{OpenMode, Store, TargetKind};

fn label(dir: &std::path::Path, polyp: i64, key: &str) -> Option<String> {
    let store = Store::open(dir, OpenMode::Existing).unwrap();
    store.current_label(TargetKind::Polyp, polyp, key).unwrap()
}

#[test]
fn three_polyps_are_labelled_with_the_keyboard_and_one_is_undone() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    tiny_library(dir.path());
    let (polyps, first_code): (Vec<i64>, String) = {
        let store = Store::open(dir.path(), OpenMode::Existing).unwrap();
        let all = store.polyps().unwrap();
        (all.iter().map(|p| p.id).collect(), all[0].code.clone())
    };
    let mut h = harness(dir.path());
    settle(&mut h);
    click_line(&mut h, &format!("{first_code}  "));
    click_tab(&mut h, "Labelling");
    shows_part(&h, "Labelling polyp 1 of 3");
    let options = h.state().state.labelling.options.clone();
    let press = |h: &mut egui_kittest::Harness<'static, endotwin::app::App>, key: Key| {
        h.key_press(key);
        settle(h);
    };

    // Polyp 1: histology, choice 2.
    press(&mut h, Key::H);
    press(&mut h, Key::Num2);
    assert_eq!(
        label(dir.path(), polyps[0], "histology"),
        Some(options[0][1].clone())
    );
    // J: polyp 2, Paris class choice 3.
    press(&mut h, Key::J);
    assert_eq!(h.state().state.selection, Selection::Polyp(polyps[1]));
    press(&mut h, Key::P);
    press(&mut h, Key::Num3);
    assert_eq!(
        label(dir.path(), polyps[1], "paris"),
        Some(options[1][2].clone())
    );
    // Enter: polyp 3, location choice 1.
    press(&mut h, Key::Enter);
    assert_eq!(h.state().state.selection, Selection::Polyp(polyps[2]));
    let before = label(dir.path(), polyps[2], "location");
    let k = options[3]
        .iter()
        .position(|o| Some(o) != before.as_ref())
        .expect("two locations to choose from");
    let digits = [Key::Num1, Key::Num2, Key::Num3, Key::Num4, Key::Num5];
    press(&mut h, Key::L);
    press(&mut h, digits[k]);
    let chosen = Some(options[3][k].clone());
    assert_eq!(label(dir.path(), polyps[2], "location"), chosen);
    // The browser sees the corrected location (the polyp's own column changed too).
    let store = Store::open(dir.path(), OpenMode::Existing).unwrap();
    assert_eq!(store.polyp(polyps[2]).unwrap().unwrap().location, chosen);
    let audit = store.audit_history(TargetKind::Polyp, polyps[2]).unwrap();
    assert_eq!(
        (audit[0].key.as_str(), audit[0].who.as_str()),
        ("location", h.state().state.reviewer.as_str())
    );
    drop(store);
    // Ctrl+Z undoes the last one only.
    h.key_press_modifiers(Modifiers::COMMAND, Key::Z);
    settle(&mut h);
    assert_eq!(label(dir.path(), polyps[2], "location"), before);
    assert_eq!(
        label(dir.path(), polyps[1], "paris"),
        Some(options[1][2].clone())
    );
    assert_eq!(
        label(dir.path(), polyps[0], "histology"),
        Some(options[0][1].clone())
    );
    // The library's history shows the three changes and the undo, newest first, and
    // filters by reviewer.
    let history = h.state().state.labelling.audit.clone();
    let keys: Vec<&str> = history.iter().map(|a| a.entry.key.as_str()).collect();
    assert_eq!(
        keys[..4],
        ["location", "location", "paris", "histology"],
        "{keys:?}"
    );
    assert_eq!(
        history[0].entry.new_value, before,
        "the undo is the newest row"
    );
    shows_part(&h, "Library history");
    h.get_by_label("changed by").focus();
    settle(&mut h);
    h.get_by_label("changed by").type_text("somebody else");
    settle(&mut h);
    assert!(h.state().state.labelling.audit.is_empty());
    shows_part(&h, "no label changes match");
    h.get_by_label("changed by").focus();
    h.key_press_modifiers(Modifiers::COMMAND, Key::A);
    h.key_press(Key::Backspace);
    settle(&mut h);
    assert_eq!(h.state().state.labelling.audit.len(), history.len());
    // Escape leaves the box; the labelling keys work again.
    h.key_press(Key::Escape);
    settle(&mut h);
    assert!(!h.ctx.egui_wants_keyboard_input());

    // K goes back; a number typed into the size box labels nothing else.
    press(&mut h, Key::K);
    assert_eq!(h.state().state.selection, Selection::Polyp(polyps[1]));
    let location = label(dir.path(), polyps[1], "location");
    press(&mut h, Key::Z);
    assert!(
        h.ctx.egui_wants_keyboard_input(),
        "Z puts the keyboard in the size box"
    );
    press(&mut h, Key::Num1);
    assert_eq!(label(dir.path(), polyps[1], "location"), location);
    assert_eq!(h.state().state.selection, Selection::Polyp(polyps[1]));
}

#[test]
fn the_review_queue_orders_every_indexed_polyp_and_j_walks_it() {
    let _rng = crate::common::device_rng();
    use endotwin::twins::{TwinModels, index_library};
    let dir = tempfile::tempdir().unwrap();
    tiny_library(dir.path());
    {
        let mut store = Store::open(dir.path(), OpenMode::Existing).unwrap();
        let models = TwinModels::load(
            &endotwin::default_models_dir(),
            &endotwin::compute::Compute::cpu(None).device,
        )
        .unwrap();
        index_library(&mut store, &models, &endotwin::engine::Progress::new()).unwrap();
    }
    let mut h = harness(dir.path());
    settle(&mut h);
    click_tab(&mut h, "Labelling");
    shows_part(&h, "Order the queue to label first");
    h.get_by_label("uncertain and diverse").click();
    let start = std::time::Instant::now();
    while h.state().state.labelling.queue.is_empty() {
        assert!(
            start.elapsed().as_secs() < 120,
            "no queue: {:?}",
            h.state()
                .state
                .toasts
                .iter()
                .map(|t| t.text.clone())
                .collect::<Vec<_>>()
        );
        settle(&mut h);
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    settle(&mut h);
    let queue: Vec<i64> = h
        .state()
        .state
        .labelling
        .queue
        .iter()
        .map(|q| q.polyp)
        .collect();
    // Every indexed polyp once; each shows its label and the vote of its twins.
    let mut sorted = queue.clone();
    sorted.sort();
    let mut all: Vec<i64> = Store::open(dir.path(), OpenMode::Existing)
        .unwrap()
        .polyps()
        .unwrap()
        .iter()
        .map(|p| p.id)
        .collect();
    all.sort();
    assert_eq!(sorted, all);
    shows_part(&h, "cases, uncertain and diverse, by the twin index of");
    // The shipped prompt model's benign-vs-neoplastic entropy joins the twin vote's doubt.
    shows_part(&h, "with the prompt entropy of");
    for item in &h.state().state.labelling.queue {
        let e = item
            .prompt_entropy
            .expect("every polyp scored by the prompt model");
        assert!((0.0..=1.0).contains(&e), "{item:?}");
        let vote = item.vote.as_ref().map_or(1.0, |v| 1.0 - v.1);
        assert!(
            (item.uncertainty - (vote + e) / 2.0).abs() < 1e-9,
            "{item:?}"
        );
    }
    crate::gui::screenshot(&mut h, "review-queue");
    // Clicking a case opens it; J then follows the queue, not the browser's order.
    assert!(h.state().state.labelling.follow_queue);
    let code = h.state().state.labelling.queue[0].code.clone();
    h.get_by_label(&code).click();
    settle(&mut h);
    assert_eq!(h.state().state.selection, Selection::Polyp(queue[0]));
    h.key_press(Key::J);
    settle(&mut h);
    assert_eq!(h.state().state.selection, Selection::Polyp(queue[1]));
    h.key_press(Key::J);
    settle(&mut h);
    assert_eq!(h.state().state.selection, Selection::Polyp(queue[2]));
    h.key_press(Key::K);
    settle(&mut h);
    assert_eq!(h.state().state.selection, Selection::Polyp(queue[1]));
}

#[test]
fn a_lasso_on_the_twin_map_picks_a_group_that_takes_one_label_and_one_undo() {
    let _rng = crate::common::device_rng();
    use crate::gui::{tiny_twin_models, wait_until};
    use endotwin::data::phantom::{self, PhantomConfig, Split};
    let dir = tempfile::tempdir().unwrap();
    {
        let mut store = Store::open(dir.path(), OpenMode::CreateIfMissing).unwrap();
        let cfg = PhantomConfig {
            seed: 12,
            split: Split::Train,
            polyps: 12,
            views_per_polyp: 4,
            videos: 0,
            frames_per_video: 0,
            background_frames: 0,
            frames_per_exam: 0,
            capsule_images: 0,
            image_size: 48,
            video_size: 48,
        };
        phantom::generate(&mut store, &cfg, &endotwin::engine::Progress::new()).unwrap();
    }
    let models = tempfile::tempdir().unwrap();
    tiny_twin_models(models.path());
    let mut h = harness(dir.path());
    // Tall enough for the whole map below the twin cards.
    h.set_size(egui::vec2(1400.0, 1500.0));
    h.state_mut().state.twins.models_dir = models.path().to_path_buf();
    settle(&mut h);
    click_tab(&mut h, "Digital twins");
    wait_until(&mut h, "the retrieval", |a| a.state.twins.running.is_none());
    h.get_by_label("Index the library now").click();
    wait_until(&mut h, "indexing and retrieval", |a| {
        a.state.twins.answer.is_some()
    });
    let title = "Library map (PCA of polyp embeddings)";
    h.get_by_label(title).scroll_to_me();
    settle(&mut h);
    // A lasso over the left part of the map (right of its axis labels), top to bottom: it
    // picks the polyps left of a line, whatever the map's scale.
    let below = h.get_by_label(title).rect();
    let (left, top) = (below.left(), below.bottom());
    let corners = [
        egui::pos2(left + 60.0, top + 16.0),
        egui::pos2(left + 60.0, top + 238.0),
        egui::pos2(left + 300.0, top + 238.0),
        egui::pos2(left + 300.0, top + 16.0),
    ];
    h.drag_at(corners[0]);
    settle(&mut h);
    for w in corners.windows(2) {
        for k in 1..=4 {
            h.hover_at(w[0] + (w[1] - w[0]) * (k as f32 / 4.0));
            settle(&mut h);
        }
    }
    h.drop_at(corners[0]);
    settle(&mut h);
    let answer = h.state().state.twins.answer.clone().unwrap();
    let picked = h.state().state.picked.clone();
    assert!(!picked.is_empty(), "the lasso picked nothing");
    assert!(
        picked.len() < answer.map.points.len(),
        "the lasso picked everything"
    );
    let x = |id: &i64| answer.map.points.iter().find(|m| m.0 == *id).unwrap().2[0];
    let right_most_picked = picked.iter().map(x).fold(f32::MIN, f32::max);
    let left_most_other = answer
        .map
        .points
        .iter()
        .filter(|m| !picked.contains(&m.0))
        .map(|m| m.2[0])
        .fold(f32::MAX, f32::min);
    assert!(
        right_most_picked < left_most_other,
        "a lasso picks by place"
    );
    shows_part(&h, &format!("{} polyps picked", picked.len()));
    crate::gui::screenshot(&mut h, "twin-map-lasso");

    // One label for the group: each picked polyp takes it, the others keep theirs.
    let before: Vec<(i64, Option<String>)> = answer
        .map
        .points
        .iter()
        .map(|m| (m.0, label(dir.path(), m.0, "histology")))
        .collect();
    let choice = "carcinoma";
    h.get_by_label(&format!("all {choice}")).click();
    settle(&mut h);
    for (id, old) in &before {
        let now = label(dir.path(), *id, "histology");
        if picked.contains(id) {
            assert_eq!(now.as_deref(), Some(choice));
        } else {
            assert_eq!(&now, old);
        }
    }
    // One undo puts every one of them back.
    h.key_press_modifiers(Modifiers::COMMAND, Key::Z);
    settle(&mut h);
    for (id, old) in &before {
        assert_eq!(&label(dir.path(), *id, "histology"), old);
    }

    // A tag for the group, typed into the bar: each picked polyp has it, the others do not;
    // a second tag joins the first; one undo takes the second back; a tag with a comma is
    // refused and changes nothing.
    let tag_box = h.get_by_label("tag:");
    tag_box.click();
    settle(&mut h);
    h.get_by_label("tag:").type_text("teaching set");
    settle(&mut h);
    h.get_by_label("Tag the picked").click();
    settle(&mut h);
    // The second tag typed over the first (spaces around it are trimmed).
    type_tag(&mut h, " ask pathology ");
    h.get_by_label("Tag the picked").click();
    settle(&mut h);
    for (id, _) in &before {
        let tags = label(dir.path(), *id, "tags");
        if picked.contains(id) {
            assert_eq!(tags.as_deref(), Some("ask pathology, teaching set"));
        } else {
            assert_eq!(tags, None);
        }
    }
    h.key_press(Key::Escape);
    h.key_press_modifiers(Modifiers::COMMAND, Key::Z);
    settle(&mut h);
    let first = *picked.iter().next().unwrap();
    assert_eq!(
        label(dir.path(), first, "tags").as_deref(),
        Some("teaching set")
    );
    type_tag(&mut h, "a, b");
    h.get_by_label("Tag the picked").click();
    settle(&mut h);
    shows_part(&h, "no commas");
    assert_eq!(
        label(dir.path(), first, "tags").as_deref(),
        Some("teaching set")
    );

    // Their labels exported (the file the dialog names): one row per picked polyp.
    let csv = dir.path().join("picked.csv");
    h.state_mut().send(Command::ExportPicked(Some(csv.clone())));
    settle(&mut h);
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), picked.len() + 1, "{text}");
    assert!(text.starts_with("polyp,histology"));
    assert!(text.lines().next().unwrap().ends_with(",tags"), "{text}");
    assert_eq!(text.matches("teaching set").count(), picked.len(), "{text}");

    // The picked polyps as one query: their twins are other polyps.
    h.get_by_label("Find twins of the picked").click();
    settle(&mut h);
    wait_until(&mut h, "the group retrieval", |a| {
        a.state.twins.running.is_none()
            && a.state.twins.answer.as_ref().is_some_and(|ans| {
                matches!(&ans.query, endotwin::engine::TwinQuery::Media { exclude_polyps, .. }
                    if exclude_polyps.len() == picked.len())
            })
    });
    let answer = h.state().state.twins.answer.clone().unwrap();
    assert!(!answer.result.twins.is_empty());
    assert!(
        answer
            .result
            .twins
            .iter()
            .all(|t| !picked.contains(&t.polyp.id)),
        "a picked polyp is never its group's twin"
    );
    shows_part(&h, &format!("the {} picked polyps together", picked.len()));
}

#[test]
fn a_videos_frames_are_labelled_polyp_or_not_with_the_keyboard_and_one_is_undone() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    tiny_library(dir.path());
    let (video, frames) = {
        let store = Store::open(dir.path(), OpenMode::Existing).unwrap();
        let v = store.videos().unwrap()[0].clone();
        let frames: Vec<i64> = store
            .video_frames(v.id)
            .unwrap()
            .iter()
            .map(|f| f.1.id)
            .collect();
        (v.code, frames)
    };
    let frame = |i: usize| label_of(dir.path(), TargetKind::Media, frames[i], "polyp_present");
    let mut h = harness(dir.path());
    settle(&mut h);
    click_line(&mut h, &format!("Video {video}"));
    click_tab(&mut h, "Labelling");
    shows_part(&h, "Frame labels of");
    let press = |h: &mut egui_kittest::Harness<'static, endotwin::app::App>, key: Key| {
        h.key_press(key);
        settle(h);
    };
    // J: the first frame; 1 = polyp. J, 2 = no polyp on the second.
    press(&mut h, Key::J);
    press(&mut h, Key::Num1);
    assert_eq!(frame(0).as_deref(), Some("polyp"));
    press(&mut h, Key::J);
    press(&mut h, Key::Num2);
    assert_eq!(frame(1).as_deref(), Some("no polyp"));
    shows_part(&h, "2 of 6 frames labelled");
    // Undo clears the second; N goes to the first frame without a label (the second).
    h.key_press_modifiers(Modifiers::COMMAND, Key::Z);
    settle(&mut h);
    assert_eq!(frame(1), None);
    assert_eq!(frame(0).as_deref(), Some("polyp"));
    press(&mut h, Key::K);
    press(&mut h, Key::N);
    assert_eq!(h.state().state.focused, Some(1));
    // Each change is in the library's history.
    let history = h.state().state.labelling.audit.clone();
    assert!(
        history
            .iter()
            .filter(|a| a.entry.key == "polyp_present")
            .count()
            >= 3
    );
}

fn label_of(dir: &std::path::Path, kind: TargetKind, id: i64, key: &str) -> Option<String> {
    let store = Store::open(dir, OpenMode::Existing).unwrap();
    store.current_label(kind, id, key).unwrap()
}

/// A twin model that cuts around the polyp (the shipped recipe), tiny.
fn cropping_twin_models(dir: &std::path::Path) {
    let _rng = crate::common::device_rng();
    use endotwin::model::preprocess::TwinInput;
    use endotwin::model::vit::VitConfig;
    use endotwin::model::weights::{self, ModelCard, ModelKind};
    let device = burn::tensor::Device::flex();
    device.seed(1);
    let config = VitConfig::new(32, 16, 32, 1, 2).with_projection(Some(64));
    let mut card = ModelCard::new("twin-image", ModelKind::ImageEncoder, "t1", "test", &config);
    card.input = Some(TwinInput::new(32));
    weights::save(&config.init(&device), &card, dir).unwrap();
}

/// The polyp's embedding in the index, and what its views give when encoded now.
fn indexed_and_fresh(
    dir: &std::path::Path,
    models: &std::path::Path,
    polyp: i64,
) -> (Vec<f32>, Vec<f32>) {
    use endotwin::twins::{TwinIndex, TwinModels, load_view};
    let store = Store::open(dir, OpenMode::Existing).unwrap();
    let m = TwinModels::load(models, &burn::tensor::Device::flex()).unwrap();
    let index = TwinIndex::load(&store, &m).unwrap();
    let i = index.polyps().iter().position(|p| p.id == polyp).unwrap();
    let views: Vec<_> = store
        .polyp_views(polyp)
        .unwrap()
        .iter()
        .map(|v| load_view(&store, v).unwrap())
        .collect();
    (index.vector(i).to_vec(), m.combine(&m.encode_views(&views)))
}

fn close(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-4)
}

#[test]
fn a_box_drawn_on_a_library_view_is_audited_recrops_the_twins_and_is_undone() {
    let _rng = crate::common::device_rng();
    use crate::gui::wait_until;
    use endotwin::model::preprocess::Focus;
    let dir = tempfile::tempdir().unwrap();
    tiny_library(dir.path());
    let models = tempfile::tempdir().unwrap();
    cropping_twin_models(models.path());
    let (polyp, code, view) = {
        let store = Store::open(dir.path(), OpenMode::Existing).unwrap();
        let p = store.polyps().unwrap().remove(0);
        (p.id, p.code, store.polyp_views(p.id).unwrap()[0].clone())
    };
    let mut h = harness(dir.path());
    h.state_mut().state.twins.models_dir = models.path().to_path_buf();
    settle(&mut h);
    // The polyp's line clicked; the Digital twins tab says the library has no index yet and
    // offers to make it: clicked; then back to the Viewer.
    click_line(&mut h, &format!("{code}  "));
    click_tab(&mut h, "Digital twins");
    wait_until(&mut h, "the offer to index", |a| {
        a.state.twins.running.is_none() && !a.busy()
    });
    h.get_by_label("Index the library now").click();
    settle(&mut h);
    wait_until(&mut h, "indexing", |a| {
        !a.busy() && a.state.toasts.iter().any(|t| t.text.contains("indexed"))
    });
    click_tab(&mut h, "Viewer");
    let (indexed, fresh) = indexed_and_fresh(dir.path(), models.path(), polyp);
    assert!(close(&indexed, &fresh), "indexed from the mask's boxes");
    let before = indexed;

    // View 1 large: it says where the twin crop is, and Shift+drag draws a box on it.
    open_view(&mut h, 0);
    shows_part(&h, "Twin crop: the mask's box");
    // The full-size image loads on the loader thread.
    for _ in 0..20 {
        std::thread::sleep(std::time::Duration::from_millis(30));
        settle(&mut h);
    }
    let hint = h.get_by_label_contains("Twin crop:").rect();
    let (x, y) = (hint.center().x, hint.bottom() + 120.0);
    shift_drag(
        &mut h,
        egui::pos2(x - 60.0, y - 60.0),
        egui::pos2(x + 20.0, y),
    );

    // The box is the view's label, audited with the reviewer's name.
    let drawn = {
        let store = Store::open(dir.path(), OpenMode::Existing).unwrap();
        let b = store.view_box(view.id).unwrap().expect("a box was drawn");
        let audit = store.audit_history(TargetKind::Media, view.id).unwrap();
        assert_eq!(audit[0].key, endotwin::store::VIEW_BOX_KEY);
        assert_eq!(audit[0].who, h.state().state.reviewer);
        assert_eq!(audit[0].old_value, None);
        let (image, focus) = endotwin::twins::load_view(&store, &view).unwrap();
        assert_eq!(focus, Focus::Box(b), "the drawn box decides the crop");
        assert!(b[0] + b[2] <= image.width() as f32 && b[1] + b[3] <= image.height() as f32);
        b
    };
    shows_part(&h, "Twin crop: the drawn box");
    crate::gui::screenshot(&mut h, "view-box");
    // The library is re-indexed: only that view is encoded again, and the polyp's twin
    // embedding now comes from the crop around the drawn box.
    wait_until(&mut h, "re-indexing", |a| {
        !a.busy() && a.state.toasts.iter().any(|t| t.text.contains("indexed"))
    });
    assert!(
        h.state()
            .state
            .toasts
            .iter()
            .any(|t| t.text.contains("1 views encoded, 1 polyps updated")),
        "{:?}",
        h.state()
            .state
            .toasts
            .iter()
            .map(|t| &t.text)
            .collect::<Vec<_>>()
    );
    let (indexed, fresh) = indexed_and_fresh(dir.path(), models.path(), polyp);
    assert!(close(&indexed, &fresh), "indexed from the drawn box");
    assert!(
        !close(&indexed, &before),
        "the crop moved with the box {drawn:?}"
    );

    // Ctrl+Z: the box is gone (audited too), the mask decides again, the index follows.
    h.state_mut().state.toasts.clear();
    h.key_press_modifiers(Modifiers::COMMAND, Key::Z);
    settle(&mut h);
    assert_eq!(
        label_of(
            dir.path(),
            TargetKind::Media,
            view.id,
            endotwin::store::VIEW_BOX_KEY
        ),
        None
    );
    wait_until(&mut h, "re-indexing after the undo", |a| {
        !a.busy() && a.state.toasts.iter().any(|t| t.text.contains("indexed"))
    });
    let (indexed, _) = indexed_and_fresh(dir.path(), models.path(), polyp);
    assert!(close(&indexed, &before), "back to the mask's crop");
    shows_part(&h, "Twin crop: the mask's box");
}

/// Replaces the text of the twin map's tag box with `text`, typed as a person would.
fn type_tag(h: &mut egui_kittest::Harness<'static, endotwin::app::App>, text: &str) {
    h.get_by_label("tag:").click();
    settle(h);
    h.key_press_modifiers(Modifiers::COMMAND, Key::A);
    h.key_press(Key::Backspace);
    h.get_by_label("tag:").type_text(text);
    settle(h);
}
