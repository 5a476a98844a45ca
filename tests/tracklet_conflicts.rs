//! Tracklet edits from two stations on one library (issue #46), on both engines: an edit made
//! on what a station read before another station changed the tracklet is refused with who
//! changed what, and nothing is written; a station's own edits, one after another, go through
//! on the versions each gives back.

use crate::library_engines::{Engine, Place, on_both_engines};
use endotwin::store::{LinkDecision, OpenMode, Store, StoreError, TrackletRow};

on_both_engines!(
    a_tracklet_edit_on_what_was_read_before_another_stations_change_is_refused,
    a_stations_own_edits_follow_one_another_on_the_versions_they_give_back,
    the_undo_of_a_split_or_of_an_added_tracklet_is_checked_like_an_edit,
);

/// A library with one phantom video of several tracklets: (place, video id, its tracklets,
/// its examination's polyps).
type VideoPlace = (Place, i64, Vec<TrackletRow>, Vec<(i64, String)>);

fn video_place(engine: Engine) -> Option<VideoPlace> {
    let place = Place::fresh(engine)?;
    let cfg = endotwin::data::phantom::PhantomConfig {
        seed: 5,
        polyps: 3,
        views_per_polyp: 4,
        videos: 1,
        frames_per_video: 90,
        capsule_images: 0,
        background_frames: 0,
        image_size: 32,
        video_size: 32,
        ..Default::default()
    };
    let mut store = place.open(OpenMode::CreateIfMissing).unwrap();
    endotwin::data::phantom::generate(&mut store, &cfg, &endotwin::engine::Progress::new())
        .unwrap();
    let video = store.videos().unwrap().remove(0).id;
    let tracklets = store.video_tracklets(video).unwrap();
    assert!(tracklets.len() >= 2, "{tracklets:?}");
    let polyps = store.video_polyps(video).unwrap();
    assert!(polyps.len() >= 2, "{polyps:?}");
    Some((place, video, tracklets, polyps))
}

fn another_polyp(polyps: &[(i64, String)], than: Option<i64>) -> i64 {
    polyps
        .iter()
        .map(|p| p.0)
        .find(|&p| Some(p) != than)
        .unwrap()
}

fn conflict_by(e: StoreError, who: &str) {
    match &e {
        StoreError::Conflict { changes, .. } => assert!(changes.contains(who), "{e}"),
        _ => panic!("not a conflict: {e}"),
    }
    assert!(e.to_string().contains("nothing was written"), "{e}");
}

fn a_tracklet_edit_on_what_was_read_before_another_stations_change_is_refused(engine: Engine) {
    let Some((place, video, shown, polyps)) = video_place(engine) else {
        return;
    };
    let mut here = place.open(OpenMode::Existing).unwrap();
    let mut there = place.open(OpenMode::Existing).unwrap();
    let (t, u) = (&shown[0], &shown[1]);
    // The other station gives the first tracklet another polyp.
    let theirs = another_polyp(&polyps, t.polyp_id);
    there
        .assign_tracklet("dr. there", t.id, Some(theirs))
        .unwrap();
    let after_theirs = |s: &Store| {
        (
            s.video_tracklets(video).unwrap(),
            s.link_decisions(video).unwrap(),
            s.audit_history(endotwin::store::TargetKind::Tracklet, t.id)
                .unwrap()
                .len(),
        )
    };
    let settled = after_theirs(&there);
    // This station, on what it showed before: each edit of that tracklet is refused.
    let mine = another_polyp(&polyps, Some(theirs));
    let e = here
        .assign_tracklet_as_read("dr. here", t.id, Some(mine), Some(t.version))
        .unwrap_err();
    conflict_by(e, "dr. there");
    let frame = (t.first_frame + t.last_frame) / 2 + 1;
    let e = here
        .split_tracklet_as_read("dr. here", t.id, frame, Some(t.version))
        .unwrap_err();
    conflict_by(e, "dr. there");
    let e = here
        .decide_link_as_read(
            "dr. here",
            t.id,
            u.id,
            Some(LinkDecision::Rejected),
            [Some(t.version), Some(u.version)],
        )
        .unwrap_err();
    conflict_by(e, "dr. there");
    assert_eq!(after_theirs(&here), settled, "something was written");
    // The other tracklet, untouched since it was read, is edited as before.
    here.assign_tracklet_as_read("dr. here", u.id, Some(mine), Some(u.version))
        .unwrap();
    // Read again, the first tracklet's edit goes through.
    let now = here.tracklet_version(t.id).unwrap();
    here.assign_tracklet_as_read("dr. here", t.id, Some(mine), Some(now))
        .unwrap();
    let rows = here.video_tracklets(video).unwrap();
    assert_eq!(rows[0].polyp_id, Some(mine));
}

fn a_stations_own_edits_follow_one_another_on_the_versions_they_give_back(engine: Engine) {
    let Some((place, video, shown, polyps)) = video_place(engine) else {
        return;
    };
    let mut here = place.open(OpenMode::Existing).unwrap();
    let (t, u) = (&shown[0], &shown[1]);
    let mut versions: std::collections::HashMap<i64, i64> =
        shown.iter().map(|r| (r.id, r.version)).collect();
    let keep = |versions: &mut std::collections::HashMap<i64, i64>, v: &[(i64, i64)]| {
        versions.extend(v.iter().copied());
    };
    let p = another_polyp(&polyps, t.polyp_id);
    let w = here
        .assign_tracklet_as_read("dr. here", t.id, Some(p), versions.get(&t.id).copied())
        .unwrap();
    keep(&mut versions, &w.versions);
    let w = here
        .decide_link_as_read(
            "dr. here",
            t.id,
            u.id,
            Some(LinkDecision::Accepted),
            [versions.get(&t.id).copied(), versions.get(&u.id).copied()],
        )
        .unwrap();
    keep(&mut versions, &w.versions);
    let frame = (t.first_frame + t.last_frame) / 2 + 1;
    let w = here
        .split_tracklet_as_read("dr. here", t.id, frame, versions.get(&t.id).copied())
        .unwrap();
    keep(&mut versions, &w.versions);
    // What each edit gave back is what the library says now.
    for row in here.video_tracklets(video).unwrap() {
        if let Some(&v) = versions.get(&row.id) {
            assert_eq!(v, row.version, "tracklet {}", row.id);
        }
    }
    assert_eq!(
        here.link_decisions(video).unwrap(),
        vec![(t.id.min(u.id), t.id.max(u.id), LinkDecision::Accepted)]
    );
}

/// The undos the window makes (joining a split back, removing a tracklet it added) are
/// refused when another station changed a part since, and go through on the versions the
/// station's own edit gave back.
fn the_undo_of_a_split_or_of_an_added_tracklet_is_checked_like_an_edit(engine: Engine) {
    let Some((place, video, shown, polyps)) = video_place(engine) else {
        return;
    };
    let mut here = place.open(OpenMode::Existing).unwrap();
    let mut there = place.open(OpenMode::Existing).unwrap();
    let t = &shown[0];
    let frame = (t.first_frame + t.last_frame) / 2 + 1;
    let split = here
        .split_tracklet_as_read("dr. here", t.id, frame, Some(t.version))
        .unwrap();
    let part = split.value;
    let at = |v: &[(i64, i64)], id: i64| v.iter().find(|x| x.0 == id).map(|x| x.1);
    let read = [at(&split.versions, t.id), at(&split.versions, part)];
    // Another station gives the split-off part a polyp: joining it back is refused.
    let p = another_polyp(&polyps, t.polyp_id);
    there.assign_tracklet("dr. there", part, Some(p)).unwrap();
    let before = here.video_tracklets(video).unwrap();
    conflict_by(
        here.join_tracklets_as_read("dr. here", t.id, part, read)
            .unwrap_err(),
        "dr. there",
    );
    assert_eq!(here.video_tracklets(video).unwrap(), before);
    // Read again, the join goes through.
    let read = [
        Some(here.tracklet_version(t.id).unwrap()),
        Some(here.tracklet_version(part).unwrap()),
    ];
    here.join_tracklets_as_read("dr. here", t.id, part, read)
        .unwrap();
    assert!(
        !here
            .video_tracklets(video)
            .unwrap()
            .iter()
            .any(|r| r.id == part)
    );

    // A tracklet this station added, then split by another station: removing it is refused.
    let boxes = [
        (t.first_frame, [1.0, 1.0, 8.0, 8.0]),
        (t.first_frame + 1, [1.0, 1.0, 8.0, 8.0]),
    ];
    let added = here
        .add_tracklet("dr. here", video, None, &boxes, "drawn")
        .unwrap();
    let version = here.tracklet_version(added).unwrap();
    there
        .split_tracklet("dr. there", added, t.first_frame + 1)
        .unwrap();
    let before = here.video_tracklets(video).unwrap();
    conflict_by(
        here.remove_tracklet_as_read("dr. here", added, Some(version))
            .unwrap_err(),
        "dr. there",
    );
    assert_eq!(here.video_tracklets(video).unwrap(), before);
}
