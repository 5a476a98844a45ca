//! Procedure videos as COCO JSON: `images[]` with `file_name`, `frame_id`, `sequence_id`;
//! `annotations[]` with `image_id`, `bbox` [x, y, w, h], `identity_id` and optional `size`,
//! `histology` (HP / SSL / TSA / AD / OTHER). Frames are found relative to the JSON file.
//! Each sequence becomes an examination with one video; each identity a polyp.

use super::paths::read_manifest;
use super::plan::{Plan, PlanBox, PlanExam, PlanImage, PlanVideo};
use super::{ImportError, Problems, SourceRoot, check_cancel, try_prepare};
use crate::plumbing::Progress;
use crate::store::MediaKind;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Deserialize)]
struct Coco {
    images: Vec<CocoImage>,
    #[serde(default)]
    annotations: Vec<CocoAnnotation>,
}

#[derive(Deserialize)]
struct CocoImage {
    id: serde_json::Value,
    /// Absent in a sidecar laid onto a video already in the library.
    #[serde(default)]
    file_name: String,
    frame_id: i64,
    /// Absent in a sidecar laid onto a video already in the library.
    #[serde(default)]
    sequence_id: serde_json::Value,
}

#[derive(Deserialize)]
struct CocoAnnotation {
    /// Its own id, when the file gives one: what a message names it by.
    #[serde(default)]
    id: Option<serde_json::Value>,
    image_id: serde_json::Value,
    bbox: [f64; 4],
    identity_id: serde_json::Value,
    #[serde(default)]
    size: Option<serde_json::Value>,
    #[serde(default)]
    histology: Option<String>,
}

/// (annotation number, histology, size) one annotation gives for its identity.
type GivenPathology = (usize, Option<String>, Option<f64>);

fn key(v: &serde_json::Value) -> String {
    v.as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string())
}

/// Histology codes of the tracklet datasets, in our vocabulary.
pub fn histology_name(code: &str) -> Option<String> {
    Some(
        match code.trim().to_ascii_uppercase().as_str() {
            "HP" => "hyperplastic",
            "SSL" | "SSA" => "sessile serrated",
            "TSA" => "traditional serrated adenoma",
            "AD" => "adenoma",
            "NO POLYP" | "" => return None,
            "OTHER" => "other",
            _ => return Some(code.trim().to_string()),
        }
        .to_string(),
    )
}

fn parse(path: &Path) -> Result<Coco, ImportError> {
    let text = read_manifest(path).map_err(|e| ImportError::source_error(path, e))?;
    serde_json::from_str(&text).map_err(|e| {
        // EndoTwin's own labels export names frames by `video` and `frame_index`: it goes
        // back through `labels import` (round 8 N38: it was called malformed).
        let labels_export = serde_json::from_str::<serde_json::Value>(&text).is_ok_and(|v| {
            v["info"]["description"]
                .as_str()
                .is_some_and(|d| d.starts_with("EndoTwin labels"))
                || v["images"]
                    .as_array()
                    .is_some_and(|images| images.iter().any(|i| i.get("frame_index").is_some()))
        });
        let reason = match labels_export {
            true => "an EndoTwin labels export (frames named by video and frame_index), not a \
                     dataset to import: read it back with `endotwin labels import FILE`"
                .to_string(),
            false => format!("malformed COCO JSON: {e}"),
        };
        ImportError::source_error(path, reason)
    })
}

/// The video a sidecar's boxes go onto: its examination (code, kind, source) and its
/// video (code, fps, frame index -> width and height).
pub struct OntoVideo {
    pub exam_code: String,
    pub exam_kind: String,
    pub exam_source: String,
    pub video_code: String,
    pub fps: f64,
    pub frames: std::collections::HashMap<i64, (u32, u32)>,
}

/// A COCO sidecar laid onto a video already in the library: `images[]` give `frame_id`s of
/// that video (file names and sequence ids are not needed), `annotations[]` its boxes, one
/// polyp per identity; tracklets follow from the boxes as in [`read`].
pub fn read_onto(
    path: &Path,
    onto: OntoVideo,
    problems: &mut Problems,
) -> Result<Plan, ImportError> {
    let coco = parse(path)?;
    let mut frame_of: BTreeMap<String, (String, i64)> = BTreeMap::new();
    for img in &coco.images {
        if frame_of
            .insert(key(&img.id), (String::new(), img.frame_id))
            .is_some()
        {
            problems.push(
                path,
                format!(
                    "image id {} is given twice; its boxes are not imported",
                    key(&img.id)
                ),
            );
        }
    }
    let mut exam = PlanExam {
        code: onto.exam_code,
        kind: onto.exam_kind,
        source: onto.exam_source,
        ..Default::default()
    };
    exam.videos.push(PlanVideo {
        code: onto.video_code,
        fps: onto.fps,
        existing_frames: onto.frames,
        ..Default::default()
    });
    let mut exams = BTreeMap::from([(String::new(), exam)]);
    add_annotations(&coco, path, &frame_of, &mut exams, problems);
    Ok(Plan {
        exams: exams.into_values().collect(),
        ..Default::default()
    })
}

pub fn read(
    path: &Path,
    links: super::Links,
    progress: &Progress,
    problems: &mut Problems,
) -> Result<Plan, ImportError> {
    let coco = parse(path)?;
    let source = SourceRoot::with_links(path, links)?;
    let root = source.path().to_path_buf();
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    // image id -> (sequence, frame index)
    let mut frame_of: BTreeMap<String, (String, i64)> = BTreeMap::new();
    let mut exams: BTreeMap<String, PlanExam> = BTreeMap::new();
    progress.stage("reading frames", coco.images.len() as u64);
    for img in &coco.images {
        check_cancel(progress)?;
        progress.inc();
        if img.sequence_id.is_null() || img.file_name.is_empty() {
            problems.push(
                path,
                format!(
                    "image id {} has no sequence_id or file_name; it is not imported (a sidecar \
                     for a video already in the library takes --onto-video)",
                    key(&img.id)
                ),
            );
            continue;
        }
        let seq = key(&img.sequence_id);
        if frame_of.contains_key(&key(&img.id)) {
            problems.push(
                path,
                format!(
                    "image id {} is given twice; the second ('{}') is not imported",
                    key(&img.id),
                    img.file_name
                ),
            );
            continue;
        }
        let full = match source.resolve(&root, &img.file_name) {
            Ok(p) => p,
            Err(reason) => {
                problems.push(path, reason);
                continue;
            }
        };
        let Some(prepared) = try_prepare(&full, problems) else {
            continue;
        };
        frame_of.insert(key(&img.id), (seq.clone(), img.frame_id));
        let exam = exams.entry(seq.clone()).or_insert_with(|| PlanExam {
            code: format!("{stem}/{seq}"),
            kind: "colonoscopy".into(),
            source: path.display().to_string(),
            videos: vec![PlanVideo {
                code: format!("{stem}/{seq}"),
                fps: 25.0,
                ..Default::default()
            }],
            ..Default::default()
        });
        exam.videos[0].frames.push((
            img.frame_id,
            PlanImage::new(prepared, MediaKind::VideoFrame),
        ));
    }
    add_annotations(&coco, path, &frame_of, &mut exams, problems);
    for e in exams.values_mut() {
        e.videos[0].frames.sort_by_key(|(i, _)| *i);
    }
    Ok(Plan {
        exams: exams.into_values().collect(),
        ..Default::default()
    })
}

/// The annotations' boxes and polyps, onto the videos of `exams` (keyed by sequence) through
/// `frame_of` (image id -> sequence, frame index).
fn add_annotations(
    coco: &Coco,
    path: &Path,
    frame_of: &BTreeMap<String, (String, i64)>,
    exams: &mut BTreeMap<String, PlanExam>,
    problems: &mut Problems,
) {
    // Pathology per (sequence, identity) as the annotations give it; disagreeing
    // annotations make that polyp's pathology unusable (named, not imported).
    let mut pathology: BTreeMap<(String, String), Vec<GivenPathology>> = BTreeMap::new();
    // One box given twice (same frame, place and identity) would be two boxes and two
    // tracklets of one polyp (round 12 N6).
    let mut seen: BTreeMap<(String, i64, String, [u64; 4]), usize> = BTreeMap::new();
    for (n, a) in coco.annotations.iter().enumerate() {
        let Some((seq, frame)) = frame_of.get(&key(&a.image_id)) else {
            problems.push(
                path,
                format!(
                    "{} is for image {} whose frame was not imported",
                    annotation_name(n, a),
                    key(&a.image_id)
                ),
            );
            continue;
        };
        let identity = key(&a.identity_id);
        let place = (
            seq.clone(),
            *frame,
            identity.clone(),
            a.bbox.map(f64::to_bits),
        );
        if let Some(&first) = seen.get(&place) {
            problems.push(
                path,
                format!(
                    "{} repeats {} (the same frame, box and identity); it is imported once",
                    annotation_name(n, a),
                    annotation_name(first, &coco.annotations[first])
                ),
            );
            continue;
        }
        seen.insert(place, n);
        let exam = exams.get_mut(seq).expect("exam of an imported frame");
        let polyp = exam.polyp_mut(&identity);
        let histology = a.histology.as_deref().and_then(histology_name);
        let mut size = None;
        if let Some(s) = &a.size {
            match s
                .as_f64()
                .or_else(|| s.as_str().and_then(|t| t.trim().parse().ok()))
            {
                Some(mm) => size = Some(mm),
                None => {
                    if !polyp.attributes.iter().any(|(k, _)| k == "size") {
                        polyp.attributes.push(("size".into(), key(s)));
                    }
                }
            }
        }
        if histology.is_some() || size.is_some() {
            pathology
                .entry((seq.clone(), identity.clone()))
                .or_default()
                .push((n, histology, size));
        }
        exam.videos[0].boxes.push(PlanBox {
            frame_index: *frame,
            xywh: a.bbox,
            polyp: identity,
        });
    }
    for ((seq, identity), given) in pathology {
        let polyp = exams
            .get_mut(&seq)
            .expect("exam of an imported frame")
            .polyp_mut(&identity);
        let histologies: std::collections::BTreeSet<&String> =
            given.iter().filter_map(|g| g.1.as_ref()).collect();
        let sizes: Vec<f64> = given.iter().filter_map(|g| g.2).collect();
        let sizes_agree = sizes.windows(2).all(|w| w[0] == w[1]);
        if histologies.len() > 1 || !sizes_agree {
            let name = |n: usize| annotation_name(n, &coco.annotations[n]);
            let first = given.first().map_or(String::new(), |g| name(g.0));
            let other = given
                .iter()
                .find(|g| g.1.as_ref() != given[0].1.as_ref() || g.2 != given[0].2)
                .map_or(String::new(), |g| name(g.0));
            problems.push(
                path,
                format!(
                    "sequence {seq}, identity {identity}: {first} and {other} give \
                     different histology or size; its pathology is not imported (its boxes are)"
                ),
            );
            continue;
        }
        polyp.histology = histologies.into_iter().next().cloned();
        polyp.size_mm = sizes.first().copied();
    }
}

/// How a message names annotation `n` (0-based in the file's list): by its `id` when it has
/// one, else by its place counted from 1 (round 8 N30: the 0-based place read as another
/// annotation's id).
fn annotation_name(n: usize, a: &CocoAnnotation) -> String {
    match &a.id {
        Some(id) => format!("annotation id {}", key(id)),
        None => format!("annotation #{} (of the file's list)", n + 1),
    }
}
