//! Hostile round 17 (issue 43): each finding through the path a user takes, refused or said
//! by name, with nothing changed where something was refused.

use crate::common::et;
use crate::hostile::library_with_cases;
use crate::store_safety::{files, run_within};

/// R3: a video header whose duration agrees with its 10^11 frames was believed, and an
/// endless decoder read for minutes without a word: refused before any frame.
#[cfg(unix)]
#[test]
fn a_video_announcing_more_frames_than_an_import_reads_is_refused_before_decoding() {
    let (lib, src) = library_with_cases();
    let before = files(lib.path());
    let tools = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| crate::guards::script(&tools.path().join(name), text);
    write(
        "ffprobe",
        "#!/bin/sh\necho '{\"streams\":[{\"codec_name\":\"h264\",\"width\":160,\"height\":120,\"avg_frame_rate\":\"10/1\",\"nb_frames\":\"99999999999\"}],\"format\":{\"duration\":\"9999999999.9\"}}'\n",
    );
    write("ffmpeg", "#!/bin/sh\nexec cat /dev/zero\n");
    let video = src.path().join("forged.mp4");
    std::fs::write(&video, b"\0\0\0\x18ftypmp42 not really").unwrap();
    let mut c = et(lib.path(), &["import", "video"]);
    c.arg(&video)
        .env("ENDOTWIN_FFMPEG", tools.path().join("ffmpeg"));
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("the video announces 99999999999 frames; an import reads at most 180000"),
        "{}",
        r.text()
    );
    assert_eq!(files(lib.path()), before);
}
