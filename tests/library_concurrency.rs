//! Several stations on one library at once (issue #46), on both engines like the rest of the
//! store suite (`library_engines.rs`): label edits checked against what each read, edits and
//! imports at once, the bench's own check, what a station sees of the others' changes.

use crate::library_engines::{Engine, Place, library_with_polyp, on_both_engines};
use endotwin::store::{
    NewExamination, NewPolyp, OpenMode, Store, StoreError, TargetKind, upsert_examination,
    upsert_polyp,
};

on_both_engines!(
    the_second_of_two_reviewers_changing_a_label_is_told_what_changed_since_it_read,
    edits_from_several_stations_at_once_each_land_once_with_their_audit_row,
    the_library_bench_finds_nothing_lost_duplicated_or_silently_overwritten,
    two_stations_importing_the_same_folder_at_once_land_it_once,
    a_station_sees_what_another_changed_since_it_last_looked,
    the_change_mark_moves_with_edits_and_new_cases_and_versions_read_back,
);

fn the_second_of_two_reviewers_changing_a_label_is_told_what_changed_since_it_read(engine: Engine) {
    let Some(place) = Place::fresh(engine) else {
        return;
    };
    let (mut a, polyp) = library_with_polyp(&place);
    let mut b = place.open(OpenMode::Existing).unwrap();
    // Both stations show the label; dr. a changes it first.
    let read_a = a
        .label_version(TargetKind::Polyp, polyp, "histology")
        .unwrap();
    let read_b = b
        .label_version(TargetKind::Polyp, polyp, "histology")
        .unwrap();
    assert_eq!(read_a, read_b);
    a.set_label_as_read(
        "dr. a",
        TargetKind::Polyp,
        polyp,
        "histology",
        Some("sessile serrated"),
        Some(read_a),
    )
    .unwrap();
    let err = b
        .set_label_as_read(
            "dr. b",
            TargetKind::Polyp,
            polyp,
            "histology",
            Some("carcinoma"),
            Some(read_b),
        )
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
    let said = err.to_string();
    assert!(
        said.contains("dr. a") && said.contains("'hyperplastic' -> 'sessile serrated'"),
        "{said}"
    );
    assert!(said.contains("nothing was written"), "{said}");
    let audit = b.audit_history(TargetKind::Polyp, polyp).unwrap();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(
        b.current_label(TargetKind::Polyp, polyp, "histology")
            .unwrap()
            .as_deref(),
        Some("sessile serrated")
    );
    // Having seen the change, dr. b still disagrees: the change lands, over the value seen.
    let seen = b
        .label_version(TargetKind::Polyp, polyp, "histology")
        .unwrap();
    let old = b
        .set_label_as_read(
            "dr. b",
            TargetKind::Polyp,
            polyp,
            "histology",
            Some("carcinoma"),
            Some(seen),
        )
        .unwrap();
    assert_eq!(old.as_deref(), Some("sessile serrated"));
    let audit = a.audit_history(TargetKind::Polyp, polyp).unwrap();
    assert_eq!(audit.len(), 2);
    assert_eq!(audit[0].who, "dr. b");
    assert_eq!(audit[0].old_value.as_deref(), Some("sessile serrated"));
}

fn edits_from_several_stations_at_once_each_land_once_with_their_audit_row(engine: Engine) {
    let Some(place) = Place::fresh(engine) else {
        return;
    };
    let (store, polyp) = library_with_polyp(&place);
    drop(store);
    let values = ["carcinoma", "sessile serrated", "hyperplastic"];
    let stations: Vec<_> = (0..4)
        .map(|s| {
            let location = place.location.clone();
            std::thread::spawn(move || {
                let mut store = Store::open(&location, OpenMode::Existing).unwrap();
                let mut changed = 0;
                for i in 0..8 {
                    let value = values[(s + i) % values.len()];
                    let who = format!("station {s}");
                    let old = store
                        .set_label(&who, TargetKind::Polyp, polyp, "histology", Some(value))
                        .unwrap();
                    changed += usize::from(old.as_deref() != Some(value));
                }
                changed
            })
        })
        .collect();
    let changed: usize = stations.into_iter().map(|t| t.join().unwrap()).sum();
    let store = place.open(OpenMode::Existing).unwrap();
    let mut audit = store.audit_history(TargetKind::Polyp, polyp).unwrap();
    audit.reverse();
    // One audit row per change that happened, each replacing exactly what the one before set.
    assert_eq!(audit.len(), changed);
    assert_eq!(audit[0].old_value.as_deref(), Some("hyperplastic"));
    for pair in audit.windows(2) {
        assert_eq!(pair[1].old_value, pair[0].new_value, "{audit:?}");
    }
    assert_eq!(
        store
            .current_label(TargetKind::Polyp, polyp, "histology")
            .unwrap(),
        audit.last().unwrap().new_value
    );
}

fn the_library_bench_finds_nothing_lost_duplicated_or_silently_overwritten(engine: Engine) {
    let Some(place) = Place::fresh(engine) else {
        return;
    };
    let (mut store, first) = library_with_polyp(&place);
    store
        .write(|tx| -> Result<(), StoreError> {
            for i in 2..=3 {
                upsert_polyp(
                    tx,
                    &NewPolyp {
                        examination_id: store_exam(tx)?,
                        code: format!("E1-P{i}"),
                        ..Default::default()
                    },
                )?;
            }
            Ok(())
        })
        .unwrap();
    drop(store);
    // Six clients on three polyps for a second and a half: conflicts are bound to happen.
    let report = endotwin::bench::library::run(&place.location, 6, 1.5).unwrap();
    assert!(report.edits > 6, "{report:?}");
    assert_eq!(
        (report.lost, report.duplicated, report.silent_overwrites),
        (0, 0, 0),
        "{report:?}"
    );
    // Imports from six stations at once, one image every client imports among them: each
    // image and each examination held once.
    assert!(report.imports >= 6, "{report:?}");
    assert_eq!(
        (report.imports_lost, report.imports_duplicated),
        (0, 0),
        "{report:?}"
    );
    let store = place.open(OpenMode::Existing).unwrap();
    let polyps = store.polyps().unwrap();
    assert_eq!(polyps.len(), 3);
    assert!(polyps.iter().any(|p| p.id == first));
    let audited: usize = polyps
        .iter()
        .map(|p| store.audit_history(TargetKind::Polyp, p.id).unwrap().len())
        .sum();
    assert_eq!(audited, report.edits, "every edit audited once: {report:?}");
}

fn store_exam(tx: &endotwin::store::Transaction<'_>) -> Result<i64, StoreError> {
    upsert_examination(
        tx,
        &NewExamination {
            code: "E1".into(),
            ..Default::default()
        },
    )
}

fn two_stations_importing_the_same_folder_at_once_land_it_once(engine: Engine) {
    use crate::common::import;
    let Some(place) = Place::fresh(engine) else {
        return;
    };
    drop(place.open(OpenMode::CreateIfMissing).unwrap());
    let src = tempfile::tempdir().unwrap();
    crate::common::multiview_folder(
        src.path(),
        &["A", "B", "C"],
        "polyp,histology,vienna_class,size_mm\nA,adenoma,3,8\nB,hyperplastic,1,4\nC,adenoma,4,6\n",
    );
    // The same folder imported once into a library of its own: what one import makes.
    let alone = tempfile::tempdir().unwrap();
    assert!(import(alone.path(), "multiview", src.path(), &[]).ok());
    let once = Store::open(alone.path(), OpenMode::Existing)
        .unwrap()
        .stats()
        .unwrap();
    assert_eq!((once.polyps, once.media), (3, 6));

    let stations: Vec<_> = (0..2)
        .map(|_| {
            let (library, folder) = (place.location.clone(), src.path().to_path_buf());
            std::thread::spawn(move || import(&library, "multiview", &folder, &[]))
        })
        .collect();
    for ran in stations.into_iter().map(|t| t.join().unwrap()) {
        assert!(ran.ok(), "{}", ran.text());
    }
    let store = place.open(OpenMode::Existing).unwrap();
    assert_eq!(store.stats().unwrap(), once);
    assert!(store.library_check(&|_, _| {}).unwrap().is_healthy());
}

fn a_station_sees_what_another_changed_since_it_last_looked(engine: Engine) {
    let Some(place) = Place::fresh(engine) else {
        return;
    };
    let (mut other, polyp) = library_with_polyp(&place);
    let mine = place.open(OpenMode::Existing).unwrap();
    let seen = mine.audit_high_water().unwrap();
    assert!(mine.changes_after(seen).unwrap().is_empty());
    other
        .set_label(
            "dr. b",
            TargetKind::Polyp,
            polyp,
            "histology",
            Some("carcinoma"),
        )
        .unwrap();
    other
        .set_label("dr. b", TargetKind::Polyp, polyp, "paris", Some("0-Is"))
        .unwrap();
    let changes = mine.changes_after(seen).unwrap();
    let shown: Vec<(&str, &str, Option<&str>, &str)> = changes
        .iter()
        .map(|c| {
            (
                c.entry.who.as_str(),
                c.entry.key.as_str(),
                c.entry.new_value.as_deref(),
                c.target_name.as_str(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("dr. b", "histology", Some("carcinoma"), "E1-P1"),
            ("dr. b", "paris", Some("0-Is"), "E1-P1")
        ]
    );
    let last = changes.last().unwrap().entry.id;
    assert!(mine.changes_after(last).unwrap().is_empty());
    assert_eq!(last, mine.audit_high_water().unwrap());
}

fn the_change_mark_moves_with_edits_and_new_cases_and_versions_read_back(engine: Engine) {
    let Some(place) = Place::fresh(engine) else {
        return;
    };
    let (mut other, polyp) = library_with_polyp(&place);
    let mine = place.open(OpenMode::Existing).unwrap();
    let start = mine.change_mark().unwrap();
    assert_eq!(mine.change_mark().unwrap(), start, "nothing changed");
    // A label edit moves the audit part, and its version is the one the store reads back.
    let written = other
        .change_label(
            "dr. b",
            TargetKind::Polyp,
            polyp,
            "histology",
            Some("carcinoma"),
            Some(0),
        )
        .unwrap();
    assert_eq!(written.old.as_deref(), Some("hyperplastic"));
    let after_edit = mine.change_mark().unwrap();
    assert_eq!(after_edit.audit, written.version);
    assert_eq!(
        (after_edit.polyps, after_edit.media),
        (start.polyps, start.media)
    );
    let versions = mine.label_versions(TargetKind::Polyp, &[polyp]).unwrap();
    assert_eq!(versions[&polyp]["histology"], written.version);
    assert!(!versions[&polyp].contains_key("paris"), "{versions:?}");
    assert!(
        mine.label_versions(TargetKind::Polyp, &[polyp + 1000])
            .unwrap()
            .is_empty()
    );
    // Setting the value it already has writes nothing and says the version it has.
    let again = other
        .change_label(
            "dr. b",
            TargetKind::Polyp,
            polyp,
            "histology",
            Some("carcinoma"),
            None,
        )
        .unwrap();
    assert_eq!(again.version, written.version);
    assert_eq!(mine.change_mark().unwrap(), after_edit);
    // A new case moves the polyp part.
    other
        .write(|tx| -> Result<i64, StoreError> {
            let exam = upsert_examination(
                tx,
                &NewExamination {
                    code: "E2".into(),
                    ..Default::default()
                },
            )?;
            upsert_polyp(
                tx,
                &NewPolyp {
                    examination_id: exam,
                    code: "E2-P1".into(),
                    ..Default::default()
                },
            )
        })
        .unwrap();
    let after_import = mine.change_mark().unwrap();
    assert!(after_import.polyps > after_edit.polyps);
    assert!(after_import.examinations > after_edit.examinations);
}
