//! `endotwin labels export|import`: a round trip changes nothing; one label edited in the
//! exported file changes exactly that label, with one audit row, and only with --apply.

use crate::common::{self, state};
use crate::gui::tiny_library;
use endotwin::store::{OpenMode, Store, TargetKind};
use std::path::Path;

fn labels(library: &Path, args: &[&str]) -> common::Ran {
    let mut c = common::endotwin(library);
    c.arg("labels").args(args);
    common::run(c)
}

#[test]
fn exported_labels_come_back_unchanged_and_one_edit_changes_one_label() {
    let lib = tempfile::tempdir().unwrap();
    tiny_library(lib.path());
    let csv = lib.path().join("labels.csv");
    let csv_arg = csv.to_str().unwrap();
    let ran = labels(lib.path(), &["export", "--format", "csv", "--out", csv_arg]);
    assert!(ran.ok() && ran.says("3 polyps"), "{}", ran.text());

    // The round trip: nothing differs.
    let before = state(lib.path());
    let ran = labels(lib.path(), &["import", csv_arg, "--apply"]);
    assert!(ran.ok() && ran.says("no changes"), "{}", ran.text());
    assert_eq!(state(lib.path()), before);

    // Edit one polyp's histology and another's size in the file.
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut rows: Vec<Vec<String>> = text
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    let col = |name: &str| rows[0].iter().position(|h| h == name).unwrap();
    let (h, s) = (col("histology"), col("size_mm"));
    let code = rows[1][0].clone();
    let old = rows[1][h].clone();
    let new = if old == "adenoma" {
        "hyperplastic"
    } else {
        "adenoma"
    };
    rows[1][h] = new.to_string();
    rows[2][s] = "twelve".into();
    let edited: Vec<String> = rows.iter().map(|r| r.join(",")).collect();
    std::fs::write(&csv, edited.join("\n") + "\n").unwrap();

    // Without --apply: the change is listed, the bad size named, nothing written.
    let ran = labels(lib.path(), &["import", csv_arg]);
    assert!(ran.ok(), "{}", ran.text());
    assert!(
        ran.says(&format!("{code} histology: {old} -> {new}")),
        "{}",
        ran.text()
    );
    assert!(
        ran.says("1 changes") && ran.says("twelve"),
        "{}",
        ran.text()
    );
    assert_eq!(state(lib.path()), before);

    // With --apply: exactly that label, one audit row signed by --who.
    let ran = labels(
        lib.path(),
        &["import", csv_arg, "--apply", "--who", "dr. b"],
    );
    assert!(ran.ok() && ran.says("applied 1 changes"), "{}", ran.text());
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let polyp = store
        .polyps()
        .unwrap()
        .into_iter()
        .find(|p| p.code == code)
        .unwrap();
    assert_eq!(polyp.histology.as_deref(), Some(new));
    let audit = store.audit_history(TargetKind::Polyp, polyp.id).unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(
        (
            audit[0].key.as_str(),
            audit[0].who.as_str(),
            audit[0].new_value.as_deref()
        ),
        ("histology", "dr. b", Some(new))
    );
    let others = store
        .polyps()
        .unwrap()
        .into_iter()
        .filter(|p| p.id != polyp.id);
    for p in others {
        assert!(
            store
                .audit_history(TargetKind::Polyp, p.id)
                .unwrap()
                .is_empty()
        );
    }
}
