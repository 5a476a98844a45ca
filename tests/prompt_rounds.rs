//! `train prompts --rounds N`: stage 1's cleansing repeated, each prevalence-guided round
//! starting from the one before; the last is the detector stages 2 and 3 read.

use std::path::Path;

fn card(models: &Path, name: &str) -> serde_json::Value {
    let path = models.join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} is missing: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn train(lib: &Path, models: &Path, args: &[&str]) -> crate::common::Ran {
    let mut c = crate::common::endotwin(lib);
    c.args(["train", "prompts", "--name", "r"])
        .args(["--epochs", "1", "--batch", "4", "--size", "32", "--out"])
        .arg(models)
        .args(args);
    crate::common::run(c)
}

#[test]
fn three_cleansing_rounds_chain_and_the_last_is_the_detector_stage_two_reads() {
    let lib = tempfile::tempdir().unwrap();
    let models = tempfile::tempdir().unwrap();
    drop(crate::prompts::records_library(lib.path(), 16));

    // One round is not Endo-CLIP's cleansing: refused, nothing written.
    let ran = train(
        lib.path(),
        models.path(),
        &["--stage", "1", "--rounds", "1"],
    );
    assert_ne!(ran.code, Some(0), "{}", ran.text());
    assert!(ran.stderr.contains("--rounds 1"), "{}", ran.stderr);
    assert_eq!(std::fs::read_dir(models.path()).unwrap().count(), 0);

    let ran = train(
        lib.path(),
        models.path(),
        &["--stage", "1", "--rounds", "3"],
    );
    assert_eq!(ran.code, Some(0), "{}", ran.text());
    let round2 = card(models.path(), "r-round2");
    let detect = card(models.path(), "r-detect");
    let says = |c: &serde_json::Value| c["description"].as_str().unwrap().to_string();
    assert!(says(&round2).contains("after round 2"), "{}", says(&round2));
    assert!(
        says(&round2).contains("continued from `r-round1`"),
        "{}",
        says(&round2)
    );
    assert!(says(&detect).contains("after round 3"), "{}", says(&detect));
    assert!(
        says(&detect).contains("continued from `r-round2`"),
        "{}",
        says(&detect)
    );
    assert!(
        ran.stdout.contains("by r-round2's polyp probability")
            || ran.stderr.contains("by r-round2's polyp probability"),
        "round 3 keeps frames by round 2: {}",
        ran.text()
    );

    // Stage 2 of the same run continues from the last round, whatever the count.
    let ran = train(
        lib.path(),
        models.path(),
        &["--stage", "2", "--rounds", "3"],
    );
    assert_eq!(ran.code, Some(0), "{}", ran.text());
    let stage2 = card(models.path(), "r-stage2");
    assert!(
        says(&stage2).contains("continued from `r-detect`"),
        "{}",
        says(&stage2)
    );
}
