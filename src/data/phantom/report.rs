//! Report sentences in varied clinical wording, and capsule captions.

use super::anatomy::{PolypSpec, Surface};
use crate::plumbing::Rng;

/// One sentence describing a polyp's endoscopic appearance.
pub fn polyp_sentence(spec: &PolypSpec, ordinal: usize, rng: &mut Rng) -> String {
    let size = format!("{:.0} mm", spec.size_mm.round());
    let nth = ["A", "A second", "A third", "A fourth", "A fifth"][ordinal.min(4)];
    let pedicle = match spec.paris {
        super::anatomy::Paris::Ip => " with a stalk",
        _ => "",
    };
    let surface = spec.surface.words();
    let colour = spec.colour_words();
    match rng.below(5) {
        0 => format!(
            "{nth} {size} {} polyp (Paris {}) was found in the {}, {colour}, with a {surface}{pedicle}.",
            spec.paris.words(),
            spec.paris.code(),
            spec.location
        ),
        1 => format!(
            "In the {} there is a {} {} lesion of about {size}, Paris {}; {surface}, {colour}.",
            spec.location,
            spec.size_class(),
            spec.paris.words(),
            spec.paris.code()
        ),
        2 => format!(
            "{} polyp, {size}, {}, Paris {}{pedicle}. Surface: {surface}. Colour: {colour}.",
            capitalise(spec.paris.words()),
            spec.location,
            spec.paris.code()
        ),
        3 => format!(
            "Found a {size} {} polyp at the {} ({}), {surface}, {colour}{}.",
            spec.paris.words(),
            spec.location,
            spec.paris.code(),
            if spec.ulcer > 0.0 {
                ", with central ulceration"
            } else {
                ""
            }
        ),
        _ => format!(
            "{} lesion in the {}: Paris {}, estimated {size}, {colour}, {surface}{pedicle}.",
            capitalise(spec.size_class()),
            spec.location,
            spec.paris.code()
        ),
    }
}

pub fn pathology_sentence(spec: &PolypSpec, rng: &mut Rng) -> String {
    let h = match spec.pathology {
        super::anatomy::Pathology::Hyperplastic => "hyperplastic polyp",
        super::anatomy::Pathology::SessileSerrated => "sessile serrated lesion without dysplasia",
        super::anatomy::Pathology::AdenomaLow => "tubular adenoma with low-grade dysplasia",
        super::anatomy::Pathology::AdenomaHigh => "tubular adenoma with high-grade dysplasia",
        super::anatomy::Pathology::Carcinoma => "invasive adenocarcinoma",
    };
    let v = spec.pathology.vienna();
    match rng.below(3) {
        0 => format!("Histology: {h} (Vienna {v})."),
        1 => format!("Pathology report: {h}, Vienna category {v}."),
        _ => format!("Histopathology showed {h} (Vienna {v})."),
    }
}

pub fn negative_sentence(rng: &mut Rng) -> String {
    rng.pick(&[
        "No polyps were found up to the caecum.",
        "Complete colonoscopy to the caecum; no polyps or masses seen.",
        "Normal colonic mucosa throughout, no polyps.",
        "Good bowel preparation, no lesions detected.",
    ])
    .to_string()
}

pub fn opening_sentence(rng: &mut Rng) -> String {
    rng.pick(&[
        "Colonoscopy to the caecum, adequate bowel preparation.",
        "The caecum was reached; the ileocaecal valve was identified.",
        "Complete examination with good preparation (BBPS 8).",
    ])
    .to_string()
}

/// How a gastroenterologist might write each capsule entity (canonical name first): spelling
/// variants, plurals and modifiers the refiner must see through.
const ENTITY_WORDINGS: &[(&str, &[&str])] = &[
    (
        "polyp",
        &[
            "polyp",
            "small polyp",
            "sessile polyp",
            "polypoid lesion",
            "polyps",
        ],
    ),
    (
        "angioectasia",
        &[
            "angioectasia",
            "angiectasia",
            "small angioectasia",
            "angiodysplasia",
            "angioectasias",
        ],
    ),
    ("lipoma", &["lipoma", "submucosal lipoma", "small lipoma"]),
    (
        "hemorrhoid",
        &[
            "hemorrhoids",
            "haemorrhoids",
            "internal hemorrhoid",
            "hemorrhoid",
        ],
    ),
    (
        "biopsy lesion",
        &[
            "biopsy site",
            "biopsy lesion",
            "post-biopsy lesion",
            "biopsy scar",
        ],
    ),
    (
        "inflammation",
        &[
            "inflammation",
            "inflamed mucosa",
            "mild inflammation",
            "enteritis",
            "ileitis",
        ],
    ),
    (
        "ulcer",
        &[
            "ulcer",
            "ulcers",
            "aphthous ulcer",
            "ulceration",
            "large ulcer",
        ],
    ),
    (
        "erosion",
        &[
            "erosion",
            "erosions",
            "small erosions",
            "mild erosion",
            "eroded mucosa",
        ],
    ),
    ("fibrin", &["fibrin", "fibrin coating", "fibrinous exudate"]),
    (
        "edema",
        &["edema", "oedema", "edematous folds", "swollen villi"],
    ),
    (
        "reduced vascularity",
        &[
            "reduced vascularity",
            "loss of vascular pattern",
            "decreased vascular pattern",
        ],
    ),
    (
        "hyperemia",
        &[
            "hyperemia",
            "erythema",
            "redness",
            "hyperaemic mucosa",
            "mild erythema",
        ],
    ),
    (
        "pseudopolyp",
        &[
            "pseudopolyps",
            "pseudopolyp",
            "inflammatory pseudopolyps",
            "pseudo-polyps",
        ],
    ),
    (
        "blood",
        &[
            "blood",
            "fresh blood",
            "bleeding",
            "active bleeding",
            "haematin",
        ],
    ),
];

/// A capsule frame's raw finding in free text naming exactly `entities` (canonical names; none:
/// a normal frame), with the distractions real findings lists carry: modifiers, locations, Mayo
/// scores, negations of other entities and non-diagnostic terms.
pub fn capsule_finding_text(entities: &[&str], rng: &mut Rng) -> String {
    if entities.is_empty() {
        return rng
            .pick(&[
                "Normal mucosa.",
                "No abnormality.",
                "Normal small bowel mucosa.",
                "Bubbles, otherwise normal.",
                "First duodenal image.",
                "Food residue. No pathology.",
            ])
            .to_string();
    }
    let words: Vec<&str> = entities
        .iter()
        .map(|e| {
            let (_, w) = ENTITY_WORDINGS
                .iter()
                .find(|(name, _)| name == e)
                .unwrap_or_else(|| panic!("no wording for capsule entity {e}"));
            *rng.pick(w)
        })
        .collect();
    let mut order: Vec<usize> = (0..words.len()).collect();
    if rng.chance(0.5) {
        order.reverse();
    }
    let listed: Vec<&str> = order.iter().map(|&i| words[i]).collect();
    let body = match listed.as_slice() {
        [one] => one.to_string(),
        [a, b] => format!("{a}{}{b}", rng.pick(&[" and ", ", ", " with "])),
        more => more.join(", "),
    };
    let place = *rng.pick(&[
        "",
        " in the jejunum",
        " in the distal ileum",
        " in the terminal ileum",
        "",
    ]);
    let mayo = if entities.contains(&"inflammation") && rng.chance(0.3) {
        " Mayo 1."
    } else {
        ""
    };
    let negated = ["blood", "ulcer"]
        .iter()
        .find(|n| !entities.contains(n) && rng.chance(0.25))
        .map_or("", |n| {
            if *n == "blood" {
                " No bleeding."
            } else {
                " No ulcers."
            }
        });
    let residue = *rng.pick(&[
        "",
        "",
        " Some food residue.",
        " Bubbles partly obscure the view.",
    ]);
    format!("{}{place}.{mayo}{negated}{residue}", capitalise(&body))
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// The attributes stored for a polyp (the vocabulary later extractors read back).
pub fn attributes(spec: &PolypSpec) -> Vec<(String, String)> {
    let mut a = vec![
        ("size class".to_string(), spec.size_class().to_string()),
        ("surface".to_string(), spec.surface.words().to_string()),
        ("colour".to_string(), spec.colour_words().to_string()),
        ("morphology".to_string(), spec.paris.words().to_string()),
    ];
    if spec.ulcer > 0.0 {
        a.push(("ulceration".into(), "present".into()));
    }
    if spec.surface == Surface::Cloudy || spec.mucus > 0.3 {
        a.push(("mucus cap".into(), "present".into()));
    }
    a
}
