//! The unfamiliar mark and calibrated confidence (issue #45), through the commands a user
//! runs: a clearly foreign image is marked by every answering command, a sample-library case
//! is not; `model trust` fits and stores both on a small library; a model trained in the app
//! gets them on its own.

use crate::common::{Ran, endotwin, run};
use endotwin::store::{MediaKind, OpenMode, Store};
use std::path::{Path, PathBuf};

/// `endotwin --library LIB ARGS...` run to the end.
fn cli<S: AsRef<std::ffi::OsStr>>(lib: &Path, args: &[S]) -> Ran {
    let mut c = endotwin(lib);
    c.args(args);
    run(c)
}

/// A copy of the sample library (never the repository's own), with a flat grey image beside
/// it.
/// A copy of the shipped model `name` (card and record) in `dir/models`: its card's path.
fn shipped_copy(dir: &Path, name: &str) -> PathBuf {
    let models = dir.join("models");
    std::fs::create_dir_all(&models).unwrap();
    let shipped = endotwin::default_models_dir();
    for f in [format!("{name}.json"), format!("{name}.bpk")] {
        std::fs::copy(shipped.join(&f), models.join(&f)).unwrap();
    }
    models.join(format!("{name}.json"))
}

/// A flat grey 64 px card, `dir/grey.png`: no model learned anything like it.
fn grey_card(dir: &Path) -> PathBuf {
    let grey = dir.join("grey.png");
    image::RgbImage::from_pixel(64, 64, image::Rgb([128, 128, 128]))
        .save(&grey)
        .unwrap();
    grey
}

fn sample_copy() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample_db");
    copy_dir(&src, &lib);
    let grey = dir.path().join("grey.png");
    image::RgbImage::from_pixel(320, 320, image::Rgb([128, 128, 128]))
        .save(&grey)
        .unwrap();
    (dir, lib, grey)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// A polyp view of the sample library (a file in its media) with its mask's box, a capsule
/// frame, and the same polyp's second view.
fn sample_files(lib: &Path) -> (PathBuf, [f32; 4], PathBuf, PathBuf) {
    let store = Store::open(lib, OpenMode::Existing).unwrap();
    let polyp = store
        .polyps()
        .unwrap()
        .into_iter()
        .find(|p| p.code == "S7-E004-P1")
        .unwrap();
    let views = store.polyp_views(polyp.id).unwrap();
    let (view, second) = (views[0].clone(), views[1].clone());
    let mask = store.media(view.mask_media_id.unwrap()).unwrap().unwrap();
    let m = image::open(store.media_path(&mask)).unwrap().to_luma8();
    let (mut x0, mut y0, mut x1, mut y1) = (u32::MAX, u32::MAX, 0, 0);
    for (x, y, p) in m.enumerate_pixels() {
        if p.0[0] > 127 {
            (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x), y1.max(y));
        }
    }
    let boxed = [
        x0 as f32,
        y0 as f32,
        (x1 - x0 + 1) as f32,
        (y1 - y0 + 1) as f32,
    ];
    let capsule = store
        .examinations()
        .unwrap()
        .into_iter()
        .flat_map(|e| store.loose_frames(e.id).unwrap())
        .find(|m| m.kind == MediaKind::Capsule)
        .unwrap();
    (
        store.media_path(&view),
        boxed,
        store.media_path(&capsule),
        store.media_path(&second),
    )
}

#[test]
fn a_grey_card_is_marked_unfamiliar_by_every_command_and_a_sample_case_is_not() {
    let (dir, lib, grey) = sample_copy();
    let (view, b, capsule, second) = sample_files(&lib);
    let json = dir.path().join("twins.json");
    let box_arg = format!("{},{},{},{}", b[0], b[1], b[2], b[3]);

    // Twins: the grey card is marked, with the model, its score and threshold; --json too.
    let ran = cli(
        &lib,
        &[
            "twins",
            grey.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ],
    );
    assert!(ran.ok(), "{}", ran.text());
    let line = ran
        .stdout
        .lines()
        .find(|l| l.starts_with("unfamiliar:"))
        .unwrap_or_else(|| panic!("no unfamiliar: line\n{}", ran.text()));
    assert!(
        line.contains("twin-image") && line.contains("threshold"),
        "{line}"
    );
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(written["familiarity"]["unfamiliar"], true, "{written}");
    // The answer stays: the twins and the vote are still there.
    assert!(ran.says("vote:"), "{}", ran.text());

    // A sample polyp's view cut around its mask is familiar, with a calibrated confidence.
    let ran = cli(&lib, &["twins", view.to_str().unwrap(), "--box", &box_arg]);
    assert!(ran.ok(), "{}", ran.text());
    assert!(ran.says("familiar: twin-image"), "{}", ran.text());
    assert!(!ran.says("unfamiliar:"), "{}", ran.text());
    assert!(
        ran.says("(calibrated on validation votes)"),
        "{}",
        ran.text()
    );

    // Captions: the grey card marked, the sample capsule frame not.
    let ran = cli(
        &lib,
        &[
            "captions",
            "describe",
            grey.to_str().unwrap(),
            capsule.to_str().unwrap(),
        ],
    );
    assert!(ran.ok(), "{}", ran.text());
    let marks: Vec<&str> = ran
        .stdout
        .lines()
        .filter(|l| l.starts_with("unfamiliar:") || l.starts_with("familiar:"))
        .collect();
    assert_eq!(marks.len(), 2, "{}", ran.text());
    assert!(marks[0].starts_with("unfamiliar: captions"), "{marks:?}");
    assert!(marks[1].starts_with("familiar: captions"), "{marks:?}");
    assert!(ran.says("calibrated)"), "{}", ran.text());

    // Text prompts: every model that scores the grey card marks it; a sample view is familiar
    // to them (the polyp's second view: the stage-3 model marks 5 of 40 sample views, its
    // first among them, scoring 0.94 against 0.92).
    let sets = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/prompt_sets.toml");
    for (image, marked) in [(&grey, true), (&second, false)] {
        let ran = cli(
            &lib,
            &[
                "prompts",
                "score",
                "--image",
                image.to_str().unwrap(),
                "--prompts",
                sets.to_str().unwrap(),
            ],
        );
        assert!(ran.ok(), "{}", ran.text());
        let models = ran
            .stdout
            .lines()
            .filter(|l| l.starts_with("model "))
            .count();
        let unfamiliar = ran
            .stdout
            .lines()
            .filter(|l| l.starts_with("unfamiliar:"))
            .count();
        assert!(models >= 1, "{}", ran.text());
        assert_eq!(
            unfamiliar,
            if marked { models } else { 0 },
            "{}",
            ran.text()
        );
    }
}

#[test]
fn model_trust_fits_and_stores_the_mark_and_the_calibration_on_a_small_library() {
    use endotwin::data::phantom::PhantomConfig;
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    crate::common::phantom_library(
        &lib,
        &PhantomConfig {
            seed: 3,
            polyps: 0,
            views_per_polyp: 4,
            videos: 0,
            background_frames: 0,
            capsule_images: 200,
            image_size: 48,
            ..PhantomConfig::default()
        },
    );
    let card = shipped_copy(dir.path(), "captions");
    endotwin::model::weights::update_card(&card, |c| {
        c.familiarity = None;
        c.calibration.clear();
    })
    .unwrap();
    let ran = cli(&lib, &["model", "trust", card.to_str().unwrap()]);
    assert!(ran.ok(), "{}", ran.text());
    assert!(
        ran.says("familiarity fitted on 160 capsule frames"),
        "{}",
        ran.text()
    );
    let fitted = endotwin::model::weights::read_card(&card).unwrap();
    let f = fitted.familiarity.expect("familiarity stored in the card");
    assert_eq!((f.fitted, f.validated), (160, 40));
    assert!(f.threshold.is_finite() && f.threshold > 0.0);
    // 40 validation frames: 2 of them (5 %) beyond the threshold.
    assert!(
        (f.validation_marked - 0.05).abs() < 1e-9,
        "{}",
        f.validation_marked
    );
    // The category head's calibration is stored when it earns it on the validation frames,
    // and the command says which.
    match fitted.calibration.get("category") {
        Some(c) => {
            assert_eq!(c.answers, 40);
            assert!(c.ece_fitted <= 0.1, "{c:?}");
            assert!(
                ran.says("category calibrated (temperature) on 40"),
                "{}",
                ran.text()
            );
        }
        None => assert!(ran.says("category not calibrated"), "{}", ran.text()),
    }
    // The card still loads, and its answers carry the mark: a grey card is unfamiliar.
    let grey = grey_card(dir.path());
    let ran = cli(
        &lib,
        &[
            "captions",
            "describe",
            grey.to_str().unwrap(),
            "--model",
            card.to_str().unwrap(),
        ],
    );
    assert!(ran.ok(), "{}", ran.text());
    assert!(ran.says("unfamiliar: captions"), "{}", ran.text());
    // Refused with a reason, nothing written: a kind without a mark, and too little data.
    let before = std::fs::read(&card).unwrap();
    let ran = cli(
        &lib,
        &[
            "model",
            "trust",
            card.to_str().unwrap(),
            "--hold-out-every",
            "1",
        ],
    );
    assert!(
        !ran.ok() && ran.says("holding out every item"),
        "{}",
        ran.text()
    );
    assert_eq!(std::fs::read(&card).unwrap(), before);
}

#[test]
fn a_model_trained_in_the_app_gets_its_mark_and_calibration_when_it_is_saved() {
    use endotwin::data::phantom::PhantomConfig;
    use endotwin::engine::training::TrainingRun;
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    crate::common::phantom_library(
        &lib,
        &PhantomConfig {
            seed: 4,
            polyps: 0,
            views_per_polyp: 4,
            videos: 0,
            background_frames: 0,
            capsule_images: 60,
            image_size: 48,
            ..PhantomConfig::default()
        },
    );
    let runs = dir.path().join("runs");
    let mut settings = endotwin::train::recipe::Settings::default();
    for (k, v) in [("epochs", "1"), ("batch", "8"), ("name", "mine")] {
        settings.set(k, v);
    }
    settings.set("out", runs.display().to_string());
    let run = TrainingRun::start(
        "captions",
        settings,
        lib.clone(),
        dir.path().join("models"),
        &endotwin::compute::Compute::cpu(None),
        None,
    )
    .unwrap();
    let log = crate::common::finished_run(&run);
    assert!(
        log.messages
            .iter()
            .any(|m| m.contains("familiarity fitted on 48 capsule frames")),
        "{:?}",
        log.messages
    );
    let card = endotwin::model::weights::read_card(&runs.join("mine.json")).unwrap();
    assert_eq!(card.familiarity.map(|f| f.fitted), Some(48));
}

/// `eval real` reports the mark beside each capability it measures: on the real CAPTIV8
/// capsule frames, which the phantom-trained caption model gets wrong, the table says how
/// many answers were marked and how many of the wrong ones the mark caught (#45's target: at
/// least 80 %; measured 8 of 8 frames wrong, all 8 marked), in the text and in `--json`.
#[cfg(unix)]
#[test]
fn eval_real_says_how_many_wrong_capsule_answers_the_mark_caught() {
    let Some(captiv8) = crate::common::realdata("captiv8-2") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::os::unix::fs::symlink(&captiv8, data.join("captiv8-2")).unwrap();
    let json = dir.path().join("real.json");
    let lib = dir.path().join("unused");
    let mut c = endotwin(&lib);
    c.args(["eval", "real", "--data"])
        .arg(&data)
        .arg("--json")
        .arg(&json);
    let r = run(c);
    assert!(r.ok(), "{}", r.text());
    assert!(
        r.stdout.contains("how far the answers could be trusted")
            && r.stdout.contains("| capsule category (captions) |"),
        "{}",
        r.text()
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let row = v["trust"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["capability"]
                .as_str()
                .unwrap()
                .starts_with("capsule category")
        })
        .unwrap_or_else(|| panic!("no capsule row in {v}"));
    let answers = row["answers"].as_u64().unwrap();
    assert_eq!(
        answers as usize,
        v["capsule_frames"].as_u64().unwrap() as usize
    );
    let accuracy = row["accuracy_all"]["value"].as_f64().unwrap();
    let wrong_marked = row["wrong_marked"]["value"].as_f64().unwrap();
    assert!(
        accuracy < 1.0,
        "some answer is wrong on real capsule frames: {row}"
    );
    assert!(
        wrong_marked >= 0.8,
        "the mark catches the wrong answers: {row}"
    );
    assert!(row["ece_raw"]["value"].as_f64().is_some(), "{row}");
}

/// The twin encoder's mark is thresholded per source, as the detector's is: a dataset the card
/// was validated on (here 6 polyps whose views are another colour, imported as a multi-view
/// folder) gets a threshold of its own, so its polyps are not marked whole, while a grey card
/// still is. Before, one threshold over every validation view left a real dataset validated on
/// (CVC-ClinicDB) marked unfamiliar polyp by polyp (docs/trust.md).
#[test]
fn the_twin_encoders_mark_has_a_threshold_for_each_source_it_was_validated_on() {
    use endotwin::data::phantom::{PhantomConfig, Split};
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let small = |seed, split, polyps| PhantomConfig {
        seed,
        split,
        polyps,
        views_per_polyp: 4,
        videos: 0,
        background_frames: 0,
        capsule_images: 0,
        image_size: 64,
        ..PhantomConfig::default()
    };
    let fit = dir.path().join("fit");
    crate::common::phantom_library(&fit, &small(3, Split::Train, 10));
    let phantom_validation = dir.path().join("val");
    crate::common::phantom_library(&phantom_validation, &small(3, Split::Validation, 10));
    // Another source: other phantom polyps with red and blue swapped, as a multi-view folder.
    let made = dir.path().join("made");
    crate::common::phantom_library(&made, &small(5, Split::Validation, 6));
    let folder = dir.path().join("blue");
    let store = Store::open(&made, OpenMode::Existing).unwrap();
    for (i, p) in store.polyps().unwrap().iter().enumerate() {
        for (v, m) in store.polyp_views(p.id).unwrap().iter().enumerate() {
            let mut rgb = endotwin::data::images::decode_media(&store, m)
                .unwrap()
                .image
                .to_rgb8();
            for px in rgb.pixels_mut() {
                px.0.swap(0, 2);
            }
            let path = folder.join(format!("P{i}/{v}.png"));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            rgb.save(&path).unwrap();
        }
    }
    let blue = dir.path().join("bluelib");
    let ran = cli(&blue, &["import", "multiview", folder.to_str().unwrap()]);
    assert!(ran.ok(), "{}", ran.text());

    let card = shipped_copy(dir.path(), "twin-image");
    let models = card.parent().unwrap();
    let ran = cli(
        &fit,
        &[
            "model",
            "trust",
            card.to_str().unwrap(),
            "--validation",
            phantom_validation.to_str().unwrap(),
            blue.to_str().unwrap(),
        ],
    );
    assert!(ran.ok(), "{}", ran.text());
    let f = endotwin::model::weights::read_card(&card)
        .unwrap()
        .familiarity
        .expect("familiarity stored");
    // 24 blue views lie farther out than the phantom's: their own 95 % point is the threshold.
    assert!(
        f.validated_on
            .contains("threshold: the highest of its sources' own")
            && f.validated_on.contains("24 inputs"),
        "{}",
        f.validated_on
    );
    // A blue polyp's twins are not marked; a grey card still is.
    let ran = cli(&blue, &["index", "--models", models.to_str().unwrap()]);
    assert!(ran.ok(), "{}", ran.text());
    let views: Vec<String> = (0..4)
        .map(|v| folder.join(format!("P0/{v}.png")).display().to_string())
        .collect();
    let mut args = vec!["twins".to_string(), "--models".into()];
    args.push(models.display().to_string());
    args.extend(views);
    let ran = cli(&blue, &args);
    assert!(ran.ok(), "{}", ran.text());
    assert!(!ran.says("unfamiliar:"), "{}", ran.text());
    let grey = grey_card(dir.path());
    let ran = cli(
        &blue,
        &[
            "twins",
            "--models",
            models.to_str().unwrap(),
            grey.to_str().unwrap(),
        ],
    );
    assert!(ran.ok(), "{}", ran.text());
    assert!(ran.says("unfamiliar: twin-image"), "{}", ran.text());
}

#[test]
fn the_detectors_mark_fitted_with_crops_leaves_a_polyps_square_unmarked() {
    // `eval real` and a user's own cut-outs show the detector a polyp's square up close; a mark
    // fitted on whole frames alone marked every such crop (docs/real.md). Refitted by `model
    // trust`, the crops of each masked view are a source of their own.
    use endotwin::data::phantom::{PhantomConfig, Split};
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let small = |seed, split| PhantomConfig {
        seed,
        split,
        polyps: 6,
        views_per_polyp: 4,
        videos: 0,
        background_frames: 0,
        capsule_images: 0,
        image_size: 128,
        ..PhantomConfig::default()
    };
    let fit = dir.path().join("fit");
    crate::common::phantom_library(&fit, &small(3, Split::Train));
    let validation = dir.path().join("val");
    crate::common::phantom_library(&validation, &small(3, Split::Validation));
    let card = shipped_copy(dir.path(), "prompts-detect");
    let ran = cli(
        &fit,
        &[
            "model",
            "trust",
            card.to_str().unwrap(),
            "--validation",
            validation.to_str().unwrap(),
        ],
    );
    assert!(ran.ok(), "{}", ran.text());
    let f = endotwin::model::weights::read_card(&card)
        .unwrap()
        .familiarity
        .expect("familiarity stored");
    assert!(f.validated_on.contains("crops"), "{}", f.validated_on);

    // Polyp squares of other phantom polyps, cut as `eval real` cuts them: not marked. A grey
    // card still is.
    let other = dir.path().join("other");
    crate::common::phantom_library(&other, &small(7, Split::Test));
    let store = Store::open(&other, OpenMode::Existing).unwrap();
    let mut squares = Vec::new();
    for p in store.polyps().unwrap().iter().take(4) {
        let view = &store.polyp_views(p.id).unwrap()[0];
        let mask_row = store.media(view.mask_media_id.unwrap()).unwrap().unwrap();
        let decode = |m| {
            endotwin::data::images::decode_media(&store, m)
                .unwrap()
                .image
        };
        let (image, mask) = (decode(view), decode(&mask_row).to_luma8());
        let (x, y, side) = endotwin::data::crops::polyp_square(&mask, 1.0).unwrap();
        let path = dir.path().join(format!("square{}.png", p.id));
        image.crop_imm(x, y, side, side).save(&path).unwrap();
        squares.push(path);
    }
    let grey = grey_card(dir.path());
    let sets = dir.path().join("sets.toml");
    std::fs::write(
        &sets,
        "[[set]]\nname = \"polyp vs background\"\nprompts = [\"This is a colon with polyps.\", \"This is a normal background.\"]\n",
    )
    .unwrap();
    let mut marked = 0;
    for (image, grey_card) in squares.iter().map(|s| (s, false)).chain([(&grey, true)]) {
        let ran = cli(
            &fit,
            &[
                "prompts",
                "score",
                "--image",
                image.to_str().unwrap(),
                "--prompts",
                sets.to_str().unwrap(),
                "--model",
                card.to_str().unwrap(),
            ],
        );
        assert!(ran.ok(), "{}", ran.text());
        let unfamiliar = ran.says("unfamiliar: prompts-detect");
        match grey_card {
            true => assert!(unfamiliar, "the grey card: {}", ran.text()),
            false => marked += usize::from(unfamiliar),
        }
    }
    assert!(marked <= 1, "{marked} of 4 polyp squares marked");
}
