//! The attribute extractor on report sentences as the phantom writes them (its five
//! templates) and as endoscopists write them (sentences the phantom never produces).

use endotwin::prompts::Vocabulary;

fn terms(text: &str) -> Vec<String> {
    Vocabulary::default()
        .describe(text)
        .into_iter()
        .map(|(a, t)| format!("{a}/{t}"))
        .collect()
}

fn check(text: &str, expected: &[&str]) {
    let got = terms(text);
    let mut want: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    let mut got_sorted = got.clone();
    got_sorted.sort();
    want.sort();
    assert_eq!(got_sorted, want, "\n  sentence: {text}");
}

#[test]
fn the_shipped_vocabulary_has_methods_nine_aspects_and_histology() {
    let v = Vocabulary::default();
    assert_eq!(
        v.aspects(),
        [
            "location",
            "size class",
            "Paris morphology",
            "surface pattern",
            "colour",
            "pedicle",
            "boundary",
            "ulceration",
            "count",
            "histology"
        ]
    );
    assert_eq!(v.extract("").len(), v.len());
}

#[test]
fn pathology_sentences_give_histology_and_negated_dysplasia_is_not_neoplastic() {
    check(
        "Histology: hyperplastic polyp (Vienna 1).",
        &["histology/hyperplastic"],
    );
    check(
        "Pathology report: tubular adenoma with low-grade dysplasia, Vienna category 3.",
        &["histology/adenoma", "histology/neoplastic"],
    );
    check(
        "Histopathology showed sessile serrated lesion without dysplasia (Vienna 3).",
        &["histology/sessile serrated", "histology/neoplastic"],
    );
    check(
        "Histology: invasive adenocarcinoma (Vienna 5).",
        &["histology/carcinoma", "histology/neoplastic"],
    );
    check(
        "Biopsies: tubular adenoma with high-grade dysplasia.",
        &[
            "histology/adenoma",
            "histology/high-grade dysplasia",
            "histology/neoplastic",
        ],
    );
    check("Hyperplastic, no dysplasia.", &["histology/hyperplastic"]);
}

#[test]
fn the_phantoms_five_templates_are_read_completely() {
    check(
        "A 12 mm pedunculated polyp (Paris 0-Ip) was found in the sigmoid colon, reddish, with a tubular pit pattern with a stalk.",
        &[
            "size class/large",
            "Paris morphology/0-Ip",
            "pedicle/stalk",
            "location/sigmoid colon",
            "colour/reddish",
            "surface pattern/tubular pits",
        ],
    );
    check(
        "In the caecum there is a diminutive flat elevated lesion of about 4 mm, Paris 0-IIa; regular round pit pattern, same colour as the surrounding mucosa.",
        &[
            "location/caecum",
            "size class/diminutive",
            "Paris morphology/0-IIa",
            "surface pattern/regular round pits",
            "colour/isochromatic",
        ],
    );
    check(
        "Sessile polyp, 7 mm, ascending colon, Paris 0-Is. Surface: cloud-like surface with a mucus cap. Colour: pale.",
        &[
            "Paris morphology/0-Is",
            "size class/small",
            "location/ascending colon",
            "surface pattern/cloud-like with mucus cap",
            "colour/pale",
        ],
    );
    check(
        "Found a 25 mm depressed polyp at the rectum (0-IIc), irregular surface pattern, dark red, with central ulceration.",
        &[
            "size class/giant",
            "Paris morphology/0-IIc",
            "location/rectum",
            "surface pattern/irregular",
            "colour/dark red",
            "ulceration/ulcerated",
        ],
    );
    check(
        "Small lesion in the transverse colon: Paris 0-Is, estimated 8 mm, reddish, tubular pit pattern.",
        &[
            "size class/small",
            "location/transverse colon",
            "Paris morphology/0-Is",
            "colour/reddish",
            "surface pattern/tubular pits",
        ],
    );
}

#[test]
fn negations_remove_what_they_scope_and_nothing_after_the_clause() {
    check("No ulceration.", &[]);
    check(
        "Sessile polyp without ulceration, reddish.",
        &["Paris morphology/0-Is", "colour/reddish"],
    );
    check("Non-ulcerated 0-Is polyp.", &["Paris morphology/0-Is"]);
    check("No polyps were found up to the caecum.", &[]);
    check("Not pedunculated but sessile.", &["Paris morphology/0-Is"]);
    check(
        "Free of ulceration; well demarcated borders.",
        &["boundary/well demarcated"],
    );
    check("Normal colonic mucosa throughout, no polyps.", &[]);
}

#[test]
fn sentences_the_phantom_never_writes() {
    check(
        "1.2 cm semi-pedunculated adenoma at the hepatic flexure, NICE 2, well-defined margins.",
        &[
            "size class/large",
            "Paris morphology/0-Isp",
            "location/ascending colon",
            "surface pattern/tubular pits",
            "boundary/well demarcated",
            "histology/adenoma",
            "histology/neoplastic",
        ],
    );
    check(
        "Two polyps in the rectosigmoid, 3mm and 4mm, whitish, Kudo II.",
        &[
            "count/multiple",
            "location/sigmoid colon",
            "size class/diminutive",
            "colour/pale",
            "surface pattern/regular round pits",
        ],
    );
    check(
        "Laterally spreading tumour, ill-defined borders, erythematous, Paris IIa + IIc.",
        &[
            "size class/giant",
            "boundary/ill defined",
            "colour/reddish",
            "Paris morphology/0-IIa",
        ],
    );
    check("Small bowel capsule: normal.", &[]);
    check(
        "Excavated lesion with irregular pit pattern (Kudo V).",
        &["Paris morphology/0-III", "surface pattern/irregular"],
    );
    check(
        "A 15-mm polyp on a thick stalk in the descending colon.",
        &[
            "size class/large",
            "pedicle/stalk",
            "location/descending colon",
        ],
    );
}

#[test]
fn a_vocabulary_file_with_mistakes_is_refused_with_a_reason() {
    let err = Vocabulary::from_toml(
        "[[aspect]]\nname = \"a\"\n[[aspect.term]]\nname = \"t\"\nphrases = []\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("'a/t' has no phrases"), "{err}");
    let err = Vocabulary::from_toml(
        "[[aspect]]\nname = \"a\"\n[[aspect.term]]\nname = \"t\"\nphrases = [\"x\"]\nimplies = [\"b/u\"]\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("'b/u'"), "{err}");
    assert!(Vocabulary::from_toml("not toml [").is_err());
}

/// Every sentence the phantom writes names its polyp's location, Paris class, surface
/// pattern and colour, and the extractor reads each back (200 polyps, all five templates).
#[test]
fn phantom_sentences_read_back_their_polyps_attributes() {
    use endotwin::data::phantom::anatomy::{Pathology, PolypSpec};
    use endotwin::data::phantom::report::polyp_sentence;
    use endotwin::plumbing::Rng;
    let v = Vocabulary::default();
    let mut rng = Rng::new(5);
    for n in 0..200 {
        let spec = PolypSpec::draw(Pathology::draw(&mut rng), &mut rng);
        let sentence = polyp_sentence(&spec, n % 3, &mut rng);
        let got = terms(&sentence);
        let colour = match spec.colour_words() {
            "same colour as the surrounding mucosa" => "isochromatic",
            other => other,
        };
        let surface = match spec.surface.words() {
            "regular round pit pattern" => "regular round pits",
            "tubular pit pattern" => "tubular pits",
            "cloud-like surface with a mucus cap" => "cloud-like with mucus cap",
            _ => "irregular",
        };
        for want in [
            format!("location/{}", spec.location),
            format!("Paris morphology/{}", spec.paris.code()),
            format!("surface pattern/{surface}"),
            format!("colour/{colour}"),
        ] {
            assert!(
                got.contains(&want),
                "{want} missing from {got:?}\n  sentence: {sentence}"
            );
        }
        let paris: Vec<&String> = got.iter().filter(|t| t.starts_with("Paris")).collect();
        assert_eq!(
            paris.len(),
            1,
            "one Paris class: {got:?}\n  sentence: {sentence}"
        );
        assert!(!got.iter().any(|t| t.starts_with("count")), "{sentence}");
        assert_eq!(v.extract(&sentence).iter().sum::<f32>() as usize, got.len());
    }
}
