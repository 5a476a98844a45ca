//! The Tracklets tab, clicked through: a video whose polyp is seen twice shows two polyps on
//! its timeline; merging two tracklets, splitting one and rejecting a link are audited edits
//! that undo restores; a box drawn on a frame is followed into a new tracklet; another way of
//! comparing tracklets is picked in the panel.

use crate::gui::{harness, settle, shows_part};
use crate::gui_input::{click_line, click_tab, redo, search, shift_drag, step_slider, undo};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use endotwin::app::App;
use endotwin::data::import::{self, ImportLayout, ImportOptions};
use endotwin::engine::Progress;
use endotwin::store::{OpenMode, Store, TargetKind, TrackletRow};
use std::path::Path;

const FRAMES: u32 = 120;

/// A 120-frame video as COCO: polyp "red" in frames 0-39, polyp "green" in 45-79, "red" again
/// in 80-119 (a revisit: two tracklets of one polyp). Each polyp is a 32 px square of its
/// colour on a brown wall, so the colour histogram tells them apart.
fn revisit_library(lib: &Path, src: &Path) {
    let mut images = Vec::new();
    let mut annotations = Vec::new();
    for f in 0..FRAMES {
        let polyp = match f {
            0..40 | 80.. => Some(("red", [220u8, 40, 40])),
            45..80 => Some(("green", [60, 170, 60])),
            _ => None,
        };
        let (x0, y0) = (12 + (f % 8), 14);
        let img = image::RgbImage::from_fn(64, 64, |x, y| {
            let inside = (x0..x0 + 32).contains(&x) && (y0..y0 + 32).contains(&y);
            match polyp {
                Some((_, c)) if inside => image::Rgb(c),
                _ => image::Rgb([130, 85, 70]),
            }
        });
        let name = format!("f{f:03}.png");
        img.save(src.join(&name)).unwrap();
        images.push(serde_json::json!({
            "id": f, "file_name": name, "frame_id": f, "sequence_id": "rv"
        }));
        if let Some((identity, _)) = polyp {
            annotations.push(serde_json::json!({
                "image_id": f, "bbox": [x0, y0, 32, 32], "identity_id": identity
            }));
        }
    }
    let coco = serde_json::json!({ "images": images, "annotations": annotations });
    let manifest = src.join("video.json");
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

/// The video's tracklets as the library holds them, versions aside (a version moves with
/// every audited edit, an undo's included).
fn tracklets(lib: &Path) -> Vec<TrackletRow> {
    let store = Store::open(lib, OpenMode::Existing).unwrap();
    let video = store.videos().unwrap().remove(0);
    let mut rows = store.video_tracklets(video.id).unwrap();
    for r in &mut rows {
        r.version = 0;
    }
    rows
}

/// Steps the app until the timeline shows `text` (the engine builds it in the background,
/// after the video's polyp strip: the detector reads every frame first, about a minute for
/// these 120 frames in a debug build since the detector is ImageNet's MobileNetV2 at 224 px).
fn wait_for(h: &mut Harness<'static, App>, text: &str) {
    for _ in 0..2400 {
        settle(h);
        if h.query_all_by_label_contains(text).next().is_some() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    shows_part(h, text);
}

fn click(h: &mut Harness<'static, App>, label: &str) {
    h.get_by_label_contains(label).click();
    settle(h);
}

#[test]
fn the_timeline_links_a_revisit_and_its_edits_are_audited_and_undone() {
    let _rng = crate::common::device_rng();
    let lib = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    revisit_library(lib.path(), src.path());
    let before = tracklets(lib.path());
    assert_eq!(before.len(), 3, "{before:?}");
    let (t1, t2, t3) = (&before[0], &before[1], &before[2]);
    assert_eq!(t1.polyp_id, t3.polyp_id);
    assert_ne!(t1.polyp_id, t2.polyp_id);

    let mut h = harness(lib.path());
    settle(&mut h);
    let video = Store::open(lib.path(), OpenMode::Existing)
        .unwrap()
        .videos()
        .unwrap()
        .remove(0);
    // The video's line in the browser, then the Tracklets tab: clicked.
    click_line(&mut h, &format!("Video {}", video.code));
    click_tab(&mut h, "Tracklets");
    // The revisit is one polyp: two groups for three tracklets, as the labels say.
    wait_for(&mut h, "Polyps: 2 by grouping");
    shows_part(&h, "2 in the library's labels");
    // The shipped models compare by the twin encoder with its scene encoder (the validation
    // videos' choice).
    shows_part(
        &h,
        "Similarity: digital-twin image encoder with its scene encoder",
    );

    // The first tracklet is shown, the frame slider on its first frame.
    assert_eq!(h.state().state.tracklets.selected, Some(t1.id));
    shows_part(&h, &format!("Tracklet T{} · frames 0–39 (40 boxes)", t1.id));

    // Merge the green tracklet into the red polyp: audited, then undone.
    click(&mut h, &format!("Merge T{} into T{}'s polyp", t2.id, t1.id));
    wait_for(&mut h, "1 in the library's labels");
    let merged = tracklets(lib.path());
    assert_eq!(merged[1].polyp_id, t1.polyp_id);
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let audit = store.audit_history(TargetKind::Tracklet, t2.id).unwrap();
    assert_eq!(audit[0].key, "polyp");
    assert!(
        audit[0].new_value.as_deref().unwrap().contains("red"),
        "{audit:?}"
    );
    drop(store);
    undo(&mut h);
    wait_for(&mut h, "2 in the library's labels");
    assert_eq!(tracklets(lib.path()), before);
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    assert_eq!(
        store
            .audit_history(TargetKind::Tracklet, t2.id)
            .unwrap()
            .len(),
        2
    );
    drop(store);

    // Reject the revisit's link: the grouping no longer joins it; undo joins it again.
    click(&mut h, &format!("Reject T{}–T{}", t1.id, t3.id));
    wait_for(&mut h, "Polyps: 3 by grouping");
    undo(&mut h);
    wait_for(&mut h, "Polyps: 2 by grouping");

    // Split the first tracklet at frame 20 (the frame slider moved there with the arrow
    // keys), then undo: the library is as it was.
    step_slider(&mut h, "frame", 20);
    shows_part(&h, &format!("({}/{FRAMES})", 21));
    click(&mut h, "Split at frame 20");
    wait_for(&mut h, "4 tracklets");
    let split = tracklets(lib.path());
    assert_eq!(split.len(), 4);
    assert!(
        split
            .iter()
            .any(|t| t.first_frame == 20 && t.last_frame == 39)
    );
    undo(&mut h);
    wait_for(&mut h, "3 tracklets");
    assert_eq!(tracklets(lib.path()), before);
    // Redo splits again (a new id for the second part), undo once more restores.
    redo(&mut h);
    wait_for(&mut h, "4 tracklets");
    undo(&mut h);
    wait_for(&mut h, "3 tracklets");
    assert_eq!(tracklets(lib.path()), before);

    // A box drawn around the green polyp on frame 50 is followed both ways until it is lost:
    // a new tracklet over frames 45-79, undone like any edit.
    // The slider to frame 50, then a Shift+drag on the large image from (x0 - 4, 10) to
    // (x0 + 36, 50) in the frame's pixels.
    step_slider(&mut h, "frame", 30);
    shows_part(&h, &format!("({}/{FRAMES})", 51));
    for _ in 0..20 {
        // The full-size frame loads on the loader thread.
        std::thread::sleep(std::time::Duration::from_millis(30));
        settle(&mut h);
    }
    let area = h.get_by_label("large image").rect();
    let scale = (area.width() / 64.0).min(area.height() / 64.0);
    let frame_min = area.center() - egui::vec2(32.0, 32.0) * scale;
    let at = |x: f32, y: f32| frame_min + egui::vec2(x, y) * scale;
    let x0 = 12.0 + (50 % 8) as f32;
    shift_drag(&mut h, at(x0 - 4.0, 10.0), at(x0 + 36.0, 50.0));
    wait_for(&mut h, "4 tracklets");
    let followed = tracklets(lib.path());
    let new = followed
        .iter()
        .find(|t| !before.iter().any(|b| b.id == t.id))
        .expect("a new tracklet");
    assert_eq!(
        (new.first_frame, new.last_frame, new.boxes),
        (45, 79, 35),
        "{new:?}"
    );
    undo(&mut h);
    wait_for(&mut h, "3 tracklets");
    assert_eq!(tracklets(lib.path()), before);

    // Another comparison, picked in the panel: the timeline is built again with it and says so.
    click(&mut h, "compare by");
    click(&mut h, "tracklet head (METHODS §3)");
    wait_for(&mut h, "Similarity: tracklet head");
    assert_eq!(
        h.state().state.tracklets.comparison,
        endotwin::tracklets::timeline::Comparison::TrackletHead
    );
    click(&mut h, "compare by");
    click(&mut h, "colour histogram");
    wait_for(&mut h, "Similarity: colour histogram");
    wait_for(&mut h, "Polyps: 2 by grouping");
}

/// The sample library's first video shows its timeline on first start: its tracklets compared
/// by the shipped twin encoders, grouped into as many polyps as its labels say.
#[test]
fn the_sample_librarys_video_shows_its_polyps_on_the_timeline() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    crate::gui::copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("sample_db"),
        dir.path(),
    );
    let store = Store::open(dir.path(), OpenMode::Existing).unwrap();
    let video = store.videos().unwrap().remove(0);
    assert_eq!(video.code, "S7-V01");
    let exam = store.examination(video.examination_id).unwrap().unwrap();
    drop(store);
    let mut h = harness(dir.path());
    settle(&mut h);
    // Its examination found with the browser's Search, then its line clicked.
    search(&mut h, &exam.code);
    click_line(&mut h, &format!("Video {}", video.code));
    click_tab(&mut h, "Tracklets");
    wait_for(&mut h, "Polyps: 2 by grouping");
    shows_part(&h, "2 in the library's labels");
    shows_part(
        &h,
        "Similarity: digital-twin image encoder with its scene encoder",
    );
    crate::gui::screenshot(&mut h, "tracklets-timeline");
}

/// Which comparison the timeline uses: the shipped twin encoders with the scene encoder by
/// default; one asked for by name; a stand-in, named in a note, when the folder lacks it; and a
/// tracklet head promoted from a training run before the shipped twin encoders.
#[test]
fn the_timeline_compares_as_asked_and_says_what_stood_in() {
    let _rng = crate::common::device_rng();
    use endotwin::tracklets::timeline::{Comparison, build};
    let lib = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    revisit_library(lib.path(), src.path());
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let models = tempfile::tempdir().unwrap();
    // The tracklet comparisons' frame encoders and the head that learned over them.
    for name in ["tracklet-frames", "tracklet-frames-scene", "tracklet-head"] {
        for ext in ["json", "bpk"] {
            let file = format!("{name}.{ext}");
            std::fs::copy(shipped.join(&file), models.path().join(&file)).unwrap();
        }
    }
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let video = store.videos().unwrap()[0].id;
    let device = burn::tensor::Device::flex();
    let timeline = |wanted: Comparison| {
        build(
            &store,
            video,
            (models.path(), wanted),
            &device,
            &Progress::new(),
            &mut Default::default(),
        )
        .unwrap()
    };
    let best = timeline(Comparison::Best);
    assert_eq!(best.comparison, Comparison::TwinScene);
    assert!(best.notes.is_empty(), "{:?}", best.notes);
    // The revisit is one polyp at the comparison's own threshold.
    assert_eq!(best.grouping(best.suggested_threshold).groups.len(), 2);
    let mean = timeline(Comparison::TwinMean);
    assert_eq!(mean.comparison, Comparison::TwinMean);
    assert!(mean.method.contains("mean over frames"), "{}", mean.method);
    let none = timeline(Comparison::TrackletEncoder);
    assert_eq!(none.comparison, Comparison::TwinScene);
    assert!(
        none.notes[0].contains("tracklet encoder (frame CNN) is not available")
            && none.notes[0].contains("compared by twin encoder + scene encoder instead"),
        "{:?}",
        none.notes
    );

    // A head promoted from a training run is the researcher's choice: "best available" uses it.
    let card_path = models.path().join("tracklet-head.json");
    let mut card: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&card_path).unwrap()).unwrap();
    card["promoted_from"] = serde_json::json!({
        "card": "runs/my-head.json", "run": 7, "at": "2026-11-25T18:00:00Z"
    });
    std::fs::write(&card_path, card.to_string()).unwrap();
    let promoted = timeline(Comparison::Best);
    assert_eq!(promoted.comparison, Comparison::TrackletHead);
    assert!(
        promoted.method.starts_with("tracklet head"),
        "{}",
        promoted.method
    );

    // Without the scene encoder and the head, "best available" is the mean over frames.
    std::fs::remove_file(models.path().join("tracklet-frames-scene.json")).unwrap();
    std::fs::remove_file(&card_path).unwrap();
    assert_eq!(timeline(Comparison::Best).comparison, Comparison::TwinMean);
}

/// Undo and redo of tracklet edits are checked like the edits themselves (#46): an undo made
/// after another station changed the tracklet is refused with who changed what, and the
/// other station's change stays.
#[test]
fn undoing_a_tracklet_edit_never_overwrites_another_stations_change() {
    let _rng = crate::common::device_rng();
    let lib = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    revisit_library(lib.path(), src.path());
    let before = tracklets(lib.path());
    assert_eq!(before.len(), 3, "{before:?}");
    let (t1, t2) = (&before[0], &before[1]);
    let mut h = harness(lib.path());
    settle(&mut h);
    let mut other = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let video = other.videos().unwrap().remove(0);
    click_line(&mut h, &format!("Video {}", video.code));
    click_tab(&mut h, "Tracklets");
    wait_for(&mut h, "Polyps: 2 by grouping");

    // This window merges the green tracklet into the red polyp...
    click(&mut h, &format!("Merge T{} into T{}'s polyp", t2.id, t1.id));
    wait_for(&mut h, "1 in the library's labels");
    // ...another station then gives it a new polyp of its own...
    let theirs = other.new_review_polyp("dr. elsewhere", video.id).unwrap();
    other
        .assign_tracklet("dr. elsewhere", t2.id, Some(theirs))
        .unwrap();
    // ...and Ctrl+Z here would put the green polyp back over theirs: refused, said.
    undo(&mut h);
    shows_part(
        &h,
        "changed on another station after you read it, by dr. elsewhere",
    );
    shows_part(&h, "the undo was not made");
    let now = tracklets(lib.path());
    assert_eq!(now[1].polyp_id, Some(theirs), "{now:?}");
    // The library's last word on the tracklet is the other station's.
    let audit = other.audit_history(TargetKind::Tracklet, t2.id).unwrap();
    assert_eq!(audit[0].who, "dr. elsewhere", "{audit:?}");
}
