//! What an importer read, ready to write: examinations with frames, polyps with views and
//! videos with boxes. One writer turns every layout's plan into rows, in one transaction.

use super::{ImportError, ImportReport, ItemProblem, PreparedImage, Problems, check_cancel};
use crate::plumbing::Progress;
use crate::store::{
    self, BoxRow, LabelPolicy, MediaKind, Merge, NewExamination, NewMedia, NewPolyp, Store,
    StoreError,
};
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Default)]
pub struct Plan {
    pub exams: Vec<PlanExam>,
    /// What the source says that is not an item refused (e.g. table rows naming frames the
    /// copy does not hold): said once each in the summary, not counted as skipped.
    pub notes: Vec<String>,
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
    /// Free-text notes of the examination (a capsule study's diagnostic data), written as
    /// one report unless the examination already has that report.
    pub notes: Vec<String>,
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
    /// Frames the library already holds (index -> width, height): boxes laid onto a video
    /// imported before are checked against them.
    pub existing_frames: HashMap<i64, (u32, u32)>,
    pub boxes: Vec<PlanBox>,
}

#[derive(Debug, Clone)]
pub struct PlanBox {
    pub frame_index: i64,
    /// x, y, width, height in pixels, as the source gave them; [`Plan::check`] refuses or
    /// clips them.
    pub xywh: [f64; 4],
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

/// A Vienna class as a source writes it: an integer category 1 to 5 ("4.1" is category 4).
pub fn check_vienna(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let whole = t.split('.').next().unwrap_or(t);
    match whole.parse::<i64>() {
        Ok(v) if (1..=5).contains(&v) => Ok(v),
        _ => Err(format!("Vienna class '{t}' is not one of 1 to 5")),
    }
}

/// The largest polyp size in millimetres a source may give.
pub const MAX_SIZE_MM: f64 = 300.0;

/// A polyp size in millimetres: a finite number above 0 and at most [`MAX_SIZE_MM`].
pub fn check_size_mm(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(mm) => check_mm(mm),
        Err(_) => Err(format!(
            "size '{}' is not a number of millimetres",
            text.trim()
        )),
    }
}

fn check_mm(mm: f64) -> Result<f64, String> {
    if mm.is_finite() && mm > 0.0 && mm <= MAX_SIZE_MM {
        Ok(mm)
    } else {
        Err(format!(
            "size {mm} mm is not between 0 and {MAX_SIZE_MM} mm"
        ))
    }
}

/// How far (pixels) a box may reach past the image edge and still be clipped to it rather
/// than refused: annotation tools often round outward by a pixel or two.
pub fn clip_tolerance(side: u32) -> f64 {
    (side as f64 * 0.02).max(2.0)
}

/// Checks a box `[x, y, w, h]` on a `width` x `height` image: finite, width and height above
/// zero, inside the image once clipped within [`clip_tolerance`]. Returns the clipped box.
pub fn check_box(xywh: [f64; 4], width: u32, height: u32) -> Result<[f64; 4], String> {
    let [x, y, w, h] = xywh;
    if !xywh.iter().all(|v| v.is_finite()) {
        return Err(format!(
            "box {xywh:?} has a coordinate that is not a finite number"
        ));
    }
    if w <= 0.0 || h <= 0.0 {
        return Err(format!(
            "box {xywh:?} has no area (width and height must be above 0)"
        ));
    }
    let (tx, ty) = (clip_tolerance(width), clip_tolerance(height));
    if x < -tx || y < -ty || x + w > width as f64 + tx || y + h > height as f64 + ty {
        return Err(format!(
            "box {xywh:?} reaches outside the {width}x{height} image by more than {tx:.0}x{ty:.0} px"
        ));
    }
    let (x0, y0) = (x.max(0.0), y.max(0.0));
    let (x1, y1) = ((x + w).min(width as f64), (y + h).min(height as f64));
    if x1 - x0 < 1.0 || y1 - y0 < 1.0 {
        return Err(format!(
            "box {xywh:?} is less than a pixel inside the image"
        ));
    }
    Ok([x0, y0, x1 - x0, y1 - y0])
}

impl Plan {
    /// Whether nothing is left to import.
    pub fn is_empty(&self) -> bool {
        self.exams.is_empty()
    }

    /// The last check before writing, the same for every layout: two items of one source
    /// that claim one polyp code or one video frame are both refused; boxes are checked
    /// against their frame ([`check_box`]); sizes and Vienna classes are range-checked;
    /// examinations left with nothing are dropped. Each refusal names the item.
    pub fn check(&mut self, problems: &mut Problems) {
        self.check_text(problems);
        for exam in &mut self.exams {
            let source = std::path::PathBuf::from(&exam.source);
            let mut count: HashMap<&str, usize> = HashMap::new();
            for p in &exam.polyps {
                *count.entry(p.code.as_str()).or_default() += 1;
            }
            let twice: Vec<String> = count
                .into_iter()
                .filter(|(_, n)| *n > 1)
                .map(|(c, _)| c.to_string())
                .collect();
            for code in &twice {
                let from: Vec<String> = exam
                    .polyps
                    .iter()
                    .filter(|p| &p.code == code)
                    .flat_map(|p| p.views.first())
                    .map(|v| v.image.source.display().to_string())
                    .collect();
                problems.push(
                    &source,
                    format!(
                        "{} items all claim polyp '{code}' ({}); none of them is imported",
                        from.len().max(2),
                        from.join(", ")
                    ),
                );
            }
            exam.polyps.retain(|p| !twice.contains(&p.code));
            for p in &mut exam.polyps {
                if let Some(Err(reason)) = p.size_mm.map(check_mm) {
                    problems.push(
                        &source,
                        format!("polyp '{}': {reason}; size not imported", p.code),
                    );
                    p.size_mm = None;
                }
                if let Some(v) = p.vienna_class.filter(|v| !(1..=5).contains(v)) {
                    problems.push(
                        &source,
                        format!(
                            "polyp '{}': Vienna class {v} is not one of 1 to 5; not imported",
                            p.code
                        ),
                    );
                    p.vienna_class = None;
                }
                // A histology and a Vienna class that contradict each other are the rule
                // `labels import` keeps (round 17 N20: an import stored carcinoma with Vienna 1
                // and the pair then passed every labels import of its export).
                if let (Some(h), Some(v)) = (&p.histology, p.vienna_class)
                    && let Some(misfit) = store::vienna_misfit(h, v)
                {
                    problems.push(
                        &source,
                        format!(
                            "polyp '{}': histology '{h}' and Vienna class {v} contradict each \
                             other ({misfit}); neither is imported",
                            p.code
                        ),
                    );
                    p.histology = None;
                    p.vienna_class = None;
                }
            }
            for video in &mut exam.videos {
                check_video(video, &exam.polyps, &source, problems);
            }
            exam.videos
                .retain(|v| !v.frames.is_empty() || !v.boxes.is_empty());
        }
        self.exams.retain(|e| {
            !e.frames.is_empty()
                || e.polyps.iter().any(|p| !p.views.is_empty())
                || !e.videos.is_empty()
        });
    }
}

impl Plan {
    /// What a source names and labels must be what a person could type: codes (examination,
    /// polyp, video) and every label value one line of printable text (no line breaks, tabs,
    /// bidirectional overrides: the characters reviewer names refuse), and a histology a term
    /// of EndoTwin's vocabulary (in its spelling), as `labels import` demands. An item named
    /// with such characters is refused; a value that fails is not imported; each is named.
    fn check_text(&mut self, problems: &mut Problems) {
        let unprintable = |text: &str| text.chars().find(|&c| !store::is_printable(c));
        // A code with a space at either end looks like the code without it, and a labels CSV
        // is read trimmed, so its rows went to the other one (round 9 N33).
        let code_fault = |text: &str| match unprintable(text) {
            Some(c) => Some(format!("holds the character U+{:04X}", c as u32)),
            None if text.trim() != text => Some(
                "begins or ends with a space (it would look like the code without it, and \
                 labels files name codes trimmed)"
                    .to_string(),
            ),
            None => None,
        };
        let shown = |text: &str| text.escape_default().to_string();
        self.exams.retain(|exam| match code_fault(&exam.code) {
            Some(c) => {
                problems.push(
                    std::path::Path::new(&exam.source),
                    format!(
                        "examination code '{}' {c}; a code is one line of printable text; the \
                         examination is not imported",
                        shown(&exam.code),
                    ),
                );
                false
            }
            None => true,
        });
        for exam in &mut self.exams {
            let source = std::path::PathBuf::from(&exam.source);
            exam.polyps.retain(|p| match code_fault(&p.code) {
                Some(c) => {
                    problems.push(
                        &source,
                        format!(
                            "polyp code '{}' {c}; the polyp is not imported",
                            shown(&p.code),
                        ),
                    );
                    false
                }
                None => true,
            });
            exam.videos.retain(|v| match code_fault(&v.code) {
                Some(c) => {
                    problems.push(
                        &source,
                        format!(
                            "video code '{}' {c}; the video is not imported",
                            shown(&v.code),
                        ),
                    );
                    false
                }
                None => true,
            });
            for p in &mut exam.polyps {
                let code = p.code.clone();
                // The vocabulary's refusal names the value itself ("'x' is not a histology
                // EndoTwin knows (...)"); the other rules say what is wrong with it.
                let mut refuse = |key: &str, value: &str, reason: String| {
                    let what = match reason.starts_with('\'') {
                        true => reason,
                        false => format!("{key} '{}' {reason}", shown(value)),
                    };
                    problems.push(
                        &source,
                        format!("polyp '{code}': {what}; imported without it"),
                    )
                };
                if let Some(h) = p.histology.take() {
                    match store::check_label_value("histology", &h) {
                        Some(reason) => refuse("histology", &h, reason),
                        None => p.histology = Some(store::canonical_label_value("histology", &h)),
                    }
                }
                // A Paris class is one of the vocabulary's, as the labelling panel and
                // `labels import` require (an importer's free text would be a new class).
                if let Some(v) = p.paris.take() {
                    match store::check_label_value("paris", &v) {
                        Some(reason) => refuse("paris", &v, reason),
                        None => p.paris = Some(v.trim().to_string()),
                    }
                }
                if let Some(c) = p.location.as_deref().and_then(unprintable) {
                    let v = p.location.take().unwrap_or_default();
                    refuse(
                        "location",
                        &v,
                        format!("holds the character U+{:04X}", c as u32),
                    );
                }
                p.attributes.retain(|(key, value)| {
                    match unprintable(key).or_else(|| unprintable(value)) {
                        Some(c) => {
                            refuse(
                                key,
                                value,
                                format!("holds the character U+{:04X}", c as u32),
                            );
                            false
                        }
                        None => true,
                    }
                });
            }
            let images = exam
                .frames
                .iter_mut()
                .chain(exam.polyps.iter_mut().flat_map(|p| p.views.iter_mut()))
                .chain(
                    exam.videos
                        .iter_mut()
                        .flat_map(|v| v.frames.iter_mut().map(|(_, f)| f)),
                );
            for image in images {
                let from = image.image.source.clone();
                image.labels.retain(|(key, value)| {
                    let reason = unprintable(key)
                        .map(|c| format!("is named with the character U+{:04X}", c as u32))
                        .or_else(|| store::check_label_value(key, value));
                    if let Some(reason) = &reason {
                        problems.push(
                            &from,
                            format!(
                                "label {} '{}' {reason}; not imported",
                                shown(key),
                                shown(value)
                            ),
                        );
                    }
                    reason.is_none()
                });
            }
        }
    }
}

fn check_video(
    video: &mut PlanVideo,
    polyps: &[PlanPolyp],
    source: &std::path::Path,
    problems: &mut Problems,
) {
    let mut by_index: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for (i, f) in &video.frames {
        by_index
            .entry(*i)
            .or_default()
            .push(f.image.source.display().to_string());
    }
    for i in by_index.keys().filter(|i| **i < 0) {
        problems.push(
            source,
            format!(
                "video {}: frame index {i} is negative; the frame is not imported",
                video.code
            ),
        );
    }
    let twice: Vec<i64> = by_index
        .iter()
        .filter(|(i, files)| files.len() > 1 || **i < 0)
        .map(|(i, files)| {
            if files.len() == 1 {
                return *i;
            }
            problems.push(
                source,
                format!(
                    "video {}: frame {i} is given {} times ({}); none of them is imported",
                    video.code,
                    files.len(),
                    files.join(", ")
                ),
            );
            *i
        })
        .collect();
    video.frames.retain(|(i, _)| !twice.contains(i));
    let mut sizes: HashMap<i64, (u32, u32)> = video.existing_frames.clone();
    sizes.extend(
        video
            .frames
            .iter()
            .map(|(i, f)| (*i, (f.image.width, f.image.height))),
    );
    let code = video.code.clone();
    video.boxes.retain_mut(|b| {
        let refuse = |reason: String| {
            format!(
                "video {code}, frame {}, polyp '{}': {reason}; box refused",
                b.frame_index, b.polyp
            )
        };
        let Some(&(w, h)) = sizes.get(&b.frame_index) else {
            if !twice.contains(&b.frame_index) {
                problems.push(source, refuse("the video has no such frame".into()));
            }
            return false;
        };
        if !polyps.iter().any(|p| p.code == b.polyp) {
            problems.push(source, refuse("its polyp is not imported".into()));
            return false;
        }
        match check_box(b.xywh, w, h) {
            Ok(clipped) => {
                b.xywh = clipped;
                true
            }
            Err(reason) => {
                problems.push(source, refuse(reason));
                false
            }
        }
    });
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

/// Writes a checked plan under the library's write lock: the media files (content-addressed;
/// removed again if the transaction does not commit), then every row in one transaction.
/// Labels that differ from the library's are kept or updated by `policy`.
pub fn write(
    store: &mut Store,
    plan: &Plan,
    who: &str,
    policy: LabelPolicy,
    skipped: Vec<ItemProblem>,
    progress: &Progress,
) -> Result<ImportReport, ImportError> {
    let all = each_image(plan);
    let before = store.row_total()?;
    let mut report = ImportReport {
        skipped,
        notes: plan.notes.clone(),
        ..Default::default()
    };
    let mut merge = Merge::new(policy, who);
    store.write_media_if_changed(|tx, files| -> Result<((), bool), ImportError> {
        progress.stage("storing media", all.len() as u64);
        let mut staged = Vec::with_capacity(all.len());
        for pi in &all {
            check_cancel(progress)?;
            staged.push(Staged {
                image: files.put(&pi.image.bytes, pi.image.extension)?,
                mask: match &pi.mask {
                    Some(m) => Some(files.put(&m.bytes, m.extension)?),
                    None => None,
                },
            });
            progress.inc();
        }
        let mut next = staged.iter();
        let mut insert = |pi: &PlanImage,
                          exam: i64,
                          report: &mut ImportReport,
                          merge: &mut Merge|
         -> Result<i64, StoreError> {
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
                // A picture imported before with another examination stays there (round 14
                // N6: a folder of known images became no examination, without a word).
                if let Some((other, code)) = store::media_examination(tx, id)?
                    && other != exam
                {
                    *report.duplicates_elsewhere.entry(code).or_default() += 1;
                }
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
                let (mid, new_mask) = store::insert_media(tx, mh, mr, &mask)?;
                report.masks_added += usize::from(new_mask);
                store::set_mask(tx, id, mid)?;
            }
            let name = format!("media {id} ({})", pi.image.source.display());
            if let Some(c) = &pi.caption {
                let r = crate::data::refine::Refiner::shipped().refine(c);
                let refined = Some((r.caption.as_str(), r.category.as_str()));
                store::merge_caption(tx, id, &name, c, refined, merge)?;
            }
            for (k, v) in &pi.labels {
                store::merge_media_label(tx, id, &name, k, v, merge)?;
            }
            Ok(id)
        };
        for e in &plan.exams {
            let existed = store::examination_exists(tx, &e.code)?;
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
            let added_before = report.media_added;
            report.examinations += 1;
            if !e.notes.is_empty() {
                let sentences: Vec<store::SentenceRow> = e
                    .notes
                    .iter()
                    .map(|text| store::SentenceRow {
                        text: text.clone(),
                        polyp_id: None,
                    })
                    .collect();
                store::insert_report_once(tx, exam, &sentences)?;
            }
            for f in &e.frames {
                insert(f, exam, &mut report, &mut merge)?;
            }
            let mut polyp_ids = HashMap::new();
            let mut new_polyps = Vec::new();
            for p in &e.polyps {
                let code = if p.code.starts_with(&e.code) {
                    p.code.clone()
                } else {
                    format!("{}-{}", e.code, p.code)
                };
                let (pid, created) = store::merge_polyp(
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
                    &mut merge,
                )?;
                report.polyps += 1;
                if created {
                    new_polyps.push(pid);
                }
                polyp_ids.insert(p.code.clone(), pid);
                for (i, v) in p.views.iter().enumerate() {
                    report.views += 1;
                    report.masked_views += usize::from(v.mask.is_some());
                    let mid = insert(v, exam, &mut report, &mut merge)?;
                    store::add_polyp_view(tx, pid, mid, i as i64)?;
                }
            }
            for v in &e.videos {
                let vid = store::upsert_video(tx, exam, &v.code, v.fps)?;
                report.videos += 1;
                report.video_frames += v.frames.len();
                for (idx, f) in &v.frames {
                    let mid = insert(f, exam, &mut report, &mut merge)?;
                    store::merge_video_frame(tx, (vid, &v.code), *idx, mid, &mut merge)?;
                }
                let incoming: Vec<(i64, [f64; 4])> =
                    v.boxes.iter().map(|b| (b.frame_index, b.xywh)).collect();
                if store::merge_video_boxes(tx, (vid, &v.code), &incoming, &mut merge)? {
                    report.boxes += write_boxes(tx, vid, v, &polyp_ids)?;
                }
            }
            // A polyp this import made whose every view and box was refused or kept out, and
            // an examination it made whose every item was in the library already: not kept.
            for pid in new_polyps {
                if store::drop_polyp_if_empty(tx, pid)? {
                    report.polyps -= 1;
                    report.empty_polyps_not_kept += 1;
                }
            }
            if !existed && store::drop_examination_if_empty(tx, exam)? {
                report.examinations -= 1;
            }
            if existed && report.media_added > added_before {
                report.existing_examinations.push(e.code.clone());
            }
        }
        check_cancel(progress)?;
        // Nothing new (every item was in the library already): rolled back, so not even the
        // pages an examination made and dropped again touch the library's file.
        Ok(((), store::row_total_of(tx)? != before))
    })?;
    report.label_changes = merge.changes;
    report.changed = store.row_total()? != before;
    Ok(report)
}

/// A video's boxes and the tracklets the METHODS §3 rule makes of them, per polyp identity.
fn write_boxes(
    tx: &store::Transaction<'_>,
    vid: i64,
    v: &PlanVideo,
    polyp_ids: &HashMap<String, i64>,
) -> Result<usize, StoreError> {
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
            (b.frame_index as usize, p, b.xywh.map(|x| x as f32))
        })
        .collect();
    let mut sorted: Vec<usize> = (0..raw.len()).collect();
    sorted.sort_by_key(|&i| (raw[i].0, raw[i].1));
    let for_tracklets: Vec<(usize, usize, [f32; 4])> = sorted.iter().map(|&i| raw[i]).collect();
    let tracklets = crate::data::tracklets::tracklets_from_boxes(&for_tracklets);
    let mut tracklet_of = vec![None; sorted.len()];
    for (pi, members) in &tracklets {
        let code = codes[*pi];
        let tid = store::insert_tracklet(tx, vid, polyp_ids.get(code).copied(), Some(code))?;
        for &m in members {
            tracklet_of[m] = Some(tid);
        }
    }
    for (k, &i) in sorted.iter().enumerate() {
        let b = &v.boxes[i];
        let [x, y, w, h] = b.xywh;
        store::insert_box(
            tx,
            vid,
            &BoxRow {
                frame_index: b.frame_index,
                x,
                y,
                w,
                h,
                polyp_id: polyp_ids.get(&b.polyp).copied(),
                tracklet_id: tracklet_of[k],
            },
        )?;
    }
    Ok(sorted.len())
}
