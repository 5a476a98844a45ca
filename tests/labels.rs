//! `endotwin labels export|import`: a round trip changes nothing; one label edited in the
//! exported file changes exactly that label, with one audit row, and only with --apply.

use crate::common::{self, state};
use crate::gui::tiny_library;
use endotwin::store::{OpenMode, Store, TargetKind};
use std::path::Path;

/// Every audited change `who` made in the library, newest first.
fn changes_by(store: &Store, who: &str) -> Vec<endotwin::store::LibraryAudit> {
    store
        .audit_log(&endotwin::store::AuditFilter {
            who: Some(who.into()),
            ..Default::default()
        })
        .unwrap()
}

fn labels(library: &Path, args: &[&str]) -> common::Ran {
    let mut c = common::endotwin(library);
    c.arg("labels").args(args);
    common::run(c)
}

#[test]
fn exported_labels_come_back_unchanged_and_one_edit_changes_one_label() {
    let lib = tempfile::tempdir().unwrap();
    tiny_library(lib.path());
    let csv = lib.path().join("labels.csv");
    let csv_arg = csv.to_str().unwrap();
    let ran = labels(lib.path(), &["export", "--format", "csv", "--out", csv_arg]);
    assert!(ran.ok() && ran.says("3 polyps"), "{}", ran.text());

    // The round trip: nothing differs.
    let before = state(lib.path());
    let ran = labels(lib.path(), &["import", csv_arg, "--apply"]);
    assert!(ran.ok() && ran.says("no changes"), "{}", ran.text());
    assert_eq!(state(lib.path()), before);

    // Edit one polyp's histology and another's size in the file.
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut rows: Vec<Vec<String>> = text
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    let col = |name: &str| rows[0].iter().position(|h| h == name).unwrap();
    let (h, s) = (col("histology"), col("size_mm"));
    let code = rows[1][0].clone();
    let old = rows[1][h].clone();
    // A revision its Vienna class still fits (a histology that contradicts the class is
    // refused unless the line gives both, round 16 N4).
    let new = if old == "other" { "unknown" } else { "other" };
    rows[1][h] = new.to_string();
    rows[2][s] = "twelve".into();
    let edited: Vec<String> = rows.iter().map(|r| r.join(",")).collect();
    std::fs::write(&csv, edited.join("\n") + "\n").unwrap();

    // Without --apply: the change is listed, the bad size named, nothing written.
    let ran = labels(lib.path(), &["import", csv_arg]);
    assert!(ran.ok(), "{}", ran.text());
    assert!(
        ran.says(&format!("{code} histology: {old} -> {new}")),
        "{}",
        ran.text()
    );
    assert!(
        ran.says("1 changes") && ran.says("twelve"),
        "{}",
        ran.text()
    );
    assert_eq!(state(lib.path()), before);

    // With --apply: exactly that label, one audit row signed by --who.
    let ran = labels(
        lib.path(),
        &["import", csv_arg, "--apply", "--who", "dr. b"],
    );
    assert!(ran.ok() && ran.says("applied 1 changes"), "{}", ran.text());
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let polyp = store
        .polyps()
        .unwrap()
        .into_iter()
        .find(|p| p.code == code)
        .unwrap();
    assert_eq!(polyp.histology.as_deref(), Some(new));
    let audit = store.audit_history(TargetKind::Polyp, polyp.id).unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(
        (
            audit[0].key.as_str(),
            audit[0].who.as_str(),
            audit[0].new_value.as_deref()
        ),
        ("histology", "dr. b", Some(new))
    );
    let others = store
        .polyps()
        .unwrap()
        .into_iter()
        .filter(|p| p.id != polyp.id);
    for p in others {
        assert!(
            store
                .audit_history(TargetKind::Polyp, p.id)
                .unwrap()
                .is_empty()
        );
    }
}

#[test]
fn the_multi_view_jsonl_comes_back_unchanged_and_one_edit_changes_one_label() {
    let lib = tempfile::tempdir().unwrap();
    tiny_library(lib.path());
    let file = lib.path().join("labels.jsonl");
    let arg = file.to_str().unwrap();
    let ran = labels(lib.path(), &["export", "--format", "jsonl", "--out", arg]);
    assert!(ran.ok() && ran.says("3 polyps"), "{}", ran.text());
    let text = std::fs::read_to_string(&file).unwrap();
    let mut lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Each line is one multi-view set: the polyp, its views' files, its labels.
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    for line in &lines {
        let code = line["polyp"].as_str().unwrap();
        let p = store
            .polyps()
            .unwrap()
            .into_iter()
            .find(|p| p.code == code)
            .unwrap();
        assert_eq!(
            line["views"].as_array().unwrap().len() as i64,
            p.view_count,
            "{line}"
        );
        assert!(
            lib.path()
                .join(line["views"][0].as_str().unwrap())
                .is_file()
        );
        assert_eq!(line["labels"]["histology"].as_str(), p.histology.as_deref());
    }
    drop(store);

    // The round trip: nothing differs.
    let before = state(lib.path());
    let ran = labels(lib.path(), &["import", arg, "--apply"]);
    assert!(ran.ok() && ran.says("no changes"), "{}", ran.text());
    assert_eq!(state(lib.path()), before);
    // `--out -` gives the same text on standard output, and writes no file named `-`.
    let out = common::endotwin(lib.path())
        .current_dir(lib.path())
        .args(["labels", "export", "--format", "jsonl", "--out", "-"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), text);
    assert!(!lib.path().join("-").exists());
    // The same file saved with a byte order mark reads the same.
    let bom = lib.path().join("bom.jsonl");
    std::fs::write(&bom, format!("\u{FEFF}{text}")).unwrap();
    let ran = labels(lib.path(), &["import", bom.to_str().unwrap()]);
    assert!(ran.ok() && ran.says("no changes"), "{}", ran.text());

    // One label edited (a Paris class), one left out of the line (untouched), one line naming
    // a polyp the library lacks (named, skipped).
    let code = lines[0]["polyp"].as_str().unwrap().to_string();
    lines[0]["labels"]["paris"] = "0-IIa".into();
    lines[1]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("histology");
    let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    edited.push(r#"{"polyp": "NOPE-1", "labels": {"paris": "0-Is"}}"#.into());
    std::fs::write(&file, edited.join("\n") + "\n").unwrap();
    let old = Store::open(lib.path(), OpenMode::Existing)
        .unwrap()
        .polyps()
        .unwrap()
        .into_iter()
        .find(|p| p.code == code)
        .unwrap()
        .paris;
    let ran = labels(lib.path(), &["import", arg, "--apply", "--who", "dr. j"]);
    let changes_paris = old.as_deref() != Some("0-IIa");
    let applied = if changes_paris {
        "applied 1 changes"
    } else {
        "no changes"
    };
    assert!(ran.ok() && ran.says(applied), "{}", ran.text());
    assert!(ran.says("NOPE-1"), "{}", ran.text());
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let rows = store.polyps().unwrap();
    let p = rows.iter().find(|p| p.code == code).unwrap();
    assert_eq!(p.paris.as_deref(), Some("0-IIa"));
    let audit = store.audit_history(TargetKind::Polyp, p.id).unwrap();
    assert_eq!(audit.len(), changes_paris as usize);
    for other in rows.iter().filter(|q| q.id != p.id) {
        assert!(
            store
                .audit_history(TargetKind::Polyp, other.id)
                .unwrap()
                .is_empty()
        );
    }
}

#[test]
fn the_library_history_lists_every_change_and_filters_by_reviewer_and_date() {
    let lib = tempfile::tempdir().unwrap();
    tiny_library(lib.path());
    let polyps = Store::open(lib.path(), OpenMode::Existing)
        .unwrap()
        .polyps()
        .unwrap();
    {
        let mut store = Store::open(lib.path(), OpenMode::Existing).unwrap();
        store
            .set_label(
                "ana",
                TargetKind::Polyp,
                polyps[0].id,
                "paris",
                Some("0-Ip"),
            )
            .unwrap();
        store
            .set_label(
                "ben",
                TargetKind::Polyp,
                polyps[1].id,
                "location",
                Some("rectum"),
            )
            .unwrap();
    }
    // Everyone's, newest first, naming the polyp, the label and both values.
    let ran = labels(lib.path(), &["history", "--limit", "0"]);
    assert!(ran.ok(), "{}", ran.text());
    let ben = ran
        .stdout
        .find(&format!("ben  {} location:", polyps[1].code));
    let ana = ran.stdout.find(&format!("ana  {} paris:", polyps[0].code));
    assert!(ben.is_some() && ana.is_some(), "{}", ran.text());
    assert!(ben < ana, "newest first: {}", ran.text());
    assert!(
        ran.says("-> 0-Ip") && ran.says("-> rectum"),
        "{}",
        ran.text()
    );
    // One reviewer's.
    let ran = labels(lib.path(), &["history", "--who", "ana"]);
    assert!(
        ran.ok() && ran.says("ana") && !ran.says("ben  "),
        "{}",
        ran.text()
    );
    // A day before any change: nothing; today (a bare date reaches the day's end): both.
    let ran = labels(lib.path(), &["history", "--until", "2000-01-01"]);
    assert!(ran.says("no label changes match"), "{}", ran.text());
    let today = &endotwin::store::now_utc()[..10];
    let ran = labels(lib.path(), &["history", "--since", today, "--until", today]);
    assert!(ran.says("ana") && ran.says("ben"), "{}", ran.text());
}

#[test]
fn coco_labels_come_back_unchanged_and_one_frame_label_and_one_identity_change_exactly() {
    let lib = tempfile::tempdir().unwrap();
    crate::common::video_library(lib.path(), 4);
    let file = lib.path().join("labels.coco.json");
    let arg = file.to_str().unwrap();
    let ran = labels(lib.path(), &["export", "--format", "coco", "--out", arg]);
    assert!(ran.ok() && ran.says("boxes"), "{}", ran.text());

    // The round trip: nothing differs.
    let before = state(lib.path());
    let ran = labels(lib.path(), &["import", arg, "--apply"]);
    assert!(ran.ok() && ran.says("no changes"), "{}", ran.text());
    assert_eq!(state(lib.path()), before);

    // One frame says "no polyp"; one tracklet's boxes name another polyp of the library.
    let mut coco: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let image = coco["images"][0]["id"].as_i64().unwrap();
    coco["images"][0]["polyp_present"] = "no polyp".into();
    let track = coco["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|a| a["track_id"].as_i64())
        .expect("a box in a tracklet");
    // Another polyp of the same examination (a tracklet can only show one of those).
    let polyps: Vec<String> = {
        let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
        let video = store
            .videos()
            .unwrap()
            .into_iter()
            .find(|v| {
                store
                    .video_tracklets(v.id)
                    .unwrap()
                    .iter()
                    .any(|t| t.id == track)
            })
            .unwrap();
        store
            .video_polyps(video.id)
            .unwrap()
            .into_iter()
            .map(|p| p.1)
            .collect()
    };
    let was = coco["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["track_id"].as_i64() == Some(track))
        .unwrap()["polyp"]
        .as_str()
        .map(str::to_string);
    let other = polyps
        .iter()
        .find(|p| Some(*p) != was.as_ref())
        .expect("an examination with two polyps")
        .clone();
    for a in coco["annotations"].as_array_mut().unwrap() {
        if a["track_id"].as_i64() == Some(track) {
            a["polyp"] = other.clone().into();
        }
    }
    std::fs::write(&file, serde_json::to_string(&coco).unwrap()).unwrap();

    // Listed, not written, without --apply; exactly those two with it, one audit row each.
    let ran = labels(lib.path(), &["import", arg]);
    assert!(ran.ok() && ran.says("2 changes"), "{}", ran.text());
    assert!(
        ran.says(&format!("tracklet {track} polyp:")),
        "{}",
        ran.text()
    );
    assert_eq!(state(lib.path()), before);
    let ran = labels(lib.path(), &["import", arg, "--apply", "--who", "ana"]);
    assert!(ran.ok(), "{}", ran.text());
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    assert_eq!(
        store
            .current_label(TargetKind::Media, image, "polyp_present")
            .unwrap()
            .as_deref(),
        Some("no polyp")
    );
    let history = changes_by(&store, "ana");
    assert_eq!(history.len(), 2, "{history:?}");
    let assigned = store
        .videos()
        .unwrap()
        .iter()
        .flat_map(|v| store.video_tracklets(v.id).unwrap())
        .find(|t| t.id == track)
        .unwrap();
    assert_eq!(assigned.polyp_code.as_deref(), Some(other.as_str()));
    drop(store);
    // And now the file and the library agree.
    let ran = labels(lib.path(), &["import", arg]);
    assert!(ran.ok() && ran.says("no changes"), "{}", ran.text());
}

#[test]
fn a_hostile_coco_file_is_refused_by_name_and_changes_nothing() {
    let lib = tempfile::tempdir().unwrap();
    crate::common::video_library(lib.path(), 4);
    let file = lib.path().join("labels.coco.json");
    let arg = file.to_str().unwrap();
    assert!(labels(lib.path(), &["export", "--format", "coco", "--out", arg]).ok());
    let before = state(lib.path());
    let good: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let track = good["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|a| a["track_id"].as_i64())
        .unwrap();

    // Every difference is one a reviewer must not get silently: an image the library does not
    // have (with a path that climbs out), a frame label that is no label, a track that does
    // not exist, a polyp that is not in the library, one track naming two polyps.
    let mut bad = good.clone();
    bad["images"] = serde_json::json!([
        {"id": 999999, "file_name": "../../etc/passwd", "polyp_present": "polyp"},
        {"id": good["images"][0]["id"], "file_name": "x.jpg", "polyp_present": "maybe"},
    ]);
    let annotations = bad["annotations"].as_array_mut().unwrap();
    annotations.push(serde_json::json!({"id": 1, "image_id": 1, "category_id": 1,
        "bbox": [0, 0, -5, 1e9], "track_id": 424242, "polyp": "S5-E001-P1"}));
    for a in annotations.iter_mut() {
        if a["track_id"].as_i64() == Some(track) {
            a["polyp"] = "../S9-NOPE".into();
        }
    }
    std::fs::write(&file, serde_json::to_string(&bad).unwrap()).unwrap();
    let ran = labels(lib.path(), &["import", arg, "--apply"]);
    assert!(!ran.ok(), "{}", ran.text());
    for named in [
        "image 999999 (../../etc/passwd): not in this library",
        "'maybe' is not",
        "track 424242: no such tracklet",
        &format!("track {track}: '../S9-NOPE' is not a polyp"),
        "boxes are not imported",
        "nothing imported",
    ] {
        assert!(ran.says(named), "{named}: {}", ran.text());
    }
    assert_eq!(state(lib.path()), before, "nothing changed");

    // A truncated file: refused by name, as COCO, nothing changed.
    let text = serde_json::to_string_pretty(&good).unwrap();
    std::fs::write(&file, &text[..text.len() / 2]).unwrap();
    let ran = labels(lib.path(), &["import", arg, "--apply"]);
    assert!(!ran.ok(), "{}", ran.text());
    assert!(
        ran.says("labels.coco.json") && ran.says("not a labels COCO JSON"),
        "{}",
        ran.text()
    );
    assert_eq!(state(lib.path()), before);
    // An empty result: no images, no boxes: the boxes that differ are named, nothing changes.
    std::fs::write(&file, r#"{"images": [], "annotations": []}"#).unwrap();
    let ran = labels(lib.path(), &["import", arg, "--apply"]);
    assert!(
        !ran.ok() && ran.says("boxes are not imported"),
        "{}",
        ran.text()
    );
    assert_eq!(state(lib.path()), before);
}

#[test]
fn drawn_polyp_boxes_go_out_and_back_in_coco_and_one_edit_changes_exactly_them() {
    use endotwin::store::VIEW_BOX_KEY;
    let lib = tempfile::tempdir().unwrap();
    tiny_library(lib.path());
    let views = {
        let mut store = Store::open(lib.path(), OpenMode::Existing).unwrap();
        let polyp = store.polyps().unwrap()[0].id;
        let views = store.polyp_views(polyp).unwrap();
        for (v, b) in views.iter().zip(["4,6,20,18", "10,10,12,12"]) {
            store
                .set_label("dr. a", TargetKind::Media, v.id, VIEW_BOX_KEY, Some(b))
                .unwrap();
        }
        views
    };
    let file = lib.path().join("boxes.coco.json");
    let arg = file.to_str().unwrap();
    assert!(labels(lib.path(), &["export", "--format", "coco", "--out", arg]).ok());
    let mut coco: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let on = |coco: &serde_json::Value, id: i64| -> Vec<serde_json::Value> {
        coco["annotations"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["image_id"].as_i64() == Some(id))
            .cloned()
            .collect()
    };
    let first = on(&coco, views[0].id);
    assert_eq!(first.len(), 1, "{coco}");
    assert_eq!(first[0]["bbox"], serde_json::json!([4.0, 6.0, 20.0, 18.0]));
    assert!(first[0].get("track_id").is_none_or(|t| t.is_null()));

    // The round trip changes nothing.
    let before = state(lib.path());
    let ran = labels(lib.path(), &["import", arg, "--apply"]);
    assert!(ran.ok() && ran.says("no changes"), "{}", ran.text());
    assert_eq!(state(lib.path()), before);

    // The first box moved, the second deleted, a box outside its image added to a third view.
    for a in coco["annotations"].as_array_mut().unwrap() {
        if a["image_id"].as_i64() == Some(views[0].id) {
            a["bbox"] = serde_json::json!([5, 5, 16, 16]);
        }
    }
    coco["annotations"]
        .as_array_mut()
        .unwrap()
        .retain(|a| a["image_id"].as_i64() != Some(views[1].id));
    coco["images"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!(
        {"id": views[2].id, "file_name": views[2].rel_path, "width": 48, "height": 48}));
    coco["annotations"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!(
        {"id": 99, "image_id": views[2].id, "category_id": 1, "bbox": [40, 40, 30, 30]}));
    std::fs::write(&file, serde_json::to_string(&coco).unwrap()).unwrap();
    let ran = labels(lib.path(), &["import", arg]);
    assert!(ran.ok() && ran.says("2 changes"), "{}", ran.text());
    assert!(
        ran.says("is not a box inside its 48x48 image"),
        "{}",
        ran.text()
    );
    assert_eq!(state(lib.path()), before, "nothing written without --apply");
    let ran = labels(lib.path(), &["import", arg, "--apply", "--who", "ana"]);
    assert!(ran.ok(), "{}", ran.text());
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    assert_eq!(
        store.view_box(views[0].id).unwrap(),
        Some([5.0, 5.0, 16.0, 16.0])
    );
    assert_eq!(store.view_box(views[1].id).unwrap(), None);
    assert_eq!(store.view_box(views[2].id).unwrap(), None);
    let history = changes_by(&store, "ana");
    assert_eq!(history.len(), 2, "{history:?}");
    assert!(history.iter().all(|h| h.entry.key == VIEW_BOX_KEY));
}

#[test]
fn capsule_captions_go_out_and_back_in_coco_and_one_edit_changes_exactly_it() {
    use endotwin::data::phantom::{self, PhantomConfig, Split};
    let lib = tempfile::tempdir().unwrap();
    {
        let mut store = Store::open(lib.path(), OpenMode::CreateIfMissing).unwrap();
        let cfg = PhantomConfig {
            seed: 8,
            split: Split::Train,
            polyps: 0,
            videos: 0,
            capsule_images: 6,
            background_frames: 0,
            image_size: 48,
            ..PhantomConfig::default()
        };
        phantom::generate(&mut store, &cfg, &endotwin::engine::Progress::new()).unwrap();
    }
    let file = lib.path().join("captions.coco.json");
    let arg = file.to_str().unwrap();
    assert!(labels(lib.path(), &["export", "--format", "coco", "--out", arg]).ok());
    let mut coco: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let images = coco["images"].as_array().unwrap().clone();
    assert_eq!(
        images.iter().filter(|i| i["caption"].is_string()).count(),
        6,
        "every captioned capsule frame: {coco}"
    );
    let before = state(lib.path());
    let ran = labels(lib.path(), &["import", arg, "--apply"]);
    assert!(ran.ok() && ran.says("no changes"), "{}", ran.text());
    assert_eq!(state(lib.path()), before);

    // One finding rewritten, one removed, one emptied (refused by name).
    let ids: Vec<i64> = images.iter().map(|i| i["id"].as_i64().unwrap()).collect();
    let new = "Small angioectasia in the jejunum, no active bleeding.";
    coco["images"][0]["caption"] = new.into();
    coco["images"][1]["caption"] = serde_json::Value::Null;
    coco["images"][2]["caption"] = "  ".into();
    std::fs::write(&file, serde_json::to_string(&coco).unwrap()).unwrap();
    let ran = labels(lib.path(), &["import", arg]);
    assert!(ran.ok() && ran.says("2 changes"), "{}", ran.text());
    assert!(ran.says("an empty caption"), "{}", ran.text());
    assert_eq!(state(lib.path()), before, "nothing written without --apply");
    let ran = labels(lib.path(), &["import", arg, "--apply", "--who", "ana"]);
    assert!(ran.ok(), "{}", ran.text());
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    assert_eq!(store.caption(ids[0]).unwrap().as_deref(), Some(new));
    let refined = endotwin::data::refine::Refiner::shipped().refine(new);
    assert_eq!(
        store.caption_refinement(ids[0]).unwrap(),
        Some((refined.caption, refined.category)),
        "the refinement follows the finding"
    );
    assert_eq!(store.caption(ids[1]).unwrap(), None);
    assert!(
        store.caption(ids[2]).unwrap().is_some(),
        "the empty one was refused"
    );
    let history = changes_by(&store, "ana");
    assert_eq!(history.len(), 2, "{history:?}");
    assert!(history.iter().all(|h| h.entry.key == "caption"));
}

#[test]
fn a_video_box_moved_in_coco_moves_exactly_that_box_and_a_deleted_one_is_named() {
    let lib = tempfile::tempdir().unwrap();
    crate::common::video_library(lib.path(), 4);
    let file = lib.path().join("labels.coco.json");
    let arg = file.to_str().unwrap();
    assert!(labels(lib.path(), &["export", "--format", "coco", "--out", arg]).ok());
    let mut coco: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let boxes = |lib: &Path| -> Vec<(i64, [f64; 4])> {
        let store = Store::open(lib, OpenMode::Existing).unwrap();
        store
            .videos()
            .unwrap()
            .iter()
            .flat_map(|v| store.video_boxes_with_ids(v.id).unwrap())
            .map(|(id, b)| (id, [b.x, b.y, b.w, b.h]))
            .collect()
    };
    let before = boxes(lib.path());
    let annotations = coco["annotations"].as_array_mut().unwrap();
    let moved = annotations[0]["box"]
        .as_i64()
        .expect("video boxes carry their id");
    let was: Vec<f64> = serde_json::from_value(annotations[0]["bbox"].clone()).unwrap();
    // One pixel left (inside the frame whichever side it touches), one smaller.
    let to = [(was[0] - 1.0).max(0.0), was[1], was[2] - 1.0, was[3]];
    annotations[0]["bbox"] = serde_json::json!(to);
    let deleted = annotations.remove(1)["box"].as_i64().unwrap();
    std::fs::write(&file, serde_json::to_string(&coco).unwrap()).unwrap();

    let ran = labels(lib.path(), &["import", arg]);
    assert!(ran.ok() && ran.says("1 change"), "{}", ran.text());
    assert!(ran.says("leaves out 1 of the library's"), "{}", ran.text());
    assert_eq!(boxes(lib.path()), before, "nothing written without --apply");
    let ran = labels(lib.path(), &["import", arg, "--apply", "--who", "ana"]);
    assert!(ran.ok(), "{}", ran.text());
    let after = boxes(lib.path());
    for ((id, b), (id2, a)) in before.iter().zip(&after) {
        assert_eq!(id, id2);
        if *id == moved {
            assert_eq!(*a, to, "box {id} moved");
        } else {
            assert_eq!(
                a, b,
                "box {id} left alone (box {deleted} too: deletions are not imported)"
            );
        }
    }
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let history = changes_by(&store, "ana");
    assert_eq!(history.len(), 1, "{history:?}");
    assert_eq!(history[0].entry.key, format!("box {moved}"));
}

/// Hostile round 4 of #43: two `labels import --apply` at once; the later one wrote over the
/// other's fresh edit with the value its preview read.
#[test]
fn an_import_whose_preview_another_reviewer_changed_since_writes_nothing() {
    let lib = tempfile::tempdir().unwrap();
    tiny_library(lib.path());
    let mut store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let polyp = store.polyps().unwrap()[0].clone();
    // A new size that fits the polyp's size class (one that contradicts it is refused).
    let class = store
        .current_label(TargetKind::Polyp, polyp.id, "size class")
        .unwrap();
    let size = match class.as_deref() {
        Some("diminutive") => 2.5,
        Some("small") => 9.5,
        Some("large") => 19.5,
        _ => 287.0,
    };
    assert_ne!(polyp.size_mm, Some(size));
    let text = format!(
        "polyp,histology,size_mm\n{},hamartomatous,{size}\n",
        polyp.code
    );
    let (changes, problems) = endotwin::labels::diff_file(&store, &text).unwrap();
    assert!(
        problems.is_empty() && changes.len() == 2,
        "{changes:?} {problems:?}"
    );
    // Another station changes the histology after this preview was read.
    store
        .set_label(
            "bob",
            TargetKind::Polyp,
            polyp.id,
            "histology",
            Some("juvenile"),
        )
        .unwrap();
    let before = common::state(lib.path());
    let e = endotwin::labels::apply(&mut store, "ana", &changes).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("changed since you read it") && text.contains("it is now juvenile"),
        "{text}"
    );
    drop(store);
    assert_eq!(common::state(lib.path()), before, "a label was written");
}

/// #46: caption corrections and video boxes coming through `labels import` were not checked
/// against what the preview read: another station's caption or box move was written over.
#[test]
fn a_coco_import_whose_caption_or_box_another_reviewer_changed_since_writes_nothing() {
    use endotwin::data::phantom::{self, PhantomConfig, Split};
    let lib = tempfile::tempdir().unwrap();
    let mut store = Store::open(lib.path(), OpenMode::CreateIfMissing).unwrap();
    let cfg = PhantomConfig {
        seed: 8,
        split: Split::Train,
        polyps: 0,
        videos: 0,
        capsule_images: 3,
        background_frames: 0,
        image_size: 48,
        ..PhantomConfig::default()
    };
    phantom::generate(&mut store, &cfg, &endotwin::engine::Progress::new()).unwrap();
    let mut coco: serde_json::Value =
        serde_json::from_str(&endotwin::labels::coco::export(&store).unwrap()).unwrap();
    let id = coco["images"][0]["id"].as_i64().unwrap();
    coco["images"][0]["caption"] = "Small angioectasia in the jejunum.".into();
    let (changes, problems) =
        endotwin::labels::diff_file(&store, &serde_json::to_string(&coco).unwrap()).unwrap();
    assert!(
        problems.is_empty() && changes.len() == 1,
        "{changes:?} {problems:?}"
    );
    // Another station corrects the same caption after this preview was read.
    let theirs = "Ulcer in the ileum.";
    store
        .correct_caption("bob", id, Some((theirs, None)))
        .unwrap();
    let before = common::state(lib.path());
    let e = endotwin::labels::apply(&mut store, "ana", &changes).unwrap_err();
    assert!(e.to_string().contains(theirs), "{e}");
    assert_eq!(common::state(lib.path()), before, "a caption was written");
    assert_eq!(store.caption(id).unwrap().as_deref(), Some(theirs));

    // A video box moved by another station since the preview.
    drop(store);
    let lib = tempfile::tempdir().unwrap();
    crate::common::video_library(lib.path(), 4);
    let mut store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let mut coco: serde_json::Value =
        serde_json::from_str(&endotwin::labels::coco::export(&store).unwrap()).unwrap();
    let ann = coco["annotations"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|a| a["box"].is_i64())
        .expect("a video box");
    let box_id = ann["box"].as_i64().unwrap();
    let b: Vec<f64> = ann["bbox"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    ann["bbox"] = serde_json::json!([b[0] + 1.0, b[1], b[2], b[3]]);
    let (changes, problems) =
        endotwin::labels::diff_file(&store, &serde_json::to_string(&coco).unwrap()).unwrap();
    assert!(changes.len() == 1, "{changes:?} {problems:?}");
    store
        .move_box("bob", box_id, [b[0], b[1] + 2.0, b[2], b[3]])
        .unwrap();
    let before = common::state(lib.path());
    let e = endotwin::labels::apply(&mut store, "ana", &changes).unwrap_err();
    assert!(e.to_string().contains("it is now"), "{e}");
    assert_eq!(common::state(lib.path()), before, "a box was moved");
}
