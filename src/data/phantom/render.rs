//! Renders colonoscopy frames of a phantom colon by sphere tracing a signed distance field.
//!
//! The colon is a bending tube along +z with haustral folds; polyps are shapes blended into
//! its wall. The light sits at the scope tip, so the far lumen falls off into darkness and the
//! wet mucosa throws specular highlights. A fisheye lens, the octagonal field stop, an
//! on-screen display and the usual nuisances (blur, exposure, white balance, fluid,
//! instruments) follow as image operations.

use super::anatomy::{Paris, PolypSpec, Surface};
use super::rng::{fbm, value_noise};
use image::{GrayImage, Luma, Rgb, RgbImage};

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct V3 {
    pub x: f32,
    pub y: f32,
    pub z: f32,
}

pub const fn v3(x: f32, y: f32, z: f32) -> V3 {
    V3 { x, y, z }
}

impl V3 {
    pub fn dot(self, o: V3) -> f32 {
        self.x * o.x + self.y * o.y + self.z * o.z
    }
    pub fn cross(self, o: V3) -> V3 {
        v3(
            self.y * o.z - self.z * o.y,
            self.z * o.x - self.x * o.z,
            self.x * o.y - self.y * o.x,
        )
    }
    pub fn len(self) -> f32 {
        self.dot(self).sqrt()
    }
    pub fn norm(self) -> V3 {
        self * (1.0 / self.len().max(1e-9))
    }
}

impl std::ops::Add for V3 {
    type Output = V3;
    fn add(self, o: V3) -> V3 {
        v3(self.x + o.x, self.y + o.y, self.z + o.z)
    }
}
impl std::ops::Sub for V3 {
    type Output = V3;
    fn sub(self, o: V3) -> V3 {
        v3(self.x - o.x, self.y - o.y, self.z - o.z)
    }
}
impl std::ops::Mul<f32> for V3 {
    type Output = V3;
    fn mul(self, s: f32) -> V3 {
        v3(self.x * s, self.y * s, self.z * s)
    }
}

/// World units: the colon's mean radius is 1.0 (about 25 mm).
pub const MM: f32 = 1.0 / 25.0;

/// The colon of one examination.
#[derive(Debug, Clone)]
pub struct Colon {
    pub seed: u32,
    /// Bend amplitudes and frequencies of the centreline.
    pub bend: [f32; 4],
    pub fold_period: f32,
    pub fold_depth: f32,
    pub fold_width: f32,
    /// Linear RGB albedo of the mucosa.
    pub mucosa: [f32; 3],
    pub vessel_density: f32,
    /// Focal spots on the mucosa (erosions, angioectasias): colour, density, size.
    pub spots: Option<([f32; 3], f32, f32)>,
}

/// A polyp placed on the colon wall.
#[derive(Debug, Clone)]
pub struct PlacedPolyp {
    pub spec: PolypSpec,
    /// Position along the colon.
    pub z: f32,
    /// Angle around the colon axis.
    pub theta: f32,
    base: V3,
    normal: V3,
    radius: f32,
}

impl Colon {
    pub fn centre(&self, z: f32) -> (f32, f32) {
        let [a1, w1, a2, w2] = self.bend;
        (
            a1 * (w1 * z + self.seed as f32 * 0.001).sin(),
            a2 * (w2 * z + 1.3).sin(),
        )
    }

    /// Fold profile along z in [0, 1]: 1 on a fold crest.
    fn fold(&self, z: f32) -> f32 {
        let ph = (z / self.fold_period).fract();
        let d = (ph - 0.5) * self.fold_period / self.fold_width;
        (-d * d).exp()
    }

    /// Wall radius at (z, theta).
    pub fn radius(&self, z: f32, theta: f32) -> f32 {
        let ring = (z / self.fold_period).floor() as i32;
        // Each fold has its own depth and lobe phase: haustra are irregular crescents.
        let h = super::rng::hash3(ring, 17, 3, self.seed);
        let depth = 0.5 + (h & 0xFF) as f32 / 255.0 * 0.9;
        let phase = ((h >> 8) & 0xFF) as f32 / 255.0 * std::f32::consts::TAU;
        let lobes = (0.5 + 0.5 * (3.0 * theta + phase).cos()).powf(1.5);
        let wobble = 0.07 * (2.0 * theta + z * 0.7).sin() + 0.04 * (5.0 * theta - z * 1.3).sin();
        1.0 + wobble - self.fold_depth * depth * self.fold(z) * (0.25 + 0.75 * lobes)
    }

    /// Places a polyp on the wall between two folds.
    pub fn place(&self, spec: PolypSpec, z: f32, theta: f32) -> PlacedPolyp {
        let (cx, cy) = self.centre(z);
        let r = self.radius(z, theta);
        let dir = v3(theta.cos(), theta.sin(), 0.0);
        let base = v3(cx, cy, z) + dir * r;
        let radius = spec.size_mm * 0.5 * MM;
        PlacedPolyp {
            spec,
            z,
            theta,
            base,
            normal: dir * -1.0,
            radius,
        }
    }

    /// A z near `z` in the middle between two folds (where polyps are easy to see).
    pub fn between_folds(&self, z: f32) -> f32 {
        (z / self.fold_period).floor() * self.fold_period + 0.02 * self.fold_period
    }
}

impl PlacedPolyp {
    pub fn base(&self) -> V3 {
        self.base
    }
    pub fn normal(&self) -> V3 {
        self.normal
    }
    pub fn radius(&self) -> f32 {
        self.radius
    }
    /// The middle of the polyp body (the point cameras look at).
    pub fn centre(&self) -> V3 {
        let up = match self.spec.paris {
            Paris::Ip => self.radius * 1.9,
            Paris::Is => self.radius * 0.6,
            _ => self.radius * 0.15,
        };
        self.base + self.normal * up
    }

    /// Signed distance to the polyp (positive outside).
    fn sdf(&self, p: V3) -> f32 {
        let q = p - self.base;
        let a = self.radius;
        let h = q.dot(self.normal);
        let lateral = (q - self.normal * h).len();
        let ellipsoid = |lat: f32, hh: f32, ra: f32, rh: f32| -> f32 {
            let k = ((lat / ra).powi(2) + (hh / rh).powi(2)).sqrt();
            (k - 1.0) * ra.min(rh)
        };
        let mut d = match self.spec.paris {
            Paris::Is => ellipsoid(lateral, h + 0.1 * a, 1.05 * a, 0.8 * a),
            Paris::IIa => ellipsoid(lateral, h + 0.05 * a, 1.1 * a, 0.32 * a),
            Paris::IIc => {
                let rim = ellipsoid(lateral, h, 1.1 * a, 0.36 * a);
                let pit = ellipsoid(lateral, h - 0.55 * a, 0.7 * a, 0.4 * a);
                rim.max(-pit)
            }
            Paris::Ip => {
                let head_h = h - 1.9 * a;
                let head = (lateral * lateral + head_h * head_h).sqrt() - a;
                let stalk_h = h.clamp(-0.2 * a, 1.9 * a);
                let stalk = (lateral * lateral + (h - stalk_h).powi(2)).sqrt() - 0.33 * a;
                head.min(stalk)
            }
        };
        // Lobulated surfaces: displace only near the surface, where it shows.
        if self.spec.lobulation > 0.0 && d < 0.3 * a {
            let s = 3.5 / a;
            let n = value_noise(q.x * s, q.y * s, q.z * s, self.spec.detail_seed) - 0.5;
            d -= n * self.spec.lobulation * a;
        }
        d
    }

    /// Albedo of the polyp surface at `p`.
    fn albedo(&self, p: V3) -> [f32; 3] {
        let spec = &self.spec;
        let q = (p - self.base) * (1.0 / self.radius);
        let seed = spec.detail_seed;
        let s = 6.0 * spec.pattern_scale;
        let mut c = spec.colour;
        let k = spec.pattern_contrast;
        let shade = match spec.surface {
            Surface::Dots => {
                let n = value_noise(q.x * s * 1.6, q.y * s * 1.6, q.z * s * 1.6, seed);
                if n > 0.72 {
                    1.0 + 0.22 * k
                } else {
                    1.0 - 0.04 * k
                }
            }
            Surface::Tubular => {
                let n = fbm(q.x * s, q.y * s * 0.5, q.z * s, 3, seed);
                let ridge = 1.0 - (2.0 * n - 1.0).abs();
                if ridge > 0.85 {
                    1.0 - 0.3 * k
                } else {
                    1.0 + 0.05 * k
                }
            }
            Surface::Cloudy => {
                1.0 + 0.12 * k * (fbm(q.x * 2.0, q.y * 2.0, q.z * 2.0, 3, seed) - 0.5)
            }
            Surface::Irregular => {
                let n = fbm(q.x * s * 0.7, q.y * s * 0.7, q.z * s * 0.7, 4, seed);
                1.0 + 0.55 * k * (n - 0.5)
            }
        };
        for ch in &mut c {
            *ch *= shade;
        }
        if spec.mucus > 0.0 {
            let m = (fbm(q.x * 1.5, q.y * 1.5, q.z * 1.5, 3, seed ^ 77) - 0.35).max(0.0) * 2.0;
            let w = (m * spec.mucus).min(0.85);
            let mucus = [0.92, 0.80, 0.45];
            for i in 0..3 {
                c[i] = c[i] * (1.0 - w) + mucus[i] * w;
            }
        }
        if spec.ulcer > 0.0 {
            let h = q.dot(self.normal);
            let lat = (q - self.normal * h).len();
            let edge = fbm(q.x * 3.0, q.y * 3.0, q.z * 3.0, 2, seed ^ 5) * 0.25;
            if lat < spec.ulcer + edge {
                let fibrin = [0.85, 0.78, 0.62];
                let blood = fbm(q.x * 5.0, q.y * 5.0, q.z * 5.0, 2, seed ^ 9);
                for i in 0..3 {
                    c[i] = if blood > 0.62 {
                        [0.45, 0.05, 0.05][i]
                    } else {
                        fibrin[i]
                    };
                }
            }
        }
        c
    }
}

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
        let g = 0.9 + 0.2 * grain;
        for ch in &mut c {
            *ch *= g;
        }
        let vd = self.colon.vessel_density;
        let vessel = ((ridge - (1.0 - 0.035 * vd)) / (0.035 * vd))
            .clamp(0.0, 1.0)
            .max(0.4 * ((fine - (1.0 - 0.05 * vd)) / (0.05 * vd)).clamp(0.0, 1.0));
        let vcol = [0.40, 0.04, 0.05];
        for i in 0..3 {
            c[i] = c[i] * (1.0 - 0.45 * vessel) + vcol[i] * 0.45 * vessel;
        }
        if let Some((colour, density, size)) = self.colon.spots {
            let n = value_noise(u * 4.0 / size, v * 4.0 / size, 9.1, seed ^ 0x3C3C);
            let w = ((n - (1.0 - 0.2 * density)) / 0.05).clamp(0.0, 1.0);
            for i in 0..3 {
                c[i] = c[i] * (1.0 - w) + colour[i] * w;
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
