//! The shipped text-prompt models held to floors an untrained model fails, each beside the
//! colour-histogram baseline on the same held-out examinations: `endotwin eval prompts` (the
//! user's path) on 40 held-out polyps of a seed no model saw, and the pathology models beside
//! their architecture at 20 random initialisations (`--untrained-draws`).

use crate::common::{endotwin, run};

/// The lowest AUROC a shipped prompt model may reach on its own task here: pathology, and
/// detection, higher because the run's untrained detection row is the detector's architecture
/// (ImageNet's MobileNetV2 at random init since #44), whose random features already rank
/// phantom polyp frames at 0.757 here (an untrained ViT: 0.186).
const FLOOR: f64 = 0.75;
const DETECTION_FLOOR: f64 = 0.80;
/// Random initialisations of the pathology models' architecture scored beside them.
const DRAWS: usize = 20;
/// How far below the supervised colour-histogram baseline (cross-fitted on the held-out data
/// itself: it sees ground truth, no zero-shot row does) a zero-shot model may fall.
const BELOW_HISTOGRAM: f64 = 0.1;

#[test]
fn each_shipped_prompt_model_keeps_its_floor_beside_the_colour_histogram() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("prompts.json");
    let mut c = endotwin(&dir.path().join("unused"));
    c.args(["eval", "prompts", "--seed", "29", "--polyps", "40"])
        .args(["--frames", "8", "--size", "64"])
        .args(["--untrained-draws", &DRAWS.to_string(), "--json"])
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
    // Measured here (debug build on the 2 shared cores, 27 Nov 2026: the command 101 s without
    // the draws, 103 s with the 20; this test 122 s under a heavier load): polyp detection
    // per frame (286 frames, 160 with a polyp), colour histogram 0.863; benign vs neoplastic
    // per polyp (40 polyps, 11 benign), colour histogram 0.906. `eval prompts`' own untrained
    // rows (one initialisation each): detection 0.757, pathology 0.937. Earlier, the same
    // architectures untrained at seed 7 (saved under the shipped names, read with --models):
    // detection 0.186, pathology 0.505.
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
            0.905,
            detection_baseline,
        ),
        (
            "stage 2 (prompts-stage2), pathology",
            ablation("after stage 2"),
            0.944,
            pathology_baseline,
        ),
        (
            "stage 3 (prompts), pathology",
            auroc("pathology", "zero_shot"),
            0.909,
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
    // detection floor.
    let untrained = auroc("detection", "untrained");
    eprintln!(
        "detection: untrained {untrained:.3}; pathology: untrained {:.3}",
        auroc("pathology", "untrained")
    );
    assert!(
        untrained < DETECTION_FLOOR,
        "detection: untrained {untrained:.3}"
    );
    // Pathology: the floor above does not tell a trained model from an untrained one. The
    // architecture at random init ranks these 40 polyps strongly and with a random sign (the
    // phantom's pathology shows in colour, which random features carry): over 40 draws
    // (`--untrained-draws 40`, seeds 29001..=29040) mean 0.502, sd 0.400, quartiles 0.075,
    // 0.495, 0.920, max 0.987; 19 of 40 pass the floor of 0.75, 12 of 40 reach stage 3's
    // 0.909 and 7 of 40 stage 2's 0.944 (stage 2 and 3 share one architecture, so one set
    // of draws). What training adds is the direction: the neoplastic sentences score higher on
    // neoplastic polyps. So each is held above what a typical untrained init reaches, the
    // draws' mean and median; above their upper quartile it is not (docs/prompts.md). The 20
    // draws here (29001..=29020): mean 0.437, median 0.207; 5 reach stage 3, 3 stage 2. An
    // untrained model in stage 3's place would still pass this test about half the time (19
    // of the 40 draws reach 0.806, the histogram's figure minus 0.1): a weak floor, and the
    // honest one this phantom allows.
    for (model, key) in [
        ("stage 3 (prompts)", "stage3"),
        ("stage 2 (prompts-stage2)", "stage2"),
    ] {
        let d = &e["untrained_draws"][key];
        let figure = |k: &str| {
            d[k].as_f64()
                .unwrap_or_else(|| panic!("no {k} of {key}'s draws in {}", e["untrained_draws"]))
        };
        let (trained, mean) = (figure("trained"), figure("mean"));
        let median = d["quartiles"][1].as_f64().unwrap();
        let reaching = d["reaching_trained"].as_u64().unwrap();
        assert_eq!(d["aurocs"].as_array().map(Vec::len), Some(DRAWS), "{d}");
        eprintln!(
            "{model}, pathology: trained {trained:.3}; {DRAWS} untrained draws mean {mean:.3}, \
             median {median:.3}; {reaching} reach the trained"
        );
        assert!(
            trained > mean && trained > median,
            "{model}: trained AUROC {trained:.3} not above its untrained draws' mean {mean:.3} \
             and median {median:.3} ({reaching} of {DRAWS} reach it)"
        );
    }
}
