//! The twin encoders' input: the crop follows the polyp, the on-screen display is blacked out,
//! and training and inference cut one image into the very same tensor.

use burn::tensor::Device;
use endotwin::data::phantom::{self, PhantomConfig, Split};
use endotwin::model::preprocess::{Focus, TwinInput, imagenet_tensor, mask_box};
use endotwin::plumbing::Progress;
use endotwin::store::{OpenMode, Store};
use image::{DynamicImage, GrayImage, Luma, Rgb, RgbImage};

/// A 200 x 200 frame with a white square "polyp" at (x, y), side 20, and its mask.
fn frame_with_polyp(x: u32, y: u32) -> (DynamicImage, GrayImage) {
    let mut img = RgbImage::from_pixel(200, 200, Rgb([120, 40, 30]));
    let mut mask = GrayImage::new(200, 200);
    for dy in 0..20 {
        for dx in 0..20 {
            img.put_pixel(x + dx, y + dy, Rgb([250, 250, 250]));
            mask.put_pixel(x + dx, y + dy, Luma([255]));
        }
    }
    (DynamicImage::ImageRgb8(img), mask)
}

#[test]
fn the_crop_centres_on_the_polyp_wherever_its_mask_puts_it() {
    let input = TwinInput::new(32);
    for (x, y) in [(60, 70), (110, 50), (90, 100)] {
        let (image, mask) = frame_with_polyp(x, y);
        assert_eq!(
            mask_box(&mask),
            Some([x as f32, y as f32, 20.0, 20.0]),
            "the mask's box"
        );
        let focus = Focus::of_mask(Some(&mask));
        let (cx, cy, side) = input.crop_rect(200, 200, focus);
        // 2.5 x the box's side (50 px) beats the floor of 0.3 x 200 = 60 px: 60 px, centred.
        assert_eq!(side, 60);
        assert_eq!((cx + side / 2, cy + side / 2), (x + 10, y + 10));
        // The crop's centre pixel is the polyp's.
        let cut = input.apply(&image, focus);
        assert_eq!(cut.get_pixel(16, 16), &Rgb([250, 250, 250]));
    }
    // Near the border the crop slides inside the image instead of leaving it.
    let (_, mask) = frame_with_polyp(0, 0);
    let (cx, cy, side) = input.crop_rect(200, 200, Focus::of_mask(Some(&mask)));
    assert_eq!((cx, cy, side), (0, 0, 60));
    // Without a mask: the centred field of view.
    assert_eq!(input.crop_rect(300, 200, Focus::FieldOfView), (50, 0, 200));
}

#[test]
fn the_on_screen_display_in_the_corners_is_blacked_out() {
    let white = DynamicImage::ImageRgb8(RgbImage::from_pixel(100, 100, Rgb([255, 255, 255])));
    let cut = TwinInput::new(100).apply(&white, Focus::FieldOfView);
    assert_eq!(cut.get_pixel(2, 2), &Rgb([0, 0, 0]), "a corner");
    assert_eq!(cut.get_pixel(97, 97), &Rgb([0, 0, 0]), "a corner");
    assert_eq!(cut.get_pixel(50, 50), &Rgb([255, 255, 255]), "the centre");
    let kept = TwinInput {
        blackout: false,
        ..TwinInput::new(100)
    }
    .apply(&white, Focus::FieldOfView);
    assert_eq!(
        kept.get_pixel(2, 2),
        &Rgb([255, 255, 255]),
        "ablation keeps it"
    );
}

#[test]
fn training_and_inference_cut_one_view_into_the_same_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path(), OpenMode::CreateIfMissing).unwrap();
    let cfg = PhantomConfig {
        seed: 3,
        split: Split::Validation,
        polyps: 2,
        views_per_polyp: 4,
        videos: 0,
        frames_per_video: 0,
        background_frames: 0,
        frames_per_exam: 0,
        capsule_images: 0,
        image_size: 128,
        video_size: 64,
    };
    phantom::generate(&mut store, &cfg, &Progress::new()).unwrap();
    let input = TwinInput::new(48);
    let (samples, _) = endotwin::train::data::polyp_view_samples(&store, &input).unwrap();
    let device = Device::flex();
    let polyp = &store.polyps().unwrap()[0];
    let views = store.polyp_views(polyp.id).unwrap();
    for (i, view) in views.iter().enumerate() {
        let (image, focus) = endotwin::twins::load_view(&store, view).unwrap();
        assert!(matches!(focus, Focus::Box(_)), "phantom views have masks");
        let at_inference = input.batch(&[(image, focus)], &device);
        let at_training = imagenet_tensor(std::slice::from_ref(&samples[i].image), &device);
        at_inference
            .into_data()
            .assert_eq(&at_training.into_data(), true);
    }
}
