//! Boxes, tracklet identities and frame labels as COCO JSON, the format CVAT, FiftyOne and
//! most detection tools read. One image per video frame that has a box or a frame label, and
//! per still image (a polyp view, a frame) with a frame label or a drawn polyp box; one
//! annotation per box, category `polyp`: on video frames with `box` (its id in the library),
//! `track_id` (its tracklet) and `polyp` (the polyp the tracklet shows, by code, or null); on
//! still images the polyp box a reviewer drew (the twin encoders crop around it), without a
//! track. Frame labels ride on the image as `polyp_present` ("polyp", "no polyp" or null),
//! captions as `caption` (the raw finding).
//!
//! Importing it back changes what a reviewer changes: frame labels, which polyp each tracklet
//! shows, where each video box is (matched by `box` on its frame), the drawn box of each
//! still image in the file (its one annotation, or none: the box is cleared) and captions,
//! one audited change each, only with `--apply`. Video boxes the file adds or leaves out are
//! not imported (they are drawn and followed in the Tracklets tab); the file says so.

use super::{Change, ChangeKind, LabelsError};
use crate::store::{MediaKind, Store, TargetKind, VIEW_BOX_KEY, format_view_box, parse_view_box};
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
        deserialize_with = "present_label",
        skip_serializing_if = "Option::is_none"
    )]
    polyp_present: Option<Option<String>>,
    /// The image's caption (a capsule frame's raw finding); null: none; absent: left alone.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    caption: Option<Option<String>>,
}

/// `Some(None)` for an explicit null, `None` when the key is absent.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// [`present`] for `polyp_present`, whose name invites true and false (round 12 N10: `true`
/// refused the whole file in a parser's words): read as "polyp" and "no polyp"; any other
/// value is kept as text and skipped by name.
fn present_label<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<String>>, D::Error> {
    Ok(Some(match serde_json::Value::deserialize(d)? {
        serde_json::Value::Null => None,
        serde_json::Value::Bool(true) => Some("polyp".into()),
        serde_json::Value::Bool(false) => Some("no polyp".into()),
        serde_json::Value::String(s) => Some(s),
        other => Some(other.to_string()),
    }))
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
    /// The library's id of a video box (absent on boxes drawn on still images).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    r#box: Option<i64>,
    /// The polyp the tracklet shows, by code; null: none assigned. Absent (boxes without a
    /// tracklet, boxes on still images): left alone.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
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
        let boxes = store.video_boxes_with_ids(video.id)?;
        let boxed: std::collections::HashSet<i64> =
            boxes.iter().map(|(_, b)| b.frame_index).collect();
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
                caption: None,
            });
        }
        for (box_id, b) in &boxes {
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
                r#box: Some(*box_id),
                polyp,
            });
        }
    }
    // Still images (not video frames) with a frame label, a drawn polyp box or a caption.
    let drawn = store.view_boxes()?;
    let captions = store.all_captions()?;
    let stills: std::collections::BTreeSet<i64> = frame_labels
        .keys()
        .chain(drawn.keys())
        .chain(captions.keys())
        .filter(|id| !seen.contains(id))
        .copied()
        .collect();
    for id in stills {
        let Some(m) = store.media(id)? else {
            continue;
        };
        images.push(Image {
            id: m.id,
            file_name: m.rel_path,
            width: m.width,
            height: m.height,
            video: None,
            frame_index: None,
            polyp_present: frame_labels.get(&id).map(|v| Some(v.clone())),
            caption: captions.get(&id).map(|c| Some(c.clone())),
        });
        if let Some(b) = drawn.get(&id) {
            let bbox = b.map(f64::from);
            annotations.push(Annotation {
                id: annotations.len() as i64 + 1,
                image_id: id,
                category_id: 1,
                bbox,
                area: bbox[2] * bbox[3],
                iscrowd: 0,
                track_id: None,
                r#box: None,
                polyp: None,
            });
        }
    }
    images.sort_by_key(|i| i.id);
    let coco = Coco {
        info: serde_json::json!({
            "description": "EndoTwin labels: video boxes with tracklet identities, polyp boxes drawn on still images, frame labels, captions",
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
    // A track whose boxes name different polyps is unclear: said once, with how many boxes
    // name each, and left as it is (round 14 N16: one edited box gave a line per other box,
    // each saying "the first is used").
    let mut named: BTreeMap<i64, BTreeMap<Option<String>, usize>> = BTreeMap::new();
    for a in &coco.annotations {
        let (Some(track), Some(polyp)) = (a.track_id, &a.polyp) else {
            continue;
        };
        *named
            .entry(track)
            .or_default()
            .entry(polyp.clone())
            .or_default() += 1;
    }
    let mut tracks: BTreeMap<i64, Option<String>> = BTreeMap::new();
    for (track, polyps) in named {
        if polyps.len() == 1 {
            tracks.extend(polyps.into_keys().map(|p| (track, p)));
            continue;
        }
        let each: Vec<String> = polyps
            .iter()
            .map(|(p, n)| format!("{} on {n}", p.as_deref().unwrap_or("none")))
            .collect();
        problems.push(format!(
            "track {track}: its boxes name different polyps ({}); its polyp is not changed",
            each.join(", ")
        ));
    }
    // Each tracklet's polyp now, and the polyps its video's examination has (a tracklet can
    // only show one of those).
    let mut current: HashMap<i64, (Option<String>, String)> = HashMap::new();
    let mut allowed: HashMap<String, Vec<String>> = HashMap::new();
    // Every video box of the library: (video code, frame's media id, place).
    let mut library_boxes: HashMap<i64, (String, i64, [f64; 4])> = HashMap::new();
    for video in store.videos()? {
        let frames: HashMap<i64, i64> = store
            .video_frames(video.id)?
            .into_iter()
            .map(|(index, m)| (index, m.id))
            .collect();
        for (id, b) in store.video_boxes_with_ids(video.id)? {
            if let Some(&media) = frames.get(&b.frame_index) {
                library_boxes.insert(id, (video.code.clone(), media, [b.x, b.y, b.w, b.h]));
            }
        }
        for t in store.video_tracklets(video.id)? {
            current.insert(t.id, (t.polyp_code, video.code.clone()));
        }
        let polyps = store.video_polyps(video.id)?;
        allowed.insert(
            video.code.clone(),
            polyps.into_iter().map(|p| p.1).collect(),
        );
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
    let stills = still_boxes(store, &coco, &mut changes, &mut problems)?;
    captions(store, &coco, &mut changes, &mut problems)?;
    video_boxes(
        store,
        &coco,
        &stills,
        &library_boxes,
        &mut changes,
        &mut problems,
    )?;
    Ok((changes, problems))
}

/// The drawn polyp box of each still image of the file (no video, no frame index, and not a
/// video frame in the library): its one annotation, or none. Changes and problems are added;
/// returns the still images' ids.
fn still_boxes(
    store: &Store,
    coco: &Coco,
    changes: &mut Vec<Change>,
    problems: &mut Vec<String>,
) -> Result<std::collections::HashSet<i64>, LabelsError> {
    let mut boxes: HashMap<i64, Vec<[f64; 4]>> = HashMap::new();
    for a in &coco.annotations {
        boxes.entry(a.image_id).or_default().push(a.bbox);
    }
    let mut stills = std::collections::HashSet::new();
    for image in &coco.images {
        if image.video.is_some() || image.frame_index.is_some() {
            continue;
        }
        let name = format!("image {} ({})", image.id, image.file_name);
        let Some(media) = store.media(image.id)? else {
            stills.insert(image.id);
            if image.polyp_present.is_none() {
                // (an image with a frame label was named above)
                problems.push(format!("{name}: not in this library; skipped"));
            }
            continue;
        };
        // A video frame stays one, whatever the file says: its boxes are video boxes.
        if media.kind == MediaKind::VideoFrame {
            continue;
        }
        stills.insert(image.id);
        let found = boxes.get(&image.id).map_or(&[][..], Vec::as_slice);
        if media.kind == MediaKind::Mask {
            if !found.is_empty() {
                problems.push(format!(
                    "{name}: a {} takes no drawn polyp box; skipped",
                    media.kind.as_str()
                ));
            }
            continue;
        }
        let wanted = match found {
            [] => None,
            [b] => {
                let fits = b[0] + b[2] <= media.width as f64 + 0.5
                    && b[1] + b[3] <= media.height as f64 + 0.5;
                let text = format_view_box(b.map(|v| v as f32));
                match parse_view_box(&text) {
                    Some(_) if fits => Some(text),
                    _ => {
                        problems.push(format!(
                            "{name}: bbox {b:?} is not a box inside its {}x{} image; skipped",
                            media.width, media.height
                        ));
                        continue;
                    }
                }
            }
            _ => {
                problems.push(format!(
                    "{name}: {} boxes; a still image has one drawn polyp box; skipped",
                    found.len()
                ));
                continue;
            }
        };
        let now = store.current_label(TargetKind::Media, media.id, VIEW_BOX_KEY)?;
        if now != wanted {
            changes.push(Change {
                kind: ChangeKind::Frame,
                polyp_id: media.id,
                polyp: media.rel_path.clone(),
                key: VIEW_BOX_KEY.into(),
                old: now,
                new: wanted,
            });
        }
    }
    Ok(stills)
}

/// The caption of each image of the file that has the key: a raw finding (refined when
/// applied), or null to remove it.
fn captions(
    store: &Store,
    coco: &Coco,
    changes: &mut Vec<Change>,
    problems: &mut Vec<String>,
) -> Result<(), LabelsError> {
    for image in &coco.images {
        let Some(wanted) = &image.caption else {
            continue;
        };
        let name = format!("image {} ({})", image.id, image.file_name);
        let Some(media) = store.media(image.id)? else {
            if image.polyp_present.is_none() {
                problems.push(format!("{name}: not in this library; skipped"));
            }
            continue;
        };
        let wanted = wanted.as_deref().map(str::trim);
        if wanted == Some("") {
            problems.push(format!(
                "{name}: an empty caption (null removes one); skipped"
            ));
            continue;
        }
        if wanted.is_some_and(|w| w.chars().count() > 2000 || w.chars().any(char::is_control)) {
            problems.push(format!(
                "{name}: a caption over 2000 characters or with control characters; skipped"
            ));
            continue;
        }
        let now = store.caption(media.id)?;
        if now.as_deref() != wanted {
            changes.push(Change {
                kind: ChangeKind::Caption,
                polyp_id: media.id,
                polyp: media.rel_path.clone(),
                key: "caption".into(),
                old: now,
                new: wanted.map(str::to_string),
            });
        }
    }
    Ok(())
}

/// Video boxes moved or resized in the file (matched by their `box` id on the same frame); a
/// box the file adds or leaves out is named, not imported (boxes are drawn and followed in
/// the Tracklets tab, or laid on with `import coco --onto-video`).
fn video_boxes(
    store: &Store,
    coco: &Coco,
    stills: &std::collections::HashSet<i64>,
    library: &HashMap<i64, (String, i64, [f64; 4])>,
    changes: &mut Vec<Change>,
    problems: &mut Vec<String>,
) -> Result<(), LabelsError> {
    let mut seen = std::collections::HashSet::new();
    let mut new = 0usize;
    for a in coco
        .annotations
        .iter()
        .filter(|a| !stills.contains(&a.image_id))
    {
        let Some((id, (video, media, now))) =
            a.r#box.and_then(|id| library.get(&id).map(|b| (id, b)))
        else {
            new += 1;
            continue;
        };
        if !seen.insert(id) {
            problems.push(format!("box {id}: in the file twice; the first is used"));
            continue;
        }
        if a.image_id != *media {
            problems.push(format!(
                "box {id}: on image {}, but it is on image {media} of video {video}; skipped",
                a.image_id
            ));
            continue;
        }
        let b = a.bbox;
        let frame = store.media(*media)?;
        let (w, h) = frame.map_or((f64::MAX, f64::MAX), |m| (m.width as f64, m.height as f64));
        let inside = b.iter().all(|v| v.is_finite())
            && b[0] >= 0.0
            && b[1] >= 0.0
            && b[2] > 0.0
            && b[3] > 0.0
            && b[0] + b[2] <= w + 0.5
            && b[1] + b[3] <= h + 0.5;
        if !inside {
            problems.push(format!(
                "box {id} of video {video}: bbox {b:?} is not a box inside its frame; skipped"
            ));
            continue;
        }
        if b.iter().zip(now).any(|(x, y)| (x - y).abs() > 1e-3) {
            let text = |b: &[f64; 4]| format!("{},{},{},{}", b[0], b[1], b[2], b[3]);
            changes.push(Change {
                kind: ChangeKind::VideoBox,
                polyp_id: id,
                polyp: format!("box {id} of video {video}"),
                key: "bbox".into(),
                old: Some(text(now)),
                new: Some(text(&b)),
            });
        }
    }
    let missing = library.len() - seen.len();
    if new > 0 || missing > 0 {
        problems.push(format!(
            "the file has {new} video boxes the library does not, and leaves out {missing} of \
             the library's: such boxes are not imported (draw and follow them in the Tracklets \
             tab, or `import coco --onto-video`)"
        ));
    }
    Ok(())
}
