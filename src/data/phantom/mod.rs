//! The synthetic colonoscopy phantom: examinations with polyps, multi-view sets, procedure
//! videos with boxes and identities, reports, masks and capsule captions, all from one seed.
//!
//! The same seed gives byte-identical media and identical rows: every random draw comes from
//! [`Rng`](crate::plumbing::Rng) streams forked per purpose, and images are encoded deterministically.

pub mod anatomy;
mod capsule;
pub mod geometry;
mod noise;
pub mod osd;
pub mod render;
pub mod report;
mod video;
mod write;

use crate::plumbing::Progress;
use crate::plumbing::Rng;
use crate::store::{Store, StoreError};
use anatomy::{Pathology, PolypSpec};
use capsule::render_capsule_patient;
pub use capsule::{FINDINGS as CAPSULE_FINDINGS, FRAMES_PER_PATIENT};
use geometry::{Colon, PlacedPolyp, v3};
use render::{Camera, Look, Scene};
use video::render_video;
use write::{CapsulePlan, ExamPlan, VideoPlan, encode_jpeg, encode_mask, write_all};

/// Which part of the phantom: `Test` draws from a disjoint stream and codes, for held-out
/// evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Split {
    Train,
    /// For every knob, early stopping and model choice; disjoint from both others.
    Validation,
    Test,
}

impl Split {
    pub fn name(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Validation => "validation",
            Split::Test => "test",
        }
    }
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
    /// Examination records (Endo-CLIP, METHODS §1): when > 0, every examination gets this many
    /// frames in all: its polyps' views plus withdrawal frames without a polyp (half looking
    /// down the lumen, half close to the wall, as polyp views are), at least
    /// `background_frames`. 0 keeps exactly `background_frames` lumen frames.
    pub frames_per_exam: usize,
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
            frames_per_exam: 0,
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
    #[error("{value} {what}: a generated phantom takes at most {max}; nothing was generated")]
    TooLarge {
        what: &'static str,
        value: usize,
        max: usize,
    },
    #[error("{value} {what}: a generated phantom takes at least {min}; nothing was generated")]
    TooSmall {
        what: &'static str,
        value: usize,
        min: usize,
    },
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
        grain: 1.0,
        spots: Vec::new(),
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

/// The light frames are taken in: an exposure and a white balance around which each frame's
/// are drawn, and how far a frame strays from them.
#[derive(Clone, Copy, Debug)]
pub(super) struct Light {
    exposure: f32,
    white_balance: [f32; 3],
    /// A frame's exposure is `exposure` times a factor drawn in this range.
    exposure_spread: (f32, f32),
    /// A frame's white balance is `white_balance` times a factor drawn within this fraction.
    white_balance_spread: [f32; 3],
}

impl Light {
    /// One examination's: the video processor's white balance is set once before it starts and
    /// its automatic gain settles around one exposure, so every frame of the examination (a
    /// polyp's views, the withdrawal) shares them and a polyp keeps its colour across its views
    /// (#44 item 5: drawn anew for every view, the phantom taught the encoders that a polyp's
    /// colour means nothing, while on real frames it is part of what identifies one). Drawn
    /// from a stream of its own, so the examination's other draws do not move.
    fn of_examination(exam: &Rng) -> Light {
        let mut r = exam.fork(800);
        Light {
            exposure: r.range(0.8, 1.2),
            white_balance: [r.range(0.92, 1.08), r.range(0.92, 1.08), r.range(0.9, 1.1)],
            exposure_spread: (0.85, 1.15),
            white_balance_spread: [0.01, 0.01, 0.01],
        }
    }

    /// Each frame its own light, as a capsule's frames (each a new stretch of bowel of its own
    /// colour) are drawn.
    pub(super) fn per_frame() -> Light {
        Light {
            exposure: 1.0,
            white_balance: [1.0; 3],
            exposure_spread: (0.7, 1.35),
            white_balance_spread: [0.08, 0.08, 0.1],
        }
    }
}

fn view_look(rng: &mut Rng, light: &Light) -> Look {
    let (low, high) = light.exposure_spread;
    let exposure = light.exposure * rng.range(low, high);
    let mut white_balance = light.white_balance;
    for (w, spread) in white_balance.iter_mut().zip(light.white_balance_spread) {
        *w *= rng.range(1.0 - spread, 1.0 + spread);
    }
    Look {
        exposure,
        white_balance,
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
/// Refuses a phantom no command needs, before a frame is drawn (round 11 N4, N5: a report's
/// generated split of 10^8 videos grew without end, one of 2^64 capsule frames panicked).
/// The limits are `endotwin demo`'s.
/// The least side of a generated frame, in pixels.
pub const MIN_SIDE: usize = 16;

pub fn check_size(cfg: &PhantomConfig) -> Result<(), PhantomError> {
    let sizes = [
        // Videos before polyps: a video split has three polyps a video.
        ("videos", cfg.videos, 1_000),
        ("polyps", cfg.polyps, 100_000),
        ("views per polyp", cfg.views_per_polyp, 32),
        ("frames per video", cfg.frames_per_video, 20_000),
        ("capsule frames", cfg.capsule_images, 100_000),
        ("background frames", cfg.background_frames, 1_000),
        ("frames per examination", cfg.frames_per_exam, 1_000),
        ("pixels a side", cfg.image_size as usize, 2_048),
        ("pixels a side of video", cfg.video_size as usize, 2_048),
    ];
    for (what, value, max) in sizes {
        if value > max {
            return Err(PhantomError::TooLarge { what, value, max });
        }
    }
    // A frame of a few pixels holds nothing to learn or score (round 16 N10: `--size 0`
    // panicked in the JPEG encoder).
    for (what, value) in [
        ("pixels a side", cfg.image_size as usize),
        ("pixels a side of video", cfg.video_size as usize),
    ] {
        if value < MIN_SIDE {
            return Err(PhantomError::TooSmall {
                what,
                value,
                min: MIN_SIDE,
            });
        }
    }
    Ok(())
}

pub fn generate(
    store: &mut Store,
    cfg: &PhantomConfig,
    progress: &Progress,
) -> Result<PhantomReport, PhantomError> {
    if cfg.views_per_polyp < 4 {
        return Err(PhantomError::TooFewViews(cfg.views_per_polyp));
    }
    check_size(cfg)?;
    let salt = match cfg.split {
        Split::Train => 0x7472_6169,
        Split::Validation => 0x7661_6c69,
        Split::Test => 0x7465_7374,
    };
    let root = Rng::new(cfg.seed ^ salt);
    let prefix = format!(
        "{}{}",
        match cfg.split {
            Split::Train => "S",
            Split::Validation => "V",
            Split::Test => "H",
        },
        cfg.seed
    );

    // Split polyps into examinations of 0, 1 or several polyps.
    let mut plan_rng = root.fork(1);
    let mut counts = Vec::new();
    let mut left = cfg.polyps;
    // Examination records (Endo-CLIP) need negative examinations as a screening list has
    // them: 40 % without a polyp, and half of the positive ones with several.
    let shares: &[f32] = if cfg.frames_per_exam > 0 {
        &[0.40, 0.30, 0.18, 0.12]
    } else {
        &[0.15, 0.45, 0.25, 0.15]
    };
    while left > 0 {
        let k = [0usize, 1, 2, 3][plan_rng.weighted(shares)].min(left);
        counts.push(k);
        left -= k;
    }
    if counts.iter().all(|&k| k > 0) {
        counts.push(0);
    }
    let total_work = cfg.polyps * cfg.views_per_polyp
        + counts.len() * cfg.background_frames.max(cfg.frames_per_exam)
        + cfg.videos * cfg.frames_per_video
        + cfg.capsule_images;
    progress.stage("rendering", total_work as u64);

    // Examinations are independent: render them on every core, in examination order.
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, counts.len().max(1));
    let exams: Vec<ExamPlan> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (counts, root, prefix) = (&counts, &root, &prefix);
                scope.spawn(move || {
                    counts
                        .iter()
                        .enumerate()
                        .skip(t)
                        .step_by(threads)
                        .map(|(e, &k)| (e, render_exam(cfg, root, prefix, e, k, progress)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut done: Vec<(usize, Result<ExamPlan, PhantomError>)> = workers
            .into_iter()
            .flat_map(|w| w.join().expect("a render thread panicked"))
            .collect();
        done.sort_by_key(|(e, _)| *e);
        done.into_iter()
            .map(|(_, plan)| plan)
            .collect::<Result<_, _>>()
    })?;

    // Videos go through the examinations with the most polyps first (polyps in sequence,
    // some close together), the others after.
    let mut with_polyps: Vec<usize> = (0..exams.len())
        .filter(|&i| !exams[i].polyps.is_empty())
        .collect();
    with_polyps.sort_by_key(|&i| std::cmp::Reverse(exams[i].polyps.len()));
    // Videos are independent too (each draws from its own stream): render them on every core.
    let n_videos = cfg.videos.min(with_polyps.len());
    let video_threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, n_videos.max(1));
    let videos: Vec<VideoPlan> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..video_threads)
            .map(|t| {
                let (exams, with_polyps, root, prefix) = (&exams, &with_polyps, &root, &prefix);
                scope.spawn(move || {
                    (0..n_videos)
                        .skip(t)
                        .step_by(video_threads)
                        .map(|vi| {
                            let exam = with_polyps[vi % with_polyps.len()];
                            let mut r = root.fork(5000 + vi as u64);
                            let plan =
                                render_video(&exams[exam], exam, vi, cfg, prefix, &mut r, progress);
                            (vi, plan)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut done: Vec<(usize, Result<VideoPlan, PhantomError>)> = workers
            .into_iter()
            .flat_map(|w| w.join().expect("a render thread panicked"))
            .collect();
        done.sort_by_key(|(v, _)| *v);
        done.into_iter()
            .map(|(_, plan)| plan)
            .collect::<Result<_, _>>()
    })?;

    // Capsule patients are independent too (each its own stream).
    let patients = cfg.capsule_images.div_ceil(FRAMES_PER_PATIENT);
    let capsule_threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, patients.max(1));
    let capsule_size = cfg.image_size.min(192);
    let capsules: Vec<CapsulePlan> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..capsule_threads)
            .map(|t| {
                let root = &root;
                scope.spawn(move || {
                    (0..patients)
                        .skip(t)
                        .step_by(capsule_threads)
                        .map(|p| {
                            check_cancel(progress)?;
                            let frames =
                                FRAMES_PER_PATIENT.min(cfg.capsule_images - p * FRAMES_PER_PATIENT);
                            let mut r = root.fork(9000 + p as u64);
                            let plans = render_capsule_patient(&mut r, capsule_size, p, frames);
                            progress.add(frames as u64);
                            Ok((p, plans))
                        })
                        .collect::<Vec<Result<_, PhantomError>>>()
                })
            })
            .collect();
        let mut done: Vec<(usize, Vec<CapsulePlan>)> = workers
            .into_iter()
            .flat_map(|w| w.join().expect("a render thread panicked"))
            .collect::<Result<_, _>>()?;
        done.sort_by_key(|(p, _)| *p);
        Ok::<_, PhantomError>(done.into_iter().flat_map(|(_, plans)| plans).collect())
    })?;

    write_all(store, cfg, &prefix, &exams, &videos, &capsules, progress)
}

/// One examination: its colon, polyps, report sentences, views and background frames, all
/// drawn from the examination's own random stream (so examinations render in any order).
fn render_exam(
    cfg: &PhantomConfig,
    root: &Rng,
    prefix: &str,
    e: usize,
    k: usize,
    progress: &Progress,
) -> Result<ExamPlan, PhantomError> {
    let mut r = root.fork(1000 + e as u64);
    let light = Light::of_examination(&r);
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
            let look = view_look(&mut vr, &light);
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
        let look = view_look(&mut r, &light);
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
    let shown = polyps.len() * cfg.views_per_polyp + background.len();
    let extra = cfg.frames_per_exam.saturating_sub(shown);
    // A stream of its own: libraries without examination records render as before.
    let mut wr = r.fork(700);
    for b in 0..extra {
        check_cancel(progress)?;
        let frame = withdrawal_frame(
            &colon,
            &patient,
            &light,
            cfg.image_size,
            b % 2 == 1,
            &mut wr,
        );
        background.push(encode_jpeg(&frame.image));
        progress.inc();
    }
    Ok(ExamPlan {
        code: format!("{prefix}-E{:03}", e + 1),
        patient,
        colon,
        polyps,
        sentences,
        views,
        background,
    })
}

/// A withdrawal frame without a polyp: down the lumen, or (`wall`) close to the mucosa as a
/// polyp view is framed, aimed at a spot where no polyp grows.
fn withdrawal_frame(
    colon: &Colon,
    patient: &str,
    light: &Light,
    size: u32,
    wall: bool,
    r: &mut Rng,
) -> render::Frame {
    let cam = if wall {
        let spec = PolypSpec::draw(Pathology::draw(r), r);
        let spot = colon.place(
            spec,
            r.range(1.0, 12.0),
            r.range(0.0, std::f32::consts::TAU),
        );
        view_camera(colon, &spot, r)
    } else {
        let z = r.range(0.5, 12.0);
        let (cx, cy) = colon.centre(z);
        let pos = v3(cx + r.range(-0.3, 0.3), cy + r.range(-0.3, 0.3), z);
        let ahead = colon.centre(z + 2.0);
        let target = v3(
            ahead.0 + r.range(-0.6, 0.6),
            ahead.1 + r.range(-0.6, 0.6),
            z + 2.0,
        );
        Camera::look_at(pos, target, r.range(0.0, std::f32::consts::TAU))
    };
    let look = view_look(r, light);
    let osd = osd_lines(patient, r);
    let scene = Scene { colon, polyps: &[] };
    let noise_seed = 90_000 + r.below(10_000) as u32;
    render::render(&scene, &cam, &look, size, &osd, noise_seed)
}

fn check_cancel(progress: &Progress) -> Result<(), PhantomError> {
    if progress.is_cancelled() {
        Err(PhantomError::Cancelled)
    } else {
        Ok(())
    }
}
