//! The shipped text-prompt models held to floors an untrained model fails, each beside the
//! colour-histogram baseline on the same held-out examinations: `endotwin eval prompts` (the
//! user's path) on 40 held-out polyps of a seed no model saw.

use crate::common::{endotwin, run};

/// The lowest AUROC a shipped prompt model may reach on its own task here: pathology, and
/// detection, higher because the run's untrained detection row is the detector's architecture
/// (ImageNet's MobileNetV2 at random init since #44), whose random features already rank
/// phantom polyp frames at 0.757 here (an untrained ViT: 0.186).
const FLOOR: f64 = 0.75;
const DETECTION_FLOOR: f64 = 0.80;
/// How far below the supervised colour-histogram baseline (cross-fitted on the held-out data
/// itself: it sees ground truth, no zero-shot row does) a zero-shot model may fall.
const BELOW_HISTOGRAM: f64 = 0.1;

#[test]
fn each_shipped_prompt_model_keeps_its_floor_beside_the_colour_histogram() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("prompts.json");
    let mut c = endotwin(&dir.path().join("unused"));
    c.args(["eval", "prompts", "--seed", "29", "--polyps", "40"])
        .args(["--frames", "8", "--size", "64", "--json"])
        .arg(&json);
    let r = run(c);
    assert!(r.ok(), "{}", r.text());
    let e: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(e["held_out"]["polyps"], 40, "{}", e["held_out"]);
    let auroc = |task: &str, row: &str| {
        e[task][row]["auroc"]
            .as_f64()
            .unwrap_or_else(|| panic!("no {task} {row} in {}", e[task]))
    };
    let ablation = |name: &str| {
        e["ablations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"].as_str().unwrap().starts_with(name))
            .and_then(|a| a["auroc"].as_f64())
            .unwrap_or_else(|| panic!("no ablation {name} in {}", e["ablations"]))
    };
    let detection_baseline = auroc("detection", "colour_histogram_lr");
    let pathology_baseline = auroc("pathology", "colour_histogram_lr");
    // Measured here (debug build, 80 s): polyp detection per frame (286 frames, 160 with a
    // polyp), colour histogram 0.865; benign vs neoplastic per polyp (40 polyps, 11 benign),
    // colour histogram 0.909. The same architectures untrained (each card's config at random
    // initialisation, seed 7, saved under the shipped names and read with --models) score
    // detection 0.186 and pathology 0.505; `eval prompts`' own untrained row (another
    // initialisation) 0.202 and 0.694.
    let held = [
        // (model, its task's figure, measured shipped, the baseline)
        (
            "round 1 (prompts-round1), detection",
            auroc("detection", "round1"),
            0.867,
            detection_baseline,
        ),
        (
            "plain CLIP (prompts-plain), detection",
            auroc("detection", "plain_clip"),
            0.903,
            detection_baseline,
        ),
        (
            "stage 2 (prompts-stage2), pathology",
            ablation("after stage 2"),
            0.953,
            pathology_baseline,
        ),
        (
            "stage 3 (prompts), pathology",
            auroc("pathology", "zero_shot"),
            0.903,
            pathology_baseline,
        ),
    ];
    let floor = |model: &str| {
        if model.ends_with("detection") {
            DETECTION_FLOOR
        } else {
            FLOOR
        }
    };
    for (model, figure, measured, baseline) in held {
        let floor = floor(model);
        eprintln!("{model}: AUROC {figure:.3} (measured {measured}); baseline {baseline:.3}");
        assert!(
            figure >= floor && figure >= baseline - BELOW_HISTOGRAM,
            "{model}: AUROC {figure:.3} against the floor {floor} and the colour histogram's \
             {baseline:.3} (minus {BELOW_HISTOGRAM})"
        );
    }
    // The untrained detection row of the same run (the detector's architecture) is below the
    // detection floor. Pathology has no such check: stage 3's architecture at random init
    // ranks these 40 polyps at 0.937 (a random model's ranking is strong and of random sign,
    // and the phantom's pathology is easy from colour: the histogram 0.906), so no floor here
    // tells a trained stage 3 from an untrained one (issue #43 keeps that open).
    let untrained = auroc("detection", "untrained");
    eprintln!(
        "detection: untrained {untrained:.3}; pathology: untrained {:.3}",
        auroc("pathology", "untrained")
    );
    assert!(
        untrained < DETECTION_FLOOR,
        "detection: untrained {untrained:.3}"
    );
}
