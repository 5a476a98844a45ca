//! Unit tests of the store's open, migration and write paths.

use super::*;

/// W11: a full disk is said to be a full disk, not a library that is not one.
#[test]
fn a_disk_failure_is_named_as_the_disk_not_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in_memory(dir.path()).unwrap();
    let failure = |code: i32| {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), Some("x".into()))
    };
    let full = store.not_a_library(failure(rusqlite::ffi::SQLITE_FULL));
    assert!(matches!(full, StoreError::Disk { .. }), "{full}");
    assert!(full.to_string().contains("free some space"), "{full}");
    assert!(!full.to_string().contains("not an EndoTwin library"));
    let io = store.not_a_library(failure(rusqlite::ffi::SQLITE_IOERR));
    assert!(matches!(io, StoreError::Disk { .. }), "{io}");
    let corrupt = store.not_a_library(failure(rusqlite::ffi::SQLITE_NOTADB));
    assert!(
        matches!(corrupt, StoreError::NotALibrary { .. }),
        "{corrupt}"
    );
}

#[test]
fn a_library_with_an_unknown_schema_version_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path(), OpenMode::CreateIfMissing).unwrap());
    let db = dir.path().join(DB_FILE);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("PRAGMA user_version = -1")
        .unwrap();
    let before = std::fs::read(&db).unwrap();
    let err = Store::open(dir.path(), OpenMode::Existing).unwrap_err();
    assert!(err.to_string().contains("schema version -1"), "{err}");
    assert_eq!(std::fs::read(&db).unwrap(), before, "refused untouched");
}

#[test]
fn a_run_whose_process_died_is_marked_interrupted_on_open_a_live_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path(), OpenMode::CreateIfMissing).unwrap();
    // A process that has exited: its pid is free (or reused, rarely; then left alone).
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let (live, gone) = store
        .write(|tx| -> Result<(i64, i64)> {
            let live = start_run(tx, None, "r", "{}")?;
            let gone = start_run(tx, None, "r", "{}")?;
            tx.execute(
                "UPDATE training_runs SET pid = ?1 WHERE id = ?2",
                params![dead, gone],
            )?;
            Ok((live, gone))
        })
        .unwrap();
    drop(store);
    let store = Store::open(dir.path(), OpenMode::Existing).unwrap();
    let status = |id: i64| {
        store
            .runs()
            .unwrap()
            .into_iter()
            .find(|r| r.0 == id)
            .unwrap()
            .2
    };
    assert_eq!(status(live), "running");
    if !Path::new(&format!("/proc/{dead}")).exists() && Path::new("/proc/self").exists() {
        assert_eq!(status(gone), "interrupted");
    }
}

#[test]
fn utc_formatting_matches_known_dates() {
    assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
    assert_eq!(format_utc(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(format_utc(1_795_305_600), "2026-11-22T00:00:00Z");
}
