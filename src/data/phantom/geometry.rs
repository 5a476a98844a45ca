//! The phantom's geometry: vectors, the colon as a bending tube with haustral folds, and
//! polyps as shapes on its wall (signed distances and surface colour).

use super::anatomy::{Paris, PolypSpec, Surface};
use super::noise::{fbm, value_noise};

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
    /// Amplitude of the mucosa's fine grain (1 = normal; inflamed mucosa is granular).
    pub grain: f32,
    /// Layers of focal spots on the mucosa (erosions, angioectasias, ulcers, fibrin...).
    pub spots: Vec<Spots>,
}

/// One layer of focal spots on the mucosa.
#[derive(Debug, Clone, Copy)]
pub struct Spots {
    pub colour: [f32; 3],
    /// Share of the wall covered, 0..1.
    pub density: f32,
    /// Spot size (1 = about a tenth of the circumference).
    pub size: f32,
    /// A rim of this colour around each spot (the red halo of an erosion or ulcer).
    pub rim: Option<[f32; 3]>,
    /// Stretch along the colon's axis: 1 round, > 1 streaks.
    pub stretch: f32,
}

impl Spots {
    pub fn round(colour: [f32; 3], density: f32, size: f32) -> Spots {
        Spots {
            colour,
            density,
            size,
            rim: None,
            stretch: 1.0,
        }
    }
}

/// A polyp placed on the colon wall.
#[derive(Debug, Clone)]
pub struct PlacedPolyp {
    pub spec: PolypSpec,
    /// Position along the colon.
    pub z: f32,
    /// Angle around the colon axis.
    pub theta: f32,
    pub(super) base: V3,
    pub(super) normal: V3,
    pub(super) radius: f32,
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
        let h = super::noise::hash3(ring, 17, 3, self.seed);
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
    pub(super) fn sdf(&self, p: V3) -> f32 {
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
    pub(super) fn albedo(&self, p: V3) -> [f32; 3] {
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
