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
    let r = crate::round5::import_with_an_endless_decoder(
        "{\"streams\":[{\"codec_name\":\"h264\",\"width\":160,\"height\":120,\"avg_frame_rate\":\"10/1\",\"nb_frames\":\"99999999999\"}],\"format\":{\"duration\":\"9999999999.9\"}}",
    );
    assert!(
        !r.ok() && r.says("the video announces 99999999999 frames; an import reads at most 180000"),
        "{}",
        r.text()
    );
}

/// N1: `eval captions --frames 0` (and `eval tracklets --videos 0`, `--frames-per-video 0`)
/// generated an empty split, then advised importing data the user never had to give.
#[test]
fn generated_splits_that_could_hold_nothing_are_refused_by_their_option() {
    let (lib, _src) = library_with_cases();
    for (args, option) in [
        (
            &["eval", "captions", "--frames", "0"][..],
            "--frames <FRAMES>",
        ),
        (&["eval", "tracklets", "--videos", "0"], "--videos <VIDEOS>"),
        (
            &["eval", "tracklets", "--frames-per-video", "29"],
            "--frames-per-video <FRAMES_PER_VIDEO>",
        ),
    ] {
        let r = run_within(et(lib.path(), args), 60);
        assert!(
            !r.ok() && r.says(option) && !r.says("generating"),
            "{args:?}: {}",
            r.text()
        );
    }
}

/// N2: two argument refusals printed a server URL's password in clear (every connection
/// error already hid it).
#[test]
fn a_servers_password_is_never_printed_by_an_argument_refusal() {
    let (lib, _src) = library_with_cases();
    let url = "postgres://alice:S3cretPW@127.0.0.1:1/endo";
    let lib_arg = lib.path().to_str().unwrap();
    for args in [
        &["info", "--library", url][..],
        &["library", "copy", url, "copy-here"],
    ] {
        let r = run_within(et(lib.path(), args), 60);
        assert!(
            !r.ok() && !r.says("S3cretPW") && r.says("postgres://alice:***@127.0.0.1:1/endo"),
            "{args:?}: {}",
            r.text()
        );
        assert!(r.says(lib_arg), "{args:?}: {}", r.text());
    }
}

/// N3: a REAL-Colon video given on two rows of video_info.csv was counted twice in the summary
/// (the library held it once) and its second fps dropped without a word.
#[test]
fn a_real_colon_video_described_twice_is_named_and_counted_once() {
    let lib = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("rc");
    crate::common::png(&root.join("v1_frames/v1_1.png"), 32, 32, 1);
    crate::common::png(&root.join("v1_frames/v1_2.png"), 32, 32, 2);
    std::fs::create_dir_all(root.join("v1_annotations")).unwrap();
    std::fs::write(
        root.join("v1_annotations/v1_1.xml"),
        "<annotation><object><name>lesion</name><unique_id>L1</unique_id>\
         <bndbox><xmin>2</xmin><ymin>2</ymin><xmax>20</xmax><ymax>20</ymax></bndbox></object></annotation>",
    )
    .unwrap();
    std::fs::write(
        root.join("video_info.csv"),
        "unique_video_name,fps\nv1,25\nv1,30\n",
    )
    .unwrap();
    std::fs::write(
        root.join("lesion_info.csv"),
        "unique_object_id,size [mm],histology\nL1,5,AD\n",
    )
    .unwrap();
    let mut c = et(lib.path(), &["import", "real-colon"]);
    c.arg(&root);
    let r = run_within(c, 60);
    assert!(r.ok(), "{}", r.text());
    for says in [
        "row 3: video v1 is described again with another fps (25 there, 30 here); only row 2 is used",
        "1 skipped; 1 examinations, 1 polyps, 1 videos (2 frames), 1 boxes",
    ] {
        assert!(r.says(says), "{says}\n{}", r.text());
    }
}

/// N6: `train detector-backbone --whole-frames 2^64-1` was taken and grew memory without a
/// line (every other count of the recipe is bounded).
#[test]
fn whole_frame_copies_past_the_bound_are_refused_before_any_work() {
    let Some(backbone) = crate::common::pretrained("mobilenetv2_imagenet_features.safetensors")
    else {
        return;
    };
    let (lib, _src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    let r = run_within(
        et(
            lib.path(),
            &[
                "train",
                "detector-backbone",
                "--backbone",
                backbone.to_str().unwrap(),
                "--out",
                out.path().to_str().unwrap(),
                "--whole-frames",
                "18446744073709551615",
            ],
        ),
        60,
    );
    assert!(
        !r.ok() && r.says("--whole-frames 18446744073709551615: from 0 (crops only) to 64"),
        "{}",
        r.text()
    );
    assert!(!r.says("cutting"), "{}", r.text());
}

/// N8: `model report --capsule-frames 1` saved a report of perfect figures with intervals of
/// zero width from one frame, without a word.
#[test]
fn a_report_on_a_generated_split_too_small_to_say_anything_is_refused() {
    let (lib, _src) = library_with_cases();
    let card = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/captions.json");
    for (option, value) in [
        ("--capsule-frames", "1"),
        ("--polyps", "3"),
        ("--videos", "0"),
        ("--frames", "2"),
    ] {
        let mut c = et(lib.path(), &["model", "report", option, value, "--card"]);
        c.arg(&card);
        let r = run_within(c, 60);
        assert!(
            !r.ok() && r.says(&format!("invalid value '{value}' for '{option}")),
            "{option} {value}: {}",
            r.text()
        );
        assert!(!r.says("held out"), "{}", r.text());
    }
}

/// N10: a JSONL export whose two polyp codes were swapped was applied (each line's labels onto
/// the other polyp; its views, which named the right one, only said to differ).
#[test]
fn a_jsonl_line_whose_views_are_another_polyps_is_not_used() {
    let lib = crate::round15::sample_copy();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("labels.jsonl");
    let arg = file.to_str().unwrap();
    let r = run_within(
        et(
            lib.path(),
            &["labels", "export", "--format", "jsonl", "--out", arg],
        ),
        60,
    );
    assert!(r.ok(), "{}", r.text());
    let text = std::fs::read_to_string(&file).unwrap();
    let mut lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &serde_json::Value| !l["views"].as_array().unwrap().is_empty())
        .take(3)
        .collect();
    assert_eq!(
        lines.len(),
        3,
        "three polyps with views (the third line is left as exported)"
    );
    let (a, b) = (lines[0]["polyp"].clone(), lines[1]["polyp"].clone());
    lines[0]["polyp"] = b.clone();
    lines[1]["polyp"] = a.clone();
    let swapped: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(&file, swapped.join("\n") + "\n").unwrap();
    let before = files(lib.path());
    let r = run_within(
        et(
            lib.path(),
            &["labels", "import", arg, "--apply", "--who", "dr. test"],
        ),
        60,
    );
    for (line, named, owner) in [(1, &b, &a), (2, &a, &b)] {
        let says = format!(
            "line {line}, polyp `{}`: \"views\" differs from the library's",
            named.as_str().unwrap()
        );
        let whose = format!(
            "the views listed are polyp `{}`'s: were the codes swapped?",
            owner.as_str().unwrap()
        );
        assert!(r.says(&says) && r.says(&whose), "{}", r.text());
    }
    assert!(
        !r.ok() && r.says("the line is not used") && r.says("every difference was skipped"),
        "{}",
        r.text()
    );
    assert_eq!(files(lib.path()), before);
}

/// N13: `bench library` on a library that is not indexed measured no twin query, without a
/// word (`p95_twin_ms: null`).
#[test]
fn a_library_bench_without_an_index_says_no_twin_query_ran() {
    let (lib, _src) = library_with_cases();
    let r = run_within(
        et(
            lib.path(),
            &[
                "bench",
                "library",
                "--changes-this-library",
                "--clients",
                "2",
                "--seconds",
                "1",
            ],
        ),
        120,
    );
    assert!(
        r.ok() && r.says("\"twin_queries\": 0") && r.says("note: no twin query ran"),
        "{}",
        r.text()
    );
}

/// N19: a --models folder holding a twin encoder under another name (`--name t`) was told to
/// train one.
#[test]
fn a_models_folder_with_the_encoder_under_another_name_says_so() {
    let (lib, src) = library_with_cases();
    let models = tempfile::tempdir().unwrap();
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    std::fs::copy(
        shipped.join("twin-image.json"),
        models.path().join("t.json"),
    )
    .unwrap();
    let query = src.path().join("q.png");
    crate::common::png(&query, 64, 64, 3);
    let mut c = et(lib.path(), &["twins", "--models"]);
    c.arg(models.path()).arg(&query);
    let r = run_within(c, 60);
    assert!(
        !r.ok()
            && r.says("holds no twin-image.json, the name --models reads; it holds t.json, an image encoder"),
        "{}",
        r.text()
    );
}

/// N20: `import multiview` stored a histology and a Vienna class that contradict each other
/// (carcinoma, Vienna 1), which `labels import` refuses.
#[test]
fn an_import_does_not_store_a_histology_its_vienna_class_contradicts() {
    let lib = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    crate::common::multiview_folder(
        src.path(),
        &["A", "B"],
        "polyp,histology,vienna_class,size_mm\nA,carcinoma,1,8\nB,hyperplastic,1,4\n",
    );
    let mut c = et(lib.path(), &["import", "multiview"]);
    c.arg(src.path());
    let r = run_within(c, 60);
    assert!(
        r.ok()
            && r.says("histology 'carcinoma' and Vienna class 1 contradict each other (Vienna 4 or 5 fits carcinoma); neither is imported"),
        "{}",
        r.text()
    );
    let store =
        endotwin::store::Store::open(lib.path(), endotwin::store::OpenMode::Existing).unwrap();
    let pathology: Vec<(Option<String>, Option<i64>)> = store
        .polyps()
        .unwrap()
        .into_iter()
        .map(|p| (p.histology, p.vienna_class))
        .collect();
    assert!(pathology.contains(&(None, None)), "{pathology:?}");
    assert!(
        pathology.contains(&(Some("hyperplastic".into()), Some(1))),
        "{pathology:?}"
    );
}

/// N22: a refused file whose name holds an escape sequence and a line break was printed raw
/// (the terminal turned red, the line split).
#[test]
fn a_file_name_with_control_characters_is_shown_escaped() {
    let lib = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    crate::common::png(&src.path().join("good.png"), 24, 16, 1);
    std::fs::write(src.path().join("v\u{1b}[31mred\nx.png"), b"not a picture").unwrap();
    let mut c = et(lib.path(), &["import", "images"]);
    c.arg(src.path());
    let r = run_within(c, 60);
    assert!(r.says("v\\u{1b}[31mred\\nx.png"), "{}", r.text());
    assert!(!r.text().contains('\u{1b}'), "{}", r.text());
}
