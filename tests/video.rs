//! Video files in: `endotwin import video FILE` decodes an H.264 High-profile recording with
//! B-frames (as x264 writes by default) into every one of its frames, and refuses a truncated
//! or missing-decoder case with a clear message and nothing written.

use crate::common::{self, import, state};
use endotwin::store::{OpenMode, Store};
use std::path::{Path, PathBuf};
use std::process::Command;

/// ffmpeg on PATH, or None (then the test says so and stops; CI installs it and must have it).
pub(crate) fn ffmpeg() -> Option<PathBuf> {
    match endotwin::data::import::video::find_ffmpeg() {
        Ok(tools) => Some(tools.ffmpeg),
        Err(e) if std::env::var_os("CI").is_some() => panic!("CI must have ffmpeg: {e}"),
        Err(e) => {
            eprintln!("skipping the video import test: {e}");
            None
        }
    }
}

fn ffmpeg_run(ffmpeg: &Path, args: &[&str]) {
    let out = Command::new(ffmpeg)
        .args(["-v", "error", "-y"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// 30 frames of ffmpeg's moving test pattern at 12 fps, High profile, 3 B-frames, CABAC.
pub(crate) fn recording(ffmpeg: &Path, dir: &Path, name: &str, faststart: bool) -> PathBuf {
    let out = dir.join(name);
    let mut args = vec![
        "-f",
        "lavfi",
        "-i",
        "testsrc=size=128x96:rate=12",
        "-frames:v",
        "30",
        "-c:v",
        "libx264",
        "-profile:v",
        "high",
        "-bf",
        "3",
        "-pix_fmt",
        "yuv420p",
    ];
    if faststart {
        args.extend(["-movflags", "+faststart"]);
    }
    args.push(out.to_str().unwrap());
    ffmpeg_run(ffmpeg, &args);
    out
}

/// A program in ffmpeg's place in `dir` that prints nothing and exits with `code`, with the
/// real ffprobe beside it (ffprobe is found beside the program first).
pub(crate) fn fake_ffmpeg(ffmpeg: &Path, dir: &Path, code: i32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let fake = dir.join("fake-ffmpeg");
    std::fs::write(&fake, format!("#!/bin/sh\nexit {code}\n")).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(ffmpeg.with_file_name("ffprobe"), dir.join("ffprobe")).unwrap();
    fake
}

/// Mean absolute difference per channel value between two RGB images of one size.
fn mean_abs_diff(a: &image::RgbImage, b: &image::RgbImage) -> f64 {
    assert_eq!(a.dimensions(), b.dimensions());
    let sum: u64 = a
        .as_raw()
        .iter()
        .zip(b.as_raw())
        .map(|(x, y)| x.abs_diff(*y) as u64)
        .sum();
    sum as f64 / a.as_raw().len() as f64
}

#[test]
fn an_h264_high_profile_recording_comes_in_frame_by_frame() {
    let Some(ffmpeg) = ffmpeg() else { return };
    let src = tempfile::tempdir().unwrap();
    let lib = tempfile::tempdir().unwrap();
    let clip = recording(&ffmpeg, src.path(), "procedure.mp4", false);

    let ran = import(lib.path(), "video", &clip, &[]);
    assert!(ran.ok(), "{}", ran.text());
    assert!(ran.says("1 videos (30 frames)"), "{}", ran.text());

    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let videos = store.videos().unwrap();
    assert_eq!(videos.len(), 1);
    assert_eq!(videos[0].frame_count, 30);
    assert!((videos[0].fps - 12.0).abs() < 1e-6, "{}", videos[0].fps);
    // Frames in display order, the last one included (the decoder was flushed): each stored
    // frame looks like the one ffmpeg itself writes for that index, and not like its neighbour.
    let frames = store.video_frames(videos[0].id).unwrap();
    for index in [0usize, 13, 29] {
        let reference = src.path().join(format!("ref{index}.png"));
        let select = format!("select=eq(n\\,{index})");
        ffmpeg_run(
            &ffmpeg,
            &[
                "-i",
                clip.to_str().unwrap(),
                "-vf",
                &select,
                "-frames:v",
                "1",
                reference.to_str().unwrap(),
            ],
        );
        let want = image::open(&reference).unwrap().to_rgb8();
        let got = |i: usize| {
            image::open(store.media_path(&frames[i].1))
                .unwrap()
                .to_rgb8()
        };
        assert_eq!(frames[index].0, index as i64);
        let same = mean_abs_diff(&got(index), &want);
        let other = mean_abs_diff(&got(if index == 0 { 1 } else { index - 1 }), &want);
        assert!(same < 3.0, "frame {index} differs by {same:.2} per value");
        assert!(other > same, "frame {index}: {other:.2} vs {same:.2}");
    }
    drop(store);

    // The same file again changes nothing.
    let before = state(lib.path());
    let again = import(lib.path(), "video", &clip, &[]);
    assert!(again.ok(), "{}", again.text());
    assert!(again.says("did not change"), "{}", again.text());
    assert_eq!(state(lib.path()), before);
}

#[test]
fn a_truncated_recording_is_refused_and_nothing_is_written() {
    let Some(ffmpeg) = ffmpeg() else { return };
    let src = tempfile::tempdir().unwrap();
    let lib = tempfile::tempdir().unwrap();
    let whole = recording(&ffmpeg, src.path(), "whole.mp4", false);
    common::png(&src.path().join("frames/a.png"), 32, 24, 3);
    assert!(import(lib.path(), "images", &src.path().join("frames"), &[]).ok());
    let before = state(lib.path());

    // Cut off before the index (a recorder that died): no moov atom.
    let bytes = std::fs::read(&whole).unwrap();
    let cut = src.path().join("cut.mp4");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let ran = import(lib.path(), "video", &cut, &[]);
    assert!(!ran.ok(), "{}", ran.text());
    assert!(ran.says("moov") && ran.says("cut.mp4"), "{}", ran.text());
    assert_eq!(state(lib.path()), before);

    // Index first (faststart) but the frame data cut short: fewer frames than listed.
    let fast = recording(&ffmpeg, src.path(), "fast.mp4", true);
    let bytes = std::fs::read(&fast).unwrap();
    let short = src.path().join("short.mp4");
    std::fs::write(&short, &bytes[..bytes.len() * 6 / 10]).unwrap();
    let ran = import(lib.path(), "video", &short, &[]);
    assert!(!ran.ok(), "{}", ran.text());
    assert!(ran.says("lists 30 frames"), "{}", ran.text());
    assert_eq!(state(lib.path()), before);

    // Without ffmpeg the user is told what to install.
    let mut c = common::endotwin(lib.path());
    c.env("PATH", "").env_remove("ENDOTWIN_FFMPEG");
    c.arg("import").arg("video").arg(&whole);
    let ran = common::run(c);
    assert!(!ran.ok(), "{}", ran.text());
    assert!(ran.says("needs the ffmpeg program"), "{}", ran.text());
    assert_eq!(state(lib.path()), before);
}

#[test]
fn sidecar_boxes_go_onto_an_imported_recording_and_make_its_tracklets() {
    let Some(ffmpeg) = ffmpeg() else { return };
    let src = tempfile::tempdir().unwrap();
    let lib = tempfile::tempdir().unwrap();
    let clip = recording(&ffmpeg, src.path(), "own.mp4", false);
    assert!(import(lib.path(), "video", &clip, &[]).ok());
    let code = Store::open(lib.path(), OpenMode::Existing)
        .unwrap()
        .videos()
        .unwrap()[0]
        .code
        .clone();

    // Polyp "p1" in every frame, one box far outside the frame, one on a frame the video
    // does not have.
    let images: Vec<_> = (0..31)
        .map(|f| serde_json::json!({"id": f, "frame_id": f}))
        .collect();
    let mut annotations: Vec<_> = (0..30)
        .map(|f| serde_json::json!({"image_id": f, "bbox": [20, 20, 30, 30], "identity_id": "p1", "histology": "AD"}))
        .collect();
    annotations
        .push(serde_json::json!({"image_id": 30, "bbox": [10, 10, 20, 20], "identity_id": "p1"}));
    annotations
        .push(serde_json::json!({"image_id": 5, "bbox": [500, 500, 20, 20], "identity_id": "p2"}));
    let sidecar = src.path().join("boxes.json");
    std::fs::write(
        &sidecar,
        serde_json::json!({"images": images, "annotations": annotations}).to_string(),
    )
    .unwrap();
    let onto = ["--onto-video", code.as_str()];
    let ran = import(lib.path(), "coco", &sidecar, &onto);
    assert!(ran.ok(), "{}", ran.text());
    assert!(ran.says("30 boxes"), "{}", ran.text());
    assert!(
        ran.says("frame 30") && ran.says("no such frame"),
        "{}",
        ran.text()
    );
    assert!(ran.says("frame 5") && ran.says("p2"), "{}", ran.text());

    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let videos = store.videos().unwrap();
    assert_eq!(videos.len(), 1, "the boxes went onto the same video");
    assert_eq!(videos[0].frame_count, 30);
    let tracklets = store.video_tracklets(videos[0].id).unwrap();
    assert_eq!(tracklets.len(), 1);
    assert_eq!((tracklets[0].first_frame, tracklets[0].last_frame), (0, 29));
    let polyp = store
        .polyp(tracklets[0].polyp_id.unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(polyp.histology.as_deref(), Some("adenoma"));
    drop(store);

    // The same sidecar again changes nothing; onto a video the library lacks is refused.
    let before = state(lib.path());
    let again = import(lib.path(), "coco", &sidecar, &onto);
    assert!(again.says("did not change"), "{}", again.text());
    let missing = import(lib.path(), "coco", &sidecar, &["--onto-video", "nope"]);
    assert!(
        !missing.ok() && missing.says("no video 'nope'"),
        "{}",
        missing.text()
    );
    assert_eq!(state(lib.path()), before);
}
