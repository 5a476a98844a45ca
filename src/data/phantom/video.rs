//! Procedure videos: a withdrawal through an examination's colon with boxes per frame.

use super::geometry::v3;
use super::render::{self, Camera, Look, Scene};
use super::write::{ExamPlan, VideoPlan, encode_jpeg};
use super::{PhantomConfig, PhantomError, check_cancel};
use crate::plumbing::{Progress, Rng};

/// A withdrawal through the examination's colon: the scope backs out, slows down and steers
/// towards polyps, and goes back in to each polyp once it is lost from view, looking at it
/// again (a revisit after a gap: a second tracklet of the same polyp).
pub(super) fn render_video(
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
    let mut z = z_start;
    let polyps = exam.polyps.len();
    let (mut seen, mut revisited) = (vec![false; polyps], vec![false; polyps]);
    let mut unseen_for = vec![0usize; polyps];
    // While going back in: the depth at which the polyp is just ahead again.
    let mut going_back: Option<f32> = None;
    let mut frames = Vec::with_capacity(n);
    let mut boxes = Vec::new();
    let mut lateral = (0.0f32, 0.0f32);
    let mut roll = r.range(0.0, std::f32::consts::TAU);
    let base_speed = (z_start - z_end) / n as f32 * 1.35;
    for f in 0..n {
        check_cancel(progress)?;
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
        match going_back {
            Some(target) if z < target => z += speed * 0.9,
            _ => {
                going_back = None;
                z = (z - speed).max(z_end);
            }
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
        // A polyp lost from view for a moment after being seen: go back in to it (once).
        for pi in 0..polyps {
            let visible = boxes
                .last()
                .is_some_and(|b: &(usize, usize, [f32; 4])| b.0 == f)
                && boxes
                    .iter()
                    .rev()
                    .take_while(|b| b.0 == f)
                    .any(|b| b.1 == pi);
            if visible {
                seen[pi] = true;
                unseen_for[pi] = 0;
            } else if seen[pi] {
                unseen_for[pi] += 1;
                if unseen_for[pi] == 12 && !revisited[pi] && going_back.is_none() {
                    revisited[pi] = true;
                    going_back = Some(exam.polyps[pi].z - 0.8);
                }
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
