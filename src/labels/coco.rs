//! Boxes, tracklet identities and frame labels as COCO JSON, the format CVAT, FiftyOne and
//! most detection tools read. One image per video frame that has a box or a frame label (and
//! per other frame with a frame label); one annotation per box, category `polyp`, with
//! `track_id` (its tracklet) and `polyp` (the polyp the tracklet shows, by code, or null).
//! Frame labels ride on the image as `polyp_present` ("polyp", "no polyp" or null).
//!
//! Importing it back changes what a reviewer changes: frame labels and which polyp each
//! tracklet shows (one audited change each, only with `--apply`). Boxes are not imported
//! (they are drawn and followed in the Tracklets tab); a file whose boxes differ says so.

use super::{Change, ChangeKind, LabelsError};
use crate::store::{Store, TargetKind};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// The frame label key (as the Labelling tab writes it).
pub const FRAME_KEY: &str = "polyp_present";
/// The values a frame label takes.
pub const FRAME_VALUES: [&str; 2] = ["polyp", "no polyp"];

#[derive(Debug, Serialize, Deserialize)]
struct Coco {
    #[serde(default)]
    info: serde_json::Value,
    images: Vec<Image>,
    #[serde(default)]
    annotations: Vec<Annotation>,
    #[serde(default)]
    categories: Vec<Category>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Image {
    id: i64,
    file_name: String,
    #[serde(default)]
    width: u32,
    #[serde(default)]
    height: u32,
    /// The video's code and the frame's index in it, for video frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    video: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    frame_index: Option<i64>,
    /// "polyp", "no polyp", or null; a file without the key leaves the label alone.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    polyp_present: Option<Option<String>>,
}

/// `Some(None)` for an explicit null, `None` when the key is absent.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

#[derive(Debug, Serialize, Deserialize)]
struct Annotation {
    id: i64,
    image_id: i64,
    category_id: i64,
    bbox: [f64; 4],
    #[serde(default)]
    area: f64,
    #[serde(default)]
    iscrowd: u8,
    #[serde(default)]
    track_id: Option<i64>,
    /// The polyp the tracklet shows, by code; null: none assigned. Absent: left alone.
    #[serde(default, deserialize_with = "present")]
    polyp: Option<Option<String>>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Category {
    id: i64,
    name: String,
}

/// Whether `text` (starting with `{`) is one COCO object rather than JSONL lines.
pub fn looks_like(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .is_some_and(|v| v.get("images").is_some_and(|i| i.is_array()))
}

/// The library's boxes, tracklet identities and frame labels as COCO JSON.
pub fn export(store: &Store) -> Result<String, LabelsError> {
    let frame_labels: HashMap<i64, String> = store
        .labels_with_key(TargetKind::Media, FRAME_KEY)?
        .into_iter()
        .collect();
    let mut images: Vec<Image> = Vec::new();
    let mut annotations = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for video in store.videos()? {
        let frames: BTreeMap<i64, crate::store::MediaRow> =
            store.video_frames(video.id)?.into_iter().collect();
        let identity: HashMap<i64, Option<String>> = store
            .video_tracklets(video.id)?
            .into_iter()
            .map(|t| (t.id, t.polyp_code))
            .collect();
        let boxes = store.video_boxes(video.id)?;
        let boxed: std::collections::HashSet<i64> = boxes.iter().map(|b| b.frame_index).collect();
        for (index, m) in &frames {
            let label = frame_labels.get(&m.id);
            if !boxed.contains(index) && label.is_none() {
                continue;
            }
            seen.insert(m.id);
            images.push(Image {
                id: m.id,
                file_name: m.rel_path.clone(),
                width: m.width,
                height: m.height,
                video: Some(video.code.clone()),
                frame_index: Some(*index),
                polyp_present: Some(label.cloned()),
            });
        }
        for b in &boxes {
            let Some(m) = frames.get(&b.frame_index) else {
                continue;
            };
            let polyp = b.tracklet_id.map(|t| identity.get(&t).cloned().flatten());
            annotations.push(Annotation {
                id: annotations.len() as i64 + 1,
                image_id: m.id,
                category_id: 1,
                bbox: [b.x, b.y, b.w, b.h],
                area: b.w * b.h,
                iscrowd: 0,
                track_id: b.tracklet_id,
                polyp,
            });
        }
    }
    // Frames outside videos that carry a frame label.
    for (id, value) in &frame_labels {
        if seen.contains(id) {
            continue;
        }
        if let Some(m) = store.media(*id)? {
            images.push(Image {
                id: m.id,
                file_name: m.rel_path,
                width: m.width,
                height: m.height,
                video: None,
                frame_index: None,
                polyp_present: Some(Some(value.clone())),
            });
        }
    }
    images.sort_by_key(|i| i.id);
    let coco = Coco {
        info: serde_json::json!({
            "description": "EndoTwin labels: boxes with tracklet identities, frame labels",
        }),
        images,
        annotations,
        categories: vec![Category {
            id: 1,
            name: "polyp".into(),
        }],
    };
    Ok(serde_json::to_string_pretty(&coco).expect("COCO serialises"))
}

/// What a COCO file would change: frame labels and tracklet identities; problems (unknown
/// images, tracklets or polyps, values that are not labels, boxes that differ) named.
pub fn diff(store: &Store, text: &str) -> Result<(Vec<Change>, Vec<String>), LabelsError> {
    let coco: Coco = serde_json::from_str(text).map_err(|e| LabelsError::Coco(e.to_string()))?;
    let mut changes = Vec::new();
    let mut problems = Vec::new();
    // Frame labels.
    for image in &coco.images {
        let Some(wanted) = &image.polyp_present else {
            continue;
        };
        let Some(media) = store.media(image.id)? else {
            problems.push(format!(
                "image {} ({}): not in this library; skipped",
                image.id, image.file_name
            ));
            continue;
        };
        if let Some(v) = wanted
            && !FRAME_VALUES.contains(&v.as_str())
        {
            problems.push(format!(
                "image {} ({}): polyp_present '{v}' is not \"polyp\" or \"no polyp\"; skipped",
                image.id, image.file_name
            ));
            continue;
        }
        let now = store.current_label(TargetKind::Media, media.id, FRAME_KEY)?;
        if &now != wanted {
            changes.push(Change {
                kind: ChangeKind::Frame,
                polyp_id: media.id,
                polyp: media.rel_path.clone(),
                key: FRAME_KEY.into(),
                old: now,
                new: wanted.clone(),
            });
        }
    }
    // Tracklet identities: one polyp per track.
    let mut tracks: BTreeMap<i64, Option<String>> = BTreeMap::new();
    for a in &coco.annotations {
        let (Some(track), Some(polyp)) = (a.track_id, &a.polyp) else {
            continue;
        };
        match tracks.get(&track) {
            Some(p) if p != polyp => problems.push(format!(
                "track {track}: its boxes name two polyps ({} and {}); the first is used",
                p.as_deref().unwrap_or("none"),
                polyp.as_deref().unwrap_or("none")
            )),
            Some(_) => {}
            None => {
                tracks.insert(track, polyp.clone());
            }
        }
    }
    // Each tracklet's polyp now, and the polyps its video's examination has (a tracklet can
    // only show one of those).
    let mut current: HashMap<i64, (Option<String>, String)> = HashMap::new();
    let mut allowed: HashMap<String, Vec<String>> = HashMap::new();
    let mut boxes_now = 0usize;
    for video in store.videos()? {
        for t in store.video_tracklets(video.id)? {
            current.insert(t.id, (t.polyp_code, video.code.clone()));
        }
        let polyps = store.video_polyps(video.id)?;
        allowed.insert(
            video.code.clone(),
            polyps.into_iter().map(|p| p.1).collect(),
        );
        boxes_now += store.video_boxes(video.id)?.len();
    }
    for (track, wanted) in tracks {
        let Some((now, video)) = current.get(&track) else {
            problems.push(format!(
                "track {track}: no such tracklet in this library; skipped"
            ));
            continue;
        };
        if let Some(code) = &wanted
            && !allowed.get(video).is_some_and(|a| a.contains(code))
        {
            problems.push(format!(
                "track {track}: '{code}' is not a polyp of video {video}'s examination; skipped"
            ));
            continue;
        }
        if now != &wanted {
            changes.push(Change {
                kind: ChangeKind::Tracklet,
                polyp_id: track,
                polyp: format!("tracklet {track}"),
                key: "polyp".into(),
                old: now.clone(),
                new: wanted,
            });
        }
    }
    if coco.annotations.len() != boxes_now {
        problems.push(format!(
            "the file has {} boxes, the library {}: boxes are not imported (draw and follow \
             them in the Tracklets tab, or `import coco --onto-video`)",
            coco.annotations.len(),
            boxes_now
        ));
    }
    Ok((changes, problems))
}
