//! Lattice value noise and its fractal sum: the phantom's mucosa, folds and vessels.

/// Integer hash of a lattice point, for noise.
#[inline]
pub fn hash3(x: i32, y: i32, z: i32, seed: u32) -> u32 {
    let mut h = (x as u32).wrapping_mul(0x8DA6_B343)
        ^ (y as u32).wrapping_mul(0xD816_3841)
        ^ (z as u32).wrapping_mul(0xCB1A_B31F)
        ^ seed.wrapping_mul(0x165_667B1);
    h ^= h >> 13;
    h = h.wrapping_mul(0x5BD1_E995);
    h ^ (h >> 15)
}

/// Smooth value noise in [0, 1] on a unit lattice.
pub fn value_noise(x: f32, y: f32, z: f32, seed: u32) -> f32 {
    let (xi, yi, zi) = (x.floor(), y.floor(), z.floor());
    let (fx, fy, fz) = (x - xi, y - yi, z - zi);
    let s = |t: f32| t * t * (3.0 - 2.0 * t);
    let (sx, sy, sz) = (s(fx), s(fy), s(fz));
    let (xi, yi, zi) = (xi as i32, yi as i32, zi as i32);
    let v = |dx: i32, dy: i32, dz: i32| {
        (hash3(xi + dx, yi + dy, zi + dz, seed) & 0xFFFF) as f32 / 65535.0
    };
    let lerp = |a: f32, b: f32, t: f32| a + (b - a) * t;
    let x00 = lerp(v(0, 0, 0), v(1, 0, 0), sx);
    let x10 = lerp(v(0, 1, 0), v(1, 1, 0), sx);
    let x01 = lerp(v(0, 0, 1), v(1, 0, 1), sx);
    let x11 = lerp(v(0, 1, 1), v(1, 1, 1), sx);
    lerp(lerp(x00, x10, sy), lerp(x01, x11, sy), sz)
}

/// Fractal sum of `octaves` value-noise layers, in [0, 1].
pub fn fbm(x: f32, y: f32, z: f32, octaves: u32, seed: u32) -> f32 {
    let mut sum = 0.0;
    let mut amp = 0.5;
    let mut freq = 1.0;
    let mut norm = 0.0;
    for o in 0..octaves {
        sum += amp * value_noise(x * freq, y * freq, z * freq, seed.wrapping_add(o * 7919));
        norm += amp;
        amp *= 0.5;
        freq *= 2.03;
    }
    sum / norm
}
