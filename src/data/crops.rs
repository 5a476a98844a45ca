//! Detection crops from a frame and its polyp mask: the square around the polyp and a window
//! of the same side with no polyp pixel. `eval real` scores a detector on exactly these pairs,
//! and `train detector-backbone` learns from them (at more sides), so both cut alike.

use crate::plumbing::Rng;
use image::{DynamicImage, GrayImage};

/// The mask's polyp box `(x0, y0, x1, y1)` (inclusive), None for a mask with no polyp pixel.
pub fn polyp_box(mask: &GrayImage) -> Option<(u32, u32, u32, u32)> {
    let (w, h) = mask.dimensions();
    let (mut x0, mut y0, mut x1, mut y1) = (w, h, 0, 0);
    for (x, y, p) in mask.enumerate_pixels() {
        if p[0] > 127 {
            (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x), y1.max(y));
        }
    }
    (x1 >= x0 && y1 >= y0).then_some((x0, y0, x1, y1))
}

/// The square around the polyp: the box's longer side times `scale` (at least 32 px, at most
/// the frame's shorter side), centred on the box and moved inside the frame: `(x, y, side)`.
pub fn polyp_square(mask: &GrayImage, scale: f32) -> Option<(u32, u32, u32)> {
    let (w, h) = mask.dimensions();
    let (x0, y0, x1, y1) = polyp_box(mask)?;
    let box_side = (x1 - x0).max(y1 - y0) + 1;
    let side = ((box_side as f32 * scale).round() as u32)
        .max(32)
        .min(w.min(h));
    let cx = (x0 + x1) / 2;
    let cy = (y0 + y1) / 2;
    let px = cx.saturating_sub(side / 2).min(w - side);
    let py = cy.saturating_sub(side / 2).min(h - side);
    Some((px, py, side))
}

/// A window of `side` with no polyp pixel, drawn with `rng` among the free positions on a
/// grid of a quarter side (pixels checked every other row and column); None when none is free.
pub fn free_window(mask: &GrayImage, side: u32, rng: &mut Rng) -> Option<(u32, u32)> {
    let (w, h) = mask.dimensions();
    if side == 0 || side > w || side > h {
        return None;
    }
    let step = (side / 4).max(1);
    let mut free = Vec::new();
    let mut y = 0;
    while y + side <= h {
        let mut x = 0;
        while x + side <= w {
            let clear = (y..y + side).step_by(2).all(|yy| {
                (x..x + side)
                    .step_by(2)
                    .all(|xx| mask.get_pixel(xx, yy)[0] <= 127)
            });
            if clear {
                free.push((x, y));
            }
            x += step;
        }
        y += step;
    }
    if free.is_empty() {
        return None;
    }
    Some(*rng.pick(&free))
}

/// The polyp's square (its box's longer side, at least 32 px) and a same-size polyp-free
/// window of the same frame: the pair `eval real` scores a detector on.
pub fn polyp_and_free_window(
    image: &DynamicImage,
    mask: &GrayImage,
    rng: &mut Rng,
) -> Option<(DynamicImage, DynamicImage)> {
    let (px, py, side) = polyp_square(mask, 1.0)?;
    let polyp = image.crop_imm(px, py, side, side);
    let (bx, by) = free_window(mask, side, rng)?;
    Some((polyp, image.crop_imm(bx, by, side, side)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask_with_box(w: u32, h: u32, x0: u32, y0: u32, side: u32) -> GrayImage {
        GrayImage::from_fn(w, h, |x, y| {
            let inside = (x0..x0 + side).contains(&x) && (y0..y0 + side).contains(&y);
            image::Luma([if inside { 255 } else { 0 }])
        })
    }

    #[test]
    fn the_square_holds_the_polyp_and_the_window_holds_none_of_it() {
        let mask = mask_with_box(200, 100, 20, 30, 40);
        // The box's side, centred on the box's integer centre (eval real's crops since #34:
        // a 40 px box at 20..59 gives 19..58).
        let (x, y, side) = polyp_square(&mask, 1.0).unwrap();
        assert_eq!((x, y, side), (19, 29, 40));
        let (x2, _, side2) = polyp_square(&mask, 2.0).unwrap();
        assert_eq!(
            (x2, side2),
            (0, 80),
            "twice the side, moved inside the frame"
        );
        let mut rng = Rng::new(3);
        for _ in 0..20 {
            let (bx, by) = free_window(&mask, 40, &mut rng).unwrap();
            let clear =
                (by..by + 40).all(|yy| (bx..bx + 40).all(|xx| mask.get_pixel(xx, yy)[0] == 0));
            assert!(clear, "window at {bx},{by} touches the polyp");
        }
        assert!(
            free_window(&mask, 100, &mut rng).is_some_and(|(x, y)| x >= 60 && y == 0),
            "right of the polyp: the only room for a window that large"
        );
        let narrow = mask_with_box(120, 100, 20, 30, 40);
        assert_eq!(
            free_window(&narrow, 80, &mut rng),
            None,
            "no free window that large"
        );
        assert_eq!(polyp_box(&GrayImage::new(10, 10)), None);
    }
}
