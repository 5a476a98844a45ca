//! What an importer read, ready to write: examinations with frames, polyps with views and
//! videos with boxes. One writer turns every layout's plan into rows, in one transaction.

use super::{ImportError, ImportReport, ItemProblem, PreparedImage, check_cancel};
use crate::plumbing::Progress;
use crate::store::{
    self, BoxRow, MediaKind, NewExamination, NewMedia, NewPolyp, Store, StoreError, TargetKind,
};

#[derive(Debug, Default)]
pub struct Plan {
    pub exams: Vec<PlanExam>,
}

#[derive(Debug, Default)]
pub struct PlanExam {
    pub code: String,
    pub patient: Option<String>,
    pub kind: String,
    pub source: String,
    pub frames: Vec<PlanImage>,
    pub polyps: Vec<PlanPolyp>,
    pub videos: Vec<PlanVideo>,
}

#[derive(Debug)]
pub struct PlanImage {
    pub image: PreparedImage,
    pub mask: Option<PreparedImage>,
    pub kind: MediaKind,
    pub caption: Option<String>,
    /// Labels on the media item (e.g. a HyperKvasir class), written with an audit row.
    pub labels: Vec<(String, String)>,
    pub captured_at: Option<String>,
}

impl PlanImage {
    pub fn new(image: PreparedImage, kind: MediaKind) -> PlanImage {
        PlanImage {
            image,
            mask: None,
            kind,
            caption: None,
            labels: Vec::new(),
            captured_at: None,
        }
    }
}

#[derive(Debug, Default)]
pub struct PlanPolyp {
    /// Unique within the examination; the library code is `<exam>-<code>` unless it already
    /// starts with the examination code.
    pub code: String,
    pub location: Option<String>,
    pub size_mm: Option<f64>,
    pub paris: Option<String>,
    pub histology: Option<String>,
    pub vienna_class: Option<i64>,
    pub attributes: Vec<(String, String)>,
    pub views: Vec<PlanImage>,
}

#[derive(Debug, Default)]
pub struct PlanVideo {
    pub code: String,
    pub fps: f64,
    pub frames: Vec<(i64, PlanImage)>,
    pub boxes: Vec<PlanBox>,
}

#[derive(Debug, Clone)]
pub struct PlanBox {
    pub frame_index: i64,
    pub xywh: [f32; 4],
    /// Code of the polyp (in this examination's `polyps`) this box shows.
    pub polyp: String,
}

impl PlanExam {
    pub fn new(code: impl Into<String>, kind: &str, source: &std::path::Path) -> PlanExam {
        PlanExam {
            code: code.into(),
            kind: kind.to_string(),
            source: source.display().to_string(),
            ..Default::default()
        }
    }

    /// The polyp with this code, created (without views) when new.
    pub fn polyp_mut(&mut self, code: &str) -> &mut PlanPolyp {
        if let Some(i) = self.polyps.iter().position(|p| p.code == code) {
            return &mut self.polyps[i];
        }
        self.polyps.push(PlanPolyp {
            code: code.to_string(),
            ..Default::default()
        });
        self.polyps.last_mut().expect("just pushed")
    }
}

/// Every image of the plan in the order the writer inserts them.
fn each_image(plan: &Plan) -> Vec<&PlanImage> {
    let mut out = Vec::new();
    for e in &plan.exams {
        out.extend(e.frames.iter());
        for p in &e.polyps {
            out.extend(p.views.iter());
        }
        for v in &e.videos {
            out.extend(v.frames.iter().map(|(_, f)| f));
        }
    }
    out
}

/// Hash and library path of a staged image and of its mask.
struct Staged {
    image: (String, String),
    mask: Option<(String, String)>,
}

/// Writes the plan: media files first (content-addressed, so a rollback leaves at most an
/// unreferenced file), then every row in one transaction.
pub fn write(
    store: &mut Store,
    plan: &Plan,
    who: &str,
    skipped: Vec<ItemProblem>,
    progress: &Progress,
) -> Result<ImportReport, ImportError> {
    let all = each_image(plan);
    progress.stage("storing media", all.len() as u64);
    let mut staged = Vec::with_capacity(all.len());
    for pi in &all {
        check_cancel(progress)?;
        staged.push(Staged {
            image: store.put_media_file(&pi.image.bytes, pi.image.extension)?,
            mask: match &pi.mask {
                Some(m) => Some(store.put_media_file(&m.bytes, m.extension)?),
                None => None,
            },
        });
        progress.inc();
    }
    let mut next = staged.iter();
    let mut report = ImportReport {
        skipped,
        ..Default::default()
    };
    store.write(|tx| -> Result<(), ImportError> {
        let mut insert =
            |pi: &PlanImage, exam: i64, report: &mut ImportReport| -> Result<i64, StoreError> {
                // Same order as `each_image`: the staged files line up with the plan's images.
                let staged = next.next().expect("one staged entry per plan image");
                let (hash, rel) = &staged.image;
                let media = NewMedia {
                    kind: pi.kind,
                    source_path: pi.image.source.display().to_string(),
                    byte_len: pi.image.bytes.len() as u64,
                    width: pi.image.width,
                    height: pi.image.height,
                    examination_id: Some(exam),
                    thumbnail: Some(pi.image.thumbnail.clone()),
                    captured_at: pi.captured_at.clone(),
                };
                let (id, new) = store::insert_media(tx, hash, rel, &media)?;
                if new {
                    report.media_added += 1;
                } else {
                    report.duplicates += 1;
                }
                if let (Some(m), Some((mh, mr))) = (&pi.mask, &staged.mask) {
                    let mask = NewMedia {
                        kind: MediaKind::Mask,
                        source_path: m.source.display().to_string(),
                        byte_len: m.bytes.len() as u64,
                        width: m.width,
                        height: m.height,
                        examination_id: Some(exam),
                        thumbnail: None,
                        captured_at: None,
                    };
                    let (mid, _) = store::insert_media(tx, mh, mr, &mask)?;
                    store::set_mask(tx, id, mid)?;
                }
                if let Some(c) = &pi.caption {
                    store::set_caption(tx, id, c)?;
                }
                for (k, v) in &pi.labels {
                    store::import_label(tx, TargetKind::Media, id, k, v, who)?;
                }
                Ok(id)
            };
        for e in &plan.exams {
            let exam = store::upsert_examination(
                tx,
                &NewExamination {
                    code: e.code.clone(),
                    patient_code: e.patient.clone(),
                    kind: e.kind.clone(),
                    date: None,
                    source: e.source.clone(),
                },
            )?;
            report.examinations += 1;
            for f in &e.frames {
                insert(f, exam, &mut report)?;
            }
            let mut polyp_ids = std::collections::HashMap::new();
            for p in &e.polyps {
                let code = if p.code.starts_with(&e.code) {
                    p.code.clone()
                } else {
                    format!("{}-{}", e.code, p.code)
                };
                let pid = store::upsert_polyp(
                    tx,
                    &NewPolyp {
                        examination_id: exam,
                        code,
                        location: p.location.clone(),
                        size_mm: p.size_mm,
                        paris: p.paris.clone(),
                        histology: p.histology.clone(),
                        vienna_class: p.vienna_class,
                        attributes: p.attributes.clone(),
                    },
                )?;
                report.polyps += 1;
                polyp_ids.insert(p.code.clone(), pid);
                for (i, v) in p.views.iter().enumerate() {
                    let mid = insert(v, exam, &mut report)?;
                    store::add_polyp_view(tx, pid, mid, i as i64)?;
                }
            }
            for v in &e.videos {
                let vid = store::upsert_video(tx, exam, &v.code, v.fps)?;
                report.videos += 1;
                for (idx, f) in &v.frames {
                    let mid = insert(f, exam, &mut report)?;
                    store::add_video_frame(tx, vid, *idx, mid)?;
                }
                // Tracklets by the METHODS §3 rule, per polyp identity.
                let codes: Vec<&String> = {
                    let mut c: Vec<&String> = v.boxes.iter().map(|b| &b.polyp).collect();
                    c.sort();
                    c.dedup();
                    c
                };
                let raw: Vec<(usize, usize, [f32; 4])> = v
                    .boxes
                    .iter()
                    .map(|b| {
                        let p = codes.iter().position(|c| **c == b.polyp).expect("listed");
                        (b.frame_index as usize, p, b.xywh)
                    })
                    .collect();
                let mut order: Vec<usize> = (0..raw.len()).collect();
                order.sort_by_key(|&i| (raw[i].0, raw[i].1));
                let sorted: Vec<(usize, usize, [f32; 4])> = order.iter().map(|&i| raw[i]).collect();
                let tracklets = crate::data::tracklets::tracklets_from_boxes(&sorted);
                let mut tracklet_of = vec![None; sorted.len()];
                for (pi, members) in &tracklets {
                    let code = codes[*pi];
                    let tid =
                        store::insert_tracklet(tx, vid, polyp_ids.get(code).copied(), Some(code))?;
                    for &m in members {
                        tracklet_of[m] = Some(tid);
                    }
                }
                for (k, (frame, pi, [x, y, w, h])) in sorted.iter().enumerate() {
                    store::insert_box(
                        tx,
                        vid,
                        &BoxRow {
                            frame_index: *frame as i64,
                            x: *x as f64,
                            y: *y as f64,
                            w: *w as f64,
                            h: *h as f64,
                            polyp_id: polyp_ids.get(codes[*pi]).copied(),
                            tracklet_id: tracklet_of[k],
                        },
                    )?;
                    report.boxes += 1;
                }
            }
        }
        check_cancel(progress)?;
        Ok(())
    })?;
    Ok(report)
}
