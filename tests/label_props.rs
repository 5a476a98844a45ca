//! Property tests of the label paths: random label values in CSV and JSONL labels files and
//! random reviewer names never store a value or an audit row that the value rules refuse,
//! valid values are stored as given (a vocabulary term in the vocabulary's spelling, in
//! whatever case it was written), and an exported CSV cell always reads back to the value
//! written.

use crate::common;

use common::png;
use endotwin::data::import::{self, ImportLayout, ImportOptions};
use endotwin::engine::Progress;
use endotwin::labels::{csv_cell_in, csv_cell_out};
use endotwin::store::{
    AuditFilter, HISTOLOGY, LOCATIONS, MORPHOLOGY, SIZE_CLASSES, Store, TargetKind,
    check_label_value, check_reviewer,
};
use proptest::prelude::*;

/// An in-memory library with polyps `A` and `B` (imported, so they carry the importer's own
/// audit rows), and the folder holding their files.
fn library() -> (Store, tempfile::TempDir, tempfile::TempDir) {
    let src = tempfile::tempdir().unwrap();
    png(&src.path().join("A/1.png"), 12, 10, 1);
    png(&src.path().join("B/1.png"), 12, 10, 2);
    std::fs::write(
        src.path().join("pathology.csv"),
        "polyp,histology,vienna_class,size_mm\nA,adenoma,3,8\nB,hyperplastic,1,4\n",
    )
    .unwrap();
    let media = tempfile::tempdir().unwrap();
    let mut store = Store::open_in_memory(media.path()).unwrap();
    import::run(
        ImportLayout::Multiview,
        &mut store,
        src.path(),
        ImportOptions::default(),
        &Progress::new(),
    )
    .unwrap();
    (store, media, src)
}

/// Text a hostile or careless file could hold: formulas, line breaks, bidirectional
/// overrides, JSON, very long runs, vocabulary terms and near misses.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("tubular adenoma LG".to_string()),
        Just("banana".to_string()),
        Just("0-IIa+IIc".to_string()),
        Just("sigmoid colon".to_string()),
        Just("=HYPERLINK(\"http://x\")".to_string()),
        Just("{\"a\": [1, 2]}".to_string()),
        Just("pale\u{202E}der".to_string()),
        Just("12.5".to_string()),
        "[ -~]{0,30}",
        "[=+@'\\-][ -~]{0,10}",
        "[a-z \\n\\r\\t\u{2028}\u{200B}\u{202E}]{0,20}",
        "x{190,210}",
    ]
}

/// One of the label columns, or one a file might invent.
fn key() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("histology"),
        Just("vienna_class"),
        Just("paris"),
        Just("location"),
        Just("size_mm"),
        Just("surface"),
        Just("colour"),
        Just("morphology"),
        Just("size class"),
        Just("tags"),
    ]
}

fn who() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("dr. Jane Doe".to_string()),
        Just("import:multiview --update-labels".to_string()),
        Just("eve\nat 2026-01-01 dr-smith".to_string()),
        "[ -~]{0,70}",
        "[a-z\u{202E}\u{0007}\\n ]{1,12}",
    ]
}

/// A vocabulary term as a person might type it: any letters in the other case, spaces
/// around it. Gives (the typed value, the term as the vocabulary spells it).
fn typed_term(terms: &'static [&'static str]) -> impl Strategy<Value = (String, String)> {
    (
        proptest::sample::select(terms),
        proptest::collection::vec(any::<bool>(), 40),
        "[ ]{0,2}",
        "[ ]{0,2}",
    )
        .prop_map(|(term, flips, before, after)| {
            let typed: String = term
                .chars()
                .zip(flips.iter().chain(std::iter::repeat(&false)))
                .map(|(c, &flip)| match (flip, c.is_ascii_lowercase()) {
                    (false, _) => c,
                    (true, true) => c.to_ascii_uppercase(),
                    (true, false) => c.to_ascii_lowercase(),
                })
                .collect();
            (format!("{before}{typed}{after}"), term.to_string())
        })
}

/// A valid value of a label column: (key, the value as given, the value the store must
/// hold). Outside the vocabularies and numbers that is the value itself.
fn valid_cell() -> impl Strategy<Value = (&'static str, String, String)> {
    let same = |key: &'static str, s: BoxedStrategy<String>| {
        s.prop_map(move |v| (key, v.clone(), v)).boxed()
    };
    let term = |key: &'static str, terms: &'static [&'static str]| {
        typed_term(terms).prop_map(move |(typed, term)| (key, typed, term))
    };
    prop_oneof![
        term("histology", HISTOLOGY),
        term("location", LOCATIONS),
        term("morphology", MORPHOLOGY),
        term("size class", SIZE_CLASSES),
        same(
            "paris",
            prop_oneof![
                "0-(Ip|Isp|Is|IIa|IIb|IIc|III)",
                "0-(Is|IIa|IIb)\\+(IIa|IIc|III)",
            ]
            .boxed()
        ),
        // A size is stored as a number in one spelling ("12" and "12.0" are one value).
        "([1-9][0-9]?|1[0-9]{2}|2[0-9]{2})(\\.[0-9]{1,2})?"
            .prop_map(|v| {
                let stored = format!("{:?}", v.parse::<f64>().unwrap());
                ("size_mm", v, stored)
            })
            .boxed(),
        same("vienna_class", "[1-5]".boxed()),
        same("colour", "[a-z]([a-z ]{0,12}[a-z])?".boxed()),
        same(
            "surface",
            "[a-zA-Z]([a-zA-Z0-9 ,.()/-]{0,20}[a-z])?".boxed()
        ),
    ]
}

/// Every label of both polyps passes the value rules (tags by their own), and every audit
/// row that is not the import's own is signed by a valid reviewer name.
fn library_keeps_its_rules(store: &Store) {
    for p in store.polyps().unwrap() {
        for l in store.labels(TargetKind::Polyp, p.id).unwrap() {
            if l.key == "tags" {
                for t in endotwin::labels::tags::parse(Some(&l.value)) {
                    assert!(endotwin::labels::tags::check(&t).is_ok(), "tag {t:?}");
                }
            } else {
                assert_eq!(
                    check_label_value(&l.key, &l.value),
                    None,
                    "stored {}={:?}",
                    l.key,
                    l.value
                );
            }
        }
    }
    let filter = AuditFilter {
        limit: 0,
        ..AuditFilter::default()
    };
    for row in store.audit_log(&filter).unwrap() {
        let who = &row.entry.who;
        if who != "import:multiview" {
            assert!(check_reviewer(who).is_ok(), "audit row signed {who:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn csv_cells_read_back_to_the_value_and_never_start_a_formula(v in "[=+@'\\-\t\ra-z ]{0,12}") {
        let out = csv_cell_out(&v);
        prop_assert!(!out.starts_with(['=', '+', '-', '@', '\t', '\r']), "{out:?}");
        prop_assert_eq!(csv_cell_in(&out), v.as_str());
    }

    #[test]
    fn no_label_file_stores_a_value_or_a_signature_the_rules_refuse(
        cells in proptest::collection::vec((key(), value()), 1..5),
        signer in who(),
        jsonl in any::<bool>(),
    ) {
        let (mut store, _media, _src) = library();
        // The file names polyp A by its code in the library.
        let code = store.polyps().unwrap()[0].code.clone();
        let text = if jsonl {
            let labels: serde_json::Map<String, serde_json::Value> = cells
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.clone())))
                .collect();
            format!("{}\n", serde_json::json!({"polyp": code, "labels": labels}))
        } else {
            let mut w = csv::Writer::from_writer(Vec::new());
            w.write_record(std::iter::once("polyp").chain(cells.iter().map(|(k, _)| *k))).unwrap();
            w.write_record(std::iter::once(code.as_str()).chain(cells.iter().map(|(_, v)| v.as_str()))).unwrap();
            String::from_utf8(w.into_inner().unwrap()).unwrap()
        };
        if let Ok((changes, _problems)) = endotwin::labels::diff_file(&store, &text) {
            let _ = endotwin::labels::apply(&mut store, &signer, &changes);
        }
        // The same values straight through the store's audited path, as the GUI sends them.
        let polyp = store.polyps().unwrap()[0].id;
        for (k, v) in &cells {
            let _ = store.set_label(&signer, TargetKind::Polyp, polyp, k, Some(v));
        }
        library_keeps_its_rules(&store);
    }

    #[test]
    fn valid_values_are_stored_as_given_in_the_vocabularys_spelling(
        cells in proptest::collection::vec(valid_cell(), 1..6),
        path in 0..3usize,
    ) {
        // One value a column: the last given for a key is the one that counts.
        let mut wanted: Vec<(&str, String, String)> = Vec::new();
        for cell in cells {
            wanted.retain(|(k, _, _)| *k != cell.0);
            wanted.push(cell);
        }
        // A size class comes with a size it fits (polyp A is 8 mm; a line whose class
        // contradicts its size is refused, round 13 N18).
        if let Some(class) = wanted.iter().find(|c| c.0 == "size class").map(|c| c.2.clone()) {
            let mm = match class.as_str() {
                "diminutive" => "4",
                "small" => "8",
                "large" => "12",
                _ => "25",
            };
            wanted.retain(|c| c.0 != "size_mm");
            wanted.push(("size_mm", mm.to_string(), format!("{:?}", mm.parse::<f64>().unwrap())));
        }
        // A histology comes with a Vienna class it fits and a class with a histology it fits
        // (polyp A is an adenoma; a line where the two contradict is refused, round 16 N4).
        let term = |key: &str| wanted.iter().find(|c| c.0 == key).map(|c| c.2.clone());
        match (term("histology"), term("vienna_class")) {
            (Some(h), v) => {
                if let Some(fits) = endotwin::store::vienna_classes_of(&h)
                    && !v.is_some_and(|v| fits.iter().any(|f| f.to_string() == v))
                {
                    wanted.retain(|c| c.0 != "vienna_class");
                    wanted.push(("vienna_class", fits[0].to_string(), fits[0].to_string()));
                }
            }
            (None, Some(v)) => {
                let h = match v.as_str() {
                    "1" | "2" => "hyperplastic",
                    "3" => "tubular adenoma LG",
                    "4" => "tubular adenoma HG",
                    _ => "carcinoma",
                };
                wanted.push(("histology", h.to_string(), h.to_string()));
            }
            (None, None) => {}
        }
        let (mut store, _media, _src) = library();
        let a = store.polyps().unwrap().into_iter().find(|p| p.code.ends_with("-A")).unwrap();
        let (polyp, code) = (a.id, a.code);
        match path {
            // A CSV labels file, a JSON lines labels file, or the store's audited path (the GUI's).
            0 | 1 => {
                let text = if path == 0 {
                    let mut w = csv::Writer::from_writer(Vec::new());
                    w.write_record(std::iter::once("polyp").chain(wanted.iter().map(|c| c.0))).unwrap();
                    w.write_record(std::iter::once(code.as_str()).chain(wanted.iter().map(|c| c.1.as_str()))).unwrap();
                    String::from_utf8(w.into_inner().unwrap()).unwrap()
                } else {
                    let labels: serde_json::Map<String, serde_json::Value> = wanted
                        .iter()
                        .map(|(k, v, _)| (k.to_string(), serde_json::Value::String(v.clone())))
                        .collect();
                    format!("{}\n", serde_json::json!({"polyp": code, "labels": labels}))
                };
                let (changes, problems) = endotwin::labels::diff_file(&store, &text).unwrap();
                prop_assert!(problems.is_empty(), "{problems:?} in\n{text}");
                endotwin::labels::apply(&mut store, "dr. Jane Doe", &changes).unwrap();
            }
            _ => {
                for (k, v, _) in &wanted {
                    store.set_label("dr. Jane Doe", TargetKind::Polyp, polyp, k, Some(v)).unwrap();
                }
            }
        }
        let row = store.polyp(polyp).unwrap().unwrap();
        let attributes = store.attributes(polyp).unwrap();
        for (key, given, stored) in &wanted {
            let label = store.current_label(TargetKind::Polyp, polyp, key).unwrap();
            prop_assert_eq!(label.as_deref(), Some(stored.as_str()), "{} given as {:?}", key, given);
            // What the browser, the filters and the details panel read says the same.
            let shown = match *key {
                "histology" => row.histology.clone(),
                "location" => row.location.clone(),
                "paris" => row.paris.clone(),
                "size_mm" => {
                    prop_assert_eq!(row.size_mm, Some(stored.parse::<f64>().unwrap()));
                    continue;
                }
                "vienna_class" => row.vienna_class.map(|v| v.to_string()),
                _ => attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()),
            };
            prop_assert_eq!(shown.as_deref(), Some(stored.as_str()), "{} given as {:?}", key, given);
        }
        library_keeps_its_rules(&store);
    }
}
