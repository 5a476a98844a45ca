//! The synthetic colonoscopy phantom: examinations with polyps, multi-view sets, procedure
//! videos with boxes and identities, reports, masks and capsule captions, all from one seed.
//!
//! The same seed gives byte-identical media and identical rows: every random draw comes from
//! [`rng::Rng`] streams forked per purpose, and images are encoded deterministically.

pub mod anatomy;
pub mod osd;
pub mod render;
pub mod report;
pub mod rng;

use crate::engine::Progress;
use crate::store::{
    self, BoxRow, MediaKind, NewExamination, NewMedia, NewPolyp, SentenceRow, Store, StoreError,
};
use anatomy::{Pathology, PolypSpec};
use image::{DynamicImage, GrayImage, ImageFormat, RgbImage};
use render::{Camera, Colon, Look, PlacedPolyp, Scene, v3};
use report::CapsuleFinding;
use rng::Rng;

/// Which part of the phantom: `Test` draws from a disjoint stream and codes, for held-out
/// evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Split {
    Train,
    Test,
}

#[derive(Debug, Clone)]
pub struct PhantomConfig {
    pub seed: u64,
    pub split: Split,
    pub polyps: usize,
    pub views_per_polyp: usize,
    pub videos: usize,
    pub frames_per_video: usize,
    pub background_frames: usize,
    pub capsule_images: usize,
    /// Side of still frames and views, pixels.
    pub image_size: u32,
    /// Side of video frames, pixels.
    pub video_size: u32,
}

impl Default for PhantomConfig {
    fn default() -> Self {
        PhantomConfig {
            seed: 7,
            split: Split::Train,
            polyps: 60,
            views_per_polyp: 4,
            videos: 2,
            frames_per_video: 160,
            background_frames: 2,
            capsule_images: 40,
            image_size: 256,
            video_size: 160,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PhantomError {
    #[error("phantom needs at least 4 views per polyp (got {0})")]
    TooFewViews(usize),
    #[error("generation cancelled, nothing was written")]
    Cancelled,
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PhantomReport {
    pub examinations: usize,
    pub polyps: usize,
    pub views: usize,
    pub videos: usize,
    pub video_frames: usize,
    pub boxes: usize,
    pub capsule_images: usize,
    pub media: usize,
}

/// An encoded image waiting to be written.
struct Encoded {
    bytes: Vec<u8>,
    ext: &'static str,
    width: u32,
    height: u32,
    thumb: Vec<u8>,
}

fn encode_jpeg(img: &RgbImage) -> Encoded {
    let mut bytes = Vec::new();
    let enc = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut bytes, 88);
    img.write_with_encoder(enc)
        .expect("JPEG encoding into memory");
    let thumb = crate::data::images::thumbnail_jpeg(
        &DynamicImage::ImageRgb8(img.clone()),
        crate::data::import::THUMBNAIL_SIDE,
    );
    Encoded {
        bytes,
        ext: "jpg",
        width: img.width(),
        height: img.height(),
        thumb,
    }
}

fn encode_mask(mask: &GrayImage) -> Encoded {
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

struct ExamPlan {
    code: String,
    patient: String,
    colon: Colon,
    polyps: Vec<PlacedPolyp>,
    sentences: Vec<(String, Option<usize>)>,
    views: Vec<Vec<(Encoded, Encoded)>>,
    background: Vec<Encoded>,
}

struct VideoPlan {
    exam: usize,
    code: String,
    frames: Vec<Encoded>,
    /// (frame index, polyp index in the exam, box x, y, w, h).
    boxes: Vec<(usize, usize, [f32; 4])>,
}

struct CapsulePlan {
    image: Encoded,
    caption: String,
}

pub fn draw_colon(rng: &mut Rng) -> Colon {
    Colon {
        seed: rng.next_u64() as u32,
        bend: [
            rng.range(0.2, 0.5),
            rng.range(0.15, 0.35),
            rng.range(0.15, 0.45),
            rng.range(0.1, 0.3),
        ],
        fold_period: rng.range(1.1, 1.7),
        fold_depth: rng.range(0.15, 0.32),
        fold_width: rng.range(0.08, 0.14),
        mucosa: [
            rng.range(0.66, 0.80),
            rng.range(0.17, 0.27),
            rng.range(0.10, 0.18),
        ],
        vessel_density: rng.range(0.5, 1.4),
        spots: None,
    }
}

/// A camera looking at a polyp from a random distance and angle, with random roll and an
/// off-centre aim, kept inside the lumen.
fn view_camera(colon: &Colon, polyp: &PlacedPolyp, rng: &mut Rng) -> Camera {
    let n = polyp.normal();
    let axis = v3(0.0, 0.0, if rng.chance(0.5) { 1.0 } else { -1.0 });
    let tilt = rng.range(0.15, 1.05);
    let side = n.cross(axis).norm() * rng.range(-0.5, 0.5);
    let dir = (n * tilt.cos() + axis * tilt.sin() + side).norm();
    let dist = polyp.radius() * rng.range(1.3, 3.2) + rng.range(0.02, 0.1);
    let mut pos = polyp.centre() + dir * dist;
    let (cx, cy) = colon.centre(pos.z);
    let off = v3(pos.x - cx, pos.y - cy, 0.0);
    let max_r = 0.75 * colon.radius(pos.z, off.y.atan2(off.x));
    if off.len() > max_r {
        let scaled = off.norm() * max_r;
        pos = v3(cx + scaled.x, cy + scaled.y, pos.z);
    }
    let jitter = v3(rng.normal(), rng.normal(), rng.normal()) * (polyp.radius() * 0.5);
    Camera::look_at(
        pos,
        polyp.centre() + jitter,
        rng.range(0.0, std::f32::consts::TAU),
    )
}

fn view_look(rng: &mut Rng) -> Look {
    Look {
        exposure: rng.range(0.7, 1.35),
        white_balance: [
            rng.range(0.92, 1.08),
            rng.range(0.92, 1.08),
            rng.range(0.9, 1.1),
        ],
        blur: if rng.chance(0.3) {
            (rng.range(2.0, 6.0), rng.range(0.0, std::f32::consts::PI))
        } else {
            (0.0, 0.0)
        },
        fluid: rng.chance(0.15).then(|| rng.range(0.72, 0.88)),
        instrument: rng
            .chance(0.15)
            .then(|| rng.range(0.0, std::f32::consts::TAU)),
        noise: rng.range(0.008, 0.02),
        ..Look::default()
    }
}

fn osd_lines(patient: &str, rng: &mut Rng) -> Vec<String> {
    vec![
        "ETWN-190".into(),
        format!("ID:{patient}"),
        format!("{:02}/{:02}/26", 1 + rng.below(28), 1 + rng.below(12)),
        format!("{:02}:{:02}", 8 + rng.below(9), rng.below(60)),
    ]
}

/// Generates the whole phantom into `store` in one transaction (media files first).
pub fn generate(
    store: &mut Store,
    cfg: &PhantomConfig,
    progress: &Progress,
) -> Result<PhantomReport, PhantomError> {
    if cfg.views_per_polyp < 4 {
        return Err(PhantomError::TooFewViews(cfg.views_per_polyp));
    }
    let salt = match cfg.split {
        Split::Train => 0x7472_6169,
        Split::Test => 0x7465_7374,
    };
    let root = Rng::new(cfg.seed ^ salt);
    let prefix = format!(
        "{}{}",
        match cfg.split {
            Split::Train => "S",
            Split::Test => "H",
        },
        cfg.seed
    );

    // Split polyps into examinations of 0, 1 or several polyps.
    let mut plan_rng = root.fork(1);
    let mut counts = Vec::new();
    let mut left = cfg.polyps;
    while left > 0 {
        let k = [0usize, 1, 2, 3][plan_rng.weighted(&[0.15, 0.45, 0.25, 0.15])].min(left);
        counts.push(k);
        left -= k;
    }
    if counts.iter().all(|&k| k > 0) {
        counts.push(0);
    }
    let total_work = cfg.polyps * cfg.views_per_polyp
        + counts.len() * cfg.background_frames
        + cfg.videos * cfg.frames_per_video
        + cfg.capsule_images;
    progress.stage("rendering", total_work as u64);

    let mut exams = Vec::new();
    for (e, &k) in counts.iter().enumerate() {
        let mut r = root.fork(1000 + e as u64);
        let colon = draw_colon(&mut r);
        let patient = format!("{:05}", r.below(100_000));
        let mut polyps: Vec<PlacedPolyp> = Vec::new();
        for _ in 0..k {
            let spec = PolypSpec::draw(Pathology::draw(&mut r), &mut r);
            let theta = r.range(0.0, std::f32::consts::TAU);
            // Usually a few haustra apart; sometimes two polyps sit close together, seen in
            // the same frames of a withdrawal.
            let (z, theta) = match polyps.last() {
                Some(prev) if r.chance(0.3) => {
                    (prev.z + r.range(0.25, 0.6), prev.theta + r.range(0.6, 1.4))
                }
                Some(prev) => (colon.between_folds(prev.z + 4.0 + r.range(0.0, 1.0)), theta),
                None => (colon.between_folds(3.0 + r.range(0.0, 1.0)), theta),
            };
            polyps.push(colon.place(spec, z, theta));
        }
        let mut sentences = vec![(report::opening_sentence(&mut r), None)];
        if polyps.is_empty() {
            sentences.push((report::negative_sentence(&mut r), None));
        }
        for (i, p) in polyps.iter().enumerate() {
            sentences.push((report::polyp_sentence(&p.spec, i, &mut r), Some(i)));
            sentences.push((report::pathology_sentence(&p.spec, &mut r), Some(i)));
        }
        let mut views = Vec::new();
        for (i, p) in polyps.iter().enumerate() {
            let mut vr = r.fork(50 + i as u64);
            let mut set = Vec::new();
            for v in 0..cfg.views_per_polyp {
                check_cancel(progress)?;
                let cam = view_camera(&colon, p, &mut vr);
                let look = view_look(&mut vr);
                let osd = osd_lines(&patient, &mut vr);
                // Only this polyp in its scene: the mask and the view are about it alone.
                let scene = Scene {
                    colon: &colon,
                    polyps: std::slice::from_ref(p),
                };
                let frame = render::render(
                    &scene,
                    &cam,
                    &look,
                    cfg.image_size,
                    &osd,
                    (e * 100 + i * 10 + v) as u32,
                );
                set.push((encode_jpeg(&frame.image), encode_mask(&frame.mask)));
                progress.inc();
            }
            views.push(set);
        }
        let mut background = Vec::new();
        for b in 0..cfg.background_frames {
            check_cancel(progress)?;
            let z = r.range(0.5, 12.0);
            let (cx, cy) = colon.centre(z);
            let pos = v3(cx + r.range(-0.3, 0.3), cy + r.range(-0.3, 0.3), z);
            let ahead = colon.centre(z + 2.0);
            let target = v3(
                ahead.0 + r.range(-0.6, 0.6),
                ahead.1 + r.range(-0.6, 0.6),
                z + 2.0,
            );
            let cam = Camera::look_at(pos, target, r.range(0.0, std::f32::consts::TAU));
            let look = view_look(&mut r);
            let osd = osd_lines(&patient, &mut r);
            let scene = Scene {
                colon: &colon,
                polyps: &[],
            };
            let frame = render::render(
                &scene,
                &cam,
                &look,
                cfg.image_size,
                &osd,
                (e * 100 + 90 + b) as u32,
            );
            background.push(encode_jpeg(&frame.image));
            progress.inc();
        }
        exams.push(ExamPlan {
            code: format!("{prefix}-E{:03}", e + 1),
            patient,
            colon,
            polyps,
            sentences,
            views,
            background,
        });
    }

    let mut videos = Vec::new();
    let with_polyps: Vec<usize> = (0..exams.len())
        .filter(|&i| !exams[i].polyps.is_empty())
        .collect();
    for vi in 0..cfg.videos.min(with_polyps.len()) {
        let exam = with_polyps[(vi * 7) % with_polyps.len()];
        let mut r = root.fork(5000 + vi as u64);
        videos.push(render_video(
            &exams[exam],
            exam,
            vi,
            cfg,
            &prefix,
            &mut r,
            progress,
        )?);
    }

    let mut capsules = Vec::new();
    for c in 0..cfg.capsule_images {
        check_cancel(progress)?;
        let mut r = root.fork(9000 + c as u64);
        capsules.push(render_capsule(&mut r, cfg.image_size.min(192), c as u32));
        progress.inc();
    }

    write_all(store, cfg, &prefix, &exams, &videos, &capsules, progress)
}

fn check_cancel(progress: &Progress) -> Result<(), PhantomError> {
    if progress.is_cancelled() {
        Err(PhantomError::Cancelled)
    } else {
        Ok(())
    }
}

/// A withdrawal through the examination's colon: the scope backs out, slows down and steers
/// towards polyps, and once goes back in to look again (a revisit after a gap).
fn render_video(
    exam: &ExamPlan,
    exam_index: usize,
    vi: usize,
    cfg: &PhantomConfig,
    prefix: &str,
    r: &mut Rng,
    progress: &Progress,
) -> Result<VideoPlan, PhantomError> {
    let n = cfg.frames_per_video;
    let z_start = exam.polyps.iter().map(|p| p.z).fold(0.0f32, f32::max) + 2.5;
    let z_end = 0.0;
    let revisit_at = r.range(0.45, 0.7);
    let mut z = z_start;
    let mut frames = Vec::with_capacity(n);
    let mut boxes = Vec::new();
    let mut lateral = (0.0f32, 0.0f32);
    let mut roll = r.range(0.0, std::f32::consts::TAU);
    let base_speed = (z_start - z_end) / n as f32 * 1.35;
    let mut revisit_left = 0usize;
    for f in 0..n {
        check_cancel(progress)?;
        let t = f as f32 / n as f32;
        if revisit_left == 0 && (t - revisit_at).abs() < 0.5 / n as f32 {
            revisit_left = n / 10;
        }
        // Near a polyp ahead the endoscopist slows down and looks at it.
        let near = exam
            .polyps
            .iter()
            .filter(|p| p.z > z - 0.3 && p.z < z + 2.0)
            .min_by(|a, b| (a.z - z).abs().total_cmp(&(b.z - z).abs()));
        let speed = if near.is_some() {
            base_speed * 0.45
        } else {
            base_speed
        };
        if revisit_left > 0 {
            z += speed * 0.8;
            revisit_left -= 1;
        } else {
            z = (z - speed).max(z_end);
        }
        lateral.0 = (lateral.0 * 0.95 + r.normal() * 0.02).clamp(-0.35, 0.35);
        lateral.1 = (lateral.1 * 0.95 + r.normal() * 0.02).clamp(-0.35, 0.35);
        roll += r.normal() * 0.02;
        let (cx, cy) = exam.colon.centre(z);
        let pos = v3(cx + lateral.0, cy + lateral.1, z);
        let ahead = exam.colon.centre(z + 2.5);
        let mut target = v3(ahead.0, ahead.1, z + 2.5);
        if let Some(p) = near {
            let c = p.centre();
            let w = 0.6;
            target = v3(
                target.x * (1.0 - w) + c.x * w,
                target.y * (1.0 - w) + c.y * w,
                target.z * (1.0 - w) + c.z * w,
            );
        }
        let cam = Camera::look_at(pos, target, roll);
        let look = Look {
            blur: if r.chance(0.2) {
                (r.range(2.0, 5.0), r.range(0.0, std::f32::consts::PI))
            } else {
                (0.0, 0.0)
            },
            exposure: 1.0 + 0.1 * r.normal(),
            ..Look::default()
        };
        let osd = vec![
            "ETWN-190".into(),
            format!("ID:{}", exam.patient),
            format!("F{f:04}"),
        ];
        let scene = Scene {
            colon: &exam.colon,
            polyps: &exam.polyps,
        };
        let frame = render::render(
            &scene,
            &cam,
            &look,
            cfg.video_size,
            &osd,
            (vi * 10_000 + f) as u32,
        );
        let min_px = (cfg.video_size * cfg.video_size / 400).max(4);
        for (pi, b) in frame.boxes.iter().enumerate() {
            if let Some([x0, y0, x1, y1]) = b
                && frame.pixel_counts[pi] >= min_px
            {
                boxes.push((
                    f,
                    pi,
                    [
                        *x0 as f32,
                        *y0 as f32,
                        (x1 - x0 + 1) as f32,
                        (y1 - y0 + 1) as f32,
                    ],
                ));
            }
        }
        frames.push(encode_jpeg(&frame.image));
        progress.inc();
    }
    Ok(VideoPlan {
        exam: exam_index,
        code: format!("{prefix}-V{:02}", vi + 1),
        frames,
        boxes,
    })
}

fn render_capsule(r: &mut Rng, size: u32, salt: u32) -> CapsulePlan {
    let finding = [
        CapsuleFinding::Normal,
        CapsuleFinding::Polyp,
        CapsuleFinding::Erosion,
        CapsuleFinding::Angioectasia,
        CapsuleFinding::Blood,
    ][r.weighted(&[0.35, 0.2, 0.2, 0.15, 0.1])];
    let mut colon = draw_colon(r);
    // Small bowel: narrower folds, pinker mucosa.
    colon.fold_period *= 0.6;
    colon.mucosa = [0.80, 0.32, 0.22];
    let mut look = view_look(r);
    look.instrument = None;
    match finding {
        CapsuleFinding::Erosion => {
            colon.mucosa = [0.82, 0.18, 0.12];
            colon.spots = Some(([0.95, 0.92, 0.85], r.range(0.5, 1.0), r.range(0.6, 1.2)));
        }
        CapsuleFinding::Angioectasia => {
            colon.spots = Some(([0.75, 0.02, 0.05], r.range(0.4, 0.8), r.range(0.4, 0.8)));
        }
        CapsuleFinding::Blood => {
            look.fluid = Some(r.range(0.45, 0.7));
            look.fluid_colour = [0.55, 0.02, 0.02];
        }
        _ => {}
    }
    let z = 3.0;
    let polyps = if finding == CapsuleFinding::Polyp {
        let spec = PolypSpec::draw(Pathology::Hyperplastic, r);
        vec![colon.place(
            spec,
            colon.between_folds(z + 1.0),
            r.range(0.0, std::f32::consts::TAU),
        )]
    } else {
        Vec::new()
    };
    let cam = match polyps.first() {
        Some(p) => view_camera(&colon, p, r),
        None => {
            let (cx, cy) = colon.centre(z);
            let ahead = colon.centre(z + 1.5);
            Camera::look_at(
                v3(cx, cy, z),
                v3(
                    ahead.0 + r.range(-0.8, 0.8),
                    ahead.1 + r.range(-0.8, 0.8),
                    z + 1.5,
                ),
                r.range(0.0, std::f32::consts::TAU),
            )
        }
    };
    let scene = Scene {
        colon: &colon,
        polyps: &polyps,
    };
    let frame = render::render(&scene, &cam, &look, size, &[], 70_000 + salt);
    CapsulePlan {
        image: encode_jpeg(&frame.image),
        caption: report::capsule_caption(finding, r),
    }
}

fn put(store: &Store, e: &Encoded) -> Result<(String, String), StoreError> {
    store.put_media_file(&e.bytes, e.ext)
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

fn write_all(
    store: &mut Store,
    cfg: &PhantomConfig,
    prefix: &str,
    exams: &[ExamPlan],
    videos: &[VideoPlan],
    capsules: &[CapsulePlan],
    progress: &Progress,
) -> Result<PhantomReport, PhantomError> {
    // Files first (by content hash); rows after, in one transaction.
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
    progress.stage("writing media", all.len() as u64);
    for e in &all {
        check_cancel(progress)?;
        staged.push(put(store, e)?);
        progress.inc();
    }
    let source = format!("phantom seed {} split {:?}", cfg.seed, cfg.split);
    let mut report = PhantomReport::default();
    store.write(|tx| -> Result<(), PhantomError> {
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
        let capsule_exam = store::upsert_examination(
            tx,
            &NewExamination {
                code: format!("{prefix}-CAPSULE"),
                patient_code: Some(format!("{prefix}-C")),
                kind: "capsule".into(),
                date: None,
                source: source.clone(),
            },
        )?;
        for (c, cap) in capsules.iter().enumerate() {
            let (h, p) = next.next().expect("staged capsule");
            let src = format!("phantom:capsule/{c:04}");
            let (mid, _) = store::insert_media(
                tx,
                h,
                p,
                &new_media(&cap.image, MediaKind::Capsule, Some(capsule_exam), src),
            )?;
            store::set_caption(tx, mid, &cap.caption)?;
            report.capsule_images += 1;
            report.media += 1;
        }
        if capsules.is_empty() {
            tx.execute("DELETE FROM examinations WHERE id = ?1", [capsule_exam])
                .map_err(StoreError::from)?;
        } else {
            report.examinations += 1;
        }
        Ok(())
    })?;
    Ok(report)
}

/// Groups boxes into tracklets as METHODS §3 defines them: consecutive detections of one
/// polyp; a new tracklet starts after a frame gap or when the box overlaps the previous one
/// by IoU < 0.1. Returns (polyp index, box indices) per tracklet.
pub fn tracklets_from_boxes(boxes: &[(usize, usize, [f32; 4])]) -> Vec<(usize, Vec<usize>)> {
    let mut out: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut open: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    for (bi, (frame, polyp, b)) in boxes.iter().enumerate() {
        let continues = open.get(polyp).and_then(|&t| {
            let last = *out[t].1.last().expect("tracklets are never empty");
            let (lf, _, lb) = boxes[last];
            (frame - lf == 1 && iou(&lb, b) >= 0.1).then_some(t)
        });
        match continues {
            Some(t) => out[t].1.push(bi),
            None => {
                out.push((*polyp, vec![bi]));
                open.insert(*polyp, out.len() - 1);
            }
        }
    }
    out
}

pub fn iou(a: &[f32; 4], b: &[f32; 4]) -> f32 {
    let x0 = a[0].max(b[0]);
    let y0 = a[1].max(b[1]);
    let x1 = (a[0] + a[2]).min(b[0] + b[2]);
    let y1 = (a[1] + a[3]).min(b[1] + b[3]);
    let inter = (x1 - x0).max(0.0) * (y1 - y0).max(0.0);
    let union = a[2] * a[3] + b[2] * b[3] - inter;
    if union <= 0.0 { 0.0 } else { inter / union }
}

/// A contact sheet: the first views of several polyps, background frames and video frames in
/// one PNG, for a reader to judge at a glance whether this looks like colonoscopy.
pub fn contact_sheet(store: &Store, columns: u32, tile: u32) -> Result<RgbImage, StoreError> {
    let mut media = Vec::new();
    for p in store.polyps()?.iter().take(8) {
        media.extend(store.polyp_views(p.id)?.into_iter().take(2));
    }
    for e in store.examinations()?.iter().take(6) {
        media.extend(store.loose_frames(e.id)?.into_iter().take(1));
    }
    for v in store.videos()?.iter().take(2) {
        let frames = store.video_frames(v.id)?;
        let step = (frames.len() / 4).max(1);
        media.extend(frames.into_iter().step_by(step).take(4).map(|(_, m)| m));
    }
    let rows = (media.len() as u32).div_ceil(columns).max(1);
    let mut sheet = RgbImage::from_pixel(columns * tile, rows * tile, image::Rgb([20, 20, 20]));
    for (i, m) in media.iter().enumerate() {
        let Ok(d) = crate::data::images::decode_file(&store.media_path(m)) else {
            continue;
        };
        let img = d
            .image
            .resize_exact(tile - 4, tile - 4, image::imageops::FilterType::Triangle)
            .to_rgb8();
        let (x, y) = (
            (i as u32 % columns) * tile + 2,
            (i as u32 / columns) * tile + 2,
        );
        image::imageops::replace(&mut sheet, &img, x as i64, y as i64);
    }
    Ok(sheet)
}
