//! Writing a rendered phantom: images encoded deterministically, media files first (by
//! content hash), then every row in one transaction.

use super::geometry::{Colon, PlacedPolyp};
use super::report;
use super::{PhantomConfig, PhantomError, PhantomReport, check_cancel};
use crate::data::tracklets::tracklets_from_boxes;
use crate::plumbing::Progress;
use crate::store::{
    self, BoxRow, MediaKind, NewExamination, NewMedia, NewPolyp, SentenceRow, Store,
};
use image::{DynamicImage, GrayImage, ImageFormat, RgbImage};

/// An encoded image waiting to be written.
pub(super) struct Encoded {
    pub(super) bytes: Vec<u8>,
    pub(super) ext: &'static str,
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) thumb: Vec<u8>,
}

pub(super) fn encode_jpeg(img: &RgbImage) -> Encoded {
    let mut bytes = Vec::new();
    let enc = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut bytes, 88);
    img.write_with_encoder(enc)
        .expect("JPEG encoding into memory");
    let thumb = crate::data::images::thumbnail_jpeg(
        &DynamicImage::ImageRgb8(img.clone()),
        crate::data::images::THUMBNAIL_SIDE,
    );
    Encoded {
        bytes,
        ext: "jpg",
        width: img.width(),
        height: img.height(),
        thumb,
    }
}

pub(super) fn encode_mask(mask: &GrayImage) -> Encoded {
    let mut out = std::io::Cursor::new(Vec::new());
    mask.write_to(&mut out, ImageFormat::Png)
        .expect("PNG encoding into memory");
    Encoded {
        bytes: out.into_inner(),
        ext: "png",
        width: mask.width(),
        height: mask.height(),
        thumb: Vec::new(),
    }
}

pub(super) struct ExamPlan {
    pub(super) code: String,
    pub(super) patient: String,
    pub(super) colon: Colon,
    pub(super) polyps: Vec<PlacedPolyp>,
    pub(super) sentences: Vec<(String, Option<usize>)>,
    pub(super) views: Vec<Vec<(Encoded, Encoded)>>,
    pub(super) background: Vec<Encoded>,
}

pub(super) struct VideoPlan {
    pub(super) exam: usize,
    pub(super) code: String,
    pub(super) frames: Vec<Encoded>,
    /// (frame index, polyp index in the exam, box x, y, w, h).
    pub(super) boxes: Vec<(usize, usize, [f32; 4])>,
}

pub(super) struct CapsulePlan {
    pub(super) image: Encoded,
    pub(super) caption: String,
    /// The capsule patient (one examination each).
    pub(super) patient: usize,
    /// Ground truth: the entities the frame shows (canonical names), for tests only.
    #[allow(dead_code)]
    pub(super) entities: Vec<&'static str>,
}

fn new_media(e: &Encoded, kind: MediaKind, exam: Option<i64>, source: String) -> NewMedia {
    NewMedia {
        kind,
        source_path: source,
        byte_len: e.bytes.len() as u64,
        width: e.width,
        height: e.height,
        examination_id: exam,
        thumbnail: (!e.thumb.is_empty()).then(|| e.thumb.clone()),
        captured_at: None,
    }
}

pub(super) fn write_all(
    store: &mut Store,
    cfg: &PhantomConfig,
    prefix: &str,
    exams: &[ExamPlan],
    videos: &[VideoPlan],
    capsules: &[CapsulePlan],
    progress: &Progress,
) -> Result<PhantomReport, PhantomError> {
    // Files first (by content hash), then rows, all under the write lock: an abort removes
    // the files again.
    let mut staged: Vec<(String, String)> = Vec::new();
    let all: Vec<&Encoded> = exams
        .iter()
        .flat_map(|e| {
            e.views
                .iter()
                .flat_map(|s| s.iter().flat_map(|(v, m)| [v, m]))
                .chain(e.background.iter())
        })
        .chain(videos.iter().flat_map(|v| v.frames.iter()))
        .chain(capsules.iter().map(|c| &c.image))
        .collect();
    let source = format!("phantom seed {} split {:?}", cfg.seed, cfg.split);
    let mut report = PhantomReport::default();
    store.write_media(|tx, files| -> Result<(), PhantomError> {
        progress.stage("writing media", all.len() as u64);
        for e in &all {
            check_cancel(progress)?;
            staged.push(files.put(&e.bytes, e.ext)?);
            progress.inc();
        }
        let mut next = staged.iter();
        let mut exam_ids = Vec::new();
        let mut polyp_ids: Vec<Vec<i64>> = Vec::new();
        for e in exams {
            let exam_id = store::upsert_examination(
                tx,
                &NewExamination {
                    code: e.code.clone(),
                    patient_code: Some(format!("{prefix}-P{}", e.patient)),
                    kind: "colonoscopy".into(),
                    date: None,
                    source: source.clone(),
                },
            )?;
            exam_ids.push(exam_id);
            report.examinations += 1;
            let mut ids = Vec::new();
            for (i, p) in e.polyps.iter().enumerate() {
                let pid = store::upsert_polyp(
                    tx,
                    &NewPolyp {
                        examination_id: exam_id,
                        code: format!("{}-P{}", e.code, i + 1),
                        location: Some(p.spec.location.to_string()),
                        size_mm: Some(p.spec.size_mm.round() as f64),
                        paris: Some(p.spec.paris.code().to_string()),
                        histology: Some(p.spec.pathology.histology().to_string()),
                        vienna_class: Some(p.spec.pathology.vienna()),
                        attributes: report::attributes(&p.spec),
                    },
                )?;
                ids.push(pid);
                report.polyps += 1;
                for (v, (view, mask)) in e.views[i].iter().enumerate() {
                    let (vh, vp) = next.next().expect("staged view");
                    let (mh, mp) = next.next().expect("staged mask");
                    let src = format!("phantom:{}-P{}/view{}", e.code, i + 1, v + 1);
                    let (vid, _) = store::insert_media(
                        tx,
                        vh,
                        vp,
                        &new_media(view, MediaKind::View, Some(exam_id), src.clone()),
                    )?;
                    let (mid, _) = store::insert_media(
                        tx,
                        mh,
                        mp,
                        &new_media(mask, MediaKind::Mask, Some(exam_id), format!("{src}/mask")),
                    )?;
                    store::set_mask(tx, vid, mid)?;
                    store::add_polyp_view(tx, pid, vid, v as i64)?;
                    report.views += 1;
                    report.media += 2;
                }
            }
            for (b, bg) in e.background.iter().enumerate() {
                let (h, p) = next.next().expect("staged background");
                let src = format!("phantom:{}/frame{}", e.code, b + 1);
                store::insert_media(
                    tx,
                    h,
                    p,
                    &new_media(bg, MediaKind::Frame, Some(exam_id), src),
                )?;
                report.media += 1;
            }
            let sentences: Vec<SentenceRow> = e
                .sentences
                .iter()
                .map(|(text, polyp)| SentenceRow {
                    text: text.clone(),
                    polyp_id: polyp.map(|i| ids[i]),
                })
                .collect();
            store::insert_report(tx, exam_id, &sentences)?;
            polyp_ids.push(ids);
        }
        for v in videos {
            let exam_id = exam_ids[v.exam];
            let video_id = store::upsert_video(tx, exam_id, &v.code, 25.0)?;
            for (f, frame) in v.frames.iter().enumerate() {
                let (h, p) = next.next().expect("staged video frame");
                let src = format!("phantom:{}/frame{:04}", v.code, f);
                let (mid, _) = store::insert_media(
                    tx,
                    h,
                    p,
                    &new_media(frame, MediaKind::VideoFrame, Some(exam_id), src),
                )?;
                store::add_video_frame(tx, video_id, f as i64, mid)?;
                report.video_frames += 1;
                report.media += 1;
            }
            let tracklets = tracklets_from_boxes(&v.boxes);
            let mut tracklet_ids = Vec::new();
            for (polyp_index, _) in &tracklets {
                let pid = polyp_ids[v.exam][*polyp_index];
                let identity = format!("{}_{}", v.code, polyp_index + 1);
                tracklet_ids.push(store::insert_tracklet(
                    tx,
                    video_id,
                    Some(pid),
                    Some(&identity),
                )?);
            }
            for (bi, (f, pi, [x, y, w, h])) in v.boxes.iter().enumerate() {
                let t = tracklets
                    .iter()
                    .position(|(_, members)| members.contains(&bi));
                store::insert_box(
                    tx,
                    video_id,
                    &BoxRow {
                        frame_index: *f as i64,
                        x: *x as f64,
                        y: *y as f64,
                        w: *w as f64,
                        h: *h as f64,
                        polyp_id: Some(polyp_ids[v.exam][*pi]),
                        tracklet_id: t.map(|t| tracklet_ids[t]),
                    },
                )?;
                report.boxes += 1;
            }
            report.videos += 1;
        }
        let mut capsule_exams: Vec<i64> = Vec::new();
        for (c, cap) in capsules.iter().enumerate() {
            if cap.patient >= capsule_exams.len() {
                capsule_exams.push(store::upsert_examination(
                    tx,
                    &NewExamination {
                        code: format!("{prefix}-CAPSULE-{:03}", cap.patient + 1),
                        patient_code: Some(format!("{prefix}-C{}", cap.patient + 1)),
                        kind: "capsule".into(),
                        date: None,
                        source: source.clone(),
                    },
                )?);
                report.examinations += 1;
            }
            let (h, p) = next.next().expect("staged capsule");
            let src = format!("phantom:capsule/{c:04}");
            let exam = capsule_exams[cap.patient];
            let (mid, _) = store::insert_media(
                tx,
                h,
                p,
                &new_media(&cap.image, MediaKind::Capsule, Some(exam), src),
            )?;
            let r = crate::data::refine::Refiner::shipped().refine(&cap.caption);
            store::set_caption(tx, mid, &cap.caption, Some((&r.caption, &r.category)))?;
            report.capsule_images += 1;
            report.media += 1;
        }
        Ok(())
    })?;
    Ok(report)
}
