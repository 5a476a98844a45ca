//! The case store: migrations, refusal of foreign or newer files, read-only libraries,
//! transactions and the audit trail.

use endotwin::store::{
    CURRENT_VERSION, NewExamination, NewPolyp, OpenMode, Store, StoreError, TargetKind,
    VIEW_BOX_KEY, upsert_examination, upsert_polyp,
};
use std::path::Path;

fn file_bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

fn library_with_polyp(dir: &Path) -> (Store, i64) {
    let mut store = Store::open(dir, OpenMode::CreateIfMissing).unwrap();
    let polyp = store
        .write(|tx| -> Result<i64, StoreError> {
            let exam = upsert_examination(
                tx,
                &NewExamination {
                    code: "E1".into(),
                    ..Default::default()
                },
            )?;
            upsert_polyp(
                tx,
                &NewPolyp {
                    examination_id: exam,
                    code: "E1-P1".into(),
                    histology: Some("hyperplastic".into()),
                    vienna_class: Some(1),
                    size_mm: Some(4.0),
                    ..Default::default()
                },
            )
        })
        .unwrap();
    (store, polyp)
}

#[test]
fn a_new_library_is_migrated_from_an_empty_folder() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), OpenMode::CreateIfMissing).unwrap();
    assert_eq!(store.schema_version().unwrap(), CURRENT_VERSION);
    assert_eq!(store.stats().unwrap().examinations, 0);
    drop(store);
    // Reopening an existing library does not migrate again.
    let store = Store::open(dir.path(), OpenMode::Existing).unwrap();
    assert_eq!(store.schema_version().unwrap(), CURRENT_VERSION);
}

#[test]
fn opening_a_missing_library_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let err = Store::open(&dir.path().join("nope"), OpenMode::Existing).unwrap_err();
    assert!(matches!(err, StoreError::Missing { .. }), "{err}");
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("library.sqlite");
    std::fs::write(&path, b"this is a text file, not a database at all").unwrap();
    let before = file_bytes(&path);
    let err = Store::open(&path, OpenMode::CreateIfMissing).unwrap_err();
    assert!(err.to_string().contains("not an EndoTwin library"), "{err}");
    assert!(
        err.to_string().contains("library.sqlite"),
        "names the file: {err}"
    );
    assert_eq!(file_bytes(&path), before);
}

#[test]
fn a_foreign_sqlite_database_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.sqlite");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE songs(title TEXT); INSERT INTO songs VALUES ('x');")
            .unwrap();
    }
    let before = file_bytes(&path);
    let err = Store::open(&path, OpenMode::Existing).unwrap_err();
    assert!(err.to_string().contains("another application"), "{err}");
    assert_eq!(file_bytes(&path), before);
}

#[test]
fn a_library_from_a_newer_endotwin_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = library_with_polyp(dir.path());
    let path = store.db_path().to_path_buf();
    drop(store);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(&format!(
            "PRAGMA journal_mode = DELETE; PRAGMA user_version = {};",
            CURRENT_VERSION + 1
        ))
        .unwrap();
    }
    let before = file_bytes(&path);
    let err = Store::open(&path, OpenMode::Existing).unwrap_err();
    assert!(
        matches!(err, StoreError::NewerSchema { found, .. } if found == CURRENT_VERSION + 1),
        "{err}"
    );
    assert!(err.to_string().contains("update EndoTwin"), "{err}");
    assert_eq!(file_bytes(&path), before);
}

#[test]
fn a_read_only_library_opens_for_reading_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (store, polyp) = library_with_polyp(dir.path());
    let path = store.db_path().to_path_buf();
    drop(store);
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&path, perms.clone()).unwrap();
    let before = file_bytes(&path);

    let mut store = Store::open(&path, OpenMode::Existing).unwrap();
    assert!(store.is_read_only());
    assert_eq!(store.stats().unwrap().polyps, 1);
    let err = store
        .set_label(
            "dr. a",
            TargetKind::Polyp,
            polyp,
            "histology",
            Some("carcinoma"),
        )
        .unwrap_err();
    assert!(matches!(err, StoreError::ReadOnly { .. }), "{err}");
    assert!(err.to_string().contains("read-only"), "{err}");
    drop(store);
    assert_eq!(file_bytes(&path), before);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
}

#[test]
fn a_failed_transaction_leaves_no_rows_behind() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path(), OpenMode::CreateIfMissing).unwrap();
    let result = store.write(|tx| -> Result<(), StoreError> {
        upsert_examination(
            tx,
            &NewExamination {
                code: "E-rollback".into(),
                ..Default::default()
            },
        )?;
        Err(StoreError::Invalid("simulated failure halfway".into()))
    });
    assert!(result.is_err());
    assert_eq!(store.stats().unwrap().examinations, 0);
}

#[test]
fn a_label_change_writes_one_audit_row_with_old_and_new_values() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, polyp) = library_with_polyp(dir.path());
    let old = store
        .set_label(
            "dr. a",
            TargetKind::Polyp,
            polyp,
            "histology",
            Some("sessile serrated"),
        )
        .unwrap();
    assert_eq!(old.as_deref(), Some("hyperplastic"));
    // The corrected value is what the browser and filters now see.
    assert_eq!(
        store.polyp(polyp).unwrap().unwrap().histology.as_deref(),
        Some("sessile serrated")
    );
    // Setting the same value again is not a change.
    store
        .set_label(
            "dr. a",
            TargetKind::Polyp,
            polyp,
            "histology",
            Some("sessile serrated"),
        )
        .unwrap();
    store
        .set_label(
            "dr. b",
            TargetKind::Polyp,
            polyp,
            "histology",
            Some("hyperplastic"),
        )
        .unwrap();
    let audit = store.audit_history(TargetKind::Polyp, polyp).unwrap();
    assert_eq!(audit.len(), 2);
    assert_eq!(audit[0].who, "dr. b");
    assert_eq!(audit[0].old_value.as_deref(), Some("sessile serrated"));
    assert_eq!(audit[0].new_value.as_deref(), Some("hyperplastic"));
    assert_eq!(audit[1].who, "dr. a");
    assert_eq!(audit[1].old_value.as_deref(), Some("hyperplastic"));
}

#[test]
fn a_label_change_needs_a_name() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, polyp) = library_with_polyp(dir.path());
    let err = store
        .set_label(
            "  ",
            TargetKind::Polyp,
            polyp,
            "histology",
            Some("carcinoma"),
        )
        .unwrap_err();
    assert!(err.to_string().contains("who"), "{err}");
    assert!(
        store
            .audit_history(TargetKind::Polyp, polyp)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn the_audit_log_cannot_be_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, polyp) = library_with_polyp(dir.path());
    store
        .set_label(
            "dr. a",
            TargetKind::Polyp,
            polyp,
            "histology",
            Some("carcinoma"),
        )
        .unwrap();
    let path = store.db_path().to_path_buf();
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    assert!(
        conn.execute("UPDATE label_audit SET who = 'nobody'", [])
            .is_err()
    );
    assert!(conn.execute("DELETE FROM label_audit", []).is_err());
}

#[test]
fn a_size_paris_class_or_location_label_corrects_the_polyp_itself_and_a_bad_size_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, polyp) = library_with_polyp(dir.path());
    // The imported value is the label's starting point.
    let size = store
        .current_label(TargetKind::Polyp, polyp, "size_mm")
        .unwrap();
    assert_eq!(size.as_deref(), Some("4.0"));
    let old = store
        .set_label("dr. a", TargetKind::Polyp, polyp, "size_mm", Some("12"))
        .unwrap();
    assert_eq!(old.as_deref(), Some("4.0"));
    store
        .set_label("dr. a", TargetKind::Polyp, polyp, "paris", Some("0-Is"))
        .unwrap();
    let row = store.polyp(polyp).unwrap().unwrap();
    assert_eq!(
        (row.size_mm, row.paris.as_deref()),
        (Some(12.0), Some("0-Is"))
    );
    let err = store
        .set_label("dr. a", TargetKind::Polyp, polyp, "size_mm", Some("twelve"))
        .unwrap_err();
    assert!(err.to_string().contains("millimetres"), "{err}");
    assert_eq!(store.polyp(polyp).unwrap().unwrap().size_mm, Some(12.0));
    assert_eq!(
        store.audit_history(TargetKind::Polyp, polyp).unwrap().len(),
        2
    );
}

#[test]
fn a_polyp_box_that_is_not_a_box_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, _) = library_with_polyp(dir.path());
    let media = 7; // labels name their target; a view box is checked before anything is written
    for bad in ["10,10,-5,3", "10,10,5", "a,b,c,d", "1,2,3,4,5", "NaN,0,4,4"] {
        let err = store
            .set_label("dr. a", TargetKind::Media, media, VIEW_BOX_KEY, Some(bad))
            .unwrap_err();
        assert!(err.to_string().contains("is not x,y,w,h"), "{bad}: {err}");
    }
    assert_eq!(store.view_box(media).unwrap(), None);
    assert!(
        store
            .audit_history(TargetKind::Media, media)
            .unwrap()
            .is_empty()
    );
    store
        .set_label(
            "dr. a",
            TargetKind::Media,
            media,
            VIEW_BOX_KEY,
            Some("12,8,30,20"),
        )
        .unwrap();
    assert_eq!(
        store.view_box(media).unwrap(),
        Some([12.0, 8.0, 30.0, 20.0])
    );
}
