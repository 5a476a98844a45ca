//! The trust marks in the Captions and Text prompts tabs, as a person sees them: a grey card
//! dropped on the window gets the UNFAMILIAR INPUT badge (its hover says what it means and
//! what to do), a sample-library frame reads "familiar input"; the detector's polyp
//! probability says "confidence" only where its card stores a calibration, in the tab and in
//! a video's polyp strip.

use crate::gui::{drop_files, harness, sample_copy_with_polyp, settle, shows, shows_part};
use crate::gui_input::{click_line, click_tab, open_view, search};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use endotwin::app::{App, FAMILIAR_BADGE, UNFAMILIAR_BADGE};
use endotwin::trust::UNFAMILIAR_HINT;

type H = Harness<'static, App>;

/// Waits for the Captions tab's answer of its first frame, opened large.
fn caption_answer(h: &mut H) -> endotwin::captions::query::FrameCaptions {
    crate::gui::wait_until(h, "the captions", |a| {
        a.state.captions.running.is_none() && !a.state.captions.frames.is_empty()
    });
    open_view(h, 0);
    let keys = h.state().state.shown_frames(usize::MAX);
    h.state().state.captions.frames[&keys[0]].clone()
}

/// Waits for the Text prompts tab's scores.
fn prompt_scores(h: &mut H) -> endotwin::prompts::query::ScoredFrames {
    crate::gui::wait_until(h, "the prompt scores", |a| {
        a.state.prompts.running.is_none() && a.state.prompts.scores.is_some()
    });
    h.state().state.prompts.scores.clone().unwrap()
}

/// Hovers the badge and checks its hover text says what the mark means and what to do.
fn hover_says_why(h: &mut H) {
    h.get_by_label(UNFAMILIAR_BADGE).hover();
    settle(h);
    shows_part(h, UNFAMILIAR_HINT);
    shows_part(h, "do not rely on it");
}

#[test]
fn a_dropped_grey_card_is_marked_unfamiliar_in_the_captions_and_text_prompts_tabs() {
    let _rng = crate::common::device_rng();
    let (dir, store, _) = sample_copy_with_polyp("S7-E004-P1");
    drop(store);
    let grey = dir.path().join("grey.png");
    image::RgbImage::from_pixel(320, 320, image::Rgb([128, 128, 128]))
        .save(&grey)
        .unwrap();
    let mut h = harness(dir.path());
    h.set_size(egui::vec2(1400.0, 1100.0));
    settle(&mut h);
    drop_files(&mut h, &grey);
    click_tab(&mut h, "Captions");
    let answer = caption_answer(&mut h);
    assert!(
        answer.familiarity.as_ref().is_some_and(|j| j.unfamiliar),
        "{:?}",
        answer.familiarity
    );
    // The answer stays visible, qualified.
    shows(&h, "Top captions");
    hover_says_why(&mut h);
    click_tab(&mut h, "Text prompts");
    let scores = prompt_scores(&mut h);
    assert!(
        scores.familiarity.as_ref().is_some_and(|j| j.unfamiliar),
        "{:?}",
        scores.familiarity
    );
    assert_eq!(scores.frames.len(), 1, "the answer stays visible");
    hover_says_why(&mut h);
}

#[test]
fn a_sample_library_frame_reads_as_familiar_input_and_the_detector_says_confidence() {
    let _rng = crate::common::device_rng();
    let (dir, store, polyp) = sample_copy_with_polyp("S7-E004-P1");
    let capsule = store
        .examinations()
        .unwrap()
        .into_iter()
        .find(|e| e.kind == "capsule")
        .unwrap();
    drop(store);
    let mut h = harness(dir.path());
    h.set_size(egui::vec2(1400.0, 1100.0));
    settle(&mut h);
    // A capsule examination of the sample library, in the Captions tab.
    search(&mut h, &capsule.code);
    click_line(&mut h, &format!("{}  ·", capsule.code));
    click_tab(&mut h, "Captions");
    let answer = caption_answer(&mut h);
    assert!(
        answer.familiarity.as_ref().is_some_and(|j| !j.unfamiliar),
        "{:?}",
        answer.familiarity
    );
    shows(&h, FAMILIAR_BADGE);
    assert!(h.query_by_label(UNFAMILIAR_BADGE).is_none());
    // A sample polyp in the Text prompts tab: its first set, polyp vs background, is the
    // detector's, whose card stores its calibration: the polyp probability is shown
    // calibrated and called a confidence.
    search(&mut h, &polyp.code);
    click_line(&mut h, &format!("{}  ", polyp.code));
    click_tab(&mut h, "Text prompts");
    let scores = prompt_scores(&mut h);
    assert!(
        scores.familiarity.as_ref().is_some_and(|j| !j.unfamiliar),
        "{:?}",
        scores.familiarity
    );
    shows(&h, FAMILIAR_BADGE);
    let reading = scores.polyp.expect("the detector's polyp probability");
    assert!(reading.calibrated);
    let card = endotwin::model::weights::read_card(
        &endotwin::default_models_dir().join("prompts-detect.json"),
    )
    .unwrap();
    let expected = endotwin::prompts::trust::calibrated(&card, reading.raw[0]).unwrap();
    assert_eq!(reading.shown[0], expected);
    shows(
        &h,
        &format!("polyp: confidence {:.3} (calibrated)", expected),
    );
}

/// A library whose own models folder (as a promotion makes it) holds the shipped models, the
/// detector's card without its calibration.
fn library_with_an_uncalibrated_detector(dir: &std::path::Path) {
    let models = dir.join("models");
    std::fs::create_dir_all(&models).unwrap();
    crate::gui::copy_dir(&endotwin::default_models_dir(), &models);
    std::fs::write(models.join("ACTIVE"), "").unwrap();
    let path = models.join("prompts-detect.json");
    let mut card: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(card["calibration"]["detector"].is_object());
    card["calibration"] = serde_json::json!({});
    std::fs::write(&path, serde_json::to_string_pretty(&card).unwrap()).unwrap();
    assert_eq!(
        endotwin::engine::promote::models_dir_for(dir),
        models,
        "the library reads its own models"
    );
}

#[test]
fn a_detector_without_a_calibration_labels_its_polyp_probability_not_calibrated() {
    let _rng = crate::common::device_rng();
    let (dir, store, polyp) = sample_copy_with_polyp("S7-E004-P1");
    let video = store
        .videos()
        .unwrap()
        .into_iter()
        .find(|v| v.code == "S7-V01")
        .unwrap();
    let video_exam = store.examination(video.examination_id).unwrap().unwrap();
    drop(store);
    library_with_an_uncalibrated_detector(dir.path());
    let mut h = harness(dir.path());
    h.set_size(egui::vec2(1400.0, 1100.0));
    settle(&mut h);
    search(&mut h, &polyp.code);
    click_line(&mut h, &format!("{}  ", polyp.code));
    click_tab(&mut h, "Text prompts");
    let scores = prompt_scores(&mut h);
    let reading = scores.polyp.expect("the detector's polyp probability");
    assert!(!reading.calibrated);
    assert_eq!(reading.shown, reading.raw, "the raw number, as it is");
    shows(
        &h,
        &format!("polyp probability {:.3}: not calibrated", reading.raw[0]),
    );
    assert!(
        h.query_all_by_label_contains("polyp: confidence")
            .next()
            .is_none()
    );
    // The video's polyp strip under the viewer says the same.
    search(&mut h, &video_exam.code);
    click_line(&mut h, &format!("Video {}", video.code));
    click_tab(&mut h, "Viewer");
    crate::gui::wait_until(&mut h, "the polyp strip", |a| {
        a.state.prompts.strip.is_some()
    });
    let strip = h.state().state.prompts.strip.clone().unwrap();
    assert!(!strip.reading.calibrated);
    assert_eq!(strip.reading.shown, strip.reading.raw);
    shows_part(&h, "polyp probability per frame, not calibrated");
    assert!(
        h.query_all_by_label_contains("polyp confidence")
            .next()
            .is_none()
    );
}
