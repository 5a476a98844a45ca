//! The Training tab, clicked through: a tiny tracklet run is set up in the form and started
//! from the panel; its loss curve fills as steps land; Stop ends it after the first epoch's
//! checkpoint; ticking `resume` and starting again continues from that checkpoint to a saved
//! model. A run on a library with no videos says why it cannot train.

use crate::gui::{harness, settle, shows_part};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use endotwin::app::App;
use std::time::{Duration, Instant};

/// Steps the app until `done` holds (the run is on its own thread), at most `secs` seconds.
fn until(h: &mut Harness<'static, App>, secs: u64, what: &str, done: impl Fn(&App) -> bool) {
    let start = Instant::now();
    while !done(h.state()) {
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "waited {secs} s for {what}"
        );
        settle(h);
        std::thread::sleep(Duration::from_millis(50));
    }
    settle(h);
}

fn type_into(h: &mut Harness<'static, App>, option: &str, text: &str) {
    h.get_by_label(option).focus();
    h.run();
    h.get_by_label(option).type_text(text);
    h.run();
}

#[test]
fn a_training_run_started_from_the_panel_shows_its_curve_stops_and_resumes() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let models = tempfile::tempdir().unwrap();
    crate::common::video_library(dir.path(), 4);
    let mut h = harness(dir.path());
    settle(&mut h);
    crate::gui_input::click_tab(&mut h, "Training");
    settle(&mut h);
    // The form is the recipe's option list, with its defaults as hints.
    h.get_by_label("tracklets").click();
    settle(&mut h);
    shows_part(&h, "supervised by time alone");
    type_into(&mut h, "epochs", "3");
    type_into(&mut h, "anchors", "4");
    type_into(&mut h, "size", "16");
    type_into(&mut h, "out", &models.path().display().to_string());
    type_into(&mut h, "name", "panel");
    h.get_by_label("Start training").click();
    settle(&mut h);

    // Curve points arrive while the run goes; the first epoch writes its checkpoint.
    until(&mut h, 240, "the first epoch", |app| {
        app.training_run()
            .is_some_and(|r| !r.log().epochs.is_empty())
    });
    let (steps, epoch1) = {
        let log = h.state().training_run().unwrap().log().clone();
        (log.losses.len(), log.epochs[0].clone())
    };
    assert!(steps > 0, "no loss points");
    assert!(epoch1.get("loss").unwrap().is_finite());
    shows_part(&h, "steps so far");
    h.get_by_label("Stop").click();
    until(&mut h, 240, "the run to stop", |app| {
        app.training_run().is_some_and(|r| r.finished())
    });
    let stopped = h.state().training_run().unwrap().log().clone();
    assert!(
        matches!(&stopped.outcome, Some(Err(why)) if why.contains("cancelled")),
        "{:?}",
        stopped.outcome
    );
    assert!(stopped.epochs.len() < 3, "stopped before the end");
    shows_part(&h, "stopped:");
    assert!(!models.path().join("panel.json").exists());

    // Resume continues from the checkpoint to the end and saves the model.
    h.get_by_label("resume").click();
    settle(&mut h);
    h.get_by_label("Start training").click();
    settle(&mut h);
    until(&mut h, 400, "the resumed run to finish", |app| {
        app.training_run().is_some_and(|r| r.finished())
    });
    let resumed = h.state().training_run().unwrap().log().clone();
    assert!(
        resumed
            .messages
            .iter()
            .any(|m| m.starts_with("resuming after epoch")),
        "{:?} {:?}",
        resumed.messages,
        resumed.outcome
    );
    assert!(
        matches!(&resumed.outcome, Some(Ok(_))),
        "{:?}",
        resumed.outcome
    );
    // Only the epochs after the checkpoint ran again.
    assert_eq!(
        resumed.epochs.first().map(|e| e.epoch),
        Some(stopped.epochs.len() + 1)
    );
    assert!(models.path().join("panel.json").exists());
    shows_part(&h, "finished: saved");

    // Both runs are in the library's records, listed newest first; ticking them draws their
    // epoch losses over each other.
    let runs: Vec<(i64, String, usize)> = h
        .state()
        .state
        .training
        .runs
        .iter()
        .map(|r| (r.row.id, r.row.status.clone(), r.losses.len()))
        .collect();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(runs[0].1, "finished");
    assert_eq!(runs[1].1, "cancelled");
    assert!(
        runs.iter().all(|r| r.2 > 0),
        "each run logged its epochs: {runs:?}"
    );
    for (id, _, _) in &runs {
        h.get_by_label(&format!("#{id}")).scroll_to_me();
        settle(&mut h);
        h.get_by_label(&format!("#{id}")).click();
        settle(&mut h);
    }
    assert_eq!(h.state().state.training.overlay.len(), 2);
    shows_part(&h, "mean loss per epoch of the ticked runs");

    // The finished run's report: never on the library it trained on...
    let finished = runs[0].0;
    let report_button = format!("Report #{finished}");
    type_into(
        &mut h,
        "Reports run on the held-out library",
        &dir.path().display().to_string(),
    );
    h.state_mut().state.toasts.clear();
    h.get_by_label(&report_button).scroll_to_me();
    settle(&mut h);
    h.get_by_label(&report_button).click();
    settle(&mut h);
    until(&mut h, 60, "the refusal", |app| {
        app.state.training.reporting.is_none()
    });
    let said = toasts(&h);
    assert!(
        said.iter().any(|t| t.contains("held-out data only")),
        "{said:?}"
    );
    assert!(h.state().state.training.runs[0].report.is_none());

    // ...but on held-out videos of another phantom seed, beside the active tracklet model.
    let held = tempfile::tempdir().unwrap();
    crate::common::video_library_of_seed(held.path(), 4, 6);
    let report = report_on(&mut h, held.path(), finished);
    assert_eq!(report.capability, "tracklet re-identification");
    assert!(report.held_out.contains(&held.path().display().to_string()));
    let map = report
        .metrics
        .iter()
        .find(|m| m.name == "retrieval mAP")
        .unwrap();
    assert!((0.0..=1.0).contains(&map.model), "{map:?}");
    assert!(map.model_ci.is_some());
    // The active model (the shipped tracklet head) stands beside it.
    assert!(
        report
            .active
            .as_deref()
            .is_some_and(|a| a.contains("tracklet-head"))
    );
    assert!(map.active.is_some());
    let curve = &report.curves[0];
    assert_eq!(curve.roc.first(), Some(&[0.0, 0.0]));
    assert_eq!(curve.roc.last(), Some(&[1.0, 1.0]));
    let confusion = report.confusion.as_ref().unwrap();
    let counted: usize = confusion.counts.iter().flatten().sum();
    assert_eq!(counted, curve.positives + curve.negatives);
    shows_part(&h, &format!("Evaluation report of run #{finished}"));
    shows_part(&h, "confusion matrix: pairs linked at cosine");
    // A tracklet model shows no confidence: the report says its numbers are not ones.
    shows_part(&h, endotwin::eval::report::calibration::NOT_STORED);
    if std::env::var("ENDOTWIN_SCREENSHOTS").is_ok() {
        h.set_size(egui::vec2(1400.0, 1300.0));
        settle(&mut h);
        h.get_by_label("Close report").scroll_to_me();
        settle(&mut h);
        crate::gui::screenshot(&mut h, "training-report");
    }
    // Saved with the run: JSON + PNG beside its card, read back when the library reopens.
    let json = models.path().join("panel.report.json");
    assert!(json.is_file() && models.path().join("panel.report.png").is_file());
    assert_eq!(
        endotwin::eval::report::Report::load(&json).unwrap(),
        *report
    );
}

#[test]
fn a_run_without_the_data_it_needs_says_why() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    crate::gui::tiny_library(dir.path());
    let models = tempfile::tempdir().unwrap();
    let mut h = harness(dir.path());
    settle(&mut h);
    crate::gui_input::click_tab(&mut h, "Training");
    settle(&mut h);
    h.get_by_label("tracklets").click();
    settle(&mut h);
    type_into(&mut h, "out", &models.path().display().to_string());
    h.get_by_label("Start training").click();
    until(&mut h, 120, "the refusal", |app| {
        app.training_run().is_some_and(|r| r.finished())
    });
    let log = h.state().training_run().unwrap().log().clone();
    // The reason names what is missing and how much there is, and the panel shows it.
    let reason = match &log.outcome {
        Some(Err(reason)) => reason.clone(),
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert!(
        reason.contains("not enough training data")
            && reason.contains("at least 12 fragments")
            && reason.contains("the library has 0"),
        "{reason}"
    );
    assert!(log.losses.is_empty(), "no step ran");
    shows_part(&h, "stopped:");
    assert!(std::fs::read_dir(models.path()).unwrap().next().is_none());
}

#[test]
fn a_read_only_library_or_a_batch_too_big_is_refused_in_the_panel_and_nothing_is_written() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    crate::gui::tiny_library(dir.path());
    let models = tempfile::tempdir().unwrap();
    // A batch no machine has memory for: the run stops before its first step, says why and
    // writes nothing.
    let mut h = harness(dir.path());
    settle(&mut h);
    crate::gui_input::click_tab(&mut h, "Training");
    settle(&mut h);
    h.get_by_label("image-encoder").click();
    settle(&mut h);
    type_into(&mut h, "out", &models.path().display().to_string());
    type_into(&mut h, "memory-gb", "0.15");
    h.get_by_label("Start training").click();
    until(&mut h, 120, "the refusal", |app| {
        app.training_run().is_some_and(|r| r.finished())
    });
    let log = h.state().training_run().unwrap().log().clone();
    let why = match &log.outcome {
        Some(Err(e)) => e.clone(),
        other => panic!("{other:?}"),
    };
    assert!(
        why.contains("needs about") && why.contains("lower --batch"),
        "{why}"
    );
    assert!(log.losses.is_empty(), "no step ran");
    shows_part(&h, "needs about");
    assert!(std::fs::read_dir(models.path()).unwrap().next().is_none());
    drop(h);

    // A library open read-only: Start is refused with a toast, no run starts.
    let db = dir.path().join(endotwin::store::DB_FILE);
    let mut perms = std::fs::metadata(&db).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&db, perms).unwrap();
    let mut h = harness(dir.path());
    settle(&mut h);
    assert!(h.state().state.library.as_ref().unwrap().read_only);
    crate::gui_input::click_tab(&mut h, "Training");
    settle(&mut h);
    h.get_by_label("image-encoder").click();
    settle(&mut h);
    h.get_by_label("Start training").click();
    settle(&mut h);
    assert!(h.state().training_run().is_none(), "no run started");
    assert!(
        toasts(&h).iter().any(|t| t.contains("read-only")),
        "{:?}",
        toasts(&h)
    );
}

/// The toast texts shown now.
fn toasts(h: &Harness<'static, App>) -> Vec<String> {
    h.state()
        .state
        .toasts
        .iter()
        .map(|t| t.text.clone())
        .collect()
}

#[test]
fn a_finished_run_is_promoted_the_twin_index_rebuilds_and_demote_brings_the_shipped_model_back() {
    let _rng = crate::common::device_rng();
    use endotwin::model::weights::read_card;
    let dir = tempfile::tempdir().unwrap();
    crate::common::video_library(dir.path(), 4);
    let mut h = harness(dir.path());
    settle(&mut h);
    crate::gui_input::click_tab(&mut h, "Training");
    settle(&mut h);
    shows_part(&h, "Active models: the shipped ones");
    h.get_by_label("image-encoder").click();
    settle(&mut h);
    type_into(&mut h, "epochs", "1");
    type_into(&mut h, "batch", "4");
    type_into(&mut h, "size", "32");
    type_into(&mut h, "name", "mine");
    h.get_by_label("Start training").click();
    settle(&mut h);
    until(&mut h, 400, "the run to finish", |app| {
        app.training_run().is_some_and(|r| r.finished())
    });
    let log = h.state().training_run().unwrap().log().clone();
    assert!(matches!(&log.outcome, Some(Ok(_))), "{:?}", log.outcome);
    let run = h.state().state.training.runs[0].row.id;
    let trained = read_card(&dir.path().join("runs").join("mine.json")).unwrap();

    // Its report, on held-out polyps of another seed, beside the shipped twin encoder: the
    // figures, the 2v2 curves and the pathology vote's confusion matrix.
    let held = tempfile::tempdir().unwrap();
    polyp_library(held.path(), 14, 8);
    let report = report_on(&mut h, held.path(), run);
    assert_eq!(report.capability, "digital twins");
    assert!(
        report.held_out.contains("14 polyps with four views"),
        "{}",
        report.held_out
    );
    let acc = report
        .metrics
        .iter()
        .find(|m| m.name == "2v2 accuracy@1")
        .unwrap();
    assert!(
        (0.0..=1.0).contains(&acc.model) && acc.model_ci.is_some(),
        "{acc:?}"
    );
    assert!(
        acc.active.is_some(),
        "the shipped encoder beside it: {acc:?}"
    );
    assert_eq!(report.curves.len(), 2);
    assert_eq!(report.curves[0].positives + report.curves[0].negatives, 14);
    let confusion = report.confusion.as_ref().unwrap();
    assert_eq!(confusion.counts.iter().flatten().sum::<usize>(), 14);
    shows_part(
        &h,
        &format!("Evaluation report of run #{run}: digital twins"),
    );
    assert!(dir.path().join("runs").join("mine.report.png").is_file());

    // Promote: the run's model becomes the library's twin image encoder and the twin index is
    // rebuilt with it in the background.
    // (Toasts float over the panel's corner; the user's click would wait for them to fade.)
    h.state_mut().state.toasts.clear();
    h.get_by_label(&format!("Promote #{run}")).scroll_to_me();
    settle(&mut h);
    h.get_by_label(&format!("Promote #{run}")).click();
    settle(&mut h);
    let own = dir.path().join("models");
    until(&mut h, 120, "the promotion", |app| {
        app.state.training.promoting.is_none() && app.state.twins.models_dir == own
    });
    assert_eq!(h.state().state.twins.models_dir, own, "{:?}", toasts(&h));
    let active = read_card(&own.join("twin-image.json")).unwrap();
    assert_eq!(active.version, trained.version);
    assert_eq!(active.promoted_from.unwrap().run, Some(run));
    let said = toasts(&h);
    assert!(
        said.iter()
            .any(|t| t.contains(&format!("twin index rebuilt with {}", trained.version))),
        "{said:?}"
    );
    shows_part(&h, &format!("from run #{run}"));

    // Demote: the shipped encoder is back, and the index with it.
    h.state_mut().state.toasts.clear();
    h.get_by_label("Demote twin-image").scroll_to_me();
    settle(&mut h);
    h.get_by_label("Demote twin-image").click();
    settle(&mut h);
    let shipped = read_card(&endotwin::default_models_dir().join("twin-image.json")).unwrap();
    let card = own.join("twin-image.json");
    until(&mut h, 120, "the demotion", |app| {
        app.state.training.promoting.is_none()
            && read_card(&card).is_ok_and(|c| c.version == shipped.version)
    });
    let back = read_card(&own.join("twin-image.json")).unwrap();
    assert_eq!(back.version, shipped.version);
    let said = toasts(&h);
    assert!(
        said.iter()
            .any(|t| t.contains(&format!("twin index rebuilt with {}", shipped.version))),
        "{said:?}"
    );
}

/// A library of `polyps` phantom polyps with four views each (held-out polyps for a report).
fn polyp_library(dir: &std::path::Path, polyps: usize, seed: u64) {
    use endotwin::data::phantom::{self, PhantomConfig, Split};
    let mut store =
        endotwin::store::Store::open(dir, endotwin::store::OpenMode::CreateIfMissing).unwrap();
    let cfg = PhantomConfig {
        seed,
        split: Split::Validation,
        polyps,
        views_per_polyp: 4,
        videos: 0,
        frames_per_video: 0,
        background_frames: 0,
        frames_per_exam: 0,
        capsule_images: 0,
        image_size: 64,
        video_size: 64,
    };
    phantom::generate(&mut store, &cfg, &endotwin::engine::Progress::new()).unwrap();
}

/// Names `held` as the held-out library of reports, clicks run `run`'s Report button and
/// waits for the report; the newest run's report.
fn report_on(
    h: &mut Harness<'static, App>,
    held: &std::path::Path,
    run: i64,
) -> Box<endotwin::eval::report::Report> {
    // Typed into the field, as a person names a folder (emptied first).
    let field = "Reports run on the held-out library";
    h.get_by_role_and_label(egui::accesskit::Role::TextInput, field)
        .scroll_to_me();
    settle(h);
    h.get_by_role_and_label(egui::accesskit::Role::TextInput, field)
        .focus();
    settle(h);
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    h.key_press(egui::Key::Backspace);
    h.get_by_role_and_label(egui::accesskit::Role::TextInput, field)
        .type_text(&held.display().to_string());
    h.key_press(egui::Key::Escape);
    h.state_mut().state.toasts.clear();
    settle(h);
    assert_eq!(
        h.state().state.training.report_held_out,
        held.display().to_string()
    );
    let button = format!("Report #{run}");
    h.get_by_label(&button).scroll_to_me();
    settle(h);
    h.get_by_label(&button).click();
    settle(h);
    until(h, 400, "the report", |app| {
        app.state.training.reporting.is_none()
    });
    h.state().state.training.runs[0]
        .report
        .clone()
        .unwrap_or_else(|| panic!("no report: {:?}", toasts(h)))
}
