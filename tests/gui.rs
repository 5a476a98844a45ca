//! The GUI, clicked through with egui_kittest: the browser lists cases, selecting one shows its
//! views and details, a bad file produces a visible error, a label change is audited and undone.

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use endotwin::app::{App, Selection};
use endotwin::compute::Compute;
use endotwin::data::phantom::{self, PhantomConfig, Split};
use endotwin::engine::Progress;
use endotwin::store::{OpenMode, Store};
use std::path::Path;

pub(crate) fn tiny_library(dir: &Path) {
    let mut store = Store::open(dir, OpenMode::CreateIfMissing).unwrap();
    let cfg = PhantomConfig {
        seed: 5,
        split: Split::Train,
        polyps: 3,
        views_per_polyp: 4,
        videos: 1,
        frames_per_video: 6,
        background_frames: 1,
        frames_per_exam: 0,
        capsule_images: 0,
        image_size: 48,
        video_size: 48,
    };
    phantom::generate(&mut store, &cfg, &Progress::new()).unwrap();
}

pub(crate) fn harness(library: &Path) -> Harness<'static, App> {
    let library = library.to_path_buf();
    Harness::builder()
        .with_size(egui::vec2(1400.0, 860.0))
        .build_eframe(move |cc| App::with_compute(&cc.egui_ctx, Compute::cpu(None), Some(library)))
}

/// Saves the window as `<name>.png` in $ENDOTWIN_SCREENSHOTS when it is set (README pictures).
pub(crate) fn screenshot(h: &mut Harness<'static, App>, name: &str) {
    if let Ok(dir) = std::env::var("ENDOTWIN_SCREENSHOTS") {
        let path = std::path::Path::new(&dir).join(format!("{name}.png"));
        h.render().unwrap().save(path).unwrap();
    }
}

/// At least one widget shows exactly `text`.
pub(crate) fn shows(h: &Harness<'static, App>, text: &str) {
    assert!(
        h.query_all_by_label(text).next().is_some(),
        "nothing shows {text:?}"
    );
}

/// At least one widget's text contains `text`.
pub(crate) fn shows_part(h: &Harness<'static, App>, text: &str) {
    assert!(
        h.query_all_by_label_contains(text).next().is_some(),
        "nothing shows a text containing {text:?}"
    );
}

pub(crate) fn settle(h: &mut Harness<'static, App>) {
    for _ in 0..6 {
        h.step();
        let ctx = h.ctx.clone();
        h.state_mut().tick(&ctx);
    }
}

#[test]
fn browsing_a_case_shows_its_views_and_details() {
    let dir = tempfile::tempdir().unwrap();
    tiny_library(dir.path());
    let mut h = harness(dir.path());
    settle(&mut h);
    // The browser lists the examinations and polyps.
    shows_part(&h, "S5-E001  ·");
    let store = Store::open(dir.path(), OpenMode::Existing).unwrap();
    let polyp = store.polyps().unwrap().remove(0);
    let row_label = format!("{}  ", polyp.code);
    h.get_by_label_contains(&row_label).click();
    settle(&mut h);
    assert_eq!(h.state().state.selection, Selection::Polyp(polyp.id));
    shows(&h, &format!("Polyp {}", polyp.code));
    shows(&h, "Histology");
    shows(&h, polyp.histology.as_deref().unwrap());
    for v in 1..=4 {
        shows(&h, &format!("view {v}"));
    }
    // Report sentences about this polyp are shown.
    shows(&h, "Report");
    // Arrow keys move to the next case.
    h.key_press(egui::Key::ArrowDown);
    settle(&mut h);
    assert_ne!(h.state().state.selection, Selection::Polyp(polyp.id));
}

#[test]
fn opening_a_file_that_is_not_a_library_shows_an_error_and_keeps_the_library() {
    let dir = tempfile::tempdir().unwrap();
    tiny_library(dir.path());
    let bad = dir.path().join("notes.sqlite");
    std::fs::write(&bad, b"plain text pretending to be a database").unwrap();
    let mut h = harness(dir.path());
    settle(&mut h);
    // Dropped on the window, as a person brings a library file.
    drop_files(&mut h, &bad);
    shows_part(&h, "not an EndoTwin library");
    // The open library is still there.
    shows_part(&h, "S5-E001  ·");
    assert_eq!(
        std::fs::read(&bad).unwrap(),
        b"plain text pretending to be a database"
    );
    // A dropped file that is neither image nor library is explained too.
    let txt = dir.path().join("readme.txt");
    std::fs::write(&txt, b"hello").unwrap();
    drop_files(&mut h, &txt);
    shows_part(&h, "not an image");
    // An opened image that does not decode is explained, not silently blank.
    let broken = dir.path().join("broken.jpg");
    std::fs::write(&broken, b"\xFF\xD8 definitely not a whole JPEG").unwrap();
    drop_files(&mut h, &broken);
    for _ in 0..50 {
        settle(&mut h);
        if h.query_all_by_label_contains("cannot show image")
            .next()
            .is_some()
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    shows_part(&h, "cannot show image");
    shows_part(&h, "broken.jpg");
}

#[test]
fn a_pathology_correction_is_audited_and_can_be_undone() {
    use egui::accesskit::Role;
    let dir = tempfile::tempdir().unwrap();
    tiny_library(dir.path());
    let mut h = harness(dir.path());
    settle(&mut h);
    let store = Store::open(dir.path(), OpenMode::Existing).unwrap();
    let polyp = store.polyps().unwrap().remove(0);
    let original = polyp.histology.clone().unwrap();
    let corrected = if original == "carcinoma" {
        "hyperplastic"
    } else {
        "carcinoma"
    };
    // The reviewer types their name in the status bar.
    h.get_by_label("Reviewer:").focus();
    h.run();
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    h.key_press(egui::Key::Backspace);
    h.get_by_label("Reviewer:").type_text("dr. kittest");
    h.run();
    // Click the polyp in the browser, open the pathology list in Details, pick the other one.
    h.get_by_label_contains(&format!("{}  ", polyp.code))
        .click();
    settle(&mut h);
    h.get_by_role_and_label(Role::ComboBox, "Pathology label")
        .click();
    h.run();
    h.get_by_label(corrected).click();
    settle(&mut h);
    shows_part(
        &h,
        &format!("dr. kittest set histology: {original} -> {corrected}"),
    );
    assert_eq!(
        store.polyp(polyp.id).unwrap().unwrap().histology.as_deref(),
        Some(corrected)
    );
    // Ctrl+Z (with no text field focused) undoes it, through the audited path again.
    h.get_by_label_contains(&format!("{}  ", polyp.code))
        .click();
    settle(&mut h);
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Z);
    settle(&mut h);
    assert_eq!(
        store.polyp(polyp.id).unwrap().unwrap().histology,
        Some(original.clone())
    );
    shows_part(
        &h,
        &format!("dr. kittest set histology: {corrected} -> {original}"),
    );
    // Ctrl+Shift+Z redoes it.
    h.key_press_modifiers(
        egui::Modifiers::COMMAND | egui::Modifiers::SHIFT,
        egui::Key::Z,
    );
    settle(&mut h);
    assert_eq!(
        store.polyp(polyp.id).unwrap().unwrap().histology.as_deref(),
        Some(corrected)
    );
}

#[test]
fn the_sample_library_opens_with_its_cases() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample_db");
    // Work on a copy: the test must not write into the repository.
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&sample, dir.path());
    let mut h = harness(dir.path());
    settle(&mut h);
    let store = Store::open(dir.path(), OpenMode::Existing).unwrap();
    let first = &store.examinations().unwrap()[0];
    shows_part(&h, &format!("{}  ·", first.code));
    shows_part(&h, "examinations ·");
}

/// A copy of `sample_db/` (tests never write into the repository), its store open, and its
/// polyp `code`.
pub(crate) fn sample_copy_with_polyp(
    code: &str,
) -> (tempfile::TempDir, Store, endotwin::store::PolypRow) {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample_db");
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&sample, dir.path());
    let store = Store::open(dir.path(), OpenMode::Existing).unwrap();
    let polyp = store
        .polyps()
        .unwrap()
        .into_iter()
        .find(|p| p.code == code)
        .unwrap();
    (dir, store, polyp)
}

/// The sample library ships indexed by the shipped twin models: a polyp's twins and their
/// vote show on first start, without indexing anything.
#[test]
fn the_sample_librarys_polyp_shows_its_twins_on_first_start() {
    let _rng = crate::common::device_rng();
    let (dir, store, polyp) = sample_copy_with_polyp("S7-E004-P1");
    let indexed = store.polyps().unwrap().len();
    drop(store);
    let shipped = endotwin::twins::TwinModels::load(
        &endotwin::default_models_dir(),
        &burn::tensor::Device::flex(),
    )
    .unwrap();
    let mut h = harness(dir.path());
    h.set_size(egui::vec2(1400.0, 1100.0));
    settle(&mut h);
    crate::gui_input::search(&mut h, &polyp.code);
    crate::gui_input::click_line(&mut h, &format!("{}  ", polyp.code));
    crate::gui_input::click_tab(&mut h, "Digital twins");
    wait_until(&mut h, "the twins", |a| {
        a.state.twins.running.is_none() && a.state.twins.answer.is_some()
    });
    let answer = h.state().state.twins.answer.as_ref().unwrap();
    assert_eq!(answer.version, shipped.version());
    assert!(answer.result.twins.iter().all(|t| t.polyp.id != polyp.id));
    shows_part(&h, &format!("of {indexed} indexed polyps"));
    shows_part(&h, "Diagnosis vote:");
    shows_part(&h, "cut around its polyp mask");
    // A sample polyp is like what the encoder learned from, and its vote's confidence is
    // the calibrated one, said so.
    let familiarity = answer
        .familiarity
        .as_ref()
        .expect("the shipped card has a mark");
    assert!(!familiarity.unfamiliar, "{familiarity:?}");
    shows(&h, endotwin::app::FAMILIAR_BADGE);
    shows_part(&h, "(calibrated on validation votes)");
    screenshot(&mut h, "twins");
}

/// A file dropped on the window, as the windowing integration hands it to egui.
#[derive(Debug)]
pub(crate) struct Dropped(pub std::path::PathBuf);

/// Drops `path` on the window (egui's dropped-files input, as the windowing system gives it).
pub(crate) fn drop_files(h: &mut Harness<'static, App>, path: &Path) {
    h.input_mut()
        .dropped_files
        .push(std::sync::Arc::new(Dropped(path.to_path_buf())));
    settle(h);
}

impl egui::DroppedFile for Dropped {
    fn path(&self) -> &Path {
        &self.0
    }
    fn bytes(&self) -> Result<Vec<u8>, String> {
        std::fs::read(&self.0).map_err(|e| e.to_string())
    }
}

/// An image dropped on the window that is not endoscopy at all (a flat grey card) still gets
/// its twins, but marked: the badge is there and hovering it says what it means and what to
/// do.
#[test]
fn a_dropped_grey_card_gets_its_twins_marked_unfamiliar_with_a_hover_that_says_why() {
    let _rng = crate::common::device_rng();
    use endotwin::app::UNFAMILIAR_BADGE;
    let (dir, store, _) = sample_copy_with_polyp("S7-E004-P1");
    drop(store);
    let grey = dir.path().join("grey.png");
    image::RgbImage::from_pixel(320, 320, image::Rgb([128, 128, 128]))
        .save(&grey)
        .unwrap();
    let mut h = harness(dir.path());
    h.set_size(egui::vec2(1400.0, 1100.0));
    settle(&mut h);
    h.input_mut()
        .dropped_files
        .push(std::sync::Arc::new(Dropped(grey.clone())));
    settle(&mut h);
    crate::gui_input::click_tab(&mut h, "Digital twins");
    wait_until(&mut h, "the twins of the grey card", |a| {
        a.state.twins.running.is_none() && a.state.twins.answer.is_some()
    });
    let answer = h.state().state.twins.answer.as_ref().unwrap();
    assert!(!answer.result.twins.is_empty(), "the answer stays visible");
    assert!(answer.familiarity.as_ref().is_some_and(|j| j.unfamiliar));
    shows_part(&h, "Diagnosis vote:");
    h.get_by_label(UNFAMILIAR_BADGE).hover();
    settle(&mut h);
    shows_part(&h, "treat the answer as a guess");
    shows_part(&h, "do not rely on it");
    screenshot(&mut h, "twins-unfamiliar");
}

/// The sample library ships encoded by both shipped prompt models: a text search answers
/// without encoding anything, a polyp's prompt scores show, and a video's polyp strip comes
/// from the shipped detector, all with the shipped models' versions.
#[test]
fn the_sample_library_answers_prompts_and_shows_a_videos_polyp_strip_on_first_start() {
    let _rng = crate::common::device_rng();
    use crate::gui_input::{click_line, click_tab, search as find_in_browser};
    use egui::accesskit::Role;
    let (dir, store, polyp) = sample_copy_with_polyp("S7-E004-P1");
    let video = store
        .videos()
        .unwrap()
        .into_iter()
        .find(|v| v.code == "S7-V01")
        .unwrap();
    let video_exam = store.examination(video.examination_id).unwrap().unwrap();
    drop(store);
    let shipped = |name: &str| {
        let path = endotwin::default_models_dir().join(format!("{name}.json"));
        let card: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        format!("{name} ({})", card["version"].as_str().unwrap())
    };
    let mut h = harness(dir.path());
    h.set_size(egui::vec2(1400.0, 1000.0));
    settle(&mut h);
    // The Text prompts tab, a sentence typed into its search and Enter: as a person does.
    click_tab(&mut h, "Text prompts");
    h.get_by_label("Search polyps by text:").focus();
    settle(&mut h);
    h.get_by_label("Search polyps by text:")
        .type_text("a large sessile polyp with an irregular surface, reddish");
    h.key_press(egui::Key::Enter);
    wait_until(&mut h, "the search", |a| a.state.prompts.search.is_some());
    let search = h.state().state.prompts.search.clone().unwrap();
    assert_eq!(search.model, shipped("prompts"));
    assert_eq!(
        search.encoded, 0,
        "sample_db is not encoded by the shipped model"
    );
    assert!(!search.hits.is_empty());
    // The polyp found with the browser's Search and clicked; the second prompt set picked.
    find_in_browser(&mut h, &polyp.code);
    click_line(&mut h, &format!("{}  ", polyp.code));
    h.get_by_role_and_label(Role::ComboBox, "Prompt set:")
        .click();
    h.run_steps(2);
    h.get_by_label("benign vs neoplastic").click();
    settle(&mut h);
    wait_until(&mut h, "the scores of benign vs neoplastic", |a| {
        a.state.prompts.running.is_none()
            && a.state.prompts.scores.as_ref().is_some_and(|s| {
                s.frames
                    .first()
                    .is_some_and(|f| f.1[0].prompt.contains("hyperplastic"))
            })
    });
    screenshot(&mut h, "prompts");
    shows_part(&h, "All 4 shown images together");
    find_in_browser(&mut h, &video_exam.code);
    click_line(&mut h, &format!("Video {}", video.code));
    click_tab(&mut h, "Viewer");
    wait_until(&mut h, "the polyp strip", |a| {
        a.state.prompts.strip.is_some()
    });
    let strip = h.state().state.prompts.strip.clone().unwrap();
    assert_eq!(strip.video, video.id);
    assert_eq!(strip.model, shipped("prompts-detect"));
    assert_eq!(strip.reading.shown.len() as i64, video.frame_count);
    // The detector's card stores its calibration: the strip shows calibrated numbers and
    // calls them a confidence.
    let card = endotwin::model::weights::read_card(
        &endotwin::default_models_dir().join("prompts-detect.json"),
    )
    .unwrap();
    assert!(strip.reading.calibrated);
    for (shown, raw) in strip.reading.shown.iter().zip(&strip.reading.raw) {
        assert_eq!(
            Some(*shown),
            endotwin::prompts::trust::calibrated(&card, *raw)
        );
    }
    shows_part(&h, "calibrated polyp confidence per frame");
    shows_part(
        &h,
        &format!(
            "this frame polyp: confidence {:.3} (calibrated)",
            strip.reading.shown[0]
        ),
    );
    screenshot(&mut h, "prompts-strip");
}

pub(crate) fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else if !entry.file_name().to_string_lossy().ends_with("-wal")
            && !entry.file_name().to_string_lossy().ends_with("-shm")
        {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn imported_real_frames_show_beside_phantom_cases() {
    let Some(kvasir) = crate::common::realdata("kvasir-seg") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    tiny_library(dir.path());
    {
        let mut store = Store::open(dir.path(), OpenMode::Existing).unwrap();
        endotwin::data::import::run(
            endotwin::data::import::ImportLayout::KvasirSeg,
            &mut store,
            &kvasir,
            Default::default(),
            &Progress::new(),
        )
        .unwrap();
    }
    let mut h = harness(dir.path());
    settle(&mut h);
    shows_part(&h, "kvasir-seg  ·  5 polyps");
    shows_part(&h, "S5-E001  ·");
    let store = Store::open(dir.path(), OpenMode::Existing).unwrap();
    let real = store
        .polyps()
        .unwrap()
        .into_iter()
        .find(|p| p.code.starts_with("kvasir-seg-"))
        .unwrap();
    crate::gui_input::search(&mut h, &real.code);
    crate::gui_input::click_line(&mut h, &format!("{}  ", real.code));
    shows(&h, &format!("Polyp {}", real.code));
    shows(&h, "view 1");
}

/// Steps the app until `done` holds or 60 s pass (jobs run on the engine thread).
pub(crate) fn wait_until(h: &mut Harness<'static, App>, what: &str, done: impl Fn(&App) -> bool) {
    let start = std::time::Instant::now();
    while !done(h.state()) {
        assert!(
            start.elapsed().as_secs() < 60,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
        settle(h);
    }
    settle(h);
}

/// A small untrained twin encoder: the panel's behaviour, not its accuracy, is under test.
pub(crate) fn tiny_twin_models(dir: &Path) {
    let _rng = crate::common::device_rng();
    use endotwin::model::vit::VitConfig;
    use endotwin::model::weights::{self, ModelCard, ModelKind};
    let device = burn::tensor::Device::flex();
    device.seed(1);
    let config = VitConfig::new(32, 16, 32, 1, 2).with_projection(Some(64));
    let card = ModelCard::new("twin-image", ModelKind::ImageEncoder, "t1", "test", &config);
    weights::save(&config.init(&device), &card, dir).unwrap();
}

#[test]
fn the_twin_panel_indexes_retrieves_votes_pins_and_opens_a_twin() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    tiny_library(dir.path());
    let models = tempfile::tempdir().unwrap();
    tiny_twin_models(models.path());
    let store = Store::open(dir.path(), OpenMode::Existing).unwrap();
    let polyps = store.polyps().unwrap();
    let mut h = harness(dir.path());
    h.state_mut().state.twins.models_dir = models.path().to_path_buf();
    settle(&mut h);
    h.get_by_label_contains(&format!("{}  ", polyps[0].code))
        .click();
    settle(&mut h);

    // Opening the panel retrieves at once; the library is not indexed yet, and says so.
    h.get_by_label("Digital twins").click();
    // The click submits the retrieval on the next frames; wait for it to start, then end.
    settle(&mut h);
    wait_until(&mut h, "the retrieval", |a| a.state.twins.running.is_none());
    shows_part(&h, "index it first");
    h.get_by_label("Index the library now").click();
    wait_until(&mut h, "indexing and retrieval", |a| {
        a.state.twins.answer.is_some()
    });

    // The two other polyps come back as twins, with their pathology, and a vote.
    shows_part(&h, "Diagnosis vote:");
    for p in &polyps[1..] {
        shows_part(&h, &p.code);
    }
    let answer = h.state().state.twins.answer.clone().unwrap();
    assert_eq!(answer.result.twins.len(), 2);
    assert!(
        answer
            .result
            .twins
            .iter()
            .all(|t| t.polyp.id != polyps[0].id),
        "the query polyp is not its own twin"
    );
    let first = answer.result.twins[0].polyp.clone();
    shows_part(&h, first.histology.as_deref().unwrap());

    // Pin the first twin: the side-by-side comparison appears.
    h.get_all_by_label("Pin").next().unwrap().click();
    settle(&mut h);
    assert_eq!(h.state().state.twins.pinned, Some(first.id));
    shows(&h, "Side by side");

    // Open the first twin's case: it becomes the selection, in the viewer.
    h.get_all_by_label("Open case").next().unwrap().click();
    settle(&mut h);
    assert_eq!(h.state().state.selection, Selection::Polyp(first.id));
}

#[test]
fn a_capsule_frame_shows_its_finding_beside_the_refined_caption_and_category() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path(), OpenMode::CreateIfMissing).unwrap();
    let cfg = PhantomConfig {
        seed: 8,
        split: Split::Train,
        polyps: 1,
        views_per_polyp: 4,
        videos: 0,
        frames_per_video: 0,
        background_frames: 0,
        frames_per_exam: 0,
        capsule_images: 6,
        image_size: 48,
        video_size: 48,
    };
    phantom::generate(&mut store, &cfg, &Progress::new()).unwrap();
    let exam = store
        .examinations()
        .unwrap()
        .into_iter()
        .find(|e| e.kind == "capsule")
        .unwrap();
    let frame = store.loose_frames(exam.id).unwrap().remove(0);
    let raw = store.caption(frame.id).unwrap().unwrap();
    let refined = endotwin::captions::Refiner::default().refine(&raw);
    let mut h = harness(dir.path());
    settle(&mut h);
    // The examination's line clicked, then its first frame in the grid.
    crate::gui_input::click_line(&mut h, &format!("{}  ·", exam.code));
    crate::gui_input::open_view(&mut h, 0);
    shows(&h, "Finding");
    shows(&h, &raw);
    shows(&h, "Category");
    shows(&h, &refined.category);
    shows(&h, &refined.caption);
}

#[test]
fn help_opens_the_bundled_guide_at_the_page_of_the_tab_in_use() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    tiny_library(dir.path());
    let mut h = harness(dir.path());
    settle(&mut h);
    assert!(
        h.query_all_by_label_contains("Case browser (left)")
            .next()
            .is_none(),
        "the guide is closed at start"
    );
    h.get_by_label("Help").click();
    h.run();
    h.get_by_label("User guide (F1)").click();
    settle(&mut h);
    shows_part(&h, "Case browser (left)");
    shows_part(&h, "docs/guide.md (bundled with this build)");
    // Another tab, F1: that capability's own page.
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Num2);
    settle(&mut h);
    h.key_press(egui::Key::F1);
    settle(&mut h);
    shows_part(&h, "docs/twins.md (bundled with this build)");
    shows_part(&h, "Held-out data no model or knob ever saw");
    screenshot(&mut h, "guide");
}

#[test]
fn the_prompt_tab_scores_each_set_with_its_own_model_and_says_when_the_user_overrides() {
    let _rng = crate::common::device_rng();
    use egui::accesskit::Role;
    let dir = tempfile::tempdir().unwrap();
    tiny_library(dir.path());
    let mut h = harness(dir.path());
    settle(&mut h);
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Num3);
    settle(&mut h);
    // The first set, polyp vs background, is the detector's question: the tab scores it so.
    let scoring = |h: &Harness<'static, App>| h.state().state.prompts.scoring_model();
    assert_eq!(scoring(&h), "prompts-detect");
    shows_part(&h, "the set is scored by its own model (`prompts-detect`)");
    // The user picks the stage-3 model: the tab says the set was made for another.
    h.get_by_role_and_label(Role::ComboBox, "Model:").click();
    h.run_steps(2);
    h.get_all_by_label("prompts").last().unwrap().click();
    settle(&mut h);
    assert_eq!(scoring(&h), "prompts");
    shows_part(
        &h,
        "this set is for `prompts-detect`; scored with `prompts` as you chose",
    );
    // A pathology set is the stage-3 model's own.
    h.get_by_role_and_label(Role::ComboBox, "Prompt set:")
        .click();
    h.run_steps(2);
    h.get_by_label("benign vs neoplastic").click();
    settle(&mut h);
    assert_eq!(scoring(&h), "prompts");
    shows_part(&h, "the set is scored by its own model (`prompts`)");
    // Back to polyp vs background: the detector again.
    h.get_by_role_and_label(Role::ComboBox, "Prompt set:")
        .click();
    h.run_steps(2);
    h.get_by_label("polyp vs background").click();
    settle(&mut h);
    assert_eq!(scoring(&h), "prompts-detect");
}
