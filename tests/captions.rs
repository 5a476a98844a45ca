//! Annotation refinement of capsule findings written the way gastroenterologists write them:
//! typos, lists with "and", trailing punctuation, Mayo scores, negations, uncertainty.

use endotwin::captions::{CATEGORIES, Refiner};

fn check(raw: &str, caption: &str, category: &str) {
    let r = Refiner::default().refine(raw);
    assert_eq!(
        (r.caption.as_str(), r.category.as_str()),
        (caption, category),
        "\n  raw finding: {raw}"
    );
}

#[test]
fn raw_findings_become_canonical_captions_and_categories() {
    let cases = [
        ("Mild erosion.", "erosion", "inflammation"),
        (
            "Erosions with surrounding edema",
            "erosion, edema",
            "inflammation",
        ),
        ("Erosion and fibrin.", "erosion, fibrin", "inflammation"),
        ("fibrin and erosion", "erosion, fibrin", "inflammation"),
        (
            "Ulcer with fibrin, Mayo 2.",
            "ulcer, fibrin",
            "inflammation",
        ),
        (
            "Marked hyperaemia and oedema of the rectum, reduced vascular pattern",
            "edema, reduced vascularity, hyperemia",
            "inflammation",
        ),
        ("Proctits, Mayo 1", "inflammation", "inflammation"),
        ("Hemorrhoids.", "hemorrhoid", "hemorrhoid"),
        (
            "Internal haemorrhoid with slight bleeding",
            "hemorrhoid, blood",
            "hemorrhoid",
        ),
        ("Small polyp in the distal ileum.", "polyp", "polyp"),
        ("Sessile polyp, jejunum.", "polyp", "polyp"),
        ("Pseudopolyps in the sigmoid", "pseudopolyp", "inflammation"),
        (
            "pseudo-polyp and a small polyp",
            "polyp, pseudopolyp",
            "polyp",
        ),
        ("Angioectasia.", "angioectasia", "angioectasia"),
        ("angioectasia or tap", "angioectasia", "angioectasia"),
        (
            "Small angiectasias in the jejunum",
            "angioectasia",
            "angioectasia",
        ),
        ("Submucosal lipoma", "lipoma", "lipoma"),
        (
            "Biopsy site after biopsy of the rectum.",
            "biopsy lesion",
            "biopsy lesion",
        ),
        ("Fresh blood in the lumen.", "blood", "inflammation"),
        ("No bleedings or fibrin.", "normal", "normal"),
        (
            "Normal mucosa. No spontaneous bleeding.",
            "normal",
            "normal",
        ),
        (
            "Some food residue; bubbles partly obscure the view.",
            "normal",
            "normal",
        ),
        ("First cecal image", "normal", "normal"),
        ("Mild erosion. No bleeding.", "erosion", "inflammation"),
        (
            "Aphthous ulcers, no active bleeding, absent vascular pattern",
            "ulcer, reduced vascularity",
            "inflammation",
        ),
        (
            "erosoins and ulcerations;",
            "ulcer, erosion",
            "inflammation",
        ),
    ];
    assert!(cases.len() >= 20);
    for (raw, caption, category) in cases {
        check(raw, caption, category);
    }
}

#[test]
fn pseudopolyp_never_counts_as_a_polyp() {
    let r = Refiner::default().refine("Multiple inflammatory pseudopolyps.");
    assert_eq!(r.entities, ["pseudopolyp"]);
    assert_eq!(r.category, "inflammation");
}

#[test]
fn the_phantoms_capsule_findings_refine_to_exactly_their_entities() {
    use endotwin::data::phantom::CAPSULE_FINDINGS;
    use endotwin::data::phantom::report::capsule_finding_text;
    use endotwin::plumbing::Rng;
    let refiner = Refiner::default();
    let mut rng = Rng::new(3);
    let mut sets: Vec<&[&str]> = CAPSULE_FINDINGS.iter().map(|(e, _)| *e).collect();
    sets.push(&[]);
    for _ in 0..100 {
        for entities in &sets {
            let raw = capsule_finding_text(entities, &mut rng);
            let r = refiner.refine(&raw);
            let mut want: Vec<&str> = entities.to_vec();
            want.sort();
            let mut got: Vec<&str> = r.entities.iter().map(String::as_str).collect();
            got.sort();
            assert_eq!(got, want, "raw: {raw} -> {r:?}");
            assert!(CATEGORIES.contains(&r.category.as_str()));
        }
    }
    assert_eq!(
        refiner.refine("Polyp.").prompt(),
        "endoscopy image with polyp"
    );
}

#[test]
fn an_entity_list_with_an_unknown_category_is_refused() {
    let err = Refiner::from_toml(
        "[[aspect]]\nname = \"tumour\"\n[[aspect.term]]\nname = \"x\"\nphrases = [\"x\"]\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("'tumour' is not one of the seven categories"),
        "{err}"
    );
}
