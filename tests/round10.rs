//! Hostile round 10 (issue 43): each finding through the path a user takes, refused or said
//! by name, with nothing changed where something was refused.

use crate::common;
use crate::hostile::library_with_cases;
use crate::library_engines::{Engine, Place, on_both_engines};
use crate::store_safety::run_within;
use endotwin::store::OpenMode;

on_both_engines!(a_snapshot_read_does_not_see_a_write_made_meanwhile);

fn twin_backbone(lib: &std::path::Path, out: &str, backbone: &str, extra: &[&str]) -> common::Ran {
    let mut c = common::endotwin(lib);
    c.args([
        "train",
        "twin-backbone",
        "--out",
        out,
        "--name",
        "x",
        "--epochs",
        "1",
    ])
    .args(["--backbone", backbone])
    .args(extra);
    run_within(c, 60)
}

/// N1: `--copies 1000000` was taken and grew without bound (every copy of every view is
/// encoded and kept before training).
#[test]
fn copies_are_bounded_before_anything_is_encoded() {
    let (lib, _src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    let backbone = tempfile::NamedTempFile::new().unwrap();
    let (out_s, backbone_s) = (
        out.path().to_str().unwrap(),
        backbone.path().to_str().unwrap(),
    );
    for copies in ["0", "1000000", "18446744073709551615"] {
        let r = twin_backbone(lib.path(), out_s, backbone_s, &["--copies", copies]);
        assert!(
            !r.ok() && r.says(&format!("--copies {copies}: from 1")),
            "{copies}: {}",
            r.text()
        );
    }
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
}

/// N2: the memory refusal named twice the --batch given and advised one that was refused
/// again.
#[test]
fn a_batch_too_large_is_named_as_given_and_the_advice_passes() {
    let (lib, _src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    let backbone = tempfile::NamedTempFile::new().unwrap();
    let (out_s, backbone_s) = (
        out.path().to_str().unwrap(),
        backbone.path().to_str().unwrap(),
    );
    // A fixed budget: the default follows the memory free at the moment.
    let budget = ["--memory-gb", "8"];
    let r = twin_backbone(
        lib.path(),
        out_s,
        backbone_s,
        &["--batch", "954370", budget[0], budget[1]],
    );
    assert!(
        !r.ok() && r.says("--batch 954370: one step of twin-backbone needs"),
        "{}",
        r.text()
    );
    let advised = r
        .stderr
        .split("lower --batch to ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_string();
    let r = twin_backbone(
        lib.path(),
        out_s,
        backbone_s,
        &["--batch", &advised, budget[0], budget[1]],
    );
    assert!(!r.says("one step of twin-backbone needs"), "{}", r.text());
}

/// N13: `library copy` while another station imported into the source compared the copy with
/// a source that had moved on ("differs from its source", a raw dump). The copy reads one
/// snapshot: a write made meanwhile is not seen by it.
fn a_snapshot_read_does_not_see_a_write_made_meanwhile(engine: Engine) {
    let Some(place) = Place::fresh(engine) else {
        return;
    };
    let (reader, _polyp) = crate::library_engines::library_with_polyp(&place);
    let mut writer = place.open(OpenMode::Existing).unwrap();
    let before = reader.examinations().unwrap().len();
    let seen = reader
        .in_snapshot(|| {
            let first = reader.examinations()?.len();
            writer.write(|tx| {
                endotwin::store::upsert_examination(
                    tx,
                    &endotwin::store::NewExamination {
                        code: "EX-NEW".into(),
                        ..Default::default()
                    },
                )
            })?;
            Ok((first, reader.examinations()?.len()))
        })
        .unwrap();
    assert_eq!(seen, (before, before));
    assert_eq!(reader.examinations().unwrap().len(), before + 1);
}

/// N24, N25: a sub-pixel `--box` was answered ("carcinoma 49%"); `labels export --out x.json`
/// wrote CSV without a word.
#[test]
fn a_box_too_small_and_an_export_named_for_another_format_are_refused() {
    let (lib, src) = library_with_cases();
    let image = src.path().join("base/A/1.png");
    let mut c = common::endotwin(lib.path());
    c.args(["twins", "--box", "0,0,1e-30,1e-30"]).arg(&image);
    let r = run_within(c, 60);
    assert!(!r.ok() && r.says("at least 4 pixels"), "{}", r.text());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("x.json");
    let mut c = common::endotwin(lib.path());
    c.args(["labels", "export", "--out"]).arg(&json);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("a .json file for the csv format") && !json.exists(),
        "{}",
        r.text()
    );
    // Named for its format, each is written.
    for (format, name) in [("csv", "x.csv"), ("jsonl", "x.jsonl"), ("coco", "x.json")] {
        let mut c = common::endotwin(lib.path());
        c.args(["labels", "export", "--format", format, "--out"])
            .arg(dir.path().join(format!("{format}-{name}")));
        let r = run_within(c, 60);
        assert!(r.ok(), "{format}: {}", r.text());
    }
}
