//! Capsule-style frames of the small bowel with their finding captions.

use super::anatomy::{Pathology, PolypSpec};
use super::geometry::v3;
use super::render::{self, Camera, Scene};
use super::report::{self, CapsuleFinding};
use super::write::{CapsulePlan, encode_jpeg};
use super::{draw_colon, view_camera, view_look};
use crate::plumbing::Rng;

pub(super) fn render_capsule(r: &mut Rng, size: u32, salt: u32) -> CapsulePlan {
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
