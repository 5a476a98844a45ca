//! The unfamiliar mark on tracklet links: a clip of flat grey or noise frames is marked by the
//! tracklet comparisons' frame encoder in `endotwin tracklets` (its line and --json); the
//! sample library's video is not; `model trust` fits a tracklet card's familiarity on tiny
//! data and stores it.

use crate::common::{Ran, endotwin, run};
use endotwin::data::import::{self, ImportLayout, ImportOptions};
use endotwin::engine::Progress;
use endotwin::store::{OpenMode, Store};
use std::path::Path;

/// `endotwin --library LIB ARGS...` run to the end.
fn cli<S: AsRef<std::ffi::OsStr>>(lib: &Path, args: &[S]) -> Ran {
    let mut c = endotwin(lib);
    c.args(args);
    run(c)
}

/// What a clip's frames show.
#[derive(Clone, Copy)]
pub enum Clip {
    Grey,
    Noise,
}

/// Frames of a clip: its box is on screen in 0-39 and 48-87 (two tracklets of one "polyp").
const CLIP_FRAMES: u32 = 88;

/// An 88-frame clip of 160 px frames imported as COCO (video `code`): a 32 px box drifting
/// across it in frames 0-39 and again in 48-87 (two tracklets, so one link); the frames flat
/// grey or random noise.
pub fn clip_library(lib: &Path, src: &Path, clip: Clip, code: &str) {
    let mut rng = endotwin::plumbing::Rng::new(7);
    let mut images = Vec::new();
    let mut annotations = Vec::new();
    for f in 0..CLIP_FRAMES {
        let img = image::RgbImage::from_fn(160, 160, |_, _| match clip {
            Clip::Grey => image::Rgb([128, 128, 128]),
            Clip::Noise => {
                let mut v = || (rng.f32() * 255.0) as u8;
                image::Rgb([v(), v(), v()])
            }
        });
        let name = format!("{code}-f{f:03}.png");
        img.save(src.join(&name)).unwrap();
        images.push(serde_json::json!({
            "id": f, "file_name": name, "frame_id": f, "sequence_id": code
        }));
        if !(40..48).contains(&f) {
            annotations.push(serde_json::json!({
                "image_id": f, "bbox": [40 + f % 16, 60, 32, 32], "identity_id": "p"
            }));
        }
    }
    let coco = serde_json::json!({ "images": images, "annotations": annotations });
    let manifest = src.join(format!("{code}.json"));
    std::fs::write(&manifest, coco.to_string()).unwrap();
    let mut store = Store::open(lib, OpenMode::CreateIfMissing).unwrap();
    import::run(
        ImportLayout::Coco,
        &mut store,
        &manifest,
        ImportOptions::default(),
        &Progress::new(),
    )
    .unwrap();
}

/// The JSON `endotwin tracklets --json` wrote.
fn answers(path: &Path) -> Vec<serde_json::Value> {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["videos"].as_array().unwrap().clone()
}

/// A clip of flat grey frames and one of noise get their links, each marked with the
/// `unfamiliar:` line of the frame encoder that compared them (and `--json` says the same);
/// the sample library's video, the phantom the models learned from, is not marked.
#[test]
fn grey_and_noise_clips_have_their_links_marked_and_a_sample_video_does_not() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let (lib, src) = (dir.path().join("lib"), dir.path().join("src"));
    std::fs::create_dir_all(&src).unwrap();
    clip_library(&lib, &src, Clip::Grey, "grey");
    clip_library(&lib, &src, Clip::Noise, "noise");
    let json = dir.path().join("links.json");
    let ran = cli(&lib, &["tracklets", "--json", json.to_str().unwrap()]);
    assert!(ran.ok(), "{}", ran.text());
    for code in ["grey", "noise"] {
        assert!(ran.says(&format!("{code}: 2 tracklets")), "{}", ran.text());
    }
    assert!(
        ran.says("unfamiliar: tracklet-frames scores")
            && ran.says("treat the answer as a guess")
            && ran.says("2 of 2 tracklets and"),
        "{}",
        ran.text()
    );
    for video in answers(&json) {
        let f = &video["familiarity"];
        assert_eq!(f["unfamiliar_tracklets"], 2, "{video}");
        assert_eq!(f["unfamiliar_links"], f["links"], "{video}");
        assert_eq!(f["worst"]["model"], "tracklet-frames", "{video}");
        for link in video["links"].as_array().unwrap() {
            let j = &link["familiarity"];
            assert_eq!(j["unfamiliar"], true, "{link}");
            assert!(j["score"].as_f64() > j["threshold"].as_f64(), "{link}");
        }
    }
    // The grey clip's two tracklets look alike: a link, marked on its line.
    let grey = &answers(&json)[0];
    assert_eq!(grey["links"].as_array().unwrap().len(), 1, "{grey}");
    let link_line = ran
        .text()
        .lines()
        .skip_while(|l| !l.starts_with("video grey"))
        .skip_while(|l| !l.starts_with("  T"))
        .nth(1)
        .unwrap_or_default()
        .to_string();
    assert!(
        link_line.contains("unfamiliar: tracklet-frames scores"),
        "{}",
        ran.text()
    );

    // The sample library's video: links, none marked.
    let sample = dir.path().join("sample");
    std::fs::create_dir_all(&sample).unwrap();
    crate::gui::copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("sample_db"),
        &sample,
    );
    let json = dir.path().join("sample.json");
    let ran = cli(
        &sample,
        &["tracklets", "S7-V01", "--json", json.to_str().unwrap()],
    );
    assert!(ran.ok(), "{}", ran.text());
    assert!(
        ran.says("familiar: tracklet-frames scores at most"),
        "{}",
        ran.text()
    );
    assert!(!ran.says("unfamiliar:"), "{}", ran.text());
    let video = &answers(&json)[0];
    assert!(!video["links"].as_array().unwrap().is_empty(), "{video}");
    assert_eq!(video["familiarity"]["unfamiliar_tracklets"], 0, "{video}");
    assert_eq!(video["familiarity"]["unfamiliar_links"], 0, "{video}");
}

/// `model trust` fits a tracklet head's familiarity (on its fragments' embeddings) and the
/// frame encoder's (`--tracklets`, on the tracklet frames) on a small video library and stores
/// them in the cards; a head trained in the app gets its own when it is saved.
#[test]
fn model_trust_fits_the_tracklet_cards_and_an_app_trained_head_gets_its_mark() {
    use endotwin::engine::training::TrainingRun;
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    crate::common::phantom_library(
        &lib,
        &endotwin::data::phantom::PhantomConfig {
            seed: 5,
            polyps: 8,
            views_per_polyp: 4,
            videos: 5,
            frames_per_video: 400,
            background_frames: 0,
            capsule_images: 0,
            image_size: 48,
            video_size: 64,
            ..Default::default()
        },
    );
    let models = dir.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    let shipped = endotwin::default_models_dir();
    for name in ["tracklet-frames", "tracklet-head"] {
        for ext in ["json", "bpk"] {
            let f = format!("{name}.{ext}");
            std::fs::copy(shipped.join(&f), models.join(&f)).unwrap();
        }
        endotwin::model::weights::update_card(&models.join(format!("{name}.json")), |c| {
            c.familiarity = None;
        })
        .unwrap();
    }
    let head = models.join("tracklet-head.json");
    let ran = cli(&lib, &["model", "trust", head.to_str().unwrap()]);
    assert!(ran.ok(), "{}", ran.text());
    assert!(ran.says("tracklet fragments, threshold"), "{}", ran.text());
    let f = endotwin::model::weights::read_card(&head)
        .unwrap()
        .familiarity
        .expect("stored in the head's card");
    assert!(f.fitted >= 8 && f.validated >= 8, "{f:?}");
    assert!(f.fitted_on.contains("head embeddings"), "{}", f.fitted_on);
    assert_eq!(f.dim(), 256);
    let frames = models.join("tracklet-frames.json");
    let ran = cli(
        &lib,
        &["model", "trust", frames.to_str().unwrap(), "--tracklets"],
    );
    assert!(ran.ok(), "{}", ran.text());
    assert!(ran.says("tracklet frames, threshold"), "{}", ran.text());
    let g = endotwin::model::weights::read_card(&frames)
        .unwrap()
        .familiarity
        .expect("stored in the frame encoder's card");
    // Eight frames a fragment against one head embedding.
    assert_eq!(g.fitted + g.validated, 8 * (f.fitted + f.validated));

    // A head trained in the app, over that frame encoder, is fitted when it is saved.
    let runs = dir.path().join("runs");
    let mut settings = endotwin::train::recipe::Settings::default();
    for (k, v) in [
        ("epochs", "1"),
        ("anchors", "4"),
        ("backbone", "twin"),
        ("name", "mine"),
    ] {
        settings.set(k, v);
    }
    settings.set("out", runs.display().to_string());
    let run = TrainingRun::start(
        "tracklets",
        settings,
        lib.clone(),
        models.clone(),
        &endotwin::compute::Compute::cpu(None),
        None,
    )
    .unwrap();
    let log = crate::common::finished_run(&run);
    assert!(
        log.messages.iter().any(|m| m.contains(&format!(
            "familiarity fitted on {} tracklet fragments",
            f.fitted
        ))),
        "{:?}",
        log.messages
    );
    let mine = endotwin::model::weights::read_card(&runs.join("mine.json")).unwrap();
    assert_eq!(mine.familiarity.map(|f| f.fitted), Some(f.fitted));
}

/// The Tracklets tab on the grey clip: the badge is on the answer and its hover says why.
#[test]
fn the_tracklets_tab_marks_a_grey_clips_links_with_a_hover_that_says_why() {
    use crate::gui::{harness, settle, shows_part};
    use crate::gui_input::{click_line, click_tab};
    use egui_kittest::kittest::Queryable;
    use endotwin::app::UNFAMILIAR_BADGE;
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let (lib, src) = (dir.path().join("lib"), dir.path().join("src"));
    std::fs::create_dir_all(&src).unwrap();
    clip_library(&lib, &src, Clip::Grey, "grey");
    let mut h = harness(&lib);
    h.set_size(egui::vec2(1400.0, 1100.0));
    settle(&mut h);
    click_line(&mut h, "Video grey");
    click_tab(&mut h, "Tracklets");
    for _ in 0..2400 {
        settle(&mut h);
        if h.query_all_by_label(UNFAMILIAR_BADGE).next().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    shows_part(
        &h,
        "2 of 2 tracklets and 1 of 1 links unfamiliar to tracklet-frames",
    );
    h.query_all_by_label(UNFAMILIAR_BADGE)
        .next()
        .unwrap()
        .hover();
    settle(&mut h);
    shows_part(&h, "treat the answer as a guess");
    shows_part(&h, "do not rely on it");
}

/// One card holds one set of statistics: `model trust` refuses to fit the twin encoder's on
/// tracklet frames, and the tracklet frame encoder's on polyp views, and changes neither card.
#[test]
fn model_trust_will_not_fit_the_twin_encoder_on_tracklets_or_the_frame_encoder_on_views() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    let shipped = endotwin::default_models_dir();
    for name in ["twin-image", "tracklet-frames"] {
        for ext in ["json", "bpk"] {
            let f = format!("{name}.{ext}");
            std::fs::copy(shipped.join(&f), models.join(&f)).unwrap();
        }
    }
    // Refused before any library is read: none is needed.
    let lib = dir.path().join("no-library");
    for (name, extra, says) in [
        ("twin-image", Some("--tracklets"), "judges polyp views"),
        ("tracklet-frames", None, "give --tracklets"),
    ] {
        let card = models.join(format!("{name}.json"));
        let before = std::fs::read(&card).unwrap();
        let mut args = vec!["model", "trust", card.to_str().unwrap()];
        args.extend(extra);
        let ran = cli(&lib, &args);
        assert!(!ran.ok() && ran.says(says), "{}", ran.text());
        assert!(ran.says("nothing was changed"), "{}", ran.text());
        assert_eq!(std::fs::read(&card).unwrap(), before, "{name} unchanged");
    }
}
