//! The store suite on both engines (issue #46): each test below is written once, as a function
//! of the engine, and runs on an SQLite library and on a PostgreSQL library (a fresh schema
//! of the server named by $ENDOTWIN_TEST_POSTGRES; `.ci/run` starts one). Without that
//! variable the PostgreSQL cases skip with one line, except under `.ci/run`
//! (ENDOTWIN_REQUIRE_POSTGRES=1), where they fail.

use endotwin::store::{
    CURRENT_VERSION, MediaKind, NewExamination, NewMedia, NewPolyp, OpenMode, Store, StoreError,
    TargetKind, insert_media, upsert_examination, upsert_polyp,
};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

/// A fresh place for a library on one engine: a temporary folder, or a new schema of the test
/// server's database (dropped after).
pub struct Place {
    pub engine: Engine,
    /// What `--library` takes: the folder, or the URL.
    pub location: PathBuf,
    _dir: Option<tempfile::TempDir>,
    schema: Option<(String, String)>,
}

/// The test server's URL, or `None` (with a one-line message) when there is none.
pub fn test_server() -> Option<String> {
    match std::env::var("ENDOTWIN_TEST_POSTGRES") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("ENDOTWIN_REQUIRE_POSTGRES").is_some() => {
            panic!("ENDOTWIN_REQUIRE_POSTGRES is set but ENDOTWIN_TEST_POSTGRES names no server")
        }
        _ => {
            eprintln!(
                "skipped on PostgreSQL: no ENDOTWIN_TEST_POSTGRES (bash .ci/run starts a server)"
            );
            None
        }
    }
}

static NEXT_SCHEMA: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Place {
    /// `None` only for PostgreSQL without a test server (skipped).
    pub fn fresh(engine: Engine) -> Option<Place> {
        match engine {
            Engine::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                Some(Place {
                    engine,
                    location: dir.path().join("lib"),
                    _dir: Some(dir),
                    schema: None,
                })
            }
            Engine::Postgres => {
                let server = test_server()?;
                let n = NEXT_SCHEMA.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let schema = format!("t{}_{n}", std::process::id());
                let mut admin = ::postgres::Client::connect(&server, ::postgres::NoTls).unwrap();
                admin
                    .batch_execute(&format!("CREATE SCHEMA {schema}"))
                    .unwrap();
                let sep = if server.contains('?') { '&' } else { '?' };
                let url = format!("{server}{sep}options=-c%20search_path%3D{schema}");
                Some(Place {
                    engine,
                    location: PathBuf::from(url),
                    _dir: None,
                    schema: Some((server, schema)),
                })
            }
        }
    }

    pub fn open(&self, mode: OpenMode) -> Result<Store, StoreError> {
        Store::open(&self.location, mode)
    }

    /// Runs raw SQL on the library's database behind the store's back (a tampering user, an
    /// older or newer EndoTwin).
    pub fn raw_sql(&self, sql: &str) -> Result<(), String> {
        match self.engine {
            Engine::Sqlite => rusqlite::Connection::open(self.location.join("library.sqlite"))
                .and_then(|c| c.execute_batch(sql))
                .map_err(|e| e.to_string()),
            Engine::Postgres => {
                let url = self.location.to_str().unwrap();
                ::postgres::Client::connect(url, ::postgres::NoTls)
                    .and_then(|mut c| c.batch_execute(sql))
                    .map_err(|e| e.to_string())
            }
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some((server, schema)) = &self.schema
            && let Ok(mut admin) = ::postgres::Client::connect(server, ::postgres::NoTls)
        {
            let _ = admin.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"));
        }
    }
}

/// Each named test function (taking the [`Engine`]) as one test per engine.
macro_rules! on_both_engines {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $( #[test] fn $name() { super::$name(super::Engine::Sqlite) } )*
        }
        mod postgres {
            $( #[test] fn $name() { super::$name(super::Engine::Postgres) } )*
        }
    };
}

pub(crate) use on_both_engines;

on_both_engines!(
    a_new_library_is_made_at_the_current_version_and_reopens,
    an_empty_place_opened_as_existing_is_refused,
    a_database_of_another_application_is_refused_untouched,
    a_library_from_a_newer_endotwin_is_refused_untouched,
    a_failed_write_leaves_no_rows_behind,
    a_label_change_writes_one_audit_row_with_old_and_new_values,
    a_label_change_needs_a_reviewer_and_a_value_of_the_vocabulary,
    the_audit_log_cannot_be_rewritten,
    a_size_label_reads_and_corrects_the_polyp_itself,
    media_come_back_as_imported_and_changed_bytes_are_refused_by_name,
);

pub fn library_with_polyp(place: &Place) -> (Store, i64) {
    let mut store = place.open(OpenMode::CreateIfMissing).unwrap();
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
                    attributes: vec![("surface".into(), "smooth".into())],
                    ..Default::default()
                },
            )
        })
        .unwrap();
    (store, polyp)
}

fn a_new_library_is_made_at_the_current_version_and_reopens(engine: Engine) {
    let Some(place) = Place::fresh(engine) else {
        return;
    };
    let store = place.open(OpenMode::CreateIfMissing).unwrap();
    assert_eq!(store.schema_version().unwrap(), CURRENT_VERSION);
    assert_eq!(store.stats().unwrap().examinations, 0);
    drop(store);
    let (store, polyp) = library_with_polyp(&place);
    drop(store);
    let store = place.open(OpenMode::Existing).unwrap();
    assert_eq!(store.schema_version().unwrap(), CURRENT_VERSION);
    let row = store.polyp(polyp).unwrap().unwrap();
    assert_eq!(row.code, "E1-P1");
    assert_eq!(row.histology.as_deref(), Some("hyperplastic"));
    assert_eq!(row.size_mm, Some(4.0));
    assert_eq!(store.polyps().unwrap().len(), 1);
    assert_eq!(store.case_tree(&Default::default()).unwrap().len(), 1);
}

fn an_empty_place_opened_as_existing_is_refused(engine: Engine) {
    let Some(place) = Place::fresh(engine) else {
        return;
    };
    let err = place.open(OpenMode::Existing).unwrap_err();
    match engine {
        Engine::Sqlite => assert!(matches!(err, StoreError::Missing { .. }), "{err}"),
        Engine::Postgres => assert!(err.to_string().contains("empty database"), "{err}"),
    }
}

fn a_database_of_another_application_is_refused_untouched(engine: Engine) {
    let Some(place) = Place::fresh(engine) else {
        return;
    };
    if engine == Engine::Sqlite {
        std::fs::create_dir_all(&place.location).unwrap();
    }
    place
        .raw_sql("CREATE TABLE songs(title TEXT); INSERT INTO songs VALUES ('x');")
        .unwrap();
    let err = place.open(OpenMode::CreateIfMissing).unwrap_err();
    assert!(err.to_string().contains("another application"), "{err}");
    // Untouched: nothing was added beside the songs.
    assert!(place.raw_sql("CREATE TABLE meta(x TEXT)").is_ok());
}

fn a_library_from_a_newer_endotwin_is_refused_untouched(engine: Engine) {
    let Some(place) = Place::fresh(engine) else {
        return;
    };
    drop(library_with_polyp(&place));
    let newer = CURRENT_VERSION + 1;
    match engine {
        Engine::Sqlite => place.raw_sql(&format!("PRAGMA user_version = {newer}")),
        Engine::Postgres => place.raw_sql(&format!(
            "UPDATE meta SET value = '{newer}' WHERE key = 'schema_version'"
        )),
    }
    .unwrap();
    let err = place.open(OpenMode::Existing).unwrap_err();
    assert!(
        matches!(err, StoreError::NewerSchema { found, .. } if found == newer),
        "{err}"
    );
    assert!(err.to_string().contains("update EndoTwin"), "{err}");
}

fn a_failed_write_leaves_no_rows_behind(engine: Engine) {
    let Some(place) = Place::fresh(engine) else {
        return;
    };
    let mut store = place.open(OpenMode::CreateIfMissing).unwrap();
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
    // The store writes again after a rolled-back write.
    drop(library_with_polyp(&place));
    assert_eq!(store.stats().unwrap().examinations, 1);
}

fn a_label_change_writes_one_audit_row_with_old_and_new_values(engine: Engine) {
    let Some(place) = Place::fresh(engine) else {
        return;
    };
    let (mut store, polyp) = library_with_polyp(&place);
    let set = |store: &mut Store, who: &str, value: &str| {
        store
            .set_label(who, TargetKind::Polyp, polyp, "histology", Some(value))
            .unwrap()
    };
    assert_eq!(
        set(&mut store, "dr. a", "sessile serrated").as_deref(),
        Some("hyperplastic")
    );
    assert_eq!(
        store.polyp(polyp).unwrap().unwrap().histology.as_deref(),
        Some("sessile serrated")
    );
    set(&mut store, "dr. a", "sessile serrated");
    set(&mut store, "dr. b", "hyperplastic");
    let audit = store.audit_history(TargetKind::Polyp, polyp).unwrap();
    assert_eq!(audit.len(), 2, "{audit:?}");
    assert_eq!(audit[0].who, "dr. b");
    assert_eq!(audit[0].old_value.as_deref(), Some("sessile serrated"));
    assert_eq!(audit[0].new_value.as_deref(), Some("hyperplastic"));
    assert_eq!(audit[1].who, "dr. a");
    assert_eq!(audit[1].old_value.as_deref(), Some("hyperplastic"));
    let log = store.audit_log(&Default::default()).unwrap();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].target_name, "E1-P1");
}

fn a_label_change_needs_a_reviewer_and_a_value_of_the_vocabulary(engine: Engine) {
    let Some(place) = Place::fresh(engine) else {
        return;
    };
    let (mut store, polyp) = library_with_polyp(&place);
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
    let err = store
        .set_label("dr. a", TargetKind::Polyp, polyp, "vienna_class", Some("9"))
        .unwrap_err();
    assert!(err.to_string().contains("Vienna"), "{err}");
    assert!(
        store
            .audit_history(TargetKind::Polyp, polyp)
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .current_label(TargetKind::Polyp, polyp, "vienna_class")
            .unwrap()
            .as_deref(),
        Some("1")
    );
}

fn the_audit_log_cannot_be_rewritten(engine: Engine) {
    let Some(place) = Place::fresh(engine) else {
        return;
    };
    let (mut store, polyp) = library_with_polyp(&place);
    store
        .set_label(
            "dr. a",
            TargetKind::Polyp,
            polyp,
            "histology",
            Some("carcinoma"),
        )
        .unwrap();
    drop(store);
    assert!(
        place
            .raw_sql("UPDATE label_audit SET who = 'nobody'")
            .is_err()
    );
    assert!(place.raw_sql("DELETE FROM label_audit").is_err());
    let store = place.open(OpenMode::Existing).unwrap();
    let audit = store.audit_history(TargetKind::Polyp, polyp).unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].who, "dr. a");
}

fn a_size_label_reads_and_corrects_the_polyp_itself(engine: Engine) {
    let Some(place) = Place::fresh(engine) else {
        return;
    };
    let (mut store, polyp) = library_with_polyp(&place);
    let size = store
        .current_label(TargetKind::Polyp, polyp, "size_mm")
        .unwrap();
    assert_eq!(size.as_deref(), Some("4.0"));
    assert_eq!(
        store
            .current_label(TargetKind::Polyp, polyp, "surface")
            .unwrap()
            .as_deref(),
        Some("smooth")
    );
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
}

fn media_come_back_as_imported_and_changed_bytes_are_refused_by_name(engine: Engine) {
    let Some(place) = Place::fresh(engine) else {
        return;
    };
    let mut store = place.open(OpenMode::CreateIfMissing).unwrap();
    let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
    let media = store
        .write_media(|tx, files| -> Result<i64, StoreError> {
            let (hash, rel) = files.put(&bytes, "png")?;
            let new = NewMedia {
                kind: MediaKind::Frame,
                source_path: "a.png".into(),
                byte_len: bytes.len() as u64,
                width: 10,
                height: 10,
                examination_id: None,
                thumbnail: Some(vec![1, 2, 3]),
                captured_at: None,
            };
            Ok(insert_media(tx, &hash, &rel, &new)?.0)
        })
        .unwrap();
    let row = store.media(media).unwrap().unwrap();
    assert_eq!(store.read_media(&row).unwrap(), bytes);
    assert_eq!(std::fs::read(store.media_path(&row)).unwrap(), bytes);
    assert_eq!(store.thumbnail(media).unwrap(), Some(vec![1, 2, 3]));
    assert!(store.library_check(&|_, _| {}).unwrap().is_healthy());
    // The bytes change behind the store's back (same length, one byte differs).
    match engine {
        Engine::Sqlite => {
            let mut changed = bytes.clone();
            changed[10] ^= 1;
            std::fs::write(store.media_path(&row), changed).unwrap();
        }
        Engine::Postgres => place
            .raw_sql("UPDATE media_files SET bytes = overlay(bytes placing '\\x00'::bytea from 11)")
            .unwrap(),
    }
    let err = store.read_media(&row).unwrap_err();
    assert!(
        matches!(err, StoreError::MediaChanged { id, .. } if id == media),
        "{err}"
    );
    let check = store.library_check(&|_, _| {}).unwrap();
    assert_eq!(check.changed.len(), 1, "{check:?}");
}

/// The folder of the test server's TLS files (`ca.crt`, the CA its certificate chains to,
/// and `other-ca.crt`, one it does not): `.ci/postgres` makes them.
fn test_server_tls() -> Option<PathBuf> {
    match std::env::var_os("ENDOTWIN_TEST_POSTGRES_CA") {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
        _ if std::env::var_os("ENDOTWIN_REQUIRE_POSTGRES").is_some() => {
            panic!("ENDOTWIN_REQUIRE_POSTGRES is set but ENDOTWIN_TEST_POSTGRES_CA names no folder")
        }
        _ => {
            eprintln!("skipped TLS: no ENDOTWIN_TEST_POSTGRES_CA (bash .ci/run sets it)");
            None
        }
    }
}

/// #46: a department's server over TLS. The default (`prefer`) encrypts; `verify-full` with
/// the server's CA connects; with another CA, or without one (the system's roots do not know
/// the test CA), the server is refused by name and nothing is opened.
#[test]
fn a_server_library_is_reached_over_tls_and_one_the_url_does_not_trust_is_refused() {
    let (Some(place), Some(tls)) = (Place::fresh(Engine::Postgres), test_server_tls()) else {
        return;
    };
    let url = place.location.to_str().unwrap().to_string();
    let store = place.open(OpenMode::CreateIfMissing).unwrap();
    let version = store.server_tls().unwrap();
    assert!(
        version.as_deref().is_some_and(|v| v.starts_with("TLS")),
        "{version:?}"
    );
    drop(store);
    let with = |query: &str| PathBuf::from(format!("{url}&{query}"));
    let ca = tls.join("ca.crt");
    let store = Store::open(
        &with(&format!("sslmode=verify-full&sslrootcert={}", ca.display())),
        OpenMode::Existing,
    )
    .unwrap();
    assert!(store.server_tls().unwrap().is_some());
    drop(store);
    for (query, says) in [
        (
            format!(
                "sslmode=verify-full&sslrootcert={}",
                tls.join("other-ca.crt").display()
            ),
            "certificate",
        ),
        (
            format!(
                "sslmode=verify-ca&sslrootcert={}",
                tls.join("other-ca.crt").display()
            ),
            "certificate",
        ),
        ("sslmode=verify-full".to_string(), "certificate"),
        ("sslmode=verify".to_string(), "sslmode 'verify' is none of"),
        (
            format!(
                "sslmode=require&sslrootcert={}",
                tls.join("nosuch.crt").display()
            ),
            "nosuch.crt",
        ),
    ] {
        let err = Store::open(&with(&query), OpenMode::Existing).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, StoreError::Unreachable { .. }) && text.contains(says),
            "{query}: {text}"
        );
    }
    a_station_signs_in_by_certificate(&url, &tls);
}

/// #46: a server that lets a station in by its certificate alone (pg_hba's `cert` method;
/// `.ci/postgres` makes the role `endotwin_cert` and its client.crt/client.key): the library
/// opens with `sslcert` and `sslkey`; without them, or with a key others can read, it is
/// refused by name.
fn a_station_signs_in_by_certificate(url: &str, tls: &std::path::Path) {
    if !tls.join("client.crt").is_file() {
        eprintln!("skipped client certificates: the test server's TLS folder has no client.crt");
        return;
    }
    let as_cert = url.replacen("://endotwin@", "://endotwin_cert@", 1);
    assert_ne!(
        as_cert, url,
        "the test server's URL names the role endotwin"
    );
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("client.key");
    std::fs::copy(tls.join("client.key"), &key).unwrap();
    let open_key = dir.path().join("open.key");
    std::fs::copy(tls.join("client.key"), &open_key).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(&open_key, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let ca = tls.join("ca.crt");
    let cert = tls.join("client.crt");
    let with = |query: String| PathBuf::from(format!("{as_cert}&{query}"));
    let store = Store::open(
        &with(format!(
            "sslmode=verify-full&sslrootcert={}&sslcert={}&sslkey={}",
            ca.display(),
            cert.display(),
            key.display()
        )),
        OpenMode::Existing,
    )
    .unwrap();
    assert!(store.server_tls().unwrap().is_some());
    drop(store);
    for (query, says) in [
        (
            format!("sslmode=verify-full&sslrootcert={}", ca.display()),
            "certificate",
        ),
        (
            format!(
                "sslrootcert={}&sslcert={}&sslkey={}",
                ca.display(),
                cert.display(),
                open_key.display()
            ),
            "chmod 600",
        ),
        (format!("sslcert={}", cert.display()), "go together"),
    ] {
        let err = Store::open(&with(query.clone()), OpenMode::Existing).unwrap_err();
        assert!(err.to_string().contains(says), "{query}: {err}");
    }
    // A station set up for psql: the CA, certificate and key in ~/.postgresql, the URL
    // naming none of them, as libpq reads them.
    let home = tempfile::tempdir().unwrap();
    let folder = home.path().join(".postgresql");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::copy(&ca, folder.join("root.crt")).unwrap();
    std::fs::copy(&cert, folder.join("postgresql.crt")).unwrap();
    std::fs::copy(&key, folder.join("postgresql.key")).unwrap();
    let info = |home: &std::path::Path| {
        let mut c = crate::common::endotwin(&with("sslmode=verify-full".into()));
        c.arg("info").env("HOME", home);
        for v in ["PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY"] {
            c.env_remove(v);
        }
        crate::common::run(c)
    };
    let r = info(home.path());
    assert!(r.ok() && r.says("connected over TLS"), "{}", r.text());
    let bare = tempfile::tempdir().unwrap();
    let r = info(bare.path());
    assert!(!r.ok() && r.says("certificate"), "{}", r.text());
}
