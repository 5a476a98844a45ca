//! Capsule-style frames of the small bowel with their free-text findings (METHODS §2).
//!
//! Capsule data comes by patient: each patient has a few findings of their own (an IBD patient
//! erosions and ulcers, another angioectasias), and most of their frames are normal, so many
//! frames share one caption, as in CAPTIV8. Every entity of `assets/capsule_entities.toml` has
//! its own visual cue, texture or shape rather than colour alone (exposure and white balance
//! vary per frame, so colour is never a clean signal), and a combination shows the cues of all
//! its parts:
//!
//! | entity | cue |
//! | --- | --- |
//! | polyp | one raised dome with a pit pattern |
//! | pseudopolyp | a cluster of 3-5 small finger-like bumps with white caps |
//! | lipoma | one large smooth yellow dome |
//! | hemorrhoid | two or three broad bluish cushions |
//! | angioectasia | small bright red spots |
//! | biopsy lesion | few dark-red craters with a white rim |
//! | erosion | many small white spots with a red halo |
//! | ulcer | few large white-yellow patches with a red halo |
//! | fibrin | yellow-white streaks along the bowel |
//! | edema | pale mucosa, thick folds, no visible vessels |
//! | reduced vascularity | no vessel pattern at all |
//! | hyperemia | redder mucosa with a denser vessel pattern |
//! | inflammation | coarse granular mucosa with dark red blotches |
//! | blood | a pool of red fluid |

use super::anatomy::{Paris, Pathology, PolypSpec, Surface};
use super::geometry::{PlacedPolyp, Spots, v3};
use super::render::{self, Camera, Scene};
use super::report::capsule_finding_text;
use super::write::{CapsulePlan, encode_jpeg};
use super::{Light, draw_colon, view_camera, view_look};
use crate::plumbing::Rng;

/// Frames per capsule patient (the last patient may have fewer).
pub const FRAMES_PER_PATIENT: usize = 24;

/// The findings a patient can have (entity sets, canonical names) and how common each is.
/// The rare categories (lipoma, hemorrhoid, biopsy lesion) are weighted up from how rare they
/// are in real capsule series so that each has hundreds of frames across the phantom's splits
/// (at 3, 3 and 3 + 1 the 2400-frame training split had 35, 80 and 53: too few to learn or to
/// score a category on).
pub const FINDINGS: &[(&[&str], f32)] = &[
    (&["erosion"], 8.0),
    (&["ulcer"], 5.0),
    (&["ulcer", "fibrin"], 4.0),
    (&["erosion", "fibrin"], 3.0),
    (&["hyperemia"], 5.0),
    (&["edema", "hyperemia"], 3.0),
    (&["inflammation"], 5.0),
    (&["inflammation", "ulcer"], 3.0),
    (&["inflammation", "reduced vascularity"], 3.0),
    (&["edema"], 2.0),
    (&["reduced vascularity"], 2.0),
    (&["fibrin"], 2.0),
    (&["blood"], 4.0),
    (&["angioectasia"], 7.0),
    (&["angioectasia", "blood"], 2.0),
    (&["polyp"], 7.0),
    (&["polyp", "erosion"], 1.5),
    (&["pseudopolyp"], 3.0),
    (&["inflammation", "pseudopolyp"], 2.0),
    (&["lipoma"], 8.0),
    (&["hemorrhoid"], 8.0),
    (&["biopsy lesion"], 6.0),
    (&["biopsy lesion", "blood"], 2.0),
];

/// Share of a patient's frames that show none of their findings.
const NORMAL_SHARE: f32 = 0.4;

/// The frames of capsule patient `patient`: each frame normal or one of the patient's 1-3
/// findings. `r` is the patient's own stream.
pub(super) fn render_capsule_patient(
    r: &mut Rng,
    size: u32,
    patient: usize,
    frames: usize,
) -> Vec<CapsulePlan> {
    let weights: Vec<f32> = FINDINGS.iter().map(|(_, w)| *w).collect();
    let count = 1 + r.weighted(&[0.5, 0.35, 0.15]);
    let mut own: Vec<usize> = Vec::new();
    while own.len() < count {
        let f = r.weighted(&weights);
        if !own.contains(&f) {
            own.push(f);
        }
    }
    (0..frames)
        .map(|k| {
            let mut fr = r.fork(k as u64 + 1);
            let entities: Vec<&'static str> = if fr.chance(NORMAL_SHARE) {
                Vec::new()
            } else {
                FINDINGS[own[fr.below(own.len())]].0.to_vec()
            };
            let salt = (patient * FRAMES_PER_PATIENT + k) as u32;
            render_capsule(&mut fr, size, patient, &entities, salt)
        })
        .collect()
}

/// One capsule frame showing `entities` (none: normal mucosa).
pub(super) fn render_capsule(
    r: &mut Rng,
    size: u32,
    patient: usize,
    entities: &[&'static str],
    salt: u32,
) -> CapsulePlan {
    let has = |e: &str| entities.contains(&e);
    let mut colon = draw_colon(r);
    // Small bowel: narrower folds, pinker mucosa.
    colon.fold_period *= 0.6;
    colon.mucosa = [
        r.range(0.74, 0.86),
        r.range(0.28, 0.36),
        r.range(0.18, 0.26),
    ];
    let mut look = view_look(r, &Light::per_frame());
    look.instrument = None;
    if has("hyperemia") {
        colon.mucosa = [0.86, 0.17, 0.12];
        colon.vessel_density = r.range(1.8, 2.4);
    }
    if has("edema") {
        colon.mucosa = [0.88, 0.52, 0.44];
        colon.fold_width *= 2.2;
        colon.fold_depth *= 1.4;
        colon.vessel_density = 0.0;
    }
    if has("reduced vascularity") {
        colon.vessel_density = 0.0;
    }
    if has("inflammation") {
        colon.grain = 4.0;
        colon.spots.push(Spots::round([0.45, 0.05, 0.05], 0.8, 1.6));
    }
    if has("erosion") {
        colon.spots.push(Spots {
            rim: Some([0.7, 0.05, 0.05]),
            ..Spots::round([0.96, 0.93, 0.86], r.range(0.6, 1.0), r.range(0.25, 0.4))
        });
    }
    if has("ulcer") {
        colon.spots.push(Spots {
            rim: Some([0.65, 0.06, 0.05]),
            ..Spots::round([0.93, 0.88, 0.62], r.range(0.35, 0.55), r.range(1.0, 1.5))
        });
    }
    if has("fibrin") {
        colon.spots.push(Spots {
            stretch: 5.0,
            ..Spots::round([0.95, 0.90, 0.70], r.range(0.6, 0.9), r.range(0.25, 0.35))
        });
    }
    if has("angioectasia") {
        colon.spots.push(Spots::round(
            [0.95, 0.02, 0.04],
            r.range(0.3, 0.55),
            r.range(0.15, 0.25),
        ));
    }
    if has("biopsy lesion") {
        colon.spots.push(Spots {
            rim: Some([0.97, 0.95, 0.9]),
            ..Spots::round([0.30, 0.02, 0.03], r.range(0.15, 0.25), r.range(0.5, 0.7))
        });
    }
    if has("blood") {
        look.fluid = Some(r.range(0.45, 0.7));
        look.fluid_colour = [0.55, 0.02, 0.02];
    }
    let z = 3.0;
    let mut polyps: Vec<PlacedPolyp> = Vec::new();
    let theta = r.range(0.0, std::f32::consts::TAU);
    let at = colon.between_folds(z + 1.0);
    if has("polyp") {
        let pathology = *r.pick(&[Pathology::Hyperplastic, Pathology::AdenomaLow]);
        polyps.push(colon.place(PolypSpec::draw(pathology, r), at, theta));
    }
    if has("lipoma") {
        let mut spec = PolypSpec::draw(Pathology::Hyperplastic, r);
        spec.paris = Paris::Is;
        spec.size_mm = r.range(14.0, 22.0);
        spec.colour = [0.88, 0.72, 0.34];
        spec.surface = Surface::Cloudy;
        spec.pattern_contrast = 0.1;
        spec.lobulation = 0.0;
        spec.ulcer = 0.0;
        spec.mucus = 0.0;
        polyps.push(colon.place(spec, at, theta + 0.8 * polyps.len() as f32));
    }
    if has("hemorrhoid") {
        for k in 0..2 + r.below(2) {
            let mut spec = PolypSpec::draw(Pathology::Hyperplastic, r);
            spec.paris = Paris::IIa;
            spec.size_mm = r.range(16.0, 24.0);
            spec.colour = [0.42, 0.20, 0.42];
            spec.surface = Surface::Cloudy;
            spec.pattern_contrast = 0.2;
            spec.ulcer = 0.0;
            spec.mucus = 0.0;
            polyps.push(colon.place(spec, at + 0.1 * k as f32, theta + 1.1 * k as f32));
        }
    }
    if has("pseudopolyp") {
        for k in 0..3 + r.below(3) {
            let mut spec = PolypSpec::draw(Pathology::Hyperplastic, r);
            spec.paris = Paris::Ip;
            spec.size_mm = r.range(3.0, 6.0);
            spec.colour = [
                colon.mucosa[0] * 1.05,
                colon.mucosa[1] * 1.1,
                colon.mucosa[2] * 1.1,
            ];
            spec.mucus = 0.8;
            spec.ulcer = 0.0;
            let dz = r.range(-0.25, 0.25);
            polyps.push(colon.place(spec, at + dz, theta + 0.35 * k as f32));
        }
    }
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
        caption: capsule_finding_text(entities, r),
        patient,
        entities: entities.to_vec(),
    }
}
