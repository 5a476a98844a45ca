//! Renders colonoscopy frames of a phantom colon by sphere tracing a signed distance field.
//!
//! The colon is a bending tube along +z with haustral folds; polyps are shapes blended into
//! its wall. The light sits at the scope tip, so the far lumen falls off into darkness and the
//! wet mucosa throws specular highlights. A fisheye lens, the octagonal field stop, an
//! on-screen display and the usual nuisances (blur, exposure, white balance, fluid,
//! instruments) follow as image operations.

use super::geometry::{Colon, PlacedPolyp, V3, v3};
use super::noise::{fbm, value_noise};
use image::{GrayImage, Luma, Rgb, RgbImage};

/// Camera: position, orientation and lens.
#[derive(Debug, Clone, Copy)]
pub struct Camera {
    pub pos: V3,
    pub forward: V3,
    pub up: V3,
    /// Half field of view of the fisheye lens, radians.
    pub half_fov: f32,
}

impl Camera {
    /// A camera at `pos` looking at `target`, rolled by `roll` radians about its axis.
    pub fn look_at(pos: V3, target: V3, roll: f32) -> Camera {
        let forward = (target - pos).norm();
        let helper = if forward.y.abs() > 0.9 {
            v3(1.0, 0.0, 0.0)
        } else {
            v3(0.0, 1.0, 0.0)
        };
        let right = forward.cross(helper).norm();
        let up0 = right.cross(forward).norm();
        let up = up0 * roll.cos() + right * roll.sin();
        Camera {
            pos,
            forward,
            up,
            half_fov: 1.1,
        }
    }
}

/// Photometric and nuisance settings of one frame.
#[derive(Debug, Clone, Copy)]
pub struct Look {
    pub exposure: f32,
    pub white_balance: [f32; 3],
    /// Motion blur length in pixels and its direction (radians).
    pub blur: (f32, f32),
    /// Fluid pool covering the bottom of the field: level in [0, 1] of the image height.
    pub fluid: Option<f32>,
    pub fluid_colour: [f32; 3],
    /// An instrument entering from the edge at this angle (radians).
    pub instrument: Option<f32>,
    pub noise: f32,
}

impl Default for Look {
    fn default() -> Self {
        Look {
            exposure: 1.0,
            white_balance: [1.0, 1.0, 1.0],
            blur: (0.0, 0.0),
            fluid: None,
            fluid_colour: [0.62, 0.50, 0.18],
            instrument: None,
            noise: 0.012,
        }
    }
}

pub struct Scene<'a> {
    pub colon: &'a Colon,
    pub polyps: &'a [PlacedPolyp],
}

const MAX_STEPS: usize = 90;
const FAR: f32 = 14.0;

impl Scene<'_> {
    /// Distance to the nearest surface and which polyp (if any) is nearest.
    fn sdf(&self, p: V3) -> (f32, Option<usize>) {
        let (cx, cy) = self.colon.centre(p.z);
        let dx = p.x - cx;
        let dy = p.y - cy;
        let rho = (dx * dx + dy * dy).sqrt();
        let theta = dy.atan2(dx);
        let wall = (self.colon.radius(p.z, theta) - rho) * 0.8;
        let mut best = wall;
        let mut which = None;
        for (i, polyp) in self.polyps.iter().enumerate() {
            if (p.z - polyp.z).abs() > polyp.radius * 4.0 + 0.5 {
                continue;
            }
            let d = polyp.sdf(p);
            // Smooth union so polyps grow out of the mucosa instead of sitting on it.
            let k = 0.45 * polyp.radius;
            let h = (0.5 + 0.5 * (best - d) / k).clamp(0.0, 1.0);
            let blended = d * h + best * (1.0 - h) - k * h * (1.0 - h);
            if d < best {
                which = Some(i);
            }
            best = blended;
        }
        (best, which)
    }

    fn normal(&self, p: V3) -> V3 {
        let e = 0.002;
        let d = |q: V3| self.sdf(q).0;
        // Tetrahedral gradient: four evaluations instead of six.
        let k1 = v3(1.0, -1.0, -1.0);
        let k2 = v3(-1.0, -1.0, 1.0);
        let k3 = v3(-1.0, 1.0, -1.0);
        let k4 = v3(1.0, 1.0, 1.0);
        (k1 * d(p + k1 * e) + k2 * d(p + k2 * e) + k3 * d(p + k3 * e) + k4 * d(p + k4 * e)).norm()
    }

    fn mucosa_albedo(&self, p: V3) -> [f32; 3] {
        let (cx, cy) = self.colon.centre(p.z);
        let theta = (p.y - cy).atan2(p.x - cx);
        let (u, v) = (theta * 1.0, p.z);
        let seed = self.colon.seed;
        let grain = fbm(u * 9.0, v * 9.0, 0.5, 3, seed);
        let vessel_n = fbm(u * 2.2, v * 2.2, 3.3, 4, seed ^ 0xA5A5);
        let ridge = 1.0 - (2.0 * vessel_n - 1.0).abs();
        let fine_n = fbm(u * 4.5, v * 4.5, 7.7, 2, seed ^ 0x5A5A);
        let fine = 1.0 - (2.0 * fine_n - 1.0).abs();
        let mut c = self.colon.mucosa;
        // Exactly the historical formula at the normal grain, so colonoscopy renders do not move.
        let g = if self.colon.grain == 1.0 {
            0.9 + 0.2 * grain
        } else {
            1.0 + self.colon.grain * 0.2 * (grain - 0.5)
        };
        for ch in &mut c {
            *ch *= g;
        }
        let vd = self.colon.vessel_density.max(0.02);
        let vessel = ((ridge - (1.0 - 0.035 * vd)) / (0.035 * vd))
            .clamp(0.0, 1.0)
            .max(0.4 * ((fine - (1.0 - 0.05 * vd)) / (0.05 * vd)).clamp(0.0, 1.0));
        let vessel = if self.colon.vessel_density < 0.05 {
            0.0
        } else {
            vessel
        };
        let vcol = [0.40, 0.04, 0.05];
        for i in 0..3 {
            c[i] = c[i] * (1.0 - 0.45 * vessel) + vcol[i] * 0.45 * vessel;
        }
        for (k, s) in self.colon.spots.iter().enumerate() {
            let salt = 0x3C3C ^ (k as u32).wrapping_mul(0x9E37);
            let n = value_noise(
                u * 4.0 / s.size,
                v * 4.0 / (s.size * s.stretch),
                9.1,
                seed ^ salt,
            );
            let threshold = 1.0 - 0.2 * s.density;
            let core = ((n - threshold) / 0.05).clamp(0.0, 1.0);
            if let Some(rim) = s.rim {
                let ring = (((n - (threshold - 0.08)) / 0.03).clamp(0.0, 1.0) - core).max(0.0);
                for (ch, r) in c.iter_mut().zip(rim) {
                    *ch = *ch * (1.0 - ring) + r * ring;
                }
            }
            for (ch, k) in c.iter_mut().zip(s.colour) {
                *ch = *ch * (1.0 - core) + k * core;
            }
        }
        c
    }

    /// Radiance along one ray, and the polyp it hit (if any).
    fn trace(&self, cam: &Camera, dir: V3) -> ([f32; 3], Option<usize>) {
        let mut t = 0.02;
        let mut last = (cam.pos, None);
        for _ in 0..MAX_STEPS {
            let p = cam.pos + dir * t;
            let (d, which) = self.sdf(p);
            if d < 0.0015 * t.max(0.3) {
                return (self.shade(cam, p, dir, t, which), which);
            }
            last = (p, which);
            t += d.max(0.004);
            if t > FAR {
                return ([0.0, 0.0, 0.0], None);
            }
        }
        // Out of steps at a grazing angle: shade where we got to rather than leave a black seam.
        (self.shade(cam, last.0, dir, t, last.1), last.1)
    }

    fn shade(&self, cam: &Camera, p: V3, dir: V3, t: f32, which: Option<usize>) -> [f32; 3] {
        let n = self.normal(p);
        let albedo = match which {
            Some(i) => {
                let polyp = &self.polyps[i];
                // Blend towards mucosa at the foot of the polyp.
                let wall_c = self.mucosa_albedo(p);
                let body = polyp.albedo(p);
                let lift =
                    ((p - polyp.base).dot(polyp.normal) / (0.25 * polyp.radius)).clamp(0.0, 1.0);
                [0, 1, 2].map(|k| wall_c[k] * (1.0 - lift) + body[k] * lift)
            }
            None => self.mucosa_albedo(p),
        };
        // Two light guides beside the lens.
        let lights = [cam.pos + cam.up * 0.03, cam.pos - cam.up * 0.03];
        let mut out = [0.0f32; 3];
        for lp in lights {
            let l = lp - p;
            let dist = l.len();
            let l = l * (1.0 / dist);
            let diffuse = n.dot(l).max(0.0);
            let falloff = 1.0 / (1.0 + 5.0 * dist * dist);
            let h = (l - dir).norm();
            // Wet mucosa: sharp highlights, broken up into droplets.
            let wet = value_noise(p.x * 35.0, p.y * 35.0, p.z * 35.0, 0x77);
            let spec = n.dot(h).max(0.0).powf(160.0) * if wet > 0.72 { 5.0 } else { 0.8 };
            for k in 0..3 {
                out[k] += 0.5 * falloff * (albedo[k] * (0.15 + 0.85 * diffuse) + spec);
            }
        }
        let fog = (-0.05 * t).exp();
        out.map(|c| c * fog)
    }
}

/// Renders a square frame of side `size`: the RGB image and the polyp mask (255 where the
/// polyp with index `mask_polyp` is seen; all polyps when `None`), plus per-polyp pixel
/// counts and bounding boxes in pixels (x0, y0, x1, y1).
pub struct Frame {
    pub image: RgbImage,
    pub mask: GrayImage,
    pub boxes: Vec<Option<[u32; 4]>>,
    pub pixel_counts: Vec<u32>,
}

pub fn render(
    scene: &Scene<'_>,
    cam: &Camera,
    look: &Look,
    size: u32,
    osd: &[String],
    noise_seed: u32,
) -> Frame {
    let right = cam.forward.cross(cam.up).norm();
    let mut linear = vec![[0.0f32; 3]; (size * size) as usize];
    let mut ids = vec![u16::MAX; (size * size) as usize];
    let half = size as f32 / 2.0;
    let field = field_radius(size);
    for y in 0..size {
        for x in 0..size {
            let px = (x as f32 + 0.5 - half) / field;
            let py = (y as f32 + 0.5 - half) / field;
            if !inside_octagon(px, py) {
                continue;
            }
            // Equidistant fisheye: image radius proportional to the angle off axis.
            let r = (px * px + py * py).sqrt();
            let ang = r * cam.half_fov;
            let (s, c) = ang.sin_cos();
            let (ux, uy) = if r > 1e-6 {
                (px / r, py / r)
            } else {
                (0.0, 0.0)
            };
            let dir = (cam.forward * c + right * (s * ux) + cam.up * (-s * uy)).norm();
            let (rgb, which) = scene.trace(cam, dir);
            let i = (y * size + x) as usize;
            linear[i] = rgb;
            if let Some(w) = which {
                ids[i] = w as u16;
            }
        }
    }
    if look.blur.0 >= 1.0 {
        linear = motion_blur(&linear, size, look.blur.0, look.blur.1);
    }
    let mut image = RgbImage::new(size, size);
    let mut mask = GrayImage::new(size, size);
    let n = scene.polyps.len();
    let mut boxes: Vec<Option<[u32; 4]>> = vec![None; n];
    let mut counts = vec![0u32; n];
    for y in 0..size {
        for x in 0..size {
            let i = (y * size + x) as usize;
            let px = (x as f32 + 0.5 - half) / field;
            let py = (y as f32 + 0.5 - half) / field;
            if !inside_octagon(px, py) {
                continue;
            }
            let mut c = linear[i];
            if let Some(level) = look.fluid {
                let wave = 0.03 * ((x as f32) * 0.08 + noise_seed as f32).sin();
                if (y as f32 / size as f32) > level + wave {
                    let fluid = look.fluid_colour;
                    for k in 0..3 {
                        c[k] = c[k] * 0.55 + fluid[k] * 0.4 * (c[0] + 0.3);
                    }
                    ids[i] = u16::MAX;
                }
            }
            if let Some(angle) = look.instrument
                && on_instrument(px, py, angle)
            {
                let shade = 0.55 + 0.35 * (px * angle.sin() - py * angle.cos()).abs().min(1.0);
                c = [0.62 * shade, 0.64 * shade, 0.66 * shade];
                ids[i] = u16::MAX;
            }
            let grain = (value_noise(
                x as f32 * 0.9,
                y as f32 * 0.9,
                noise_seed as f32,
                noise_seed,
            ) - 0.5)
                * 2.0;
            let rgb = [0, 1, 2].map(|k| {
                let lit = c[k] * look.exposure * look.white_balance[k] * 2.0;
                // Sensor noise grows with signal: the dark lumen stays dark.
                let v = lit * (1.0 + look.noise * 4.0 * grain);
                // Filmic-ish tone curve then gamma: bright highlights saturate softly.
                let v = v.max(0.0);
                let tone = v / (1.0 + 0.35 * v);
                (tone.powf(1.0 / 2.2) * 255.0).clamp(0.0, 255.0) as u8
            });
            image.put_pixel(x, y, Rgb(rgb));
            if ids[i] != u16::MAX {
                let w = ids[i] as usize;
                mask.put_pixel(x, y, Luma([255]));
                counts[w] += 1;
                let b = boxes[w].get_or_insert([x, y, x, y]);
                b[0] = b[0].min(x);
                b[1] = b[1].min(y);
                b[2] = b[2].max(x);
                b[3] = b[3].max(y);
            }
        }
    }
    super::osd::draw(&mut image, osd);
    Frame {
        image,
        mask,
        boxes,
        pixel_counts: counts,
    }
}

fn field_radius(size: u32) -> f32 {
    size as f32 * 0.47
}

/// The scope's octagonal field stop, in field-normalised coordinates.
fn inside_octagon(px: f32, py: f32) -> bool {
    let (ax, ay) = (px.abs(), py.abs());
    ax <= 1.0 && ay <= 1.0 && ax + ay <= 1.42
}

fn on_instrument(px: f32, py: f32, angle: f32) -> bool {
    // A catheter entering from the rim towards the centre, ending at 0.45 of the radius.
    let dir = (angle.cos(), angle.sin());
    let along = px * dir.0 + py * dir.1;
    let across = (-px * dir.1 + py * dir.0).abs();
    along > 0.45 && across < 0.09 + 0.05 * (along - 0.45)
}

fn motion_blur(src: &[[f32; 3]], size: u32, len: f32, angle: f32) -> Vec<[f32; 3]> {
    let steps = len.round().max(1.0) as i32;
    let (dx, dy) = (angle.cos(), angle.sin());
    let mut out = vec![[0.0f32; 3]; src.len()];
    for y in 0..size as i32 {
        for x in 0..size as i32 {
            let mut acc = [0.0f32; 3];
            let mut n: f32 = 0.0;
            for s in 0..steps {
                let t = s as f32 - steps as f32 / 2.0;
                let sx = (x as f32 + dx * t).round() as i32;
                let sy = (y as f32 + dy * t).round() as i32;
                if sx >= 0 && sy >= 0 && sx < size as i32 && sy < size as i32 {
                    let p = src[(sy as u32 * size + sx as u32) as usize];
                    for k in 0..3 {
                        acc[k] += p[k];
                    }
                    n += 1.0;
                }
            }
            out[(y as u32 * size + x as u32) as usize] = acc.map(|a| a / n.max(1.0));
        }
    }
    out
}
